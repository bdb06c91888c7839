//! CAST between int8, int16, int32 and float32 (TFLM's `static_cast` of each value, the
//! quantization ignored). Operands `[input]`; one description per input type (the op's dtype),
//! the output type a parameter.
//!
//! Where it runs: Vela does not place CAST on an Ethos-U55, so the CPU fallback runs it.

use npu_kernels::int8 as ki;
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, operands, unsupported, LowerCtx};
use super::{CpuKernel, DType, OpError, Operands, Operator};
use crate::model::DataType;

/// The element type of a tensor, for the types CAST converts between.
fn dtype(t: DataType) -> Option<DType> {
    Some(match t {
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Float32 => DType::F32,
        _ => return None,
    })
}

/// Converts `inputs[0]`, elements of `A`, into `output` as `to`'s elements.
fn run_from<A>(inputs: &[&[u8]], to: DType, output: &mut [u8]) -> Result<(), OpError>
where
    A: bytemuck::AnyBitPattern
        + ki::CastTo<i8>
        + ki::CastTo<i16>
        + ki::CastTo<i32>
        + ki::CastTo<f32>,
{
    let x = view::<A>(input(inputs, 0), 0)?;
    match to {
        DType::I8 => ki::cast(x, view_mut::<i8>(output)?)?,
        DType::I16 => ki::cast(x, view_mut::<i16>(output)?)?,
        DType::I32 => ki::cast(x, view_mut::<i32>(output)?)?,
        DType::F32 => ki::cast(x, view_mut::<f32>(output)?)?,
    }
    Ok(())
}

macro_rules! cast_op {
    ($(#[$doc:meta])* $t:ident, $from:ty, $dtype:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $t {
            /// Elements.
            pub len: u32,
            /// The output's element type.
            pub to: DType,
        }

        impl Operator for $t {
            fn pack(&self, w: &mut Words<'_>) -> bool {
                w.put(self.len);
                // Its position in `DType::ALL`, which lists the variants in their order.
                w.put(self.to as u32);
                true
            }
            fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
                let len = r.take()?;
                let to = usize::try_from(r.take()?).ok().and_then(|i| DType::ALL.get(i));
                let to = *to.ok_or(KernelError::Unsupported {
                    what: "CAST to an element type other than the four",
                })?;
                Ok(Self { len, to })
            }
            fn operands(&self) -> Option<Operands> {
                Operands::new(
                    &[self.len.checked_mul(DType::$dtype.size())?],
                    0,
                    self.len.checked_mul(self.to.size())?,
                )
            }
            fn macs(&self) -> u64 {
                u64::from(self.len)
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                run_from::<$from>(inputs, self.to, output)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::Cast
            }
            fn taps(&self) -> u64 {
                // Float to integer conversions saturate: the CPU model charges them apart.
                if DType::$dtype == DType::F32 && self.to != DType::F32 {
                    u64::from(self.len)
                } else {
                    0
                }
            }
            fn output_elements(&self) -> Option<u64> {
                Some(u64::from(self.len))
            }
        }
    };
}

cast_op!(
    /// CAST from int8.
    CastI8, i8, I8
);
cast_op!(
    /// CAST from int16.
    CastI16, i16, I16
);
cast_op!(
    /// CAST from int32.
    CastI32, i32, I32
);
cast_op!(
    /// CAST from float32.
    CastF32, f32, F32
);

/// CAST between int8, int16, int32 and float32; between int32 and uint32 (the same bits, as
/// `static_cast` keeps them) an alias of its input, like RESHAPE.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if matches!(
        (x.dtype, y.dtype),
        (DataType::Int32, DataType::UInt32) | (DataType::UInt32, DataType::Int32)
    ) {
        lower::check_elements(&y, x.shape.num_elements() as usize)?;
        return Ok(lower::Lowered::Alias { input: x.index });
    }
    let (Some(from), Some(to)) = (dtype(x.dtype), dtype(y.dtype)) else {
        return Err(unsupported(
            "CAST type other than int8, int16, int32 or float32",
        ));
    };
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(match from {
        DType::I8 => compute(CastI8 { len, to }, list),
        DType::I16 => compute(CastI16 { len, to }, list),
        DType::I32 => compute(CastI32 { len, to }, list),
        DType::F32 => compute(CastF32 { len, to }, list),
    })
}
