//! Dependency sets: the fences a job must wait for, at most one per hardware queue.

use crate::hal::{Fence, Npu, Queue, MAX_JOB_DEPS, MAX_QUEUES};
use crate::memory::{queues_in, Access};

/// The fences a new job depends on, kept as the newest fence per queue: jobs on one queue
/// complete in order, so the newest stands for the older ones, and a job never needs to wait
/// for its own queue at all (the queue already orders it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DepSet {
    /// Newest fence per queue as `fence + 1` (0: none), 8 bytes a slot.
    per_queue: [u64; MAX_QUEUES],
    /// Bit `q` set when queue `q` has a fence: only those queues are visited.
    queues: u16,
}

impl DepSet {
    /// Depend on `fence`, issued on the queue with dense index `queue`.
    pub fn add(&mut self, queue: usize, fence: Fence) {
        if let Some(slot) = self.per_queue.get_mut(queue) {
            *slot = (*slot).max(fence.0.saturating_add(1));
            self.queues |= 1 << queue;
        }
    }

    /// Everything a job that *reads* the chunk must wait for: its writers.
    pub fn add_read_of(&mut self, access: &Access) {
        for (queue, fence) in access.writers() {
            self.add(queue, fence);
        }
    }

    /// Everything a job that *overwrites* the chunk must wait for: its last writer and every
    /// job still reading the old contents.
    pub fn add_write_of(&mut self, access: &Access) {
        self.add_read_of(access);
        for (queue, fence) in access.readers() {
            self.add(queue, fence);
        }
    }

    /// The fences for a job on `queue`, leaving out that queue's own and those `done` says have
    /// completed.
    pub fn for_queue(
        &self,
        queue: Queue,
        done: impl FnMut(usize, Fence) -> bool,
    ) -> heapless::Vec<Fence, MAX_JOB_DEPS> {
        let mut deps = heapless::Vec::new();
        self.for_queue_into(queue, done, &mut deps);
        deps
    }

    /// [`for_queue`](Self::for_queue), written into `deps` (a job's own list, built in place).
    pub fn for_queue_into(
        &self,
        queue: Queue,
        mut done: impl FnMut(usize, Fence) -> bool,
        deps: &mut heapless::Vec<Fence, MAX_JOB_DEPS>,
    ) {
        deps.clear();
        let own = 1u16.checked_shl(queue.index() as u32).unwrap_or(0);
        for q in queues_in(self.queues & !own) {
            let f = Fence(self.per_queue[q] - 1);
            if !done(q, f) {
                // At most MAX_QUEUES == MAX_JOB_DEPS entries: cannot overflow.
                let _ = deps.push(f);
            }
        }
    }
}

/// The newest fence known to have completed on each queue.
///
/// Jobs on one queue complete in submission order, so a fence at or below a queue's frontier
/// has completed without asking the NPU: most dependency checks cost a comparison, not a poll.
#[derive(Clone, Copy, Debug, Default)]
pub struct Frontier {
    done: [Option<Fence>; MAX_QUEUES],
}

impl Frontier {
    /// Whether `fence`, issued on the queue with dense index `queue`, has ended (completed or
    /// failed: either way it no longer touches memory).
    pub fn is_done<H: Npu>(&mut self, npu: &mut H, queue: usize, fence: Fence) -> bool {
        let Some(slot) = self.done.get_mut(queue) else {
            return false;
        };
        if slot.is_some_and(|d| fence <= d) {
            return true;
        }
        let ended = !matches!(npu.poll(fence), Err(nb::Error::WouldBlock));
        if ended {
            *slot = Some(fence);
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_per_queue_and_own_queue_dropped() {
        let mut d = DepSet::default();
        d.add(0, Fence(3));
        d.add(0, Fence(1));
        d.add(1, Fence(2));
        d.add(2, Fence(5));
        let deps = d.for_queue(Queue::Unit(0), |_, f| f == Fence(5));
        assert_eq!(deps.as_slice(), &[Fence(3)]);
    }
}
