//! Tensors in the NPU's slow memory tier (`ComputeClient::empty_slow`): their bytes written and
//! read back, jobs reading and writing them with the arena's results, copies between the tiers
//! in order, pools placed in, the CPU fallback over them, the fast arena never handing out the
//! tier's bytes, and the refusal on an NPU without a tier; a graph keeping activations there
//! (`PrepareOptions::slow_tensors`).

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError, Optimise, PrepareOptions};
use npu_compute::hal::Space;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{FullyConnectedF32, Op, OpSet};
use npu_compute::server::{ComputeServer, NpuServer};
use npu_compute::Error;
use npu_kernels::FcShape;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;
type Channel = RefCellChannel<Server>;

const ARENA: usize = 16 * 1024;
const SLOW: usize = 64 * 1024;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn server_with(config: SimConfig, slow: bool) -> Server {
    let mut sim = SimNpu::new(memory::<ARENA>(), memory::<65536>(), config).unwrap();
    if slow {
        sim = sim.with_slow_memory(memory::<SLOW>()).unwrap();
    }
    NpuServer::new(sim, MemoryConfig::default()).unwrap()
}

fn server() -> Server {
    server_with(SimConfig::default(), true)
}

/// Where a live tensor lies, by the server's own report.
fn space_of(channel: &Channel, id: npu_compute::handle::HandleId) -> Space {
    let mut found = None;
    channel
        .with(|s| {
            s.for_each_tensor(|t| {
                if t.id == id {
                    found = t.device.map(|r| r.space);
                }
            })
        })
        .unwrap()
        .unwrap();
    found.expect("a live tensor with a region")
}

fn fc() -> Op {
    Op::FullyConnectedF32(FullyConnectedF32 {
        shape: FcShape {
            batches: 1,
            in_features: 16,
            out_features: 16,
        },
    })
}

/// Three fully connected layers; `slow` says which of the three outputs lie in the slow tier.
fn chain(client: &ComputeClient<'_, Channel>, slow: [bool; 3]) -> [f32; 16] {
    let w: Vec<f32> = (0..256)
        .map(|i| ((i * 7) % 5) as f32 * 0.25 - 0.5)
        .collect();
    let w = client.create_f32(&w).unwrap();
    let mut x = client.create_f32(&[1.0; 16]).unwrap();
    for s in slow {
        let y = if s {
            client.empty_slow(64).unwrap()
        } else {
            client.empty(64).unwrap()
        };
        client.execute(fc(), &[&x, &w], &y).unwrap();
        x = y;
    }
    let mut out = [0.0f32; 16];
    client.read_f32(&x, &mut out).unwrap();
    out
}

#[test]
fn a_tensor_in_the_slow_tier_round_trips_its_bytes() {
    let channel = Channel::new(server());
    let client = ComputeClient::new(&channel);
    let t = client.empty_slow(100).unwrap();
    assert_eq!(space_of(&channel, t.id()), Space::Slow);
    let data: Vec<u8> = (0..100u32).map(|i| (i * 13 + 1) as u8).collect();
    client.write(&t, &data).unwrap();
    let mut back = [0u8; 100];
    client.read(&t, &mut back).unwrap();
    assert_eq!(&back[..], &data[..]);
    // The bytes are in the simulator's slow memory, not its arena.
    let in_slow = channel
        .with(|s| s.npu().slow_memory().windows(100).any(|w| w == &data[..]))
        .unwrap();
    assert!(in_slow);
}

#[test]
fn jobs_over_the_slow_tier_compute_the_arenas_results() {
    let reference = {
        let channel = Channel::new(server());
        chain(&ComputeClient::new(&channel), [false; 3])
    };
    for slow in [[true, false, false], [false, true, true], [true; 3]] {
        let channel = Channel::new(server());
        let out = chain(&ComputeClient::new(&channel), slow);
        assert_eq!(out, reference, "{slow:?}");
        // The jobs wrote the simulator's slow memory.
        let used = channel
            .with(|s| s.npu().slow_memory().iter().any(|&b| b != 0))
            .unwrap();
        assert!(used, "{slow:?}");
    }
    assert!(reference.iter().any(|&v| v != 0.0));
}

#[test]
fn the_cpu_fallback_reads_and_writes_the_slow_tier_through_staging() {
    let reference = {
        let channel = Channel::new(server());
        chain(&ComputeClient::new(&channel), [false; 3])
    };
    // An NPU that runs nothing: every layer on the CPU fallback.
    let config = SimConfig {
        ops: OpSet::EMPTY,
        ..SimConfig::default()
    };
    let channel = Channel::new(server_with(config, true));
    let out = chain(&ComputeClient::new(&channel), [true, false, true]);
    assert_eq!(out, reference);
    assert_eq!(channel.with(|s| s.stats().cpu_ops).unwrap(), 3);
}

#[test]
fn copies_move_tensors_between_the_tiers_in_order() {
    let channel = Channel::new(server());
    let client = ComputeClient::new(&channel);
    let w: Vec<f32> = (0..256).map(|i| (i % 3) as f32 - 1.0).collect();
    let w = client.create_f32(&w).unwrap();
    let x = client.create_f32(&[0.5; 16]).unwrap();
    let y = client.empty(64).unwrap();
    client.execute(fc(), &[&x, &w], &y).unwrap();
    let mut expected = [0.0f32; 16];
    client.read_f32(&y, &mut expected).unwrap();
    // Swapped out, overwritten in the arena, swapped back in elsewhere: each step waits for
    // the one before, with no read in between.
    let out = client.empty(64).unwrap();
    client.execute(fc(), &[&x, &w], &out).unwrap();
    let parked = client.empty_slow(64).unwrap();
    client.copy(&out, &parked).unwrap();
    client.write(&out, &[0u8; 64]).unwrap();
    let back = client.empty(64).unwrap();
    client.copy(&parked, &back).unwrap();
    let mut got = [0.0f32; 16];
    client.read_f32(&back, &mut got).unwrap();
    assert_eq!(got, expected);
    assert_eq!(space_of(&channel, parked.id()), Space::Slow);
    assert_eq!(space_of(&channel, back.id()), Space::Device);
}

#[test]
fn tensors_placed_in_a_slow_pool_lie_in_the_tier() {
    let channel = Channel::new(server());
    let client = ComputeClient::new(&channel);
    let pool = client.empty_slow(1024).unwrap();
    let a = client.place(&pool, 256, 64).unwrap();
    let b = client.place(&pool, 512, 64).unwrap();
    assert_eq!(space_of(&channel, a.id()), Space::Slow);
    let w: Vec<f32> = (0..256).map(|i| (i % 7) as f32 * 0.5).collect();
    let w = client.create_f32(&w).unwrap();
    client
        .write(&a, bytemuck::cast_slice(&[0.25f32; 16]))
        .unwrap();
    client.execute(fc(), &[&a, &w], &b).unwrap();
    let mut got = [0.0f32; 16];
    client.read_f32(&b, &mut got).unwrap();
    let expected: Vec<f32> = (0..16)
        .map(|o| {
            (0..16)
                .map(|i| 0.25 * ((o * 16 + i) % 7) as f32 * 0.5)
                .sum()
        })
        .collect();
    assert_eq!(&got[..], &expected[..]);
    // Offsets within the pool are offsets within the tier.
    let (pool_at, a_at) = channel
        .with(|s| {
            let mut at = (0, 0);
            s.for_each_tensor(|t| {
                if t.id == pool.id() {
                    at.0 = t.device.unwrap().offset;
                }
                if t.id == a.id() {
                    at.1 = t.device.unwrap().offset;
                }
            })
            .unwrap();
            at
        })
        .unwrap();
    assert_eq!(a_at, pool_at + 256);
}

#[test]
fn the_fast_arena_never_hands_out_the_tiers_bytes() {
    let channel = Channel::new(server());
    let client = ComputeClient::new(&channel);
    let before = client.memory_stats().unwrap().largest_free;
    assert_eq!(before, ARENA as u32);
    let _slow = client.empty_slow(32 * 1024).unwrap();
    // The figures are the arena's: the tier's bytes are not in them.
    let stats = client.memory_stats().unwrap();
    assert_eq!(stats.largest_free, before);
    assert_eq!((stats.in_use, stats.reserved), (0, 0));
    let _fast = client.empty(ARENA as u32).unwrap();
    // The arena is full; the tier's 32 KiB left do not serve it.
    assert!(matches!(
        client.empty(16),
        Err(Error::OutOfMemory { free: 0, .. })
    ));
    let _more_slow = client.empty_slow(16 * 1024).unwrap();
    assert!(matches!(
        client.empty_slow(32 * 1024),
        Err(Error::SlowTierOutOfMemory {
            largest_free: 16384,
            ..
        })
    ));
}

#[test]
fn without_a_slow_tier_the_request_is_refused_with_the_reason() {
    let channel = Channel::new(server_with(SimConfig::default(), false));
    let client = ComputeClient::new(&channel);
    let err = client.empty_slow(64).unwrap_err();
    assert_eq!(
        err,
        Error::SlowTierOutOfMemory {
            requested: 64,
            free: 0,
            largest_free: 0
        }
    );
    assert!(err.to_string().contains("slow_memory_bytes"));
    // The arena is untouched.
    assert_eq!(client.memory_stats().unwrap().largest_free, ARENA as u32);
}

static KWS: &[u8] = npu_compute::include_aligned!("../examples/models/kws_dscnn/model.tflite");
static KWS_IN: &[u8] = include_bytes!("../examples/models/kws_dscnn/input_0.bin");
static KWS_OUT: &[u8] = include_bytes!("../examples/models/kws_dscnn/expected_tflm_0.bin");

/// kws_dscnn's activations, model tensor indices (from `npu-sim plan ... --budget`).
const KWS_SLOW: &[u16] = &[21, 23, 25, 27, 29];

fn big_server() -> Server {
    let sim = SimNpu::new(
        memory::<{ 256 * 1024 }>(),
        memory::<65536>(),
        SimConfig::default(),
    )
    .unwrap()
    .with_slow_memory(memory::<SLOW>())
    .unwrap();
    NpuServer::new(sim, MemoryConfig::default()).unwrap()
}

#[test]
fn a_graph_keeps_the_activations_it_is_told_in_the_slow_tier_with_tflms_bytes() {
    let whole = {
        let channel = Channel::new(big_server());
        let graph: Graph<_> = Graph::prepare(ComputeClient::new(&channel), KWS).unwrap();
        graph.arena()
    };
    let channel = Channel::new(big_server());
    let options = PrepareOptions {
        slow_tensors: KWS_SLOW,
        ..PrepareOptions::default()
    };
    let mut graph: Graph<_> =
        Graph::prepare_with(ComputeClient::new(&channel), KWS, options).unwrap();
    let arena = graph.arena();
    assert_eq!(arena.slow_bytes, 8000);
    assert_eq!(arena.activation_bytes, whole.activation_bytes - 8000);
    assert!(graph.activations().filter(|a| a.slow).count() >= KWS_SLOW.len());
    for _ in 0..2 {
        // Job by job, then from the job plan.
        let mut out = [0u8; 12];
        graph.invoke(&[KWS_IN], &mut [&mut out]).unwrap();
        assert_eq!(&out[..], KWS_OUT);
    }
}

#[test]
fn slow_tensors_the_graph_cannot_keep_there_are_refused() {
    let channel = Channel::new(big_server());
    // Stripes plan whole tensors in one pool.
    let striped = PrepareOptions {
        optimise: Optimise::Memory,
        slow_tensors: KWS_SLOW,
        ..PrepareOptions::default()
    };
    let refused = Graph::<_>::prepare_with(ComputeClient::new(&channel), KWS, striped);
    assert!(matches!(
        refused,
        Err(GraphError::SlowTensor { tensor: 21, .. })
    ));
    // A constant (tensor 1 is a filter) has no activation memory to move.
    let constant = PrepareOptions {
        slow_tensors: &[1],
        ..PrepareOptions::default()
    };
    let refused = Graph::<_>::prepare_with(ComputeClient::new(&channel), KWS, constant);
    let Err(e) = refused else {
        panic!("a constant was kept in the slow tier");
    };
    assert!(matches!(e, GraphError::SlowTensor { tensor: 1, .. }));
    assert!(e.to_string().contains("list activations only"));
}
