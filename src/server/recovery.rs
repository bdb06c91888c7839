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
//!
//! Recovering (the `reset` submodule) and the watchdog are built with the cargo feature
//! `recovery` (on by default). A HAL that never faults (the CPU alone) has no use for them:
//! without it a fault is reported as one the driver could not reset from
//! ([`Error::Fault`] with `recovered: false`, the NPU not to be trusted again), and a server
//! given a watchdog refuses to wait with [`Error::NotBuilt`].

#[cfg(feature = "recovery")]
mod reset;

/// Faults in a build without recovery: reported, never recovered from.
#[cfg(not(feature = "recovery"))]
mod reset {
    use super::super::NpuServer;
    use crate::error::Error;
    use crate::hal::{Fault, Fence, Npu};
    use crate::memory::MemoryManagement;

    impl<
            H: Npu,
            M: MemoryManagement,
            const HANDLES: usize,
            const STAGING: usize,
            const TUNE: usize,
        > NpuServer<H, M, HANDLES, STAGING, TUNE>
    {
        /// The error to report for `fault` on the job of `fence`: not recovered, as from a
        /// driver that cannot reset.
        #[cold]
        #[inline(never)]
        pub(in crate::server) fn recover(&mut self, fence: Fence, fault: Fault) -> Error {
            self.stats.faults += 1;
            Error::Fault {
                fault,
                fence,
                op: None,
                recovered: false,
            }
        }
    }
}
