//! Execution trace: a ring of [`TraceEntry`]s in caller-provided storage.
//!
//! The simulator records one entry per job when it retires (so entries appear in retire
//! order: ascending `(end, fence)`), successful or not. The storage is the caller's (as in
//! smoltcp): pass a slice to [`SimNpu::with_trace`](crate::SimNpu::with_trace); when it is
//! full the oldest entry is overwritten. An empty slice (the default) records nothing.

use npu_compute::hal::{Cycles, Fence, Queue, Space};
use npu_compute::ops::{DType, OpKind};

/// What a traced job did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TraceKind {
    /// A DMA copy.
    Transfer {
        /// Source space.
        from: Space,
        /// Destination space.
        to: Space,
        /// Bytes copied.
        bytes: u32,
    },
    /// An operator.
    Compute {
        /// Operator family.
        op: OpKind,
        /// Element type.
        dtype: DType,
    },
}

/// One retired job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TraceEntry {
    /// The job's fence.
    pub fence: Fence,
    /// The queue it ran on.
    pub queue: Queue,
    /// What it did.
    pub kind: TraceKind,
    /// Virtual cycle it started.
    pub start: Cycles,
    /// Virtual cycle it ended (`start + cost`).
    pub end: Cycles,
    /// `None` if it succeeded, else its failure code (see [`crate::exec`]'s table, re-exported
    /// as the `CODE_*` constants).
    pub failure: Option<u32>,
}

impl TraceEntry {
    /// A placeholder to initialise trace storage with (`[TraceEntry::EMPTY; N]`); never
    /// returned by [`SimNpu::trace`](crate::SimNpu::trace).
    pub const EMPTY: TraceEntry = TraceEntry {
        fence: Fence(0),
        queue: Queue::Dma,
        kind: TraceKind::Transfer {
            from: Space::Host,
            to: Space::Host,
            bytes: 0,
        },
        start: 0,
        end: 0,
        failure: None,
    };
}

impl Default for TraceEntry {
    /// [`TraceEntry::EMPTY`].
    fn default() -> Self {
        Self::EMPTY
    }
}

/// The ring over caller storage.
#[derive(Debug, Default)]
pub(crate) struct TraceRing<'a> {
    buf: &'a mut [TraceEntry],
    /// Index the next entry goes to.
    next: usize,
    /// Valid entries (`<= buf.len()`).
    len: usize,
    /// Entries overwritten since the last clear.
    overwritten: u64,
}

impl<'a> TraceRing<'a> {
    pub(crate) fn new(buf: &'a mut [TraceEntry]) -> Self {
        TraceRing {
            buf,
            next: 0,
            len: 0,
            overwritten: 0,
        }
    }

    pub(crate) fn record(&mut self, entry: TraceEntry) {
        let cap = self.buf.len();
        let Some(slot) = self.buf.get_mut(self.next) else {
            return; // no storage
        };
        *slot = entry;
        self.next = (self.next + 1) % cap;
        if self.len < cap {
            self.len += 1;
        } else {
            self.overwritten += 1;
        }
    }

    /// Entries oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = TraceEntry> + '_ {
        let (head, tail) = if self.len < self.buf.len() {
            (&self.buf[..self.len], &self.buf[..0])
        } else {
            let (older_part_end, newer) = self.buf.split_at(self.next);
            (newer, older_part_end)
        };
        head.iter().chain(tail).copied()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn overwritten(&self) -> u64 {
        self.overwritten
    }

    pub(crate) fn clear(&mut self) {
        self.next = 0;
        self.len = 0;
        self.overwritten = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(f: u64) -> TraceEntry {
        TraceEntry {
            fence: Fence(f),
            ..TraceEntry::EMPTY
        }
    }

    #[test]
    fn ring_wraps_oldest_first() {
        let mut buf = [TraceEntry::EMPTY; 3];
        let mut ring = TraceRing::new(&mut buf);
        assert_eq!(ring.iter().count(), 0);
        for f in 0..2 {
            ring.record(entry(f));
        }
        let fences: std::vec::Vec<u64> = ring.iter().map(|e| e.fence.0).collect();
        assert_eq!(fences, [0, 1]);
        for f in 2..5 {
            ring.record(entry(f));
        }
        let fences: std::vec::Vec<u64> = ring.iter().map(|e| e.fence.0).collect();
        assert_eq!(fences, [2, 3, 4]);
        assert_eq!(ring.overwritten(), 2);
        assert_eq!(ring.len(), 3);
        ring.clear();
        assert_eq!(ring.iter().count(), 0);
    }

    #[test]
    fn empty_storage_records_nothing() {
        let mut ring = TraceRing::new(&mut []);
        ring.record(entry(1));
        assert_eq!(ring.iter().count(), 0);
        assert_eq!(ring.overwritten(), 0);
    }
}
