//! The `npu-sim` command line: `run` writes TFLM's bytes and the stats JSON, `inspect`
//! describes a model, errors go to stderr with a non-zero exit status, and a reader closing
//! stdout early ends a command quietly. Bad input as a new user gives it (sizes the simulator
//! cannot address, counts of nothing, the wrong number of inputs, an arena too small to tune
//! in, a directory with no model, missing, truncated or foreign files) is a clear error with
//! the documented status: 1 for a failed command, 2 for a wrong command line, never a panic.
#![cfg(feature = "std")]

use std::path::PathBuf;
use std::process::Command;

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/models")
}

fn npu_sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn run_writes_the_tflm_bytes_and_the_stats() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (out, stats) = (dir.join("out.bin"), dir.join("stats.json"));
    let m = models().join("kws_dscnn");
    let o = npu_sim(&[
        "run",
        m.join("model.tflite").to_str().unwrap(),
        "--input",
        m.join("input_1.bin").to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(m.join("expected_tflm_1.bin")).unwrap()
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("predicted class"), "{stdout}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    for key in [
        "arena_peak_bytes",
        "runtime_state_bytes",
        "npu_cycles",
        "jobs",
        "transfers",
        "host_us",
    ] {
        assert!(json[key].is_number(), "{key} missing in {json}");
    }
    assert!(json["npu_cycles"].as_u64().unwrap() > 1000);
    assert_eq!(
        json["transfers"].as_u64(),
        Some(2),
        "input upload and output download only"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stateful model (an LSTM's hidden and cell state carry from one invoke to the next):
/// `run` writes the first invoke's bytes, as TFLM gives them, however many timed repeats or
/// tuning invokes it makes.
#[test]
fn run_writes_a_stateful_models_first_invoke() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out.bin");
    let case = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/models/ops/lstm_int8_seq");
    let expected = std::fs::read(case.join("expected_0_0.bin")).unwrap();
    for extra in [&["--repeat", "1"][..], &["--repeat", "3"], &["--autotune"]] {
        let mut args = vec![
            "run",
            case.join("model.tflite").to_str().unwrap(),
            "--input",
            case.join("input_0_0.bin").to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = npu_sim(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read(&out).unwrap(), expected, "{extra:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_arena_too_small_fails_with_a_message() {
    let m = models().join("convnet");
    let o = npu_sim(&[
        "run",
        m.join("model.tflite").to_str().unwrap(),
        "--input",
        m.join("input_0.bin").to_str().unwrap(),
        "--arena",
        "4096",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("arena out of memory"), "{err}");
}

#[test]
fn bad_inputs_fail_with_a_message() {
    let m = models().join("convnet");
    // A model file that is not a model.
    let o = npu_sim(&[
        "run",
        m.join("input_0.bin").to_str().unwrap(),
        "--input",
        m.join("input_0.bin").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a TensorFlow Lite model"), "{err}");
    // An input of the wrong size.
    let o = npu_sim(&[
        "run",
        m.join("model.tflite").to_str().unwrap(),
        "--input",
        m.join("expected_tflm_0.bin").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("input 0"));
}

#[test]
fn inspect_lists_tensors_and_where_operators_run() {
    let m = models().join("tiny_transformer");
    let o = npu_sim(&["inspect", m.join("model.tflite").to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("BATCH_MATMUL") && text.contains("NPU"),
        "{text}"
    );
    assert!(
        text.contains("alias (no job)"),
        "RESHAPE shares memory: {text}"
    );
    assert!(text.contains("scale"), "{text}");
}

/// `plan` prints the exact arena: `run --arena` with it succeeds, one alignment unit less
/// fails with an error naming the bytes; in both optimisation modes. Likewise the least host
/// staging memory (`run --host`), and it prints every capacity.
#[test]
fn plan_gives_the_exact_arena() {
    let m = models().join("convnet");
    let model = m.join("model.tflite");
    let input = m.join("input_0.bin");
    for optimise in ["cycles", "memory"] {
        let o = npu_sim(&[
            "plan",
            model.to_str().unwrap(),
            "--json",
            "--optimise",
            optimise,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let arena = json["arena_bytes"].as_u64().unwrap();
        let activations = json["activation_bytes"].as_u64().unwrap();
        let alignment = json["alignment"].as_u64().unwrap();
        assert_eq!(
            arena,
            activations + json["constant_bytes"].as_u64().unwrap()
        );
        let host = json["host_staging_min_bytes"].as_u64().unwrap();
        assert!(host <= json["host_staging_bytes"].as_u64().unwrap());
        for field in [
            "ops",
            "tensors",
            "handles",
            "chunks",
            "staging_blocks",
            "tune_entries",
        ] {
            assert!(json[field].as_u64().unwrap() > 0, "{field}: {json}");
        }
        // Striped chains run job by job: no job plan.
        assert_eq!(
            json["plan_jobs"].as_u64().unwrap() > 0,
            json["tiled_chains"].as_u64().unwrap() == 0,
            "{json}"
        );
        let run_with = |arena: u64, host: u64| {
            npu_sim(&[
                "run",
                model.to_str().unwrap(),
                "--input",
                input.to_str().unwrap(),
                "--arena",
                &arena.to_string(),
                "--host",
                &host.to_string(),
                "--optimise",
                optimise,
            ])
        };
        let run = |arena: u64| run_with(arena, host);
        let tight = run_with(arena + alignment, host - alignment);
        assert!(!tight.status.success());
        let err = String::from_utf8_lossy(&tight.stderr);
        assert!(
            err.contains(&format!("requested {host} bytes")),
            "{optimise}: {err}"
        );
        let fits = run(arena);
        assert!(
            fits.status.success(),
            "{optimise}: {}",
            String::from_utf8_lossy(&fits.stderr)
        );
        let short = run(arena - alignment);
        assert!(!short.status.success());
        let err = String::from_utf8_lossy(&short.stderr);
        assert!(
            err.contains(&format!("requested {activations} bytes")),
            "{optimise}: {err}"
        );
    }
}

#[test]
fn bench_chain_runs_the_chain_back_to_back() {
    // 100 jobs of 76 cycles: the chain takes exactly their sum, with no idle gap; the same
    // figures on one unit and on two.
    let o = npu_sim(&["bench", "chain", "--jobs", "100", "--repeat", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for units in [1, 2] {
        let row = format!("| {units} | 100 | 7600 | 7600 | 0 | ");
        assert!(stdout.contains(&row), "{row} not in\n{stdout}");
    }
    // A CPU slower than the NPU (100 cycles per execute against 76 per job) leaves gaps, and
    // the table shows them.
    let o = npu_sim(&[
        "bench",
        "chain",
        "--jobs",
        "100",
        "--host-cycles",
        "100",
        "--repeat",
        "1",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!stdout.contains("| 7600 | 7600 | 0 |"), "{stdout}");
}

#[test]
fn bench_pipeline_prints_both_modes() {
    let model = models().join("kws_dscnn/model.tflite");
    let o = npu_sim(&[
        "bench",
        "pipeline",
        model.to_str().unwrap(),
        "--frames",
        "6",
        "--cpu-cycles",
        "40000",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let busy = |mode: &str| -> f64 {
        let row = stdout
            .lines()
            .find(|l| l.starts_with("| 40000 |") && l.contains(mode))
            .unwrap_or_else(|| panic!("no {mode} row in\n{stdout}"));
        let cell = row.split('|').nth(5).unwrap().trim();
        cell.trim_end_matches('%').parse().unwrap()
    };
    assert!(busy("| pipelined |") >= 95.0, "{stdout}");
    assert!(busy("| one after another |") < 75.0, "{stdout}");
}

#[test]
fn tune_exports_a_table_that_run_uses_without_measuring() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-tune-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (table, stats, out) = (
        dir.join("table.bin"),
        dir.join("stats.json"),
        dir.join("out.bin"),
    );
    let m = models().join("kws_dscnn");
    let model = m.join("model.tflite");
    let o = npu_sim(&[
        "tune",
        model.to_str().unwrap(),
        "--export",
        table.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&table).unwrap();
    assert_eq!(&bytes[..4], b"NPUT");
    assert!(
        bytes.len() > 32 && (bytes.len() - 32) % 32 == 0,
        "{}",
        bytes.len()
    );

    let run = |table: &std::path::Path| {
        npu_sim(&[
            "run",
            model.to_str().unwrap(),
            "--input",
            m.join("input_0.bin").to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--tune-table",
            table.to_str().unwrap(),
            "--stats",
            stats.to_str().unwrap(),
        ])
    };
    let o = run(&table);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        std::fs::read(m.join("expected_tflm_0.bin")).unwrap()
    );
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(json["tuning_runs"].as_u64(), Some(0), "{json}");
    assert_eq!(json["tune_measurements"].as_u64(), Some(0), "{json}");
    assert!(json["tune_hits"].as_u64().unwrap() > 0, "{json}");
    // kws_dscnn's first convolution runs as im2col: well below the untuned 90,600 cycles.
    assert!(json["npu_cycles"].as_u64().unwrap() < 80_000, "{json}");

    let mut corrupt = bytes.clone();
    corrupt[40] ^= 0x10;
    let bad = dir.join("bad.bin");
    std::fs::write(&bad, &corrupt).unwrap();
    let o = run(&bad);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("checksum"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_models_times_litert_beside_the_runtime() {
    // A directory without figures.json: its models are its subdirectories.
    let dir = scratch("bench-models");
    let kws = dir.join("kws_dscnn");
    std::fs::create_dir_all(&kws).unwrap();
    for file in ["model.tflite", "input_0.bin", "expected_tflm_0.bin"] {
        std::fs::copy(models().join("kws_dscnn").join(file), kws.join(file)).unwrap();
    }
    let o = npu_sim(&["bench", "models", dir.to_str().unwrap(), "--repeat", "3"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let header: Vec<&str> = stdout.lines().next().unwrap().split('|').collect();
    let row: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| kws_dscnn |"))
        .unwrap()
        .split('|')
        .collect();
    let cell = |name: &str| {
        let k = header.iter().position(|h| h.trim() == name).unwrap();
        row[k].trim().to_string()
    };
    assert_eq!(cell("outputs = TFLM"), "1/1");
    let ours: f64 = cell("host µs (median)").parse().unwrap();
    let lite: f64 = cell("LiteRT µs (this run)").parse().unwrap();
    let ratio: f64 = cell("× LiteRT").parse().unwrap();
    assert!(lite > 0.0 && ours > 0.0, "{stdout}");
    assert!(
        (ratio - ours / lite).abs() <= 0.01 * ratio + 0.01,
        "{stdout}"
    );
    // kws_dscnn is one of the models LiteRT's XNNPACK gives TFLM's bytes on.
    assert_eq!(cell("LiteRT outputs = TFLM"), "1/1");
    // The peers' figures of a directory without figures.json are unknown.
    assert_eq!(cell("TFLM µs"), "NaN");
}

#[test]
fn bench_tune_meets_its_targets_on_the_product_models() {
    let o = npu_sim(&["bench", "tune", models().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    for model in ["convnet", "inception", "kws_dscnn", "tiny_transformer"] {
        assert!(stdout.contains(&format!("| {model} |")), "{stdout}");
    }
}

/// A reader that closes stdout early (`npu-sim bench memory | head -1`) ends the command
/// quietly with status 0, not with a broken-pipe panic.
#[test]
fn stdout_closed_early_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_npu-sim"))
        .args(["bench", "memory"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("Peak arena bytes"), "{first}");
    // The reader is dropped here: the command's next writes meet a closed pipe.
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {stderr}", o.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The README quotes `plan`'s output for `kws_dscnn` as it is.
#[test]
fn the_readme_quotes_plan_as_it_prints() {
    let model = models().join("kws_dscnn/model.tflite");
    let o = npu_sim(&["plan", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let quoted = format!(
        "$ cargo run --release -p npu-sim --features std -- plan examples/models/kws_dscnn/model.tflite\n{}```",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        readme.contains(&quoted),
        "README.md should quote:\n{quoted}"
    );
}

/// `trace` draws the second invoke: the same bytes every time, every lane labelled, and a
/// summary whose figures are the chart's.
#[test]
fn trace_draws_a_chart_and_summarises_it() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.svg"), dir.join("b.svg"));
    let model = models().join("kws_dscnn/model.tflite");
    let mut stdouts = Vec::new();
    for svg in [&a, &b] {
        let o = npu_sim(&[
            "trace",
            model.to_str().unwrap(),
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stdouts.push(String::from_utf8_lossy(&o.stdout).into_owned());
    }
    let svg = std::fs::read_to_string(&a).unwrap();
    assert_eq!(svg, std::fs::read_to_string(&b).unwrap(), "deterministic");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    for label in [
        ">unit 0 (u55-128)<",
        ">DMA<",
        ">CPU<",
        "arena occupancy",
        ">Conv2d<",
    ] {
        assert!(svg.contains(label), "{label} missing");
    }
    let stdout = &stdouts[0];
    assert!(
        stdout.contains("second invoke from the job plan"),
        "{stdout}"
    );
    let makespan = stdout
        .split("makespan ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap();
    assert!(makespan.parse::<u64>().unwrap() > 1000, "{stdout}");
    assert!(
        svg.contains(&format!("makespan {makespan} cycles")),
        "{stdout}"
    );
    // kws_dscnn runs wholly on the NPU: the CPU lane is empty.
    assert!(stdout.contains("CPU 0;"), "{stdout}");

    // An operator on the CPU fallback shows on the CPU lane.
    let cpu_model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/models/ops/arg_min_int8_last/model.tflite");
    let o = npu_sim(&[
        "trace",
        cpu_model.to_str().unwrap(),
        "--svg",
        a.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let cpu: u64 = stdout
        .split("CPU ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(cpu > 0, "{stdout}");
    assert!(std::fs::read_to_string(&a).unwrap().contains(" on CPU: "));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_errors_exit_1_and_usage_errors_exit_2() {
    let model = models().join("kws_dscnn/model.tflite");
    let model = model.to_str().unwrap();
    let no_svg = npu_sim(&["trace", model]);
    assert_eq!(no_svg.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_svg.stderr).contains("--svg"));
    for (args, says) in [
        (
            vec!["trace", "missing.tflite", "--svg", "x.svg"],
            "missing.tflite",
        ),
        (
            vec!["trace", model, "--svg", "/nonexistent-dir/x.svg"],
            "/nonexistent-dir/x.svg",
        ),
        (
            vec!["trace", model, "--svg", "x.svg", "--arena", "1000"],
            "arena",
        ),
    ] {
        let o = npu_sim(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.starts_with("npu-sim: error: ") && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
}

/// `run --units SPEC`: the stats name the units (normalised) and give each unit's busy cycles
/// and the CPU's; the default is one U55-128, exactly as without the option.
#[test]
fn run_takes_the_units_and_reports_their_busy_cycles() {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = models().join("kws_dscnn");
    let run = |units: Option<&str>, name: &str| -> serde_json::Value {
        let (out, stats) = (
            dir.join(format!("{name}.bin")),
            dir.join(format!("{name}.json")),
        );
        let mut args = vec![
            "run".to_string(),
            m.join("model.tflite").to_str().unwrap().into(),
            "--input".into(),
            m.join("input_0.bin").to_str().unwrap().into(),
            "--output".into(),
            out.to_str().unwrap().into(),
            "--stats".into(),
            stats.to_str().unwrap().into(),
        ];
        if let Some(spec) = units {
            args.extend(["--units".to_string(), spec.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = npu_sim(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(m.join("expected_tflm_0.bin")).unwrap(),
            "{units:?}"
        );
        serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap()
    };
    let default = run(None, "default");
    let one = run(Some("u55-128"), "one");
    assert_eq!(default["units"], "u55-128");
    let without_time = |mut j: serde_json::Value| {
        j["host_us"] = 0.into();
        j
    };
    assert_eq!(without_time(default.clone()), without_time(one));
    let busy = |j: &serde_json::Value| -> Vec<u64> {
        j["unit_busy_cycles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect()
    };
    let cycles = default["npu_cycles"].as_u64().unwrap();
    let [unit0] = busy(&default)[..] else {
        panic!("one unit: {default}")
    };
    assert!(unit0 > cycles / 2 && unit0 <= cycles, "{default}");
    assert_eq!(default["cpu_busy_cycles"], 0);
    assert_eq!(default["cpu_ops"], 0);
    // Every field of before is still there.
    for key in [
        "arena_peak_bytes",
        "npu_cycles",
        "jobs",
        "transfers",
        "tune_fallbacks",
    ] {
        assert!(default[key].is_number(), "{key} missing in {default}");
    }

    let mixed = run(Some(" U55-256 ,u55-128"), "mixed");
    assert_eq!(mixed["units"], "u55-256,u55-128");
    let per_unit = busy(&mixed);
    assert_eq!(per_unit.len(), 2);
    assert!(per_unit.iter().all(|&b| b > 0), "{mixed}");
    // The U55-256 does its share in fewer cycles than the U55-128 would.
    assert!(mixed["npu_cycles"].as_u64().unwrap() < cycles, "{mixed}");

    // A CPU-fallback operator (GATHER) is charged to the CPU.
    let case =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/models/ops/gather_int8_embedding");
    let stats = dir.join("gather.json");
    let o = npu_sim(&[
        "run",
        case.join("model.tflite").to_str().unwrap(),
        "--input",
        case.join("input_0_0.bin").to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
        "--units",
        "u55-128,u55-128",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gather: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert!(gather["cpu_ops"].as_u64().unwrap() > 0, "{gather}");
    assert!(gather["cpu_busy_cycles"].as_u64().unwrap() > 0, "{gather}");
    assert_eq!(busy(&gather).len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `--units` spec naming no known unit, or too many, is a usage error (status 2) that names
/// the bad item and the accepted names, before anything runs.
#[test]
fn a_bad_units_spec_is_a_usage_error() {
    let m = models().join("kws_dscnn");
    let nine = ["u55-128"; 9].join(",");
    for (spec, says) in [
        ("u55-128,u65-512", "`u65-512`"),
        ("", "``"),
        (nine.as_str(), "at most 8"),
    ] {
        let o = npu_sim(&[
            "run",
            m.join("model.tflite").to_str().unwrap(),
            "--input",
            m.join("input_0.bin").to_str().unwrap(),
            "--units",
            spec,
        ]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("--units") && err.contains(says), "{err}");
        if !spec.is_empty() && spec != nine {
            assert!(err.contains("u55-128, u55-256"), "{err}");
        }
        assert!(o.stdout.is_empty());
    }
    // `plan` and `tune` take it too.
    let model = m.join("model.tflite");
    let model = model.to_str().unwrap();
    let o = npu_sim(&["plan", model, "--units", "npu"]);
    assert_eq!(o.status.code(), Some(2));
    let o = npu_sim(&["tune", model, "--export", "/dev/null", "--units", "u55-64"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`u55-64`"));
}

/// A scratch directory of this test process, emptied.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("npu-sim-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts `o` exited with `code`, its stderr saying each of `says`, and no panic.
fn assert_exit(o: &std::process::Output, code: i32, says: &[&str], what: &str) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    for s in says {
        assert!(stderr.contains(s), "{what}: no `{s}` in {stderr}");
    }
    if code == 1 {
        assert!(stderr.starts_with("npu-sim: error: "), "{what}: {stderr}");
    }
}

/// `--arena` and `--host` beyond what the simulator addresses (4294967295 bytes) are refused
/// where they are parsed, naming the option, the value and the limit: no "capacity overflow"
/// panic (status 101), no failed allocation (134), no simulator error without the limit.
#[test]
fn memory_sizes_the_simulator_cannot_address_are_usage_errors() {
    let m = models().join("kws_dscnn");
    let (model, input) = (m.join("model.tflite"), m.join("input_0.bin"));
    let (model, input) = (model.to_str().unwrap(), input.to_str().unwrap());
    for (option, value) in [
        ("--arena", "4294967296"),
        ("--arena", "17179869184"),
        ("--arena", "18446744073709551615"),
        ("--arena", "99999999999999999999999"),
        ("--host", "4294967296"),
    ] {
        let o = npu_sim(&["run", model, "--input", input, option, value]);
        assert_exit(&o, 2, &[option, value, "at most 4294967295"], value);
        assert!(o.stdout.is_empty());
    }
    let svg = scratch("arena-svg").join("x.svg");
    for args in [
        vec![
            "tune",
            model,
            "--export",
            "/dev/null",
            "--arena",
            "4294967296",
        ],
        vec![
            "trace",
            model,
            "--svg",
            svg.to_str().unwrap(),
            "--arena",
            "8589934592",
        ],
    ] {
        assert_exit(
            &npu_sim(&args),
            2,
            &["--arena", "at most 4294967295"],
            args[0],
        );
    }
    assert!(!svg.exists());
    // Not a number of bytes.
    let o = npu_sim(&["run", model, "--input", input, "--arena", "1M"]);
    assert_exit(&o, 2, &["--arena", "`1M` is not a number of bytes"], "1M");
    // The limit itself is addressable (a size rounded up to 16-byte words past it was not).
    let o = npu_sim(&["run", model, "--input", input, "--arena", "4294967295"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A count of 0 would measure nothing (`--repeat 0` reported a median of no times, 0 µs):
/// refused as a usage error for every count, as are fewer than 3 frames.
#[test]
fn counts_that_measure_nothing_are_usage_errors() {
    let m = models().join("kws_dscnn");
    let model = m.join("model.tflite");
    let model = model.to_str().unwrap();
    let input = m.join("input_0.bin");
    let dir = models();
    let dir = dir.to_str().unwrap();
    for (args, option) in [
        (
            vec![
                "run",
                model,
                "--input",
                input.to_str().unwrap(),
                "--repeat",
                "0",
            ],
            "--repeat",
        ),
        (vec!["bench", "models", dir, "--repeat", "0"], "--repeat"),
        (vec!["bench", "chain", "--repeat", "0"], "--repeat"),
        (vec!["bench", "chain", "--jobs", "0"], "--jobs"),
        (vec!["bench", "dispatch", "--batches", "0"], "--batches"),
        (vec!["bench", "dispatch", "--per-batch", "0"], "--per-batch"),
        (vec!["bench", "memory", "--inferences", "0"], "--inferences"),
        (
            vec!["bench", "pipeline", model, "--frames", "2"],
            "--frames",
        ),
    ] {
        let o = npu_sim(&args);
        assert_exit(&o, 2, &[option, "at least"], &args.join(" "));
        assert!(o.stdout.is_empty(), "{args:?}");
    }
    let o = npu_sim(&["bench", "chain", "--jobs", "-3"]);
    assert_eq!(o.status.code(), Some(2));
}

/// One `--input` per model input: a wrong number is reported as a count (it was reported as
/// a size, `input 2: expected 1 bytes, got 2`), by every command that takes inputs.
#[test]
fn a_wrong_number_of_inputs_is_a_count() {
    let m = models().join("kws_dscnn");
    let (model, input) = (m.join("model.tflite"), m.join("input_0.bin"));
    let (model, input) = (model.to_str().unwrap(), input.to_str().unwrap());
    let svg = scratch("count-svg").join("x.svg");
    let table = svg.with_file_name("t.bin");
    for args in [
        vec!["run", model, "--input", input, "--input", input],
        vec![
            "tune",
            model,
            "--export",
            table.to_str().unwrap(),
            "--input",
            input,
            "--input",
            input,
        ],
        vec![
            "trace",
            model,
            "--svg",
            svg.to_str().unwrap(),
            "--input",
            input,
            "--input",
            input,
        ],
    ] {
        let o = npu_sim(&args);
        assert_exit(
            &o,
            1,
            &[
                "the model has 1 input, 2 --input files were given",
                "input 0: 490 bytes",
            ],
            args[0],
        );
        assert!(!String::from_utf8_lossy(&o.stderr).contains("expected 1 bytes"));
    }
    assert!(!svg.exists() && !table.exists());
    // An input of the wrong size names the file and the size the model takes.
    let short = svg.with_file_name("short.bin");
    std::fs::write(&short, [0u8; 100]).unwrap();
    let o = npu_sim(&["run", model, "--input", short.to_str().unwrap()]);
    assert_exit(
        &o,
        1,
        &["short.bin: 100 bytes", "model input 0 has 490"],
        "short",
    );
}

/// `tune` in an arena with room for the model but not for measuring every layer beside it
/// (a scratch output, a variant's scratch) tuned nothing, wrote an empty table and exited 0.
/// It fails, writes nothing, and gives the arena that tunes fully; that arena works.
#[test]
fn tune_refuses_an_arena_too_small_to_measure_in() {
    let dir = scratch("tune-arena");
    let table = dir.join("t.bin");
    let model = models().join("kws_dscnn/model.tflite");
    let model = model.to_str().unwrap();
    // kws_dscnn's planned arena: room to run it, none to measure.
    let o = npu_sim(&[
        "tune",
        model,
        "--export",
        table.to_str().unwrap(),
        "--arena",
        "20704",
    ]);
    assert_exit(
        &o,
        1,
        &[
            "--arena 20704 is too small to tune",
            "tunes fully in an arena of",
        ],
        "tune",
    );
    assert!(!table.exists(), "nothing is written");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let needed: String = stderr
        .split("tunes fully in an arena of ")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let o = npu_sim(&[
        "tune",
        model,
        "--export",
        table.to_str().unwrap(),
        "--arena",
        &needed,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("6 layer shapes tuned"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A benchmark over a directory with no model printed empty tables and passed.
#[test]
fn benchmarks_of_a_directory_with_no_model_fail() {
    let dir = scratch("no-models");
    let empty = dir.to_str().unwrap();
    for which in ["tune", "schedule", "models"] {
        let o = npu_sim(&["bench", which, empty]);
        let says = if which == "models" {
            "figures.json"
        } else {
            "no models"
        };
        assert_exit(&o, 1, &[says], which);
    }
    std::fs::write(dir.join("figures.json"), "[]").unwrap();
    for which in ["tune", "schedule", "models"] {
        assert_exit(&npu_sim(&["bench", which, empty]), 1, &["no models"], which);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The exit statuses `--help` documents: 0 success, 1 a failed command, 2 a wrong command
/// line; one of each class.
#[test]
fn exit_statuses_are_documented_and_kept() {
    let help = npu_sim(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let text = String::from_utf8_lossy(&help.stdout);
    for line in [
        "Exit status:",
        "0  the command succeeded",
        "1  the command failed",
        "2  the command line is wrong",
    ] {
        assert!(text.contains(line), "{text}");
    }
    assert_eq!(npu_sim(&["--version"]).status.code(), Some(0));
    assert_eq!(npu_sim(&["help", "run"]).status.code(), Some(0));
    assert_exit(
        &npu_sim(&["inspect", "missing.tflite"]),
        1,
        &["missing.tflite"],
        "missing",
    );
    let model = models().join("kws_dscnn/model.tflite");
    let model = model.to_str().unwrap();
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["run"],
        vec!["run", model],
        vec!["run", model, "--input"],
        vec!["run", model, "--input", "x.bin", "--frob"],
        vec!["run", model, "--input", "x.bin", "--units", "junk"],
        vec!["run", model, "--input", "x.bin", "--optimise", "speed"],
        vec!["bench"],
    ] {
        let o = npu_sim(&args);
        assert_exit(&o, 2, &[], &args.join(" "));
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// What a new user tries by mistake: a missing file, a directory as the model, a truncated or
/// empty or foreign file as the model, an input of the wrong size, an output into a missing
/// directory. Each is one clear line on stderr and status 1, never a panic.
#[test]
fn a_new_users_mistakes_are_clear_errors() {
    let dir = scratch("mistakes");
    let m = models().join("kws_dscnn");
    let model = std::fs::read(m.join("model.tflite")).unwrap();
    let input = m.join("input_0.bin");
    let input = input.to_str().unwrap();
    let truncated = dir.join("truncated.tflite");
    std::fs::write(&truncated, &model[..model.len() / 2]).unwrap();
    let empty = dir.join("empty.tflite");
    std::fs::write(&empty, []).unwrap();
    let (truncated, empty) = (truncated.to_str().unwrap(), empty.to_str().unwrap());
    let model_dir = m.to_str().unwrap();
    let model_path = m.join("model.tflite");
    let model_path = model_path.to_str().unwrap();
    let out = dir.join("missing/out.bin");
    for (args, says) in [
        (
            vec!["run", "missing.tflite", "--input", input],
            "missing.tflite",
        ),
        (vec!["run", model_dir, "--input", input], model_dir),
        (vec!["run", truncated, "--input", input], "is it truncated?"),
        (vec!["inspect", truncated], "is it truncated?"),
        (vec!["plan", truncated], "is it truncated?"),
        (vec!["inspect", empty], "0-byte file"),
        (vec!["inspect", input], "not a TensorFlow Lite model"),
        (
            vec!["run", model_path, "--input", "missing.bin"],
            "missing.bin",
        ),
        (vec!["run", model_path, "--input", model_dir], model_dir),
        (
            vec!["run", model_path, "--input", model_path],
            "model input 0 has 490",
        ),
        (
            vec![
                "run",
                model_path,
                "--input",
                input,
                "--output",
                out.to_str().unwrap(),
            ],
            "missing/out.bin",
        ),
    ] {
        let o = npu_sim(&args);
        assert_exit(&o, 1, &[says], &args.join(" "));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    }
    // Two outputs named for a model with one: refused, neither written.
    let (a, b) = (dir.join("a.bin"), dir.join("b.bin"));
    let o = npu_sim(&[
        "run",
        model_path,
        "--input",
        input,
        "--output",
        a.to_str().unwrap(),
        "--output",
        b.to_str().unwrap(),
    ]);
    assert_exit(
        &o,
        1,
        &["the model has 1 output, 2 --output files were given"],
        "outputs",
    );
    assert!(!a.exists() && !b.exists());
    // A device that never ends is read no further than the input tensor's size.
    if std::path::Path::new("/dev/zero").exists() {
        let o = npu_sim(&["run", model_path, "--input", "/dev/zero"]);
        assert_exit(&o, 1, &["/dev/zero: more than 490 bytes"], "/dev/zero");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// So many preprocessing or host cycles that the virtual clock saturates gave figures of a
/// stopped clock (NPU busy 0%) with status 0: now a failure saying why.
#[test]
fn cycles_that_saturate_the_clock_fail() {
    let model = models().join("kws_dscnn/model.tflite");
    let max = u64::MAX.to_string();
    for args in [
        vec![
            "bench",
            "pipeline",
            model.to_str().unwrap(),
            "--frames",
            "3",
            "--cpu-cycles",
            &max,
        ],
        vec![
            "bench",
            "chain",
            "--jobs",
            "3",
            "--repeat",
            "1",
            "--host-cycles",
            &max,
        ],
    ] {
        let o = npu_sim(&args);
        assert_exit(&o, 1, &["the virtual clock reached its end"], args[1]);
    }
}

#[test]
fn compile_writes_an_image_the_device_side_accepts() {
    let m = models().join("kws_dscnn");
    let dir = scratch("compile");
    let image = dir.join("kws.npuc");
    let o = npu_sim(&[
        "compile",
        m.join("model.tflite").to_str().unwrap(),
        "--output",
        image.to_str().unwrap(),
        "--json",
    ]);
    assert_exit(&o, 0, &[], "compile --json");
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bytes = std::fs::read(&image).unwrap();
    assert_eq!(json["image_bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(json["steps"].as_u64(), Some(12));
    assert_eq!(json["inputs"], serde_json::json!([490]));
    assert_eq!(json["outputs"], serde_json::json!([12]));
    let aligned = npu_sim::runner::leak_aligned(&bytes);
    let model = npu_compute::compiled::CompiledModel::new(aligned).unwrap();
    assert_eq!(
        json["arena_bytes"].as_u64(),
        Some(u64::from(model.arena_bytes()))
    );
    // The text form says the same figures.
    let o = npu_sim(&[
        "compile",
        m.join("model.tflite").to_str().unwrap(),
        "--output",
        image.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("{} bytes (12 steps)", bytes.len())),
        "{text}"
    );
    // An unreadable model fails with its name, writing nothing.
    let (missing, nothing) = (dir.join("missing.tflite"), dir.join("nothing.npuc"));
    let o = npu_sim(&[
        "compile",
        missing.to_str().unwrap(),
        "--output",
        nothing.to_str().unwrap(),
    ]);
    assert_exit(&o, 1, &["missing.tflite"], "compile of a missing model");
    assert!(!nothing.exists());
    // No --output: a usage error.
    let o = npu_sim(&["compile", m.join("model.tflite").to_str().unwrap()]);
    assert_exit(&o, 2, &["--output"], "compile without --output");
}
