//! `npu-sim bench schedule DIR`: static schedules against dynamic dispatch and one operator at
//! a time, on one, two and mixed execution units, per model of a reference-model directory.
//!
//! The models are those of `figures.json`, or without it every subdirectory holding a
//! `model.tflite` (as `examples/models`); each needs `input_0.bin` and `expected_tflm_0.bin`.
//! Each runs on `u55-128`, `u55-128,u55-128`, `u55-256` and `u55-256,u55-128` (the CPU always
//! beside them) in every scheduling mode, and once more with the static schedule's units
//! picked fastest-alone rather than cost-effective.
//!
//! Output (stdout): two Markdown tables. The first, per model and units: NPU cycles of one
//! steady invoke (the second, replaying the graph's job plan) static, dynamic, op-by-op and static fastest-alone; the static schedule's lower
//! bound and the ratio to it; static against dynamic and against op-by-op; each unit's busy
//! cycles, the CPU's, and the NPU's idle cycles (the makespan less the busiest unit's). The
//! second, per model: static on two U55-128 against one, and U55-256 + U55-128 against the
//! U55-256 alone, with whether the model is compute-bound: on one unit, neither the shared
//! memory ports' traffic (the bound's memory term) nor the weight pipeline's copies from flash
//! take half its makespan. Every figure is on the virtual clock.
//!
//! Failure modes: the directory, `figures.json`, a model or its files cannot be read (the
//! message names the file), or the directory holds no model; a run
//! fails (the message starts with the model's name); or, after the tables are printed, an
//! output that differs from TFLM's.

use crate::common::{model_names, read_file, read_model};
use npu_compute::graph::Scheduling;
use npu_compute::schedule::Policy;
use npu_sim::runner::{self, RunOptions, RunReport};
use npu_sim::{parse_units, SimConfig};
use std::path::Path;

const UNITS: [&str; 4] = ["u55-128", "u55-128,u55-128", "u55-256", "u55-256,u55-128"];

/// `npu-sim bench schedule DIR`.
pub fn run(dir: &Path) -> Result<(), String> {
    let mut failures = Vec::new();
    let mut table = String::from(
        "| model | units | static | dynamic | op-by-op | static, fastest-alone | lower bound | static / bound | static / dynamic | static / op-by-op | unit busy | CPU busy | NPU idle |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut speedups = String::from(
        "| model | compute-bound | one unit: memory ports / makespan | weight copies / makespan | 2×U55-128 / 1×U55-128 | U55-256+U55-128 / U55-256 |\n|---|---|---|---|---|---|\n",
    );
    for name in model_names(dir)? {
        let model_dir = dir.join(&name);
        let model = read_model(&model_dir.join("model.tflite"))?;
        let input = read_file(&model_dir.join("input_0.bin"))?;
        let expected = read_file(&model_dir.join("expected_tflm_0.bin"))?;
        let run = |units: &str, scheduling: Scheduling, policy: Policy| {
            let list = parse_units(units).map_err(|e| e.to_string())?;
            let config = SimConfig::default()
                .with_units(&list)
                .map_err(|e| e.to_string())?;
            let (arena_bytes, host_bytes) =
                runner::default_memory(model, config, RunOptions::default().optimise)
                    .map_err(|e| format!("{name}: {e}"))?;
            let opts = RunOptions {
                arena_bytes,
                host_bytes,
                config,
                scheduling,
                policy,
                steady: true,
                ..RunOptions::default()
            };
            runner::run(model, &[&input], &opts).map_err(|e| format!("{name}: {e}"))
        };
        let mut statics: Vec<RunReport> = Vec::new();
        for units in UNITS {
            let s = run(units, Scheduling::Static, Policy::CostEffective)?;
            let d = run(units, Scheduling::Dynamic, Policy::CostEffective)?;
            let o = run(units, Scheduling::OpByOp, Policy::CostEffective)?;
            let f = run(units, Scheduling::Static, Policy::FastestAlone)?;
            for (what, r) in [
                ("static", &s),
                ("dynamic", &d),
                ("op-by-op", &o),
                ("fastest", &f),
            ] {
                if r.outputs.first() != Some(&expected) {
                    failures.push(format!(
                        "{name} on {units} ({what}): output differs from TFLM's"
                    ));
                }
            }
            let bound = s.schedule.lower_bound.max();
            let busiest = s.unit_busy_cycles.iter().copied().max().unwrap_or(0);
            let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
            table += &format!(
                "| {name} | {units} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} | {} | {} |\n",
                s.npu_cycles,
                d.npu_cycles,
                o.npu_cycles,
                f.npu_cycles,
                bound,
                ratio(s.npu_cycles, bound),
                ratio(s.npu_cycles, d.npu_cycles),
                ratio(s.npu_cycles, o.npu_cycles),
                s.unit_busy_cycles
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" / "),
                s.cpu_busy_cycles,
                s.npu_cycles.saturating_sub(busiest),
            );
            statics.push(s);
        }
        let one = &statics[0];
        let share = |c: u64| c as f64 / one.npu_cycles.max(1) as f64;
        let (memory, weights) = (
            share(one.schedule.lower_bound.memory),
            share(one.schedule.weight_copy_cycles),
        );
        speedups += &format!(
            "| {name} | {} | {memory:.2} | {weights:.2} | {:.2} | {:.2} |\n",
            if memory.max(weights) < 0.5 {
                "yes"
            } else {
                "no"
            },
            statics[1].npu_cycles as f64 / statics[0].npu_cycles.max(1) as f64,
            statics[3].npu_cycles as f64 / statics[2].npu_cycles.max(1) as f64,
        );
    }
    outln!("{table}");
    outln!("{speedups}");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}
