//! Dependency sets: the fences a job must wait for, at most one per hardware queue.

use crate::hal::{Fence, Queue, MAX_JOB_DEPS, MAX_QUEUES};
use crate::memory::Access;

/// The fences a new job depends on, kept as the newest fence per queue: jobs on one queue
/// complete in order, so the newest stands for the older ones, and a job never needs to wait
/// for its own queue at all (the queue already orders it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DepSet {
    per_queue: [Option<Fence>; MAX_QUEUES],
}

impl DepSet {
    /// Depend on `fence`, issued on the queue with dense index `queue`.
    pub fn add(&mut self, queue: usize, fence: Fence) {
        if let Some(slot) = self.per_queue.get_mut(queue) {
            *slot = Some(slot.map_or(fence, |f| f.max(fence)));
        }
    }

    /// Everything a job that *reads* the chunk must wait for: its last writer.
    pub fn add_read_of(&mut self, access: &Access) {
        if let Some((fence, queue)) = access.write {
            self.add(queue as usize, fence);
        }
    }

    /// Everything a job that *overwrites* the chunk must wait for: its last writer and every
    /// job still reading the old contents.
    pub fn add_write_of(&mut self, access: &Access) {
        self.add_read_of(access);
        for (queue, fence) in access.reads.iter().enumerate() {
            if let Some(f) = fence {
                self.add(queue, *f);
            }
        }
    }

    /// The fences for a job on `queue`, leaving out that queue's own and those `done` says have
    /// completed.
    pub fn for_queue(
        &self,
        queue: Queue,
        mut done: impl FnMut(Fence) -> bool,
    ) -> heapless::Vec<Fence, MAX_JOB_DEPS> {
        let mut deps = heapless::Vec::new();
        for (q, fence) in self.per_queue.iter().enumerate() {
            if let Some(f) = fence {
                if q != queue.index() && !done(*f) {
                    // At most MAX_QUEUES == MAX_JOB_DEPS entries: cannot overflow.
                    let _ = deps.push(*f);
                }
            }
        }
        deps
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
        let deps = d.for_queue(Queue::Unit(0), |f| f == Fence(5));
        assert_eq!(deps.as_slice(), &[Fence(3)]);
    }
}
