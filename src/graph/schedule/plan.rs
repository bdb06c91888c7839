//! The planner of a graph's static schedule (see the [parent module](super)): task sets,
//! their costs and dependencies, the list scheduler's schedule, and following it or a table.

use core::cmp::Ordering;

use super::super::cut::Cut;
use super::super::schedule_table::GraphTableError;
use super::super::{not_one_op, Graph, GraphError, Step, StepOperand};
use super::{Band, ScheduleReport, Scheduling};
use crate::channel::ComputeChannel;
use crate::client::Tensor;
use crate::error::Error;
use crate::hal::{Cycles, Estimate, MAX_EXECUTION_UNITS, MAX_JOB_INPUTS};
use crate::ops::Op;
use crate::schedule::{self as sched, Policy, Task, TaskCost, Unit};
use crate::server::Placement;

/// Where a task reads and writes the graph's pool: `(offset, len)` byte ranges.
#[derive(Clone, Debug, Default)]
struct Access {
    reads: heapless::Vec<(u32, u32), MAX_JOB_INPUTS>,
    writes: heapless::Vec<(u32, u32), 2>,
}

impl Access {
    fn meets(a: &[(u32, u32)], b: &[(u32, u32)]) -> bool {
        a.iter().any(|&(ao, al)| {
            b.iter().any(|&(bo, bl)| {
                al != 0
                    && bl != 0
                    && u64::from(ao) < u64::from(bo) + u64::from(bl)
                    && u64::from(bo) < u64::from(ao) + u64::from(al)
            })
        })
    }

    /// Whether `self` (later) must wait for `earlier`.
    fn conflicts(&self, earlier: &Access) -> bool {
        Self::meets(&earlier.writes, &self.reads)
            || Self::meets(&earlier.writes, &self.writes)
            || Self::meets(&earlier.reads, &self.writes)
    }
}

/// One task being planned.
#[derive(Clone, Debug)]
pub(super) struct Draft {
    pub(super) step: u16,
    /// Output rows of a band, `None` for the whole operator.
    pub(super) rows: Option<(u32, u32)>,
    access: Access,
    task: Task,
}

/// A task set and its schedule.
struct Candidate<const OPS: usize> {
    drafts: heapless::Vec<Draft, OPS>,
    schedule: sched::Schedule<OPS>,
    /// Its makespan at every invoke but the first
    /// ([`Schedule::steady_makespan`](sched::Schedule::steady_makespan)).
    steady: Cycles,
}

impl<const OPS: usize> Candidate<OPS> {
    /// What candidates are compared by, smaller is better: a model is invoked again and again,
    /// so the steady invoke first, then the first.
    fn score(&self) -> (Cycles, Cycles) {
        (self.steady, self.schedule.makespan())
    }
}

/// A task set the scheduler could not take (dependencies over [`MAX_TASK_DEPS`], or more
/// tasks than `OPS`): that alternative is dropped.
struct Unschedulable;

/// What a graph keeps of the static schedule it follows, for [`Graph::export_schedule`].
pub(in crate::graph) struct Kept<const OPS: usize> {
    /// The model, for the schedule table's fingerprint.
    model: &'static [u8],
    /// For each task of the static schedule (in the scheduler's task order), its step.
    task_steps: heapless::Vec<u16, OPS>,
    /// The static schedule.
    plan: Option<sched::Schedule<OPS>>,
}

impl<const OPS: usize> Kept<OPS> {
    /// Nothing followed yet, for `model`.
    pub(in crate::graph) fn new(model: &'static [u8]) -> Self {
        Kept {
            model,
            task_steps: heapless::Vec::new(),
            plan: None,
        }
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// Plans the schedule (see the module docs); called at the end of prepare.
    pub(in crate::graph) fn plan_schedule(
        &mut self,
        scheduling: Scheduling,
        policy: Policy,
    ) -> Result<(), GraphError> {
        self.schedule = ScheduleReport {
            scheduling,
            ..ScheduleReport::default()
        };
        if scheduling == Scheduling::Dynamic || !self.striped().is_empty() {
            return Ok(());
        }
        let caps = self.client.capabilities().map_err(not_one_op)?;
        let units = caps.execution_units.clamp(1, MAX_EXECUTION_UNITS as u8);
        let pool = match &self.pool {
            Some(pool) => pool.clone(),
            None => return Ok(()),
        };
        // Decided before the planner's tables exist: they take tens of kB of stack (task
        // sets and schedules of OPS tasks), for nothing where the HAL gives no estimates.
        if !self.estimates_given(&pool, units)? {
            return Ok(());
        }
        self.plan_with_estimates(&pool, units, caps.alignment.max(1), scheduling, policy)
    }

    /// Whether the HAL estimates the first operator that runs (`candidate` needs every
    /// operator's estimates, so without it no schedule can be made). As `candidate`, a stack
    /// too small to place its tensors makes no schedule.
    fn estimates_given(&self, pool: &Tensor<'c, C>, units: u8) -> Result<bool, GraphError> {
        let Some(si) = self
            .steps
            .iter()
            .position(|s| s.op.is_some() && !s.in_place)
        else {
            return Ok(false);
        };
        let costs = self.place_step(si, pool).and_then(|views| {
            let view = |t: u16| views.iter().find(|(u, _)| *u == t).map(|(_, v)| v);
            let step = &self.steps[si];
            let refs = self.operands_with(si, 0, view)?;
            let out = view(step.output)
                .ok_or(self.failed(si)(Error::StaleHandle { index: step.output }))?;
            match &step.op {
                Some(op) => self.costs(si, op, &refs, out, units),
                None => Ok(None),
            }
        });
        match costs {
            Ok(cost) => Ok(cost.is_some()),
            Err(GraphError::Compute {
                error: Error::CapacityExceeded { .. } | Error::OutOfMemory { .. },
                ..
            }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The step's activations placed in the pool, for as long as it is costed.
    fn place_step(
        &self,
        si: usize,
        pool: &Tensor<'c, C>,
    ) -> Result<heapless::Vec<(u16, Tensor<'c, C>), { MAX_JOB_INPUTS + 1 }>, GraphError> {
        let step = &self.steps[si];
        let mut views = heapless::Vec::new();
        let tensors = step.operands.iter().filter_map(|o| match *o {
            StepOperand::Tensor(t) => Some(t),
            StepOperand::Aux(_) => None,
        });
        for t in tensors.chain(core::iter::once(step.output)) {
            let slot = &self.tensors[usize::from(t)];
            if slot.kept() || views.iter().any(|(u, _)| *u == t) {
                continue;
            }
            let view = self
                .client
                .place(self.pool_of(pool, slot), slot.offset, slot.bytes.max(1));
            let _ = views.push((t, view.map_err(self.failed(si))?));
        }
        Ok(views)
    }

    /// The planner proper: the shortest schedule of the task sets worth trying, followed.
    /// Out of line, so that its tables are on the stack only while it runs.
    #[inline(never)]
    fn plan_with_estimates(
        &mut self,
        pool: &Tensor<'c, C>,
        units: u8,
        alignment: u32,
        scheduling: Scheduling,
        policy: Policy,
    ) -> Result<(), GraphError> {
        // (split, one operator at a time)
        let tries: &[(bool, bool)] = match scheduling {
            Scheduling::OpByOp => &[(true, true)],
            // One unit splits nothing: the three task sets are the operators whole, twice
            // ordered by memory and once one at a time, which adds only waits.
            _ if units == 1 => &[(false, false)],
            _ => &[(false, false), (true, false), (true, true)],
        };
        let mut best: Option<Candidate<OPS>> = None;
        for &(split, chain) in tries {
            let c = match self.candidate(pool, units, alignment, (split, chain), policy) {
                Ok(Some(c)) => c,
                Ok(None) => continue,
                // Planning places a step's tensors to ask for its costs: a stack too small for
                // that runs without a static schedule rather than not at all.
                Err(GraphError::Compute {
                    error: Error::CapacityExceeded { .. } | Error::OutOfMemory { .. },
                    ..
                }) => continue,
                Err(e) => return Err(e),
            };
            if best.as_ref().is_none_or(|b| c.score() < b.score()) {
                best = Some(c);
            }
        }
        if let Some(best) = best {
            self.follow(best, units)?;
        }
        Ok(())
    }

    /// One task set with its schedule; `None` where the HAL gives no estimates or the
    /// scheduler cannot take it.
    fn candidate(
        &self,
        pool: &Tensor<'c, C>,
        units: u8,
        alignment: u32,
        (split, chain): (bool, bool),
        policy: Policy,
    ) -> Result<Option<Candidate<OPS>>, GraphError> {
        let mut drafts: heapless::Vec<Draft, OPS> = heapless::Vec::new();
        let model_steps = self.steps.len();
        let mut bands_left = OPS.saturating_sub(model_steps);
        for si in 0..model_steps {
            let step = &self.steps[si];
            let Some(op) = &step.op else { continue };
            if step.in_place {
                continue;
            }
            let views = self.place_step(si, pool)?;
            let view = |t: u16| views.iter().find(|(u, _)| *u == t).map(|(_, v)| v);
            let refs = self.operands_with(si, 0, view)?;
            let out = view(step.output)
                .ok_or(self.failed(si)(Error::StaleHandle { index: step.output }))?;
            let whole = match self.costs(si, op, &refs, out, units)? {
                Some(cost) => cost,
                None => return Ok(None),
            };
            let first_of_step = drafts.len();
            let bands = if split && units > 1 && bands_left >= usize::from(units) {
                self.bands(si, op, pool, &refs, (units, &whole), alignment)?
            } else {
                None
            };
            let use_bands = bands.as_ref().is_some_and(|b| {
                let slowest = b.iter().filter_map(|d| cheapest(&d.task.cost, units)).max();
                chain || slowest < cheapest(&whole, units)
            });
            match bands {
                Some(bands) if use_bands => {
                    bands_left -= bands.len() - 1;
                    for d in bands {
                        if drafts.push(d).is_err() {
                            return Ok(None);
                        }
                    }
                }
                _ => {
                    let access = self.access(si, None);
                    let task = Task {
                        deps: heapless::Vec::new(),
                        cost: whole,
                    };
                    let draft = Draft {
                        step: si as u16,
                        rows: None,
                        access,
                        task,
                    };
                    if drafts.push(draft).is_err() {
                        return Ok(None);
                    }
                }
            }
            let (head, tail) = drafts.split_at_mut(first_of_step);
            for d in tail.iter_mut() {
                if chain {
                    if depend_on_previous_step(head, &mut d.task).is_err() {
                        return Ok(None);
                    }
                } else if depend_by_memory(head, d).is_err() {
                    return Ok(None);
                }
            }
        }
        let tasks: heapless::Vec<Task, OPS> = drafts.iter().map(|d| d.task.clone()).collect();
        match sched::schedule::<OPS>(&tasks, units, policy) {
            Ok(schedule) => Ok(Some(Candidate {
                steady: schedule.steady_makespan(&tasks),
                drafts,
                schedule,
            })),
            Err(_) => Ok(None),
        }
    }

    /// A whole operator's cost on every unit that can run it: the NPU units where the NPU
    /// runs it, and the CPU. `None` where the HAL gives no estimate.
    fn costs(
        &self,
        si: usize,
        op: &Op,
        refs: &[&Tensor<'c, C>],
        out: &Tensor<'c, C>,
        units: u8,
    ) -> Result<Option<TaskCost>, GraphError> {
        let failed = self.failed(si);
        let mut cost = TaskCost::NONE;
        let on_npu = self.client.capabilities().map_err(&failed)?.ops.runs(op);
        if on_npu {
            for u in 0..units {
                let Some(e) = self
                    .client
                    .estimate(Placement::Unit(u), op, refs, out)
                    .map_err(&failed)?
                else {
                    return Ok(None);
                };
                set_npu(&mut cost, u, e);
            }
        }
        // The CPU takes the operators the NPU lacks. It could take others where it finishes
        // first, but its estimate and the NPU's are made by different models (the NPU's weight
        // pipeline is approximate on several units), and a wrong move there costs a whole
        // layer on the CPU: measured on the shared models, it lost more than it won.
        if !on_npu {
            match self
                .client
                .estimate(Placement::Cpu, op, refs, out)
                .map_err(&failed)?
            {
                Some(e) => cost.cpu = Some(e.cycles),
                None => return Ok(None),
            }
        }
        Ok(Some(cost))
    }

    /// Step `si` cut into one band per unit (see [`Cut`]); `None` where it cannot be cut. A
    /// band is placed at its slices' offsets, which must be aligned: each cut goes to one of
    /// the aligned places nearest the unit's share, the one whose two sides the HAL's
    /// estimates balance best (an input whose rows are not whole alignment units, such as a
    /// spectrogram's first layer, still has aligned rows every few).
    fn bands(
        &self,
        si: usize,
        op: &Op,
        pool: &Tensor<'c, C>,
        refs: &[&Tensor<'c, C>],
        (units, whole): (u8, &TaskCost),
        alignment: u32,
    ) -> Result<Option<heapless::Vec<Draft, MAX_EXECUTION_UNITS>>, GraphError> {
        if !self.runs_on_npu(si) {
            return Ok(None);
        }
        let Some(cut) = Cut::of(op) else {
            return Ok(None);
        };
        let failed = self.failed(si);
        let height = cut.len();
        let cut_at = |r: u32| self.band_aligned(si, op, cut, r..height, alignment);
        // Each unit's share: its speed on this operator, by the HAL's estimates of the whole
        // operator on it (an elementwise operator runs in the output stage, which a larger MAC
        // array does not speed up).
        let mut weights = [1u64; MAX_EXECUTION_UNITS];
        for (u, w) in weights.iter_mut().enumerate().take(usize::from(units)) {
            let cycles = whole
                .alone(Unit::Npu(u as u8))
                .unwrap_or(Cycles::MAX)
                .max(1);
            *w = (1u64 << 40) / cycles;
        }
        let total: u64 = weights[..usize::from(units)].iter().sum();
        // What band `start..end` costs on unit `u`, and its task: `None` where it cannot be
        // cut there or the HAL cannot tell.
        let band_task = |u: u8, start: u32, end: u32| -> Result<Option<Draft>, GraphError> {
            let Some((band, in_rows)) = cut.band(op, start..end) else {
                return Ok(None);
            };
            let rows = Band {
                parent: si as u16,
                in_rows: (in_rows.start, in_rows.end),
                out_rows: (start, end),
            };
            let (slices, out_view) = self.band_views(pool, si, rows)?;
            let band_refs = super::super::run::sliced_refs(refs, &slices);
            let client = self.client;
            let Some(e) = client
                .estimate(Placement::Unit(u), &band, &band_refs, &out_view)
                .map_err(&failed)?
            else {
                return Ok(None);
            };
            let mut cost = TaskCost::NONE;
            set_npu(&mut cost, u, e);
            Ok(Some(Draft {
                step: si as u16,
                rows: Some((start, end)),
                access: self.access(si, Some((rows.in_rows, rows.out_rows))),
                task: Task {
                    deps: heapless::Vec::new(),
                    cost,
                },
            }))
        };
        let time = |d: &Draft, u: u8| d.task.cost.alone(Unit::Npu(u)).unwrap_or(Cycles::MAX);
        let mut cuts: heapless::Vec<u32, { MAX_EXECUTION_UNITS + 1 }> = heapless::Vec::new();
        let _ = cuts.push(0);
        let mut acc = 0u64;
        for u in 0..units - 1 {
            acc += weights[usize::from(u)];
            let ideal = (u64::from(height) * acc / total) as u32;
            let last = cuts.last().copied().unwrap_or(0);
            // The aligned rows nearest the ideal cut, strictly between the last cut and the
            // end; of those, the one whose band and the rest (on the next unit, scaled to the
            // units after this one) take the least time, by the HAL's estimates: block
            // shapes make a row more or less cost much more than a row's share.
            let rest: u64 = weights[usize::from(u) + 1..usize::from(units)].iter().sum();
            let next = weights[usize::from(u) + 1];
            let mut best: Option<(Cycles, u32)> = None;
            let mut tried = 0;
            for d in 0..height {
                for r in [ideal.checked_sub(d), ideal.checked_add(d).filter(|_| d > 0)]
                    .into_iter()
                    .flatten()
                {
                    if r <= last || r >= height || !cut_at(r) || tried >= 4 {
                        continue;
                    }
                    tried += 1;
                    let (Some(mine), Some(theirs)) =
                        (band_task(u, last, r)?, band_task(u + 1, r, height)?)
                    else {
                        continue;
                    };
                    let theirs = (u128::from(time(&theirs, u + 1)) * u128::from(next)
                        / u128::from(rest.max(1))) as Cycles;
                    let score = time(&mine, u).max(theirs);
                    if best.is_none_or(|(b, _)| score < b) {
                        best = Some((score, r));
                    }
                }
                if tried >= 4 {
                    break;
                }
            }
            match best {
                Some((_, r)) => {
                    let _ = cuts.push(r);
                }
                None => return Ok(None),
            }
        }
        let _ = cuts.push(height);
        let mut drafts = heapless::Vec::new();
        for (u, pair) in cuts.windows(2).enumerate() {
            let Some(draft) = band_task(u as u8, pair[0], pair[1])? else {
                return Ok(None);
            };
            // At most MAX_EXECUTION_UNITS bands.
            let _ = drafts.push(draft);
        }
        Ok(Some(drafts))
    }

    /// Whether band `units` of step `si`'s operator `op`, cut as `cut`, starts at aligned
    /// offsets: each slice it reads (of an activation in the graph's pool) and its slice of
    /// the output.
    fn band_aligned(
        &self,
        si: usize,
        op: &Op,
        cut: Cut,
        units: core::ops::Range<u32>,
        alignment: u32,
    ) -> bool {
        let step = &self.steps[si];
        let Some((_, in_units)) = cut.band(op, units.clone()) else {
            return false;
        };
        let in_at = cut.input_bytes(&in_units).0;
        let aligned = |slot: &super::super::Slot<'c, C>, at: u32| {
            !slot.kept() && (slot.offset + at).is_multiple_of(alignment)
        };
        aligned(
            &self.tensors[usize::from(step.output)],
            cut.output_bytes(&units).0,
        ) && step.operands.iter().enumerate().all(|(k, o)| {
            !cut.slices(k)
                || matches!(*o, StepOperand::Tensor(t) if aligned(&self.tensors[usize::from(t)], in_at))
        })
    }

    /// The pool memory step `si` reads and writes; for a band, only its slices of the sliced
    /// operands and of the output.
    fn access(&self, si: usize, band: Option<((u32, u32), (u32, u32))>) -> Access {
        let step = &self.steps[si];
        let mut access = Access::default();
        let cut = step.op.as_ref().and_then(Cut::of);
        let state = step
            .op
            .as_ref()
            .map_or(0, |op| usize::from(op.state_inputs()));
        for (k, operand) in step.operands.iter().enumerate() {
            let StepOperand::Tensor(t) = *operand else {
                continue;
            };
            let slot = &self.tensors[usize::from(t)];
            if slot.constant {
                continue;
            }
            let range = match (band, cut) {
                (Some((units, _)), Some(cut)) if cut.slices(k) => {
                    let (at, len) = cut.input_bytes(&(units.0..units.1));
                    (slot.offset + at, len)
                }
                _ => (slot.offset, slot.bytes),
            };
            // Operands above MAX_JOB_INPUTS cannot exist (steps hold at most that many).
            let _ = access.reads.push(range);
            if k < state {
                let _ = access.writes.push(range);
            }
        }
        let slot = &self.tensors[usize::from(step.output)];
        let out = match (band, cut) {
            (Some((_, units)), Some(cut)) => {
                let (at, len) = cut.output_bytes(&(units.0..units.1));
                (slot.offset + at, len)
            }
            _ => (slot.offset, slot.bytes),
        };
        if access.writes.push(out).is_err() {
            // A stateful operator with two state operands and an output: its first state
            // write stands for the rest (they are adjacent blocks of the pool).
            if let Some(last) = access.writes.last_mut() {
                *last = out;
            }
        }
        access
    }

    /// Follows `best`: band steps appended, placements set, the submission order kept.
    fn follow(&mut self, best: Candidate<OPS>, units: u8) -> Result<(), GraphError> {
        let Candidate {
            drafts, schedule, ..
        } = best;
        let tasks: heapless::Vec<Task, OPS> = drafts.iter().map(|d| d.task.clone()).collect();
        let mut report = ScheduleReport {
            scheduling: self.schedule.scheduling,
            planned: true,
            tasks: drafts.len() as u16,
            split_operators: 0,
            cpu_tasks: 0,
            predicted_cycles: schedule.makespan(),
            lower_bound: sched::lower_bound::<OPS>(&tasks, units).unwrap_or_default(),
            weight_copy_cycles: tasks.iter().map(|t| t.cost.prefetch_cycles).sum(),
        };
        let placed = |i: usize| {
            schedule.placed(i).unwrap_or(sched::Placed {
                unit: Unit::Npu(0),
                start: 0,
                end: 0,
            })
        };
        let order = schedule.order();
        let identity = units == 1
            && order.iter().enumerate().all(|(k, &i)| usize::from(i) == k)
            && drafts.iter().enumerate().all(|(i, d)| {
                d.rows.is_none()
                    && (placed(i).unit == Unit::Npu(0) || !self.runs_on_npu(usize::from(d.step)))
            });
        let mut steps_in_order: heapless::Vec<u16, OPS> = heapless::Vec::new();
        let mut task_steps: heapless::Vec<u16, OPS> = drafts.iter().map(|d| d.step).collect();
        for &i in order {
            let d = &drafts[usize::from(i)];
            let placement = match placed(usize::from(i)).unit {
                Unit::Npu(u) if !identity => Placement::Unit(u),
                Unit::Npu(_) => Placement::Auto,
                Unit::Cpu => {
                    report.cpu_tasks += 1;
                    if identity {
                        Placement::Auto
                    } else {
                        Placement::Cpu
                    }
                }
            };
            let si = match d.rows {
                None => {
                    self.steps[usize::from(d.step)].placement = placement;
                    d.step
                }
                Some(rows) => {
                    let parent = &self.steps[usize::from(d.step)];
                    let Some(op) = parent.op.as_ref() else {
                        continue;
                    };
                    let Some((band, in_rows)) =
                        Cut::of(op).and_then(|cut| cut.band(op, rows.0..rows.1))
                    else {
                        continue;
                    };
                    let step = Step {
                        op_index: parent.op_index,
                        builtin: parent.builtin,
                        op: Some(band),
                        operands: parent.operands.clone(),
                        output: parent.output,
                        in_place: false,
                        placement,
                        band: Some(Band {
                            parent: d.step,
                            in_rows: (in_rows.start, in_rows.end),
                            out_rows: rows,
                        }),
                        split: false,
                    };
                    let index = self.steps.len() as u16;
                    self.steps
                        .push(step)
                        .map_err(|_| super::super::capacity("OPS", OPS, OPS + 1))?;
                    if !self.steps[usize::from(d.step)].split {
                        self.steps[usize::from(d.step)].split = true;
                        report.split_operators += 1;
                    }
                    index
                }
            };
            // At most OPS tasks.
            let _ = steps_in_order.push(si);
            if let Some(slot) = task_steps.get_mut(usize::from(i)) {
                *slot = si;
            }
        }
        if !identity {
            self.order = steps_in_order;
        }
        self.schedule = report;
        self.kept.task_steps = task_steps;
        self.kept.plan = Some(schedule);
        Ok(())
    }

    /// Follows a schedule table instead of planning (see [`schedule_table`](super::super::schedule_table)):
    /// its tasks checked against the model, the units and the order taken as they are.
    pub(in crate::graph) fn follow_table(
        &mut self,
        table: &'static [u8],
    ) -> Result<(), GraphError> {
        self.schedule = ScheduleReport::default();
        let fingerprint = self.fingerprint()?;
        let (entries, schedule) = super::super::schedule_table::import::<OPS>(table, fingerprint)?;
        let caps = self.client.capabilities().map_err(not_one_op)?;
        let units = caps.execution_units.clamp(1, MAX_EXECUTION_UNITS as u8);
        let alignment = caps.alignment.max(1);
        let mut drafts: heapless::Vec<Draft, OPS> = heapless::Vec::new();
        // The next output row each split step's bands must start at.
        let mut next_row: heapless::Vec<u32, OPS> = heapless::Vec::new();
        let _ = next_row.resize(self.steps.len(), 0);
        for (k, &(step, (a, b))) in entries.iter().enumerate() {
            let bad = GraphTableError::BadTask { task: k as u16 };
            let si = usize::from(step);
            let s = self
                .model_steps()
                .get(si)
                .filter(|s| s.op.is_some() && !s.in_place)
                .ok_or(bad)?;
            let rows = match (a, b) {
                (0, 0) => {
                    if next_row[si] != 0 {
                        return Err(bad.into());
                    }
                    next_row[si] = u32::MAX;
                    None
                }
                (a, b) => {
                    let op = s.op.as_ref().ok_or(bad)?;
                    let cut = Cut::of(op).ok_or(bad)?;
                    if next_row[si] != a
                        || b <= a
                        || b > cut.len()
                        || !self.band_aligned(si, op, cut, a..b, alignment)
                    {
                        return Err(bad.into());
                    }
                    next_row[si] = if b == cut.len() { u32::MAX } else { b };
                    Some((a, b))
                }
            };
            let draft = Draft {
                step,
                rows,
                access: Access::default(),
                task: Task {
                    deps: heapless::Vec::new(),
                    cost: TaskCost::NONE,
                },
            };
            drafts
                .push(draft)
                .map_err(|_| GraphTableError::TooManyTasks { tasks: k as u16 })?;
        }
        // Every step that runs is covered, whole or by bands to its last row.
        for (si, s) in self.model_steps().iter().enumerate() {
            if s.op.is_some() && !s.in_place && next_row[si] != u32::MAX {
                return Err(GraphTableError::BadTask {
                    task: entries.len() as u16,
                }
                .into());
            }
        }
        self.schedule.scheduling = Scheduling::Static;
        // An imported schedule is followed, not compared with another.
        self.follow(
            Candidate {
                drafts,
                schedule,
                steady: 0,
            },
            units,
        )
    }

    /// The fingerprint a schedule table of this graph carries: its model and the units.
    fn fingerprint(&self) -> Result<u64, GraphError> {
        let caps = self.client.capabilities().map_err(not_one_op)?;
        let mut units: heapless::Vec<crate::hal::ExecutionUnit, MAX_EXECUTION_UNITS> =
            heapless::Vec::new();
        for u in 0..caps.execution_units.min(MAX_EXECUTION_UNITS as u8) {
            let _ = units.push(self.client.execution_unit(u).map_err(not_one_op)?);
        }
        Ok(super::super::schedule_table::fingerprint(
            self.kept.model,
            &caps,
            &units,
        ))
    }

    /// Writes the static schedule the graph follows as a schedule table (see
    /// [`PrepareOptions::schedule_table`](super::super::PrepareOptions::schedule_table)) into `out`;
    /// returns its length. Errors: [`GraphError::ScheduleTable`] when `out` is too small or
    /// the graph follows no static schedule ([`ScheduleReport::planned`] is `false`).
    pub fn export_schedule(&self, out: &mut [u8]) -> Result<usize, GraphError> {
        let plan = self.kept.plan.as_ref().ok_or(GraphTableError::NoSchedule)?;
        let mut tasks: heapless::Vec<super::super::schedule_table::TaskEntry, OPS> =
            heapless::Vec::new();
        for &si in &self.kept.task_steps {
            let step = &self.steps[usize::from(si)];
            let entry = match &step.band {
                Some(band) => super::super::schedule_table::band_entry(band),
                None => (si, (0, 0)),
            };
            // As many as the tasks: OPS at most.
            let _ = tasks.push(entry);
        }
        let fingerprint = self.fingerprint()?;
        Ok(super::super::schedule_table::export(
            &tasks,
            plan,
            fingerprint,
            out,
        )?)
    }

    /// Whether the NPU runs step `si`'s operator.
    fn runs_on_npu(&self, si: usize) -> bool {
        let ops = self
            .client
            .capabilities()
            .map(|c| c.ops)
            .unwrap_or_default();
        self.steps[si].op.as_ref().is_some_and(|op| ops.runs(op))
    }
}

/// The least a task can take: on its fastest unit, alone.
fn cheapest(cost: &TaskCost, units: u8) -> Option<Cycles> {
    (0..units)
        .map(Unit::Npu)
        .chain(core::iter::once(Unit::Cpu))
        .filter_map(|u| cost.alone(u))
        .min()
}

/// Sets unit `u`'s cost from an estimate: the weight copy the driver runs ahead of the job is
/// the weight DMA's, the rest the unit's and the ports'.
fn set_npu(cost: &mut TaskCost, u: u8, e: Estimate) {
    if let Some(slot) = cost.npu.get_mut(usize::from(u)) {
        *slot = Some(e.cycles.saturating_sub(e.prefetch_cycles).max(1));
    }
    cost.sram_cycles = cost.sram_cycles.max(e.sram_cycles);
    cost.flash_cycles = cost.flash_cycles.max(e.flash_cycles);
    cost.prefetch_cycles = cost.prefetch_cycles.max(e.prefetch_cycles);
}

/// One operator at a time: `task` waits for every task of the step before it.
fn depend_on_previous_step(earlier: &[Draft], task: &mut Task) -> Result<(), Unschedulable> {
    let Some(last) = earlier.last() else {
        return Ok(());
    };
    for (i, d) in earlier.iter().enumerate().rev() {
        if d.step != last.step {
            break;
        }
        task.deps.push(i as u16).map_err(|_| Unschedulable)?;
    }
    Ok(())
}

/// `draft` waits for every earlier task whose memory it conflicts with, less those another
/// of its dependencies already waits for.
fn depend_by_memory(earlier: &[Draft], draft: &mut Draft) -> Result<(), Unschedulable> {
    // Ancestors of the dependencies kept so far: a conflict among them is implied.
    let mut covered = [0u64; 16];
    let mut covered_big: bool = earlier.len() > covered.len() * 64;
    for (i, d) in earlier.iter().enumerate().rev() {
        if !draft.access.conflicts(&d.access) {
            continue;
        }
        if !covered_big && bit(&covered, i) {
            continue;
        }
        if covered_big && reaches(earlier, &draft.task.deps, i) {
            continue;
        }
        draft.task.deps.push(i as u16).map_err(|_| Unschedulable)?;
        if !covered_big {
            covered_big = !mark_ancestors(earlier, i, &mut covered);
        }
    }
    draft.task.deps.sort_unstable();
    Ok(())
}

fn bit(set: &[u64; 16], i: usize) -> bool {
    set.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
}

/// Marks the ancestors of task `i` (not `i` itself); `false` if some fall outside the set.
fn mark_ancestors(tasks: &[Draft], i: usize, set: &mut [u64; 16]) -> bool {
    let mut fits = true;
    // Ancestors have lower indices: one backward sweep propagates the marks.
    let mut reach = [0u64; 16];
    if let Some(w) = reach.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    } else {
        return false;
    }
    for k in (0..=i).rev() {
        if !bit(&reach, k) {
            continue;
        }
        for &d in &tasks[k].task.deps {
            let d = usize::from(d);
            match (reach.get_mut(d / 64), set.get_mut(d / 64)) {
                (Some(r), Some(s)) => {
                    *r |= 1 << (d % 64);
                    *s |= 1 << (d % 64);
                }
                _ => fits = false,
            }
        }
    }
    fits
}

/// Whether task `target` is an ancestor of any of `deps` (a search for graphs too large for
/// the bit sets).
fn reaches(tasks: &[Draft], deps: &[u16], target: usize) -> bool {
    let mut stack: heapless::Vec<u16, 64> = heapless::Vec::new();
    for &d in deps {
        let _ = stack.push(d);
    }
    let mut steps = 0usize;
    while let Some(d) = stack.pop() {
        let d = usize::from(d);
        match d.cmp(&target) {
            Ordering::Equal => return true,
            Ordering::Less => continue,
            Ordering::Greater => {}
        }
        steps += 1;
        if steps > 4096 {
            // Too far to tell: keep the edge (an extra edge is only redundant).
            return false;
        }
        for &p in &tasks[d].task.deps {
            if stack.push(p).is_err() {
                return false;
            }
        }
    }
    false
}
