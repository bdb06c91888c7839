//! Running a plan: gathering the jobs before the run its first steps wait for, submitting each
//! step as built (in the submission order, computing CPU steps when their turn comes, where
//! the plan has any), then handing the plan's newest jobs to its tensors' access records (at
//! every run for shared tensors, at release for the others).

use super::{issued, JobPlanState, PlanStep, PlanTensor, Role, COMPUTED};
use crate::error::{Error, JobPlanError};
use crate::hal::{Fence, Job, JobKind, Npu, Queue, Region, Space, MAX_JOB_INPUTS, MAX_QUEUES};
use crate::memory::{queues_in, MemoryManagement};
use crate::ops::{InputBytes, Op};
use crate::server::deps::DepSet;
use crate::server::tensors::Binding;
use crate::server::NpuServer;
use crate::storage::Block;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// Submits every step (see [`ComputeServer::run_plan`](crate::server::ComputeServer::run_plan)).
    pub(in crate::server) fn run_plan<const S: usize, const T: usize>(
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
            // The variant the step was built with is the usual case, and comparing it costs a
            // load where `kind` is a table look-up per step; another variant of the same kind
            // is accepted as before.
            if core::mem::discriminant(*op) != step.variant_of && op.kind() != step.kind {
                return Err(JobPlanError::OpMismatch {
                    step: k as u32,
                    expected: step.kind,
                    actual: op.kind(),
                }
                .into());
            }
        }
        if plan.recoveries != self.epoch {
            // A recovery ended every job of the last run: none is left to wait for, and the
            // records are walked afresh.
            plan.last = [None; MAX_QUEUES];
            plan.settled = false;
            plan.recoveries = self.epoch;
        }
        if self.maybe_lost {
            self.plan_restores(plan)?;
        }
        // Filled in place: a `DepSet` is 152 bytes, and returning or cloning one is a copy.
        let mut before = DepSet::default();
        self.jobs_before(plan, &mut before)?;
        let scratch = plan.scratch.map(|i| plan.tensors[usize::from(i)].region);
        if plan.cpu_steps == 0 {
            for (k, (step, &op)) in plan.steps.iter().zip(ops).enumerate() {
                match self.submit_step(plan, step, op, scratch, &before) {
                    Ok(fence) => plan.fences[k] = fence,
                    Err(e) => {
                        self.record_partial_run(plan, k);
                        return Err(e);
                    }
                }
            }
        } else {
            self.run_in_order(plan, ops, scratch, &before)?;
        }
        for q in queues_in(plan.queues) {
            plan.last[q] = issued(plan.fences[usize::from(plan.last_step[q])]);
        }
        self.stats.compute_jobs += (plan.steps.len() - usize::from(plan.cpu_steps)) as u32;
        self.stats.plan_runs += 1;
        self.record_run(plan)?;
        plan.settled = true;
        Ok(())
    }

    /// After a recovery marked tensors lost: the plan's tensors it writes are made whole by
    /// this run; one it only reads is refused ([`Error::ContentsLost`]).
    #[cold]
    fn plan_restores<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
    ) -> Result<(), Error> {
        for t in &plan.tensors {
            let entry = self.handles.get_mut(t.id)?;
            if entry.lost {
                if !t.written() {
                    return Err(Error::ContentsLost);
                }
                entry.lost = false;
            }
        }
        self.maybe_lost = self.handles.values_mut().any(|e| e.lost);
        Ok(())
    }

    /// Submits NPU step `step` of `plan` as built, its dependencies mapped to the fences this
    /// run's steps received.
    #[inline(always)]
    fn submit_step<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        step: &PlanStep,
        op: &Op,
        scratch: Option<Region>,
        before: &DepSet,
    ) -> Result<Fence, Error> {
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
        for &s in &step.deps {
            if let Some(fence) = issued(plan.fences[usize::from(s)]) {
                // One per queue: cannot overflow.
                let _ = job.deps.push(fence);
            }
        }
        if step.first_on_queue {
            // At most one fence per queue: this run's steps are newer than any job before
            // it, so a step's fence stands for its queue's. (Worked out here, for the few
            // steps first on their queue, rather than beside the loop above for every step.)
            let mut queues = 1u16 << step.queue.index();
            for &s in &step.deps {
                queues |= 1 << plan.steps[usize::from(s)].queue.index();
            }
            before.fences_except(queues, &mut job.deps);
        }
        self.submit(&job)
    }

    /// Submits the steps of a plan with CPU steps in its submission order, computing each
    /// CPU step when its turn comes.
    fn run_in_order<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        ops: &[&Op],
        scratch: Option<Region>,
        before: &DepSet,
    ) -> Result<(), Error> {
        for n in 0..plan.order.len() {
            let k = usize::from(plan.order[n]);
            // `ops` is as long as `steps` (checked by the caller), and `order` indexes them.
            let op = ops[k];
            let submitted = if plan.steps[k].cpu {
                let mut newest = None;
                let result = self.run_cpu_step(plan, k, op, before, &mut newest);
                if let (Err(_), Some(fence)) = (&result, newest) {
                    // Some of its transfers are in flight: they count as the step's.
                    plan.fences[k] = fence;
                    self.record_partial_run(plan, n + 1);
                    return result.map(|_| ());
                }
                result
            } else {
                self.submit_step(plan, &plan.steps[k], op, scratch, before)
            };
            match submitted {
                Ok(fence) => plan.fences[k] = fence,
                Err(e) => {
                    self.record_partial_run(plan, n);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// CPU step `k`, as the fallback runs it but with its dependencies from the plan: its
    /// inputs come down into host staging after the writers of what it reads (and, first on
    /// its queue, the jobs before the run); the CPU waits for those downloads alone,
    /// computes, and sends the output (and a stateful op's state) back up after the readers
    /// and writers of what it writes. Returns the output upload's fence, which stands for
    /// the step. `newest` is the newest transfer it submitted, for a run that fails in it.
    /// Staging is taken here and freed after the transfers' fences, as by the fallback.
    fn run_cpu_step<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        k: usize,
        op: &Op,
        before: &DepSet,
        newest: &mut Option<Fence>,
    ) -> Result<Fence, Error> {
        let step = &plan.steps[k];
        let bindings = step
            .inputs
            .iter()
            .map(|&i| plan.tensors[usize::from(i)].binding);
        let output = plan.tensors[usize::from(step.output)].binding;
        if let Some(views) = self.in_place_operands(bindings, output)? {
            return self.cpu_step_in_place(plan, k, op, before, &views);
        }
        let mut staged = heapless::Vec::new();
        let result = self.cpu_step_in(plan, k, op, before, newest, &mut staged);
        for (fence, block) in staged {
            self.staging.free_after(fence, block)?;
        }
        result
    }

    /// CPU step `k` computed in place (see [CPU steps](JobPlanState#cpu-steps)): the CPU
    /// waits for what its lists name, the jobs before the run when it is first on its queue,
    /// and the newest DMA job; then computes over device memory. Returns [`COMPUTED`].
    fn cpu_step_in_place<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        k: usize,
        op: &Op,
        before: &DepSet,
        views: &[InputBytes<'static>],
    ) -> Result<Fence, Error> {
        let step = &plan.steps[k];
        let state = usize::from(step.state);
        let out = plan.tensors[usize::from(step.output)];
        let written = step
            .inputs
            .iter()
            .take(state)
            .map(|&i| plan.tensors[usize::from(i)]);
        if written
            .chain([out])
            .any(|t| !matches!(t.binding, Binding::Memory(_)))
        {
            return Err(Error::ReadOnlyTensor);
        }
        let mut waits: heapless::Vec<Fence, { 3 * MAX_QUEUES + 1 }> = heapless::Vec::new();
        for &s in &step.deps {
            if let Some(fence) = issued(plan.fences[usize::from(s)]) {
                // At most 2 * MAX_QUEUES dependencies: cannot overflow.
                let _ = waits.push(fence);
            }
        }
        if step.first_on_queue {
            let mut jobs = heapless::Vec::new();
            before.fences_except(0, &mut jobs);
            let _ = waits.extend_from_slice(&jobs);
        }
        if let Some(fence) = self.newest[Queue::Dma.index()] {
            let _ = waits.push(fence);
        }
        for fence in waits {
            self.wait_for(fence)?;
        }
        self.compute_over(op, Space::Device, views, out.region)?;
        self.stats.cpu_ops += 1;
        Ok(COMPUTED)
    }

    fn cpu_step_in<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
        k: usize,
        op: &Op,
        before: &DepSet,
        newest: &mut Option<Fence>,
        staged: &mut heapless::Vec<(Fence, Block), MAX_JOB_INPUTS>,
    ) -> Result<Fence, Error> {
        let step = &plan.steps[k];
        let (reads, writes) = step
            .deps
            .split_at(usize::from(step.reads).min(step.deps.len()));
        // The steps' fences, and the jobs before the run on the queues no step names: at
        // most one per queue.
        let deps_of = |list: &[u16], first: bool| {
            let mut deps = heapless::Vec::new();
            let mut queues = 1u16 << Queue::Dma.index();
            for &s in list {
                let s = usize::from(s);
                queues |= 1 << plan.steps[s].queue.index();
                if let Some(fence) = issued(plan.fences[s]) {
                    let _ = deps.push(fence);
                }
            }
            if first {
                before.fences_except(queues, &mut deps);
            }
            deps
        };
        let down = deps_of(reads, step.first_on_queue);
        let mut ranges: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
        for &i in &step.inputs {
            let src = plan.tensors[usize::from(i)].region;
            let block = self.staging_alloc(src.len)?;
            match self.transfer_after(src, Region::host(block.offset, src.len), &down) {
                Ok(fence) => {
                    *newest = Some(fence);
                    // As many as the step's inputs, at most MAX_JOB_INPUTS.
                    let _ = staged.push((fence, block));
                    let _ = ranges.push((block.offset as usize, src.len as usize));
                }
                Err(e) => {
                    self.staging.free(block)?;
                    return Err(e);
                }
            }
        }
        for &(fence, _) in staged.iter() {
            self.wait_for(fence)?;
        }
        let out = plan.tensors[usize::from(step.output)];
        let out_block = self.staging_alloc(out.region.len)?;
        let out_region = Region::host(out_block.offset, out.region.len);
        // After the downloads (on the same queue, and waited for), the uploads need only the
        // readers and writers of what the step writes that its reads did not cover; with no
        // input, the jobs before the run too.
        let up = deps_of(writes, step.first_on_queue && step.inputs.is_empty());
        let state = usize::from(op.state_inputs()).min(step.inputs.len());
        let uploaded = self
            .compute_in_staging(op, &ranges, out_region)
            .and_then(|()| {
                for (&i, (fence, block)) in step.inputs.iter().zip(staged.iter_mut()).take(state) {
                    let t = &plan.tensors[usize::from(i)];
                    if !matches!(t.binding, Binding::Memory(_)) {
                        return Err(Error::ReadOnlyTensor);
                    }
                    *fence = self.transfer_after(
                        Region::host(block.offset, t.region.len),
                        t.region,
                        &up,
                    )?;
                    *newest = Some(*fence);
                }
                if !matches!(out.binding, Binding::Memory(_)) {
                    return Err(Error::ReadOnlyTensor);
                }
                self.transfer_after(out_region, out.region, &up)
            });
        match uploaded {
            Ok(fence) => {
                *newest = Some(fence);
                self.stats.cpu_ops += 1;
                self.staging.free_after(fence, out_block)?;
                Ok(fence)
            }
            Err(e) => {
                self.staging.free(out_block)?;
                Err(e)
            }
        }
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
    /// and the plan's own tensors take the plan's jobs when it is released.) A read of a
    /// shared tensor the plan writes, started before the run (`try_read`), holds the bytes the
    /// run overwrote: it is voided, as `execute` voids one of its output.
    fn record_run<const S: usize, const T: usize>(
        &mut self,
        plan: &JobPlanState<S, T>,
    ) -> Result<(), Error> {
        // A CPU step computed in place is over: nothing to record.
        let job = |s: u16| {
            let s = usize::from(s);
            Some(plan.steps[s].queue).zip(issued(plan.fences[s]))
        };
        for &i in &plan.shared {
            let t = &plan.tensors[usize::from(i)];
            let Binding::Memory(m) = t.binding else {
                continue;
            };
            if t.written() {
                self.cancel_download(t.id)?;
            }
            let access = self.memory.access_mut(m)?;
            let mut first = true;
            for q in queues_in(t.write_queues) {
                let Some((queue, fence)) = job(t.writes[q]) else {
                    continue;
                };
                if core::mem::take(&mut first) {
                    access.record_write(queue, fence);
                } else {
                    access.add_write(queue, fence);
                }
            }
            for q in queues_in(t.read_queues) {
                if let Some((queue, fence)) = job(t.reads[q]) {
                    access.record_read(queue, fence);
                }
            }
        }
        Ok(())
    }

    /// A run that failed after submitting the first `submitted` steps of its order: every
    /// tensor's record takes the plan's newest jobs as writers, so nothing reuses the plan's
    /// memory before they end. The next run walks every record again.
    fn record_partial_run<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        submitted: usize,
    ) {
        for &k in plan.order.iter().take(submitted) {
            let k = usize::from(k);
            if let (Some(step), Some(&fence)) = (plan.steps.get(k), plan.fences.get(k)) {
                if let Some(last) = plan.last.get_mut(step.queue.index()) {
                    *last = issued(fence);
                }
            }
        }
        plan.settled = false;
        for t in &plan.tensors {
            self.record_newest(plan, t, true);
            if t.role == Role::Shared && t.written() {
                // As after a whole run (see `record_run`); a tensor gone is no error here.
                let _ = self.cancel_download(t.id);
            }
        }
    }

    /// Writes the plan's newest job per queue into tensor `t`'s access record, as writers or
    /// as readers.
    pub(super) fn record_newest<const S: usize, const T: usize>(
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

    /// Gives the plan's tensors back (see
    /// [`ComputeServer::release_plan`](crate::server::ComputeServer::release_plan)).
    pub(in crate::server) fn release_plan<const S: usize, const T: usize>(
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
