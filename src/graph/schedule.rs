//! The static schedule of a graph: its operators split into tasks, and every task given an
//! execution unit and a place in the submission order at prepare (Rammer's rTasks on vEUs).
//!
//! # Design
//!
//! Without a schedule, each operator is one job and `execute` picks its unit round robin at
//! dispatch ([`Scheduling::Dynamic`]). With one, every decision is made once, at prepare:
//!
//! - **Tasks.** Each operator that runs is one task, or, where there are several NPU units and
//!   it can be cut ([`cut`](super::cut): a convolution, depthwise convolution or pool of one
//!   batch by rows of its output, an elementwise operator by ranges of elements), one task per
//!   unit, each cut placed at aligned offsets where the HAL's estimates of the two sides come
//!   closest to the units' shares. A band reads its window's halo again and pays its own job
//!   overhead: the estimates include both.
//! - **Costs** come from the HAL ([`Npu::estimate`](crate::hal::Npu::estimate)) for each task
//!   on each NPU unit that runs its operator; an operator the NPU lacks runs on the CPU, costed
//!   with the fallback's transfers ([`Npu::estimate_host_compute`](crate::hal::Npu::estimate_host_compute)).
//!   A HAL that cannot estimate gets no static schedule.
//! - **Dependencies come from memory**, as the server computes them at run time: a task
//!   waits for every earlier task (in model order) that writes memory it reads, or reads or
//!   writes memory it writes. The arena plan made for the model order shares memory between
//!   tensors whose lifetimes do not meet in that order, and those edges keep such tensors
//!   apart in time too: the schedule never needs more memory than the arena plan gave, and
//!   what it predicts is what the server's own dependency tracking allows. Edges implied by
//!   others are dropped, so each task keeps its few direct ones.
//! - **The schedule** is list scheduling on the critical path with each task placed where it
//!   finishes earliest ([`Policy::CostEffective`](crate::schedule::Policy)): a slower unit
//!   that is idle beats a faster one that is busy. [`Scheduling::Static`] plans three task
//!   sets and keeps the shortest: operators whole, operators split where a split is faster
//!   than the whole on the best unit, and one operator at a time split over every unit
//!   ([`Scheduling::OpByOp`], which runs the operators in model order, each spread over all
//!   units).
//! - **Replay.** Band tasks become steps of their own, after the model's (so `OPS` bounds the
//!   model's operators and the bands together; a split that would not fit is not made). The
//!   graph keeps the scheduler's submission order ([`Schedule::order`](crate::schedule::Schedule::order):
//!   NPU tasks as they were placed, each CPU task just before the first NPU task that reads
//!   it, since the CPU computes when it is submitted). Each job goes to its unit
//!   ([`Placement`]); the server still tracks dependencies from memory, so a schedule can
//!   never make a result wrong, only slower than predicted.
//!
//! With one NPU unit and every operator on it, the static schedule is the model order on
//! that unit: the graph then keeps the plain path, which costs nothing more per job.
//!
//! The planner (the `plan` submodule) and the crate's [`schedule`](crate::schedule) module it
//! drives are NPU machinery: a build without the cargo feature `static-schedule` (on by
//! default) leaves the planner out, and its graphs run as with [`Scheduling::Dynamic`] (each
//! operator one job in model order, which is also what a HAL of one unit gets from the
//! planner); asking for what only the planner does ([`Scheduling::OpByOp`], a schedule table)
//! fails with [`Error::NotBuilt`](crate::error::Error::NotBuilt).

use super::Graph;
use crate::channel::ComputeChannel;
use crate::hal::Cycles;
use crate::schedule::LowerBound;

#[cfg(feature = "static-schedule")]
mod plan;

pub(super) use plan::Kept;

/// How a graph's operators are spread over the execution units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Scheduling {
    /// A static schedule planned at prepare (see [Static schedules](crate::graph#static-schedules)): tasks, units and
    /// order decided once, the shortest of the task sets tried.
    #[default]
    Static,
    /// No schedule: each operator one job, its unit picked round robin at dispatch.
    Dynamic,
    /// One operator at a time in model order, each split over every NPU unit where it can be.
    OpByOp,
}

impl Scheduling {
    /// The command-line name: `static`, `dynamic` or `op-by-op`.
    pub const fn name(self) -> &'static str {
        match self {
            Scheduling::Static => "static",
            Scheduling::Dynamic => "dynamic",
            Scheduling::OpByOp => "op-by-op",
        }
    }
}

/// What a step holds of its band: `Option<Band>` where the planner (the maker of band steps) is
/// built, nothing (24 bytes less per step) where it is not.
#[cfg(feature = "static-schedule")]
pub(super) type StepBand = Option<Band>;
/// What a step holds of its band: nothing, in a build without the planner (no band steps).
#[cfg(not(feature = "static-schedule"))]
pub(super) type StepBand = NoBand;

/// No band: a step's band in a build without the planner.
#[cfg(not(feature = "static-schedule"))]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NoBand;

/// A band step's rows: the rows of its operator's input it reads and of the output it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Band {
    /// The model step it is a band of.
    pub(super) parent: u16,
    /// Input rows read, `start..end`.
    pub(super) in_rows: (u32, u32),
    /// Output rows written, `start..end`.
    pub(super) out_rows: (u32, u32),
}

/// The schedule a graph's invokes follow ([`Graph::schedule`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ScheduleReport {
    /// How the graph was asked to schedule.
    pub scheduling: Scheduling,
    /// Whether a static schedule is followed (`false` for [`Scheduling::Dynamic`], and where
    /// the HAL gives no estimates or the graph runs tiled chains).
    pub planned: bool,
    /// Tasks per invoke.
    pub tasks: u16,
    /// Operators split into bands.
    pub split_operators: u16,
    /// Tasks placed on the CPU.
    pub cpu_tasks: u16,
    /// The makespan the schedule predicts, in cycles.
    pub predicted_cycles: Cycles,
    /// What no schedule of these tasks on these units can beat.
    pub lower_bound: LowerBound,
    /// Cycles the weight pipeline spends copying the tasks' weights from flash, all told
    /// (left out of the bound: on several units the pipeline's timeline is not the units').
    /// A model whose copies take most of its time is bound by them, not by compute.
    pub weight_copy_cycles: Cycles,
}

impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
    /// Whether invokes follow a static schedule's order. `false` in a build without the
    /// planner, which lets the compiler leave out the paths that follow one.
    pub(super) fn scheduled(&self) -> bool {
        cfg!(feature = "static-schedule") && !self.order.is_empty()
    }
}

/// The graph's static schedule in a build without the planner: none.
#[cfg(not(feature = "static-schedule"))]
mod plan {
    use super::super::GraphError;
    use super::{Graph, ScheduleReport, Scheduling};
    use crate::channel::ComputeChannel;
    use crate::error::Error;
    use crate::schedule::Policy;

    /// What a graph keeps of a static schedule: nothing, none is followed.
    pub(in crate::graph) struct Kept<const OPS: usize>;

    impl<const OPS: usize> Kept<OPS> {
        /// Nothing, whatever the model.
        pub(in crate::graph) fn new(_model: &'static [u8]) -> Self {
            Kept
        }
    }

    /// What a graph asked for that this build cannot give.
    const NOT_BUILT: GraphError = GraphError::Compute {
        op_index: None,
        error: Error::NotBuilt {
            feature: "static-schedule",
        },
    };

    impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
        /// No schedule: the model's order, each operator one job ([`Scheduling::Dynamic`]);
        /// [`Scheduling::OpByOp`] needs the planner.
        pub(in crate::graph) fn plan_schedule(
            &mut self,
            scheduling: Scheduling,
            _policy: Policy,
        ) -> Result<(), GraphError> {
            if scheduling == Scheduling::OpByOp {
                return Err(NOT_BUILT);
            }
            self.schedule = ScheduleReport {
                scheduling,
                ..ScheduleReport::default()
            };
            Ok(())
        }

        /// A schedule table needs the planner's checks: refused.
        pub(in crate::graph) fn follow_table(
            &mut self,
            _table: &'static [u8],
        ) -> Result<(), GraphError> {
            Err(NOT_BUILT)
        }

        /// Writes the static schedule the graph follows as a schedule table; a build without
        /// the planner follows none. Errors: [`GraphError::Compute`] with
        /// [`Error::NotBuilt`] naming `static-schedule`.
        pub fn export_schedule(&self, _out: &mut [u8]) -> Result<usize, GraphError> {
            Err(NOT_BUILT)
        }
    }
}
