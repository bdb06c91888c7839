//! Transfers: host↔device and device↔device DMA jobs, through staging blocks or straight
//! from and into pinned blocks, each waiting for exactly the jobs that touch its memory.
//!
//! `write`, `read` and `try_read` copy through a staging block (one CPU copy each way);
//! `copy` moves a tensor's newest bytes wherever they are (see [`Residency`]).
//! [`ServerStats`](super::ServerStats) counts every transfer by direction.

use super::deps::DepSet;
use super::residency::Residency;
use super::tensors::{Binding, TensorEntry};
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, MAX_JOB_DEPS};
use crate::handle::HandleId;
use crate::memory::{MemoryBinding, MemoryManagement};
use crate::storage::Block;

/// The memory on one side of a transfer whose access record the transfer joins.
#[derive(Clone, Copy, Debug)]
pub(super) enum Side {
    /// Staging or flash: nothing else uses it.
    Untracked,
    /// Device memory.
    Device(MemoryBinding),
    /// The pinned host block of a tensor.
    Pinned(HandleId),
}

/// The DMA job `src → dst`, with no dependency yet. Its regions are written into the built job
/// rather than given to the enum's constructor: built whole, a size-optimised Cortex-M4 build
/// assembled the variant in a temporary at an unaligned offset and moved it with two `memcpy`
/// calls, about 130 instructions per transfer on the dispatch path.
#[inline(always)]
fn transfer_job<'a>(src: Region, dst: Region) -> Job<'a> {
    let mut job = Job {
        kind: JobKind::Transfer {
            src: Region::device(0, 0),
            dst: Region::device(0, 0),
        },
        queue: Queue::Dma,
        deps: heapless::Vec::new(),
    };
    if let JobKind::Transfer { src: s, dst: d } = &mut job.kind {
        (*s, *d) = (src, dst);
    }
    job
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    pub(super) fn staging_alloc(&mut self, bytes: u32) -> Result<Block, Error> {
        loop {
            self.reap_staging();
            match self.staging.alloc(bytes) {
                Err(_) if self.staging.has_pending() => self.wait()?,
                other => return other,
            }
        }
    }
    /// Free staging blocks whose transfers are over.
    pub(super) fn reap_staging(&mut self) {
        let (npu, frontier) = (&mut self.npu, &mut self.frontier);
        self.staging
            .reap(|f| frontier.is_done(npu, Queue::Dma.index(), f));
    }
    /// Queues the DMA transfer `src → dst`: it waits for the writers of its source and for
    /// every job still reading or writing its destination, and joins both access records.
    /// Counted by direction (host→device, device→host, device→device).
    pub(super) fn transfer(
        &mut self,
        src: Region,
        from: Side,
        dst: Region,
        to: Side,
    ) -> Result<Fence, Error> {
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
        let mut job = transfer_job(src, dst);
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
        self.count_transfer(src, dst);
        Ok(fence)
    }
    /// Queues the DMA transfer `src → dst` after exactly `deps`, touching no access record:
    /// for a job plan, which works out its transfers' dependencies once. Counted as
    /// `transfer` counts.
    pub(super) fn transfer_after(
        &mut self,
        src: Region,
        dst: Region,
        deps: &heapless::Vec<Fence, MAX_JOB_DEPS>,
    ) -> Result<Fence, Error> {
        let mut job = transfer_job(src, dst);
        job.deps.clone_from(deps);
        let fence = self.submit(&job)?;
        self.count_transfer(src, dst);
        Ok(fence)
    }
    fn count_transfer(&mut self, src: Region, dst: Region) {
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
    }
    /// Queue the transfer of staging region `src` into the tensor memory `binding`.
    pub(super) fn submit_upload(
        &mut self,
        src: Region,
        binding: MemoryBinding,
    ) -> Result<Fence, Error> {
        let dst = self.device_region(binding)?;
        self.transfer(src, Side::Untracked, dst, Side::Device(binding))
    }
    /// Copy `data` into staging and queue its upload into `binding`.
    pub(super) fn upload_with(
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
    pub(super) fn start_download(
        &mut self,
        binding: Binding,
        bytes: u32,
    ) -> Result<(Fence, Block), Error> {
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
    pub(super) fn finish_download(&mut self, block: Block, out: &mut [u8]) -> Result<(), Error> {
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
    pub(super) fn download_of(
        &mut self,
        id: HandleId,
        out_len: usize,
    ) -> Result<(Fence, Block), Error> {
        let entry = self.sized(id, out_len)?;
        if entry.downloading {
            if let Some(&(_, fence, block)) = self.downloads.iter().find(|d| d.0 == id) {
                return Ok((fence, block));
            }
        }
        let (fence, block) = self.start_download(entry.binding, entry.bytes)?;
        // Each pending download holds one of the STAGING blocks: the list has room.
        if self.downloads.push((id, fence, block)).is_err() {
            self.staging.free_after(fence, block)?;
            return Err(Error::CapacityExceeded {
                capacity: crate::error::Capacity::StagingBlocks,
                limit: STAGING as u32,
            });
        }
        self.handles.get_mut(id)?.downloading = true;
        Ok((fence, block))
    }
    /// Takes a tensor's pending download off the list: its fence and block, if it had one.
    pub(super) fn take_download(&mut self, id: HandleId) -> Result<Option<(Fence, Block)>, Error> {
        let entry = self.handles.get_mut(id)?;
        if !core::mem::take(&mut entry.downloading) {
            return Ok(None);
        }
        let at = self.downloads.iter().position(|d| d.0 == id);
        Ok(at.map(|k| {
            let (_, fence, block) = self.downloads.swap_remove(k);
            (fence, block)
        }))
    }
    /// A tensor's entry, after checking that a caller's buffer of `len` bytes matches it.
    pub(super) fn sized(&self, id: HandleId, len: usize) -> Result<TensorEntry, Error> {
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
    pub(super) fn cancel_download(&mut self, id: HandleId) -> Result<(), Error> {
        if let Some((fence, block)) = self.take_download(id)? {
            self.staging.free_after(fence, block)?;
        }
        Ok(())
    }

    pub(super) fn write(&mut self, id: HandleId, data: &[u8]) -> Result<(), Error> {
        let entry = self.sized(id, data.len())?;
        if entry.host.is_some() {
            return self.host_mut(id, &mut |buf| buf.copy_from_slice(data));
        }
        let (Binding::Memory(binding), false) = (entry.binding, entry.constant) else {
            return Err(Error::ReadOnlyTensor);
        };
        if entry.downloading {
            self.cancel_download(id)?;
        }
        self.upload_with(binding, entry.bytes, &mut |buf| {
            buf.copy_from_slice(data);
            Ok(())
        })?;
        // Only a recovery marks a tensor lost, and it sets `maybe_lost` when it does (maybe
        // while this write waited for staging): without it, no entry is.
        if self.maybe_lost {
            self.handles.get_mut(id)?.lost = false;
        }
        Ok(())
    }

    pub(super) fn read(&mut self, id: HandleId, out: &mut [u8]) -> Result<(), Error> {
        let entry = self.sized(id, out.len())?;
        if entry.lost {
            return Err(Error::ContentsLost);
        }
        if entry.host.is_some() {
            return self.host_ref(id, &mut |b| out.copy_from_slice(b));
        }
        // A download started earlier (by `try_read`) is this read's; otherwise this read
        // starts its own, which it finishes before returning, so it never joins the list of
        // pending downloads.
        let pending = if entry.downloading {
            self.take_download(id)?
        } else {
            None
        };
        let (fence, block) = match pending {
            Some(pending) => pending,
            None => self.start_download(entry.binding, entry.bytes)?,
        };
        match self.wait_for(fence) {
            Ok(()) => self.finish_download(block, out),
            Err(e) => {
                self.staging.free(block)?;
                Err(e)
            }
        }
    }

    pub(super) fn try_read(&mut self, id: HandleId, out: &mut [u8]) -> nb::Result<(), Error> {
        let entry = self.sized(id, out.len())?;
        if entry.lost {
            return Err(nb::Error::Other(Error::ContentsLost));
        }
        if entry.host.is_some() {
            return self.try_host_ref(id, &mut |b| out.copy_from_slice(b));
        }
        let (fence, block) = self.download_of(id, out.len())?;
        match self.npu.poll(fence) {
            Err(nb::Error::WouldBlock) => Err(nb::Error::WouldBlock),
            done => {
                self.take_download(id)?;
                // The jobs before it may have faulted (on its queue, it ran after them).
                let done = match done {
                    Ok(()) => self.watch(false).map_err(nb::Error::Other),
                    other => other.map_err(|e| e.map(Error::from)),
                };
                match done {
                    Ok(()) => Ok(self.finish_download(block, out)?),
                    Err(e) => {
                        self.staging.free(block)?;
                        let e = match e {
                            nb::Error::Other(Error::Hal(e)) => self.failed(e),
                            nb::Error::Other(e) => e,
                            nb::Error::WouldBlock => HalError::UnknownFence(fence).into(),
                        };
                        Err(nb::Error::Other(e))
                    }
                }
            }
        }
    }

    pub(super) fn copy(&mut self, src: HandleId, dst: HandleId) -> Result<(), Error> {
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
        if from.lost {
            return Err(Error::ContentsLost);
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
        let dst = self.handles.get_mut(dst)?;
        dst.newest = newest;
        dst.lost = false;
        Ok(())
    }
}
