//! The CPU fallback: an op the NPU does not run (or whose tuned choice is the CPU) runs on the
//! `npu-kernels` reference kernels through the operator interpreter, and the HAL is told
//! ([`Npu::host_compute`]) so that a simulator's clock charges the CPU's time.
//!
//! Where it computes depends on the HAL:
//!
//! - **In place**, when the HAL lends the CPU its device memory ([`Npu::device_memory`]: a
//!   part without an NPU, or an arena in plain SRAM). The CPU first waits for the jobs a job
//!   on the NPU would wait for (the writers of what it reads, the readers and writers of what
//!   it writes, from the access records), then the kernels read the operands where they lie,
//!   in device memory or flash, and write the output there. Nothing is copied and no host
//!   memory is used; the op is over when the call returns, so no job stands for it and the
//!   access records need nothing new. An operand the kernels cannot view where it lies (a
//!   flash constant off [`VIEW_ALIGNMENT`]) sends the op through staging instead.
//! - **Over host staging** otherwise: its inputs are downloaded (the CPU waits for those
//!   downloads alone), computed there, and the result uploaded. A stateful operator's state
//!   operands ([`Op::state_inputs`]) come down with the other inputs, are updated in their
//!   staging copies and go back up with the output.

use super::deps::DepSet;
use super::dispatch::Operand;
use super::tensors::Binding;
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Fence, HalError, Npu, Region, Space, MAX_JOB_DEPS, MAX_JOB_INPUTS};
use crate::memory::MemoryManagement;
use crate::ops::{run_over, InputBytes, Op, OpError, VIEW_ALIGNMENT};
use crate::storage::Block;

/// An op's inputs as the kernels read them in place.
pub(super) type InPlace = heapless::Vec<InputBytes<'static>, MAX_JOB_INPUTS>;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// The CPU fallback: in place where the HAL lends device memory, else bring the inputs
    /// to host staging, compute there, upload the result.
    pub(super) fn execute_on_cpu(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<(), Error> {
        if let Some(views) =
            self.in_place_operands(inputs.iter().map(|e| e.binding), output.binding)?
        {
            return self.compute_in_place(op, inputs, output, &views);
        }
        let mut staged = heapless::Vec::new();
        let result = self.compute_on_cpu(op, inputs, output, &mut staged);
        for (fence, block) in staged {
            self.staging.free_after(fence, block)?;
        }
        result
    }

    /// Where the kernels can read each of an op's inputs in place (bound as `bindings`, the
    /// output as `output`): `None` when the HAL keeps the CPU off device memory, or an operand
    /// cannot be viewed where it lies (a flash constant off [`VIEW_ALIGNMENT`], a tensor not
    /// bound on the device yet, or one in the slow tier, which the HAL lends the CPU no view
    /// of), and the op goes through staging.
    pub(super) fn in_place_operands(
        &mut self,
        bindings: impl Iterator<Item = Binding>,
        output: Binding,
    ) -> Result<Option<InPlace>, Error> {
        if self.npu.device_memory().is_none() {
            return Ok(None);
        }
        if let Binding::Memory(m) = output {
            if self.device_region(m)?.space != Space::Device {
                return Ok(None);
            }
        }
        let mut views = InPlace::new();
        for binding in bindings {
            let view = match binding {
                Binding::Memory(m) => {
                    let r = self.device_region(m)?;
                    if r.space != Space::Device {
                        return Ok(None);
                    }
                    InputBytes::At(r.offset as usize, r.len as usize)
                }
                Binding::Flash(r) => match self.flash_bytes(r) {
                    Some(bytes) if (bytes.as_ptr() as usize).is_multiple_of(VIEW_ALIGNMENT) => {
                        InputBytes::Outside(bytes)
                    }
                    _ => return Ok(None),
                },
                Binding::Host => return Ok(None),
            };
            // As many as the op's inputs, at most MAX_JOB_INPUTS (checked by the caller).
            let _ = views.push(view);
        }
        Ok(Some(views))
    }

    /// The bytes of a region of a mapped flash segment, for the CPU to read in place.
    pub(super) fn flash_bytes(&self, region: Region) -> Option<&'static [u8]> {
        let Space::Flash(segment) = region.space else {
            return None;
        };
        let bytes = self.flash.get(usize::from(segment))?.as_ref()?.bytes;
        bytes.get(region.offset as usize..usize::try_from(region.end()).ok()?)
    }

    /// The fallback in place, job by job: waits for every job on memory the op reads (its
    /// writers) or writes (its readers and writers), on every queue, then computes over
    /// device memory. Nothing is submitted: the op is over on return.
    fn compute_in_place(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
        views: &[InputBytes<'static>],
    ) -> Result<(), Error> {
        let Binding::Memory(out) = output.binding else {
            return Err(Error::ReadOnlyTensor);
        };
        let state = usize::from(op.state_inputs()).min(inputs.len());
        let mut deps = DepSet::default();
        {
            let (memory, npu, frontier) = (&mut self.memory, &mut self.npu, &mut self.frontier);
            let mut ended = |q, f| frontier.is_done(npu, q, f);
            for (k, e) in inputs.iter().enumerate() {
                match e.binding {
                    Binding::Memory(m) => {
                        memory
                            .access_mut(m)?
                            .jobs(k < state, &mut ended, |q, f| deps.add(q, f));
                    }
                    // A stateful op's state is written back: it cannot be a constant.
                    _ if k < state => return Err(Error::ReadOnlyTensor),
                    _ => {}
                }
            }
            memory
                .access_mut(out)?
                .jobs(true, &mut ended, |q, f| deps.add(q, f));
        }
        let mut fences: heapless::Vec<Fence, MAX_JOB_DEPS> = heapless::Vec::new();
        deps.fences_into(&mut fences);
        for fence in fences {
            self.wait_for(fence)?;
        }
        let out = self.device_region(out)?;
        self.compute_over(op, Space::Device, views, out)?;
        self.stats.cpu_ops += 1;
        Ok(())
    }

    /// Runs `op` with the kernels over staging: its inputs at `ranges` (offset, bytes), its
    /// output into `out`, a stateful op's state operands (the first inputs) updated where
    /// they are; then tells the HAL the CPU computed. The caller moves the bytes.
    pub(super) fn compute_in_staging(
        &mut self,
        op: &Op,
        ranges: &[(usize, usize)],
        out: Region,
    ) -> Result<(), Error> {
        let views: InPlace = ranges
            .iter()
            .map(|&(start, len)| InputBytes::At(start, len))
            .collect();
        self.compute_over(op, Space::Host, &views, out)
    }

    /// Runs `op` with the kernels over host memory or the device memory the HAL lends
    /// (`space`), its output at `out` in it and its inputs as `inputs` say; then tells the HAL
    /// the CPU computed.
    pub(super) fn compute_over(
        &mut self,
        op: &Op,
        space: Space,
        inputs: &[InputBytes<'_>],
        out: Region,
    ) -> Result<(), Error> {
        let memory = match space {
            Space::Host => Some(self.npu.host_memory()),
            _ => self.npu.device_memory(),
        };
        let Some(memory) = memory else {
            return Err(HalError::WrongSpace { region: out }.into());
        };
        let space_bytes = memory.len() as u32;
        let run = run_over(op, memory, (out.offset as usize, out.len as usize), inputs);
        let computed = match run {
            Some(result) => result.map_err(|e| match e {
                OpError::Kernel(error) => Error::Kernel {
                    op: op.kind(),
                    error,
                },
                OpError::NotBuilt => Error::Hal(HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                }),
                OpError::Misaligned { .. }
                | OpError::InputCount { .. }
                | OpError::NotInPlace
                | OpError::NotIm2col
                | OpError::State => Error::Hal(HalError::Misaligned {
                    region: out,
                    alignment: self.caps.alignment,
                }),
            }),
            None => Err(HalError::OutOfBounds {
                region: out,
                space_bytes,
            }
            .into()),
        };
        if computed.is_ok() {
            self.npu.host_compute(op);
        }
        computed
    }

    pub(super) fn compute_on_cpu(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
        staged: &mut heapless::Vec<(Fence, Block), MAX_JOB_INPUTS>,
    ) -> Result<(), Error> {
        let mut ranges: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
        for e in inputs {
            let (fence, block) = self.start_download(e.binding, e.bytes)?;
            // Both vectors hold at most MAX_JOB_INPUTS, as many as `inputs` (checked by caller).
            let _ = staged.push((fence, block));
            let _ = ranges.push((block.offset as usize, e.bytes as usize));
        }
        for &(fence, _) in staged.iter() {
            self.wait_for(fence)?;
        }
        let out_block = self.staging_alloc(output.bytes)?;
        let out_region = Region::host(out_block.offset, output.bytes);
        let state = usize::from(op.state_inputs()).min(ranges.len());
        let computed = self.compute_in_staging(op, &ranges, out_region);
        let out = match output.binding {
            Binding::Memory(m) => Ok(m),
            Binding::Flash(_) | Binding::Host => Err(Error::ReadOnlyTensor),
        };
        // The updated state back to the device, each staging block freed after its upload.
        let computed = computed.and_then(|()| {
            for (e, (fence, block)) in inputs.iter().zip(staged.iter_mut()).take(state) {
                let Binding::Memory(m) = e.binding else {
                    return Err(Error::ReadOnlyTensor);
                };
                *fence = self.submit_upload(Region::host(block.offset, e.bytes), m)?;
            }
            Ok(())
        });
        match computed.and_then(|()| self.submit_upload(out_region, out?)) {
            Ok(fence) => {
                self.stats.cpu_ops += 1;
                self.staging.free_after(fence, out_block)
            }
            Err(e) => {
                self.staging.free(out_block)?;
                Err(e)
            }
        }
    }
}
