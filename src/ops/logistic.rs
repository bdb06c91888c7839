//! LOGISTIC and TANH, int8 and int16, TFLM's arithmetic: gemmlowp fixed point for int8, an
//! interpolated sigmoid table for int16. Operands `[input]`.
//!
//! An Ethos-U55 runs both functions in both dtypes as a lookup table (Vela's supported
//! operators: LOGISTIC and TANH under the generic constraints only), so all four are on the
//! simulated NPU, priced as [`LayerKind::Logistic`] / [`LayerKind::Tanh`]: one output-stage pass
//! through a table. The cycle model's pass has no element size: the int16 forms are priced as
//! the int8 ones.

use npu_kernels::int8::{self as ki, Logistic16Params, LogisticParams, Tanh16Params, TanhParams};

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, operands, quant, quant_of, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::DataType;

/// Declares one of the four: its description and `impl Operator`, on `$elem` elements through
/// the kernel `$kernel`, priced as the CPU class `$cpu` and the cycle model's `$layer` pass.
macro_rules! table_function {
    ($(#[$doc:meta])* $name:ident, $params:ty, $elem:ty, $kernel:ident, $cpu:ident, $layer:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Elements.
            pub len: u32,
            /// Fixed-point parameters (for int16: the input rescaling).
            pub params: $params,
        }

        impl Operator for $name {
            packed_fields!(len, params);
            fn operands(&self) -> Option<Operands> {
                let bytes = self.len.checked_mul(core::mem::size_of::<$elem>() as u32)?;
                Operands::new(&[bytes], 0, bytes)
            }
            fn macs(&self) -> u64 {
                u64::from(self.len)
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let x = view::<$elem>(input(inputs, 0), 0)?;
                Ok(ki::$kernel(&self.params, x, view_mut(output)?)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::$cpu
            }
            fn layer(&self) -> Option<Layer> {
                let rows = rows_of(self.len, 1);
                Some(Layer::new(LayerKind::$layer, rows, rows))
            }
        }
    };
}

table_function!(
    /// int8 LOGISTIC on `len` elements.
    LogisticI8, LogisticParams, i8, logistic, Logistic, Logistic
);
table_function!(
    /// int16 LOGISTIC on `len` elements.
    LogisticI16, Logistic16Params, i16, logistic_i16, SigmoidTable16, Logistic
);
table_function!(
    /// int8 TANH on `len` elements.
    TanhI8, TanhParams, i8, tanh, Tanh, Tanh
);
table_function!(
    /// int16 TANH on `len` elements.
    TanhI16, Tanh16Params, i16, tanh_i16, SigmoidTable16, Tanh
);

/// The input and output of an elementwise LOGISTIC or TANH: same type, same element count.
fn elementwise<'s>(
    ctx: &LowerCtx<'s, '_>,
) -> Result<
    (
        crate::model::TensorInfo<'s>,
        crate::model::TensorInfo<'s>,
        u32,
    ),
    lower::LowerError,
> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype != y.dtype {
        return Err(unsupported("output type other than the input's"));
    }
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    Ok((x, y, len))
}

/// LOGISTIC (int8, int16).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y, len) = elementwise(ctx)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    match x.dtype {
        DataType::Int8 => {
            let params = LogisticParams::new(quant(&x)?, quant(&y)?)?;
            Ok(compute(LogisticI8 { len, params }, list))
        }
        DataType::Int16 => {
            let q = |t| quant_of(t, DataType::Int16);
            let params = Logistic16Params::new(q(&x)?, q(&y)?)?;
            Ok(compute(LogisticI16 { len, params }, list))
        }
        _ => Err(unsupported("LOGISTIC type other than int8 or int16")),
    }
}

/// TANH (int8, int16).
pub(super) fn lower_tanh(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y, len) = elementwise(ctx)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    match x.dtype {
        DataType::Int8 => {
            // TFLM reads nothing of the output's quantization but its type.
            let params = TanhParams::new(quant(&x)?)?;
            Ok(compute(TanhI8 { len, params }, list))
        }
        DataType::Int16 => {
            let q = |t| quant_of(t, DataType::Int16);
            let params = Tanh16Params::new(q(&x)?, q(&y)?)?;
            Ok(compute(TanhI16 { len, params }, list))
        }
        _ => Err(unsupported("TANH type other than int8 or int16")),
    }
}
