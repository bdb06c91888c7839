//! Stateful models: variable tensors kept from one invoke to the next, and
//! [`Graph::reset_state`] putting them back to TFLM's initial value. Runs the SVDF and LSTM
//! cases of `tests/models/ops/` (made by `tools/opmodels/make.py`, TFLM's outputs for a sequence of
//! inputs on one interpreter).

use std::path::{Path, PathBuf};

use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, Optimise};
use npu_compute::ops::OpSet;
use npu_sim::{runner, SimConfig};

const DEVICE: usize = 1 << 20;
const HOST: usize = 256 * 1024;

fn case(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/ops")
        .join(name)
}

fn read(dir: &Path, name: String) -> Vec<u8> {
    std::fs::read(dir.join(&name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

fn runs(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("case.json")).unwrap();
    let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
    meta["runs"].as_u64().unwrap() as usize
}

/// Invokes run `run` of the one-input, one-output case in `dir` and checks TFLM's output.
fn invoke(graph: &mut runner::SimGraph, dir: &Path, run: usize, what: &str) {
    let input = read(dir, format!("input_{run}_0.bin"));
    let expected = read(dir, format!("expected_{run}_0.bin"));
    let mut out = vec![0xa5; expected.len()];
    graph
        .invoke(&[&input], &mut [&mut out])
        .unwrap_or_else(|e| panic!("{what} run {run}: {e}"));
    assert_eq!(out, expected, "{what} run {run}");
}

/// Runs `f` on a prepared graph of the case `name`, with the NPU set `ops`.
fn with_graph(name: &str, ops: OpSet, optimise: Optimise, f: impl FnOnce(&mut runner::SimGraph)) {
    let dir = case(name);
    let model = runner::leak_aligned(&read(&dir, "model.tflite".into()));
    let mut device = vec![0u128; DEVICE / 16];
    let mut host = vec![0u128; HOST / 16];
    let config = SimConfig {
        ops,
        ..SimConfig::default()
    };
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: runner::SimGraph = Graph::prepare_with(client, model, optimise).unwrap();
    f(&mut graph);
}

const CASES: [&str; 11] = [
    "lstm_int8_seq",
    "lstm_int8_cell_clip",
    "lstm_int16_seq",
    "lstm_int16_batch2",
    "lstm_int8_batch2",
    "lstm_int8_time_major",
    "svdf_int8_between_ops",
    "svdf_int8_rank1",
    "svdf_int8_rank2",
    "svdf_int8_state16",
    "svdf_int8_saturate",
];

#[test]
fn after_a_reset_the_sequence_starts_again() {
    for name in CASES {
        let dir = case(name);
        let n = runs(&dir);
        with_graph(name, SimConfig::default().ops, Optimise::Cycles, |graph| {
            for run in 0..n {
                invoke(graph, &dir, run, name);
            }
            graph.reset_state().unwrap();
            for run in 0..n {
                invoke(graph, &dir, run, name);
            }
        });
    }
}

#[test]
fn a_reset_mid_sequence_restarts_it() {
    let name = "svdf_int8_rank2";
    let dir = case(name);
    with_graph(name, OpSet::EMPTY, Optimise::Memory, |graph| {
        for run in 0..3 {
            invoke(graph, &dir, run, name);
        }
        graph.reset_state().unwrap();
        // A second reset in a row changes nothing.
        graph.reset_state().unwrap();
        for run in 0..runs(&dir) {
            invoke(graph, &dir, run, name);
        }
    });
}

#[test]
fn an_lstm_reset_mid_sequence_restarts_it() {
    // Both states (the int8 hidden state and the int16 cell state) go back to their initial
    // values: the hidden state's zero point and zeros.
    let name = "lstm_int8_batch2";
    let dir = case(name);
    with_graph(name, OpSet::EMPTY, Optimise::Cycles, |graph| {
        for run in 0..2 {
            invoke(graph, &dir, run, name);
        }
        graph.reset_state().unwrap();
        for run in 0..runs(&dir) {
            invoke(graph, &dir, run, name);
        }
    });
}

#[test]
fn the_state_survives_switching_replay_off_and_on() {
    let name = "svdf_int8_rank1";
    let dir = case(name);
    with_graph(name, SimConfig::default().ops, Optimise::Cycles, |graph| {
        for run in 0..runs(&dir) {
            graph.set_replay(run % 2 == 0);
            invoke(graph, &dir, run, name);
        }
    });
}

#[test]
fn the_state_has_its_own_arena_block() {
    // SVDF's state (batches · filters · memory bytes) lives through every step: the pool
    // holds it besides the input and the output, whatever the plan optimises.
    with_graph("svdf_int8_rank2", OpSet::EMPTY, Optimise::Memory, |graph| {
        let arena = graph.arena();
        // Input 2·6, output 2·4, state 2·8·4 bytes, each aligned.
        assert!(arena.activation_bytes >= 64 + 12 + 8, "{arena:?}");
        assert!(arena.lower_bound_bytes >= 64 + 12 + 8, "{arena:?}");
    });
}
