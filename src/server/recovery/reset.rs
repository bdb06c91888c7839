//! Recovering from a fault (see the [parent module](super)): built with the cargo feature
//! `recovery`.

use super::super::residency::Residency;
use super::super::tensors::Binding;
use super::super::NpuServer;
use crate::error::Error;
use crate::hal::{Fault, Fence, Npu, MAX_QUEUES};
use crate::memory::MemoryManagement;

#[cfg(doc)]
use crate::hal::HalError;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// Recovers from `fault` on the job of `fence` (see the module docs); returns the error
    /// to report.
    #[cold]
    #[inline(never)]
    pub(in crate::server) fn recover(&mut self, fence: Fence, fault: Fault) -> Error {
        // A dependant of the faulted job may be the one seen first: name the cause.
        let (fence, fault) = match fault {
            Fault::Cancelled => {
                let npu = &mut self.npu;
                self.watchdog
                    .root_cause(|f| super::super::fence_state(npu, f))
                    .unwrap_or((fence, fault))
            }
            _ => (fence, fault),
        };
        let op = self.watchdog.op_of(fence);
        self.stats.faults += 1;
        self.mark_lost();
        if self.npu.reset().is_err() {
            return Error::Fault {
                fault,
                fence,
                op,
                recovered: false,
            };
        }
        self.stats.recoveries += 1;
        self.epoch = self.epoch.wrapping_add(1);
        match self.last_fence {
            Some(last) => self.frontier.end_all(last),
            None => self.frontier.fault = None,
        }
        self.checked = self.last_fence;
        self.newest = [None; MAX_QUEUES];
        self.watchdog.clear();
        self.memory.retire_fences(&mut |_, _| true);
        self.staging.reap(|_| true);
        for host in self.pinned.iter_mut().flatten() {
            host.read = None;
            host.write = None;
        }
        for e in self.handles.values_mut() {
            e.downloading = false;
        }
        for (_, _, block) in core::mem::take(&mut self.downloads) {
            // The block is the download's alone; a failure here is a bookkeeping bug,
            // reported by the staging's own checks later.
            let _ = self.staging.free(block);
        }
        Error::Fault {
            fault,
            fence,
            op,
            recovered: true,
        }
    }

    /// Marks lost every tensor whose newest bytes a job not yet complete was producing (before
    /// the reset, while the driver still knows which jobs completed).
    fn mark_lost(&mut self) {
        let npu = &mut self.npu;
        let mut incomplete = |f: Fence| !matches!(npu.poll(f), Ok(()));
        for e in self.handles.values_mut() {
            let mut device_lost = false;
            if let Binding::Memory(m) = e.binding {
                if let Ok(access) = self.memory.access_mut(m) {
                    access.for_each_writer(|_, f| device_lost |= incomplete(f));
                }
            }
            let host = e
                .host
                .and_then(|slot| self.pinned.get(usize::from(slot)).copied().flatten());
            let host_lost = host.and_then(|h| h.write).is_some_and(&mut incomplete);
            let lost = match e.newest {
                Residency::Device => device_lost,
                Residency::Host => host_lost,
                Residency::Both => {
                    match (device_lost, host_lost) {
                        (false, true) => e.newest = Residency::Device,
                        (true, false) => e.newest = Residency::Host,
                        _ => {}
                    }
                    device_lost && host_lost
                }
            };
            if lost {
                e.lost = true;
                self.maybe_lost = true;
            }
        }
    }
}
