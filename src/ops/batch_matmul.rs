//! BATCH_MATMUL (int8): a batch of matrix products, with optional adjoints. Operands
//! `[lhs, rhs]`.

use npu_kernels::int8::{self as ki, BatchMatmulParams};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{bytes, padded, CpuKernel, KeyShape, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::BuiltinOptions;

/// int8 BATCH_MATMUL.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BatchMatmulI8 {
    /// Shapes, adjoint flags and requantization.
    pub params: BatchMatmulParams,
}

/// Rows of the output (its second-to-last dimension) times its batch: with the output's
/// element count and the LHS's, it gives the reduction depth.
fn batch_and_rows(p: &BatchMatmulParams) -> u64 {
    let out = p.output_shape();
    let dims = out.as_slice();
    let batch_and_rows: u64 = dims.iter().rev().skip(1).map(|&d| u64::from(d)).product();
    batch_and_rows.max(1)
}

fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Operator for BatchMatmulI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: BatchMatmulParams::unpack(r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        let (l, r, o) = self.params.lens();
        Operands::new(&[bytes(l)?, bytes(r)?], 0, bytes(o)?)
    }
    fn macs(&self) -> u64 {
        let (lhs, _, out) = self.params.lens();
        // out = batch · rows · cols and lhs = batch · rows · depth.
        let depth = lhs as u64 / batch_and_rows(&self.params);
        (out as u64).saturating_mul(depth)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (l, r) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        Ok(ki::batch_matmul(&self.params, l, r, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::BatchMatmul
    }
    fn layer(&self) -> Option<Layer> {
        let (lhs, rhs, _) = self.params.lens();
        let out = padded(self.params.output_shape().as_slice());
        let depth = u32_of(lhs) / (out[0] * out[1] * out[2]).max(1);
        let rhs_rows = u32_of(rhs) / (out[0] * out[1] * out[3]).max(1);
        Some(Layer {
            ifm2: Some([out[0], out[1], rhs_rows, out[3]]),
            ifm2_operand: Some(1),
            ..Layer::new(LayerKind::BatchMatmul, [out[0], out[1], out[2], depth], out)
        })
    }
    fn key_shape(&self) -> KeyShape {
        // B, M, K, N: batch, rows, depth, columns.
        let out = self.params.output_shape();
        let dims = out.as_slice();
        let (lhs, _, _) = self.params.lens();
        let mut rev = dims.iter().rev().map(|&d| u64::from(d));
        let n = rev.next().unwrap_or(0);
        let m = rev.next().unwrap_or(0);
        let b = rev.fold(1u64, u64::saturating_mul);
        // lhs = B · M · K elements.
        let depth = (lhs as u64).checked_div(b.saturating_mul(m)).unwrap_or(0);
        KeyShape {
            window: [0; 8],
            sizes: [b, m, depth, n, 0],
        }
    }
}

/// BATCH_MATMUL (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::BatchMatMul(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let (a, b, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let params = BatchMatmulParams::new(
        a.shape.dims(),
        b.shape.dims(),
        o.adj_x,
        o.adj_y,
        quant(&a)?,
        quant(&b)?,
        quant(&y)?,
    )?;
    lower::check_elements(&y, params.lens().2)?;
    Ok(compute(
        BatchMatmulI8 { params },
        operands(&[
            lower::Operand::Tensor(a.index),
            lower::Operand::Tensor(b.index),
        ]),
    ))
}
