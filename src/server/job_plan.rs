//! Job plans: a list of jobs checked once and submitted many times; the design is on
//! [`JobPlanState`]. This file holds the plan itself; building it and running it are `build`
//! and `run`.

mod build;
mod run;

use super::tensors::Binding;
use crate::error::{Capacity, Error};
use crate::hal::{Fence, Queue, Region, Variant, MAX_JOB_INPUTS, MAX_QUEUES};
use crate::handle::HandleId;
use crate::ops::{Op, OpKind};
use core::mem::Discriminant;

#[cfg(doc)]
use crate::error::JobPlanError;

/// No step: an empty slot of a per-queue table.
const NONE: u16 = u16::MAX;

/// The fence a CPU step computed in place receives (see [CPU steps](JobPlanState#cpu-steps)):
/// it submitted no job and was over when its turn ended, so nothing waits for it and no
/// record takes it. No driver issues it (fences count up from 0 and would take ages to get
/// here), so it never names a real job.
const COMPUTED: Fence = Fence(u64::MAX);

/// A step's fence as a job to wait for or record: none for a CPU step computed in place.
fn issued(fence: Fence) -> Option<Fence> {
    (fence != COMPUTED).then_some(fence)
}

/// Who else touches a plan tensor's memory, which decides what a run does with its access
/// record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Anything may (an input the host writes, an output it reads): every run walks the
    /// tensor's record for the jobs before it, and writes the plan's jobs into it.
    Shared,
    /// Nothing writes it (a constant): once a run has waited for its upload, runs leave its
    /// record alone, and the plan's reads are written into it when the plan is released.
    Constant,
    /// Only the plan's jobs touch it (its scratch tensor, or one it
    /// [adopted](super::ComputeServer::plan_adopt)): the same, with the plan's newest jobs written
    /// in as writers at release; each run waits for the previous run's newest job on every
    /// other queue instead.
    Own,
}

/// One tensor of a plan.
#[derive(Clone, Copy, Debug)]
struct PlanTensor {
    id: HandleId,
    binding: Binding,
    region: Region,
    role: Role,
    /// Newest step per queue ([`Queue::index`]) that wrote memory overlapping this tensor.
    writes: [u16; MAX_QUEUES],
    /// Newest step per queue that read memory overlapping this tensor.
    reads: [u16; MAX_QUEUES],
    /// Bit `q` set where `writes[q]` holds a step, so that a run visits only those.
    write_queues: u16,
    /// The same for `reads`.
    read_queues: u16,
}

impl PlanTensor {
    /// Whether the plan writes memory overlapping it.
    fn written(&self) -> bool {
        self.write_queues != 0
    }

    /// Whether the two tensors share a byte of device memory.
    fn overlaps(&self, region: &Region) -> bool {
        let (a, b) = (&self.region, region);
        a.space == b.space
            && a.offset < b.offset.saturating_add(b.len)
            && b.offset < a.offset.saturating_add(a.len)
    }
}

/// One step of a plan: a job on an execution unit, or an operator on the CPU.
#[derive(Clone, Debug)]
struct PlanStep {
    kind: OpKind,
    /// The variant of [`Op`] it was built with: a run checks its op against it first.
    variant_of: Discriminant<Op>,
    /// Its execution unit; [`Queue::Dma`] for a CPU step, whose jobs are its transfers.
    queue: Queue,
    variant: Variant,
    /// Indices into the plan's tensors.
    inputs: heapless::Vec<u8, MAX_JOB_INPUTS>,
    output: u8,
    /// Uses the plan's scratch tensor.
    scratch: bool,
    /// Runs on the CPU: its inputs come down through host staging and its output goes back
    /// up (see [CPU steps](JobPlanState#cpu-steps)).
    cpu: bool,
    /// Its leading inputs that it also writes (a stateful CPU step's state).
    state: u8,
    /// Earlier steps on other queues to wait for (the newest per queue). A CPU step's
    /// downloads wait for the first `reads` (the writers of what it reads), its uploads for
    /// the rest (the newer readers and writers of what it writes, on queues where those
    /// differ): so at most two per queue.
    deps: heapless::Vec<u16, { 2 * MAX_QUEUES }>,
    /// See `deps`; 0 for an NPU step.
    reads: u8,
    /// The first step on its queue: it also waits for the jobs before the run.
    first_on_queue: bool,
    /// Where a run submits it ([`JobPlanState::order`]): before the CPU step of this index
    /// when it is hoisted over CPU steps, else its own index.
    at: u16,
}

impl PlanStep {
    /// Its place in the submission order: NPU steps submitted before CPU step `k` computes
    /// have `2k`, CPU step `k` has `2k + 1`, and an NPU step no CPU step precedes in the
    /// order has twice its own index.
    fn time(&self) -> u32 {
        2 * u32::from(self.at) + u32::from(self.cpu)
    }
}

/// The server's side of a job plan: a list of jobs over fixed tensors (NPU jobs, and
/// operators the CPU fallback computes), built once and run many times. Capacities: `STEPS` jobs and `TENSORS` distinct tensors (at most 255, as a step
/// indexes its tensors with a byte: a larger `TENSORS` is allowed and stops there),
/// each running out as [`Error::CapacityExceeded`] naming [`Capacity::PlanSteps`] or
/// [`Capacity::PlanTensors`].
///
/// Build and run it through [`ComputeClient::job_plan`](crate::client::ComputeClient::job_plan)
/// (a [`JobPlan`](crate::client::JobPlan), which releases it when dropped); a plan used on a
/// server directly must be given back with
/// [`ComputeServer::release_plan`](super::ComputeServer::release_plan), or its tensors are
/// never freed.
///
/// # Why
///
/// [`execute`](super::ComputeServer::execute) redoes, for every job, work that is the same
/// every time a model runs: it looks each operand up and checks it against the op, walks the
/// access records of their memory for the fences to wait for, and records the job in them. On a
/// Cortex-M4 that bookkeeping costs several times what the driver's own submit does. A model
/// runs the same jobs over the same tensors at every invoke, so a [`JobPlanState`] does it once.
///
/// # Design
///
/// - **Building** ([`ComputeServer::plan_step`](super::ComputeServer::plan_step)) checks a
///   step's operands as `execute` does, chooses its candidate as
///   `execute` would (without claiming a key for
///   tuning), assigns its execution unit round robin, and works out which earlier steps it
///   must wait for. Those dependencies are computed from memory, not tensor identity: the
///   tensors of a model's arena are placed views that overlap, so each tensor of the plan
///   keeps, per queue, the newest step that read or wrote *memory overlapping it*. A step
///   waits for the writers of what it reads and for the readers and writers of what it
///   writes, on other queues (its own queue orders it already). The plan holds a reference
///   to each of its tensors, so none is freed under it, and a scratch tensor when a tuned
///   variant needs one.
/// - **Running** ([`ComputeServer::run_plan`](super::ComputeServer::run_plan)) first gathers, from its tensors' access
///   records, the jobs submitted before the run that the plan must wait for: their writers,
///   and their readers too where the plan writes. The first step on each queue waits for all
///   of those, so every later step does too. Then each step is submitted as built, its
///   dependencies mapped to the fences this run's steps received. Last, each tensor's access
///   record takes the plan's newest readers and writers of memory overlapping it, once per
///   tensor rather than once per job, so work after the run is fence-safe as after `execute`.
/// - **Most tensors need none of that after the first run.** A model's plan has a few
///   tensors the host touches (its inputs and outputs) among many it does not, and a run's
///   bookkeeping is paid per tensor. So each tensor has a role:
///   - *shared* (the default): walked and written at every run, as above;
///   - *constant* (made by [`create_const`](super::ComputeServer::create_const), or by
///     [`create`](super::ComputeServer::create) as a constant, which the server refuses to
///     write): once a run has waited for its upload, nothing new can appear in its record;
///   - *the plan's own* (its scratch tensor, and any tensor handed over with
///     [`plan_adopt`](super::ComputeServer::plan_adopt) when no other handle reaches it): only the
///     plan's jobs touch it, so the previous run's newest job on each queue stands for its
///     record, and the next run's first steps wait for those instead.
///
///   The first run walks every record (and so does the run after a new tensor, an adoption
///   or a failed run); later runs walk and write the shared tensors' only. Constants and
///   the plan's own tensors get the plan's newest jobs in their records when the plan is
///   released, before any of their memory can be reused; a plan dropped while the channel
///   was lent out is covered by [`release_late`](super::ComputeServer::release_late).
///
/// A plan is the CUDA-graph idea on a heap-free NPU stack: the cost of a job submitted from
/// a plan is the driver's submit plus a few dozen instructions (see `BENCHMARKS.md`).
///
/// # CPU steps
///
/// An op the NPU does not run, or whose tuned choice is the CPU (exactly where
/// [`execute`](super::ComputeServer::execute) would run it on the CPU fallback), is a *CPU
/// step*. Its jobs are its transfers, so it is a step of the DMA queue: it reads its inputs
/// with their downloads into host staging and writes its output (and a stateful op's
/// [state operands](crate::ops::Op::state_inputs)) with their uploads, and the tables above
/// record it so. Building it works out two lists of dependencies rather than one: its
/// downloads wait for the writers of what it reads, its uploads also for the readers and
/// writers of what it writes (where those are newer). At a run, its downloads are submitted
/// with those steps' fences (and, first on the DMA queue, the jobs before the run); the CPU
/// waits for the downloads alone, computes with the kernels, and submits the uploads. The
/// output's upload is the step's fence: an NPU step reading the output waits for it, and
/// for nothing else of the CPU's. Host staging is taken at each run and freed after the
/// transfers' fences, as the fallback does: reserving it for the plan's lifetime would hold
/// back staging that the host's reads and writes (and other plans) need between runs, and
/// the blocks would still have to wait for the last run's transfers before reuse.
///
/// Where the HAL lends the CPU its device memory ([`Npu::device_memory`](crate::hal::Npu::device_memory)),
/// a CPU step computes in place instead, as the fallback does: the CPU waits for the fences
/// both lists name, for the jobs before the run when it is first on the DMA queue, and for
/// every DMA job submitted so far (it stands in for the queue it is built on, whose order
/// the plan otherwise relies on), then computes over device memory and flash. It submits
/// nothing, so its fence is a placeholder that the NPU steps after it, and the records, skip:
/// it is over before any of them is submitted. The tables and the submission order are the
/// same either way.
///
/// # Submission order
///
/// A CPU step blocks the CPU while it computes, so a run does not simply submit steps in
/// the order they were added: before a CPU step computes, it first submits every later NPU
/// step that depends on no CPU step still to come, directly or through other steps,
/// keeping each queue's order (a step after a deferred step on its queue is deferred too).
/// The NPU then runs those while the CPU computes. The order is worked out once, as steps
/// are added: each NPU step is given the first CPU step that comes after everything it waits
/// for (its dependencies and the step before it on its queue) in the order, and is
/// submitted just before that one computes, or at its own place when there is none; the
/// steps, sorted by that place, are the permutation a run walks
/// ([`submission_order`](Self::submission_order)). A plan with no CPU step runs in the order
/// its steps were added, by the same loop as before CPU steps existed.
///
/// # Limits
///
/// - A pinned operand is refused ([`JobPlanError::Pinned`]): its residency changes between
///   runs.
/// - A change to the server's tuning (mode, imported table, a finished tuning) makes the
///   plan stale ([`JobPlanError::Stale`]): its choices may be outdated. Build it again.
/// - Like [`place`](super::ComputeServer::place), the plan sees the jobs of tensors outside
///   it that overlap its own only through its tensors' records: lay a new placement over a
///   plan's tensor and the placement waits for the plan, but the plan's next run does not
///   wait for the placement's jobs. Use plan tensors for everything that touches its memory.
///   (Over the plan's own tensors, the placement does not wait for the plan either: their
///   records are written at release.)
/// - Runs after the first do not look up the handles of constants and the plan's own
///   tensors: a caller driving a server directly who releases the plan's reference to one
///   (rather than through [`release_plan`](super::ComputeServer::release_plan)) frees its
///   memory under the plan. The client's [`JobPlan`](crate::client::JobPlan) cannot.
#[derive(Debug)]
pub struct JobPlanState<const STEPS: usize = 64, const TENSORS: usize = 64> {
    tensors: heapless::Vec<PlanTensor, TENSORS>,
    /// The indices of the [`Role::Shared`] tensors in device memory: the records a settled
    /// run walks and every run writes. A list, so that a run over a model whose tensors are
    /// mostly constants and activations does not step over each of them.
    shared: heapless::Vec<u8, TENSORS>,
    steps: heapless::Vec<PlanStep, STEPS>,
    /// The order a run submits the steps in: their indices, by [`PlanStep::time`] then index
    /// (see [Submission order](JobPlanState#submission-order)). The identity while the plan
    /// has no CPU step, and then not used.
    order: heapless::Vec<u16, STEPS>,
    /// Steps that run on the CPU.
    cpu_steps: u16,
    /// The fence each step received at the last run.
    fences: [Fence; STEPS],
    /// The scratch tensor's index, once a step needs one.
    scratch: Option<u8>,
    /// The server's tuning epoch when the first step was added.
    epoch: u32,
    next_unit: u8,
    /// Bit `q` set once a step runs on queue `q` (`last_step` says as much, but the mask lets
    /// a run visit only those queues: a plan's per-run cost is on the dispatch path).
    queues: u16,
    /// The last step on each queue.
    last_step: [u16; MAX_QUEUES],
    /// The newest fence each queue received from a run of the plan.
    last: [Option<Fence>; MAX_QUEUES],
    /// The last run submitted every step and nothing changed a tensor's role since: a run
    /// walks and writes the records of its [`Role::Shared`] tensors only.
    settled: bool,
    /// Some tensor is [`Role::Own`].
    owns: bool,
    /// The server's count of recoveries at the last run: after a recovery, the fences that
    /// run received are void (the reset ended them).
    recoveries: u32,
}

impl<const STEPS: usize, const TENSORS: usize> Default for JobPlanState<STEPS, TENSORS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const STEPS: usize, const TENSORS: usize> JobPlanState<STEPS, TENSORS> {
    /// The unit the next step goes to (the round robin continues from it).
    pub(super) fn set_next_unit(&mut self, unit: u8) {
        self.next_unit = unit;
    }

    /// An empty plan.
    pub const fn new() -> Self {
        JobPlanState {
            tensors: heapless::Vec::new(),
            shared: heapless::Vec::new(),
            steps: heapless::Vec::new(),
            order: heapless::Vec::new(),
            cpu_steps: 0,
            fences: [Fence(0); STEPS],
            scratch: None,
            epoch: 0,
            next_unit: 0,
            queues: 0,
            last_step: [NONE; MAX_QUEUES],
            last: [None; MAX_QUEUES],
            settled: false,
            owns: false,
            recoveries: 0,
        }
    }

    /// The step whose job received `fence` at the last run (a CPU step's: its output's
    /// upload), if any: to name the step a fault hit ([`Error::Fault`]).
    pub fn step_of(&self, fence: Fence) -> Option<usize> {
        self.fences
            .iter()
            .take(self.steps.len())
            .position(|&f| f == fence)
    }

    /// Jobs in the plan.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the plan has no job.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Of its steps, those that run on the CPU fallback (an op the NPU does not run, or whose
    /// tuned choice is the CPU), as [`execute`](super::ComputeServer::execute) would run them.
    pub fn cpu_steps(&self) -> usize {
        usize::from(self.cpu_steps)
    }

    /// Whether step `k` runs on the CPU (`false` out of range).
    pub fn is_cpu_step(&self, k: usize) -> bool {
        self.steps.get(k).is_some_and(|s| s.cpu)
    }

    /// The order a run submits the steps in, by index: the order they were added in, except
    /// that NPU steps independent of a CPU step are submitted before it computes (see
    /// [Submission order](JobPlanState#submission-order)).
    pub fn submission_order(&self) -> &[u16] {
        &self.order
    }

    /// Distinct tensors the plan holds (its scratch included).
    pub fn tensors(&self) -> usize {
        self.tensors.len()
    }

    /// Of those, the tensors whose access records every run walks and writes: the ones in
    /// device memory that are neither constants nor the plan's own. A run's bookkeeping
    /// grows with this count, not with [`tensors`](Self::tensors).
    pub fn shared_tensors(&self) -> usize {
        self.shared.len()
    }

    /// The ids of the tensors the plan holds a reference to.
    pub fn tensor_ids(&self) -> impl Iterator<Item = HandleId> + '_ {
        self.tensors.iter().map(|t| t.id)
    }

    /// The fence of step `k` at the last run (`None` before a run or out of range).
    pub fn fence(&self, k: usize) -> Option<Fence> {
        self.steps.get(k).and(self.fences.get(k).copied())
    }

    /// The index of the tensor with `id`, if the plan holds it.
    fn find(&self, id: HandleId) -> Option<u8> {
        let i = self.tensors.iter().position(|t| t.id == id)?;
        u8::try_from(i).ok()
    }

    /// Adds a tensor (which the caller has retained for the plan): its history starts as the
    /// union of the tensors it overlaps, so a step using it waits for their jobs.
    fn add_tensor(
        &mut self,
        id: HandleId,
        binding: Binding,
        region: Region,
        role: Role,
    ) -> Result<u8, Error> {
        let mut t = PlanTensor {
            id,
            binding,
            region,
            role,
            writes: [NONE; MAX_QUEUES],
            reads: [NONE; MAX_QUEUES],
            write_queues: 0,
            read_queues: 0,
        };
        // The steps so far that touched memory overlapping it, step by step: inheriting the
        // records of the tensors it overlaps instead would take in their other steps too (a
        // band of a tensor would wait for writers of the tensor's other rows).
        for (k, step) in self.steps.iter().enumerate() {
            let q = step.queue.index();
            let touches = |i: u8| {
                self.tensors
                    .get(usize::from(i))
                    .is_some_and(|u| u.overlaps(&region))
            };
            let read = step.inputs.iter().any(|&i| touches(i));
            let wrote = touches(step.output)
                || (step.scratch && self.scratch.is_some_and(&touches))
                || step
                    .inputs
                    .iter()
                    .take(usize::from(step.state))
                    .any(|&i| touches(i));
            if let (Some(slot), true) = (t.writes.get_mut(q), wrote) {
                *slot = k as u16;
                t.write_queues |= 1 << q;
            }
            if let (Some(slot), true) = (t.reads.get_mut(q), read) {
                *slot = k as u16;
                t.read_queues |= 1 << q;
            }
        }
        // A plan indexes its tensors with a byte: more than 255 is its capacity too.
        let index = u8::try_from(self.tensors.len())
            .map_err(|_| plan_tensors(TENSORS.min(usize::from(u8::MAX))))?;
        self.tensors.push(t).map_err(|_| plan_tensors(TENSORS))?;
        if role == Role::Shared && matches!(binding, Binding::Memory(_)) {
            // As long as `tensors`: cannot overflow.
            let _ = self.shared.push(index);
        }
        self.owns |= role == Role::Own;
        // A tensor a run has not yet walked: the next run walks them all.
        self.settled = false;
        Ok(index)
    }

    /// Where a new NPU step is submitted ([`PlanStep::at`]), given the steps it must come
    /// after (`deps`, and in `also` the step before it on its queue and a CPU step it follows
    /// without waiting for its fence, each `NONE` if there is none): before the first CPU
    /// step that comes after all of them in the order, or at its own `index` when there is
    /// none. Work at build, once per step.
    fn hoisted_to(&self, deps: &[u16], also: [u16; 2], index: u16) -> u16 {
        if self.cpu_steps == 0 {
            return index;
        }
        // The earliest time it may take: not before any step it waits for, and after a CPU
        // step it waits for has computed (the next even time).
        let mut earliest = 0u32;
        for &d in deps.iter().chain(also.iter().filter(|&&s| s != NONE)) {
            if let Some(s) = self.steps.get(usize::from(d)) {
                let t = s.time();
                earliest = earliest.max(t + (t & 1));
            }
        }
        let first = usize::try_from(earliest / 2).unwrap_or(usize::MAX);
        self.steps
            .iter()
            .enumerate()
            .skip(first)
            .find(|(_, s)| s.cpu)
            .and_then(|(k, _)| u16::try_from(k).ok())
            .unwrap_or(index)
    }

    /// Records that `step` reads (or writes) tensor `t`: in every tensor overlapping it.
    fn record(&mut self, t: u8, step: u16, queue: Queue, write: bool) {
        let Some(region) = self.tensors.get(usize::from(t)).map(|t| t.region) else {
            return;
        };
        let q = queue.index();
        for u in self.tensors.iter_mut().filter(|u| u.overlaps(&region)) {
            let (slots, mask) = if write {
                (&mut u.writes, &mut u.write_queues)
            } else {
                (&mut u.reads, &mut u.read_queues)
            };
            if let Some(s) = slots.get_mut(q) {
                *s = step;
                *mask |= 1 << q;
            }
        }
    }
}

/// The newer of two steps of one queue (`NONE` for none).
fn newest(a: u16, b: u16) -> u16 {
    match (a, b) {
        (NONE, s) | (s, NONE) => s,
        (a, b) => a.max(b),
    }
}

/// `into[q] = newest of into[q] and from[q]`, for per-queue step tables.
fn merge_newest(into: &mut [u16; MAX_QUEUES], from: &[u16; MAX_QUEUES]) {
    for (a, &b) in into.iter_mut().zip(from) {
        if *a == NONE || (b != NONE && b > *a) {
            *a = b;
        }
    }
}

fn plan_tensors(limit: usize) -> Error {
    Error::CapacityExceeded {
        capacity: Capacity::PlanTensors,
        limit: limit as u32,
    }
}
