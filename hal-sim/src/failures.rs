//! The failed-fence record: which recent jobs failed, and how (a failure code, or a hardware
//! fault).

use npu_compute::hal::{Fault, Fence, HalError};

use crate::codes::fault_code;

/// How many failed jobs the simulator remembers. `poll` of a failed fence reports
/// [`HalError::JobFailed`] (or [`HalError::Fault`] for a faulted job) while its record is
/// among the last this many failures; older records are overwritten (counted in
/// [`SimStats::failures_forgotten`](crate::SimStats::failures_forgotten)) and their fences
/// then poll as `Ok`. Poll a fence you care about before 16 more jobs fail. (Jobs abandoned by
/// a reset are remembered apart, see [`Npu::reset`](npu_compute::hal::Npu::reset) on
/// [`SimNpu`](crate::SimNpu).)
pub const FAILED_RECORD_CAPACITY: usize = 16;

/// How a job failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It failed with this code ([`HalError::JobFailed`]).
    Code(u32),
    /// The hardware faulted ([`HalError::Fault`]).
    Fault(Fault),
}

impl Failure {
    /// What `poll` answers for the job of `fence`.
    pub(crate) fn error(self, fence: Fence) -> HalError {
        match self {
            Failure::Code(code) => HalError::JobFailed { fence, code },
            Failure::Fault(fault) => HalError::Fault { fence, fault },
        }
    }

    /// The code in the trace ([`CODE_FAULT_DMA`](crate::CODE_FAULT_DMA) and friends for a
    /// fault).
    pub(crate) fn code(self) -> u32 {
        match self {
            Failure::Code(code) => code,
            Failure::Fault(fault) => fault_code(fault),
        }
    }

    /// The worse of two dependencies' failures: a fault (the NPU needs a reset) over a code.
    pub(crate) fn worst(a: Option<Failure>, b: Failure) -> Failure {
        match (a, b) {
            (Some(f @ Failure::Fault(_)), _) => f,
            (_, b) => b,
        }
    }
}

/// A ring of `(fence, failure)`.
#[derive(Debug)]
pub(crate) struct FailedRing {
    entries: [(Fence, Failure); FAILED_RECORD_CAPACITY],
    next: usize,
    len: usize,
}

impl FailedRing {
    pub(crate) const fn new() -> Self {
        FailedRing {
            entries: [(Fence(0), Failure::Code(0)); FAILED_RECORD_CAPACITY],
            next: 0,
            len: 0,
        }
    }

    /// Records a failure; returns whether an older record was overwritten.
    pub(crate) fn record(&mut self, fence: Fence, failure: Failure) -> bool {
        let evicted = self.len == FAILED_RECORD_CAPACITY;
        if let Some(slot) = self.entries.get_mut(self.next) {
            *slot = (fence, failure);
        }
        self.next = (self.next + 1) % FAILED_RECORD_CAPACITY;
        if !evicted {
            self.len += 1;
        }
        evicted
    }

    /// How `fence` failed, if it is recorded as failed.
    pub(crate) fn failure_of(&self, fence: Fence) -> Option<Failure> {
        self.entries
            .iter()
            .take(self.len)
            .find(|(f, _)| *f == fence)
            .map(|&(_, failure)| failure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_failures() {
        let mut ring = FailedRing::new();
        assert_eq!(ring.failure_of(Fence(0)), None);
        for f in 0..FAILED_RECORD_CAPACITY as u64 {
            assert!(!ring.record(Fence(f), Failure::Code(f as u32 + 100)));
        }
        assert_eq!(ring.failure_of(Fence(0)), Some(Failure::Code(100)));
        assert!(ring.record(Fence(99), Failure::Fault(Fault::Bus)));
        assert_eq!(ring.failure_of(Fence(0)), None);
        assert_eq!(ring.failure_of(Fence(1)), Some(Failure::Code(101)));
        assert_eq!(
            ring.failure_of(Fence(99)).map(|f| f.error(Fence(99))),
            Some(HalError::Fault {
                fence: Fence(99),
                fault: Fault::Bus
            })
        );
    }

    #[test]
    fn a_fault_outweighs_a_code() {
        let fault = Failure::Fault(Fault::Dma);
        assert_eq!(Failure::worst(None, Failure::Code(5)), Failure::Code(5));
        assert_eq!(Failure::worst(Some(fault), Failure::Code(5)), fault);
        assert_eq!(Failure::worst(Some(Failure::Code(5)), fault), fault);
    }
}
