//! Compute operations: what a [`JobKind::Compute`](super::JobKind::Compute) job runs.
//!
//! An [`Op`] carries its shape and every parameter its kernel needs, precomputed once when a
//! model is prepared (multipliers, offsets, resolved padding), so a job is self-contained and
//! a driver never looks anything up. Data that grows with the layer (weights, bias, per-channel
//! requantization multipliers) travels as operand regions instead, which keeps an `Op` a few
//! hundred bytes at most.
//!
//! Operand order is fixed per operator and documented on each variant; [`Op::operands`] gives
//! the byte size each operand must have, which the server checks before a job is submitted.

use npu_kernels::int8::{
    AddParams, Conv2dShape, DepthwiseShape, FcParams, FcPerChannelParams, MeanParams, MulParams,
    PoolShape, ReluParams, SoftmaxParams,
};
use npu_kernels::int8::{
    BatchMatmulParams, BroadcastShape, ConcatParams, Conv2dParams, DepthwiseParams, PoolParams,
    Quant, RequantizeParams, RsqrtParams, SubParams, TransposeParams,
};
use npu_kernels::FcShape;

use super::MAX_JOB_INPUTS;

/// Bytes of one per-channel requantization multiplier as it lies in memory: the
/// little-endian `i32` multiplier, then the `i32` shift
/// ([`ChannelMultiplier`](npu_kernels::int8::ChannelMultiplier)).
pub const CHANNEL_MULTIPLIER_BYTES: u32 = 8;

/// Element types a job computes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// IEEE 754 single precision, little-endian.
    F32,
    /// Signed 8-bit, affine quantized.
    I8,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32 => 4,
            DType::I8 => 1,
        }
    }
}

/// Operator families, for capability queries and error messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpKind {
    /// Elementwise addition.
    Add,
    /// Elementwise multiplication.
    Mul,
    /// Rectified linear unit.
    Relu,
    /// Fully connected layer / matrix multiplication.
    FullyConnected,
    /// 2-D convolution.
    Conv2d,
    /// Depthwise 2-D convolution.
    DepthwiseConv2d,
    /// Average pooling.
    AveragePool2d,
    /// Max pooling.
    MaxPool2d,
    /// Softmax along the innermost axis.
    Softmax,
    /// Mean over axes.
    Mean,
    /// A copy under a new shape (TFLite RESHAPE).
    Reshape,
    /// Batched matrix multiplication.
    BatchMatmul,
    /// Axis permutation.
    Transpose,
    /// Joining tensors along an axis.
    Concatenation,
    /// Elementwise subtraction.
    Sub,
    /// Elementwise reciprocal square root.
    Rsqrt,
    /// Quantization (float to int8) or requantization (int8 to int8).
    Quantize,
    /// Dequantization (int8 to float).
    Dequantize,
}

impl OpKind {
    /// Every operator family, in bit order of [`OpSet`].
    pub const ALL: [OpKind; 18] = [
        OpKind::Add,
        OpKind::Mul,
        OpKind::Relu,
        OpKind::FullyConnected,
        OpKind::Conv2d,
        OpKind::DepthwiseConv2d,
        OpKind::AveragePool2d,
        OpKind::MaxPool2d,
        OpKind::Softmax,
        OpKind::Mean,
        OpKind::Reshape,
        OpKind::BatchMatmul,
        OpKind::Transpose,
        OpKind::Concatenation,
        OpKind::Sub,
        OpKind::Rsqrt,
        OpKind::Quantize,
        OpKind::Dequantize,
    ];
}

impl core::fmt::Display for DType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I8 => "int8",
        })
    }
}

impl core::fmt::Display for OpKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// A compute operation with its shape and precomputed parameters.
///
/// Operand order in [`JobKind::Compute::inputs`](super::JobKind::Compute): binary ops
/// `[a, b]`, unary ops `[input]`, fully connected `[input, weights]` or
/// `[input, weights, bias]` (bias is f32 for f32 and little-endian i32 for int8); the
/// per-channel operators as documented on their variants. Multipliers are
/// [`CHANNEL_MULTIPLIER_BYTES`] per output channel.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Op {
    /// `out = a + b` on `len` f32 elements.
    AddF32 {
        /// Elements.
        len: u32,
    },
    /// `out = a * b` on `len` f32 elements.
    MulF32 {
        /// Elements.
        len: u32,
    },
    /// `out = max(0, x)` on `len` f32 elements.
    ReluF32 {
        /// Elements.
        len: u32,
    },
    /// f32 fully connected.
    FullyConnectedF32 {
        /// Shape.
        shape: FcShape,
    },
    /// int8 `out = a + b`, TFLM arithmetic.
    AddI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: AddParams,
    },
    /// int8 `out = a * b`, TFLM arithmetic.
    MulI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: MulParams,
    },
    /// int8 ReLU, TFLM arithmetic.
    ReluI8 {
        /// Elements.
        len: u32,
        /// Requantization parameters.
        params: ReluParams,
    },
    /// int8 fully connected with one output multiplier, TFLM arithmetic.
    FullyConnectedI8 {
        /// Shape.
        shape: FcShape,
        /// Requantization parameters.
        params: FcParams,
    },
    /// int8 fully connected with one multiplier per output feature. Operands
    /// `[input, weights, multipliers]` or `[input, weights, multipliers, bias]`.
    FullyConnectedPerChannelI8 {
        /// Shape.
        shape: FcShape,
        /// Offsets and activation range.
        params: FcPerChannelParams,
    },
    /// int8 CONV_2D. Operands `[input, filter, multipliers]` or
    /// `[input, filter, multipliers, bias]`.
    Conv2dI8 {
        /// Input and window.
        shape: Conv2dShape,
        /// Resolved geometry and requantization.
        params: Conv2dParams,
    },
    /// int8 DEPTHWISE_CONV_2D. Operands as [`Op::Conv2dI8`].
    DepthwiseConv2dI8 {
        /// Input, depth multiplier and window.
        shape: DepthwiseShape,
        /// Resolved geometry and requantization.
        params: DepthwiseParams,
    },
    /// int8 AVERAGE_POOL_2D. Operands `[input]`.
    AveragePool2dI8 {
        /// Input and window.
        shape: PoolShape,
        /// Resolved geometry and activation range.
        params: PoolParams,
    },
    /// int8 MAX_POOL_2D. Operands `[input]`.
    MaxPool2dI8 {
        /// Input and window.
        shape: PoolShape,
        /// Resolved geometry and activation range.
        params: PoolParams,
    },
    /// int8 SOFTMAX over rows of `depth` elements. Operands `[input]`.
    SoftmaxI8 {
        /// Elements in all.
        len: u32,
        /// Elements per row (the innermost dimension).
        depth: u32,
        /// Fixed-point parameters.
        params: SoftmaxParams,
    },
    /// int8 MEAN. Operands `[input]`.
    MeanI8 {
        /// Geometry and requantization.
        params: MeanParams,
    },
    /// int8 ADD with broadcasting. Operands `[a, b]`.
    AddBroadcastI8 {
        /// Shapes of `a`, `b` and the output.
        shape: BroadcastShape,
        /// Requantization parameters.
        params: AddParams,
    },
    /// int8 SUB with broadcasting. Operands `[a, b]`.
    SubI8 {
        /// Shapes of `a`, `b` and the output.
        shape: BroadcastShape,
        /// Requantization parameters.
        params: SubParams,
    },
    /// int8 MUL with broadcasting. Operands `[a, b]`.
    MulBroadcastI8 {
        /// Shapes of `a`, `b` and the output.
        shape: BroadcastShape,
        /// Requantization parameters.
        params: MulParams,
    },
    /// int8 RSQRT on `len` elements. Operands `[input]`.
    RsqrtI8 {
        /// Elements.
        len: u32,
        /// Fixed-point parameters.
        params: RsqrtParams,
    },
    /// int8 to int8 QUANTIZE (requantization) on `len` elements. Operands `[input]`.
    RequantizeI8 {
        /// Elements.
        len: u32,
        /// Rescaling parameters.
        params: RequantizeParams,
    },
    /// f32 to int8 QUANTIZE on `len` elements. Operands `[input]` (f32).
    QuantizeF32 {
        /// Elements.
        len: u32,
        /// The output's quantization.
        quant: Quant,
    },
    /// int8 to f32 DEQUANTIZE on `len` elements. Operands `[input]` (int8); the output is f32.
    DequantizeI8 {
        /// Elements.
        len: u32,
        /// The input's quantization.
        quant: Quant,
    },
    /// int8 BATCH_MATMUL. Operands `[lhs, rhs]`.
    BatchMatmulI8 {
        /// Shapes, adjoint flags and requantization.
        params: BatchMatmulParams,
    },
    /// int8 TRANSPOSE. Operands `[input]`.
    TransposeI8 {
        /// Shape and permutation.
        params: TransposeParams,
    },
    /// int8 CONCATENATION (inputs and output share one quantization). Operands: the inputs
    /// in order, at most [`MAX_CONCAT_INPUTS`](npu_kernels::int8::MAX_CONCAT_INPUTS).
    ConcatenationI8 {
        /// Shapes and axis.
        params: ConcatParams,
    },
    /// A byte copy of `len` bytes (RESHAPE when the output cannot share the input's memory).
    /// Operands `[input]`.
    Reshape {
        /// Bytes.
        len: u32,
    },
}

/// Byte sizes of an op's operands, as [`Op::operands`] reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operands {
    /// Bytes of each input, in operand order.
    pub inputs: heapless::Vec<u32, MAX_JOB_INPUTS>,
    /// How many trailing inputs may be left out (an optional bias).
    pub optional: u8,
    /// Bytes of the output.
    pub output: u32,
}

impl Operands {
    fn new(inputs: &[u32], optional: u8, output: u32) -> Option<Self> {
        Some(Operands {
            inputs: heapless::Vec::from_slice(inputs).ok()?,
            optional,
            output,
        })
    }

    /// Whether `n` inputs is a valid count.
    pub fn accepts(&self, n: usize) -> bool {
        n <= self.inputs.len() && n + usize::from(self.optional) >= self.inputs.len()
    }
}

/// Element counts of a fully connected layer's input, weights and output.
fn fc_elements(s: FcShape) -> Option<(u32, u32, u32)> {
    Some((
        s.batches.checked_mul(s.in_features)?,
        s.out_features.checked_mul(s.in_features)?,
        s.batches.checked_mul(s.out_features)?,
    ))
}

fn bytes(elements: usize) -> Option<u32> {
    u32::try_from(elements).ok()
}

impl Op {
    /// The operator family.
    pub const fn kind(&self) -> OpKind {
        match self {
            Op::AddF32 { .. } | Op::AddI8 { .. } | Op::AddBroadcastI8 { .. } => OpKind::Add,
            Op::MulF32 { .. } | Op::MulI8 { .. } | Op::MulBroadcastI8 { .. } => OpKind::Mul,
            Op::SubI8 { .. } => OpKind::Sub,
            Op::RsqrtI8 { .. } => OpKind::Rsqrt,
            Op::RequantizeI8 { .. } | Op::QuantizeF32 { .. } => OpKind::Quantize,
            Op::DequantizeI8 { .. } => OpKind::Dequantize,
            Op::ReluF32 { .. } | Op::ReluI8 { .. } => OpKind::Relu,
            Op::FullyConnectedF32 { .. }
            | Op::FullyConnectedI8 { .. }
            | Op::FullyConnectedPerChannelI8 { .. } => OpKind::FullyConnected,
            Op::Conv2dI8 { .. } => OpKind::Conv2d,
            Op::DepthwiseConv2dI8 { .. } => OpKind::DepthwiseConv2d,
            Op::AveragePool2dI8 { .. } => OpKind::AveragePool2d,
            Op::MaxPool2dI8 { .. } => OpKind::MaxPool2d,
            Op::SoftmaxI8 { .. } => OpKind::Softmax,
            Op::MeanI8 { .. } => OpKind::Mean,
            Op::Reshape { .. } => OpKind::Reshape,
            Op::BatchMatmulI8 { .. } => OpKind::BatchMatmul,
            Op::TransposeI8 { .. } => OpKind::Transpose,
            Op::ConcatenationI8 { .. } => OpKind::Concatenation,
        }
    }

    /// The element type.
    pub const fn dtype(&self) -> DType {
        match self {
            Op::AddF32 { .. }
            | Op::MulF32 { .. }
            | Op::ReluF32 { .. }
            | Op::FullyConnectedF32 { .. }
            | Op::QuantizeF32 { .. } => DType::F32,
            _ => DType::I8,
        }
    }

    /// Whether the op may write its output over one of its inputs (the same region): each
    /// output element depends only on the input elements at the same index, so a streaming
    /// engine reads them before it writes. True for the int8 elementwise ops without
    /// broadcasting (ADD, MUL, ReLU).
    pub fn runs_in_place(&self) -> bool {
        matches!(
            self,
            Op::AddI8 { .. } | Op::MulI8 { .. } | Op::ReluI8 { .. }
        )
    }

    /// Multiply-accumulates (for elementwise and data-movement ops: output elements), the
    /// unit of a compute cost model.
    pub fn macs(&self) -> u64 {
        let fc = |s: FcShape| {
            u64::from(s.batches)
                .saturating_mul(u64::from(s.in_features))
                .saturating_mul(u64::from(s.out_features))
        };
        match *self {
            Op::AddF32 { len } | Op::MulF32 { len } | Op::ReluF32 { len } => u64::from(len),
            Op::AddI8 { len, .. } | Op::MulI8 { len, .. } | Op::ReluI8 { len, .. } => {
                u64::from(len)
            }
            Op::SoftmaxI8 { len, .. }
            | Op::Reshape { len }
            | Op::RsqrtI8 { len, .. }
            | Op::RequantizeI8 { len, .. }
            | Op::QuantizeF32 { len, .. }
            | Op::DequantizeI8 { len, .. } => u64::from(len),
            Op::AddBroadcastI8 { shape, .. }
            | Op::SubI8 { shape, .. }
            | Op::MulBroadcastI8 { shape, .. } => shape.lens().2 as u64,
            Op::FullyConnectedF32 { shape }
            | Op::FullyConnectedI8 { shape, .. }
            | Op::FullyConnectedPerChannelI8 { shape, .. } => fc(shape),
            Op::Conv2dI8 { shape, params } => {
                let taps = u64::from(shape.window.filter_height)
                    * u64::from(shape.window.filter_width)
                    * u64::from(shape.filter_depth);
                (params.lens().2 as u64).saturating_mul(taps)
            }
            Op::DepthwiseConv2dI8 { shape, params } => {
                let taps =
                    u64::from(shape.window.filter_height) * u64::from(shape.window.filter_width);
                (params.lens().2 as u64).saturating_mul(taps)
            }
            Op::AveragePool2dI8 { shape, params } | Op::MaxPool2dI8 { shape, params } => {
                let taps = u64::from(shape.filter_height) * u64::from(shape.filter_width);
                (params.lens().1 as u64).saturating_mul(taps)
            }
            Op::MeanI8 { params } => params.lens().0 as u64,
            Op::BatchMatmulI8 { params } => {
                let (lhs, _, out) = params.lens();
                // out = batch · rows · cols and lhs = batch · rows · depth.
                let depth = lhs as u64 / u64::max(1, rows(&params));
                (out as u64).saturating_mul(depth)
            }
            Op::TransposeI8 { params } => params.elements() as u64,
            Op::ConcatenationI8 { params } => params.output_len() as u64,
        }
    }

    /// Bytes each operand must have. `None` if a size overflows `u32`.
    #[inline(always)]
    pub fn operands(&self) -> Option<Operands> {
        let e = self.dtype().size();
        let elems = |len: u32| len.checked_mul(e);
        let per_channel = |input: usize, filter: usize, output: usize, channels: u32| {
            let m = channels.checked_mul(CHANNEL_MULTIPLIER_BYTES)?;
            let bias = channels.checked_mul(4)?;
            Operands::new(&[bytes(input)?, bytes(filter)?, m, bias], 1, bytes(output)?)
        };
        match *self {
            Op::AddF32 { len }
            | Op::MulF32 { len }
            | Op::AddI8 { len, .. }
            | Op::MulI8 { len, .. } => {
                let b = elems(len)?;
                Operands::new(&[b, b], 0, b)
            }
            Op::ReluF32 { len } | Op::ReluI8 { len, .. } => {
                let b = elems(len)?;
                Operands::new(&[b], 0, b)
            }
            Op::FullyConnectedF32 { shape } | Op::FullyConnectedI8 { shape, .. } => {
                let (input, weights, out) = fc_elements(shape)?;
                // Bias is f32 or i32: four bytes per output feature either way.
                let bias = shape.out_features.checked_mul(4)?;
                Operands::new(&[elems(input)?, elems(weights)?, bias], 1, elems(out)?)
            }
            Op::FullyConnectedPerChannelI8 { shape, .. } => {
                let (input, weights, out) = fc_elements(shape)?;
                per_channel(
                    input as usize,
                    weights as usize,
                    out as usize,
                    shape.out_features,
                )
            }
            Op::Conv2dI8 { shape, params } => {
                let (i, f, o) = params.lens();
                per_channel(i, f, o, shape.out_channels)
            }
            Op::DepthwiseConv2dI8 { params, .. } => {
                let (i, f, o) = params.lens();
                per_channel(i, f, o, params.output_shape().channels)
            }
            Op::AveragePool2dI8 { params, .. } | Op::MaxPool2dI8 { params, .. } => {
                let (i, o) = params.lens();
                Operands::new(&[bytes(i)?], 0, bytes(o)?)
            }
            Op::SoftmaxI8 { len, .. }
            | Op::Reshape { len }
            | Op::RsqrtI8 { len, .. }
            | Op::RequantizeI8 { len, .. } => Operands::new(&[len], 0, len),
            Op::QuantizeF32 { len, .. } => Operands::new(&[len.checked_mul(4)?], 0, len),
            Op::DequantizeI8 { len, .. } => Operands::new(&[len], 0, len.checked_mul(4)?),
            Op::AddBroadcastI8 { shape, .. }
            | Op::SubI8 { shape, .. }
            | Op::MulBroadcastI8 { shape, .. } => {
                let (a, b, o) = shape.lens();
                Operands::new(&[bytes(a)?, bytes(b)?], 0, bytes(o)?)
            }
            Op::MeanI8 { params } => {
                let (i, o) = params.lens();
                Operands::new(&[bytes(i)?], 0, bytes(o)?)
            }
            Op::BatchMatmulI8 { params } => {
                let (l, r, o) = params.lens();
                Operands::new(&[bytes(l)?, bytes(r)?], 0, bytes(o)?)
            }
            Op::TransposeI8 { params } => {
                let n = bytes(params.elements())?;
                Operands::new(&[n], 0, n)
            }
            Op::ConcatenationI8 { params } => {
                let mut inputs = heapless::Vec::<u32, MAX_JOB_INPUTS>::new();
                for i in 0..params.inputs() {
                    inputs.push(bytes(params.input_len(i))?).ok()?;
                }
                Operands::new(&inputs, 0, bytes(params.output_len())?)
            }
        }
    }
}

/// A set of (operator, dtype) pairs, as a bitset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet(pub u64);

impl OpSet {
    /// No operator.
    pub const EMPTY: OpSet = OpSet(0);

    const fn bit(op: OpKind, dtype: DType) -> u64 {
        let d = match dtype {
            DType::F32 => 0,
            DType::I8 => 1,
        };
        1 << (op as u32 * 2 + d)
    }

    /// Every operator this crate knows, in every dtype.
    pub const fn all() -> OpSet {
        let mut bits = 0;
        let mut i = 0;
        while i < OpKind::ALL.len() {
            bits |= Self::bit(OpKind::ALL[i], DType::F32) | Self::bit(OpKind::ALL[i], DType::I8);
            i += 1;
        }
        OpSet(bits)
    }

    /// This set plus one pair.
    pub const fn with(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 | Self::bit(op, dtype))
    }

    /// This set less one pair.
    pub const fn without(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 & !Self::bit(op, dtype))
    }

    /// Whether the pair is in the set.
    pub const fn contains(self, op: OpKind, dtype: DType) -> bool {
        self.0 & Self::bit(op, dtype) != 0
    }

    /// Whether `op`'s (operator, dtype) pair is in the set: what a dispatch asks of every job.
    #[inline]
    pub fn runs(self, op: &Op) -> bool {
        // One match from variant to bit rather than `contains(op.kind(), op.dtype())`, whose
        // two matches cost a dozen instructions more per job on a Cortex-M4.
        let bit = match op {
            Op::AddF32 { .. } => Self::bit(OpKind::Add, DType::F32),
            Op::MulF32 { .. } => Self::bit(OpKind::Mul, DType::F32),
            Op::ReluF32 { .. } => Self::bit(OpKind::Relu, DType::F32),
            Op::FullyConnectedF32 { .. } => Self::bit(OpKind::FullyConnected, DType::F32),
            Op::QuantizeF32 { .. } => Self::bit(OpKind::Quantize, DType::F32),
            other => Self::bit(other.kind(), DType::I8),
        };
        self.0 & bit != 0
    }
}

/// Rows of a batch matmul's output (its second-to-last dimension): with the output's element
/// count and the LHS's, it gives the reduction depth.
fn rows(p: &BatchMatmulParams) -> u64 {
    let out = p.output_shape();
    let dims = out.as_slice();
    let batch_and_rows: u64 = dims.iter().rev().skip(1).map(|&d| u64::from(d)).product();
    batch_and_rows.max(1)
}
