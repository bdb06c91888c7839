//! Every operator, byte for byte what TensorFlow Lite Micro gives: the single-operator models
//! of `tests/models/ops/` (made by `tools/opmodels/make.py` with TensorFlow's converter, with
//! TFLM's outputs made by the same script), each run over its sequence of inputs on one
//! prepared graph, once with the simulated Ethos-U55 running what it runs and once with every
//! operator on the CPU fallback.

use std::path::{Path, PathBuf};

use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, Optimise};
use npu_compute::ops::OpSet;
use npu_sim::{runner, SimConfig};

const DEVICE: usize = 1 << 20;
const HOST: usize = 256 * 1024;

/// The case folders, sorted.
fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models/ops");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").exists())
        .collect();
    dirs.sort();
    dirs
}

/// `case.json`'s counts: (runs, inputs, outputs).
fn counts(dir: &Path) -> (usize, usize, usize) {
    let text = std::fs::read_to_string(dir.join("case.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    let n = |k: &str| meta[k].as_u64().unwrap_or_else(|| panic!("case.json: {k}")) as usize;
    (n("runs"), n("inputs"), n("outputs"))
}

fn read(dir: &Path, name: String) -> Vec<u8> {
    std::fs::read(dir.join(&name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

/// Runs the case in `dir` on `config`'s NPU: every run in order on one graph.
fn check(dir: &Path, config: SimConfig, what: &str) {
    let model = runner::leak_aligned(&read(dir, "model.tflite".into()));
    let (runs, n_in, n_out) = counts(dir);
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let mut graph: runner::SimGraph = Graph::prepare_with(client, model, Optimise::Cycles)
        .unwrap_or_else(|e| panic!("{name} ({what}): prepare: {e}"));
    for run in 0..runs {
        let inputs: Vec<Vec<u8>> = (0..n_in)
            .map(|i| read(dir, format!("input_{run}_{i}.bin")))
            .collect();
        let expected: Vec<Vec<u8>> = (0..n_out)
            .map(|o| read(dir, format!("expected_{run}_{o}.bin")))
            .collect();
        let mut outputs: Vec<Vec<u8>> = expected.iter().map(|e| vec![0xa5; e.len()]).collect();
        let ins: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(Vec::as_mut_slice).collect();
        graph
            .invoke(&ins, &mut outs)
            .unwrap_or_else(|e| panic!("{name} ({what}) run {run}: {e}"));
        for (o, (got, want)) in outputs.iter().zip(&expected).enumerate() {
            assert!(
                got == want,
                "{name} ({what}) run {run} output {o}: differs from TFLM at byte {:?}",
                got.iter().zip(want).position(|(a, b)| a != b)
            );
        }
    }
}

#[test]
fn every_operator_case_matches_tflm_on_the_npu() {
    let dirs = cases();
    assert!(!dirs.is_empty(), "no cases in tests/models/ops");
    for dir in dirs {
        check(&dir, SimConfig::default(), "NPU");
    }
}

#[test]
fn every_operator_case_matches_tflm_on_the_cpu_fallback() {
    for dir in cases() {
        let config = SimConfig {
            ops: OpSet::EMPTY,
            ..SimConfig::default()
        };
        check(&dir, config, "CPU");
    }
}
