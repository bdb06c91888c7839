//! Static schedules: a DAG of tasks with known costs, mapped onto execution units ahead of
//! time, so that a runtime replays the plan and decides nothing.
//!
//! # Design
//!
//! **Why static.** A model runs the same tasks with the same costs at every invoke. A dynamic
//! dispatcher (round robin, or "next free unit") decides again at every invoke, costs CPU
//! instructions per job, and decides greedily with no view of what comes next. Rammer (OSDI
//! '20) replaces the two layers of scheduling in frameworks (a graph scheduler that hands whole
//! operators to a device, which splits them itself) with one plan made at compile time: every
//! operator is split into small tasks, the device into execution units, and the plan maps tasks
//! to units. This module makes that plan. It knows nothing of graphs, models or operators: it
//! takes [`Task`]s (what each costs on each unit, and which earlier tasks it waits for) and
//! gives a [`Schedule`] (per task its unit, start and end, and the order to submit them in).
//! Splitting operators into tasks and costing them is the caller's part.
//!
//! **Units.** Up to [`MAX_EXECUTION_UNITS`] NPU units ([`Unit::Npu`]), which may differ (a
//! U55-256 beside a U55-128: a task has a cost per unit), and the CPU ([`Unit::Cpu`]), which is
//! always there and runs the fallback kernels. A task may be unable to run on some units
//! (`None` in its [`TaskCost`]). Each unit runs one task at a time, in the order its tasks were
//! placed: a unit's tasks are appended, never slotted into an earlier gap, because a queue runs
//! its jobs in submission order.
//!
//! **Memory contention.** The NPU units share one SRAM port (the arena) and one flash port (the
//! weights), so a memory-bound operator does not finish sooner for being split over two units.
//! The model, which the simulator follows too:
//!
//! - A task placed on an NPU unit at start `s` reserves the SRAM port from
//!   `max(s, sram_free)` for its [`sram_cycles`](TaskCost::sram_cycles), and the flash port from
//!   `max(s, flash_free)` for its [`flash_cycles`](TaskCost::flash_cycles). A reservation of 0
//!   cycles is no reservation: it neither waits for the port nor moves it.
//! - The task ends at `max(s + cycles, sram_end, flash_end)`, and holds its unit until then; the
//!   ports' free times advance to the ends of its reservations.
//! - A task that copies data ahead of itself (a layer's weights, [`TaskCost::prefetch_cycles`])
//!   goes through the weight pipeline a driver runs (and the simulator models): one weight
//!   DMA copies each layer's weights in the order the layers are submitted, back to back, and
//!   the pipeline runs the layers on its own timeline, each after the one before and after its
//!   copy. The task is charged what it adds to that timeline (its cycles plus any wait for its
//!   copy) as its own cycles. The pipeline's timeline is not the units': on several units it
//!   only approximates when the copies land, as the simulator's does.
//! - CPU tasks use no port (they work on host memory).
//! - Ports are reserved in the order NPU tasks are placed, which is the order
//!   [`Schedule::order`] submits them in: a simulator that times a job when it is submitted
//!   (as `npu-sim` does) reserves in the same order and computes the same cycles.
//!
//! **The submission order** ([`Schedule::order`]) is what a runtime that computes the CPU tasks
//! itself, between submissions, follows: it submits NPU tasks in turn (each waiting on its
//! dependencies' fences, on its unit's queue) and, on reaching a CPU task, waits for that
//! task's inputs and computes it. NPU tasks come in the order they were placed (each unit's in
//! its order, so the queues run them as planned, and the ports are reserved as planned); each
//! CPU task comes as late as it can, just before the first NPU task that reads its result, so
//! that the NPU tasks placed before that one are already submitted and run while the CPU
//! computes. Every task comes after its dependencies.
//!
//! The runtime cannot submit an NPU task while it computes a CPU task, so the scheduler plans
//! for it: once an NPU task that reads a CPU task's result is placed, no NPU task placed after
//! it starts before that CPU task ends. With that rule, a runtime that follows the order
//! reproduces the schedule's cycles exactly on the simulator (the tests replay every schedule
//! that way), as long as its queues never fill.
//!
//! **Two policies** ([`Policy`]). Both are list scheduling: tasks are placed one at a time, each
//! once all its dependencies are placed, on the unit the policy picks, as early as that unit,
//! its dependencies, the ports and the runtime (the rule above) allow.
//!
//! - [`Policy::CostEffective`] puts each task on the unit where it *finishes* earliest given
//!   what is already placed. A slower unit that is idle can win: Rammer's finding that with
//!   co-scheduling, the most cost-effective kernel for a task is often not the fastest one
//!   alone. It also makes the fastest-alone schedule below and keeps whichever is shorter, so
//!   it is never worse than [`Policy::FastestAlone`].
//! - [`Policy::FastestAlone`] puts each task on the unit where it alone is fastest (ties: the
//!   lowest unit, NPU units before the CPU), then list-schedules. This is what a per-operator
//!   choice gives, and the baseline the cost-effective policy is measured against.
//!
//! Which ready task is placed next is tried three ways, and the shortest schedule is kept:
//! highest *bottom level* first (the longest path from the task to the end, each task at its
//! cheapest cost: the critical path goes first), earliest start first, and earliest end first
//! (for the many independent tasks of a split operator). A short local search then improves
//! it: a task onto another unit (cost-effective only), or to a nearby place in the placement
//! sequence, kept when the schedule gets shorter, timed by the same model. Of two schedules as
//! long, the one whose tasks end sooner in sum is preferred. Ties go to the lower task index,
//! so a schedule is a deterministic function of its tasks.
//!
//! **The lower bound** ([`lower_bound`], [`LowerBound`]) is what no schedule can beat, so a
//! schedule's quality can be stated as its ratio to it. Four terms, the bound is their largest:
//!
//! - *critical path*: the longest chain of dependencies, each task at its cheapest time on its
//!   best unit (on an NPU unit, at least its port cycles too, since it ends after them).
//! - *work*: total work over total throughput, valid for units of different speeds. For any
//!   weights `w_u ≥ 0` of the units, the weighted average of the units' busy times is at most
//!   the makespan `T`, and task `i` adds at least `min_u w_u·c_iu` to the weighted sum (`c_iu`:
//!   the least time it holds unit `u`, [`TaskCost::alone`]), so
//!   `T ≥ Σ_i min_u (w_u·c_iu) / Σ_u w_u`. Weights proportional to the units' speeds give the
//!   classic "work over throughput"; the one weighting by each unit's best relative speed
//!   `ŝ_u = max_i r_i/c_iu` (with `r_i = min_u c_iu`) gives `Σ r_i / Σ ŝ_u`. Any weights are
//!   valid, so the bound starts from those and searches a little for larger ones (this is the
//!   dual of the linear program that spreads the work fractionally over the units).
//! - *memory*: total memory traffic over the shared bandwidth. The reservations of each port
//!   never overlap, so `T ≥ Σ sram_cycles` over tasks that must run on an NPU unit (likewise
//!   flash). A task that can run on the CPU need not use a port, but then it uses the CPU, so
//!   the same weighting applies over the ports and the CPU: `T ≥ Σ_i min(w_p·p_i, w_cpu·c_i) /
//!   (w_p + w_cpu)`, which is what makes the term mean something when every operator has a CPU
//!   fallback kernel.
//! - *weight copies*: the weight pipeline's copies from flash over the NPU units. The weight
//!   DMA copies back to back from cycle 0, and the pipeline runs a task only after its copy
//!   has landed, so its timeline is at least `Σ prefetch_cycles` long over the tasks on NPU
//!   units; it charges each of them what it adds to that timeline, and a task holds its unit
//!   at least its charge. So the NPU units' busy times sum to at least the copies, and with
//!   `k` units (the CPU weighted as in the memory term, for tasks it can take instead)
//!   `T ≥ Σ_i min(p_i, β·c_i) / (k + β)`. Only divided by `k`: the charges fall on whichever
//!   units run the tasks, so two units can run two tasks at once while the pipeline charges
//!   each the other's copy. It holds for a pipeline that starts empty, as the scheduler's does
//!   and a first invoke's; a later invoke's first copy can start under the previous invoke's
//!   last layers, which hides up to that tail's cycles from it.
//!
//! Everything is in integers (`u128` sums), rounded down, so each term stays a valid bound.
//!
//! **Shipping it.** A schedule exports like a tuning table ([`Schedule::export`],
//! [`Schedule::import`]): a versioned, checksummed little-endian table, checked against a
//! fingerprint of the model and the units that the caller computes. Firmware links the table
//! and replays it with no scheduling work. The layout is under [Tables](#tables).
//!
//! No heap: a schedule holds at most `TASKS` tasks (a const generic, at most
//! [`MAX_TASKS`]), and running out is [`ScheduleError::CapacityExceeded`] naming it. A
//! `Schedule<TASKS>` takes about 26·`TASKS` bytes (firmware keeps an imported one in a
//! static); making one needs about 12·`TASKS` bytes of stack besides.
//! Scheduling `n` tasks on `k` units takes `O(n²·(k + MAX_TASK_DEPS))` steps per list try
//! (each step looks at every ready task), and the local search at most about 2¹⁸ task timings
//! (1,000 tasks on three units: about 20 ms on a host, built with optimisations), which suits
//! the hundreds of tasks of a model on a host or at prepare.
//!
//! # Using it
//!
//! ```
//! use npu_compute::schedule::{self, Policy, Task, TaskCost, Unit};
//!
//! // Six independent tasks, each 10 cycles on the one NPU unit and 12 on the CPU.
//! let mut cost = TaskCost::NONE;
//! cost.npu[0] = Some(10);
//! cost.cpu = Some(12);
//! let tasks = [(); 6].map(|_| Task::new(cost));
//!
//! let alone = schedule::schedule::<16>(&tasks, 1, Policy::FastestAlone).unwrap();
//! let both = schedule::schedule::<16>(&tasks, 1, Policy::CostEffective).unwrap();
//! assert_eq!(alone.makespan(), 60); // all six on the NPU
//! assert_eq!(both.makespan(), 36); // three on the NPU, three on the CPU
//! assert_eq!(both.busy(Unit::Cpu), 36);
//!
//! let bound = schedule::lower_bound::<16>(&tasks, 1).unwrap();
//! assert!(bound.max() <= both.makespan());
//!
//! // Made once on a host, shipped as bytes, replayed on the board.
//! let mut bytes = [0u8; schedule::table_bytes(16)];
//! let len = both.export(0xF00D, &mut bytes).unwrap();
//! let shipped = schedule::Schedule::<16>::import(&bytes[..len], 0xF00D).unwrap();
//! assert_eq!(shipped, both);
//! ```
//!
//! # Tables
//!
//! All integers are little-endian. A table is a 32-byte header and `n` 20-byte entries, one per
//! task in submission order:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"NPUS"` ([`TABLE_MAGIC`]) |
//! | 4 | 2 | format = [`TABLE_FORMAT`] (this header and entry layout) |
//! | 6 | 1 | NPU units the schedule uses (1..=[`MAX_EXECUTION_UNITS`]) |
//! | 7 | 1 | reserved, 0 |
//! | 8 | 4 | npu-compute version ([`CRATE_VERSION`](crate::tune::CRATE_VERSION)): tasks may be split otherwise by another version |
//! | 12 | 8 | fingerprint of the model and the units (the caller's) |
//! | 20 | 2 | task count `n` |
//! | 22 | 2 | entry size = 20 ([`TABLE_ENTRY_BYTES`]) |
//! | 24 | 4 | reserved, 0 |
//! | 28 | 4 | CRC-32/IEEE ([`crc32`](crate::tune::crc32)) of bytes 0..28 followed by all entries |
//! | 32 | 20·n | entries, in submission order |
//!
//! An entry is the task's index (u16), its unit (u8: `k` for NPU unit `k`, `0xFF` for the
//! CPU), a reserved 0 byte, and its start and end cycles (u64 each). Every task appears exactly
//! once. The same schedule always gives the same bytes.
//!
//! [`Schedule::import`] checks, in order: length ≥ 32, magic, format, entry size, exact length,
//! CRC; then the reserved fields, crate version, fingerprint, unit count and capacity; then
//! each entry (task index in range and not seen before, unit below the unit count or the CPU,
//! reserved byte 0, start ≤ end). The CRC comes before the checks of meaning, so a corrupted
//! byte reports [`ScheduleTableError::Checksum`]. Every read is a checked slice access: no
//! bytes make it panic.

mod bound;
mod improve;
mod list;
mod table;

use crate::error::Capacity;
use crate::hal::{Cycles, MAX_EXECUTION_UNITS};

pub use bound::{lower_bound, LowerBound};
pub use list::schedule;
pub use table::{
    table_bytes, ScheduleTableError, TABLE_ENTRY_BYTES, TABLE_FORMAT, TABLE_HEADER_BYTES,
    TABLE_MAGIC,
};

/// Most dependencies one task lists: 16, enough for a task that reads two operands each
/// produced in [`MAX_EXECUTION_UNITS`] tasks. A task that needs more can depend on a join task
/// (a CPU task of 0 cycles) that depends on them.
pub const MAX_TASK_DEPS: usize = 16;

/// Most tasks a schedule can hold, whatever its `TASKS`: task indices are `u16`.
pub const MAX_TASKS: usize = u16::MAX as usize;

/// Where a task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Unit {
    /// NPU execution unit `n` (the HAL's [`Queue::Unit`](crate::hal::Queue::Unit)).
    Npu(u8),
    /// The CPU, running the fallback kernels. Always present.
    Cpu,
}

impl core::fmt::Display for Unit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Unit::Npu(n) => write!(f, "NPU unit {n}"),
            Unit::Cpu => f.write_str("the CPU"),
        }
    }
}

/// What one task costs on each unit it can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TaskCost {
    /// Cycles on each NPU unit, run alone; `None` where it cannot run. Entries at or past the
    /// schedule's unit count are ignored.
    pub npu: [Option<Cycles>; MAX_EXECUTION_UNITS],
    /// Cycles on the CPU; `None` if it cannot run there.
    pub cpu: Option<Cycles>,
    /// Cycles it holds the shared SRAM port when it runs on an NPU unit
    /// ([`Estimate::sram_cycles`](crate::hal::Estimate::sram_cycles)).
    pub sram_cycles: Cycles,
    /// Cycles it holds the shared flash port when it runs on an NPU unit
    /// ([`Estimate::flash_cycles`](crate::hal::Estimate::flash_cycles)).
    pub flash_cycles: Cycles,
    /// Cycles the weight DMA spends copying what it reads ahead of it when it runs on an NPU
    /// unit ([`Estimate::prefetch_cycles`](crate::hal::Estimate::prefetch_cycles)): the copy
    /// starts as soon as the DMA is free and the task starts once it has landed.
    pub prefetch_cycles: Cycles,
}

impl TaskCost {
    /// A task that runs nowhere and uses no port: the start of a cost filled in field by field.
    pub const NONE: TaskCost = TaskCost {
        npu: [None; MAX_EXECUTION_UNITS],
        cpu: None,
        sram_cycles: 0,
        flash_cycles: 0,
        prefetch_cycles: 0,
    };

    /// Its cycles on `unit` as given, `None` where it cannot run.
    pub fn cycles(&self, unit: Unit) -> Option<Cycles> {
        match unit {
            Unit::Npu(n) => self.npu.get(usize::from(n)).copied().flatten(),
            Unit::Cpu => self.cpu,
        }
    }

    /// The least time it holds `unit` when it runs there alone: on an NPU unit, its cycles or
    /// its port cycles, whichever is longer (it ends after both); on the CPU, its cycles.
    pub fn alone(&self, unit: Unit) -> Option<Cycles> {
        let c = self.cycles(unit)?;
        Some(match unit {
            Unit::Npu(_) => c.max(self.sram_cycles).max(self.flash_cycles),
            Unit::Cpu => c,
        })
    }
}

/// One task: its cost, and the earlier tasks it waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Task {
    /// Indices of the tasks whose ends it waits for. Tasks come in a topological order, so each
    /// is below the task's own index ([`ScheduleError::BadDependency`] otherwise). Repeats are
    /// harmless.
    pub deps: heapless::Vec<u16, MAX_TASK_DEPS>,
    /// What it costs where.
    pub cost: TaskCost,
}

impl Task {
    /// A task with no dependencies.
    pub const fn new(cost: TaskCost) -> Task {
        Task {
            deps: heapless::Vec::new(),
            cost,
        }
    }

    /// A task that waits for `deps`; `None` if they are more than [`MAX_TASK_DEPS`].
    pub fn with_deps(deps: &[u16], cost: TaskCost) -> Option<Task> {
        Some(Task {
            deps: heapless::Vec::from_slice(deps).ok()?,
            cost,
        })
    }
}

/// Where and when one task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Placed {
    /// The unit.
    pub unit: Unit,
    /// First cycle.
    pub start: Cycles,
    /// One past its last cycle: the unit is held from `start` to `end`.
    pub end: Cycles,
}

/// How the scheduler picks a task's unit (the [module docs](self) explain both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Policy {
    /// The unit where the task finishes earliest given what is already placed (or the
    /// fastest-alone schedule, if that is shorter).
    #[default]
    CostEffective,
    /// The unit where the task alone is fastest.
    FastestAlone,
}

/// A static schedule of up to `TASKS` tasks: each task's unit, start and end, and the order to
/// submit them in. Made by [`schedule`] or [`Schedule::import`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule<const TASKS: usize> {
    /// Per task, by index.
    placed: heapless::Vec<Placed, TASKS>,
    /// Task indices in submission order.
    order: heapless::Vec<u16, TASKS>,
    npu_units: u8,
}

impl<const TASKS: usize> Schedule<TASKS> {
    /// Tasks scheduled.
    pub fn len(&self) -> usize {
        self.placed.len()
    }

    /// Whether it schedules no task.
    pub fn is_empty(&self) -> bool {
        self.placed.is_empty()
    }

    /// NPU units it was made for.
    pub fn npu_units(&self) -> u8 {
        self.npu_units
    }

    /// Where and when task `task` runs; `None` past the last task.
    pub fn placed(&self, task: usize) -> Option<Placed> {
        self.placed.get(task).copied()
    }

    /// Every task's placement, by task index.
    pub fn placements(&self) -> &[Placed] {
        &self.placed
    }

    /// Task indices in the order a runtime submits them (the [module docs](self) say why this
    /// order): each unit's tasks in that unit's order, every task after its dependencies.
    pub fn order(&self) -> &[u16] {
        &self.order
    }

    /// Cycles from the first start (cycle 0) to the last end.
    pub fn makespan(&self) -> Cycles {
        self.placed.iter().map(|p| p.end).max().unwrap_or(0)
    }

    /// Cycles from first start to last end when the schedule runs again right after itself,
    /// as every invoke but the first does: `tasks` (those it was made for) replayed in
    /// [`order`](Self::order) on their units, with the units and ports free at the start but
    /// the weight pipeline as the run before left it, so the first copies can start under
    /// that run's last tasks. Two schedules whose first runs are as long can differ here by
    /// how much of their copies the previous run hides.
    pub fn steady_makespan(&self, tasks: &[Task]) -> Cycles {
        list::steady_makespan(tasks, self)
    }

    /// Cycles `unit` is held by its tasks (waits for a port included).
    pub fn busy(&self, unit: Unit) -> Cycles {
        self.placed
            .iter()
            .filter(|p| p.unit == unit)
            .fold(0, |sum: Cycles, p| {
                sum.saturating_add(p.end.saturating_sub(p.start))
            })
    }

    /// [`busy`](Self::busy) of every NPU unit, by unit; entries past [`npu_units`](Self::npu_units)
    /// are 0.
    pub fn npu_busy(&self) -> [Cycles; MAX_EXECUTION_UNITS] {
        let mut busy: [Cycles; MAX_EXECUTION_UNITS] = [0; MAX_EXECUTION_UNITS];
        for p in &self.placed {
            if let Unit::Npu(n) = p.unit {
                if let Some(b) = busy.get_mut(usize::from(n)) {
                    *b = b.saturating_add(p.end.saturating_sub(p.start));
                }
            }
        }
        busy
    }
}

/// Why tasks could not be scheduled (or bounded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ScheduleError {
    /// More tasks than the schedule holds.
    CapacityExceeded {
        /// Which knob: [`Capacity::ScheduleTasks`].
        capacity: Capacity,
        /// Its value (at most [`MAX_TASKS`]).
        limit: u32,
        /// Tasks given (saturated to `u32`).
        tasks: u32,
    },
    /// The unit count is 0 or above [`MAX_EXECUTION_UNITS`].
    Units {
        /// The count given.
        found: u8,
    },
    /// A dependency that is not an earlier task.
    BadDependency {
        /// The task.
        task: u16,
        /// Its dependency, at or after it.
        dep: u16,
    },
    /// No unit can run the task: its cost is `None` on the CPU and on every NPU unit in use.
    Unrunnable {
        /// The task.
        task: u16,
    },
}

impl core::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ScheduleError::CapacityExceeded {
                capacity,
                limit,
                tasks,
            } => write!(
                f,
                "{tasks} tasks, and the schedule holds {limit} ({}); raise it",
                capacity.knob()
            ),
            ScheduleError::Units { found } => write!(
                f,
                "{found} NPU units: a schedule needs 1 to {MAX_EXECUTION_UNITS}"
            ),
            ScheduleError::BadDependency { task, dep } => write!(
                f,
                "task {task} depends on task {dep}, which is not before it: list tasks in a \
                 topological order, each after the tasks it reads"
            ),
            ScheduleError::Unrunnable { task } => write!(
                f,
                "task {task} can run on no unit (no CPU cost, and no cost on any NPU unit in use)"
            ),
        }
    }
}

impl core::error::Error for ScheduleError {}

/// Checks `tasks` against a capacity of `TASKS` and `npu_units` units: the errors every entry
/// point shares.
fn check<const TASKS: usize>(tasks: &[Task], npu_units: u8) -> Result<(), ScheduleError> {
    if npu_units == 0 || usize::from(npu_units) > MAX_EXECUTION_UNITS {
        return Err(ScheduleError::Units { found: npu_units });
    }
    let limit = TASKS.min(MAX_TASKS);
    if tasks.len() > limit {
        return Err(ScheduleError::CapacityExceeded {
            capacity: Capacity::ScheduleTasks,
            // At most MAX_TASKS, so it fits.
            limit: u32::try_from(limit).unwrap_or(u32::MAX),
            tasks: u32::try_from(tasks.len()).unwrap_or(u32::MAX),
        });
    }
    for (i, t) in tasks.iter().enumerate() {
        // i < MAX_TASKS: checked above.
        let task = u16::try_from(i).unwrap_or(u16::MAX);
        if let Some(&dep) = t.deps.iter().find(|&&d| d >= task) {
            return Err(ScheduleError::BadDependency { task, dep });
        }
        if units(npu_units).all(|u| t.cost.cycles(u).is_none()) {
            return Err(ScheduleError::Unrunnable { task });
        }
    }
    Ok(())
}

/// The units of a schedule over `npu_units` NPU units, in tie-breaking order: NPU units by
/// index, then the CPU.
fn units(npu_units: u8) -> impl Iterator<Item = Unit> + Clone {
    (0..npu_units)
        .map(Unit::Npu)
        .chain(core::iter::once(Unit::Cpu))
}

#[cfg(test)]
pub(super) mod tests;
