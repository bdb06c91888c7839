//! The CPU fallback: an op the NPU does not run (or whose tuned choice is the CPU) runs on the
//! `npu-kernels` reference kernels over host staging memory, through the operator
//! interpreter. Its inputs are downloaded (the CPU waits for those downloads alone), computed
//! there, and the result uploaded; the HAL is told ([`Npu::host_compute`]) so that a
//! simulator's clock charges the CPU's time. A stateful operator's state operands
//! ([`Op::state_inputs`]) come down with the other inputs, are updated in their staging
//! copies and go back up with the output.

use super::dispatch::Operand;
use super::tensors::Binding;
use super::NpuServer;
use crate::error::Error;
use crate::hal::{Fence, HalError, Npu, Region, MAX_JOB_INPUTS};
use crate::memory::MemoryManagement;
use crate::ops::{split_operands, split_writable, Op, OpError};
use crate::storage::Block;

impl<
        H: Npu,
        M: MemoryManagement,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > NpuServer<H, M, HANDLES, STAGING, TUNE>
{
    /// The CPU fallback: bring the inputs to host staging, compute there, upload the result.
    pub(super) fn execute_on_cpu(
        &mut self,
        op: &Op,
        inputs: &[Operand],
        output: Operand,
    ) -> Result<(), Error> {
        let mut staged = heapless::Vec::new();
        let result = self.compute_on_cpu(op, inputs, output, &mut staged);
        for (fence, block) in staged {
            self.staging.free_after(fence, block)?;
        }
        result
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
        let host = self.npu.host_memory();
        let space_bytes = host.len() as u32;
        let state = usize::from(op.state_inputs()).min(ranges.len());
        let out_range = (out.offset as usize, out.len as usize);
        let run = if state == 0 {
            split_operands(host, out_range, ranges).map(|(out, ins)| op.run(&ins, out))
        } else {
            // A stateful op updates its state operands in their staging copies, which go
            // back to the device with the output.
            let mut writable: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
            let _ = writable.push(out_range);
            let _ = writable.extend_from_slice(&ranges[..state]);
            split_writable(host, &writable, &ranges[state..]).map(|(mut w, ins)| {
                let (out, state) = w.split_at_mut(1);
                op.run_stateful(state, &ins, &mut *out[0])
            })
        };
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
