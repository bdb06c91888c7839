//! Running a compute job's effect: slicing its regions out of device memory and running the op
//! with the `npu-kernels` reference kernels (through the compute stack's shared dispatcher).
//!
//! # Failure codes
//!
//! A job that cannot complete is recorded as failed and reported by
//! [`Npu::poll`](npu_compute::hal::Npu::poll) as
//! [`HalError::JobFailed`](npu_compute::hal::HalError::JobFailed) with one of these codes
//! (codes given to [`SimNpu::fail_next_compute_job`](crate::SimNpu::fail_next_compute_job)
//! are reported as given; pick them at or above [`CODE_USER_BASE`] to tell them apart):
//!
//! | code | meaning |
//! |---|---|
//! | [`CODE_KERNEL_LENGTH_MISMATCH`] (1) | the kernel returned `KernelError::LengthMismatch` |
//! | [`CODE_KERNEL_INVALID_QUANTIZATION`] (2) | the kernel returned `KernelError::InvalidQuantization` |
//! | [`CODE_KERNEL_SHAPE_OVERFLOW`] (3) | the kernel returned `KernelError::ShapeOverflow` |
//! | [`CODE_KERNEL_UNSUPPORTED`] (6) | the kernel returned `KernelError::Unsupported` |
//! | [`CODE_BAD_REGION`] (4) | a region could not be sliced or viewed as the element type (cannot happen after `submit`'s validation; kept so the simulator never panics) |
//! | [`CODE_DEPENDENCY_FAILED`] (5) | a dependency failed, so the job did not run |
//!
//! A failed job writes nothing.

use npu_compute::hal::{Op, Region, Space, MAX_JOB_INPUTS};

use crate::memory::range;
use npu_kernels::KernelError;

use npu_compute::fallback::{run_op, run_op_in_place, split_operands, OpError};

/// The kernel rejected a buffer length.
pub const CODE_KERNEL_LENGTH_MISMATCH: u32 = 1;
/// The kernel rejected a quantization parameter.
pub const CODE_KERNEL_INVALID_QUANTIZATION: u32 = 2;
/// The kernel's arithmetic would overflow for this shape.
pub const CODE_KERNEL_SHAPE_OVERFLOW: u32 = 3;
/// A region could not be sliced or cast (an internal inconsistency; never after validation).
pub const CODE_BAD_REGION: u32 = 4;
/// A job this one depends on failed; this job was skipped.
pub const CODE_DEPENDENCY_FAILED: u32 = 5;
/// The kernel does not support a parameter combination.
pub const CODE_KERNEL_UNSUPPORTED: u32 = 6;
/// Suggested lowest code for injected faults; the simulator's own codes are below it.
pub const CODE_USER_BASE: u32 = 0x100;

/// The failure code of a kernel error.
pub const fn kernel_error_code(error: KernelError) -> u32 {
    match error {
        KernelError::LengthMismatch { .. } => CODE_KERNEL_LENGTH_MISMATCH,
        KernelError::InvalidQuantization { .. } => CODE_KERNEL_INVALID_QUANTIZATION,
        KernelError::ShapeOverflow => CODE_KERNEL_SHAPE_OVERFLOW,
        KernelError::Unsupported { .. } => CODE_KERNEL_UNSUPPORTED,
    }
}

/// Runs `op` over device memory and mapped flash: reads `inputs`, writes `output` (always
/// device memory), with the same op dispatch as the server's CPU fallback
/// ([`npu_compute::fallback::run_op`]). On error, `output` may be partially written only if
/// the kernel itself wrote before failing (the kernels check lengths and parameters first).
pub(crate) fn run_compute(
    op: &Op,
    device: &mut [u8],
    flash: &[Option<&[u8]>],
    inputs: &[Region],
    output: &Region,
) -> Result<(), u32> {
    // An input that is the output itself (an op running in place) is read from the output.
    let aliased = |r: &Region| op.runs_in_place() && r == output;
    let mut ranges: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
    for r in inputs
        .iter()
        .filter(|r| r.space == Space::Device && !aliased(r))
    {
        ranges
            .push((r.offset as usize, r.len as usize))
            .map_err(|_| CODE_BAD_REGION)?;
    }
    let (out, device_ins) = split_operands(
        device,
        (output.offset as usize, output.len as usize),
        &ranges,
    )
    .ok_or(CODE_BAD_REGION)?;
    let mut device_ins = device_ins.into_iter();
    let mut ins: heapless::Vec<Option<&[u8]>, MAX_JOB_INPUTS> = heapless::Vec::new();
    for r in inputs {
        if aliased(r) {
            ins.push(None).map_err(|_| CODE_BAD_REGION)?;
            continue;
        }
        let view = match r.space {
            Space::Device => device_ins.next(),
            Space::Flash(segment) => flash
                .get(usize::from(segment))
                .copied()
                .flatten()
                .and_then(|mem| mem.get(range(r, mem.len())?)),
            Space::Host => None,
        };
        ins.push(Some(view.ok_or(CODE_BAD_REGION)?))
            .map_err(|_| CODE_BAD_REGION)?;
    }
    let result = if ins.iter().any(Option::is_none) {
        run_op_in_place(op, &ins, out)
    } else {
        let ins: heapless::Vec<&[u8], MAX_JOB_INPUTS> = ins.iter().flatten().copied().collect();
        run_op(op, &ins, out)
    };
    result.map_err(|e| match e {
        OpError::Kernel(e) => kernel_error_code(e),
        OpError::Misaligned { .. } | OpError::InputCount { .. } | OpError::NotInPlace => {
            CODE_BAD_REGION
        }
    })
}
