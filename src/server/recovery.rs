//! Recovery: after a hardware fault ([`HalError::Fault`]) or a job past its watchdog deadline,
//! the NPU is reset and the server's books are put straight, so that nothing leaks and the
//! next job runs on a clean device.
//!
//! # Design
//!
//! A fault is acted on where the server waits (the only places it can return an error for a
//! job it did not just submit): it first looks at what the jobs in flight were doing, then
//! resets the NPU ([`Npu::reset`]), which ends every one of them, then forgets them all.
//!
//! - **Tensors whose newest bytes were being produced** by a job that had not completed (the
//!   faulted one, or any job in flight) are marked lost: their memory holds whatever the
//!   abandoned job left. Reading one, or giving it to a job as an input, is refused with
//!   [`Error::ContentsLost`] rather than handing out garbage; writing it (by `write`, `copy`,
//!   or as a job's output, a job plan's included) makes it whole again. A pinned tensor whose
//!   download into its host block was abandoned keeps its device copy, if that is intact.
//!   Looked up in the access records before the reset: afterwards a driver may answer `Ok`
//!   for a job it abandoned once it forgets the job's record.
//! - **Constants** are read-only for jobs, so a faulted job cannot have corrupted them: only a
//!   constant whose upload was itself in flight is lost.
//! - **Every job is over**: the access records of device memory are emptied (the memory a
//!   released tensor held goes back to the arena), so are the newest fences per queue, the
//!   pinned blocks' DMA records and the watchdog's list; the frontier counts every fence
//!   issued as ended; staging blocks waiting for a transfer are freed, and so are the blocks
//!   of downloads a read had started. No fence is left to wait for.
//! - **Job plans** ([`JobPlanState`](super::JobPlanState)) forget the fences of their last run
//!   at their next run (the server counts recoveries, and a plan run before the latest one
//!   starts afresh), so their next run waits for nothing that was abandoned.
//!
//! The error, [`Error::Fault`], names the faulted job's fence, its operator (for a compute
//! job the watchdog followed) and the fault, and says whether the reset succeeded. A driver
//! that cannot reset ([`HalError::ResetUnsupported`], the default) leaves the server as it was:
//! the error says recovery was impossible, and the NPU cannot be trusted again.

use super::residency::Residency;
use super::tensors::Binding;
use super::NpuServer;
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
    pub(super) fn recover(&mut self, fence: Fence, fault: Fault) -> Error {
        // A dependant of the faulted job may be the one seen first: name the cause.
        let (fence, fault) = match fault {
            Fault::Cancelled => {
                let npu = &mut self.npu;
                self.watchdog
                    .root_cause(|f| super::fence_state(npu, f))
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
            if let Some((_, block)) = e.download.take() {
                // The block is the download's alone; a failure here is a bookkeeping bug,
                // reported by the staging's own checks later.
                let _ = self.staging.free(block);
            }
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
