//! Simulator configuration ([`SimConfig`]) and the cycle model: what every job costs.
//!
//! All cost functions are integer-only and total (no panics, no floats): rates of zero are
//! treated as one here (and rejected by [`SimNpu::new`](crate::SimNpu::new)), and every sum
//! or product saturates at `u64::MAX` instead of overflowing.

use npu_compute::hal::{Cycles, JobKind};
use npu_compute::ops::{DType, Op, OpKind, OpSet};

use crate::cost::U55Config;
use crate::cpu::CpuModel;
use crate::error::SimError;

/// The HAL's bounds, which the simulator shares: at most [`MAX_EXECUTION_UNITS`] units
/// ([`SimConfig::execution_units`] above it is a constructor error) and [`MAX_QUEUES`] queues
/// (index `0` is the DMA queue, `1 + n` is unit `n`: [`Queue::index`](npu_compute::hal::Queue::index)).
pub use npu_compute::hal::{MAX_EXECUTION_UNITS, MAX_QUEUES};

/// Output-stage cost of one int8 ADD element, in quarter cycles (1.5 cycles).
pub const ADD_QUARTER_CYCLES_PER_ELEMENT: u64 = 6;
/// Output-stage cost of one int8 MUL element, in quarter cycles (0.75 cycles).
pub const MUL_QUARTER_CYCLES_PER_ELEMENT: u64 = 3;
/// Output-stage cost of one int8 RELU element, in quarter cycles (0.5 cycles).
pub const RELU_QUARTER_CYCLES_PER_ELEMENT: u64 = 2;
/// How many times slower f32 runs than int8, for both the MAC array and the output stage
/// (the datapath is 8-bit; an f32 operation is modelled as four passes).
pub const F32_SLOWDOWN: u64 = 4;

/// Parameters of the simulated part. `Default` is an Ethos-U55-128-like NPU with one
/// execution unit on a shared-SRAM system (see each field for its default and where it comes
/// from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SimConfig {
    /// Int8 multiply-accumulates per cycle of one execution unit. Default 128 (Ethos-U55-128).
    pub macs_per_cycle: u32,
    /// Execution units (compute queues), 1..=[`MAX_EXECUTION_UNITS`]. Default 1.
    pub execution_units: u8,
    /// Bytes per cycle an execution unit reads and writes device memory. Default 8 (a 64-bit
    /// AXI port to shared SRAM, as in Vela's default `Shared_Sram` memory mode).
    pub sram_bytes_per_cycle: u32,
    /// Bytes per cycle of the DMA engine. Default 8 (same 64-bit port).
    pub dma_bytes_per_cycle: u32,
    /// Fixed cost of every compute job, in cycles. Default 64: an estimate of the command
    /// stream prologue of one operation (a few dozen one-cycle register writes of the
    /// operation's configuration) plus filling and draining the MAC/output pipeline. It makes
    /// many tiny jobs measurably worse than a few large ones, as on hardware.
    pub job_overhead_cycles: u32,
    /// Fixed cost of every transfer, in cycles. Default 32 (the SRAM read/write latency of
    /// Vela's default system configurations).
    pub dma_overhead_cycles: u32,
    /// Required alignment of memory bases and region offsets, in bytes: a power of two, at
    /// least 4 (so that an aligned region can be viewed as `f32`/`i32`). Default 16 (Ethos-U).
    pub alignment: u32,
    /// Operators and dtypes the simulated NPU accepts; the others run on the CPU fallback.
    /// Default [`ETHOS_U55_OPS`].
    pub ops: OpSet,
    /// Reported as [`Capabilities::reads_flash`](npu_compute::hal::Capabilities::reads_flash).
    /// Default `true`. (The simulator itself only addresses its two memories.)
    pub reads_flash: bool,
    /// Alignment of flash regions, reported as
    /// [`Capabilities::flash_alignment`](npu_compute::hal::Capabilities::flash_alignment):
    /// 4 by default, the natural alignment of the int32 biases read in place.
    pub flash_alignment: u32,
    /// The cycle model of the layer ops (convolutions, pooling, fully connected, softmax,
    /// elementwise with shapes, ...): `Some` = the Ethos-U55 model of [`cost`](crate::cost),
    /// calibrated on Vela, with weights prefetched through a [`Pipeline`](crate::cost::Pipeline);
    /// `None` = the simple model below for every op. The f32 ops and the issue-2 int8 ops over
    /// plain lengths always use the simple model.
    pub layers: Option<U55Config>,
    /// What the CPU fallback kernels cost, charged to the clock when the server reports a
    /// fallback ([`Npu::host_compute`](npu_compute::hal::Npu::host_compute)): `Some` = the
    /// model of [`cpu`](crate::cpu) (default [`CpuModel::CORTEX_M4_SCALAR`], calibrated on the
    /// firmware's measurement), so a tuner can time the CPU against the NPU; `None` = CPU work
    /// is free, as it was before the model existed.
    pub cpu: Option<CpuModel>,
}

/// What an Ethos-U55 runs, as Vela's supported-operator list (`SUPPORTED_OPS.md` of
/// ethos-u-vela 4.x, TFLite section) says: each family in the dtypes Vela places on the NPU.
/// The families the simulator ran before that list was followed (all of them, f32 too, which
/// the simulator models at [`F32_SLOWDOWN`]) keep running, so earlier figures stand.
pub const ETHOS_U55_OPS: OpSet = ethos_u55_ops();

const fn ethos_u55_ops() -> OpSet {
    use npu_compute::ops::DType::{F32, I16, I32, I8};
    use npu_compute::ops::OpKind as K;
    // (family, dtypes) pairs; one line per family.
    const PAIRS: &[(K, &[npu_compute::ops::DType])] = &[
        (K::Add, &[F32, I8, I16]),
        (K::Mul, &[F32, I8, I16]),
        (K::Relu, &[F32, I8, I16]),
        (K::FullyConnected, &[F32, I8, I16]),
        (K::Conv2d, &[F32, I8, I16]),
        (K::DepthwiseConv2d, &[F32, I8, I16]),
        (K::AveragePool2d, &[F32, I8, I16]),
        (K::MaxPool2d, &[F32, I8, I16]),
        (K::Softmax, &[F32, I8, I16]),
        (K::Mean, &[F32, I8, I16]),
        (K::Reshape, &[F32, I8, I16]),
        (K::BatchMatmul, &[F32, I8]),
        (K::Transpose, &[F32, I8, I16]),
        (K::Concatenation, &[F32, I8, I16]),
        (K::Sub, &[F32, I8, I16]),
        (K::Rsqrt, &[F32, I8]),
        // Not QuantizeInt32 (QUANTIZE to or from int32: Vela takes int32 tensors for ADD,
        // ARG_MAX, MUL, SHAPE, SUB and TRANSPOSE only) nor SoftmaxToInt16 (Vela's SOFTMAX needs
        // one type in and out).
        (K::Quantize, &[F32, I8, I16]),
        (K::Dequantize, &[F32, I8]),
        // Vela 3.10: elementwise passes (MAXIMUM, MINIMUM, ABS), lookup tables (LEAKY_RELU,
        // HARD_SWISH), chains of elementwise passes (SQUARED_DIFFERENCE, PRELU). NEG is not
        // on Vela's list.
        (K::SquaredDifference, &[I8]),
        (K::Maximum, &[I8]),
        (K::Minimum, &[I8]),
        (K::LeakyRelu, &[I8]),
        (K::Prelu, &[I8]),
        (K::HardSwish, &[I8]),
        (K::Abs, &[I8]),
        // PAD of height and width only (other pads lower to PadV2, on the CPU).
        (K::Pad, &[I8, I16]),
        // SLICE, SPLIT, SPLIT_V, UNPACK, STRIDED_SLICE of unit strides (others lower to
        // StridedSlice, on the CPU).
        (K::Slice, &[I8, I16]),
        (K::Pack, &[I8, I16]),
        // Vela: int8 input along the depth axis of at most 127 (not checked per operator).
        (K::ArgMax, &[I8]),
        // Vela: strides 1x1 or 2x2, the output the input times the strides (not checked).
        (K::TransposeConv, &[I8]),
        (K::Logistic, &[I8, I16]),
        (K::Tanh, &[I8, I16]),
        // SHAPE: int32 is allowed for it; it writes a few words. Not GATHER, CAST or the
        // space/depth/batch moves (not in the list).
        (K::Shape, &[I32]),
        // RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR of the sizes Vela runs (checked when
        // lowered: other sizes are the ResizeNearestOther / ResizeBilinearOther families).
        (K::ResizeNearestNeighbor, &[I8, I16]),
        (K::ResizeBilinear, &[I8]),
    ];
    let mut set = OpSet::EMPTY;
    let mut i = 0;
    while i < PAIRS.len() {
        let mut d = 0;
        while d < PAIRS[i].1.len() {
            set = set.with(PAIRS[i].0, PAIRS[i].1[d]);
            d += 1;
        }
        i += 1;
    }
    set
}

impl SimConfig {
    /// The default configuration as a constant (usable in `static` initialisers).
    pub const ETHOS_U55_128: SimConfig = SimConfig {
        macs_per_cycle: 128,
        execution_units: 1,
        sram_bytes_per_cycle: 8,
        dma_bytes_per_cycle: 8,
        job_overhead_cycles: 64,
        dma_overhead_cycles: 32,
        alignment: 16,
        ops: ETHOS_U55_OPS,
        reads_flash: true,
        flash_alignment: 4,
        layers: Some(U55Config::ETHOS_U55_128),
        cpu: Some(CpuModel::CORTEX_M4_SCALAR),
    };

    /// Checks the configuration on its own (memories are checked by
    /// [`SimNpu::new`](crate::SimNpu::new)).
    ///
    /// # Errors
    /// [`SimError::BadAlignment`], [`SimError::NoExecutionUnits`],
    /// [`SimError::TooManyExecutionUnits`] or [`SimError::ZeroRate`].
    pub fn validate(&self) -> Result<(), SimError> {
        if !self.alignment.is_power_of_two() || self.alignment < 4 {
            return Err(SimError::BadAlignment {
                alignment: self.alignment,
            });
        }
        if !self.flash_alignment.is_power_of_two() {
            return Err(SimError::BadAlignment {
                alignment: self.flash_alignment,
            });
        }
        if self.execution_units == 0 {
            return Err(SimError::NoExecutionUnits);
        }
        if usize::from(self.execution_units) > MAX_EXECUTION_UNITS {
            return Err(SimError::TooManyExecutionUnits {
                units: self.execution_units,
                max: MAX_EXECUTION_UNITS as u8,
            });
        }
        let rates = [
            (self.macs_per_cycle, "macs_per_cycle"),
            (self.sram_bytes_per_cycle, "sram_bytes_per_cycle"),
            (self.dma_bytes_per_cycle, "dma_bytes_per_cycle"),
        ];
        for (rate, parameter) in rates {
            if rate == 0 {
                return Err(SimError::ZeroRate { parameter });
            }
        }
        Ok(())
    }

    /// Cycles of a transfer of `bytes` bytes:
    /// `max(1, dma_overhead_cycles + ceil(bytes / dma_bytes_per_cycle))`.
    pub fn transfer_cost(&self, bytes: u32) -> Cycles {
        let stream = u64::from(bytes).div_ceil(u64::from(self.dma_bytes_per_cycle.max(1)));
        u64::from(self.dma_overhead_cycles)
            .saturating_add(stream)
            .max(1)
    }

    /// Compute-bound cycles of an operator (without overhead and memory traffic):
    ///
    /// - fully connected: `ceil(macs * r / macs_per_cycle)`, `r` = 1 for int8 and
    ///   [`F32_SLOWDOWN`] for f32;
    /// - elementwise: `ceil(elements * q * r / 4)` with `q` the per-element cost in quarter
    ///   cycles ([`ADD_QUARTER_CYCLES_PER_ELEMENT`], [`MUL_QUARTER_CYCLES_PER_ELEMENT`],
    ///   [`RELU_QUARTER_CYCLES_PER_ELEMENT`]) and `r` as above. Elementwise ops run in the
    ///   output stage, so their cost does not scale with `macs_per_cycle`.
    pub fn compute_cycles(&self, op: &Op) -> Cycles {
        let rate = match op.dtype() {
            DType::F32 => F32_SLOWDOWN,
            // The Ethos-U55's MAC array takes 16-bit activations at half its 8-bit rate.
            DType::I16 => 2,
            DType::I8 | DType::I32 => 1,
        };
        // Elementwise ops run in the output stage, by elements (their `macs`); the rest in
        // the MAC array.
        let quarter = match op.kind() {
            OpKind::Add => ADD_QUARTER_CYCLES_PER_ELEMENT,
            OpKind::Mul => MUL_QUARTER_CYCLES_PER_ELEMENT,
            OpKind::Relu => RELU_QUARTER_CYCLES_PER_ELEMENT,
            _ => {
                return op
                    .macs()
                    .saturating_mul(rate)
                    .div_ceil(u64::from(self.macs_per_cycle.max(1)))
            }
        };
        op.macs()
            .saturating_mul(quarter)
            .saturating_mul(rate)
            .div_ceil(4)
    }

    /// Memory-bound cycles of a compute job moving `bytes` bytes (inputs plus output) through
    /// the execution unit's SRAM port: `ceil(bytes / sram_bytes_per_cycle)`.
    pub fn memory_cycles(&self, bytes: u64) -> Cycles {
        bytes.div_ceil(u64::from(self.sram_bytes_per_cycle.max(1)))
    }

    /// Cycles of a compute job whose regions total `io_bytes` (every input plus the output):
    /// `max(1, job_overhead_cycles + max(compute_cycles(op), memory_cycles(io_bytes)))`
    /// (compute and memory traffic overlap; the slower one bounds the job).
    pub fn compute_cost(&self, op: &Op, io_bytes: u64) -> Cycles {
        let body = self.compute_cycles(op).max(self.memory_cycles(io_bytes));
        u64::from(self.job_overhead_cycles)
            .saturating_add(body)
            .max(1)
    }

    /// Cycles of a job as the simulator schedules it ([`transfer_cost`](Self::transfer_cost)
    /// of `src.len` or [`compute_cost`](Self::compute_cost) over the job's regions).
    /// Always at least 1, so a job always ends strictly after it starts.
    pub fn job_cost(&self, kind: &JobKind<'_>) -> Cycles {
        match kind {
            JobKind::Transfer { src, .. } => self.transfer_cost(src.len),
            JobKind::Compute {
                op, inputs, output, ..
            } => {
                let io = inputs.iter().fold(u64::from(output.len), |acc, r| {
                    acc.saturating_add(u64::from(r.len))
                });
                self.compute_cost(op, io)
            }
        }
    }
}

impl Default for SimConfig {
    /// [`SimConfig::ETHOS_U55_128`].
    fn default() -> Self {
        Self::ETHOS_U55_128
    }
}
