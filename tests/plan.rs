//! Job plans through the client: a plan computes what `execute` computes, run after run; what
//! it refuses and how it says so; and what it holds. Its fence safety is tested on the
//! simulator's trace in `engine.rs`, its tuned variants (an im2col step, and the scratch
//! it replaces when a larger one joins) there too.

mod common;

use common::chain::{add, bytes, relu, LEN};
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, JobPlan};
use npu_compute::ops::{DType, Op, OpKind, OpSet};

use npu_compute::memory::MemoryConfig;
use npu_compute::server::NpuServer;
use npu_compute::tune::{TuneConfig, TuneMode};
use npu_compute::JobPlanError;
use npu_compute::{Capacity, Error};
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

type Server = NpuServer<SimNpu<'static>>;
type Channel = RefCellChannel<Server>;

fn channel(config: SimConfig) -> Channel {
    tuned_channel(config, TuneMode::Off)
}

fn tuned_channel(config: SimConfig, mode: TuneMode) -> Channel {
    let device = Box::leak(Box::new(AlignedMemory::<65536>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<65536>::new()));
    let npu = SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), config).unwrap();
    let server = NpuServer::new(npu, MemoryConfig::default()).unwrap();
    RefCellChannel::new(server.with_tuning(mode, TuneConfig::DEFAULT))
}

/// `y = add(x, c)`, `z = relu(y)`, `w = add(z, x)` with `execute`: the reference.
fn executed(x: &[u8], c: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let ch = channel(SimConfig::default());
    let client = ComputeClient::new(&ch);
    let (x, c) = (client.create(x).unwrap(), client.create(c).unwrap());
    let [y, z, w] = [0; 3].map(|_| client.empty(LEN).unwrap());
    client.execute(add(), &[&x, &c], &y).unwrap();
    client.execute(relu(), &[&y], &z).unwrap();
    client.execute(add(), &[&z, &x], &w).unwrap();
    let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
    client.read(&z, &mut zb).unwrap();
    client.read(&w, &mut wb).unwrap();
    (zb, wb)
}

#[test]
fn a_plan_computes_what_execute_computes_run_after_run() {
    for units in [1, 2, 3] {
        let ch = channel(SimConfig {
            execution_units: units,
            ..SimConfig::default()
        });
        let client = ComputeClient::new(&ch);
        let c = client.create(&bytes(2)).unwrap();
        let x = client.empty(LEN).unwrap();
        let [y, z, w] = [0; 3].map(|_| client.empty(LEN).unwrap());
        let (add, relu) = (add(), relu());
        let mut plan: JobPlan<_, 8, 8> = client.job_plan();
        plan.push(&add, &[&x, &c], &y).unwrap();
        plan.push(&relu, &[&y], &z).unwrap();
        plan.push(&add, &[&z, &x], &w).unwrap();
        assert_eq!((plan.jobs().len(), plan.jobs().tensors()), (3, 5));
        let jobs_before = client.stats().unwrap().compute_jobs;
        for run in 0..4u32 {
            let input = bytes(10 + run);
            // Written just before the run, without a sync: the plan waits for the upload.
            client.write(&x, &input).unwrap();
            plan.run(&[&add, &relu, &add]).unwrap();
            let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
            client.read(&z, &mut zb).unwrap();
            client.read(&w, &mut wb).unwrap();
            assert_eq!(
                (zb, wb),
                executed(&input, &bytes(2)),
                "{units} units, run {run}"
            );
        }
        let stats = client.stats().unwrap();
        assert_eq!(stats.compute_jobs - jobs_before, 12);
        assert_eq!(stats.plan_runs, 4);
    }
}

#[test]
fn a_plan_holds_its_tensors_until_dropped() {
    let ch = channel(SimConfig::default());
    let client = ComputeClient::new(&ch);
    let live = || ch.with(|s| s.live_tensors()).unwrap();
    let in_use = || client.memory_stats().unwrap().in_use;
    let (tensors, bytes_in_use) = (live(), in_use());
    let x = client.create(&bytes(1)).unwrap();
    let y = client.empty(LEN).unwrap();
    let relu = relu();
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    drop((x, y));
    assert_eq!(live(), tensors + 2, "the plan keeps x and y");
    plan.run(&[&relu]).unwrap();
    drop(plan);
    client.sync().unwrap();
    assert_eq!(live(), tensors);
    assert_eq!(in_use(), bytes_in_use);
}

#[test]
fn wrong_ops_at_run_are_refused_before_anything_is_submitted() {
    let ch = channel(SimConfig::default());
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z] = [0; 2].map(|_| client.empty(LEN).unwrap());
    let (add, relu) = (add(), relu());
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.push(&add, &[&y, &x], &z).unwrap();
    let jobs = client.stats().unwrap().compute_jobs;
    assert_eq!(
        plan.run(&[&relu]),
        Err(Error::JobPlan(JobPlanError::OpCount {
            expected: 2,
            actual: 1
        }))
    );
    assert_eq!(
        plan.run(&[&relu, &relu]),
        Err(Error::JobPlan(JobPlanError::OpMismatch {
            step: 1,
            expected: OpKind::Add,
            actual: OpKind::Relu
        }))
    );
    assert_eq!(client.stats().unwrap().compute_jobs, jobs);
    plan.run(&[&relu, &add]).unwrap();
    assert_eq!(client.stats().unwrap().compute_jobs, jobs + 2);
}

#[test]
fn a_change_of_tuning_makes_a_plan_stale() {
    // A server that tunes: the plan takes the cache's choices (none yet: `Auto`) and never
    // measures; an `execute` of the same op measures its key, after which the plan's choice
    // may be outdated.
    let ch = tuned_channel(SimConfig::default(), TuneMode::Tune);
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let y = client.empty(LEN).unwrap();
    let relu = relu();
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.run(&[&relu]).unwrap();
    assert_eq!(client.tune_stats().unwrap().tuning_runs, 0);
    let other = client.empty(LEN).unwrap();
    client.execute(relu, &[&x], &other).unwrap();
    assert_eq!(client.tune_stats().unwrap().tuning_runs, 1);
    assert_eq!(plan.run(&[&relu]), Err(Error::JobPlan(JobPlanError::Stale)));
    assert_eq!(
        plan.push(&relu, &[&y], &x),
        Err(Error::JobPlan(JobPlanError::Stale))
    );
    // Built again, it runs.
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.run(&[&relu]).unwrap();
}

#[test]
fn steps_a_plan_cannot_hold_are_refused_and_leave_it_unchanged() {
    // The NPU runs ADD only.
    let ch = channel(SimConfig {
        ops: OpSet::EMPTY.with(OpKind::Add, DType::I8),
        ..SimConfig::default()
    });
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z] = [0; 2].map(|_| client.empty(LEN).unwrap());
    let pinned = client.pinned(LEN).unwrap();
    let (add, relu) = (add(), relu());
    let mut plan: JobPlan<_, 1, 3> = client.job_plan();
    // (A step on the CPU is one a plan holds: see `cpu_plan.rs`.)
    assert_eq!(
        plan.push(&add, &[&x, &pinned], &y),
        Err(Error::JobPlan(JobPlanError::Pinned { op: OpKind::Add }))
    );
    assert!(matches!(
        plan.push(&add, &[&x, &x], &x),
        Err(Error::OutputAliasesInput { .. })
    ));
    assert!(matches!(
        plan.push(&relu, &[&x, &x], &y),
        Err(Error::OperandCount { .. })
    ));
    assert_eq!((plan.jobs().len(), plan.jobs().tensors()), (0, 0));
    plan.push(&add, &[&x, &x], &y).unwrap();
    assert_eq!(
        plan.push(&add, &[&y, &y], &z),
        Err(Error::CapacityExceeded {
            capacity: Capacity::PlanSteps,
            limit: 1
        })
    );
    let mut small: JobPlan<_, 4, 2> = client.job_plan();
    small.push(&add, &[&x, &x], &y).unwrap();
    assert_eq!(
        small.push(&add, &[&y, &x], &z),
        Err(Error::CapacityExceeded {
            capacity: Capacity::PlanTensors,
            limit: 2
        })
    );
    assert_eq!((small.jobs().len(), small.jobs().tensors()), (1, 2));
    small.run(&[&add]).unwrap();
}

#[test]
fn a_run_voids_a_started_read_of_its_outputs() {
    // Found by the client_api fuzz target: `try_read` started a download of a tensor, a plan
    // then wrote it, and the next read returned the bytes of before the run. `execute` voids
    // such a download; a run must too.
    let channel = channel(SimConfig::default());
    let client = ComputeClient::new(&channel);
    let a = client.create_f32(&[1.0, -2.0, 3.0, -4.0]).unwrap();
    let b = client.create_f32(&[9.0; 4]).unwrap();
    let relu = Op::ReluF32(npu_compute::ops::ReluF32 { len: 4 });
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&a], &b).unwrap();
    let mut old = [0u8; 16];
    assert_eq!(client.try_read(&b, &mut old), Err(nb::Error::WouldBlock));
    plan.run(&[&relu]).unwrap();
    let mut out = [0.0f32; 4];
    client.read_f32(&b, &mut out).unwrap();
    assert_eq!(out, [1.0, 0.0, 3.0, 0.0]);
    // The voided download's staging block goes back once its transfer ends.
    client.sync().unwrap();
    let staging = channel.with(|s| s.staging_use()).unwrap();
    assert_eq!((staging.blocks, staging.pending), (0, 0));
}
