//! RSQRT (int8): the reciprocal square root of each element, TFLM's fixed-point arithmetic.
//! Operands `[input]`.

use npu_kernels::int8::{self as ki, RsqrtParams};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, operands, quant, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};

/// int8 RSQRT on `len` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RsqrtI8 {
    /// Elements.
    pub len: u32,
    /// Fixed-point parameters.
    pub params: RsqrtParams,
}

impl Operator for RsqrtI8 {
    packed_fields!(len, params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::rsqrt(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Rsqrt
    }
    fn layer(&self) -> Option<Layer> {
        let rows = rows_of(self.len, 1);
        Some(Layer::new(LayerKind::Rsqrt, rows, rows))
    }
}

/// RSQRT (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let params = RsqrtParams::new(quant(&x)?, quant(&y)?)?;
    Ok(compute(
        RsqrtI8 { len, params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
