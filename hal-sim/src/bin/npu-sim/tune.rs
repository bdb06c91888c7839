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
//! The arena holds the model and, beside it, what measuring a layer takes (a scratch output,
//! device copies of weights in flash, a kernel variant's own scratch). Without `--arena` it
//! is 1 MiB, or the model's planned arena if more, grown to what the measuring needs
//! ([`runner::tuning_arena`]).
//!
//! Failure modes (status 1, nothing written): the model or an input file cannot be read, or
//! the table cannot be written (the message names the file); the number of `--input` files
//! differs from the model's inputs, or one is not the size of its input tensor; the model is
//! malformed or needs more than `--arena` bytes, with the graph's reason; `--arena` has room
//! for the model but not for measuring every layer (the message gives the arena tuning
//! needs: a table made so would lack choices); or the tuner cannot export its table.

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
    let mut opts = RunOptions {
        arena_bytes: arena.unwrap_or(default_arena),
        host_bytes,
        config,
        ..RunOptions::default()
    };
    let text = |e: runner::RunError| e.to_string();
    let (mut table, mut stats) = runner::tune(model_bytes, &refs, &opts).map_err(text)?;
    if stats.starved > 0 {
        // Some measuring found no room: the table would lack choices a larger arena makes.
        let needed = runner::tuning_arena(model_bytes, &refs, &opts).map_err(text)?;
        if let Some(given) = arena {
            return Err(format!(
                "--arena {given} is too small to tune this model: {} layer shapes or kernel \
                 variants found no room to be measured beside it (the largest refused request: \
                 {} bytes), so the table would lack their choices; it tunes fully in an arena \
                 of {needed} bytes: give --arena {needed} or more, or leave --arena out \
                 (nothing was written)",
                stats.starved, stats.starved_bytes
            ));
        }
        // The default was ours to choose: tune in the arena measuring needs.
        opts.arena_bytes = needed;
        (table, stats) = runner::tune(model_bytes, &refs, &opts).map_err(text)?;
        if stats.starved > 0 {
            return Err(format!(
                "tuning in an arena of {needed} bytes still found no room to measure {} layer \
                 shapes or kernel variants (nothing was written)",
                stats.starved
            ));
        }
    }
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
