//! QUANTIZE and DEQUANTIZE: int8 to int8 with another scale (requantization), f32 to int8, and
//! int8 to f32, TFLM's rounding. Operands `[input]`; the two conversions' dtype is their
//! input's.

use npu_kernels::int8::{self as ki, Quant, RequantizeParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::DataType;

/// int8 to int8 QUANTIZE (requantization) on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequantizeI8 {
    /// Elements.
    pub len: u32,
    /// Rescaling parameters.
    pub params: RequantizeParams,
}

/// f32 to int8 QUANTIZE on `len` elements (operand `[input]` is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QuantizeF32 {
    /// Elements.
    pub len: u32,
    /// The output's quantization.
    pub quant: Quant,
}

/// int8 to f32 DEQUANTIZE on `len` elements (the output is f32).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DequantizeI8 {
    /// Elements.
    pub len: u32,
    /// The input's quantization.
    pub quant: Quant,
}

/// The cycle model's view: one pass through the output stage.
fn layer(len: u32) -> Layer {
    let rows = rows_of(len, 1);
    Layer::new(LayerKind::Quantize, rows, rows)
}

impl Operator for RequantizeI8 {
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::requantize(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Requantize
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer(self.len))
    }
}

impl Operator for QuantizeF32 {
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len.checked_mul(4)?], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let x = view(input(inputs, 0), 0)?;
        Ok(ki::quantize_f32(self.quant, x, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Quantize
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer(self.len))
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

impl Operator for DequantizeI8 {
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len.checked_mul(4)?)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::dequantize(
            self.quant,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Dequantize
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
}

/// QUANTIZE: from f32, or from int8 with another scale.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let yq = quant(&y)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    match x.dtype {
        DataType::Float32 => Ok(compute(QuantizeF32 { len, quant: yq }, list)),
        DataType::Int8 => Ok(compute(
            RequantizeI8 {
                len,
                params: RequantizeParams::new(quant(&x)?, yq)?,
            },
            list,
        )),
        _ => Err(unsupported(
            "QUANTIZE input type other than float32 or int8",
        )),
    }
}

/// DEQUANTIZE: int8 to f32.
pub(super) fn lower_dequantize(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if y.dtype != DataType::Float32 {
        return Err(unsupported("DEQUANTIZE output type other than float32"));
    }
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    Ok(compute(
        DequantizeI8 {
            len,
            quant: quant(&x)?,
        },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
