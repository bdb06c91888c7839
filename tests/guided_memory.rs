//! Measured then guided memory over the whole stack and the simulator: the same results with
//! and without guidance, placements from the second pass of a shape on, fallback when the
//! workload changes, plan eviction, tracker overflow, and fence-safe reuse of placed bytes.

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::hal::Npu;
use npu_compute::memory::{ChunkSliceMemory, GuidedMemory, MemoryConfig, PassStats};
use npu_compute::ops::{AddF32, FullyConnectedF32, Op, ReluF32};
use npu_compute::server::{NpuServer, PassServer};
use npu_compute::Error;
use npu_kernels::FcShape;
use npu_sim::workloads::{self, Transformer, D_MODEL, SEQ_LENGTHS};
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server<const P: usize, const E: usize> =
    NpuServer<SimNpu<'static>, GuidedMemory<ChunkSliceMemory<64>, P, E>>;
type Channel<const P: usize, const E: usize> = RefCellChannel<Server<P, E>>;
type Client<'c, const P: usize, const E: usize> = ComputeClient<'c, Channel<P, E>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn guided<const P: usize, const E: usize>(sim: SimConfig) -> Channel<P, E> {
    let npu = SimNpu::new(memory::<65536>(), memory::<65536>(), sim).unwrap();
    let caps = npu.capabilities();
    let inner = ChunkSliceMemory::new(
        caps.device_memory_bytes,
        caps.alignment,
        MemoryConfig::default(),
    )
    .unwrap();
    RefCellChannel::new(NpuServer::with_memory(npu, GuidedMemory::new(inner)).unwrap())
}

fn passes<const P: usize, const E: usize>(client: &Client<'_, P, E>) -> PassStats {
    client.pass_stats().unwrap()
}

/// `x = [value; n]`, then `depth` doublings, each into a new tensor, the previous one
/// released: `1 + depth` reservations. Returns the result (`value * 2^depth`).
fn chain<C: ComputeChannel>(
    client: &ComputeClient<'_, C>,
    n: usize,
    value: f32,
    depth: usize,
) -> Result<Vec<f32>, Error> {
    let mut x = client.create_f32(&vec![value; n])?;
    for _ in 0..depth {
        let y = client.empty(4 * n as u32)?;
        client.execute(Op::AddF32(AddF32 { len: n as u32 }), &[&x, &x], &y)?;
        x = y;
    }
    let mut out = vec![0.0; n];
    client.read_f32(&x, &mut out)?;
    Ok(out)
}

#[test]
fn the_transformer_computes_the_same_with_and_without_guidance() {
    let (mut d1, mut h1) = (
        workloads::aligned_memory(workloads::DEVICE_BYTES),
        workloads::aligned_memory(workloads::HOST_BYTES),
    );
    let (mut d2, mut h2) = (
        workloads::aligned_memory(workloads::DEVICE_BYTES),
        workloads::aligned_memory(workloads::HOST_BYTES),
    );
    let plain = workloads::channel(
        &mut d1,
        &mut h1,
        SimConfig::default(),
        MemoryConfig::default(),
    )
    .unwrap();
    let guided = workloads::guided_channel(
        &mut d2,
        &mut h2,
        SimConfig::default(),
        MemoryConfig::default(),
    )
    .unwrap();
    let (pc, gc) = (ComputeClient::new(&plain), ComputeClient::new(&guided));
    let (pn, gn) = (
        Transformer::new(&pc).unwrap(),
        Transformer::new(&gc).unwrap(),
    );
    let inferences = 2 * SEQ_LENGTHS.len();
    for i in 0..inferences {
        let len = SEQ_LENGTHS[i % SEQ_LENGTHS.len()];
        let x = workloads::pseudo_random_i8(300 + i as u32, len * D_MODEL);
        assert_eq!(
            pn.infer(&pc, &x).unwrap(),
            gc.pass(len as u32, || gn.infer(&gc, &x)).unwrap(),
            "inference {i}"
        );
    }
    let s = gc.pass_stats().unwrap();
    // Seven distinct lengths: each measured once, every other pass guided and fully placed.
    assert_eq!(s.measured_passes, 7);
    assert_eq!(s.guided_passes as usize, inferences - 7);
    assert_eq!((s.diverged_passes, s.fallback_reservations), (0, 0));
    assert_eq!(s.placed_reservations % s.guided_passes, 0);
    assert_eq!(
        s.placed_reservations / s.guided_passes,
        20,
        "20 tensors each"
    );
    let m = gc.memory_stats().unwrap();
    assert_eq!(
        m.in_use,
        pc.memory_stats().unwrap().in_use,
        "only the weights"
    );
    assert_eq!(m.in_use_peak, pc.memory_stats().unwrap().in_use_peak);
}

#[test]
fn guided_reserved_peak_is_within_a_tenth_of_live_bytes() {
    let g = workloads::run_guided(MemoryConfig::default(), 2).unwrap();
    let ratio = g.guided.reserved_peak as f64 / g.guided.in_use_peak as f64;
    assert!(ratio <= 1.1, "{g:?}");
    assert!(g.guided.reserved_peak >= g.guided.in_use_peak);
    assert_eq!(g.passes.fallback_reservations, 0);
}

#[test]
fn the_second_pass_of_a_key_places_every_reservation_that_does_not_escape() {
    let channel: Channel<4, 64> = guided(SimConfig::default());
    let client = ComputeClient::new(&channel);
    let mut kept = Vec::new();
    for round in 0..3 {
        let (out, keep) = client
            .pass(9, || {
                let a = client.create_f32(&[-1.0, 2.0, -3.0, 4.0])?;
                let b = client.empty(16)?;
                client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&a], &b)?;
                drop(a);
                // Escapes: returned to the caller.
                let keep = client.empty(16)?;
                client.execute(Op::AddF32(AddF32 { len: 4 }), &[&b, &b], &keep)?;
                let c = client.empty(16)?;
                client.execute(Op::AddF32(AddF32 { len: 4 }), &[&b, &keep], &c)?;
                let mut out = [0.0f32; 4];
                client.read_f32(&c, &mut out)?;
                Ok((out, keep))
            })
            .unwrap();
        assert_eq!(out, [0.0, 6.0, 0.0, 12.0], "round {round}");
        kept.push(keep);
        let s = passes(&client);
        assert_eq!(s.placed_reservations, 3 * round, "a, b and c, not keep");
        assert_eq!(s.escaping_reservations, round);
    }
    for (i, k) in kept.iter().enumerate() {
        let mut v = [0.0f32; 4];
        client.read_f32(k, &mut v).unwrap();
        assert_eq!(v, [0.0, 4.0, 0.0, 8.0], "kept tensor {i}");
    }
    let s = passes(&client);
    assert_eq!(
        (s.measured_passes, s.guided_passes, s.diverged_passes),
        (1, 2, 0)
    );
}

#[test]
fn a_changed_workload_falls_back_and_stays_correct() {
    let channel: Channel<4, 64> = guided(SimConfig::default());
    let client = ComputeClient::new(&channel);
    // Planned: a is released before c is reserved, so c may lie over a.
    let planned = || {
        client.pass(1, || {
            let a = client.create_f32(&[1.0; 64])?;
            let b = client.empty(256)?;
            client.execute(Op::ReluF32(ReluF32 { len: 64 }), &[&a], &b)?;
            drop(a);
            let c = client.empty(256)?;
            client.execute(Op::AddF32(AddF32 { len: 64 }), &[&b, &b], &c)?;
            drop(b);
            let mut out = [0.0f32; 64];
            client.read_f32(&c, &mut out)?;
            Ok(out[0])
        })
    };
    // Same key and sizes, but a lives on and is read after c is written.
    let changed = || {
        client.pass(1, || {
            let a = client.create_f32(&[1.0; 64])?;
            let b = client.empty(256)?;
            client.execute(Op::ReluF32(ReluF32 { len: 64 }), &[&a], &b)?;
            let c = client.empty(256)?;
            client.execute(Op::AddF32(AddF32 { len: 64 }), &[&b, &b], &c)?;
            let d = client.empty(256)?;
            client.execute(Op::AddF32(AddF32 { len: 64 }), &[&a, &c], &d)?;
            let mut out = [0.0f32; 64];
            client.read_f32(&d, &mut out)?;
            Ok(out)
        })
    };
    assert_eq!(planned().unwrap(), 2.0);
    assert_eq!(planned().unwrap(), 2.0);
    assert_eq!(passes(&client).placed_reservations, 3);
    assert_eq!(changed().unwrap(), [3.0; 64]);
    let s = passes(&client);
    assert_eq!(s.diverged_passes, 1);
    assert_eq!(s.placed_reservations, 5, "a and b placed before the change");
    assert_eq!(s.fallback_reservations, 2, "c and d served by chunks");
    // Measured again, then guided with the new lifetimes.
    assert_eq!(changed().unwrap(), [3.0; 64]);
    assert_eq!(passes(&client).measured_passes, 2);
    assert_eq!(changed().unwrap(), [3.0; 64]);
    let s = passes(&client);
    assert_eq!((s.placed_reservations, s.diverged_passes), (9, 1));
    // Other sizes under the same key: fallback from the first reservation.
    let out = client.pass(1, || chain(&client, 8, 1.5, 2)).unwrap();
    assert_eq!(out, vec![6.0; 8]);
    assert_eq!(passes(&client).diverged_passes, 2);
    assert_eq!(client.memory_stats().unwrap().in_use, 0);
}

#[test]
fn plans_beyond_capacity_evict_the_least_recently_used_key() {
    let channel: Channel<2, 64> = guided(SimConfig::default());
    let client = ComputeClient::new(&channel);
    let run = |key: u32| {
        let n = 4 * key as usize;
        let out = client
            .pass(key, || chain(&client, n, key as f32, 3))
            .unwrap();
        assert_eq!(out, vec![8.0 * key as f32; n]);
    };
    for key in [1, 2, 1, 2] {
        run(key);
    }
    let s = passes(&client);
    assert_eq!(
        (s.measured_passes, s.guided_passes, s.plan_evictions),
        (2, 2, 0)
    );
    run(3); // evicts 1, the least recently used
    run(2); // guided
    run(1); // measured again, evicts 3
    let s = passes(&client);
    assert_eq!(
        (s.measured_passes, s.guided_passes, s.plan_evictions),
        (4, 3, 2)
    );
    let mut keys: Vec<u32> = channel
        .with(|s| s.memory().plans().map(|(k, _)| k).collect())
        .unwrap();
    keys.sort_unstable();
    assert_eq!(keys, [1, 2]);
    // Three keys cycling through two plans: once 3 comes, every pass is measured (the key
    // needed next is always the one just evicted), never an error.
    for key in [1, 2, 3, 1, 2, 3] {
        run(key);
    }
    let s = passes(&client);
    assert_eq!((s.measured_passes, s.guided_passes), (8, 5));
    assert_eq!((s.plans_stored, s.plan_evictions), (8, 6));
}

#[test]
fn more_reservations_than_the_tracker_holds_are_not_planned_nor_an_error() {
    let channel: Channel<2, 4> = guided(SimConfig::default());
    let client = ComputeClient::new(&channel);
    for _ in 0..3 {
        let out = client.pass(1, || chain(&client, 16, 0.5, 6)).unwrap();
        assert_eq!(out, vec![32.0; 16]);
    }
    let s = passes(&client);
    assert_eq!((s.measured_passes, s.overflowed_passes), (3, 3));
    assert_eq!((s.guided_passes, s.plans_stored), (0, 0));
    // A pass that fits is planned as usual.
    for _ in 0..2 {
        let out = client.pass(2, || chain(&client, 16, 0.5, 3)).unwrap();
        assert_eq!(out, vec![4.0; 16]);
    }
    assert_eq!(passes(&client).placed_reservations, 4);
}

#[test]
fn passes_do_not_nest() {
    let channel: Channel<2, 8> = guided(SimConfig::default());
    assert_eq!(
        channel.with(|s| s.end_pass()).unwrap(),
        Err(Error::NoPassOpen)
    );
    channel.with(|s| s.begin_pass(3)).unwrap().unwrap();
    assert_eq!(
        channel.with(|s| s.begin_pass(4)).unwrap(),
        Err(Error::PassAlreadyOpen { key: 3 })
    );
    channel.with(|s| s.end_pass()).unwrap().unwrap();
    // A pass inside `pass` is refused the same way, and the outer pass still ends.
    let client = ComputeClient::new(&channel);
    let nested = client.pass(1, || client.pass(2, || Ok(())));
    assert_eq!(nested, Err(Error::PassAlreadyOpen { key: 1 }));
    assert_eq!(
        channel.with(|s| s.end_pass()).unwrap(),
        Err(Error::NoPassOpen)
    );
    // (A chunk/slice server has no passes at all: `ComputeClient::pass` does not compile
    // for its client, as its documentation shows.)
}

/// A slow FC job (reads 16 KB of weights) reads `x`; `x` is released at once and a new
/// tensor placed over its bytes is uploaded: the upload must wait for the FC.
#[test]
fn a_placement_over_a_tensor_still_read_waits_for_the_reader() {
    let channel: Channel<4, 64> = guided(SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    });
    let client = ComputeClient::new(&channel);
    let w = client.create_f32(&[1.0; 512 * 8]).unwrap();
    client.sync().unwrap();
    let shape = FcShape {
        batches: 1,
        in_features: 512,
        out_features: 8,
    };
    for round in 0..3 {
        let (y, z) = client
            .pass(1, || {
                let x = client.create_f32(&[1.0; 512])?;
                let y = client.empty(32)?;
                client.execute(
                    Op::FullyConnectedF32(FullyConnectedF32 { shape }),
                    &[&x, &w],
                    &y,
                )?;
                drop(x);
                let z = client.create_f32(&[100.0; 512])?;
                let (mut y_out, mut z_out) = ([0.0f32; 8], [0.0f32; 512]);
                client.read_f32(&y, &mut y_out)?;
                client.read_f32(&z, &mut z_out)?;
                Ok((y_out, z_out))
            })
            .unwrap();
        assert_eq!(y, [512.0; 8], "round {round}");
        assert!(z.iter().all(|&v| v == 100.0), "round {round}");
    }
    let s = passes(&client);
    assert_eq!((s.guided_passes, s.placed_reservations), (2, 6));
    // x and z are never live together: the plan lays z over x (pool = one of them + y).
    let pools: Vec<(u32, u32)> = channel.with(|s| s.memory().plans().collect()).unwrap();
    assert_eq!(pools, [(1, 2048 + 32)]);
}

/// A pass ends while a slow job still reads a placed tensor; the next pass's pool takes the
/// same bytes (the released pool's chunk) and uploads new data at the same offset: the upload
/// must wait for the job of the previous pass.
#[test]
fn the_next_pass_waits_for_jobs_of_the_previous_one_on_the_same_bytes() {
    let channel: Channel<4, 64> = guided(SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    });
    let client = ComputeClient::new(&channel);
    let w = client.create_f32(&[1.0; 512 * 8]).unwrap();
    client.sync().unwrap();
    let shape = FcShape {
        batches: 1,
        in_features: 512,
        out_features: 8,
    };
    let mut outputs = Vec::new();
    for round in 0..4 {
        // y escapes (the caller keeps it); x is placed from the second pass on, and the pass
        // ends with the FC still reading it.
        let y = client
            .pass(1, || {
                let x = client.create_f32(&[(round + 1) as f32; 512])?;
                let y = client.empty(32)?;
                client.execute(
                    Op::FullyConnectedF32(FullyConnectedF32 { shape }),
                    &[&x, &w],
                    &y,
                )?;
                Ok(y)
            })
            .unwrap();
        outputs.push(y);
    }
    for (round, y) in outputs.iter().enumerate() {
        let mut out = [0.0f32; 8];
        client.read_f32(y, &mut out).unwrap();
        assert_eq!(out, [512.0 * (round + 1) as f32; 8], "round {round}");
    }
    let s = passes(&client);
    assert_eq!((s.guided_passes, s.placed_reservations), (3, 3));
    assert_eq!(s.escaping_reservations, 3);
}
