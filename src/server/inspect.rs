//! Inspection: the server's tensors and host staging memory as plain figures, for tests and
//! fuzzers that check its invariants from outside.
//!
//! A server keeps its bookkeeping in several tables (handles, the memory manager's chunks,
//! pinned and staging blocks) that must agree: no two live tensors share device bytes unless
//! one is placed inside the other, the memory manager's bytes in use are those of the live
//! tensors, a released tensor's staging blocks go back once their transfers end. Nothing here
//! is needed to run jobs; it reads the tables without changing them, so a check can run after
//! every call.

use super::tensors::Binding;
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Npu, Region};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;

/// One live tensor, as [`NpuServer::for_each_tensor`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveTensor {
    /// Its id.
    pub id: HandleId,
    /// References held on it: the client's handles, one per tensor placed inside it, one per
    /// job plan using it.
    pub refs: u32,
    /// Size in bytes.
    pub bytes: u32,
    /// Its device bytes (offset and requested length): arena memory, or a range of a mapped
    /// flash segment. `None` for a pinned tensor no job has touched yet.
    pub device: Option<Region>,
    /// Whether `device` holds memory the memory manager counts as in use (a reservation of
    /// its own): false in flash and for a tensor placed inside a pool, whose bytes are the
    /// pool's.
    pub reserved: bool,
    /// The pool a placed tensor lies in.
    pub pool: Option<HandleId>,
    /// A pinned tensor's host block (its whole block, rounded to the alignment).
    pub host: Option<Region>,
    /// The staging block a started read (`try_read`) fills, rounded to the alignment.
    pub download: Option<Region>,
    /// Read-only.
    pub constant: bool,
    /// Its newest bytes were lost to a hardware fault (reads answer `Error::ContentsLost`
    /// until it is written again).
    pub lost: bool,
}

/// Host staging memory in use, as [`NpuServer::staging_use`] reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StagingUse {
    /// Blocks allocated: pinned tensors' blocks, started reads' blocks, and blocks waiting
    /// for their transfer to end.
    pub blocks: u32,
    /// Their bytes (rounded to the alignment).
    pub bytes: u32,
    /// Of `blocks`, those waiting for their transfer to end before they are freed.
    pub pending: u32,
}

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// Calls `f` with every live tensor, lowest handle index first.
    ///
    /// Errors: the memory manager's, when a live tensor's binding names no live memory (the
    /// tables disagree; never expected), after calling `f` for the tensors before it.
    pub fn for_each_tensor(&self, mut f: impl FnMut(LiveTensor)) -> Result<(), Error> {
        for (id, refs, e) in self.handles.iter() {
            let (device, reserved) = match e.binding {
                Binding::Memory(m) => (Some(self.device_region(m)?), e.pool.is_none()),
                Binding::Flash(r) => (Some(r), false),
                Binding::Host => (None, false),
            };
            let host = self
                .host_of(e)
                .map(|h| Region::host(h.block.offset, h.block.len));
            f(LiveTensor {
                id,
                refs,
                bytes: e.bytes,
                device,
                reserved,
                pool: e.pool,
                host,
                download: self
                    .downloads
                    .iter()
                    .find(|d| e.downloading && d.0 == id)
                    .map(|&(_, _, b)| Region::host(b.offset, b.len)),
                constant: e.constant,
                lost: e.lost,
            });
        }
        Ok(())
    }

    /// Host staging memory in use now (pinned blocks included).
    pub fn staging_use(&self) -> StagingUse {
        let (blocks, bytes, pending) = self.staging.usage();
        StagingUse {
            blocks,
            bytes,
            pending,
        }
    }
}
