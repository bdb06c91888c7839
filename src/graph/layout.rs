//! Read-only views of a prepared graph's tensors and tasks, for tools that relate what ran
//! (a simulator's trace, with each job's regions) back to the model: which tensor lies where
//! in the activation pool, which step produced it, which tensors each step reads, and the
//! order in which invokes hand steps to the server.
//!
//! Nothing here changes how a graph prepares or runs; the figures are those the arena plan and
//! the schedule fixed at prepare.

use super::{Graph, StepOperand};
use crate::channel::ComputeChannel;
use crate::hal::MAX_JOB_INPUTS;
use crate::handle::HandleId;

/// One activation of a prepared graph (a tensor that is not a constant), as
/// [`Graph::activations`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Activation {
    /// Its index in the model's tensors.
    pub tensor: u16,
    /// Its size in bytes.
    pub bytes: u32,
    /// Its offset in the activation pool, from the arena plan (a RESHAPE's output shares its
    /// input's offset; an input written in place into a concatenation lies inside the
    /// concatenation's output).
    pub offset: u32,
    /// The step (index among [`Graph::operators`]) whose output it is; `None` for a model
    /// input, and for a variable no step writes as its output.
    pub producer: Option<u16>,
    /// A model input.
    pub input: bool,
    /// A model output.
    pub output: bool,
    /// A variable tensor (an operator's state): its block of the pool is held for the graph's
    /// lifetime.
    pub variable: bool,
    /// Kept in the slow memory tier, its offset in the slow pool: listed in
    /// [`PrepareOptions::slow_tensors`](super::PrepareOptions::slow_tensors), or sharing
    /// memory with a tensor listed there.
    pub slow: bool,
}

/// The tensors one step reads and writes, as [`Graph::step_tensors`] reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StepTensors {
    /// Its operands in the order its job reads them: `Some(tensor)` for a model tensor (a
    /// constant or an activation), `None` for a tensor the graph prepared itself (per-channel
    /// multipliers, constants joined into one).
    pub operands: heapless::Vec<Option<u16>, MAX_JOB_INPUTS>,
    /// The model tensor it writes.
    pub output: u16,
    /// Whether it runs work of its own: `false` for a RESHAPE (its output is its input's
    /// memory), a concatenation whose producers wrote straight into its output, and a step the
    /// static schedule cut into bands (its bands run instead; see [`Graph::tasks`]).
    pub runs: bool,
}

impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'_, C, OPS, TENSORS> {
    /// Every activation the graph's steps use, by tensor index: the model's inputs and
    /// outputs, each step's output and every non-constant operand. Empty before prepare.
    pub fn activations(&self) -> impl Iterator<Item = Activation> + '_ {
        let steps = self.model_steps();
        let used = move |t: u16| {
            self.inputs.contains(&t)
                || self.outputs.contains(&t)
                || steps
                    .iter()
                    .any(|s| s.output == t || s.operands.contains(&StepOperand::Tensor(t)))
        };
        self.tensors
            .iter()
            .enumerate()
            .filter(|(_, slot)| !slot.constant)
            .map(|(t, slot)| (t as u16, slot))
            .filter(move |&(t, _)| used(t))
            .map(move |(t, slot)| Activation {
                tensor: t,
                bytes: slot.bytes,
                offset: slot.offset,
                producer: steps.iter().position(|s| s.output == t).map(|k| k as u16),
                input: self.inputs.contains(&t),
                output: self.outputs.contains(&t),
                variable: slot.variable,
                slow: slot.slow,
            })
    }

    /// Each step's tensors, in the order of [`operators`](Self::operators).
    pub fn step_tensors(&self) -> impl Iterator<Item = StepTensors> + '_ {
        self.model_steps().iter().map(|s| StepTensors {
            operands: s
                .operands
                .iter()
                .map(|o| match *o {
                    StepOperand::Tensor(t) => Some(t),
                    StepOperand::Aux(_) => None,
                })
                .collect(),
            output: s.output,
            runs: s.op.is_some() && !s.in_place && !s.split,
        })
    }

    /// The tasks an invoke runs, in the order it hands them to the server: for each, the step
    /// (index among [`operators`](Self::operators)) it computes, whole or a band of its output
    /// rows (a step cut into bands appears once per band). Each task is one job on the NPU, or
    /// one operator on the CPU fallback. The static schedule's order when the graph follows
    /// one, else the model's. A graph running tiled chains ([`Optimise::Memory`](super::Optimise))
    /// runs their stripes as further jobs, not listed here.
    pub fn tasks(&self) -> impl Iterator<Item = u16> + '_ {
        let scheduled = self.scheduled();
        let model = self
            .model_steps()
            .iter()
            .enumerate()
            .filter(move |_| !scheduled)
            .filter(|(_, s)| s.op.is_some() && !s.in_place && !s.split)
            .map(|(k, _)| k as u16);
        let ordered = self
            .order
            .iter()
            .filter(move |_| scheduled)
            .filter_map(|&si| {
                let step = self.steps.get(usize::from(si))?;
                match step.band() {
                    Some(band) => Some(band.parent),
                    None => Some(si),
                }
            });
        model.chain(ordered)
    }

    /// The id of the activation pool's tensor in the server (every activation is placed inside
    /// it at its [`Activation::offset`]); `None` for a graph with no activation bytes, or before
    /// prepare.
    pub fn pool_id(&self) -> Option<HandleId> {
        self.pool.as_ref().map(|p| p.id())
    }
}
