//! LiteRT's host time on the same model and inputs, measured in the same run as the runtime's
//! (`bench models`), so that the ratio between them is not one of two machines or two loads.
//!
//! LiteRT is Google's TensorFlow Lite runtime for hosts and phones, from its PyPI package
//! `ai-edge-litert`, run by the embedded script `litert_time.py` under `python3` (or the
//! interpreter `NPU_SIM_PYTHON` names): the default op resolver, whose XNNPACK delegate takes
//! the operators it supports, on one thread. Each input is invoked once untimed, then
//! `repeat` times timed, setting the input and reading the output as the runtime's timed
//! invoke writes and reads them; the median is reported.
//!
//! Failure modes: Python cannot be started, LiteRT is not installed (the message says what
//! to install), the script fails on the model (its message is passed on), or it prints
//! something that is not its JSON list.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The script, embedded so that the command works wherever the binary is.
const SCRIPT: &str = include_str!("litert_time.py");

/// LiteRT on one input.
pub struct LiteRtRun {
    /// Median wall-clock microseconds per invoke (input set and output read included).
    pub us: f64,
    /// The first output's bytes.
    pub output: Vec<u8>,
}

/// LiteRT on `model` for each of `inputs` (one file per input set, the model's single input),
/// `repeat` timed invokes each.
pub fn time(model: &Path, inputs: &[PathBuf], repeat: usize) -> Result<Vec<LiteRtRun>, String> {
    let python = std::env::var("NPU_SIM_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(model)
        .arg(repeat.to_string())
        .args(inputs)
        .output()
        .map_err(|e| {
            format!("cannot start {python} ({e}): LiteRT's time needs Python 3 with ai-edge-litert")
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "LiteRT on {}: {}",
            model.display(),
            stderr.lines().last().unwrap_or("failed")
        ));
    }
    let bad = |what: &str| {
        format!(
            "LiteRT on {}: {what} in the script's output",
            model.display()
        )
    };
    let runs: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| bad(&e.to_string()))?;
    let runs = runs.as_array().ok_or_else(|| bad("no list"))?;
    if runs.len() != inputs.len() {
        return Err(bad("a run missing"));
    }
    runs.iter()
        .map(|run| {
            let us = run["us"].as_f64().ok_or_else(|| bad("no time"))?;
            let hex = run["output"].as_str().ok_or_else(|| bad("no output"))?;
            let output = (0..hex.len() / 2)
                .map(|k| u8::from_str_radix(hex.get(2 * k..2 * k + 2).unwrap_or("?"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| bad("an output not in hex"))?;
            Ok(LiteRtRun { us, output })
        })
        .collect()
}
