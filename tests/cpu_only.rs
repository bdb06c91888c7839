//! A part without an NPU: kws_dscnn on `hal::CpuOnly`, every operator on the CPU fallback,
//! gives TensorFlow Lite Micro's bytes on every input, job by job and from its job plan.

use npu_compute::hal::CpuOnly;
use npu_compute::prelude::*;

static MODEL: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/kws_dscnn");

#[test]
fn kws_dscnn_on_the_cpu_alone_gives_tflm_bytes() {
    let mut device = vec![0u32; 64 * 1024 / 4];
    let mut host = vec![0u32; 64 * 1024 / 4];
    let npu = CpuOnly::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
    );
    let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default()).unwrap();
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<_> = Graph::prepare(client, MODEL).unwrap();
    for i in 0..3 {
        let input = std::fs::read(format!("{DIR}/input_{i}.bin")).unwrap();
        let expected = std::fs::read(format!("{DIR}/expected_tflm_{i}.bin")).unwrap();
        for _ in 0..2 {
            let mut scores = [0u8; 12];
            graph.invoke(&[&input], &mut [&mut scores]).unwrap();
            assert_eq!(scores[..], expected[..]);
        }
    }
    println!("{:?}", client.stats().unwrap());
    println!("{:?}", client.memory_stats().unwrap());
}
