//! The watchdog: every job in flight has a deadline on the HAL's clock ([`Npu::now`]), and a
//! job past it is declared [`Fault::Timeout`] wherever the server waits.
//!
//! # Design
//!
//! A driver reports a DMA or bus error itself, but a job that hangs raises no interrupt and a
//! job that overruns raises it late: only a clock tells. The server keeps the jobs it
//! submitted, in fence order, with the cycles the driver predicts for each
//! ([`Npu::estimate`], or [`WatchdogConfig::default_job_cycles`] when the driver cannot
//! tell), and gives a job `predicted × (100 + margin_percent) / 100 + min_cycles` cycles.
//!
//! From when? A job starts after its dependencies and the job before it on its queue, all of
//! which have older fences. So once every older job is seen complete, the oldest job still in
//! flight can run: the watchdog starts its clock then, when the server first sees it at the
//! head of the list. That is never earlier than the job really started, so a long queue never
//! trips the watchdog falsely, only lets it fire later; and the oldest job in flight always has
//! its clock running, so a hang anywhere is caught (the jobs behind a hung one cannot start,
//! and wait for it).
//!
//! The server looks at the head of the list each time it is about to sleep
//! ([`Npu::wait_for_event`]) and when it wakes: a head still in flight past its deadline has
//! timed out, and a head seen in flight just before a sleep and complete just after it, later
//! than its deadline, overran (the sleep ends at its completion interrupt). A job seen complete
//! after the CPU did other work is never judged: when it completed is unknown.
//!
//! The list holds [`WATCHED_JOBS`] jobs. A driver that takes more in flight never makes the
//! server wait for room: the jobs past the list are followed as one, the *overflow*, which
//! keeps the newest fence of each queue among them (jobs on a queue complete in order) and the
//! sum of their budgets. The overflow is the newest part of the list; once it is the oldest
//! part still in flight, its clock starts, and it is over when every queue's newest fence is.
//! New jobs join it until then, and the list follows jobs one by one again after.

// Without `recovery` the server neither follows jobs nor looks for a culprit: the watchdog
// keeps only its configuration.
#![cfg_attr(not(feature = "recovery"), allow(dead_code))]

use crate::hal::{Cycles, Fault, Fence, MAX_QUEUES};
use crate::ops::OpKind;

#[cfg(doc)]
use crate::hal::Npu;

/// Jobs the watchdog follows one by one (the simulator's default in-flight capacity); more in
/// flight are followed together (see [`WatchdogConfig`]).
pub const WATCHED_JOBS: usize = 32;

/// The list's slots in this build: [`WATCHED_JOBS`], but one in a build without `recovery`,
/// whose server never follows a job (`NpuServer::watching`), so that the list's 512 bytes do
/// not sit unused in every server.
const LIST_SLOTS: usize = if cfg!(feature = "recovery") {
    WATCHED_JOBS
} else {
    1
};

/// How the server's watchdog judges a job late ([`NpuServer::with_watchdog`](super::NpuServer::with_watchdog)).
///
/// A job may take `predicted × (100 + margin_percent) / 100 + min_cycles` cycles of
/// [`Npu::now`] from when it can start; past that it is [`Fault::Timeout`] and the server
/// resets the NPU. [`WatchdogConfig::ON`] gives a job four times its prediction and 100 000
/// cycles more: several units sharing the memory ports slow each other down, and an
/// interrupt may delay the server's look at the clock.
///
/// The watchdog is off by default ([`Default`]: [`ON`](Self::ON) with `enabled: false`):
/// following every job costs the dispatch path about 90 instructions per job on a Cortex-M4
/// (measured by the firmware example over its null NPU, where a planned job costs about
/// 430), which the dispatch bounds there do not allow. Off, the server follows no job: faults
/// the driver reports are still recovered from, but a hung job hangs the waits, and
/// [`Error::Fault`](crate::Error::Fault) names no operator and may name a job cancelled
/// behind the faulted one rather than it. `min_cycles` should be at least the period of the timer
/// that wakes a sleeping CPU: a job whose completion interrupt is lost is seen complete only
/// at the next tick.
///
/// # How a deadline is judged
///
/// A job starts after its dependencies and the job before it on its queue, all of which have
/// older fences. So the watchdog starts a job's clock when the server first sees it as the
/// oldest job still in flight: never earlier than the job really started, so that a long
/// queue never trips it falsely (only later), and the oldest job in flight always has its
/// clock running, so a hang anywhere is caught. The server looks each time it is about to
/// sleep and when it wakes: a job still in flight past its deadline has timed out, and one
/// seen in flight before a sleep and complete after it, later than its deadline, overran
/// (the sleep ended at its completion interrupt). A job seen complete after the CPU did other
/// work is never judged late. Jobs beyond the first [`WATCHED_JOBS`] in flight are followed
/// as one, with the sum of their budgets, so the server never waits for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WatchdogConfig {
    /// Whether the server follows jobs at all (`false` by default, `true` in
    /// [`ON`](Self::ON)). Off, a hung job hangs the server's waits; faults the driver reports
    /// are still recovered from.
    pub enabled: bool,
    /// The margin over a job's predicted cycles, in percent (300 in [`ON`](Self::ON)).
    pub margin_percent: u32,
    /// Cycles every job is given on top of its margin (100 000 in [`ON`](Self::ON)): the
    /// floor for short jobs.
    pub min_cycles: Cycles,
    /// The prediction for a job the driver cannot estimate (10 000 000 cycles in
    /// [`ON`](Self::ON)).
    pub default_job_cycles: Cycles,
}

impl Default for WatchdogConfig {
    /// [`ON`](Self::ON), turned off.
    fn default() -> Self {
        WatchdogConfig {
            enabled: false,
            ..Self::ON
        }
    }
}

impl WatchdogConfig {
    /// The watchdog on: a margin of 300 % over the prediction, a floor of 100 000 cycles
    /// (1 ms of a 100 MHz core, a 1 kHz system tick), and 10 000 000 cycles for a job the
    /// driver cannot estimate.
    pub const ON: WatchdogConfig = WatchdogConfig {
        enabled: true,
        margin_percent: 300,
        min_cycles: 100_000,
        default_job_cycles: 10_000_000,
    };

    /// Whether `elapsed` cycles exceed the budget of jobs predicted at `predicted` cycles in
    /// all, with `floors` times [`min_cycles`](Self::min_cycles): [`budget`](Self::budget)
    /// compared without a division (a library call on a Cortex-M4).
    pub fn exceeded(&self, elapsed: Cycles, predicted: Cycles, floors: u64) -> bool {
        let allowed = predicted
            .saturating_mul(100 + u64::from(self.margin_percent))
            .saturating_add(floors.saturating_mul(self.min_cycles).saturating_mul(100));
        elapsed.saturating_mul(100) > allowed
    }

    /// The cycles a job predicted to take `predicted` (if the driver could tell) may run.
    pub fn budget(&self, predicted: Option<Cycles>) -> Cycles {
        let predicted = predicted.unwrap_or(self.default_job_cycles);
        let scaled = u128::from(predicted) * (100 + u128::from(self.margin_percent)) / 100;
        u64::try_from(scaled)
            .unwrap_or(u64::MAX)
            .saturating_add(self.min_cycles)
    }
}

/// One job the watchdog follows.
#[derive(Clone, Copy, Debug)]
pub(super) struct Watched {
    pub(super) fence: Fence,
    /// Its predicted cycles (saturated), [`UNPREDICTED`] when the driver could not tell. The
    /// budget is worked out from it only when the job is judged: a division per submitted
    /// job would cost a Cortex-M4 a library call on the dispatch path.
    pub(super) predicted: u32,
    /// Its operator, for a compute job.
    pub(super) op: Option<OpKind>,
}

/// [`Watched::predicted`] of a job the driver could not estimate.
pub(super) const UNPREDICTED: u32 = u32::MAX;

/// [`Watched::predicted`] of the overflow seen as one job (its budget is its own).
const OVERFLOW: u32 = u32::MAX - 1;

/// [`Watched::predicted`] for a prediction of `cycles`: saturated below the two markers.
#[inline(always)]
pub(super) fn predicted(cycles: Option<Cycles>) -> u32 {
    match cycles {
        None => UNPREDICTED,
        Some(c) => u32::try_from(c).unwrap_or(OVERFLOW - 1).min(OVERFLOW - 1),
    }
}

/// What the watchdog concluded from a look at the head of its list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Nothing wrong (or nothing in flight).
    Fine,
    /// This job faulted, or overran its deadline.
    Fault(Fence, Fault),
}

/// Jobs past the list, followed as one. Its budget is the sum of theirs, kept as sums (no
/// division per job: a server that never waits keeps adding jobs to it).
#[derive(Clone, Copy, Debug)]
struct Overflow {
    /// The newest fence of each queue among them.
    newest: [Option<Fence>; MAX_QUEUES],
    /// Their predicted cycles, summed.
    predicted: Cycles,
    /// Those of them the driver could not estimate.
    unpredicted: u64,
    /// Their number.
    jobs: u64,
}

impl Overflow {
    /// Whether `elapsed` cycles exceed the sum of its jobs' budgets under `config`.
    fn exceeded(&self, elapsed: Cycles, config: &WatchdogConfig) -> bool {
        let unknown = self.unpredicted.saturating_mul(config.default_job_cycles);
        config.exceeded(elapsed, self.predicted.saturating_add(unknown), self.jobs)
    }
}

/// The jobs in flight, oldest first, and the clock of the oldest.
#[derive(Debug)]
pub(super) struct Watchdog {
    pub(super) config: WatchdogConfig,
    jobs: heapless::Deque<Watched, LIST_SLOTS>,
    /// Jobs submitted while the list was full, and every job after them until they are over.
    overflow: Option<Overflow>,
    /// When the head was first seen in flight at the head (its clock's start).
    armed_at: Option<Cycles>,
    /// The head was seen in flight just before the server went to sleep.
    seen_before_sleep: bool,
}

impl Watchdog {
    pub(super) fn new(config: WatchdogConfig) -> Self {
        Watchdog {
            config,
            jobs: heapless::Deque::new(),
            overflow: None,
            armed_at: None,
            seen_before_sleep: false,
        }
    }

    /// Follows a job just submitted on the queue of index `queue`.
    #[inline(always)]
    pub(super) fn push(&mut self, job: Watched, queue: usize) {
        if self.overflow.is_none() {
            if let Err(job) = self.jobs.push_back(job) {
                self.overflow = Some(Overflow {
                    newest: [None; MAX_QUEUES],
                    predicted: 0,
                    unpredicted: 0,
                    jobs: 0,
                });
                self.join_overflow(job, queue);
            }
        } else {
            self.join_overflow(job, queue);
        }
    }

    #[cold]
    fn join_overflow(&mut self, job: Watched, queue: usize) {
        if let Some(o) = self.overflow.as_mut() {
            if let Some(slot) = o.newest.get_mut(queue) {
                *slot = Some(job.fence);
            }
            match job.predicted {
                UNPREDICTED => o.unpredicted += 1,
                p => o.predicted = o.predicted.saturating_add(Cycles::from(p)),
            }
            o.jobs += 1;
        }
    }

    /// The operator of the job of `fence`, if it is followed and a compute job.
    pub(super) fn op_of(&self, fence: Fence) -> Option<OpKind> {
        self.jobs
            .iter()
            .find(|j| j.fence == fence)
            .and_then(|j| j.op)
    }

    /// The oldest followed job that faulted by itself (not [`Fault::Cancelled`], the fate of a
    /// faulted job's dependants), if any: the cause to report when a dependant's fault was
    /// seen first. `state` as for [`look`](Self::look).
    pub(super) fn root_cause(
        &self,
        mut state: impl FnMut(Fence) -> Result<bool, Fault>,
    ) -> Option<(Fence, Fault)> {
        self.jobs.iter().find_map(|j| match state(j.fence) {
            Err(fault) if fault != Fault::Cancelled => Some((j.fence, fault)),
            _ => None,
        })
    }

    /// Forgets every job (after a reset, none is in flight).
    pub(super) fn clear(&mut self) {
        self.jobs.clear();
        self.overflow = None;
        self.armed_at = None;
        self.seen_before_sleep = false;
    }

    /// Looks at the head of the list at time `now`: `state(fence)` says whether a job is
    /// still in flight (`Ok(false)`), over (`Ok(true)`) or faulted. `woke` says the server
    /// has just woken from a sleep; otherwise it is about to sleep (or to give up waiting).
    pub(super) fn look(
        &mut self,
        now: Cycles,
        woke: bool,
        mut state: impl FnMut(Fence) -> Result<bool, Fault>,
    ) -> Verdict {
        loop {
            let head = match self.jobs.front() {
                Some(&head) => head,
                None => match self.overflow_head(&mut state) {
                    Ok(Some(head)) => head,
                    Ok(None) => return Verdict::Fine,
                    Err(verdict) => return verdict,
                },
            };
            // Worked out only when a job is judged: most looks pop completed jobs.
            let (config, overflow) = (&self.config, self.overflow);
            let late = |armed: Option<Cycles>| {
                let Some(t) = armed else {
                    return false;
                };
                let elapsed = now.saturating_sub(t);
                match (head.predicted, overflow) {
                    (OVERFLOW, Some(o)) => o.exceeded(elapsed, config),
                    (UNPREDICTED, _) => config.exceeded(elapsed, config.default_job_cycles, 1),
                    (p, _) => config.exceeded(elapsed, Cycles::from(p), 1),
                }
            };
            match state(head.fence) {
                Err(fault) => return Verdict::Fault(head.fence, fault),
                Ok(false) => {
                    let armed = *self.armed_at.get_or_insert(now);
                    if self.config.enabled && late(Some(armed)) {
                        return Verdict::Fault(head.fence, Fault::Timeout);
                    }
                    self.seen_before_sleep = !woke;
                    return Verdict::Fine;
                }
                Ok(true) => {
                    // Seen in flight just before the sleep, complete on waking: it completed
                    // as the sleep ended, and was late if that is past its deadline.
                    if self.config.enabled && woke && self.seen_before_sleep && late(self.armed_at)
                    {
                        return Verdict::Fault(head.fence, Fault::Timeout);
                    }
                    if self.jobs.pop_front().is_none() {
                        self.overflow = None;
                    }
                    self.armed_at = None;
                    self.seen_before_sleep = false;
                }
            }
        }
    }

    /// The overflow as a job: one of its queues' newest fences still in flight (so that the
    /// head's state is that fence's), or the newest of them when all are over. `None`
    /// without an overflow.
    #[cold]
    fn overflow_head(
        &mut self,
        state: &mut impl FnMut(Fence) -> Result<bool, Fault>,
    ) -> Result<Option<Watched>, Verdict> {
        let Some(o) = self.overflow else {
            return Ok(None);
        };
        let mut newest = None;
        for fence in o.newest.into_iter().flatten() {
            match state(fence) {
                Err(fault) => return Err(Verdict::Fault(fence, fault)),
                Ok(false) => {
                    return Ok(Some(Watched {
                        fence,
                        predicted: OVERFLOW,
                        op: None,
                    }))
                }
                Ok(true) => newest = newest.max(Some(fence)),
            }
        }
        match newest {
            Some(fence) => Ok(Some(Watched {
                fence,
                predicted: OVERFLOW,
                op: None,
            })),
            None => {
                self.overflow = None;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job of fence `f` whose budget under [`config`] is `budget`.
    fn job(f: u64, budget: Cycles) -> Watched {
        Watched {
            fence: Fence(f),
            predicted: budget as u32,
            op: None,
        }
    }

    /// No margin, no floor: a job's budget is its prediction.
    fn config() -> WatchdogConfig {
        WatchdogConfig {
            enabled: true,
            margin_percent: 0,
            min_cycles: 0,
            default_job_cycles: 0,
        }
    }

    #[test]
    fn budget_scales_the_prediction_and_adds_the_floor() {
        let c = WatchdogConfig {
            enabled: true,
            margin_percent: 50,
            min_cycles: 10,
            default_job_cycles: 1000,
        };
        assert_eq!(c.budget(Some(200)), 310);
        assert_eq!(c.budget(None), 1510);
        assert_eq!(c.budget(Some(u64::MAX)), u64::MAX);
        // The same judgement without a division.
        for elapsed in [309, 310, 311] {
            assert_eq!(c.exceeded(elapsed, 200, 1), elapsed > c.budget(Some(200)));
        }
        assert!(!c.exceeded(u64::MAX - 1, u64::MAX, 1));
    }

    #[test]
    fn the_head_times_out_only_past_its_budget_from_when_it_was_first_seen() {
        let mut w = Watchdog::new(config());
        w.push(job(0, 100), 1);
        w.push(job(1, 100), 1);
        // Job 0 first seen in flight at 1000: its clock starts then.
        assert_eq!(w.look(1000, false, |_| Ok(false)), Verdict::Fine);
        assert_eq!(w.look(1100, true, |_| Ok(false)), Verdict::Fine);
        // Job 0 completed in time; job 1's clock starts when seen, at 1100.
        assert_eq!(w.look(1100, false, |f| Ok(f == Fence(0))), Verdict::Fine);
        assert_eq!(w.look(1200, true, |f| Ok(f == Fence(0))), Verdict::Fine);
        assert_eq!(
            w.look(1201, true, |f| Ok(f == Fence(0))),
            Verdict::Fault(Fence(1), Fault::Timeout)
        );
    }

    #[test]
    fn a_late_completion_counts_only_when_seen_across_one_sleep() {
        let mut w = Watchdog::new(config());
        w.push(job(0, 100), 1);
        assert_eq!(w.look(0, false, |_| Ok(false)), Verdict::Fine);
        // Complete on waking at 150, past its deadline of 100: it overran.
        assert_eq!(
            w.look(150, true, |_| Ok(true)),
            Verdict::Fault(Fence(0), Fault::Timeout)
        );
        // Seen complete after other work (not just after a sleep): not judged.
        let mut w = Watchdog::new(config());
        w.push(job(0, 100), 1);
        assert_eq!(w.look(0, true, |_| Ok(false)), Verdict::Fine);
        assert_eq!(w.look(500, true, |_| Ok(true)), Verdict::Fine);
        assert!(w.jobs.is_empty());
    }

    #[test]
    fn disabled_never_times_out_but_reports_faults() {
        let mut w = Watchdog::new(WatchdogConfig {
            enabled: false,
            ..config()
        });
        w.push(job(3, 1), 1);
        assert_eq!(w.look(0, false, |_| Ok(false)), Verdict::Fine);
        assert_eq!(w.look(1 << 40, true, |_| Ok(false)), Verdict::Fine);
        assert_eq!(
            w.look(1 << 40, true, |_| Err(Fault::Bus)),
            Verdict::Fault(Fence(3), Fault::Bus)
        );
    }

    #[test]
    fn jobs_past_the_list_are_followed_as_one() {
        let mut w = Watchdog::new(config());
        for f in 0..WATCHED_JOBS as u64 + 3 {
            w.push(job(f, 10), (f % 2) as usize);
        }
        let n = WATCHED_JOBS as u64;
        // The listed jobs complete in time; the overflow (fences n..n+3, two queues) is then
        // in flight while its queues' newest fences are, with the sum of its budgets.
        let done_below = |limit: u64| move |f: Fence| Ok(f.0 < limit);
        assert_eq!(w.look(0, false, done_below(n)), Verdict::Fine);
        assert_eq!(w.look(30, true, done_below(n + 2)), Verdict::Fine);
        assert_eq!(w.look(30, true, done_below(n + 2)), Verdict::Fine);
        assert_eq!(
            w.look(61, true, done_below(n + 2)),
            Verdict::Fault(Fence(n + 2), Fault::Timeout)
        );
        // All over: the list is empty, and new jobs are listed one by one again.
        let mut w = Watchdog::new(config());
        for f in 0..WATCHED_JOBS as u64 + 1 {
            w.push(job(f, 10), 0);
        }
        assert_eq!(w.look(0, false, |_| Ok(true)), Verdict::Fine);
        assert!(w.jobs.is_empty() && w.overflow.is_none());
        w.push(job(100, 10), 0);
        assert_eq!(w.jobs.len(), 1);
    }
}
