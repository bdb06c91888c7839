//! Fault injection ([`npu_sim::faults`]) and the simulator's reset: every fault kind, every
//! trigger, how each is reported and what a reset leaves behind.

mod common;

use common::*;
use npu_compute::hal::{Cycles, Fault, Fence, HalError, Job, JobKind, Npu, Queue, Region, Variant};
use npu_compute::ops::{Conv2dI8, Op, OpKind, ReluF32};
use npu_kernels::int8::{Activation, Conv2dParams, Conv2dShape, Nhwc, Padding, Quant, Window2d};
use npu_sim::faults::{FAULT_FILL, NEVER};
use npu_sim::{
    parse_faults, AlignedMemory, FaultCounts, FaultKind, FaultPlan, FaultRule, SimConfig, SimNpu,
    SimStats, CODE_DEPENDENCY_FAILED, CODE_FAULT_CANCELLED, CODE_USER_BASE,
};

/// The default part with `plan`.
fn with(plan: FaultPlan) -> SimConfig {
    SimConfig {
        faults: plan,
        ..SimConfig::default()
    }
}

fn one(rule: FaultRule) -> SimConfig {
    with(FaultPlan::one(rule))
}

fn fault(fence: Fence, fault: Fault) -> Result<(), HalError> {
    Err(HalError::Fault { fence, fault })
}

/// A 64-byte host → device copy at `at` (both sides).
fn upload(at: u32, after: &[Fence]) -> Job<'static> {
    transfer(Region::host(at, 64), Region::device(at, 64), after)
}

/// ReLU of 16 floats from device `from` to device `to`, on unit 0.
fn relu(from: u32, to: u32, after: &[Fence]) -> Job<'static> {
    compute(
        Op::ReluF32(ReluF32 { len: 16 }),
        &[Region::device(from, 64)],
        Region::device(to, 64),
        Queue::Unit(0),
        after,
    )
}

/// Upload, ReLU, download: three dependent jobs (indices 0, 1, 2 on a fresh simulator).
fn chain(npu: &mut SimNpu<'_>) -> [Fence; 3] {
    let values: Vec<f32> = (0..16).map(|i| i as f32 - 8.0).collect();
    npu.host_memory()[..64].copy_from_slice(&f32_bytes(&values));
    let up = npu.submit(&upload(0, &[])).unwrap();
    let r = npu.submit(&relu(0, 64, &[up])).unwrap();
    let down = npu
        .submit(&transfer(
            Region::device(64, 64),
            Region::host(64, 64),
            &[r],
        ))
        .unwrap();
    [up, r, down]
}

/// The ReLU of the chain's input, as the chain leaves it in host memory.
fn chain_output() -> Vec<u8> {
    f32_bytes(
        &(0..16)
            .map(|i| (i as f32 - 8.0).max(0.0))
            .collect::<Vec<_>>(),
    )
}

#[test]
fn without_faults_nothing_changes() {
    // No plan, a plan whose rule never fires, and a rule allowed no firing: the same run.
    let plans = [
        FaultPlan::NONE,
        FaultPlan::one(FaultRule::at_job(FaultKind::Hang, 1_000_000)),
        FaultPlan::one(FaultRule::always(FaultKind::Dma).at_most(0)),
        FaultPlan::one(FaultRule::with_chance(FaultKind::Bus, 0, 7)),
    ];
    let mut runs = Vec::new();
    for plan in plans {
        let mut npu = traced(with(plan), 16);
        let [_, _, down] = chain(&mut npu);
        let mut wakes = Vec::new();
        while npu.poll(down) == Err(nb::Error::WouldBlock) {
            npu.wait_for_event();
            wakes.push(npu.now());
        }
        assert_eq!(&npu.host_memory()[64..128], &chain_output()[..]);
        let stats = npu.stats();
        assert_eq!(stats.faults_injected, FaultCounts::default());
        assert_eq!((stats.resets, stats.jobs_abandoned), (0, 0));
        runs.push((stats, trace(&npu), wakes));
    }
    assert!(runs.windows(2).all(|w| w[0] == w[1]));
    // Woken at each job's end, as always: 40 (the upload), then the ReLU, then the download.
    assert_eq!(runs[0].2.len(), 3);
    assert_eq!(runs[0].2[0], 40);
}

#[test]
fn jobs_on_a_saturated_clock_end_and_are_not_taken_for_hung() {
    // The clock saturates at u64::MAX (NEVER too): jobs submitted then still run and retire,
    // short of NEVER, rather than waiting for ever as if behind a hung job.
    let mut npu = traced(SimConfig::default(), 16);
    npu.advance(Cycles::MAX);
    let [up, r, down] = chain(&mut npu);
    for fence in [up, r, down] {
        let (start, end) = npu.scheduled(fence).expect("in flight");
        assert!(start < NEVER && end < NEVER, "{start} {end}");
    }
    let mut wakes = 0;
    while npu.poll(down) == Err(nb::Error::WouldBlock) {
        npu.wait_for_event();
        wakes += 1;
        assert!(wakes < 10, "the chain never completes");
    }
    assert_eq!(&npu.host_memory()[64..128], &chain_output()[..]);
    assert_eq!(npu.now(), Cycles::MAX);
}

#[test]
fn a_dma_fault_is_reported_on_its_fence_at_its_end_and_cancels_its_dependants() {
    let mut npu = traced(one(FaultRule::at_job(FaultKind::Dma, 1)), 16);
    npu.device_memory_mut()[64..128].fill(0x11);
    let [up, r, down] = chain(&mut npu);
    let (_, end) = npu.scheduled(r).expect("in flight");
    // Nothing is reported before the job's end.
    npu.run_until_idle();
    assert!(npu.now() >= end);
    assert_eq!(npu.poll(up), Ok(()));
    assert_eq!(npu.poll(r).map_err(nb_error), fault(r, Fault::Dma));
    assert_eq!(
        npu.poll(down).map_err(nb_error),
        fault(down, Fault::Cancelled)
    );
    // The faulted job left its pattern; the cancelled download copied nothing.
    assert_eq!(&npu.device_memory()[64..128], &[FAULT_FILL; 64]);
    assert_eq!(&npu.host_memory()[64..128], &[0; 64]);
    // Marked in the trace.
    assert_eq!(entry(&npu, r).fault(), Some(Fault::Dma));
    assert_eq!(entry(&npu, down).fault(), Some(Fault::Cancelled));
    assert_eq!(entry(&npu, up).fault(), None);
    let s = npu.stats();
    assert_eq!(s.faults_injected.dma, 1);
    assert_eq!(s.faults_injected.total(), 1);
    assert_eq!((s.jobs_completed, s.jobs_failed), (1, 2));
    // Submitted after the fault: cancelled too, since it depends on the faulted job.
    let late = npu.submit(&upload(128, &[r])).unwrap();
    assert_eq!(wait(&mut npu, late), fault(late, Fault::Cancelled));
    // Independent work goes on.
    let fine = npu.submit(&upload(192, &[])).unwrap();
    assert_eq!(wait(&mut npu, fine), Ok(()));
}

fn nb_error(e: nb::Error<HalError>) -> HalError {
    match e {
        nb::Error::Other(e) => e,
        nb::Error::WouldBlock => panic!("still in flight"),
    }
}

#[test]
fn a_fault_halts_its_queue_until_reset() {
    let mut npu = sim(SimConfig {
        execution_units: 2,
        ..one(FaultRule::at_job(FaultKind::Dma, 0))
    });
    let bad = npu.submit(&upload(0, &[])).unwrap();
    // Queued behind it, with no dependency on it: it does not run.
    let behind = npu.submit(&upload(64, &[])).unwrap();
    npu.host_memory()[64..128].fill(9);
    let elsewhere = npu
        .submit(&Job {
            queue: Queue::Unit(1),
            ..upload(128, &[])
        })
        .unwrap();
    assert_eq!(wait(&mut npu, behind), fault(behind, Fault::Cancelled));
    assert_eq!(npu.poll(bad).map_err(nb_error), fault(bad, Fault::Dma));
    assert_eq!(wait(&mut npu, elsewhere), Ok(()));
    assert_eq!(&npu.device_memory()[64..128], &[0; 64], "nothing copied");
    // Submitted after the fault, before a reset: cancelled too.
    let later = npu.submit(&upload(64, &[])).unwrap();
    assert_eq!(wait(&mut npu, later), fault(later, Fault::Cancelled));
    npu.reset().unwrap();
    let after = npu.submit(&upload(64, &[])).unwrap();
    assert_eq!(wait(&mut npu, after), Ok(()));
    assert_eq!(&npu.device_memory()[64..128], &[9; 64]);
    let s = npu.stats();
    assert_eq!((s.jobs_completed, s.jobs_failed), (2, 3));
}

#[test]
fn a_faulted_job_is_reported_only_from_its_end() {
    let mut npu = sim(one(FaultRule::at_job(FaultKind::Bus, 0)));
    let t = npu.submit(&upload(0, &[])).unwrap();
    let (_, end) = npu.scheduled(t).unwrap();
    npu.advance(end - 1);
    assert_eq!(npu.poll(t), Err(nb::Error::WouldBlock));
    npu.wait_for_event();
    assert_eq!(npu.now(), end);
    assert_eq!(wait(&mut npu, t), fault(t, Fault::Bus));
    // A transfer's destination gets the pattern.
    assert_eq!(&npu.device_memory()[..64], &[FAULT_FILL; 64]);
}

#[test]
fn a_dependency_failed_with_a_code_still_reports_dependency_failed() {
    // A fault on a job whose dependency already failed is not injected: it never runs.
    let mut npu = sim(one(FaultRule::at_job(FaultKind::Dma, 1)));
    npu.fail_next_compute_job(CODE_USER_BASE);
    let r = npu.submit(&relu(0, 64, &[])).unwrap();
    npu.run_until_idle();
    let down = npu
        .submit(&transfer(Region::device(64, 64), Region::host(0, 64), &[r]))
        .unwrap();
    assert_eq!(
        wait(&mut npu, down),
        Err(HalError::JobFailed {
            fence: down,
            code: CODE_DEPENDENCY_FAILED
        })
    );
    assert_eq!(npu.stats().faults_injected.total(), 0);
}

#[test]
fn a_bus_error_on_a_region_faults_the_jobs_touching_it() {
    // Device bytes 64..128: the ReLU's output and the download's source.
    let mut npu = traced(
        one(FaultRule::on_region(FaultKind::Bus, Region::device(96, 16))),
        16,
    );
    let [up, r, down] = chain(&mut npu);
    npu.run_until_idle();
    assert_eq!(npu.poll(up), Ok(()));
    assert_eq!(npu.poll(r).map_err(nb_error), fault(r, Fault::Bus));
    // Its dependency faulted first: the download reports the cancellation, not a second bus
    // error, though the rule fired on it too (decided at submit).
    assert_eq!(
        npu.poll(down).map_err(nb_error),
        fault(down, Fault::Cancelled)
    );
    assert_eq!(npu.stats().faults_injected.bus, 2);
    // A job elsewhere is untouched.
    let t = npu.submit(&upload(256, &[])).unwrap();
    assert_eq!(wait(&mut npu, t), Ok(()));
}

#[test]
fn an_operator_trigger_fires_on_that_operator_only() {
    let mut npu = sim(one(
        FaultRule::on_op(FaultKind::Dma, OpKind::Relu).at_most(1)
    ));
    let [up, r, _] = chain(&mut npu);
    npu.run_until_idle();
    assert_eq!(npu.poll(up), Ok(()));
    assert_eq!(npu.poll(r).map_err(nb_error), fault(r, Fault::Dma));
    // The unit is halted until the reset; then, `max=1`, the next ReLU runs.
    let halted = npu.submit(&relu(0, 128, &[])).unwrap();
    assert_eq!(wait(&mut npu, halted), fault(halted, Fault::Cancelled));
    npu.reset().unwrap();
    let again = npu.submit(&relu(0, 128, &[])).unwrap();
    assert_eq!(wait(&mut npu, again), Ok(()));
    assert_eq!(npu.stats().faults_injected.dma, 1);
}

#[test]
fn job_indices_count_from_when_the_plan_was_set() {
    let mut npu = sim(SimConfig::default());
    for i in 0..3 {
        let t = npu.submit(&upload(i * 64, &[])).unwrap();
        assert_eq!(wait(&mut npu, t), Ok(()));
    }
    npu.set_faults(FaultPlan::one(FaultRule::at_job(FaultKind::Bus, 1)));
    assert_eq!(npu.next_fault_index(), 0);
    let a = npu.submit(&upload(0, &[])).unwrap();
    let b = npu.submit(&upload(64, &[])).unwrap();
    let c = npu.submit(&upload(128, &[])).unwrap();
    npu.run_until_idle();
    assert_eq!(npu.poll(a), Ok(()));
    assert_eq!(npu.poll(b).map_err(nb_error), fault(b, Fault::Bus));
    // Behind it on the halted DMA queue.
    assert_eq!(npu.poll(c).map_err(nb_error), fault(c, Fault::Cancelled));
    assert_eq!(npu.next_fault_index(), 3);
    assert_eq!(npu.faults().rules().len(), 1);
}

/// The fences of `jobs` uploads under `plan` that fault.
fn faulted_uploads(plan: FaultPlan, jobs: u32) -> Vec<u64> {
    let mut npu = SimNpu::<64>::with_job_capacity(
        Box::leak(Box::new(AlignedMemory::<4096>::new())).as_mut_slice(),
        Box::leak(Box::new(AlignedMemory::<4096>::new())).as_mut_slice(),
        with(plan),
    )
    .unwrap();
    let mut faulted = Vec::new();
    for i in 0..jobs {
        let t = npu.submit(&upload((i % 32) * 64, &[])).unwrap();
        match wait(&mut npu, t) {
            Ok(()) => {}
            Err(HalError::Fault { fence, .. }) => {
                faulted.push(fence.0);
                npu.reset().unwrap();
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(npu.stats().faults_injected.total(), faulted.len() as u64);
    faulted
}

#[test]
fn probabilities_are_deterministic_for_a_seed() {
    let plan = |seed| FaultPlan::one(FaultRule::with_chance(FaultKind::Dma, 50_000, seed));
    let a = faulted_uploads(plan(7), 2000);
    assert_eq!(a, faulted_uploads(plan(7), 2000));
    assert_ne!(a, faulted_uploads(plan(8), 2000));
    // 5% of 2,000 is 100.
    assert!((60..140).contains(&a.len()), "{}", a.len());
    // The draw does not depend on what else happens: with a second rule before it that
    // takes job 0, the other jobs fault as before.
    let both = FaultPlan::one(FaultRule::at_job(FaultKind::Bus, 0))
        .with(FaultRule::with_chance(FaultKind::Dma, 50_000, 7))
        .unwrap();
    let mut b = faulted_uploads(both, 2000);
    assert_eq!(b.first(), Some(&0));
    b.remove(0);
    // The chance rule moved to position 1, so it draws another stream: not the same jobs.
    assert_ne!(b, a.iter().copied().filter(|&f| f != 0).collect::<Vec<_>>());
    // Written as a spec, the same plan.
    assert_eq!(parse_faults("dma@p=0.05,seed=7"), Ok(plan(7)));
}

#[test]
fn a_hung_job_blocks_until_reset_while_the_clock_ticks() {
    let config = SimConfig {
        idle_tick_cycles: 1000,
        execution_units: 2,
        ..one(FaultRule::at_job(FaultKind::Hang, 1))
    };
    let mut npu = traced(config, 16);
    let [up, r, down] = chain(&mut npu);
    assert_eq!(npu.scheduled(r).map(|(_, e)| e), Some(NEVER));
    // The download waits for it, and the DMA queue behind the download.
    assert_eq!(npu.scheduled(down).map(|(_, e)| e), Some(NEVER));
    // Another job on the same unit queues behind it forever; one on the other unit runs.
    let behind = npu.submit(&relu(0, 128, &[])).unwrap();
    let beside = npu
        .submit(&Job {
            queue: Queue::Unit(1),
            ..upload(256, &[])
        })
        .unwrap();
    assert_eq!(wait(&mut npu, beside), Ok(()));
    assert_eq!(npu.poll(up), Ok(()));
    // Waiting wakes on each tick: the clock moves, the job does not complete.
    let mut ticks = Vec::new();
    for _ in 0..5 {
        assert_eq!(npu.poll(r), Err(nb::Error::WouldBlock));
        npu.wait_for_event();
        ticks.push(npu.now());
    }
    assert_eq!(ticks, [1000, 2000, 3000, 4000, 5000]);
    assert!(!npu.irq_pending());
    // run_until_idle does not jump to the end of time.
    assert_eq!(npu.run_until_idle(), 5000);
    assert_eq!(npu.in_flight(), 3);
    assert_eq!(npu.stats().faults_injected.hang, 1);

    npu.reset().unwrap();
    for f in [r, down, behind] {
        assert_eq!(npu.poll(f).map_err(nb_error), fault(f, Fault::Cancelled));
    }
    assert_eq!(npu.poll(up), Ok(()));
    assert_eq!(npu.poll(beside), Ok(()));
    assert_eq!(npu.in_flight(), 0);
    let s = npu.stats();
    assert_eq!((s.resets, s.jobs_abandoned), (1, 3));
    assert_eq!(
        s.jobs_submitted,
        s.jobs_completed + s.jobs_failed + s.jobs_abandoned
    );
    // The hung job is traced up to the reset; the jobs that never started are not.
    let hung = entry(&npu, r);
    assert_eq!((hung.end, hung.failure), (5000, Some(CODE_FAULT_CANCELLED)));
    assert!(npu.trace().all(|e| e.fence != down && e.fence != behind));
    // With nothing in flight, waiting returns at once again.
    npu.wait_for_event();
    assert_eq!(npu.now(), 5000);
    // The chain runs again, correctly.
    let [_, r2, down2] = chain(&mut npu);
    assert_eq!(wait(&mut npu, down2), Ok(()));
    assert_eq!(npu.poll(r2), Ok(()));
    assert_eq!(&npu.host_memory()[64..128], &chain_output()[..]);
}

#[test]
fn a_dependant_of_an_abandoned_job_is_cancelled() {
    let mut npu = sim(one(FaultRule::at_job(FaultKind::Hang, 0)));
    let t = npu.submit(&upload(0, &[])).unwrap();
    npu.reset().unwrap();
    let r = npu.submit(&relu(0, 64, &[t])).unwrap();
    assert_eq!(wait(&mut npu, r), fault(r, Fault::Cancelled));
    // The next reset forgets the last one's abandoned jobs (documented): a fence then polls
    // as done, never as in flight.
    npu.reset().unwrap();
    assert_eq!(npu.poll(t), Ok(()));
    assert_eq!(npu.stats().resets, 2);
}

#[test]
fn reset_cancels_every_job_in_flight_however_many() {
    // More than the failed-fence ring holds (16): every one polls as cancelled.
    let mut npu = sim(SimConfig::default());
    let fences: Vec<Fence> = (0..30)
        .map(|i| npu.submit(&upload((i % 8) * 64, &[])).unwrap())
        .collect();
    let first_end = npu.scheduled(fences[0]).unwrap().1;
    npu.advance(first_end);
    npu.reset().unwrap();
    // The first job had ended by the reset: it completed.
    assert_eq!(npu.poll(fences[0]), Ok(()));
    for &f in &fences[1..] {
        assert_eq!(npu.poll(f).map_err(nb_error), fault(f, Fault::Cancelled));
    }
    let s = npu.stats();
    assert_eq!((s.jobs_completed, s.jobs_abandoned), (1, 29));
    // Fences go on counting up; the clock did not move.
    let next = npu.submit(&upload(0, &[])).unwrap();
    assert_eq!(next, Fence(30));
    assert_eq!(npu.scheduled(next), Some((first_end, first_end + 40)));
}

#[test]
fn reset_keeps_memory_and_retires_what_had_ended() {
    let mut npu = sim(one(FaultRule::at_job(FaultKind::LostIrq, 0)));
    npu.device_memory_mut()[512..576].fill(0x42);
    npu.host_memory()[..64].fill(7);
    let t = npu.submit(&upload(0, &[])).unwrap();
    npu.advance(1000);
    // Ended, interrupt lost, not yet seen: the reset finds it done and applies it.
    assert!(!npu.irq_pending());
    npu.reset().unwrap();
    assert_eq!(npu.poll(t), Ok(()));
    assert_eq!(&npu.device_memory()[..64], &[7; 64]);
    assert_eq!(&npu.device_memory()[512..576], &[0x42; 64]);
    assert_eq!(npu.stats().jobs_abandoned, 0);
}

/// A 3x3 convolution with its weights in flash, so that the weight pipeline prefetches them.
fn flash_conv(npu: &mut SimNpu<'static>, output_at: u32) -> Job<'static> {
    let shape = Conv2dShape {
        input: Nhwc {
            batches: 1,
            height: 16,
            width: 16,
            channels: 16,
        },
        out_channels: 32,
        filter_depth: 16,
        window: Window2d {
            filter_height: 3,
            filter_width: 3,
            stride_height: 1,
            stride_width: 1,
            dilation_height: 1,
            dilation_width: 1,
            padding: Padding::Same,
        },
    };
    let q = |scale, zero_point| Quant { scale, zero_point };
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::None).unwrap();
    let op: &'static Op = Box::leak(Box::new(Op::Conv2dI8(Conv2dI8 { shape, params })));
    // Zero input, weights and bias: valid operands (the timing does not depend on them).
    let operands = op.operands().unwrap();
    let flash = Box::leak(Box::new(AlignedMemory::<{ 16 * 1024 }>::new()));
    let segment = npu.map_flash(flash.as_slice()).unwrap();
    let input = Region::device(0, operands.inputs[0]);
    let weights = Region::flash(segment, 0, operands.inputs[1]);
    let bias = Region::device(operands.inputs[0].div_ceil(16) * 16, operands.inputs[2]);
    Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Auto,
            inputs: heapless::Vec::from_slice(&[input, weights, bias]).unwrap(),
            output: Region::device(output_at, operands.output),
            scratch: None,
        },
        queue: Queue::Unit(0),
        deps: heapless::Vec::new(),
    }
}

/// Device memory big enough for the convolutions.
fn big_sim(config: SimConfig) -> SimNpu<'static> {
    let device = Box::leak(Box::new(AlignedMemory::<{ 64 * 1024 }>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<1024>::new()));
    SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), config).unwrap()
}

#[test]
fn after_a_reset_a_job_runs_and_times_as_on_a_fresh_npu() {
    let alone = {
        let mut fresh = big_sim(SimConfig::default());
        let job = flash_conv(&mut fresh, 32 * 1024);
        let f = fresh.submit(&job).unwrap();
        let (start, end) = fresh.scheduled(f).unwrap();
        assert_eq!(start, 0);
        end
    };
    for reset in [false, true] {
        let mut npu = big_sim(SimConfig::default());
        let job = flash_conv(&mut npu, 32 * 1024);
        // Two layers in flight: the second's weights are prefetched under the first.
        let a = npu.submit(&job).unwrap();
        let b = npu.submit(&job).unwrap();
        npu.advance(10);
        if reset {
            npu.reset().unwrap();
            assert_eq!(npu.poll(a).map_err(nb_error), fault(a, Fault::Cancelled));
        } else {
            npu.run_until_idle();
        }
        let _ = b;
        let at = npu.now();
        let c = npu.submit(&job).unwrap();
        let (start, end) = npu.scheduled(c).unwrap();
        assert_eq!(start, at);
        if reset {
            // The queue, the ports and the weight pipeline start over: as on a fresh NPU.
            assert_eq!(end - start, alone);
            assert_eq!(wait(&mut npu, c), Ok(()));
        } else {
            // Without the reset the pipeline had prefetched ahead: the figure differs, which
            // is what makes the comparison above a test of the reset.
            assert_ne!(end - start, alone);
        }
    }
}

#[test]
fn an_overrun_moves_the_end_and_what_queues_behind_it() {
    let normal = {
        let mut npu = sim(SimConfig::default());
        let [_, r, down] = chain(&mut npu);
        (npu.scheduled(r).unwrap(), npu.scheduled(down).unwrap())
    };
    let ((start, end), _) = normal;
    let cycles = end - start;
    let mut npu = sim(one(FaultRule::at_job(
        FaultKind::Overrun {
            times: 4,
            plus: 100,
        },
        1,
    )));
    let [_, r, down] = chain(&mut npu);
    assert_eq!(npu.scheduled(r), Some((start, start + 4 * cycles + 100)));
    assert_eq!(npu.scheduled(down).unwrap().0, start + 4 * cycles + 100);
    // It completes, late, with the right bytes.
    assert_eq!(wait(&mut npu, down), Ok(()));
    assert_eq!(npu.poll(r), Ok(()));
    assert_eq!(&npu.host_memory()[64..128], &chain_output()[..]);
    assert_eq!(npu.stats().faults_injected.overrun, 1);
    assert_eq!(npu.stats().jobs_failed, 0);
}

#[test]
fn a_lost_interrupt_is_seen_by_poll_and_wakes_the_cpu_only_at_the_next_tick() {
    let config = SimConfig {
        idle_tick_cycles: 1000,
        ..one(FaultRule::at_job(FaultKind::LostIrq, 0))
    };
    let mut npu = sim(config);
    let t = npu.submit(&upload(0, &[])).unwrap();
    let (_, end) = npu.scheduled(t).unwrap();
    assert_eq!(end, 40);
    npu.wait_for_event();
    assert_eq!(npu.now(), 1000, "no interrupt at 40: the tick woke the CPU");
    assert!(!npu.irq_pending());
    // The status register says it is done.
    assert_eq!(npu.poll(t), Ok(()));
    assert_eq!(npu.stats().faults_injected.lost_irq, 1);

    // With another job's interrupt on its way, that wakes the CPU first.
    let mut npu = sim(SimConfig {
        idle_tick_cycles: 1000,
        ..one(FaultRule::at_job(FaultKind::LostIrq, 0))
    });
    let lost = npu.submit(&upload(0, &[])).unwrap();
    let heard = npu.submit(&upload(64, &[])).unwrap();
    npu.wait_for_event();
    assert_eq!(npu.now(), npu.scheduled(heard).unwrap().1);
    assert_eq!(npu.now(), 80);
    assert!(npu.irq_pending());
    npu.on_interrupt();
    // The handler reads the status: both retired.
    assert_eq!(npu.in_flight(), 0);
    assert_eq!(npu.poll(lost), Ok(()));
}

#[test]
fn a_spurious_interrupt_is_raised_with_nothing_finished() {
    let mut npu = sim(one(FaultRule::at_job(FaultKind::SpuriousIrq, 0)));
    let t = npu.submit(&upload(0, &[])).unwrap();
    // Raised as the job starts (cycle 0): pending, though nothing has finished.
    assert!(npu.irq_pending());
    assert_eq!(npu.poll(t), Err(nb::Error::WouldBlock));
    // The handler finds nothing to retire, and the line goes quiet.
    npu.on_interrupt();
    assert!(!npu.irq_pending());
    assert_eq!(npu.in_flight(), 1);
    npu.wait_for_event();
    assert_eq!(npu.now(), 40);
    assert_eq!(npu.poll(t), Ok(()));

    // Waking on it takes it too: a polling loop without a handler moves on.
    let mut npu = sim(one(FaultRule::at_job(FaultKind::SpuriousIrq, 1)));
    let a = npu.submit(&upload(0, &[])).unwrap();
    npu.advance(10);
    let b = npu.submit(&relu(128, 192, &[])).unwrap();
    let (b_start, b_end) = npu.scheduled(b).unwrap();
    assert_eq!(b_start, 10);
    assert!(npu.irq_pending(), "raised at the ReLU's start, now");
    npu.wait_for_event();
    assert_eq!(npu.now(), 10, "woken at once by the spurious interrupt");
    assert!(!npu.irq_pending());
    npu.wait_for_event();
    assert_eq!(npu.now(), 40, "then by the upload's completion");
    assert_eq!(wait(&mut npu, b), Ok(()));
    assert_eq!(npu.now(), b_end);
    assert_eq!(npu.poll(a), Ok(()));
    assert_eq!(npu.stats().faults_injected.spurious_irq, 1);
    assert_eq!(npu.stats().jobs_failed, 0);
}

#[test]
fn stats_count_each_kind() {
    let plan = parse_faults(
        "dma@job=0;bus@job=1;hang@job=2;overrun=2x@job=3;lost-irq@job=4;spurious-irq@job=5",
    )
    .unwrap();
    let mut npu = SimNpu::<8>::with_job_capacity(
        Box::leak(Box::new(AlignedMemory::<4096>::new())).as_mut_slice(),
        Box::leak(Box::new(AlignedMemory::<4096>::new())).as_mut_slice(),
        with(plan),
    )
    .unwrap();
    for i in 0..7 {
        npu.submit(&transfer(
            Region::host(i * 64, 64),
            Region::device(i * 64, 64),
            &[],
        ))
        .unwrap();
    }
    let s: SimStats = npu.stats();
    assert_eq!(
        s.faults_injected,
        FaultCounts {
            dma: 1,
            bus: 1,
            hang: 1,
            overrun: 1,
            spurious_irq: 1,
            lost_irq: 1,
        }
    );
    assert_eq!(s.faults_injected.of(FaultKind::Hang), 1);
    assert_eq!(s.faults_injected.total(), 6);
}

#[test]
fn the_idle_tick_must_be_positive() {
    let (device, host) = memories();
    let config = SimConfig {
        idle_tick_cycles: 0,
        ..SimConfig::default()
    };
    assert_eq!(
        SimNpu::new(device, host, config).err(),
        Some(npu_sim::SimError::ZeroRate {
            parameter: "idle_tick_cycles"
        })
    );
}

/// The tick counts from cycle 0, so a wake lands on a multiple of it.
#[test]
fn ticks_fall_on_multiples_of_the_period() {
    let mut npu = sim(SimConfig {
        idle_tick_cycles: 300,
        ..one(FaultRule::at_job(FaultKind::Hang, 0))
    });
    npu.submit(&upload(0, &[])).unwrap();
    npu.advance(250);
    npu.wait_for_event();
    assert_eq!(npu.now(), 300);
    npu.advance(1);
    npu.wait_for_event();
    assert_eq!(npu.now(), 600 as Cycles);
}
