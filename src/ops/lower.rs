//! Lowering: what every description's `lower` shares to turn a `.tflite` operator into an
//! [`Op`] with its operands.
//!
//! Everything an operator's kernel needs is resolved once, when a model is prepared: shapes
//! are checked against what the kernel computes, quantization is turned into fixed-point
//! multipliers, and the operands are listed in the order the [`Op`] documents. Parameters that
//! only describe shapes (a RESHAPE's new shape, a MEAN's axes) are read from their constant
//! tensors here and never reach the device.

use npu_kernels::int8::{self as ki, Nhwc, Quant, Window2d};
use npu_kernels::KernelError;

use super::{Op, MAX_INPUTS};
use crate::model::{
    Activation, BuiltinOp, BuiltinOptions, DataType, ModelError, OperatorInfo, Padding, SubGraph,
    TensorInfo,
};

/// One operand of a lowered operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A tensor of the model (activation or constant).
    Tensor(u16),
    /// Per-channel multipliers computed at prepare time from the scales of the input, of
    /// each channel of `filter`, and of the output.
    Multipliers {
        /// Input scale.
        input_scale: f32,
        /// The filter tensor whose per-channel scales are used.
        filter: u16,
        /// Output scale.
        output_scale: f32,
        /// Output channels (multipliers to produce).
        channels: u32,
    },
    /// Constant tensors laid end to end as one constant, made at prepare time (an LSTM's
    /// four gates' weights: one operand rather than four, within [`MAX_INPUTS`]).
    Joined([u16; 4]),
}

/// What a `.tflite` operator becomes.
#[derive(Clone, Debug, PartialEq)]
// Lowered once per operator at prepare time and moved into a step at once: never stored.
#[allow(clippy::large_enum_variant)]
pub enum Lowered {
    /// A compute job.
    Compute {
        /// The operation.
        op: Op,
        /// Its operands, in the order the op documents.
        operands: heapless::Vec<Operand, MAX_INPUTS>,
    },
    /// The output is the input's bytes under another shape: it shares the input's memory.
    Alias {
        /// The input tensor.
        input: u16,
    },
}

/// Why an operator could not be lowered. The graph adds which operator it was.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LowerError {
    /// The operator, or one of its parameters, is not supported: what.
    Unsupported(&'static str),
    /// A kernel refused the operator's shapes or quantization.
    Kernel(KernelError),
    /// A tensor's shape disagrees with what the operator computes.
    ShapeMismatch {
        /// The tensor.
        tensor: u16,
        /// Elements the operator produces or needs.
        expected: u32,
        /// Elements the tensor has.
        actual: u32,
    },
    /// The model's bytes could not be read.
    Model(ModelError),
}

impl From<ModelError> for LowerError {
    fn from(e: ModelError) -> Self {
        LowerError::Model(e)
    }
}

impl From<KernelError> for LowerError {
    fn from(e: KernelError) -> Self {
        LowerError::Kernel(e)
    }
}

impl core::fmt::Display for LowerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LowerError::Unsupported(what) => write!(f, "unsupported {what}"),
            LowerError::Kernel(e) => write!(f, "its parameters are refused: {e}"),
            LowerError::ShapeMismatch {
                tensor,
                expected,
                actual,
            } => write!(
                f,
                "tensor {tensor} has {actual} elements, the operator needs {expected}"
            ),
            LowerError::Model(e) => e.fmt(f),
        }
    }
}

impl core::error::Error for LowerError {}

/// One operator of a model being lowered, with the subgraph its tensors are in: what a
/// description's `lower` reads.
///
/// An operator with several outputs (SPLIT, UNPACK) is lowered once per output, each time
/// into the op computing that output alone ([`nth_output`](Self::nth_output)); the others
/// have one output ([`output`](Self::output)).
pub struct LowerCtx<'s, 'i> {
    sub: &'s SubGraph<'s>,
    info: &'i OperatorInfo<'i>,
    output: usize,
}

impl<'s, 'i> LowerCtx<'s, 'i> {
    /// Operator `info` of `sub`.
    pub fn new(sub: &'s SubGraph<'s>, info: &'i OperatorInfo<'i>) -> Self {
        Self::for_output(sub, info, 0)
    }

    /// Operator `info` of `sub`, lowered into the op computing its output `output`.
    pub fn for_output(sub: &'s SubGraph<'s>, info: &'i OperatorInfo<'i>, output: usize) -> Self {
        LowerCtx { sub, info, output }
    }

    /// The TFLite operator.
    pub fn builtin(&self) -> BuiltinOp {
        self.info.builtin
    }

    /// Its builtin options.
    pub fn options(&self) -> &BuiltinOptions {
        &self.info.options
    }

    /// How many inputs it lists.
    pub fn input_count(&self) -> usize {
        self.info.inputs.len()
    }

    /// Its input `i`, which must be present.
    pub fn input(&self, i: usize) -> Result<TensorInfo<'s>, LowerError> {
        let index = self
            .info
            .input(i)
            .ok_or(LowerError::Unsupported("missing required input"))?;
        Ok(self.sub.tensor(index)?)
    }

    /// Its input `i`, if present.
    pub fn optional_input(&self, i: usize) -> Result<Option<TensorInfo<'s>>, LowerError> {
        match self.info.input(i) {
            Some(index) => Ok(Some(self.sub.tensor(index)?)),
            None => Ok(None),
        }
    }

    /// Its one output, for an operator that has one.
    pub fn output(&self) -> Result<TensorInfo<'s>, LowerError> {
        if self.info.outputs.len() != 1 {
            return Err(LowerError::Unsupported("output count other than 1"));
        }
        self.nth_output()
    }

    /// How many outputs it lists.
    pub fn output_count(&self) -> usize {
        self.info.outputs.len()
    }

    /// Which of its outputs this lowering computes.
    pub fn output_index(&self) -> usize {
        self.output
    }

    /// The output this lowering computes ([`output_index`](Self::output_index)), for an
    /// operator with several.
    pub fn nth_output(&self) -> Result<TensorInfo<'s>, LowerError> {
        let index = self
            .info
            .output(self.output)
            .ok_or(LowerError::Unsupported("omitted output"))?;
        Ok(self.sub.tensor(index)?)
    }
}

/// The refusal of an int16 (16x8) operator by a build without the `int16` feature.
pub(super) const INT16_LEFT_OUT: &str =
    "int16 operator left out of this build (the cargo feature `int16` builds them)";

/// `lower_i16()`, the lowering of an operator's int16 (16x8) form, in a build with the `int16`
/// feature; in one without it, the refusal naming the feature. There `lower_i16` is never
/// called, so its code stays out of the flash as the int16 kernels do (its op would be refused
/// after it anyway, as `Op::is_built` says).
pub(super) fn int16(
    lower_i16: impl FnOnce() -> Result<Lowered, LowerError>,
) -> Result<Lowered, LowerError> {
    if cfg!(feature = "int16") {
        lower_i16()
    } else {
        Err(LowerError::Unsupported(INT16_LEFT_OUT))
    }
}

/// `Unsupported(what)`: the common refusal.
pub(super) fn unsupported(what: &'static str) -> LowerError {
    LowerError::Unsupported(what)
}

/// That `t` has `expected` elements.
pub(super) fn check_elements(t: &TensorInfo<'_>, expected: usize) -> Result<(), LowerError> {
    if t.shape.num_elements() as usize == expected {
        Ok(())
    } else {
        Err(LowerError::ShapeMismatch {
            tensor: t.index,
            expected: u32::try_from(expected).unwrap_or(u32::MAX),
            actual: t.shape.num_elements(),
        })
    }
}

/// Per-tensor int8 quantization of an activation tensor.
pub(super) fn quant(t: &TensorInfo<'_>) -> Result<Quant, LowerError> {
    quant_of(t, DataType::Int8)
}

/// Per-tensor quantization of an activation tensor of type `dtype` (int8 or int16).
pub(super) fn quant_of(t: &TensorInfo<'_>, dtype: DataType) -> Result<Quant, LowerError> {
    let (wrong_type, missing) = match dtype {
        DataType::Int16 => (
            "tensor type other than int16",
            "int16 tensor without quantization",
        ),
        DataType::Int32 => (
            "tensor type other than int32",
            "int32 tensor without quantization",
        ),
        _ => (
            "tensor type other than int8",
            "int8 tensor without quantization",
        ),
    };
    if t.dtype != dtype {
        return Err(unsupported(wrong_type));
    }
    affine(t, missing)
}

/// Per-tensor int16 quantization of an activation tensor (the 16x8 scheme's).
pub(super) fn quant_i16(t: &TensorInfo<'_>) -> Result<Quant, LowerError> {
    quant_of(t, DataType::Int16)
}

/// The one scale and zero point of a quantized activation tensor, whatever its type (`missing`:
/// the refusal when it has none).
fn affine(t: &TensorInfo<'_>, missing: &'static str) -> Result<Quant, LowerError> {
    let q = t.quantization.as_ref().ok_or(unsupported(missing))?;
    if q.len() != 1 {
        return Err(unsupported("per-channel quantization of an activation"));
    }
    let scale = q.scale(0).ok_or(unsupported("missing scale"))?;
    let zero_point = q
        .zero_point(0)
        .and_then(|z| i32::try_from(z).ok())
        .ok_or(unsupported("zero point out of range"))?;
    Ok(Quant { scale, zero_point })
}

/// A tensor's first scale and zero point (TFLM's `params`), for a tensor of any integer type
/// (an int16 state, an int32 bias); a missing zero point is 0.
pub(super) fn first_quant(t: &TensorInfo<'_>) -> Result<Quant, LowerError> {
    let q = t
        .quantization
        .as_ref()
        .ok_or(unsupported("tensor without quantization"))?;
    let scale = q.scale(0).ok_or(unsupported("missing scale"))?;
    let zero_point = q
        .zero_point(0)
        .and_then(|z| i32::try_from(z).ok())
        .unwrap_or(0);
    Ok(Quant { scale, zero_point })
}

/// The scales of a constant int8 filter: one, or one per output channel. As TFLM, the count
/// decides, not the file's quantized_dimension (see `Quantization::quantized_dimension`).
pub(super) fn filter_scale_count(t: &TensorInfo<'_>, channels: u32) -> Result<(), LowerError> {
    if t.dtype != DataType::Int8 {
        return Err(unsupported("filter type other than int8"));
    }
    if t.data.is_none() {
        return Err(unsupported("non-constant filter"));
    }
    let q = t
        .quantization
        .as_ref()
        .ok_or(unsupported("filter without quantization"))?;
    if q.len() == 1 || q.len() == channels as usize {
        Ok(())
    } else {
        Err(unsupported(
            "filter scales neither per-tensor nor per output channel",
        ))
    }
}

/// Appends the optional int32 bias (input 2) of `channels` elements to `list`, checked.
pub(super) fn push_bias(
    list: &mut heapless::Vec<Operand, MAX_INPUTS>,
    ctx: &LowerCtx<'_, '_>,
    channels: u32,
) -> Result<(), LowerError> {
    let int32 = [DataType::Int32];
    push_bias_of(list, ctx, channels, &int32, "bias type other than int32").map(|_| ())
}

/// Appends the optional bias (input 2) of `channels` elements of one of `types` to `list`,
/// checked (`refusal` names the other types); returns its type, `None` without a bias.
pub(super) fn push_bias_of(
    list: &mut heapless::Vec<Operand, MAX_INPUTS>,
    ctx: &LowerCtx<'_, '_>,
    channels: u32,
    types: &[DataType],
    refusal: &'static str,
) -> Result<Option<DataType>, LowerError> {
    let Some(t) = ctx.optional_input(2)? else {
        return Ok(None);
    };
    if !types.contains(&t.dtype) {
        return Err(unsupported(refusal));
    }
    check_elements(&t, channels as usize)?;
    // Lists built here have at most three operands before the bias.
    let _ = list.push(Operand::Tensor(t.index));
    Ok(Some(t.dtype))
}

/// A convolution window from a TFLite operator's options.
pub(super) fn window(
    (filter_height, filter_width): (u32, u32),
    (stride_h, stride_w): (i32, i32),
    (dilation_h, dilation_w): (i32, i32),
    p: Padding,
) -> Result<Window2d, LowerError> {
    Ok(Window2d {
        filter_height,
        filter_width,
        stride_height: positive(stride_h, "stride")?,
        stride_width: positive(stride_w, "stride")?,
        dilation_height: positive(dilation_h, "dilation")?,
        dilation_width: positive(dilation_w, "dilation")?,
        padding: padding(p),
    })
}

/// A fused activation the kernels apply.
pub(super) fn activation(a: Activation) -> Result<ki::Activation, LowerError> {
    Ok(match a {
        Activation::None => ki::Activation::None,
        Activation::Relu => ki::Activation::Relu,
        Activation::Relu6 => ki::Activation::Relu6,
        Activation::ReluN1To1 => ki::Activation::ReluN1To1,
        _ => return Err(unsupported("fused activation")),
    })
}

/// A TFLite padding as the kernels' one.
pub(super) fn padding(p: Padding) -> ki::Padding {
    match p {
        Padding::Same => ki::Padding::Same,
        Padding::Valid => ki::Padding::Valid,
    }
}

/// A rank-4 tensor's NHWC shape.
pub(super) fn nhwc(t: &TensorInfo<'_>) -> Result<Nhwc, LowerError> {
    match *t.shape.dims() {
        [batches, height, width, channels] => Ok(Nhwc {
            batches,
            height,
            width,
            channels,
        }),
        _ => Err(unsupported("tensor rank other than 4")),
    }
}

/// A parameter that must be above 0.
pub(super) fn positive(v: i32, what: &'static str) -> Result<u32, LowerError> {
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(unsupported(what))
}

/// An operand list (every list built by a description has at most four entries).
pub(super) fn operands(list: &[Operand]) -> heapless::Vec<Operand, MAX_INPUTS> {
    heapless::Vec::from_slice(list).unwrap_or_default()
}

/// The multipliers operand of a per-channel operator.
pub(super) fn multipliers(xq: Quant, filter: &TensorInfo<'_>, yq: Quant, channels: u32) -> Operand {
    Operand::Multipliers {
        input_scale: xq.scale,
        filter: filter.index,
        output_scale: yq.scale,
        channels,
    }
}

/// Reads a small constant int32 tensor (axes, permutations) into `out`; returns the count.
pub(super) fn const_i32s(t: &TensorInfo<'_>, out: &mut [i32]) -> Result<usize, LowerError> {
    let data = t
        .data
        .filter(|_| t.dtype == DataType::Int32)
        .ok_or(unsupported("non-constant or non-int32 parameter tensor"))?;
    let n = data.len() / 4;
    if n > out.len() {
        return Err(unsupported("parameter tensor with more than 8 elements"));
    }
    for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
        *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Ok(n)
}

/// A compute job of `op` on `operands`.
pub(super) fn compute(op: impl Into<Op>, operands: heapless::Vec<Operand, MAX_INPUTS>) -> Lowered {
    Lowered::Compute {
        op: op.into(),
        operands,
    }
}

/// `LowerError`'s size on 32-bit targets (see the checks in `error.rs`): every `?` moves it.
#[cfg(target_pointer_width = "32")]
const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<LowerError>() <= 24 && align_of::<LowerError>() == 4);
};
