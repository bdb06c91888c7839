//! LOG_SOFTMAX (int8) over rows of the innermost dimension, TFLM's fixed-point exponentials
//! and logarithm; the output fixed at scale 16/256, zero point 127. Operands `[input]`.
//!
//! Where it runs: not in Vela's supported operators (3.10), so on the CPU fallback, priced as
//! [`CpuKernel::LogSoftmax`] (rates measured by the firmware): per element (an exponential and
//! two rescalings) and per row for the logarithm ([`Operator::taps`] counts the rows).

use npu_kernels::int8::{self as ki, LogSoftmaxParams};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{CpuKernel, OpError, Operands, Operator};

/// int8 LOG_SOFTMAX over rows of `depth` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogSoftmaxI8 {
    /// Elements in all.
    pub len: u32,
    /// Elements per row (the innermost dimension).
    pub depth: u32,
    /// Fixed-point parameters.
    pub params: LogSoftmaxParams,
}

impl Operator for LogSoftmaxI8 {
    packed_fields!(rows(len, depth), params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::log_softmax(
            &self.params,
            self.depth as usize,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::LogSoftmax
    }
    /// Rows: each takes one logarithm.
    fn taps(&self) -> u64 {
        u64::from(self.len.checked_div(self.depth).unwrap_or(0))
    }
}

/// LOG_SOFTMAX (int8): TFLM requires the output shape to be the input's.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let params = LogSoftmaxParams::new(quant(&x)?, quant(&y)?)?;
    if x.shape.dims() != y.shape.dims() {
        return Err(unsupported(
            "LOG_SOFTMAX output shape other than the input's",
        ));
    }
    let depth = x
        .shape
        .dims()
        .last()
        .copied()
        .ok_or(unsupported("scalar input"))?;
    Ok(compute(
        LogSoftmaxI8 {
            len: x.shape.num_elements(),
            depth,
            params,
        },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
