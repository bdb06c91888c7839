//! Plans into a fast-memory budget with a slow tier (`npu_sim::tier_plan`), on the
//! repository's models: whole tensors where the budget allows, every plan that fits within
//! it, predictions never below the measured invoke, the smallest budget exactly the one the
//! planner meets, swaps only where their copies hide, host tensors kept in the arena, and the
//! command line's JSON.

use npu_compute::graph::Optimise;
use npu_compute::hal::Bandwidth;
use npu_sim::access_list::{self, AccessList};
use npu_sim::runner::{self, leak_aligned, RunOptions};
use npu_sim::tier_plan::{plan, Choice, TierBudget, TierPlanError};
use npu_sim::SimConfig;
use std::path::PathBuf;
use std::process::Command;

const MODELS: [&str; 4] = ["convnet", "kws_dscnn", "inception", "tiny_transformer"];

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/models")
        .join(name)
        .join("model.tflite")
}

fn measure(name: &str, config: SimConfig) -> AccessList {
    let bytes = leak_aligned(&std::fs::read(path(name)).unwrap());
    let (arena, host) = runner::planned_memory(bytes, config, Optimise::Cycles).unwrap();
    let inputs: Vec<Vec<u8>> = runner::input_sizes(bytes)
        .unwrap()
        .into_iter()
        .map(|n| vec![0; n as usize])
        .collect();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let opts = RunOptions {
        arena_bytes: arena,
        host_bytes: host.max(RunOptions::default().host_bytes),
        config,
        ..RunOptions::default()
    };
    access_list::measure(bytes, &refs, &opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn budget(fast_bytes: u32) -> TierBudget {
    let config = SimConfig::default();
    TierBudget {
        fast_bytes,
        slow_bytes: 8 << 20,
        slow: config.slow,
        transfer_overhead: config.dma_overhead_cycles,
    }
}

#[test]
fn with_room_for_the_whole_plan_every_tensor_stays_whole() {
    for name in MODELS {
        let list = measure(name, SimConfig::default());
        let p = plan(&list, budget(list.arena.activation_bytes)).unwrap();
        assert!(p.fits, "{name}");
        assert!(
            p.tensors.iter().all(|t| t.choice == Choice::Whole),
            "{name}"
        );
        assert_eq!(p.predicted_cycles, p.measured_cycles, "{name}");
        assert_eq!(p.measured_cycles, list.end - list.start, "{name}");
        assert!(p.fast_bytes <= list.arena.activation_bytes, "{name}");
        assert_eq!((p.slow_bytes, p.swapped_bytes), (0, 0), "{name}");
    }
}

#[test]
fn plans_within_a_budget_fit_it_and_cost_no_less_than_measured() {
    for name in MODELS {
        let list = measure(name, SimConfig::default());
        let host: Vec<u16> = list
            .tensors
            .iter()
            .filter(|t| t.input || t.output)
            .map(|t| t.tensor)
            .collect();
        let mut moved_any = false;
        for percent in [75, 50, 25] {
            let b = list.arena.activation_bytes * percent / 100;
            let p = plan(&list, budget(b)).unwrap();
            assert!(
                p.predicted_cycles >= p.measured_cycles,
                "{name} at {percent}%"
            );
            if p.fits {
                assert!(p.fast_bytes <= b, "{name} at {percent}%");
                assert!(p.slow_bytes <= 8 << 20, "{name} at {percent}%");
            } else {
                assert!(p.fast_bytes > b, "{name} at {percent}%");
            }
            // The host reads and writes inputs and outputs in the arena.
            for t in &p.tensors {
                if host.contains(&t.tensor) {
                    assert_ne!(t.choice, Choice::Slow, "{name}: tensor {}", t.tensor);
                }
            }
            moved_any |= p.tensors.iter().any(|t| t.choice != Choice::Whole);
            // Something moved to the slow tier takes room there.
            if p.tensors.iter().any(|t| t.choice == Choice::Slow) {
                assert!(p.slow_bytes > 0, "{name} at {percent}%");
            }
        }
        assert!(moved_any, "{name}: a quarter of the arena moves something");
    }
}

#[test]
fn the_smallest_budget_reported_is_met_and_one_alignment_unit_less_is_not() {
    for name in MODELS {
        let list = measure(name, SimConfig::default());
        let smallest = plan(&list, budget(0)).unwrap().fast_bytes;
        assert!(smallest < list.arena.activation_bytes, "{name}");
        let at = plan(&list, budget(smallest)).unwrap();
        assert!(at.fits && at.fast_bytes <= smallest, "{name}");
        let below = plan(&list, budget(smallest - list.alignment)).unwrap();
        assert!(!below.fits, "{name}");
    }
}

#[test]
fn a_slow_tier_too_small_for_the_plan_does_not_fit() {
    let list = measure("kws_dscnn", SimConfig::default());
    let p = plan(
        &list,
        TierBudget {
            slow_bytes: 0,
            ..budget(list.arena.activation_bytes / 2)
        },
    )
    .unwrap();
    assert!(p.fast_bytes <= list.arena.activation_bytes / 2);
    assert!(p.slow_bytes > 0 && !p.fits);
}

#[test]
fn swaps_are_made_only_where_both_copies_hide() {
    let fast_tier = Bandwidth {
        bytes: 8,
        cycles: 1,
        latency: 64,
    };
    let mut swaps = 0;
    for name in MODELS {
        let list = measure(name, SimConfig::default());
        for slow in [SimConfig::default().slow, fast_tier] {
            for percent in [75, 50, 25] {
                let b = TierBudget {
                    slow,
                    ..budget(list.arena.activation_bytes * percent / 100)
                };
                let p = plan(&list, b).unwrap();
                let moved: u64 = p
                    .tensors
                    .iter()
                    .map(|t| match &t.choice {
                        Choice::Swapped(gaps) => 2 * u64::from(t.len) * gaps.len() as u64,
                        _ => 0,
                    })
                    .sum();
                // Each swap moves its tensor out and back, and is listed.
                assert_eq!(p.swapped_bytes, moved, "{name} at {percent}%");
                // Both copies fit under the operators run between the two accesses.
                for t in &p.tensors {
                    let Choice::Swapped(gaps) = &t.choice else {
                        continue;
                    };
                    let accesses = &list
                        .tensors
                        .iter()
                        .find(|x| x.tensor == t.tensor)
                        .unwrap()
                        .accesses;
                    let copy = slow.cycles_for(u64::from(t.len)) + u64::from(b.transfer_overhead);
                    for &(a, z) in gaps {
                        let (after, before) = (accesses[a].end, accesses[z].start);
                        let between: u64 = list
                            .operators
                            .iter()
                            .filter(|o| o.start >= after && o.end <= before)
                            .map(|o| o.end - o.start)
                            .sum();
                        assert!(
                            between >= 2 * copy,
                            "{name}: tensor {} gap {a}..{z}",
                            t.tensor
                        );
                    }
                }
                swaps += usize::from(moved > 0);
                // A hidden copy costs nothing: with no tensor in the slow tier for good, the
                // prediction is the measurement.
                if p.tensors.iter().all(|t| t.choice != Choice::Slow) {
                    assert_eq!(
                        p.predicted_cycles, p.measured_cycles,
                        "{name} at {percent}%"
                    );
                }
            }
        }
    }
    // tiny_transformer's input is read again after the layers between (a residual): it
    // cannot live in the slow tier, the host writes it, so the planner swaps it.
    assert!(swaps > 0);
}

#[test]
fn an_invoke_on_two_units_is_refused_with_the_reason() {
    let config = SimConfig::default()
        .with_units(&npu_sim::parse_units("u55-128,u55-128").unwrap())
        .unwrap();
    let list = measure("kws_dscnn", config);
    let err = plan(&list, budget(1024)).unwrap_err();
    assert_eq!(err, TierPlanError::Overlapping);
    assert!(err.to_string().contains("one execution unit"));
}

#[test]
fn the_command_line_prints_the_plan_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .arg("plan")
        .arg(path("kws_dscnn"))
        .args(["--budget", "8000", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in [
        "budget_bytes",
        "slow_limit_bytes",
        "fits",
        "fast_bytes",
        "slow_bytes_peak",
        "swapped_bytes",
        "measured_cycles",
        "predicted_cycles",
        "smallest_budget_bytes",
        "smallest_budget_predicted_cycles",
        "tensors",
    ] {
        assert!(doc.get(field).is_some(), "{field}");
    }
    assert_eq!(doc["budget_bytes"], 8000);
    assert_eq!(doc["fits"], true);
    assert!(doc["fast_bytes"].as_u64().unwrap() <= 8000);
    // --slow needs --budget; --budget refuses --schedule.
    let out = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .arg("plan")
        .arg(path("kws_dscnn"))
        .args(["--slow", "1024"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
