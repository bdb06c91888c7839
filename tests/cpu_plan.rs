//! Job plans with CPU steps: operators the NPU lacks are steps of the plan, computed by the CPU
//! fallback's kernels when their turn comes. A plan with them computes what `execute` does, run
//! after run; submits the NPU steps that do not depend on a CPU step before the CPU computes, so
//! that the NPU runs them meanwhile (which the simulator's clock shows); survives a failure
//! inside a CPU step; and says when host staging runs out. A graph with CPU-fallback operators
//! is planned from its second invoke, with TFLM's bytes.

mod common;

use common::chain::{add, bytes, relu, relu_on_cpu, LEN};
use common::*;
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, JobPlan};
use npu_compute::graph::Graph;
use npu_compute::hal::{HalError, Npu};
use npu_compute::memory::{ChunkSliceMemory, MemoryConfig, DEFAULT_CHUNKS};
use npu_compute::ops::{DType, OpKind};
use npu_compute::server::NpuServer;
use npu_compute::{Capacity, Error};
use npu_sim::runner::{self, leak_aligned, SimGraph};
use npu_sim::{workloads, AlignedMemory, SimConfig, SimNpu, CODE_DEPENDENCY_FAILED, ETHOS_U55_OPS};

/// A server over `host` bytes of staging with at most `STAGING` staging blocks.
fn channel_with<const STAGING: usize>(
    config: SimConfig,
    host: usize,
) -> RefCellChannel<NpuServer<SimNpu<'static>, ChunkSliceMemory<DEFAULT_CHUNKS>, 64, STAGING>> {
    let device = Box::leak(Box::new(AlignedMemory::<65536>::new()));
    let host = &mut Box::leak(Box::new(AlignedMemory::<65536>::new())).as_mut_slice()[..host];
    let npu = SimNpu::new(device.as_mut_slice(), host, config).unwrap();
    RefCellChannel::new(NpuServer::new(npu, MemoryConfig::default()).unwrap())
}

/// `y = add(x, c)`, `z = relu(y)`, `u = add(x, c)`, `w = add(z, u)`, with `execute` on an NPU
/// that runs everything: the reference `(z, w)`.
fn executed(x: &[u8], c: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let ch = channel_with::<16>(SimConfig::default(), 65536);
    let client = ComputeClient::new(&ch);
    let (x, c) = (client.create(x).unwrap(), client.create(c).unwrap());
    let [y, z, u, w] = [0; 4].map(|_| client.empty(LEN).unwrap());
    client.execute(add(), &[&x, &c], &y).unwrap();
    client.execute(relu(), &[&y], &z).unwrap();
    client.execute(add(), &[&x, &c], &u).unwrap();
    client.execute(add(), &[&z, &u], &w).unwrap();
    let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
    client.read(&z, &mut zb).unwrap();
    client.read(&w, &mut wb).unwrap();
    (zb, wb)
}

#[test]
fn a_plan_with_a_cpu_step_computes_what_execute_computes_run_after_run() {
    for units in [1, 2, 3] {
        let ch = channel_with::<16>(relu_on_cpu(units), 65536);
        let client = ComputeClient::new(&ch);
        let c = client.create(&bytes(2)).unwrap();
        let x = client.empty(LEN).unwrap();
        let [y, z, u, w] = [0; 4].map(|_| client.empty(LEN).unwrap());
        let (add, relu) = (add(), relu());
        let mut plan: JobPlan<_, 8, 8> = client.job_plan();
        plan.push(&add, &[&x, &c], &y).unwrap();
        plan.push(&relu, &[&y], &z).unwrap();
        plan.push(&add, &[&x, &c], &u).unwrap();
        plan.push(&add, &[&z, &u], &w).unwrap();
        let jobs = plan.jobs();
        assert_eq!((jobs.len(), jobs.cpu_steps()), (4, 1));
        assert!(jobs.is_cpu_step(1) && !jobs.is_cpu_step(0) && !jobs.is_cpu_step(3));
        // The third step needs nothing of the CPU's: it is submitted before ReLU computes.
        // The fourth reads ReLU's output.
        assert_eq!(jobs.submission_order(), &[0, 2, 1, 3]);
        let before = client.stats().unwrap();
        for run in 0..4u32 {
            let input = bytes(10 + run);
            // Written just before the run, without a sync: the CPU step's download waits
            // for the first step, which waits for the upload.
            client.write(&x, &input).unwrap();
            plan.run(&[&add, &relu, &add, &add]).unwrap();
            let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
            client.read(&z, &mut zb).unwrap();
            client.read(&w, &mut wb).unwrap();
            assert_eq!(
                (zb, wb),
                executed(&input, &bytes(2)),
                "{units} units, run {run}"
            );
        }
        let after = client.stats().unwrap();
        assert_eq!(after.compute_jobs - before.compute_jobs, 12);
        assert_eq!(after.cpu_ops - before.cpu_ops, 4);
        assert_eq!(after.plan_runs, 4);
    }
}

#[test]
fn the_npu_steps_queued_behind_a_deferred_step_wait_with_it() {
    // One unit: the third step is on the unit after the second, which reads the CPU step's
    // output, so it is deferred too although it needs nothing of the CPU's.
    let ch = channel_with::<16>(relu_on_cpu(1), 65536);
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z, u] = [0; 3].map(|_| client.empty(LEN).unwrap());
    let (add, relu) = (add(), relu());
    let mut plan: JobPlan<_, 8, 8> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.push(&add, &[&y, &x], &z).unwrap();
    plan.push(&add, &[&x, &x], &u).unwrap();
    assert_eq!(plan.jobs().submission_order(), &[0, 1, 2]);
    // Two units: the third step is on the other unit, and goes first.
    let ch = channel_with::<16>(relu_on_cpu(2), 65536);
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z, u] = [0; 3].map(|_| client.empty(LEN).unwrap());
    let mut plan: JobPlan<_, 8, 8> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.push(&add, &[&y, &x], &z).unwrap();
    plan.push(&add, &[&x, &x], &u).unwrap();
    assert_eq!(plan.jobs().submission_order(), &[2, 0, 1]);
}

#[test]
fn a_failure_inside_a_cpu_step_leaves_the_plan_reusable() {
    let ch = channel_with::<16>(relu_on_cpu(1), 65536);
    let client = ComputeClient::new(&ch);
    let c = client.create(&bytes(2)).unwrap();
    let x = client.create(&bytes(3)).unwrap();
    let [y, z, u, w] = [0; 4].map(|_| client.empty(LEN).unwrap());
    let (add, relu) = (add(), relu());
    let ops = [&add, &relu, &add, &add];
    let mut plan: JobPlan<_, 8, 8> = client.job_plan();
    plan.push(&add, &[&x, &c], &y).unwrap();
    plan.push(&relu, &[&y], &z).unwrap();
    plan.push(&add, &[&x, &c], &u).unwrap();
    plan.push(&add, &[&z, &u], &w).unwrap();
    plan.run(&ops).unwrap();
    client.sync().unwrap();
    // The first step fails: the CPU step's download of its output does not run, and the
    // CPU step reports it.
    ch.with(|s| s.npu_mut().fail_next_compute_job(9)).unwrap();
    match plan.run(&ops) {
        Err(Error::Hal(HalError::JobFailed { code, .. })) => {
            assert_eq!(code, CODE_DEPENDENCY_FAILED)
        }
        other => panic!("expected the download to fail, got {other:?}"),
    }
    // Nothing the failed run submitted is lost track of, and the next run is whole.
    client.sync().unwrap();
    plan.run(&ops).unwrap();
    let (mut zb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
    client.read(&z, &mut zb).unwrap();
    client.read(&w, &mut wb).unwrap();
    assert_eq!((zb, wb), executed(&bytes(3), &bytes(2)));
}

#[test]
fn host_staging_running_out_in_a_cpu_step_is_a_typed_error() {
    let (add, relu) = (add(), relu());
    // Room for one operand of 64 bytes, not for the input and the output at once.
    let ch = channel_with::<16>(relu_on_cpu(1), 64);
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z] = [0; 2].map(|_| client.empty(LEN).unwrap());
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.push(&add, &[&y, &x], &z).unwrap();
    assert_eq!(
        plan.run(&[&relu, &add]),
        Err(Error::StagingExhausted {
            requested: LEN,
            largest_free: 0
        })
    );
    client.sync().unwrap();
    // One staging block: the CPU step needs two at once.
    let ch = channel_with::<1>(relu_on_cpu(1), 65536);
    let client = ComputeClient::new(&ch);
    let x = client.create(&bytes(1)).unwrap();
    let [y, z] = [0; 2].map(|_| client.empty(LEN).unwrap());
    let mut plan: JobPlan<_, 4, 4> = client.job_plan();
    plan.push(&relu, &[&x], &y).unwrap();
    plan.push(&add, &[&y, &x], &z).unwrap();
    assert_eq!(
        plan.run(&[&relu, &add]),
        Err(Error::CapacityExceeded {
            capacity: Capacity::StagingBlocks,
            limit: 1
        })
    );
    client.sync().unwrap();
}

fn product(name: &str, file: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/examples/models/{name}/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The simulator's clock and its busy cycles on the execution units and the CPU.
fn clock(channel: &runner::ModelChannel<'_>) -> (u64, u64, u64) {
    channel
        .with(|s| {
            let stats = s.npu().stats();
            let units: u64 = stats.busy_cycles.iter().skip(1).sum();
            (s.npu().now(), units, stats.cpu_cycles)
        })
        .unwrap()
}

#[test]
fn a_graph_with_cpu_operators_is_planned_with_tflms_bytes() {
    let kws = leak_aligned(&product("kws_dscnn", "model.tflite"));
    let config = SimConfig {
        ops: ETHOS_U55_OPS
            .without(OpKind::DepthwiseConv2d, DType::I8)
            .without(OpKind::Softmax, DType::I8),
        ..SimConfig::default()
    };
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
    let mut cycles = Vec::new();
    for invoke in 0..6 {
        let k = invoke % 3;
        let input = product("kws_dscnn", &format!("input_{k}.bin"));
        let want = product("kws_dscnn", &format!("expected_tflm_{k}.bin"));
        // Invokes 0 and 3..: job by job, then from the plan; 4 and 5 job by job again.
        graph.set_replay(invoke < 4);
        let mut out = vec![0u8; want.len()];
        let start = clock(&channel).0;
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        cycles.push(clock(&channel).0 - start);
        assert_eq!(out, want, "invoke {invoke}");
        if (1..4).contains(&invoke) {
            let report = graph.job_plan().expect("planned");
            assert_eq!(
                report.cpu_steps, 5,
                "4 depthwise convolutions and the softmax"
            );
        } else {
            assert!(graph.job_plan().is_none());
        }
    }
    // Planned invokes are never slower than job by job.
    assert!(cycles[1..4].iter().all(|&c| c <= cycles[0]), "{cycles:?}");
    assert_eq!(client.stats().unwrap().cpu_ops, 30);
}

/// `x → RELU = a` (on the CPU), and beside it `x → ADD(x, x) → MUL → ADD → MUL = e` (on the
/// NPU), then `y = ADD(ADD(a, e), x)`: a branch of NPU work that needs nothing of the CPU's,
/// after the CPU operator in the model's order. (`x` lives to the end, so that the branch's
/// first output is not written over it while the CPU may still be reading it.)
fn cpu_beside_npu(len: i32) -> &'static [u8] {
    let q = || Some(quant(&[0.5], &[-3], 0));
    let mut spec = Spec::fc();
    spec.opcodes = vec![opcode(19), opcode(0), opcode(18)];
    spec.tensors = ["x", "a", "b", "c", "d", "e", "f", "y"]
        .iter()
        .map(|name| tensor(&[1, len], INT8, 0, name, q()))
        .collect();
    spec.operators = vec![
        operator(0, &[0], &[1], None),
        operator(1, &[0, 0], &[2], None),
        operator(2, &[2, 2], &[3], None),
        operator(1, &[3, 3], &[4], None),
        operator(2, &[4, 4], &[5], None),
        operator(1, &[1, 5], &[6], None),
        operator(1, &[6, 0], &[7], None),
    ];
    spec.buffers = vec![buffer(&[])];
    spec.inputs = vec![0];
    spec.outputs = vec![7];
    leak_aligned(&spec.build())
}

#[test]
fn npu_work_independent_of_a_cpu_operator_overlaps_it() {
    const LEN: usize = 8192;
    let model = cpu_beside_npu(LEN as i32);
    let config = SimConfig {
        ops: ETHOS_U55_OPS.without(OpKind::Relu, DType::I8),
        ..SimConfig::default()
    };
    let x: Vec<u8> = workloads::pseudo_random_i8(7, LEN)
        .iter()
        .map(|&v| v as u8)
        .collect();
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = Graph::prepare_with(client, model, dynamic()).unwrap();
    client.sync().unwrap();
    // (cycles, unit busy cycles, CPU cycles, output) of each invoke.
    let mut invokes = Vec::new();
    for invoke in 0..4 {
        let mut y = vec![0u8; LEN];
        let before = clock(&channel);
        graph.invoke(&[&x], &mut [&mut y]).unwrap();
        let after = clock(&channel);
        invokes.push((
            after.0 - before.0,
            after.1 - before.1,
            after.2 - before.2,
            y,
        ));
        assert_eq!(graph.job_plan().is_some(), invoke > 0, "invoke {invoke}");
    }
    let report = graph.job_plan().unwrap();
    assert_eq!((report.jobs, report.cpu_steps), (7, 1));
    let (per_job, npu, cpu, ref want) = invokes[0];
    assert!(npu > 0 && cpu > 0);
    // Job by job, the NPU's branch is submitted after the CPU computed: they add up.
    assert!(per_job >= npu + cpu, "{per_job} < {npu} + {cpu}");
    for (k, (planned, npu_k, cpu_k, y)) in invokes.iter().enumerate().skip(1) {
        assert_eq!(y, want, "invoke {k}");
        assert_eq!((*npu_k, *cpu_k), (npu, cpu), "the same work");
        // From the plan, the branch (four of the six NPU operators) runs while the CPU
        // computes: at least half the NPU's work is hidden under the CPU's.
        assert!(
            *planned < npu + cpu - npu / 2,
            "invoke {k}: {planned} cycles against {npu} on the NPU and {cpu} on the CPU"
        );
    }
    println!(
        "per-job {per_job} cycles, planned {} (NPU busy {npu}, CPU {cpu})",
        invokes[1].0
    );
}

/// The example models, on the simulated Ethos-U55 as it is and with their most common NPU
/// operators taken away (so that the CPU has work): every planned invoke gives TFLM's bytes
/// and is no slower than the per-job one. Prints the figures (`--nocapture`).
#[test]
fn planned_invokes_of_models_with_cpu_operators_are_never_slower() {
    let configs = [
        ("U55", ETHOS_U55_OPS),
        (
            "U55 without DEPTHWISE_CONV_2D and SOFTMAX",
            ETHOS_U55_OPS
                .without(OpKind::DepthwiseConv2d, DType::I8)
                .without(OpKind::Softmax, DType::I8),
        ),
        (
            "U55 without MAX_POOL_2D and AVERAGE_POOL_2D",
            ETHOS_U55_OPS
                .without(OpKind::MaxPool2d, DType::I8)
                .without(OpKind::AveragePool2d, DType::I8),
        ),
    ];
    for name in ["kws_dscnn", "convnet", "inception", "tiny_transformer"] {
        let model = leak_aligned(&product(name, "model.tflite"));
        let input = product(name, "input_0.bin");
        let want = product(name, "expected_tflm_0.bin");
        for (what, ops) in configs {
            let config = SimConfig {
                ops,
                ..SimConfig::default()
            };
            let mut device = vec![0u128; 1024 * 1024 / 16];
            let mut host = vec![0u128; 256 * 1024 / 16];
            let channel = runner::channel(&mut device, &mut host, config).unwrap();
            let client = ComputeClient::new(&channel);
            let mut graph: SimGraph = Graph::prepare_with(client, model, dynamic()).unwrap();
            client.sync().unwrap();
            let (mut cycles, mut cpu_steps) = (Vec::new(), 0);
            // The first invoke job by job, the next two from the plan, the last job by job
            // again (the per-job figure: the first invoke also makes the first placements).
            for invoke in 0..4 {
                graph.set_replay(invoke < 3);
                let mut out = vec![0u8; want.len()];
                let before = clock(&channel);
                graph.invoke(&[&input], &mut [&mut out]).unwrap();
                let after = clock(&channel);
                cycles.push((after.0 - before.0, after.1 - before.1, after.2 - before.2));
                assert_eq!(out, want, "{name} on {what}");
                if invoke == 2 {
                    let report = graph.job_plan().expect("planned");
                    cpu_steps = report.cpu_steps;
                }
            }
            let ((per_job, npu, cpu), (planned, ..)) = (cycles[3], cycles[2]);
            println!(
                "{name} on {what}: {cpu_steps} CPU steps; npu_cycles per-job {per_job}, \
                 planned {planned}; unit busy {npu}, CPU busy {cpu}"
            );
            assert!(planned <= per_job, "{name} on {what}");
        }
    }
}

#[test]
fn an_npu_step_overwriting_what_a_cpu_step_read_comes_after_it() {
    // `y = relu(x)` on the CPU, then `x = add(c, c)` over the memory it read, then
    // `w = add(y, x)`: the second step needs no fence of the CPU's (its download is over when
    // its turn ends), but must not be submitted before it.
    for units in [1, 2] {
        let ch = channel_with::<16>(relu_on_cpu(units), 65536);
        let client = ComputeClient::new(&ch);
        let c = client.create(&bytes(2)).unwrap();
        let x = client.empty(LEN).unwrap();
        let [y, w] = [0; 2].map(|_| client.empty(LEN).unwrap());
        let (add, relu) = (add(), relu());
        let mut plan: JobPlan<_, 4, 8> = client.job_plan();
        plan.push(&relu, &[&x], &y).unwrap();
        plan.push(&add, &[&c, &c], &x).unwrap();
        plan.push(&add, &[&y, &x], &w).unwrap();
        assert_eq!(plan.jobs().submission_order(), &[0, 1, 2]);
        // The reference, job by job on an NPU that runs everything.
        let reference = |input: &[u8]| {
            let ch = channel_with::<16>(SimConfig::default(), 65536);
            let client = ComputeClient::new(&ch);
            let (x, c) = (
                client.create(input).unwrap(),
                client.create(&bytes(2)).unwrap(),
            );
            let [y, w] = [0; 2].map(|_| client.empty(LEN).unwrap());
            client.execute(relu, &[&x], &y).unwrap();
            client.execute(add, &[&c, &c], &x).unwrap();
            client.execute(add, &[&y, &x], &w).unwrap();
            let (mut yb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
            client.read(&y, &mut yb).unwrap();
            client.read(&w, &mut wb).unwrap();
            (yb, wb)
        };
        for run in 0..3 {
            let input = bytes(20 + run);
            client.write(&x, &input).unwrap();
            plan.run(&[&relu, &add, &add]).unwrap();
            let (mut yb, mut wb) = (vec![0; LEN as usize], vec![0; LEN as usize]);
            client.read(&y, &mut yb).unwrap();
            client.read(&w, &mut wb).unwrap();
            assert_eq!((yb, wb), reference(&input), "{units} units, run {run}");
        }
    }
}

/// A stateful operator on the CPU (SVDF, between two QUANTIZEs the NPU runs) is a CPU step
/// whose state goes back up with its output: its sequence of invokes gives TFLM's bytes, the
/// first job by job and the rest from the plan.
#[test]
fn a_stateful_cpu_operator_keeps_its_state_from_run_to_run_of_the_plan() {
    let dir = format!(
        "{}/tests/models/ops/svdf_int8_between_ops",
        env!("CARGO_MANIFEST_DIR")
    );
    let read = |file: String| std::fs::read(format!("{dir}/{file}")).unwrap();
    let model = leak_aligned(&read("model.tflite".into()));
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, SimConfig::default()).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = Graph::prepare(client, model).unwrap();
    for run in 0..6 {
        let input = read(format!("input_{run}_0.bin"));
        let want = read(format!("expected_{run}_0.bin"));
        let mut out = vec![0u8; want.len()];
        graph.invoke(&[&input], &mut [&mut out]).unwrap();
        assert_eq!(out, want, "run {run}");
        if run > 0 {
            let report = graph.job_plan().expect("planned");
            assert_eq!((report.jobs, report.cpu_steps), (3, 1), "run {run}");
        }
    }
}

/// Pipelined invokes over pinned buffers replay the plan with its CPU steps too.
#[test]
fn pipelined_invokes_of_a_graph_with_cpu_operators_give_tflms_bytes() {
    let kws = leak_aligned(&product("kws_dscnn", "model.tflite"));
    let config = SimConfig {
        ops: ETHOS_U55_OPS.without(OpKind::Softmax, DType::I8),
        ..SimConfig::default()
    };
    let mut device = vec![0u128; 256 * 1024 / 16];
    let mut host = vec![0u128; 64 * 1024 / 16];
    let channel = runner::channel(&mut device, &mut host, config).unwrap();
    let client = ComputeClient::new(&channel);
    let mut graph: SimGraph = Graph::prepare(client, kws).unwrap();
    let sets = [graph.io_buffers().unwrap(), graph.io_buffers().unwrap()];
    for frame in 0..6 {
        let k = frame % 3;
        let io = &sets[frame % 2];
        let input = product("kws_dscnn", &format!("input_{k}.bin"));
        client
            .host_mut(io.input(0).unwrap(), |b| b.copy_from_slice(&input))
            .unwrap();
        graph.submit(io).unwrap();
        let want = product("kws_dscnn", &format!("expected_tflm_{k}.bin"));
        let out = client
            .host_ref(io.output(0).unwrap(), |b| b.to_vec())
            .unwrap();
        assert_eq!(out, want, "frame {frame}");
    }
    assert_eq!(graph.job_plan().map(|r| r.cpu_steps), Some(1));
}

/// Round-robin dispatch: the per-job path submits in model order, the plan orders itself (a
/// static schedule would order both; `tests/schedule.rs` covers it).
fn dynamic() -> npu_compute::graph::PrepareOptions {
    npu_compute::graph::PrepareOptions {
        scheduling: npu_compute::graph::Scheduling::Dynamic,
        ..Default::default()
    }
}
