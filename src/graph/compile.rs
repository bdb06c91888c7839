//! A prepared graph written as a compiled model ([`compiled`](crate::compiled)): its steps in
//! order, each op packed, the arena plan's offsets, and the constants the steps read (copied
//! from the model or prepared: per-channel multipliers).

use super::{capacity, not_one_op, Graph, GraphError, Step, StepOperand};
use crate::channel::ComputeChannel;
use crate::compiled::format::{
    Header, ImageWriter, CONSTANT_ALIGNMENT, INPUT_ENTRY, IN_IMAGE, STEP_HEAD,
};
use npu_kernels::packed::Words;

/// Most bytes of one step's packed parameters.
const MAX_PARAMS: usize = 256;

/// A refusal naming the step's operator.
fn refused(step: &Step, what: &'static str) -> GraphError {
    GraphError::Unsupported {
        op_index: u32::from(step.op_index),
        op: step.builtin,
        what,
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// Writes the prepared model into `out` as a compiled model, which a device runs on its
    /// CPU with [`CompiledModel`](crate::compiled::CompiledModel) and nothing of the rest of
    /// the stack; returns the bytes written. `model` is the `.tflite` file the graph was
    /// prepared from (its fingerprint is recorded). `npu-sim compile` does this for a model.
    ///
    /// The steps run in the model's order over the arena plan the graph made (in place where
    /// the graph computes in place), so a compiled model's outputs are the graph's, byte for
    /// byte, in [`arena().activation_bytes`](Self::arena) of arena.
    ///
    /// Errors: [`GraphError::Unsupported`] naming the operator when a step has no packed form
    /// yet, when the graph runs chains in stripes ([`Optimise::Memory`](super::Optimise)) or
    /// splits operators over several units (prepare it for one unit, or on
    /// [`CpuOnly`](crate::hal::CpuOnly)); [`GraphError::CapacityExceeded`] when `out` is too
    /// small (`"compiled model buffer"`), or the model has more than 255 inputs, outputs or
    /// variables.
    pub fn compile(&self, model: &[u8], out: &mut [u8]) -> Result<usize, GraphError> {
        if let Some(tile) = self.striped().first() {
            let what = "chains run in stripes in a compiled model (prepare with Optimise::Cycles)";
            return Err(refused(&self.steps[usize::from(tile.first)], what));
        }
        let steps = &self.steps[..usize::from(self.model_steps)];
        if let Some(split) = steps.iter().find(|s| s.split) {
            let what =
                "operator split over several units in a compiled model (prepare for one unit)";
            return Err(refused(split, what));
        }
        let len = out.len();
        let full = || capacity("compiled model buffer", len, len.saturating_add(1));
        let variables: heapless::Vec<u16, TENSORS> = (0..self.tensors.len() as u16)
            .filter(|&t| self.tensors[usize::from(t)].variable)
            .collect();
        let count = |n: usize, what| u8::try_from(n).map_err(|_| capacity(what, 255, n));
        let mut header = Header {
            arena: self.memory.activation_bytes,
            alignment: self
                .client
                .capabilities()
                .map_err(not_one_op)?
                .alignment
                .max(4),
            inputs: count(self.inputs.len(), "compiled model inputs")?,
            outputs: count(self.outputs.len(), "compiled model outputs")?,
            variables: count(variables.len(), "compiled model variables")?,
            model: super::schedule_table::fnv(0xcbf2_9ce4_8422_2325, model),
            ..Header::default()
        };
        let mut w = ImageWriter::new(out).ok_or_else(full)?;
        for &t in self.inputs.iter().chain(&self.outputs) {
            let slot = &self.tensors[usize::from(t)];
            w.words(&[slot.offset, slot.bytes]).ok_or_else(full)?;
        }
        for &t in &variables {
            let slot = &self.tensors[usize::from(t)];
            let entry = [slot.offset, slot.bytes, u32::from(slot.initial)];
            w.words(&entry).ok_or_else(full)?;
        }
        // The steps' bytes first, so that the constants' offsets are known as they are written.
        let runs = |s: &&Step| s.op.is_some() && !s.in_place;
        let mut params = [0u8; MAX_PARAMS];
        let mut steps_bytes = 0;
        for step in steps.iter().filter(runs) {
            let (_, p) = self.pack(step, &mut params)?;
            steps_bytes += STEP_HEAD + INPUT_ENTRY * step.operands.len() + p;
        }
        let constants_at = (w.len() + steps_bytes).next_multiple_of(CONSTANT_ALIGNMENT);
        // Each constant's offset in the image, in the order the steps first read them.
        let mut tensor_at: heapless::Vec<u32, TENSORS> = heapless::Vec::new();
        let _ = tensor_at.resize(self.tensors.len(), 0);
        let mut aux_at: heapless::Vec<u32, OPS> = heapless::Vec::new();
        let _ = aux_at.resize(self.aux.len(), 0);
        let mut next = constants_at;
        for step in steps.iter().filter(runs) {
            let (tag, p) = self.pack(step, &mut params)?;
            let head = u32::from(tag) | (step.operands.len() as u32) << 16;
            let output = &self.tensors[usize::from(step.output)];
            w.words(&[head, (p / 4) as u32, output.offset, output.bytes])
                .ok_or_else(full)?;
            for &operand in &step.operands {
                let (at, bytes) = match operand {
                    StepOperand::Tensor(t) if !self.tensors[usize::from(t)].constant => {
                        let slot = &self.tensors[usize::from(t)];
                        (slot.offset, slot.bytes)
                    }
                    StepOperand::Tensor(t) => {
                        let bytes = self.tensors[usize::from(t)].bytes;
                        (
                            place(&mut tensor_at[usize::from(t)], &mut next, bytes),
                            bytes,
                        )
                    }
                    StepOperand::Aux(a) => {
                        let bytes = self.aux[usize::from(a)].bytes();
                        (place(&mut aux_at[usize::from(a)], &mut next, bytes), bytes)
                    }
                };
                w.words(&[at, bytes]).ok_or_else(full)?;
            }
            w.bytes(&params[..p]).ok_or_else(full)?;
        }
        while w.len() < constants_at {
            w.words(&[0]).ok_or_else(full)?;
        }
        // The constants, in the order their offsets were given.
        for step in steps.iter().filter(runs) {
            for &operand in &step.operands {
                let (at, value) = match operand {
                    StepOperand::Tensor(t) if self.tensors[usize::from(t)].constant => {
                        let slot = &self.tensors[usize::from(t)];
                        (tensor_at[usize::from(t)], slot.value.as_ref())
                    }
                    StepOperand::Aux(a) => (aux_at[usize::from(a)], self.aux.get(usize::from(a))),
                    StepOperand::Tensor(_) => continue,
                };
                if (at & !IN_IMAGE) as usize != w.len() {
                    // Written already, for an earlier reader.
                    continue;
                }
                let value = value.ok_or(refused(
                    step,
                    "constant the graph released, in a compiled model",
                ))?;
                let bytes = value.bytes() as usize;
                let into = w.rest().get_mut(..bytes).ok_or_else(full)?;
                self.client.read(value, into).map_err(not_one_op)?;
                w.advance(bytes).ok_or_else(full)?;
                w.align().ok_or_else(full)?;
            }
        }
        header.steps = steps.iter().filter(runs).count() as u16;
        header.constants_at = constants_at as u32;
        w.finish(&header).ok_or_else(full)
    }

    /// Packs `step`'s op into `params`: its tag and the bytes written.
    fn pack(&self, step: &Step, params: &mut [u8; MAX_PARAMS]) -> Result<(u16, usize), GraphError> {
        let mut words = Words::new(params);
        let packed = step.op.and_then(|op| op.pack(&mut words));
        match (packed, words.len()) {
            (Some(tag), Some(len)) => Ok((tag, len)),
            (None, _) => Err(refused(
                step,
                "operator in a compiled model: it has no packed form yet",
            )),
            (Some(_), None) => Err(capacity(
                "packed parameter bytes",
                MAX_PARAMS,
                MAX_PARAMS + 1,
            )),
        }
    }
}

/// The image offset of a constant of `bytes`: the one it was given, or the next free one.
fn place(at: &mut u32, next: &mut usize, bytes: u32) -> u32 {
    if *at == 0 {
        *at = IN_IMAGE | *next as u32;
        *next = (*next + bytes as usize).next_multiple_of(CONSTANT_ALIGNMENT);
    }
    *at
}
