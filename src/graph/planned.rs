//! A graph's job plan: every invoke's jobs built once (see [`crate::server::JobPlan`]).
//!
//! [`Graph::invoke`] places each activation in the pool and dispatches each operator through
//! `execute`, which checks operands and walks access records job by job. A [`GraphPlan`]
//! places every activation once, as a tensor that lives as long as the plan, and records
//! every operator's job in a job plan. [`Graph::invoke_planned`] then writes the inputs,
//! submits the whole list with one channel call, and reads the outputs: the same jobs, on
//! the same queues, with the same dependencies, for a fraction of the CPU's work per job.
//!
//! The plan is the caller's to hold, and its RAM is the caller's to budget
//! ([`GraphPlan::state_bytes`]): a graph that is never planned costs nothing for it.
//! Graphs with tiled chains ([`Optimise::Memory`](super::Optimise)) and operators that run on
//! the CPU are not planned (their stripes are views made per invoke, and the CPU fallback
//! waits for its inputs); they run with [`Graph::invoke`].

use super::{not_one_op, Graph, GraphError, StepOperand};
use crate::channel::ComputeChannel;
use crate::client::{Plan, Tensor};
use crate::hal::Op;
use crate::handle::HandleId;

/// A prepared graph's jobs as a [`JobPlan`](crate::server::JobPlan), with its activations
/// placed for good, made by [`Graph::plan`] and run by [`Graph::invoke_planned`] and
/// [`Graph::submit_planned`]: the same jobs, queues and dependencies as
/// [`Graph::invoke`], with the operand checks and access-record walks done once instead of
/// at every job. Its RAM is the caller's ([`state_bytes`](Self::state_bytes)); graphs with
/// tiled chains and operators on the CPU are not planned. `STEPS` jobs and `TENSORS`
/// tensors at most: the graph's `OPS` and `TENSORS` always suffice.
pub struct GraphPlan<'c, C: ComputeChannel, const STEPS: usize = 64, const TENSORS: usize = 128> {
    plan: Plan<'c, C, STEPS, TENSORS>,
    /// Per model tensor, the placed input or output (`None` for the rest: constants, and the
    /// activations between, which the plan owns).
    views: heapless::Vec<Option<Tensor<'c, C>>, TENSORS>,
    /// The pool of the graph it was built for.
    pool: HandleId,
}

impl<C: ComputeChannel, const STEPS: usize, const TENSORS: usize> GraphPlan<'_, C, STEPS, TENSORS> {
    /// Jobs per invoke.
    pub fn jobs(&self) -> usize {
        self.plan.jobs().len()
    }

    /// Distinct tensors the plan's jobs use (activations and constants).
    pub fn tensors(&self) -> usize {
        self.plan.jobs().tensors()
    }

    /// Of those, the tensors whose access records each run walks and writes: the graph's
    /// inputs and outputs. Constants need no bookkeeping once uploaded, and the plan owns
    /// the activations between (see [`Plan::adopt`]).
    pub fn shared_tensors(&self) -> usize {
        self.plan.jobs().shared_tensors()
    }

    /// Bytes of RAM a plan of these capacities occupies.
    pub const fn state_bytes() -> usize {
        core::mem::size_of::<Self>()
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// Builds the graph's job plan: places every activation at its planned offset for the
    /// plan's lifetime and records each operator's job, choosing each as the server's tuning
    /// says now. Errors: [`GraphError::Unsupported`] for a graph with tiled chains;
    /// [`GraphError::Compute`] naming the operator whose job a plan cannot hold (an op on the
    /// CPU: [`JobPlanError::OnCpu`](crate::error::JobPlanError::OnCpu)) or when the plan's, the
    /// handle table's or the chunk table's capacity runs out.
    pub fn plan<const STEPS: usize, const PT: usize>(
        &self,
    ) -> Result<GraphPlan<'c, C, STEPS, PT>, GraphError> {
        if let Some(tile) = self.tiles.first() {
            let step = &self.steps[usize::from(tile.first)];
            return Err(GraphError::Unsupported {
                op_index: u32::from(step.op_index),
                op: step.builtin,
                what: "a job plan of a tiled chain",
            });
        }
        let pool = self.pool()?;
        let client = self.client;
        let mut views: heapless::Vec<Option<Tensor<'c, C>>, PT> = heapless::Vec::new();
        for _ in 0..self.tensors.len() {
            views
                .push(None)
                .map_err(|_| super::capacity("GraphPlan TENSORS", PT, self.tensors.len()))?;
        }
        let place = |views: &mut heapless::Vec<Option<Tensor<'c, C>>, PT>, t: u16| {
            let slot = &self.tensors[usize::from(t)];
            let view = client.place(&pool, slot.offset, slot.bytes)?;
            views[usize::from(t)] = Some(view);
            Ok::<(), crate::Error>(())
        };
        for &t in &self.inputs {
            place(&mut views, t).map_err(not_one_op)?;
        }
        let mut plan = client.plan();
        for (si, step) in self.steps.iter().enumerate() {
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
                continue;
            }
            let refs = self.operands_with(si, 0, |t| views[usize::from(t)].as_ref())?;
            let output = views[usize::from(step.output)].as_ref();
            let output = output.ok_or(failed(crate::Error::StaleHandle { index: 0 }))?;
            plan.push(op, &refs, output).map_err(&failed)?;
        }
        // Only the plan's jobs touch the activations between input and output: it adopts
        // them, and its runs skip their bookkeeping. (A RESHAPE's output is its input's
        // tensor: the plan owns it once the last view of it is handed over.)
        let io = |views: &heapless::Vec<Option<Tensor<'c, C>>, PT>, id| {
            let mut io = self.inputs.iter().chain(&self.outputs);
            io.any(|&t| views[usize::from(t)].as_ref().is_some_and(|v| v.id() == id))
        };
        for t in 0..views.len() {
            if views[t].as_ref().is_some_and(|v| !io(&views, v.id())) {
                if let Some(view) = views[t].take() {
                    plan.adopt(view).map_err(not_one_op)?;
                }
            }
        }
        Ok(GraphPlan {
            plan,
            views,
            pool: pool.id(),
        })
    }

    /// [`invoke`](Self::invoke) through a plan built by [`plan`](Self::plan): writes the
    /// inputs into their placed tensors, submits every job with one channel call, and reads
    /// the outputs. Errors: [`GraphError::BadIo`] as `invoke`; [`GraphError::Compute`] with
    /// [`JobPlanError::Stale`](crate::error::JobPlanError::Stale) once the server's tuning changed
    /// (build the plan again) or with [`Error::ForeignHandle`](crate::Error::ForeignHandle)
    /// for a plan of another graph.
    pub fn invoke_planned<const STEPS: usize, const PT: usize>(
        &mut self,
        plan: &mut GraphPlan<'c, C, STEPS, PT>,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        self.check_io("input", &self.inputs, inputs.iter().map(|b| b.len()))?;
        self.check_io("output", &self.outputs, outputs.iter().map(|b| b.len()))?;
        self.check_plan(plan)?;
        let client = self.client;
        for (k, &t) in self.inputs.iter().enumerate() {
            client.write(plan.view(t)?, inputs[k]).map_err(not_one_op)?;
        }
        self.run_plan(plan)?;
        for (k, out) in outputs.iter_mut().enumerate() {
            client
                .read(plan.view(self.outputs[k])?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }

    /// [`submit`](Self::submit) through a plan: uploads the inputs straight from `io`'s
    /// pinned blocks, submits every job, and queues the outputs' downloads into `io`, without
    /// waiting. Errors as [`invoke_planned`](Self::invoke_planned).
    pub fn submit_planned<const STEPS: usize, const PT: usize>(
        &mut self,
        plan: &mut GraphPlan<'c, C, STEPS, PT>,
        io: &super::IoBuffers<'c, C>,
    ) -> Result<(), GraphError> {
        let inputs = io.inputs.iter().map(|t| t.bytes() as usize);
        self.check_io("input", &self.inputs, inputs)?;
        let outputs = io.outputs.iter().map(|t| t.bytes() as usize);
        self.check_io("output", &self.outputs, outputs)?;
        self.check_plan(plan)?;
        let client = self.client;
        for (k, &t) in self.inputs.iter().enumerate() {
            client
                .copy(&io.inputs[k], plan.view(t)?)
                .map_err(not_one_op)?;
        }
        self.run_plan(plan)?;
        for (k, out) in io.outputs.iter().enumerate() {
            client
                .copy(plan.view(self.outputs[k])?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }

    fn check_plan<const STEPS: usize, const PT: usize>(
        &self,
        plan: &GraphPlan<'c, C, STEPS, PT>,
    ) -> Result<(), GraphError> {
        match &self.pool {
            Some(pool) if pool.id() == plan.pool => Ok(()),
            _ => Err(not_one_op(crate::Error::ForeignHandle)),
        }
    }

    /// Submits the plan's jobs, each with its step's op.
    fn run_plan<const STEPS: usize, const PT: usize>(
        &self,
        plan: &mut GraphPlan<'c, C, STEPS, PT>,
    ) -> Result<(), GraphError> {
        let mut ops: heapless::Vec<&Op, OPS> = heapless::Vec::new();
        for step in self.steps.iter().filter(|s| !s.in_place) {
            if let Some(op) = &step.op {
                // At most one per step: OPS.
                let _ = ops.push(op);
            }
        }
        plan.plan.run(&ops).map_err(not_one_op)
    }
}

impl<'c, C: ComputeChannel, const STEPS: usize, const TENSORS: usize>
    GraphPlan<'c, C, STEPS, TENSORS>
{
    /// The placed tensor of model tensor `t`.
    fn view(&self, t: u16) -> Result<&Tensor<'c, C>, GraphError> {
        self.views
            .get(usize::from(t))
            .and_then(Option::as_ref)
            .ok_or(not_one_op(crate::Error::StaleHandle { index: t }))
    }
}
