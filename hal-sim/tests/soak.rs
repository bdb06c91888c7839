//! `npu-sim bench faults`: one JSON object whose figures add up, the same for a seed, and a
//! non-zero status only when something went wrong.
#![cfg(feature = "std")]

use std::path::PathBuf;
use std::process::Command;

use npu_sim::soak::{soak_plan, SoakReport, SOAK_KINDS};

fn model(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/models")
        .join(name)
        .join("model.tflite")
        .to_str()
        .unwrap()
        .to_string()
}

fn bench_faults(args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .args(["bench", "faults"])
        .args(args)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o, json)
}

#[test]
fn a_soak_reports_every_fault_recovers_and_leaks_nothing() {
    let m = model("kws_dscnn");
    let args = [
        m.as_str(),
        "--invokes",
        "40",
        "--fault-rate",
        "20%",
        "--seed",
        "7",
    ];
    let (o, j) = bench_faults(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for field in [
        "invokes",
        "faults_injected",
        "failed_invokes",
        "recovered",
        "wrong_outputs",
        "leaked_bytes",
        "leaked_handles",
    ] {
        assert!(j[field].is_number(), "{field} in {j}");
    }
    assert_eq!(j["invokes"], 40);
    let n = |f: &str| j[f].as_u64().unwrap();
    let kinds = &j["faults_by_kind"];
    // At 20% of 14 jobs per invoke, every kind shows up, and the counts add up.
    let by_kind: Vec<u64> = ["dma", "bus", "hang", "overrun", "spurious_irq", "lost_irq"]
        .iter()
        .map(|k| kinds[k].as_u64().unwrap())
        .collect();
    assert!(by_kind.iter().all(|&c| c > 0), "{kinds}");
    assert_eq!(by_kind.iter().sum::<u64>(), n("faults_injected"));
    assert_eq!(by_kind[..4].iter().sum::<u64>(), n("harmful_faults"));
    // Every harmful fault failed its invoke (some invokes had two), and every failed invoke
    // was recovered from.
    assert!(n("failed_invokes") > 0 && n("failed_invokes") <= n("harmful_faults"));
    assert_eq!(n("failed_invokes"), n("recovered"));
    for zero in [
        "wrong_outputs",
        "unreported_faults",
        "false_alarms",
        "leaked_bytes",
        "leaked_handles",
        "leaked_staging_blocks",
    ] {
        assert_eq!(n(zero), 0, "{zero}");
    }
    // The same seed injects the same faults and gets the same figures (but host time).
    let (_, again) = bench_faults(&args);
    let strip = |mut v: serde_json::Value| {
        let o = v.as_object_mut().unwrap();
        o.remove("host_seconds");
        o.remove("invokes_per_second");
        v
    };
    assert_eq!(strip(again), strip(j.clone()));
}

#[test]
fn a_bad_fault_rate_is_a_usage_error() {
    let m = model("kws_dscnn");
    for rate in ["2", "150%", "one"] {
        let (o, _) = bench_faults(&[m.as_str(), "--fault-rate", rate]);
        assert_eq!(o.status.code(), Some(2), "{rate}");
    }
}

#[test]
fn the_plan_mixes_every_kind_at_an_equal_share() {
    let plan = soak_plan(60_000, 9);
    assert_eq!(plan.rules().len(), SOAK_KINDS.len());
    for (rule, kind) in plan.rules().iter().zip(SOAK_KINDS) {
        assert_eq!(rule.kind, kind);
        assert_eq!(rule.chance.map(|c| c.per_million), Some(10_000));
    }
    let report = SoakReport {
        leaked_handles: 1,
        ..SoakReport::default()
    };
    assert!(!report.passed());
    assert!(SoakReport::default().passed());
}
