//! Building a plan: checking each step's operands as `execute` does, choosing its variant
//! from the tuning cache (or the CPU fallback), giving it an execution unit, working out from
//! the memory its tensors overlap which earlier steps it waits for, and placing it in the
//! submission order.

use super::{merge_newest, newest, plan_tensors, JobPlanState, PlanStep, Role, NONE};
use crate::error::{Capacity, Error, JobPlanError};
use crate::hal::{HalError, Npu, Queue, Variant, MAX_JOB_INPUTS, MAX_QUEUES};
use crate::handle::HandleId;
use crate::memory::MemoryManagement;
use crate::ops::Op;
use crate::server::NpuServer;
use crate::tune::{Candidate, Lookup, TuneMode};

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// How a plan runs `op`: as `execute_tuned` would choose, from the tuning cache, without
    /// claiming a key (a plan never measures). `None`: on the CPU.
    fn planned_variant(&self, op: &Op) -> Option<Variant> {
        if !self.caps.ops.runs(op) {
            return None;
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
            Some(Candidate::Cpu) => None,
            // A choice this NPU cannot run falls back to the default, as in `execute_tuned`.
            Some(Candidate::Npu(v)) if v != Variant::Auto && self.npu.supports_variant(op, v) => {
                Some(v)
            }
            _ => Some(Variant::Auto),
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

    /// Adds a step (see [`ComputeServer::plan_step`](crate::server::ComputeServer::plan_step)).
    pub(in crate::server) fn plan_step<const S: usize, const T: usize>(
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
        let planned = self.planned_variant(op);
        let variant = planned.unwrap_or(Variant::Auto);
        let scratch_bytes = match planned {
            Some(variant) => variant
                .scratch_bytes(op)
                .ok_or(HalError::VariantUnsupported {
                    op: op.kind(),
                    variant,
                })?,
            None => 0,
        };
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

        // The CPU fallback's jobs are its transfers, on the DMA queue; like `execute`, it
        // leaves the round robin of the execution units alone.
        let cpu = planned.is_none();
        let queue = if cpu {
            Queue::Dma
        } else {
            let units = self.caps.execution_units.max(1);
            let queue = Queue::Unit(plan.next_unit % units);
            plan.next_unit = (plan.next_unit + 1) % units;
            queue
        };
        let q = queue.index();
        // A stateful op on the CPU writes its state inputs back, so the plan records them as
        // written. (No NPU runs a stateful op: an NPU step's inputs are read only.)
        let state = if cpu {
            usize::from(op.state_inputs()).min(ins.len())
        } else {
            0
        };
        let written = || {
            ins.iter()
                .take(state)
                .copied()
                .chain(core::iter::once(out))
                .chain(scratch)
        };
        // The newest step per other queue this one must wait for: to read (the writers of
        // its inputs), then to write too (the readers and writers of what it writes).
        let mut read_after = [NONE; MAX_QUEUES];
        for &i in &ins {
            merge_newest(&mut read_after, &plan.tensors[usize::from(i)].writes);
        }
        let mut after = read_after;
        let dma = Queue::Dma.index();
        let mut dma_writer = read_after[dma];
        for i in written() {
            let t = &plan.tensors[usize::from(i)];
            merge_newest(&mut after, &t.writes);
            merge_newest(&mut after, &t.reads);
            dma_writer = newest(dma_writer, t.writes[dma]);
        }
        // An NPU step that overwrites what a CPU step only read needs no fence for it: the
        // CPU step waited for its downloads (and so for every DMA job before them) before
        // its turn in the order ended. It must only come after it in the order.
        let mut follows = NONE;
        if !cpu && after[dma] != NONE && after[dma] != dma_writer {
            follows = after[dma];
            after[dma] = NONE;
        }
        let mut deps = heapless::Vec::new();
        let mut reads = 0u8;
        if cpu {
            for (k, &s) in read_after.iter().enumerate() {
                if k != q && s != NONE {
                    // One per queue, then at most one more per queue: cannot overflow.
                    let _ = deps.push(s);
                    reads += 1;
                }
            }
            for (k, (&s, &r)) in after.iter().zip(&read_after).enumerate() {
                if k != q && s != NONE && s != r {
                    let _ = deps.push(s);
                }
            }
        } else {
            for (k, &s) in after.iter().enumerate() {
                if k != q && s != NONE {
                    // One per queue: cannot overflow.
                    let _ = deps.push(s);
                }
            }
        }
        // Its own accesses, for the steps after it (its dependencies are worked out above).
        for &i in &ins {
            plan.record(i, step_index, queue, false);
        }
        for i in written() {
            plan.record(i, step_index, queue, true);
        }
        let at = if cpu {
            step_index
        } else {
            plan.hoisted_to(deps.as_slice(), [plan.last_step[q], follows], step_index)
        };
        let step = PlanStep {
            kind: op.kind(),
            variant_of: core::mem::discriminant(op),
            queue,
            variant,
            inputs: ins,
            output: out,
            scratch: scratch.is_some(),
            cpu,
            // At most MAX_JOB_INPUTS.
            state: state as u8,
            deps,
            reads,
            first_on_queue: plan.last_step[q] == NONE,
            at,
        };
        if plan.steps.is_empty() {
            plan.epoch = self.tuning.epoch;
        }
        // Sorted by (time, index), and the new step has the largest index: it goes after
        // every step whose time is not later than its own.
        let time = step.time();
        let place = plan
            .order
            .iter()
            .position(|&k| plan.steps[usize::from(k)].time() > time)
            .unwrap_or(plan.order.len());
        plan.queues |= 1 << q;
        plan.last_step[q] = step_index;
        plan.cpu_steps += u16::from(cpu);
        // Checked above: the plan has room (`order` is as long as `steps`).
        let _ = plan.steps.push(step);
        let _ = plan.order.insert(place, step_index);
        Ok(())
    }

    /// Holds a tensor in the plan without a step (see
    /// [`ComputeServer::plan_include`](crate::server::ComputeServer::plan_include)).
    pub(in crate::server) fn plan_include<const S: usize, const T: usize>(
        &mut self,
        plan: &mut JobPlanState<S, T>,
        id: HandleId,
    ) -> Result<(), Error> {
        if plan.find(id).is_none() && plan.tensors.is_full() {
            return Err(plan_tensors(T));
        }
        self.plan_tensor(plan, id).map(|_| ())
    }

    /// Hands a tensor over to the plan (see
    /// [`ComputeServer::plan_adopt`](crate::server::ComputeServer::plan_adopt)).
    pub(in crate::server) fn plan_adopt<const S: usize, const T: usize>(
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
}
