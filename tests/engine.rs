//! The engine on the simulated NPU, read off the simulator's trace:
//!
//! - a chain of 1,000 tiny dependent jobs runs back to back: every job starts at the cycle its
//!   producer ends, so the chain takes exactly the sum of the jobs' own times (job overhead
//!   included) and the CPU's waits on a full job table leave no idle gap;
//! - memory released by a dropped tensor is handed to a new tensor at once, but no job or
//!   transfer writes it before the jobs reading its old contents complete. The readers are long
//!   and the writers short, on other queues: a writer that did not wait would end first, and
//!   the simulator (which applies a job's effect when it retires) would feed the reader the new
//!   bytes. A control test shows that corruption when the dependency is left out.
//!
//! - a job plan's run waits, job by job, for exactly what `execute` would have waited for:
//!   the upload before it, the plan's own jobs on other units (computed from overlapping
//!   memory, not tensor identity), and the jobs after it for the plan's readers.
//!
//! The NPU is [`SimNpu`] behind a thin [`Recorder`] that keeps every job the server submitted
//! (its regions, queue and dependencies), so the tests can name the memory a job used.

mod common;

use common::shim::{Shim, Shimmed};
use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, JobPlan, Tensor};
use npu_compute::hal::{Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, Variant};
use npu_compute::memory::{DeallocStrategy, MemoryConfig, SliceStrategy};
use npu_compute::ops::{Conv2dI8, FullyConnectedI8, MulI8, Op, ReluI8};
use npu_compute::server::{NpuServer, ServerStats};
use npu_compute::tune::{Candidate, TuneConfig, TuneMode};
use npu_kernels::int8::{
    self, Activation, Conv2dParams, Conv2dShape, FcParams, Nhwc, Padding, Quant, ReluParams,
    Window2d,
};
use npu_kernels::FcShape;
use npu_sim::{workloads, AlignedMemory, SimConfig, SimNpu, TraceEntry, TraceKind};

/// A copy of `job` that outlives the call to `submit`: its op is leaked (a few hundred bytes
/// per job, for the length of a test).
fn owned(job: &Job<'_>) -> Job<'static> {
    let kind = match &job.kind {
        JobKind::Compute {
            op,
            variant,
            inputs,
            output,
            scratch,
        } => JobKind::Compute {
            op: Box::leak(Box::new(**op)),
            variant: *variant,
            inputs: inputs.clone(),
            output: *output,
            scratch: *scratch,
        },
        JobKind::Transfer { src, dst } => JobKind::Transfer {
            src: *src,
            dst: *dst,
        },
    };
    Job {
        kind,
        queue: job.queue,
        deps: job.deps.clone(),
    }
}

/// [`SimNpu`] with a log of every job submitted through it.
struct Recorder<const JOBS: usize> {
    sim: SimNpu<'static, JOBS>,
    jobs: Vec<(Fence, Job<'static>)>,
}

impl<const JOBS: usize> Shim for Recorder<JOBS> {
    type Inner = SimNpu<'static, JOBS>;
    fn inner(&self) -> &Self::Inner {
        &self.sim
    }
    fn inner_mut(&mut self) -> &mut Self::Inner {
        &mut self.sim
    }
    fn submit(&mut self, job: &Job) -> Result<Fence, HalError> {
        let fence = self.sim.submit(job)?;
        self.jobs.push((fence, owned(job)));
        Ok(fence)
    }
}

type Server<const JOBS: usize> = NpuServer<Shimmed<Recorder<JOBS>>>;
type Channel<const JOBS: usize> = RefCellChannel<Server<JOBS>>;

fn memory<const N: usize>() -> &'static mut [u8] {
    Box::leak(Box::new(AlignedMemory::<N>::new())).as_mut_slice()
}

/// A channel over a recorded simulator with a trace of `trace` entries.
fn channel<const JOBS: usize>(
    config: SimConfig,
    memory_config: MemoryConfig,
    trace: usize,
) -> Channel<JOBS> {
    tuned_channel(config, memory_config, trace, TuneMode::Off)
}

/// [`channel`] over a server that tunes as `mode` says.
fn tuned_channel<const JOBS: usize>(
    config: SimConfig,
    memory_config: MemoryConfig,
    trace: usize,
    mode: TuneMode,
) -> Channel<JOBS> {
    let trace = Box::leak(vec![TraceEntry::EMPTY; trace].into_boxed_slice());
    let sim = SimNpu::<JOBS>::with_job_capacity(
        memory::<{ 256 << 10 }>(),
        memory::<{ 64 << 10 }>(),
        config,
    )
    .unwrap()
    .with_trace(trace);
    let npu = Recorder {
        sim,
        jobs: Vec::new(),
    };
    let server = NpuServer::new(Shimmed(npu), memory_config).unwrap();
    RefCellChannel::new(server.with_tuning(mode, TuneConfig::default()))
}

/// The trace in submission (fence) order, checking that nothing was overwritten.
fn trace<const JOBS: usize>(channel: &Channel<JOBS>) -> Vec<TraceEntry> {
    channel
        .with(|s| {
            assert_eq!(
                s.npu().0.sim.trace_overwritten(),
                0,
                "trace storage too small"
            );
            let mut t: Vec<TraceEntry> = s.npu().0.sim.trace().collect();
            t.sort_by_key(|e| e.fence);
            t
        })
        .unwrap()
}

fn jobs<const JOBS: usize>(channel: &Channel<JOBS>) -> Vec<(Fence, Job<'static>)> {
    channel.with(|s| s.npu().0.jobs.clone()).unwrap()
}

fn now<const JOBS: usize>(channel: &Channel<JOBS>) -> u64 {
    channel.with(|s| s.npu().now()).unwrap()
}

fn entry(trace: &[TraceEntry], fence: Fence) -> TraceEntry {
    *trace
        .iter()
        .find(|e| e.fence == fence)
        .unwrap_or_else(|| panic!("{fence:?} not in the trace"))
}

fn bytes(v: &[i8]) -> &[u8] {
    bytemuck::cast_slice(v)
}

// ---------------------------------------------------------------------------------------------
// A chain of 1,000 dependent jobs.
// ---------------------------------------------------------------------------------------------

const CHAIN: usize = 1000;
const LEN: u32 = 16;
/// The CPU's own time per `execute`, in cycles, advanced on the simulator's clock after each
/// one. Host work takes no virtual time otherwise, so a server that synchronised with the NPU
/// between jobs would leave no gap in the trace; with it, each such synchronisation shows as
/// an idle gap of this many cycles. It is below half a job's 76 cycles, so a server that does
/// not synchronise keeps ahead of the NPU, even feeding two units.
const HOST_CYCLES: u64 = 30;

/// One step of the chain (see [`workloads::chain_params`]).
fn chain_op() -> Op {
    Op::MulI8(MulI8 {
        len: LEN,
        params: workloads::chain_params().unwrap(),
    })
}

fn chain_reference(x0: &[i8], steps: usize) -> Vec<i8> {
    workloads::chain_reference(x0, steps).unwrap()
}

/// What a run of interleaved chains produced.
struct ChainRun {
    /// Each chain's final bytes.
    outputs: Vec<[u8; LEN as usize]>,
    /// Every job, in submission order.
    trace: Vec<TraceEntry>,
    /// The jobs as submitted.
    jobs: Vec<(Fence, Job<'static>)>,
    stats: ServerStats,
    /// The CPU's waits until the last job was submitted (before the reads).
    submit_waits: u32,
    /// Virtual time when the last read returned.
    end: u64,
}

/// `chains` independent chains of `CHAIN` jobs each, through the client: each chain ping-pongs
/// between two tensors (job k reads what job k−1 wrote and overwrites what job k−1 read), the
/// chains' jobs interleaved, the CPU spending [`HOST_CYCLES`] on each. No read until every job
/// is submitted; then one read per chain.
fn run_chains<const JOBS: usize>(config: SimConfig, chains: usize) -> ChainRun {
    let channel = channel::<JOBS>(config, MemoryConfig::default(), 2 * CHAIN * chains + 64);
    let client = ComputeClient::new(&channel);
    let op = chain_op();
    let mut pairs: Vec<[Tensor<'_, Channel<JOBS>>; 2]> = (0..chains)
        .map(|c| {
            let x0 = workloads::pseudo_random_i8(c as u32 + 1, LEN as usize);
            [
                client.create(bytes(&x0)).unwrap(),
                client.empty(LEN).unwrap(),
            ]
        })
        .collect();
    for _ in 0..CHAIN {
        for [a, b] in pairs.iter_mut() {
            client.execute(op, &[&*a, &*a], &*b).unwrap();
            channel
                .with(|s| s.npu_mut().0.sim.advance(HOST_CYCLES))
                .unwrap();
            std::mem::swap(a, b);
        }
    }
    let submit_waits = client.stats().unwrap().waits;
    let outputs = pairs
        .iter()
        .map(|[a, _]| {
            let mut out = [0u8; LEN as usize];
            client.read(a, &mut out).unwrap();
            out
        })
        .collect();
    ChainRun {
        outputs,
        trace: trace(&channel),
        jobs: jobs(&channel),
        stats: client.stats().unwrap(),
        submit_waits,
        end: now(&channel),
    }
}

/// Checks a run of `chains` interleaved chains against the reference and the cycle model, and
/// returns the compute jobs' entries in submission order.
fn check_chains(run: &ChainRun, config: &SimConfig, chains: usize) -> Vec<TraceEntry> {
    // Results.
    for (c, out) in run.outputs.iter().enumerate() {
        let x0 = workloads::pseudo_random_i8(c as u32 + 1, LEN as usize);
        assert_eq!(out, bytes(&chain_reference(&x0, CHAIN)), "chain {c}");
    }
    // Every job retired, successfully: uploads, compute jobs, downloads.
    assert_eq!(run.trace.len(), run.jobs.len());
    assert_eq!(run.trace.len(), chains + CHAIN * chains + chains);
    assert!(run.trace.iter().all(|e| e.failure.is_none()));
    let is_compute = |e: &&TraceEntry| matches!(e.kind, TraceKind::Compute { .. });
    let uploads: Vec<TraceEntry> = run.trace[..chains].to_vec();
    let computes: Vec<TraceEntry> = run.trace.iter().filter(is_compute).copied().collect();
    let downloads: Vec<TraceEntry> = run.trace[run.trace.len() - chains..].to_vec();
    assert_eq!(computes.len(), CHAIN * chains);
    for (u, d) in uploads.iter().zip(&downloads) {
        assert!(
            matches!(u.kind, TraceKind::Transfer { from: Space::Host, to: Space::Device, bytes } if bytes == LEN)
        );
        assert!(
            matches!(d.kind, TraceKind::Transfer { from: Space::Device, to: Space::Host, bytes } if bytes == LEN)
        );
    }
    // Each job takes exactly its cost in the cycle model (compute jobs: the job overhead plus
    // the slower of compute and memory traffic).
    for ((fence, job), e) in run.jobs.iter().zip(&run.trace) {
        assert_eq!(*fence, e.fence);
        assert_eq!(e.end - e.start, config.job_cost(&job.kind), "{fence:?}");
    }
    // Job i of the interleaving is step i / chains of chain i % chains, on unit i % units
    // (round robin). Its producer is the chain's previous job, or its upload: it starts at the
    // very cycle the producer ends. No idle gap.
    let units = usize::from(config.execution_units);
    for (i, e) in computes.iter().enumerate() {
        assert_eq!(e.queue, Queue::Unit((i % units) as u8), "job {i}");
        let producer = if i < chains {
            uploads[i]
        } else {
            computes[i - chains]
        };
        assert_eq!(
            e.start,
            producer.end,
            "job {i} (chain {}, step {}) starts {} cycles after its producer ends",
            i % chains,
            i / chains,
            e.start as i64 - producer.end as i64
        );
    }
    // Each chain's download starts when its last job ends.
    for (c, d) in downloads.iter().enumerate() {
        assert_eq!(d.start, computes[computes.len() - chains + c].end);
    }
    computes
}

#[test]
fn a_chain_of_1000_dependent_jobs_runs_back_to_back() {
    let config = SimConfig::default();
    let run = run_chains::<32>(config, 1);
    let computes = check_chains(&run, &config, 1);
    // The result tells a lost, repeated or reordered step: the chain's values after one step
    // fewer or more differ.
    let x0 = workloads::pseudo_random_i8(1, LEN as usize);
    for steps in [CHAIN - 2, CHAIN - 1, CHAIN + 1] {
        assert_ne!(chain_reference(&x0, steps), chain_reference(&x0, CHAIN));
    }

    // The chain from the first job's start to the last job's end is exactly the sum of the
    // jobs' own times: a MUL of 16 int8 elements costs 64 cycles of job overhead plus 12 of
    // output stage (16 × 0.75), the memory traffic (48 bytes, 6 cycles) being hidden.
    let job_cost = config.job_cost(&run.jobs[1].1.kind);
    assert_eq!(job_cost, 64 + 12);
    let sum: u64 = run
        .jobs
        .iter()
        .filter(|(_, j)| matches!(j.kind, JobKind::Compute { .. }))
        .map(|(_, j)| config.job_cost(&j.kind))
        .sum();
    assert_eq!(sum, CHAIN as u64 * job_cost);
    let span = computes[CHAIN - 1].end - computes[0].start;
    assert_eq!(span, sum);
    // The upload and the download are on either side of it, and the whole run is the three.
    assert_eq!(computes[0].start, config.transfer_cost(LEN));
    assert_eq!(
        run.end,
        config.transfer_cost(LEN) + sum + config.transfer_cost(LEN)
    );

    // The job table holds 32 (the upload takes a slot too): past it, a submit that finds no
    // job ended waits for the oldest one to end. The CPU sleeps to that job's end while 31
    // jobs are still queued behind it, so the NPU never idles (the trace above). Then the read
    // sleeps through the remaining jobs' ends, its download's last. Every wait wakes at a
    // later job end than the one before: at most one wait per job.
    let stats = run.stats;
    assert_eq!(stats.compute_jobs, CHAIN as u32);
    assert_eq!((stats.uploads, stats.downloads), (1, 1));
    assert!(run.submit_waits > 0, "the table filled");
    assert!(
        run.submit_waits <= (1 + CHAIN - 32) as u32,
        "CPU waits to submit"
    );
    assert!(stats.waits <= run.trace.len() as u32, "CPU waits in all");
}

#[test]
fn the_cpu_waits_on_a_full_job_table_change_no_cycle_of_the_schedule() {
    // The same chain with a job table that holds it all: the CPU never waits to submit, only in
    // the final read, and every job runs at the same cycles as with the 32-entry table.
    let config = SimConfig::default();
    let small = run_chains::<32>(config, 1);
    let big = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run_chains::<1024>(config, 1))
        .unwrap()
        .join()
        .unwrap();
    check_chains(&big, &config, 1);
    assert_eq!(big.submit_waits, 0, "the table never filled");
    assert!(small.submit_waits > 0);
    let cycles =
        |r: &ChainRun| -> Vec<(u64, u64)> { r.trace.iter().map(|e| (e.start, e.end)).collect() };
    assert_eq!(cycles(&small), cycles(&big));
    assert_eq!(small.end, big.end);
    assert_eq!(small.outputs, big.outputs);
}

#[test]
fn a_chain_alternating_between_two_units_waits_only_for_its_producer() {
    // Round robin puts consecutive jobs on different units: each job's dependencies (on the
    // job before it, the writer of its input and the reader of its output; on the one before
    // that, the previous writer of its output) cross queues and are carried by fences. The
    // chain is still back to back: no fence costs a cycle.
    let config = SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    };
    let run = run_chains::<32>(config, 1);
    let computes = check_chains(&run, &config, 1);
    let span = computes[CHAIN - 1].end - computes[0].start;
    assert_eq!(span, CHAIN as u64 * (64 + 12));
    // Every compute job after the first carries its producer's fence (on the other unit): the
    // producer, submitted just before, is still queued when the job is submitted.
    let compute_jobs: Vec<&(Fence, Job)> = run
        .jobs
        .iter()
        .filter(|(_, j)| matches!(j.kind, JobKind::Compute { .. }))
        .collect();
    for w in compute_jobs.windows(2) {
        let ((producer, _), (fence, job)) = (w[0], w[1]);
        assert!(
            job.deps.contains(producer),
            "{fence:?} does not wait for {producer:?}: {:?}",
            job.deps
        );
    }
}

#[test]
fn two_independent_chains_on_two_units_overlap_and_neither_idles() {
    // Two chains interleaved: round robin puts chain 0 on unit 0 and chain 1 on unit 1. Each
    // job starts when its own producer ends, so the two run side by side, each back to back,
    // and together take the time of one.
    let config = SimConfig {
        execution_units: 2,
        ..SimConfig::default()
    };
    let run = run_chains::<32>(config, 2);
    let computes = check_chains(&run, &config, 2);
    let chain_time = CHAIN as u64 * (64 + 12);
    for c in 0..2 {
        let first = computes[c];
        let last = computes[computes.len() - 2 + c];
        assert_eq!(last.end - first.start, chain_time, "chain {c}");
    }
    let span = computes.iter().map(|e| e.end).max().unwrap()
        - computes.iter().map(|e| e.start).min().unwrap();
    // Chain 1 starts one upload later (both uploads share the DMA queue).
    assert_eq!(span, chain_time + config.transfer_cost(LEN));
}

// ---------------------------------------------------------------------------------------------
// Fence-safe reuse of released memory.
// ---------------------------------------------------------------------------------------------

const X_BYTES: u32 = 256;
const OUT_FEATURES: u32 = 64;
const FC_SHAPE: FcShape = FcShape {
    batches: 1,
    in_features: X_BYTES,
    out_features: OUT_FEATURES,
};

fn fc_op() -> Op {
    let params = FcParams::new(
        Quant {
            scale: 0.05,
            zero_point: -3,
        },
        0.01,
        Quant {
            scale: 0.5,
            zero_point: 2,
        },
        Activation::None,
    )
    .unwrap();
    Op::FullyConnectedI8(FullyConnectedI8 {
        shape: FC_SHAPE,
        params,
    })
}

fn fc_reference(x: &[i8], w: &[i8]) -> Vec<i8> {
    let Op::FullyConnectedI8(FullyConnectedI8 { params, shape }) = fc_op() else {
        unreachable!()
    };
    let mut out = vec![0i8; OUT_FEATURES as usize];
    int8::fully_connected(&params, shape, x, w, None, &mut out).unwrap();
    out
}

fn relu_op() -> Op {
    let q = Quant {
        scale: 0.05,
        zero_point: -7,
    };
    Op::ReluI8(ReluI8 {
        len: X_BYTES,
        params: ReluParams::new(q, q).unwrap(),
    })
}

fn relu_reference(x: &[i8]) -> Vec<i8> {
    let Op::ReluI8(ReluI8 { params, .. }) = relu_op() else {
        unreachable!()
    };
    let mut out = vec![0i8; x.len()];
    int8::relu(&params, x, &mut out).unwrap();
    out
}

fn reuse_config() -> (SimConfig, MemoryConfig) {
    (
        SimConfig {
            execution_units: 2,
            ..SimConfig::default()
        },
        // Never slice, never deallocate: a released chunk is reused whole by the next tensor
        // of its size.
        MemoryConfig {
            slice: SliceStrategy::Never,
            dealloc: DeallocStrategy::Never,
        },
    )
}

/// The compute job of `fence`.
fn compute_job(jobs: &[(Fence, Job)], fence: Fence) -> (Queue, Vec<Region>, Region, Vec<Fence>) {
    let (_, job) = jobs.iter().find(|(f, _)| *f == fence).unwrap();
    match &job.kind {
        JobKind::Compute { inputs, output, .. } => {
            (job.queue, inputs.to_vec(), *output, job.deps.to_vec())
        }
        JobKind::Transfer { .. } => panic!("{fence:?} is a transfer"),
    }
}

fn last_fence<const JOBS: usize>(channel: &Channel<JOBS>) -> Fence {
    channel
        .with(|s| s.npu().0.jobs.last().map(|(f, _)| *f))
        .unwrap()
        .unwrap()
}

/// The scenario of the reuse tests, with `fresh` making a tensor of `X_BYTES` over the memory
/// the last dropped one had (a reserve from the chunk manager, or a placement in a pool):
///
/// 1. `a = fresh()`, written with `x`; a long FC reads it on unit 0; `a` is dropped.
/// 2. `b = fresh()` lies over `a`'s bytes; a short ReLU writes it on unit 1 at once.
/// 3. A long FC reads `b` on unit 0; `b` is dropped.
/// 4. `c = fresh()` lies over them too; `client.write` uploads into it on the DMA queue.
///
/// Checks that both FCs compute from the bytes they were given, that the writers are
/// scheduled after the readers of the memory they overwrite, and that a writer which did not
/// wait would have ended long before the reader did.
fn reuse_scenario<'c, const JOBS: usize>(
    channel: &'c Channel<JOBS>,
    fresh: &dyn Fn() -> Tensor<'c, Channel<JOBS>>,
) {
    let client = ComputeClient::new(channel);
    let x = workloads::pseudo_random_i8(11, X_BYTES as usize);
    let w = workloads::pseudo_random_i8(12, (X_BYTES * OUT_FEATURES) as usize);
    let s = workloads::pseudo_random_i8(13, X_BYTES as usize);
    let z = workloads::pseudo_random_i8(14, X_BYTES as usize);
    let weights = client.create(bytes(&w)).unwrap();
    let source = client.create(bytes(&s)).unwrap();
    let y1 = client.empty(OUT_FEATURES).unwrap();
    let y2 = client.empty(OUT_FEATURES).unwrap();
    let a = fresh();
    client.write(&a, bytes(&x)).unwrap();
    client.sync().unwrap();
    let waits_before = client.stats().unwrap().waits;
    let jobs_before = client.stats().unwrap().compute_jobs;
    assert_eq!(jobs_before, 0, "round robin starts on unit 0");

    // 1. A long reader of `a` on unit 0, then `a` is gone.
    client.execute(fc_op(), &[&a, &weights], &y1).unwrap();
    let reader1 = last_fence(channel);
    drop(a);
    // 2. Its memory, to a new tensor, written at once on the other unit.
    let b = fresh();
    client.execute(relu_op(), &[&source], &b).unwrap();
    let writer1 = last_fence(channel);
    // 3. A long reader of `b` on unit 0, then `b` is gone.
    client.execute(fc_op(), &[&b, &weights], &y2).unwrap();
    let reader2 = last_fence(channel);
    drop(b);
    // 4. The same memory, written by a DMA upload.
    let c = fresh();
    client.write(&c, bytes(&z)).unwrap();
    let writer2 = last_fence(channel);
    assert_eq!(
        client.stats().unwrap().waits,
        waits_before,
        "the CPU never waited to reuse the memory"
    );

    let mut out = vec![0u8; OUT_FEATURES as usize];
    client.read(&y1, &mut out).unwrap();
    assert_eq!(out, bytes(&fc_reference(&x, &w)), "the first FC saw x");
    client.read(&y2, &mut out).unwrap();
    assert_eq!(
        out,
        bytes(&fc_reference(&relu_reference(&s), &w)),
        "the second FC saw relu(s)"
    );
    let mut got = vec![0u8; X_BYTES as usize];
    client.read(&c, &mut got).unwrap();
    assert_eq!(got, bytes(&z));

    let jobs = jobs(channel);
    let trace = trace(channel);
    let (q1, r1_inputs, _, _) = compute_job(&jobs, reader1);
    let (qw, _, w1_output, w1_deps) = compute_job(&jobs, writer1);
    let (q2, r2_inputs, _, r2_deps) = compute_job(&jobs, reader2);
    assert_eq!(
        (q1, qw, q2),
        (Queue::Unit(0), Queue::Unit(1), Queue::Unit(0))
    );
    // One memory, three tensors.
    let memory = r1_inputs[0];
    assert_eq!(memory.len, X_BYTES);
    assert_eq!(w1_output, memory, "b was given a's memory");
    assert_eq!(r2_inputs[0], memory);
    let (_, upload) = jobs.iter().find(|(f, _)| *f == writer2).unwrap();
    let JobKind::Transfer { src, dst } = upload.kind else {
        panic!("the write is a transfer")
    };
    assert_eq!((src.space, upload.queue), (Space::Host, Queue::Dma));
    assert_eq!(dst, memory, "c was given the same memory");

    // The writers carry the readers' fences and start only once the readers have ended.
    assert!(w1_deps.contains(&reader1), "{w1_deps:?}");
    assert!(r2_deps.contains(&writer1), "{r2_deps:?}");
    assert!(upload.deps.contains(&reader2), "{:?}", upload.deps);
    let (r1, w1, r2, w2) = (
        entry(&trace, reader1),
        entry(&trace, writer1),
        entry(&trace, reader2),
        entry(&trace, writer2),
    );
    assert_eq!(
        w1.start, r1.end,
        "the ReLU waited for the first FC, no longer"
    );
    assert_eq!(r2.start, w1.end);
    assert_eq!(
        w2.start, r2.end,
        "the upload waited for the second FC, no longer"
    );
    // And the test can tell: each writer is so much shorter than the reader it waits for that,
    // had it started when submitted (at the reader's start at the latest), it would have
    // ended, and retired its bytes into the memory, long before the reader ended.
    for (reader, writer) in [(r1, w1), (r2, w2)] {
        let submitted_by = reader.start;
        assert!(
            submitted_by + (writer.end - writer.start) < reader.end,
            "reader {reader:?}, writer {writer:?}"
        );
        assert!((reader.end - reader.start) > 5 * (writer.end - writer.start));
    }
}

#[test]
fn a_released_chunk_is_reused_at_once_and_written_only_after_its_readers() {
    let (config, memory_config) = reuse_config();
    let channel = channel::<32>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let reuses = client.memory_stats().unwrap().exact_reuses;
    reuse_scenario(&channel, &|| client.empty(X_BYTES).unwrap());
    assert_eq!(
        client.memory_stats().unwrap().exact_reuses,
        reuses + 2,
        "b and c were handed the chunk a released"
    );
}

#[test]
fn a_placement_over_dead_bytes_is_written_only_after_their_readers() {
    // The planned path: every tensor is placed at offset 0 of one pool, each over the bytes of
    // the one dropped before it.
    let (config, memory_config) = reuse_config();
    let channel = channel::<32>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let pool = client.empty(X_BYTES).unwrap();
    let placements = client.memory_stats().unwrap().placements;
    reuse_scenario(&channel, &|| client.place(&pool, 0, X_BYTES).unwrap());
    assert_eq!(client.memory_stats().unwrap().placements, placements + 3);
}

#[test]
fn control_a_writer_that_does_not_wait_corrupts_the_reader() {
    // What the reuse tests guard against, made to happen: the same long FC on unit 0 and the
    // same short ReLU into the FC's input on unit 1, but the ReLU is submitted behind the
    // server's back without the FC's fence. It ends first, and the FC computes from its bytes.
    let (config, memory_config) = reuse_config();
    let channel = channel::<32>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let x = workloads::pseudo_random_i8(11, X_BYTES as usize);
    let w = workloads::pseudo_random_i8(12, (X_BYTES * OUT_FEATURES) as usize);
    let s = workloads::pseudo_random_i8(13, X_BYTES as usize);
    let weights = client.create(bytes(&w)).unwrap();
    // Kept alive: the rogue writer reads it.
    let _source = client.create(bytes(&s)).unwrap();
    let source_upload = last_fence(&channel);
    let y = client.empty(OUT_FEATURES).unwrap();
    let a = client.create(bytes(&x)).unwrap();
    client.sync().unwrap();
    client.execute(fc_op(), &[&a, &weights], &y).unwrap();
    let reader = last_fence(&channel);
    let jobs = jobs(&channel);
    let (_, inputs, _, _) = compute_job(&jobs, reader);
    let JobKind::Transfer {
        dst: source_region, ..
    } = jobs
        .iter()
        .find(|(f, _)| *f == source_upload)
        .unwrap()
        .1
        .kind
    else {
        panic!("an upload")
    };
    drop(a);
    let rogue = Job {
        kind: JobKind::Compute {
            op: &relu_op(),
            variant: Variant::Auto,
            inputs: heapless::Vec::from_slice(&[source_region]).unwrap(),
            output: inputs[0],
            scratch: None,
        },
        queue: Queue::Unit(1),
        deps: heapless::Vec::new(),
    };
    let writer = channel
        .with(|s| s.npu_mut().submit(&rogue))
        .unwrap()
        .unwrap();
    let mut out = vec![0u8; OUT_FEATURES as usize];
    client.read(&y, &mut out).unwrap();
    let trace = trace(&channel);
    assert!(entry(&trace, writer).end < entry(&trace, reader).end);
    assert_ne!(out, bytes(&fc_reference(&x, &w)), "the FC did not see x");
    assert_eq!(
        out,
        bytes(&fc_reference(&relu_reference(&s), &w)),
        "the FC saw the rogue writer's bytes"
    );
}

// ---------------------------------------------------------------------------------------------
// Job plans.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_plan_run_waits_for_the_jobs_around_it_and_inside_it_no_longer() {
    // The reuse scenario as a plan on two units, over two live placements of one pool:
    // step 0, a long FC reading `a` (unit 0); step 1, a short ReLU writing `b`, laid over
    // `a`'s bytes (unit 1); step 2, a long FC reading `b` (unit 0). Around each run, an upload
    // into `a` before (the plan's first jobs wait for it) and one after (it waits for the
    // plan's readers of that memory, through `b`).
    let (config, memory_config) = reuse_config();
    let channel = channel::<32>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let w = workloads::pseudo_random_i8(12, (X_BYTES * OUT_FEATURES) as usize);
    let s = workloads::pseudo_random_i8(13, X_BYTES as usize);
    let z = workloads::pseudo_random_i8(14, X_BYTES as usize);
    let weights = client.create(bytes(&w)).unwrap();
    let source = client.create(bytes(&s)).unwrap();
    let [y1, y2] = [0; 2].map(|_| client.empty(OUT_FEATURES).unwrap());
    let pool = client.empty(X_BYTES).unwrap();
    let a = client.place(&pool, 0, X_BYTES).unwrap();
    let b = client.place(&pool, 0, X_BYTES).unwrap();
    let (fc, relu) = (fc_op(), relu_op());
    let mut plan: JobPlan<_, 4, 8> = client.job_plan();
    plan.push(&fc, &[&a, &weights], &y1).unwrap();
    plan.push(&relu, &[&source], &b).unwrap();
    plan.push(&fc, &[&b, &weights], &y2).unwrap();
    client.sync().unwrap();
    for run in 0..3 {
        let x = workloads::pseudo_random_i8(20 + run, X_BYTES as usize);
        client.write(&a, bytes(&x)).unwrap();
        let upload = last_fence(&channel);
        plan.run(&[&fc, &relu, &fc]).unwrap();
        let steps: Vec<Fence> = (0..3).map(|k| plan.jobs().fence(k).unwrap()).collect();
        client.write(&a, bytes(&z)).unwrap();
        let overwrite = last_fence(&channel);

        let mut out = vec![0u8; OUT_FEATURES as usize];
        client.read(&y1, &mut out).unwrap();
        assert_eq!(out, bytes(&fc_reference(&x, &w)), "run {run}: step 0 saw x");
        client.read(&y2, &mut out).unwrap();
        assert_eq!(
            out,
            bytes(&fc_reference(&relu_reference(&s), &w)),
            "run {run}: step 2 saw relu(s)"
        );
        let mut got = vec![0u8; X_BYTES as usize];
        client.read(&a, &mut got).unwrap();
        assert_eq!(got, bytes(&z));

        let jobs = jobs(&channel);
        let trace = trace(&channel);
        let deps = |f: Fence| -> Vec<Fence> {
            jobs.iter().find(|(g, _)| *g == f).unwrap().1.deps.to_vec()
        };
        let queues: Vec<Queue> = steps.iter().map(|&f| compute_job(&jobs, f).0).collect();
        assert_eq!(queues, [Queue::Unit(0), Queue::Unit(1), Queue::Unit(0)]);
        let [e0, e1, e2] = [0, 1, 2].map(|k| entry(&trace, steps[k]));
        let (up, over) = (entry(&trace, upload), entry(&trace, overwrite));
        assert!(deps(steps[0]).contains(&upload), "run {run}");
        assert!(e0.start >= up.end);
        assert!(
            deps(steps[1]).contains(&steps[0]),
            "WAR through the overlap"
        );
        assert_eq!(
            e1.start, e0.end,
            "the ReLU waited for the first FC, no longer"
        );
        assert!(deps(steps[2]).contains(&steps[1]), "RAW across units");
        assert_eq!(e2.start, e1.end);
        assert!(deps(overwrite).contains(&steps[2]), "{:?}", deps(overwrite));
        assert_eq!(
            over.start, e2.end,
            "the upload waited for the second FC, no longer"
        );
        // And the test can tell: the writers are far shorter than the readers they wait for.
        for (reader, writer) in [(e0, e1), (e2, over)] {
            assert!(reader.start + (writer.end - writer.start) < reader.end);
        }
    }
}

/// How a test lets go of a plan: dropped as usual, or inside a channel callback, where its
/// references can only be released later (the channel's deferred releases).
#[derive(Clone, Copy, Debug)]
enum Drop {
    Now,
    InsideCallback,
}

#[test]
fn a_plan_skips_the_records_of_its_own_tensors_and_constants_yet_stays_fence_safe() {
    // A ReLU writes `x` from `source` (unit 0), a long FC reads `x` and constant weights into
    // `y` (unit 1), a short ReLU reads `y` into `out` (unit 0). The plan adopts `x` and `y`,
    // so runs neither walk nor write their records, and its shared tensors (`source`, `out`)
    // are used on unit 0 only: nothing but the plan's own bookkeeping can make run r+1's
    // first ReLU wait for run r's FC, which reads the `x` it overwrites. Then the plan is
    // dropped, and new tensors take `x`'s and the weights' memory at once: their uploads must
    // wait for the last FC, which the plan wrote into their records at its release.
    let small_relu = {
        let Op::ReluI8(ReluI8 { params, .. }) = relu_op() else {
            unreachable!()
        };
        Op::ReluI8(ReluI8 {
            len: OUT_FEATURES,
            params,
        })
    };
    for drop_how in [Drop::Now, Drop::InsideCallback] {
        let (config, memory_config) = reuse_config();
        let channel = channel::<64>(config, memory_config, 256);
        let client = ComputeClient::new(&channel);
        let sources: Vec<Vec<i8>> = (0..3)
            .map(|r| workloads::pseudo_random_i8(30 + r, X_BYTES as usize))
            .collect();
        let source = client.create(bytes(&sources[0])).unwrap();
        // Uploaded after the source: the first run must find it in the constant's record.
        let w = workloads::pseudo_random_i8(12, (X_BYTES * OUT_FEATURES) as usize);
        let weights = client
            .create_const_with(X_BYTES * OUT_FEATURES, |b| {
                b.copy_from_slice(bytes(&w));
                Ok(())
            })
            .unwrap();
        let x = client.empty(X_BYTES).unwrap();
        let y = client.empty(OUT_FEATURES).unwrap();
        let out = client.empty(OUT_FEATURES).unwrap();
        let (fc, relu) = (fc_op(), relu_op());
        let mut plan: JobPlan<_, 4, 8> = client.job_plan();
        plan.push(&relu, &[&source], &x).unwrap();
        plan.push(&fc, &[&x, &weights], &y).unwrap();
        plan.push(&small_relu, &[&y], &out).unwrap();
        assert_eq!(plan.jobs().shared_tensors(), 4, "all but the weights");
        plan.adopt(x).unwrap();
        plan.adopt(y).unwrap();
        assert_eq!(
            plan.jobs().shared_tensors(),
            2,
            "x and y are the plan's own"
        );

        let mut runs = Vec::new();
        for (r, s) in sources.iter().enumerate() {
            if r > 0 {
                client.write(&source, bytes(s)).unwrap();
            }
            // The newest upload: the weights' before the first run, the source's after.
            let upload = last_fence(&channel);
            plan.run(&[&relu, &fc, &small_relu]).unwrap();
            let steps = [0, 1, 2].map(|k| plan.jobs().fence(k).unwrap());
            runs.push((upload, steps));
        }
        let last_fc = runs[2].1[1];
        match drop_how {
            Drop::Now => drop(plan),
            Drop::InsideCallback => {
                let mut held = Some(plan);
                client
                    .create_with(16, |b| {
                        held.take();
                        b.fill(0);
                        Ok(())
                    })
                    .unwrap();
            }
        }
        drop(weights);
        let z = workloads::pseudo_random_i8(40, X_BYTES as usize);
        let _over_x = client.create(bytes(&z)).unwrap();
        let x_overwrite = last_fence(&channel);
        let _over_w = client.create(&vec![7u8; w.len()]).unwrap();
        let w_overwrite = last_fence(&channel);
        // Read only now: a read waits for the run, and the memory must be reused before.
        let mut got = vec![0u8; OUT_FEATURES as usize];
        client.read(&out, &mut got).unwrap();
        let want = relu_reference(&fc_reference(&relu_reference(&sources[2]), &w));
        assert_eq!(got, bytes(&want), "{drop_how:?}");

        let jobs = jobs(&channel);
        let trace = trace(&channel);
        let deps = |f: Fence| -> Vec<Fence> {
            jobs.iter().find(|(g, _)| *g == f).unwrap().1.deps.to_vec()
        };
        let (_, fc_inputs, _, _) = compute_job(&jobs, last_fc);
        let (x_region, weights_region) = (fc_inputs[0], fc_inputs[1]);
        // The first run waits for the constant's upload, later runs for the source's.
        for (r, (upload, steps)) in runs.iter().enumerate() {
            assert!(deps(steps[0]).contains(upload), "{drop_how:?}: run {r}");
            let queues = steps.map(|f| compute_job(&jobs, f).0);
            assert_eq!(queues, [Queue::Unit(0), Queue::Unit(1), Queue::Unit(0)]);
        }
        for r in 1..3 {
            let (fc, relu) = (runs[r - 1].1[1], runs[r].1[0]);
            assert!(
                deps(relu).contains(&fc),
                "{drop_how:?}: run {r}: {:?}",
                deps(relu)
            );
            assert!(entry(&trace, relu).start >= entry(&trace, fc).end);
        }
        // The memory the plan owned or read is reused at once, written after the last FC.
        for (overwrite, region) in [(x_overwrite, x_region), (w_overwrite, weights_region)] {
            let (_, job) = jobs.iter().find(|(f, _)| *f == overwrite).unwrap();
            assert!(matches!(job.kind, JobKind::Transfer { dst, .. } if dst == region));
            assert!(
                deps(overwrite).contains(&last_fc),
                "{drop_how:?}: {:?}",
                deps(overwrite)
            );
            assert!(entry(&trace, overwrite).start >= entry(&trace, last_fc).end);
        }
        // And the test can tell: the ReLU and the upload are far shorter than the FC.
        let fc = entry(&trace, last_fc);
        for short in [runs[2].1[0], x_overwrite] {
            let e = entry(&trace, short);
            assert!(fc.start + (e.end - e.start) < fc.end);
        }
    }
}

#[test]
fn a_plan_adopts_a_tensor_only_when_no_other_handle_reaches_it() {
    let (config, memory_config) = reuse_config();
    let channel = channel::<64>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let source = client.empty(X_BYTES).unwrap();
    let alias = source.clone();
    let x = client.empty(X_BYTES).unwrap();
    let unused = client.empty(X_BYTES).unwrap();
    let relu = relu_op();
    let mut plan: JobPlan<_, 4, 8> = client.job_plan();
    plan.push(&relu, &[&source], &x).unwrap();
    plan.adopt(source).unwrap();
    plan.adopt(unused).unwrap();
    assert_eq!(plan.jobs().shared_tensors(), 2, "source has another handle");
    assert_eq!(
        plan.jobs().tensors(),
        2,
        "a tensor the plan does not use is dropped"
    );
    for r in 0..3 {
        // Written through the other handle between runs: each run waits for the upload.
        let s = workloads::pseudo_random_i8(50 + r, X_BYTES as usize);
        client.write(&alias, bytes(&s)).unwrap();
        let upload = last_fence(&channel);
        plan.run(&[&relu]).unwrap();
        let step = plan.jobs().fence(0).unwrap();
        assert!(
            compute_job(&jobs(&channel), step).3.contains(&upload),
            "run {r}"
        );
        let mut out = vec![0u8; X_BYTES as usize];
        client.read(&x, &mut out).unwrap();
        assert_eq!(out, bytes(&relu_reference(&s)));
    }
}

/// A 3 x 3 convolution of 8 filters, stride 1, SAME padding, on `side` x `side` x 4.
fn conv_op(side: u32) -> Op {
    let shape = Conv2dShape {
        input: Nhwc {
            batches: 1,
            height: side,
            width: side,
            channels: 4,
        },
        out_channels: 8,
        filter_depth: 4,
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
    let params = Conv2dParams::new(shape, q(0.05, -3), q(0.1, 2), Activation::Relu).unwrap();
    Op::Conv2dI8(Conv2dI8 { shape, params })
}

#[test]
fn a_plan_that_outgrows_its_scratch_frees_the_old_one_after_its_jobs() {
    // Convolutions run as im2col, with the plan's scratch matrix. A second, larger step
    // replaces the scratch after a run: the old one (the plan's own, whose record runs do not
    // write) must not be rewritten before the first run's convolution is over with it.
    let (config, memory_config) = reuse_config();
    let im2col = TuneMode::Fixed(Candidate::Npu(Variant::Im2col));
    let channel = tuned_channel::<64>(config, memory_config, 256, im2col);
    let client = ComputeClient::new(&channel);
    let (small, large) = (conv_op(12), conv_op(24));
    let tensors = |op: &Op| -> (Vec<Tensor<'_, _>>, Tensor<'_, _>) {
        let ins = workloads::operand_bytes(op, 7).unwrap();
        let ins = ins.iter().map(|b| client.create(b).unwrap()).collect();
        (ins, client.empty(op.operands().unwrap().output).unwrap())
    };
    let (small_in, small_out) = tensors(&small);
    let (large_in, large_out) = tensors(&large);
    let mut plan: JobPlan<_, 4, 16> = client.job_plan();
    plan.push(&small, &small_in.iter().collect::<Vec<_>>(), &small_out)
        .unwrap();
    plan.run(&[&small]).unwrap();
    let conv = plan.jobs().fence(0).unwrap();
    plan.push(&large, &large_in.iter().collect::<Vec<_>>(), &large_out)
        .unwrap();
    let old_bytes = Variant::Im2col.scratch_bytes(&small).unwrap();
    let fresh = vec![9u8; old_bytes as usize];
    let fresh_tensor = client.create(&fresh).unwrap();
    let upload = last_fence(&channel);

    let jobs = jobs(&channel);
    let (_, job) = jobs.iter().find(|(f, _)| *f == conv).unwrap();
    let JobKind::Compute {
        scratch: Some(old_scratch),
        variant: Variant::Im2col,
        ..
    } = job.kind
    else {
        panic!("{:?}", job.kind)
    };
    let (_, job) = jobs.iter().find(|(f, _)| *f == upload).unwrap();
    assert!(matches!(job.kind, JobKind::Transfer { dst, .. } if dst == old_scratch));
    assert!(job.deps.contains(&conv), "{:?}", job.deps);
    let mut got = vec![0u8; fresh.len()];
    client.read(&fresh_tensor, &mut got).unwrap();
    assert_eq!(got, fresh);
    let trace = trace(&channel);
    assert!(entry(&trace, upload).start >= entry(&trace, conv).end);
    // And the test can tell: the upload alone is shorter than the convolution.
    let (c, u) = (entry(&trace, conv), entry(&trace, upload));
    assert!(c.start + (u.end - u.start) < c.end);
}

#[test]
fn jobs_on_a_pool_and_on_a_tensor_placed_in_it_wait_for_each_other() {
    // Two units: jobs on the pool and on a tensor placed in it land on either, and only
    // their dependencies order them (the pool's bytes are the placement's).
    let (config, memory_config) = reuse_config();
    let channel = channel::<32>(config, memory_config, 256);
    let client = ComputeClient::new(&channel);
    let source = client
        .create(bytes(&workloads::pseudo_random_i8(5, X_BYTES as usize)))
        .unwrap();
    let pool = client.empty(X_BYTES).unwrap();
    let view = client.place(&pool, 0, X_BYTES).unwrap();
    client.sync().unwrap();
    let relu = relu_op();
    let mut fences = Vec::new();
    for output in [&view, &pool, &view] {
        client.execute(relu, &[&source], output).unwrap();
        fences.push(last_fence(&channel));
    }
    let jobs = jobs(&channel);
    for pair in fences.windows(2) {
        let (first, (queue, _, _, deps)) = (pair[0], compute_job(&jobs, pair[1]));
        let ordered = queue == compute_job(&jobs, first).0 || deps.contains(&first);
        assert!(ordered, "{:?} does not wait for {first:?}", pair[1]);
    }
}
