//! Soaking a model in injected faults (behind the `std` feature): what `npu-sim bench faults`
//! runs.
//!
//! # Design
//!
//! A model is prepared once and invoked many times (from its job plan after the second
//! invoke, as firmware runs it) while the simulator injects faults of every kind
//! ([`FaultKind`]) on a fraction of the jobs, drawn from a seed, so a run is reproducible.
//! Each invoke is judged against what the fault plan did during it:
//!
//! - a *harmful* fault (a DMA or bus error, a hang, an overrun past the watchdog's margin)
//!   must fail the invoke with [`Error::Fault`]; an invoke that succeeds instead counts its
//!   harmful faults as `unreported_faults`;
//! - a *harmless* one (a spurious or lost interrupt) must change nothing: an invoke that fails
//!   with none harmful injected is a `false_alarm`;
//! - an invoke that succeeds must give the expected bytes (TFLM's, or those of a fault-free
//!   invoke of the same input), else it is a `wrong_output`.
//!
//! The server's watchdog is on ([`WatchdogConfig::ON`]), so that hangs and overruns are
//! caught. After the last invoke the faults stop and the server is synchronised: arena bytes in use,
//! live tensors and staging blocks are compared with what they were before the first fault
//! (`leaked_*`). Before the faults start, the model's constants are uploaded and waited for:
//! a reset abandons what is in flight, and a constant whose upload it abandons is lost for
//! every later invoke (see the server's recovery).

use std::time::Instant;

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::ComputeClient;
use npu_compute::graph::{Graph, GraphError, Optimise};
use npu_compute::hal::Npu;
use npu_compute::memory::MemoryConfig;
use npu_compute::server::{ComputeServer, WatchdogConfig};
use npu_compute::Error;

use crate::faults::{Chance, FaultCounts, FaultKind, FaultPlan, FaultRule};
use crate::runner::{self, RunError, ServerOf};
use crate::workloads::{self, WorkloadError};
use crate::{SimConfig, SimNpu};

/// The overrun a soak injects: ten times the job's cycles and 10,000,000 more, past the
/// server's default watchdog margin (four times the prediction and 100,000 cycles) for any job
/// predicted under 2,475,000 cycles, whatever it really takes: every job of the shared models.
/// (A smaller overrun can stay within the margin of a job predicted well above what it runs,
/// one whose weight copy the pipeline hides, and is then rightly not a fault; the soak counts
/// every overrun as harmful, so it injects only those past any margin.)
pub const SOAK_OVERRUN: FaultKind = FaultKind::Overrun {
    times: 10,
    plus: 10_000_000,
};

/// The kinds a soak mixes, each on an equal share of the fault rate.
pub const SOAK_KINDS: [FaultKind; 6] = [
    FaultKind::Dma,
    FaultKind::Bus,
    FaultKind::Hang,
    SOAK_OVERRUN,
    FaultKind::SpuriousIrq,
    FaultKind::LostIrq,
];

/// One input set of a soak: the bytes of each model input, and the expected bytes of each
/// output (`None`: those of a fault-free invoke).
pub type InputSet = (Vec<Vec<u8>>, Option<Vec<Vec<u8>>>);

/// What to soak and how hard.
#[derive(Clone, Copy, Debug)]
pub struct SoakOptions {
    /// Invokes under faults.
    pub invokes: u64,
    /// Jobs faulted, in millionths (10,000 is 1%), shared equally by [`SOAK_KINDS`].
    pub fault_per_million: u32,
    /// The seed of the fault draws.
    pub seed: u64,
    /// The simulated NPU (its own `faults` are replaced).
    pub config: SimConfig,
}

/// What a soak found (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SoakReport {
    /// Invokes under faults.
    pub invokes: u64,
    /// Jobs submitted during them.
    pub jobs: u64,
    /// Faults injected, by kind.
    pub faults_injected: FaultCounts,
    /// Invokes that failed.
    pub failed_invokes: u64,
    /// Of those, the ones whose error said the server recovered.
    pub recovered: u64,
    /// Invokes that succeeded with bytes other than the expected ones.
    pub wrong_outputs: u64,
    /// Harmful faults injected during invokes that succeeded.
    pub unreported_faults: u64,
    /// Those faults by kind (harmless kinds are 0).
    pub unreported_by_kind: FaultCounts,
    /// Invokes that failed with no harmful fault injected.
    pub false_alarms: u64,
    /// Arena bytes in use after the soak beyond those before it.
    pub leaked_bytes: i64,
    /// Live tensors after the soak beyond those before it.
    pub leaked_handles: i64,
    /// Host staging blocks after the soak beyond those before it.
    pub leaked_staging_blocks: i64,
    /// Virtual cycles of the invokes.
    pub cycles: u64,
    /// Host seconds of the invokes.
    pub host_seconds: f64,
}

impl SoakReport {
    /// Whether the soak passed: no wrong output, no unreported fault, no false alarm, no leak.
    pub fn passed(&self) -> bool {
        self.wrong_outputs == 0
            && self.unreported_faults == 0
            && self.false_alarms == 0
            && self.leaked_bytes == 0
            && self.leaked_handles == 0
            && self.leaked_staging_blocks == 0
    }
}

/// The fault plan of a soak: each of [`SOAK_KINDS`] on `per_million / 6` of the jobs, all
/// drawn from `seed` (the simulator draws each rule apart, by its position in the plan).
pub fn soak_plan(per_million: u32, seed: u64) -> FaultPlan {
    let share = per_million / SOAK_KINDS.len() as u32;
    let mut plan = FaultPlan::NONE;
    for kind in SOAK_KINDS {
        let rule = FaultRule {
            chance: Some(Chance {
                per_million: share,
                seed,
            }),
            ..FaultRule::always(kind)
        };
        // Six rules: the plan holds eight.
        let _ = plan.push(rule);
    }
    plan
}

/// One invoke of `graph` on `inputs` into `outputs`, from the model's initial state.
fn invoke<C: ComputeChannel, const OPS_: usize, const TENSORS_: usize>(
    graph: &mut Graph<'_, C, OPS_, TENSORS_>,
    inputs: &[Vec<u8>],
    outputs: &mut [Vec<u8>],
) -> Result<(), GraphError> {
    // A stateful model starts every invoke from its initial state, so that an invoke's
    // expected bytes do not depend on the invokes before (and a state a fault left undefined
    // is rewritten).
    graph.reset_state()?;
    let ins: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut outs: Vec<&mut [u8]> = outputs.iter_mut().map(Vec::as_mut_slice).collect();
    graph.invoke(&ins, &mut outs)
}

/// Soaks `model` over `sets` (see the [module docs](self)), on the runner's small stack or,
/// if a capacity of it runs out, its large one.
pub fn soak(
    model: &'static [u8],
    sets: &[InputSet],
    opts: &SoakOptions,
) -> Result<SoakReport, RunError> {
    runner::on_fitting_stack!(soak_on(model, sets, opts))
}

fn soak_on<
    const OPS_: usize,
    const TENSORS_: usize,
    const H: usize,
    const K: usize,
    const S: usize,
    const T: usize,
>(
    model: &'static [u8],
    sets: &[InputSet],
    opts: &SoakOptions,
) -> Result<SoakReport, RunError> {
    let (arena, host) = runner::default_memory(model, opts.config, Optimise::Cycles)?;
    let mut device = workloads::aligned_memory(arena);
    let mut host = workloads::aligned_memory(host);
    let stack = |e| RunError::Setup(WorkloadError::Stack(e));
    let config = SimConfig {
        faults: FaultPlan::NONE,
        ..opts.config
    };
    let npu = SimNpu::new(
        bytemuck::cast_slice_mut(&mut device),
        bytemuck::cast_slice_mut(&mut host),
        config,
    )
    .map_err(|e| RunError::Setup(WorkloadError::Sim(e)))?;
    let server = ServerOf::<H, K, S, T>::new(npu, MemoryConfig::default())
        .map_err(stack)?
        .with_watchdog(WatchdogConfig::ON);
    let channel: RefCellChannel<_, H> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Box<Graph<'_, _, OPS_, TENSORS_>> = Box::new(Graph::prepare(client, model)?);
    let mut outputs: Vec<Vec<u8>> = graph.output_sizes().map(|n| vec![0; n as usize]).collect();
    // Fault-free: the expected bytes, the job plan built, the constants uploaded.
    let mut expected = Vec::with_capacity(sets.len());
    for (inputs, tflm) in sets {
        for _ in 0..2 {
            invoke(&mut graph, inputs, &mut outputs)?;
        }
        match tflm {
            Some(tflm) if *tflm != outputs => {
                return Err(RunError::Soak(
                    "the outputs differ from TFLM's without any fault",
                ))
            }
            _ => expected.push(outputs.clone()),
        }
    }
    client.sync().map_err(stack)?;
    let books = |channel: &RefCellChannel<ServerOf<'_, H, K, S, T>, H>| {
        channel.with(|s| {
            s.sync()?;
            Ok::<_, Error>((
                i64::from(s.memory_stats().in_use),
                s.live_tensors() as i64,
                s.staging_blocks() as i64,
            ))
        })
    };
    let clean = books(&channel).and_then(|r| r).map_err(stack)?;
    let sim = |f: &mut dyn FnMut(&mut SimNpu<'_>)| channel.with(|s| f(s.npu_mut()));
    let before = channel
        .with(|s| (s.npu().now(), s.npu().stats()))
        .map_err(stack)?;
    sim(&mut |npu| npu.set_faults(soak_plan(opts.fault_per_million, opts.seed))).map_err(stack)?;

    let mut report = SoakReport {
        invokes: opts.invokes,
        ..SoakReport::default()
    };
    let start = Instant::now();
    let mut counts = before.1.faults_injected;
    for i in 0..opts.invokes {
        let k = (i % sets.len() as u64) as usize;
        let result = invoke(&mut graph, &sets[k].0, &mut outputs);
        let now = channel
            .with(|s| s.npu().stats().faults_injected)
            .map_err(stack)?;
        let during = now.since(&counts).harmful();
        let injected = during.total();
        counts = now;
        match result {
            Ok(()) => {
                report.unreported_faults += injected;
                report.unreported_by_kind.add(&during);
                if outputs != expected[k] {
                    report.wrong_outputs += 1;
                }
            }
            Err(GraphError::Compute {
                error: Error::Fault { recovered, .. },
                ..
            }) => {
                report.failed_invokes += 1;
                report.recovered += u64::from(recovered);
                if injected == 0 {
                    report.false_alarms += 1;
                }
                if !recovered {
                    return Err(RunError::Soak("the server could not recover from a fault"));
                }
            }
            Err(e) => return Err(RunError::Graph(e)),
        }
    }
    report.host_seconds = start.elapsed().as_secs_f64();
    sim(&mut |npu| npu.set_faults(FaultPlan::NONE)).map_err(stack)?;
    let after = channel
        .with(|s| (s.npu().now(), s.npu().stats()))
        .map_err(stack)?;
    let books = books(&channel).and_then(|r| r).map_err(stack)?;
    report.faults_injected = after.1.faults_injected.since(&before.1.faults_injected);
    report.jobs = after.1.jobs_submitted - before.1.jobs_submitted;
    report.cycles = after.0 - before.0;
    report.leaked_bytes = books.0 - clean.0;
    report.leaked_handles = books.1 - clean.1;
    report.leaked_staging_blocks = books.2 - clean.2;
    Ok(report)
}
