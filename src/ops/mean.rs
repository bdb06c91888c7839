//! Reductions over any set of axes (int8): MEAN, SUM, REDUCE_MAX and REDUCE_MIN, TFLM's
//! arithmetic.
//! Operands `[input]`; the axes, a constant tensor, are read at prepare and never reach the
//! device. `keep_dims` does not change the bytes.
//!
//! Where they run: Vela (3.10, `SUPPORTED_OPS.md`) places MEAN on the Ethos-U55, under
//! constraints on the axes and sizes that the simulator does not check per operator; SUM,
//! REDUCE_MAX and REDUCE_MIN are not in Vela's list, so they run on the CPU fallback. All price
//! on the
//! CPU as [`CpuKernel::Mean`]: the same loop nest over every input element (REDUCE_MAX takes a
//! maximum (REDUCE_MIN a minimum) where MEAN and SUM add; the firmware measures SUM at 2% and
//! REDUCE_MAX at 15% above the Mean rate).

use npu_kernels::int8::{self as ki, MeanParams, ReduceShape};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, const_i32s, operands, quant, unsupported, LowerCtx};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::BuiltinOp;

/// int8 MEAN.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MeanI8 {
    /// Geometry and requantization.
    pub params: MeanParams,
}

impl Operator for MeanI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: MeanParams::unpack(r, true)?,
        })
    }
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

/// int8 SUM.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SumI8 {
    /// Geometry and requantization.
    pub params: MeanParams,
}

impl Operator for SumI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: MeanParams::unpack(r, false)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        let (i, o) = self.params.lens();
        Operands::new(&[bytes(i)?], 0, bytes(o)?)
    }
    fn macs(&self) -> u64 {
        self.params.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::sum(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Mean
    }
}

/// int8 REDUCE_MAX (the input and output quantization equal).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReduceMaxI8 {
    /// Geometry.
    pub shape: ReduceShape,
}

impl Operator for ReduceMaxI8 {
    packed_fields!(shape);
    fn operands(&self) -> Option<Operands> {
        let (i, o) = self.shape.lens();
        Operands::new(&[bytes(i)?], 0, bytes(o)?)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::reduce_max(
            &self.shape,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Mean
    }
}

/// int8 REDUCE_MIN (the input and output quantization equal).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReduceMinI8 {
    /// Geometry.
    pub shape: ReduceShape,
}

impl Operator for ReduceMinI8 {
    packed_fields!(shape);
    fn operands(&self) -> Option<Operands> {
        let (i, o) = self.shape.lens();
        Operands::new(&[bytes(i)?], 0, bytes(o)?)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::reduce_min(
            &self.shape,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Mean
    }
}

/// MEAN, SUM, REDUCE_MAX and REDUCE_MIN (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, axes_t, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let mut axes = [0i32; 8];
    let n = const_i32s(&axes_t, &mut axes)?;
    let (dims, axes, xq, yq) = (x.shape.dims(), &axes[..n], quant(&x)?, quant(&y)?);
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    let lowered = match ctx.builtin() {
        BuiltinOp::Sum => {
            let params = MeanParams::for_sum(dims, axes, xq, yq)?;
            lower::check_elements(&y, params.lens().1)?;
            compute(SumI8 { params }, list)
        }
        BuiltinOp::ReduceMax | BuiltinOp::ReduceMin => {
            // TFLM's Eval refuses any difference (the scales compared as doubles).
            if xq != yq {
                return Err(unsupported(
                    "REDUCE_MAX / REDUCE_MIN changing the quantization",
                ));
            }
            let shape = ReduceShape::new(dims, axes)?;
            lower::check_elements(&y, shape.lens().1)?;
            if ctx.builtin() == BuiltinOp::ReduceMax {
                compute(ReduceMaxI8 { shape }, list)
            } else {
                compute(ReduceMinI8 { shape }, list)
            }
        }
        _ => {
            let params = MeanParams::for_axes(dims, axes, xq, yq)?;
            lower::check_elements(&y, params.lens().1)?;
            compute(MeanI8 { params }, list)
        }
    };
    Ok(lowered)
}
