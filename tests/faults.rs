//! Hardware faults injected by the simulator, and the server's recovery from them: for every
//! kind of fault, at every job of an invoke, the invoke reports the fault (or, for the faults
//! that do no harm, succeeds with TFLM's bytes), nothing leaks (arena bytes, chunks, handles,
//! staging blocks), and the next invoke gives TFLM's bytes. Job plans and pipelined invokes
//! are cancelled cleanly, and the watchdog fires on a hang and on an overrun past its margin,
//! not within it.

mod common;

use common::shim::{Shim, Shimmed};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::{Fault, Npu};
use npu_compute::server::{ComputeServer, WatchdogConfig};
use npu_compute::Error;
use npu_sim::runner::{self, leak_aligned, ModelChannel, SimGraph};
use npu_sim::{FaultKind, FaultPlan, FaultRule, SimConfig};

fn product(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/examples/models/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// A model, its first input and TFLM's output for it.
fn model(name: &str) -> (&'static [u8], Vec<u8>, Vec<u8>) {
    (
        leak_aligned(&product(name, "model.tflite")),
        product(name, "input_0.bin"),
        product(name, "expected_tflm_0.bin"),
    )
}

/// What must come back to where it was after a failed invoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Books {
    in_use: u32,
    chunks: u32,
    live_tensors: usize,
    staging_blocks: usize,
}

fn books(channel: &ModelChannel<'_>) -> Books {
    use npu_compute::channel::ComputeChannel;
    channel
        .with(|s| {
            s.sync().unwrap();
            let m = s.memory_stats();
            Books {
                in_use: m.in_use,
                chunks: m.chunks,
                live_tensors: s.live_tensors(),
                staging_blocks: s.staging_blocks(),
            }
        })
        .unwrap()
}

fn set_faults(channel: &ModelChannel<'_>, plan: FaultPlan) {
    use npu_compute::channel::ComputeChannel;
    channel.with(|s| s.npu_mut().set_faults(plan)).unwrap();
}

fn server<R>(channel: &ModelChannel<'_>, f: impl FnOnce(&mut runner::ModelServer<'_>) -> R) -> R {
    use npu_compute::channel::ComputeChannel;
    channel.with(f).unwrap()
}

/// Runs `f` with a channel over a fresh simulator.
fn with_channel<R>(config: SimConfig, f: impl FnOnce(&ModelChannel<'_>) -> R) -> R {
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    server(&channel, |s| s.set_watchdog(WatchdogConfig::ON));
    f(&channel)
}

/// The fault an invoke reported, if it failed with one.
fn fault_of(result: Result<(), GraphError>) -> Option<(Fault, bool)> {
    match result {
        Ok(()) => None,
        Err(GraphError::Compute {
            error: Error::Fault {
                fault, recovered, ..
            },
            ..
        }) => Some((fault, recovered)),
        Err(e) => panic!("not a fault: {e}"),
    }
}

/// A model's graph on a channel, its first input, TFLM's output for it and an output buffer.
struct Invokes<'c, 'a> {
    graph: SimGraph<'c, 'a>,
    input: Vec<u8>,
    expected: Vec<u8>,
    out: Vec<u8>,
}

impl<'c, 'a> Invokes<'c, 'a> {
    /// `name` prepared on `channel` and invoked `warm` times without faults (two: the first
    /// runs job by job, the second builds the job plan that later invokes replay).
    fn new(channel: &'c ModelChannel<'a>, name: &str, warm: usize) -> Self {
        let (bytes, input, expected) = model(name);
        let graph = Graph::prepare(ComputeClient::new(channel), bytes).unwrap();
        let out = vec![0u8; expected.len()];
        let mut invokes = Invokes {
            graph,
            input,
            expected,
            out,
        };
        for _ in 0..warm {
            invokes.correct(name);
        }
        invokes
    }

    /// One invoke, into an output cleared first (so that earlier bytes never pass for its).
    fn invoke(&mut self) -> Result<(), GraphError> {
        self.out.fill(0);
        self.graph.invoke(&[&self.input], &mut [&mut self.out])
    }

    /// One invoke that must give TFLM's bytes.
    fn correct(&mut self, what: &str) {
        self.invoke().unwrap();
        assert_eq!(self.out, self.expected, "{what}");
    }
}

/// Jobs one invoke submits (counted by the simulator).
fn jobs_per_invoke(
    channel: &ModelChannel<'_>,
    mut invoke: impl FnMut() -> Result<(), GraphError>,
) -> u64 {
    let before = server(channel, |s| s.npu().stats().jobs_submitted);
    invoke().unwrap();
    server(channel, |s| s.npu().stats().jobs_submitted) - before
}

/// `kind` at each job of a planned invoke of `name`: a harmful fault is reported as `expect`
/// (recovered), a harmless one leaves the invoke correct; either way nothing leaks and the
/// next invoke gives TFLM's bytes.
fn every_job_of_an_invoke(name: &str, kind: FaultKind, expect: Option<Fault>) {
    with_channel(SimConfig::default(), |channel| {
        let client = ComputeClient::new(channel);
        let mut run = Invokes::new(channel, name, 2);
        assert!(run.graph.job_plan().is_some());
        let jobs = jobs_per_invoke(channel, || run.invoke());
        assert!(jobs > 4, "{name}: {jobs} jobs");
        let clean = books(channel);
        for k in 0..jobs {
            let injected = || server(channel, |s| s.npu().stats().faults_injected.total());
            let before = injected();
            set_faults(channel, FaultPlan::one(FaultRule::at_job(kind, k)));
            let result = run.invoke();
            assert_eq!(
                injected() - before,
                1,
                "{name}: {kind} at job {k} was injected"
            );
            match (fault_of(result), expect) {
                (Some((fault, recovered)), Some(want)) => {
                    assert!(recovered, "{name}: {kind} at job {k}");
                    // A transfer's DMA fault is reported as is; its dependants as cancelled
                    // never come first.
                    assert_eq!(fault, want, "{name}: {kind} at job {k}");
                }
                (None, None) => assert_eq!(run.out, run.expected, "{name}: {kind} at job {k}"),
                (got, want) => panic!("{name}: {kind} at job {k}: got {got:?}, want {want:?}"),
            }
            set_faults(channel, FaultPlan::NONE);
            assert_eq!(books(channel), clean, "{name}: {kind} at job {k} leaked");
            run.correct(&format!("{name}: the invoke after {kind} at job {k}"));
            assert_eq!(books(channel), clean, "{name}: {kind} at job {k} leaked");
        }
        let stats = client.stats().unwrap();
        if expect.is_some() {
            assert_eq!(stats.faults, jobs as u32);
            assert_eq!(stats.recoveries, jobs as u32);
        } else {
            assert_eq!(stats.faults, 0);
        }
    });
}

#[test]
fn a_dma_error_at_any_job_is_reported_recovered_and_leaves_nothing_behind() {
    every_job_of_an_invoke("kws_dscnn", FaultKind::Dma, Some(Fault::Dma));
    every_job_of_an_invoke("convnet", FaultKind::Dma, Some(Fault::Dma));
}

#[test]
fn a_bus_error_at_any_job_is_reported_recovered_and_leaves_nothing_behind() {
    every_job_of_an_invoke("kws_dscnn", FaultKind::Bus, Some(Fault::Bus));
}

#[test]
fn a_hang_at_any_job_times_out_and_is_recovered() {
    every_job_of_an_invoke("kws_dscnn", FaultKind::Hang, Some(Fault::Timeout));
}

#[test]
fn an_overrun_past_the_margin_at_any_job_times_out_and_is_recovered() {
    // Ten times its cycles, plus more than the floor: past the default four times.
    let kind = FaultKind::Overrun {
        times: 10,
        plus: 200_000,
    };
    every_job_of_an_invoke("kws_dscnn", kind, Some(Fault::Timeout));
}

#[test]
fn an_overrun_within_the_margin_is_no_fault() {
    let kind = FaultKind::Overrun {
        times: 2,
        plus: 50_000,
    };
    every_job_of_an_invoke("kws_dscnn", kind, None);
}

#[test]
fn spurious_and_lost_interrupts_do_no_harm() {
    every_job_of_an_invoke("kws_dscnn", FaultKind::SpuriousIrq, None);
    every_job_of_an_invoke("kws_dscnn", FaultKind::LostIrq, None);
}

#[test]
fn a_fault_in_the_first_invoke_job_by_job_is_recovered_too() {
    for kind in [FaultKind::Dma, FaultKind::Hang] {
        with_channel(SimConfig::default(), |channel| {
            let client = ComputeClient::new(channel);
            let mut run = Invokes::new(channel, "kws_dscnn", 0);
            // The constants' uploads are over before the fault: a reset would lose one still
            // in flight.
            client.sync().unwrap();
            let clean = books(channel);
            set_faults(channel, FaultPlan::one(FaultRule::at_job(kind, 3)));
            assert!(fault_of(run.invoke()).is_some());
            set_faults(channel, FaultPlan::NONE);
            assert_eq!(books(channel), clean, "{kind}");
            for _ in 0..3 {
                run.correct(&kind.to_string());
            }
        });
    }
}

#[test]
fn the_fault_names_the_operator_of_the_faulted_job() {
    with_channel(SimConfig::default(), |channel| {
        let mut run = Invokes::new(channel, "kws_dscnn", 2);
        use npu_compute::ops::OpKind;
        let rule = FaultRule::on_op(FaultKind::Bus, OpKind::DepthwiseConv2d).at_most(1);
        set_faults(channel, FaultPlan::one(rule));
        // The model's first DEPTHWISE_CONV_2D (operator 1, after the first CONV_2D).
        match run.invoke() {
            Err(GraphError::Compute {
                error:
                    e @ Error::Fault {
                        fault: Fault::Bus,
                        op: Some(OpKind::DepthwiseConv2d),
                        recovered: true,
                        ..
                    },
                op_index: Some(1),
            }) => {
                let text = e.to_string();
                assert!(
                    text.contains("DEPTHWISE_CONV_2D") || text.contains("Depthwise"),
                    "{text}"
                );
                assert!(text.contains("reset"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        run.correct("after the bus error");
    });
}

/// Polls `future` to its end, running the simulated NPU to its next event and calling the
/// interrupt handler whenever it is pending (an executor of one task over the NPU's interrupt).
fn poll_to_end<F: std::future::Future>(channel: &ModelChannel<'_>, future: F) -> F::Output {
    use std::task::{Context, Poll, Waker};
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..100_000 {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        server(channel, |s| s.npu_mut().wait_for_event());
        npu_compute::channel::ComputeChannel::on_interrupt(channel);
    }
    panic!("the future never completes");
}

#[test]
fn an_async_invoke_names_the_operator_of_the_faulted_job_too() {
    use npu_compute::ops::OpKind;
    with_channel(SimConfig::default(), |channel| {
        let mut run = Invokes::new(channel, "kws_dscnn", 2);
        assert!(run.graph.job_plan().is_some());
        let rule = FaultRule::on_op(FaultKind::Bus, OpKind::DepthwiseConv2d).at_most(1);
        set_faults(channel, FaultPlan::one(rule));
        let (graph, input, out) = (&mut run.graph, &run.input, &mut run.out);
        let result = poll_to_end(channel, graph.invoke_async(&[input], &mut [out]));
        assert!(
            matches!(
                result,
                Err(GraphError::Compute {
                    op_index: Some(1),
                    error: Error::Fault {
                        fault: Fault::Bus,
                        op: Some(OpKind::DepthwiseConv2d),
                        recovered: true,
                        ..
                    },
                })
            ),
            "{result:?}"
        );
        run.correct("after the bus error");
    });
}

#[test]
fn a_tensor_a_fault_left_undefined_is_reported_not_read() {
    with_channel(SimConfig::default(), |channel| {
        let client = ComputeClient::new(channel);
        let a = client.create(&[1u8; 64]).unwrap();
        let b = client.empty(64).unwrap();
        client.sync().unwrap();
        // The copy is job 0: it faults, and `b`'s newest bytes were its.
        set_faults(
            channel,
            FaultPlan::one(FaultRule::at_job(FaultKind::Dma, 0)),
        );
        client.copy(&a, &b).unwrap();
        let mut out = [0u8; 64];
        assert!(matches!(
            client.read(&b, &mut out),
            Err(Error::Fault {
                fault: Fault::Dma,
                recovered: true,
                op: None,
                ..
            })
        ));
        assert_eq!(client.read(&b, &mut out), Err(Error::ContentsLost));
        // A job reading it is refused too; its source is intact.
        let c = client.empty(64).unwrap();
        assert_eq!(client.copy(&b, &c), Err(Error::ContentsLost));
        client.read(&a, &mut out).unwrap();
        assert_eq!(out, [1u8; 64]);
        // Written again, it is whole.
        set_faults(channel, FaultPlan::NONE);
        client.write(&b, &[2u8; 64]).unwrap();
        client.read(&b, &mut out).unwrap();
        assert_eq!(out, [2u8; 64]);
    });
}

#[test]
fn a_job_plan_in_flight_is_cancelled_cleanly_and_runs_again() {
    with_channel(SimConfig::default(), |channel| {
        let mut run = Invokes::new(channel, "convnet", 2);
        let clean = books(channel);
        // Two invokes' worth of faults, one every few jobs, the plan run again after each.
        for k in [1u64, 5, 9] {
            set_faults(
                channel,
                FaultPlan::one(FaultRule::at_job(FaultKind::Bus, k)),
            );
            assert!(fault_of(run.invoke()).is_some());
            set_faults(channel, FaultPlan::NONE);
            assert_eq!(books(channel), clean);
            run.correct(&format!("after a bus error at job {k}"));
        }
    });
}

#[test]
fn pipelined_invokes_in_flight_are_cancelled_cleanly() {
    let (bytes, input, expected) = model("kws_dscnn");
    with_channel(SimConfig::default(), |channel| {
        let client = ComputeClient::new(channel);
        let mut graph: SimGraph<'_, '_> = Graph::prepare(client, bytes).unwrap();
        let sets = [graph.io_buffers().unwrap(), graph.io_buffers().unwrap()];
        let read = |k: usize| client.host_ref(sets[k].output(0).unwrap(), |b| b.to_vec());
        for io in &sets {
            client
                .host_mut(io.input(0).unwrap(), |b| b.copy_from_slice(&input))
                .unwrap();
        }
        for frame in 0..4 {
            graph.submit(&sets[frame % 2]).unwrap();
        }
        assert_eq!(read(0).unwrap(), expected);
        assert_eq!(read(1).unwrap(), expected);
        let clean = books(channel);
        let jobs = {
            let before = server(channel, |s| s.npu().stats().jobs_submitted);
            graph.submit(&sets[0]).unwrap();
            client.sync().unwrap();
            server(channel, |s| s.npu().stats().jobs_submitted) - before
        };
        // A fault in the first of two invokes in flight: both are abandoned.
        set_faults(
            channel,
            FaultPlan::one(FaultRule::at_job(FaultKind::Dma, jobs / 2)),
        );
        graph.submit(&sets[0]).unwrap();
        graph.submit(&sets[1]).unwrap();
        assert!(matches!(
            read(0),
            Err(Error::Fault {
                fault: Fault::Dma,
                recovered: true,
                ..
            })
        ));
        assert_eq!(read(1), Err(Error::ContentsLost));
        set_faults(channel, FaultPlan::NONE);
        assert_eq!(books(channel), clean);
        for frame in 0..4 {
            graph.submit(&sets[frame % 2]).unwrap();
        }
        assert_eq!(read(0).unwrap(), expected);
        assert_eq!(read(1).unwrap(), expected);
        assert_eq!(books(channel), clean);
    });
}

#[test]
fn the_watchdog_fires_past_its_margin_and_not_within_it() {
    // The first CONV_2D of the model, predicted by the simulator at 27,769 cycles (its weights'
    // prefetch included), scheduled at 25,001; the margin 100 % and no floor: a deadline of
    // 55,538 cycles from its start.
    let config = WatchdogConfig {
        enabled: true,
        margin_percent: 100,
        min_cycles: 0,
        default_job_cycles: 0,
    };
    let sim = SimConfig {
        // Ticks finer than any job, so a hang is seen at once.
        idle_tick_cycles: 100,
        ..SimConfig::default()
    };
    for (times, plus, fires) in [
        (1, 0, false),
        (2, 0, false),
        (2, 5_000, false),
        (2, 6_000, true),
        (3, 0, true),
    ] {
        with_channel(sim, |channel| {
            server(channel, |s| s.set_watchdog(config));
            let mut run = Invokes::new(channel, "kws_dscnn", 2);
            let kind = FaultKind::Overrun { times, plus };
            let rule = FaultRule::on_op(kind, npu_compute::ops::OpKind::Conv2d).at_most(1);
            set_faults(channel, FaultPlan::one(rule));
            let result = run.invoke();
            assert_eq!(
                fault_of(result),
                fires.then_some((Fault::Timeout, true)),
                "{times}x + {plus}"
            );
            set_faults(channel, FaultPlan::NONE);
            run.correct(&format!("after {times}x + {plus}"));
        });
    }
}

#[test]
fn a_disabled_watchdog_lets_an_overrun_complete() {
    with_channel(SimConfig::default(), |channel| {
        server(channel, |s| {
            s.set_watchdog(WatchdogConfig {
                enabled: false,
                ..WatchdogConfig::ON
            })
        });
        let client = ComputeClient::new(channel);
        let mut run = Invokes::new(channel, "kws_dscnn", 0);
        let kind = FaultKind::Overrun {
            times: 50,
            plus: 1_000_000,
        };
        set_faults(channel, FaultPlan::one(FaultRule::at_job(kind, 5)));
        run.correct("a 50x overrun");
        assert_eq!(client.stats().unwrap().faults, 0);
    });
}

#[test]
fn without_faults_the_watchdog_changes_no_cycle() {
    // The same invokes with the watchdog on and off end at the same cycle.
    let (bytes, input, _) = model("convnet");
    let end = |enabled: bool| {
        with_channel(SimConfig::default(), |channel| {
            server(channel, |s| {
                s.set_watchdog(WatchdogConfig {
                    enabled,
                    ..WatchdogConfig::ON
                })
            });
            let client = ComputeClient::new(channel);
            let mut graph: SimGraph<'_, '_> = Graph::prepare(client, bytes).unwrap();
            let mut out = vec![0u8; graph.output_sizes().next().unwrap() as usize];
            for _ in 0..3 {
                graph.invoke(&[&input], &mut [&mut out]).unwrap();
            }
            (server(channel, |s| s.npu().now()), client.stats().unwrap())
        })
    };
    assert_eq!(end(true), end(false));
}

/// The simulator behind a driver that cannot reset the NPU (the HAL's default `reset`).
struct NoReset<'a>(npu_sim::SimNpu<'a>);

impl<'a> Shim for NoReset<'a> {
    type Inner = npu_sim::SimNpu<'a>;
    fn inner(&self) -> &Self::Inner {
        &self.0
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.0
    }
    fn reset(&mut self) -> Result<(), npu_compute::hal::HalError> {
        Err(npu_compute::hal::HalError::ResetUnsupported)
    }
}

#[test]
fn a_driver_that_cannot_reset_is_reported_as_not_recovered() {
    use npu_compute::channel::RefCellChannel;
    use npu_compute::memory::MemoryConfig;
    use npu_compute::server::NpuServer;
    let mut device = vec![0u128; 4096];
    let mut host = vec![0u128; 1024];
    let sim = npu_sim::SimNpu::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        SimConfig::default(),
    )
    .unwrap();
    let server: NpuServer<_> =
        NpuServer::new(Shimmed(NoReset(sim)), MemoryConfig::default()).unwrap();
    let channel: RefCellChannel<_> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let a = client.create(&[1u8; 64]).unwrap();
    let b = client.empty(64).unwrap();
    client.sync().unwrap();
    {
        use npu_compute::channel::ComputeChannel;
        channel
            .with(|s| {
                s.npu_mut()
                    .0
                     .0
                    .set_faults(FaultPlan::one(FaultRule::at_job(FaultKind::Dma, 0)))
            })
            .unwrap();
    }
    client.copy(&a, &b).unwrap();
    let mut out = [0u8; 64];
    let e = client.read(&b, &mut out).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Fault {
                fault: Fault::Dma,
                recovered: false,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("cannot reset"), "{e}");
    let stats = client.stats().unwrap();
    assert_eq!((stats.faults, stats.recoveries), (1, 0));
}
