//! [`Graph::invoke_async`]: an invoke as a future, woken by the NPU's interrupt.
//!
//! An invoke submits every job without waiting and then reads the outputs; only the reads
//! wait. The future does the same: it writes the inputs and submits the jobs in its first poll
//! (the job plan's one channel call, or the per-job path's submissions, exactly as
//! [`Graph::invoke`] would), then awaits each output's
//! [`read_async`](crate::client::ComputeClient::read_async). The bytes, jobs, transfers and
//! NPU cycles are those of `invoke`.
//!
//! Dropping the future before it completes leaves the graph ready for its next invoke: the
//! submitted jobs run on; a per-job invoke's activations are released (as `invoke` releases
//! them, even on error) by a guard the future holds, so the next invoke places fresh ones; a
//! planned invoke's tensors are the plan's and stay.

use super::planned::{self, Path};
use super::{not_one_op, Graph, GraphError};
use crate::channel::ComputeChannel;

/// Releases a per-job invoke's activations when dropped: at the end of the invoke, on error,
/// or with a future dropped mid-way.
struct Activations<'g, 'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize>(
    &'g mut Graph<'c, C, OPS, TENSORS>,
);

impl<C: ComputeChannel, const OPS: usize, const TENSORS: usize> Drop
    for Activations<'_, '_, C, OPS, TENSORS>
{
    fn drop(&mut self) {
        for slot in self.0.tensors.iter_mut().filter(|s| !s.kept()) {
            slot.value = None;
        }
    }
}

impl<'c, C: ComputeChannel, const OPS: usize, const TENSORS: usize> Graph<'c, C, OPS, TENSORS> {
    /// [`invoke`](Self::invoke) as a future: writes the inputs and submits the whole
    /// inference at its first poll, then completes once the outputs are read, woken by the
    /// NPU's interrupt (see [`client::futures`](crate::client::futures)); other tasks run
    /// while the NPU works. The same bytes, jobs, transfers and NPU cycles as `invoke`, and the
    /// same errors.
    ///
    /// Dropped before it completes, it leaves the graph ready for its next invoke: the jobs
    /// it submitted run on, and the activations of an invoke run job by job are released as
    /// `invoke` releases them.
    pub async fn invoke_async(
        &mut self,
        inputs: &[&[u8]],
        outputs: &mut [&mut [u8]],
    ) -> Result<(), GraphError> {
        self.check_io("input", &self.inputs, inputs.iter().map(|b| b.len()))?;
        self.check_io("output", &self.outputs, outputs.iter().map(|b| b.len()))?;
        let client = self.client;
        if self.start_planned(inputs)? {
            let Path::Planned(plan) = &self.path else {
                return Err(not_one_op(crate::Error::StaleHandle { index: 0 }));
            };
            for (&t, out) in self.outputs.iter().zip(outputs.iter_mut()) {
                let view = plan.view(t)?;
                let named = |e| plan.named(&self.steps, &self.order, e);
                client.read_async(view, out).await.map_err(named)?;
            }
            return Ok(());
        }
        let graph = Activations(self);
        graph.0.start(inputs)?;
        for (k, out) in outputs.iter_mut().enumerate() {
            let value = graph.0.output_value(k)?;
            client.read_async(value, out).await.map_err(not_one_op)?;
        }
        Ok(())
    }

    /// Starts an invoke from the job plan, as [`invoke`](Self::invoke) chooses: `true` once
    /// its jobs are submitted, `false` when this invoke runs job by job. Builds the plan where
    /// it is due, and again when the server's tuning changed under it.
    fn start_planned(&mut self, inputs: &[&[u8]]) -> Result<bool, GraphError> {
        if let (true, Path::Planned(plan)) = (self.replay, &mut self.path) {
            match plan.start((&self.steps, &self.order), &self.inputs, inputs) {
                Err(e) if planned::stale(&e) => self.path = Path::Build,
                other => return other.map(|()| true),
            }
        }
        if !self.use_plan()? {
            return Ok(false);
        }
        match &mut self.path {
            Path::Planned(plan) => plan
                .start((&self.steps, &self.order), &self.inputs, inputs)
                .map(|()| true),
            _ => Ok(false),
        }
    }
}
