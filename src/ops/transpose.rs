//! TRANSPOSE (int8): an axis permutation, a constant read at prepare. Operands `[input]`.

use npu_kernels::int8::{self as ki, TransposeParams};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, const_i32s, operands, quant, unsupported, LowerCtx};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};

/// int8 TRANSPOSE.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransposeI8 {
    /// Shape and permutation.
    pub params: TransposeParams,
}

impl Operator for TransposeI8 {
    packed_fields!(params);
    fn operands(&self) -> Option<Operands> {
        let n = bytes(self.params.elements())?;
        Operands::new(&[n], 0, n)
    }
    fn macs(&self) -> u64 {
        self.params.elements() as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::transpose(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Transpose
    }
    fn layer(&self) -> Option<Layer> {
        let out = padded(self.params.output_shape().as_slice());
        Some(Layer::new(LayerKind::Transpose, out, out))
    }
}

/// TRANSPOSE (int8), the quantization unchanged.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, perm_t, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    if quant(&x)? != quant(&y)? {
        return Err(unsupported("TRANSPOSE changing the quantization"));
    }
    let mut perm = [0i32; 8];
    let n = const_i32s(&perm_t, &mut perm)?;
    let params = TransposeParams::new(x.shape.dims(), &perm[..n])?;
    if params.output_shape().as_slice() != y.shape.dims() {
        return Err(unsupported(
            "TRANSPOSE output shape other than the permuted input",
        ));
    }
    Ok(compute(
        TransposeI8 { params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
