//! SOFTMAX over rows of the innermost dimension: int8 with TFLM's fixed-point exponentials,
//! int16 with its interpolated exp and reciprocal tables. Operands `[input]`.
//!
//! Vela runs SOFTMAX on an Ethos-U55 in int8 and int16 (input and output of one type, beta
//! positive, which TFLM's parameters need anyway), so both are on the simulated NPU.
//!
//! TFLM's int8-to-int16 SOFTMAX (output zero point −32768, scale 1/65536) is its own family,
//! [`OpKind::SoftmaxToInt16`](super::OpKind::SoftmaxToInt16), on the CPU: Vela's SOFTMAX needs
//! the input and output types to match.

use npu_kernels::int8::{self as ki, Softmax16Params, SoftmaxParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, quant_of, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, KeyShape, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// int8 SOFTMAX over rows of `depth` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxI8 {
    /// Elements in all.
    pub len: u32,
    /// Elements per row (the innermost dimension).
    pub depth: u32,
    /// Fixed-point parameters.
    pub params: SoftmaxParams,
}

/// SOFTMAX of int8 input and int16 output over rows of `depth` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxI8ToI16 {
    /// Elements in all.
    pub len: u32,
    /// Elements per row (the innermost dimension).
    pub depth: u32,
    /// Fixed-point parameters.
    pub params: SoftmaxParams,
}

/// int16 SOFTMAX over rows of `depth` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxI16 {
    /// Elements in all.
    pub len: u32,
    /// Elements per row (the innermost dimension).
    pub depth: u32,
    /// The difference scaling.
    pub params: Softmax16Params,
}

/// Rows and depth as the tuning key's sizes.
fn key_shape(len: u32, depth: u32) -> KeyShape {
    let rows = len.checked_div(depth).unwrap_or(0);
    KeyShape {
        window: [0; 8],
        sizes: [u64::from(rows), u64::from(depth), 0, 0, 0],
    }
}

impl Operator for SoftmaxI16 {
    packed_fields!(rows(len, depth), params);
    fn operands(&self) -> Option<Operands> {
        let bytes = self.len.checked_mul(2)?;
        Operands::new(&[bytes], 0, bytes)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let x = view(input(inputs, 0), 0)?;
        Ok(ki::softmax_i16(
            &self.params,
            self.depth as usize,
            x,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Softmax16
    }
    fn layer(&self) -> Option<Layer> {
        let rows = rows_of(self.len, self.depth);
        Some(Layer::new(LayerKind::Softmax, rows, rows))
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.len, self.depth)
    }
}

impl Operator for SoftmaxI8 {
    packed_fields!(rows(len, depth), params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let out = view_mut(output)?;
        Ok(ki::softmax(
            &self.params,
            self.depth as usize,
            i8s(inputs, 0)?,
            out,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Softmax
    }
    fn layer(&self) -> Option<Layer> {
        let rows = rows_of(self.len, self.depth);
        Some(Layer::new(LayerKind::Softmax, rows, rows))
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.len, self.depth)
    }
}

impl Operator for SoftmaxI8ToI16 {
    packed_fields!(rows(len, depth), params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len.checked_mul(2)?)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::softmax_i8_to_i16(
            &self.params,
            self.depth as usize,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // The int8 kernel's loop, storing int16: measured on the firmware at 5,300 and 132,860
        // instructions for rows of 16 and 1,000, 13% and 18% above this class's model, within
        // its tolerance (a class of its own would change the HAL's tuning fingerprint).
        CpuKernel::Softmax
    }
    fn output_elements(&self) -> Option<u64> {
        Some(u64::from(self.len))
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.len, self.depth)
    }
}

/// SOFTMAX (int8, int16, and int8 to int16).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Softmax(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype == DataType::Int16 {
        return lower::int16(|| lower_i16(&x, &y, o.beta));
    }
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let depth = x
        .shape
        .dims()
        .last()
        .copied()
        .ok_or(unsupported("scalar input"))?;
    if y.dtype == DataType::Int16 {
        let params =
            SoftmaxParams::with_i16_output(quant(&x)?, o.beta, quant_of(&y, DataType::Int16)?)?;
        return Ok(compute(
            SoftmaxI8ToI16 { len, depth, params },
            operands(&[lower::Operand::Tensor(x.index)]),
        ));
    }
    let params = SoftmaxParams::new(quant(&x)?, o.beta, quant(&y)?)?;
    Ok(compute(
        SoftmaxI8 { len, depth, params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}

/// SOFTMAX from int16 to int16.
fn lower_i16(
    x: &crate::model::TensorInfo<'_>,
    y: &crate::model::TensorInfo<'_>,
    beta: f32,
) -> Result<lower::Lowered, lower::LowerError> {
    let q = |t| quant_of(t, DataType::Int16);
    let params = Softmax16Params::new(q(x)?, beta, q(y)?)?;
    let len = x.shape.num_elements();
    lower::check_elements(y, len as usize)?;
    let depth = x
        .shape
        .dims()
        .last()
        .copied()
        .ok_or(unsupported("scalar input"))?;
    Ok(compute(
        SoftmaxI16 { len, depth, params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
