//! Fuzz target: prepare arbitrary bytes as a model on the simulated NPU, and invoke it once.
//!
//! Must never panic: malformed models, unsupported operators and inconsistent shapes or
//! quantization are errors. Parsing is covered by `model_reader`; this target reaches the
//! lowering of operators to kernel parameters, constant binding and the kernels themselves.

#![no_main]

use libfuzzer_sys::fuzz_target;
use npu_compute::client::ComputeClient;
use npu_compute::graph::Graph;
use npu_sim::{runner, SimConfig};

fuzz_target!(|data: &[u8]| {
    // The graph API takes the model as `&'static` (like a model in flash, which the NPU may
    // read at any time). Give it a leaked, 16-byte aligned copy, and reclaim it afterwards so
    // that millions of runs do not exhaust memory.
    let words: Box<[u128]> = vec![0u128; data.len().div_ceil(16)].into_boxed_slice();
    let raw: *mut [u128] = Box::into_raw(words);
    // SAFETY: `raw` comes from `Box::into_raw` just above and is not aliased: this is the
    // only reference made from it until the `Box::from_raw` below.
    let model: &'static mut [u128] = unsafe { &mut *raw };
    let bytes: &'static mut [u8] = &mut bytemuck::cast_slice_mut(model)[..data.len()];
    bytes.copy_from_slice(data);
    run(bytes);
    // SAFETY: everything that borrowed the model (graph, server, simulator, channel) was
    // created inside `run` and dropped when it returned; nothing else holds a reference, so
    // the allocation can be freed through the Box it came from.
    drop(unsafe { Box::from_raw(raw) });
});

fn run(model: &'static [u8]) {
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let Ok(channel) = runner::channel(&mut device, &mut host, SimConfig::default()) else {
        return;
    };
    let client = ComputeClient::new(&channel);
    let prepared: Result<runner::SimGraph, _> = Graph::prepare(client, model);
    if let Ok(mut graph) = prepared {
        let inputs: Vec<Vec<u8>> = graph
            .input_sizes()
            .map(|n| vec![0u8; n.min(1 << 20) as usize])
            .collect();
        let mut outputs: Vec<Vec<u8>> = graph
            .output_sizes()
            .map(|n| vec![0u8; n.min(1 << 20) as usize])
            .collect();
        let ins: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(Vec::as_mut_slice).collect();
        let _ = graph.invoke(&ins, &mut outs);
    }
}
