//! `npu-sim plan MODEL [--json] [--optimise cycles|memory]`: the exact arena bytes a model
//! needs.
//!
//! Prepares the model's arena plan (as the runtime does at prepare, with the simulator's
//! default configuration) without running it. The arena size printed is exact: an arena of
//! that size runs the model, one alignment unit less does not, so it is the size to give
//! the firmware's arena section. `--optimise memory` plans the smallest arena (chains of
//! layers run in stripes, recomputing some multiply-accumulates), `cycles` (the default)
//! the fewest cycles (whole tensors).
//!
//! Output (stdout): text (arena bytes split into activations and constants, the alignment,
//! the whole-tensor lower bound of the activations, and the striped chains if any), or with
//! `--json` one object with the fields `arena_bytes`, `activation_bytes`, `constant_bytes`,
//! `activation_lower_bound_bytes`, `tiled_chains`, `recomputed_macs` and `alignment`.
//!
//! Failure modes: the model file cannot be read; the model is malformed or uses an
//! operator or shape the graph cannot plan (the message is the planner's reason).

use crate::common::read_model;
use npu_compute::graph::Optimise;
use npu_sim::runner;
use npu_sim::SimConfig;
use std::path::Path;

/// `npu-sim plan MODEL`.
pub fn run(path: &Path, json: bool, optimise: Optimise) -> Result<(), String> {
    let model = read_model(path)?;
    let config = SimConfig::default();
    let plan = runner::plan(model, config, optimise).map_err(|e| e.to_string())?;
    if json {
        println!(
            "{{\n  \"arena_bytes\": {},\n  \"activation_bytes\": {},\n  \"constant_bytes\": {},\n  \"activation_lower_bound_bytes\": {},\n  \"tiled_chains\": {},\n  \"recomputed_macs\": {},\n  \"alignment\": {}\n}}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            plan.lower_bound_bytes,
            plan.tiled_chains,
            plan.recomputed_macs,
            config.alignment
        );
    } else {
        println!(
            "arena: {} bytes ({} of activations, {} of constants), alignment {}",
            plan.arena_bytes(),
            plan.activation_bytes,
            plan.constant_bytes,
            config.alignment
        );
        println!(
            "whole-tensor lower bound of the activations: {} bytes",
            plan.lower_bound_bytes
        );
        if plan.tiled_chains > 0 {
            println!(
                "{} chains of layers run in stripes, recomputing {} multiply-accumulates per invoke",
                plan.tiled_chains, plan.recomputed_macs
            );
        }
    }
    Ok(())
}
