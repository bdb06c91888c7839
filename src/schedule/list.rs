//! List scheduling: tasks placed one at a time onto the units, with the shared memory ports
//! reserved as they are placed.

use super::bound::bottom_levels;
use super::improve::improve;
use super::{check, units, Placed, Policy, Schedule, ScheduleError, Task, TaskCost, Unit};
use crate::hal::{Cycles, MAX_EXECUTION_UNITS};

/// How a task's unit is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Assign {
    /// The unit where it ends earliest, given what is placed ([`Policy::CostEffective`]).
    EarliestEnd,
    /// The unit where it alone is fastest ([`Policy::FastestAlone`]).
    FastestAlone,
}

/// Which ready task is placed next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    /// The highest bottom level: the critical path first.
    CriticalPath,
    /// The earliest start, as it would be placed.
    EarliestStart,
    /// The earliest end, as it would be placed.
    EarliestEnd,
}

const PICKS: [Pick; 3] = [Pick::CriticalPath, Pick::EarliestStart, Pick::EarliestEnd];

/// Schedules `tasks` on `npu_units` NPU units and the CPU by `policy` (the
/// [module docs](super) describe the algorithm and the contention model).
///
/// Tasks come in a topological order: each depends only on tasks before it. Entries of
/// [`TaskCost::npu`] at or past `npu_units` are ignored.
///
/// Errors: [`ScheduleError::Units`] if `npu_units` is 0 or above
/// [`MAX_EXECUTION_UNITS`]; [`ScheduleError::CapacityExceeded`] for more than `TASKS` tasks;
/// [`ScheduleError::BadDependency`] for a dependency on the task itself or a later one;
/// [`ScheduleError::Unrunnable`] for a task no unit can run.
pub fn schedule<const TASKS: usize>(
    tasks: &[Task],
    npu_units: u8,
    policy: Policy,
) -> Result<Schedule<TASKS>, ScheduleError> {
    check::<TASKS>(tasks, npu_units)?;
    let mut levels = [0; TASKS];
    bottom_levels(tasks, npu_units, &mut levels);
    let mut out = Schedule {
        placed: heapless::Vec::new(),
        order: heapless::Vec::new(),
        npu_units,
    };
    let fastest =
        |out: &mut Schedule<TASKS>| plan(tasks, npu_units, &[Assign::FastestAlone], &levels, out);
    match policy {
        Policy::FastestAlone => {
            fastest(&mut out);
        }
        Policy::CostEffective => {
            // Its own plan starts from the fastest-alone list schedules too, but the two
            // improvements can end apart: the fastest-alone plan is made first and made
            // again if it is the better one, so that cost-effective is never the worse.
            let alone = fastest(&mut out);
            let effective = plan(
                tasks,
                npu_units,
                &[Assign::EarliestEnd, Assign::FastestAlone],
                &levels,
                &mut out,
            );
            if alone < effective {
                fastest(&mut out);
            }
        }
    }
    submission_order(tasks, &mut out);
    Ok(out)
}

/// A schedule's score, smaller is better: its makespan, then the sum of its tasks' ends (of two
/// schedules as long, the one whose tasks finish sooner).
pub(super) type Score = (Cycles, u128);

/// Places the tasks into `out` by the best of the list schedules that `assigns` and every
/// [`Pick`] give, improves it ([`improve`], with unit changes only if `assigns` includes
/// [`Assign::EarliestEnd`]), and returns its score. Leaves the placement order in `out.order`.
fn plan<const TASKS: usize>(
    tasks: &[Task],
    npu_units: u8,
    assigns: &[Assign],
    levels: &[Cycles; TASKS],
    out: &mut Schedule<TASKS>,
) -> Score {
    // Each try writes into `out` and only the scores are kept; the best try is run again
    // unless it was the last, so that no second schedule is held in memory.
    let tries = assigns
        .iter()
        .flat_map(|&a| PICKS.iter().map(move |&p| (a, p)));
    let mut best: Option<(Score, (Assign, Pick))> = None;
    let mut last = None;
    for (assign, pick) in tries {
        let makespan = place(tasks, npu_units, assign, pick, levels, out);
        let ends = out.placed.iter().map(|p| u128::from(p.end)).sum::<u128>();
        if best.is_none_or(|(m, _)| (makespan, ends) < m) {
            best = Some(((makespan, ends), (assign, pick)));
        }
        last = Some((assign, pick));
    }
    if let Some((_, (assign, pick))) = best {
        if last != Some((assign, pick)) {
            place(tasks, npu_units, assign, pick, levels, out);
        }
    }
    improve(
        tasks,
        npu_units,
        assigns.contains(&Assign::EarliestEnd),
        out,
    )
}

/// The units' and ports' state while tasks are placed.
struct Clock {
    /// When each NPU unit is free.
    npu_free: [Cycles; MAX_EXECUTION_UNITS],
    cpu_free: Cycles,
    sram_free: Cycles,
    flash_free: Cycles,
    /// The weight pipeline: where its layer sequence ends and where its weight DMA is free,
    /// on its own timeline (see the module docs).
    pipe_end: Cycles,
    dma_free: Cycles,
    /// The end of the latest CPU task that a placed NPU task reads: the runtime submits the NPU
    /// tasks placed after that one only once it has computed that CPU task, so none of them
    /// starts earlier.
    cpu_floor: Cycles,
}

/// A task tried on one unit: where it would run and the ends of its port reservations (`None`
/// where it reserves nothing).
#[derive(Clone, Copy, Debug)]
struct Trial {
    placed: Placed,
    sram_end: Option<Cycles>,
    flash_end: Option<Cycles>,
    dma_end: Option<Cycles>,
    pipe_end: Option<Cycles>,
}

impl Clock {
    const fn new() -> Self {
        Clock {
            npu_free: [0; MAX_EXECUTION_UNITS],
            cpu_free: 0,
            sram_free: 0,
            flash_free: 0,
            pipe_end: 0,
            dma_free: 0,
            cpu_floor: 0,
        }
    }

    /// `cost` on `unit` with its dependencies done at `ready`; `None` if it cannot run there.
    fn try_on(&self, cost: &TaskCost, ready: Cycles, unit: Unit) -> Option<Trial> {
        let cycles = cost.cycles(unit)?;
        match unit {
            Unit::Cpu => {
                let start = ready.max(self.cpu_free);
                Some(Trial {
                    placed: Placed {
                        unit,
                        start,
                        end: start.saturating_add(cycles),
                    },
                    sram_end: None,
                    flash_end: None,
                    dma_end: None,
                    pipe_end: None,
                })
            }
            Unit::Npu(n) => {
                let free = *self.npu_free.get(usize::from(n))?;
                // The weight pipeline charges the task its cycles plus any wait for its copy.
                let dma_end = reserve(0, self.dma_free, cost.prefetch_cycles);
                let pipe_start = self.pipe_end.max(dma_end.unwrap_or(0));
                let pipe_end = pipe_start.saturating_add(cycles);
                let cycles = pipe_end - self.pipe_end;
                let start = ready.max(free).max(self.cpu_floor);
                let sram_end = reserve(start, self.sram_free, cost.sram_cycles);
                let flash_end = reserve(start, self.flash_free, cost.flash_cycles);
                let end = start
                    .saturating_add(cycles)
                    .max(sram_end.unwrap_or(0))
                    .max(flash_end.unwrap_or(0));
                Some(Trial {
                    placed: Placed { unit, start, end },
                    sram_end,
                    flash_end,
                    dma_end,
                    pipe_end: Some(pipe_end),
                })
            }
        }
    }

    /// Where `assign` puts `cost`, ready at `ready`; `None` if no unit can run it.
    fn choose(
        &self,
        cost: &TaskCost,
        ready: Cycles,
        assign: Assign,
        npu_units: u8,
    ) -> Option<Trial> {
        match assign {
            // Strictly earlier wins, so ties go to the first unit in `units` order.
            Assign::EarliestEnd => units(npu_units)
                .filter_map(|u| self.try_on(cost, ready, u))
                .fold(None, |best: Option<Trial>, t| match best {
                    Some(b) if b.placed.end <= t.placed.end => Some(b),
                    _ => Some(t),
                }),
            Assign::FastestAlone => {
                let unit = fastest_alone(cost, npu_units)?;
                self.try_on(cost, ready, unit)
            }
        }
    }

    /// Places `t`, whose CPU dependencies end by `cpu_deps_end` (0 if it has none).
    fn commit(&mut self, t: &Trial, cpu_deps_end: Cycles) {
        match t.placed.unit {
            Unit::Cpu => self.cpu_free = t.placed.end,
            Unit::Npu(n) => {
                if let Some(free) = self.npu_free.get_mut(usize::from(n)) {
                    *free = t.placed.end;
                }

                self.cpu_floor = self.cpu_floor.max(cpu_deps_end);
            }
        }
        if let Some(e) = t.sram_end {
            self.sram_free = e;
        }
        if let Some(e) = t.flash_end {
            self.flash_free = e;
        }
        if let Some(e) = t.dma_end {
            self.dma_free = e;
        }
        if let Some(e) = t.pipe_end {
            self.pipe_end = e;
        }
    }
}

/// When `task`'s dependencies are all done, and when those on the CPU are, in `placed` (0 where
/// it has none).
fn inputs(task: &Task, placed: &[Placed]) -> (Cycles, Cycles) {
    let (mut ready, mut cpu) = (0, 0);
    for p in task.deps.iter().filter_map(|&d| placed.get(usize::from(d))) {
        ready = ready.max(p.end);
        if p.unit == Unit::Cpu {
            cpu = cpu.max(p.end);
        }
    }
    (ready, cpu)
}

/// The end of a reservation of `len` cycles on a port free at `free`, for a task starting at
/// `start`; `None` for an empty one, which neither waits for the port nor moves it.
fn reserve(start: Cycles, free: Cycles, len: Cycles) -> Option<Cycles> {
    (len != 0).then(|| start.max(free).saturating_add(len))
}

/// The unit where `cost` alone is shortest ([`TaskCost::alone`]); ties to the first unit.
fn fastest_alone(cost: &TaskCost, npu_units: u8) -> Option<Unit> {
    units(npu_units)
        .filter_map(|u| Some((cost.alone(u)?, u)))
        .fold(None, |best: Option<(Cycles, Unit)>, (c, u)| match best {
            Some((b, _)) if b <= c => best,
            _ => Some((c, u)),
        })
        .map(|(_, u)| u)
}

/// One try: places every task into `out` by `assign` and `pick`, records the placement order
/// in `out.order`, and returns the makespan.
///
/// `tasks` were checked: dependencies point backwards, every task runs somewhere, and there
/// are at most `TASKS`.
fn place<const TASKS: usize>(
    tasks: &[Task],
    npu_units: u8,
    assign: Assign,
    pick: Pick,
    levels: &[Cycles; TASKS],
    out: &mut Schedule<TASKS>,
) -> Cycles {
    const UNSET: Placed = Placed {
        unit: Unit::Cpu,
        start: 0,
        end: 0,
    };
    out.placed.clear();
    out.order.clear();
    // Room for every task was checked; `done` says which entries are real yet.
    for _ in tasks {
        let _ = out.placed.push(UNSET);
    }
    let mut done = [false; TASKS];
    let mut clock = Clock::new();
    let mut makespan = 0;
    // Every task below `first` is placed: the scan for ready tasks starts there.
    let mut first = 0;
    for _ in 0..tasks.len() {
        while done.get(first) == Some(&true) {
            first += 1;
        }
        let ready = |t: &Task| {
            t.deps.iter().try_fold(0, |r: Cycles, &d| {
                let d = usize::from(d);
                done.get(d)
                    .copied()
                    .unwrap_or(false)
                    .then(|| out.placed.get(d).map_or(r, |p| r.max(p.end)))
            })
        };
        // The key is (primary, then MAX − bottom level, then the index): the smallest wins, so
        // of equal primaries the higher bottom level goes first, and of equal tasks the lower
        // index.
        let mut chosen: Option<((Cycles, Cycles, usize), usize, Cycles)> = None;
        for (i, t) in tasks.iter().enumerate().skip(first) {
            if done.get(i) != Some(&false) {
                continue;
            }
            let Some(at) = ready(t) else { continue };
            let behind = Cycles::MAX - levels.get(i).copied().unwrap_or(0);
            let key = match pick {
                Pick::CriticalPath => (behind, 0, i),
                Pick::EarliestStart | Pick::EarliestEnd => {
                    let Some(trial) = clock.choose(&t.cost, at, assign, npu_units) else {
                        continue;
                    };
                    let p = trial.placed;
                    let primary = if pick == Pick::EarliestStart {
                        p.start
                    } else {
                        p.end
                    };
                    (primary, behind, i)
                }
            };
            if chosen.is_none_or(|(k, _, _)| key < k) {
                chosen = Some((key, i, at));
            }
        }
        // The lowest unplaced task is always ready (its dependencies are below it), so a task
        // is chosen while any is left; stopping would leave tasks unplaced, never misplace one.
        let Some((_, i, at)) = chosen else { break };
        let Some(task) = tasks.get(i) else { break };
        let Some(trial) = clock.choose(&task.cost, at, assign, npu_units) else {
            break;
        };
        let (_, cpu_deps_end) = inputs(task, &out.placed);
        clock.commit(&trial, cpu_deps_end);
        if let Some(p) = out.placed.get_mut(i) {
            *p = trial.placed;
        }
        if let Some(d) = done.get_mut(i) {
            *d = true;
        }
        // i < TASKS ≤ MAX_TASKS and the order holds one entry per task.
        let _ = out.order.push(u16::try_from(i).unwrap_or(u16::MAX));
        makespan = makespan.max(trial.placed.end);
    }
    makespan
}

/// Turns the placement order in `out.order` into the submission order: NPU tasks in placement
/// order, each CPU task just before the first NPU task that reads it, or at the end (the
/// [module docs](super) say why).
///
/// CPU tasks keep their placement order, so one is emitted with every CPU task placed before
/// it; `next` is where the scan for them resumes, so the merge is one pass over the placements.
fn submission_order<const TASKS: usize>(tasks: &[Task], out: &mut Schedule<TASKS>) {
    let placement = core::mem::take(&mut out.order);
    let placed = &out.placed;
    let on_cpu = |t: u16| {
        placed
            .get(usize::from(t))
            .is_some_and(|p| p.unit == Unit::Cpu)
    };
    // Position of each task in the placement order, to tell whether a CPU task is emitted yet.
    let mut position = [0u16; TASKS];
    for (k, &t) in placement.iter().enumerate() {
        if let Some(slot) = position.get_mut(usize::from(t)) {
            // k < TASKS ≤ MAX_TASKS.
            *slot = u16::try_from(k).unwrap_or(u16::MAX);
        }
    }
    let order = &mut out.order;
    let mut next = 0;
    // Emits the CPU tasks of `placement[next..through]` (`through` inclusive) and moves past.
    let mut flush = |through: usize, order: &mut heapless::Vec<u16, TASKS>| {
        while next <= through {
            let Some(&t) = placement.get(next) else { break };
            next += 1;
            if on_cpu(t) {
                // One entry per task: the order had room for them all before.
                let _ = order.push(t);
            }
        }
    };
    for &t in &placement {
        if on_cpu(t) {
            continue;
        }
        let cpu_deps = tasks
            .get(usize::from(t))
            .into_iter()
            .flat_map(|task| task.deps.iter().copied())
            .filter(|&d| on_cpu(d));
        if let Some(last) = cpu_deps
            .filter_map(|d| position.get(usize::from(d)).copied())
            .max()
        {
            flush(usize::from(last), order);
        }
        let _ = order.push(t);
    }
    flush(usize::MAX, order);
}

/// The makespan of `s` replayed after itself: the units and ports free at cycle 0 again, the
/// weight pipeline as the first replay left it (see [`Schedule::steady_makespan`]).
pub(super) fn steady_makespan<const TASKS: usize>(tasks: &[Task], s: &Schedule<TASKS>) -> Cycles {
    let mut placed = s.placed.clone();
    let mut clock = Clock::new();
    let mut makespan = 0;
    for _ in 0..2 {
        // Only the pipeline carries over: its charges depend on where its DMA is free against
        // where its layer sequence ends, not on the units' clock.
        clock = Clock {
            pipe_end: clock.pipe_end,
            dma_free: clock.dma_free,
            ..Clock::new()
        };
        makespan = 0;
        for &t in &s.order {
            let i = usize::from(t);
            let (Some(task), Some(unit)) = (tasks.get(i), placed.get(i).map(|p| p.unit)) else {
                continue;
            };
            let (ready, cpu_deps_end) = inputs(task, &placed);
            let Some(trial) = clock.try_on(&task.cost, ready, unit) else {
                continue;
            };
            clock.commit(&trial, cpu_deps_end);
            if let Some(p) = placed.get_mut(i) {
                *p = trial.placed;
            }
            makespan = makespan.max(trial.placed.end);
        }
    }
    makespan
}

/// Times the placement sequence in `out.order` with the units in `out.placed`, writing the
/// times; returns the makespan and the sum of the ends.
pub(super) fn retime<const TASKS: usize>(tasks: &[Task], out: &mut Schedule<TASKS>) -> Score {
    // With no limit, every task is timed.
    retime_within(tasks, out, Cycles::MAX).unwrap_or((Cycles::MAX, u128::MAX))
}

/// [`retime`], given up (`None`) as soon as a task ends after `limit`: a search needs only
/// to know that a move is worse, and stopping there saves most of the work of a bad move.
/// The times written are then partial.
pub(super) fn retime_within<const TASKS: usize>(
    tasks: &[Task],
    out: &mut Schedule<TASKS>,
    limit: Cycles,
) -> Option<Score> {
    let mut clock = Clock::new();
    let (mut makespan, mut ends) = (0, 0u128);
    for &t in &out.order {
        let i = usize::from(t);
        let (Some(task), Some(unit)) = (tasks.get(i), out.placed.get(i).map(|p| p.unit)) else {
            continue;
        };
        let (ready, cpu_deps_end) = inputs(task, &out.placed);
        let Some(trial) = clock.try_on(&task.cost, ready, unit) else {
            continue;
        };
        if trial.placed.end > limit {
            return None;
        }
        clock.commit(&trial, cpu_deps_end);
        if let Some(p) = out.placed.get_mut(i) {
            *p = trial.placed;
        }
        makespan = makespan.max(trial.placed.end);
        ends += u128::from(trial.placed.end);
    }
    Some((makespan, ends))
}
