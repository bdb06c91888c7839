//! Simulator configuration ([`SimConfig`]) and the cycle model: what every job costs.
//!
//! All cost functions are integer-only and total (no panics, no floats): rates of zero are
//! treated as one here (and rejected by [`SimNpu::new`](crate::SimNpu::new)), and every sum
//! or product saturates at `u64::MAX` instead of overflowing.

use npu_compute::hal::{Bandwidth, Cycles, JobKind, Space};
use npu_compute::ops::{DType, Op, OpKind, OpSet};

use crate::cost::{scale_by_mac_array, U55Config, REFERENCE_MACS_PER_CYCLE};
use crate::cpu::CpuModel;
use crate::error::SimError;
use crate::faults::FaultPlan;

/// The HAL's bounds, which the simulator shares: at most [`MAX_EXECUTION_UNITS`] units
/// ([`SimConfig::execution_units`] above it is a constructor error) and [`MAX_QUEUES`] queues
/// (index `0` is the DMA queue, `1 + n` is unit `n`: [`Queue::index`](npu_compute::hal::Queue::index)).
pub use npu_compute::hal::{MAX_EXECUTION_UNITS, MAX_QUEUES};

/// [`SimConfig::idle_tick_cycles`]'s default: 1 ms of a 100 MHz core.
pub const DEFAULT_IDLE_TICK_CYCLES: Cycles = 100_000;

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
///
/// # Execution units
///
/// The part has [`execution_units`](Self::execution_units) units, unit `n` described by
/// [`units[n]`](Self::units): a name and the size of its MAC array. The rates and the layer
/// model below describe a unit of the reference size, 128 MACs
/// ([`REFERENCE_MACS_PER_CYCLE`]); a unit of `m` MACs is costed with its MAC work `m / 128`
/// times as fast ([`unit_macs_per_cycle`](Self::unit_macs_per_cycle),
/// [`unit_layers`](Self::unit_layers)). Every unit of 128 MACs, which is what every
/// constructor and `..SimConfig::default()` gives, is therefore exactly the configuration
/// above.
///
/// # Shared memory ports
///
/// The units are cores of one part: they share the memory system. By default (and there is
/// no other mode) every compute job holds the arena's **SRAM port** and the **flash port**
/// for the cycles its traffic needs at their bandwidth, and two jobs cannot hold one port at
/// once. Why: the memory system is Vela's default for the Ethos-U55 (`Shared_Sram`: the arena
/// in one SRAM behind a 64-bit port, [`sram_bytes_per_cycle`](Self::sram_bytes_per_cycle),
/// the constants in one flash behind the other), and the simulator has one arena and one
/// flash, so units that run side by side divide those memories' bandwidth rather than each
/// bringing its own. A memory-bound layer split over two units then takes no less time than
/// on one. (A part whose units each have a private SRAM would need a mode this model does
/// not have.) At [`submit`](npu_compute::hal::Npu::submit),
/// a compute job on unit `q` whose start is `s` (as before: `max(now, unit free, deps)`):
///
/// ```text
/// sram_start = max(s, sram_free);   sram_end  = sram_start  + sram cycles
/// flash_start = max(s, flash_free); flash_end = flash_start + flash cycles
/// end = max(s + its own cycles, sram_end, flash_end)
/// sram_free = sram_end, flash_free = flash_end   (for a port the job uses)
/// ```
///
/// A job's port cycles are, with the layer model, the layer's
/// [`prefetched_sram`](crate::cost::CostBreakdown::prefetched_sram) and
/// [`prefetched_flash`](crate::cost::CostBreakdown::prefetched_flash) (its weights are
/// prefetched to SRAM by the [`Pipeline`](crate::cost::Pipeline), whose one DMA channel is the
/// flash port's weight traffic, shared by every unit), and otherwise
/// [`memory_cycles`](Self::memory_cycles) of its inputs and output on SRAM and none on
/// flash; each at most the layer's run time (`prefetched`, or the job's cycles), since a job
/// cannot hold a port longer than it runs. Reservations are made in submission order with no
/// gap filling. Transfers do not take part: the DMA engine keeps its own port
/// ([`dma_bytes_per_cycle`](Self::dma_bytes_per_cycle)), on whatever queue they run, as
/// before. The exception is the slow memory tier ([`slow`](Self::slow)), which sits on the
/// flash port: a job's or a transfer's bytes there add their cycles to its flash
/// reservation. With one unit nothing changes: its jobs run one after another, each holding the
/// ports no longer than it runs, so the ports are always free when the next one starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SimConfig {
    /// Int8 multiply-accumulates per cycle of a reference execution unit (a
    /// [`UnitConfig`] of 128 MACs) in the simple model. Default 128 (Ethos-U55-128). A unit
    /// of `m` MACs runs `macs_per_cycle * m / 128`.
    pub macs_per_cycle: u32,
    /// Execution units (compute queues), 1..=[`MAX_EXECUTION_UNITS`]. Default 1.
    pub execution_units: u8,
    /// Each execution unit's kind: the first [`execution_units`](Self::execution_units) are
    /// used. Default [`UnitConfig::ETHOS_U55_128`] for all (see
    /// [Execution units](Self#execution-units)).
    pub units: [UnitConfig; MAX_EXECUTION_UNITS],
    /// Bytes per cycle an execution unit reads and writes device memory. Default 8 (a 64-bit
    /// AXI port to shared SRAM, as in Vela's default `Shared_Sram` memory mode).
    pub sram_bytes_per_cycle: u32,
    /// Bytes per cycle of the DMA engine. Default 8 (same 64-bit port).
    pub dma_bytes_per_cycle: u32,
    /// The slow memory tier's port ([`Space::Slow`], the memory given with
    /// [`SimNpu::with_slow_memory`](crate::SimNpu::with_slow_memory)), reported by
    /// [`Npu::bandwidth`](npu_compute::hal::Npu::bandwidth). Default 1 byte a cycle after 64
    /// cycles: Vela's `Dedicated_Sram` memory mode (the arena off chip, SRAM a cache) puts the
    /// arena on the AXI1 port, which `Ethos_U55_High_End_Embedded` clocks at an eighth of the
    /// NPU on 8 bytes (`OffChipFlash_clock_scale=0.125`, read latency 64). That port is the
    /// flash's, so a job's or a transfer's bytes in the slow tier hold the
    /// [flash port](Self#shared-memory-ports) for [`Bandwidth::cycles_for`] them: slow traffic
    /// and constants read from flash contend, as they do on one AXI port.
    pub slow: Bandwidth,
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
    /// Faults to inject (see [`faults`](crate::faults)). Default [`FaultPlan::NONE`]: the
    /// simulator behaves and counts exactly as without fault injection.
    pub faults: FaultPlan,
    /// The period of the system timer that wakes a sleeping CPU, in cycles; at least 1.
    /// Default 100,000 (1 ms of a 100 MHz core: a 1 kHz tick, the usual RTOS rate).
    ///
    /// [`wait_for_event`](npu_compute::hal::Npu::wait_for_event) sleeps until the next
    /// interrupt. While a completion interrupt is on its way that is the NPU's (a tick before
    /// it would only wake the CPU to sleep again, so the simulator leaves those out and a run
    /// without faults wakes as it always did). When some job in flight will raise none (it
    /// hung, or its interrupt is lost), the CPU wakes at the next multiple of this period
    /// instead, if that comes first, so that time moves on and a watchdog on
    /// [`now`](npu_compute::hal::Npu::now) can expire.
    pub idle_tick_cycles: Cycles,
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

/// One execution unit's kind ([`SimConfig::units`]): what
/// [`Npu::execution_unit`](npu_compute::hal::Npu::execution_unit) declares, and the size of
/// the MAC array its jobs are costed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnitConfig {
    /// The name in reports, traces and `--units` (`"u55-128"`).
    pub name: &'static str,
    /// Int8 multiply-accumulates per cycle of its MAC array; at least 1. The layer model is
    /// calibrated for 128 and scaled for other sizes ([`U55Config::with_mac_array`]).
    pub macs_per_cycle: u32,
}

impl UnitConfig {
    /// An Ethos-U55-128: the reference unit, costed exactly as the configuration says.
    pub const ETHOS_U55_128: UnitConfig = UnitConfig {
        name: "u55-128",
        macs_per_cycle: 128,
    };
    /// An Ethos-U55-256: twice the MAC array of the reference, scaled rather than calibrated
    /// (see [`U55Config::ETHOS_U55_256`] for what is modelled).
    pub const ETHOS_U55_256: UnitConfig = UnitConfig {
        name: "u55-256",
        macs_per_cycle: 256,
    };
    /// The units [`parse_units`] accepts, by name.
    pub const KNOWN: [UnitConfig; 2] = [Self::ETHOS_U55_128, Self::ETHOS_U55_256];
}

/// The units of a configuration, in order, as [`parse_units`] returns them.
pub type UnitList = heapless::Vec<UnitConfig, MAX_EXECUTION_UNITS>;

/// The names [`parse_units`] accepts, for messages.
pub const KNOWN_UNIT_NAMES: &str = "u55-128, u55-256";

/// Why [`parse_units`] refused a unit list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitsError<'a> {
    /// An item (between commas) names no known unit; empty for `a,,b`.
    Unknown {
        /// The item, spaces around it trimmed.
        item: &'a str,
    },
    /// More than [`MAX_EXECUTION_UNITS`] units.
    TooMany {
        /// Units listed.
        units: usize,
    },
}

impl core::fmt::Display for UnitsError<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UnitsError::Unknown { item } => write!(
                f,
                "unknown execution unit `{item}`: the units are a comma-separated list of {KNOWN_UNIT_NAMES}"
            ),
            UnitsError::TooMany { units } => write!(
                f,
                "{units} execution units listed: at most {MAX_EXECUTION_UNITS} (MAX_EXECUTION_UNITS)"
            ),
        }
    }
}

impl core::error::Error for UnitsError<'_> {}

/// The units of `spec`, a comma-separated list of unit names (`u55-128`, `u55-256`; case and
/// spaces around a name ignored), e.g. `"u55-256,u55-128"`: 1..=[`MAX_EXECUTION_UNITS`] of
/// them, in order. Build a configuration from them with [`SimConfig::with_units`].
///
/// # Errors
/// [`UnitsError::Unknown`] naming the first item that is no unit (an empty spec is one empty
/// item), [`UnitsError::TooMany`].
pub fn parse_units(spec: &str) -> Result<UnitList, UnitsError<'_>> {
    let mut units = UnitList::new();
    let count = spec.split(',').count();
    if count > MAX_EXECUTION_UNITS {
        return Err(UnitsError::TooMany { units: count });
    }
    for item in spec.split(',') {
        let name = item.trim();
        let unit = UnitConfig::KNOWN
            .iter()
            .find(|u| u.name.eq_ignore_ascii_case(name))
            .ok_or(UnitsError::Unknown { item: name })?;
        // `count` was checked against the capacity.
        let _ = units.push(*unit);
    }
    Ok(units)
}

impl SimConfig {
    /// The default configuration as a constant (usable in `static` initialisers).
    pub const ETHOS_U55_128: SimConfig = SimConfig {
        macs_per_cycle: 128,
        execution_units: 1,
        units: [UnitConfig::ETHOS_U55_128; MAX_EXECUTION_UNITS],
        sram_bytes_per_cycle: 8,
        dma_bytes_per_cycle: 8,
        slow: Bandwidth {
            bytes: 1,
            cycles: 1,
            latency: 64,
        },
        job_overhead_cycles: 64,
        dma_overhead_cycles: 32,
        alignment: 16,
        ops: ETHOS_U55_OPS,
        reads_flash: true,
        flash_alignment: 4,
        layers: Some(U55Config::ETHOS_U55_128),
        cpu: Some(CpuModel::CORTEX_M4_SCALAR),
        faults: FaultPlan::NONE,
        idle_tick_cycles: DEFAULT_IDLE_TICK_CYCLES,
    };

    /// This configuration with `units` as its execution units, in order (the rest of
    /// [`units`](Self::units) keeps its entries, unused).
    ///
    /// # Errors
    /// [`SimError::NoExecutionUnits`] for none, [`SimError::TooManyExecutionUnits`] for more
    /// than [`MAX_EXECUTION_UNITS`], [`SimError::ZeroRate`] for a unit of 0 MACs.
    pub fn with_units(mut self, units: &[UnitConfig]) -> Result<SimConfig, SimError> {
        if units.len() > MAX_EXECUTION_UNITS {
            return Err(SimError::TooManyExecutionUnits {
                units: u8::try_from(units.len()).unwrap_or(u8::MAX),
                max: MAX_EXECUTION_UNITS as u8,
            });
        }
        for (slot, unit) in self.units.iter_mut().zip(units) {
            *slot = *unit;
        }
        // At most MAX_EXECUTION_UNITS (8), checked above.
        self.execution_units = units.len() as u8;
        self.validate()?;
        Ok(self)
    }

    /// The configured units, [`units`](Self::units) up to
    /// [`execution_units`](Self::execution_units).
    pub fn active_units(&self) -> &[UnitConfig] {
        let n = usize::from(self.execution_units).min(MAX_EXECUTION_UNITS);
        self.units.get(..n).unwrap_or(&[])
    }

    /// Unit `unit`'s kind; `None` beyond [`execution_units`](Self::execution_units).
    pub fn unit(&self, unit: u8) -> Option<&UnitConfig> {
        self.active_units().get(usize::from(unit))
    }

    /// The simple model's MAC rate of unit `unit`:
    /// `ceil(macs_per_cycle * units[unit].macs_per_cycle / 128)`, at least 1
    /// ([`macs_per_cycle`](Self::macs_per_cycle) itself for a 128-MAC unit, or for a unit
    /// that does not exist).
    pub fn unit_macs_per_cycle(&self, unit: u8) -> u32 {
        match self.unit(unit) {
            Some(u) if u.macs_per_cycle != REFERENCE_MACS_PER_CYCLE => {
                scale_by_mac_array(self.macs_per_cycle, u.macs_per_cycle)
            }
            _ => self.macs_per_cycle,
        }
    }

    /// The layer model of unit `unit`: [`layers`](Self::layers)
    /// [with its MAC array](U55Config::with_mac_array) (`layers` itself for a 128-MAC unit, or
    /// for a unit that does not exist).
    pub fn unit_layers(&self, unit: u8) -> Option<U55Config> {
        let macs = self
            .unit(unit)
            .map_or(REFERENCE_MACS_PER_CYCLE, |u| u.macs_per_cycle);
        self.layers.map(|l| l.with_mac_array(macs))
    }

    /// Checks the configuration on its own (memories are checked by
    /// [`SimNpu::new`](crate::SimNpu::new)).
    ///
    /// # Errors
    /// [`SimError::BadAlignment`], [`SimError::NoExecutionUnits`],
    /// [`SimError::TooManyExecutionUnits`] or [`SimError::ZeroRate`] (a rate below, a
    /// configured unit's `macs_per_cycle`, or `idle_tick_cycles`).
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
            (self.slow.bytes, "slow.bytes"),
            (self.slow.cycles, "slow.cycles"),
        ];
        for (rate, parameter) in rates {
            if rate == 0 {
                return Err(SimError::ZeroRate { parameter });
            }
        }
        if self.idle_tick_cycles == 0 {
            return Err(SimError::ZeroRate {
                parameter: "idle_tick_cycles",
            });
        }
        if self.active_units().iter().any(|u| u.macs_per_cycle == 0) {
            return Err(SimError::ZeroRate {
                parameter: "units[].macs_per_cycle",
            });
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
        self.compute_cycles_at(op, self.macs_per_cycle)
    }

    /// [`compute_cycles`](Self::compute_cycles) with a MAC array of `macs_per_cycle`.
    fn compute_cycles_at(&self, op: &Op, macs_per_cycle: u32) -> Cycles {
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
                    .div_ceil(u64::from(macs_per_cycle.max(1)))
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
        self.compute_cost_at(op, io_bytes, self.macs_per_cycle)
    }

    /// [`compute_cost`](Self::compute_cost) with a MAC array of `macs_per_cycle`.
    fn compute_cost_at(&self, op: &Op, io_bytes: u64, macs_per_cycle: u32) -> Cycles {
        let body = self
            .compute_cycles_at(op, macs_per_cycle)
            .max(self.memory_cycles(io_bytes));
        u64::from(self.job_overhead_cycles)
            .saturating_add(body)
            .max(1)
    }

    /// Cycles of a job as the simulator schedules it ([`transfer_cost`](Self::transfer_cost)
    /// of `src.len` or [`compute_cost`](Self::compute_cost) over the job's regions).
    /// Always at least 1, so a job always ends strictly after it starts.
    /// That is the cost on a reference unit (128 MACs); see
    /// [`unit_job_cost`](Self::unit_job_cost) for another.
    pub fn job_cost(&self, kind: &JobKind<'_>) -> Cycles {
        self.job_cost_at(kind, self.macs_per_cycle)
    }

    /// [`job_cost`](Self::job_cost) on unit `unit`, whose MAC rate is
    /// [`unit_macs_per_cycle`](Self::unit_macs_per_cycle).
    pub fn unit_job_cost(&self, unit: u8, kind: &JobKind<'_>) -> Cycles {
        self.job_cost_at(kind, self.unit_macs_per_cycle(unit))
    }

    fn job_cost_at(&self, kind: &JobKind<'_>, macs_per_cycle: u32) -> Cycles {
        match kind {
            JobKind::Transfer { src, .. } => self.transfer_cost(src.len),
            JobKind::Compute { op, .. } => self.compute_cost_at(op, io_bytes(kind), macs_per_cycle),
        }
    }
}

/// Bytes a job reads or writes in the slow tier: each of its regions there (a transfer's
/// source and destination, a compute job's inputs and output).
pub(crate) fn slow_bytes(kind: &JobKind<'_>) -> u64 {
    let in_slow = |r: &npu_compute::hal::Region| {
        if r.space == Space::Slow {
            u64::from(r.len)
        } else {
            0
        }
    };
    match kind {
        JobKind::Transfer { src, dst } => in_slow(src).saturating_add(in_slow(dst)),
        JobKind::Compute { inputs, output, .. } => inputs
            .iter()
            .fold(in_slow(output), |acc, r| acc.saturating_add(in_slow(r))),
    }
}

/// Bytes a compute job reads and writes: every input plus the output (0 for a transfer).
pub(crate) fn io_bytes(kind: &JobKind<'_>) -> u64 {
    match kind {
        JobKind::Transfer { .. } => 0,
        JobKind::Compute { inputs, output, .. } => {
            inputs.iter().fold(u64::from(output.len), |acc, r| {
                acc.saturating_add(u64::from(r.len))
            })
        }
    }
}

impl Default for SimConfig {
    /// [`SimConfig::ETHOS_U55_128`].
    fn default() -> Self {
        Self::ETHOS_U55_128
    }
}
