//! SOFTMAX (int8) over rows of the innermost dimension, TFLM's fixed-point exponentials.
//! Operands `[input]`.

use npu_kernels::int8::{self as ki, SoftmaxParams};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, KeyShape, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::BuiltinOptions;

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

impl Operator for SoftmaxI8 {
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
        let rows = self.len.checked_div(self.depth).unwrap_or(0);
        KeyShape {
            window: [0; 8],
            sizes: [u64::from(rows), u64::from(self.depth), 0, 0, 0],
        }
    }
}

/// SOFTMAX (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Softmax(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let params = SoftmaxParams::new(quant(&x)?, o.beta, quant(&y)?)?;
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let depth = x
        .shape
        .dims()
        .last()
        .copied()
        .ok_or(unsupported("scalar input"))?;
    Ok(compute(
        SoftmaxI8 { len, depth, params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
