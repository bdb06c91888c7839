//! The whole stack over the simulated NPU: results, the asynchronous contract, errors, both
//! channels, fence-safe reuse and the CPU fallback.

use npu_compute::channel::{ComputeChannel, CriticalSectionChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::hal::Npu;
use npu_compute::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};
use npu_compute::ops::{
    AddF32, AddI8, DType, FullyConnectedF32, FullyConnectedI8, MulF32, MulI8, Op, OpKind, OpSet,
    ReluF32,
};
use npu_compute::server::NpuServer;
use npu_compute::{Capacity, Error};
use npu_kernels::int8::{self, Activation, Quant};
use npu_kernels::FcShape;
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

fn sim(config: SimConfig) -> SimNpu<'static> {
    SimNpu::new(memory::<65536>(), memory::<65536>(), config).unwrap()
}

fn server(config: SimConfig) -> Server {
    NpuServer::new(sim(config), MemoryConfig::default()).unwrap()
}

fn now<C: ComputeChannel<Server = Server>>(c: &C) -> u64 {
    c.with(|s| s.npu().now()).unwrap()
}

#[test]
fn f32_ops_end_to_end() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0, -2.0, 3.0, -4.0]).unwrap();
    let b = client.create_f32(&[0.5, 0.5, 2.0, 2.0]).unwrap();
    let sum = client.empty(16).unwrap();
    let prod = client.empty(16).unwrap();
    let relu = client.empty(16).unwrap();
    client
        .execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &b], &sum)
        .unwrap();
    client
        .execute(Op::MulF32(MulF32 { len: 4 }), &[&sum, &b], &prod)
        .unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len: 4 }), &[&prod], &relu)
        .unwrap();
    // FC: 2x4 input (a; b) times 3x4 weights plus bias.
    let x = client
        .create_f32(&[1.0, 2.0, 3.0, 4.0, 0.0, 1.0, 0.0, -1.0])
        .unwrap();
    let w = client
        .create_f32(&[1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
        .unwrap();
    let bias = client.create_f32(&[0.5, -0.5, 10.0]).unwrap();
    let y = client.empty(24).unwrap();
    let shape = FcShape {
        batches: 2,
        in_features: 4,
        out_features: 3,
    };
    client
        .execute(
            Op::FullyConnectedF32(FullyConnectedF32 { shape }),
            &[&x, &w, &bias],
            &y,
        )
        .unwrap();

    let mut out = [0.0f32; 4];
    client.read_f32(&relu, &mut out).unwrap();
    assert_eq!(out, [0.75, 0.0, 10.0, 0.0]);
    let mut fc = [0.0f32; 6];
    client.read_f32(&y, &mut fc).unwrap();
    assert_eq!(fc, [1.5, 1.5, 20.0, 0.5, 0.5, 10.0]);
}

#[test]
fn int8_ops_match_the_kernels() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let qa = Quant {
        scale: 0.05,
        zero_point: -3,
    };
    let qb = Quant {
        scale: 0.1,
        zero_point: 7,
    };
    let qo = Quant {
        scale: 0.12,
        zero_point: 1,
    };
    let a: Vec<i8> = (0..64).map(|i| (i * 37 % 256 - 128) as i8).collect();
    let b: Vec<i8> = (0..64).map(|i| (i * 91 % 256 - 128) as i8).collect();
    let add = int8::AddParams::new(qa, qb, qo, Activation::None).unwrap();
    let mul = int8::MulParams::new(qa, qb, qo, Activation::Relu).unwrap();
    let mut want_add = [0i8; 64];
    let mut want_mul = [0i8; 64];
    int8::add(&add, &a, &b, &mut want_add).unwrap();
    int8::mul(&mul, &a, &b, &mut want_mul).unwrap();

    let ta = client.create(bytemuck(&a)).unwrap();
    let tb = client.create(bytemuck(&b)).unwrap();
    let t_add = client.empty(64).unwrap();
    let t_mul = client.empty(64).unwrap();
    client
        .execute(
            Op::AddI8(AddI8 {
                len: 64,
                params: add,
            }),
            &[&ta, &tb],
            &t_add,
        )
        .unwrap();
    client
        .execute(
            Op::MulI8(MulI8 {
                len: 64,
                params: mul,
            }),
            &[&ta, &tb],
            &t_mul,
        )
        .unwrap();
    let mut got = [0u8; 64];
    client.read(&t_add, &mut got).unwrap();
    assert_eq!(bytemuck(&want_add), got);
    client.read(&t_mul, &mut got).unwrap();
    assert_eq!(bytemuck(&want_mul), got);
}

fn bytemuck(v: &[i8]) -> &[u8] {
    ::bytemuck::cast_slice(v)
}

#[test]
fn execute_returns_before_the_job_ends_and_try_read_waits_for_virtual_time() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let x = client.create_f32(&[1.0; 64]).unwrap();
    let w = client.create_f32(&[1.0; 64 * 32]).unwrap();
    let y = client.empty(32 * 4).unwrap();
    let shape = FcShape {
        batches: 1,
        in_features: 64,
        out_features: 32,
    };
    let t0 = now(&channel);
    client
        .execute(
            Op::FullyConnectedF32(FullyConnectedF32 { shape }),
            &[&x, &w],
            &y,
        )
        .unwrap();
    assert_eq!(now(&channel), t0, "execute did not wait");

    let mut out = [0u8; 128];
    let mut polls = 0;
    loop {
        match client.try_read(&y, &mut out) {
            Ok(()) => break,
            Err(nb::Error::WouldBlock) => {
                polls += 1;
                channel.with(|s| s.npu_mut().advance(100)).unwrap();
            }
            Err(nb::Error::Other(e)) => panic!("{e:?}"),
        }
    }
    assert!(
        polls > 5,
        "the FC and its transfers take virtual time ({polls} polls)"
    );
    let values: &[f32] = ::bytemuck::cast_slice(&out);
    assert!(values.iter().all(|&v| v == 64.0));
}

#[test]
fn read_waits_only_for_the_producer() {
    let config = SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    };
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(config));
    let client = ComputeClient::new(&channel);
    let x = client.create_f32(&[1.0; 256]).unwrap();
    let w = client.create_f32(&[0.5; 256 * 16]).unwrap();
    let big = client.empty(16 * 4).unwrap();
    let shape = FcShape {
        batches: 1,
        in_features: 256,
        out_features: 16,
    };
    let a = client.create_f32(&[2.0; 4]).unwrap();
    let small = client.empty(16).unwrap();
    client.sync().unwrap();
    client
        .execute(
            Op::FullyConnectedF32(FullyConnectedF32 { shape }),
            &[&x, &w],
            &big,
        )
        .unwrap(); // unit 0, long
    client
        .execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &a], &small)
        .unwrap(); // unit 1, short
    let mut out = [0.0f32; 4];
    client.read_f32(&small, &mut out).unwrap();
    assert_eq!(out, [4.0; 4]);
    let after_small = now(&channel);
    client.sync().unwrap();
    let after_all = now(&channel);
    assert!(
        after_small < after_all,
        "read of the short job returned at {after_small}, the long one ends at {after_all}"
    );
}

#[test]
fn released_memory_is_reused_at_once_but_not_overwritten_under_a_reader() {
    // Never deallocate, slice nothing: a released chunk is reused for the next same-size tensor.
    let config = MemoryConfig {
        slice: SliceStrategy::Never,
        dealloc: DeallocStrategy::Never,
    };
    let sim_config = SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    };
    let server: Server = NpuServer::new(sim(sim_config), config).unwrap();
    let channel: RefCellChannel<Server> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let x = client.create_f32(&[1.0; 512]).unwrap();
    let w = client.create_f32(&[1.0; 512 * 8]).unwrap();
    let y = client.empty(32).unwrap();
    client.sync().unwrap();
    let shape = FcShape {
        batches: 1,
        in_features: 512,
        out_features: 8,
    };
    // A long FC reads x; x is dropped at once and its chunk handed to a new tensor whose upload
    // would corrupt the FC's input if it did not wait for the FC.
    client
        .execute(
            Op::FullyConnectedF32(FullyConnectedF32 { shape }),
            &[&x, &w],
            &y,
        )
        .unwrap();
    let reused_before = client.memory_stats().unwrap().exact_reuses;
    drop(x);
    let z = client.create_f32(&[100.0; 512]).unwrap();
    assert_eq!(
        client.memory_stats().unwrap().exact_reuses,
        reused_before + 1,
        "x's chunk was reused"
    );
    let mut out = [0.0f32; 8];
    client.read_f32(&y, &mut out).unwrap();
    assert_eq!(out, [512.0; 8]);
    let mut zz = [0.0f32; 512];
    client.read_f32(&z, &mut zz).unwrap();
    assert!(zz.iter().all(|&v| v == 100.0));
}

#[test]
fn unsupported_ops_run_on_the_cpu() {
    let ops = OpSet::all().without(OpKind::FullyConnected, DType::I8);
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig {
        ops,
        ..SimConfig::default()
    }));
    let client = ComputeClient::new(&channel);
    let qi = Quant {
        scale: 0.02,
        zero_point: 5,
    };
    let qo = Quant {
        scale: 0.3,
        zero_point: -10,
    };
    let params = int8::FcParams::new(qi, 0.01, qo, Activation::None).unwrap();
    let shape = FcShape {
        batches: 2,
        in_features: 16,
        out_features: 4,
    };
    let x: Vec<i8> = (0..32).map(|i| (i * 13 - 100) as i8).collect();
    let w: Vec<i8> = (0..64).map(|i| (i * 7 % 200 - 100) as i8).collect();
    let bias: Vec<i32> = vec![100, -200, 300, 0];
    let mut want = [0i8; 8];
    int8::fully_connected(&params, shape, &x, &w, Some(&bias), &mut want).unwrap();

    let tx = client.create(bytemuck(&x)).unwrap();
    let tw = client.create(bytemuck(&w)).unwrap();
    let tb = client.create(::bytemuck::cast_slice(&bias)).unwrap();
    let ty = client.empty(8).unwrap();
    client
        .execute(
            Op::FullyConnectedI8(FullyConnectedI8 { shape, params }),
            &[&tx, &tw, &tb],
            &ty,
        )
        .unwrap();
    let mut got = [0u8; 8];
    client.read(&ty, &mut got).unwrap();
    assert_eq!(got, bytemuck(&want));
    let stats = client.stats().unwrap();
    assert_eq!((stats.cpu_ops, stats.compute_jobs), (1, 0));
}

#[test]
fn errors_are_typed() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0; 4]).unwrap();
    let out = client.empty(12).unwrap();
    assert_eq!(
        client.execute(Op::AddF32(AddF32 { len: 4 }), &[&a, &a], &out),
        Err(Error::BadOperands {
            op: OpKind::Add,
            operand: npu_compute::hal::MAX_JOB_INPUTS as u8,
            expected: 16,
            actual: 12
        })
    );
    assert_eq!(
        client.execute(Op::AddF32(AddF32 { len: 4 }), &[&a], &out),
        Err(Error::OperandCount {
            op: OpKind::Add,
            min: 2,
            max: 2,
            given: 1
        })
    );
    assert_eq!(
        client.execute(Op::ReluF32(ReluF32 { len: 4 }), &[&a], &a),
        Err(Error::OutputAliasesInput { op: OpKind::Relu })
    );
    let mut small = [0u8; 8];
    assert_eq!(
        client.read(&a, &mut small),
        Err(Error::SizeMismatch {
            expected: 16,
            actual: 8
        })
    );
    match client.empty(1 << 20) {
        Err(Error::OutOfMemory {
            requested,
            free,
            largest_free,
        }) => {
            assert_eq!(requested, 1 << 20);
            assert!(free <= 65536 && largest_free <= free);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    };
}

#[test]
fn stale_and_foreign_handles_are_errors() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let other: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let client2 = ComputeClient::new(&other);
    let a = client.create(&[1; 16]).unwrap();
    let b = client2.create(&[2; 16]).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(client.read(&b, &mut buf), Err(Error::ForeignHandle));
    // At the server level a raw id from another server, and a released id, are caught too.
    let foreign = b.id();
    assert_eq!(
        channel
            .with(|s| npu_compute::server::ComputeServer::tensor(s, foreign).map(|t| t.bytes))
            .unwrap(),
        Err(Error::ForeignHandle)
    );
    let stale = a.id();
    drop(a);
    assert_eq!(
        channel
            .with(|s| npu_compute::server::ComputeServer::tensor(s, stale).map(|t| t.bytes))
            .unwrap(),
        Err(Error::StaleHandle {
            index: stale.index()
        })
    );
}

#[test]
fn handle_capacity_is_named() {
    let server: NpuServer<SimNpu<'static>, npu_compute::memory::ChunkSliceMemory<64>, 2> =
        NpuServer::new(sim(SimConfig::default()), MemoryConfig::default()).unwrap();
    let channel: RefCellChannel<_, 2> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let _a = client.empty(16).unwrap();
    let _b = client.empty(16).unwrap();
    assert_eq!(
        client.empty(16).unwrap_err(),
        Error::CapacityExceeded {
            capacity: Capacity::Handles,
            limit: 2
        }
    );
}

#[test]
fn clone_shares_and_the_last_drop_releases() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let a = client.create(&[7; 32]).unwrap();
    let b = a.clone();
    drop(a);
    let mut buf = [0u8; 32];
    client.read(&b, &mut buf).unwrap();
    assert_eq!(buf, [7; 32]);
    assert_eq!(client.memory_stats().unwrap().in_use, 32);
    drop(b);
    assert_eq!(client.memory_stats().unwrap().in_use, 0);
    assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 0);
}

#[test]
fn dropping_a_handle_while_the_server_is_busy_is_deferred_not_a_panic() {
    let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let a = client.create(&[1; 64]).unwrap();
    let c = a.clone();
    channel
        .with(|s| {
            drop(a); // the server is lent out: deferred
            let d = c.clone(); // deferred retain
            drop(d);
            assert_eq!(s.live_tensors(), 1);
            assert_eq!(client.empty(16).unwrap_err(), Error::ChannelBusy);
        })
        .unwrap();
    // The deferred changes were applied when the server came back: one reference remains.
    assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 1);
    drop(c);
    assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 0);
    assert_eq!(client.memory_stats().unwrap().in_use, 0);
}

#[test]
fn critical_section_channel_runs_the_stack_and_serves_the_interrupt() {
    let channel: CriticalSectionChannel<Server> =
        CriticalSectionChannel::new(server(SimConfig::default()));
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[3.0; 8]).unwrap();
    let out = client.empty(32).unwrap();
    client
        .execute(Op::MulF32(MulF32 { len: 8 }), &[&a, &a], &out)
        .unwrap();
    // Let virtual time pass the job's end; the "interrupt" retires it without a poll.
    channel.with(|s| s.npu_mut().advance(10_000)).unwrap();
    assert!(channel.with(|s| s.npu().irq_pending()).unwrap());
    channel.on_interrupt();
    assert!(!channel.with(|s| s.npu().irq_pending()).unwrap());
    let mut buf = [0.0f32; 8];
    client.read_f32(&out, &mut buf).unwrap();
    assert_eq!(buf, [9.0; 8]);
    // Drop while busy through this channel too.
    let b = out.clone();
    channel.with(|_| drop(b)).unwrap();
    drop(out);
    drop(a);
    assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 0);
}

#[test]
fn the_simulated_run_is_deterministic() {
    fn run() -> (u64, npu_compute::memory::MemoryStats, [f32; 16]) {
        let channel: RefCellChannel<Server> = RefCellChannel::new(server(SimConfig::default()));
        let client = ComputeClient::new(&channel);
        let x = client.create_f32(&[0.25; 32]).unwrap();
        let w = client.create_f32(&[2.0; 32 * 16]).unwrap();
        let y = client.empty(64).unwrap();
        let shape = FcShape {
            batches: 1,
            in_features: 32,
            out_features: 16,
        };
        client
            .execute(
                Op::FullyConnectedF32(FullyConnectedF32 { shape }),
                &[&x, &w],
                &y,
            )
            .unwrap();
        let mut out = [0.0f32; 16];
        client.read_f32(&y, &mut out).unwrap();
        (now(&channel), client.memory_stats().unwrap(), out)
    }
    assert_eq!(run(), run());
}
