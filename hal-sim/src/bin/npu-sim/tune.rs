//! `npu-sim tune MODEL --export TABLE [--input IN.bin...] [--arena BYTES] [--units SPEC]`:
//! makes a tuning table for a model, for a part with the execution units of `--units` (the
//! table's fingerprint names their MAC arrays).
//!
//! Times each layer shape's kernel variants once on the simulated NPU (virtual cycles, so
//! the result is deterministic), keeps the fastest and writes the choices as a tuning table
//! that `npu-sim run --tune-table` (or firmware) applies without measuring. Without
//! `--input` the inputs are zeros: cycles do not depend on the data.
//!
//! Output: the table's bytes to the `--export` file, and on stdout one line: the layer
//! shapes tuned, the measurements, the tuning cycles and the table's size.
//!
//! Failure modes: the model or an input file cannot be read, or the table cannot be
//! written (the message names the file); the model is malformed, needs more than `--arena`
//! bytes, or refuses an input (not the size of its input tensor), with the graph's reason;
//! or the tuner cannot export its table.

use crate::common::{read_inputs_or_zeros, read_model};
use npu_compute::graph::Optimise;
use npu_sim::runner::{self, RunOptions};
use npu_sim::SimConfig;
use std::path::{Path, PathBuf};

/// `npu-sim tune MODEL --export TABLE`.
pub fn run(
    model: &Path,
    export: &Path,
    inputs: &[PathBuf],
    arena: Option<usize>,
    config: SimConfig,
) -> Result<(), String> {
    let model_bytes = read_model(model)?;
    let (default_arena, host_bytes) =
        runner::default_memory(model_bytes, config, Optimise::Cycles).map_err(|e| e.to_string())?;
    let inputs = read_inputs_or_zeros(model_bytes, inputs)?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let opts = RunOptions {
        arena_bytes: arena.unwrap_or(default_arena),
        host_bytes,
        config,
        ..RunOptions::default()
    };
    let (table, stats) = runner::tune(model_bytes, &refs, &opts).map_err(|e| e.to_string())?;
    std::fs::write(export, &table).map_err(|e| format!("{}: {e}", export.display()))?;
    outln!(
        "{}: {} layer shapes tuned, {} measurements, {} tuning cycles; table {} B written to {}",
        model.display(),
        stats.tuning_runs,
        stats.measurements,
        stats.tuning_cycles,
        table.len(),
        export.display()
    );
    Ok(())
}
