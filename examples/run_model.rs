//! The README's "Using it on the host": the keyword-spotting model run on the software NPU,
//! with every error passed up with `?`. Run it with `cargo run --example run_model`.

use std::error::Error;

use npu_compute::prelude::*;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

/// The model, 16-byte aligned as it would be in flash (the NPU then reads its weights in place).
static MODEL: &[u8] = npu_compute::include_aligned!("models/kws_dscnn/model.tflite");

/// The folder of the model's input and of TensorFlow Lite Micro's output for it.
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/kws_dscnn");

fn main() -> Result<(), Box<dyn Error>> {
    let features = std::fs::read(format!("{DIR}/input_0.bin"))?;
    let expected = std::fs::read(format!("{DIR}/expected_tflm_0.bin"))?;

    // The NPU's memories: `npu-sim plan` says this model needs a 20,704-byte arena and at
    // most 5,216 bytes of host staging.
    let mut arena = AlignedMemory::<32768>::new();
    let mut host = AlignedMemory::<8192>::new();
    let npu: SimNpu = SimNpu::new(
        arena.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )?;
    let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default())?;
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);

    let mut graph: Graph<_> = Graph::prepare(client, MODEL)?;
    let mut scores = [0u8; 12];
    // The first invoke runs job by job; the next ones replay its job plan.
    for _ in 0..2 {
        graph.invoke(&[&features], &mut [&mut scores])?;
    }
    let class = (0..scores.len())
        .max_by_key(|&i| (scores[i] as i8, std::cmp::Reverse(i)))
        .unwrap_or(0);
    println!("class {class}, scores {:?}", scores.map(|s| s as i8));
    println!("{:?}", client.stats()?);
    println!("{:?}", client.memory_stats()?);
    if scores[..] != expected[..] {
        return Err("the scores differ from TensorFlow Lite Micro's".into());
    }
    Ok(())
}
