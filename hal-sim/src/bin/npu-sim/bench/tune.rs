//! `npu-sim bench tune DIR`: tuned kernel variants against every fixed choice, per model of
//! a reference-model directory.
//!
//! The models are those of `figures.json`, or without it every subdirectory holding a
//! `model.tflite` (as `examples/models`); each needs `input_0.bin` and
//! `expected_tflm_0.bin`. Each model runs with every kernel variant fixed (applied wherever
//! the layer supports it, `Auto` elsewhere), is tuned once, and runs again from the tuning
//! table imported into a fresh simulator.
//!
//! Output (stdout): one Markdown table: NPU cycles per fixed choice, tuned cycles, the best
//! fixed choice and the ratio, layers on the CPU when tuned, the tuning's shapes,
//! measurements and cycles (also as a multiple of one inference), the table's bytes, the
//! measurements a run from the table takes, and how many outputs equal TFLM's. Every
//! figure is on the virtual clock: deterministic.
//!
//! Failure modes: the directory, `figures.json`, a model or its files cannot be read (the
//! message names the file), or the directory holds no model; a run
//! or the tuning fails (the message starts with the model's name); or, after the table is
//! printed, the checks the benchmark exists for: a tuned model slower than its best fixed
//! choice (tuning would be useless), a tuning that found no room to measure some layer (its
//! figures would be a short arena's), a run from the table that measured (the table would
//! not spare firmware the tuning), or an output differing from TFLM's. All failed checks
//! are joined with `; ` into one error.

use crate::common::{model_names, read_file, read_model};
use npu_compute::hal::Variant;
use npu_compute::tune::{Candidate, TuneMode};
use npu_sim::runner::{self, RunOptions};
use std::path::Path;

/// The fixed choices `bench tune` compares the tuned one with (each applied wherever the layer
/// supports it, `Auto` elsewhere).
const FIXED: [(&str, Candidate); 8] = [
    ("auto", Candidate::Npu(Variant::Auto)),
    ("8x8", Candidate::Npu(Variant::Block { h: 8, w: 8 })),
    ("16x4", Candidate::Npu(Variant::Block { h: 16, w: 4 })),
    ("4x16", Candidate::Npu(Variant::Block { h: 4, w: 16 })),
    ("2x32", Candidate::Npu(Variant::Block { h: 2, w: 32 })),
    ("32x2", Candidate::Npu(Variant::Block { h: 32, w: 2 })),
    ("im2col", Candidate::Npu(Variant::Im2col)),
    ("cpu", Candidate::Cpu),
];

/// `npu-sim bench tune DIR`.
pub fn run(dir: &Path) -> Result<(), String> {
    let names = model_names(dir)?;
    let mut table = String::from("| model |");
    for (name, _) in FIXED {
        table += &format!(" {name} |");
    }
    table += " **tuned** | best fixed | tuned / best | layers on CPU, tuned | shapes tuned | measurements | tuning cycles | ÷ one inference | table B | measurements with the table | outputs = TFLM |\n|---|";
    table += &"---|".repeat(FIXED.len() + 11);
    table += "\n";
    let mut failures = Vec::new();
    for name in names {
        let model_dir = dir.join(&name);
        let model = read_model(&model_dir.join("model.tflite"))?;
        let input = read_file(&model_dir.join("input_0.bin"))?;
        let expected = read_file(&model_dir.join("expected_tflm_0.bin"))?;
        let run = |opts: RunOptions| {
            runner::run(model, &[&input], &opts).map_err(|e| format!("{name}: {e}"))
        };
        let mut exact = 0;
        let mut runs = 0;
        let mut check = |report: &runner::RunReport| {
            runs += 1;
            exact += usize::from(report.outputs.first() == Some(&expected));
        };
        table += &format!("| {name} |");
        let mut best = u64::MAX;
        for (_, c) in FIXED {
            let report = run(RunOptions {
                tune_mode: TuneMode::Fixed(c),
                repeats: 0,
                ..RunOptions::default()
            })?;
            check(&report);
            best = best.min(report.npu_cycles);
            table += &format!(" {} |", report.npu_cycles);
        }
        let (tuning, stats) = runner::tune(model, &[&input], &RunOptions::default())
            .map_err(|e| format!("{name}: {e}"))?;
        let tuning_table: &'static [u8] = Vec::leak(tuning);
        let tuned = run(RunOptions {
            tune_mode: TuneMode::CacheOnly,
            tune_table: Some(tuning_table),
            repeats: 0,
            ..RunOptions::default()
        })?;
        check(&tuned);
        let auto = run(RunOptions {
            repeats: 0,
            ..RunOptions::default()
        })?;
        table += &format!(
            " **{}** | {best} | {:.3} | {} | {} | {} | {} | {:.1} | {} | {} | {exact}/{runs} |\n",
            tuned.npu_cycles,
            tuned.npu_cycles as f64 / best as f64,
            tuned.cpu_ops,
            stats.tuning_runs,
            stats.measurements,
            stats.tuning_cycles,
            stats.tuning_cycles as f64 / auto.npu_cycles as f64,
            tuning_table.len(),
            tuned.tuning.measurements,
        );
        if tuned.npu_cycles > best {
            failures.push(format!(
                "{name}: tuned {} > best fixed {best}",
                tuned.npu_cycles
            ));
        }
        if stats.starved != 0 {
            failures.push(format!(
                "{name}: {} layer shapes or kernel variants found no room in the {}-byte arena \
                 to be measured",
                stats.starved,
                RunOptions::default().arena_bytes
            ));
        }
        if tuned.tuning.measurements != 0 || tuned.tuning.tuning_runs != 0 {
            failures.push(format!("{name}: the run from the table measured"));
        }
        if exact != runs {
            failures.push(format!(
                "{name}: {} of {runs} outputs differ from TFLM's",
                runs - exact
            ));
        }
    }
    outln!("{table}");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}
