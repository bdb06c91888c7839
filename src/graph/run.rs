//! The per-job path of an invoke: each activation placed at its planned offset as a tensor
//! of this invoke, each operator submitted with `execute` (dependencies worked out job by job,
//! the tuning the server was built with followed), tiled chains run stripe by stripe, and
//! each tensor released after its last reader. The first invoke of every graph takes it, and
//! every invoke of a graph whose jobs a job plan cannot hold (see
//! [`planned`](super::planned)).

use super::cut::Cut;
use super::tile::{self, Tile};
use super::{not_one_op, Graph, GraphError, IoBuffers, StepOperand};
use crate::channel::ComputeChannel;
use crate::client::Tensor;
use crate::error::Error;
use crate::hal::MAX_JOB_INPUTS;
use crate::server::Placement;

/// A band step's slices of its operands (by operand index) and of its output.
pub(super) type BandViews<'c, C> = (
    heapless::Vec<(usize, Tensor<'c, C>), MAX_JOB_INPUTS>,
    Tensor<'c, C>,
);

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    pub(super) fn submit_steps(&mut self, io: &IoBuffers<'c, C>) -> Result<(), GraphError> {
        let client = self.client;
        let pool = self.pool()?;
        self.place_inputs(&pool, |k, t| client.copy(&io.inputs[k], t))?;
        self.run_steps(&pool)?;
        for (k, out) in io.outputs.iter().enumerate() {
            client
                .copy(self.output_value(k)?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }

    pub(super) fn check_io(
        &self,
        what: &'static str,
        tensors: &[u16],
        lens: impl ExactSizeIterator<Item = usize>,
    ) -> Result<(), GraphError> {
        if lens.len() != tensors.len() {
            return Err(GraphError::IoCount {
                what,
                // A model has at most MAX_IO inputs and outputs.
                expected: tensors.len() as u32,
                given: u32::try_from(lens.len()).unwrap_or(u32::MAX),
            });
        }
        for (k, (len, &t)) in lens.zip(tensors).enumerate() {
            let expected = self.tensors[usize::from(t)].bytes;
            if len != expected as usize {
                return Err(GraphError::BadIo {
                    what,
                    index: k as u32,
                    expected,
                    actual: u32::try_from(len).unwrap_or(u32::MAX),
                });
            }
        }
        Ok(())
    }
    /// The pool `slot`'s bytes lie in, given the arena's `pool`: the slow tier's for a tensor
    /// kept there ([`PrepareOptions::slow_tensors`](super::PrepareOptions::slow_tensors)).
    pub(super) fn pool_of<'s>(
        &'s self,
        pool: &'s Tensor<'c, C>,
        slot: &super::Slot<'c, C>,
    ) -> &'s Tensor<'c, C> {
        match (&self.slow_pool, slot.slow) {
            (Some(slow), true) => slow,
            _ => pool,
        }
    }
    /// The activation pool (absent only if preparing it failed).
    pub(super) fn pool(&self) -> Result<Tensor<'c, C>, GraphError> {
        self.pool
            .clone()
            .ok_or(not_one_op(Error::StaleHandle { index: 0 }))
    }
    /// Places each model input at its planned offset and fills it with `fill(k, tensor)`.
    fn place_inputs(
        &mut self,
        pool: &Tensor<'c, C>,
        mut fill: impl FnMut(usize, &Tensor<'c, C>) -> Result<(), Error>,
    ) -> Result<(), GraphError> {
        for (k, &t) in self.inputs.iter().enumerate() {
            let slot = &self.tensors[usize::from(t)];
            let tensor = self
                .client
                .place(self.pool_of(pool, slot), slot.offset, slot.bytes)
                .and_then(|tensor| fill(k, &tensor).map(|()| tensor))
                .map_err(not_one_op)?;
            self.tensors[usize::from(t)].value = Some(tensor);
        }
        Ok(())
    }
    /// The live tensor of model output `k`.
    pub(super) fn output_value(&self, k: usize) -> Result<&Tensor<'c, C>, GraphError> {
        let t = self.outputs[k];
        self.tensors[usize::from(t)]
            .value
            .as_ref()
            .ok_or(not_one_op(Error::StaleHandle { index: t }))
    }

    pub(super) fn run(
        &mut self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        let client = self.client;
        let pool = self.pool()?;
        self.place_inputs(&pool, |k, t| client.write(t, inputs[k]))?;
        self.run_steps(&pool)?;
        for (k, out) in outputs.iter_mut().enumerate() {
            client
                .read(self.output_value(k)?, out)
                .map_err(not_one_op)?;
        }
        Ok(())
    }
    /// The first half of [`run`](Self::run) (written out there too, to leave the blocking
    /// invoke's code as it was): writes the inputs and submits every step; returns once they
    /// are queued. The outputs' live tensors are then [`output_value`](Self::output_value)s.
    pub(super) fn start(&mut self, inputs: &[&[u8]]) -> Result<(), GraphError> {
        let client = self.client;
        let pool = self.pool()?;
        self.place_inputs(&pool, |k, t| client.write(t, inputs[k]))?;
        self.run_steps(&pool)
    }
    /// Submits every step; returns once they are queued.
    fn run_steps(&mut self, pool: &Tensor<'c, C>) -> Result<(), GraphError> {
        if self.scheduled() {
            return self.run_scheduled(pool);
        }
        let mut si = 0;
        while si < self.steps.len() {
            let last = match self.striped().iter().find(|t| usize::from(t.first) == si) {
                Some(&tile) => {
                    self.run_tile(pool, tile)?;
                    usize::from(tile.last)
                }
                None => {
                    self.run_step(pool, si)?;
                    si
                }
            };
            for k in si..=last {
                for operand in &self.steps[k].operands {
                    if let StepOperand::Tensor(t) = *operand {
                        let slot = &mut self.tensors[usize::from(t)];
                        if !slot.kept() && usize::from(slot.last_use) == k {
                            slot.value = None;
                        }
                    }
                }
            }
            si = last + 1;
        }
        Ok(())
    }

    /// Submits every task in the static schedule's order, each on its unit. Each output is
    /// placed just before its job is submitted, as on the model-ordered path: a placement
    /// takes over the access records of the placements under it, which must already hold the
    /// jobs it has to wait for (the schedule keeps every pair of tasks whose memory meets in
    /// model order). A split step's whole output is placed after its last band, so its readers
    /// wait for every band. Steps that run nothing (RESHAPE, a concatenation done in place)
    /// are bound once their inputs are. Activations stay placed until the invoke ends.
    fn run_scheduled(&mut self, pool: &Tensor<'c, C>) -> Result<(), GraphError> {
        let client = self.client;
        self.bind_passive(pool)?;
        for k in 0..self.order.len() {
            let si = usize::from(self.order[k]);
            let step = &self.steps[si];
            let failed = self.failed(si);
            let op = step
                .op
                .as_ref()
                .ok_or(failed(Error::StaleHandle { index: 0 }))?;
            let output = usize::from(step.output);
            match step.band() {
                Some(band) => {
                    let (slices, out) = self.band_views(pool, si, band)?;
                    let refs = self
                        .band_refs(si, &slices, |t| self.tensors[usize::from(t)].value.as_ref())?;
                    client
                        .execute_on(step.placement(), op, &refs, &out)
                        .map_err(&failed)?;
                    drop(refs);
                    drop((slices, out));
                    let last = self.order[k + 1..].iter().all(|&later| {
                        self.steps[usize::from(later)]
                            .band()
                            .is_none_or(|b| b.parent != band.parent)
                    });
                    if last {
                        let slot = &self.tensors[output];
                        let whole = client.place(self.pool_of(pool, slot), slot.offset, slot.bytes);
                        self.tensors[output].value = Some(whole.map_err(&failed)?);
                    }
                }
                None => {
                    let slot = &self.tensors[output];
                    let out = client
                        .place(self.pool_of(pool, slot), slot.offset, slot.bytes)
                        .map_err(&failed)?;
                    let refs = self.operand_refs(si, 0)?;
                    client
                        .execute_on(step.placement(), op, &refs, &out)
                        .map_err(&failed)?;
                    drop(refs);
                    self.tensors[output].value = Some(out);
                }
            }
            self.bind_passive(pool)?;
        }
        Ok(())
    }

    /// Binds the outputs of the steps that run nothing whose inputs are all bound: a
    /// RESHAPE's is its input's tensor, an in-place concatenation's is placed over the blocks
    /// its producers wrote.
    fn bind_passive(&mut self, pool: &Tensor<'c, C>) -> Result<(), GraphError> {
        for si in 0..usize::from(self.model_steps) {
            let step = &self.steps[si];
            let output = usize::from(step.output);
            if self.tensors[output].value.is_some() || (step.op.is_some() && !step.in_place) {
                continue;
            }
            let ready = step.operands.iter().all(|o| match *o {
                StepOperand::Tensor(t) => self.tensors[usize::from(t)].value.is_some(),
                StepOperand::Aux(_) => true,
            });
            if !ready {
                continue;
            }
            let value = if step.op.is_none() {
                self.operand_refs(si, 0)?[0].clone()
            } else {
                let slot = &self.tensors[output];
                self.client
                    .place(self.pool_of(pool, slot), slot.offset, slot.bytes)
                    .map_err(self.failed(si))?
            };
            self.tensors[output].value = Some(value);
        }
        Ok(())
    }

    /// A band step's views: its slices of the operands its parent's cut slices (by operand
    /// index), and of the output.
    pub(super) fn band_views(
        &self,
        pool: &Tensor<'c, C>,
        si: usize,
        band: super::schedule::Band,
    ) -> Result<BandViews<'c, C>, GraphError> {
        let failed = self.failed(si);
        let stale = || failed(Error::StaleHandle { index: 0 });
        let step = &self.steps[si];
        let parent = &self.steps[usize::from(band.parent)];
        let cut = parent.op.as_ref().and_then(Cut::of).ok_or(stale())?;
        let (at, len) = cut.input_bytes(&(band.in_rows.0..band.in_rows.1));
        let mut inputs = heapless::Vec::new();
        for (k, operand) in step.operands.iter().enumerate() {
            if !cut.slices(k) {
                continue;
            }
            let StepOperand::Tensor(t) = *operand else {
                return Err(stale());
            };
            let slot = &self.tensors[usize::from(t)];
            let view = self
                .client
                .place(self.pool_of(pool, slot), slot.offset + at, len)
                .map_err(&failed)?;
            // At most one per operand: MAX_JOB_INPUTS.
            let _ = inputs.push((k, view));
        }
        let (at, len) = cut.output_bytes(&(band.out_rows.0..band.out_rows.1));
        let slot = &self.tensors[usize::from(step.output)];
        let output = self
            .client
            .place(self.pool_of(pool, slot), slot.offset + at, len)
            .map_err(&failed)?;
        Ok((inputs, output))
    }

    /// Step `si`'s operands with the band's slices in place of the tensors they slice.
    pub(super) fn band_refs<'s>(
        &'s self,
        si: usize,
        slices: &'s [(usize, Tensor<'c, C>)],
        activation: impl Fn(u16) -> Option<&'s Tensor<'c, C>>,
    ) -> Result<heapless::Vec<&'s Tensor<'c, C>, MAX_JOB_INPUTS>, GraphError> {
        Ok(sliced_refs(&self.operands_with(si, 0, activation)?, slices))
    }

    pub(super) fn failed(&self, si: usize) -> impl Fn(Error) -> GraphError {
        let op_index = self.steps.get(si).map(|s| u32::from(s.op_index));
        move |error| GraphError::Compute { op_index, error }
    }
    /// Step `si`'s operands: its activations and constants, in order, from operand `from` on,
    /// the live activations of this invoke.
    fn operand_refs(
        &self,
        si: usize,
        from: usize,
    ) -> Result<heapless::Vec<&Tensor<'c, C>, MAX_JOB_INPUTS>, GraphError> {
        self.operands_with(si, from, |t| self.tensors[usize::from(t)].value.as_ref())
    }
    /// Step `si`'s operands from operand `from` on, each activation `t` as `activation(t)`
    /// gives it (the live tensor of an invoke, or a job plan's placement); constants,
    /// variables and auxiliary tensors are the graph's own.
    pub(super) fn operands_with<'s>(
        &'s self,
        si: usize,
        from: usize,
        activation: impl Fn(u16) -> Option<&'s Tensor<'c, C>>,
    ) -> Result<heapless::Vec<&'s Tensor<'c, C>, MAX_JOB_INPUTS>, GraphError> {
        let mut refs = heapless::Vec::new();
        for operand in self.steps[si].operands.iter().skip(from) {
            let t = match *operand {
                StepOperand::Tensor(t) => {
                    let slot = &self.tensors[usize::from(t)];
                    if slot.kept() {
                        slot.value.as_ref()
                    } else {
                        activation(t)
                    }
                }
                StepOperand::Aux(a) => self.aux.get(usize::from(a)),
            };
            let _ = refs.push(t.ok_or(self.failed(si)(Error::StaleHandle { index: 0 }))?);
        }
        Ok(refs)
    }
    /// Runs one step on whole tensors: its output is placed where the plan says.
    fn run_step(&mut self, pool: &Tensor<'c, C>, si: usize) -> Result<(), GraphError> {
        let step = &self.steps[si];
        let refs = self.operand_refs(si, 0)?;
        let value = match &step.op {
            None => refs[0].clone(),
            Some(op) => {
                let slot = &self.tensors[usize::from(step.output)];
                // Placing the output over its inputs' memory makes its readers wait for the
                // producers' writes.
                let out = self
                    .client
                    .place(self.pool_of(pool, slot), slot.offset, slot.bytes);
                let out = out.map_err(self.failed(si))?;
                if !step.in_place && !step.split {
                    // As the server's tune mode says: `execute` when tuning is off.
                    let done = match step.placement() {
                        Placement::Auto => self.client.execute(op, &refs, &out),
                        at => self.client.execute_on(at, op, &refs, &out),
                    };
                    done.map_err(self.failed(si))?;
                }
                out
            }
        };
        let output = usize::from(step.output);
        drop(refs);
        self.tensors[output].value = Some(value);
        Ok(())
    }
    /// Runs a tiled chain stripe by stripe (see [`tile`]): each op reads a band of the
    /// previous op's band buffer (of the chain's input, for the first) and writes its own band
    /// buffer (its rows of the chain's output, for the last). Bands are placed tensors, so
    /// reusing a band buffer waits for the jobs that read its previous stripe.
    fn run_tile(&mut self, pool: &Tensor<'c, C>, tile: Tile) -> Result<(), GraphError> {
        let client = self.client;
        let (a, b) = (usize::from(tile.first), usize::from(tile.last));
        let len = b - a + 1;
        let op_at = |k: usize| self.chain_op(a, k);
        let uncut = |k: usize| GraphError::Unsupported {
            op_index: u32::from(self.steps[a + k].op_index),
            op: self.steps[a + k].builtin,
            what: "row band of a tiled chain",
        };
        let input = self.chain_input(a).ok_or(uncut(0))?;
        let in_offset = self.tensors[usize::from(input)].offset;
        let output = self.steps[b].output;
        let (out_offset, out_bytes) = {
            let slot = &self.tensors[usize::from(output)];
            (slot.offset, slot.bytes)
        };
        let height = op_at(len - 1)
            .and_then(tile::shapes)
            .ok_or(uncut(len - 1))?
            .1
            .height;
        for stripe in tile::stripes(height, tile.rows) {
            let rows = tile::stripe_rows(len, op_at, stripe.clone()).ok_or(uncut(0))?;
            let mut band: Option<Tensor<'c, C>> = None;
            for k in 0..len {
                let failed = self.failed(a + k);
                let base = op_at(k).ok_or(uncut(k))?;
                let (in_shape, out_shape) = tile::shapes(base).ok_or(uncut(k))?;
                let produced = rows.get(k + 1).cloned().unwrap_or(stripe.clone());
                let (op, in_rows) = tile::band_op(base, produced.clone()).ok_or(uncut(k))?;
                let input = match band.take() {
                    Some(t) => t,
                    None => {
                        let row = tile::row_bytes(in_shape);
                        let view = client.place(
                            pool,
                            in_offset + in_rows.start * row,
                            (in_rows.end - in_rows.start) * row,
                        );
                        view.map_err(&failed)?
                    }
                };
                let row = tile::row_bytes(out_shape);
                let at = if k + 1 == len {
                    out_offset + produced.start * row
                } else {
                    self.tensors[usize::from(self.steps[a + k].output)].offset
                };
                let out = client
                    .place(pool, at, (produced.end - produced.start) * row)
                    .map_err(&failed)?;
                let mut refs = self.operand_refs(a + k, 1)?;
                refs.insert(0, &input).map_err(|_| uncut(k))?;
                // A band is a shape of its own: tuned under its own key.
                client.execute(op, &refs, &out).map_err(&failed)?;
                band = Some(out);
            }
        }
        let whole = client
            .place(pool, out_offset, out_bytes)
            .map_err(self.failed(b))?;
        self.tensors[usize::from(output)].value = Some(whole);
        Ok(())
    }
}

/// `refs` with a band's slices in place of the operands they slice (by operand index).
pub(super) fn sliced_refs<'s, 'c, C: ComputeChannel>(
    refs: &[&'s Tensor<'c, C>],
    slices: &'s [(usize, Tensor<'c, C>)],
) -> heapless::Vec<&'s Tensor<'c, C>, MAX_JOB_INPUTS> {
    let mut out: heapless::Vec<&'s Tensor<'c, C>, MAX_JOB_INPUTS> = refs.iter().copied().collect();
    for (k, view) in slices {
        if let Some(r) = out.get_mut(*k) {
            *r = view;
        }
    }
    out
}
