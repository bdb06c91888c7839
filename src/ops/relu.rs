//! ReLU on its own (TFLite fuses it into the operator before it, which is where most models
//! have it; the eager client runs it standalone), and the standalone RELU and RELU6 builtins.
//! Operands `[input]`.
//!
//! TFLM computes the two builtins differently on int8: RELU rescales to the output's
//! quantization ([`ReluI8`]), RELU6 only clamps the input to its own quantized 0 and 6
//! ([`Relu6I8`]). Vela runs both on the NPU (the ReLU family is on the NPU set). TFLM has no
//! RELU_N1_TO_1 kernel at all (the builtin is not registered), so it is not lowered.

use npu_kernels::f32 as kf;
use npu_kernels::int8::{self as ki, Relu6Params, ReluParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, LowerCtx};
use super::{CpuKernel, Op, OpError, Operands, Operator};
use crate::model::BuiltinOp;

/// `out = max(0, x)` on `len` f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReluF32 {
    /// Elements.
    pub len: u32,
}

/// int8 ReLU (the RELU family: its clamp in the params), TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReluI8 {
    /// Elements.
    pub len: u32,
    /// Requantization parameters.
    pub params: ReluParams,
}

/// int8 RELU6 as TFLM computes it: the input clamped to its quantized `[0, 6]`, unrescaled.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Relu6I8 {
    /// Elements.
    pub len: u32,
    /// The clamp bounds.
    pub params: Relu6Params,
}

impl Operator for ReluF32 {
    packed_fields!(len);
    fn operands(&self) -> Option<Operands> {
        let b = self.len.checked_mul(4)?;
        Operands::new(&[b], 0, b)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(kf::relu(view(input(inputs, 0), 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ReluF32
    }
}

impl Operator for ReluI8 {
    packed_fields!(len, params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::relu(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Relu
    }
    fn runs_in_place(&self) -> bool {
        true
    }
    fn prefix(&self, len: u32) -> Option<Op> {
        Some(ReluI8 { len, ..*self }.into())
    }
}

impl Operator for Relu6I8 {
    packed_fields!(len, params);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::relu6(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Compare
    }
    fn runs_in_place(&self) -> bool {
        true
    }
    fn prefix(&self, len: u32) -> Option<Op> {
        Some(Relu6I8 { len, ..*self }.into())
    }
}

/// RELU and RELU6 (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(if ctx.builtin() == BuiltinOp::Relu6 {
        compute(
            Relu6I8 {
                len,
                params: Relu6Params::new(xq)?,
            },
            list,
        )
    } else {
        compute(
            ReluI8 {
                len,
                params: ReluParams::new(xq, yq)?,
            },
            list,
        )
    })
}
