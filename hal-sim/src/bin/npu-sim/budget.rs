//! `npu-sim plan MODEL --budget BYTES [--slow BYTES] [--json]`: a plan of the model's
//! activations into a fast arena of `--budget` bytes with a slow tier of `--slow` bytes
//! beside it ([`npu_sim::tier_plan`]): each activation whole, swapped out between two accesses
//! or kept in the slow tier, the bytes each memory needs, and the cycles predicted. Also the
//! smallest budget the planner meets, and what it predicts there.
//!
//! The measurement is one unconstrained invoke on one U55-128 with zero inputs, its steady
//! invoke's [access list](npu_sim::access_list); the slow tier is the simulator's default
//! ([`SimConfig::slow`]). Predictions only: no runtime runs a tier plan yet.
//!
//! Output (stdout): text (the figures, then one line per activation not kept whole), or with
//! `--json` one object with `budget_bytes`, `slow_limit_bytes`, `fits`, `fast_bytes`,
//! `slow_bytes_peak`, `swapped_bytes`, `measured_cycles`, `predicted_cycles`,
//! `smallest_budget_bytes`, `smallest_budget_predicted_cycles` and `tensors` (each `tensor`,
//! `bytes`, `choice`: "whole" | "swap" | "slow", and `swaps`, the pairs of access indices
//! each swap lies between).
//!
//! Failure modes: the model cannot be read or planned (the graph's reason), its trace cannot be
//! matched to the graph ([`npu_sim::access_list::AccessError`]).

use crate::common::{read_inputs_or_zeros, read_model};

use npu_sim::tier_plan::{self, Choice, TierBudget, TierPlan};
use npu_sim::{access_list, SimConfig};
use std::path::Path;

/// `npu-sim plan MODEL --budget BYTES`.
pub fn run(path: &Path, budget: u32, slow: u32, json: bool) -> Result<(), String> {
    let model = read_model(path)?;
    let config = SimConfig::default();
    let inputs = read_inputs_or_zeros(model, &[])?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let list = access_list::measure_unconstrained(model, &refs, config)
        .map_err(|e| e.to_string())?
        .list;
    let at = |fast_bytes| TierBudget {
        fast_bytes,
        slow_bytes: slow,
        slow: config.slow,
        transfer_overhead: config.dma_overhead_cycles,
        swaps: true,
    };
    let plan = tier_plan::plan(&list, at(budget)).map_err(|e| e.to_string())?;
    let smallest = tier_plan::plan(&list, at(0)).map_err(|e| e.to_string())?;
    if json {
        outln!("{}", to_json(&plan, &smallest));
        return Ok(());
    }
    outln!(
        "{}: fast budget {budget} B, slow tier {slow} B ({} B every {} cycles after {}); measured {} cycles with {} B of activations",
        path.display(),
        config.slow.bytes,
        config.slow.cycles,
        config.slow.latency,
        plan.measured_cycles,
        list.arena.activation_bytes,
    );
    outln!(
        "  plan: fast arena {} B, slow tier {} B, {} B swapped; predicted {} cycles ({:.2}x){}",
        plan.fast_bytes,
        plan.slow_bytes,
        plan.swapped_bytes,
        plan.predicted_cycles,
        ratio(&plan),
        if plan.fits { "" } else { "; DOES NOT FIT" }
    );
    for t in plan.tensors.iter().filter(|t| t.choice != Choice::Whole) {
        match &t.choice {
            Choice::Swapped(gaps) => outln!(
                "  tensor {} ({} B): swapped out after access {} and back before access {}",
                t.tensor,
                t.len,
                gaps.iter()
                    .map(|g| g.0.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                gaps.iter()
                    .map(|g| g.1.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => outln!("  tensor {} ({} B): in the slow tier", t.tensor, t.len),
        }
    }
    outln!(
        "  smallest budget the planner meets: {} B (predicted {} cycles, {:.2}x)",
        smallest.fast_bytes,
        smallest.predicted_cycles,
        ratio(&smallest)
    );
    Ok(())
}

fn ratio(plan: &TierPlan) -> f64 {
    plan.predicted_cycles as f64 / plan.measured_cycles.max(1) as f64
}

fn to_json(plan: &TierPlan, smallest: &TierPlan) -> String {
    use serde_json::json;
    let tensors: Vec<serde_json::Value> = plan
        .tensors
        .iter()
        .map(|t| {
            let swaps: Vec<[usize; 2]> = match &t.choice {
                Choice::Swapped(gaps) => gaps.iter().map(|&(a, b)| [a, b]).collect(),
                _ => Vec::new(),
            };
            json!({
                "tensor": t.tensor,
                "bytes": t.len,
                "choice": t.choice.name(),
                "swaps": swaps,
            })
        })
        .collect();
    let doc = json!({
        "budget_bytes": plan.budget.fast_bytes,
        "slow_limit_bytes": plan.budget.slow_bytes,
        "fits": plan.fits,
        "fast_bytes": plan.fast_bytes,
        "slow_bytes_peak": plan.slow_bytes,
        "swapped_bytes": plan.swapped_bytes,
        "measured_cycles": plan.measured_cycles,
        "predicted_cycles": plan.predicted_cycles,
        "smallest_budget_bytes": smallest.fast_bytes,
        "smallest_budget_predicted_cycles": smallest.predicted_cycles,
        "tensors": tensors,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
