//! The `async` API: `read_async`, `sync_async` and `Graph::invoke_async`, woken from the NPU
//! interrupt (`ComputeChannel::on_interrupt`), against the blocking forms.
//!
//! The simulator raises no interrupt by itself, so the tests play the hardware's part, as the
//! client's `futures` module docs describe: a minimal executor polls the future, and while it
//! is pending, runs the simulated NPU to its next event and calls the interrupt handler; it
//! polls again only when the future's waker was woken, as a real executor does, so a lost
//! wake-up fails the test instead of being papered over by polling.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use npu_compute::channel::{ComputeChannel, CriticalSectionChannel, WAKERS};
use npu_compute::client::ComputeClient;
use npu_compute::graph::Graph;
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_compute::ops::{AddF32, Op, ReluF32};
use npu_compute::server::{NpuServer, ServerStats};
use npu_sim::runner::{self, leak_aligned, ModelChannel, SimGraph};
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Count {
    fn take(&self) -> usize {
        self.0.swap(0, Ordering::SeqCst)
    }
}

/// What running a future took.
struct Run<T> {
    output: T,
    /// Polls, the last (ready) one included.
    polls: usize,
}

/// Runs `future` to completion as an executor of one task would, with `interrupt` as the
/// NPU: each time the future is pending, `interrupt` runs the simulated NPU to its next event
/// and calls the channel's interrupt handler, returning whether a job was still in flight
/// (else the future is waiting for nothing: it would hang). The future must have been woken
/// by then (and not before), or the test fails.
fn block_on<F: Future>(future: F, mut interrupt: impl FnMut() -> bool) -> Run<F::Output> {
    let count = Arc::new(Count::default());
    let waker = Waker::from(count.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut polls = 0;
    loop {
        polls += 1;
        assert!(polls < 100_000, "the future never completes");
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Run { output, polls };
        }
        assert_eq!(count.take(), 0, "woken while pending, before any interrupt");
        assert!(interrupt(), "pending while no job is in flight");
        assert_eq!(
            count.take(),
            1,
            "the interrupt handler wakes the pending task"
        );
    }
}

/// The interrupt of the simulated NPU behind a runner's channel (see [`block_on`]).
fn sim_interrupt<'a, 'b>(channel: &'a ModelChannel<'b>) -> impl FnMut() -> bool + use<'a, 'b> {
    move || {
        let busy = channel
            .with(|s| {
                let busy = s.npu().in_flight() > 0;
                s.npu_mut().wait_for_event();
                busy
            })
            .unwrap();
        channel.on_interrupt();
        busy
    }
}

fn now(channel: &ModelChannel<'_>) -> u64 {
    channel.with(|s| s.npu().now()).unwrap()
}

fn product(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/examples/models/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A stack over fresh memories for `f`.
fn with_channel<R>(f: impl FnOnce(&ModelChannel<'_>) -> R) -> R {
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 16 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, SimConfig::default()).unwrap();
    f(&channel)
}

/// Submits `relu(a + b)` over 64 values into a new tensor; returns it.
fn submit_work<'c, 'a>(
    client: ComputeClient<'c, ModelChannel<'a>>,
) -> npu_compute::client::Tensor<'c, ModelChannel<'a>> {
    let a: Vec<f32> = (0..64).map(|i| i as f32 - 32.0).collect();
    let b: Vec<f32> = (0..64).map(|i| (i % 7) as f32 * 0.5).collect();
    let ta = client.create_f32(&a).unwrap();
    let tb = client.create_f32(&b).unwrap();
    let sum = client.empty(256).unwrap();
    let out = client.empty(256).unwrap();
    client
        .execute(Op::AddF32(AddF32 { len: 64 }), &[&ta, &tb], &sum)
        .unwrap();
    client
        .execute(Op::ReluF32(ReluF32 { len: 64 }), &[&sum], &out)
        .unwrap();
    out
}

#[test]
fn read_async_gives_the_bytes_and_cycles_of_read_and_is_pending_until_the_jobs_finish() {
    let (want, want_cycles, want_stats) = with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let out = submit_work(client);
        let mut bytes = vec![0u8; 256];
        client.read(&out, &mut bytes).unwrap();
        (bytes, now(channel), client.stats().unwrap())
    });
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let out = submit_work(client);
        let mut bytes = vec![0u8; 256];
        let run = block_on(client.read_async(&out, &mut bytes), sim_interrupt(channel));
        run.output.unwrap();
        // Two uploads, two jobs and the download: pending through several interrupts.
        assert!(run.polls >= 3, "polls: {}", run.polls);
        assert_eq!(bytes, want);
        assert_eq!(now(channel), want_cycles, "the same NPU cycles");
        let stats = client.stats().unwrap();
        assert_eq!(stats.waits, 0, "the CPU never slept in the server");
        assert_eq!(
            ServerStats {
                waits: want_stats.waits,
                ..stats
            },
            want_stats
        );
        let mut floats = [0f32; 64];
        let again = block_on(
            client.read_f32_async(&out, &mut floats),
            sim_interrupt(channel),
        );
        again.output.unwrap();
        assert_eq!(bytemuck::cast_slice::<f32, u8>(&floats), &want[..]);
    });
}

#[test]
fn sync_async_is_pending_until_every_job_is_over() {
    let want_cycles = with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let _out = submit_work(client);
        client.sync().unwrap();
        now(channel)
    });
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let out = submit_work(client);
        assert!(client.try_sync().is_err(), "WouldBlock: jobs are running");
        let run = block_on(client.sync_async(), sim_interrupt(channel));
        run.output.unwrap();
        assert!(run.polls >= 3, "polls: {}", run.polls);
        assert_eq!(channel.with(|s| s.npu().in_flight()).unwrap(), 0);
        assert_eq!(now(channel), want_cycles, "the same NPU cycles as sync");
        assert_eq!(client.try_sync(), Ok(()));
        // Nothing to wait for: ready at the first poll.
        let idle = block_on(client.sync_async(), || panic!("no interrupt needed"));
        assert_eq!(idle.polls, 1);
        let mut bytes = [0u8; 256];
        assert_eq!(
            client.try_read(&out, &mut bytes),
            Err(nb::Error::WouldBlock)
        );
    });
}

#[test]
fn invoke_async_gives_tflm_bytes_with_the_cycles_of_invoke() {
    let kws = leak_aligned(&product("kws_dscnn", "model.tflite"));
    // The first invoke runs job by job, the second builds the job plan, the third replays it.
    let cases: Vec<(Vec<u8>, Vec<u8>)> = (0..3)
        .map(|k| {
            (
                product("kws_dscnn", &format!("input_{k}.bin")),
                product("kws_dscnn", &format!("expected_tflm_{k}.bin")),
            )
        })
        .collect();
    let blocking: Vec<(u64, ServerStats)> = with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
        cases
            .iter()
            .map(|(input, want)| {
                let mut out = vec![0u8; want.len()];
                let start = now(channel);
                graph.invoke(&[input], &mut [&mut out]).unwrap();
                assert_eq!(&out, want);
                (now(channel) - start, client.stats().unwrap())
            })
            .collect()
    });
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
        for (k, (input, want)) in cases.iter().enumerate() {
            let mut out = vec![0u8; want.len()];
            let start = now(channel);
            let run = block_on(
                graph.invoke_async(&[input], &mut [&mut out]),
                sim_interrupt(channel),
            );
            run.output.unwrap();
            assert_eq!(&out, want, "invoke {k}: TFLM's bytes");
            assert!(run.polls > 1, "invoke {k}: pending while the NPU runs");
            let (cycles, stats) = blocking[k];
            assert_eq!(
                now(channel) - start,
                cycles,
                "invoke {k}: the cycles of invoke"
            );
            let got = client.stats().unwrap();
            assert_eq!(
                got.waits, 0,
                "invoke {k}: the CPU never slept in the server"
            );
            assert_eq!(
                ServerStats {
                    waits: stats.waits,
                    ..got
                },
                stats,
                "invoke {k}: the jobs and transfers of invoke"
            );
        }
        assert!(
            graph.job_plan().is_some(),
            "the later invokes replayed a plan"
        );
    });
}

#[test]
fn dropping_a_pending_read_leaks_nothing() {
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let before = client.memory_stats().unwrap();
        // Far more dropped reads than staging blocks (16) or host memory (16 KiB) could hold.
        for _ in 0..100 {
            let out = submit_work(client);
            let mut bytes = [0u8; 256];
            {
                let read = pin!(client.read_async(&out, &mut bytes));
                let mut cx = Context::from_waker(Waker::noop());
                assert!(read.poll(&mut cx).is_pending());
            }
            drop(out);
            // The jobs run on without anyone waiting.
            assert!(channel.with(|s| s.npu().in_flight()).unwrap() > 0);
        }
        client.sync().unwrap();
        let after = client.memory_stats().unwrap();
        assert_eq!(after.in_use, before.in_use, "no device bytes left in use");
        assert_eq!(channel.with(|s| s.live_tensors()).unwrap(), 0);
        // Staging memory is all back: a read of every byte it has still works.
        let big = client.create(&vec![7u8; 16 * 1024]).unwrap();
        let mut back = vec![0u8; 16 * 1024];
        client.read(&big, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 7));
    });
}

#[test]
fn a_dropped_read_forgets_its_download_and_the_next_read_starts_afresh() {
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let out = submit_work(client);
        let mut want = [0u8; 256];
        {
            let mut bytes = [0u8; 256];
            let read = pin!(client.read_async(&out, &mut bytes));
            assert!(read
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
        }
        client.read(&out, &mut want).unwrap();
        let downloads = client.stats().unwrap().downloads;
        assert_eq!(downloads, 2, "the dropped read's download was forgotten");
        assert!(want[..4] == 0f32.to_le_bytes() && want[252..] != [0; 4]);
    });
}

#[test]
fn dropping_a_pending_invoke_leaves_the_graph_consistent() {
    let kws = leak_aligned(&product("kws_dscnn", "model.tflite"));
    let input = product("kws_dscnn", "input_1.bin");
    let want = product("kws_dscnn", "expected_tflm_1.bin");
    // After three completed invokes: the figures a consistent graph has between invokes.
    let settled = |graph: &mut SimGraph, channel: &ModelChannel<'_>| {
        for _ in 0..3 {
            let mut out = vec![0u8; want.len()];
            graph.invoke(&[&input], &mut [&mut out]).unwrap();
            assert_eq!(out, want);
        }
        let client = ComputeClient::new(channel);
        client.sync().unwrap();
        (
            client.memory_stats().unwrap().in_use,
            channel.with(|s| s.live_tensors()).unwrap(),
        )
    };
    let want_figures = with_channel(|channel| {
        let mut graph: SimGraph = Graph::prepare(ComputeClient::new(channel), kws).unwrap();
        settled(&mut graph, channel)
    });
    with_channel(|channel| {
        let mut graph: SimGraph = Graph::prepare(ComputeClient::new(channel), kws).unwrap();
        // Dropped at its first poll: on the per-job path (the first invoke), the one that
        // builds the plan, and replays; many times, so that a leak would run something out.
        for k in 0..40 {
            let mut out = vec![0u8; want.len()];
            let inputs: [&[u8]; 1] = [&input];
            let mut outputs: [&mut [u8]; 1] = [&mut out];
            let invoke = pin!(graph.invoke_async(&inputs, &mut outputs));
            let pending = invoke
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending();
            assert!(pending, "drop {k}: pending once submitted");
        }
        assert_eq!(settled(&mut graph, channel), want_figures);
    });
    // A graph that keeps the per-job path for good (replay off): its activations are
    // released by the dropped future.
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
        graph.set_replay(false);
        let mut out = vec![0u8; want.len()];
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        client.sync().unwrap();
        let between = channel.with(|s| s.live_tensors()).unwrap();
        for _ in 0..40 {
            let inputs: [&[u8]; 1] = [&input];
            let mut outputs: [&mut [u8]; 1] = [&mut out];
            {
                let invoke = pin!(graph.invoke_async(&inputs, &mut outputs));
                assert!(invoke
                    .poll(&mut Context::from_waker(Waker::noop()))
                    .is_pending());
                assert!(
                    channel.with(|s| s.live_tensors()).unwrap() > between,
                    "the invoke's activations are alive while it is pending"
                );
            }
            assert_eq!(
                channel.with(|s| s.live_tensors()).unwrap(),
                between,
                "the activations were released with the future"
            );
        }
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        assert_eq!(out, want);
    });
}

/// A stack on a `CriticalSectionChannel` (what an interrupt handler reaches), over `f`.
type CsServer<'a> = NpuServer<SimNpu<'a>>;

#[test]
fn the_interrupt_wakes_every_waiting_task_through_a_critical_section_channel() {
    let mut device = AlignedMemory::<65536>::new();
    let mut host = AlignedMemory::<16384>::new();
    let npu: SimNpu = SimNpu::new(
        device.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )
    .unwrap();
    let server: CsServer<'_> = NpuServer::new(npu, MemoryConfig::default()).unwrap();
    let channel: CriticalSectionChannel<CsServer<'_>> = CriticalSectionChannel::new(server);
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0, -2.0, 3.0, -4.0]).unwrap();
    let tensors: Vec<_> = (0..WAKERS + 1).map(|_| client.empty(16).unwrap()).collect();
    for t in &tensors {
        client
            .execute(Op::ReluF32(ReluF32 { len: 4 }), &[&a], t)
            .unwrap();
    }
    // One task per tensor, each with its own waker: one more than the channel holds.
    let counts: Vec<Arc<Count>> = tensors.iter().map(|_| Arc::default()).collect();
    let mut outs = vec![[0u8; 16]; tensors.len()];
    let mut reads: Vec<_> = tensors
        .iter()
        .zip(outs.iter_mut())
        .map(|(t, out)| Box::pin(client.read_async(t, out)))
        .collect();
    let mut done = vec![false; reads.len()];
    for (k, read) in reads.iter_mut().enumerate() {
        let waker = Waker::from(counts[k].clone());
        assert!(read
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
    }
    // The last registration evicted the oldest waker, which was woken to poll again.
    assert_eq!(counts[0].take(), 1);
    assert!(counts[1..].iter().all(|c| c.take() == 0));
    let waker = Waker::from(counts[0].clone());
    assert!(reads[0]
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    // It evicted the next oldest, woken to poll again (the loop below polls it).
    assert_eq!(counts[1].0.load(Ordering::SeqCst), 1);
    let mut interrupts = 0;
    while done.iter().any(|d| !d) {
        channel.with(|s| s.npu_mut().wait_for_event()).unwrap();
        channel.on_interrupt();
        interrupts += 1;
        assert!(interrupts < 1000);
        for (k, read) in reads.iter_mut().enumerate() {
            // An executor polls only the tasks that were woken.
            if done[k] || counts[k].take() == 0 {
                continue;
            }
            let waker = Waker::from(counts[k].clone());
            if let Poll::Ready(r) = read.as_mut().poll(&mut Context::from_waker(&waker)) {
                r.unwrap();
                done[k] = true;
            }
        }
    }
    drop(reads);
    for out in &outs {
        let values: &[f32] = bytemuck::cast_slice(out);
        assert_eq!(values, [1.0, 0.0, 3.0, 0.0]);
    }
}

#[test]
fn a_read_left_pending_never_returns_bytes_older_than_a_later_plan_run() {
    with_channel(|channel| {
        let client = ComputeClient::new(channel);
        let x = client.create_f32(&[1.0, 2.0]).unwrap();
        let (y, z) = (client.empty(8).unwrap(), client.empty(8).unwrap());
        let add = Op::AddF32(AddF32 { len: 2 });
        let mut plan: npu_compute::client::JobPlan<_, 8, 8> = client.job_plan();
        plan.push(&add, &[&x, &x], &y).unwrap(); // y = 2x
        plan.push(&add, &[&y, &x], &z).unwrap(); // z = 3x
        plan.run(&[&add, &add]).unwrap();
        let mut out = [0f32; 2];
        {
            // A read of z left pending (a dropped future): its download is under way.
            let read = pin!(client.read_f32_async(&z, &mut out));
            assert!(read
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending());
        }
        client
            .write(&x, bytemuck::cast_slice(&[10.0f32, 20.0]))
            .unwrap();
        plan.run(&[&add, &add]).unwrap();
        client.read_f32(&z, &mut out).unwrap();
        assert_eq!(out, [30.0, 60.0], "the bytes of the second run");
    });
}
