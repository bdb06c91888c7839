//! `npu-sim bench models DIR [--repeat N]`: every model of a reference-model directory
//! against TFLM's outputs and the peers' figures.
//!
//! The directory holds, per model, `NAME/model.tflite` with `input_K.bin` and
//! `expected_tflm_K.bin`, and may hold `figures.json` (one row per model: its name and the
//! peers' figures: TFLM host time, Vela cycles and SRAM size, TFLM's arena), which then also
//! lists the models; without it every subdirectory with a `model.tflite` is one. Every input
//! runs with the arena planned for the fewest cycles (`--repeat` timed invokes) and for the
//! smallest arena (untimed), and each output is compared with TFLM's bytes; input 0 also
//! runs through a short pipelined stream for its steady transfers. Then LiteRT runs the same
//! model on the same inputs, `--repeat` timed invokes each ([`litert`](super::litert)), so
//! that the two host times are measured side by side on one machine under one load.
//!
//! Output (stdout): three Markdown tables: time (outputs = TFLM, host µs median, × TFLM
//! from `figures.json`, LiteRT's µs in this run and the ratio, LiteRT's outputs against
//! TFLM's, NPU cycles against Vela's), arena (activation bytes per plan against the lower
//! bound, TFLM and Vela, striped chains and their recompute cycles, constants, runtime
//! state), and transfers of one invoke and of a pipelined steady frame. Host µs are
//! wall-clock; every other figure is deterministic. A peer figure missing from
//! `figures.json` prints as NaN.
//!
//! Failure modes: `figures.json` cannot be parsed, or the directory holds no model; a
//! model's files cannot be read (the message names the file); a model has no
//! `input_0.bin` (nothing to run); a run, the pipelined stream or LiteRT fails (the message
//! starts with the model's name); or, after the tables are printed, any output differs from
//! TFLM's (the count is the error), since figures from wrong outputs are not a result.
//! LiteRT's outputs are not held to TFLM's: XNNPACK's requantisation may round otherwise.

use super::litert;
use crate::common::{model_names, read_figures, read_file, read_model};
use npu_compute::graph::Optimise;
use npu_sim::runner::{self, RunOptions};
use npu_sim::SimConfig;
use std::path::Path;

/// `npu-sim bench models DIR`.
pub fn run(dir: &Path, repeat: usize) -> Result<(), String> {
    let figures_path = dir.join("figures.json");
    let rows = if figures_path.exists() {
        read_figures(&figures_path)?
    } else {
        Vec::new()
    };
    let names = model_names(dir)?;
    let mut time_table = String::from("| model | outputs = TFLM | host µs (median) | TFLM µs | × faster than TFLM | LiteRT µs (this run) | × LiteRT | LiteRT outputs = TFLM | NPU cycles | Vela cycles | cycles / Vela |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut arena_table = String::from("| model | activations B (cycles) | lower bound B | TFLM head B | activations B (memory) | Vela size SRAM B | outputs = TFLM (memory) | tiled chains | NPU cycles (memory) | recompute cycles | constants B | runtime state B | TFLM tail B |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut transfer_table = String::from("| model | input B | output B | invoke: uploads, downloads | invoke: bytes moved | invoke: staging copy B | pipelined steady frame: uploads, downloads | pipelined: staging copy B |\n|---|---|---|---|---|---|---|---|\n");
    let mut failures = 0;
    for name in &names {
        let row = rows.iter().find(|r| r["model"].as_str() == Some(name));
        let num = |k: &str| row.and_then(|r| r[k].as_f64()).unwrap_or(f64::NAN);
        let model_dir = dir.join(name);
        let model = read_model(&model_dir.join("model.tflite"))?;
        let mut matched = [0, 0];
        let mut total = 0;
        let mut times = Vec::new();
        let mut inputs = Vec::new();
        let mut expected_outputs = Vec::new();
        let mut first: [Option<runner::RunReport>; 2] = [None, None];
        for k in 0.. {
            let input_path = model_dir.join(format!("input_{k}.bin"));
            if !input_path.exists() {
                break;
            }
            let input = read_file(&input_path)?;
            let expected = read_file(&model_dir.join(format!("expected_tflm_{k}.bin")))?;
            inputs.push(input_path);
            total += 1;
            for (m, optimise) in [Optimise::Cycles, Optimise::Memory].into_iter().enumerate() {
                let opts = RunOptions {
                    repeats: if m == 0 { repeat } else { 0 },
                    optimise,
                    ..RunOptions::default()
                };
                let report =
                    runner::run(model, &[&input], &opts).map_err(|e| format!("{name}: {e}"))?;
                if report.outputs.first() == Some(&expected) {
                    matched[m] += 1;
                }
                if m == 0 {
                    times.push(report.host_us);
                }
                first[m].get_or_insert(report);
            }
            expected_outputs.push(expected);
        }
        let lite = litert::time(&model_dir.join("model.tflite"), &inputs, repeat)
            .map_err(|e| format!("{name}: {e}"))?;
        let lite_matched = lite
            .iter()
            .zip(&expected_outputs)
            .filter(|(run, expected)| &run.output == *expected)
            .count();
        let mut lite_us: Vec<f64> = lite.iter().map(|run| run.us).collect();
        lite_us.sort_by(f64::total_cmp);
        let lite_us = lite_us.get(lite_us.len() / 2).copied().unwrap_or(f64::NAN);
        let [Some(fast), Some(small)] = first else {
            return Err(format!("{name}: no inputs"));
        };
        let input = read_file(&model_dir.join("input_0.bin"))?;
        let piped = npu_sim::pipeline::run(model, &input, SimConfig::default(), 0, 4, true)
            .map_err(|e| format!("{name}: {e}"))?;
        transfer_table += &format!(
            "| {name} | {} | {} | {}, {} | {} | {} | {}, {} | {} |\n",
            input.len(),
            fast.outputs.iter().map(Vec::len).sum::<usize>(),
            fast.uploads,
            fast.downloads,
            fast.transfer_bytes,
            fast.staging_copy_bytes,
            piped.steady_transfers.0 / 2,
            piped.steady_transfers.1 / 2,
            piped.steady_staging_copy_bytes / 2,
        );
        failures += 2 * total - matched[0] - matched[1];
        times.sort_by(f64::total_cmp);
        let host = times[times.len() / 2];
        time_table += &format!(
            "| {name} | {}/{total} | {host:.1} | {:.1} | {:.1} | {lite_us:.1} | {:.2} | {lite_matched}/{total} | {} | {} | {:.2} |\n",
            matched[0],
            num("host_tflm_us"),
            num("host_tflm_us") / host,
            host / lite_us,
            fast.npu_cycles,
            num("vela_u55_128_cycles"),
            fast.npu_cycles as f64 / num("vela_u55_128_cycles"),
        );
        arena_table += &format!(
            "| {name} | {} | {} | {} | {} | {} | {}/{total} | {} | {} | {} | {} | {} | {} |\n",
            fast.plan.activation_bytes,
            num("activation_lower_bound_bytes"),
            num("tflm_head_bytes"),
            small.plan.activation_bytes,
            num("vela_u55_128_size_sram_bytes"),
            matched[1],
            small.plan.tiled_chains,
            small.npu_cycles,
            small.npu_cycles as i64 - fast.npu_cycles as i64,
            fast.plan.constant_bytes,
            fast.runtime_state_bytes,
            num("tflm_total_bytes") - num("tflm_head_bytes"),
        );
    }
    outln!("{time_table}\n{arena_table}\n{transfer_table}");
    if failures > 0 {
        return Err(format!("{failures} outputs differ from TFLM's"));
    }
    Ok(())
}
