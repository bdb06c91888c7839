//! A part without an NPU: kws_dscnn on `hal::CpuOnly`, every operator on the CPU fallback,
//! gives TensorFlow Lite Micro's bytes on every input, job by job and from its job plan; and
//! the arena `examples/firmware-min` declares for it compiled is what it needs.

use npu_compute::hal::CpuOnly;
use npu_compute::prelude::*;
use npu_compute::server::ServerStats;

static MODEL: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");
const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models/kws_dscnn");
/// The minimal firmware's arena, whose size the test reads.
const FIRMWARE_MEMORY: &str = include_str!("../examples/firmware-min/src/memory.rs");

/// What one run over `device` and `host` bytes of memory gave: the scores of each input's
/// invokes (two each: job by job first, then from the job plan) and the server's counters; or
/// the first error.
struct Run {
    scores: Vec<[u8; 12]>,
    /// Operators that compute (not an alias such as RESHAPE), and those the NPU runs.
    computing: usize,
    on_npu: usize,
    stats: ServerStats,
}

fn run(device: usize, host: usize, inputs: &[Vec<u8>]) -> Result<Run, GraphError> {
    // u32 words: both memories start on a 4-byte boundary, as CpuOnly's regions need.
    let mut device_words = vec![0u32; device.div_ceil(4)];
    let mut host_words = vec![0u32; host.div_ceil(4)];
    let npu = CpuOnly::new(
        &mut bytemuck::cast_slice_mut(&mut device_words)[..device],
        &mut bytemuck::cast_slice_mut(&mut host_words)[..host],
    );
    let server: NpuServer<_> = NpuServer::new(npu, MemoryConfig::default())?;
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<_> = Graph::prepare(client, MODEL)?;
    let computing = graph.operators().filter(|o| o.op.is_some()).count();
    let on_npu = graph.operators().filter(|o| o.on_npu).count();
    let mut scores = Vec::new();
    for input in inputs {
        for _ in 0..2 {
            let mut out = [0u8; 12];
            graph.invoke(&[input], &mut [&mut out])?;
            scores.push(out);
        }
    }
    Ok(Run {
        scores,
        computing,
        on_npu,
        stats: client.stats()?,
    })
}

/// `const NAME: usize = N;` in the firmware's memory module.
fn firmware_bytes(name: &str) -> usize {
    let line = FIRMWARE_MEMORY
        .lines()
        .find(|l| l.starts_with(&format!("pub const {name}: usize = ")))
        .unwrap_or_else(|| panic!("{name} not found in examples/firmware-min/src/memory.rs"));
    let value = line.split('=').nth(1).unwrap().trim().trim_end_matches(';');
    value.replace('_', "").parse().unwrap()
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}/{name}")).unwrap()
}

#[test]
fn kws_dscnn_on_the_cpu_alone_gives_tflm_bytes_every_operator_on_the_cpu() {
    let inputs: Vec<_> = (0..3).map(|i| read(&format!("input_{i}.bin"))).collect();
    let run = run(64 * 1024, 64 * 1024, &inputs).unwrap();
    for (i, scores) in run.scores.chunks(2).enumerate() {
        let expected = read(&format!("expected_tflm_{i}.bin"));
        assert_eq!(scores[0][..], expected[..], "input {i}, job by job");
        assert_eq!(scores[1][..], expected[..], "input {i}, from the job plan");
    }
    // Every operator that computes ran on the CPU, at each of the six invokes; no NPU job.
    assert_eq!(run.on_npu, 0);
    assert!(run.computing >= 11, "kws_dscnn has 12 operators");
    assert_eq!(run.stats.compute_jobs, 0);
    assert_eq!(run.stats.cpu_ops, run.computing as u32 * 6);
    // The first invoke runs job by job and records the job plan; the five after replay it.
    assert_eq!(run.stats.plan_runs, 5);
}

/// The minimal firmware runs kws_dscnn compiled (`kws_dscnn.npuc`) in a static arena of
/// `ARENA_BYTES`: exactly the arena the image asks for, which runs it to TFLM's bytes, and one
/// alignment unit less is refused.
#[test]
fn the_minimal_firmware_declares_the_arena_its_compiled_model_needs_and_no_more() {
    use npu_compute::compiled::{CompiledError, CompiledModel};
    let arena = firmware_bytes("ARENA_BYTES");
    let image = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/firmware-min/kws_dscnn.npuc"
    ))
    .unwrap();
    let model = CompiledModel::new(npu_sim::runner::leak_aligned(&image)).unwrap();
    assert_eq!(arena, model.arena_bytes() as usize, "the image's arena");
    let mut words = vec![0u128; arena.div_ceil(16)];
    let memory: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    let align = model.arena_alignment() as usize;
    assert!(matches!(
        model.session(&mut memory[..arena - align]),
        Err(CompiledError::ArenaTooSmall { .. })
    ));
    let mut session = model.session(&mut memory[..arena]).unwrap();
    session
        .input_mut(0)
        .unwrap()
        .copy_from_slice(&read("input_0.bin"));
    session.invoke().unwrap();
    assert_eq!(session.output(0).unwrap(), &read("expected_tflm_0.bin")[..]);
}
