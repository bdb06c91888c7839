//! Fault injection: hardware faults the simulator makes happen on purpose, so that a runtime's
//! detection and recovery can be tested without a broken board.
//!
//! # What can go wrong
//!
//! A real NPU in the field meets bus errors, DMA failures, jobs that never finish and
//! interrupts that are lost or raised for nothing. Each is one [`FaultKind`]:
//!
//! | kind | what the simulator does | what the host sees |
//! |---|---|---|
//! | [`Dma`](FaultKind::Dma), [`Bus`](FaultKind::Bus) | the job ends at its scheduled end without doing its work, fills what it would have written with [`FAULT_FILL`], and halts its queue until a reset | `poll` answers [`HalError::Fault`] with [`Fault::Dma`] / [`Fault::Bus`]; jobs that depend on it, and every job of its queue after it, answer [`Fault::Cancelled`] |
//! | [`Hang`](FaultKind::Hang) | the job never ends; its queue, and every job waiting on it, stall behind it | `poll` answers `WouldBlock` until [`Npu::reset`]; [`Npu::wait_for_event`] wakes on timer ticks |
//! | [`Overrun`](FaultKind::Overrun) | the job runs `times` its scheduled cycles plus `plus`, then completes normally | a late completion |
//! | [`SpuriousIrq`](FaultKind::SpuriousIrq) | an interrupt is raised when the job *starts*, with nothing finished | `irq_pending`, a wake-up of `wait_for_event`, and a poll still answering `WouldBlock` |
//! | [`LostIrq`](FaultKind::LostIrq) | the job completes at its end but raises no interrupt | `poll` sees it done (the status register), but `irq_pending` stays false and `wait_for_event` wakes only at the next timer tick |
//!
//! A DMA or bus fault leaves the job's output undefined, as on hardware; the simulator writes a
//! recognisable pattern ([`FAULT_FILL`]) rather than leaving the old bytes, so that a test
//! whose recovery forgets to rewrite an output sees garbage, not yesterday's correct answer.
//!
//! It also halts the job's queue, as an Ethos-U stops its command stream on a fault and waits
//! for the driver's reset: the jobs queued behind it on that queue, and every job submitted to
//! it later, are cancelled ([`Fault::Cancelled`]) until
//! [`Npu::reset`](npu_compute::hal::Npu::reset). This is what makes a fault visible to a
//! server that polls only the newest fence of each queue (jobs of one queue complete in
//! order, so it stands for the older ones): that fence answers the cancellation. Other queues
//! go on. (A job failed with a code, [`HalError::JobFailed`], halts nothing, as before.)
//!
//! # When it happens
//!
//! A [`FaultPlan`] holds up to [`MAX_FAULT_RULES`] [`FaultRule`]s. Each rule is a kind and
//! conditions, all of which must hold for a job:
//!
//! - [`job`](FaultRule::job): the job's index, counting every job `submit` accepted from 0
//!   since the plan was set (at construction from [`SimConfig::faults`](crate::SimConfig::faults),
//!   or by [`SimNpu::set_faults`](crate::SimNpu::set_faults));
//! - [`op`](FaultRule::op): the job is a compute job of this operator family;
//! - [`region`](FaultRule::region): one of the regions the job reads or writes shares a byte
//!   with this one (a bus error on an address range);
//! - [`chance`](FaultRule::chance): a draw of a seeded generator falls below a probability
//!   (see [`Chance`]);
//! - [`max`](FaultRule::max): the rule has fired fewer times than this.
//!
//! A rule without conditions fires on every job. The decision is made when `submit` accepts the
//! job (its schedule is fixed then: a hang or an overrun changes it), by the first rule in the
//! plan whose conditions hold: a job suffers at most one fault. A job whose dependency has
//! already failed when it is submitted will not run, and gets none. Every fault injected is
//! counted in [`SimStats::faults_injected`](crate::SimStats::faults_injected) when it is
//! decided; a DMA or bus fault on a job whose dependency fails later is then reported as that
//! dependency's consequence ([`Fault::Cancelled`] or
//! [`CODE_DEPENDENCY_FAILED`](crate::CODE_DEPENDENCY_FAILED)), since the job never ran.
//!
//! # Determinism
//!
//! Nothing here reads a clock or an entropy source. A probability draw is a pure function of
//! the rule's seed, its position in the plan and the job's index ([`chance_draw`]: the
//! SplitMix64 generator), so the same plan over the same sequence of submits injects the same
//! faults, whatever the polls, waits and timing in between.
//!
//! # Written by hand
//!
//! [`parse_faults`] reads a plan from text, for the command line (`npu-sim run --faults SPEC`)
//! and for firmware that takes it from a configuration string:
//!
//! ```text
//! SPEC := RULE (';' RULE)*   |  none
//! RULE := KIND ['@' COND (',' COND)*]
//! KIND := dma | bus | hang | spurious-irq | lost-irq | overrun=TIMESx | overrun=+CYCLES
//!       | overrun=TIMESx+CYCLES
//! COND := job=N | op=NAME | p=PROBABILITY | seed=N | max=N | region=SPACE:OFFSET+LEN
//! ```
//!
//! `NAME` is an operator family as printed (`Conv2d`, `DepthwiseConv2d`; case ignored);
//! `PROBABILITY` a decimal in `0..=1` with at most 6 decimals (`0.01`) or a percentage (`1%`);
//! `SPACE` is `device`, `host` or `flashN`; numbers are decimal or `0x` hexadecimal. For
//! example `dma@job=12`, `bus@op=Conv2d,max=1`, `hang@p=0.01,seed=7`,
//! `lost-irq@job=3;overrun=4x@op=DepthwiseConv2d`, `bus@region=device:0x100+64`.
//!
//! [`HalError::Fault`]: npu_compute::hal::HalError::Fault
//! [`HalError::JobFailed`]: npu_compute::hal::HalError::JobFailed
//! [`Fault::Dma`]: npu_compute::hal::Fault::Dma
//! [`Fault::Bus`]: npu_compute::hal::Fault::Bus
//! [`Fault::Cancelled`]: npu_compute::hal::Fault::Cancelled
//! [`Npu::reset`]: npu_compute::hal::Npu::reset
//! [`Npu::wait_for_event`]: npu_compute::hal::Npu::wait_for_event

use core::fmt;

use npu_compute::hal::{Cycles, JobKind, Region, Space};
use npu_compute::ops::OpKind;

#[cfg(doc)]
use npu_compute::hal::Fault;

/// Most rules a [`FaultPlan`] holds. Eight covers one rule of each [`FaultKind`] and two to
/// spare; a plan is copied with [`SimConfig`](crate::SimConfig), so it stays small (a rule is
/// about 64 bytes).
pub const MAX_FAULT_RULES: usize = 8;

/// The byte a job hit by a DMA or bus fault leaves in every byte it would have written (its
/// output, or a transfer's destination): what a faulted job writes is undefined on hardware,
/// and a recognisable pattern makes an output that recovery failed to rewrite visible.
pub const FAULT_FILL: u8 = 0xA5;

/// The cycle a job that never ends is scheduled to end at: a hung job, and every job queued or
/// waiting behind it. The clock never retires a job at this end, even if it reaches it.
pub const NEVER: Cycles = Cycles::MAX;

/// What goes wrong (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FaultKind {
    /// A DMA error: the job ends on time, writes [`FAULT_FILL`] and reports
    /// [`Fault::Dma`].
    Dma,
    /// A bus error: as [`Dma`](Self::Dma), reported as [`Fault::Bus`].
    Bus,
    /// The job never completes (until [`Npu::reset`](npu_compute::hal::Npu::reset)).
    Hang,
    /// The job takes `times` its scheduled cycles (at least once) plus `plus`, then completes
    /// normally. Its queue is busy that much longer.
    Overrun {
        /// The multiple of its cycles the job takes (0 counts as 1).
        times: u32,
        /// Cycles added on top.
        plus: Cycles,
    },
    /// An interrupt is raised when the job starts, with nothing finished; the job itself runs
    /// normally.
    SpuriousIrq,
    /// The job completes normally but its completion interrupt is lost.
    LostIrq,
}

impl FaultKind {
    /// The name [`parse_faults`] reads (`overrun` for every overrun).
    pub const fn name(self) -> &'static str {
        match self {
            FaultKind::Dma => "dma",
            FaultKind::Bus => "bus",
            FaultKind::Hang => "hang",
            FaultKind::Overrun { .. } => "overrun",
            FaultKind::SpuriousIrq => "spurious-irq",
            FaultKind::LostIrq => "lost-irq",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FaultKind::Overrun { times, plus } => write!(f, "overrun={times}x+{plus}"),
            other => f.write_str(other.name()),
        }
    }
}

/// A probability with the seed of its draws: the rule fires on a job when the job's draw,
/// uniform in `0..1_000_000`, is below `per_million` ([`chance_draw`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Chance {
    /// The probability in millionths (10,000 is 1%; 1,000,000 or more is every job).
    pub per_million: u32,
    /// The generator's seed.
    pub seed: u64,
}

/// One kind of fault and when it happens (see [When it happens](self#when-it-happens)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultRule {
    /// What goes wrong.
    pub kind: FaultKind,
    /// Only the job of this index (from 0, since the plan was set).
    pub job: Option<u64>,
    /// Only compute jobs of this operator family.
    pub op: Option<OpKind>,
    /// Only jobs that read or write a byte of this region.
    pub region: Option<Region>,
    /// Only jobs whose draw falls below this probability.
    pub chance: Option<Chance>,
    /// At most this many times.
    pub max: Option<u32>,
}

impl FaultRule {
    /// `kind` on every job (add conditions with the other constructors' fields or methods).
    pub const fn always(kind: FaultKind) -> Self {
        FaultRule {
            kind,
            job: None,
            op: None,
            region: None,
            chance: None,
            max: None,
        }
    }

    /// `kind` on the job of index `index` (counting from 0 since the plan was set).
    pub const fn at_job(kind: FaultKind, index: u64) -> Self {
        FaultRule {
            job: Some(index),
            ..Self::always(kind)
        }
    }

    /// `kind` on every compute job of operator family `op`.
    pub const fn on_op(kind: FaultKind, op: OpKind) -> Self {
        FaultRule {
            op: Some(op),
            ..Self::always(kind)
        }
    }

    /// `kind` on every job that reads or writes a byte of `region`.
    pub const fn on_region(kind: FaultKind, region: Region) -> Self {
        FaultRule {
            region: Some(region),
            ..Self::always(kind)
        }
    }

    /// `kind` on each job with probability `per_million` / 1,000,000, drawn from `seed`.
    pub const fn with_chance(kind: FaultKind, per_million: u32, seed: u64) -> Self {
        FaultRule {
            chance: Some(Chance { per_million, seed }),
            ..Self::always(kind)
        }
    }

    /// This rule firing at most `times` times.
    pub const fn at_most(self, times: u32) -> Self {
        FaultRule {
            max: Some(times),
            ..self
        }
    }

    /// Whether the rule's conditions other than [`max`](Self::max) hold for the job of index
    /// `index`, the rule being at `position` in its plan.
    pub fn matches(&self, position: usize, index: u64, job: &JobKind<'_>) -> bool {
        if self.job.is_some_and(|n| n != index) {
            return false;
        }
        if let Some(kind) = self.op {
            match job {
                JobKind::Compute { op, .. } if op.kind() == kind => {}
                _ => return false,
            }
        }
        if let Some(region) = self.region {
            if !touches(job, &region) {
                return false;
            }
        }
        if let Some(chance) = self.chance {
            if chance_draw(chance.seed, position, index) >= chance.per_million {
                return false;
            }
        }
        true
    }
}

/// Whether a job reads or writes a byte of `region`.
fn touches(job: &JobKind<'_>, region: &Region) -> bool {
    match job {
        JobKind::Transfer { src, dst } => src.overlaps(region) || dst.overlaps(region),
        JobKind::Compute {
            inputs,
            output,
            scratch,
            ..
        } => {
            output.overlaps(region)
                || scratch.is_some_and(|s| s.overlaps(region))
                || inputs.iter().any(|r| r.overlaps(region))
        }
    }
}

/// The draw of the rule at `position` for the job of index `index`, uniform in
/// `0..1_000_000`: the top 32 bits of the `index`-th output of a SplitMix64 generator seeded
/// with `seed ^ position`, scaled. A pure function, so draws do not depend on what else ran.
pub fn chance_draw(seed: u64, position: usize, index: u64) -> u32 {
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut z = (seed ^ position as u64).wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    // (top 32 bits * 10^6) >> 32 < 10^6.
    (((z >> 32) * 1_000_000) >> 32) as u32
}

/// The faults to inject: up to [`MAX_FAULT_RULES`] rules, tried in order. `Default` (and
/// [`NONE`](Self::NONE)) injects nothing, and the simulator then behaves and counts exactly as
/// it does without fault injection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultPlan {
    /// The rules; those at `len` and beyond are [`FaultPlan::UNUSED`].
    rules: [FaultRule; MAX_FAULT_RULES],
    len: u8,
}

impl FaultPlan {
    /// No faults.
    pub const NONE: FaultPlan = FaultPlan {
        rules: [Self::UNUSED; MAX_FAULT_RULES],
        len: 0,
    };

    /// What fills the unused slots (never tried).
    const UNUSED: FaultRule = FaultRule::always(FaultKind::Dma);

    /// A plan of one rule.
    pub const fn one(rule: FaultRule) -> Self {
        let mut plan = Self::NONE;
        plan.rules[0] = rule;
        plan.len = 1;
        plan
    }

    /// This plan with `rule` after its rules.
    ///
    /// # Errors
    /// [`FaultsFull`] when it holds [`MAX_FAULT_RULES`] already.
    pub const fn with(mut self, rule: FaultRule) -> Result<Self, FaultsFull> {
        let len = self.len as usize;
        if len >= MAX_FAULT_RULES {
            return Err(FaultsFull);
        }
        self.rules[len] = rule;
        self.len += 1;
        Ok(self)
    }

    /// Adds `rule` after the rules.
    ///
    /// # Errors
    /// [`FaultsFull`] when the plan holds [`MAX_FAULT_RULES`] already (it is left unchanged).
    pub fn push(&mut self, rule: FaultRule) -> Result<(), FaultsFull> {
        *self = self.with(rule)?;
        Ok(())
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[FaultRule] {
        self.rules.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Whether the plan injects nothing.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for FaultPlan {
    /// [`FaultPlan::NONE`].
    fn default() -> Self {
        Self::NONE
    }
}

impl fmt::Display for FaultPlan {
    /// The plan in [`parse_faults`]'s syntax (`none` when empty); parsing it gives the plan
    /// back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, rule) in self.rules().iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{}", rule.kind)?;
            let mut sep = '@';
            let mut cond = |f: &mut fmt::Formatter<'_>, args: fmt::Arguments<'_>| {
                let r = write!(f, "{sep}{args}");
                sep = ',';
                r
            };
            if let Some(n) = rule.job {
                cond(f, format_args!("job={n}"))?;
            }
            if let Some(op) = rule.op {
                cond(f, format_args!("op={op}"))?;
            }
            if let Some(r) = rule.region {
                let space = match r.space {
                    Space::Device => "device",
                    Space::Host => "host",
                    Space::Slow => "slow",
                    Space::Flash(_) => "flash",
                };
                match r.space {
                    Space::Flash(s) => cond(
                        f,
                        format_args!("region={space}{s}:{:#x}+{}", r.offset, r.len),
                    )?,
                    _ => cond(f, format_args!("region={space}:{:#x}+{}", r.offset, r.len))?,
                }
            }
            if let Some(c) = rule.chance {
                cond(
                    f,
                    format_args!(
                        "p={}.{:06},seed={}",
                        c.per_million / 1_000_000,
                        c.per_million % 1_000_000,
                        c.seed
                    ),
                )?;
            }
            if let Some(m) = rule.max {
                cond(f, format_args!("max={m}"))?;
            }
        }
        Ok(())
    }
}

/// A [`FaultPlan`] already holds [`MAX_FAULT_RULES`] rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultsFull;

impl fmt::Display for FaultsFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a fault plan holds at most {MAX_FAULT_RULES} rules (MAX_FAULT_RULES)"
        )
    }
}

impl core::error::Error for FaultsFull {}

/// Faults injected, by kind ([`SimStats::faults_injected`](crate::SimStats::faults_injected)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FaultCounts {
    /// [`FaultKind::Dma`].
    pub dma: u64,
    /// [`FaultKind::Bus`].
    pub bus: u64,
    /// [`FaultKind::Hang`].
    pub hang: u64,
    /// [`FaultKind::Overrun`].
    pub overrun: u64,
    /// [`FaultKind::SpuriousIrq`].
    pub spurious_irq: u64,
    /// [`FaultKind::LostIrq`].
    pub lost_irq: u64,
}

impl FaultCounts {
    /// Every fault injected.
    pub const fn total(&self) -> u64 {
        self.dma
            .saturating_add(self.bus)
            .saturating_add(self.hang)
            .saturating_add(self.overrun)
            .saturating_add(self.spurious_irq)
            .saturating_add(self.lost_irq)
    }

    /// The count of `kind`.
    pub const fn of(&self, kind: FaultKind) -> u64 {
        match kind {
            FaultKind::Dma => self.dma,
            FaultKind::Bus => self.bus,
            FaultKind::Hang => self.hang,
            FaultKind::Overrun { .. } => self.overrun,
            FaultKind::SpuriousIrq => self.spurious_irq,
            FaultKind::LostIrq => self.lost_irq,
        }
    }

    /// The faults that end a job wrongly or never: DMA and bus errors, hangs and overruns
    /// (the other kinds zero). An overrun within the watchdog's margin is no fault to the
    /// runtime, so a run that counts these as must-fail injects only overruns past it.
    pub const fn harmful(&self) -> FaultCounts {
        FaultCounts {
            dma: self.dma,
            bus: self.bus,
            hang: self.hang,
            overrun: self.overrun,
            spurious_irq: 0,
            lost_irq: 0,
        }
    }

    /// The faults counted since `earlier`, a copy of these counts taken before.
    pub const fn since(&self, earlier: &FaultCounts) -> FaultCounts {
        FaultCounts {
            dma: self.dma.saturating_sub(earlier.dma),
            bus: self.bus.saturating_sub(earlier.bus),
            hang: self.hang.saturating_sub(earlier.hang),
            overrun: self.overrun.saturating_sub(earlier.overrun),
            spurious_irq: self.spurious_irq.saturating_sub(earlier.spurious_irq),
            lost_irq: self.lost_irq.saturating_sub(earlier.lost_irq),
        }
    }

    /// Adds `other`'s counts, kind by kind.
    pub fn add(&mut self, other: &FaultCounts) {
        self.dma = self.dma.saturating_add(other.dma);
        self.bus = self.bus.saturating_add(other.bus);
        self.hang = self.hang.saturating_add(other.hang);
        self.overrun = self.overrun.saturating_add(other.overrun);
        self.spurious_irq = self.spurious_irq.saturating_add(other.spurious_irq);
        self.lost_irq = self.lost_irq.saturating_add(other.lost_irq);
    }

    pub(crate) fn count(&mut self, kind: FaultKind) {
        let slot = match kind {
            FaultKind::Dma => &mut self.dma,
            FaultKind::Bus => &mut self.bus,
            FaultKind::Hang => &mut self.hang,
            FaultKind::Overrun { .. } => &mut self.overrun,
            FaultKind::SpuriousIrq => &mut self.spurious_irq,
            FaultKind::LostIrq => &mut self.lost_irq,
        };
        *slot = slot.saturating_add(1);
    }
}

/// The simulator's side of a plan (the plan itself stays in the configuration): which job
/// comes next and how often each rule fired.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Injector {
    /// Index of the next job `submit` accepts, since the plan was set.
    next_job: u64,
    fired: [u32; MAX_FAULT_RULES],
}

impl Injector {
    /// The index the next accepted job will have.
    pub(crate) fn next_job(&self) -> u64 {
        self.next_job
    }

    /// The fault `plan` gives the next job (`eligible`: it will run), by the first rule whose
    /// conditions hold. Call once per accepted job: it moves on to the next index and counts
    /// the firing.
    pub(crate) fn decide(
        &mut self,
        plan: &FaultPlan,
        job: &JobKind<'_>,
        eligible: bool,
    ) -> Option<FaultKind> {
        let index = self.next_job;
        self.next_job = index.saturating_add(1);
        if !eligible || plan.is_empty() {
            return None;
        }
        for (position, (rule, fired)) in plan.rules().iter().zip(self.fired.iter_mut()).enumerate()
        {
            if rule.max.is_some_and(|m| *fired >= m) {
                continue;
            }
            if rule.matches(position, index, job) {
                *fired = fired.saturating_add(1);
                return Some(rule.kind);
            }
        }
        None
    }
}

/// Why [`parse_faults`] refused a spec; each names the text at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSpecError<'a> {
    /// The spec, or a rule between `;`, is empty.
    Empty,
    /// A rule's kind is none of `dma`, `bus`, `hang`, `spurious-irq`, `lost-irq`, `overrun=...`.
    UnknownKind {
        /// The kind as written.
        kind: &'a str,
    },
    /// `overrun=` is not `TIMESx`, `+CYCLES` or `TIMESx+CYCLES` with `TIMES` at least 1.
    BadOverrun {
        /// What follows `overrun=`.
        value: &'a str,
    },
    /// A condition is not `NAME=VALUE` with a known name.
    UnknownCondition {
        /// The condition as written.
        condition: &'a str,
    },
    /// A condition appears twice in one rule.
    Repeated {
        /// Its name.
        name: &'a str,
    },
    /// A number does not parse (decimal or `0x` hexadecimal, in range).
    BadNumber {
        /// The condition it belongs to.
        name: &'a str,
        /// The value as written.
        value: &'a str,
    },
    /// `p=` is not a decimal in `0..=1` with at most 6 decimals, nor a percentage.
    BadProbability {
        /// The value as written.
        value: &'a str,
    },
    /// `seed=` without `p=` in the same rule.
    SeedWithoutProbability,
    /// `op=` names no operator family.
    UnknownOp {
        /// The name as written.
        name: &'a str,
    },
    /// `region=` is not `SPACE:OFFSET+LEN` with `SPACE` one of `device`, `host`, `flashN`.
    BadRegion {
        /// The value as written.
        value: &'a str,
    },
    /// More rules than [`MAX_FAULT_RULES`].
    TooManyRules {
        /// Rules written.
        rules: usize,
    },
}

impl fmt::Display for FaultSpecError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SYNTAX: &str = "a fault spec is RULE;RULE... with RULE = KIND[@COND,COND...], \
            KIND one of dma, bus, hang, spurious-irq, lost-irq, overrun=Nx, overrun=+CYCLES, \
            and COND one of job=N, op=NAME, p=PROBABILITY, seed=N, max=N, \
            region=SPACE:OFFSET+LEN (e.g. `dma@job=12;hang@p=0.01,seed=7`)";
        match *self {
            FaultSpecError::Empty => write!(f, "empty fault rule: {SYNTAX}"),
            FaultSpecError::UnknownKind { kind } => {
                write!(f, "unknown fault kind `{kind}`: {SYNTAX}")
            }
            FaultSpecError::BadOverrun { value } => write!(
                f,
                "overrun `{value}`: expected TIMESx (TIMES at least 1), +CYCLES or TIMESx+CYCLES, \
                 e.g. overrun=4x or overrun=+10000"
            ),
            FaultSpecError::UnknownCondition { condition } => {
                write!(f, "unknown fault condition `{condition}`: {SYNTAX}")
            }
            FaultSpecError::Repeated { name } => {
                write!(f, "fault condition `{name}` given twice in one rule")
            }
            FaultSpecError::BadNumber { name, value } => write!(
                f,
                "{name}=`{value}` is not a number (decimal or 0x hexadecimal, in range)"
            ),
            FaultSpecError::BadProbability { value } => write!(
                f,
                "p=`{value}` is not a probability: a decimal from 0 to 1 with at most 6 \
                 decimals (0.01) or a percentage (1%)"
            ),
            FaultSpecError::SeedWithoutProbability => {
                f.write_str("seed= without p= in the same fault rule: the seed is p's")
            }
            FaultSpecError::UnknownOp { name } => write!(
                f,
                "op=`{name}` names no operator family (write it as printed, e.g. Conv2d, \
                 DepthwiseConv2d, FullyConnected)"
            ),
            FaultSpecError::BadRegion { value } => write!(
                f,
                "region=`{value}`: expected SPACE:OFFSET+LEN with SPACE device, host or flashN \
                 (e.g. device:0x100+64)"
            ),
            FaultSpecError::TooManyRules { rules } => write!(
                f,
                "{rules} fault rules: at most {MAX_FAULT_RULES} (MAX_FAULT_RULES)"
            ),
        }
    }
}

impl core::error::Error for FaultSpecError<'_> {}

/// The plan written in `spec` (see [Written by hand](self#written-by-hand)); `none` is the
/// empty plan. Spaces around items are ignored, names are case-insensitive.
///
/// # Errors
/// A [`FaultSpecError`] naming the first thing that is wrong.
pub fn parse_faults(spec: &str) -> Result<FaultPlan, FaultSpecError<'_>> {
    let spec = spec.trim();
    if spec.eq_ignore_ascii_case("none") {
        return Ok(FaultPlan::NONE);
    }
    let rules = spec.split(';').count();
    if rules > MAX_FAULT_RULES {
        return Err(FaultSpecError::TooManyRules { rules });
    }
    let mut plan = FaultPlan::NONE;
    for rule in spec.split(';') {
        let rule = parse_rule(rule.trim())?;
        // At most MAX_FAULT_RULES, counted above.
        plan.push(rule)
            .map_err(|_| FaultSpecError::TooManyRules { rules })?;
    }
    Ok(plan)
}

fn parse_rule(text: &str) -> Result<FaultRule, FaultSpecError<'_>> {
    if text.is_empty() {
        return Err(FaultSpecError::Empty);
    }
    let (kind, conditions) = match text.split_once('@') {
        Some((k, c)) => (k.trim(), Some(c)),
        None => (text, None),
    };
    let mut rule = FaultRule::always(parse_kind(kind)?);
    let mut seed: Option<u64> = None;
    for condition in conditions.into_iter().flat_map(|c| c.split(',')) {
        let condition = condition.trim();
        let Some((name, value)) = condition.split_once('=') else {
            return Err(FaultSpecError::UnknownCondition { condition });
        };
        let (name, value) = (name.trim(), value.trim());
        let repeated = || FaultSpecError::Repeated { name };
        let lower = |s: &str| name.eq_ignore_ascii_case(s);
        if lower("job") {
            if rule.job.is_some() {
                return Err(repeated());
            }
            rule.job = Some(parse_number(name, value)?);
        } else if lower("op") {
            if rule.op.is_some() {
                return Err(repeated());
            }
            rule.op = Some(parse_op(value)?);
        } else if lower("p") {
            if rule.chance.is_some() {
                return Err(repeated());
            }
            rule.chance = Some(Chance {
                per_million: parse_probability(value)?,
                seed: 0,
            });
        } else if lower("seed") {
            if seed.is_some() {
                return Err(repeated());
            }
            seed = Some(parse_number(name, value)?);
        } else if lower("max") {
            if rule.max.is_some() {
                return Err(repeated());
            }
            let max = parse_number(name, value)?;
            rule.max =
                Some(u32::try_from(max).map_err(|_| FaultSpecError::BadNumber { name, value })?);
        } else if lower("region") {
            if rule.region.is_some() {
                return Err(repeated());
            }
            rule.region = Some(parse_region(value)?);
        } else {
            return Err(FaultSpecError::UnknownCondition { condition });
        }
    }
    if let Some(seed) = seed {
        match rule.chance.as_mut() {
            Some(chance) => chance.seed = seed,
            None => return Err(FaultSpecError::SeedWithoutProbability),
        }
    }
    Ok(rule)
}

fn parse_kind(kind: &str) -> Result<FaultKind, FaultSpecError<'_>> {
    let named = [
        ("dma", FaultKind::Dma),
        ("bus", FaultKind::Bus),
        ("hang", FaultKind::Hang),
        ("spurious-irq", FaultKind::SpuriousIrq),
        ("lost-irq", FaultKind::LostIrq),
    ];
    if let Some((_, k)) = named.iter().find(|(n, _)| n.eq_ignore_ascii_case(kind)) {
        return Ok(*k);
    }
    let Some((name, value)) = kind.split_once('=') else {
        return Err(FaultSpecError::UnknownKind { kind });
    };
    if !name.trim().eq_ignore_ascii_case("overrun") {
        return Err(FaultSpecError::UnknownKind { kind });
    }
    let value = value.trim();
    let bad = || FaultSpecError::BadOverrun { value };
    let (times, plus) = match value.split_once('+') {
        Some((times, plus)) => (times.trim(), Some(plus.trim())),
        None => (value, None),
    };
    let times = if times.is_empty() {
        1
    } else {
        let digits = times
            .strip_suffix('x')
            .or_else(|| times.strip_suffix('X'))
            .ok_or_else(bad)?;
        let n = number(digits.trim()).ok_or_else(bad)?;
        u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(bad)?
    };
    let plus = match plus {
        Some(p) => number(p).ok_or_else(bad)?,
        None if times == 1 && value.is_empty() => return Err(bad()),
        None => 0,
    };
    Ok(FaultKind::Overrun { times, plus })
}

/// A decimal or `0x` hexadecimal `u64`.
fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

fn parse_number<'a>(name: &'a str, value: &'a str) -> Result<u64, FaultSpecError<'a>> {
    number(value).ok_or(FaultSpecError::BadNumber { name, value })
}

/// Millionths from `0.01`, `1`, `1%`, `0.5%`.
fn parse_probability(value: &str) -> Result<u32, FaultSpecError<'_>> {
    let bad = FaultSpecError::BadProbability { value };
    let (text, scale_digits) = match value.strip_suffix('%') {
        // A percentage is the same decimal two places further left: 1% = 0.01.
        Some(p) => (p.trim(), 4u32),
        None => (value, 6u32),
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
        || fraction.len() > scale_digits as usize
    {
        return Err(bad);
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad)?
    };
    let mut frac: u64 = 0;
    for b in fraction.bytes() {
        frac = frac * 10 + u64::from(b - b'0');
    }
    let pad = 10u64.pow(scale_digits - fraction.len() as u32);
    let per_million = whole
        .checked_mul(10u64.pow(scale_digits))
        .and_then(|w| w.checked_add(frac * pad))
        .filter(|&p| p <= 1_000_000)
        .ok_or(bad)?;
    // At most 1,000,000, checked.
    Ok(per_million as u32)
}

fn parse_op(name: &str) -> Result<OpKind, FaultSpecError<'_>> {
    use core::fmt::Write;
    OpKind::ALL
        .iter()
        .find(|k| {
            let mut printed: heapless::String<40> = heapless::String::new();
            write!(printed, "{k}").is_ok() && printed.eq_ignore_ascii_case(name)
        })
        .copied()
        .ok_or(FaultSpecError::UnknownOp { name })
}

fn parse_region(value: &str) -> Result<Region, FaultSpecError<'_>> {
    let bad = FaultSpecError::BadRegion { value };
    let (space, range) = value.split_once(':').ok_or(bad)?;
    let space = space.trim();
    let space = if space.eq_ignore_ascii_case("device") {
        Space::Device
    } else if space.eq_ignore_ascii_case("host") {
        Space::Host
    } else if space.eq_ignore_ascii_case("slow") {
        Space::Slow
    } else {
        let segment = space
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("flash"))
            .and_then(|_| space.get(5..))
            .and_then(|n| n.parse::<u8>().ok())
            .ok_or(bad)?;
        Space::Flash(segment)
    };
    let (offset, len) = range.split_once('+').ok_or(bad)?;
    let offset = number(offset.trim())
        .and_then(|n| u32::try_from(n).ok())
        .ok_or(bad)?;
    let len = number(len.trim())
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0)
        .ok_or(bad)?;
    Ok(Region { space, offset, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_differences_harmful_kinds_and_sums() {
        let mut before = FaultCounts::default();
        for kind in [FaultKind::Dma, FaultKind::SpuriousIrq, FaultKind::Hang] {
            before.count(kind);
        }
        let mut after = before;
        for kind in [
            FaultKind::Bus,
            FaultKind::LostIrq,
            FaultKind::Overrun { times: 2, plus: 0 },
            FaultKind::Dma,
        ] {
            after.count(kind);
        }
        let during = after.since(&before);
        assert_eq!(during.total(), 4);
        assert_eq!((during.dma, during.bus, during.hang), (1, 1, 0));
        let harmful = during.harmful();
        assert_eq!(harmful.total(), 3, "the lost interrupt is no harmful fault");
        assert_eq!(harmful.lost_irq, 0);
        // Counts never run below zero, whichever way round they are taken.
        assert_eq!(before.since(&after), FaultCounts::default());
        let mut sum = during;
        sum.add(&before);
        assert_eq!(sum, after);
    }

    #[test]
    fn parses_each_kind_and_condition() {
        let plan = parse_faults(
            "dma@job=12; bus@op=conv2d,max=1; hang@p=0.01,seed=7; lost-irq@job=0x3; \
             overrun=4x@op=DepthwiseConv2d; overrun=+100; overrun=2x+5; \
             spurious-irq@region=device:0x100+64",
        )
        .unwrap();
        let rules = plan.rules();
        assert_eq!(rules.len(), 8);
        assert_eq!(rules[0], FaultRule::at_job(FaultKind::Dma, 12));
        assert_eq!(
            rules[1],
            FaultRule::on_op(FaultKind::Bus, OpKind::Conv2d).at_most(1)
        );
        assert_eq!(rules[2], FaultRule::with_chance(FaultKind::Hang, 10_000, 7));
        assert_eq!(rules[3], FaultRule::at_job(FaultKind::LostIrq, 3));
        assert_eq!(
            rules[4],
            FaultRule::on_op(
                FaultKind::Overrun { times: 4, plus: 0 },
                OpKind::DepthwiseConv2d
            )
        );
        assert_eq!(
            rules[5].kind,
            FaultKind::Overrun {
                times: 1,
                plus: 100
            }
        );
        assert_eq!(rules[6].kind, FaultKind::Overrun { times: 2, plus: 5 });
        assert_eq!(
            rules[7],
            FaultRule::on_region(FaultKind::SpuriousIrq, Region::device(0x100, 64))
        );
        // The printed plan parses back to itself.
        let printed = std::format!("{plan}");
        assert_eq!(parse_faults(&printed), Ok(plan));
        assert_eq!(parse_faults("none"), Ok(FaultPlan::NONE));
        assert_eq!(std::format!("{}", FaultPlan::NONE), "none");
    }

    #[test]
    fn probabilities_in_millionths() {
        for (text, expected) in [
            ("0", 0),
            ("1", 1_000_000),
            ("0.01", 10_000),
            (".5", 500_000),
            ("0.000001", 1),
            ("1%", 10_000),
            ("0.5%", 5_000),
            ("100%", 1_000_000),
        ] {
            assert_eq!(parse_probability(text), Ok(expected), "{text}");
        }
        for text in ["", ".", "1.5", "0.0000001", "-0.1", "abc", "101%", "1e-2"] {
            assert_eq!(
                parse_probability(text),
                Err(FaultSpecError::BadProbability { value: text }),
                "{text}"
            );
        }
    }

    #[test]
    fn refuses_bad_specs_with_what_is_wrong() {
        use FaultSpecError as E;
        assert_eq!(parse_faults(""), Err(E::Empty));
        assert_eq!(parse_faults("dma;;bus"), Err(E::Empty));
        assert_eq!(parse_faults("dam"), Err(E::UnknownKind { kind: "dam" }));
        assert_eq!(
            parse_faults("overrun=0x"),
            Err(E::BadOverrun { value: "0x" })
        );
        assert_eq!(parse_faults("overrun="), Err(E::BadOverrun { value: "" }));
        assert_eq!(parse_faults("overrun=4"), Err(E::BadOverrun { value: "4" }));
        assert_eq!(
            parse_faults("dma@when=3"),
            Err(E::UnknownCondition {
                condition: "when=3"
            })
        );
        assert_eq!(
            parse_faults("dma@job"),
            Err(E::UnknownCondition { condition: "job" })
        );
        assert_eq!(
            parse_faults("dma@job=1,job=2"),
            Err(E::Repeated { name: "job" })
        );
        assert_eq!(
            parse_faults("dma@job=x"),
            Err(E::BadNumber {
                name: "job",
                value: "x"
            })
        );
        assert_eq!(parse_faults("dma@seed=3"), Err(E::SeedWithoutProbability));
        assert_eq!(
            parse_faults("bus@op=Conv3d"),
            Err(E::UnknownOp { name: "Conv3d" })
        );
        assert_eq!(
            parse_faults("bus@region=sram:0+4"),
            Err(E::BadRegion { value: "sram:0+4" })
        );
        assert_eq!(
            parse_faults("bus@region=device:0+0"),
            Err(E::BadRegion {
                value: "device:0+0"
            })
        );
        assert_eq!(
            parse_faults("dma;dma;dma;dma;dma;dma;dma;dma;dma"),
            Err(E::TooManyRules { rules: 9 })
        );
        // Every message says what to write instead.
        let message = std::format!("{}", E::UnknownKind { kind: "dam" });
        assert!(message.contains("dam") && message.contains("spurious-irq"));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s under miri, which interprets every step (thousands of random cases)"
    )]
    fn draws_are_uniform_enough_and_depend_on_seed_position_and_index() {
        let hits = (0..100_000)
            .filter(|&i| chance_draw(7, 0, i) < 10_000)
            .count();
        // 1% of 100,000 is 1,000; a fair generator stays well within 20%.
        assert!((800..1200).contains(&hits), "{hits}");
        assert_ne!(chance_draw(7, 0, 5), chance_draw(8, 0, 5));
        assert_ne!(chance_draw(7, 0, 5), chance_draw(7, 1, 5));
        assert_ne!(chance_draw(7, 0, 5), chance_draw(7, 0, 6));
        assert!((0..1000).all(|i| chance_draw(i, 0, i) < 1_000_000));
    }

    #[test]
    fn the_first_matching_rule_fires_within_its_limit() {
        let plan = FaultPlan::one(FaultRule::always(FaultKind::LostIrq).at_most(2))
            .with(FaultRule::always(FaultKind::Dma))
            .unwrap();
        let mut injector = Injector::default();
        let job = JobKind::Transfer {
            src: Region::host(0, 16),
            dst: Region::device(0, 16),
        };
        let got: std::vec::Vec<_> = (0..4).map(|_| injector.decide(&plan, &job, true)).collect();
        assert_eq!(
            got,
            [
                Some(FaultKind::LostIrq),
                Some(FaultKind::LostIrq),
                Some(FaultKind::Dma),
                Some(FaultKind::Dma)
            ]
        );
        // A job that will not run gets nothing, and still takes its index.
        assert_eq!(injector.decide(&plan, &job, false), None);
        assert_eq!(injector.next_job(), 5);
        // Regions: a transfer touches its source and destination.
        let rule = FaultRule::on_region(FaultKind::Bus, Region::device(8, 4));
        assert!(rule.matches(0, 0, &job));
        let rule = FaultRule::on_region(FaultKind::Bus, Region::device(16, 4));
        assert!(!rule.matches(0, 0, &job));
        let full = (0..MAX_FAULT_RULES).try_fold(FaultPlan::NONE, |p, _| {
            p.with(FaultRule::always(FaultKind::Hang))
        });
        assert_eq!(
            full.and_then(|p| p.with(FaultRule::always(FaultKind::Hang))),
            Err(FaultsFull)
        );
    }
}
