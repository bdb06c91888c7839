//! The compute server: tensors, memory and jobs over one NPU.
//!
//! # Design
//!
//! [`NpuServer`] owns the HAL ([`Npu`]), the memory manager ([`MemoryManagement`], by default
//! Burn's chunk/slice strategy), the handle table and a pool of host staging memory. It turns
//! client requests into jobs. Each of its jobs is a module:
//!
//! | module | job |
//! |---|---|
//! | `tensors` | making tensors and their handles: in device memory, placed in a pool, constant (bound in flash the NPU reads, or uploaded once), pinned; mapping flash |
//! | `release` | dropping references; memory goes back fence-safe when the last one goes |
//! | `transfers` | host↔device and device↔device DMA jobs: `write`, `read`, `copy` |
//! | `residency` | where a tensor's newest bytes are ([`Residency`]), and the record of a pinned host block |
//! | `pinned` | pinned host blocks: moving their bytes without a staging copy, and the CPU's access to them |
//! | `dispatch` (and `deps`) | checking a job's operands, choosing its unit, submitting it with the fences it waits for |
//! | `fallback` | running an op the NPU lacks on the CPU kernels: in place in device memory where the HAL lends it ([`Npu::device_memory`]), else over host staging |
//! | `job_plan` | jobs checked once and submitted many times ([`JobPlanState`]) |
//! | `tuning` | the cache of tuned choices, and measuring them ([`TuneStats`]) |
//! | `inspect` | the tensors and staging memory as plain figures, for checking invariants from outside ([`LiveTensor`], [`StagingUse`]) |
//! | `passes` | measured-then-guided runs, for a server over a [`GuidedMemory`](crate::memory::GuidedMemory) ([`PassServer`]) |
//! | `watchdog` | a deadline for every job in flight, from the HAL's predictions ([`WatchdogConfig`]) |
//! | `recovery` | after a hardware fault or a timeout: resetting the NPU and putting the books straight |
//!
//! The rules they share:
//!
//! - Nothing waits that need not: `create` and `write` return once their upload is queued,
//!   `execute` once its job is submitted; a job waits, on the NPU, for the last writer of each
//!   input and, before overwriting its output, for the jobs still reading the old contents.
//!   That is what makes reusing a just-released chunk safe without the CPU ever waiting.
//! - The server waits (`Npu::wait_for_event`, a `WFI` on hardware) only in `read`, `sync`,
//!   host access to a pinned block, tuning, and when a fixed resource is exhausted but will be
//!   freed by jobs in flight: a full job queue, full staging memory, or an arena whose free
//!   chunks are still read by running jobs. `read`, `sync` and host reads of a pinned block
//!   also come in non-blocking forms (`try_read`, `try_sync`, `try_host_ref`), which a channel
//!   that must not wait while it holds the server runs instead, waiting between attempts
//!   with [`ComputeServer::wait_for_event`].
//! - [`ServerStats`] counts every job and transfer, by direction, and the bytes the CPU copied
//!   through staging.
//! - A hardware fault ([`HalError::Fault`]) or a job past its watchdog deadline
//!   ([`WatchdogConfig`]) is acted on where the server waits: it resets the NPU
//!   ([`Npu::reset`]), ends every job in flight, and returns [`Error::Fault`] naming the job,
//!   its operator and the fault. Tensors whose newest bytes a job in flight was producing are
//!   marked lost (reading one is [`Error::ContentsLost`] until it is written again); access
//!   records, newest fences, the pinned blocks' DMA records and pending staging blocks are
//!   emptied, so nothing leaks and no fence is left to wait for; a job plan forgets its last
//!   run's fences at its next run. Constants are read-only for jobs, so a fault cannot
//!   corrupt them, but one whose upload was itself in flight is lost: wait for the uploads
//!   of a prepare ([`sync`](ComputeServer::sync)) where faults are expected. A driver that
//!   cannot reset leaves the server as it was, and the error says it did not recover.
//!
//! [`ComputeServer`] is the seam between the client (and channels) and a server: they are
//! generic over it rather than over the server's five parameters, and a second server (a
//! proxy that records requests, a server over two NPUs) implements it. `NpuServer` implements
//! it by handing each request to the module whose job it is.

mod deps;
mod dispatch;
mod fallback;
mod inspect;
mod job_plan;
mod passes;
mod pinned;
mod placement;
mod recovery;
mod release;
mod residency;
mod staging;
mod tensors;
mod transfers;
mod tuning;
mod watchdog;

pub use inspect::{LiveTensor, StagingUse};
pub use job_plan::JobPlanState;
pub use passes::PassServer;
pub use placement::Placement;
pub use residency::Residency;
pub use tensors::TensorState;
pub use tuning::{TuneStats, VERIFY_CHUNK};
pub use watchdog::{WatchdogConfig, WATCHED_JOBS};

use deps::Frontier;
use residency::HostCopy;
use staging::Staging;
use tensors::{next_server_tag, FlashSegment, TensorEntry};
use tuning::Tuning;
use watchdog::{Verdict, Watchdog, Watched};

use crate::error::Error;
use crate::hal::{
    Capabilities, Fence, HalError, Job, Npu, SetupError, MAX_EXECUTION_UNITS, MAX_FLASH_SEGMENTS,
    MAX_QUEUES,
};
use crate::handle::{HandleId, HandleTable};
use crate::memory::{
    ChunkSliceMemory, MemoryBinding, MemoryConfig, MemoryManagement, MemoryStats, DEFAULT_CHUNKS,
};
use crate::ops::Op;
use crate::storage::Block;
use crate::tune::DEFAULT_TUNE_ENTRIES;

/// What a client (and a channel) asks of a server. Handles are plain ids here; the client
/// wraps them in RAII tensors. See the [module docs](self) for the design.
pub trait ComputeServer {
    /// Tensors that can be alive at once (the handle table's capacity).
    const HANDLE_CAPACITY: usize;

    /// A tensor of `bytes` uninitialised bytes on the device.
    fn empty(&mut self, bytes: u32) -> Result<HandleId, Error>;
    /// A tensor of `bytes` uninitialised bytes in the NPU's slow memory tier
    /// ([`Space::Slow`](crate::hal::Space::Slow)): jobs read and write it there, at the
    /// tier's cost, and [`copy`](Self::copy) moves it to and from the arena. Everything else
    /// about it is a tensor's: it can be written, read, copied, placed in, released.
    ///
    /// Errors: [`Error::SlowTierOutOfMemory`] (also where the NPU has no slow tier),
    /// [`Error::CapacityExceeded`].
    fn empty_slow(&mut self, bytes: u32) -> Result<HandleId, Error>;
    /// A tensor of `bytes` bytes that `fill` writes straight into host staging memory, then
    /// uploaded (returns once the upload is queued): data computed on the fly needs no buffer
    /// of its own. A `constant` tensor is read-only: writing it (as a job's output, by
    /// [`write`](Self::write) or [`copy`](Self::copy), or through a [`place`](Self::place)d
    /// view) is refused with [`Error::ReadOnlyTensor`], and a job plan does not look for
    /// writers of it once its upload has ended. An error from `fill` is returned as is.
    fn create(
        &mut self,
        bytes: u32,
        constant: bool,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error>;
    /// A read-only tensor of constant data (a model's weights): bound in place when `data`
    /// lies in a mapped flash segment (see [`map_flash`](Self::map_flash)) and is aligned for
    /// the NPU, else uploaded to the device once, as a constant of [`create`](Self::create).
    fn create_const(&mut self, data: &'static [u8]) -> Result<HandleId, Error>;
    /// A tensor of `bytes` at `offset` inside the tensor `pool`, laid out ahead of time by an
    /// [`ArenaPlan`](crate::memory::ArenaPlan) (see [`MemoryManagement::place`]): no memory is
    /// searched or reserved. The placed tensor keeps the pool alive. Overlapping earlier
    /// placements is allowed and fence-safe: the new tensor's jobs wait for theirs. Errors:
    /// those of [`MemoryManagement::place`], [`Error::ReadOnlyTensor`] for a constant pool,
    /// [`Error::PinnedPool`] for a pinned one.
    fn place(&mut self, pool: HandleId, offset: u32, bytes: u32) -> Result<HandleId, Error>;
    /// A tensor of `bytes` with a pinned host block (see [`Residency`]): the CPU writes and
    /// reads it in place, and transfers go straight between that block and the device. Device
    /// memory is reserved at the first job that touches it. Errors:
    /// [`Error::StagingExhausted`] or [`Error::CapacityExceeded`] (`StagingBlocks`) when
    /// host memory cannot hold it.
    fn pinned(&mut self, bytes: u32) -> Result<HandleId, Error>;
    /// Maps constant data (a model in flash) for [`create_const`](Self::create_const);
    /// returns the segment. Errors as [`Npu::map_flash`]: an NPU that cannot read flash
    /// answers [`HalError::FlashUnreadable`], and constants are then copied to the device.
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, Error>;
    /// Unmaps a segment after waiting for every submitted job. Errors with
    /// [`Error::FlashInUse`] while tensors still refer to it.
    fn unmap_flash(&mut self, segment: u8) -> Result<(), Error>;
    /// What the server knows of a tensor: size, residency, whether it is in flash, constant,
    /// pinned.
    fn tensor(&self, id: HandleId) -> Result<TensorState, Error>;
    /// Add `n` references to a tensor.
    fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error>;
    /// Drop `n` references; the last one frees the tensor's memory, fence-safe.
    fn release(&mut self, id: HandleId, n: u32) -> Result<(), Error>;
    /// [`release`](Self::release) for references dropped while the server was lent out
    /// (a channel's deferred releases). Such a drop may be a job plan's, which had no chance
    /// to write its jobs into the records of the constants and tensors it held, so the
    /// tensor's record takes every job submitted so far as a writer: its memory, freed now
    /// or by a later release, waits for them all. Rare, so conservative.
    fn release_late(&mut self, id: HandleId, n: u32) -> Result<(), Error>;

    /// Overwrites a tensor with `data` (an upload, returned as soon as it is queued).
    fn write(&mut self, id: HandleId, data: &[u8]) -> Result<(), Error>;
    /// Copies a tensor's bytes into `out`, waiting only for the jobs that produce it.
    fn read(&mut self, id: HandleId, out: &mut [u8]) -> Result<(), Error>;
    /// Like [`read`](Self::read), but `WouldBlock` until the bytes are ready; never waits.
    fn try_read(&mut self, id: HandleId, out: &mut [u8]) -> nb::Result<(), Error>;
    /// Forgets a read of tensor `id` left unfinished ([`try_read`](Self::try_read) answered
    /// `WouldBlock` and the caller gave up, as a dropped `read_async` future does): its
    /// download, if one is under way, is dropped (its staging block freed once the transfer
    /// ends), so that no later read returns those bytes once newer ones were written. The
    /// default does nothing.
    fn cancel_read(&mut self, id: HandleId) -> Result<(), Error> {
        let _ = id;
        Ok(())
    }
    /// Queues a copy of `src`'s newest bytes into `dst` (same size) and returns at once:
    /// device to device when both are on the device, straight from or into a pinned host
    /// block otherwise (no staging copy). Errors: [`Error::SizeMismatch`],
    /// [`Error::ReadOnlyTensor`] for a constant `dst`.
    fn copy(&mut self, src: HandleId, dst: HandleId) -> Result<(), Error>;
    /// Lets `f` write a pinned tensor's host block in place, after the DMA jobs still using
    /// the block complete; the host then holds the newest bytes. Errors: [`Error::NotPinned`].
    fn host_mut(&mut self, id: HandleId, f: &mut dyn FnMut(&mut [u8])) -> Result<(), Error>;
    /// Lets `f` read a pinned tensor's host block in place, downloading the newest bytes into
    /// it first when the device holds them. Errors: [`Error::NotPinned`], a failed job.
    fn host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> Result<(), Error>;
    /// Like [`host_ref`](Self::host_ref) but never waits: `WouldBlock` (after starting the
    /// download, if one is needed) until the host block holds the newest bytes.
    fn try_host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> nb::Result<(), Error>;

    /// Runs `op` on `inputs` into `output`; returns once the job is submitted. How it runs
    /// follows the tuning the server was built with (see [`NpuServer::with_tuning`]): the
    /// NPU's own choice by default, or the CPU fallback kernels where the NPU lacks the op.
    fn execute(&mut self, op: &Op, inputs: &[HandleId], output: HandleId) -> Result<(), Error>;
    /// [`execute`](Self::execute) at a placement the caller decided (a static schedule's):
    /// see [`Placement`]. Errors: [`HalError::NoSuchUnit`]
    /// for a unit the NPU lacks, and those of `execute`.
    fn execute_on(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error>;
    /// What `op` on `inputs` into `output` would cost at `placement`, as the HAL predicts it
    /// ([`Npu::estimate`]); `None` when the HAL cannot tell.
    /// Nothing runs. Errors: those of `execute`'s checks, and `NoSuchUnit`.
    fn estimate(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Option<crate::hal::Estimate>, Error>;
    /// Waits for every submitted job.
    fn sync(&mut self) -> Result<(), Error>;
    /// Like [`sync`](Self::sync) but never waits: `WouldBlock` while a job submitted so far
    /// is still running (one submitted while a caller keeps trying counts too). As `sync`,
    /// it reports no job's failure: the read of what a failed job produced does. The default,
    /// for a server that cannot poll, is the blocking `sync`.
    fn try_sync(&mut self) -> nb::Result<(), Error> {
        self.sync().map_err(nb::Error::Other)
    }
    /// The completion interrupt: retire finished jobs.
    fn on_interrupt(&mut self);

    /// Sleeps until a job may have completed ([`Npu::wait_for_event`]: a `WFI` on hardware,
    /// the next job's end in the simulator), counted in [`ServerStats::waits`]: how a channel
    /// waits between the non-blocking steps of a call (see
    /// [`ComputeChannel::wait_on`](crate::channel::ComputeChannel::wait_on)). Fails with
    /// the fault a job in flight met or the watchdog found on waking ([`Error::Fault`]), the
    /// server having recovered from it.
    fn wait_for_event(&mut self) -> Result<(), Error>;

    /// Appends a job to `plan` (see [`JobPlanState`]): `op` on `inputs` into `output`,
    /// checked as [`execute`](Self::execute) checks it, run the way the tuning cache says
    /// (never measured), on the next execution unit, or on the CPU fallback where `execute`
    /// would run it there (a CPU step). Nothing is submitted. The plan holds a
    /// reference to each tensor until [`release_plan`](Self::release_plan). Errors: those of
    /// `execute`'s checks; [`JobPlanError::Pinned`](crate::JobPlanError::Pinned) for a step
    /// a plan cannot hold; [`JobPlanError::Stale`](crate::JobPlanError::Stale) when the tuning
    /// changed since the first step; [`Error::CapacityExceeded`] naming
    /// [`Capacity::PlanSteps`](crate::Capacity::PlanSteps) or
    /// [`Capacity::PlanTensors`](crate::Capacity::PlanTensors). A refused step leaves the
    /// plan as it was.
    fn plan_step<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error>;
    /// [`plan_step`](Self::plan_step) at a placement the caller decided (a static
    /// schedule's): see [`Placement`]. Errors: those of `plan_step`, and `NoSuchUnit`.
    fn plan_step_on<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error>;
    /// Submits every job of `plan` and returns once the last is submitted, `ops[k]` being step
    /// `k`'s op (the plan does not copy ops: a model keeps its own). A plan without CPU steps
    /// never waits; a CPU step waits for the downloads of its inputs (computing in place, for
    /// the jobs its operands wait for), then computes. Errors:
    /// [`JobPlanError::OpCount`](crate::JobPlanError::OpCount) and
    /// [`JobPlanError::OpMismatch`](crate::JobPlanError::OpMismatch) (nothing
    /// submitted), [`JobPlanError::Stale`](crate::JobPlanError::Stale), a
    /// [`Error::StaleHandle`] for a tensor freed under the plan, and the HAL's errors; from a
    /// CPU step, the fallback's (a failed job it waited for, [`Error::StagingExhausted`] or
    /// [`Error::CapacityExceeded`] naming
    /// [`Capacity::StagingBlocks`](crate::Capacity::StagingBlocks), a kernel's error). A run
    /// that fails leaves the plan reusable: the next run waits for what this one submitted.
    fn run_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        ops: &[&Op],
    ) -> Result<(), Error>;
    /// Gives `plan` the caller's reference to tensor `id`, and releases it. When the plan
    /// uses the tensor and now holds the only reference left, the tensor becomes the plan's
    /// own: no handle outside can reach it, so runs no longer walk or write its access
    /// record (the plan's newest jobs are written into it at
    /// [`release_plan`](Self::release_plan)). Errors: [`Error::StaleHandle`] for a freed
    /// tensor.
    fn plan_adopt<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error>;
    /// Makes tensor `id` one of `plan`'s even though no job of it names the tensor (the plan
    /// holds a reference): memory inside it that the plan's jobs write (a concatenation's
    /// output, written in place by its producers) then has their jobs in its access record, so
    /// whoever reads it after a run waits for them. Errors: [`Error::StaleHandle`];
    /// [`Error::CapacityExceeded`] naming [`Capacity::PlanTensors`](crate::Capacity::PlanTensors).
    fn plan_include<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error>;
    /// Drops the references `plan` holds (and its scratch tensor) and empties it.
    fn release_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
    ) -> Result<(), Error>;

    /// What the NPU behind this server can do.
    fn capabilities(&self) -> Capabilities;
    /// Execution unit `unit` as the HAL declares it ([`Npu::execution_unit`]).
    fn execution_unit(&self, unit: u8) -> crate::hal::ExecutionUnit;
    /// Job and transfer counters.
    fn stats(&self) -> ServerStats;
    /// Memory figures of the device arena.
    fn memory_stats(&self) -> MemoryStats;
    /// Restarts the memory peaks from the current figures (see
    /// [`MemoryManagement::reset_peak`]), to measure one phase of a run.
    fn reset_memory_peak(&mut self);
    /// Counters of the tuner.
    fn tune_stats(&self) -> TuneStats;
    /// Writes the measured choices as a tuning table (see [`crate::tune`]) into `out`; returns
    /// its length. Errors: [`Error::Table`]
    /// ([`TableError::BufferTooSmall`](crate::tune::TableError::BufferTooSmall)).
    fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error>;
}

/// The default `HANDLES` of an [`NpuServer`]: tensors alive at once (and the default `N` of
/// the channels, which must be at least `HANDLES`).
pub const DEFAULT_HANDLES: usize = 64;

/// The default `STAGING` of an [`NpuServer`]: host staging blocks allocated or in flight.
pub const DEFAULT_STAGING: usize = 16;

/// Counters of the work a server has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerStats {
    /// Compute jobs submitted to the NPU.
    pub compute_jobs: u32,
    /// Operators run on the CPU fallback kernels.
    pub cpu_ops: u32,
    /// Host→device transfers.
    pub uploads: u32,
    /// Device→host transfers.
    pub downloads: u32,
    /// Bytes moved host→device.
    pub upload_bytes: u64,
    /// Bytes moved device→host.
    pub download_bytes: u64,
    /// Device→device transfers ([`ComputeServer::copy`]).
    pub device_copies: u32,
    /// Bytes the CPU copied through staging blocks (`create`, `write`, `read`): zero for data
    /// moved through pinned tensors.
    pub staging_copy_bytes: u64,
    /// Times the CPU slept waiting for the NPU.
    pub waits: u32,
    /// Runs of a [`JobPlan`](crate::client::JobPlan) (its jobs are counted in `compute_jobs`).
    pub plan_runs: u32,
    /// Most tensors alive at once: the `HANDLES` capacity this run needed.
    pub handles_peak: u32,
    /// Most host staging blocks (pinned ones included) allocated or awaiting their transfer at
    /// once: the `STAGING` capacity this run needed.
    pub staging_blocks_peak: u32,
    /// The highest byte of host memory a staging block reached: host memory of this size
    /// served every transfer of this run without waiting for another to finish.
    pub staging_bytes_peak: u32,
    /// The largest host staging block of this run: with less host memory than
    /// `staging_bytes_peak` but at least this (and room for the pinned tensors), transfers
    /// wait for earlier ones to free their blocks instead.
    pub staging_largest_bytes: u32,
    /// Hardware faults and watchdog timeouts the server acted on.
    pub faults: u32,
    /// Of those, the times it reset the NPU and went on ([`Npu::reset`] succeeded).
    pub recoveries: u32,
}

/// The compute server over one NPU.
///
/// - `H`: the HAL.
/// - `M`: the memory manager, by default [`ChunkSliceMemory`] with 64 chunks.
/// - `HANDLES`: tensors alive at once (default 64).
/// - `STAGING`: host staging blocks allocated or in flight at once (default 16).
/// - `TUNE`: tuned op shapes the autotuner remembers (default 64, a power of two; see
///   [`TuneCache`](crate::tune::TuneCache)).
///
/// Build it with [`new`](Self::new) (or [`with_memory`](Self::with_memory)), set how it tunes
/// with [`with_tuning`](Self::with_tuning) and [`with_tuning_table`](Self::with_tuning_table),
/// then hand it to a channel; everything after goes through [`ComputeServer`].
pub struct NpuServer<
    H: Npu,
    M = ChunkSliceMemory<DEFAULT_CHUNKS>,
    const HANDLES: usize = DEFAULT_HANDLES,
    const STAGING: usize = DEFAULT_STAGING,
    const TUNE: usize = DEFAULT_TUNE_ENTRIES,
> {
    npu: H,
    caps: Capabilities,
    memory: M,
    handles: HandleTable<TensorEntry, HANDLES>,
    staging: Staging<STAGING>,
    /// Where the memory manager's slow tier starts ([`ChunkSliceMemory::with_slow_tier`]):
    /// its offsets from here on are the HAL's slow memory; `u32::MAX` without a tier.
    slow_base: u32,
    /// Newest fence submitted per queue, for `sync`.
    newest: [Option<Fence>; MAX_QUEUES],
    /// Newest fence known complete per queue.
    frontier: Frontier,
    next_unit: u8,
    stats: ServerStats,
    flash: [Option<FlashSegment>; MAX_FLASH_SEGMENTS],
    /// Pinned tensors' host blocks, which share the staging blocks' capacity.
    pinned: [Option<HostCopy>; STAGING],
    /// Reads started by `try_read` and not finished: the tensor, the transfer's fence and
    /// the staging block it fills (the tensor's entry says it has one). Each holds a staging
    /// block, so `STAGING` entries suffice.
    downloads: heapless::Vec<(HandleId, Fence, Block), STAGING>,
    tuning: Tuning<TUNE>,
    watchdog: Watchdog,
    /// The newest fence submitted, on any queue.
    last_fence: Option<Fence>,
    /// With the watchdog off: every fence up to this one has ended, none with a fault (the
    /// server polls each in turn where it waits: a faulted job is seen even when the job
    /// waited for, behind it on its queue, completed).
    checked: Option<Fence>,
    /// Recoveries so far: a job plan whose last run was before the latest one forgets the
    /// fences that run received (the reset ended them).
    epoch: u32,
    /// A recovery marked tensors lost and some may still be ([`TensorEntry::lost`]).
    maybe_lost: bool,
}

impl<
        H: Npu,
        const CHUNKS: usize,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, ChunkSliceMemory<CHUNKS>, HANDLES, STAGING, TUNE>
{
    /// A server over `npu` whose arena is all of the NPU's device memory, managed with Burn's
    /// chunk/slice strategy under `config`.
    ///
    /// Errors: [`Error::Setup`] when the NPU declares more execution units than
    /// [`MAX_EXECUTION_UNITS`] (a capacity of this build: its features `units-2`, `units-4`,
    /// `units-8`); [`Error::Storage`] when its alignment is not a power of two
    /// that divides its memories.
    pub fn new(npu: H, config: MemoryConfig) -> Result<Self, Error> {
        let caps = npu.capabilities();
        let memory = ChunkSliceMemory::with_slow_tier(
            caps.device_memory_bytes,
            caps.slow_memory_bytes,
            caps.alignment,
            config,
        )?;
        Self::with_memory(npu, memory)
    }

    /// [`new`](Self::new) in two steps, for a server built where it is kept: this one makes
    /// the server with an arena and host staging of no bytes (nothing to check, so nothing
    /// fails), then [`setup`](Self::setup) gives it the NPU's memories, in place.
    ///
    /// A server's tables are kilobytes (`HANDLES` tensors, `CHUNKS` chunks): `new` builds
    /// them and returns them inside a `Result`, and moving them from there into a channel
    /// is a copy the compiler does not elide, on the stack of a firmware that counts it. A
    /// value this function returns, handed straight to a channel's constructor, is built
    /// where the channel keeps it:
    ///
    /// ```
    /// use npu_compute::prelude::*;
    /// use npu_compute::hal::CpuOnly;
    /// let (mut arena, mut staging) = ([0u32; 256], [0u32; 64]);
    /// let npu = CpuOnly::new(bytemuck::cast_slice_mut(&mut arena), bytemuck::cast_slice_mut(&mut staging));
    /// let channel: RefCellChannel<NpuServer<_>> = RefCellChannel::new(NpuServer::unset(npu));
    /// channel.with(|s| s.setup(MemoryConfig::default())).unwrap().unwrap();
    /// assert_eq!(channel.with(|s| s.memory_stats().largest_free).unwrap(), 1024);
    /// ```
    pub fn unset(npu: H) -> Self {
        let caps = npu.capabilities();
        Self::assemble(
            npu,
            caps,
            ChunkSliceMemory::empty(MemoryConfig::default()),
            Staging::empty(),
        )
    }

    /// Gives a server from [`unset`](Self::unset) the NPU's memories: its arena, managed with
    /// Burn's chunk/slice strategy under `config`, and its host staging. Errors as
    /// [`new`](Self::new), the server then left unset; and [`Error::Setup`] for a server
    /// that has served a request already (a tensor alive, a job submitted, staging in use),
    /// whose memories are not replaced under it.
    pub fn setup(&mut self, config: MemoryConfig) -> Result<(), Error> {
        let served =
            self.handles.live() + self.staging.in_use() + usize::from(self.last_fence.is_some());
        if served > 0 {
            return Err(SetupError::OutOfRange {
                parameter: "what NpuServer::setup found in use (tensors alive, staging blocks, \
                            a job submitted)",
                value: served,
                expected: "0: set a server up before its first request",
            }
            .into());
        }
        let caps = self.caps;
        check_units(caps)?;
        self.memory.reset_tiers(
            caps.device_memory_bytes,
            caps.slow_memory_bytes,
            caps.alignment,
            config,
        )?;
        self.staging = Staging::new(caps.host_memory_bytes, caps.alignment)?;
        Ok(())
    }
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// A server over `npu` with a memory manager of your choice. Errors as [`new`](Self::new).
    pub fn with_memory(npu: H, memory: M) -> Result<Self, Error> {
        let caps = npu.capabilities();
        check_units(caps)?;
        let staging = Staging::new(caps.host_memory_bytes, caps.alignment)?;
        Ok(Self::assemble(npu, caps, memory, staging))
    }

    /// The server over `npu` (which declares `caps`), `memory` and `staging`, with empty
    /// tables.
    fn assemble(npu: H, mut caps: Capabilities, memory: M, staging: Staging<STAGING>) -> Self {
        if !H::RUNS_OPS {
            // So that every check of the operators agrees with the dispatch, which asks
            // `RUNS_OPS` first.
            caps.ops = crate::ops::OpSet::EMPTY;
        }
        let slow_base = if caps.slow_memory_bytes == 0 {
            u32::MAX
        } else {
            caps.device_memory_bytes & !caps.alignment.wrapping_sub(1)
        };
        NpuServer {
            staging,
            npu,
            caps,
            memory,
            slow_base,
            handles: HandleTable::new(next_server_tag()),
            newest: [None; MAX_QUEUES],
            frontier: Frontier::default(),
            next_unit: 0,
            stats: ServerStats::default(),
            flash: [None; MAX_FLASH_SEGMENTS],
            pinned: [None; STAGING],
            downloads: heapless::Vec::new(),
            tuning: Tuning::new(),
            watchdog: Watchdog::new(WatchdogConfig::default()),
            last_fence: None,
            checked: None,
            epoch: 0,
            maybe_lost: false,
        }
    }

    /// The server with its watchdog set to `config` (by default off: see [`WatchdogConfig`];
    /// [`WatchdogConfig::ON`] turns it on).
    pub fn with_watchdog(mut self, config: WatchdogConfig) -> Self {
        self.watchdog.config = config;
        self
    }

    /// Sets how the watchdog judges jobs submitted from now on late (jobs in flight when it
    /// is turned on are not followed).
    pub fn set_watchdog(&mut self, config: WatchdogConfig) {
        self.watchdog.config = config;
    }

    /// How the watchdog judges jobs late.
    pub fn watchdog(&self) -> WatchdogConfig {
        self.watchdog.config
    }

    /// The HAL.
    pub fn npu(&self) -> &H {
        &self.npu
    }

    /// The HAL, mutably (a simulator's clock, fault injection). Submitting jobs behind the
    /// server's back voids its dependency tracking.
    pub fn npu_mut(&mut self) -> &mut H {
        &mut self.npu
    }

    /// The memory manager.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// Tensors alive.
    pub fn live_tensors(&self) -> usize {
        self.handles.live()
    }

    /// Host staging blocks allocated now: pinned tensors' blocks, and blocks carrying or
    /// awaiting a transfer. With [`live_tensors`](Self::live_tensors) and the
    /// [memory figures](ComputeServer::memory_stats), what a check for leaks compares.
    pub fn staging_blocks(&self) -> usize {
        self.staging.in_use()
    }

    /// Forget completed fences, so chunks whose jobs are over can go back to the arena.
    fn retire_memory_fences(&mut self) {
        let (npu, frontier) = (&mut self.npu, &mut self.frontier);
        self.memory
            .retire_fences(&mut |q, f| frontier.is_done(npu, q, f));
    }

    /// Sleeps until the NPU may have completed a job, looking at the watchdog before and
    /// after: a fault or a timeout is recovered from and returned.
    fn wait(&mut self) -> Result<(), Error> {
        self.watch(false)?;
        self.stats.waits += 1;
        self.npu.wait_for_event();
        self.watch(true)
    }

    /// Acts on a fault a poll reported, or one the watchdog finds at the head of its list
    /// (`woke`: just after a sleep).
    fn watch(&mut self, woke: bool) -> Result<(), Error> {
        if let Some((fence, fault)) = self.frontier.fault {
            return Err(self.recover(fence, fault));
        }
        if !self.watching() {
            if self.watchdog.config.enabled {
                // Asked of a build without it.
                return Err(Error::NotBuilt {
                    feature: "recovery",
                });
            }
            return self.scan();
        }
        let now = self.npu.now();
        let npu = &mut self.npu;
        let verdict = self.watchdog.look(now, woke, |f| fence_state(npu, f));
        match verdict {
            Verdict::Fine => Ok(()),
            Verdict::Fault(fence, fault) => Err(self.recover(fence, fault)),
        }
    }

    /// Polls the fences after [`checked`](Self::checked), oldest first, up to the first still
    /// in flight: a fault is recovered from and returned. A driver whose fences are not
    /// consecutive answers `UnknownFence` for the numbers between, passed over; at most
    /// `SCAN` are polled a time.
    fn scan(&mut self) -> Result<(), Error> {
        const SCAN: u64 = 1024;
        let Some(last) = self.last_fence else {
            return Ok(());
        };
        let first = self.checked.map_or(0, |c| c.0.saturating_add(1));
        let end = last.0.min(first.saturating_add(SCAN));
        // `checked` is written once, after the loop (or before a recovery, which reads it):
        // the loop runs once per job on a planned invoke's wait.
        let mut next = first;
        let fault = loop {
            if next > end {
                break None;
            }
            match self.npu.poll(Fence(next)) {
                Err(nb::Error::WouldBlock) => break None,
                Err(nb::Error::Other(HalError::Fault { fence, fault })) => {
                    break Some((fence, fault))
                }
                _ => next += 1,
            }
        };
        if next > first {
            self.checked = Some(Fence(next - 1));
        }
        match fault {
            Some((fence, fault)) => Err(self.recover(fence, fault)),
            None => Ok(()),
        }
    }

    /// A job's failure as the error to return: a hardware fault is recovered from first.
    fn failed(&mut self, e: HalError) -> Error {
        match e {
            HalError::Fault { fence, fault } => self.recover(fence, fault),
            e => e.into(),
        }
    }

    /// Block until `fence` completes.
    fn wait_for(&mut self, fence: Fence) -> Result<(), Error> {
        loop {
            match self.npu.poll(fence) {
                // The jobs before it may have faulted (on its queue, it ran after them).
                Ok(()) => return self.watch(false),
                Err(nb::Error::Other(e)) => return Err(self.failed(e)),
                Err(nb::Error::WouldBlock) => self.wait()?,
            }
        }
    }

    #[inline(always)]
    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, Error> {
        loop {
            match self.npu.submit(job) {
                Ok(fence) => {
                    let slot = &mut self.newest[job.queue.index()];
                    *slot = Some(fence);
                    self.last_fence = Some(fence);
                    if self.watching() {
                        self.follow(job, fence);
                    }
                    return Ok(fence);
                }
                Err(HalError::QueueFull { .. }) => self.wait()?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether the watchdog follows jobs: never in a build without `recovery`, which lets
    /// the compiler leave it out.
    #[inline(always)]
    fn watching(&self) -> bool {
        cfg!(feature = "recovery") && self.watchdog.config.enabled
    }

    /// Gives the watchdog the job just submitted as `fence`, with its deadline. Out of line:
    /// the dispatch path of a server without a watchdog stays as short as it was.
    #[inline(never)]
    fn follow(&mut self, job: &Job<'_>, fence: Fence) {
        let predicted = self.npu.estimate(job).map(|e| e.cycles);
        let op = match job.kind {
            crate::hal::JobKind::Compute { op, .. } => Some(op.kind()),
            crate::hal::JobKind::Transfer { .. } => None,
        };
        self.watchdog.push(
            Watched {
                fence,
                predicted: watchdog::predicted(predicted),
                op,
            },
            job.queue.index(),
        );
    }

    /// Device memory for `bytes`, waiting for running jobs if only they hold back free memory.
    fn reserve(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        self.with_memory_retry(|m| m.reserve(bytes))
    }

    /// Runs `f` on the memory manager, waiting for the NPU and retrying while it fails for
    /// lack of memory that only running jobs hold back.
    fn with_memory_retry<R>(
        &mut self,
        mut f: impl FnMut(&mut M) -> Result<R, Error>,
    ) -> Result<R, Error> {
        loop {
            self.retire_memory_fences();
            match f(&mut self.memory) {
                Err(Error::OutOfMemory { .. } | Error::CapacityExceeded { .. })
                    if self.memory.has_busy_free_chunks() =>
                {
                    self.wait()?
                }
                other => return other,
            }
        }
    }
}

/// [`Error::Setup`] when the NPU declares more execution units than this build holds.
fn check_units(caps: Capabilities) -> Result<(), Error> {
    if usize::from(caps.execution_units) > MAX_EXECUTION_UNITS {
        // Queues are indexed by unit: more would run off the per-queue tables.
        return Err(SetupError::OutOfRange {
            parameter: "Capabilities::execution_units",
            value: usize::from(caps.execution_units),
            expected: crate::hal::UNITS_EXPECTED,
        }
        .into());
    }
    Ok(())
}

/// Whether the job of `fence` is over (`Ok(true)`: completed, or failed in a way that leaves
/// nothing to recover), still in flight (`Ok(false)`), or faulted.
fn fence_state<H: Npu>(npu: &mut H, fence: Fence) -> Result<bool, crate::hal::Fault> {
    match npu.poll(fence) {
        Ok(()) => Ok(true),
        Err(nb::Error::WouldBlock) => Ok(false),
        Err(nb::Error::Other(HalError::Fault { fault, .. })) => Err(fault),
        Err(nb::Error::Other(_)) => Ok(true),
    }
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > ComputeServer for NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    const HANDLE_CAPACITY: usize = HANDLES;

    fn empty(&mut self, bytes: u32) -> Result<HandleId, Error> {
        Self::empty(self, bytes)
    }

    fn empty_slow(&mut self, bytes: u32) -> Result<HandleId, Error> {
        let binding = self.with_memory_retry(|m| m.reserve_slow(bytes))?;
        self.bind_new(binding, bytes)
    }

    fn create(
        &mut self,
        bytes: u32,
        constant: bool,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error> {
        Self::create(self, bytes, constant, fill)
    }

    fn create_const(&mut self, data: &'static [u8]) -> Result<HandleId, Error> {
        Self::create_const(self, data)
    }

    fn place(&mut self, pool: HandleId, offset: u32, bytes: u32) -> Result<HandleId, Error> {
        Self::place(self, pool, offset, bytes)
    }

    fn pinned(&mut self, bytes: u32) -> Result<HandleId, Error> {
        Self::pinned(self, bytes)
    }

    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, Error> {
        Self::map_flash(self, bytes)
    }

    fn unmap_flash(&mut self, segment: u8) -> Result<(), Error> {
        Self::unmap_flash(self, segment)
    }

    fn tensor(&self, id: HandleId) -> Result<TensorState, Error> {
        Self::tensor(self, id)
    }

    fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        Self::retain(self, id, n)
    }

    fn release(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        Self::release(self, id, n)
    }

    fn release_late(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        Self::release_late(self, id, n)
    }

    fn write(&mut self, id: HandleId, data: &[u8]) -> Result<(), Error> {
        Self::write(self, id, data)
    }

    fn read(&mut self, id: HandleId, out: &mut [u8]) -> Result<(), Error> {
        Self::read(self, id, out)
    }

    fn try_read(&mut self, id: HandleId, out: &mut [u8]) -> nb::Result<(), Error> {
        Self::try_read(self, id, out)
    }

    fn cancel_read(&mut self, id: HandleId) -> Result<(), Error> {
        self.cancel_download(id)
    }

    fn copy(&mut self, src: HandleId, dst: HandleId) -> Result<(), Error> {
        Self::copy(self, src, dst)
    }

    fn host_mut(&mut self, id: HandleId, f: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        Self::host_mut(self, id, f)
    }

    fn host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> Result<(), Error> {
        Self::host_ref(self, id, f)
    }

    fn try_host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> nb::Result<(), Error> {
        Self::try_host_ref(self, id, f)
    }

    fn execute(&mut self, op: &Op, inputs: &[HandleId], output: HandleId) -> Result<(), Error> {
        Self::execute(self, op, inputs, output)
    }

    fn execute_on(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        Self::execute_on(self, placement, op, inputs, output)
    }

    fn estimate(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Option<crate::hal::Estimate>, Error> {
        Self::estimate(self, placement, op, inputs, output)
    }

    fn sync(&mut self) -> Result<(), Error> {
        Self::sync(self)
    }

    fn try_sync(&mut self) -> nb::Result<(), Error> {
        Self::try_sync(self)
    }

    fn on_interrupt(&mut self) {
        self.npu.on_interrupt();
    }

    fn wait_for_event(&mut self) -> Result<(), Error> {
        self.wait()
    }

    fn plan_step<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        Self::plan_step(self, plan, op, inputs, output)
    }

    fn plan_step_on<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        placement: Placement,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        Self::plan_step_on(self, plan, placement, op, inputs, output)
    }

    fn run_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        ops: &[&Op],
    ) -> Result<(), Error> {
        Self::run_plan(self, plan, ops)
    }

    fn plan_adopt<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        Self::plan_adopt(self, plan, id)
    }

    fn plan_include<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        Self::plan_include(self, plan, id)
    }

    fn release_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
    ) -> Result<(), Error> {
        Self::release_plan(self, plan)
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn execution_unit(&self, unit: u8) -> crate::hal::ExecutionUnit {
        self.npu.execution_unit(unit)
    }

    fn stats(&self) -> ServerStats {
        let (staging_blocks_peak, staging_bytes_peak, staging_largest_bytes) = self.staging.peaks();
        ServerStats {
            handles_peak: self.handles.peak() as u32,
            staging_blocks_peak,
            staging_bytes_peak,
            staging_largest_bytes,
            ..self.stats
        }
    }

    fn memory_stats(&self) -> MemoryStats {
        self.memory.stats()
    }

    fn reset_memory_peak(&mut self) {
        self.memory.reset_peak();
    }

    fn tune_stats(&self) -> TuneStats {
        self.tuning.stats
    }

    fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error> {
        Self::export_tuning(self, out)
    }
}
