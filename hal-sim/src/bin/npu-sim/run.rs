//! `npu-sim run MODEL --input IN.bin... [--output OUT.bin...] [--arena BYTES] [--host BYTES]
//! [--stats F.json] [--repeat N] [--optimise cycles|memory] [--tune-table TABLE |
//! --autotune] [--units SPEC] [--schedule static|dynamic|op-by-op] [--faults SPEC]`: runs a
//! TensorFlow Lite model on the simulated NPU.
//!
//! Prepares the model in an arena of `--arena` bytes, with `--host` bytes of host staging
//! memory, on a part with the execution units of `--units` (default one `u55-128`), and
//! invokes it on the raw input bytes;
//! host time is the median of `--repeat` timed invocations (at least 1). `--arena` and
//! `--host` are at most 4294967295 bytes, what the simulator addresses, and `--repeat` at
//! least 1: other values are usage errors (status 2), refused before anything is allocated. Kernel variants: by default the
//! graph's own choice; with `--tune-table` each layer runs as the table (from `npu-sim
//! tune`) says, measuring nothing; with `--autotune` every layer shape is tuned in an
//! untimed first invoke and the next one is reported.
//!
//! Output: the raw bytes of each output tensor to its `--output` file (those of the reported
//! invoke, which starts from the model's initial state: for a stateful model such as an LSTM,
//! what a first TFLM invoke gives, whatever `--repeat` and `--autotune`); with `--stats` the
//! run's figures as JSON (the runner's report: `npu_cycles`, `jobs`, `transfers`,
//! `arena_peak_bytes`, `runtime_state_bytes`, `host_us`, ..., and `units` (the spec,
//! normalised: lower case, no spaces), `unit_busy_cycles` (one number per unit),
//! `cpu_busy_cycles`, and the schedule: `schedule` (`static`, `dynamic` or `op-by-op`),
//! `schedule_planned` (whether a static schedule was followed), `schedule_tasks`,
//! `schedule_split_operators`, `schedule_predicted_cycles` and `schedule_lower_bound_cycles`
//! (the largest of the critical path, the work over the units' throughput, the shared
//! memory ports' traffic and the weight pipeline's copies from flash over the NPU units, each
//! with every task at its cheapest)); on stdout the predicted class
//! (the largest int8 of the first output, the lowest index on ties) with the first output's
//! bytes, the tuning counts when a table or autotuning was asked for, and the NPU cycles,
//! jobs, transfers, CPU-fallback ops, arena peak, runtime state and where the weights live.
//!
//! Faults: with `--faults` the NPU the model runs on injects them (see
//! [`npu_sim::faults`]); the default memories are still measured on a fault-free NPU. A DMA or
//! bus fault fails the run with the fault (status 1), naming the faulted job's fence; an
//! overrun or a lost or spurious interrupt slows it or changes nothing visible; a hang
//! blocks it until a watchdog of the runtime gives up on the job.
//!
//! Failure modes (status 1): a model, input or table file cannot be read, or an output or
//! stats file cannot be written (the message names the file); the number of `--input` files
//! differs from the model's inputs, or one has a size other than its input tensor's (both
//! checked before anything runs); the model is malformed or needs more than `--arena`
//! bytes, or a transfer larger than `--host` bytes; the
//! tuning table is refused (made for another model or corrupt); or the number of
//! `--output` files differs from the model's outputs (checked after the run, before
//! anything is written).

use crate::common::{read_file, read_inputs, read_model};
use npu_compute::graph::{Optimise, Scheduling};
use npu_compute::tune::TuneMode;
use npu_sim::runner::{self, RunOptions};
use npu_sim::tier_plan::{self, TierBudget};
use npu_sim::{access_list, FaultPlan, SimConfig};
use std::path::{Path, PathBuf};

/// `npu-sim run MODEL --input IN`.
#[allow(clippy::too_many_arguments)] // one per command-line option
pub fn run(
    model: &Path,
    inputs: &[PathBuf],
    outputs: &[PathBuf],
    (arena, host): (Option<usize>, Option<usize>),
    stats: Option<&Path>,
    repeat: usize,
    optimise: Optimise,
    tune_table: Option<&Path>,
    autotune: bool,
    config: SimConfig,
    scheduling: Scheduling,
    tier: Option<(usize, bool)>,
) -> Result<(), String> {
    let model_bytes = read_model(model)?;
    let inputs = read_inputs(model_bytes, inputs)?;
    let (arena, host) = match (arena, host) {
        (Some(a), Some(h)) => (a, h),
        _ => {
            // Measured on a fault-free NPU: the faults are for the run itself.
            let fault_free = SimConfig {
                faults: FaultPlan::NONE,
                ..config
            };
            let (a, h) = runner::default_memory(model_bytes, fault_free, optimise)
                .map_err(|e| e.to_string())?;
            (arena.unwrap_or(a), host.unwrap_or(h))
        }
    };
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let (slow_bytes, slow_tensors) = match tier {
        None => (0, &[][..]),
        Some((slow, guided)) => {
            if optimise == Optimise::Memory {
                return Err("--slow plans whole tensors: leave --optimise at cycles".into());
            }
            let tensors = tiered(model_bytes, &refs, config, arena, slow, guided)?;
            (slow, tensors)
        }
    };
    let table = match tune_table {
        Some(path) => Some(&*Vec::leak(read_file(path)?)),
        None => None,
    };
    let opts = RunOptions {
        arena_bytes: arena,
        host_bytes: host,
        repeats: repeat,
        optimise,
        tune_mode: match (table, autotune) {
            (Some(_), _) => TuneMode::CacheOnly,
            (None, true) => TuneMode::Tune,
            (None, false) => TuneMode::Off,
        },
        tune_table: table,
        config,
        scheduling,
        slow_bytes,
        slow_tensors,
        ..RunOptions::default()
    };
    let report = runner::run(model_bytes, &refs, &opts).map_err(|e| e.to_string())?;
    if !outputs.is_empty() && outputs.len() != report.outputs.len() {
        let (n, given) = (report.outputs.len(), outputs.len());
        return Err(format!(
            "the model has {n} output{}, {given} --output file{} given: give one --output per \
             model output, in order, or none (nothing was written)",
            if n == 1 { "" } else { "s" },
            if given == 1 { " was" } else { "s were" },
        ));
    }
    for (path, bytes) in outputs.iter().zip(&report.outputs) {
        std::fs::write(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = stats {
        std::fs::write(path, report.to_json()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let first = report.outputs.first().map(Vec::as_slice).unwrap_or(&[]);
    let class = first
        .iter()
        .enumerate()
        .max_by_key(|&(i, &b)| (b as i8, std::cmp::Reverse(i)))
        .map_or(0, |(i, _)| i);
    outln!(
        "{}: predicted class {class} (output bytes {:?})",
        model.display(),
        first.iter().map(|&b| b as i8).collect::<Vec<_>>()
    );
    if tune_table.is_some() || autotune {
        outln!(
            "  tuning: {} layer shapes measured ({} measurements), {} tuned choices used, {} fallbacks{}",
            report.tuning.tuning_runs,
            report.tuning.measurements,
            report.tuning.hits,
            report.tuning.fallbacks,
            match report.tuning.starved {
                0 => String::new(),
                n => format!(
                    "; {n} layer shapes or kernel variants found no room in the arena to be \
                     measured (`npu-sim tune` says how large an arena tunes it fully)"
                ),
            }
        );
    }
    outln!(
        "  {} NPU cycles, {} jobs ({} transfers, {} on the CPU fallback), arena peak {} B ({} B held by constants), runtime state {} B, weights {}",
        report.npu_cycles,
        report.jobs,
        report.transfers,
        report.cpu_ops,
        report.arena_peak_bytes,
        report.arena_constant_bytes,
        report.runtime_state_bytes,
        if report.weights_in_flash { "in flash" } else { "copied to the arena" }
    );
    Ok(())
}

/// The activations `--slow` keeps in the slow tier for an arena of `arena` bytes, from an
/// unconstrained measured run: `passive`, those the unconstrained plan lays out past what the
/// arena holds beside the constants; `guided`, the tier planner's ([`tier_plan::fit`]), or the
/// passive choice where the planner predicts that one faster.
fn tiered(
    model: &'static [u8],
    inputs: &[&[u8]],
    config: SimConfig,
    arena: usize,
    slow: usize,
    guided: bool,
) -> Result<&'static [u16], String> {
    let list = access_list::measure_unconstrained(model, inputs, config)
        .map_err(|e| e.to_string())?
        .list;
    let constant_bytes = list.arena.constant_bytes;
    let fast = u32::try_from(arena)
        .unwrap_or(u32::MAX)
        .saturating_sub(constant_bytes);
    let slow_limit = u32::try_from(slow).unwrap_or(u32::MAX);
    let past: Vec<u16> = list
        .tensors
        .iter()
        .filter(|t| t.offset.saturating_add(t.len) > fast)
        .map(|t| t.tensor)
        .collect();
    let past: &'static [u16] = Box::leak(past.into_boxed_slice());
    if !guided {
        return Ok(past);
    }
    let budget = TierBudget {
        fast_bytes: fast,
        slow_bytes: slow_limit,
        slow: config.slow,
        transfer_overhead: config.dma_overhead_cycles,
        swaps: false,
    };
    let planned = tier_plan::fit(model, config, &list, budget).map_err(|e| e.to_string())?;
    // The passive choice weighed by the same prediction: guided takes it where the planner's
    // greedy moves are predicted slower.
    let passive =
        tier_plan::as_prepared(model, config, &list, budget, past).map_err(|e| e.to_string())?;
    let plan =
        if passive.fits && (!planned.fits || passive.predicted_cycles < planned.predicted_cycles) {
            passive
        } else {
            planned
        };
    if !plan.fits {
        return Err(format!(
            "no tier plan fits: the activations need {} B of the arena beside its {} B of \
             constants ({} B given) and {} B of the slow tier ({} B given); give a larger \
             --arena or --slow (`npu-sim plan MODEL --budget BYTES` reports the smallest)",
            plan.fast_bytes, constant_bytes, arena, plan.slow_bytes, slow
        ));
    }
    Ok(tier_plan::slow_tensors(&plan))
}
