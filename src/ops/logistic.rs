//! LOGISTIC and TANH, int8 and int16, TFLM's arithmetic: gemmlowp fixed point for int8, an
//! interpolated sigmoid table for int16. Operands `[input]`.
//!
//! An Ethos-U55 runs both functions in both dtypes as a lookup table (Vela's supported
//! operators: LOGISTIC and TANH under the generic constraints only), so all four are on the
//! simulated NPU, priced as [`LayerKind::Logistic`] / [`LayerKind::Tanh`]: one output-stage pass
//! through a table. The cycle model's pass has no element size: the int16 forms are priced as
//! the int8 ones.

use npu_kernels::int8::{self as ki, Logistic16Params, LogisticParams, Tanh16Params, TanhParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, quant_of, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::DataType;

/// int8 LOGISTIC on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogisticI8 {
    /// Elements.
    pub len: u32,
    /// Fixed-point parameters.
    pub params: LogisticParams,
}

/// int16 LOGISTIC on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogisticI16 {
    /// Elements.
    pub len: u32,
    /// Input rescaling.
    pub params: Logistic16Params,
}

/// int8 TANH on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TanhI8 {
    /// Elements.
    pub len: u32,
    /// Fixed-point parameters.
    pub params: TanhParams,
}

/// int16 TANH on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TanhI16 {
    /// Elements.
    pub len: u32,
    /// Input rescaling.
    pub params: Tanh16Params,
}

/// The cycle model's view of `len` elements through a table.
fn layer(kind: LayerKind, len: u32) -> Option<Layer> {
    let rows = rows_of(len, 1);
    Some(Layer::new(kind, rows, rows))
}

/// Operands of an int16 elementwise op on `len` elements.
fn operands16(len: u32) -> Option<Operands> {
    let bytes = len.checked_mul(2)?;
    Operands::new(&[bytes], 0, bytes)
}

/// Input `i` as int16.
fn i16s<'a>(inputs: &[&'a [u8]], i: usize) -> Result<&'a [i16], OpError> {
    view(input(inputs, i), i)
}

impl Operator for LogisticI8 {
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::logistic(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Logistic
    }
    fn layer(&self) -> Option<Layer> {
        layer(LayerKind::Logistic, self.len)
    }
}

impl Operator for LogisticI16 {
    fn operands(&self) -> Option<Operands> {
        operands16(self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::logistic_i16(
            &self.params,
            i16s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::SigmoidTable16
    }
    fn layer(&self) -> Option<Layer> {
        layer(LayerKind::Logistic, self.len)
    }
}

impl Operator for TanhI8 {
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::tanh(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Tanh
    }
    fn layer(&self) -> Option<Layer> {
        layer(LayerKind::Tanh, self.len)
    }
}

impl Operator for TanhI16 {
    fn operands(&self) -> Option<Operands> {
        operands16(self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::tanh_i16(
            &self.params,
            i16s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::SigmoidTable16
    }
    fn layer(&self) -> Option<Layer> {
        layer(LayerKind::Tanh, self.len)
    }
}

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
