//! The client: what firmware code calls.
//!
//! # Design
//!
//! A [`ComputeClient`] is a shared reference to a channel, cheap to copy. It hands out
//! [`Tensor`]s: RAII handles to device memory (clone shares, drop releases) that borrow the
//! channel, so a tensor cannot outlive its server and is checked against the client it is used
//! with (a tensor of another client is [`Error::ForeignHandle`]).
//!
//! `execute` returns once the job is submitted: the CPU is free while the NPU works. `read`
//! waits only for the jobs that produce the tensor it reads; `try_read` never waits;
//! `read_async` is a future, woken by the NPU's interrupt (see [`futures`]).
//!
//! ```
//! use npu_compute::prelude::*;
//! use npu_compute::ops::AddF32;
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! // The NPU's memories must start on its alignment (16 bytes): `AlignedMemory` does that.
//! let mut device = AlignedMemory::<4096>::new();
//! let mut host = AlignedMemory::<4096>::new();
//! let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
//! let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default()).unwrap();
//! let channel: RefCellChannel<_> = RefCellChannel::new(server);
//! let client = ComputeClient::new(&channel);
//!
//! let a = client.create_f32(&[1.0, 2.0, 3.0, 4.0]).unwrap();
//! let b = client.create_f32(&[10.0, 20.0, 30.0, 40.0]).unwrap();
//! let sum = client.empty(16).unwrap();
//! client.execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &b], &sum).unwrap();
//! let mut out = [0.0f32; 4];
//! client.read_f32(&sum, &mut out).unwrap();
//! assert_eq!(out, [11.0, 22.0, 33.0, 44.0]);
//! ```

pub mod futures;

use crate::channel::ComputeChannel;
use crate::error::Error;
use crate::hal::{Capabilities, Estimate, ExecutionUnit, MAX_JOB_INPUTS};
use crate::handle::HandleId;
use crate::memory::{MemoryStats, PassStats};
use crate::ops::Op;
use crate::server::{
    ComputeServer, JobPlanState, PassServer, Placement, Residency, ServerStats, TuneStats,
};

/// The firmware's entry point to the compute stack.
pub struct ComputeClient<'c, C> {
    channel: &'c C,
}

impl<C> Clone for ComputeClient<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for ComputeClient<'_, C> {}

/// A tensor on the device: an RAII handle. Clone shares the tensor, drop releases it.
pub struct Tensor<'c, C: ComputeChannel> {
    channel: &'c C,
    id: HandleId,
    bytes: u32,
}

impl<C: ComputeChannel> Tensor<'_, C> {
    /// The server-side id.
    pub fn id(&self) -> HandleId {
        self.id
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u32 {
        self.bytes
    }
}

impl<C: ComputeChannel> Clone for Tensor<'_, C> {
    fn clone(&self) -> Self {
        self.channel.retain(self.id);
        Tensor {
            channel: self.channel,
            id: self.id,
            bytes: self.bytes,
        }
    }
}

impl<C: ComputeChannel> Drop for Tensor<'_, C> {
    fn drop(&mut self) {
        self.channel.release(self.id);
    }
}

impl<C: ComputeChannel> core::fmt::Debug for Tensor<'_, C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tensor")
            .field("id", &self.id)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl<'c, C: ComputeChannel> ComputeClient<'c, C> {
    /// A client of `channel`.
    pub fn new(channel: &'c C) -> Self {
        ComputeClient { channel }
    }

    /// The channel (for direct server access, e.g. a simulator's clock).
    pub fn channel(&self) -> &'c C {
        self.channel
    }

    pub(crate) fn call<R>(
        &self,
        f: impl FnOnce(&mut C::Server) -> Result<R, Error>,
    ) -> Result<R, Error> {
        self.channel.with(f)?
    }

    pub(crate) fn own(&self, t: &Tensor<'c, C>) -> Result<HandleId, Error> {
        if core::ptr::eq(t.channel, self.channel) {
            Ok(t.id)
        } else {
            Err(Error::ForeignHandle)
        }
    }

    fn wrap(&self, id: HandleId, bytes: u32) -> Tensor<'c, C> {
        Tensor {
            channel: self.channel,
            id,
            bytes,
        }
    }

    /// A tensor of `bytes` bytes whose contents are undefined until a job writes them.
    pub fn empty(&self, bytes: u32) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.empty(bytes))?;
        Ok(self.wrap(id, bytes))
    }

    /// A tensor of `bytes` bytes in the NPU's slow memory tier (PSRAM, HyperRAM:
    /// [`Space::Slow`](crate::hal::Space::Slow)), undefined until written: for tensors the
    /// arena cannot hold, which jobs then read and write at the tier's cost, or which
    /// [`copy`](Self::copy) moves to and from the arena.
    ///
    /// Errors: [`Error::SlowTierOutOfMemory`] (also on an NPU without a slow tier).
    pub fn empty_slow(&self, bytes: u32) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.empty_slow(bytes))?;
        Ok(self.wrap(id, bytes))
    }

    /// A tensor holding `data` (uploaded asynchronously; `data` may be reused at once).
    pub fn create(&self, data: &[u8]) -> Result<Tensor<'c, C>, Error> {
        let Ok(bytes) = u32::try_from(data.len()) else {
            let largest_free = self.memory_stats()?.largest_free;
            return Err(Error::OutOfMemory {
                requested: u32::MAX,
                free: largest_free,
                largest_free,
            });
        };
        self.create_with(bytes, |buf| {
            buf.copy_from_slice(data);
            Ok(())
        })
    }

    /// A tensor holding f32 values (little-endian in device memory).
    pub fn create_f32(&self, data: &[f32]) -> Result<Tensor<'c, C>, Error> {
        self.create(bytemuck::cast_slice(data))
    }

    /// A tensor of `bytes` bytes that `fill` writes straight into host staging memory, then
    /// uploaded: for data computed on the fly, with no buffer of its own.
    pub fn create_with(
        &self,
        bytes: u32,
        mut fill: impl FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.create(bytes, false, &mut fill))?;
        Ok(self.wrap(id, bytes))
    }

    /// A tensor of `bytes` at `offset` inside `pool`, at a place a planner chose: nothing is
    /// reserved. See [`ComputeServer::place`].
    ///
    /// ```
    /// use npu_compute::prelude::*;
    /// use npu_compute::ops::ReluF32;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    /// let mut device = AlignedMemory::<4096>::new(); let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// let client = ComputeClient::new(&channel);
    /// let pool = client.empty(64).unwrap();
    /// let a = client.place(&pool, 0, 16).unwrap();
    /// client.write(&a, &[7; 16]).unwrap();
    /// let b = client.place(&pool, 16, 16).unwrap();
    /// client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&a], &b).unwrap();
    /// drop(a);
    /// // `a`'s bytes are dead: the next tensor may lie over them.
    /// let c = client.place(&pool, 0, 16).unwrap();
    /// client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&b], &c).unwrap();
    /// let mut out = [0u8; 16];
    /// client.read(&c, &mut out).unwrap();
    /// assert_eq!(out, [7; 16]);
    /// ```
    pub fn place(
        &self,
        pool: &Tensor<'c, C>,
        offset: u32,
        bytes: u32,
    ) -> Result<Tensor<'c, C>, Error> {
        let pool = self.own(pool)?;
        let id = self.call(|s| s.place(pool, offset, bytes))?;
        Ok(self.wrap(id, bytes))
    }

    /// Overwrites `t` with `data` (its size); returns once the upload is queued.
    pub fn write(&self, t: &Tensor<'c, C>, data: &[u8]) -> Result<(), Error> {
        let id = self.own(t)?;
        self.call(|s| s.write(id, data))
    }

    /// A tensor with a pinned host block: the CPU fills and reads it in place
    /// ([`host_mut`](Self::host_mut), [`host_ref`](Self::host_ref)) and its bytes move
    /// between host and device without a staging copy, only when a job or a host read needs
    /// them. See [`Residency`].
    ///
    /// ```
    /// use npu_compute::prelude::*;
    /// use npu_compute::ops::ReluF32;
    /// use npu_compute::server::Residency;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    /// let mut device = AlignedMemory::<4096>::new(); let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// let client = ComputeClient::new(&channel);
    /// let x = client.pinned(16).unwrap();
    /// client.host_mut(&x, |b| {
    ///     for (chunk, v) in b.chunks_exact_mut(4).zip([-1.0f32, 2.0, -3.0, 4.0]) {
    ///         chunk.copy_from_slice(&v.to_le_bytes());
    ///     }
    /// }).unwrap();
    /// assert_eq!(client.residency(&x).unwrap(), Residency::Host);
    /// let y = client.pinned(16).unwrap();
    /// // Uploads x straight from its block, then runs.
    /// client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&x], &y).unwrap();
    /// assert_eq!(client.residency(&y).unwrap(), Residency::Device);
    /// let third = client.host_ref(&y, |b| b[8..12].to_vec()).unwrap();
    /// assert_eq!(third, 0.0f32.to_le_bytes());
    /// assert_eq!(client.residency(&y).unwrap(), Residency::Both);
    /// assert_eq!(client.stats().unwrap().staging_copy_bytes, 0);
    /// ```
    pub fn pinned(&self, bytes: u32) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.pinned(bytes))?;
        Ok(self.wrap(id, bytes))
    }

    /// Runs `f` on a pinned tensor's host block, to write it in place (after the DMA jobs
    /// still using the block complete). The host then holds the newest bytes; the next job
    /// reading the tensor uploads them. `f` runs inside the channel: it must not call the
    /// client. Errors: [`Error::NotPinned`].
    pub fn host_mut<R>(
        &self,
        t: &Tensor<'c, C>,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, Error> {
        let id = self.own(t)?;
        let mut f = Some(f);
        let mut result = None;
        self.call(|s| {
            s.host_mut(id, &mut |b| {
                if let Some(f) = f.take() {
                    result = Some(f(b));
                }
            })
        })?;
        result.ok_or(Error::NotPinned)
    }

    /// Runs `f` on a pinned tensor's host block, to read it in place, downloading the newest
    /// bytes into it first when the device holds them (and waiting for that download only).
    /// `f` runs inside the channel: it must not call the client. Errors:
    /// [`Error::NotPinned`], the failure of a job producing the bytes.
    pub fn host_ref<R>(&self, t: &Tensor<'c, C>, f: impl FnOnce(&[u8]) -> R) -> Result<R, Error> {
        let id = self.own(t)?;
        let mut f = Some(f);
        let mut result = None;
        let mut once = |b: &[u8]| {
            if let Some(f) = f.take() {
                result = Some(f(b));
            }
        };
        if C::WAITS_BETWEEN_STEPS {
            self.channel.wait_on(|s| s.try_host_ref(id, &mut once))?;
        } else {
            self.call(|s| s.host_ref(id, &mut once))?;
        }
        result.ok_or(Error::NotPinned)
    }

    /// Like [`host_ref`](Self::host_ref) but never waits: `WouldBlock` until the host block
    /// holds the newest bytes (the download starts at the first call).
    pub fn try_host_ref<R>(
        &self,
        t: &Tensor<'c, C>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> nb::Result<R, Error> {
        let id = self.own(t)?;
        let mut f = Some(f);
        let mut result = None;
        self.channel.with(|s| {
            s.try_host_ref(id, &mut |b| {
                if let Some(f) = f.take() {
                    result = Some(f(b));
                }
            })
        })??;
        result.ok_or(nb::Error::Other(Error::NotPinned))
    }

    /// Where a tensor's newest bytes are.
    pub fn residency(&self, t: &Tensor<'c, C>) -> Result<Residency, Error> {
        let id = self.own(t)?;
        self.call(|s| s.tensor(id)).map(|state| state.residency)
    }

    /// Queues a copy of `src`'s newest bytes into `dst` (same size): device to device, or
    /// straight from or into a pinned block; returns at once. See [`ComputeServer::copy`].
    pub fn copy(&self, src: &Tensor<'c, C>, dst: &Tensor<'c, C>) -> Result<(), Error> {
        let (src, dst) = (self.own(src)?, self.own(dst)?);
        self.call(|s| s.copy(src, dst))
    }

    /// Maps constant data (a model in flash) so that [`create_const`](Self::create_const)
    /// binds tensors inside it in place. See [`ComputeServer::map_flash`].
    pub fn map_flash(&self, bytes: &'static [u8]) -> Result<u8, Error> {
        self.call(|s| s.map_flash(bytes))
    }

    /// Unmaps a flash segment once no tensor refers to it. See [`ComputeServer::unmap_flash`].
    pub fn unmap_flash(&self, segment: u8) -> Result<(), Error> {
        self.call(|s| s.unmap_flash(segment))
    }

    /// A read-only tensor of constant data: in place in mapped flash when the NPU can read it
    /// there, else copied to the device once.
    pub fn create_const(&self, data: &'static [u8]) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.create_const(data))?;
        Ok(self.wrap(id, data.len() as u32))
    }

    /// A read-only tensor of `bytes` that `fill` computes into staging memory, uploaded once
    /// (see [`ComputeServer::create`]): constants made at load time.
    pub fn create_const_with(
        &self,
        bytes: u32,
        mut fill: impl FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<Tensor<'c, C>, Error> {
        let id = self.call(|s| s.create(bytes, true, &mut fill))?;
        Ok(self.wrap(id, bytes))
    }

    /// Whether a tensor lives in flash (costs no arena bytes).
    pub fn is_in_flash(&self, t: &Tensor<'c, C>) -> Result<bool, Error> {
        let id = self.own(t)?;
        self.call(|s| s.tensor(id)).map(|state| state.in_flash)
    }

    /// Copy a tensor's bytes into `out`, waiting only for the jobs that produce it. How it
    /// waits is the channel's to decide ([`ComputeChannel::WAITS_BETWEEN_STEPS`]): a channel
    /// shared with interrupt handlers waits with interrupts enabled.
    pub fn read(&self, t: &Tensor<'c, C>, out: &mut [u8]) -> Result<(), Error> {
        let id = self.own(t)?;
        if C::WAITS_BETWEEN_STEPS {
            self.channel.wait_on(|s| s.try_read(id, out))
        } else {
            self.call(|s| s.read(id, out))
        }
    }

    /// Read an f32 tensor.
    pub fn read_f32(&self, t: &Tensor<'c, C>, out: &mut [f32]) -> Result<(), Error> {
        self.read(t, bytemuck::cast_slice_mut(out))
    }

    /// Like [`read`](Self::read) but never waits: `WouldBlock` until the bytes are ready. Call
    /// again with the same tensor to finish.
    pub fn try_read(&self, t: &Tensor<'c, C>, out: &mut [u8]) -> nb::Result<(), Error> {
        let id = self.own(t)?;
        self.channel.with(|s| s.try_read(id, out))?
    }

    /// Run `op` on `inputs` into `output`; returns as soon as the job is submitted. `op` is
    /// an [`Op`] or a reference to one (a caller that keeps its ops passes `&op`: an `Op` is
    /// well over a hundred bytes, and the job handed to the driver borrows it).
    pub fn execute(
        &self,
        op: impl core::borrow::Borrow<Op>,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<(), Error> {
        let op = op.borrow();
        // Written out rather than through `ids`: returning the list costs 15 instructions per
        // dispatch on a Cortex-M4, and filling a caller's list costs more (code layout).
        if inputs.len() > MAX_JOB_INPUTS {
            return Err(Error::operand_count(op, inputs.len()));
        }
        let mut ids: heapless::Vec<HandleId, MAX_JOB_INPUTS> = heapless::Vec::new();
        for t in inputs {
            // At most MAX_JOB_INPUTS: checked above.
            let _ = ids.push(self.own(t)?);
        }
        let out = self.own(output)?;
        self.call(|s| s.execute(op, &ids, out))
    }

    /// [`execute`](Self::execute) on the unit `placement` names, decided by the caller (a
    /// static schedule) rather than round robin at dispatch. See [`Placement`].
    pub fn execute_on(
        &self,
        placement: Placement,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<(), Error> {
        let ids = self.ids(op, inputs)?;
        let out = self.own(output)?;
        self.call(|s| s.execute_on(placement, op, &ids, out))
    }

    /// What `op` on `inputs` into `output` would cost at `placement`, as the HAL predicts it
    /// with nothing else running (`None`: the HAL cannot tell). Nothing runs.
    pub fn estimate(
        &self,
        placement: Placement,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<Option<Estimate>, Error> {
        let ids = self.ids(op, inputs)?;
        let out = self.own(output)?;
        self.call(|s| s.estimate(placement, op, &ids, out))
    }

    /// An empty [`JobPlan`] of at most `STEPS` jobs over at most `TENSORS` tensors, released
    /// when dropped: build it once with [`JobPlan::push`], then [`JobPlan::run`] it as often as
    /// needed, each run costing the driver's submit and little more per job.
    ///
    /// ```
    /// use npu_compute::prelude::*;
    /// use npu_compute::ops::AddF32;
    /// use npu_compute::client::JobPlan;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    ///
    /// let mut device = AlignedMemory::<4096>::new();
    /// let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(NpuServer::<_>::new(npu, MemoryConfig::default()).unwrap());
    /// let client = ComputeClient::new(&channel);
    ///
    /// let x = client.create_f32(&[1.0, 2.0]).unwrap();
    /// let (y, z) = (client.empty(8).unwrap(), client.empty(8).unwrap());
    /// let add = Op::AddF32(AddF32 { len: 2 });
    /// let mut plan: JobPlan<_, 8, 8> = client.job_plan();
    /// plan.push(&add, &[&x, &x], &y).unwrap(); // y = 2x
    /// plan.push(&add, &[&y, &x], &z).unwrap(); // z = 3x
    /// for _ in 0..3 {
    ///     plan.run(&[&add, &add]).unwrap();
    /// }
    /// let mut out = [0.0f32; 2];
    /// client.read_f32(&z, &mut out).unwrap();
    /// assert_eq!(out, [3.0, 6.0]);
    /// ```
    pub fn job_plan<const STEPS: usize, const TENSORS: usize>(
        &self,
    ) -> JobPlan<'c, C, STEPS, TENSORS> {
        JobPlan {
            client: *self,
            plan: JobPlanState::new(),
        }
    }

    /// The ids of `op`'s input tensors, checked to be this client's.
    pub(crate) fn ids(
        &self,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
    ) -> Result<heapless::Vec<HandleId, MAX_JOB_INPUTS>, Error> {
        let mut ids = heapless::Vec::new();
        for t in inputs {
            ids.push(self.own(t)?)
                .map_err(|_| Error::operand_count(op, inputs.len()))?;
        }
        Ok(ids)
    }

    /// Wait until every submitted job has completed.
    pub fn sync(&self) -> Result<(), Error> {
        if C::WAITS_BETWEEN_STEPS {
            self.channel.wait_on(|s| s.try_sync())
        } else {
            self.call(|s| s.sync())
        }
    }

    /// What the NPU behind the channel can do.
    pub fn capabilities(&self) -> Result<Capabilities, Error> {
        self.channel.with(|s| s.capabilities())
    }

    /// Execution unit `unit` as the HAL declares it (name and throughput).
    pub fn execution_unit(&self, unit: u8) -> Result<ExecutionUnit, Error> {
        self.channel.with(|s| s.execution_unit(unit))
    }

    /// Device memory figures.
    pub fn memory_stats(&self) -> Result<MemoryStats, Error> {
        self.channel.with(|s| s.memory_stats())
    }

    /// Job and transfer counters.
    pub fn stats(&self) -> Result<ServerStats, Error> {
        self.channel.with(|s| s.stats())
    }

    /// Counters of the tuner (see [`TuneStats`]).
    pub fn tune_stats(&self) -> Result<TuneStats, Error> {
        self.channel.with(|s| s.tune_stats())
    }

    /// Writes the tuned choices as a tuning table into `out`, returns its length: ship it to
    /// firmware, which builds its server with
    /// [`NpuServer::with_tuning_table`](crate::server::NpuServer::with_tuning_table). See
    /// [`ComputeServer::export_tuning`].
    pub fn export_tuning(&self, out: &mut [u8]) -> Result<usize, Error> {
        self.call(|s| s.export_tuning(out))
    }

    /// Restarts the memory peaks ([`MemoryStats::in_use_peak`], [`MemoryStats::reserved_peak`])
    /// from the current figures, to measure one phase of a run (for example every run after
    /// the first of each shape).
    pub fn reset_memory_peak(&self) -> Result<(), Error> {
        self.channel.with(|s| s.reset_memory_peak())
    }
}

impl<'c, C: ComputeChannel> ComputeClient<'c, C>
where
    C::Server: PassServer,
{
    /// Runs `f` as one pass of shape `key` (for example its sequence length): one run of an
    /// eager workload (one inference). The first pass of a key is measured and later ones are
    /// placed at planned offsets ([`GuidedMemory`](crate::memory::GuidedMemory)); the pass
    /// ends even when `f` fails. Tensors `f` returns escape the pass (they are never placed).
    /// The first error wins.
    ///
    /// Only a client of a server over a `GuidedMemory` has passes ([`PassServer`]); the
    /// chunk/slice manager has nothing to learn from them:
    ///
    /// ```compile_fail
    /// use npu_compute::prelude::*;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    /// let mut device = AlignedMemory::<4096>::new(); let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default()).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(server);
    /// let client = ComputeClient::new(&channel);
    /// client.pass(1, || Ok(())).unwrap(); // no `pass` on a chunk/slice server's client
    /// ```
    ///
    /// ```
    /// use npu_compute::prelude::*;
    /// use npu_compute::memory::{ChunkSliceMemory, GuidedMemory};
    /// use npu_compute::ops::ReluF32;
    /// use npu_sim::{AlignedMemory, SimConfig, SimNpu};
    ///
    /// let mut device = AlignedMemory::<4096>::new();
    /// let mut host = AlignedMemory::<4096>::new();
    /// let npu: SimNpu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
    /// let memory: GuidedMemory = GuidedMemory::new(ChunkSliceMemory::new(4096, 16, MemoryConfig::default()).unwrap());
    /// let server: NpuServer<_, _> = NpuServer::with_memory(npu, memory).unwrap();
    /// let channel: RefCellChannel<_> = RefCellChannel::new(server);
    /// let client = ComputeClient::new(&channel);
    /// for _ in 0..3 {
    ///     let out = client.pass(4, || {
    ///         let a = client.create_f32(&[1.0, -2.0, 3.0, -4.0])?;
    ///         let b = client.empty(16)?;
    ///         client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&a], &b)?;
    ///         let mut out = [0.0f32; 4];
    ///         client.read_f32(&b, &mut out)?;
    ///         Ok(out)
    ///     }).unwrap();
    ///     assert_eq!(out, [1.0, 0.0, 3.0, 0.0]);
    /// }
    /// let s = client.pass_stats().unwrap();
    /// assert_eq!((s.measured_passes, s.guided_passes, s.placed_reservations), (1, 2, 4));
    /// ```
    pub fn pass<R>(&self, key: u32, f: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
        self.call(|s| s.begin_pass(key))?;
        let result = f();
        let end = self.call(|s| s.end_pass());
        let r = result?;
        end?;
        Ok(r)
    }

    /// Counters of the memory manager's passes.
    pub fn pass_stats(&self) -> Result<PassStats, Error> {
        self.channel.with(|s| s.pass_stats())
    }
}

/// A job plan: a list of jobs over fixed tensors (NPU jobs, and operators the CPU fallback
/// computes), checked once and submitted many times
/// (see [`JobPlanState`] for the design), owned through a client: its tensors are released
/// when it is dropped (see [`ComputeClient::job_plan`]). A [`Graph`](crate::graph::Graph)
/// runs every invoke from one.
pub struct JobPlan<'c, C: ComputeChannel, const STEPS: usize = 64, const TENSORS: usize = 64> {
    client: ComputeClient<'c, C>,
    plan: JobPlanState<STEPS, TENSORS>,
}

impl<'c, C: ComputeChannel, const STEPS: usize, const TENSORS: usize>
    JobPlan<'c, C, STEPS, TENSORS>
{
    /// Appends `op` on `inputs` into `output` (see [`ComputeServer::plan_step`]). Nothing
    /// runs until [`run`](Self::run).
    pub fn push(
        &mut self,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<(), Error> {
        let ids = self.client.ids(op, inputs)?;
        let out = self.client.own(output)?;
        let plan = &mut self.plan;
        self.client.call(|s| s.plan_step(plan, op, &ids, out))
    }

    /// [`push`](Self::push) at a placement the caller decided (a static schedule's): see
    /// [`Placement`].
    pub fn push_on(
        &mut self,
        placement: Placement,
        op: &Op,
        inputs: &[&Tensor<'c, C>],
        output: &Tensor<'c, C>,
    ) -> Result<(), Error> {
        let ids = self.client.ids(op, inputs)?;
        let out = self.client.own(output)?;
        let plan = &mut self.plan;
        self.client
            .call(|s| s.plan_step_on(plan, placement, op, &ids, out))
    }

    /// Hands `tensor` to the plan (see [`ComputeServer::plan_adopt`]): once the plan holds
    /// the last reference to a tensor it uses, only its jobs can touch it, and its runs skip
    /// that tensor's bookkeeping. Give it the tensors only its jobs use, such as
    /// intermediate activations; a tensor the plan does not use is simply dropped.
    pub fn adopt(&mut self, tensor: Tensor<'c, C>) -> Result<(), Error> {
        let id = self.client.own(&tensor)?;
        let plan = &mut self.plan;
        self.client.call(|s| s.plan_adopt(plan, id))?;
        // The server released the tensor's reference.
        core::mem::forget(tensor);
        Ok(())
    }

    /// Makes `tensor` one of the plan's although no job names it (see
    /// [`ComputeServer::plan_include`]): for a tensor the plan's jobs write only through
    /// other tensors over its memory, such as a concatenation's output written in place by
    /// its producers, so that reading it after a run waits for them.
    pub fn include(&mut self, tensor: &Tensor<'c, C>) -> Result<(), Error> {
        let id = self.client.own(tensor)?;
        let plan = &mut self.plan;
        self.client.call(|s| s.plan_include(plan, id))
    }

    /// Submits every job, `ops[k]` being the op of the `k`-th [`push`](Self::push), and
    /// returns at once, or once its CPU steps have computed (see
    /// [`ComputeServer::run_plan`]).
    pub fn run(&mut self, ops: &[&Op]) -> Result<(), Error> {
        let plan = &mut self.plan;
        self.client.call(|s| s.run_plan(plan, ops))
    }

    /// The client the plan belongs to.
    pub fn client(&self) -> ComputeClient<'c, C> {
        self.client
    }

    /// The plan's jobs and tensors.
    pub fn jobs(&self) -> &JobPlanState<STEPS, TENSORS> {
        &self.plan
    }
}

impl<C: ComputeChannel, const STEPS: usize, const TENSORS: usize> Drop
    for JobPlan<'_, C, STEPS, TENSORS>
{
    fn drop(&mut self) {
        let plan = &mut self.plan;
        if self.client.call(|s| s.release_plan(plan)).is_err() {
            // The channel is busy (dropped inside a callback): defer each reference, as a
            // tensor's drop does. (`release_plan` empties the plan on any other outcome.)
            for id in self.plan.tensor_ids() {
                self.client.channel.release(id);
            }
        }
    }
}
