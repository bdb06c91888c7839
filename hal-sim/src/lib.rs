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
//!   with injected faults, until the next interrupt, or timer tick (see
//!   [Faults and reset](#faults-and-reset));
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
//!         no earlier than its reservations of the shared SRAM and flash ports end (see
//!         below; a transfer holds a port only for its bytes in the slow tier)
//! free_at[queue] = end
//! ```
//!
//! So jobs on one queue run back to back in submission order, jobs on different queues
//! overlap, and a dependency on another queue delays the start. A real driver does the same
//! with its per-core job queue and IRQ chaining.
//!
//! Each unit has its own kind ([`SimConfig::units`]: a name and a MAC array, e.g. a
//! U55-256 beside a U55-128) and its jobs are costed with it, but the units share the
//! memory system: a compute job holds the arena's SRAM port and the flash port for the
//! cycles its traffic needs, one job at a time per port, so a memory-bound layer split over
//! two units is no faster than on one (see
//! [Shared memory ports](SimConfig#shared-memory-ports)). With one unit the ports never
//! delay anything. [`Npu::estimate`] answers what a job would cost on its unit alone, and
//! the ports it would hold, without running it.
//!
//! ## Memories
//!
//! The arena ([`Space::Device`]) and host memory ([`Space::Host`]) are given to
//! [`SimNpu::new`]; flash segments are mapped by the server. A slow memory tier
//! ([`Space::Slow`], a PSRAM or HyperRAM) is optional: [`SimNpu::with_slow_memory`]. Jobs
//! read and write it as they do the arena, and transfers move bytes between any two of
//! host memory, the arena and the slow tier. It sits on the flash's AXI port, as off-chip
//! memory does on an Ethos-U55 system: each job's and each transfer's bytes there hold the
//! flash port at [`SimConfig::slow`]'s rate, so two jobs using the tier, or one using it
//! beside a layer reading flash, wait for each other, while the arena's SRAM port is not
//! involved.
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
//! ## Faults and reset
//!
//! [`SimConfig::faults`] makes the simulator inject hardware faults ([`faults`]): DMA and bus
//! errors, hangs, overruns, spurious and lost interrupts, on the job of an index, on an
//! operator, on jobs touching a region, or with a seeded probability. Each is decided when
//! `submit` accepts the job, from the plan and the job alone, so a run stays deterministic.
//! A DMA or bus fault ends the job at its scheduled end without its effect (what it would have
//! written is filled with [`faults::FAULT_FILL`]), reports [`HalError::Fault`] on its fence,
//! cancels ([`Fault::Cancelled`]) the jobs that depend on it, and halts its queue until a
//! reset. A hung job never ends; the CPU's sleep is then ended by the system timer's tick
//! ([`SimConfig::idle_tick_cycles`]), so that the clock moves and a watchdog can expire.
//! Without faults nothing of this happens: the simulator runs, wakes and counts as it always
//! did.
//!
//! [`Npu::reset`] returns the NPU to idle at the current clock, as the Ethos-U driver does
//! after a fault: the jobs that had ended take effect, those still in flight are abandoned
//! (their fences poll as [`Fault::Cancelled`], never `WouldBlock`), and the next job runs as
//! on a fresh simulator whose clock stood there.
//!
//! ## Cycle model
//!
//! Integer arithmetic only, every division rounded up, every result at least 1 (see
//! [`SimConfig`] for the parameters and their Ethos-U55-128 defaults):
//!
//! ```text
//! transfer(len)   = dma_overhead_cycles + ceil(len / dma_bytes_per_cycle)
//!                   (to or from the slow tier at least dma_overhead_cycles +
//!                   slow.cycles_for(len), which it holds the flash port)
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
//! advances, polls): no wall clock, no randomness (a fault's probability draw is a seeded
//! generator's output for the job's index), no floats in timing, no hash maps, ties broken by
//! fence. Two runs with the same calls produce identical memory, traces and
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

#[cfg(feature = "std")]
pub mod access_list;
mod codes;
mod config;
pub mod cost;
pub mod cpu;
mod error;
pub mod exec;
mod failures;
pub mod faults;
mod fingerprint;
#[cfg(feature = "std")]
pub mod gantt;
mod in_flight;
pub mod layer;
mod memory;
mod npu;
#[cfg(feature = "std")]
pub mod occupancy;
#[cfg(feature = "std")]
pub mod pipeline;
mod retire;
#[cfg(feature = "std")]
pub mod runner;
#[cfg(feature = "std")]
pub mod soak;
mod stats;
#[cfg(feature = "std")]
pub mod tier_plan;
mod timing;
mod trace;
mod validate;
#[cfg(feature = "std")]
pub mod workloads;

pub use config::{
    parse_units, SimConfig, UnitConfig, UnitList, UnitsError, ADD_QUARTER_CYCLES_PER_ELEMENT,
    DEFAULT_IDLE_TICK_CYCLES, ETHOS_U55_OPS, F32_SLOWDOWN, KNOWN_UNIT_NAMES, MAX_EXECUTION_UNITS,
    MAX_QUEUES, MUL_QUARTER_CYCLES_PER_ELEMENT, RELU_QUARTER_CYCLES_PER_ELEMENT,
};
pub use cpu::{CpuModel, Rates};
pub use error::SimError;
pub use exec::{
    code_fault, fault_code, kernel_error_code, CODE_BAD_REGION, CODE_DEPENDENCY_FAILED,
    CODE_FAULT_BUS, CODE_FAULT_CANCELLED, CODE_FAULT_DMA, CODE_FAULT_TIMEOUT,
    CODE_KERNEL_INVALID_QUANTIZATION, CODE_KERNEL_LENGTH_MISMATCH, CODE_KERNEL_SHAPE_OVERFLOW,
    CODE_KERNEL_UNSUPPORTED, CODE_USER_BASE,
};
pub use failures::FAILED_RECORD_CAPACITY;
pub use faults::{
    parse_faults, FaultCounts, FaultKind, FaultPlan, FaultRule, FaultSpecError, MAX_FAULT_RULES,
};
pub use memory::AlignedMemory;
pub use stats::{queue_index, SimStats};
pub use trace::{Lane, TraceEntry, TraceKind, TraceRegions, CPU_FENCE};

use npu_compute::hal::{Cycles, Fence, Space, MAX_FLASH_SEGMENTS};

#[cfg(doc)]
use npu_compute::hal::{Capabilities, Fault, HalError, Job, Npu, Queue, Variant};

use failures::FailedRing;
use faults::Injector;
use in_flight::InFlight;
use timing::LayerCache;
use trace::TraceRing;

/// The simulated NPU.
///
/// `JOBS` is the in-flight capacity (1..=`u16::MAX`; default 32): one more job is refused
/// with [`HalError::QueueFull`]. The in-flight table lives inside the struct (no heap); each
/// slot holds a copy of the job (its op included), its schedule, its in-flight dependencies
/// and its injected fault: 416 bytes on 32-bit targets, plus 8 bytes per slot for the fences
/// a reset abandoned. The layer-cost cache adds 64 entries of 168 bytes (10.5 KiB), and the
/// configuration (its fault plan included) 1.6 KiB, whatever `JOBS`: the default
/// `SimNpu<'_, 32>` is about 26.5 KiB on `thumbv7em-none-eabihf` (size `JOBS` to fit).
///
/// See the [crate documentation](crate) for the model.
#[derive(Debug)]
pub struct SimNpu<'a, const JOBS: usize = 32> {
    device: &'a mut [u8],
    host: &'a mut [u8],
    /// The slow memory tier ([`Space::Slow`]); empty until
    /// [`with_slow_memory`](Self::with_slow_memory).
    slow: &'a mut [u8],
    flash: [Option<&'a [u8]>; MAX_FLASH_SEGMENTS],
    config: SimConfig,
    now: Cycles,
    next_fence: u64,
    in_flight: heapless::Vec<InFlight, JOBS>,
    /// When each queue (by `queue_index`) finishes its last scheduled job.
    free_at: [Cycles; MAX_QUEUES],
    /// When the shared SRAM and flash ports finish their last reservation (see
    /// [Shared memory ports](SimConfig#shared-memory-ports)).
    ports_free_at: timing::Ports,
    failed: FailedRing,
    /// The fences a reset abandoned in flight (those of the last reset), which poll as
    /// cancelled.
    abandoned: heapless::Vec<Fence, JOBS>,
    /// How far the fault plan (`config.faults`) got.
    injector: Injector,
    /// When an injected spurious interrupt is raised, until the CPU takes it.
    spurious_irq: Option<Cycles>,
    /// Queues (by `queue_index`) halted by a DMA or bus fault until the next reset.
    halted: [bool; MAX_QUEUES],
    stats: SimStats,
    trace: TraceRing<'a>,
    inject: Option<u32>,
    pipeline: Option<cost::Pipeline>,
    layer_cache: LayerCache,
}

/// A memory the simulator can address: at most `u32::MAX` bytes, starting on `alignment`
/// (the `f32`/`i32` views of regions need it).
fn check_memory(space: Space, mem: &[u8], alignment: u32) -> Result<(), SimError> {
    if u32::try_from(mem.len()).is_err() {
        return Err(SimError::MemoryTooLarge { space });
    }
    // An empty slice may have any (dangling) address; nothing can be viewed in it.
    if !mem.is_empty() && !(mem.as_ptr() as usize).is_multiple_of(alignment as usize) {
        return Err(SimError::MisalignedMemory { space, alignment });
    }
    Ok(())
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
        check_memory(Space::Device, device, config.alignment)?;
        check_memory(Space::Host, host, config.alignment)?;
        Ok(SimNpu {
            device,
            host,
            slow: &mut [],
            flash: [None; MAX_FLASH_SEGMENTS],
            config,
            now: 0,
            next_fence: 0,
            in_flight: heapless::Vec::new(),
            free_at: [0; MAX_QUEUES],
            ports_free_at: timing::Ports::default(),
            failed: FailedRing::new(),
            abandoned: heapless::Vec::new(),
            injector: Injector::default(),
            spurious_irq: None,
            halted: [false; MAX_QUEUES],
            stats: SimStats::default(),
            trace: TraceRing::default(),
            inject: None,
            pipeline: config.layers.map(cost::Pipeline::new),
            layer_cache: LayerCache::new(),
        })
    }

    /// Gives the simulator a slow memory tier ([`Space::Slow`], reported as
    /// [`Capabilities::slow_memory_bytes`](npu_compute::hal::Capabilities::slow_memory_bytes)):
    /// jobs may read and write it and transfers move bytes between it and the other memories,
    /// each byte there holding the flash port at [`SimConfig::slow`]'s rate.
    ///
    /// # Errors
    /// [`SimError::MemoryTooLarge`] above `u32::MAX` bytes, [`SimError::MisalignedMemory`] if
    /// it does not start on `config.alignment`.
    pub fn with_slow_memory(mut self, slow: &'a mut [u8]) -> Result<Self, SimError> {
        check_memory(Space::Slow, slow, self.config.alignment)?;
        self.slow = slow;
        Ok(self)
    }

    /// Records a [`TraceEntry`] for every job that retires from now on, and for every
    /// operator the CPU runs ([`TraceKind::Cpu`]), into `buf`, overwriting the oldest entry
    /// when full (replaces any earlier trace storage).
    pub fn with_trace(mut self, buf: &'a mut [TraceEntry]) -> Self {
        self.trace = TraceRing::new(buf);
        self
    }

    /// Like [`with_trace`](Self::with_trace), and records each entry's [`TraceRegions`] (what
    /// the job read and wrote) into the same slot of `regions`. Both slices are cut to the
    /// shorter one's length.
    pub fn with_trace_regions(
        mut self,
        buf: &'a mut [TraceEntry],
        regions: &'a mut [TraceRegions],
    ) -> Self {
        self.trace = TraceRing::with_regions(buf, regions);
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
    /// everything. Returns the clock. A job that never ends (it hung, or waits behind one that
    /// did: see [`faults`]) stays in flight, and the clock goes no further than the last job
    /// that does end.
    pub fn run_until_idle(&mut self) -> Cycles {
        if let Some(last) = self
            .in_flight
            .iter()
            .filter(|j| j.ends())
            .map(|j| j.end)
            .max()
        {
            self.now = self.now.max(last);
        }
        self.retire_ready();
        self.now
    }

    /// Whether a real NPU would be raising its completion interrupt: some in-flight job has
    /// ended (`end <= now`) but has not been retired, or an injected spurious interrupt has
    /// been raised and not yet taken. A job whose interrupt is lost
    /// ([`FaultKind::LostIrq`]) does not raise it. [`Npu::on_interrupt`] clears it, and
    /// [`Npu::wait_for_event`] takes a spurious interrupt it wakes on.
    pub fn irq_pending(&self) -> bool {
        self.in_flight
            .iter()
            .any(|j| j.irq && j.ends() && j.end <= self.now)
            || self.spurious_irq.is_some_and(|at| at <= self.now)
    }

    /// The cycle [`Npu::wait_for_event`] wakes at (it jumps there when that is later than
    /// now): the earliest end of an in-flight job that raises its interrupt, or an injected
    /// spurious interrupt, and, while some job in flight raises none (it hung, or its interrupt
    /// is lost), the next timer tick ([`SimConfig::idle_tick_cycles`]) if that comes first.
    /// `None` if nothing is in flight and no spurious interrupt is due. Without injected
    /// faults, the earliest in-flight end.
    pub fn next_event(&self) -> Option<Cycles> {
        let irq = self
            .in_flight
            .iter()
            .filter(|j| j.irq && j.ends())
            .map(|j| j.end)
            .chain(self.spurious_irq)
            .min();
        if self.in_flight.iter().any(|j| !j.irq || !j.ends()) {
            let tick = self.config.idle_tick_cycles.max(1);
            let next_tick = (self.now / tick).saturating_add(1).saturating_mul(tick);
            return Some(irq.map_or(next_tick, |at| at.min(next_tick)));
        }
        irq
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

    /// The writable memories, borrowed together.
    pub(crate) fn memories(&mut self) -> memory::Memories<'_> {
        memory::Memories {
            device: self.device,
            host: self.host,
            slow: self.slow,
        }
    }

    /// The slow memory tier ([`with_slow_memory`](Self::with_slow_memory)), for tests and
    /// tools to inspect, as of the last retire.
    pub fn slow_memory(&self) -> &[u8] {
        self.slow
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

    /// Replaces the faults to inject ([`SimConfig::faults`] at construction) and restarts the
    /// plan: the next job `submit` accepts has index 0 for its rules'
    /// [`job`](FaultRule::job) conditions and draws, and every rule's
    /// [`max`](FaultRule::max) counts from 0 again. Jobs already in flight keep their faults.
    pub fn set_faults(&mut self, plan: FaultPlan) {
        self.config.faults = plan;
        self.injector = Injector::default();
    }

    /// The faults being injected.
    pub fn faults(&self) -> &FaultPlan {
        &self.config.faults
    }

    /// The index the next job `submit` accepts has for the fault plan (jobs accepted since the
    /// plan was set).
    pub fn next_fault_index(&self) -> u64 {
        self.injector.next_job()
    }

    /// The recorded trace, oldest entry first (empty without [`with_trace`](Self::with_trace)).
    pub fn trace(&self) -> impl Iterator<Item = TraceEntry> + '_ {
        self.trace.iter()
    }

    /// The recorded trace like [`trace`](Self::trace), each entry with its regions (`None`
    /// without [`with_trace_regions`](Self::with_trace_regions)).
    pub fn trace_regions(&self) -> impl Iterator<Item = (TraceEntry, Option<&TraceRegions>)> + '_ {
        self.trace.iter_regions()
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
}
