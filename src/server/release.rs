//! Release: dropping references, and giving a tensor's memory back once its last reference
//! goes, fence-safe (the memory's access record makes its next user wait for the jobs still
//! using it; a pinned block waits for its DMA; a flash binding only counts down its segment).

use super::tensors::{Binding, TensorEntry};
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Npu, Space};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    pub(super) fn retain(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        self.handles.retain(id, n)
    }

    pub(super) fn release_late(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
        // Whether or not this is the last reference: the plan's jobs must reach the record
        // before whichever release frees the memory.
        if let Binding::Memory(m) = self.handles.get_ref(id)?.binding {
            self.memory.access_mut(m)?.add_newest(&self.newest, true);
        }
        self.release(id, n)
    }

    pub(super) fn release(&mut self, id: HandleId, n: u32) -> Result<(), Error> {
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
}
