//! Tensors and handles: making tensors (in device memory, placed in a pool, constant in
//! flash or uploaded once, pinned), mapping flash, and reporting a tensor's state.
//!
//! Every tensor is a slot of the server's [`HandleTable`](crate::handle::HandleTable) holding a
//! [`TensorEntry`]: where its device bytes are ([`Binding`]), its size, and what the other
//! job modules need (a pending download, a pinned block, whether it is constant). Releasing a
//! tensor is [`release`](super::release)'s job.

use super::residency::{HostCopy, Residency};
use super::NpuServer;
use crate::error::{Capacity, Error};
use crate::hal::{HalError, Npu, Region, MAX_FLASH_SEGMENTS};
use crate::handle::HandleId;
use crate::memory::{MemoryBinding, MemoryManagement};
use crate::storage::Block;

/// What the server knows of one tensor, as [`ComputeServer::tensor`](super::ComputeServer::tensor)
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorState {
    /// Size in bytes.
    pub bytes: u32,
    /// Where its newest bytes are.
    pub residency: Residency,
    /// Bound in place in a mapped flash segment (no arena bytes).
    pub in_flash: bool,
    /// Read-only: made by `create_const` or as a constant by `create`.
    pub constant: bool,
    /// Has a pinned host block.
    pub pinned: bool,
}

/// Where a tensor's device bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Binding {
    /// Device memory from the memory manager.
    Memory(MemoryBinding),
    /// In place in a mapped flash segment; read-only.
    Flash(Region),
    /// None yet: a pinned tensor no job has touched, whose bytes are in its host block.
    Host,
}

/// A mapped flash segment: its bytes, to find constants inside it (and for the CPU fallback
/// to read them in place).
#[derive(Clone, Copy, Debug)]
pub(super) struct FlashSegment {
    pub(super) bytes: &'static [u8],
    pub(super) tensors: u32,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct TensorEntry {
    pub(super) binding: Binding,
    pub(super) bytes: u32,
    /// The pool a placed tensor lies in (it holds one reference to it).
    pub(super) pool: Option<HandleId>,
    /// A device→host transfer started by `try_read` is pending: its fence and the staging
    /// block it fills are in the server's list of downloads (a few at most, one per staging
    /// block, rather than 24 bytes in every tensor's entry).
    pub(super) downloading: bool,
    /// A pinned tensor's slot in the server's table of pinned blocks.
    pub(super) host: Option<u8>,
    /// Where the newest bytes are (always `Device` without a host block).
    pub(super) newest: Residency,
    /// Made by `create_const` or `create_const_with`: nothing may write it, so a job plan
    /// need not look for writers of it once its upload has ended.
    pub(super) constant: bool,
    /// Its newest bytes were being produced by a job a recovery abandoned (see
    /// [`recovery`](super::recovery)): reads and jobs reading it are refused until it is
    /// written again.
    pub(super) lost: bool,
}

impl TensorEntry {
    /// A tensor whose bytes live on the device only.
    pub(super) fn on_device(binding: Binding, bytes: u32, pool: Option<HandleId>) -> Self {
        TensorEntry {
            binding,
            bytes,
            pool,
            downloading: false,
            host: None,
            newest: Residency::Device,
            constant: false,
            lost: false,
        }
    }
}

/// A server tag from a global counter, so ids of two servers never match.
pub(super) fn next_server_tag() -> u16 {
    static NEXT: critical_section::Mutex<core::cell::Cell<u16>> =
        critical_section::Mutex::new(core::cell::Cell::new(0));
    critical_section::with(|cs| {
        let cell = NEXT.borrow(cs);
        let tag = cell.get();
        cell.set(tag.wrapping_add(1));
        tag
    })
}

/// The HAL region of a memory manager's block: the arena below `slow_base`, the slow tier
/// from there on ([`ChunkSliceMemory::with_slow_tier`](crate::memory::ChunkSliceMemory::with_slow_tier)).
#[inline(always)]
pub(super) fn region_of_block(b: Block, slow_base: u32) -> Region {
    if b.offset < slow_base {
        Region::device(b.offset, b.len)
    } else {
        Region::slow(b.offset - slow_base, b.len)
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
    pub(super) fn create(
        &mut self,
        bytes: u32,
        constant: bool,
        fill: &mut dyn FnMut(&mut [u8]) -> Result<(), Error>,
    ) -> Result<HandleId, Error> {
        let id = self.create_mutable(bytes, fill)?;
        if constant {
            self.seal(id)
        } else {
            Ok(id)
        }
    }

    pub(super) fn empty(&mut self, bytes: u32) -> Result<HandleId, Error> {
        let binding = self.reserve(bytes)?;
        self.bind_new(binding, bytes)
    }

    /// A new tensor of `bytes` over `binding`, which is released if the table is full.
    pub(super) fn bind_new(
        &mut self,
        binding: MemoryBinding,
        bytes: u32,
    ) -> Result<HandleId, Error> {
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

    /// A tensor of `bytes` that `fill` writes into staging memory, uploaded once.
    pub(super) fn create_mutable(
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

    pub(super) fn create_const(&mut self, data: &'static [u8]) -> Result<HandleId, Error> {
        let addr = data.as_ptr() as usize;
        let aligned = addr.is_multiple_of(self.caps.flash_alignment.max(1) as usize);
        let found = self.flash.iter().enumerate().find_map(|(i, seg)| {
            let seg = (*seg)?;
            let offset = addr.checked_sub(seg.bytes.as_ptr() as usize)?;
            (offset.checked_add(data.len())? <= seg.bytes.len()).then_some((i, offset))
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
                let id = self.create_mutable(data.len() as u32, &mut |buf| {
                    buf.copy_from_slice(data);
                    Ok(())
                })?;
                self.seal(id)
            }
        }
    }

    pub(super) fn place(
        &mut self,
        pool: HandleId,
        offset: u32,
        bytes: u32,
    ) -> Result<HandleId, Error> {
        // Refused before anything moves: binding a pinned pool would upload its host block.
        if self.handles.get_ref(pool)?.host.is_some() {
            return Err(Error::PinnedPool);
        }
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

    pub(super) fn pinned(&mut self, bytes: u32) -> Result<HandleId, Error> {
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
            downloading: false,
            host: Some(slot as u8),
            newest: Residency::Host,
            constant: false,
            lost: false,
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

    pub(super) fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, Error> {
        let segment = self.npu.map_flash(bytes)?;
        match self.flash.get_mut(usize::from(segment)) {
            Some(slot) => {
                *slot = Some(FlashSegment { bytes, tensors: 0 });
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

    pub(super) fn unmap_flash(&mut self, segment: u8) -> Result<(), Error> {
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
    /// Marks a tensor just made constant: from now on nothing writes it.
    pub(super) fn seal(&mut self, id: HandleId) -> Result<HandleId, Error> {
        self.handles.get_mut(id)?.constant = true;
        Ok(id)
    }

    /// The region of the arena, or of the slow tier behind it, a binding holds.
    #[inline(always)]
    pub(super) fn device_region(&self, binding: MemoryBinding) -> Result<Region, Error> {
        Ok(region_of_block(self.memory.block(binding)?, self.slow_base))
    }
    /// The device region of a tensor bound on the device (in memory or flash). A pinned
    /// tensor no job has touched yet has none: callers bind it first (`bind_on_device`).
    #[inline(always)]
    pub(super) fn region_of(&self, binding: Binding) -> Result<Region, Error> {
        match binding {
            Binding::Memory(m) => self.device_region(m),
            Binding::Flash(r) => Ok(r),
            Binding::Host => Err(Error::NotPinned),
        }
    }
    pub(super) fn tensor(&self, id: HandleId) -> Result<TensorState, Error> {
        let e = self.handles.get_ref(id)?;
        Ok(TensorState {
            bytes: e.bytes,
            residency: e.newest,
            in_flash: matches!(e.binding, Binding::Flash(_)),
            constant: e.constant,
            pinned: e.host.is_some(),
        })
    }
}
