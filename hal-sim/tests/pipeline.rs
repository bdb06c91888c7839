//! Pipelined frames keep the NPU busy while the CPU preprocesses the next one.

use npu_sim::{pipeline, runner, SimConfig};

fn product(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../examples/models/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn pipelining_keeps_the_npu_busy_while_the_cpu_preprocesses() {
    let model = runner::leak_aligned(&product("kws_dscnn", "model.tflite"));
    let input = product("kws_dscnn", "input_0.bin");
    let config = SimConfig::default();
    let probe = pipeline::run(model, &input, config, 0, 4, false).unwrap();
    // Preprocessing costs half an inference.
    let cpu = probe.inference_cycles / 2;
    let sequential = pipeline::run(model, &input, config, cpu, 12, false).unwrap();
    let pipelined = pipeline::run(model, &input, config, cpu, 12, true).unwrap();
    eprintln!("{probe:?}\n{sequential:?}\n{pipelined:?}");
    assert!(pipelined.steady_busy >= 0.95, "{pipelined:?}");
    // One after another, the NPU idles while the CPU works: about T / (T + P).
    assert!(sequential.steady_busy < 0.7, "{sequential:?}");
    assert!(pipelined.total_cycles < sequential.total_cycles);
    // Deterministic: the same run gives the same figures.
    assert_eq!(
        pipeline::run(model, &input, config, cpu, 12, true).unwrap(),
        pipelined
    );
}

#[test]
fn a_steady_frame_moves_its_input_and_output_only() {
    let model = runner::leak_aligned(&product("convnet", "model.tflite"));
    let input = product("convnet", "input_0.bin");
    let frames = 6;
    let steady = frames as u32 - 2;
    for pipelined in [false, true] {
        let r =
            pipeline::run(model, &input, SimConfig::default(), 1000, frames, pipelined).unwrap();
        assert_eq!(r.steady_transfers, (steady, steady, 0), "{r:?}");
        // Through staging: the input in and the output out (10 bytes), once per frame.
        let staged = if pipelined {
            0
        } else {
            u64::from(steady) * (input.len() as u64 + 10)
        };
        assert_eq!(r.steady_staging_copy_bytes, staged, "{r:?}");
    }
}
