//! Execution trace: a ring of [`TraceEntry`]s in caller-provided storage.
//!
//! The simulator records one entry per job when it retires (so jobs appear in retire order:
//! ascending `(end, fence)`), successful or not, and one entry per operator the CPU ran on the
//! fallback kernels ([`TraceKind::Cpu`], recorded when
//! [`Npu::host_compute`](npu_compute::hal::Npu::host_compute) charges its cycles, so it may
//! come before jobs that ended earlier but had not retired yet). The storage is the caller's
//! (as in smoltcp): pass a slice to [`SimNpu::with_trace`](crate::SimNpu::with_trace); when it
//! is full the oldest entry is overwritten. An empty slice (the default) records nothing.
//!
//! # The CPU in a trace
//!
//! CPU work is not a job: it has no fence and runs on no queue of the HAL. Its entry holds
//! [`CPU_FENCE`] (a fence the simulator never issues, so finding a job by its fence never
//! finds CPU work) and [`Queue::Dma`] as a placeholder queue; [`TraceEntry::lane`] tells the
//! three kinds of lane apart ([`Lane::Cpu`] for it). Readers that count a queue's jobs by
//! `queue` alone should skip [`TraceKind::Cpu`] entries.
//!
//! # Regions
//!
//! What a job read and wrote is not in its [`TraceEntry`] (which stays small and `Copy`); a
//! caller that wants it (to chart the arena's occupancy, say) gives a second slice with
//! [`SimNpu::with_trace_regions`](crate::SimNpu::with_trace_regions), and each entry's
//! [`TraceRegions`] goes to the same slot of it.

use npu_compute::hal::{Cycles, Fence, Queue, Region, Space, MAX_JOB_INPUTS};
use npu_compute::ops::{DType, OpKind};

/// The fence of a [`TraceKind::Cpu`] entry: CPU work has none, and the simulator refuses to
/// issue this one (it would be the `2^64`-th).
pub const CPU_FENCE: Fence = Fence(u64::MAX);

/// Which lane of a timeline an entry belongs to: the DMA queue, an execution unit, or the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Lane {
    /// Execution unit `n`'s queue (transfers submitted there included).
    Unit(u8),
    /// The DMA queue.
    Dma,
    /// The host CPU (fallback operators).
    Cpu,
}

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
    /// An operator the CPU ran on the fallback kernels: it starts where the clock stood when
    /// [`host_compute`](npu_compute::hal::Npu::host_compute) was called and ends where that
    /// moved it. CPU work is not a job: it has no fence and runs on no queue of the HAL, so
    /// its entry holds [`CPU_FENCE`] (never issued: finding a job by its fence never finds
    /// CPU work) and [`Queue::Dma`] as a placeholder queue; [`TraceEntry::lane`] gives
    /// [`Lane::Cpu`]. Readers that count a queue's jobs by `queue` alone should skip these
    /// entries.
    Cpu {
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
    /// as the `CODE_*` constants; a hardware fault has one of the `CODE_FAULT_*` codes, see
    /// [`fault`](Self::fault)).
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

impl TraceEntry {
    /// The hardware fault that stopped the job ([`crate::faults`]), read from its
    /// [`failure`](Self::failure) code: a DMA or bus fault, or a cancellation (a faulted
    /// dependency, or a reset that abandoned it). `None` for a job that succeeded or failed
    /// with another code.
    pub fn fault(&self) -> Option<npu_compute::hal::Fault> {
        self.failure.and_then(crate::codes::code_fault)
    }

    /// The lane the entry belongs to: [`Lane::Cpu`] for CPU work, else its queue's.
    pub fn lane(&self) -> Lane {
        match (self.kind, self.queue) {
            (TraceKind::Cpu { .. }, _) => Lane::Cpu,
            (_, Queue::Dma) => Lane::Dma,
            (_, Queue::Unit(n)) => Lane::Unit(n),
        }
    }
}

/// The regions a traced job read and wrote, in every space. Kept only when the caller gives
/// storage for them ([`SimNpu::with_trace_regions`](crate::SimNpu::with_trace_regions)), each
/// beside its [`TraceEntry`], which stays small and `Copy`. Empty for CPU work: the
/// fallback's device traffic is the transfers around it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TraceRegions {
    /// What the job read: a transfer's source, or an operator's inputs in operand order.
    pub reads: heapless::Vec<Region, MAX_JOB_INPUTS>,
    /// What it wrote: a transfer's destination, or an operator's output.
    pub write: Option<Region>,
    /// An operator's scratch region (written and read within the job).
    pub scratch: Option<Region>,
}

impl TraceRegions {
    /// No regions (to initialise storage with, and what CPU work records).
    pub const EMPTY: TraceRegions = TraceRegions {
        reads: heapless::Vec::new(),
        write: None,
        scratch: None,
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
    /// Empty, or as long as `buf`: slot `i` holds the regions of `buf[i]`.
    regions: &'a mut [TraceRegions],
    /// Index the next entry goes to.
    next: usize,
    /// Valid entries (`<= buf.len()`).
    len: usize,
    /// Entries overwritten since the last clear.
    overwritten: u64,
}

impl<'a> TraceRing<'a> {
    pub(crate) fn new(buf: &'a mut [TraceEntry]) -> Self {
        Self::with_regions(buf, &mut [])
    }

    /// A ring recording regions too; both slices are cut to the shorter one's length (when
    /// `regions` is not empty).
    pub(crate) fn with_regions(buf: &'a mut [TraceEntry], regions: &'a mut [TraceRegions]) -> Self {
        let (buf, regions) = if regions.is_empty() {
            (buf, regions)
        } else {
            let len = buf.len().min(regions.len());
            (&mut buf[..len], &mut regions[..len])
        };
        TraceRing {
            buf,
            regions,
            next: 0,
            len: 0,
            overwritten: 0,
        }
    }

    /// Records `entry`, and `regions` if the ring keeps them (`regions` is called only then).
    pub(crate) fn record(&mut self, entry: TraceEntry, regions: impl FnOnce() -> TraceRegions) {
        let cap = self.buf.len();
        let Some(slot) = self.buf.get_mut(self.next) else {
            return; // no storage
        };
        *slot = entry;
        if let Some(slot) = self.regions.get_mut(self.next) {
            *slot = regions();
        }
        self.next = (self.next + 1) % cap;
        if self.len < cap {
            self.len += 1;
        } else {
            self.overwritten += 1;
        }
    }

    /// Slot indices, oldest entry first.
    fn slots(&self) -> impl Iterator<Item = usize> {
        let cap = self.buf.len();
        let (head, tail) = if self.len < cap {
            (0..self.len, 0..0)
        } else {
            (self.next..cap, 0..self.next)
        };
        head.chain(tail)
    }

    /// Entries oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = TraceEntry> + '_ {
        self.slots().filter_map(|i| self.buf.get(i).copied())
    }

    /// Entries oldest first, each with its regions when the ring keeps them.
    pub(crate) fn iter_regions(
        &self,
    ) -> impl Iterator<Item = (TraceEntry, Option<&TraceRegions>)> + '_ {
        self.slots()
            .filter_map(|i| Some((*self.buf.get(i)?, self.regions.get(i))))
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
            ring.record(entry(f), || TraceRegions::EMPTY);
        }
        let fences: std::vec::Vec<u64> = ring.iter().map(|e| e.fence.0).collect();
        assert_eq!(fences, [0, 1]);
        for f in 2..5 {
            ring.record(entry(f), || TraceRegions::EMPTY);
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
        ring.record(entry(1), || unreachable!("no storage, no regions"));
        assert_eq!(ring.iter().count(), 0);
        assert_eq!(ring.overwritten(), 0);
    }

    /// A job's regions stay beside its entry as the ring wraps.
    fn regions(f: u32) -> TraceRegions {
        TraceRegions {
            write: Some(Region::device(f, 4)),
            ..TraceRegions::EMPTY
        }
    }

    #[test]
    fn regions_follow_their_entries() {
        let mut buf = [TraceEntry::EMPTY; 3];
        let mut kept = [
            TraceRegions::EMPTY,
            TraceRegions::EMPTY,
            TraceRegions::EMPTY,
        ];
        let mut ring = TraceRing::with_regions(&mut buf, &mut kept);
        for f in 0..5u32 {
            ring.record(entry(u64::from(f)), || regions(f));
        }
        let got: std::vec::Vec<(u64, Option<u32>)> = ring
            .iter_regions()
            .map(|(e, r)| (e.fence.0, r.and_then(|r| r.write).map(|w| w.offset)))
            .collect();
        assert_eq!(got, [(2, Some(2)), (3, Some(3)), (4, Some(4))]);
    }

    #[test]
    fn regions_storage_of_another_length_cuts_the_ring() {
        let mut buf = [TraceEntry::EMPTY; 4];
        let mut kept = [TraceRegions::EMPTY, TraceRegions::EMPTY];
        let mut ring = TraceRing::with_regions(&mut buf, &mut kept);
        for f in 0..3u32 {
            ring.record(entry(u64::from(f)), || regions(f));
        }
        assert_eq!(ring.len(), 2);
        assert!(ring.iter_regions().all(|(e, r)| r
            .and_then(|r| r.write)
            .is_some_and(|w| u64::from(w.offset) == e.fence.0)));
        // Without regions storage, entries carry none.
        let mut buf = [TraceEntry::EMPTY; 2];
        let mut ring = TraceRing::new(&mut buf);
        ring.record(entry(7), || unreachable!("the ring keeps no regions"));
        assert_eq!(
            ring.iter_regions().next().map(|(e, r)| (e.fence.0, r)),
            Some((7, None))
        );
    }

    #[test]
    fn lanes() {
        let cpu = TraceEntry {
            fence: CPU_FENCE,
            kind: TraceKind::Cpu {
                op: OpKind::Softmax,
                dtype: DType::I8,
            },
            ..TraceEntry::EMPTY
        };
        assert_eq!(cpu.lane(), Lane::Cpu);
        assert_eq!(TraceEntry::EMPTY.lane(), Lane::Dma);
        let unit = TraceEntry {
            queue: Queue::Unit(2),
            ..TraceEntry::EMPTY
        };
        assert_eq!(unit.lane(), Lane::Unit(2));
    }
}
