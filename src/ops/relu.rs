//! ReLU on its own (TFLite fuses it into the operator before it, which is where models have
//! it; the eager client runs it standalone). Operands `[input]`.

use npu_kernels::f32 as kf;
use npu_kernels::int8::{self as ki, ReluParams};

use super::interp::{i8s, input, view, view_mut};
use super::{CpuKernel, Op, OpError, Operands, Operator};

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

impl Operator for ReluF32 {
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
