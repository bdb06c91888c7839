//! Reductions a model may carry that TFLM refuses are refused at prepare, naming why: here
//! ARG_MAX with an int64 output (TensorFlow's default; TFLM's kernel writes int32 only). The
//! model is `tf.math.argmax(x, axis=-1)` on a `[2, 10]` int8 input, converted by
//! TensorFlow's converter (`tools/opmodels/make.py`'s conversion).

use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::model::BuiltinOp;
use npu_sim::{runner, SimConfig};

#[test]
fn arg_max_with_an_int64_output_is_refused() {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/models/refused/arg_max_int8_int64.tflite"
    ))
    .unwrap();
    let model = runner::leak_aligned(&bytes);
    let mut device = vec![0u128; 4096];
    let mut host = vec![0u128; 4096];
    let channel = runner::channel(&mut device, &mut host, SimConfig::default()).unwrap();
    let client = ComputeClient::new(&channel);
    let err = Graph::<_, 8, 16>::prepare(client, model).err().unwrap();
    assert_eq!(
        err,
        GraphError::Unsupported {
            op_index: 0,
            op: BuiltinOp::ArgMax,
            what: "ARG_MAX / ARG_MIN output type other than int32"
        }
    );
}
