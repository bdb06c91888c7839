//! Dependency sets: the fences a job must wait for, at most one per hardware queue.

use crate::hal::{Fence, Npu, Queue, MAX_JOB_DEPS, MAX_QUEUES};
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

    /// Everything a job that *reads* the chunk must wait for: its writers.
    pub fn add_read_of(&mut self, access: &Access) {
        access.each_writer(|q, f| self.add(q, f));
    }

    /// Everything a job that *overwrites* the chunk must wait for: its last writer and every
    /// job still reading the old contents.
    pub fn add_write_of(&mut self, access: &Access) {
        access.each_writer(|q, f| self.add(q, f));
        access.each_reader(|q, f| self.add(q, f));
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
        let own = queue.index();
        for &(q, f) in &self.per_queue {
            let q = usize::from(q);
            if q != own && !done(q, f) {
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
