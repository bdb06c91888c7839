//! Planning a model into a fast-memory budget with a slow tier beside it (behind the `std`
//! feature): for each activation, whether it stays whole in the arena, is swapped out to the
//! slow tier between two accesses and prefetched back, or lives in the slow tier where its
//! operators read and write it at that tier's cost, with the cycles the plan is predicted to
//! take. The second half of Capuchin's (ASPLOS '20) measured-then-guided loop: the measurement
//! is the [access list](crate::access_list) of an unconstrained invoke.
//!
//! # Design
//!
//! The plan works at the granularity of the graph's steps in model order, on one execution
//! unit (their runs do not overlap): a tensor occupies the arena from the step of its first
//! access to that of its last, as the graph's whole-tensor arena plan has it (a static
//! schedule may run independent steps in another order; the arena plan holds for both). The fast arena a choice
//! needs is planned exactly, offsets and all ([`plan_arena`], the graph's planner), so
//! fragmentation counts.
//!
//! - **Swap.** Between two accesses with operators in between, the tensor is copied out to the
//!   slow tier after the first and back before the second. Each copy is a transfer on the slow
//!   tier's port, which the simulator shares with flash ([`SimConfig::slow`]); the copy out runs
//!   under the operators right after the first access, the copy back under those right
//!   before the second (the in-trigger is the operator whose start leaves just time enough),
//!   each taking port time the operators leave free. The tensor stays in the arena while a copy
//!   of it runs, and leaves it for the operators neither copy needs. A swap is offered only if
//!   both copies hide entirely and at least one operator is left free: a late prefetch would
//!   stall the next access, which a slow-tier placement does more cheaply.
//! - **Slow tier.** The tensor never enters the arena: each operator that writes or reads it
//!   does so in the slow tier, holding the port for
//!   [`Bandwidth::cycles_for`](npu_compute::hal::Bandwidth::cycles_for) its bytes, and runs as
//!   long as the longer of its measured time and its port time (the simulator's model of a job
//!   over the tier). A model input or output stays in the arena: the host reads and writes it.
//! - **Choosing.** While the arena plan is over budget, the planner looks at the operator where
//!   the most bytes are live and, among the tensors live there, picks the move that costs the
//!   fewest predicted cycles per byte freed: a hidden swap costs none, a slow-tier placement the
//!   cycles its operators grow by. Capuchin picks by memory saved per cycle of overhead; this is
//!   the same order.
//!
//! The predicted cycles are the measured invoke's plus what the slow-tier placements add. They
//! leave out the port time each operator's own weights take from flash (not in the access
//! list), so a layer streaming weights beside slow-tier operands is predicted faster than it
//! runs. No runtime executes a plan yet: these are predictions, not measurements.
//!
//! [`SimConfig::slow`]: crate::SimConfig::slow

use npu_compute::hal::{Bandwidth, Cycles};
use npu_compute::memory::{plan_arena, Lifetime};

use crate::access_list::{AccessList, Via};
use crate::runner::{self, RunError};

/// Most buffers the arena planner places for one plan: every whole tensor, or every segment of
/// a swapped one.
const BUFFERS: usize = 1024;
/// Rounds of the arena planner's local search per plan evaluated (the planner evaluates a
/// plan for every move it weighs).
const PLAN_EFFORT: u32 = 20;

/// What a tier plan is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierBudget {
    /// Bytes of the fast arena the activations may use.
    pub fast_bytes: u32,
    /// Bytes of the slow tier they may use.
    pub slow_bytes: u32,
    /// The slow tier's rate ([`SimConfig::slow`](crate::SimConfig::slow)).
    pub slow: Bandwidth,
    /// The fixed cost of a transfer ([`SimConfig::dma_overhead_cycles`](crate::SimConfig)).
    pub transfer_overhead: u32,
    /// Whether swaps may be chosen: a plan for today's runtime, which keeps tensors in the
    /// slow tier ([`PrepareOptions::slow_tensors`](npu_compute::graph::PrepareOptions)) but
    /// does not swap yet, is made without.
    pub swaps: bool,
}

/// Where one activation lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// In the arena from its first access to its last.
    Whole,
    /// In the arena at its accesses, in the slow tier between the pairs of consecutive
    /// accesses listed (by their index in the tensor's accesses: the copy out follows access
    /// `a`, the copy back precedes access `b`).
    Swapped(Vec<(usize, usize)>),
    /// In the slow tier for its whole life.
    Slow,
}

impl Choice {
    /// `"whole"`, `"swap"` or `"slow"`.
    pub fn name(&self) -> &'static str {
        match self {
            Choice::Whole => "whole",
            Choice::Swapped(_) => "swap",
            Choice::Slow => "slow",
        }
    }
}

/// One activation's choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorChoice {
    /// Its index in the model's tensors.
    pub tensor: u16,
    /// Bytes of the arena (or the tier) it takes: its size rounded to the alignment.
    pub len: u32,
    /// Where it lives.
    pub choice: Choice,
}

/// A plan for a budget (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierPlan {
    /// The budget it was made for.
    pub budget: TierBudget,
    /// Every activation's choice, by tensor index.
    pub tensors: Vec<TensorChoice>,
    /// Bytes of the arena the plan's offsets need.
    pub fast_bytes: u32,
    /// Bytes of the slow tier its offsets need.
    pub slow_bytes: u32,
    /// Whether both fit the budget.
    pub fits: bool,
    /// Bytes the swaps move, out and back: `swapped_bytes` of the statistics.
    pub swapped_bytes: u64,
    /// The measured invoke's cycles.
    pub measured_cycles: Cycles,
    /// The cycles predicted for the plan.
    pub predicted_cycles: Cycles,
}

/// Why a plan could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierPlanError {
    /// The access list is of an invoke that ran operators side by side (several units): the
    /// planner's arithmetic assumes one after another.
    Overlapping,
    /// More arena buffers than the planner places at once.
    TooManyBuffers {
        /// Buffers it would place.
        needed: usize,
    },
}

impl core::fmt::Display for TierPlanError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TierPlanError::Overlapping => f.write_str(
                "the measured invoke ran operators side by side: plan for one execution unit \
                 (--units u55-128)",
            ),
            TierPlanError::TooManyBuffers { needed } => write!(
                f,
                "{needed} arena buffers to place, more than the tier planner's {BUFFERS}"
            ),
        }
    }
}

impl std::error::Error for TierPlanError {}

/// The measured invoke in the planner's terms: operators by their step (model order), and each
/// tensor's accesses as positions in that order.
struct Timeline {
    /// Each position's operator duration.
    cycles: Vec<Cycles>,
    /// Each tensor of the list's accesses.
    accesses: Vec<TensorTimeline>,
}

/// One tensor's accesses in the planner's terms.
struct TensorTimeline {
    /// Their positions, in order.
    positions: Vec<usize>,
    /// Whether the host reads or writes it (a model input or output, or a variable).
    host: bool,
    /// The positions of those that move its bytes (not a step that runs nothing, such as a
    /// RESHAPE): where it costs port time in the slow tier.
    moving: Vec<usize>,
}

impl Timeline {
    fn of(list: &AccessList) -> Result<Self, TierPlanError> {
        let mut order: Vec<usize> = (0..list.operators.len()).collect();
        order.sort_by_key(|&i| (list.operators[i].start, list.operators[i].end, i));
        let mut last_end = 0;
        for &i in &order {
            let o = &list.operators[i];
            if o.via != Via::Nothing && o.start < last_end {
                return Err(TierPlanError::Overlapping);
            }
            last_end = last_end.max(o.end);
        }
        // Positions are the graph's steps in model order, as its arena plan counts them (a
        // static schedule may run independent steps in another order; the plan holds for
        // both), so that the bytes planned here are the bytes the graph lays out.
        let cycles = list.operators.iter().map(|o| o.end - o.start).collect();
        let last = list.operators.len().saturating_sub(1);
        let accesses = list
            .tensors
            .iter()
            .map(|t| {
                // The invoke's own transfers: an upload before the first operator, a download
                // after the last.
                let at = |a: &crate::access_list::Access| match a.op {
                    Some(s) => usize::from(s),
                    None if a.kind == crate::access_list::AccessKind::Write => 0,
                    None => last,
                };
                let mut positions: Vec<usize> = t.accesses.iter().map(at).collect();
                positions.sort_unstable();
                let moving = t.accesses.iter().filter(|a| a.via != Via::Nothing);
                TensorTimeline {
                    positions,
                    host: t.input || t.output || t.variable,
                    moving: moving.map(at).collect(),
                }
            })
            .collect();
        Ok(Timeline { cycles, accesses })
    }
}

/// A choice's arena segments and slow-tier lifetime, as (first, last) positions.
struct Effect {
    fast: Vec<(usize, usize)>,
    slow: Option<(usize, usize)>,
}

/// Where a swap leaves its tensor out of the arena.
struct SwapWindow {
    /// The first position after the copy out: the tensor is out from here.
    out_until: usize,
    /// The first position of the copy back: the tensor is back from here.
    back_from: usize,
    /// The port time the copies take, by position.
    uses: Vec<(usize, Cycles)>,
}

/// Where swap `(a, b)` (consecutive accesses of a tensor at `positions`) would leave the tensor
/// out of the arena, its copies taking `copy` cycles each of the port time `free` left at each
/// position. `None` if the copies do not both hide with an operator left between them.
fn swap_window(
    positions: &[usize],
    (a, b): (usize, usize),
    copy: Cycles,
    free: &[Cycles],
) -> Option<SwapWindow> {
    let (pa, pb) = (*positions.get(a)?, *positions.get(b)?);
    let mut uses = Vec::new();
    // The copy out, under the operators after access `a`.
    let mut left = copy;
    let mut p = pa + 1;
    while left > 0 && p < pb {
        let take = left.min(free[p]);
        if take > 0 {
            uses.push((p, take));
        }
        left -= take;
        p += 1;
    }
    let out_until = p;
    // The copy back, under the operators before access `b`.
    let mut left_in = copy;
    let mut q = pb;
    while left_in > 0 && q > out_until {
        q -= 1;
        let already: Cycles = uses.iter().filter(|u| u.0 == q).map(|u| u.1).sum();
        let take = left_in.min(free[q] - already);
        if take > 0 {
            uses.push((q, take));
        }
        left_in -= take;
    }
    (left == 0 && left_in == 0 && q > out_until).then_some(SwapWindow {
        out_until,
        back_from: q,
        uses,
    })
}

/// The plan for `budget` from the measured `list` (see the [module docs](self)).
///
/// # Errors
/// [`TierPlanError::Overlapping`] for an invoke on several units,
/// [`TierPlanError::TooManyBuffers`] past the planner's capacity.
pub fn plan(list: &AccessList, budget: TierBudget) -> Result<TierPlan, TierPlanError> {
    let timeline = Timeline::of(list)?;
    let n = list.tensors.len();
    let mut choices: Vec<Choice> = vec![Choice::Whole; n];
    let copy = |len: u32| {
        budget
            .slow
            .cycles_for(u64::from(len))
            .saturating_add(u64::from(budget.transfer_overhead))
    };
    loop {
        let state = evaluate(list, &timeline, &choices, budget, &copy)?;
        if state.fast_bytes <= budget.fast_bytes {
            return Ok(finish(list, choices, state, budget));
        }
        // The position where the most arena bytes are live, and the moves that free it.
        let live = |p: usize| -> u64 {
            state
                .fast
                .iter()
                .filter(|&&(_, first, last)| first <= p && p <= last)
                .map(|&(t, _, _)| u64::from(list.tensors[t].len))
                .sum()
        };
        let Some(peak) = (0..timeline.cycles.len()).max_by_key(|&p| (live(p), usize::MAX - p))
        else {
            return Ok(finish(list, choices, state, budget));
        };
        let mut best: Option<(Cycles, u32, usize, Choice)> = None;
        for &(t, first, _) in state.fast.iter().filter(|s| s.1 <= peak && peak <= s.2) {
            let TensorTimeline {
                positions, host, ..
            } = &timeline.accesses[t];
            let len = list.tensors[t].len;
            let mut options = Vec::new();
            // A swap of the gap around the peak, if its copies hide there.
            let gap = positions.iter().rposition(|&p| p < peak);
            if let Some(a) = gap.filter(|_| budget.swaps) {
                let b = a + 1;
                if positions.get(b).is_some_and(|&pb| pb > peak) && first <= positions[a] {
                    if let Some(w) = swap_window(positions, (a, b), copy(len), &state.free) {
                        if w.out_until <= peak && peak < w.back_from {
                            let mut gaps = match &choices[t] {
                                Choice::Swapped(g) => g.clone(),
                                _ => Vec::new(),
                            };
                            // Choices only grow, so the loop ends.
                            if !gaps.contains(&(a, b)) {
                                gaps.push((a, b));
                                gaps.sort_unstable();
                                options.push(Choice::Swapped(gaps));
                            }
                        }
                    }
                }
            }
            if !host && choices[t] == Choice::Whole {
                options.push(Choice::Slow);
            }
            for option in options {
                let mut trial = choices.clone();
                trial[t] = option.clone();
                let after = evaluate(list, &timeline, &trial, budget, &copy)?;
                if after.live_at(list, peak) >= live(peak) {
                    continue;
                }
                let cost = after.predicted.saturating_sub(state.predicted);
                // Fewest cycles per byte freed; ties to the larger tensor, then the lower index.
                let better = best.as_ref().is_none_or(|(c, l, _, _)| {
                    u128::from(cost) * u128::from(*l) < u128::from(*c) * u128::from(len)
                        || (u128::from(cost) * u128::from(*l) == u128::from(*c) * u128::from(len)
                            && len > *l)
                });
                if better {
                    best = Some((cost, len, t, option));
                }
            }
        }
        match best {
            Some((_, _, t, option)) => choices[t] = option,
            // Nothing at the peak can move: the budget cannot be met.
            None => return Ok(finish(list, choices, state, budget)),
        }
    }
}

/// What a set of choices needs and costs.
struct State {
    /// `(tensor, first, last)` arena segments.
    fast: Vec<(usize, usize, usize)>,
    fast_bytes: u32,
    slow_bytes: u32,
    /// Port time left at each position.
    free: Vec<Cycles>,
    predicted: Cycles,
    swapped_bytes: u64,
    /// The swaps whose copies hide, by tensor: those of a choice that did not are dropped
    /// (the tensor then stays in the arena over that gap).
    swaps: Vec<Vec<(usize, usize)>>,
}

impl State {
    fn live_at(&self, list: &AccessList, p: usize) -> u64 {
        self.fast
            .iter()
            .filter(|&&(_, first, last)| first <= p && p <= last)
            .map(|&(t, _, _)| u64::from(list.tensors[t].len))
            .sum()
    }
}

fn evaluate(
    list: &AccessList,
    timeline: &Timeline,
    choices: &[Choice],
    budget: TierBudget,
    copy: &dyn Fn(u32) -> Cycles,
) -> Result<State, TierPlanError> {
    let steps = timeline.cycles.len();
    // Bytes the slow-tier placements move at each position (each access one region), whose
    // port time the simulator charges as one access of their sum per job.
    let mut port_bytes = vec![0u64; steps];
    let mut effects: Vec<Effect> = Vec::with_capacity(choices.len());
    for (t, choice) in choices.iter().enumerate() {
        let TensorTimeline {
            positions, moving, ..
        } = &timeline.accesses[t];
        let (Some(&first), Some(&last)) = (positions.first(), positions.last()) else {
            effects.push(Effect {
                fast: Vec::new(),
                slow: None,
            });
            continue;
        };
        let len = list.tensors[t].len;
        effects.push(match choice {
            Choice::Whole | Choice::Swapped(_) => Effect {
                fast: vec![(first, last)],
                slow: None,
            },
            Choice::Slow => {
                for &p in moving {
                    port_bytes[p] = port_bytes[p].saturating_add(u64::from(len));
                }
                Effect {
                    fast: Vec::new(),
                    slow: Some((first, last)),
                }
            }
        });
    }
    let port: Vec<Cycles> = port_bytes
        .iter()
        .map(|&b| if b == 0 { 0 } else { budget.slow.cycles_for(b) })
        .collect();
    let mut free: Vec<Cycles> = timeline
        .cycles
        .iter()
        .zip(&port)
        .map(|(&d, &u)| d.saturating_sub(u))
        .collect();
    let mut swapped_bytes = 0u64;
    let mut swaps = vec![Vec::new(); choices.len()];
    // Swaps in tensor order take the port time they need, each hidden or dropped.
    for (t, choice) in choices.iter().enumerate() {
        let Choice::Swapped(gaps) = choice else {
            continue;
        };
        let positions = &timeline.accesses[t].positions;
        let len = list.tensors[t].len;
        let mut fast = Vec::new();
        let mut slow_first = usize::MAX;
        let mut slow_last = 0;
        let mut from = positions.first().copied().unwrap_or(0);
        for &gap in gaps {
            let Some(SwapWindow {
                out_until,
                back_from,
                uses,
            }) = swap_window(positions, gap, copy(len), &free)
            else {
                continue;
            };
            if out_until <= from {
                // Its copy out would start before the tensor is back from the swap before.
                continue;
            }
            for (p, c) in uses {
                free[p] -= c;
            }
            fast.push((from, out_until - 1));
            slow_first = slow_first.min(positions[gap.0] + 1);
            slow_last = slow_last.max(positions[gap.1] - 1);
            from = back_from;
            swapped_bytes = swapped_bytes.saturating_add(2 * u64::from(len));
            swaps[t].push(gap);
        }
        fast.push((from, positions.last().copied().unwrap_or(from)));
        effects[t] = Effect {
            fast,
            slow: (slow_first <= slow_last).then_some((slow_first, slow_last)),
        };
    }
    let lifetimes = |pick: &dyn Fn(&Effect) -> Vec<(usize, usize)>| -> Vec<(usize, Lifetime)> {
        effects
            .iter()
            .enumerate()
            .flat_map(|(t, e)| {
                pick(e).into_iter().map(move |(first, last)| {
                    (
                        t,
                        Lifetime {
                            bytes: list.tensors[t].len,
                            first: first as u16,
                            last: last as u16,
                        },
                    )
                })
            })
            .collect()
    };
    let fast = lifetimes(&|e: &Effect| e.fast.clone());
    let slow = lifetimes(&|e: &Effect| e.slow.into_iter().collect());
    let size = |buffers: &[(usize, Lifetime)]| -> Result<u32, TierPlanError> {
        if buffers.len() > BUFFERS {
            return Err(TierPlanError::TooManyBuffers {
                needed: buffers.len(),
            });
        }
        let l: Vec<Lifetime> = buffers.iter().map(|b| b.1).collect();
        plan_arena::<BUFFERS>(&l, list.alignment.max(1), PLAN_EFFORT)
            .map(|p| p.size())
            .map_err(|_| TierPlanError::TooManyBuffers {
                needed: buffers.len(),
            })
    };
    let grown: Cycles = timeline
        .cycles
        .iter()
        .zip(&port)
        .map(|(&d, &u)| u.saturating_sub(d))
        .sum();
    Ok(State {
        fast: fast
            .iter()
            .map(|(t, l)| (*t, usize::from(l.first), usize::from(l.last)))
            .collect(),
        fast_bytes: size(&fast)?,
        slow_bytes: size(&slow)?,
        free,
        predicted: (list.end - list.start).saturating_add(grown),
        swapped_bytes,
        swaps,
    })
}

fn finish(list: &AccessList, choices: Vec<Choice>, s: State, budget: TierBudget) -> TierPlan {
    TierPlan {
        budget,
        tensors: list
            .tensors
            .iter()
            .zip(choices)
            .zip(&s.swaps)
            .map(|((t, choice), swaps)| TensorChoice {
                tensor: t.tensor,
                len: t.len,
                choice: match choice {
                    Choice::Swapped(_) if swaps.is_empty() => Choice::Whole,
                    Choice::Swapped(_) => Choice::Swapped(swaps.clone()),
                    other => other,
                },
            })
            .collect(),
        fast_bytes: s.fast_bytes,
        slow_bytes: s.slow_bytes,
        fits: s.fast_bytes <= budget.fast_bytes && s.slow_bytes <= budget.slow_bytes,
        swapped_bytes: s.swapped_bytes,
        measured_cycles: list.end - list.start,
        predicted_cycles: s.predicted,
    }
}

/// Why [`fit`] could not make a plan.
#[derive(Debug)]
pub enum FitError {
    /// The planner refused ([`plan`]).
    Plan(TierPlanError),
    /// Preparing the graph with the plan's slow tensors failed.
    Graph(RunError),
}

impl core::fmt::Display for FitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FitError::Plan(e) => write!(f, "{e}"),
            FitError::Graph(e) => write!(f, "preparing the tier plan: {e}"),
        }
    }
}

impl std::error::Error for FitError {}

/// Rounds of [`fit`]'s feedback at most: each tightens the planner's budget by what the graph
/// needed past it.
const FIT_ROUNDS: usize = 32;

/// A plan the graph itself lays out within `budget`: [`plan`], then the graph of `model`
/// prepared with the plan's slow-tier tensors on `config`'s part; where the graph's own arena
/// plan (which shares memory between tensors the planner counts apart, and places with its own
/// search) needs more than the budget, the planner runs again on a budget smaller by the
/// excess. The plan returned carries the graph's bytes, not the planner's estimate, and its
/// slow-tier tensors are those to prepare with
/// ([`PrepareOptions::slow_tensors`](npu_compute::graph::PrepareOptions)). Swaps are not made
/// (no runtime runs them yet), whatever `budget.swaps` says.
///
/// # Errors
/// [`FitError::Plan`] as [`plan`]; [`FitError::Graph`] when the graph cannot be prepared.
pub fn fit(
    model: &'static [u8],
    config: crate::SimConfig,
    list: &AccessList,
    budget: TierBudget,
) -> Result<TierPlan, FitError> {
    let mut asked = TierBudget {
        swaps: false,
        ..budget
    };
    let attempt = |asked: TierBudget| {
        let planned = plan(list, asked).map_err(FitError::Plan)?;
        as_prepared(model, config, list, budget, slow_tensors(&planned))
    };
    let mut best = attempt(asked)?;
    let mut excess = best.fast_bytes.saturating_sub(budget.fast_bytes);
    for _ in 1..FIT_ROUNDS {
        if best.fits || excess == 0 || asked.fast_bytes == 0 {
            break;
        }
        asked.fast_bytes = asked.fast_bytes.saturating_sub(excess.max(list.alignment));
        let p = attempt(asked)?;
        excess = p.fast_bytes.saturating_sub(budget.fast_bytes);
        if p.fits || p.fast_bytes < best.fast_bytes {
            best = p;
        }
    }
    Ok(best)
}

/// The plan the graph of `model` runs when prepared with `slow` in the slow tier: the tensors
/// it keeps there (those listed, and those sharing their memory), its bytes, and the cycles
/// predicted for them, judged against `budget`. What [`fit`] returns for its choice; also the
/// way to weigh a choice made otherwise (the passive policy's) by the same measure.
///
/// # Errors
/// As [`fit`].
pub fn as_prepared(
    model: &'static [u8],
    config: crate::SimConfig,
    list: &AccessList,
    budget: TierBudget,
    slow: &'static [u16],
) -> Result<TierPlan, FitError> {
    let (report, moved) = runner::plan_tiered(model, config, slow).map_err(FitError::Graph)?;
    let choices: Vec<Choice> = list
        .tensors
        .iter()
        .map(|t| match moved.contains(&t.tensor) {
            true => Choice::Slow,
            false => Choice::Whole,
        })
        .collect();
    let timeline = Timeline::of(list).map_err(FitError::Plan)?;
    let no_copies = |_: u32| 0;
    let ran = evaluate(list, &timeline, &choices, budget, &no_copies).map_err(FitError::Plan)?;
    let mut p = finish(list, choices, ran, budget);
    p.fast_bytes = report.activation_bytes;
    p.slow_bytes = report.slow_bytes;
    p.fits = p.fast_bytes <= budget.fast_bytes && p.slow_bytes <= budget.slow_bytes;
    Ok(p)
}

/// The tensors `p` keeps in the slow tier, as the graph takes them (leaked: a host tool
/// prepares a handful of plans).
pub fn slow_tensors(p: &TierPlan) -> &'static [u16] {
    let slow: Vec<u16> = p
        .tensors
        .iter()
        .filter(|t| t.choice == Choice::Slow)
        .map(|t| t.tensor)
        .collect();
    Box::leak(slow.into_boxed_slice())
}
