//! The compute server: tensors, memory and jobs over one NPU.
//!
//! # Design
//!
//! [`NpuServer`] owns the HAL ([`Npu`]), the memory manager ([`MemoryManagement`], by default
//! Burn's chunk/slice strategy), the handle table and a pool of host staging memory. It turns
//! client requests into jobs:
//!
//! - `create` reserves device memory, copies the bytes into a host staging block and submits a
//!   host→device transfer; it returns as soon as the transfer is queued.
//! - `execute` submits the operator to an execution unit (round robin) with the dependencies it
//!   needs and returns at once. It waits for the last writer of each input and, before
//!   overwriting the output, for the jobs still reading the output's old contents. That is what
//!   makes reusing a just-released chunk safe without the CPU ever waiting.
//! - `read` submits a device→host transfer that depends only on the tensor's last writer, then
//!   waits for that transfer alone; `try_read` never waits.
//! - Operators the HAL declares unsupported run on the CPU with the npu-kernels reference kernels:
//!   inputs are brought to host staging, computed there, and the result is uploaded.
//! - `create_const` binds constant data (a model's weights) where it lies: in a flash segment
//!   the NPU reads ([`Npu::map_flash`]) when the HAL can, with no copy and no arena bytes;
//!   otherwise the bytes are uploaded once, like `create`. Constant tensors are read-only.
//! - `pinned` makes a tensor with a block of DMA-capable host memory the CPU fills and reads
//!   in place (`host_mut`, `host_ref`); its bytes move only when a job or a host read needs
//!   them, straight between that block and the device (see [`Residency`]). `copy` moves a
//!   tensor's newest bytes device to device, or straight from or into a pinned block.
//!   [`ServerStats`] counts every transfer by direction, and the bytes the CPU copied through
//!   staging.
//!
//! The server waits (`Npu::wait_for_event`, a `WFI` on hardware) only in `read`, `sync`, and
//! when a fixed resource is exhausted but will be freed by jobs in flight: a full job queue,
//! full staging memory, or an arena whose free chunks are still read by running jobs.

mod deps;
pub mod job_plan;
mod residency;
mod staging;
mod tuning;

pub use deps::{DepSet, Frontier};
pub use job_plan::JobPlan;
pub use residency::Residency;
pub use staging::Staging;
pub use tuning::{Dispatch, TuneStats, TuningCost};

use tuning::Tuning;

use residency::HostCopy;

use crate::error::{Capacity, Error};
use crate::fallback::{run_op, split_operands, OpError};
use crate::hal::{
    Capabilities, Cycles, Fence, HalError, Job, JobKind, Npu, Op, Queue, Region, Space, Variant,
    MAX_FLASH_SEGMENTS, MAX_JOB_INPUTS, MAX_QUEUES,
};
use crate::handle::{HandleId, HandleTable};
use crate::memory::{
    ChunkSliceMemory, MemoryBinding, MemoryConfig, MemoryManagement, MemoryStats, PassStats,
};
use crate::storage::Block;
use crate::tune::{
    candidates, set_id, Candidate, Choice, Lookup, TuneConfig, TuneKey, TuneMode,
    DEFAULT_TUNE_ENTRIES,
};

/// What a client can ask of a server. Handles are plain ids here; the client wraps them in RAII
/// tensors.
pub trait ComputeServer {
    /// Tensors that can be alive at once (the handle table's capacity).
    const HANDLE_CAPACITY: usize;
    /// A tensor of `bytes` uninitialised bytes on the device.
    fn empty(&mut self, bytes: u32) -> Result<HandleId, Error>;
    /// A tensor holding `data`, uploaded to the device (returns once the upload is queued).
    fn create(&mut self, data: &[u8]) -> Result<HandleId, Error>;
    /// A tensor of `bytes` bytes that `fill` writes straight into host staging memory, then
    /// uploaded like [`create`](Self::create): data computed on the fly (per-channel
    /// multipliers) needs no buffer of its own. An error from `fill` is returned as is.
    fn create_with(
        &mut self,
        bytes: u32,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error>;
    /// A tensor of `bytes` at `offset` inside the tensor `pool`, laid out ahead of time by a
    /// planner (see [`MemoryManagement::place`]): no memory is searched or reserved. The
    /// placed tensor keeps the pool alive. Overlapping earlier placements is allowed and
    /// fence-safe: the new tensor's jobs wait for theirs.
    fn place(&mut self, pool: HandleId, offset: u32, bytes: u32) -> Result<HandleId, Error>;
    /// Overwrites a tensor with `data` (an upload, returned as soon as it is queued).
    fn write(&mut self, id: HandleId, data: &[u8]) -> Result<(), Error>;
    /// Maps constant data (a model in flash) for [`create_const`](Self::create_const);
    /// returns the segment. Errors as [`Npu::map_flash`]: an NPU that cannot read flash
    /// answers [`HalError::FlashUnreadable`], and constants are then copied to the device.
    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, Error>;
    /// Unmaps a segment after waiting for every submitted job. Errors with
    /// [`Error::FlashInUse`] while tensors still refer to it.
    fn unmap_flash(&mut self, segment: u8) -> Result<(), Error>;
    /// A read-only tensor of constant data: bound in place when `data` lies in a mapped flash
    /// segment and is aligned for the NPU, else uploaded to the device once. Writing it (as a
    /// job's output, by [`write`](Self::write) or [`copy`](Self::copy), or through a
    /// [`place`](Self::place)d view) is refused with [`Error::ReadOnlyTensor`].
    fn create_const(&mut self, data: &'static [u8]) -> Result<HandleId, Error>;
    /// A read-only tensor of `bytes` that `fill` computes into staging memory, uploaded once:
    /// constants made at load time (per-channel multipliers), as read-only as
    /// [`create_const`](Self::create_const)'s. A [`JobPlan`] does not look for writers of a
    /// constant once its upload has ended.
    fn create_const_with(
        &mut self,
        bytes: u32,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error>;
    /// Whether a tensor is bound in place in flash (no arena bytes).
    fn is_in_flash(&self, id: HandleId) -> Result<bool, Error>;
    /// A tensor of `bytes` with a pinned host block (see [`Residency`]): the CPU writes and
    /// reads it in place, and transfers go straight between that block and the device. Device
    /// memory is reserved at the first job that touches it. Errors:
    /// [`Error::StagingExhausted`] or [`Error::CapacityExceeded`] (`StagingBlocks`) when
    /// host memory cannot hold it.
    fn pinned(&mut self, bytes: u32) -> Result<HandleId, Error>;
    /// Lets `f` write a pinned tensor's host block in place, after the DMA jobs still using
    /// the block complete; the host then holds the newest bytes. Errors: [`Error::NotPinned`].
    fn host_mut(&mut self, id: HandleId, f: &mut dyn FnMut(&mut [u8])) -> Result<(), Error>;
    /// Lets `f` read a pinned tensor's host block in place, downloading the newest bytes into
    /// it first when the device holds them. Errors: [`Error::NotPinned`], a failed job.
    fn host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> Result<(), Error>;
    /// Like [`host_ref`](Self::host_ref) but never waits: `WouldBlock` (after starting the
    /// download, if one is needed) until the host block holds the newest bytes.
    fn try_host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> nb::Result<(), Error>;
    /// Where a tensor's newest bytes are.
    fn residency(&self, id: HandleId) -> Result<Residency, Error>;
    /// Queues a copy of `src`'s newest bytes into `dst` (same size) and returns at once:
    /// device to device when both are on the device, straight from or into a pinned host
    /// block otherwise (no staging copy). Errors: [`Error::SizeMismatch`],
    /// [`Error::ReadOnlyTensor`] for a `dst` in flash.
    fn copy(&mut self, src: HandleId, dst: HandleId) -> Result<(), Error>;
    /// Copy a tensor's bytes into `out`, waiting only for the jobs that produce it.
    fn read(&mut self, id: HandleId, out: &mut [u8]) -> Result<(), Error>;
    /// Like `read`, but `WouldBlock` until the bytes are ready; never waits.
    fn try_read(&mut self, id: HandleId, out: &mut [u8]) -> nb::Result<(), Error>;
    /// Run `op` on `inputs` into `output`; returns once the job is submitted.
    fn execute(&mut self, op: &Op, inputs: &[HandleId], output: HandleId) -> Result<(), Error>;
    /// Like [`execute`](Self::execute), but the way to run `op` is given rather than chosen:
    /// [`Candidate::Npu`] with a [`Variant`] (scratch memory, when the variant needs it, is
    /// reserved for the job and released at once, fence-safe like any memory), or
    /// [`Candidate::Cpu`], the fallback kernels. Every candidate writes the same bytes.
    /// Errors: [`HalError::Unsupported`] when the NPU does not run the op,
    /// [`HalError::VariantUnsupported`] when it does not run it that way, and the errors of
    /// `execute`.
    fn execute_with(
        &mut self,
        op: &Op,
        how: Candidate,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error>;
    /// Appends a job to `plan` (see [`JobPlan`]): `op` on `inputs` into `output`, checked as
    /// [`execute`](Self::execute) checks it, run the way the tuning cache says (never
    /// measured), on the next execution unit. Nothing is submitted. The plan holds a
    /// reference to each tensor until [`release_plan`](Self::release_plan). Errors: those of
    /// `execute`'s checks; [`JobPlanError::OnCpu`](crate::error::JobPlanError::OnCpu) and [`JobPlanError::Pinned`](crate::error::JobPlanError::Pinned) for a step a plan
    /// cannot hold; [`JobPlanError::Stale`](crate::error::JobPlanError::Stale) when the tuning changed since the first step;
    /// [`Error::CapacityExceeded`] naming [`Capacity::PlanSteps`] or
    /// [`Capacity::PlanTensors`]. A refused step leaves the plan as it was.
    fn plan_step<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error>;
    /// Submits every job of `plan` and returns at once, `ops[k]` being step `k`'s op (the
    /// plan does not copy ops: a model keeps its own). Errors: [`JobPlanError::OpCount`](crate::error::JobPlanError::OpCount) and
    /// [`JobPlanError::OpMismatch`](crate::error::JobPlanError::OpMismatch) (nothing submitted), [`JobPlanError::Stale`](crate::error::JobPlanError::Stale), a
    /// [`Error::StaleHandle`] for a tensor freed under the plan, and the HAL's errors.
    fn run_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        ops: &[&Op],
    ) -> Result<(), Error>;
    /// Gives `plan` the caller's reference to tensor `id`, and releases it. When the plan
    /// uses the tensor and now holds the only reference left, the tensor becomes the plan's
    /// own: no handle outside can reach it, so runs no longer walk or write its access
    /// record (the plan's newest jobs are written into it at
    /// [`release_plan`](Self::release_plan)). A graph plan hands over its intermediate
    /// activations this way. Errors: [`Error::StaleHandle`] for a freed tensor.
    fn plan_adopt<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        id: HandleId,
    ) -> Result<(), Error>;
    /// Drops the references `plan` holds (and its scratch tensor) and empties it.
    fn release_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
    ) -> Result<(), Error>;
    /// The HAL's cycle source ([`Npu::now`]).
    fn now(&self) -> Cycles;
    /// Runs `op` the way the [`TuneMode`] says: as [`execute`](Self::execute) when tuning is
    /// off; its cached (or fixed) candidate; or, for a key not seen yet in
    /// [`TuneMode::Tune`], nothing: the key is claimed and [`Dispatch::Tune`] hands the
    /// caller the candidates to time (see [`ComputeClient::execute_autotune`](
    /// crate::client::ComputeClient::execute_autotune)).
    fn execute_tuned(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Dispatch, Error>;
    /// Stores the outcome of tuning a key claimed by [`execute_tuned`](Self::execute_tuned)
    /// ([`Choice::FAILED`] when it failed, so it is not retried), with what measuring cost.
    fn finish_tuning(
        &mut self,
        key: TuneKey,
        choice: Choice,
        cost: TuningCost,
    ) -> Result<(), Error>;
    /// Sets how ops are tuned (default [`TuneMode::Off`]) and the measuring budget.
    fn set_tuning(&mut self, mode: TuneMode, config: TuneConfig);
    /// The measuring budget.
    fn tune_config(&self) -> TuneConfig;
    /// Counters of the tuner.
    fn tune_stats(&self) -> TuneStats;
    /// Writes the measured choices as a tuning table (see [`crate::tune::table`]) into `out`;
    /// returns its length. Errors: [`Error::Table`]
    /// ([`TableError::BufferTooSmall`](crate::tune::TableError::BufferTooSmall)).
    fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error>;
    /// Checks a tuning table against this crate and this NPU's configuration and loads its
    /// choices; returns how many. All or nothing. Errors: [`Error::Table`] naming what was
    /// wrong ([`TableError::OtherHal`](crate::tune::TableError::OtherHal) for a table made on
    /// another configuration).
    fn import_tuning(&mut self, bytes: &[u8]) -> Result<u16, Error>;
    /// Wait for every submitted job.
    fn sync(&mut self) -> Result<(), Error>;
    /// Add `n` references to a tensor.
    fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error>;
    /// Drop `n` references; the last one frees the tensor's memory.
    fn release(&mut self, id: HandleId, n: u32) -> Result<(), Error>;
    /// [`release`](Self::release) for references dropped while the server was lent out
    /// (a channel's deferred releases). Such a drop may be a job plan's, which had no chance
    /// to write its jobs into the records of the constants and tensors it held, so the
    /// tensor's record takes every job submitted so far as a writer: its memory, freed now
    /// or by a later release, waits for them all. Rare, so conservative.
    fn release_late(&mut self, id: HandleId, n: u32) -> Result<(), Error>;
    /// Bytes of a tensor.
    fn size_of(&self, id: HandleId) -> Result<u32, Error>;
    /// The completion interrupt: retire finished jobs.
    fn on_interrupt(&mut self);
    /// What the NPU behind this server can do.
    fn capabilities(&self) -> Capabilities;
    /// Memory figures of the device arena.
    fn memory_stats(&self) -> MemoryStats;
    /// Job and transfer counters.
    fn stats(&self) -> ServerStats;
    /// Starts a pass: one run of an eager workload whose shape `key` names (see
    /// [`MemoryManagement::begin_pass`]; a no-op for the chunk/slice manager). Waits for
    /// running jobs when only they hold back the memory the pass needs. Errors:
    /// [`Error::PassAlreadyOpen`] while a pass is open.
    fn begin_pass(&mut self, key: u32) -> Result<(), Error>;
    /// Ends the pass (see [`MemoryManagement::end_pass`]). Errors: [`Error::NoPassOpen`]
    /// without a pass.
    fn end_pass(&mut self) -> Result<(), Error>;
    /// Counters of the memory manager's passes.
    fn pass_stats(&self) -> PassStats;
    /// Restarts the memory peaks from the current figures (see
    /// [`MemoryManagement::reset_peak`]), to measure one phase of a run.
    fn reset_memory_peak(&mut self);
}

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
    /// Runs of a [`JobPlan`] (its jobs are counted in `compute_jobs`).
    pub plan_runs: u32,
}

/// Where a tensor's device bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binding {
    /// Device memory from the memory manager.
    Memory(MemoryBinding),
    /// In place in a mapped flash segment; read-only.
    Flash(Region),
    /// None yet: a pinned tensor no job has touched, whose bytes are in its host block.
    Host,
}

/// The memory on one side of a transfer whose access record the transfer joins.
#[derive(Clone, Copy, Debug)]
enum Side {
    /// Staging or flash: nothing else uses it.
    Untracked,
    /// Device memory.
    Device(MemoryBinding),
    /// The pinned host block of a tensor.
    Pinned(HandleId),
}

/// A mapped flash segment: its address range, to find constants inside it.
#[derive(Clone, Copy, Debug)]
struct FlashSegment {
    start: usize,
    len: usize,
    tensors: u32,
}

#[derive(Clone, Copy, Debug)]
struct TensorEntry {
    binding: Binding,
    bytes: u32,
    /// The pool a placed tensor lies in (it holds one reference to it).
    pool: Option<HandleId>,
    /// A device→host transfer started by `try_read`, and the staging block it fills.
    download: Option<(Fence, Block)>,
    /// A pinned tensor's slot in the server's table of pinned blocks.
    host: Option<u8>,
    /// Where the newest bytes are (always `Device` without a host block).
    newest: Residency,
    /// Made by `create_const` or `create_const_with`: nothing may write it, so a job plan
    /// need not look for writers of it once its upload has ended.
    constant: bool,
}

/// What a job needs of one operand's entry.
#[derive(Clone, Copy, Debug)]
struct Operand {
    binding: Binding,
    bytes: u32,
    /// A download of the old bytes is pending (void once a job overwrites them).
    downloading: bool,
}

impl Operand {
    fn of(e: &TensorEntry) -> Self {
        Operand {
            binding: e.binding,
            bytes: e.bytes,
            downloading: e.download.is_some(),
        }
    }
}

impl TensorEntry {
    /// A tensor whose bytes live on the device only.
    fn on_device(binding: Binding, bytes: u32, pool: Option<HandleId>) -> Self {
        TensorEntry {
            binding,
            bytes,
            pool,
            download: None,
            host: None,
            newest: Residency::Device,
            constant: false,
        }
    }
}

/// A server tag from a global counter, so ids of two servers never match.
fn next_server_tag() -> u16 {
    static NEXT: critical_section::Mutex<core::cell::Cell<u16>> =
        critical_section::Mutex::new(core::cell::Cell::new(0));
    critical_section::with(|cs| {
        let cell = NEXT.borrow(cs);
        let tag = cell.get();
        cell.set(tag.wrapping_add(1));
        tag
    })
}

/// The compute server over one NPU.
///
/// - `H`: the HAL.
/// - `M`: the memory manager, by default [`ChunkSliceMemory`] with 64 chunks.
/// - `HANDLES`: tensors alive at once (default 64).
/// - `STAGING`: host staging blocks allocated or in flight at once (default 16).
/// - `TUNE`: tuned op shapes the autotuner remembers (default 64, a power of two; see
///   [`TuneCache`](crate::tune::TuneCache)).
pub struct NpuServer<
    H: Npu,
    M = ChunkSliceMemory<64>,
    const HANDLES: usize = 64,
    const STAGING: usize = 16,
    const TUNE: usize = DEFAULT_TUNE_ENTRIES,
> {
    npu: H,
    caps: Capabilities,
    memory: M,
    handles: HandleTable<TensorEntry, HANDLES>,
    staging: Staging<STAGING>,
    /// Newest fence submitted per queue, for `sync`.
    newest: [Option<Fence>; MAX_QUEUES],
    /// Newest fence known complete per queue.
    frontier: Frontier,
    next_unit: u8,
    stats: ServerStats,
    flash: [Option<FlashSegment>; MAX_FLASH_SEGMENTS],
    /// Pinned tensors' host blocks, which share the staging blocks' capacity.
    pinned: [Option<HostCopy>; STAGING],
    tuning: Tuning<TUNE>,
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
    pub fn new(npu: H, config: MemoryConfig) -> Result<Self, Error> {
        let caps = npu.capabilities();
        let memory = ChunkSliceMemory::new(caps.device_memory_bytes, caps.alignment, config)?;
        Self::with_memory(npu, memory)
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
    /// A server over `npu` with a memory manager of your choice.
    pub fn with_memory(npu: H, memory: M) -> Result<Self, Error> {
        let caps = npu.capabilities();
        Ok(NpuServer {
            staging: Staging::new(caps.host_memory_bytes, caps.alignment)?,
            npu,
            caps,
            memory,
            handles: HandleTable::new(next_server_tag()),
            newest: [None; MAX_QUEUES],
            frontier: Frontier::default(),
            next_unit: 0,
            stats: ServerStats::default(),
            flash: [None; MAX_FLASH_SEGMENTS],
            pinned: [None; STAGING],
            tuning: Tuning::new(),
        })
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

    /// The NPU's capabilities, read once at start.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// The memory manager.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// Tensors alive.
    pub fn live_tensors(&self) -> usize {
        self.handles.live()
    }

    /// Forget completed fences, so chunks whose jobs are over can go back to the arena.
    fn retire_memory_fences(&mut self) {
        let (npu, frontier) = (&mut self.npu, &mut self.frontier);
        self.memory
            .retire_fences(&mut |q, f| frontier.is_done(npu, q, f));
    }

    /// Free staging blocks whose transfers are over.
    fn reap_staging(&mut self) {
        let (npu, frontier) = (&mut self.npu, &mut self.frontier);
        self.staging
            .reap(|f| frontier.is_done(npu, Queue::Dma.index(), f));
    }

    fn wait(&mut self) {
        self.stats.waits += 1;
        self.npu.wait_for_event();
    }

    /// Block until `fence` completes.
    fn wait_for(&mut self, fence: Fence) -> Result<(), Error> {
        loop {
            match self.npu.poll(fence) {
                Ok(()) => return Ok(()),
                Err(nb::Error::Other(e)) => return Err(e.into()),
                Err(nb::Error::WouldBlock) => self.wait(),
            }
        }
    }

    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, Error> {
        loop {
            match self.npu.submit(job) {
                Ok(fence) => {
                    let slot = &mut self.newest[job.queue.index()];
                    *slot = Some(fence);
                    return Ok(fence);
                }
                Err(HalError::QueueFull { .. }) => self.wait(),
                Err(e) => return Err(e.into()),
            }
        }
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
                    self.wait()
                }
                other => return other,
            }
        }
    }

    fn staging_alloc(&mut self, bytes: u32) -> Result<Block, Error> {
        loop {
            self.reap_staging();
            match self.staging.alloc(bytes) {
                Err(_) if self.staging.has_pending() => self.wait(),
                other => return other,
            }
        }
    }

    fn device_region(&self, binding: MemoryBinding) -> Result<Region, Error> {
        let b = self.memory.block(binding)?;
        Ok(Region::device(b.offset, b.len))
    }

    /// The device region of a tensor bound on the device (in memory or flash). A pinned
    /// tensor no job has touched yet has none: callers bind it first (`bind_on_device`).
    fn region_of(&self, binding: Binding) -> Result<Region, Error> {
        match binding {
            Binding::Memory(m) => self.device_region(m),
            Binding::Flash(r) => Ok(r),
            Binding::Host => Err(Error::NotPinned),
        }
    }

    fn record_read(&mut self, binding: Binding, queue: Queue, fence: Fence) -> Result<(), Error> {
        if let Binding::Memory(m) = binding {
            self.memory.access_mut(m)?.record_read(queue, fence);
        }
        Ok(())
    }

    /// Queues the DMA transfer `src → dst`: it waits for the writers of its source and for
    /// every job still reading or writing its destination, and joins both access records.
    /// Counted by direction (host→device, device→host, device→device).
    fn transfer(&mut self, src: Region, from: Side, dst: Region, to: Side) -> Result<Fence, Error> {
        // Pinned blocks need no dependencies: every job using them is on the DMA queue.
        let mut deps = DepSet::default();
        let (memory, npu, frontier) = (&mut self.memory, &mut self.npu, &mut self.frontier);
        let mut ended = |q, f| frontier.is_done(npu, q, f);
        if let Side::Device(m) = from {
            deps.add_read_of(memory.access_mut(m)?, Queue::Dma, &mut ended);
        }
        if let Side::Device(m) = to {
            deps.add_write_of(memory.access_mut(m)?, Queue::Dma, &mut ended);
        }
        let mut job = Job {
            kind: JobKind::Transfer { src, dst },
            queue: Queue::Dma,
            deps: heapless::Vec::new(),
        };
        deps.fences_into(&mut job.deps);
        let fence = self.submit(&job)?;
        match from {
            Side::Device(m) => self.memory.access_mut(m)?.record_read(Queue::Dma, fence),
            Side::Pinned(id) => {
                if let Some(h) = self.pinned_slot(id)? {
                    h.read = Some(fence);
                }
            }
            Side::Untracked => {}
        }
        match to {
            Side::Device(m) => self.memory.access_mut(m)?.record_write(Queue::Dma, fence),
            Side::Pinned(id) => {
                if let Some(h) = self.pinned_slot(id)? {
                    h.write = Some(fence);
                }
            }
            Side::Untracked => {}
        }
        let bytes = u64::from(src.len);
        match (src.space, dst.space) {
            (Space::Host, _) => {
                self.stats.uploads += 1;
                self.stats.upload_bytes += bytes;
            }
            (_, Space::Host) => {
                self.stats.downloads += 1;
                self.stats.download_bytes += bytes;
            }
            _ => self.stats.device_copies += 1,
        }
        Ok(fence)
    }

    /// Queue the transfer of staging region `src` into the tensor memory `binding`.
    fn submit_upload(&mut self, src: Region, binding: MemoryBinding) -> Result<Fence, Error> {
        let dst = self.device_region(binding)?;
        self.transfer(src, Side::Untracked, dst, Side::Device(binding))
    }

    /// Binds a pinned tensor on the device at its first use by a job (reserving its device
    /// memory), and when the job reads it (`read`) and the host holds the newest bytes,
    /// queues their upload straight from the pinned block. Returns the updated entry.
    fn bind_on_device(&mut self, id: HandleId, read: bool) -> Result<TensorEntry, Error> {
        let mut entry = self.handles.get(id)?;
        if matches!(entry.binding, Binding::Host) {
            entry.binding = Binding::Memory(self.reserve(entry.bytes)?);
            self.handles.get_mut(id)?.binding = entry.binding;
        }
        if let (true, Some(host), Residency::Host, Binding::Memory(m)) =
            (read, self.host_of(&entry), entry.newest, entry.binding)
        {
            let src = Region::host(host.block.offset, entry.bytes);
            let dst = self.device_region(m)?;
            self.transfer(src, Side::Pinned(id), dst, Side::Device(m))?;
            self.handles.get_mut(id)?.newest = Residency::Both;
            entry = self.handles.get(id)?;
        }
        Ok(entry)
    }

    /// A tensor's pinned block (`None` for a tensor without one).
    fn host_of(&self, entry: &TensorEntry) -> Option<HostCopy> {
        entry
            .host
            .and_then(|slot| self.pinned.get(usize::from(slot)).copied().flatten())
    }

    /// The record of `id`'s pinned block, to update.
    fn pinned_slot(&mut self, id: HandleId) -> Result<Option<&mut HostCopy>, Error> {
        let slot = self.handles.get(id)?.host;
        Ok(slot.and_then(|slot| self.pinned.get_mut(usize::from(slot))?.as_mut()))
    }

    /// The pinned block of `id` as a host-memory range, with the tensor's entry.
    fn pinned_block(&self, id: HandleId) -> Result<(TensorEntry, HostCopy), Error> {
        let entry = self.handles.get(id)?;
        let host = self.host_of(&entry).ok_or(Error::NotPinned)?;
        Ok((entry, host))
    }

    /// Starts downloading a pinned tensor's newest device bytes into its block, if the host
    /// copy is stale. Returns the fence the host block must wait for (the newest download).
    fn fetch_to_host(&mut self, id: HandleId) -> Result<Option<Fence>, Error> {
        let (entry, host) = self.pinned_block(id)?;
        if !entry.newest.on_host() {
            let src = self.region_of(entry.binding)?;
            let from = match entry.binding {
                Binding::Memory(m) => Side::Device(m),
                _ => Side::Untracked,
            };
            let dst = Region::host(host.block.offset, entry.bytes);
            self.transfer(src, from, dst, Side::Pinned(id))?;
            self.handles.get_mut(id)?.newest = Residency::Both;
        }
        Ok(self.pinned_block(id)?.1.write)
    }

    /// The bytes of a pinned block.
    fn block_bytes(&mut self, block: Block, len: u32) -> Result<&mut [u8], Error> {
        let host = self.npu.host_memory();
        let space_bytes = host.len() as u32;
        let start = block.offset as usize;
        host.get_mut(start..start + len as usize)
            .ok_or(Error::Hal(HalError::OutOfBounds {
                region: Region::host(block.offset, len),
                space_bytes,
            }))
    }

    /// Copy `data` into staging and queue its upload into `binding`.
    fn upload_with(
        &mut self,
        binding: MemoryBinding,
        len: u32,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let block = self.staging_alloc(len)?;
        let src = Region::host(block.offset, len);
        let host = self.npu.host_memory();
        let space_bytes = host.len() as u32;
        let start = block.offset as usize;
        self.stats.staging_copy_bytes += u64::from(len);
        let copied = match host.get_mut(start..start + len as usize) {
            Some(dst) => fill(dst),
            None => Err(HalError::OutOfBounds {
                region: src,
                space_bytes,
            }
            .into()),
        };
        match copied.and_then(|()| self.submit_upload(src, binding)) {
            Ok(fence) => self.staging.free_after(fence, block),
            Err(e) => {
                self.staging.free(block)?;
                Err(e)
            }
        }
    }

    /// Queue a download of `binding` into a fresh staging block.
    fn start_download(&mut self, binding: Binding, bytes: u32) -> Result<(Fence, Block), Error> {
        let src = self.region_of(binding)?;
        let from = match binding {
            Binding::Memory(m) => Side::Device(m),
            _ => Side::Untracked,
        };
        let block = self.staging_alloc(bytes)?;
        let dst = Region::host(block.offset, bytes);
        match self.transfer(src, from, dst, Side::Untracked) {
            Ok(fence) => Ok((fence, block)),
            Err(e) => {
                self.staging.free(block)?;
                Err(e)
            }
        }
    }

    /// Copy a finished download out of staging and free its block.
    fn finish_download(&mut self, block: Block, out: &mut [u8]) -> Result<(), Error> {
        let start = block.offset as usize;
        let host = self.npu.host_memory();
        let src = host
            .get(start..start + out.len())
            .ok_or(HalError::OutOfBounds {
                region: Region::host(block.offset, out.len() as u32),
                space_bytes: host.len() as u32,
            })?;
        out.copy_from_slice(src);
        self.stats.staging_copy_bytes += out.len() as u64;
        self.staging.free(block)
    }

    /// The tensor's pending download, started now if there is none.
    fn download_of(&mut self, id: HandleId, out_len: usize) -> Result<(Fence, Block), Error> {
        let entry = self.sized(id, out_len)?;
        if let Some(pending) = entry.download {
            return Ok(pending);
        }
        let pending = self.start_download(entry.binding, entry.bytes)?;
        self.handles.get_mut(id)?.download = Some(pending);
        Ok(pending)
    }

    /// A tensor's entry, after checking that a caller's buffer of `len` bytes matches it.
    fn sized(&self, id: HandleId, len: usize) -> Result<TensorEntry, Error> {
        let entry = self.handles.get(id)?;
        if len != entry.bytes as usize {
            return Err(Error::SizeMismatch {
                expected: entry.bytes,
                actual: u32::try_from(len).unwrap_or(u32::MAX),
            });
        }
        Ok(entry)
    }

    /// Drop a tensor's pending download (its bytes are about to change, or the tensor is gone).
    fn cancel_download(&mut self, id: HandleId) -> Result<(), Error> {
        if let Some((fence, block)) = self.handles.get_mut(id)?.download.take() {
            self.staging.free_after(fence, block)?;
        }
        Ok(())
    }

    /// What a tuning table made here must match: the capabilities that change cycles and the
    /// HAL's own fingerprint.
    /// The tuning key of `op`, and whether the CPU is among its candidates: output blocks
    /// and im2col always; the CPU fallback only where the HAL's clock sees CPU work (else its
    /// timing would be a free lunch) and the op is small enough for the config's bound.
    fn tune_key(&self, op: &Op) -> (TuneKey, bool) {
        let cpu = self.npu.clock_counts_cpu()
            && self
                .tuning
                .config
                .cpu_max_work
                .is_some_and(|max| op.macs() <= max);
        (TuneKey::of(op, set_id(true, true, cpu)), cpu)
    }

    fn tuning_fingerprint(&self) -> u64 {
        crate::tune::fingerprint(&self.caps, self.npu.tuning_fingerprint())
    }

    /// What `execute` and `execute_with` share: checks the operands, binds pinned ones, voids
    /// a started read of the output, then lets `run` submit (or compute on the CPU). Generic
    /// over `run` so that `execute`, the path every job takes, is compiled with its own
    /// choice inline (passing the choice as a value cost 50 instructions per job).
    fn dispatch(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        run: impl FnOnce(&mut Self, &[Operand], Operand) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut operands = heapless::Vec::new();
        let (mut out, pinned) = self.check_operands(op, inputs, output, &mut operands)?;
        // Pinned operands: bind them on the device, upload inputs whose newest bytes are on
        // the host; the output's newest bytes will be on the device.
        if pinned {
            for (e, &id) in operands.iter_mut().zip(inputs) {
                *e = Operand::of(&self.bind_on_device(id, true)?);
            }
            out = Operand::of(&self.bind_on_device(output, false)?);
            self.handles.get_mut(output)?.newest = Residency::Device;
        }
        // The output's bytes are about to change: a started read of the old bytes is void.
        if out.downloading {
            self.cancel_download(output)?;
        }
        run(self, &operands, out)
    }

    /// Checks a job's operands against what `op` needs and gathers them into `operands`
    /// (inputs in order). Returns the output, and whether any operand is pinned.
    fn check_operands(
        &self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        operands: &mut heapless::Vec<Operand, MAX_JOB_INPUTS>,
    ) -> Result<(Operand, bool), Error> {
        let kind = op.kind();
        let bad = |operand: usize, expected: u32, actual: u32| Error::BadOperands {
            op: kind,
            operand: operand as u8,
            expected,
            actual,
        };
        let need = op.operands().ok_or(bad(0, u32::MAX, 0))?;
        if !need.accepts(inputs.len()) {
            return Err(bad(inputs.len().min(need.inputs.len()), 0, 0));
        }
        let mut pinned = false;
        for (i, (&id, need)) in inputs.iter().zip(need.inputs.iter()).enumerate() {
            if id == output {
                return Err(Error::OutputAliasesInput { op: kind });
            }
            let e = self.handles.get_ref(id)?;
            if e.bytes != *need {
                return Err(bad(i, *need, e.bytes));
            }
            pinned |= e.host.is_some();
            operands.push(Operand::of(e)).map_err(|_| bad(i, 0, 0))?;
        }
        let out = self.handles.get_ref(output)?;
        if out.constant {
            return Err(Error::ReadOnlyTensor);
        }
        if out.bytes != need.output {
            return Err(bad(MAX_JOB_INPUTS, need.output, out.bytes));
        }
        Ok((Operand::of(out), pinned || out.host.is_some()))
    }

    /// Marks a tensor just made constant: from now on nothing writes it.
    fn seal(&mut self, id: HandleId) -> Result<HandleId, Error> {
        self.handles.get_mut(id)?.constant = true;
        Ok(id)
    }

    /// Submits `op` to the next execution unit (round robin), built in place: each input's
    /// region and the fences of its writers, the output's region and the fences of its
    /// readers and writer, less what has completed.
    fn execute_on_npu(
        &mut self,
        op: &Op,
        variant: Variant,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<(), Error> {
        if variant == Variant::Auto {
            return self.submit_compute(op, variant, inputs, output, None);
        }
        let scratch = match variant.scratch_bytes(op) {
            Some(0) => None,
            Some(bytes) => Some(self.reserve(bytes)?),
            None => {
                return Err(HalError::VariantUnsupported {
                    op: op.kind(),
                    variant,
                }
                .into())
            }
        };
        let submitted = self.submit_compute(op, variant, inputs, output, scratch);
        // The scratch is the job's alone: released at once, its next owner waits for the job
        // (the chunk keeps the job's write in its access record).
        if let Some(m) = scratch {
            self.memory.release(m)?;
        }
        submitted
    }

    fn submit_compute(
        &mut self,
        op: &Op,
        variant: Variant,
        inputs: &[Operand],
        output: Operand,
        scratch: Option<MemoryBinding>,
    ) -> Result<(), Error> {
        let units = self.caps.execution_units.max(1);
        let queue = Queue::Unit(self.next_unit % units);
        self.next_unit = (self.next_unit + 1) % units;
        let Binding::Memory(out) = output.binding else {
            return Err(Error::ReadOnlyTensor);
        };
        let mut job = Job {
            kind: JobKind::Compute {
                op,
                variant,
                inputs: heapless::Vec::new(),
                output: Region::device(0, 0),
                scratch: None,
            },
            queue,
            deps: heapless::Vec::new(),
        };
        let mut deps = DepSet::default();
        let (memory, npu, frontier) = (&mut self.memory, &mut self.npu, &mut self.frontier);
        let mut ended = |q, f| frontier.is_done(npu, q, f);
        if let JobKind::Compute {
            inputs: regions,
            output: out_region,
            scratch: scratch_region,
            ..
        } = &mut job.kind
        {
            for e in inputs {
                let region = match e.binding {
                    Binding::Memory(m) => {
                        let (block, access) = memory.block_and_access(m)?;
                        deps.add_read_of(access, queue, &mut ended);
                        Region::device(block.offset, block.len)
                    }
                    Binding::Flash(r) => r,
                    Binding::Host => return Err(Error::NotPinned),
                };
                // `inputs` has at most MAX_JOB_INPUTS entries.
                let _ = regions.push(region);
            }
            let (block, access) = memory.block_and_access(out)?;
            deps.add_write_of(access, queue, &mut ended);
            *out_region = Region::device(block.offset, block.len);
            if let Some(m) = scratch {
                let (block, access) = memory.block_and_access(m)?;
                deps.add_write_of(access, queue, &mut ended);
                *scratch_region = Some(Region::device(block.offset, block.len));
            }
        }
        deps.fences_into(&mut job.deps);
        let fence = self.submit(&job)?;
        for e in inputs {
            self.record_read(e.binding, queue, fence)?;
        }
        self.memory.access_mut(out)?.record_write(queue, fence);
        if let Some(m) = scratch {
            self.memory.access_mut(m)?.record_write(queue, fence);
        }
        self.stats.compute_jobs += 1;
        Ok(())
    }

    /// The CPU fallback: bring the inputs to host staging, compute there, upload the result.
    fn execute_on_cpu(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<(), Error> {
        let mut staged = heapless::Vec::new();
        let result = self.compute_on_cpu(op, inputs, output, &mut staged);
        for (fence, block) in staged {
            self.staging.free_after(fence, block)?;
        }
        result
    }

    fn compute_on_cpu(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
        staged: &mut heapless::Vec<(Fence, Block), MAX_JOB_INPUTS>,
    ) -> Result<(), Error> {
        let mut ranges: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
        for e in inputs {
            let (fence, block) = self.start_download(e.binding, e.bytes)?;
            // Both vectors hold at most MAX_JOB_INPUTS, as many as `inputs` (checked by caller).
            let _ = staged.push((fence, block));
            let _ = ranges.push((block.offset as usize, e.bytes as usize));
        }
        for &(fence, _) in staged.iter() {
            self.wait_for(fence)?;
        }
        let out_block = self.staging_alloc(output.bytes)?;
        let out_region = Region::host(out_block.offset, output.bytes);
        let host = self.npu.host_memory();
        let space_bytes = host.len() as u32;
        let computed = match split_operands(
            host,
            (out_block.offset as usize, output.bytes as usize),
            &ranges,
        ) {
            Some((out, ins)) => run_op(op, &ins, out).map_err(|e| match e {
                OpError::Kernel(error) => Error::Kernel {
                    op: op.kind(),
                    error,
                },
                OpError::Misaligned { .. } | OpError::InputCount { .. } | OpError::NotInPlace => {
                    Error::Hal(HalError::Misaligned {
                        region: out_region,
                        alignment: self.caps.alignment,
                    })
                }
            }),
            None => Err(HalError::OutOfBounds {
                region: out_region,
                space_bytes,
            }
            .into()),
        };
        if computed.is_ok() {
            self.npu.host_compute(op);
        }
        let out = match output.binding {
            Binding::Memory(m) => Ok(m),
            Binding::Flash(_) | Binding::Host => Err(Error::ReadOnlyTensor),
        };
        match computed.and_then(|()| self.submit_upload(out_region, out?)) {
            Ok(fence) => {
                self.stats.cpu_ops += 1;
                self.staging.free_after(fence, out_block)
            }
            Err(e) => {
                self.staging.free(out_block)?;
                Err(e)
            }
        }
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
        let binding = self.reserve(bytes)?;
        self.handles
            .insert(TensorEntry::on_device(
                Binding::Memory(binding),
                bytes,
                None,
            ))
            .inspect_err(|_| {
                let _ = self.memory.release(binding);
            })
    }

    fn create(&mut self, data: &[u8]) -> Result<HandleId, Error> {
        let bytes = u32::try_from(data.len()).map_err(|_| Error::OutOfMemory {
            requested: u32::MAX,
            free: self.memory.stats().largest_free,
            largest_free: self.memory.stats().largest_free,
        })?;
        self.create_with(bytes, &mut |buf| {
            buf.copy_from_slice(data);
            Ok(())
        })
    }

    fn create_with(
        &mut self,
        bytes: u32,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error> {
        let binding = self.reserve(bytes)?;
        let id = self
            .handles
            .insert(TensorEntry::on_device(
                Binding::Memory(binding),
                bytes,
                None,
            ))
            .inspect_err(|_| {
                let _ = self.memory.release(binding);
            })?;
        self.upload_with(binding, bytes, fill).inspect_err(|_| {
            let _ = self.release(id, 1);
        })?;
        Ok(id)
    }

    fn place(&mut self, pool: HandleId, offset: u32, bytes: u32) -> Result<HandleId, Error> {
        let entry = self.bind_on_device(pool, true)?;
        let (Binding::Memory(pool_binding), false) = (entry.binding, entry.constant) else {
            return Err(Error::ReadOnlyTensor);
        };
        let binding = self.memory.place(pool_binding, offset, bytes)?;
        let id = self
            .handles
            .insert(TensorEntry::on_device(
                Binding::Memory(binding),
                bytes,
                Some(pool),
            ))
            .inspect_err(|_| {
                let _ = self.memory.release(binding);
            })?;
        self.handles.retain(pool, 1)?;
        Ok(id)
    }

    fn write(&mut self, id: HandleId, data: &[u8]) -> Result<(), Error> {
        let entry = self.sized(id, data.len())?;
        if entry.host.is_some() {
            return self.host_mut(id, &mut |buf| buf.copy_from_slice(data));
        }
        let (Binding::Memory(binding), false) = (entry.binding, entry.constant) else {
            return Err(Error::ReadOnlyTensor);
        };
        self.cancel_download(id)?;
        self.upload_with(binding, entry.bytes, &mut |buf| {
            buf.copy_from_slice(data);
            Ok(())
        })
    }

    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, Error> {
        let segment = self.npu.map_flash(bytes)?;
        match self.flash.get_mut(usize::from(segment)) {
            Some(slot) => {
                *slot = Some(FlashSegment {
                    start: bytes.as_ptr() as usize,
                    len: bytes.len(),
                    tensors: 0,
                });
                Ok(segment)
            }
            None => {
                self.npu.unmap_flash(segment);
                Err(HalError::FlashSegmentsFull {
                    capacity: MAX_FLASH_SEGMENTS as u8,
                }
                .into())
            }
        }
    }

    fn unmap_flash(&mut self, segment: u8) -> Result<(), Error> {
        let slot = self
            .flash
            .get_mut(usize::from(segment))
            .and_then(|s| s.as_mut())
            .ok_or(HalError::FlashNotMapped { segment })?;
        if slot.tensors > 0 {
            return Err(Error::FlashInUse {
                segment,
                tensors: slot.tensors,
            });
        }
        self.sync()?;
        self.flash[usize::from(segment)] = None;
        self.npu.unmap_flash(segment);
        Ok(())
    }

    fn create_const(&mut self, data: &'static [u8]) -> Result<HandleId, Error> {
        let addr = data.as_ptr() as usize;
        let aligned = addr % self.caps.flash_alignment.max(1) as usize == 0;
        let found = self.flash.iter().enumerate().find_map(|(i, seg)| {
            let seg = (*seg)?;
            let offset = addr.checked_sub(seg.start)?;
            (offset.checked_add(data.len())? <= seg.len).then_some((i, offset))
        });
        let bytes = u32::try_from(data.len()).ok();
        match (found, bytes) {
            (Some((segment, offset)), Some(bytes)) if aligned && self.caps.reads_flash => {
                let offset = u32::try_from(offset).map_err(|_| Error::OutOfMemory {
                    requested: bytes,
                    free: 0,
                    largest_free: 0,
                })?;
                let region = Region::flash(segment as u8, offset, bytes);
                let id = self.handles.insert(TensorEntry {
                    constant: true,
                    ..TensorEntry::on_device(Binding::Flash(region), bytes, None)
                })?;
                if let Some(seg) = self.flash[segment].as_mut() {
                    seg.tensors += 1;
                }
                Ok(id)
            }
            _ => {
                let id = self.create(data)?;
                self.seal(id)
            }
        }
    }

    fn create_const_with(
        &mut self,
        bytes: u32,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error> {
        let id = self.create_with(bytes, fill)?;
        self.seal(id)
    }

    fn is_in_flash(&self, id: HandleId) -> Result<bool, Error> {
        Ok(matches!(self.handles.get(id)?.binding, Binding::Flash(_)))
    }

    fn pinned(&mut self, bytes: u32) -> Result<HandleId, Error> {
        let full = Error::CapacityExceeded {
            capacity: Capacity::StagingBlocks,
            limit: STAGING as u32,
        };
        // Slots are numbered in a u8: at most 256 pinned tensors, whatever STAGING is.
        let slot = self
            .pinned
            .iter()
            .take(256)
            .position(Option::is_none)
            .ok_or(full)?;
        let block = self.staging_alloc(bytes)?;
        // Zeroed, so a pinned tensor read before any write gives the same bytes everywhere.
        if let Err(e) = self.block_bytes(block, bytes).map(|b| b.fill(0)) {
            self.staging.free(block)?;
            return Err(e);
        }
        let entry = TensorEntry {
            binding: Binding::Host,
            bytes,
            pool: None,
            download: None,
            host: Some(slot as u8),
            newest: Residency::Host,
            constant: false,
        };
        match self.handles.insert(entry) {
            Ok(id) => {
                self.pinned[slot] = Some(HostCopy::new(block));
                Ok(id)
            }
            Err(e) => {
                self.staging.free(block)?;
                Err(e)
            }
        }
    }

    fn host_mut(&mut self, id: HandleId, f: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        let (entry, host) = self.pinned_block(id)?;
        // An upload still reading the block would send the new bytes; a download would
        // overwrite them.
        if let Some(fence) = host.last_dma() {
            self.wait_for(fence)?;
        }
        f(self.block_bytes(host.block, entry.bytes)?);
        self.handles.get_mut(id)?.newest = Residency::Host;
        Ok(())
    }

    fn host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> Result<(), Error> {
        if let Some(fence) = self.fetch_to_host(id)? {
            self.wait_for(fence)?;
        }
        let (entry, host) = self.pinned_block(id)?;
        f(self.block_bytes(host.block, entry.bytes)?);
        Ok(())
    }

    fn try_host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> nb::Result<(), Error> {
        if let Some(fence) = self.fetch_to_host(id)? {
            self.npu.poll(fence).map_err(|e| e.map(Error::from))?;
        }
        let (entry, host) = self.pinned_block(id)?;
        f(self.block_bytes(host.block, entry.bytes)?);
        Ok(())
    }

    fn residency(&self, id: HandleId) -> Result<Residency, Error> {
        Ok(self.handles.get(id)?.newest)
    }

    fn copy(&mut self, src: HandleId, dst: HandleId) -> Result<(), Error> {
        let (from, to) = (self.handles.get(src)?, self.handles.get(dst)?);
        if from.bytes != to.bytes {
            return Err(Error::SizeMismatch {
                expected: to.bytes,
                actual: from.bytes,
            });
        }
        if to.constant {
            return Err(Error::ReadOnlyTensor);
        }
        if src == dst {
            return Ok(());
        }
        self.cancel_download(dst)?;
        let bytes = from.bytes;
        // The source's newest bytes: its pinned block, or its device (or flash) memory.
        let (from_host, to_host) = (self.host_of(&from), self.host_of(&to));
        let (src_region, src_side) = match (from.newest, from_host, from.binding) {
            (Residency::Host, Some(h), _) => {
                (Region::host(h.block.offset, bytes), Side::Pinned(src))
            }
            (_, _, Binding::Memory(m)) => (self.device_region(m)?, Side::Device(m)),
            (_, _, binding) => (self.region_of(binding)?, Side::Untracked),
        };
        // Into a pinned block when the destination has no device memory yet (a pinned output
        // buffer), else into device memory.
        let (dst_region, dst_side, newest) = match (to_host, to.binding) {
            (Some(h), Binding::Host) => (
                Region::host(h.block.offset, bytes),
                Side::Pinned(dst),
                Residency::Host,
            ),
            (_, Binding::Memory(m)) => (self.device_region(m)?, Side::Device(m), Residency::Device),
            _ => return Err(Error::ReadOnlyTensor),
        };
        if src_region.space == Space::Host && dst_region.space == Space::Host {
            // Host to host is the CPU's job: wait for the blocks' DMA, then copy.
            let (Some(a), Some(b)) = (from_host, to_host) else {
                return Err(Error::NotPinned);
            };
            for fence in [a.write, b.last_dma()].into_iter().flatten() {
                self.wait_for(fence)?;
            }
            let host = self.npu.host_memory();
            let (s, d) = (a.block.offset as usize, b.block.offset as usize);
            let len = bytes as usize;
            if s.max(d) + len > host.len() {
                return Err(Error::Hal(HalError::OutOfBounds {
                    region: src_region,
                    space_bytes: host.len() as u32,
                }));
            }
            host.copy_within(s..s + len, d);
        } else {
            self.transfer(src_region, src_side, dst_region, dst_side)?;
        }
        self.handles.get_mut(dst)?.newest = newest;
        Ok(())
    }

    fn read(&mut self, id: HandleId, out: &mut [u8]) -> Result<(), Error> {
        if self.sized(id, out.len())?.host.is_some() {
            return self.host_ref(id, &mut |b| out.copy_from_slice(b));
        }
        let (fence, block) = self.download_of(id, out.len())?;
        self.handles.get_mut(id)?.download = None;
        match self.wait_for(fence) {
            Ok(()) => self.finish_download(block, out),
            Err(e) => {
                self.staging.free(block)?;
                Err(e)
            }
        }
    }

    fn try_read(&mut self, id: HandleId, out: &mut [u8]) -> nb::Result<(), Error> {
        if self.sized(id, out.len())?.host.is_some() {
            return self.try_host_ref(id, &mut |b| out.copy_from_slice(b));
        }
        let (fence, block) = self.download_of(id, out.len())?;
        match self.npu.poll(fence) {
            Err(nb::Error::WouldBlock) => Err(nb::Error::WouldBlock),
            done => {
                self.handles.get_mut(id)?.download = None;
                match done {
                    Ok(()) => Ok(self.finish_download(block, out)?),
                    Err(e) => {
                        self.staging.free(block)?;
                        Err(nb::Error::Other(Error::from(match e {
                            nb::Error::Other(e) => e,
                            nb::Error::WouldBlock => HalError::UnknownFence(fence),
                        })))
                    }
                }
            }
        }
    }

    fn execute(&mut self, op: &Op, inputs: &[HandleId], output: HandleId) -> Result<(), Error> {
        self.dispatch(op, inputs, output, |s, operands, out| {
            if s.caps.ops.runs(op) {
                s.execute_on_npu(op, Variant::Auto, operands, out)
            } else {
                s.execute_on_cpu(op, operands, out)
            }
        })
    }

    fn execute_with(
        &mut self,
        op: &Op,
        how: Candidate,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        if let Candidate::Npu(variant) = how {
            if !self.caps.ops.runs(op) {
                return Err(HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                }
                .into());
            }
            if variant != Variant::Auto && !self.npu.supports_variant(op, variant) {
                return Err(HalError::VariantUnsupported {
                    op: op.kind(),
                    variant,
                }
                .into());
            }
        }
        self.dispatch(op, inputs, output, |s, operands, out| match how {
            Candidate::Npu(variant) => s.execute_on_npu(op, variant, operands, out),
            Candidate::Cpu => s.execute_on_cpu(op, operands, out),
        })
    }

    fn plan_step<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        self.add_plan_step(plan, op, inputs, output)
    }

    fn run_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        ops: &[&Op],
    ) -> Result<(), Error> {
        self.submit_plan(plan, ops)
    }

    fn plan_adopt<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        self.adopt_in_plan(plan, id)
    }

    fn release_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlan<S, T>,
    ) -> Result<(), Error> {
        self.drop_plan(plan)
    }

    fn now(&self) -> Cycles {
        self.npu.now()
    }

    fn execute_tuned(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<Dispatch, Error> {
        let fixed = match self.tuning.mode {
            TuneMode::Off => None,
            TuneMode::Fixed(c) => Some(c),
            // The CPU fallback is the only way: nothing to look up.
            _ if !self.caps.ops.runs(op) => None,
            mode => {
                let (key, cpu) = self.tune_key(op);
                match self.tuning.cache.lookup(key) {
                    Lookup::Hit(choice) => {
                        self.tuning.stats.hits += 1;
                        Some(choice.candidate)
                    }
                    Lookup::InProgress => {
                        self.tuning.stats.fallbacks += 1;
                        None
                    }
                    Lookup::Miss => {
                        // Listed on a miss only: asking the driver about each variant may cost
                        // it a search per candidate, which a hit must not pay every invoke.
                        let npu = &self.npu;
                        let list = candidates(op, true, true, cpu, |v| npu.supports_variant(op, v));
                        if list.len() < 2 {
                            // Nothing to choose between: never claimed, not counted.
                            None
                        } else {
                            self.tuning.stats.misses += 1;
                            if mode == TuneMode::Tune && self.tuning.cache.claim(key).is_ok() {
                                return Ok(Dispatch::Tune {
                                    key,
                                    candidates: list,
                                });
                            }
                            None
                        }
                    }
                }
            }
        };
        match fixed {
            Some(how) if how != Candidate::Npu(Variant::Auto) => {
                match self.execute_with(op, how, inputs, output) {
                    // The choice cannot run here (a variant this op or NPU lacks, no room for
                    // its scratch): the default computes the same bytes.
                    Err(Error::Hal(HalError::VariantUnsupported { .. }))
                    | Err(Error::Hal(HalError::Unsupported { .. }))
                    | Err(Error::OutOfMemory { .. }) => {
                        self.tuning.stats.fallbacks += 1;
                        self.execute(op, inputs, output)?;
                    }
                    other => other?,
                }
            }
            _ => self.execute(op, inputs, output)?,
        }
        Ok(Dispatch::Submitted)
    }

    fn finish_tuning(
        &mut self,
        key: TuneKey,
        choice: Choice,
        cost: TuningCost,
    ) -> Result<(), Error> {
        self.tuning.count(&choice, cost);
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
        self.tuning.cache.finish(key, choice).map_err(Error::Tune)
    }

    fn set_tuning(&mut self, mode: TuneMode, config: TuneConfig) {
        self.tuning.mode = mode;
        self.tuning.config = config;
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
    }

    fn tune_config(&self) -> TuneConfig {
        self.tuning.config
    }

    fn tune_stats(&self) -> TuneStats {
        self.tuning.stats
    }

    fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error> {
        crate::tune::export(&self.tuning.cache, self.tuning_fingerprint(), out)
            .map_err(Error::Table)
    }

    fn import_tuning(&mut self, bytes: &[u8]) -> Result<u16, Error> {
        let fingerprint = self.tuning_fingerprint();
        self.tuning.epoch = self.tuning.epoch.wrapping_add(1);
        crate::tune::import(&mut self.tuning.cache, fingerprint, bytes).map_err(Error::Table)
    }

    fn sync(&mut self) -> Result<(), Error> {
        for fence in self.newest.into_iter().flatten() {
            // A failed job is reported by the read of what it produced; sync only waits.
            let _ = self.wait_for(fence);
        }
        self.newest = [None; MAX_QUEUES];
        self.retire_memory_fences();
        self.reap_staging();
        Ok(())
    }

    fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        self.handles.retain(id, n)
    }

    fn release_late(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        // Whether or not this is the last reference: the plan's jobs must reach the record
        // before whichever release frees the memory.
        if let Binding::Memory(m) = self.handles.get_ref(id)?.binding {
            self.memory.access_mut(m)?.add_newest(&self.newest, true);
        }
        self.release(id, n)
    }

    fn release(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        self.handles.get(id)?;
        if self.handles.refs(id)? <= n {
            self.cancel_download(id)?;
        }
        let released = self.handles.release(id, n)?;
        let slot = released.and_then(|e| e.host);
        if let Some(host) = slot.and_then(|slot| self.pinned.get_mut(usize::from(slot))?.take()) {
            match host.last_dma() {
                Some(fence) => self.staging.free_after(fence, host.block)?,
                None => self.staging.free(host.block)?,
            }
        }
        match released {
            Some(TensorEntry {
                binding: Binding::Memory(m),
                pool,
                ..
            }) => {
                self.memory.release(m)?;
                match pool {
                    Some(pool) => self.release(pool, 1),
                    None => Ok(()),
                }
            }
            Some(TensorEntry {
                binding: Binding::Flash(region),
                ..
            }) => {
                if let Space::Flash(segment) = region.space {
                    if let Some(seg) = self
                        .flash
                        .get_mut(usize::from(segment))
                        .and_then(|s| s.as_mut())
                    {
                        seg.tensors = seg.tensors.saturating_sub(1);
                    }
                }
                Ok(())
            }
            Some(TensorEntry {
                binding: Binding::Host,
                ..
            })
            | None => Ok(()),
        }
    }

    fn size_of(&self, id: HandleId) -> Result<u32, Error> {
        Ok(self.handles.get(id)?.bytes)
    }

    fn on_interrupt(&mut self) {
        self.npu.on_interrupt();
    }

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn memory_stats(&self) -> MemoryStats {
        self.memory.stats()
    }

    fn stats(&self) -> ServerStats {
        self.stats
    }

    fn begin_pass(&mut self, key: u32) -> Result<(), Error> {
        self.with_memory_retry(|m| m.begin_pass(key))
    }

    fn end_pass(&mut self) -> Result<(), Error> {
        // Chunks whose jobs are over can then go back to the arena.
        self.retire_memory_fences();
        self.memory.end_pass()
    }

    fn pass_stats(&self) -> PassStats {
        self.memory.pass_stats()
    }

    fn reset_memory_peak(&mut self) {
        self.memory.reset_peak();
    }
}
