//! Job plans: a list of jobs checked once and submitted many times; the design is on
//! [`JobPlanState`].

use super::tensors::Binding;
use super::NpuServer;
use crate::error::{Capacity, Error, JobPlanError};
use crate::hal::{
    Fence, HalError, Job, JobKind, Npu, Queue, Region, Variant, MAX_JOB_INPUTS, MAX_QUEUES,
};
use crate::handle::HandleId;
use crate::memory::{queues_in, MemoryManagement};
use crate::ops::{Op, OpKind};
use crate::tune::{Candidate, Lookup, TuneMode};

use super::deps::DepSet;

/// No step: an empty slot of a per-queue table.
const NONE: u16 = u16::MAX;

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
    /// [adopted](ComputeServer::plan_adopt)): the same, with the plan's newest jobs written
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

/// One job of a plan.
#[derive(Clone, Debug)]
struct PlanStep {
    kind: OpKind,
    queue: Queue,
    variant: Variant,
    /// Indices into the plan's tensors.
    inputs: heapless::Vec<u8, MAX_JOB_INPUTS>,
    output: u8,
    /// Uses the plan's scratch tensor.
    scratch: bool,
    /// Earlier steps on other queues to wait for (the newest per queue).
    deps: heapless::Vec<u16, MAX_QUEUES>,
    /// The first step on its queue: it also waits for the jobs before the run.
    first_on_queue: bool,
}

/// The server's side of a job plan: a list of NPU jobs over fixed tensors, built once and run
/// many times. Capacities: `STEPS` jobs and `TENSORS` distinct tensors (at most 255 are used),
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
/// # Limits
///
/// - NPU jobs only: an op the NPU does not run, or whose tuned choice is the CPU, is refused
///   ([`JobPlanError::OnCpu`]); so is a pinned operand ([`JobPlanError::Pinned`]), whose residency
///   changes between runs.
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
}

impl<const STEPS: usize, const TENSORS: usize> Default for JobPlanState<STEPS, TENSORS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const STEPS: usize, const TENSORS: usize> JobPlanState<STEPS, TENSORS> {
    const TENSORS_FIT_U8: () = assert!(TENSORS <= 255, "a plan indexes its tensors with u8");

    /// An empty plan.
    pub const fn new() -> Self {
        let () = Self::TENSORS_FIT_U8;
        JobPlanState {
            tensors: heapless::Vec::new(),
            shared: heapless::Vec::new(),
            steps: heapless::Vec::new(),
            fences: [Fence(0); STEPS],
            scratch: None,
            epoch: 0,
            next_unit: 0,
            queues: 0,
            last_step: [NONE; MAX_QUEUES],
            last: [None; MAX_QUEUES],
            settled: false,
            owns: false,
        }
    }

    /// Jobs in the plan.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the plan has no job.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
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
        for u in self.tensors.iter().filter(|u| u.overlaps(&region)) {
            merge_newest(&mut t.writes, &u.writes);
            merge_newest(&mut t.reads, &u.reads);
            t.write_queues |= u.write_queues;
            t.read_queues |= u.read_queues;
        }
        let index = u8::try_from(self.tensors.len()).map_err(|_| plan_tensors(TENSORS))?;
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

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// How a plan runs `op`: as `execute_tuned` would choose, from the tuning cache, without
    /// claiming a key (a plan never measures).
    fn planned_variant(&self, op: &Op) -> Result<Variant, Error> {
        let on_cpu = JobPlanError::OnCpu { op: op.kind() };
        if !self.caps.ops.runs(op) {
            return Err(on_cpu.into());
        }
        let choice = match self.tuning.mode {
            TuneMode::Off => None,
            TuneMode::Fixed(c) => Some(c),
            _ => match self.tuning.cache.lookup(self.tune_key(op).0) {
                Lookup::Hit(choice) => Some(choice.candidate),
                Lookup::InProgress | Lookup::Miss => None,
            },
        };
        match choice {
            Some(Candidate::Cpu) => Err(on_cpu.into()),
            // A choice this NPU cannot run falls back to the default, as in `execute_tuned`.
            Some(Candidate::Npu(v)) if v != Variant::Auto && self.npu.supports_variant(op, v) => {
                Ok(v)
            }
            _ => Ok(Variant::Auto),
        }
    }

    /// The plan's index of tensor `id`, adding it (with a reference held for the plan).
    fn plan_tensor<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<u8, Error> {
        if let Some(i) = plan.find(id) {
            return Ok(i);
        }
        let entry = self.handles.get_ref(id)?;
        let (binding, constant) = (entry.binding, entry.constant);
        let region = self.region_of(binding)?;
        let role = if constant {
            Role::Constant
        } else {
            Role::Shared
        };
        let index = plan.add_tensor(id, binding, region, role)?;
        self.handles.retain(id, 1)?;
        Ok(index)
    }

    /// Makes the plan's scratch tensor at least `bytes` long. A smaller one is replaced (its
    /// recorded steps carry over): the plan's jobs so far go into its record before it is
    /// released, as at the plan's release, and the next run walks the new one's.
    fn plan_scratch<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        bytes: u32,
    ) -> Result<u8, Error> {
        if let Some(i) = plan.scratch {
            let t = &plan.tensors[usize::from(i)];
            if t.region.len >= bytes {
                return Ok(i);
            }
        }
        if plan.scratch.is_none() && plan.tensors.is_full() {
            return Err(plan_tensors(T));
        }
        let id = self.empty(bytes)?;
        let binding = self.handles.get_ref(id)?.binding;
        let region = self.region_of(binding)?;
        match plan.scratch {
            Some(i) => {
                let old = plan.tensors[usize::from(i)];
                self.record_newest(plan, &old, true);
                let t = &mut plan.tensors[usize::from(i)];
                (t.id, t.binding, t.region) = (id, binding, region);
                plan.settled = false;
                self.release(old.id, 1)?;
                Ok(i)
            }
            None => {
                let i = plan.add_tensor(id, binding, region, Role::Own)?;
                plan.scratch = Some(i);
                Ok(i)
            }
        }
    }

    pub(super) fn plan_step<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        if !plan.steps.is_empty() && plan.epoch != self.tuning.epoch {
            return Err(JobPlanError::Stale.into());
        }
        let step_index = u16::try_from(plan.steps.len())
            .ok()
            .filter(|_| !plan.steps.is_full() && plan.steps.len() < usize::from(NONE))
            .ok_or(Error::CapacityExceeded {
                capacity: Capacity::PlanSteps,
                limit: S as u32,
            })?;
        let mut operands = heapless::Vec::new();
        let (_, pinned) = self.check_operands(op, inputs, output, &mut operands)?;
        if pinned {
            return Err(JobPlanError::Pinned { op: op.kind() }.into());
        }
        let variant = self.planned_variant(op)?;
        let scratch_bytes = variant
            .scratch_bytes(op)
            .ok_or(HalError::VariantUnsupported {
                op: op.kind(),
                variant,
            })?;
        // Room for every new tensor before any is added, so a refused step changes nothing.
        let mut new: heapless::Vec<HandleId, { MAX_JOB_INPUTS + 1 }> = heapless::Vec::new();
        for &id in inputs.iter().chain([&output]) {
            if plan.find(id).is_none() && !new.contains(&id) {
                let _ = new.push(id);
            }
        }
        let scratch_new = usize::from(scratch_bytes > 0 && plan.scratch.is_none());
        if plan.tensors.len() + new.len() + scratch_new > T {
            return Err(plan_tensors(T));
        }
        let scratch = match scratch_bytes {
            0 => None,
            bytes => Some(self.plan_scratch(plan, bytes)?),
        };
        let mut ins = heapless::Vec::new();
        for &id in inputs {
            // At most MAX_JOB_INPUTS inputs (checked with the operands).
            let _ = ins.push(self.plan_tensor(plan, id)?);
        }
        let out = self.plan_tensor(plan, output)?;

        let units = self.caps.execution_units.max(1);
        let queue = Queue::Unit(plan.next_unit % units);
        plan.next_unit = (plan.next_unit + 1) % units;
        let q = queue.index();
        // The newest step per other queue this one must wait for.
        let mut after = [NONE; MAX_QUEUES];
        for &i in &ins {
            merge_newest(&mut after, &plan.tensors[usize::from(i)].writes);
        }
        for i in core::iter::once(out).chain(scratch) {
            let t = &plan.tensors[usize::from(i)];
            merge_newest(&mut after, &t.writes);
            merge_newest(&mut after, &t.reads);
        }
        let mut deps = heapless::Vec::new();
        for (k, &s) in after.iter().enumerate() {
            if k != q && s != NONE {
                // One per queue: cannot overflow.
                let _ = deps.push(s);
            }
        }
        // Its own accesses, for the steps after it (its dependencies are worked out above).
        for &i in &ins {
            plan.record(i, step_index, queue, false);
        }
        for i in core::iter::once(out).chain(scratch) {
            plan.record(i, step_index, queue, true);
        }
        let step = PlanStep {
            kind: op.kind(),
            queue,
            variant,
            inputs: ins,
            output: out,
            scratch: scratch.is_some(),
            deps,
            first_on_queue: plan.last_step[q] == NONE,
        };
        if plan.steps.is_empty() {
            plan.epoch = self.tuning.epoch;
        }
        plan.queues |= 1 << q;
        plan.last_step[q] = step_index;
        // Checked above: the plan has room.
        let _ = plan.steps.push(step);
        Ok(())
    }

    pub(super) fn run_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        ops: &[&Op],
    ) -> Result<(), Error> {
        if plan.epoch != self.tuning.epoch && !plan.steps.is_empty() {
            return Err(JobPlanError::Stale.into());
        }
        if ops.len() != plan.steps.len() {
            return Err(JobPlanError::OpCount {
                expected: plan.steps.len() as u32,
                actual: ops.len() as u32,
            }
            .into());
        }
        for (k, (step, op)) in plan.steps.iter().zip(ops).enumerate() {
            if op.kind() != step.kind {
                return Err(JobPlanError::OpMismatch {
                    step: k as u32,
                    expected: step.kind,
                    actual: op.kind(),
                }
                .into());
            }
        }
        // Filled in place: a `DepSet` is 152 bytes, and returning or cloning one is a copy.
        let mut before = DepSet::default();
        self.jobs_before(plan, &mut before)?;
        let scratch = plan.scratch.map(|i| plan.tensors[usize::from(i)].region);
        for (k, (step, &op)) in plan.steps.iter().zip(ops).enumerate() {
            let mut job = Job {
                kind: JobKind::Compute {
                    op,
                    variant: step.variant,
                    inputs: heapless::Vec::new(),
                    output: plan.tensors[usize::from(step.output)].region,
                    scratch: if step.scratch { scratch } else { None },
                },
                queue: step.queue,
                deps: heapless::Vec::new(),
            };
            if let JobKind::Compute { inputs, .. } = &mut job.kind {
                for &i in &step.inputs {
                    // As many as the step's inputs, at most MAX_JOB_INPUTS.
                    let _ = inputs.push(plan.tensors[usize::from(i)].region);
                }
            }
            // At most one fence per queue: this run's steps are newer than any job before it,
            // so a step's fence stands for its queue's.
            let mut queues = 1u16 << step.queue.index();
            for &s in &step.deps {
                let s = usize::from(s);
                queues |= 1 << plan.steps[s].queue.index();
                // One per queue: cannot overflow.
                let _ = job.deps.push(plan.fences[s]);
            }
            if step.first_on_queue {
                before.fences_except(queues, &mut job.deps);
            }
            match self.submit(&job) {
                Ok(fence) => plan.fences[k] = fence,
                Err(e) => {
                    self.record_partial_run(plan, k);
                    return Err(e);
                }
            }
        }
        for q in queues_in(plan.queues) {
            plan.last[q] = Some(plan.fences[usize::from(plan.last_step[q])]);
        }
        self.stats.compute_jobs += plan.steps.len() as u32;
        self.stats.plan_runs += 1;
        self.record_run(plan)?;
        plan.settled = true;
        Ok(())
    }

    /// The jobs before the run that the plan's first step on each queue must wait for, from
    /// its tensors' access records: every tensor's at the first run, only the shared ones'
    /// once the plan is settled. The previous run's newest jobs stand for what the plan's own
    /// tensors' records would hold. Looking a record up also checks the tensor's memory is
    /// still bound as it was (the plan holds a reference, but a server's caller could release
    /// one too many). Constants in flash have no record: nothing writes them.
    fn jobs_before<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        before: &mut DepSet,
    ) -> Result<(), Error> {
        let (memory, npu, frontier) = (&mut self.memory, &mut self.npu, &mut self.frontier);
        let mut ended = |q, f| frontier.is_done(npu, q, f);
        let mut walk = |t: &PlanTensor| -> Result<(), Error> {
            if let Binding::Memory(m) = t.binding {
                let access = memory.access_mut(m)?;
                access.jobs(t.written(), &mut ended, |q, f| before.add(q, f));
            }
            Ok(())
        };
        if !plan.settled {
            for t in plan.tensors.iter().filter(|t| t.role != Role::Shared) {
                walk(t)?;
            }
        }
        for &i in &plan.shared {
            walk(&plan.tensors[usize::from(i)])?;
        }
        if plan.owns {
            for (q, f) in plan.last.iter().enumerate() {
                if let Some(f) = *f {
                    before.add(q, f);
                }
            }
        }
        Ok(())
    }

    /// After a run, each shared tensor's access record holds the plan's newest jobs on memory
    /// overlapping it. Where the plan writes, they replace the record: every older job there
    /// was waited for by the plan's first jobs. Where it only reads, they join it. (Constants
    /// and the plan's own tensors take the plan's jobs when it is released.)
    fn record_run<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
    ) -> Result<(), Error> {
        let job = |s: u16| {
            let s = usize::from(s);
            (plan.steps[s].queue, plan.fences[s])
        };
        for &i in &plan.shared {
            let t = &plan.tensors[usize::from(i)];
            let Binding::Memory(m) = t.binding else {
                continue;
            };
            let access = self.memory.access_mut(m)?;
            let mut first = true;
            for q in queues_in(t.write_queues) {
                let (queue, fence) = job(t.writes[q]);
                if core::mem::take(&mut first) {
                    access.record_write(queue, fence);
                } else {
                    access.add_write(queue, fence);
                }
            }
            for q in queues_in(t.read_queues) {
                let (queue, fence) = job(t.reads[q]);
                access.record_read(queue, fence);
            }
        }
        Ok(())
    }

    /// A run that failed at step `failed`: the steps before it are submitted, and every
    /// tensor's record takes the plan's newest jobs as writers, so nothing reuses the plan's
    /// memory before they end. The next run walks every record again.
    fn record_partial_run<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        failed: usize,
    ) {
        for (step, &fence) in plan.steps.iter().zip(&plan.fences).take(failed) {
            if let Some(last) = plan.last.get_mut(step.queue.index()) {
                *last = Some(fence);
            }
        }
        plan.settled = false;
        for t in &plan.tensors {
            self.record_newest(plan, t, true);
        }
    }

    /// Writes the plan's newest job per queue into tensor `t`'s access record, as writers or
    /// as readers.
    fn record_newest<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        t: &PlanTensor,
        write: bool,
    ) {
        let Binding::Memory(m) = t.binding else {
            return;
        };
        if let Ok(access) = self.memory.access_mut(m) {
            access.add_newest(&plan.last, write);
        }
    }

    pub(super) fn plan_include<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        if plan.find(id).is_none() && plan.tensors.is_full() {
            return Err(plan_tensors(T));
        }
        self.plan_tensor(plan, id).map(|_| ())
    }

    pub(super) fn plan_adopt<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        // The plan's reference and the caller's: no other handle can reach the tensor.
        if self.handles.refs(id)? == 2 {
            if let Some(i) = plan.find(id) {
                let t = &mut plan.tensors[usize::from(i)];
                if t.role == Role::Shared {
                    t.role = Role::Own;
                    plan.shared.retain(|&s| s != i);
                    plan.owns = true;
                    // Jobs outside the plan may have touched it since the last run.
                    plan.settled = false;
                }
            }
        }
        self.release(id, 1)
    }

    pub(super) fn release_plan<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
    ) -> Result<(), Error> {
        for t in &plan.tensors {
            if t.role != Role::Shared {
                self.record_newest(plan, t, t.role == Role::Own);
            }
        }
        let mut result = Ok(());
        for t in &plan.tensors {
            if let Err(e) = self.release(t.id, 1) {
                result = result.and(Err(e));
            }
        }
        *plan = JobPlanState::new();
        result
    }
}
