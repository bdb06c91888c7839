//! How calls wait for the NPU through each channel: `RefCellChannel` lets the server wait
//! inside one call; `CriticalSectionChannel` runs one non-blocking step per critical section
//! and waits between them. Both give the same bytes, the same virtual cycles and the same
//! number of waits.

use npu_compute::channel::{ComputeChannel, CriticalSectionChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::Graph;
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{FullyConnectedF32, Op, ReluF32};
use npu_compute::server::{ComputeServer, NpuServer};
use npu_compute::Error;
use npu_kernels::FcShape;
use npu_sim::runner::leak_aligned;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn server() -> Server {
    let sim = SimNpu::new(
        memory::<{ 1024 * 1024 }>(),
        memory::<65536>(),
        SimConfig::default(),
    )
    .unwrap();
    NpuServer::new(sim, MemoryConfig::default()).unwrap()
}

fn now<C: ComputeChannel<Server = Server>>(c: &C) -> u64 {
    c.with(|s| s.npu().now()).unwrap()
}

/// A chain of three fully connected layers, so that reading the last waits for several jobs.
fn chain<C: ComputeChannel<Server = Server>>(client: ComputeClient<'_, C>) -> [f32; 16] {
    let shape = FcShape {
        batches: 1,
        in_features: 16,
        out_features: 16,
    };
    let fc = Op::FullyConnectedF32(FullyConnectedF32 { shape });
    let w: Vec<f32> = (0..256)
        .map(|i| ((i * 7) % 5) as f32 * 0.25 - 0.5)
        .collect();
    let w = client.create_f32(&w).unwrap();
    let mut x = client.create_f32(&[1.0; 16]).unwrap();
    for _ in 0..3 {
        let y = client.empty(64).unwrap();
        client.execute(fc, &[&x, &w], &y).unwrap();
        x = y;
    }
    let mut out = [0.0f32; 16];
    client.read_f32(&x, &mut out).unwrap();
    out
}

/// The server's `try_sync`, through the channel.
fn try_sync<C: ComputeChannel<Server = Server>>(c: &C) -> nb::Result<(), Error> {
    c.with(|s| s.try_sync())?
}

/// Bytes, virtual cycles and waits of `workload` over a channel.
fn measure<C: ComputeChannel<Server = Server>, R>(
    channel: &C,
    workload: impl FnOnce(ComputeClient<'_, C>) -> R,
) -> (R, u64, u32) {
    let start = now(channel);
    let r = workload(ComputeClient::new(channel));
    let waits = channel.with(|s| s.stats().waits).unwrap();
    (r, now(channel) - start, waits)
}

#[test]
fn both_channels_read_the_same_bytes_after_the_same_cycles_and_waits() {
    let refcell: RefCellChannel<Server> = RefCellChannel::new(server());
    let cs: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let a = measure(&refcell, chain);
    let b = measure(&cs, chain);
    assert!(a.2 > 1, "the read waited for several jobs: {}", a.2);
    assert_eq!(a, b);
}

/// RELU of `len` copies of `value` on `channel`, read back with `wait_on` step by step:
/// the attempts it took, the server's waits meanwhile and the bytes read.
fn relu_read_by_attempts<C: ComputeChannel<Server = Server>>(
    channel: &C,
    value: f32,
    len: u32,
) -> (u32, u32, Vec<u8>) {
    let client = ComputeClient::new(channel);
    let x = client.create_f32(&vec![value; len as usize]).unwrap();
    let y = client.empty(len * 4).unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len }), &[&x], &y)
        .unwrap();
    let waits = || channel.with(|s| s.stats().waits).unwrap();
    let before = waits();
    let (mut attempts, mut out) = (0u32, vec![1u8; len as usize * 4]);
    let id = y.id();
    channel
        .wait_on(|s| {
            attempts += 1;
            s.try_read(id, &mut out)
        })
        .unwrap();
    (attempts, waits() - before, out)
}

#[test]
fn the_critical_section_channel_steps_and_waits_between_steps() {
    let channel: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let (attempts, waits, out) = relu_read_by_attempts(&channel, -1.0, 256);
    // Each attempt that would block was followed by one wait, and the last one finished.
    assert!(attempts > 1);
    assert_eq!(waits, attempts - 1);
    assert_eq!(out, [0; 1024]);
}

#[test]
fn each_channel_says_how_it_waits() {
    const { assert!(!<RefCellChannel<Server> as ComputeChannel>::WAITS_BETWEEN_STEPS) };
    const { assert!(<CriticalSectionChannel<Server> as ComputeChannel>::WAITS_BETWEEN_STEPS) };
}

#[test]
fn the_refcell_channel_runs_every_attempt_in_one_call() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server());
    let (attempts, waits, out) = relu_read_by_attempts(&channel, 2.0, 64);
    assert!(attempts > 1);
    assert_eq!(waits, attempts - 1);
    assert_eq!(out[..4], 2.0f32.to_le_bytes());
}

#[test]
fn a_wait_is_refused_while_the_server_is_lent_out() {
    let channel: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let client = ComputeClient::new(&channel);
    let x = client.create_f32(&[2.0; 4]).unwrap();
    channel
        .with(|_| {
            let mut out = [0.0f32; 4];
            assert_eq!(client.read_f32(&x, &mut out), Err(Error::ChannelBusy));
            assert_eq!(client.sync(), Err(Error::ChannelBusy));
        })
        .unwrap();
}

#[test]
fn try_sync_answers_would_block_until_every_job_is_over() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server());
    let client = ComputeClient::new(&channel);
    // Nothing submitted: nothing to wait for.
    assert_eq!(try_sync(&channel), Ok(()));
    let x = client.create_f32(&[-3.0; 256]).unwrap();
    let y = client.empty(1024).unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len: 256 }), &[&x], &y)
        .unwrap();
    // The simulator's clock has not moved: the upload and the job are still running.
    assert_eq!(try_sync(&channel), Err(nb::Error::WouldBlock));
    assert_eq!(try_sync(&channel), Err(nb::Error::WouldBlock));
    assert_eq!(channel.with(|s| s.npu().in_flight()).unwrap(), 2);
    let end = channel.with(|s| s.npu_mut().run_until_idle()).unwrap();
    assert_eq!(try_sync(&channel), Ok(()));
    // Nothing waited, and the clock stayed where the last job ended.
    assert_eq!(client.stats().unwrap().waits, 0);
    assert_eq!(now(&channel), end);
    let mut out = [1.0f32; 256];
    client.read_f32(&y, &mut out).unwrap();
    assert_eq!(out, [0.0; 256]);
}

#[test]
fn sync_through_both_channels_ends_at_the_same_cycle() {
    fn run<C: ComputeChannel<Server = Server>>(client: ComputeClient<'_, C>) -> u32 {
        let x = client.create_f32(&[1.5; 256]).unwrap();
        let y = client.empty(1024).unwrap();
        let z = client.empty(1024).unwrap();
        let relu = Op::ReluF32(ReluF32 { len: 256 });
        client.execute(relu, &[&x], &y).unwrap();
        client.execute(relu, &[&y], &z).unwrap();
        client.sync().unwrap();
        // Everything is over: a second sync has nothing to wait for.
        assert_eq!(try_sync(client.channel()), Ok(()));
        client.stats().unwrap().compute_jobs
    }
    let refcell: RefCellChannel<Server> = RefCellChannel::new(server());
    let cs: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let a = measure(&refcell, run);
    let b = measure(&cs, run);
    assert!(a.2 > 0);
    assert_eq!(a, b);
}

#[test]
fn a_pinned_block_is_read_through_both_channels_alike() {
    fn run<C: ComputeChannel<Server = Server>>(client: ComputeClient<'_, C>) -> Vec<u8> {
        let x = client.create_f32(&[-0.5; 64]).unwrap();
        let y = client.pinned(256).unwrap();
        client
            .execute(Op::ReluF32(ReluF32 { len: 64 }), &[&x], &y)
            .unwrap();
        client.host_ref(&y, |b| b.to_vec()).unwrap()
    }
    let refcell: RefCellChannel<Server> = RefCellChannel::new(server());
    let cs: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let a = measure(&refcell, run);
    let b = measure(&cs, run);
    assert_eq!(a.0, vec![0; 256]);
    assert!(a.2 > 0);
    assert_eq!(a, b);
}

#[test]
fn a_graph_invokes_through_both_channels_alike() {
    let dir = format!("{}/examples/models/kws_dscnn", env!("CARGO_MANIFEST_DIR"));
    let model = leak_aligned(&std::fs::read(format!("{dir}/model.tflite")).unwrap());
    let input = std::fs::read(format!("{dir}/input_0.bin")).unwrap();
    let expected = std::fs::read(format!("{dir}/expected_tflm_0.bin")).unwrap();
    fn run<C: ComputeChannel<Server = Server>>(
        client: ComputeClient<'_, C>,
        model: &'static [u8],
        input: &[u8],
    ) -> Vec<[u8; 12]> {
        let mut graph: Graph<'_, _, 16, 64> = Graph::prepare(client, model).unwrap();
        // The first invoke job by job, the next ones from the job plan.
        (0..3)
            .map(|_| {
                let mut scores = [0u8; 12];
                graph.invoke(&[input], &mut [&mut scores]).unwrap();
                scores
            })
            .collect()
    }
    let refcell: RefCellChannel<Server> = RefCellChannel::new(server());
    let cs: CriticalSectionChannel<Server> = CriticalSectionChannel::new(server());
    let a = measure(&refcell, |c| run(c, model, &input));
    let b = measure(&cs, |c| run(c, model, &input));
    assert!(a.0.iter().all(|s| s[..] == expected[..]));
    assert!(a.2 > 0);
    assert_eq!(a, b);
}

#[test]
fn a_host_write_of_a_pool_waits_for_the_jobs_of_its_placements() {
    // A job writes a tensor placed in the pool, and the pool is written whole from the host
    // while it runs: the pool then holds the host's bytes, not the job's.
    let channel: RefCellChannel<Server> = RefCellChannel::new(server());
    let client = ComputeClient::new(&channel);
    let pool = client.empty(256).unwrap();
    let view = client.place(&pool, 48, 64).unwrap();
    let x = client.create_f32(&[3.0; 16]).unwrap();
    client.sync().unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len: 16 }), &[&x], &view)
        .unwrap();
    let bytes: Vec<u8> = (0..=255).collect();
    client.write(&pool, &bytes).unwrap();
    let mut out = [0u8; 256];
    client.read(&pool, &mut out).unwrap();
    assert_eq!(out[..], bytes[..]);
}

#[test]
fn a_job_on_a_placement_waits_for_a_host_write_of_its_pool() {
    // The pool is written whole from the host, then a job writes a tensor placed in it: the
    // placement holds the job's bytes, not the upload's. (Unordered, the long upload, queued
    // behind the job's input, would land after the short job.)
    let channel: RefCellChannel<Server> = RefCellChannel::new(server());
    let client = ComputeClient::new(&channel);
    let pool = client.empty(4096).unwrap();
    let view = client.place(&pool, 48, 64).unwrap();
    let x = client.create_f32(&[3.0; 16]).unwrap();
    let bytes: Vec<u8> = (0..4096).map(|i| i as u8).collect();
    client.write(&pool, &bytes).unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len: 16 }), &[&x], &view)
        .unwrap();
    let mut out = [0u8; 64];
    client.read(&view, &mut out).unwrap();
    assert_eq!(out[..], 3.0f32.to_le_bytes().repeat(16)[..]);
}
