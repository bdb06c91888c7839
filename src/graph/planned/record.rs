//! Recording a graph's job plan and replaying it (see the [parent module](super)): built
//! with the cargo feature `job-plans`.

use super::super::{not_one_op, Graph, GraphError, IoBuffers, Step, StepOperand, MAX_IO};
use super::{JobPlanReport, Path};
use crate::channel::ComputeChannel;
use crate::client::{JobPlan, Tensor};
use crate::error::{Error, JobPlanError};
use crate::ops::Op;

/// A graph's job plan, with the placed tensors of its inputs and outputs (the activations
/// between belong to the plan).
pub(in crate::graph) struct GraphJobPlan<
    'c,
    C: ComputeChannel,
    const OPS: usize,
    const TENSORS: usize,
> {
    plan: JobPlan<'c, C, OPS, TENSORS>,
    /// `(model tensor, its placed tensor)` for each model input and output.
    io: heapless::Vec<(u16, Tensor<'c, C>), { 2 * MAX_IO }>,
}

/// Whether a refusal means "a plan cannot hold this graph" rather than a failure to report.
fn unplannable(error: &GraphError) -> bool {
    matches!(
        error,
        GraphError::Compute {
            // `OnCpu`: the tiled chains, refused below.
            error: Error::CapacityExceeded { .. }
                | Error::JobPlan(JobPlanError::OnCpu { .. } | JobPlanError::Pinned { .. }),
            ..
        }
    )
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize>
    GraphJobPlan<'c, C, OPS, TENSORS>
{
    /// The placed tensor of model tensor `t` (an input or an output).
    pub(in crate::graph) fn view(&self, t: u16) -> Result<&Tensor<'c, C>, GraphError> {
        self.io
            .iter()
            .find(|(u, _)| *u == t)
            .map(|(_, v)| v)
            .ok_or(not_one_op(Error::StaleHandle { index: t }))
    }

    /// An invoke from the plan: writes the inputs into their placed tensors, submits every
    /// job with one channel call, and reads the outputs. `names` are the model's input and
    /// output tensors, `steps` the graph's (for their ops).
    pub(in crate::graph) fn invoke(
        &mut self,
        (steps, order): (&[Step], &[u16]),
        names: (&[u16], &[u16]),
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        self.start((steps, order), names.0, inputs)?;
        let client = self.plan.client();
        for (&t, out) in names.1.iter().zip(outputs.iter_mut()) {
            client
                .read(self.view(t)?, out)
                .map_err(|e| self.named(steps, order, e))?;
        }
        Ok(())
    }

    /// The first half of [`invoke`](Self::invoke), and all of an async invoke's start:
    /// writes the inputs (model tensors `input_names`) and submits every job; the outputs
    /// are then read from their [`view`](Self::view)s.
    pub(in crate::graph) fn start(
        &mut self,
        (steps, order): (&[Step], &[u16]),
        input_names: &[u16],
        inputs: &[&[u8]],
    ) -> Result<(), GraphError> {
        let client = self.plan.client();
        for (&t, input) in input_names.iter().zip(inputs) {
            client.write(self.view(t)?, input).map_err(not_one_op)?;
        }
        self.run(steps, order)
    }

    /// `error` as the graph reports it: a fault on one of the plan's jobs names that step's
    /// operator.
    pub(in crate::graph) fn named(
        &self,
        steps: &[Step],
        order: &[u16],
        error: Error,
    ) -> GraphError {
        let Error::Fault { fence, .. } = error else {
            return not_one_op(error);
        };
        let Some(k) = self.plan.jobs().step_of(fence) else {
            return not_one_op(error);
        };
        // The plan's steps are the graph's steps that run an operator, in `order` when the
        // graph follows a static schedule (as `run` hands them their ops).
        let step = if order.is_empty() {
            steps
                .iter()
                .filter(|s| !s.in_place && s.op.is_some())
                .nth(k)
        } else {
            order.get(k).and_then(|&si| steps.get(usize::from(si)))
        };
        GraphError::Compute {
            op_index: step.map(|s| u32::from(s.op_index)),
            error,
        }
    }

    /// A pipelined invoke from the plan: uploads the inputs straight from `io`'s pinned
    /// blocks, submits every job, and queues the outputs' downloads into `io`, without
    /// waiting.
    pub(in crate::graph) fn submit(
        &mut self,
        (steps, order): (&[Step], &[u16]),
        names: (&[u16], &[u16]),
        io: &IoBuffers<'c, C>,
    ) -> Result<(), GraphError> {
        let client = self.plan.client();
        for (&t, input) in names.0.iter().zip(&io.inputs) {
            client.copy(input, self.view(t)?).map_err(not_one_op)?;
        }
        self.run(steps, order)?;
        for (&t, out) in names.1.iter().zip(&io.outputs) {
            client.copy(self.view(t)?, out).map_err(not_one_op)?;
        }
        Ok(())
    }

    /// Submits the plan's jobs, each with its step's op (nothing when the plan is stale), in
    /// `order` when the graph follows a static schedule.
    fn run(&mut self, steps: &[Step], order: &[u16]) -> Result<(), GraphError> {
        let mut ops: heapless::Vec<&Op, OPS> = heapless::Vec::new();
        if order.is_empty() {
            for step in steps.iter().filter(|s| !s.in_place) {
                if let Some(op) = &step.op {
                    // At most one per step: OPS.
                    let _ = ops.push(op);
                }
            }
        } else {
            for &si in order {
                if let Some(op) = steps.get(usize::from(si)).and_then(|s| s.op.as_ref()) {
                    let _ = ops.push(op);
                }
            }
        }
        self.plan.run(&ops).map_err(|e| self.named(steps, order, e))
    }

    pub(in crate::graph) fn report(&self) -> JobPlanReport {
        let jobs = self.plan.jobs();
        JobPlanReport {
            jobs: jobs.len(),
            tensors: jobs.tensors(),
            shared_tensors: jobs.shared_tensors(),
            cpu_steps: jobs.cpu_steps(),
        }
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// Whether this invoke replays the job plan, building it first where it is due. A graph
    /// the plan cannot hold switches to the per-job path for good. Out of line, as
    /// `build_plan`: a plan being built is kilobytes on the stack, which the invokes that
    /// replay it (and the kernels under them) should not carry.
    #[inline(never)]
    pub(in crate::graph) fn use_plan(&mut self) -> Result<bool, GraphError> {
        if !self.replay {
            if let Path::First = self.path {
                self.path = Path::Build;
            }
            return Ok(false);
        }
        match self.path {
            Path::First => {
                self.path = Path::Build;
                Ok(false)
            }
            Path::PerJob => Ok(false),
            Path::Planned(_) => Ok(true),
            Path::Build => match self.build_plan() {
                Ok(plan) => {
                    self.path = Path::Planned(plan);
                    Ok(true)
                }
                Err(e) if unplannable(&e) => {
                    self.path = Path::PerJob;
                    Ok(false)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// Records the static schedule's tasks in its order, each on its unit: every output
    /// placed first in model order (as the per-job path does), band steps over views of
    /// their rows, which the plan then owns.
    fn push_scheduled(
        &self,
        pool: &Tensor<'c, C>,
        views: &mut heapless::Vec<Option<Tensor<'c, C>>, TENSORS>,
        plan: &mut JobPlan<'c, C, OPS, TENSORS>,
    ) -> Result<(), GraphError> {
        let client = self.client;
        for (si, step) in self.model_steps().iter().enumerate() {
            let out = usize::from(step.output);
            if step.op.is_none() {
                let input = match step.operands.first() {
                    Some(StepOperand::Tensor(t)) => views[usize::from(*t)].clone(),
                    _ => None,
                };
                views[out] = input;
                continue;
            }
            if views[out].is_none() {
                let slot = &self.tensors[out];
                let view = client.place(self.pool_of(pool, slot), slot.offset, slot.bytes);
                views[out] = Some(view.map_err(self.failed(si))?);
            }
            if step.in_place {
                if let Some(view) = &views[out] {
                    plan.include(view).map_err(self.failed(si))?;
                }
            }
        }
        // The model's inputs and outputs are the plan's even where only band views of them
        // are read or written: their access records are where the host's uploads and reads
        // meet the plan's jobs.
        for &t in self.inputs.iter().chain(&self.outputs) {
            if let Some(view) = &views[usize::from(t)] {
                plan.include(view).map_err(not_one_op)?;
            }
        }
        for &si in &self.order {
            let si = usize::from(si);
            let step = &self.steps[si];
            let failed = self.failed(si);
            let op = step
                .op
                .as_ref()
                .ok_or(failed(Error::StaleHandle { index: 0 }))?;
            match step.band() {
                Some(band) => {
                    let (slices, output) = self.band_views(pool, si, band)?;
                    let refs = self.band_refs(si, &slices, |t| views[usize::from(t)].as_ref())?;
                    plan.push_on(step.placement(), op, &refs, &output)
                        .map_err(&failed)?;
                    drop(refs);
                    for (_, slice) in slices {
                        plan.adopt(slice).map_err(&failed)?;
                    }
                    plan.adopt(output).map_err(&failed)?;
                }
                None => {
                    let refs = self.operands_with(si, 0, |t| views[usize::from(t)].as_ref())?;
                    let out = views[usize::from(step.output)].as_ref();
                    let out = out.ok_or(failed(Error::StaleHandle { index: 0 }))?;
                    plan.push_on(step.placement(), op, &refs, out)
                        .map_err(&failed)?;
                }
            }
        }
        Ok(())
    }

    /// Places every activation at its planned offset for the plan's lifetime and records each
    /// operator's job, choosing each as the server's tuning says now.
    #[inline(never)]
    fn build_plan(&self) -> Result<GraphJobPlan<'c, C, OPS, TENSORS>, GraphError> {
        if let Some(tile) = self.striped().first() {
            let step = &self.steps[usize::from(tile.first)];
            return Err(GraphError::Compute {
                op_index: Some(u32::from(step.op_index)),
                error: Error::JobPlan(JobPlanError::OnCpu {
                    op: step.op.map_or(crate::ops::OpKind::Reshape, |op| op.kind()),
                }),
            });
        }
        let pool = self.pool()?;
        let client = self.client;
        let mut views: heapless::Vec<Option<Tensor<'c, C>>, TENSORS> = heapless::Vec::new();
        for _ in 0..self.tensors.len() {
            // As many as the graph's tensors: TENSORS at most.
            let _ = views.push(None);
        }
        let place = |views: &mut heapless::Vec<Option<Tensor<'c, C>>, TENSORS>, t: u16| {
            let slot = &self.tensors[usize::from(t)];
            let view = client.place(self.pool_of(&pool, slot), slot.offset, slot.bytes)?;
            views[usize::from(t)] = Some(view);
            Ok::<(), Error>(())
        };
        for &t in &self.inputs {
            place(&mut views, t).map_err(not_one_op)?;
        }
        let mut plan = client.job_plan();
        if self.scheduled() {
            self.push_scheduled(&pool, &mut views, &mut plan)?;
        }
        for (si, step) in self.steps.iter().enumerate() {
            if self.scheduled() {
                break;
            }
            let failed = self.failed(si);
            let Some(op) = &step.op else {
                // RESHAPE: another name for its input's memory.
                let input = match step.operands.first() {
                    Some(StepOperand::Tensor(t)) => views[usize::from(*t)].clone(),
                    _ => None,
                };
                views[usize::from(step.output)] = input;
                continue;
            };
            place(&mut views, step.output).map_err(&failed)?;
            if step.in_place {
                // Its producers wrote it through their own tensors: it is the plan's, so that
                // its readers (the host, for a model output) wait for them.
                if let Some(view) = &views[usize::from(step.output)] {
                    plan.include(view).map_err(&failed)?;
                }
                continue;
            }
            let refs = self.operands_with(si, 0, |t| views[usize::from(t)].as_ref())?;
            let output = views[usize::from(step.output)].as_ref();
            let output = output.ok_or(failed(Error::StaleHandle { index: 0 }))?;
            match step.placement() {
                crate::server::Placement::Auto => plan.push(op, &refs, output),
                at => plan.push_on(at, op, &refs, output),
            }
            .map_err(&failed)?;
        }
        // Only the plan's jobs touch the activations between input and output: it adopts
        // them, and its runs skip their bookkeeping. (A RESHAPE's output is its input's
        // tensor: the plan owns it once the last view of it is handed over.)
        let mut io = heapless::Vec::new();
        for &t in self.inputs.iter().chain(&self.outputs) {
            if let Some(view) = views[usize::from(t)].clone() {
                // At most MAX_IO inputs and MAX_IO outputs.
                let _ = io.push((t, view));
            }
        }
        let is_io = |id| io.iter().any(|(_, v): &(u16, Tensor<'c, C>)| v.id() == id);
        for view in views.iter_mut() {
            if view.as_ref().is_some_and(|v| !is_io(v.id())) {
                if let Some(view) = view.take() {
                    plan.adopt(view).map_err(not_one_op)?;
                }
            }
        }
        Ok(GraphJobPlan { plan, io })
    }
}
