//! Pinned blocks: binding a pinned tensor on the device at its first job, moving its bytes
//! between its host block and device memory, and the CPU's access to the block.
//!
//! Transfers are lazy. A job that reads a pinned tensor uploads it first only when the
//! device copy is stale; a host read downloads only when the host copy is stale. Device
//! memory itself is reserved at the first job that touches the tensor, so a pinned buffer
//! that only feeds copies never takes arena bytes.
//!
//! The host block records the newest DMA job reading it (an upload) and writing it (a
//! download). All of them run on the DMA queue, in order, so transfers need no dependency
//! on each other; the records are for the CPU, which waits before writing a block an upload
//! is still reading, and before reading a block a download is still filling.

use super::residency::{HostCopy, Residency};
use super::tensors::{Binding, TensorEntry};
use super::transfers::Side;
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Fence, HalError, Npu, Region};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;
use crate::storage::Block;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// Binds a pinned tensor on the device at its first use by a job (reserving its device
    /// memory), and when the job reads it (`read`) and the host holds the newest bytes,
    /// queues their upload straight from the pinned block. Returns the updated entry.
    pub(super) fn bind_on_device(
        &mut self,
        id: HandleId,
        read: bool,
    ) -> Result<TensorEntry, Error> {
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
    pub(super) fn host_of(&self, entry: &TensorEntry) -> Option<HostCopy> {
        entry
            .host
            .and_then(|slot| self.pinned.get(usize::from(slot)).copied().flatten())
    }
    /// The record of `id`'s pinned block, to update.
    pub(super) fn pinned_slot(&mut self, id: HandleId) -> Result<Option<&mut HostCopy>, Error> {
        let slot = self.handles.get(id)?.host;
        Ok(slot.and_then(|slot| self.pinned.get_mut(usize::from(slot))?.as_mut()))
    }
    /// The pinned block of `id` as a host-memory range, with the tensor's entry.
    pub(super) fn pinned_block(&self, id: HandleId) -> Result<(TensorEntry, HostCopy), Error> {
        let entry = self.handles.get(id)?;
        let host = self.host_of(&entry).ok_or(Error::NotPinned)?;
        Ok((entry, host))
    }
    /// Starts downloading a pinned tensor's newest device bytes into its block, if the host
    /// copy is stale. Returns the fence the host block must wait for (the newest download).
    pub(super) fn fetch_to_host(&mut self, id: HandleId) -> Result<Option<Fence>, Error> {
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
    pub(super) fn block_bytes(&mut self, block: Block, len: u32) -> Result<&mut [u8], Error> {
        let host = self.npu.host_memory();
        let space_bytes = host.len() as u32;
        let start = block.offset as usize;
        host.get_mut(start..start + len as usize)
            .ok_or(Error::Hal(HalError::OutOfBounds {
                region: Region::host(block.offset, len),
                space_bytes,
            }))
    }

    /// Lets `f` write a pinned tensor's block in place, once no DMA job uses it; the host
    /// then holds the newest bytes.
    pub(super) fn host_mut(
        &mut self,
        id: HandleId,
        f: &mut dyn FnMut(&mut [u8]),
    ) -> Result<(), Error> {
        let (entry, host) = self.pinned_block(id)?;
        // An upload still reading the block would send the new bytes; a download would
        // overwrite them.
        if let Some(fence) = host.last_dma() {
            self.wait_for(fence)?;
        }
        f(self.block_bytes(host.block, entry.bytes)?);
        let entry = self.handles.get_mut(id)?;
        entry.newest = Residency::Host;
        entry.lost = false;
        Ok(())
    }

    /// Lets `f` read a pinned tensor's block, downloading the newest bytes first and waiting
    /// for them if the host copy is stale.
    pub(super) fn host_ref(&mut self, id: HandleId, f: &mut dyn FnMut(&[u8])) -> Result<(), Error> {
        if self.handles.get_ref(id)?.lost {
            return Err(Error::ContentsLost);
        }
        if let Some(fence) = self.fetch_to_host(id)? {
            self.wait_for(fence)?;
        }
        let (entry, host) = self.pinned_block(id)?;
        f(self.block_bytes(host.block, entry.bytes)?);
        Ok(())
    }

    /// [`host_ref`](Self::host_ref) without blocking: `WouldBlock` while the download runs.
    pub(super) fn try_host_ref(
        &mut self,
        id: HandleId,
        f: &mut dyn FnMut(&[u8]),
    ) -> nb::Result<(), Error> {
        if self.handles.get_ref(id)?.lost {
            return Err(nb::Error::Other(Error::ContentsLost));
        }
        if let Some(fence) = self.fetch_to_host(id)? {
            match self.npu.poll(fence) {
                Ok(()) => self.watch(false)?,
                Err(nb::Error::WouldBlock) => return Err(nb::Error::WouldBlock),
                Err(nb::Error::Other(e)) => return Err(nb::Error::Other(self.failed(e))),
            }
        }
        let (entry, host) = self.pinned_block(id)?;
        f(self.block_bytes(host.block, entry.bytes)?);
        Ok(())
    }
}
