//! Dispatch cost: CPU instructions per job from the client down to the driver.
//!
//! # Why
//!
//! The compute stack is meant to keep the CPU free while the NPU works, so what one job costs
//! the CPU to *dispatch* (client → [`RefCellChannel`] → [`NpuServer`] → HAL) matters on its
//! own, apart from the kernel the NPU then runs. The target is under 500 instructions
//! per job. This module counts them over the [`NullNpu`], a driver that only does a driver's
//! bookkeeping, so the count is the stack's and not a simulator's.
//!
//! # How
//!
//! The clock is SysTick under QEMU's `-icount shift=0`, which counts instructions (see
//! [`systick`](crate::systick), shared with the Cortex-M55 firmware): [`calibrate`] measures
//! 40 instructions per tick on mps2-an386, so a count over [`CALLS`] calls is exact to 0.04
//! instructions per call.
//!
//! Each figure is `N` calls in one timed loop, minus the same loop running an empty closure
//! (the loop, the indirect call and the result check), divided by `N`. The ring of the null
//! NPU holds 32 jobs, so every 32nd submit finds it full and the server waits once (the null
//! NPU then retires all 32): that cost is spread over the jobs, as an interrupt's would be.
//! Every call passes a reference to a prebuilt [`Op`], as a caller holding its ops does, and the
//! job the driver receives borrows it: nothing copies the op's 148 bytes on the way down.
//!
//! Three levels are timed, for a breakdown:
//! - end to end: [`ComputeClient::execute`] of an int8 ADD on two 16-byte tensors;
//! - the server alone: [`ComputeServer::execute`] called inside one [`ComputeChannel::with`];
//! - the driver alone: [`Npu::submit`] of the job the server builds for that ADD;
//!
//! and, for reference, an empty [`ComputeChannel::with`] (borrowing the server).

use core::mem::size_of;

use cortex_m::peripheral::SYST;

use npu_compute::channel::{ComputeChannel, RefCellChannel};
use npu_compute::client::{ComputeClient, JobPlan};
use npu_compute::graph::{Graph, GraphError};
use npu_compute::hal::{HalError, Job, JobKind, Npu, Queue, Region, Variant};
use npu_compute::kernels::int8::{Activation, AddParams, Quant};
use npu_compute::memory::{Access, ChunkSliceMemory, MemoryConfig};
use npu_compute::ops::{AddI8, Op, OpKind, OpSet};
use npu_compute::server::{ComputeServer, NpuServer};
use npu_compute::Error;

use crate::null_npu::NullNpu;
use crate::systick::{self, Centi, ClockError, TimeError};
pub use crate::systick::{log_calibration, Calibration};

/// Calls timed per figure.
pub const CALLS: u32 = 1000;
/// Jobs in the measured job plan: a chain of ADDs, as many as the null NPU's ring holds (so
/// every run fills it once and waits once), about the layers of a small model.
pub const PLAN_STEPS: usize = 32;
/// Runs of the plan timed: [`PLAN_STEPS`] × this many jobs, about [`CALLS`].
const PLAN_RUNS: u32 = 32;

/// The server the measurement drives: the null NPU with the default capacities.
type Server<'a> = NpuServer<NullNpu<'a>>;

/// The server of the model's invokes: the null NPU with room for 96 tensors (the model's
/// constants are uploaded: the null NPU reads no flash). A type of its own, so that the
/// graph's dispatch path does not share code (and inlining decisions) with the measured
/// `execute` of [`Server`].
type GraphServer<'a> = NpuServer<NullNpu<'a>, ChunkSliceMemory<96>, 96>;

/// Why the measurement could not be made.
#[derive(defmt::Format)]
pub enum CostError {
    /// The compute stack returned an error.
    Stack(Error),
    /// SysTick could not count (see [`ClockError`]).
    Clock(ClockError),
    /// The model could not be prepared or run over the null NPU.
    Graph(GraphError),
    /// The model's invokes did not replay a job plan.
    NotPlanned,
}

impl From<Error> for CostError {
    fn from(e: Error) -> Self {
        CostError::Stack(e)
    }
}

impl From<ClockError> for CostError {
    fn from(e: ClockError) -> Self {
        CostError::Clock(e)
    }
}

impl From<GraphError> for CostError {
    fn from(e: GraphError) -> Self {
        CostError::Graph(e)
    }
}

/// The shared SysTick counter ([`systick::Ticks`]), timing calls of the compute stack.
pub struct Ticks(systick::Ticks);

impl Ticks {
    /// Starts SysTick on the processor clock over its full range, without its interrupt.
    pub fn new(syst: SYST) -> Self {
        Ticks(systick::Ticks::new(syst))
    }

    /// The shared counter it wraps.
    pub fn counter(&self) -> &systick::Ticks {
        &self.0
    }

    /// Ticks elapsed while `f` runs `n` times; stops at the first error (see
    /// [`systick::Ticks::time`]).
    pub fn time(&self, n: u32, f: &mut dyn FnMut() -> Result<(), Error>) -> Result<u32, CostError> {
        self.0.time(n, f).map_err(|e| match e {
            TimeError::Call(e) => CostError::Stack(e),
            TimeError::Clock(e) => CostError::Clock(e),
        })
    }
}

/// Measures instructions per tick (see [`systick::calibrate`]).
pub fn calibrate(t: &Ticks) -> Result<Calibration, CostError> {
    Ok(systick::calibrate(&t.0)?)
}

/// `ticks` ticks in hundredths of an instruction, per call of `calls`.
fn centi_per_call(cal: &Calibration, ticks: u32, calls: u32) -> u64 {
    cal.centi_per_call(u64::from(ticks), calls)
}

/// Instructions per call at each level, in hundredths.
#[derive(Clone, Copy, defmt::Format)]
pub struct DispatchCost {
    /// [`ComputeClient::execute`]: client, channel, server and driver.
    pub end_to_end: u64,
    /// [`ComputeServer::execute`] alone (server and driver).
    pub server: u64,
    /// [`Npu::submit`] alone (plus the share of retiring a full ring).
    pub hal: u64,
    /// An empty [`ComputeChannel::with`].
    pub channel_with: u64,
    /// A job submitted from a [`Plan`] of [`PLAN_STEPS`] ADDs: one run's cost over its jobs.
    pub planned: u64,
    /// One run of a plan of a single ADD: the fixed cost of a run plus one job.
    pub plan_of_one: u64,
    /// The empty timed loop that was subtracted, per iteration.
    pub loop_overhead: u64,
}

/// Builds the stack over a null NPU whose staging memory is `host`, and times the three levels
/// (see the module documentation). Logs every figure and returns them.
pub fn measure(t: &Ticks, cal: &Calibration, host: &mut [u8]) -> Result<DispatchCost, CostError> {
    let server: Server<'_> = NpuServer::new(NullNpu::new(host), MemoryConfig::default())?;
    let channel: RefCellChannel<Server<'_>> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);

    let q = Quant {
        scale: 0.05,
        zero_point: 0,
    };
    let params = AddParams::new(q, q, q, Activation::None).map_err(|error| Error::Kernel {
        op: OpKind::Add,
        error,
    })?;
    let op = Op::AddI8(AddI8 { len: 16, params });
    let a = client.create(&[1u8; 16])?;
    let b = client.create(&[2u8; 16])?;
    let out = client.empty(16)?;
    // Steady state: the uploads retired, one job already written to `out`.
    client.execute(op, &[&a, &b], &out)?;
    client.sync()?;

    let per_call = |ticks: u32| centi_per_call(cal, ticks, CALLS);
    let empty = t.time(CALLS, &mut || Ok(()))?;
    let net = |ticks: u32| per_call(ticks.saturating_sub(empty));

    // By reference on purpose: clippy sees that `Op` is `Copy`, but a copy is 148 bytes.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let end_to_end = t.time(CALLS, &mut || client.execute(&op, &[&a, &b], &out))?;
    client.sync()?;

    let ids = [a.id(), b.id()];
    let out_id = out.id();
    let server = channel.with(|s| -> Result<u32, CostError> {
        let ticks = t.time(CALLS, &mut || s.execute(&op, &ids, out_id))?;
        s.sync()?;
        Ok(ticks)
    })??;

    let channel_with = t.time(CALLS, &mut || channel.with(|_| ()))?;

    // The same ADD as a job plan: a chain ping-ponging between two tensors, each job reading
    // what the one before wrote.
    let pair = [client.empty(16)?, client.empty(16)?];
    let mut plan: JobPlan<'_, _, PLAN_STEPS, 8> = client.job_plan();
    plan.push(&op, &[&a, &b], &pair[0])?;
    for k in 1..PLAN_STEPS {
        plan.push(&op, &[&pair[(k + 1) % 2], &b], &pair[k % 2])?;
    }
    let ops = [&op; PLAN_STEPS];
    plan.run(&ops)?;
    client.sync()?;
    let planned = t.time(PLAN_RUNS, &mut || plan.run(&ops))?;
    client.sync()?;
    let mut one: JobPlan<'_, _, 1, 4> = client.job_plan();
    one.push(&op, &[&a, &b], &out)?;
    let plan_of_one = t.time(CALLS, &mut || one.run(&ops[..1]))?;
    client.sync()?;

    // The job the server builds for the ADD: two inputs, one output, no dependency left (the
    // inputs' uploads have retired and the output's last writer is on the same queue).
    let job = Job {
        kind: JobKind::Compute {
            op: &op,
            variant: Variant::Auto,
            scratch: None,
            inputs: [Region::device(0, 16), Region::device(16, 16)]
                .into_iter()
                .collect(),
            output: Region::device(32, 16),
        },
        queue: Queue::Unit(0),
        deps: Default::default(),
    };
    let hal = channel.with(|s| -> Result<u32, CostError> {
        let npu = s.npu_mut();
        let ticks = t.time(CALLS, &mut || loop {
            // What the server does on a full ring: wait (the null NPU retires it all), retry.
            match npu.submit(&job) {
                Ok(_) => return Ok(()),
                Err(HalError::QueueFull { .. }) => npu.wait_for_event(),
                Err(e) => return Err(e.into()),
            }
        });
        npu.on_interrupt();
        ticks
    })??;

    let cost = DispatchCost {
        end_to_end: net(end_to_end),
        server: net(server),
        hal: net(hal),
        channel_with: net(channel_with),
        planned: centi_per_call(
            cal,
            planned.saturating_sub(empty * PLAN_RUNS / CALLS),
            PLAN_RUNS * PLAN_STEPS as u32,
        ),
        plan_of_one: net(plan_of_one),
        loop_overhead: per_call(empty),
    };
    defmt::info!(
        "dispatch: {=u32} x AddI8 (16 B) over the null NPU; ticks: loop {=u32}, client {=u32}, server {=u32}, submit {=u32}, with {=u32}",
        CALLS,
        empty,
        end_to_end,
        server,
        hal,
        channel_with
    );
    defmt::info!(
        "dispatch: instructions per job: end to end {}, server + HAL {}, HAL submit {}; client + channel {}, server without HAL {}; empty channel.with {}; loop overhead subtracted {}",
        Centi(cost.end_to_end),
        Centi(cost.server),
        Centi(cost.hal),
        Centi(cost.end_to_end.saturating_sub(cost.server)),
        Centi(cost.server.saturating_sub(cost.hal)),
        Centi(cost.channel_with),
        Centi(cost.loop_overhead)
    );
    defmt::info!(
        "dispatch: job plan of {=usize} ADDs run {=u32} times: {} instructions per job; a plan of one ADD: {} per run",
        PLAN_STEPS,
        PLAN_RUNS,
        Centi(cost.planned),
        Centi(cost.plan_of_one)
    );
    let npu_jobs = channel.with(|s| (s.npu().submitted(), s.npu().completed(Queue::Unit(0))))?;
    defmt::info!(
        "dispatch: null NPU saw {=u64} jobs ({=u32} compute completed); sizes in bytes: Op {=usize}, Job {=usize}, Access {=usize}",
        npu_jobs.0,
        npu_jobs.1,
        size_of::<Op>(),
        size_of::<Job>(),
        size_of::<Access>()
    );
    Ok(cost)
}

/// Invokes of the model timed per figure.
const INVOKES: u32 = 16;

/// A model's invoke over the null NPU, in hundredths of an instruction.
#[derive(Clone, Copy, defmt::Format)]
pub struct GraphCost {
    /// Jobs per invoke.
    pub jobs: u32,
    /// [`Graph::invoke`] job by job ([`Graph::set_replay`] off): each operator dispatched with
    /// `execute`.
    pub invoke: u64,
    /// [`Graph::invoke`] replaying the graph's job plan (the default from the second invoke).
    pub planned: u64,
    /// The input's write and the output's read alone, which both include.
    pub io: u64,
    /// Of the jobs, operators the CPU fallback computes (steps of the plan too).
    pub cpu_steps: u32,
}

impl GraphCost {
    /// Hundredths of an instruction per job of an invoke job by job (`planned == false`) or
    /// from the job plan, without the input's write and the output's read.
    pub fn per_job(&self, planned: bool) -> u64 {
        let total = if planned { self.planned } else { self.invoke };
        total.saturating_sub(self.io) / u64::from(self.jobs.max(1))
    }
}

/// Times whole invokes of `model` on `input` over a null NPU whose staging memory is `host`
/// (which must hold the largest constant: the null NPU reads no flash, so weights are
/// uploaded), job by job and replaying the job plan. Both write the input and read the output
/// through staging (the same in both); the difference is the jobs' dispatch.
pub fn measure_graph(
    t: &Ticks,
    cal: &Calibration,
    host: &mut [u8],
    (model, input): (&'static [u8], &[u8]),
    ops: OpSet,
) -> Result<GraphCost, CostError> {
    let npu = NullNpu::new(host).with_ops(ops);
    let server: GraphServer<'_> = NpuServer::new(npu, MemoryConfig::default())?;
    let channel: RefCellChannel<GraphServer<'_>, 96> = RefCellChannel::new(server);
    let client = ComputeClient::new(&channel);
    let mut graph: Graph<'_, _, 16, 64> = Graph::prepare(client, model)?;
    let mut out = [0u8; 12];
    // `Ticks::time` takes the stack's errors: a graph error is kept aside and reported as is.
    let mut failed: Option<GraphError> = None;
    let mut timed = |planned: bool| {
        graph.set_replay(planned);
        // Untimed: the first invoke job by job, or the one that builds the plan.
        if let Err(e) = graph.invoke(&[input], &mut [&mut out]) {
            failed = Some(e);
        }
        let run = &mut || {
            let result = graph.invoke(&[input], &mut [&mut out]);
            result.map_err(|e| *failed.insert(e)).map_err(|e| match e {
                GraphError::Compute { error, .. } => error,
                _ => Error::ForeignHandle,
            })
        };
        let ticks = t.time(INVOKES, run);
        (ticks, graph.job_plan())
    };
    let ((invoke, _), (planned, plan)) = (timed(false), timed(true));
    if let Some(e) = failed {
        return Err(e.into());
    }
    let (invoke, planned) = (invoke?, planned?);
    // What both invokes spend on their input and output, apart from the jobs: a 490-byte
    // write and a 12-byte read through staging, of tensors of the same sizes.
    let (x, y) = (client.empty(input.len() as u32)?, client.empty(12)?);
    let io = t.time(INVOKES, &mut || {
        client.write(&x, input)?;
        client.read(&y, &mut out)
    })?;
    let plan = plan.ok_or(CostError::NotPlanned)?;
    let jobs = plan.jobs as u32;
    let cost = GraphCost {
        cpu_steps: plan.cpu_steps as u32,
        jobs,
        invoke: centi_per_call(cal, invoke, INVOKES),
        planned: centi_per_call(cal, planned, INVOKES),
        io: centi_per_call(cal, io, INVOKES),
    };
    defmt::info!(
        "dispatch: kws_dscnn over the null NPU, {=u32} jobs ({=u32} on the CPU fallback) over {=usize} tensors per invoke ({=usize} shared, the rest constants and the plan's own): invoke job by job {} instructions, from the job plan {}, of which the input write and output read {}; per job without them: job by job {}, from the job plan {}; Graph<16, 64> with its job plan {=usize} bytes",
        jobs,
        cost.cpu_steps,
        plan.tensors,
        plan.shared_tensors,
        Centi(cost.invoke),
        Centi(cost.planned),
        Centi(cost.io),
        Centi(cost.per_job(false)),
        Centi(cost.per_job(true)),
        Graph::<'_, RefCellChannel<GraphServer<'_>, 96>, 16, 64>::state_bytes()
    );
    Ok(cost)
}
