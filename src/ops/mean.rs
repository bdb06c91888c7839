//! MEAN (int8) over any set of axes, TFLM's rounding. Operands `[input]`; the axes, a constant
//! tensor, are read at prepare and never reach the device.

use npu_kernels::int8::{self as ki, MeanParams};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, const_i32s, operands, quant, LowerCtx};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};

/// int8 MEAN.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MeanI8 {
    /// Geometry and requantization.
    pub params: MeanParams,
}

impl Operator for MeanI8 {
    fn operands(&self) -> Option<Operands> {
        let (i, o) = self.params.lens();
        Operands::new(&[bytes(i)?], 0, bytes(o)?)
    }
    fn macs(&self) -> u64 {
        self.params.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::mean(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Mean
    }
    fn layer(&self) -> Option<Layer> {
        let (extents, reduced) = self.params.extents();
        let ifm = padded(extents);
        let mut ofm = ifm;
        let mut axes = 0u8;
        let shift = 4 - extents.len().min(4);
        for i in 0..extents.len().min(4) {
            if reduced >> i & 1 != 0 {
                axes |= 1 << (i + shift);
                ofm[i + shift] = 1;
            }
        }
        Some(Layer {
            axes,
            ..Layer::new(LayerKind::Mean, ifm, ofm)
        })
    }
}

/// MEAN (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, axes_t, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let mut axes = [0i32; 8];
    let n = const_i32s(&axes_t, &mut axes)?;
    let params = MeanParams::for_axes(x.shape.dims(), &axes[..n], quant(&x)?, quant(&y)?)?;
    lower::check_elements(&y, params.lens().1)?;
    Ok(compute(
        MeanI8 { params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
