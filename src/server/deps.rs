//! Dependency sets: the fences a job must wait for, at most one per hardware queue.

use crate::hal::{Fault, Fence, HalError, Npu, Queue, MAX_JOB_DEPS, MAX_QUEUES};
use crate::memory::Access;

/// The fences a new job depends on, kept as the newest fence per queue: jobs on one queue
/// complete in order, so the newest stands for the older ones, and a job never needs to wait
/// for its own queue at all (the queue already orders it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DepSet {
    /// `(queue index, newest fence)` for each queue with a fence, in the order first added.
    /// A short list rather than a slot per queue: a job has a few dependencies, and an
    /// empty list costs nothing to make (a table of `MAX_QUEUES` slots must be zeroed).
    per_queue: heapless::Vec<(u8, Fence), MAX_QUEUES>,
}

impl DepSet {
    /// Depend on `fence`, issued on the queue with dense index `queue`.
    pub fn add(&mut self, queue: usize, fence: Fence) {
        let Ok(q) = u8::try_from(queue) else {
            return;
        };
        if queue >= MAX_QUEUES {
            return;
        }
        match self.per_queue.iter_mut().find(|(k, _)| *k == q) {
            Some((_, f)) => *f = (*f).max(fence),
            // Queues are distinct and below MAX_QUEUES, so the list has room.
            None => {
                let _ = self.per_queue.push((q, fence));
            }
        }
    }

    /// Everything a job on `queue` that *reads* memory must wait for: the writers recorded in
    /// its `access` on other queues, less those `ended` says are over (which the record then
    /// forgets, so the next job does not ask again).
    #[inline(always)]
    pub fn add_read_of(
        &mut self,
        access: &mut Access,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
    ) {
        access.writers_before(queue, ended, |q, f| self.add(q, f));
    }

    /// Everything a job on `queue` that *overwrites* memory must wait for: its last writers
    /// and every job still reading the old contents, the same way.
    #[inline(always)]
    pub fn add_write_of(
        &mut self,
        access: &mut Access,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
    ) {
        access.writers_before(queue, ended, |q, f| self.add(q, f));
        access.readers_before(queue, ended, |q, f| self.add(q, f));
    }

    /// Appends to a job's list the fences of the queues whose bit (by [`Queue::index`]) is
    /// clear in `skip`. The list holds one fence per queue, so it cannot overflow when the
    /// fences already in it are of queues set in `skip`.
    pub fn fences_except(&self, skip: u16, deps: &mut heapless::Vec<Fence, MAX_JOB_DEPS>) {
        for &(q, f) in &self.per_queue {
            if skip & (1 << q) == 0 {
                let _ = deps.push(f);
            }
        }
    }

    /// The fences, written into a job's list.
    pub fn fences_into(&self, deps: &mut heapless::Vec<Fence, MAX_JOB_DEPS>) {
        deps.clear();
        for &(_, f) in &self.per_queue {
            // At most MAX_QUEUES == MAX_JOB_DEPS entries: cannot overflow.
            let _ = deps.push(f);
        }
    }
}

/// The newest fence known to have completed on each queue.
///
/// Jobs on one queue complete in submission order, so a fence at or below a queue's frontier
/// has completed without asking the NPU: most dependency checks cost a comparison, not a poll.
///
/// A job the hardware faulted on ([`HalError::Fault`]) is not over for the frontier: what it
/// wrote is undefined until the server has recovered (see [`recovery`](super::recovery)),
/// so it stays in the access records that name it, and the fault is kept for the server to
/// act on at its next wait.
#[derive(Clone, Copy, Debug, Default)]
pub struct Frontier {
    done: [Option<Fence>; MAX_QUEUES],
    /// The first fault a poll reported, not yet recovered from.
    pub(super) fault: Option<(Fence, Fault)>,
}

impl Frontier {
    /// Whether `fence`, issued on the queue with dense index `queue`, has ended (completed or
    /// failed: either way it no longer touches memory). A faulted job has not.
    pub fn is_done<H: Npu>(&mut self, npu: &mut H, queue: usize, fence: Fence) -> bool {
        let Some(slot) = self.done.get_mut(queue) else {
            return false;
        };
        if slot.is_some_and(|d| fence <= d) {
            return true;
        }
        match npu.poll(fence) {
            Err(nb::Error::WouldBlock) => false,
            Ok(()) => {
                *slot = Some(fence);
                true
            }
            Err(nb::Error::Other(e)) => self.failed(queue, fence, e),
        }
    }

    /// A failed job: over, unless the hardware faulted on it (kept for the server to act on).
    /// Out of line, so that the common answers cost the dispatch path nothing more.
    #[cold]
    #[inline(never)]
    fn failed(&mut self, queue: usize, fence: Fence, e: HalError) -> bool {
        if let HalError::Fault { fence, fault } = e {
            self.fault.get_or_insert((fence, fault));
            return false;
        }
        if let Some(slot) = self.done.get_mut(queue) {
            *slot = Some(fence);
        }
        true
    }

    /// Every fence up to `last` has ended: after a reset, which ends every job in flight.
    // (Only a recovery ends every fence at once.)
    #[cfg_attr(not(feature = "recovery"), allow(dead_code))]
    pub fn end_all(&mut self, last: Fence) {
        self.done = [Some(last); MAX_QUEUES];
        self.fault = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_per_queue_own_queue_skipped_and_ended_fences_forgotten() {
        let mut reader = Access::default();
        reader.record_write(Queue::Dma, Fence(1));
        reader.record_read(Queue::Unit(1), Fence(4));
        let mut target = Access::default();
        target.record_write(Queue::Unit(0), Fence(2));
        target.record_read(Queue::Unit(1), Fence(3));
        target.record_read(Queue::Unit(2), Fence(5));

        let mut ended = |_: usize, f: Fence| f == Fence(1);
        let mut d = DepSet::default();
        // A job on unit 0 reading `reader`: its DMA writer has ended.
        d.add_read_of(&mut reader, Queue::Unit(0), &mut ended);
        // ... and overwriting `target`: its own unit's writer orders it already.
        d.add_write_of(&mut target, Queue::Unit(0), &mut ended);
        d.add(2, Fence(0));
        let mut deps = heapless::Vec::new();
        d.fences_into(&mut deps);
        assert_eq!(deps.as_slice(), &[Fence(3), Fence(5)]);

        // The ended writer is forgotten: a second walk does not ask about it.
        let mut asked = 0;
        let mut count = |_: usize, _: Fence| {
            asked += 1;
            false
        };
        DepSet::default().add_read_of(&mut reader, Queue::Unit(0), &mut count);
        assert_eq!(asked, 0);
        assert!(!reader.is_idle());
    }
}
