//! The job-plan path of an invoke: every invoke's jobs recorded once and replayed.
//!
//! The per-job path ([`run`](super::run)) places each activation in the pool and dispatches
//! each operator through `execute`, which checks operands and walks access records job by
//! job. A model runs the same jobs over the same tensors at every invoke, so after its first
//! invoke a graph places every activation once, as a tensor that lives as long as the plan,
//! and records every operator's job in a [`JobPlan`]. Later invokes write the inputs, submit
//! the whole list with one channel call, and read the outputs: the same jobs, on the same
//! queues, with the same dependencies, for a fraction of the CPU's work per job.
//!
//! The plan is built at the second invoke, so that a server that tunes has measured every
//! layer shape in the first one; it is built again when the server's tuning changes under it.
//! Operators on the CPU fallback are steps of the plan too: the CPU computes them when their
//! turn comes, while the NPU runs the steps that do not depend on them (see the server's
//! [`JobPlanState`](crate::server::JobPlanState)).
//!
//! A graph whose jobs a plan cannot hold keeps the per-job path for good: tiled chains (their
//! stripes are views made per invoke), and a plan that does not fit a capacity (the handle or
//! chunk table, which a plan fills with every activation at once, or the plan's own).
//!
//! Recording and replaying plans (the `record` submodule) is built with the cargo feature
//! `job-plans` (on by default). On the CPU fallback alone a plan saves a few hundred
//! instructions of dispatch per operator, nothing beside the kernels' millions: a CPU-only
//! product may leave it out, and its graphs then run every invoke job by job
//! ([`Graph::job_plan`](super::Graph::job_plan) is `None`), with the same results.

use super::GraphError;
use crate::channel::ComputeChannel;
use crate::error::{Error, JobPlanError};

#[cfg(feature = "job-plans")]
mod record;

pub(super) use record::GraphJobPlan;

/// How a graph's invokes run.
// The plan is held inline, with no heap to box it in; a graph is in the other states only
// around its first invoke (or for good, where its RAM for the plan is the price of `OPS`
// and `TENSORS`, as for its other tables).
#[allow(clippy::large_enum_variant)]
pub(super) enum Path<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> {
    /// The next invoke is the first: job by job.
    First,
    /// The next invoke builds the job plan and runs it.
    Build,
    /// Invokes replay this plan. (None in a build without job plans.)
    #[cfg_attr(not(feature = "job-plans"), allow(dead_code))]
    Planned(GraphJobPlan<'c, C, OPS, TENSORS>),
    /// Invokes run job by job: the plan cannot hold this graph's jobs.
    PerJob,
}

/// The figures of the job plan a graph's invokes replay ([`Graph::job_plan`](super::Graph::job_plan)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct JobPlanReport {
    /// Jobs per invoke.
    pub jobs: usize,
    /// Distinct tensors the plan's jobs use (activations and constants).
    pub tensors: usize,
    /// Of those, the tensors whose access records each run walks and writes: the graph's
    /// inputs and outputs. Constants need no bookkeeping once uploaded, and the plan owns the
    /// activations between (see [`JobPlan::adopt`](crate::client::JobPlan::adopt)).
    pub shared_tensors: usize,
    /// Of the jobs, the operators the CPU fallback computes (the NPU lacks them, or the
    /// server's tuning chose the CPU).
    pub cpu_steps: usize,
}

/// Whether a planned invoke was refused, before it submitted anything, because the server's
/// tuning changed since the plan was built: build it again and invoke again.
pub(super) fn stale(error: &GraphError) -> bool {
    matches!(
        error,
        GraphError::Compute {
            error: Error::JobPlan(JobPlanError::Stale),
            ..
        }
    )
}

/// Job plans in a build without them: no graph ever has one.
#[cfg(not(feature = "job-plans"))]
mod record {
    use core::convert::Infallible;
    use core::marker::PhantomData;

    use super::super::{Graph, GraphError, IoBuffers, Step};
    use super::{JobPlanReport, Path};
    use crate::channel::ComputeChannel;
    use crate::client::Tensor;
    use crate::error::Error;

    /// A graph's job plan: a type with no value in this build, so the compiler leaves out
    /// every path that replays one.
    pub(in crate::graph) struct GraphJobPlan<
        'c,
        C: ComputeChannel,
        const OPS: usize,
        const TENSORS: usize,
    > {
        never: Infallible,
        of: PhantomData<fn() -> (&'c (), C)>,
    }

    impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize>
        GraphJobPlan<'c, C, OPS, TENSORS>
    {
        /// Never called: there is no plan.
        fn absurd(&self) -> ! {
            let _ = self.of;
            match self.never {}
        }
        pub(in crate::graph) fn view(&self, _t: u16) -> Result<&Tensor<'c, C>, GraphError> {
            self.absurd()
        }
        pub(in crate::graph) fn invoke(
            &mut self,
            _steps: (&[Step], &[u16]),
            _names: (&[u16], &[u16]),
            _inputs: &[&[u8]],
            _outputs: &mut [&mut [u8]],
        ) -> Result<(), GraphError> {
            self.absurd()
        }
        pub(in crate::graph) fn start(
            &mut self,
            _steps: (&[Step], &[u16]),
            _input_names: &[u16],
            _inputs: &[&[u8]],
        ) -> Result<(), GraphError> {
            self.absurd()
        }
        pub(in crate::graph) fn named(
            &self,
            _steps: &[Step],
            _order: &[u16],
            _error: Error,
        ) -> GraphError {
            self.absurd()
        }
        pub(in crate::graph) fn submit(
            &mut self,
            _steps: (&[Step], &[u16]),
            _names: (&[u16], &[u16]),
            _io: &IoBuffers<'c, C>,
        ) -> Result<(), GraphError> {
            self.absurd()
        }
        pub(in crate::graph) fn report(&self) -> JobPlanReport {
            self.absurd()
        }
    }

    impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
        /// Never: every invoke runs job by job.
        pub(in crate::graph) fn use_plan(&mut self) -> Result<bool, GraphError> {
            self.path = Path::PerJob;
            Ok(false)
        }
    }
}
