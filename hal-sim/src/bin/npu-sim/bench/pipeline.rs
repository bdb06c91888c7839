//! `npu-sim bench pipeline MODEL [--input IN.bin] [--frames N] [--cpu-cycles N...]
//! [--units SPEC]`: how busy the NPU stays over a stream of frames.
//!
//! Each frame costs a fixed number of host preprocessing cycles (on the simulator's virtual
//! clock) before its inference. The stream runs one frame after another, then pipelined
//! over two sets of pinned buffers (the next frame's preprocessing overlaps the current
//! inference). Without `--cpu-cycles` the costs are a quarter, a half and nine tenths of
//! one inference's cycles; without `--input` the frame is `input_0.bin` beside the model.
//!
//! Output (stdout): a heading (frames, one inference's compute cycles, execution units)
//! and a Markdown table, per preprocessing cost and mode: steady cycles per frame, NPU busy
//! fraction in the steady state, total cycles, transfers and staging-copy bytes per steady
//! frame, CPU waits. Every figure is on the virtual clock: deterministic.
//!
//! Failure modes: the model or input file cannot be read, or the input is not the size of
//! the model's input tensor (the message names the file); fewer than 3 frames (the first
//! and last frames are excluded, so no steady state would remain: a usage error); the model
//! does not have exactly one input and one output, or cannot be prepared or run; frames give
//! different outputs; the trace lost entries (the busy figures would be wrong); or the
//! virtual clock reached its end (`--cpu-cycles` so large that the figures would saturate).

use crate::common::{read_inputs, read_model};
use npu_sim::{runner, SimConfig};
use std::path::Path;

/// `npu-sim bench pipeline MODEL`.
pub fn run(
    model_path: &Path,
    input: Option<&Path>,
    frames: usize,
    cpu_cycles: &[u64],
    config: SimConfig,
) -> Result<(), String> {
    let model = read_model(model_path)?;
    let input_path = match input {
        Some(p) => p.to_path_buf(),
        None => model_path.with_file_name("input_0.bin"),
    };
    let count = runner::input_sizes(model).map_err(|e| e.to_string())?.len();
    if count != 1 {
        return Err(format!(
            "{}: the model has {count} inputs; bench pipeline streams frames of a model with \
             one input and one output",
            model_path.display()
        ));
    }
    let mut inputs = read_inputs(model, &[input_path])?;
    let input = inputs.pop().unwrap_or_default();
    let run = |cpu, pipelined| {
        npu_sim::pipeline::run(model, &input, config, cpu, frames, pipelined)
            .map_err(|e| e.to_string())
    };
    let inference = run(0, false)?.inference_cycles;
    let costs = if cpu_cycles.is_empty() {
        vec![inference / 4, inference / 2, inference * 9 / 10]
    } else {
        cpu_cycles.to_vec()
    };
    outln!(
        "{}: {frames} frames, one inference = {inference} compute cycles ({} execution units)",
        model_path.display(),
        config.execution_units
    );
    outln!("| preprocessing cycles / frame | × inference | mode | steady cycles / frame | NPU busy (steady) | total cycles | steady transfers per frame (up, down) | staging copy B per frame | CPU waits |");
    outln!("|---|---|---|---|---|---|---|---|---|");
    for cpu in costs {
        for pipelined in [false, true] {
            let r = run(cpu, pipelined)?;
            let steady = (frames - 2) as f64;
            outln!(
                "| {cpu} | {:.2} | {} | {} | {:.1}% | {} | {:.0}, {:.0} | {:.0} | {} |",
                cpu as f64 / inference as f64,
                if pipelined {
                    "pipelined"
                } else {
                    "one after another"
                },
                r.steady_cycles_per_frame,
                100.0 * r.steady_busy,
                r.total_cycles,
                f64::from(r.steady_transfers.0) / steady,
                f64::from(r.steady_transfers.1) / steady,
                r.steady_staging_copy_bytes as f64 / steady,
                r.waits,
            );
        }
    }
    Ok(())
}
