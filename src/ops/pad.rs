//! Padding: PAD and PADV2 (int8, int16), a constant around the input
//! ([`npu_kernels::movement::pad`]), and MIRROR_PAD (int8), the input's reflection
//! ([`npu_kernels::movement::mirror_pad`]). Operands `[input]`; the paddings and the pad value
//! are constants read here, at prepare, and never reach the device.
//!
//! The pad value is TFLM's: the constant-values input when there is one (a one-element
//! constant of the input's type, for int8 in the output's quantization), else the output's
//! zero point for int8 and 0 for int16.
//!
//! Where they run: Vela places PAD on an Ethos-U55 (int8, int16) when it has two inputs and
//! pads only height and width of a rank-3 or rank-4 tensor (`[H, W, C]`, `[N, H, W, C]`):
//! those are a [`PadI8`] / [`PadI16`] (the `Pad` family, on the NPU). Every other constant pad
//! (PADV2, or a PAD of other axes) is a [`PadV2I8`] / [`PadV2I16`] (the `PadV2` family), and
//! MIRROR_PAD a [`MirrorPadI8`] (`MirrorPad`): Vela 3.10's supported-operator list has neither,
//! so they run on the CPU. Same kernel for both constant families.

use core::mem::size_of;

use npu_kernels::movement::{self as mv, MirrorPadParams, PadParams};
use npu_kernels::packed::{Packed, WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx, LowerError};
use super::slice::{const_ints, copy_kernel, element_type};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOp, BuiltinOptions, DataType, MirrorPadMode, TensorInfo};

/// Highest rank TFLM's PAD takes (`PadKernelMaxDimensionCount`); MIRROR_PAD likewise here.
const MAX_RANK: usize = 5;

/// Declares a constant-pad description for one element type.
macro_rules! pad_op {
    ($($(#[$doc:meta])* $name:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Input shape and paddings.
            pub params: PadParams,
            /// The value around the input, as stored.
            pub value: $t,
        }

        impl Operator for $name {
            fn pack(&self, w: &mut Words<'_>) -> bool {
                self.params.pack(w);
                w.put_i32(i32::from(self.value));
                true
            }
            fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
                let params = Packed::unpack(r)?;
                let value = r.take_in(i32::from(<$t>::MIN), i32::from(<$t>::MAX), "pad value")?;
                // In range: checked just above.
                Ok(Self { params, value: value as $t })
            }
            fn operands(&self) -> Option<Operands> {
                let size = size_of::<$t>();
                let input = bytes(self.params.input_elements().checked_mul(size)?)?;
                Operands::new(&[input], 0, bytes(self.params.output_elements().checked_mul(size)?)?)
            }
            /// The input bytes it copies (elements for int8), what its copy's cost follows;
            /// the fill of the output is priced per output element.
            fn macs(&self) -> u64 {
                (self.params.input_elements() * size_of::<$t>()) as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                Ok(mv::pad(
                    &self.params,
                    self.value,
                    view::<$t>(input(inputs, 0), 0)?,
                    view_mut::<$t>(output)?,
                )?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                copy_kernel(self.params.walk())
            }
            fn taps(&self) -> u64 {
                self.params.walk().rows() as u64
            }
            fn layer(&self) -> Option<Layer> {
                let out = padded(self.params.output_shape().as_slice());
                Some(Layer::new(LayerKind::Transpose, out, out))
            }
        }
    )*};
}

pad_op! {
    /// int8 PAD of height and width, on the NPU.
    PadI8: i8;
    /// int16 PAD of height and width, on the NPU.
    PadI16: i16;
    /// int8 constant pad the NPU does not run (PADV2, PAD of other axes).
    PadV2I8: i8;
    /// int16 constant pad the NPU does not run.
    PadV2I16: i16;
}

/// int8 MIRROR_PAD, on the CPU.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MirrorPadI8 {
    /// Shapes, paddings and mode.
    pub params: MirrorPadParams,
}

impl Operator for MirrorPadI8 {
    packed_fields!(params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(
            &[bytes(self.params.input_elements())?],
            0,
            bytes(self.params.output_elements())?,
        )
    }
    fn macs(&self) -> u64 {
        self.params.output_elements() as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(mv::mirror_pad(
            &self.params,
            view::<i8>(input(inputs, 0), 0)?,
            view_mut::<i8>(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::MirrorPad
    }
    fn taps(&self) -> u64 {
        self.params.rows() as u64
    }
}

/// The constant paddings of a pad: a `[rank, 2]` int32 (or, for MIRROR_PAD, int64) tensor of
/// non-negative counts, as (before, after) per axis.
fn paddings(
    t: &TensorInfo<'_>,
    rank: usize,
    int64: bool,
) -> Result<([u32; MAX_RANK], [u32; MAX_RANK]), LowerError> {
    if t.dtype != DataType::Int32 && !(int64 && t.dtype == DataType::Int64) {
        return Err(unsupported("paddings type"));
    }
    let mut v = [0i32; 2 * MAX_RANK];
    if t.shape.dims() != [rank as u32, 2] || const_ints(t, &mut v)? != 2 * rank {
        return Err(unsupported("paddings of other than [rank, 2]"));
    }
    let (mut before, mut after) = ([0u32; MAX_RANK], [0u32; MAX_RANK]);
    for k in 0..rank {
        before[k] = u32::try_from(v[2 * k]).map_err(|_| unsupported("negative padding"))?;
        after[k] = u32::try_from(v[2 * k + 1]).map_err(|_| unsupported("negative padding"))?;
    }
    Ok((before, after))
}

/// The input of a pad: rank at most 5.
fn padded_input(t: TensorInfo<'_>) -> Result<TensorInfo<'_>, LowerError> {
    if t.shape.rank() <= MAX_RANK {
        Ok(t)
    } else {
        Err(unsupported("rank above 5"))
    }
}

/// PAD and PADV2 (int8, int16), as TFLM's `pad.cc` (which registers both alike): input 1 the
/// constant int32 paddings, an optional input 2 the pad value.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let (x, y) = (padded_input(ctx.input(0)?)?, ctx.output()?);
    let dtype = element_type(&x, &y)?;
    let rank = x.shape.rank();
    let (before, after) = paddings(&ctx.input(1)?, rank, false)?;
    let params = PadParams::new(x.shape.dims(), &before[..rank], &after[..rank])?;
    if params.output_shape().as_slice() != y.shape.dims() {
        return Err(unsupported("PAD output shape other than the padded input"));
    }
    let value = match ctx.optional_input(2)? {
        Some(c) => Some(pad_value(&c, &y, dtype)?),
        None if ctx.input_count() > 2 => return Err(unsupported("omitted pad value")),
        None => None,
    };
    // Vela's PAD: two inputs, height and width only of [H, W, C] or [N, H, W, C].
    let spatial = match rank {
        3 => before[2] == 0 && after[2] == 0,
        4 => before[0] == 0 && after[0] == 0 && before[3] == 0 && after[3] == 0,
        _ => false,
    };
    let npu = ctx.builtin() == BuiltinOp::Pad && value.is_none() && spatial;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(if dtype == DataType::Int8 {
        let value = match value {
            Some(v) => v as i8,
            None => {
                let zp = quant(&y)?.zero_point;
                i8::try_from(zp).map_err(|_| unsupported("output zero point outside int8"))?
            }
        };
        if npu {
            compute(PadI8 { params, value }, list)
        } else {
            compute(PadV2I8 { params, value }, list)
        }
    } else {
        // In range: read from an int16 tensor.
        let value = value.unwrap_or(0) as i16;
        if npu {
            compute(PadI16 { params, value }, list)
        } else {
            compute(PadV2I16 { params, value }, list)
        }
    })
}

/// The pad value of a constant-values tensor: one constant element of the input's type, for
/// int8 in the output's quantization (TFLM's checks).
fn pad_value(c: &TensorInfo<'_>, y: &TensorInfo<'_>, dtype: DataType) -> Result<i32, LowerError> {
    if c.dtype != dtype || c.shape.num_elements() != 1 {
        return Err(unsupported(
            "pad value other than one element of the input's type",
        ));
    }
    let data = c.data.ok_or(unsupported("non-constant pad value"))?;
    if dtype == DataType::Int8 {
        let (cq, yq) = (quant(c)?, quant(y)?);
        if cq.zero_point != yq.zero_point || cq.scale != yq.scale {
            return Err(unsupported("pad value quantized other than the output"));
        }
        data.first()
            .map(|&b| i32::from(b as i8))
            .ok_or(unsupported("pad value"))
    } else {
        match data {
            [a, b, ..] => Ok(i32::from(i16::from_le_bytes([*a, *b]))),
            _ => Err(unsupported("pad value")),
        }
    }
}

/// MIRROR_PAD (int8): input 1 the constant paddings (int32 or int64), REFLECT or SYMMETRIC.
/// Paddings beyond what TensorFlow allows (the axis' size, less one for REFLECT), for which
/// TFLM would read outside its input, are refused.
pub(super) fn lower_mirror(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let BuiltinOptions::MirrorPad(o) = ctx.options().clone().or_default_for(ctx.builtin()) else {
        return Err(unsupported("MIRROR_PAD options"));
    };
    let (x, y) = (padded_input(ctx.input(0)?)?, ctx.output()?);
    if element_type(&x, &y)? != DataType::Int8 {
        return Err(unsupported("MIRROR_PAD of other than int8"));
    }
    let rank = x.shape.rank();
    let (before, after) = paddings(&ctx.input(1)?, rank, true)?;
    let params = MirrorPadParams::new(
        x.shape.dims(),
        &before[..rank],
        &after[..rank],
        o.mode == MirrorPadMode::Reflect,
    )?;
    if params.output_shape().as_slice() != y.shape.dims() {
        return Err(unsupported(
            "MIRROR_PAD output shape other than the padded input",
        ));
    }
    Ok(compute(
        MirrorPadI8 { params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
