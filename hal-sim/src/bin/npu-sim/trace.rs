//! `npu-sim trace MODEL --svg FILE [--accesses FILE.json] [--input IN.bin...] [--arena BYTES]`:
//! draws one invoke of a model as a Gantt chart, and lists its tensor accesses.
//!
//! Runs the model as firmware does: prepare, a first invoke job by job (which records the
//! graph's job plan), a second from that plan; the chart is of the **second** invoke, the one
//! a deployed model repeats (a graph that cannot be planned runs it job by job too, and the
//! summary says so). The trace keeps every job of that invoke: its storage is sized from the
//! model. Without `--input` the inputs are zeros (the schedule does not depend on the data).
//! Without `--arena` the arena is the model's planned arena (plus a small margin), so the
//! arena line of the chart is the model's own.
//!
//! Output: the chart as a standalone SVG document to the `--svg` file (see
//! [`npu_sim::gantt`]: a lane per execution unit, DMA and the CPU, the arena's occupancy
//! beneath; the same model and options give the same bytes), and on stdout one line: the
//! makespan in cycles, each lane's busy cycles and the peak occupancy. With `--accesses`, the
//! same invoke's tensor access list ([`npu_sim::access_list`]) as JSON to that file (see
//! [`AccessList::to_json`](npu_sim::access_list::AccessList::to_json) for its fields), and a
//! second line on stdout: activations, accesses and the peak of live bytes. Either file may
//! be asked for alone; `--svg` is required unless `--accesses` is given.
//!
//! Failure modes: the model or an input file cannot be read, or the SVG or JSON cannot be
//! written (the message names the file); the number of `--input` files differs from the
//! model's inputs, or one is not the size of its input tensor; the model is malformed or
//! needs more than `--arena` bytes, with the graph's reason; the trace cannot be matched to
//! the graph (`npu_sim::access_list::AccessError`).

use crate::common::{read_inputs_or_zeros, read_model};
use npu_compute::graph::Optimise;
use npu_sim::access_list;
use npu_sim::gantt::{self, Chart};
use npu_sim::runner::{self, RunOptions};
use npu_sim::SimConfig;
use std::path::{Path, PathBuf};

/// `npu-sim trace MODEL --svg FILE --accesses FILE`, on the simulated part `config`; `files`
/// are the SVG and the JSON to write, either left out.
pub fn run(
    model: &Path,
    (svg, accesses): (Option<&Path>, Option<&Path>),
    inputs: &[PathBuf],
    arena: Option<usize>,
    config: SimConfig,
) -> Result<(), String> {
    let model_bytes = read_model(model)?;
    let (planned_arena, host_bytes) =
        runner::planned_memory(model_bytes, config, Optimise::Cycles).map_err(|e| e.to_string())?;
    let inputs = read_inputs_or_zeros(model_bytes, inputs)?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let opts = RunOptions {
        arena_bytes: arena.unwrap_or(planned_arena),
        host_bytes: host_bytes.max(RunOptions::default().host_bytes),
        config,
        ..RunOptions::default()
    };
    let (run, list) = match accesses {
        None => (
            runner::trace(model_bytes, &refs, &opts).map_err(|e| e.to_string())?,
            None,
        ),
        Some(_) => {
            let m = access_list::measure_traced(model_bytes, &refs, &opts)
                .map_err(|e| e.to_string())?;
            (m.trace, Some(m.list))
        }
    };
    if let (Some(file), Some(list)) = (accesses, &list) {
        std::fs::write(file, list.to_json() + "\n")
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    if let Some(svg) = svg {
        chart(model, svg, &run, opts.arena_bytes)?;
    }
    if let (Some(file), Some(list)) = (accesses, &list) {
        let count: usize = list.tensors.iter().map(|t| t.accesses.len()).sum();
        outln!(
            "{}: {} activations, {count} accesses in cycles {}..{}; peak {} B of live activations at cycle {} ({} tensors live, {} B of them idle; activation pool {} B, whole-tensor lower bound {} B); access list written to {}",
            model.display(),
            list.tensors.len(),
            list.start,
            list.end,
            list.peak_bytes,
            list.peak_cycle,
            list.live_at_peak.len(),
            list.idle_at_peak_bytes(),
            list.arena.activation_bytes,
            list.arena.lower_bound_bytes,
            file.display()
        );
    }
    Ok(())
}

/// Draws `run` to `svg` and prints the chart's summary line.
fn chart(
    model: &Path,
    svg: &Path,
    run: &runner::TraceRun,
    arena_bytes: usize,
) -> Result<(), String> {
    let title = format!("{}", model.display());
    let chart = Chart {
        title: &title,
        jobs: &run.jobs,
        units: &run.units,
        arena_bytes: arena_bytes as u64,
    };
    std::fs::write(svg, gantt::svg(&chart)).map_err(|e| format!("{}: {e}", svg.display()))?;
    let figures = gantt::figures(&chart);
    let busy = figures
        .busy
        .iter()
        .map(|&(lane, cycles)| format!("{} {cycles}", gantt::lane_label(lane, &run.units)))
        .collect::<Vec<_>>()
        .join(", ");
    outln!(
        "{}: makespan {} cycles ({} jobs, second invoke {}); busy cycles: {busy}; peak occupancy {} B of a {} B arena; chart written to {}",
        model.display(),
        figures.makespan,
        run.jobs.len(),
        if run.planned { "from the job plan" } else { "job by job: the graph has no job plan" },
        figures.occupancy.peak_bytes,
        arena_bytes,
        svg.display()
    );
    Ok(())
}
