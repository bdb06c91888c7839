//! The host CPU's cost model: what running an operator on the CPU fallback kernels costs.
//!
//! # Why
//!
//! The simulator's clock moves with jobs and with [`SimNpu::advance`](crate::SimNpu::advance);
//! without this model a CPU fallback would cost nothing, and a tuner timing "CPU vs NPU" would
//! find a free lunch. With [`SimConfig::cpu`](crate::SimConfig::cpu) set, the server's call
//! to [`Npu::host_compute`](npu_compute::hal::Npu::host_compute) after each fallback kernel
//! advances the clock by [`CpuModel::cycles`], as the CPU's own cycle counter would on a
//! board, and [`Npu::clock_counts_cpu`](npu_compute::hal::Npu::clock_counts_cpu) says so.
//!
//! # Model
//!
//! ```text
//! cycles = call_cycles
//!        + ceil(work × per_work[class] / 16)      work = Op::macs()
//!        + ceil(outputs × output_sixteenths / 16)  (MAC classes only: requantisation)
//! ```
//!
//! `work` is [`Op::macs`]: multiply-accumulates for convolutions and matrix products, window
//! taps for pooling, elements for the rest. The class is the kernel's loop structure
//! ([`CpuClass`]), not its dtype. Rates are in sixteenths of a cycle so that a cost below one
//! cycle per element stays exact in integers.
//!
//! # Calibration
//!
//! [`CpuModel::CORTEX_M4_SCALAR`] comes from the example firmware (`examples/firmware`,
//! module `cpu_cost`), which times the `npu-kernels` fallback of every kws_dscnn layer and of
//! a set of synthetic layers on QEMU's Cortex-M4 (`-icount shift=0`, so SysTick counts
//! instructions), built as firmware builds them (`opt-level = "s"`, LTO). It counts
//! *instructions* and charges one cycle each (CPI 1): on a Cortex-M4 or a Cortex-M55 running
//! these scalar loops the true figure is higher (loads and taken branches take two cycles),
//! so the model favours the CPU, never the NPU. The CPU is assumed to run on the NPU's clock,
//! as on Corstone-300 and -310. The firmware checks the model against its measurement at
//! every run, so a kernel change that moves the figures fails CI until the model follows.

use npu_compute::hal::{Op, OpKind};

/// The loop structure of a fallback kernel, which sets its cost per unit of [`Op::macs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CpuClass {
    /// A dot product per output: ungrouped convolution, fully connected, batch matmul.
    Dot,
    /// A depthwise convolution: one tap per MAC, channel-strided.
    Depthwise,
    /// A window reduction: average and max pooling, mean.
    Pool,
    /// Elementwise arithmetic: add, sub, mul, relu, rsqrt, (de/re)quantise.
    Elementwise,
    /// Softmax: a max, an exponent and a division per element.
    Softmax,
    /// Data movement: reshape, transpose, concatenation.
    Copy,
}

impl CpuClass {
    /// The class of an operator kind.
    pub const fn of(kind: OpKind) -> CpuClass {
        match kind {
            OpKind::Conv2d | OpKind::FullyConnected | OpKind::BatchMatmul => CpuClass::Dot,
            OpKind::DepthwiseConv2d => CpuClass::Depthwise,
            OpKind::AveragePool2d | OpKind::MaxPool2d | OpKind::Mean => CpuClass::Pool,
            OpKind::Softmax => CpuClass::Softmax,
            OpKind::Reshape | OpKind::Transpose | OpKind::Concatenation => CpuClass::Copy,
            OpKind::Add
            | OpKind::Sub
            | OpKind::Mul
            | OpKind::Relu
            | OpKind::Rsqrt
            | OpKind::Quantize
            | OpKind::Dequantize => CpuClass::Elementwise,
        }
    }
}

/// Cycles the CPU takes to run operators on the fallback kernels (see the [module
/// docs](self)). Rates are in sixteenths of a cycle per unit of [`Op::macs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpuModel {
    /// Fixed cycles per operator: the call, parameter checks, slice views.
    pub call_cycles: u32,
    /// Per MAC of a [`CpuClass::Dot`] kernel.
    pub dot_sixteenths: u32,
    /// Per MAC of a [`CpuClass::Depthwise`] kernel.
    pub depthwise_sixteenths: u32,
    /// Per window tap of a [`CpuClass::Pool`] kernel.
    pub pool_sixteenths: u32,
    /// Per element of a [`CpuClass::Elementwise`] kernel.
    pub element_sixteenths: u32,
    /// Per element of a [`CpuClass::Softmax`] kernel.
    pub softmax_sixteenths: u32,
    /// Per element of a [`CpuClass::Copy`] kernel.
    pub copy_sixteenths: u32,
    /// Per output element of a [`CpuClass::Dot`] or [`CpuClass::Depthwise`] kernel: the bias,
    /// the requantisation and the store.
    pub output_sixteenths: u32,
}

impl CpuModel {
    /// The scalar `npu-kernels` on a Cortex-M4 class core at one cycle per instruction,
    /// fitted to the firmware's measurement (see [Calibration](self#calibration)).
    pub const CORTEX_M4_SCALAR: CpuModel = CpuModel {
        call_cycles: 400,
        dot_sixteenths: 160,
        depthwise_sixteenths: 240,
        pool_sixteenths: 160,
        element_sixteenths: 480,
        softmax_sixteenths: 3200,
        copy_sixteenths: 64,
        output_sixteenths: 640,
    };

    /// The per-work rate of `class`, in sixteenths of a cycle.
    pub const fn rate(&self, class: CpuClass) -> u32 {
        match class {
            CpuClass::Dot => self.dot_sixteenths,
            CpuClass::Depthwise => self.depthwise_sixteenths,
            CpuClass::Pool => self.pool_sixteenths,
            CpuClass::Elementwise => self.element_sixteenths,
            CpuClass::Softmax => self.softmax_sixteenths,
            CpuClass::Copy => self.copy_sixteenths,
        }
    }

    /// Cycles of `op` on the CPU (saturating, never panics on unvalidated shapes).
    pub fn cycles(&self, op: &Op) -> u64 {
        let class = CpuClass::of(op.kind());
        let work = op.macs().saturating_mul(u64::from(self.rate(class)));
        let outputs = match class {
            CpuClass::Dot | CpuClass::Depthwise => {
                output_elements(op).saturating_mul(u64::from(self.output_sixteenths))
            }
            _ => 0,
        };
        u64::from(self.call_cycles).saturating_add(work.saturating_add(outputs).div_ceil(16))
    }
}

impl Default for CpuModel {
    /// [`CpuModel::CORTEX_M4_SCALAR`].
    fn default() -> Self {
        Self::CORTEX_M4_SCALAR
    }
}

/// Output elements of `op` (its output bytes over the element size); 0 when the sizes
/// overflow.
pub fn output_elements(op: &Op) -> u64 {
    op.operands().map_or(0, |o| {
        u64::from(o.output) / u64::from(op.dtype().size().max(1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_grows_with_work_and_saturates() {
        let m = CpuModel::default();
        let small = m.cycles(&Op::Reshape { len: 16 });
        let large = m.cycles(&Op::Reshape { len: 1600 });
        assert!(small >= u64::from(m.call_cycles));
        assert_eq!(
            large - small,
            (1600 * 64u64).div_ceil(16) - (16 * 64u64).div_ceil(16)
        );
        let max = CpuModel {
            call_cycles: u32::MAX,
            copy_sixteenths: u32::MAX,
            ..m
        };
        assert!(max.cycles(&Op::Reshape { len: u32::MAX }) > u64::from(u32::MAX));
    }
}
