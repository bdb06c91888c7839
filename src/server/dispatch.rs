//! Dispatch and dependencies: checking a job's operands, choosing its execution unit, and
//! submitting it with the fences it must wait for.
//!
//! `execute` follows the server's [`TuneMode`]: with tuning off (the default) an op runs on
//! the NPU as the driver chooses, or on the CPU fallback ([`fallback`](super::fallback)) where
//! the NPU lacks it; otherwise [`tuning`](super::tuning) picks the candidate. A job waits for
//! the last writer of each input and, before overwriting its output, for the jobs still
//! reading the output's old contents ([`DepSet`]), so memory released a moment ago is safe to
//! reuse without the CPU waiting.

use super::deps::DepSet;
use super::residency::Residency;
use super::tensors::{region_of_block, Binding, TensorEntry};
use super::NpuServer;
use crate::error::Error;
use crate::hal::{
    Fence, HalError, Job, JobKind, Npu, Queue, Region, Variant, MAX_JOB_INPUTS, MAX_QUEUES,
};
use crate::handle::HandleId;
use crate::memory::{MemoryBinding, MemoryManagement};
use crate::ops::Op;
use crate::tune::{Candidate, TuneMode};

/// What a job needs of one operand's entry.
#[derive(Clone, Copy, Debug)]
pub(super) struct Operand {
    pub(super) binding: Binding,
    pub(super) bytes: u32,
    /// A download of the old bytes is pending (void once a job overwrites them).
    pub(super) downloading: bool,
    /// Its contents were lost to a recovery.
    pub(super) lost: bool,
}

impl Operand {
    pub(super) fn of(e: &TensorEntry) -> Self {
        Operand {
            binding: e.binding,
            bytes: e.bytes,
            downloading: e.downloading,
            lost: e.lost,
        }
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
    pub(super) fn execute(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        // The untuned dispatch is written out here rather than called, and the tuned one kept
        // out of line: every job of an untuned server takes this path, and a call or a larger
        // frame costs it tens of instructions on a Cortex-M4.
        if let TuneMode::Off = self.tuning.mode {
            return self.dispatch(op, inputs, output, |s, operands, out| {
                // `RUNS_OPS` first: a driver without compute jobs builds no path to them.
                if H::RUNS_OPS && s.caps.ops.runs(op) {
                    s.execute_on_npu(op, Variant::Auto, operands, out)
                } else {
                    s.execute_on_cpu(op, operands, out)
                }
            });
        }
        self.execute_tuned(op, inputs, output)
    }

    /// Like `execute`, but the way to run `op` is given rather than chosen:
    /// [`Candidate::Npu`] with a [`Variant`] (scratch memory, when the variant needs it, is
    /// reserved for the job and released at once, fence-safe like any memory), or
    /// [`Candidate::Cpu`], the fallback kernels. Every candidate writes the same bytes.
    /// Errors: [`HalError::Unsupported`] when the NPU does not run the op,
    /// [`HalError::VariantUnsupported`] when it does not run it that way, and the errors of
    /// `execute`.
    pub(super) fn execute_with(
        &mut self,
        op: &Op,
        how: Candidate,
        inputs: &[HandleId],
        output: HandleId,
    ) -> Result<(), Error> {
        if let Candidate::Npu(variant) = how {
            if !self.caps.ops.runs(op) {
                return Err(HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                }
                .into());
            }
            if variant != Variant::Auto && !self.npu.supports_variant(op, variant) {
                return Err(HalError::VariantUnsupported {
                    op: op.kind(),
                    variant,
                }
                .into());
            }
        }
        self.dispatch(op, inputs, output, |s, operands, out| match how {
            Candidate::Npu(variant) if H::RUNS_OPS => s.execute_on_npu(op, variant, operands, out),
            // Refused above when the driver runs no compute job.
            Candidate::Npu(_) | Candidate::Cpu => s.execute_on_cpu(op, operands, out),
        })
    }

    /// What `execute` and `execute_with` share: checks the operands, binds pinned ones, voids
    /// a started read of the output, then lets `run` submit (or compute on the CPU). Generic
    /// over `run` so that `execute`, the path every job takes, is compiled with its own
    /// choice inline (passing the choice as a value cost 50 instructions per job). It and the
    /// checks and submission under it are inlined always: with the tuned path calling them
    /// too, the compiler would otherwise call them from `execute`, at 280 instructions per
    /// job on a Cortex-M4 (measured by the firmware example).
    #[inline(always)]
    pub(super) fn dispatch(
        &mut self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        run: impl FnOnce(&mut Self, &[Operand], Operand) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut operands = heapless::Vec::new();
        let (mut out, pinned) = self.check_operands(op, inputs, output, &mut operands)?;
        // Pinned operands: bind them on the device, upload inputs whose newest bytes are on
        // the host; the output's newest bytes will be on the device.
        if pinned {
            for (e, &id) in operands.iter_mut().zip(inputs) {
                *e = Operand::of(&self.bind_on_device(id, true)?);
            }
            out = Operand::of(&self.bind_on_device(output, false)?);
            self.handles.get_mut(output)?.newest = Residency::Device;
        }
        // The output's bytes are about to change: a started read of the old bytes is void.
        if out.downloading {
            self.cancel_download(output)?;
        }
        // About to be written whole again: no longer lost (a job that fails leaves it
        // undefined, as any failed job does).
        if out.lost {
            self.handles.get_mut(output)?.lost = false;
        }
        run(self, &operands, out)
    }
    /// Checks a job's operands against what `op` needs and gathers them into `operands`
    /// (inputs in order). Returns the output, and whether any operand is pinned.
    #[inline(always)]
    pub(super) fn check_operands(
        &self,
        op: &Op,
        inputs: &[HandleId],
        output: HandleId,
        operands: &mut heapless::Vec<Operand, MAX_JOB_INPUTS>,
    ) -> Result<(Operand, bool), Error> {
        let kind = op.kind();
        let bad = |operand: usize, expected: u32, actual: u32| Error::BadOperands {
            op: kind,
            operand: operand as u8,
            expected,
            actual,
        };
        let Some(need) = op.operands() else {
            return Err(Error::OperandTooLarge { op: kind });
        };
        if !need.accepts(inputs.len()) {
            return Err(Error::operand_count(op, inputs.len()));
        }
        let mut pinned = false;
        for (i, (&id, need)) in inputs.iter().zip(need.inputs.iter()).enumerate() {
            // A released id is stale whatever else is wrong with it: checked before aliasing,
            // which compares ids only.
            let e = self.handles.get_ref(id)?;
            if id == output {
                return Err(Error::OutputAliasesInput { op: kind });
            }
            if e.bytes != *need {
                return Err(bad(i, *need, e.bytes));
            }
            if e.lost {
                return Err(Error::ContentsLost);
            }
            pinned |= e.host.is_some();
            operands.push(Operand::of(e)).map_err(|_| bad(i, 0, 0))?;
        }
        let out = self.handles.get_ref(output)?;
        if out.constant {
            return Err(Error::ReadOnlyTensor);
        }
        if out.bytes != need.output {
            return Err(bad(
                usize::from(Error::OUTPUT_OPERAND),
                need.output,
                out.bytes,
            ));
        }
        Ok((Operand::of(out), pinned || out.host.is_some()))
    }
    /// Submits `op` to the next execution unit (round robin), built in place: each input's
    /// region and the fences of its writers, the output's region and the fences of its
    /// readers and writer, less what has completed.
    #[inline(always)]
    pub(super) fn execute_on_npu(
        &mut self,
        op: &Op,
        variant: Variant,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<(), Error> {
        if variant == Variant::Auto {
            return self.submit_compute(op, variant, inputs, output, None);
        }
        let scratch = match variant.scratch_bytes(op) {
            Some(0) => None,
            Some(bytes) => Some(self.reserve(bytes)?),
            None => {
                return Err(HalError::VariantUnsupported {
                    op: op.kind(),
                    variant,
                }
                .into())
            }
        };
        let submitted = self.submit_compute(op, variant, inputs, output, scratch);
        // The scratch is the job's alone: released at once, its next owner waits for the job
        // (the chunk keeps the job's write in its access record).
        if let Some(m) = scratch {
            self.memory.release(m)?;
        }
        submitted
    }

    #[inline(always)]
    pub(super) fn submit_compute(
        &mut self,
        op: &Op,
        variant: Variant,
        inputs: &[Operand],
        output: Operand,
        scratch: Option<MemoryBinding>,
    ) -> Result<(), Error> {
        let units = self.caps.execution_units.max(1);
        let queue = Queue::Unit(self.next_unit % units);
        self.next_unit = (self.next_unit + 1) % units;
        let Binding::Memory(out) = output.binding else {
            return Err(Error::ReadOnlyTensor);
        };
        let mut job = Job {
            kind: JobKind::Compute {
                op,
                variant,
                inputs: heapless::Vec::new(),
                output: Region::device(0, 0),
                scratch: None,
            },
            queue,
            deps: heapless::Vec::new(),
        };
        let mut deps = DepSet::default();
        let slow_base = self.slow_base;
        let (memory, npu, frontier) = (&mut self.memory, &mut self.npu, &mut self.frontier);
        let mut ended = |q, f| frontier.is_done(npu, q, f);
        if let JobKind::Compute {
            inputs: regions,
            output: out_region,
            scratch: scratch_region,
            ..
        } = &mut job.kind
        {
            for e in inputs {
                let region = match e.binding {
                    Binding::Memory(m) => {
                        let (block, access) = memory.block_and_access(m)?;
                        deps.add_read_of(access, queue, &mut ended);
                        region_of_block(block, slow_base)
                    }
                    Binding::Flash(r) => r,
                    Binding::Host => return Err(Error::NotPinned),
                };
                // `inputs` has at most MAX_JOB_INPUTS entries.
                let _ = regions.push(region);
            }
            let (block, access) = memory.block_and_access(out)?;
            deps.add_write_of(access, queue, &mut ended);
            *out_region = region_of_block(block, slow_base);
            if let Some(m) = scratch {
                let (block, access) = memory.block_and_access(m)?;
                deps.add_write_of(access, queue, &mut ended);
                *scratch_region = Some(region_of_block(block, slow_base));
            }
        }
        deps.fences_into(&mut job.deps);
        let fence = self.submit(&job)?;
        for e in inputs {
            self.record_read(e.binding, queue, fence)?;
        }
        self.memory.access_mut(out)?.record_write(queue, fence);
        if let Some(m) = scratch {
            self.memory.access_mut(m)?.record_write(queue, fence);
        }
        self.stats.compute_jobs += 1;
        Ok(())
    }

    #[inline(always)]
    pub(super) fn record_read(
        &mut self,
        binding: Binding,
        queue: Queue,
        fence: Fence,
    ) -> Result<(), Error> {
        if let Binding::Memory(m) = binding {
            self.memory.access_mut(m)?.record_read(queue, fence);
        }
        Ok(())
    }

    pub(super) fn sync(&mut self) -> Result<(), Error> {
        for fence in self.newest.into_iter().flatten() {
            // A failed job is reported by the read of what it produced; sync only waits. A
            // hardware fault is reported here too: the server recovered, and every job in
            // flight was abandoned.
            if let Err(e @ Error::Fault { .. }) = self.wait_for(fence) {
                return Err(e);
            }
        }
        self.newest = [None; MAX_QUEUES];
        self.retire_memory_fences();
        self.reap_staging();
        Ok(())
    }

    /// [`sync`](Self::sync) without waiting: each queue's newest fence polled once.
    pub(super) fn try_sync(&mut self) -> nb::Result<(), Error> {
        for fence in self.newest.into_iter().flatten() {
            // Done, failed (reported by the read of what it produced) or unknown: over.
            if let Err(nb::Error::WouldBlock) = self.npu.poll(fence) {
                return Err(nb::Error::WouldBlock);
            }
        }
        self.newest = [None; MAX_QUEUES];
        self.retire_memory_fences();
        self.reap_staging();
        Ok(())
    }
}
