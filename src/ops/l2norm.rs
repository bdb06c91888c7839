//! L2_NORMALIZATION (int8): each row of the innermost dimension divided by its L2 norm, TFLM's
//! fixed-point inverse square root; the output in units of 1/128, zero point 0. Operands
//! `[input]`.
//!
//! Where it runs: not in Vela's supported operators (3.10), so on the CPU fallback. It prices
//! as [`CpuKernel::L2Norm`] (rates measured by the firmware): per element, and per row for the
//! inverse square root ([`Operator::taps`] counts the rows).

use npu_kernels::int8 as ki;
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{CpuKernel, OpError, Operands, Operator};
use crate::model::{Activation, BuiltinOptions};

/// int8 L2_NORMALIZATION of `len` elements in rows of `depth`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct L2NormI8 {
    /// Elements.
    pub len: u32,
    /// Row length (the innermost dimension).
    pub depth: u32,
    /// The input's zero point.
    pub input_zero_point: i32,
}

impl Operator for L2NormI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put(self.len);
        w.put(self.depth);
        w.put_i32(self.input_zero_point);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (len, depth) = r.take_rows()?;
        Ok(Self {
            len,
            depth,
            input_zero_point: r.take_zero_point("input zero point")?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::l2_normalization(
            self.input_zero_point,
            self.depth as usize,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::L2Norm
    }
    /// Rows: each takes one inverse square root.
    fn taps(&self) -> u64 {
        u64::from(self.len.checked_div(self.depth).unwrap_or(0))
    }
}

/// L2_NORMALIZATION (int8): TFLM takes no fused activation and at most 4 dimensions.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    if let BuiltinOptions::L2Norm(o) = ctx.options() {
        if o.activation != Activation::None {
            return Err(unsupported("fused activation"));
        }
    }
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let (xq, _) = (quant(&x)?, quant(&y)?);
    let dims = x.shape.dims();
    let Some(&depth) = dims.last() else {
        return Err(unsupported("L2_NORMALIZATION of a scalar"));
    };
    if dims.len() > 4 {
        return Err(unsupported("L2_NORMALIZATION input rank above 4"));
    }
    if y.shape.dims() != dims {
        return Err(unsupported(
            "L2_NORMALIZATION output shape other than the input's",
        ));
    }
    let len = x.shape.num_elements();
    Ok(compute(
        L2NormI8 {
            len,
            depth,
            input_zero_point: xq.zero_point,
        },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
