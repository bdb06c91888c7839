//! A deterministic software NPU implementing [`npu_compute::hal::Npu`].
//!
//! `npu-sim` lets the compute server, its tests and its benchmarks run without hardware, on
//! the host or on a microcontroller (it is `no_std`, heap-free and free of `unsafe`). It is
//! not a functional shortcut: it keeps the asynchrony, the queues, the dependencies and the
//! failure modes of a real NPU so that code which works on it works on hardware.
//!
//! # Design
//!
//! ## Virtual clock
//!
//! The simulator has a clock, [`SimNpu::now`](npu_compute::hal::Npu::now), counted in
//! virtual cycles. Nothing reads wall-clock time, and time moves only when the caller says so:
//!
//! - [`SimNpu::advance`] — the host CPU did `cycles` of other work;
//! - [`Npu::wait_for_event`] — the CPU sleeps (`WFI`) until the earliest in-flight job ends:
//!   the clock jumps there (or stays, if that end has already passed or nothing is in flight);
//! - [`SimNpu::run_until_idle`] — the clock jumps to the last in-flight end and everything
//!   retires.
//!
//! [`Npu::poll`], [`Npu::submit`] and [`Npu::on_interrupt`] never move the clock, so a test
//! can stop at the cycle before a job's end and observe that the job is not done.
//!
//! ## Scheduling
//!
//! There is one queue per execution unit ([`Queue::Unit`]) plus the DMA queue
//! ([`Queue::Dma`]). When a job is submitted its whole schedule is fixed at once:
//!
//! ```text
//! start = max(now, free_at[queue], end of every dependency still in flight)
//! end   = start + cost            (cost >= 1, see the cycle model)
//! free_at[queue] = end
//! ```
//!
//! So jobs on one queue run back to back in submission order, jobs on different queues
//! overlap, and a dependency on another queue delays the start. A real driver does the same
//! with its per-core job queue and IRQ chaining.
//!
//! ## Effects at retire
//!
//! A job's effect on memory (the copy of a transfer, the output of an operator) is applied
//! when the job *retires*, not when it is submitted. [`SimNpu::retire_ready`] retires, one at
//! a time, the in-flight job with the smallest `(end, fence)` among those with `end <= now`.
//! Retiring happens in [`Npu::poll`], [`Npu::on_interrupt`], [`SimNpu::run_until_idle`],
//! [`SimNpu::retire_ready`] and, only when the in-flight table is full, in [`Npu::submit`]
//! (like a driver that checks the hardware status before refusing a job).
//!
//! Results therefore appear in memory only once virtual time has passed a job's end *and*
//! the host polled or serviced the interrupt — as on hardware, where a finished job is
//! visible to the CPU only after the IRQ handler has invalidated the cache over its output.
//! A server that reads an output before its fence completes reads stale bytes here too.
//!
//! Retiring in `(end, fence)` order respects dependencies: a dependency ends at or before its
//! dependent's start, which is strictly before the dependent's end. Inputs are sampled at
//! retire, so writing a staging buffer before its transfer's fence completes changes what is
//! transferred (the race it is on hardware, made deterministic).
//!
//! A job whose dependency failed does not run: it fails with [`CODE_DEPENDENCY_FAILED`], so
//! polling the last fence of a chain reports a failure anywhere in it.
//!
//! ## Cycle model
//!
//! Integer arithmetic only, every division rounded up, every result at least 1 (see
//! [`SimConfig`] for the parameters and their Ethos-U55-128 defaults):
//!
//! ```text
//! transfer(len)   = dma_overhead_cycles + ceil(len / dma_bytes_per_cycle)
//! compute job     = job_overhead_cycles + max(compute, memory)
//!   memory        = ceil((sum of input bytes + output bytes) / sram_bytes_per_cycle)
//!   compute, FC   = ceil(macs * r / macs_per_cycle)             r = 1 (int8), 4 (f32)
//!   compute, elem = ceil(elements * q * r / 4)                  q in quarter cycles:
//!                   Add q = 6 (1.5 cycles), Mul q = 3 (0.75), ReLU q = 2 (0.5)
//! ```
//!
//! `macs = batches * in_features * out_features`. The MAC array is 8-bit, so f32 runs at a
//! quarter of the int8 rate, in the MAC array and in the output stage alike. Elementwise ops
//! run in the output stage, so their cost does not depend on `macs_per_cycle`. The same
//! functions are public on [`SimConfig`] ([`SimConfig::job_cost`] and friends) so tests and
//! benchmarks can predict schedules.
//!
//! With [`SimConfig::layers`] set, layer ops are costed by the Ethos-U55 model of [`cost`]
//! instead, per kernel [`Variant`]: `Auto` is Vela's block choice, `Block { h, w }` forces
//! the output block, `Im2col` adds a gather DMA before a matrix product (see
//! [Variants](cost#variants)). Variants compute identical bytes ([`exec`]).
//!
//! With [`SimConfig::cpu`] set (the default), the CPU's own work costs time too: the server
//! reports each operator it runs on the fallback kernels
//! ([`Npu::host_compute`]) and the clock advances by the
//! [`cpu`] model's cycles for it, calibrated on the firmware's QEMU measurement.
//!
//! ## Determinism
//!
//! The schedule is a pure function of the configuration and the sequence of calls (submits,
//! advances, polls): no wall clock, no randomness, no floats in timing, no hash maps, ties
//! broken by fence. Two runs with the same calls produce identical memory, traces and
//! [`SimStats`]. Kernel results are those of `npu-kernels` (bit-exact with TFLM).
//!
//! ## Memory
//!
//! The simulator borrows two caller-owned byte slices for its lifetime: the device arena
//! ([`Space::Device`]) and DMA-capable host memory ([`Space::Host`]). Both must start on
//! [`SimConfig::alignment`] (use [`AlignedMemory`]) and be at most `u32::MAX` bytes. Compute
//! jobs work on device memory only; transfers copy host↔device or device↔device.
//!
//! # Example
//!
//! ```
//! use npu_compute::hal::{Fence, Job, JobKind, Npu, Queue, Region};
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! let mut device = AlignedMemory::<256>::new();
//! let mut host = AlignedMemory::<256>::new();
//! let mut npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default())?;
//!
//! npu.host_memory()[..4].copy_from_slice(&[1, 2, 3, 4]);
//! let job = Job {
//!     kind: JobKind::Transfer { src: Region::host(0, 16), dst: Region::device(0, 16) },
//!     queue: Queue::Dma,
//!     deps: heapless::Vec::new(),
//! };
//! let fence = npu.submit(&job).unwrap();
//! assert_eq!(npu.poll(fence), Err(nb::Error::WouldBlock)); // no time has passed
//! while npu.poll(fence) == Err(nb::Error::WouldBlock) {
//!     npu.wait_for_event();
//! }
//! assert_eq!(npu.now(), 32 + 2); // dma_overhead + 16 bytes / 8 bytes per cycle
//! assert_eq!(&npu.device_memory()[..4], &[1, 2, 3, 4]);
//! Ok::<(), npu_sim::SimError>(())
//! ```
//!
//! # Features
//!
//! - `std`: host extras (the `npu-sim` command line). The library itself never needs it.
//! - `defmt`: derives `defmt::Format` on the public types.

#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(all(test, not(feature = "std")))]
extern crate std;

mod codes;
mod config;
pub mod cost;
pub mod cpu;
mod error;
pub mod exec;
mod failures;
pub mod layer;
mod memory;
#[cfg(feature = "std")]
pub mod pipeline;
#[cfg(feature = "std")]
pub mod runner;
mod stats;
mod trace;
#[cfg(feature = "std")]
pub mod workloads;

pub use config::{
    SimConfig, ADD_QUARTER_CYCLES_PER_ELEMENT, F32_SLOWDOWN, MAX_EXECUTION_UNITS, MAX_QUEUES,
    MUL_QUARTER_CYCLES_PER_ELEMENT, RELU_QUARTER_CYCLES_PER_ELEMENT,
};
pub use cpu::{CpuModel, Rates};
pub use error::SimError;
pub use exec::{
    kernel_error_code, CODE_BAD_REGION, CODE_DEPENDENCY_FAILED, CODE_KERNEL_INVALID_QUANTIZATION,
    CODE_KERNEL_LENGTH_MISMATCH, CODE_KERNEL_SHAPE_OVERFLOW, CODE_KERNEL_UNSUPPORTED,
    CODE_USER_BASE,
};
pub use failures::FAILED_RECORD_CAPACITY;
pub use memory::AlignedMemory;
pub use stats::{queue_index, SimStats};
pub use trace::{TraceEntry, TraceKind};

use npu_compute::hal::{
    Capabilities, Cycles, Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, Variant,
    MAX_FLASH_SEGMENTS, MAX_JOB_DEPS, MAX_JOB_INPUTS,
};
use npu_compute::ops::Op;

use failures::FailedRing;
use trace::TraceRing;

/// What a job does, owned: a submitted [`Job`] borrows its op only for the call to `submit`,
/// and the simulator runs the job later.
#[derive(Debug)]
// Stored by value in the fixed in-flight table (no heap to box the op into), so a transfer
// takes as much room as a compute job.
#[allow(clippy::large_enum_variant)]
enum Work {
    Transfer {
        src: Region,
        dst: Region,
    },
    Compute {
        op: Op,
        variant: Variant,
        inputs: heapless::Vec<Region, MAX_JOB_INPUTS>,
        output: Region,
        scratch: Option<Region>,
    },
}

impl Work {
    fn of(kind: &JobKind<'_>) -> Self {
        match kind {
            JobKind::Transfer { src, dst } => Work::Transfer {
                src: *src,
                dst: *dst,
            },
            JobKind::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => Work::Compute {
                op: **op,
                variant: *variant,
                inputs: inputs.clone(),
                output: *output,
                scratch: *scratch,
            },
        }
    }

    /// The job again, borrowing the kept op.
    fn kind(&self) -> JobKind<'_> {
        match self {
            Work::Transfer { src, dst } => JobKind::Transfer {
                src: *src,
                dst: *dst,
            },
            Work::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => JobKind::Compute {
                op,
                variant: *variant,
                inputs: inputs.clone(),
                output: *output,
                scratch: *scratch,
            },
        }
    }
}

/// A job accepted by `submit` and not yet retired.
#[derive(Debug)]
struct InFlight {
    fence: Fence,
    queue: Queue,
    work: Work,
    start: Cycles,
    end: Cycles,
    /// Dependencies that were still in flight at submit (to propagate their failure).
    deps: heapless::Vec<Fence, MAX_JOB_DEPS>,
    /// A dependency failed: the job will not run and fails with `CODE_DEPENDENCY_FAILED`.
    dep_failed: bool,
}

/// The simulated NPU.
///
/// `JOBS` is the in-flight capacity (1..=`u16::MAX`; default 32): one more job is refused
/// with [`HalError::QueueFull`]. The in-flight table lives inside the struct (no heap); each
/// slot holds a copy of the job (its op included), its schedule and its in-flight dependencies: about 216 bytes on
/// 32-bit targets, so the default `SimNpu<'_, 32>` is about 7.5 KiB (size `JOBS` to fit).
/// The layer-cost cache adds 64 entries of 144 bytes (9 KiB), whatever `JOBS`.
///
/// See the [crate documentation](crate) for the model.
#[derive(Debug)]
pub struct SimNpu<'a, const JOBS: usize = 32> {
    device: &'a mut [u8],
    host: &'a mut [u8],
    flash: [Option<&'a [u8]>; MAX_FLASH_SEGMENTS],
    config: SimConfig,
    now: Cycles,
    next_fence: u64,
    in_flight: heapless::Vec<InFlight, JOBS>,
    /// When each queue (by `queue_index`) finishes its last scheduled job.
    free_at: [Cycles; MAX_QUEUES],
    failed: FailedRing,
    stats: SimStats,
    trace: TraceRing<'a>,
    inject: Option<u32>,
    pipeline: Option<cost::Pipeline>,
    layer_cache: LayerCache,
}

/// Layer costs already computed (the cost model searches block shapes, which is worth
/// remembering: a model runs the same layers every inference). 64 rather than a model's
/// layer count: a tuner times up to seven variants of a layer, each its own entry.
const LAYER_CACHE: usize = 64;

#[derive(Debug)]
struct LayerCache {
    entries: [Option<(cost::LayerDesc, cost::CostBreakdown)>; LAYER_CACHE],
    next: usize,
}

impl LayerCache {
    fn cost(&mut self, desc: &cost::LayerDesc, cfg: &cost::U55Config) -> cost::CostBreakdown {
        if let Some((_, c)) = self.entries.iter().flatten().find(|(d, _)| d == desc) {
            return *c;
        }
        let c = cost::layer_cycles(desc, cfg);
        self.entries[self.next] = Some((*desc, c));
        self.next = (self.next + 1) % LAYER_CACHE;
        c
    }
}

impl<'a> SimNpu<'a> {
    /// A simulator over `device` (the NPU arena, [`Space::Device`]) and `host` (DMA-capable
    /// host memory, [`Space::Host`]), at cycle 0 with nothing in flight and no trace, holding
    /// up to 32 jobs in flight (the default `JOBS`; see
    /// [`with_job_capacity`](Self::with_job_capacity) for another). Errors as
    /// `with_job_capacity`.
    pub fn new(
        device: &'a mut [u8],
        host: &'a mut [u8],
        config: SimConfig,
    ) -> Result<Self, SimError> {
        Self::with_job_capacity(device, host, config)
    }
}

impl<'a, const JOBS: usize> SimNpu<'a, JOBS> {
    /// A simulator like [`new`](SimNpu::new)'s holding up to `JOBS` jobs in flight:
    /// `SimNpu::<64>::with_job_capacity(device, host, config)`.
    ///
    /// # Errors
    /// - [`SimError::BadAlignment`] if `config.alignment` is not a power of two >= 4;
    /// - [`SimError::NoExecutionUnits`] / [`SimError::TooManyExecutionUnits`] if
    ///   `config.execution_units` is 0 or above [`MAX_EXECUTION_UNITS`];
    /// - [`SimError::ZeroRate`] if a throughput parameter is 0;
    /// - [`SimError::BadJobCapacity`] if `JOBS` is 0 or above `u16::MAX`;
    /// - [`SimError::MemoryTooLarge`] if a memory exceeds `u32::MAX` bytes;
    /// - [`SimError::MisalignedMemory`] if a non-empty memory does not start on
    ///   `config.alignment` (the `f32`/`i32` views of regions need it).
    pub fn with_job_capacity(
        device: &'a mut [u8],
        host: &'a mut [u8],
        config: SimConfig,
    ) -> Result<Self, SimError> {
        config.validate()?;
        if JOBS == 0 || JOBS > usize::from(u16::MAX) {
            return Err(SimError::BadJobCapacity { jobs: JOBS });
        }
        for (space, mem) in [(Space::Device, &*device), (Space::Host, &*host)] {
            if u32::try_from(mem.len()).is_err() {
                return Err(SimError::MemoryTooLarge { space });
            }
            // An empty slice may have any (dangling) address; nothing can be viewed in it.
            if !mem.is_empty() && (mem.as_ptr() as usize) % (config.alignment as usize) != 0 {
                return Err(SimError::MisalignedMemory {
                    space,
                    alignment: config.alignment,
                });
            }
        }
        Ok(SimNpu {
            device,
            host,
            flash: [None; MAX_FLASH_SEGMENTS],
            config,
            now: 0,
            next_fence: 0,
            in_flight: heapless::Vec::new(),
            free_at: [0; MAX_QUEUES],
            failed: FailedRing::new(),
            stats: SimStats::default(),
            trace: TraceRing::default(),
            inject: None,
            pipeline: config.layers.map(cost::Pipeline::new),
            layer_cache: LayerCache {
                entries: [None; LAYER_CACHE],
                next: 0,
            },
        })
    }

    /// Records a [`TraceEntry`] for every job that retires from now on into `buf`,
    /// overwriting the oldest entry when full (replaces any earlier trace storage).
    pub fn with_trace(mut self, buf: &'a mut [TraceEntry]) -> Self {
        self.trace = TraceRing::new(buf);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Moves the clock forward by `cycles` (the host CPU doing other work). Retires nothing:
    /// finished jobs take effect at the next poll or interrupt.
    pub fn advance(&mut self, cycles: Cycles) {
        self.now = self.now.saturating_add(cycles);
    }

    /// Retires every in-flight job whose end is at or before [`now`](Npu::now), in
    /// `(end, fence)` order, applying its effect to memory. Returns how many retired.
    pub fn retire_ready(&mut self) -> usize {
        let mut retired = 0;
        while let Some(index) = self.next_ready() {
            let job = self.in_flight.swap_remove(index);
            self.retire(job);
            retired += 1;
        }
        retired
    }

    /// Advances the clock to the last in-flight end (if later than now) and retires
    /// everything. Returns the clock.
    pub fn run_until_idle(&mut self) -> Cycles {
        if let Some(last) = self.in_flight.iter().map(|j| j.end).max() {
            self.now = self.now.max(last);
        }
        self.retire_ready();
        self.now
    }

    /// Whether a real NPU would be raising its completion interrupt: some in-flight job has
    /// ended (`end <= now`) but has not been retired. [`Npu::on_interrupt`] clears it.
    pub fn irq_pending(&self) -> bool {
        self.in_flight.iter().any(|j| j.end <= self.now)
    }

    /// The earliest end among in-flight jobs (what [`Npu::wait_for_event`] jumps to), or
    /// `None` if nothing is in flight.
    pub fn next_event(&self) -> Option<Cycles> {
        self.in_flight.iter().map(|j| j.end).min()
    }

    /// Jobs submitted and not yet retired.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// The scheduled `(start, end)` of an in-flight job; `None` once it retired (or if the
    /// fence was never issued).
    pub fn scheduled(&self, fence: Fence) -> Option<(Cycles, Cycles)> {
        self.in_flight
            .iter()
            .find(|j| j.fence == fence)
            .map(|j| (j.start, j.end))
    }

    /// Counters since construction.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// Device memory (the arena), for tests and tools to inspect.
    ///
    /// A real NPU's arena is not CPU-visible through the HAL (the CPU could alias memory the
    /// NPU owns, with stale caches); the compute server never uses this. It shows the state
    /// as of the last retire: jobs that have not retired have no effect yet.
    pub fn device_memory(&self) -> &[u8] {
        self.device
    }

    /// Device memory, mutably, for tests to preload or corrupt (see
    /// [`device_memory`](Self::device_memory); not part of the HAL).
    pub fn device_memory_mut(&mut self) -> &mut [u8] {
        self.device
    }

    /// Fault injection: the next compute job that runs (at retire) fails with `code`
    /// (reported as [`HalError::JobFailed`]) and does not write its output. Jobs skipped
    /// because a dependency failed do not consume it. Calling it again replaces the code.
    pub fn fail_next_compute_job(&mut self, code: u32) {
        self.inject = Some(code);
    }

    /// The recorded trace, oldest entry first (empty without [`with_trace`](Self::with_trace)).
    pub fn trace(&self) -> impl Iterator<Item = TraceEntry> + '_ {
        self.trace.iter()
    }

    /// Entries in the trace (at most the storage's length).
    pub fn trace_len(&self) -> usize {
        self.trace.len()
    }

    /// Trace entries overwritten because the storage was full, since the last
    /// [`clear_trace`](Self::clear_trace).
    pub fn trace_overwritten(&self) -> u64 {
        self.trace.overwritten()
    }

    /// Forgets the recorded trace (keeps the storage).
    pub fn clear_trace(&mut self) {
        self.trace.clear();
    }

    /// Index of the in-flight job to retire next: smallest `(end, fence)` with `end <= now`.
    fn next_ready(&self) -> Option<usize> {
        self.in_flight
            .iter()
            .enumerate()
            .filter(|(_, j)| j.end <= self.now)
            .min_by_key(|(_, j)| (j.end, j.fence))
            .map(|(i, _)| i)
    }

    /// Applies a job's effect and records its outcome.
    fn retire(&mut self, job: InFlight) {
        let job_kind = job.work.kind();
        let outcome = if job.dep_failed {
            Err(CODE_DEPENDENCY_FAILED)
        } else {
            match &job_kind {
                JobKind::Transfer { src, dst } => {
                    memory::transfer(self.device, self.host, &self.flash, src, dst)
                }
                JobKind::Compute {
                    op,
                    variant,
                    inputs,
                    output,
                    scratch,
                } => match self.inject.take() {
                    Some(code) => Err(code),
                    None => exec::run_compute(
                        op,
                        *variant,
                        self.device,
                        &self.flash,
                        inputs,
                        output,
                        scratch.as_ref(),
                    ),
                },
            }
        };

        if let Some(busy) = queue_index(job.queue).and_then(|i| self.stats.busy_cycles.get_mut(i)) {
            *busy = busy.saturating_add(job.end - job.start);
        }
        match outcome {
            Ok(()) => {
                self.stats.jobs_completed += 1;
                match &job_kind {
                    JobKind::Transfer { src, .. } => {
                        self.stats.transfers += 1;
                        self.stats.transfer_bytes += u64::from(src.len);
                    }
                    JobKind::Compute { op, .. } => {
                        self.stats.macs = self.stats.macs.saturating_add(op.macs());
                    }
                }
            }
            Err(code) => {
                self.stats.jobs_failed += 1;
                if self.failed.record(job.fence, code) {
                    self.stats.failures_forgotten += 1;
                }
                for other in self.in_flight.iter_mut() {
                    if other.deps.contains(&job.fence) {
                        other.dep_failed = true;
                    }
                }
            }
        }

        let kind = match &job_kind {
            JobKind::Transfer { src, dst } => TraceKind::Transfer {
                from: src.space,
                to: dst.space,
                bytes: src.len,
            },
            JobKind::Compute { op, .. } => TraceKind::Compute {
                op: op.kind(),
                dtype: op.dtype(),
            },
        };
        self.trace.record(TraceEntry {
            fence: job.fence,
            queue: job.queue,
            kind,
            start: job.start,
            end: job.end,
            failure: outcome.err(),
        });
    }

    /// Cycles of a job: the Ethos-U55 layer model for layer ops when configured, else the
    /// simple model of [`SimConfig::job_cost`].
    fn job_cycles(&mut self, kind: &JobKind<'_>) -> Cycles {
        if let (
            JobKind::Compute {
                op,
                variant,
                inputs,
                ..
            },
            Some(pipeline),
            Some(cfg),
        ) = (kind, self.pipeline.as_mut(), self.config.layers.as_ref())
        {
            if let Some(desc) = layer::describe(op, *variant, inputs) {
                let cost = self.layer_cache.cost(&desc, cfg);
                return pipeline.push_cost(cost).total.max(1);
            }
        }
        self.config.job_cost(kind)
    }

    /// Length in bytes of a memory (at most `u32::MAX`, checked at construction).
    fn space_len(&self, space: Space) -> usize {
        match space {
            Space::Device => self.device.len(),
            Space::Host => self.host.len(),
            Space::Flash(segment) => self
                .flash
                .get(usize::from(segment))
                .copied()
                .flatten()
                .map_or(0, <[u8]>::len),
        }
    }

    fn check_region(&self, region: &Region) -> Result<(), HalError> {
        let mut alignment = self.config.alignment;
        if let Space::Flash(segment) = region.space {
            if !self.config.reads_flash {
                return Err(HalError::FlashUnreadable);
            }
            if self
                .flash
                .get(usize::from(segment))
                .copied()
                .flatten()
                .is_none()
            {
                return Err(HalError::FlashNotMapped { segment });
            }
            alignment = self.config.flash_alignment;
        }
        memory::check_region(region, self.space_len(region.space), alignment)
    }

    /// Full validation of a job (everything but capacity), in this order: queue, dependencies,
    /// then the kind's checks.
    fn validate(&self, job: &Job<'_>) -> Result<(), HalError> {
        if let Queue::Unit(unit) = job.queue {
            if unit >= self.config.execution_units {
                return Err(HalError::NoSuchUnit {
                    unit,
                    units: self.config.execution_units,
                });
            }
        }
        if let Some(dep) = job.deps.iter().find(|d| d.0 >= self.next_fence) {
            return Err(HalError::UnknownFence(*dep));
        }
        match &job.kind {
            JobKind::Transfer { src, dst } => self.validate_transfer(src, dst),
            JobKind::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => {
                self.validate_compute(job.queue, op, inputs, output)?;
                self.validate_variant(op, *variant, inputs, output, scratch.as_ref())
            }
        }
    }

    /// Whether this simulator runs `op` over `inputs` as `variant`: [`Variant::Auto`] always;
    /// a block or im2col only with the layer cost model configured (it alone knows what a
    /// forced block or a gather costs), on an op kind the variant
    /// [applies to](Variant::applies_to), whose scratch size fits `u32`, and where the cost
    /// model says it fits ([`cost::supports_variant`]: a forced block whose input and
    /// accumulators fit SHRAM, an ungrouped convolution with something to gather).
    fn runs_variant(&self, op: &Op, variant: Variant, inputs: &[Region]) -> bool {
        if variant == Variant::Auto {
            return true;
        }
        let Some(cfg) = self.config.layers.as_ref() else {
            return false;
        };
        variant.applies_to(op)
            && self.config.ops.runs(op)
            && variant.scratch_bytes(op).is_some()
            && layer::describe(op, variant, inputs).is_some_and(|d| cost::supports_variant(&d, cfg))
    }

    /// Variant checks of a compute job whose operands passed
    /// [`validate_compute`](Self::validate_compute), in order: the variant runs here
    /// ([`runs_variant`](Self::runs_variant)), and a scratch is given exactly when the variant
    /// needs one (`VariantUnsupported` otherwise, as the job cannot run as asked). Then the
    /// scratch (operand `MAX_JOB_INPUTS + 1`) is device memory (`WrongSpace`), in bounds
    /// (`OutOfBounds`) and aligned (`Misaligned`), at least
    /// [`Variant::scratch_bytes`] long (`BadLength`), and overlaps neither an input nor the
    /// output (`Overlap`): the variant overwrites all of it.
    fn validate_variant(
        &self,
        op: &Op,
        variant: Variant,
        inputs: &[Region],
        output: &Region,
        scratch: Option<&Region>,
    ) -> Result<(), HalError> {
        let refused = HalError::VariantUnsupported {
            op: op.kind(),
            variant,
        };
        if !self.runs_variant(op, variant, inputs) {
            return Err(refused);
        }
        let needed = variant.scratch_bytes(op).ok_or(refused)?;
        let scratch = match (scratch, needed) {
            (None, 0) => return Ok(()),
            (Some(scratch), n) if n > 0 => scratch,
            _ => return Err(refused),
        };
        let operand = MAX_JOB_INPUTS as u8 + 1;
        if scratch.space != Space::Device {
            return Err(HalError::WrongSpace { region: *scratch });
        }
        self.check_region(scratch)?;
        if scratch.len < needed {
            return Err(HalError::BadLength {
                operand,
                expected: needed,
                actual: scratch.len,
            });
        }
        if scratch.overlaps(output) || inputs.iter().any(|r| r.overlaps(scratch)) {
            return Err(HalError::Overlap { operand });
        }
        Ok(())
    }

    /// Transfer checks: not host→host and not into flash (`WrongSpace` on `dst`), both
    /// regions in bounds and aligned, equal lengths (`WrongSpace` on `dst`), no overlap
    /// (`Overlap { operand: 0 }`).
    fn validate_transfer(&self, src: &Region, dst: &Region) -> Result<(), HalError> {
        if (src.space == Space::Host && dst.space == Space::Host)
            || matches!(dst.space, Space::Flash(_))
        {
            return Err(HalError::WrongSpace { region: *dst });
        }
        self.check_region(src)?;
        self.check_region(dst)?;
        if src.len != dst.len {
            return Err(HalError::WrongSpace { region: *dst });
        }
        if src.overlaps(dst) {
            return Err(HalError::Overlap { operand: 0 });
        }
        Ok(())
    }

    /// Compute checks, in order: runs on an execution unit and the op is in `config.ops`
    /// (`Unsupported`); sizes fit `u32` (`BadLength` on the output with `expected: u32::MAX`
    /// otherwise); every input is device memory or mapped flash and the output device memory
    /// (`WrongSpace`), in bounds (`OutOfBounds`) and aligned (`Misaligned`); the number of
    /// inputs and every length match [`Op::operands`] (`BadLength`: a missing input has
    /// `actual: 0`, an extra one `expected: 0`); the output overlaps no input (`Overlap`),
    /// except an input it equals when the op [runs in place](Op::runs_in_place).
    fn validate_compute(
        &self,
        queue: Queue,
        op: &Op,
        inputs: &[Region],
        output: &Region,
    ) -> Result<(), HalError> {
        let unsupported = HalError::Unsupported {
            op: op.kind(),
            dtype: op.dtype(),
        };
        if queue == Queue::Dma || !self.config.ops.runs(op) {
            return Err(unsupported);
        }
        let out_operand = MAX_JOB_INPUTS as u8;
        let Some(operands) = op.operands() else {
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: u32::MAX,
                actual: output.len,
            });
        };
        let out_bytes = operands.output;
        for region in inputs.iter().chain(core::iter::once(output)) {
            let readable = matches!(region.space, Space::Device | Space::Flash(_));
            if !readable || (region == output && region.space != Space::Device) {
                return Err(HalError::WrongSpace { region: *region });
            }
            self.check_region(region)?;
        }
        let required = operands.inputs.len() - usize::from(operands.optional);
        for i in 0..operands.inputs.len().max(inputs.len()) {
            let want = operands.inputs.get(i).copied();
            let have = inputs.get(i).map(|r| r.len);
            let mismatch = match (want, have) {
                (Some(e), Some(a)) if e != a => Some((e, a)),
                (Some(e), None) if i < required => Some((e, 0)),
                (None, Some(a)) => Some((0, a)),
                _ => None,
            };
            if let Some((expected, actual)) = mismatch {
                return Err(HalError::BadLength {
                    operand: i as u8,
                    expected,
                    actual,
                });
            }
        }
        if inputs.len() > MAX_JOB_INPUTS {
            // Unreachable with the HAL's `heapless::Vec<_, MAX_JOB_INPUTS>`; kept for safety.
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: 0,
                actual: 0,
            });
        }
        if output.len != out_bytes {
            return Err(HalError::BadLength {
                operand: out_operand,
                expected: out_bytes,
                actual: output.len,
            });
        }
        let in_place = |r: &Region| op.runs_in_place() && r == output;
        if let Some(i) = inputs
            .iter()
            .position(|r| r.overlaps(output) && !in_place(r))
        {
            return Err(HalError::Overlap { operand: i as u8 });
        }
        Ok(())
    }
}

impl<const JOBS: usize> Npu for SimNpu<'_, JOBS> {
    /// Derived from the configuration and the memories; `max_in_flight = JOBS`.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            device_memory_bytes: u32::try_from(self.device.len()).unwrap_or(u32::MAX),
            host_memory_bytes: u32::try_from(self.host.len()).unwrap_or(u32::MAX),
            alignment: self.config.alignment,
            execution_units: self.config.execution_units,
            max_in_flight: u16::try_from(JOBS).unwrap_or(u16::MAX),
            ops: self.config.ops,
            reads_flash: self.config.reads_flash,
            flash_alignment: self.config.flash_alignment,
        }
    }

    /// Validates the job (see the crate docs for the order of checks), schedules it and
    /// returns its fence (fences count up from `Fence(0)`). Never moves the clock. If the
    /// in-flight table is full it first retires finished jobs, then refuses with
    /// [`HalError::QueueFull`] if none had finished. A transfer may run on any queue (an
    /// execution unit's command stream can copy too); a compute job on [`Queue::Dma`] is
    /// [`HalError::Unsupported`].
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        self.validate(job)?;
        let capacity = u16::try_from(JOBS).unwrap_or(u16::MAX);
        if self.in_flight.is_full() {
            self.retire_ready();
            if self.in_flight.is_full() {
                return Err(HalError::QueueFull { capacity });
            }
        }
        // 2^64 fences cannot be issued in practice; refuse rather than reuse one.
        let Some(next) = self.next_fence.checked_add(1) else {
            return Err(HalError::QueueFull { capacity });
        };
        let Some(q) = queue_index(job.queue) else {
            // Unreachable: units are validated against `execution_units <= MAX_EXECUTION_UNITS`.
            let unit = if let Queue::Unit(u) = job.queue { u } else { 0 };
            return Err(HalError::NoSuchUnit {
                unit,
                units: self.config.execution_units,
            });
        };
        let fence = Fence(self.next_fence);

        let mut start = self.now.max(self.free_at[q]);
        let mut deps = heapless::Vec::new();
        let mut dep_failed = false;
        for dep in &job.deps {
            if let Some(d) = self.in_flight.iter().find(|j| j.fence == *dep) {
                start = start.max(d.end);
                dep_failed |= d.dep_failed;
                let _ = deps.push(*dep); // at most MAX_JOB_DEPS
            } else if self.failed.code_of(*dep).is_some() {
                dep_failed = true;
            }
        }
        let end = start.saturating_add(self.job_cycles(&job.kind));

        let entry = InFlight {
            fence,
            queue: job.queue,
            work: Work::of(&job.kind),
            start,
            end,
            deps,
            dep_failed,
        };
        if self.in_flight.push(entry).is_err() {
            return Err(HalError::QueueFull { capacity });
        }
        self.next_fence = next;
        self.free_at[q] = end;
        self.stats.jobs_submitted += 1;
        let in_flight = u32::try_from(self.in_flight.len()).unwrap_or(u32::MAX);
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(in_flight);
        Ok(fence)
    }

    /// `UnknownFence` for a fence never issued; otherwise retires finished jobs, then answers
    /// `WouldBlock` while the job is in flight, `JobFailed` if it failed (while its record
    /// lasts, see [`FAILED_RECORD_CAPACITY`]), `Ok` otherwise. Never moves the clock.
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        if fence.0 >= self.next_fence {
            return Err(nb::Error::Other(HalError::UnknownFence(fence)));
        }
        self.retire_ready();
        if self.in_flight.iter().any(|j| j.fence == fence) {
            return Err(nb::Error::WouldBlock);
        }
        match self.failed.code_of(fence) {
            Some(code) => Err(nb::Error::Other(HalError::JobFailed { fence, code })),
            None => Ok(()),
        }
    }

    /// Jumps the clock to the earliest in-flight end if that is later than now; otherwise
    /// (nothing in flight, or a job already ended) returns at once. Retires nothing.
    fn wait_for_event(&mut self) {
        if let Some(next) = self.next_event() {
            self.now = self.now.max(next);
        }
    }

    /// Retires finished jobs, which clears [`irq_pending`](SimNpu::irq_pending).
    fn on_interrupt(&mut self) {
        self.retire_ready();
    }

    fn now(&self) -> Cycles {
        self.now
    }

    /// Maps `bytes` into the first free segment. Refuses with [`HalError::FlashUnreadable`]
    /// when the configuration says the NPU cannot read flash, [`HalError::Misaligned`] when
    /// `bytes` does not start on the configured alignment (region offsets are checked against
    /// it), and [`HalError::FlashSegmentsFull`].
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        if !self.config.reads_flash {
            return Err(HalError::FlashUnreadable);
        }
        let segment =
            self.flash
                .iter()
                .position(Option::is_none)
                .ok_or(HalError::FlashSegmentsFull {
                    capacity: MAX_FLASH_SEGMENTS as u8,
                })? as u8;
        if (bytes.as_ptr() as usize) % (self.config.alignment as usize) != 0 {
            return Err(HalError::Misaligned {
                region: Region::flash(segment, 0, u32::try_from(bytes.len()).unwrap_or(u32::MAX)),
                alignment: self.config.alignment,
            });
        }
        if u32::try_from(bytes.len()).is_err() {
            return Err(HalError::OutOfBounds {
                region: Region::flash(segment, 0, u32::MAX),
                space_bytes: u32::MAX,
            });
        }
        self.flash[usize::from(segment)] = Some(bytes);
        Ok(segment)
    }

    /// Forgets the segment (no effect if it is not mapped).
    fn unmap_flash(&mut self, segment: u8) {
        if let Some(slot) = self.flash.get_mut(usize::from(segment)) {
            *slot = None;
        }
    }

    fn host_memory(&mut self) -> &mut [u8] {
        self.host
    }

    /// [`Variant::Auto`] always. A block or im2col when the layer cost model is configured
    /// ([`SimConfig::layers`]), the variant [applies to](Variant::applies_to) the op's kind
    /// and the cost model says it fits ([`cost::supports_variant`]); `submit` then accepts the
    /// job (given an im2col's scratch). The answer depends on the op alone: whether the weights
    /// sit in flash or device memory changes a variant's cost, never whether it fits.
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        if variant == Variant::Auto {
            return true;
        }
        // The cost model reads the filter's size from the job's regions; an op's own operand
        // sizes are what a valid job's regions have.
        let Some(operands) = op.operands() else {
            return false;
        };
        let inputs: heapless::Vec<Region, MAX_JOB_INPUTS> = operands
            .inputs
            .iter()
            .map(|&len| Region::device(0, len))
            .collect();
        self.runs_variant(op, variant, &inputs)
    }

    /// FNV-1a-64 over [`cost::COST_MODEL_VERSION`] and every field of [`SimConfig`] that
    /// changes a job's cycles but is not in [`Capabilities`] (the caller's fingerprint covers
    /// those): the rates and overheads of the simple model, the layer model's configuration
    /// (a tag, then every [`U55Config`](cost::U55Config) field) and the CPU model's (a tag,
    /// then every [`CpuModel`] field).
    fn tuning_fingerprint(&self) -> u64 {
        fingerprint(&self.config)
    }

    /// Advances the clock by the op's [`CpuModel::cycles`] when [`SimConfig::cpu`] is set:
    /// the CPU was busy computing, and jobs in flight went on meanwhile. Counted in
    /// [`SimStats::cpu_ops`] and [`SimStats::cpu_cycles`].
    fn host_compute(&mut self, op: &Op) {
        if let Some(model) = self.config.cpu {
            let cycles = model.cycles(op);
            self.advance(cycles);
            self.stats.cpu_ops += 1;
            self.stats.cpu_cycles = self.stats.cpu_cycles.saturating_add(cycles);
        }
    }

    /// `true` when [`SimConfig::cpu`] is set.
    fn clock_counts_cpu(&self) -> bool {
        self.config.cpu.is_some()
    }
}

/// FNV-1a-64 over little-endian words (the hash the tuning table format names).
struct Fnv1a(u64);

impl Fnv1a {
    const fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    fn word(&mut self, v: u32) {
        for b in v.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// See [`SimNpu::tuning_fingerprint`](Npu::tuning_fingerprint).
fn fingerprint(config: &SimConfig) -> u64 {
    // Destructured without `..`: a field added to either struct fails to compile here until
    // someone decides whether it changes cycles (and so belongs in the hash).
    let SimConfig {
        macs_per_cycle,
        execution_units: _,
        sram_bytes_per_cycle,
        dma_bytes_per_cycle,
        job_overhead_cycles,
        dma_overhead_cycles,
        // In `Capabilities`, which the tuner hashes itself.
        alignment: _,
        ops: _,
        reads_flash: _,
        flash_alignment: _,
        layers,
        cpu,
    } = *config;
    let mut h = Fnv1a::new();
    h.word(cost::COST_MODEL_VERSION);
    for v in [
        macs_per_cycle,
        sram_bytes_per_cycle,
        dma_bytes_per_cycle,
        job_overhead_cycles,
        dma_overhead_cycles,
    ] {
        h.word(v);
    }
    match layers {
        None => h.word(0),
        Some(cost::U55Config {
            macs_per_cycle,
            max_ofm_block,
            shram_banks,
            sram_bytes_per_cycle,
            sram_latency,
            sram_burst_bytes,
            flash_bytes_per_cycle,
            flash_latency,
            flash_burst_bytes,
            weight_encoding,
            weight_stream_overhead,
            scale_bytes_per_channel,
            weight_buffer_bytes,
        }) => {
            h.word(1);
            for v in [
                macs_per_cycle,
                shram_banks,
                sram_bytes_per_cycle,
                sram_latency,
            ]
            .into_iter()
            .chain(max_ofm_block)
            .chain([
                sram_burst_bytes,
                flash_bytes_per_cycle,
                flash_latency,
                flash_burst_bytes,
                weight_encoding.0,
                weight_encoding.1,
                weight_stream_overhead,
                scale_bytes_per_channel,
                weight_buffer_bytes,
            ]) {
                h.word(v);
            }
        }
    }
    match cpu {
        None => h.word(0),
        Some(CpuModel { rates }) => {
            h.word(1);
            for Rates {
                call,
                work,
                taps,
                outputs,
            } in rates
            {
                for v in [call, work, taps, outputs] {
                    h.word(v);
                }
            }
        }
    }
    h.0
}
