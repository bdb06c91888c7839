//! `npu-sim plan MODEL [--json] [--optimise cycles|memory] [--units SPEC]`: the exact arena
//! bytes a model needs, the host staging memory and every fixed capacity, on a part with the
//! execution units of `--units` (default one `u55-128`).
//!
//! The arena comes from the model's arena plan, made as the runtime makes it at prepare (with
//! the simulator's default configuration and the `--units` given). The arena size printed is exact: an arena of
//! that size runs the model, one alignment unit less does not, so it is the size to give
//! the firmware's arena section. `--optimise memory` plans the smallest arena (chains of
//! layers run in stripes, recomputing some multiply-accumulates), `cycles` (the default)
//! the fewest cycles (whole tensors).
//!
//! The host staging bytes and the capacities are measured ([`runner::capacities`]): the
//! model runs twice on zero inputs, as firmware runs it (job by job, then from its job plan),
//! and is tuned once for the tuning entries. Each is the most the run used at once.
//!
//! Output (stdout): text (arena bytes split into activations and constants, the alignment,
//! the whole-tensor lower bound of the activations, the striped chains if any, the host
//! staging bytes, and each capacity with the type parameter it sizes), or with `--json` one
//! object with the fields `arena_bytes`, `activation_bytes`, `constant_bytes`,
//! `activation_lower_bound_bytes`, `tiled_chains`, `recomputed_macs`, `alignment`,
//! `host_staging_bytes`, `host_staging_min_bytes`, `ops`, `tensors`, `handles`, `chunks`, `staging_blocks`,
//! `tune_entries` and `plan_jobs`.
//!
//! Failure modes: the model file cannot be read; the model is malformed or uses an
//! operator or shape the graph cannot plan (the message is the planner's reason).

use crate::common::read_model;
use npu_compute::graph::{self, Optimise};
use npu_compute::{memory, server, tune};
use npu_sim::runner;
use npu_sim::SimConfig;
use std::path::Path;

/// `npu-sim plan MODEL`.
pub fn run(
    path: &Path,
    json: bool,
    optimise: Optimise,
    config: SimConfig,
    schedule: Option<&Path>,
) -> Result<(), String> {
    let model = read_model(path)?;
    let caps = runner::capacities(model, config, optimise).map_err(|e| e.to_string())?;
    let plan = caps.arena;
    if json {
        outln!(
            "{{\n  \"arena_bytes\": {},\n  \"activation_bytes\": {},\n  \"constant_bytes\": {},\n  \"activation_lower_bound_bytes\": {},\n  \"tiled_chains\": {},\n  \"recomputed_macs\": {},\n  \"alignment\": {},\n  \"host_staging_bytes\": {},\n  \"host_staging_min_bytes\": {},\n  \"ops\": {},\n  \"tensors\": {},\n  \"handles\": {},\n  \"chunks\": {},\n  \"staging_blocks\": {},\n  \"tune_entries\": {},\n  \"plan_jobs\": {}\n}}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            plan.lower_bound_bytes,
            plan.tiled_chains,
            plan.recomputed_macs,
            config.alignment,
            caps.host_staging_bytes,
            caps.host_staging_min_bytes,
            caps.ops,
            caps.tensors,
            caps.handles,
            caps.chunks,
            caps.staging_blocks,
            caps.tune_entries,
            caps.plan_jobs
        );
    } else {
        outln!(
            "arena: {} bytes ({} of activations, {} of constants), alignment {}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            config.alignment
        );
        outln!(
            "whole-tensor lower bound of the activations: {} bytes",
            plan.lower_bound_bytes
        );
        if plan.tiled_chains > 0 {
            outln!(
                "{} chains of layers run in stripes, recomputing {} multiply-accumulates per invoke",
                plan.tiled_chains, plan.recomputed_macs
            );
        }
        outln!(
            "host staging: {} bytes run it without waiting; {} bytes (its largest transfer) run \
             it with transfers waiting for earlier ones",
            caps.host_staging_bytes,
            caps.host_staging_min_bytes
        );
        outln!("capacities (the most this model used at once; defaults in brackets):");
        let rows = [
            ("Graph OPS", "operators", caps.ops, graph::DEFAULT_OPS),
            (
                "Graph TENSORS",
                "tensors",
                caps.tensors,
                graph::DEFAULT_TENSORS,
            ),
            (
                "NpuServer HANDLES (and the channel's N)",
                "live tensors",
                caps.handles as usize,
                server::DEFAULT_HANDLES,
            ),
            (
                "ChunkSliceMemory CHUNKS",
                "chunk slots (chunks and placed tensors)",
                caps.chunks as usize,
                memory::DEFAULT_CHUNKS,
            ),
            (
                "NpuServer STAGING",
                "staging blocks",
                caps.staging_blocks as usize,
                server::DEFAULT_STAGING,
            ),
            (
                "NpuServer TUNE",
                "tuned layer shapes",
                caps.tune_entries as usize,
                tune::DEFAULT_TUNE_ENTRIES,
            ),
        ];
        for (param, what, needed, default) in rows {
            outln!("  {param:<40} {needed:>5} {what} [{default}]");
        }
        outln!(
            "job plan: {} jobs per invoke{}",
            caps.plan_jobs,
            if caps.plan_jobs == 0 {
                " (the graph runs job by job)"
            } else {
                ""
            }
        );
    }
    if let Some(file) = schedule {
        let model = read_model(path)?;
        let table = runner::schedule_table(model, config, optimise).map_err(|e| e.to_string())?;
        std::fs::write(file, &table).map_err(|e| format!("{}: {e}", file.display()))?;
        if !json {
            outln!(
                "static schedule for {}: {} bytes written to {}",
                runner::units_spec(&config),
                table.len(),
                file.display()
            );
        }
    }
    Ok(())
}
