//! The hardware abstraction: the one trait a board integrator implements.
//!
//! Writing a driver for a board: see [the guide](guide), which walks through the contract
//! step by step and shows how to check a driver with the [conformance] suite (cargo feature
//! `conformance`). A part without an NPU needs no driver of its own: [`CpuOnly`] runs every
//! operator on the CPU fallback.
//!
//! # Design
//!
//! The compute server never touches NPU registers, caches or device memory bytes itself. It
//! describes work as [`Job`]s over [`Region`]s (offsets into an address [`Space`]) and hands them
//! to an [`Npu`]. Everything is non-blocking: [`Npu::submit`] returns a [`Fence`] at once and
//! [`Npu::poll`] answers `nb::Error::WouldBlock` until the job is done. The only way the CPU waits
//! is [`Npu::wait_for_event`], which on hardware is a `WFI` until the completion interrupt and in
//! the simulator jumps the virtual clock to the next job end.
//!
//! Four kinds of address space exist:
//! - [`Space::Device`]: the NPU arena, the fixed region the firmware gave to the driver (usually
//!   the NPU-reachable SRAM section of `memory.x`). The server plans offsets in it; only jobs
//!   read and write it. This keeps the CPU from aliasing memory the NPU owns (on a cached core
//!   that aliasing is exactly the stale-cache bug drivers fight). A driver whose device memory
//!   is the CPU's ordinary memory says so ([`Npu::device_memory`]), and the CPU fallback then
//!   computes there in place rather than through host staging.
//! - [`Space::Host`]: DMA-capable host memory the CPU may write and read directly
//!   ([`Npu::host_memory`]): staging (and later pinned) buffers. Host↔device copies are
//!   [`JobKind::Transfer`] jobs on the DMA queue.
//! - [`Space::Flash`]: read-only constant data the driver mapped with [`Npu::map_flash`]
//!   (a model's weights in place, on NPUs whose bus reaches flash: [`Capabilities::reads_flash`]).
//!   Compute jobs read it like device memory; nothing ever writes it.
//! - [`Space::Slow`]: a second, larger and slower memory the NPU reaches on one of its bus
//!   ports (PSRAM, HyperRAM or DRAM: [`Capabilities::slow_memory_bytes`], `0` on a part
//!   without one). Like the arena it belongs to the NPU: only jobs read and write it, at that
//!   port's cost ([`Npu::bandwidth`]), and transfers move bytes between it and the arena, so
//!   that tensors the arena cannot hold can wait there.
//!
//! Jobs carry their dependencies ([`Job::deps`]): a job starts only after every fence it lists has
//! completed. Jobs on the same queue run in submission order. The server computes the
//! dependencies, so the CPU never has to wait between dependent jobs.
//!
//! # Mapping an Ethos-U-style driver
//!
//! | HAL | Ethos-U driver |
//! |---|---|
//! | [`Capabilities::alignment`] = 16 | base-pointer regions must be 16-byte aligned |
//! | [`Npu::submit`] | clean (flush) the D-cache over the job's input regions, write the command stream and base pointers (`BASEP0..7` = arena base + region offsets), ring `CMD`; queue the job when the NPU is busy and chain it in the IRQ |
//! | [`Job::deps`] | the driver starts a queued job only when its dependencies have raised their IRQ (one NPU core executes in order, so same-queue dependencies are free) |
//! | [`Npu::on_interrupt`] | the NPU IRQ handler: read `STATUS`, acknowledge with `CMD.clear_irq`, invalidate the D-cache over the finished job's output regions, mark its fence done, start the next queued job |
//! | [`Npu::poll`] | compare the fence with the last completed sequence number |
//! | [`Npu::wait_for_event`] | `cortex_m::asm::wfi()` |
//! | [`Npu::now`] | DWT `CYCCNT` or a free-running timer, in CPU cycles |
//! | [`Npu::clock_counts_cpu`] / [`Npu::host_compute`] | `true` for `CYCCNT` (it runs while the CPU computes) / nothing to do |
//! | [`Capabilities::reads_flash`] | the NPU's AXI1 port reaches flash: weights stay in place |
//! | [`Npu::map_flash`] / [`Space::Flash`] | a base-pointer region set to the model's address in flash |
//!
//! A board that shares the server with an interrupt handler puts it in a
//! [`CriticalSectionChannel`](crate::channel::CriticalSectionChannel) and calls
//! [`ComputeChannel::on_interrupt`](crate::channel::ComputeChannel::on_interrupt) from the ISR.

// Documented without the feature too (`doc`), so that the guide's links resolve; compiled for
// use only with it.
#[cfg(any(feature = "conformance", doc))]
pub mod conformance;
mod cpu_only;
mod error;
pub mod guide;
mod tier;
mod variant;

use crate::ops::{Op, OpSet};
pub use cpu_only::CpuOnly;
pub use error::{Fault, HalError, SetupError};
pub use tier::Bandwidth;
pub use variant::Variant;

/// Time in cycles of the HAL's clock (CPU cycles on hardware, virtual cycles in the simulator).
pub type Cycles = u64;

/// Most inputs a compute job reads: one region per input of its operator
/// ([`ops::MAX_INPUTS`](crate::ops::MAX_INPUTS)).
pub const MAX_JOB_INPUTS: usize = crate::ops::MAX_INPUTS;
/// Most flash segments a HAL maps at once ([`Npu::map_flash`]): one per prepared model.
pub const MAX_FLASH_SEGMENTS: usize = 4;
/// Most execution units a HAL may declare: a capacity chosen by Cargo feature, because every
/// per-queue table (a chunk's access record, the newest fences, dependency lists, the
/// watchdog's and job plans' per-queue arrays) has [`MAX_QUEUES`] slots, and on a part with one
/// unit the other seven are dead RAM in each of them.
///
/// | features | units |
/// |---|---|
/// | `units-8` (in `default`) | 8 |
/// | `units-4` | 4 |
/// | `units-2` | 2 |
/// | none of them | 1: a CPU-only part ([`CpuOnly`]) or a single-NPU one (an Ethos-U55) |
///
/// A HAL declaring more units than the build holds fails the server's setup with
/// [`SetupError::OutOfRange`], naming the feature to enable ([`UNITS_EXPECTED`]).
pub const MAX_EXECUTION_UNITS: usize = if cfg!(feature = "units-8") {
    8
} else if cfg!(feature = "units-4") {
    4
} else if cfg!(feature = "units-2") {
    2
} else {
    1
};
/// What [`Capabilities::execution_units`] must be in this build, as the `expected` text of
/// [`SetupError::OutOfRange`]: the limit and the feature that raises it.
pub const UNITS_EXPECTED: &str = if cfg!(feature = "units-8") {
    "1 to MAX_EXECUTION_UNITS (8, the most any build holds)"
} else if cfg!(feature = "units-4") {
    "1 to MAX_EXECUTION_UNITS (4 in this build: enable npu-compute's feature units-8 for more)"
} else if cfg!(feature = "units-2") {
    "1 to MAX_EXECUTION_UNITS (2 in this build: enable npu-compute's feature units-4 or units-8 for more)"
} else {
    "1 to MAX_EXECUTION_UNITS (1 in this build: enable npu-compute's feature units-2, units-4 or units-8 for more)"
};
/// Number of hardware queues at most: every execution unit plus the DMA engine.
pub const MAX_QUEUES: usize = MAX_EXECUTION_UNITS + 1;
/// Most dependencies one job carries: one per queue is always enough, because jobs on one queue
/// complete in order, so the newest fence of a queue stands for all older ones.
pub const MAX_JOB_DEPS: usize = MAX_QUEUES;

/// Identifies a submitted job. Fences are issued in increasing order and never reused, so a
/// fence compares older-than another by value; their absolute values carry no meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fence(pub u64);

/// An address space a job can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Space {
    /// The NPU arena: device memory planned by the server, reached only by jobs.
    Device,
    /// DMA-capable host memory the CPU reads and writes through [`Npu::host_memory`].
    Host,
    /// A read-only segment mapped with [`Npu::map_flash`], by its index.
    Flash(u8),
    /// The slow memory tier ([`Capabilities::slow_memory_bytes`]): device memory like the
    /// arena, reached only by jobs, at the cost [`Npu::bandwidth`] declares.
    Slow,
}

/// A byte range in one address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Region {
    /// Which address space.
    pub space: Space,
    /// Offset from the start of that space, in bytes.
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
}

impl Region {
    /// A region of device memory.
    pub const fn device(offset: u32, len: u32) -> Self {
        Region {
            space: Space::Device,
            offset,
            len,
        }
    }

    /// A region of host memory.
    pub const fn host(offset: u32, len: u32) -> Self {
        Region {
            space: Space::Host,
            offset,
            len,
        }
    }

    /// A region of the slow memory tier.
    pub const fn slow(offset: u32, len: u32) -> Self {
        Region {
            space: Space::Slow,
            offset,
            len,
        }
    }

    /// A region of the mapped flash segment `segment`.
    pub const fn flash(segment: u8, offset: u32, len: u32) -> Self {
        Region {
            space: Space::Flash(segment),
            offset,
            len,
        }
    }

    /// One past the last byte, widened so it cannot overflow.
    pub const fn end(&self) -> u64 {
        self.offset as u64 + self.len as u64
    }

    /// Whether two regions share at least one byte.
    pub fn overlaps(&self, other: &Region) -> bool {
        self.space == other.space
            && (self.offset as u64) < other.end()
            && (other.offset as u64) < self.end()
            && self.len != 0
            && other.len != 0
    }
}

/// What a job does.
///
/// A compute job borrows its operator: submitting it copies nothing the driver does not keep
/// (an [`Op`] is well over a hundred bytes). A driver that runs the job later keeps what it
/// needs of it, as a hardware driver turns it into a command stream at submit.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum JobKind<'a> {
    /// A DMA copy of `src.len` bytes (`src.len == dst.len`) between any two of host memory,
    /// the arena and the slow tier (not host→host), or from flash to one of them.
    Transfer {
        /// Where the bytes come from.
        src: Region,
        /// Where they go.
        dst: Region,
    },
    /// An operator on the NPU.
    Compute {
        /// The operator.
        op: &'a Op,
        /// How to run it ([`Variant::Auto`]: the driver's choice).
        variant: Variant,
        /// Input regions in operand order (see [`Op`]).
        inputs: heapless::Vec<Region, MAX_JOB_INPUTS>,
        /// Output region. It overlaps no input, except that for an op that
        /// [runs in place](Op::runs_in_place) it may be exactly an input's region: the job
        /// then computes as if it read that input before writing.
        output: Region,
        /// Device memory the variant may overwrite while it runs
        /// ([`Variant::scratch_bytes`]); `None` for variants that need none.
        scratch: Option<Region>,
    },
}

/// Which hardware queue a job runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Queue {
    /// The DMA engine (transfers).
    Dma,
    /// Execution unit `n` (`n < Capabilities::execution_units`).
    Unit(u8),
}

impl Queue {
    /// A dense index: DMA is 0, unit `n` is `n + 1`. Below [`MAX_QUEUES`] for valid queues.
    pub const fn index(self) -> usize {
        match self {
            Queue::Dma => 0,
            Queue::Unit(n) => n as usize + 1,
        }
    }
}

/// A unit of work for the NPU, valid for the duration of [`Npu::submit`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Job<'a> {
    /// What to do.
    pub kind: JobKind<'a>,
    /// Where to run it.
    pub queue: Queue,
    /// Fences that must complete before this job starts.
    pub deps: heapless::Vec<Fence, MAX_JOB_DEPS>,
}

/// What an NPU can do, as its driver declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Capabilities {
    /// Bytes of device memory (the arena) jobs can address.
    pub device_memory_bytes: u32,
    /// Bytes of DMA-capable host memory ([`Npu::host_memory`]).
    pub host_memory_bytes: u32,
    /// Bytes of the slow memory tier ([`Space::Slow`]); 0 on a part without one.
    pub slow_memory_bytes: u32,
    /// Required alignment of every region, in bytes (a power of two; 16 on Ethos-U).
    pub alignment: u32,
    /// Independent execution units (compute queues), at most [`MAX_EXECUTION_UNITS`].
    pub execution_units: u8,
    /// Jobs that can be in flight at once; one more is refused with [`HalError::QueueFull`].
    pub max_in_flight: u16,
    /// Operators and dtypes the NPU runs; the rest run on the CPU fallback kernels.
    pub ops: OpSet,
    /// Whether the NPU reads constant data (weights) directly from flash.
    pub reads_flash: bool,
    /// Alignment a [`Space::Flash`] region needs, in bytes (a power of two). Weights in a
    /// `.tflite` file are aligned only to their element size, so an NPU that reads them in
    /// place accepts that; a stricter driver declares more and constants are then copied.
    pub flash_alignment: u32,
}

impl core::fmt::Display for Space {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Space::Device => f.write_str("device memory"),
            Space::Host => f.write_str("host memory"),
            Space::Flash(segment) => write!(f, "flash segment {segment}"),
            Space::Slow => f.write_str("slow memory"),
        }
    }
}

impl core::fmt::Display for Region {
    /// `bytes 16..48 of device memory`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "bytes {}..{} of {}", self.offset, self.end(), self.space)
    }
}

impl core::fmt::Display for Queue {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Queue::Dma => f.write_str("the DMA queue"),
            Queue::Unit(n) => write!(f, "execution unit {n}"),
        }
    }
}

/// One execution unit as its driver declares it ([`Npu::execution_unit`]): what the static
/// scheduler needs to weigh units against each other before it has measured anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ExecutionUnit {
    /// A short name for reports and traces (`"u55-128"`).
    pub name: &'static str,
    /// Int8 multiply-accumulates per cycle of its MAC array; 0 when the driver does not say.
    pub macs_per_cycle: u32,
}

impl ExecutionUnit {
    /// What [`Npu::execution_unit`] answers by default: a unit with no name and no declared
    /// throughput.
    pub const UNDECLARED: ExecutionUnit = ExecutionUnit {
        name: "npu",
        macs_per_cycle: 0,
    };
}

/// A driver's prediction of one job on the unit its queue names, run alone
/// ([`Npu::estimate`]). The two memory figures are the cycles the job holds the memory ports
/// that every unit shares: a schedule cannot run two jobs faster than those ports serve them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Estimate {
    /// Cycles from start to end.
    pub cycles: Cycles,
    /// Cycles of the shared SRAM (arena) port the job occupies.
    pub sram_cycles: Cycles,
    /// Cycles of the shared flash port the job occupies.
    pub flash_cycles: Cycles,
    /// Of `cycles`, those spent before the job proper copying what it reads ahead of time
    /// (a layer's weights from flash to SRAM): a driver that prefetches overlaps them with
    /// the jobs before, so in a sequence the job takes `cycles - prefetch_cycles` at least.
    pub prefetch_cycles: Cycles,
}

/// A non-blocking NPU driver.
///
/// Contract:
/// - `submit` validates the job (regions in bounds and aligned, op supported, unit exists) and
///   returns at once. A job starts after all of `deps` and after earlier jobs on its queue.
/// - `poll(f)` returns `Ok(())` once the job of `f` and everything it depends on has taken
///   effect in memory, `Err(WouldBlock)` before, and the job's error if it failed. A job whose
///   dependency failed does not run and fails too, so polling the last fence of a chain reports
///   a failure anywhere in it. A driver remembers failures for a bounded number of jobs (the
///   simulator: 16); polling an older failed fence may answer `Ok`.
/// - Jobs on one queue complete in submission order (the server relies on it).
/// - Transfers copy between any two of host memory, device memory and the slow tier, or
///   from flash to one of them (host→host and writes to flash are [`HalError::WrongSpace`]);
///   overlapping source and destination is [`HalError::Overlap`]. A compute job on
///   [`Queue::Dma`] is [`HalError::Unsupported`].
/// - `wait_for_event` blocks the CPU until at least one in-flight job may have completed (or
///   returns at once if none is in flight).
/// - `on_interrupt` is the completion interrupt's entry point; it must not block.
pub trait Npu {
    /// Whether this driver may run compute jobs at all: `false` for one whose capabilities
    /// never declare an operator (a part without an NPU, [`CpuOnly`]). The server then knows
    /// when it is built that every operator takes the CPU fallback, and a firmware's flash
    /// carries none of the code that builds and submits compute jobs. A driver saying `false`
    /// has any operator its capabilities declare run on the CPU all the same. The default,
    /// `true`, asks the capabilities at run time.
    const RUNS_OPS: bool = true;
    /// What this NPU can do.
    fn capabilities(&self) -> Capabilities;
    /// Queue a job; returns its fence without waiting.
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError>;
    /// Whether the job behind `fence` has completed.
    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError>;
    /// Sleep until a job may have completed (`WFI` on hardware). May be called with interrupts
    /// masked (a [`CriticalSectionChannel`](crate::channel::CriticalSectionChannel) does): a
    /// pending interrupt must end the sleep then too, as it ends a `WFI`.
    fn wait_for_event(&mut self);
    /// Completion interrupt entry point: retire finished jobs. Callable from an ISR.
    fn on_interrupt(&mut self);
    /// The cycle time source.
    fn now(&self) -> Cycles;
    /// CPU view of DMA-capable host memory ([`Space::Host`]).
    fn host_memory(&mut self) -> &mut [u8];
    /// The CPU's own view of device memory ([`Space::Device`]), on a part where the CPU
    /// addresses it as ordinary memory, coherently with the NPU: no NPU ([`CpuOnly`]), or an
    /// arena in plain SRAM with no data cache between the CPU and the NPU (or one the driver
    /// keeps coherent). With it the server's CPU fallback reads its operands and writes its
    /// output where they lie, after the jobs that write what it reads and read or write what
    /// it writes (as a job on the NPU would wait for them), instead of copying them through
    /// host staging: a part then needs host memory only for the transfers a program asks for.
    ///
    /// The default, `None`, says device memory is not the CPU's to touch (an NPU owns it, as
    /// the [design](self#design) assumes): the fallback goes through host staging. The
    /// server borrows the view only while the CPU computes, never while it holds a job
    /// submitted over the same bytes unfinished.
    fn device_memory(&mut self) -> Option<&mut [u8]> {
        None
    }
    /// Makes `bytes` (constant data in flash, e.g. a model) readable by jobs as
    /// [`Space::Flash`] of the returned segment, until [`Npu::unmap_flash`].
    ///
    /// Errors: [`HalError::FlashUnreadable`] on an NPU that cannot read flash (the server then
    /// copies constants into device memory), [`HalError::FlashSegmentsFull`].
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError>;
    /// Forgets a flash segment. Jobs already submitted that read it must have completed.
    fn unmap_flash(&mut self, segment: u8);
    /// Whether the NPU runs `op` in `variant` (a tuner lists only these). The default runs
    /// [`Variant::Auto`] alone.
    fn supports_variant(&self, op: &Op, variant: Variant) -> bool {
        let _ = op;
        variant == Variant::Auto
    }
    /// A fingerprint of whatever changes how long jobs take on this NPU (its configuration,
    /// clocks, cost model version), so that a tuning table made elsewhere is recognised as
    /// foreign. The default, 0, says nothing beyond [`Capabilities`].
    fn tuning_fingerprint(&self) -> u64 {
        0
    }
    /// The server has just run `op` on the CPU (the fallback kernels, over host staging).
    ///
    /// On hardware the cycle source runs while the CPU computes, so there is nothing to do
    /// (the default). A simulator whose clock moves only with jobs charges the op's CPU time
    /// here, so that a CPU fallback costs time as it would on the board.
    fn host_compute(&mut self, op: &Op) {
        let _ = op;
    }
    /// How fast jobs and transfers reach `space`, for a planner weighing where tensors live;
    /// `None` when the driver does not say (the default). [`Space::Host`] answers for the DMA
    /// engine's copies to and from host memory.
    fn bandwidth(&self, space: Space) -> Option<Bandwidth> {
        let _ = space;
        None
    }
    /// Execution unit `unit` (`unit < Capabilities::execution_units`): its name and
    /// throughput. The default declares nothing ([`ExecutionUnit::UNDECLARED`]), and a
    /// scheduler then treats the units as equals.
    fn execution_unit(&self, unit: u8) -> ExecutionUnit {
        let _ = unit;
        ExecutionUnit::UNDECLARED
    }
    /// What `job` would cost on its queue's unit with nothing else running, without running
    /// it; `None` when the driver cannot tell (the default). A static schedule is planned from
    /// these; a driver without them gets schedules planned from a measured run instead.
    fn estimate(&mut self, job: &Job<'_>) -> Option<Estimate> {
        let _ = job;
        None
    }
    /// What running `op` on the CPU fallback would cost, in the clock's cycles; `None` when
    /// the driver cannot tell (the default).
    fn estimate_host_compute(&self, op: &Op) -> Option<Cycles> {
        let _ = op;
        None
    }
    /// Whether [`now`](Npu::now) counts the CPU's own work, so that a tuner can time the CPU
    /// fallback against the NPU and find a true winner: a free-running CPU cycle counter does,
    /// a simulator does when [`host_compute`](Npu::host_compute) charges it. The default,
    /// `false`, keeps the CPU out of tuning: a driver opts in.
    fn clock_counts_cpu(&self) -> bool {
        false
    }
    /// Abandons every job in flight and returns the NPU to idle, as the Ethos-U driver does
    /// after a fault: afterwards `poll` of a fence issued before never answers `WouldBlock`
    /// (a job that had not completed answers [`HalError::Fault`] with [`Fault::Cancelled`],
    /// while its record lasts), the queues are empty, and fences go on counting up. Memory
    /// the abandoned jobs wrote is undefined; other memory is kept. The default cannot reset
    /// and answers [`HalError::ResetUnsupported`].
    fn reset(&mut self) -> Result<(), HalError> {
        Err(HalError::ResetUnsupported)
    }
}
