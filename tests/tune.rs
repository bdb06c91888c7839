//! Autotuning through the whole stack (client, channel, server, simulator): the first dispatch
//! of a shape measures its candidates and keeps the fastest, later ones reuse it without a
//! measurement, a table exported on one server and imported on another needs no measurement at
//! all, and nothing about the results changes.

// Ops are passed by reference on purpose: clippy sees `Op: Copy`, but one is over 200 bytes.
#![allow(clippy::needless_borrows_for_generic_args)]

mod common;

use common::shim::{Shim, Shimmed};
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, Tensor};
use npu_compute::hal::{Npu, Variant};
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{AddI8, Conv2dI8, Op};
use npu_compute::server::{ComputeServer, NpuServer, TuneStats};
use npu_compute::tune::{candidates, Candidate, TableError, TuneConfig, TuneMode};
use npu_compute::Error;
use npu_kernels::int8::{Activation, Conv2dParams, Conv2dShape, Nhwc, Padding, Quant, Window2d};
use npu_sim::{workloads, AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;
type Channel = RefCellChannel<Server>;

fn channel(config: SimConfig) -> Channel {
    RefCellChannel::new(server(config))
}

fn server(config: SimConfig) -> Server {
    let device = Box::leak(Box::new(AlignedMemory::<{ 512 * 1024 }>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<{ 64 * 1024 }>::new()));
    let npu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), config).unwrap();
    NpuServer::new(npu, MemoryConfig::default()).unwrap()
}

/// A server that tunes as `mode` says, within `config`.
fn tuned(sim: SimConfig, mode: TuneMode, config: TuneConfig) -> Channel {
    RefCellChannel::new(server(sim).with_tuning(mode, config))
}

fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

/// A convolution of `input` with `k` filters of `kh` x `kw`, stride `stride`, SAME padding.
fn conv(input: Nhwc, k: u32, kh: u32, kw: u32, stride: u32) -> Op {
    let shape = Conv2dShape {
        input,
        out_channels: k,
        filter_depth: input.channels,
        window: Window2d {
            filter_height: kh,
            filter_width: kw,
            stride_height: stride,
            stride_width: stride,
            dilation_height: 1,
            dilation_width: 1,
            padding: Padding::Same,
        },
    };
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::Relu).unwrap();
    Op::Conv2dI8(Conv2dI8 { shape, params })
}

/// kws_dscnn's first convolution (10 x 4, stride 2, on 49 x 10 x 1): im2col beats the
/// default by about half on the U55 model, so tuning has something to find.
fn kws_conv0() -> Op {
    conv(
        Nhwc {
            batches: 1,
            height: 49,
            width: 10,
            channels: 1,
        },
        64,
        10,
        4,
        2,
    )
}

/// The op's input tensors (see [`workloads::operand_bytes`]).
fn operands<'c, C: ComputeChannel>(client: &ComputeClient<'c, C>, op: &Op) -> Vec<Tensor<'c, C>> {
    workloads::operand_bytes(op, 0x5eed)
        .unwrap()
        .iter()
        .map(|bytes| client.create(bytes).unwrap())
        .collect()
}

/// Runs `op` once on fresh operands with `run`, returns the output bytes.
fn output_of<'c, C: ComputeChannel>(
    client: &ComputeClient<'c, C>,
    op: &Op,
    run: impl Fn(&[&Tensor<'c, C>], &Tensor<'c, C>) -> Result<(), Error>,
) -> Vec<u8> {
    let ins = operands(client, op);
    let refs: Vec<_> = ins.iter().collect();
    let out = client.empty(op.operands().unwrap().output).unwrap();
    run(&refs, &out).unwrap();
    let mut bytes = vec![0; out.bytes() as usize];
    client.read(&out, &mut bytes).unwrap();
    bytes
}

/// `op`'s output on a default, untuned server: what every candidate must reproduce.
fn untuned_output(op: &Op) -> Vec<u8> {
    let ch = channel(SimConfig::default());
    let client = ComputeClient::new(&ch);
    output_of(&client, op, |i, o| client.execute(op, i, o))
}

fn stats(channel: &Channel) -> TuneStats {
    channel.with(|s| s.tune_stats()).unwrap()
}

/// NPU cycles of one job of `op`, run as the server's mode says, on a synced NPU.
fn cycles_of(channel: &Channel, op: &Op) -> u64 {
    let client = ComputeClient::new(channel);
    let ins = operands(&client, op);
    let refs: Vec<_> = ins.iter().collect();
    let out = client.empty(op.operands().unwrap().output).unwrap();
    client.sync().unwrap();
    let t0 = channel.with(|s| s.npu().now()).unwrap();
    client.execute(op, &refs, &out).unwrap();
    client.sync().unwrap();
    channel.with(|s| s.npu().now()).unwrap() - t0
}

#[test]
fn first_dispatch_measures_later_ones_hit_and_results_do_not_change() {
    let op = kws_conv0();
    let reference = untuned_output(&op);

    let ch = tuned(SimConfig::default(), TuneMode::Tune, TuneConfig::default());
    let client = ComputeClient::new(&ch);
    let tuned = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(tuned, reference, "tuning changed the result");
    let first = stats(&ch);
    assert_eq!(first.tuning_runs, 1);
    assert_eq!(first.misses, 1);
    assert!(first.measurements >= 8, "{first:?}");
    assert!(first.tuning_cycles > 0);

    let again = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(again, reference);
    let second = stats(&ch);
    assert_eq!(second.tuning_runs, 1, "a tuned key is not tuned again");
    assert_eq!(
        second.measurements, first.measurements,
        "a hit measures nothing"
    );
    assert_eq!(second.hits, 1);

    // The tuned choice is im2col, and it is what runs now: the job costs what the model says
    // im2col costs, well below the default.
    let tuned_cycles = cycles_of(&ch, &op);
    let auto_cycles = {
        let ch = channel(SimConfig::default());
        cycles_of(&ch, &op)
    };
    assert!(
        tuned_cycles * 10 < auto_cycles * 7,
        "tuned {tuned_cycles} vs auto {auto_cycles}"
    );
}

#[test]
fn every_candidate_gives_the_same_bytes() {
    let op = kws_conv0();
    let ch = channel(SimConfig::default());
    let client = ComputeClient::new(&ch);
    let reference = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    let candidates = [
        Variant::Block { h: 8, w: 8 },
        Variant::Block { h: 4, w: 16 },
        Variant::Block { h: 2, w: 32 },
        Variant::Im2col,
    ];
    for v in candidates {
        let ch = tuned(
            SimConfig::default(),
            TuneMode::Fixed(Candidate::Npu(v)),
            TuneConfig::default(),
        );
        let client = ComputeClient::new(&ch);
        let out = output_of(&client, &op, |i, o| client.execute(&op, i, o));
        assert_eq!(out, reference, "{v:?}");
        assert_eq!(stats(&ch).fallbacks, 0, "{v:?} did not run");
    }
    // The CPU fallback too.
    let cpu = tuned(
        SimConfig::default(),
        TuneMode::Fixed(Candidate::Cpu),
        TuneConfig::default(),
    );
    let client = ComputeClient::new(&cpu);
    let out = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(out, reference);
    assert_eq!(client.stats().unwrap().cpu_ops, 1, "it ran on the CPU");
}

#[test]
fn an_imported_table_replaces_measuring() {
    let op = kws_conv0();
    let ch = tuned(SimConfig::default(), TuneMode::Tune, TuneConfig::default());
    let tuning = cycles_of(&ch, &op);
    let tuned_again = cycles_of(&ch, &op);
    let mut table = [0u8; 4096];
    let len = ComputeClient::new(&ch).export_tuning(&mut table).unwrap();
    assert_eq!(len, 32 + 32, "a header and one entry");
    let table = &table[..len];

    let fresh: Channel = RefCellChannel::new(
        server(SimConfig::default())
            .with_tuning(TuneMode::CacheOnly, TuneConfig::default())
            .with_tuning_table(table)
            .unwrap(),
    );
    assert_eq!(stats(&fresh).imported, 1);
    assert_eq!(cycles_of(&fresh, &op), tuned_again);
    assert!(
        tuned_again * 2 < tuning,
        "the tuning dispatch includes the measuring"
    );
    let s = stats(&fresh);
    assert_eq!((s.tuning_runs, s.measurements, s.hits), (0, 0, 1), "{s:?}");

    // Exporting the imported choices gives the same bytes.
    let mut again = [0u8; 4096];
    let n = fresh
        .with(|s| s.export_tuning(&mut again))
        .unwrap()
        .unwrap();
    assert_eq!(&again[..n], table);

    // Another NPU configuration refuses it, as does a corrupted table, and neither loads
    // anything.
    let other = || {
        server(SimConfig {
            macs_per_cycle: 256,
            ..SimConfig::default()
        })
    };
    assert!(matches!(
        other().with_tuning_table(table).err(),
        Some(Error::Table(TableError::OtherHal { .. }))
    ));
    let mut corrupt = table.to_vec();
    corrupt[40] ^= 1;
    assert!(matches!(
        other().with_tuning_table(&corrupt).err(),
        Some(Error::Table(TableError::Checksum { .. }))
    ));
    let mut none = [0u8; 64];
    assert_eq!(other().export_tuning(&mut none), Ok(32));
}

#[test]
fn the_budget_bounds_measuring_and_auto_is_always_timed() {
    let op = kws_conv0();
    // Room for one candidate (a warm-up and three samples): only `Auto` is timed.
    let tight = TuneConfig {
        max_measurements: 4,
        ..TuneConfig::default()
    };
    let ch = tuned(SimConfig::default(), TuneMode::Tune, tight);
    cycles_of(&ch, &op);
    let auto_cycles = cycles_of(&ch, &op);
    let s = stats(&ch);
    assert_eq!((s.tuning_runs, s.measurements), (1, 4), "{s:?}");
    let default = channel(SimConfig::default());
    assert_eq!(auto_cycles, cycles_of(&default, &op), "the winner is Auto");
}

#[test]
fn a_key_is_claimed_before_it_is_measured_and_never_tuned_twice() {
    // The candidates of kws's first convolution, in the order they are timed: `Auto` first
    // (it wins ties), im2col among them.
    let op = kws_conv0();
    let sim = server(SimConfig::default());
    let list = candidates(&op, true, true, false, |v| {
        sim.npu().supports_variant(&op, v)
    });
    assert_eq!(list[0], Candidate::Npu(Variant::Auto));
    assert!(list.contains(&Candidate::Npu(Variant::Im2col)));
    // The first dispatch claims the key and measures it (a miss); every later one hits, from
    // any operands of that shape, and nothing is measured again.
    let ch = tuned(SimConfig::default(), TuneMode::Tune, TuneConfig::default());
    let client = ComputeClient::new(&ch);
    for _ in 0..3 {
        output_of(&client, &op, |i, o| client.execute(&op, i, o));
    }
    let s = stats(&ch);
    assert_eq!((s.misses, s.tuning_runs, s.hits, s.fallbacks), (1, 1, 2, 0));
}

/// An int8 ADD of `len` elements: no block or im2col applies, so its only candidates are
/// `Auto` and the CPU.
fn add(len: u32) -> Op {
    let q = q(0.05, 0);
    Op::AddI8(AddI8 {
        len,
        params: npu_kernels::int8::AddParams::new(q, q, q, Activation::None).unwrap(),
    })
}

#[test]
fn ops_with_one_way_to_run_are_never_tuned() {
    // Without a CPU model the simulator's clock does not see CPU work, so the CPU is not a
    // candidate and an ADD has one way to run.
    let ch = channel(SimConfig {
        cpu: None,
        ..SimConfig::default()
    });
    assert!(!ch.with(|s| s.npu().clock_counts_cpu()).unwrap());
    let ch = tuned(
        SimConfig {
            cpu: None,
            ..SimConfig::default()
        },
        TuneMode::Tune,
        TuneConfig::default(),
    );
    let client = ComputeClient::new(&ch);
    output_of(&client, &add(64), |i, o| client.execute(&add(64), i, o));
    assert_eq!(stats(&ch), TuneStats::default());
    // The same where the config leaves the CPU out.
    let no_cpu = TuneConfig {
        cpu_max_work: None,
        ..TuneConfig::default()
    };
    let ch = tuned(SimConfig::default(), TuneMode::Tune, no_cpu);
    let client = ComputeClient::new(&ch);
    output_of(&client, &add(64), |i, o| client.execute(&add(64), i, o));
    assert_eq!(stats(&ch), TuneStats::default());
}

#[test]
fn the_cpu_is_timed_against_the_npu_and_wins_only_where_it_is_faster() {
    let op = add(256);
    let reference = untuned_output(&op);
    // The default part: the NPU's ADD costs a job's overhead and a few cycles per 8 elements,
    // the CPU's a download, the kernel and an upload. Both are timed; the NPU wins.
    let sim = server(SimConfig::default());
    assert!(sim.npu().clock_counts_cpu());
    let list = candidates(&op, true, true, true, |v| {
        sim.npu().supports_variant(&op, v)
    });
    assert_eq!(
        list.as_slice(),
        [Candidate::Npu(Variant::Auto), Candidate::Cpu]
    );
    let ch = tuned(SimConfig::default(), TuneMode::Tune, TuneConfig::default());
    let client = ComputeClient::new(&ch);
    let out = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(out, reference);
    let s = stats(&ch);
    assert_eq!(s.tuning_runs, 1, "{s:?}");
    let cpu_ops = |ch: &Channel| ch.with(|s| s.stats().cpu_ops).unwrap();
    let timed_on_cpu = cpu_ops(&ch);
    assert!(timed_on_cpu >= 2, "the CPU ran its warm-up and a sample");
    assert_eq!(
        cycles_of(&ch, &op),
        cycles_of(&channel(SimConfig::default()), &op)
    );
    assert_eq!(
        cpu_ops(&ch),
        timed_on_cpu,
        "the NPU won: later runs stay there"
    );

    // A part whose NPU jobs carry a large fixed cost (a slow command-stream start, say):
    // for a small ADD the CPU is now faster, the tuner finds it, and the bytes are the same.
    let slow_start = SimConfig {
        job_overhead_cycles: 50_000,
        ..SimConfig::default()
    };
    let ch = tuned(slow_start, TuneMode::Tune, TuneConfig::default());
    let client = ComputeClient::new(&ch);
    let out = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(out, reference);
    let before = cpu_ops(&ch);
    let cpu_cycles = cycles_of(&ch, &op);
    assert_eq!(cpu_ops(&ch), before + 1, "the CPU won: later runs go there");
    let untuned = cycles_of(&channel(slow_start), &op);
    assert!(cpu_cycles < untuned, "{cpu_cycles} < {untuned}");
}

#[test]
fn cpu_work_costs_the_simulator_time_as_its_model_says() {
    let op = add(1024);
    let model = SimConfig::default().cpu.unwrap();
    // The NPU lacks the ADD: the server runs it on the CPU and reports it.
    let fallback = |cpu| SimConfig {
        ops: npu_compute::ops::OpSet::all().without(op.kind(), op.dtype()),
        cpu,
        ..SimConfig::default()
    };
    let charged = channel(fallback(Some(model)));
    let free = channel(fallback(None));
    let with_cpu = cycles_of(&charged, &op);
    let without = cycles_of(&free, &op);
    assert_eq!(with_cpu - without, model.cycles(&op));
    let sim = charged.with(|s| s.npu().stats()).unwrap();
    assert_eq!((sim.cpu_ops, sim.cpu_cycles), (1, model.cycles(&op)));
    assert_eq!(free.with(|s| s.npu().stats().cpu_ops).unwrap(), 0);
}

#[test]
fn a_tuning_that_cannot_measure_still_runs_the_op() {
    let op = kws_conv0();
    let reference = untuned_output(&op);
    // An arena with room for the operands but not for a second output to time into.
    let device = Box::leak(Box::new(AlignedMemory::<{ 16 * 1024 }>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<{ 64 * 1024 }>::new()));
    let npu = SimNpu::new(
        device.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )
    .unwrap();
    let server = NpuServer::new(npu, MemoryConfig::default()).unwrap();
    let ch: Channel =
        RefCellChannel::new(server.with_tuning(TuneMode::Tune, TuneConfig::default()));
    let client = ComputeClient::new(&ch);
    let ins = operands(&client, &op);
    let refs: Vec<_> = ins.iter().collect();
    let need = op.operands().unwrap().output;
    let out = client.empty(need).unwrap();
    // Fill the rest of the arena so that the scratch output cannot be reserved.
    let mut filler = Vec::new();
    while let Ok(t) = client.empty(need) {
        filler.push(t);
    }
    client.execute(&op, &refs, &out).unwrap();
    let mut bytes = vec![0; need as usize];
    client.read(&out, &mut bytes).unwrap();
    assert_eq!(bytes, reference);
    let s = stats(&ch);
    assert_eq!(
        (s.misses, s.tuning_runs),
        (1, 0),
        "{s:?}: the failed tuning is recorded"
    );
    // ... and not retried.
    client.execute(&op, &refs, &out).unwrap();
    assert_eq!(stats(&ch).hits, 1);
}

/// A driver whose forced-block variant is fast and wrong: it replaces the convolution with a
/// copy of the start of its input (a bug a tuner must not reward).
struct WrongBlocks(SimNpu<'static>);

impl Shim for WrongBlocks {
    type Inner = SimNpu<'static>;
    fn inner(&self) -> &Self::Inner {
        &self.0
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.0
    }
    fn submit(
        &mut self,
        job: &npu_compute::hal::Job<'_>,
    ) -> Result<npu_compute::hal::Fence, npu_compute::hal::HalError> {
        use npu_compute::hal::{Job, JobKind, Queue, Region};
        match &job.kind {
            JobKind::Compute {
                variant: Variant::Block { .. },
                inputs,
                output,
                ..
            } => {
                let src = inputs[0];
                let len = src.len.min(output.len);
                let copy = Job {
                    kind: JobKind::Transfer {
                        src: Region { len, ..src },
                        dst: Region { len, ..*output },
                    },
                    queue: Queue::Dma,
                    deps: job.deps.clone(),
                };
                self.0.submit(&copy)
            }
            _ => self.0.submit(job),
        }
    }
}

#[test]
fn a_candidate_that_computes_other_bytes_is_never_chosen() {
    // Two servers and a wrapped simulator exceed the test thread's default stack in debug.
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(wrong_blocks_are_rejected)
        .unwrap()
        .join()
        .unwrap();
}

fn wrong_blocks_are_rejected() {
    let op = kws_conv0();
    let reference = untuned_output(&op);
    let wrong_blocks = |mode| {
        let device = Box::leak(Box::new(AlignedMemory::<{ 512 * 1024 }>::new()));
        let host = Box::leak(Box::new(AlignedMemory::<{ 64 * 1024 }>::new()));
        let sim = SimNpu::new(
            device.as_mut_slice(),
            host.as_mut_slice(),
            SimConfig::default(),
        );
        let server =
            NpuServer::new(Shimmed(WrongBlocks(sim.unwrap())), MemoryConfig::default()).unwrap();
        let ch: RefCellChannel<NpuServer<Shimmed<WrongBlocks>>> =
            RefCellChannel::new(server.with_tuning(mode, TuneConfig::default()));
        ch
    };
    // The wrong variant is far faster than any convolution: a copy of 490 bytes.
    let forced = wrong_blocks(TuneMode::Fixed(Candidate::Npu(Variant::Block {
        h: 8,
        w: 8,
    })));
    let client = ComputeClient::new(&forced);
    let wrong = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_ne!(
        wrong, reference,
        "the faulty variant does compute other bytes"
    );

    let ch = wrong_blocks(TuneMode::Tune);
    let client = ComputeClient::new(&ch);
    let tuned = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(tuned, reference);
    let s = ch.with(|s| s.tune_stats()).unwrap();
    assert_eq!(s.tuning_runs, 1, "{s:?}");
    assert!(s.rejected >= 1, "every forced block was caught: {s:?}");
    let again = output_of(&client, &op, |i, o| client.execute(&op, i, o));
    assert_eq!(again, reference, "the cached choice is a correct one");
}
