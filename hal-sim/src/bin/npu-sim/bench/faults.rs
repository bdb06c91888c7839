//! `npu-sim bench faults MODEL [--invokes N] [--fault-rate R] [--seed S] [--units SPEC]`: the
//! model invoked `N` times while the simulator injects faults of every kind on a fraction `R`
//! of the jobs ([`npu_sim::soak`]).
//!
//! The inputs are the model folder's `input_K.bin` (each with `expected_tflm_K.bin`, TFLM's
//! output, when present), in turn; without them, zeros of the model's input sizes. An invoke
//! that succeeds is checked against TFLM's bytes, or those of a fault-free invoke of the same
//! input.
//!
//! Output (stdout): one JSON object: `invokes`, `faults_injected`, `failed_invokes`,
//! `recovered`, `wrong_outputs` (among the invokes that succeeded), `leaked_bytes`,
//! `leaked_handles`, and besides: `model`, `fault_rate`, `seed`, `jobs`, `faults_by_kind`,
//! `harmful_faults` (those that must fail an invoke: DMA, bus, hang, overrun past the
//! watchdog's margin), `unreported_faults` (harmful faults during invokes that succeeded),
//! `false_alarms` (invokes failed with no harmful fault), `leaked_staging_blocks`, `cycles`
//! (virtual), `host_seconds` and `invokes_per_second` (wall-clock). Every figure but the last
//! two is deterministic for a seed.
//!
//! Failure modes: the model or an input file cannot be read; `--fault-rate` is not a
//! fraction in 0..=1 (or a percentage); the model cannot be prepared, or its fault-free
//! outputs differ from TFLM's; an invoke fails with something other than a fault; the server
//! cannot recover. After printing the object, the command fails (status 1) if any output is
//! wrong, any fault went unreported, any invoke failed without one, or anything leaked.

use crate::common::{read_file, read_model};
use npu_sim::soak::{self, InputSet, SoakOptions};
use npu_sim::{runner, SimConfig};
use std::path::Path;

/// A fault rate as a fraction (`0.01`) or a percentage (`1%`), in millionths.
pub fn fault_rate_arg(text: &str) -> Result<u32, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (text, 1.0),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a fraction (0.01) or a percentage (1%)"))?;
    let fraction = value * scale;
    if !(0.0..=1.0).contains(&fraction) {
        return Err(format!("`{text}` is not between 0 and 1 (0% and 100%)"));
    }
    Ok((fraction * 1e6).round() as u32)
}

/// The input sets of the model at `path`: its folder's `input_K.bin` with their expected
/// outputs, or zeros.
fn input_sets(model: &'static [u8], path: &Path) -> Result<Vec<InputSet>, String> {
    let sizes = runner::input_sizes(model).map_err(|e| e.to_string())?;
    let mut sets = Vec::new();
    if sizes.len() == 1 {
        for k in 0.. {
            let input = path.with_file_name(format!("input_{k}.bin"));
            if !input.exists() {
                break;
            }
            let expected = path.with_file_name(format!("expected_tflm_{k}.bin"));
            let expected = match expected.exists() {
                true => Some(vec![read_file(&expected)?]),
                false => None,
            };
            sets.push((vec![read_file(&input)?], expected));
        }
    }
    if sets.is_empty() {
        sets.push((sizes.iter().map(|&n| vec![0; n as usize]).collect(), None));
    }
    Ok(sets)
}

/// `npu-sim bench faults MODEL`.
pub fn run(
    path: &Path,
    invokes: u64,
    fault_per_million: u32,
    seed: u64,
    config: SimConfig,
) -> Result<(), String> {
    let model = read_model(path)?;
    let sets = input_sets(model, path)?;
    let opts = SoakOptions {
        invokes,
        fault_per_million,
        seed,
        config,
    };
    let r = soak::soak(model, &sets, &opts).map_err(|e| format!("{}: {e}", path.display()))?;
    let kinds = r.faults_injected;
    let harmful = kinds.harmful().total();
    let object = serde_json::json!({
        "model": path.display().to_string(),
        "invokes": r.invokes,
        "faults_injected": kinds.total(),
        "failed_invokes": r.failed_invokes,
        "recovered": r.recovered,
        "wrong_outputs": r.wrong_outputs,
        "leaked_bytes": r.leaked_bytes,
        "leaked_handles": r.leaked_handles,
        "fault_rate": f64::from(fault_per_million) / 1e6,
        "seed": seed,
        "jobs": r.jobs,
        "faults_by_kind": {
            "dma": kinds.dma,
            "bus": kinds.bus,
            "hang": kinds.hang,
            "overrun": kinds.overrun,
            "spurious_irq": kinds.spurious_irq,
            "lost_irq": kinds.lost_irq,
        },
        "harmful_faults": harmful,
        "unreported_faults": r.unreported_faults,
        "unreported_by_kind": {
            "dma": r.unreported_by_kind.dma,
            "bus": r.unreported_by_kind.bus,
            "hang": r.unreported_by_kind.hang,
            "overrun": r.unreported_by_kind.overrun,
        },
        "false_alarms": r.false_alarms,
        "leaked_staging_blocks": r.leaked_staging_blocks,
        "cycles": r.cycles,
        "host_seconds": r.host_seconds,
        "invokes_per_second": if r.host_seconds > 0.0 { r.invokes as f64 / r.host_seconds } else { 0.0 },
    });
    outln!("{object}");
    if r.passed() {
        Ok(())
    } else {
        Err(format!(
            "{}: {} wrong outputs, {} unreported faults, {} false alarms, leaked {} bytes, {} handles, {} staging blocks",
            path.display(),
            r.wrong_outputs,
            r.unreported_faults,
            r.false_alarms,
            r.leaked_bytes,
            r.leaked_handles,
            r.leaked_staging_blocks
        ))
    }
}
