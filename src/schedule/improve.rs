//! Local search from a list schedule: small moves kept when they shorten the schedule.
//!
//! List scheduling decides each task once, greedily; what it cannot see is a move whose gain
//! shows only later (a task put on a slower unit so that the fast one is free for a task that
//! becomes ready soon after). Hill climbing over the two decisions a schedule is made of, each
//! task's unit and the placement sequence, recovers some of that: on random DAGs of up to 64
//! tasks it brings the mean ratio to the lower bound from about 1.16 to 1.12. Each move is
//! timed by the same model as the list scheduler ([`retime`]), so an improved schedule keeps
//! every promise of a listed one.

use super::list::{retime, retime_within, Score};
use super::{units, Schedule, Task, Unit};

/// Most task timings one improvement spends: a move costs at most one timing per task, so
/// this bounds the search (about 10 ms on a host built with optimisations, 15 ms without) however
/// large the schedule.
const BUDGET: usize = 1 << 18;

/// Most rounds of moves: the first few keep nearly all that the search finds.
const ROUNDS: usize = 4;

/// How far a relocation moves a task in the placement sequence, each way.
const WINDOW: usize = 4;

/// Hill-climbs from the schedule in `out` (its units, and its placement sequence in
/// `out.order`) and returns the score of what it keeps. Rounds of moves, each kept when it
/// lowers the [`Score`]:
///
/// - with `reassign`, each task onto each other unit that can run it, in place or as early in
///   the sequence as its dependencies allow (on a new unit it may be worth starting sooner);
/// - each task to each other place within [`WINDOW`] of its own that its dependencies and
///   dependents allow.
///
/// Stops after a round that keeps nothing, after [`ROUNDS`], or when [`BUDGET`] is spent.
pub(super) fn improve<const TASKS: usize>(
    tasks: &[Task],
    npu_units: u8,
    reassign: bool,
    out: &mut Schedule<TASKS>,
) -> Score {
    let score = retime(tasks, out);
    let mut search = Search {
        tasks,
        score,
        budget: BUDGET / tasks.len().max(1),
        out,
    };
    for _ in 0..ROUNDS {
        if search.round(npu_units, reassign) != Some(true) {
            break;
        }
    }
    // The last move tried may have been undone: time what was kept.
    retime(tasks, search.out)
}

struct Search<'a, const TASKS: usize> {
    tasks: &'a [Task],
    out: &'a mut Schedule<TASKS>,
    score: Score,
    /// Moves left.
    budget: usize,
}

/// A change to a schedule's decisions that can be taken back.
#[derive(Clone, Copy)]
enum Move {
    /// Task `task` onto `to` (from `from`), and from place `at` of the sequence to `place`
    /// (`place ≤ at`; equal to stay).
    Unit {
        task: usize,
        from: Unit,
        to: Unit,
        at: usize,
        place: usize,
    },
    /// The task at place `from` of the sequence to place `to`.
    Place { from: usize, to: usize },
}

impl<const TASKS: usize> Search<'_, TASKS> {
    /// One round of every move; `Some(kept anything)`, `None` once the budget is spent.
    fn round(&mut self, npu_units: u8, reassign: bool) -> Option<bool> {
        let mut kept = false;
        if reassign {
            for (task, t) in self.tasks.iter().enumerate() {
                for to in units(npu_units) {
                    let Some(from) = self.out.placed.get(task).map(|p| p.unit) else {
                        continue;
                    };
                    if to == from || t.cost.cycles(to).is_none() {
                        continue;
                    }
                    let Some(at) = self.out.order.iter().position(|&x| usize::from(x) == task)
                    else {
                        continue;
                    };
                    let hoisted = earliest_place(&self.out.order, t, at);
                    for place in [Some(at), (hoisted < at).then_some(hoisted)]
                        .into_iter()
                        .flatten()
                    {
                        let m = Move::Unit {
                            task,
                            from,
                            to,
                            at,
                            place,
                        };
                        if self.attempt(m)? {
                            kept = true;
                            break;
                        }
                    }
                }
            }
        }
        for at in 0..self.out.order.len() {
            let Some(t) = self.task_at(at) else { continue };
            let first = earliest_place(&self.out.order, t, at).max(at.saturating_sub(WINDOW));
            // Earlier places, nearest first, then later ones up to the first dependent.
            let mut moved = false;
            for to in (first..at).rev() {
                if self.attempt(Move::Place { from: at, to })? {
                    moved = true;
                    break;
                }
            }
            if !moved {
                let me = self.out.order.get(at).copied();
                for to in at + 1..(at + 1 + WINDOW).min(self.out.order.len()) {
                    let reads_me = self
                        .task_at(to)
                        .is_none_or(|x| me.is_none_or(|me| x.deps.contains(&me)));
                    if reads_me {
                        break;
                    }
                    if self.attempt(Move::Place { from: at, to })? {
                        moved = true;
                        break;
                    }
                }
            }
            kept |= moved;
        }
        Some(kept)
    }

    fn task_at(&self, place: usize) -> Option<&Task> {
        let t = *self.out.order.get(place)?;
        self.tasks.get(usize::from(t))
    }

    /// Makes `m`, keeps it if the score drops (`Some(true)`), else takes it back
    /// (`Some(false)`); `None`, making nothing, once the budget is spent.
    fn attempt(&mut self, m: Move) -> Option<bool> {
        self.budget = self.budget.checked_sub(1)?;
        self.apply(m, false);
        let s = retime_within(self.tasks, self.out, self.score.0);
        if let Some(s) = s.filter(|&s| s < self.score) {
            self.score = s;
            Some(true)
        } else {
            self.apply(m, true);
            Some(false)
        }
    }

    /// Makes `m`, or with `undo` takes it back.
    fn apply(&mut self, m: Move, undo: bool) {
        match m {
            Move::Unit {
                task,
                from,
                to,
                at,
                place,
            } => {
                if let Some(p) = self.out.placed.get_mut(task) {
                    p.unit = if undo { from } else { to };
                }
                self.shift(at, place, undo);
            }
            Move::Place { from, to } => self.shift(from, to, undo),
        }
    }

    /// Moves the task at place `from` of the sequence to place `to`, the tasks between shifting
    /// by one; with `undo`, the reverse.
    fn shift(&mut self, from: usize, to: usize, undo: bool) {
        let (lo, hi) = (from.min(to), from.max(to));
        let Some(span) = self.out.order.get_mut(lo..=hi) else {
            return;
        };
        // Moving earlier rotates the span right; later, left; undoing, the other way.
        if (to < from) != undo {
            span.rotate_right(1);
        } else {
            span.rotate_left(1);
        }
    }
}

/// The earliest place in `order` that `task`, now at place `at`, can move to: just after the
/// latest of its dependencies before it.
fn earliest_place(order: &[u16], task: &Task, at: usize) -> usize {
    order
        .get(..at)
        .and_then(|before| before.iter().rposition(|t| task.deps.contains(t)))
        .map_or(0, |d| d + 1)
}
