//! A full in-flight table: one job more than declared is refused with `QueueFull` carrying the
//! declared capacity, no accepted job is dropped, and submission works again after a wait.

use super::jobs::transfer;
use super::suite::{fail, Step, Suite};
use super::Problem;
use crate::hal::{HalError, Npu, Region};

impl<N: Npu + ?Sized> Suite<'_, N> {
    /// [`Check::QueueFull`](super::Check::QueueFull).
    pub(super) fn queue_full(&mut self) -> Step {
        const STEP: &str = "submitted max_in_flight + 1 transfers on the DMA queue without waiting";
        const AFTER: &str = "after the burst, waited for its last job and submitted one more";
        const DATA: &str = "after the burst, read back the destination its last job wrote";
        let l = self.layout;
        let declared = self.caps.max_in_flight;
        // The jobs alternate between two sources: the destination ends up holding the last
        // accepted job's source, so a job dropped when the table was full shows.
        let sources = [l.h0(l.small), Region::host(l.small, l.small)];
        let seeds = [self.next_seed(), self.next_seed()];
        if self.options.moves_bytes {
            for (source, seed) in sources.into_iter().zip(seeds) {
                self.fill(STEP, source, seed)?;
            }
        }
        let mut accepted: u32 = 0;
        let mut last = None;
        for i in 0..=u32::from(declared) {
            let source = sources[(i % 2) as usize];
            match self.npu.submit(&transfer(source, l.a(), &[])) {
                Ok(fence) => {
                    self.accepted(STEP, fence)?;
                    accepted += 1;
                    last = Some((fence, i));
                }
                Err(HalError::QueueFull { capacity }) => {
                    if accepted < u32::from(declared) {
                        return fail(STEP, Problem::QueueFullEarly { accepted, declared });
                    }
                    if capacity != declared {
                        return fail(
                            STEP,
                            Problem::QueueFullCapacity {
                                declared,
                                reported: capacity,
                            },
                        );
                    }
                    break;
                }
                Err(error) => return fail(STEP, Problem::Refused(error)),
            }
        }
        // Every accepted job shares the DMA queue: the last one's completion implies the rest.
        let Some((last, index)) = last else {
            return Ok(());
        };
        self.wait(AFTER, last)?;
        if self.options.moves_bytes {
            let stale = self.next_seed();
            self.fill(DATA, l.h1(l.small), stale)?;
            let back = self.submit(DATA, &transfer(l.a(), l.h1(l.small), &[]))?;
            self.wait(DATA, back)?;
            self.compare(DATA, l.h1(l.small), seeds[(index % 2) as usize])?;
        }
        let again = self.submit(AFTER, &transfer(l.h0(l.small), l.a(), &[]))?;
        self.wait(AFTER, again)
    }
}
