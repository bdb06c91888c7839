//! A stream of frames through a model, with a fixed host preprocessing cost per frame: how
//! busy the NPU stays with and without pipelining (`npu-sim bench pipeline`).
//!
//! Each frame costs the CPU `cpu_cycles` of preprocessing ([`SimNpu::advance`]: the virtual
//! clock moves while the NPU keeps running what it was given), then runs the model on it.
//!
//! - **Sequential**: preprocess, [`Graph::invoke`] (which returns once the output is read),
//!   and only then preprocess the next frame. The NPU idles during every preprocessing step.
//! - **Pipelined**: two sets of pinned buffers ([`Graph::io_buffers`]). Frame `n` is
//!   preprocessed straight into its set's input block while the NPU runs frame `n − 1`, then
//!   submitted ([`Graph::submit`]) behind it; only then does the CPU wait for frame `n − 1`'s
//!   output. While preprocessing costs less than an inference, the NPU never runs dry.
//!
//! The NPU's busy time is read from the simulator's trace: the union of the compute jobs'
//! `[start, end)` intervals. The steady state is the span from the end of the first frame's
//! last compute job to the start of the last frame's first one (the stream's fill and drain
//! left out).

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::{Npu, Queue};
use npu_compute::memory::MemoryConfig;
use npu_compute::server::NpuServer;
use npu_compute::Error;

use crate::runner::{ModelChannel, RunError, SimGraph};
use crate::workloads::{self, WorkloadError};
use crate::{SimConfig, SimNpu, TraceEntry};

/// Device and host memory of a pipeline run.
const DEVICE_BYTES: usize = 16 << 20;
const HOST_BYTES: usize = 256 << 10;

/// What a stream of frames cost (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PipelineReport {
    /// Frames run.
    pub frames: usize,
    /// Host preprocessing per frame, in virtual cycles.
    pub cpu_cycles: u64,
    /// Compute cycles of the first frame (the union of its jobs' intervals). Later frames
    /// can be a little shorter: the simulator's layer pipeline overlaps a frame's first
    /// weight fetch with the previous frame.
    pub inference_cycles: u64,
    /// Virtual cycles from the first preprocessing step to the last output read.
    pub total_cycles: u64,
    /// Virtual cycles per frame in the steady state.
    pub steady_cycles_per_frame: u64,
    /// Fraction of the steady state during which some execution unit computes.
    pub steady_busy: f64,
    /// Times the CPU slept waiting for the NPU, over the whole run.
    pub waits: u32,
    /// Transfers of the frames between the first and the last (uploads, downloads, device
    /// copies), as the server counts them.
    pub steady_transfers: (u32, u32, u32),
    /// Bytes the CPU copied through staging in those frames.
    pub steady_staging_copy_bytes: u64,
}

/// Runs `frames` frames of `input` through `model` with `cpu_cycles` of preprocessing each,
/// pipelined or one after another, and checks every output equals the first.
///
/// Errors: [`RunError`] for a model that cannot be prepared or run, or fewer than three
/// frames (no steady state).
pub fn run(
    model: &'static [u8],
    input: &[u8],
    config: SimConfig,
    cpu_cycles: u64,
    frames: usize,
    pipelined: bool,
) -> Result<PipelineReport, RunError> {
    let stack = |e: Error| RunError::Setup(WorkloadError::Stack(e));
    if frames < 3 {
        return Err(RunError::Pipeline("fewer than 3 frames (no steady state)"));
    }
    let mut device = workloads::aligned_memory(DEVICE_BYTES);
    let mut host = workloads::aligned_memory(HOST_BYTES);
    // Room for every frame's jobs, refused rather than a panic when a count from the command
    // line makes it more than the host can hold.
    let too_many =
        RunError::Pipeline("too many frames: the trace of them all does not fit in memory");
    let entries = frames.checked_mul(128).ok_or(too_many)?;
    let mut trace = Vec::new();
    trace.try_reserve_exact(entries).map_err(|_| too_many)?;
    trace.resize(entries, TraceEntry::EMPTY);
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        config,
    )
    .map_err(|e| RunError::Setup(e.into()))?
    .with_trace(&mut trace);
    let server = NpuServer::new(npu, MemoryConfig::default()).map_err(stack)?;
    let channel: ModelChannel<'_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = Graph::prepare(client, model)?;
    if graph.input_sizes().count() != 1 || graph.output_sizes().count() != 1 {
        return Err(RunError::Pipeline(
            "the model must have one input and one output",
        ));
    }
    let out_len = graph.output_sizes().next().unwrap_or(0) as usize;
    client.sync().map_err(stack)?;
    let advance = |cycles| channel.with(|s| s.npu_mut().advance(cycles)).map_err(stack);
    let now = || channel.with(|s| s.npu().now()).map_err(stack);
    channel.with(|s| s.npu_mut().clear_trace()).map_err(stack)?;
    let waits_before = client.stats().map_err(stack)?.waits;
    let start = now()?;
    let mut outputs = Vec::new();
    let mut steady = [client.stats().map_err(stack)?; 2];
    if pipelined {
        let sets = [graph.io_buffers()?, graph.io_buffers()?];
        let compute = |e| {
            RunError::Graph(GraphError::Compute {
                op_index: None,
                error: e,
            })
        };
        for n in 0..=frames {
            if n == 1 || n == frames - 1 {
                steady[usize::from(n != 1)] = client.stats().map_err(stack)?;
            }
            if n < frames {
                let io = &sets[n % 2];
                advance(cpu_cycles)?;
                let input_buf = io.input(0).ok_or(stack(Error::NotPinned))?;
                client
                    .host_mut(input_buf, |b| b.copy_from_slice(input))
                    .map_err(compute)?;
                graph.submit(io)?;
            }
            if n > 0 {
                let prev = sets[(n - 1) % 2].output(0).ok_or(stack(Error::NotPinned))?;
                outputs.push(client.host_ref(prev, |b| b.to_vec()).map_err(compute)?);
            }
        }
    } else {
        for n in 0..frames {
            if n == 1 || n == frames - 1 {
                steady[usize::from(n != 1)] = client.stats().map_err(stack)?;
            }
            advance(cpu_cycles)?;
            let mut out = vec![0u8; out_len];
            graph.invoke(&[input], &mut [&mut out])?;
            outputs.push(out);
        }
    }
    let end = now()?;
    if end == u64::MAX {
        // The clock saturates rather than wrap: every figure past this point would be wrong.
        return Err(RunError::Pipeline(
            "the virtual clock reached its end (u64::MAX cycles): give fewer preprocessing \
             cycles or frames",
        ));
    }
    let total_cycles = end - start;
    let waits = client.stats().map_err(stack)?.waits - waits_before;
    if outputs.iter().any(|o| *o != outputs[0]) {
        return Err(RunError::Pipeline("outputs differ between frames"));
    }
    let (inference_cycles, steady_cycles, busy) = channel
        .with(|s| busy_figures(s.npu().trace(), frames))
        .map_err(stack)?
        .ok_or(RunError::Pipeline(
            "the trace lost entries or the frames have different jobs",
        ))?;
    Ok(PipelineReport {
        frames,
        cpu_cycles,
        inference_cycles,
        total_cycles,
        steady_cycles_per_frame: steady_cycles / (frames as u64 - 2),
        steady_busy: busy as f64 / steady_cycles.max(1) as f64,
        waits,
        steady_transfers: (
            steady[1].uploads - steady[0].uploads,
            steady[1].downloads - steady[0].downloads,
            steady[1].device_copies - steady[0].device_copies,
        ),
        steady_staging_copy_bytes: steady[1].staging_copy_bytes - steady[0].staging_copy_bytes,
    })
}

/// From the compute jobs of `frames` equal frames, in submission order: the compute cycles
/// of one inference, the steady-state span, and the cycles of that span during which some
/// unit computes. `None` when the jobs do not split evenly into frames.
fn busy_figures(trace: impl Iterator<Item = TraceEntry>, frames: usize) -> Option<(u64, u64, u64)> {
    let mut jobs: Vec<TraceEntry> = trace.filter(|e| e.queue != Queue::Dma).collect();
    jobs.sort_by_key(|e| e.fence);
    let per_frame = jobs.len() / frames;
    if per_frame == 0 || !jobs.len().is_multiple_of(frames) {
        return None;
    }
    let from = jobs[per_frame - 1].end;
    let to = jobs[(frames - 1) * per_frame].start;
    let busy = |a: u64, b: u64| union_within(&jobs, a, b);
    let first = &jobs[..per_frame];
    let inference = union_within(first, first[0].start, first[per_frame - 1].end);
    Some((inference, to.saturating_sub(from), busy(from, to)))
}

/// Cycles of `[from, to)` covered by at least one job's `[start, end)`.
fn union_within(jobs: &[TraceEntry], from: u64, to: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = jobs
        .iter()
        .map(|e| (e.start.max(from), e.end.min(to)))
        .filter(|(a, b)| a < b)
        .collect();
    spans.sort_unstable();
    let (mut covered, mut reach) = (0, from);
    for (a, b) in spans {
        let a = a.max(reach);
        if b > a {
            covered += b - a;
            reach = b;
        }
    }
    covered
}

#[cfg(test)]
mod tests {
    use super::*;
    use npu_compute::hal::Fence;

    fn job(fence: u64, start: u64, end: u64) -> TraceEntry {
        TraceEntry {
            fence: Fence(fence),
            queue: Queue::Unit(0),
            start,
            end,
            ..TraceEntry::EMPTY
        }
    }

    #[test]
    fn union_counts_overlaps_once_and_clips_to_the_window() {
        let jobs = [job(0, 0, 10), job(1, 5, 15), job(2, 20, 30)];
        assert_eq!(union_within(&jobs, 0, 30), 25);
        assert_eq!(union_within(&jobs, 12, 25), 3 + 5);
    }

    #[test]
    fn steady_state_leaves_out_the_first_and_last_frame() {
        // Three frames of two jobs, back to back except a 10-cycle gap before the last.
        let jobs = [
            job(0, 0, 5),
            job(1, 5, 10),
            job(2, 10, 15),
            job(3, 15, 20),
            job(4, 30, 35),
            job(5, 35, 40),
        ];
        let (inference, steady, busy) = busy_figures(jobs.into_iter(), 3).unwrap();
        assert_eq!((inference, steady, busy), (10, 20, 10));
        assert_eq!(busy_figures(jobs.into_iter(), 4), None);
    }
}
