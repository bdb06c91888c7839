//! One check's run: the driver under test with what it declared, the fences to drain, and the
//! steps every check is made of (preconditions, submitting, waiting and observing, data).

use super::jobs::{build_op, compute, transfer, UnitOp};
use super::layout::{pattern, Layout, SEEDS_PER_CHECK};
use super::{Answer, Check, Failure, Options, Outcome, Problem, Skip};
use crate::hal::{Capabilities, Fence, HalError, Job, Npu, Queue, Region};

/// Why a check stopped early.
pub(super) enum Stop {
    Skip(Skip),
    Fail(&'static str, Problem),
}

impl Stop {
    pub(super) fn into_outcome(self, check: Check) -> Outcome {
        match self {
            Stop::Skip(skip) => Outcome::Skipped(skip),
            Stop::Fail(step, problem) => Outcome::Failed(Failure {
                check,
                step,
                problem,
            }),
        }
    }
}

pub(super) type Step<T = ()> = Result<T, Stop>;

pub(super) fn fail<T>(step: &'static str, problem: Problem) -> Step<T> {
    Err(Stop::Fail(step, problem))
}

pub(super) fn skip<T>(why: Skip) -> Step<T> {
    Err(Stop::Skip(why))
}

/// Which rule an [`Suite::observe`] list of fences follows.
#[derive(Clone, Copy)]
pub(super) enum Order {
    /// Jobs of one queue, in submission order.
    Queue,
    /// A chain, each job depending on the one before.
    Dependency,
}

/// Fences remembered for the final drain: more than any check keeps in flight, except the
/// queue-full burst, whose jobs share a queue (its newest fence stands for the rest).
const PENDING: usize = 32;
/// Jobs that keep a queue busy ahead of a dependency.
pub(super) const BUSY_JOBS: usize = 3;

/// One check's state: the driver, what it declared, and the fences to drain.
pub(super) struct Suite<'n, N: Npu + ?Sized> {
    pub(super) npu: &'n mut N,
    pub(super) options: Options,
    pub(super) caps: Capabilities,
    pub(super) layout: Layout,
    /// The operator for unit jobs, if the driver declares one.
    pub(super) unit_op: Option<UnitOp>,
    /// The last data seed drawn.
    pub(super) seed: u8,
    /// The newest fence issued.
    pub(super) newest: Option<Fence>,
    /// Fences to wait for before the check ends (oldest dropped when full).
    pub(super) pending: heapless::Vec<Fence, PENDING>,
}

impl<'n, N: Npu + ?Sized> Suite<'n, N> {
    pub(super) fn new(npu: &'n mut N, options: Options, caps: Capabilities, check: Check) -> Self {
        let unit_op = UnitOp::ALL
            .into_iter()
            .find(|&which| caps.ops.runs(&build_op(which, 4)));
        Suite {
            npu,
            options,
            caps,
            layout: Layout::new(caps.alignment),
            unit_op,
            // Each check draws at most SEEDS_PER_CHECK seeds from its own range, so that data
            // left in memory by an earlier check never passes for this one's.
            seed: (check as u8).wrapping_mul(SEEDS_PER_CHECK),
            newest: None,
            pending: heapless::Vec::new(),
        }
    }

    pub(super) fn check(&mut self, check: Check) -> Step {
        match check {
            // Run by `run_check` itself.
            Check::Capabilities => Ok(()),
            Check::FenceOrder => self.fence_order(),
            Check::DependencyDmaToUnit => self.dependency_dma_to_unit(),
            Check::DependencyUnitToUnit => self.dependency_unit_to_unit(),
            Check::DependencyData => self.dependency_data(),
            Check::TransferRoundTrip => self.transfer_round_trip(),
            Check::DeviceCopy => self.device_copy(),
            Check::FlashMapping => self.flash_mapping(),
            Check::Misaligned => self.misaligned(),
            Check::OutOfBounds => self.out_of_bounds(),
            Check::BadQueue => self.bad_queue(),
            Check::UnsupportedOp => self.unsupported_op(),
            Check::FlashNotMapped => self.flash_not_mapped(),
            Check::WrongSpace => self.wrong_space(),
            Check::Overlap => self.overlap(),
            Check::UsableAfterRefusal => self.usable_after_refusal(),
            Check::SpuriousInterrupt => self.spurious_interrupt(),
            Check::InterruptCompletion => self.interrupt_completion(),
            Check::IdleWait => self.idle_wait(),
            Check::QueueFull => self.queue_full(),
            Check::UnknownFence => self.unknown_fence(),
        }
    }

    // --- preconditions ------------------------------------------------------------------------

    pub(super) fn needs_bytes(&self) -> Step {
        if self.options.moves_bytes {
            Ok(())
        } else {
            skip(Skip::NoByteMoves)
        }
    }

    pub(super) fn needs_validation(&self) -> Step {
        if self.options.validates_regions {
            Ok(())
        } else {
            skip(Skip::RegionsNotValidated)
        }
    }

    pub(super) fn needs_unit_op(&self) -> Step<UnitOp> {
        self.unit_op.ok_or(Stop::Skip(Skip::NoUnitOp))
    }

    // --- submitting and waiting ---------------------------------------------------------------

    /// Remembers an accepted fence for the drain; returns the fence issued before it.
    pub(super) fn track(&mut self, fence: Fence) -> Option<Fence> {
        if self.pending.is_full() {
            self.pending.remove(0);
        }
        // Cannot fail: room was made above.
        let _ = self.pending.push(fence);
        self.newest.replace(fence)
    }

    /// Remembers an accepted fence for the drain and checks that it is newer than the last.
    pub(super) fn accepted(&mut self, step: &'static str, fence: Fence) -> Step {
        match self.track(fence) {
            Some(previous) if fence <= previous => fail(
                step,
                Problem::FenceNotIncreasing {
                    previous,
                    next: fence,
                },
            ),
            _ => Ok(()),
        }
    }

    /// Submits a valid job.
    pub(super) fn submit(&mut self, step: &'static str, job: &Job<'_>) -> Step<Fence> {
        match self.npu.submit(job) {
            Ok(fence) => {
                self.accepted(step, fence)?;
                Ok(fence)
            }
            Err(error) => fail(step, Problem::Refused(error)),
        }
    }

    /// Submits an invalid job that must be refused with `expected` (or, where the contract
    /// leaves a choice, an error `also` accepts).
    pub(super) fn refuse(
        &mut self,
        step: &'static str,
        job: &Job<'_>,
        expected: HalError,
        also: impl Fn(&HalError) -> bool,
    ) -> Step {
        match self.npu.submit(job) {
            Ok(fence) => {
                // Accepting it is the failure, whatever its fence.
                self.track(fence);
                fail(step, Problem::Accepted { fence, expected })
            }
            Err(got) if got == expected || also(&got) => Ok(()),
            Err(got) => fail(step, Problem::WrongError { expected, got }),
        }
    }

    /// [`refuse`](Self::refuse) with exactly `expected`.
    pub(super) fn refuse_exactly(
        &mut self,
        step: &'static str,
        job: &Job<'_>,
        expected: HalError,
    ) -> Step {
        self.refuse(step, job, expected, |_| false)
    }

    /// Polls `fence` until complete, waiting in between, at most `max_waits` times.
    pub(super) fn wait(&mut self, step: &'static str, fence: Fence) -> Step {
        let mut waits = 0;
        loop {
            match self.npu.poll(fence) {
                Ok(()) => return Ok(()),
                Err(nb::Error::Other(error)) => {
                    return fail(step, Problem::JobFailed { fence, error })
                }
                Err(nb::Error::WouldBlock) if waits < self.options.max_waits => {
                    self.npu.wait_for_event();
                    waits += 1;
                }
                Err(nb::Error::WouldBlock) => {
                    return fail(step, Problem::NeverCompleted { fence, waits })
                }
            }
        }
    }

    /// Waits for `fences` (oldest first, each ordered after the one before as `order` says)
    /// and checks at every wait that no fence completed before an earlier one. The later
    /// fence is polled first: if it is complete, the earlier one, polled after it, must be too.
    /// Then checks that every fence stays complete.
    pub(super) fn observe(&mut self, step: &'static str, fences: &[Fence], order: Order) -> Step {
        let mut waits = 0;
        loop {
            let mut done_after: Option<Fence> = None;
            let mut oldest_pending: Option<Fence> = None;
            for &fence in fences.iter().rev() {
                match self.npu.poll(fence) {
                    Ok(()) => {
                        done_after.get_or_insert(fence);
                    }
                    Err(nb::Error::WouldBlock) => {
                        oldest_pending = Some(fence);
                        if let Some(later) = done_after {
                            let problem = match order {
                                Order::Queue => Problem::OutOfOrder {
                                    earlier: fence,
                                    later,
                                },
                                Order::Dependency => Problem::BeforeDependency {
                                    dependency: fence,
                                    dependent: later,
                                },
                            };
                            return fail(step, problem);
                        }
                    }
                    Err(nb::Error::Other(error)) => {
                        return fail(step, Problem::JobFailed { fence, error })
                    }
                }
            }
            let Some(fence) = oldest_pending else {
                break;
            };
            if waits >= self.options.max_waits {
                return fail(step, Problem::NeverCompleted { fence, waits });
            }
            self.npu.wait_for_event();
            waits += 1;
        }
        for &fence in fences {
            self.still_done(step, fence)?;
        }
        Ok(())
    }

    /// A completed fence answers `Ok` again.
    pub(super) fn still_done(&mut self, step: &'static str, fence: Fence) -> Step {
        let got = Answer::from(self.npu.poll(fence));
        if got == Answer::Done {
            Ok(())
        } else {
            fail(
                step,
                Problem::Poll {
                    fence,
                    expected: Answer::Done,
                    got,
                },
            )
        }
    }

    /// Waits for every fence this check submitted, ignoring how each ended: the check's own
    /// result is already decided, this only leaves the driver idle. Fails only if a job never
    /// completes.
    pub(super) fn drain(&mut self) -> Step {
        const STEP: &str = "waited for every job the check submitted, to leave the driver idle";
        let pending = core::mem::take(&mut self.pending);
        for &fence in pending.iter() {
            let mut waits = 0;
            while self.npu.poll(fence) == Err(nb::Error::WouldBlock) {
                if waits >= self.options.max_waits {
                    return fail(STEP, Problem::NeverCompleted { fence, waits });
                }
                self.npu.wait_for_event();
                waits += 1;
            }
        }
        Ok(())
    }

    // --- data ---------------------------------------------------------------------------------

    pub(super) fn next_seed(&mut self) -> u8 {
        self.seed = self.seed.wrapping_add(1);
        self.seed
    }

    /// The CPU's view of a host region; a host memory shorter than declared is refused by the
    /// capabilities check before any check runs, so this fails only on a driver that shrinks
    /// it later.
    pub(super) fn host_bytes(&mut self, step: &'static str, region: Region) -> Step<&mut [u8]> {
        let host = self.npu.host_memory();
        let len = host.len() as u64;
        let range = region.offset as usize..region.end() as usize;
        match host.get_mut(range) {
            Some(bytes) => Ok(bytes),
            None => fail(
                step,
                Problem::BadCapability {
                    field: "host_memory().len()",
                    value: len,
                    rule: "host memory must keep its declared length",
                },
            ),
        }
    }

    /// Fills host `region` with the data of `seed`.
    pub(super) fn fill(&mut self, step: &'static str, region: Region, seed: u8) -> Step {
        for (i, byte) in self.host_bytes(step, region)?.iter_mut().enumerate() {
            *byte = pattern(seed, i as u32);
        }
        Ok(())
    }

    /// Checks that host `region` holds the data of `seed`.
    pub(super) fn compare(&mut self, step: &'static str, region: Region, seed: u8) -> Step {
        let bytes = self.host_bytes(step, region)?;
        for (i, &got) in bytes.iter().enumerate() {
            let expected = pattern(seed, i as u32);
            if got != expected {
                return fail(
                    step,
                    Problem::WrongBytes {
                        offset: i as u32,
                        expected,
                        got,
                    },
                );
            }
        }
        Ok(())
    }

    /// Fills `count` big transfers X → Y on the DMA queue, to keep it busy.
    pub(super) fn busy_dma(&mut self, step: &'static str) -> Step {
        let job = transfer(self.layout.x(), self.layout.y(), &[]);
        for _ in 0..BUSY_JOBS {
            self.submit(step, &job)?;
        }
        Ok(())
    }

    /// Submits big unit jobs X → Y on `unit`, to keep it busy.
    pub(super) fn busy_unit(&mut self, step: &'static str, op: UnitOp, unit: u8) -> Step {
        let big = build_op(op, self.layout.big);
        let job = compute(
            &big,
            self.layout.x(),
            self.layout.y(),
            Queue::Unit(unit),
            &[],
        );
        for _ in 0..BUSY_JOBS {
            self.submit(step, &job)?;
        }
        Ok(())
    }
}
