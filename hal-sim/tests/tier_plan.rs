//! Plans into a fast-memory budget with a slow tier (`npu_sim::tier_plan`), on the
//! repository's models: whole tensors where the budget allows, every plan that fits within
//! it, predictions never below the measured invoke, the smallest budget exactly the one the
//! planner meets, swaps only where their copies hide, host tensors kept in the arena, and the
//! command line's JSON.

use npu_compute::graph::Optimise;
use npu_compute::hal::Bandwidth;
use npu_sim::access_list::{self, AccessList};
use npu_sim::runner::{self, leak_aligned, RunOptions};
use npu_sim::tier_plan::{fit, plan, slow_tensors, Choice, TierBudget, TierPlanError};
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
    let inputs: Vec<Vec<u8>> = runner::input_sizes(bytes)
        .unwrap()
        .into_iter()
        .map(|n| vec![0; n as usize])
        .collect();
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    access_list::measure_unconstrained(bytes, &refs, config)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .list
}

fn budget(fast_bytes: u32) -> TierBudget {
    let config = SimConfig::default();
    TierBudget {
        fast_bytes,
        slow_bytes: 8 << 20,
        slow: config.slow,
        transfer_overhead: config.dma_overhead_cycles,
        swaps: true,
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

/// Runs `name` on input 0 with `slow_tensors` in a slow tier of 1 MiB and an arena of
/// `arena` bytes; its outputs and report.
fn run_tiered(name: &str, arena: usize, slow_tensors: &'static [u16]) -> runner::RunReport {
    let dir = path(name).parent().unwrap().to_path_buf();
    let bytes = leak_aligned(&std::fs::read(path(name)).unwrap());
    let input = std::fs::read(dir.join("input_0.bin")).unwrap();
    let (_, host) = runner::planned_memory(bytes, SimConfig::default(), Optimise::Cycles).unwrap();
    let opts = RunOptions {
        arena_bytes: arena,
        host_bytes: host.max(RunOptions::default().host_bytes),
        slow_bytes: 1 << 20,
        slow_tensors,
        steady: true,
        ..RunOptions::default()
    };
    let report = runner::run(bytes, &[&input], &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected = std::fs::read(dir.join("expected_tflm_0.bin")).unwrap();
    assert_eq!(report.outputs.concat(), expected, "{name}: TFLM's bytes");
    report
}

#[test]
fn a_fitted_plan_runs_bit_exact_in_its_budget_at_the_predicted_cycles() {
    for name in MODELS {
        let list = measure(name, SimConfig::default());
        let bytes = leak_aligned(&std::fs::read(path(name)).unwrap());
        let whole = run_tiered(name, 1 << 20, &[]);
        for percent in [50, 25] {
            let b = budget(list.arena.activation_bytes * percent / 100);
            let p = fit(bytes, SimConfig::default(), &list, b).unwrap();
            let what = format!("{name} at {percent}%");
            assert!(
                p.tensors
                    .iter()
                    .all(|t| !matches!(t.choice, Choice::Swapped(_))),
                "{what}"
            );
            if !p.fits {
                // Only what the host reads and writes keeps a plan out of its budget.
                assert!(p.fast_bytes > b.fast_bytes, "{what}");
                continue;
            }
            assert!(p.fast_bytes <= b.fast_bytes, "{what}");
            let slow = slow_tensors(&p);
            assert!(!slow.is_empty(), "{what}");
            // The arena holds the plan's activations and the constants, nothing more.
            let arena = (p.fast_bytes + whole.plan.constant_bytes).max(16) as usize;
            let report = run_tiered(name, arena, slow);
            assert_eq!(report.plan.activation_bytes, p.fast_bytes, "{what}");
            assert_eq!(report.plan.slow_bytes, p.slow_bytes, "{what}");
            // The simulator runs the plan in the cycles predicted, to within what the
            // prediction leaves out: each layer's own flash traffic beside the tier's, and the
            // tensors the graph moves along with a listed one because they share its memory
            // (tiny_transformer's in-place residual adds: 1.7% at 50%).
            let (predicted, ran) = (p.predicted_cycles, report.npu_cycles);
            assert!(ran >= whole.npu_cycles, "{what}");
            assert!(
                ran.abs_diff(predicted) * 40 <= predicted,
                "{what}: {ran} against {predicted}"
            );
        }
    }
}

#[test]
fn run_with_a_slow_tier_gives_tflms_bytes_and_reports_the_tier() {
    let dir = path("kws_dscnn").parent().unwrap().to_path_buf();
    let out = std::env::temp_dir().join(format!("tier_run_{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    // Half the activation pool beside the 4,704 B of constants.
    for policy in ["guided", "passive"] {
        let (output, stats) = (
            out.join(format!("{policy}.bin")),
            out.join(format!("{policy}.json")),
        );
        let run = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
            .arg("run")
            .arg(path("kws_dscnn"))
            .arg("--input")
            .arg(dir.join("input_0.bin"))
            .arg("--output")
            .arg(&output)
            .args([
                "--arena", "12704", "--slow", "1048576", "--policy", policy, "--stats",
            ])
            .arg(&stats)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let expected = std::fs::read(dir.join("expected_tflm_0.bin")).unwrap();
        assert_eq!(std::fs::read(&output).unwrap(), expected, "{policy}");
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
        assert!(doc["slow_bytes_peak"].as_u64().unwrap() > 0, "{policy}");
        assert!(
            doc["activation_bytes"].as_u64().unwrap() <= 8000,
            "{policy}"
        );
        for field in [
            "swapped_bytes",
            "prefetch_late_cycles",
            "recomputed_macs",
            "npu_cycles",
        ] {
            assert!(doc.get(field).is_some(), "{policy}: {field}");
        }
    }
    // Memories no plan fits are refused with the figures.
    let run = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .arg("run")
        .arg(path("kws_dscnn"))
        .arg("--input")
        .arg(dir.join("input_0.bin"))
        .args(["--arena", "4800", "--slow", "1024"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&run.stderr).contains("no tier plan fits"));
    let _ = std::fs::remove_dir_all(&out);
}
