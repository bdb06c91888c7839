//! The wakers of the futures waiting on the NPU.
//!
//! An `async` read or sync (see [`client`](crate::client)'s futures) cannot finish until the
//! NPU completes jobs, which it signals with its completion interrupt. A future that finds its
//! bytes not ready yet leaves its task's [`Waker`] with the channel; the interrupt handler,
//! [`ComputeChannel::on_interrupt`](super::ComputeChannel::on_interrupt), retires the finished
//! jobs and wakes every waker left there. The woken tasks poll again: the ones whose jobs are
//! done complete, the others leave their waker again.
//!
//! Waking every waiter at each interrupt, rather than only those whose fences completed, keeps
//! the set a plain list with no fence per entry: an NPU interrupt is rare next to the work it
//! ends (one per job at most), and the tasks waiting on one NPU are few.
//!
//! The set has room for [`WAKERS`] wakers, held inline (no heap). A waker that
//! [`will_wake`](Waker::will_wake) the same task as one already there replaces nothing. When
//! the set is full, registering evicts the oldest waker and hands it back to be woken at once:
//! its task polls again and registers again, so nothing is lost, only a poll spent. That is
//! what embassy-sync's `MultiWakerRegistration` does too, with the same reasoning; this one is
//! our own, to keep the core's dependencies to its toolkit.
//!
//! A waker stays registered until the next interrupt even when its future completed (or was
//! dropped) meanwhile: the task is then woken once for nothing, which executors allow.

use core::task::Waker;

/// Most wakers a channel holds at once: the tasks that can wait on the NPU together without
/// evicting one another (see the [module docs](self)). Four covers a model task, a streaming
/// task and two more; a fifth evicts the oldest, which then polls once more than it needed.
pub const WAKERS: usize = 4;

/// The wakers registered with a channel, oldest first (see the [module docs](self)).
#[derive(Debug)]
pub struct WakerSet {
    slots: [Option<Waker>; WAKERS],
}

impl Default for WakerSet {
    fn default() -> Self {
        Self::new()
    }
}

impl WakerSet {
    /// No waker; `const` so that a channel in a `static` can hold one.
    pub const fn new() -> Self {
        WakerSet {
            slots: [const { None }; WAKERS],
        }
    }

    /// Wakers registered.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Whether no waker is registered.
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// Keeps `waker` until [`take`](Self::take). Returns the waker it evicted to make room,
    /// which the caller wakes (outside its lock): the set was full of other tasks' wakers.
    pub fn register(&mut self, waker: &Waker) -> Option<Waker> {
        if self.slots.iter().flatten().any(|w| w.will_wake(waker)) {
            return None;
        }
        if let Some(free) = self.slots.iter_mut().find(|s| s.is_none()) {
            *free = Some(waker.clone());
            return None;
        }
        // Full: the oldest goes, everyone moves up one, the newest takes the last place.
        self.slots.rotate_left(1);
        let last = self.slots.last_mut()?;
        last.replace(waker.clone())
    }

    /// Every registered waker, leaving the set empty: to be woken once the lock is released
    /// (a waker may run code that needs the channel).
    pub fn take(&mut self) -> WakerSet {
        core::mem::take(self)
    }

    /// Wakes every waker of the set.
    pub fn wake(self) {
        for waker in self.slots.into_iter().flatten() {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    fn woken(c: &Count) -> usize {
        c.0.load(Ordering::SeqCst)
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Waker::will_wake is best effort; under miri each use of a vtable may get its own address, so it answers false"
    )]
    fn a_task_is_registered_once() {
        let (count, waker) = counter();
        let mut set = WakerSet::new();
        for _ in 0..10 {
            assert!(set.register(&waker).is_none());
        }
        assert_eq!(set.len(), 1);
        set.take().wake();
        assert_eq!(woken(&count), 1);
        assert!(set.is_empty());
    }

    #[test]
    fn take_wakes_every_task_and_empties_the_set() {
        let tasks: std::vec::Vec<_> = (0..WAKERS).map(|_| counter()).collect();
        let mut set = WakerSet::new();
        for (_, w) in &tasks {
            assert!(set.register(w).is_none());
        }
        let taken = set.take();
        assert!(set.is_empty());
        assert_eq!(taken.len(), WAKERS);
        taken.wake();
        assert!(tasks.iter().all(|(c, _)| woken(c) == 1));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "Waker::will_wake is best effort; under miri each use of a vtable may get its own address, so it answers false"
    )]
    fn a_full_set_evicts_the_oldest_to_be_woken() {
        let tasks: std::vec::Vec<_> = (0..WAKERS + 2).map(|_| counter()).collect();
        let mut set = WakerSet::new();
        for (_, w) in &tasks[..WAKERS] {
            assert!(set.register(w).is_none());
        }
        for k in 0..2 {
            let evicted = set.register(&tasks[WAKERS + k].1).expect("full");
            assert!(evicted.will_wake(&tasks[k].1), "the oldest goes first");
            evicted.wake();
        }
        assert_eq!(set.len(), WAKERS);
        set.take().wake();
        assert!(tasks.iter().all(|(c, _)| woken(c) == 1));
    }
}
