//! `npu-sim inspect MODEL`: what a model holds and where each operator runs.
//!
//! Parses the model, then prepares it on a simulator with the default configuration and a
//! 1 MiB arena to learn where each operator runs. Nothing is invoked.
//!
//! Output (stdout): the model's version and counts; every tensor (index, constant or
//! activation, type, shape, bytes, quantization, name); every operator (index, builtin,
//! placement: NPU, CPU fallback or alias with no job, input and output tensors); and
//! whether the weights are read in place from flash or copied to the arena.
//!
//! Failure modes: the model file cannot be read; the model is malformed (the message is the
//! parser's reason); or preparing it fails (an operator the graph cannot take, or more
//! arena than the inspection's 1 MiB), with the graph's reason.

use crate::common::read_model;
use npu_sim::runner;
use npu_sim::SimConfig;
use std::path::Path;

/// `npu-sim inspect MODEL`.
pub fn run(path: &Path) -> Result<(), String> {
    read_model(path)
        .and_then(|m| runner::inspect(m, SimConfig::default()).map_err(|e| e.to_string()))
        .map(|text| out!("{text}"))
}
