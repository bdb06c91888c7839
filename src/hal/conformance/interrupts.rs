//! Interrupts and waits: a spurious interrupt is harmless, completion is seen through
//! `wait_for_event`, `on_interrupt` and `poll`, and waiting with nothing in flight returns.

use super::jobs::transfer;
use super::suite::{fail, Step, Suite};
use super::Problem;
use crate::hal::Npu;

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::SpuriousInterrupt`](super::Check::SpuriousInterrupt).
    pub(super) fn spurious_interrupt(&mut self) -> Step {
        const STEP: &str = "with nothing in flight, called on_interrupt three times, then polled a completed fence and ran a new transfer";
        let l = self.layout;
        let done = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, done)?;
        for _ in 0..3 {
            self.npu.on_interrupt();
        }
        self.still_done(STEP, done)?;
        let next = self.submit(STEP, &transfer(l.b(), l.c(), &[]))?;
        self.wait(STEP, next)?;
        self.still_done(STEP, done)
    }

    /// [`Check::InterruptCompletion`](super::Check::InterruptCompletion).
    pub(super) fn interrupt_completion(&mut self) -> Step {
        const STEP: &str = "submitted a transfer, called on_interrupt at once, then looped wait_for_event, on_interrupt, poll";
        let l = self.layout;
        let fence = self.submit(STEP, &transfer(l.x(), l.y(), &[]))?;
        // While the job runs: must neither complete it early nor lose it.
        self.npu.on_interrupt();
        let mut waits = 0;
        loop {
            match self.npu.poll(fence) {
                Ok(()) => return Ok(()),
                Err(nb::Error::Other(error)) => {
                    return fail(STEP, Problem::JobFailed { fence, error })
                }
                Err(nb::Error::WouldBlock) if waits < self.options.max_waits => {
                    self.npu.wait_for_event();
                    self.npu.on_interrupt();
                    waits += 1;
                }
                Err(nb::Error::WouldBlock) => {
                    return fail(STEP, Problem::NeverCompleted { fence, waits })
                }
            }
        }
    }

    /// [`Check::IdleWait`](super::Check::IdleWait).
    pub(super) fn idle_wait(&mut self) -> Step {
        const STEP: &str = "with nothing in flight, called wait_for_event twice (a hang here is the failure), then polled a completed fence and ran a new transfer";
        let l = self.layout;
        let done = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, done)?;
        self.npu.wait_for_event();
        self.npu.wait_for_event();
        self.still_done(STEP, done)?;
        let next = self.submit(STEP, &transfer(l.b(), l.c(), &[]))?;
        self.wait(STEP, next)
    }
}
