//! The failed-fence record: which recent jobs failed, and with what code.

use npu_compute::hal::Fence;

/// How many failed jobs the simulator remembers. `poll` of a failed fence reports
/// [`HalError::JobFailed`](npu_compute::hal::HalError::JobFailed) while its record is among
/// the last this many failures; older records are overwritten (counted in
/// [`SimStats::failures_forgotten`](crate::SimStats::failures_forgotten)) and their fences
/// then poll as `Ok`. Poll a fence you care about before 16 more jobs fail.
pub const FAILED_RECORD_CAPACITY: usize = 16;

/// A ring of `(fence, code)`.
#[derive(Debug)]
pub(crate) struct FailedRing {
    entries: [(Fence, u32); FAILED_RECORD_CAPACITY],
    next: usize,
    len: usize,
}

impl FailedRing {
    pub(crate) const fn new() -> Self {
        FailedRing {
            entries: [(Fence(0), 0); FAILED_RECORD_CAPACITY],
            next: 0,
            len: 0,
        }
    }

    /// Records a failure; returns whether an older record was overwritten.
    pub(crate) fn record(&mut self, fence: Fence, code: u32) -> bool {
        let evicted = self.len == FAILED_RECORD_CAPACITY;
        if let Some(slot) = self.entries.get_mut(self.next) {
            *slot = (fence, code);
        }
        self.next = (self.next + 1) % FAILED_RECORD_CAPACITY;
        if !evicted {
            self.len += 1;
        }
        evicted
    }

    /// The failure code of `fence`, if it is recorded as failed.
    pub(crate) fn code_of(&self, fence: Fence) -> Option<u32> {
        self.entries
            .iter()
            .take(self.len)
            .find(|(f, _)| *f == fence)
            .map(|&(_, code)| code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_failures() {
        let mut ring = FailedRing::new();
        assert_eq!(ring.code_of(Fence(0)), None);
        for f in 0..FAILED_RECORD_CAPACITY as u64 {
            assert!(!ring.record(Fence(f), f as u32 + 100));
        }
        assert_eq!(ring.code_of(Fence(0)), Some(100));
        assert!(ring.record(Fence(99), 7));
        assert_eq!(ring.code_of(Fence(0)), None);
        assert_eq!(ring.code_of(Fence(1)), Some(101));
        assert_eq!(ring.code_of(Fence(99)), Some(7));
    }
}
