//! Which jobs touched a chunk: [`Access`], the newest reader and writer per hardware queue,
//! and the walks that hand them to a job as dependencies.

use crate::hal::{Fence, Queue, MAX_QUEUES};

#[cfg(doc)]
use super::MemoryManagement;

/// The newest jobs, per hardware queue, that read a chunk, and those that wrote its contents.
///
/// Jobs on one queue complete in order, so one fence per queue stands for all older ones. A
/// chunk's contents normally have one writer; a placed tensor laid over several earlier ones
/// (a [`place`](MemoryManagement::place)d view, or a concatenation written in parts) inherits
/// all their writers, at most one per queue.
///
/// Every job submission walks the records of its operands, so they are kept short: a bit mask
/// per kind says which queues have a fence, a walk forgets the fences it finds ended, and a
/// walk for a job skips the job's own queue (which orders it already). In a steady stream of
/// jobs on one execution unit the walks then find nothing to visit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Access {
    /// Newest reader per queue ([`Queue::index`]), as `fence + 1` (0: none), so that a
    /// slot is 8 bytes, not the 16 of an `Option<Fence>`.
    reads: [u64; MAX_QUEUES],
    /// Newest writer per queue, the same way.
    writes: [u64; MAX_QUEUES],
    /// Bit `q` set exactly when `reads[q]` holds a fence.
    read_queues: u16,
    /// Bit `q` set exactly when `writes[q]` holds a fence.
    write_queues: u16,
}

// The queue masks of `Access` have a bit per queue.
const _: () = assert!(MAX_QUEUES <= 16);

/// A fence as an [`Access`] slot.
const fn slot(fence: Fence) -> u64 {
    fence.0.saturating_add(1)
}

/// The fence in an [`Access`] slot.
const fn fence_of(slot: u64) -> Option<Fence> {
    match slot {
        0 => None,
        s => Some(Fence(s - 1)),
    }
}

/// The mask bit of queue `queue` (a [`Queue::index`]); 0 for an index out of range.
const fn bit(queue: usize) -> u16 {
    if queue < MAX_QUEUES {
        1 << queue
    } else {
        0
    }
}

/// The queue indices whose bit is set in `mask`, lowest first.
pub(crate) fn queues_in(mut mask: u16) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        (mask != 0).then(|| {
            let q = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            q
        })
    })
}

/// Walks the fences of `slots` whose bit is set in `mask` and clear in `skip`: those `ended`
/// says are over are forgotten, the others passed to `f(queue index, fence)`.
fn walk(
    mask: &mut u16,
    slots: &mut [u64; MAX_QUEUES],
    skip: u16,
    ended: &mut impl FnMut(usize, Fence) -> bool,
    mut f: impl FnMut(usize, Fence),
) {
    let mut todo = *mask & !skip;
    while todo != 0 {
        let q = todo.trailing_zeros() as usize;
        todo &= todo - 1;
        let Some(s) = slots.get_mut(q) else { continue };
        match fence_of(*s) {
            Some(fence) if !ended(q, fence) => f(q, fence),
            _ => {
                *s = 0;
                *mask &= !bit(q);
            }
        }
    }
}

impl Access {
    /// Record a read by a job on `queue`.
    pub fn record_read(&mut self, queue: Queue, fence: Fence) {
        let q = queue.index();
        if let Some(r) = self.reads.get_mut(q) {
            *r = (*r).max(slot(fence));
            self.read_queues |= bit(q);
        }
    }

    /// Record a write; earlier reads and writes are ordered before it by its dependencies.
    #[inline(always)]
    pub fn record_write(&mut self, queue: Queue, fence: Fence) {
        for q in queues_in(self.read_queues) {
            self.reads[q] = 0;
        }
        for q in queues_in(self.write_queues) {
            self.writes[q] = 0;
        }
        self.read_queues = 0;
        self.write_queues = 0;
        let q = queue.index();
        if let Some(w) = self.writes.get_mut(q) {
            *w = slot(fence);
            self.write_queues = bit(q);
        }
    }

    /// Record a write by a job on `queue` beside the writes already recorded: the newest
    /// writers of a replayed [`JobPlan`](crate::client::JobPlan), one per queue, without
    /// the clearing of [`record_write`](Self::record_write).
    pub fn add_write(&mut self, queue: Queue, fence: Fence) {
        let q = queue.index();
        if let Some(w) = self.writes.get_mut(q) {
            *w = (*w).max(slot(fence));
            self.write_queues |= bit(q);
        }
    }

    /// Record, beside the jobs recorded already, the newest job of each queue in `newest`
    /// (indexed by [`Queue::index`]) as a writer (`write`) or a reader: what a job plan, or a
    /// release that could not see which jobs used the memory, hands over in one go.
    pub fn add_newest(&mut self, newest: &[Option<Fence>; MAX_QUEUES], write: bool) {
        let (slots, mask) = if write {
            (&mut self.writes, &mut self.write_queues)
        } else {
            (&mut self.reads, &mut self.read_queues)
        };
        for (q, fence) in newest.iter().enumerate() {
            if let Some(fence) = *fence {
                slots[q] = slots[q].max(slot(fence));
                *mask |= bit(q);
            }
        }
    }

    /// Take on every job recorded in `other` (memory that overlaps this chunk's range): a
    /// reader of this chunk then waits for `other`'s writers, and a writer for all of them.
    pub fn merge(&mut self, other: &Access) {
        for q in queues_in(other.read_queues) {
            self.reads[q] = self.reads[q].max(other.reads[q]);
        }
        for q in queues_in(other.write_queues) {
            self.writes[q] = self.writes[q].max(other.writes[q]);
        }
        self.read_queues |= other.read_queues;
        self.write_queues |= other.write_queues;
    }

    /// Whether no recorded job is still in flight.
    pub fn is_idle(&self) -> bool {
        self.read_queues | self.write_queues == 0
    }

    /// The writers a job on `queue` that reads this memory must wait for: `f(queue index,
    /// fence)` for the newest writer of every other queue, except those `ended` says are over,
    /// which are forgotten.
    #[inline(always)]
    pub fn writers_before(
        &mut self,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        f: impl FnMut(usize, Fence),
    ) {
        let own = bit(queue.index());
        walk(&mut self.write_queues, &mut self.writes, own, ended, f);
    }

    /// The readers a job on `queue` that overwrites this memory must wait for (besides the
    /// [writers](Self::writers_before)), the same way.
    #[inline(always)]
    pub fn readers_before(
        &mut self,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        f: impl FnMut(usize, Fence),
    ) {
        let own = bit(queue.index());
        walk(&mut self.read_queues, &mut self.reads, own, ended, f);
    }

    /// Every recorded writer, and every reader too when `readers`, on any queue:
    /// `f(queue index, fence)` for those `ended` does not say are over (which are forgotten).
    /// What a job list submitted as a whole waits for before its first job on each queue.
    pub fn jobs(
        &mut self,
        readers: bool,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        mut f: impl FnMut(usize, Fence),
    ) {
        walk(&mut self.write_queues, &mut self.writes, 0, ended, &mut f);
        if readers {
            walk(&mut self.read_queues, &mut self.reads, 0, ended, f);
        }
    }

    /// `f(queue index, fence)` for every recorded writer, forgetting none: what a recovery
    /// asks of a record before the reset ends the jobs in it.
    pub fn for_each_writer(&self, mut f: impl FnMut(usize, Fence)) {
        for q in queues_in(self.write_queues) {
            if let Some(fence) = fence_of(self.writes[q]) {
                f(q, fence);
            }
        }
    }

    /// Forget fences for which `ended(queue index, fence)` holds.
    pub fn retire(&mut self, ended: &mut impl FnMut(usize, Fence) -> bool) {
        walk(&mut self.read_queues, &mut self.reads, 0, ended, |_, _| {});
        walk(
            &mut self.write_queues,
            &mut self.writes,
            0,
            ended,
            |_, _| {},
        );
    }
}
