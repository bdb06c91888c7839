//! `npu-sim run --faults SPEC`: a fault that stops the run is an error (status 1) naming the
//! fault, faults that only slow it leave TFLM's bytes, and a spec that does not parse is a
//! usage error (status 2) saying what is wrong.
#![cfg(feature = "std")]

use std::path::PathBuf;
use std::process::{Command, Output};

fn kws() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/models/kws_dscnn")
}

/// `npu-sim run` of kws_dscnn on its first input with `--faults spec`, writing its output to
/// `out` and its stats to `stats`.
fn run(spec: &str, out: &std::path::Path, stats: &std::path::Path) -> Output {
    let m = kws();
    Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .args([
            "run",
            m.join("model.tflite").to_str().unwrap(),
            "--input",
            m.join("input_0.bin").to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
            "--faults",
            spec,
        ])
        .output()
        .unwrap()
}

fn npu_cycles(stats: &std::path::Path) -> u64 {
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(stats).unwrap()).unwrap();
    json["npu_cycles"].as_u64().unwrap()
}

#[test]
fn faults_on_the_command_line() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, stats) = (dir.join("out.bin"), dir.join("stats.json"));
    let expected = std::fs::read(kws().join("expected_tflm_0.bin")).unwrap();

    // No fault: the figures of a run without the option.
    let o = run("none", &out, &stats);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&out).unwrap(), expected);
    let clean = npu_cycles(&stats);

    // Overruns and interrupts lost or raised for nothing: the same bytes, later or not.
    for (spec, slower) in [
        ("overrun=3x@op=DepthwiseConv2d", true),
        ("lost-irq@p=0.3,seed=3", true),
        ("spurious-irq@p=0.5,seed=1", false),
    ] {
        std::fs::remove_file(&out).ok();
        let o = run(spec, &out, &stats);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{spec}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(std::fs::read(&out).unwrap(), expected, "{spec}");
        let cycles = npu_cycles(&stats);
        assert_eq!(cycles > clean, slower, "{spec}: {cycles} against {clean}");
    }

    // A bus error on the first convolution: the run fails, saying which job met which fault
    // and that the NPU was reset, and writes no output.
    std::fs::remove_file(&out).ok();
    let o = run("bus@op=Conv2d,max=1", &out, &stats);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    for says in ["job of fence", "bus error", "the NPU was reset"] {
        assert!(err.contains(says), "{err}");
    }
    assert!(!out.exists());

    // Bad specs are usage errors that say what is wrong.
    for (spec, says) in [
        ("dam@job=3", "unknown fault kind `dam`"),
        ("dma@p=2", "p=`2` is not a probability"),
        ("bus@op=Conv3d", "op=`Conv3d` names no operator family"),
        ("dma@seed=4", "seed= without p="),
        ("", "empty fault rule"),
    ] {
        let o = run(spec, &out, &stats);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--faults") && err.contains(says), "{err}");
        assert!(o.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
