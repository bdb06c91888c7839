//! Data movement operators beyond TFLM's bytes: what the single-operator models of
//! `tests/models/ops/` cannot show.

use std::path::Path;

use npu_compute::client::ComputeClient;
use npu_compute::graph::Graph;
use npu_compute::ops::OpSet;
use npu_sim::{runner, SimConfig};

fn model(case: &str) -> &'static [u8] {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/models/ops")
        .join(case)
        .join("model.tflite");
    runner::leak_aligned(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
}

/// A GATHER index outside the table (a model input: only known when the model runs) is the
/// invoke's error, on the NPU's configuration and on the CPU fallback; the indices in range
/// still run afterwards.
#[test]
fn gather_index_out_of_range_is_an_error_not_a_read() {
    for ops in [SimConfig::default().ops, OpSet::EMPTY] {
        let config = SimConfig {
            ops,
            ..SimConfig::default()
        };
        let mut device = vec![0u128; (1 << 20) / 16];
        let mut host = vec![0u128; (64 << 10) / 16];
        let channel = runner::channel(&mut device, &mut host, config).unwrap();
        let client = ComputeClient::new(&channel);
        // A [10, 6] table gathered by [2, 3] int32 indices.
        let mut graph: runner::SimGraph =
            Graph::prepare(client, model("gather_int8_embedding")).expect("prepare");
        let indices = |v: [i32; 6]| v.iter().flat_map(|i| i.to_le_bytes()).collect::<Vec<u8>>();
        let mut out = [0u8; 36];
        for bad in [10, -1, i32::MAX, i32::MIN] {
            let err = graph
                .invoke(&[&indices([0, 1, 2, bad, 4, 5])], &mut [&mut out])
                .expect_err("an index outside the table");
            assert!(err.to_string().contains("gather index"), "{err}");
        }
        graph
            .invoke(&[&indices([0, 9, 2, 3, 4, 5])], &mut [&mut out])
            .expect("indices in range");
    }
}
