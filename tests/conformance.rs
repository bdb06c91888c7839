//! Conformance: every shared model, every input, byte for byte what TensorFlow Lite Micro gives.
//!
//! The models made for this product live in `examples/models/` and run in `cargo test`. The
//! MLPerf Tiny models are never committed: the `--ignored` tests read them from
//! `../shared/models` (`.ci/run` runs those, and they fail if the files are missing).

use std::path::{Path, PathBuf};

use npu_compute::channel::ComputeChannel;
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, IoBuffers, Optimise};
use npu_compute::hal::Npu;
use npu_compute::server::ServerStats;
use npu_sim::{runner, SimConfig};

const DEVICE: usize = 512 * 1024;
const HOST: usize = 256 * 1024;

/// Runs every input of the model in `dir` and compares with `expected_tflm_K.bin`, with the
/// arena planned for the fewest cycles and for the smallest arena (layers in stripes).
fn check_model(dir: &Path, config: SimConfig) {
    for optimise in [Optimise::Cycles, Optimise::Memory] {
        check_model_with(dir, config, optimise);
    }
    check_pipelined(dir, config);
    check_planned(dir, config);
}

/// The model's inputs and TFLM's outputs, `(input_K.bin, expected_tflm_K.bin)` for each K.
fn cases(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..)
        .map(|k| {
            (
                dir.join(format!("input_{k}.bin")),
                dir.join(format!("expected_tflm_{k}.bin")),
            )
        })
        .take_while(|(input, _)| input.exists())
        .map(|(i, e)| (std::fs::read(i).unwrap(), std::fs::read(e).unwrap()))
        .collect()
}

/// Counters of one invoke: (uploads, downloads, device copies, staging copy bytes).
fn moved(before: ServerStats, after: ServerStats) -> (u32, u32, u32, u64) {
    (
        after.uploads - before.uploads,
        after.downloads - before.downloads,
        after.device_copies - before.device_copies,
        after.staging_copy_bytes - before.staging_copy_bytes,
    )
}

/// Pipelined frames over two sets of pinned buffers: each frame's input is written into its
/// set and `submit` queues the invoke, then the previous frame's output is read and checked;
/// every steady-state frame moves exactly one upload and one download, with no staging copy.
fn pipelined_frames<'c, C: ComputeChannel>(
    dir: &Path,
    what: &str,
    client: ComputeClient<'c, C>,
    sets: &[IoBuffers<'c, C>; 2],
    mut submit: impl FnMut(&IoBuffers<'c, C>),
) {
    let cases = cases(dir);
    let frames = 2 * cases.len() + 1;
    for frame in 0..=frames {
        let before = client.stats().unwrap();
        if frame < frames {
            let io = &sets[frame % 2];
            let (input, _) = &cases[frame % cases.len()];
            client
                .host_mut(io.input(0).unwrap(), |b| b.copy_from_slice(input))
                .unwrap();
            submit(io);
        }
        if frame > 0 {
            let (_, expected) = &cases[(frame - 1) % cases.len()];
            let prev = sets[(frame - 1) % 2].output(0).unwrap();
            let out = client.host_ref(prev, |b| b.to_vec()).unwrap();
            let at = frame - 1;
            assert_eq!(&out, expected, "{} {what} frame {at}", dir.display());
        }
        if (1..frames).contains(&frame) {
            let steady = moved(before, client.stats().unwrap());
            assert_eq!(
                steady,
                (1, 1, 0, 0),
                "{} {what} frame {frame}",
                dir.display()
            );
        }
    }
}

/// Pipelined invokes over two sets of pinned buffers, each input submitted while the
/// previous one runs: the same bytes as TFLM, and a steady-state invoke moves exactly its
/// input and its output across the bus, with no staging copy. A plain `invoke` moves the same
/// two transfers (through staging).
fn check_pipelined(dir: &Path, config: SimConfig) {
    let model = runner::leak_aligned(&std::fs::read(dir.join("model.tflite")).unwrap());
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: runner::SimGraph = Graph::prepare(client, model).unwrap();
    let cases = cases(dir);
    let sets = [graph.io_buffers().unwrap(), graph.io_buffers().unwrap()];
    pipelined_frames(dir, "pipelined", client, &sets, |io| {
        graph.submit(io).unwrap()
    });
    let (input, expected) = &cases[0];
    let mut out = vec![0u8; expected.len()];
    let before = client.stats().unwrap();
    graph.invoke(&[input], &mut [&mut out]).unwrap();
    let bytes = (input.len() + out.len()) as u64;
    assert_eq!(moved(before, client.stats().unwrap()), (1, 1, 0, bytes));
}

/// The model through its job plan: TFLM's bytes, invoke after invoke; the same NPU cycles
/// and the same transfers as job by job (the same jobs and dependencies); and pipelined
/// through pinned buffers, the same bytes with only the input and output crossing the bus.
fn check_planned(dir: &Path, config: SimConfig) {
    let model = runner::leak_aligned(&std::fs::read(dir.join("model.tflite")).unwrap());
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let now = || channel.with(|s| s.npu().now()).unwrap();
    let mut graph: runner::SimGraph = Graph::prepare(client, model).unwrap();
    let cases = cases(dir);
    let (input, expected) = &cases[0];
    let mut out = vec![0u8; expected.len()];
    {
        let mut timed = |graph: &mut runner::SimGraph, what: &str| {
            client.sync().unwrap();
            let (t0, before) = (now(), client.stats().unwrap());
            graph.invoke(&[input], &mut [&mut out]).unwrap();
            assert_eq!(&out, expected, "{} {what}", dir.display());
            let after = client.stats().unwrap();
            (
                now() - t0,
                after.compute_jobs - before.compute_jobs,
                moved(before, after),
            )
        };
        // Job by job first. The first invoke is slower (the simulator's weight prefetch
        // starts cold): warm up.
        graph.set_replay(false);
        timed(&mut graph, "job by job");
        let plain = timed(&mut graph, "job by job");
        assert_eq!(graph.job_plan(), None);
        graph.set_replay(true);
        for _ in 0..2 {
            assert_eq!(timed(&mut graph, "planned"), plain, "{}", dir.display());
        }
        let plan = graph.job_plan().expect("a job plan holds the model");
        assert_eq!(plain.1 as usize, plan.jobs);
        // A run's bookkeeping visits the input and the output only.
        assert_eq!(plan.shared_tensors, 2, "{}", dir.display());
    }
    for round in 0..2 {
        for (k, (input, expected)) in cases.iter().enumerate() {
            let mut out = vec![0u8; expected.len()];
            graph.invoke(&[input], &mut [&mut out]).unwrap();
            assert_eq!(
                &out,
                expected,
                "{} planned, round {round}, input {k}",
                dir.display()
            );
        }
    }
    assert!(graph.job_plan().is_some());
    let sets = [graph.io_buffers().unwrap(), graph.io_buffers().unwrap()];
    pipelined_frames(dir, "planned", client, &sets, |io| {
        graph.submit(io).unwrap()
    });
}

fn check_model_with(dir: &Path, config: SimConfig, optimise: Optimise) {
    let model = runner::leak_aligned(&std::fs::read(dir.join("model.tflite")).unwrap());
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: runner::SimGraph = Graph::prepare_with(client, model, optimise)
        .unwrap_or_else(|e| panic!("{} {optimise:?}: prepare: {e}", dir.display()));
    let mut checked = 0;
    for k in 0.. {
        let input = dir.join(format!("input_{k}.bin"));
        if !input.exists() {
            break;
        }
        let input = std::fs::read(input).unwrap();
        let expected = std::fs::read(dir.join(format!("expected_tflm_{k}.bin"))).unwrap();
        let mut out = vec![0u8; expected.len()];
        graph
            .invoke(&[&input], &mut [&mut out])
            .unwrap_or_else(|e| panic!("{} {optimise:?} input {k}: {e}", dir.display()));
        assert_eq!(out, expected, "{} {optimise:?} input {k}", dir.display());
        checked += 1;
    }
    assert!(checked >= 1, "{}: no inputs", dir.display());
}

fn product(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/models")
        .join(name)
}

/// Vela's cycles for the whole model: the `op_cycles` of every row of `vela_per_layer.csv`.
fn vela_total(dir: &Path) -> u64 {
    let csv = std::fs::read_to_string(dir.join("vela_per_layer.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "op_cycles").unwrap();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').nth(col).unwrap().parse::<u64>().unwrap())
        .sum()
}

/// The simulator's default configuration is calibrated on Vela's Ethos-U55-128 estimates: a
/// whole invoke (input upload and output download included) lands within ±25% of Vela's total.
/// Cycles are virtual and deterministic, so this is a check of the model, not a timing.
fn check_cycles(dir: &Path) {
    let model = runner::leak_aligned(&std::fs::read(dir.join("model.tflite")).unwrap());
    let input = std::fs::read(dir.join("input_0.bin")).unwrap();
    let report = runner::run(model, &[&input], &runner::RunOptions::default()).unwrap();
    let vela = vela_total(dir);
    let ratio = report.npu_cycles as f64 / vela as f64;
    assert!(
        (0.75..=1.25).contains(&ratio),
        "{}: {} NPU cycles, Vela {vela} (ratio {ratio:.2})",
        dir.display(),
        report.npu_cycles
    );
}

#[test]
fn simulated_cycles_are_within_a_quarter_of_vela() {
    for name in ["kws_dscnn", "convnet", "inception", "tiny_transformer"] {
        check_cycles(&product(name));
    }
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_simulated_cycles_are_within_a_quarter_of_vela() {
    for name in [
        "mlperf_kws",
        "mlperf_vww",
        "mlperf_ic",
        "mlperf_ad",
        "mlperf_ww",
    ] {
        check_cycles(&shared(name));
    }
}

#[test]
fn kws_dscnn() {
    check_model(&product("kws_dscnn"), SimConfig::default());
}

#[test]
fn convnet() {
    check_model(&product("convnet"), SimConfig::default());
}

#[test]
fn inception() {
    check_model(&product("inception"), SimConfig::default());
}

#[test]
fn tiny_transformer() {
    check_model(&product("tiny_transformer"), SimConfig::default());
}

fn shared(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models")
        .join(name);
    assert!(
        dir.join("model.tflite").is_file(),
        "{} is missing: the MLPerf models are read from ../shared/models",
        dir.display()
    );
    dir
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_kws() {
    check_model(&shared("mlperf_kws"), SimConfig::default());
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_vww() {
    check_model(&shared("mlperf_vww"), SimConfig::default());
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_ic() {
    check_model(&shared("mlperf_ic"), SimConfig::default());
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_ad() {
    check_model(&shared("mlperf_ad"), SimConfig::default());
}

#[test]
#[ignore = "reads the MLPerf models from ../shared (run by .ci/run)"]
fn mlperf_ww() {
    check_model(&shared("mlperf_ww"), SimConfig::default());
}
