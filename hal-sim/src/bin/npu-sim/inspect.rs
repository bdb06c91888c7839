//! `npu-sim inspect MODEL`: what a model holds and where each operator runs.
//!
//! Parses the model and lowers each operator on its own for the simulator's default
//! configuration (an Ethos-U55-128) to learn where it runs; then, if every operator can run,
//! prepares the model on the large stack. Nothing is invoked.
//!
//! Output (stdout): the model's version and counts; every tensor (index, constant or
//! activation, type, shape, bytes, quantization, name); every operator (index, builtin,
//! placement: NPU, CPU fallback, alias with no job, or UNSUPPORTED with the reason; input and
//! output tensors with their types); a count of each placement; and whether the weights are
//! read in place from flash or copied to the arena.
//!
//! Failure modes (exit 1): the model file cannot be read; the model is malformed (the message
//! is the parser's reason); some operators are unsupported (all of them are listed first);
//! or preparing the model fails, with the graph's reason.

use crate::common::read_model;
use npu_sim::runner;
use npu_sim::SimConfig;
use std::path::Path;

/// `npu-sim inspect MODEL`.
pub fn run(path: &Path) -> Result<(), String> {
    let model = read_model(path)?;
    let found = runner::inspect(model, SimConfig::default()).map_err(|e| e.to_string())?;
    out!("{}", found.text);
    match found.unsupported {
        0 => Ok(()),
        n => Err(format!(
            "{n} operator{} of this model cannot run (listed above)",
            if n == 1 { "" } else { "s" }
        )),
    }
}
