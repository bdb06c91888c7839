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
