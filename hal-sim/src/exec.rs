//! Running a compute job's effect: slicing its regions out of device memory and running the op
//! with the `npu-kernels` reference kernels (through the operator interpreter, [`npu_compute::ops`]).
//!
//! # Variants
//!
//! Every [`Variant`] computes the same bytes, and the simulator runs each the way the NPU would
//! as far as memory can tell:
//!
//! - [`Variant::Auto`] and [`Variant::Block`] run the reference kernel. A block changes only
//!   the order in which independent output elements are computed (each is its own dot product,
//!   and the int32 accumulation wraps, so it is associative), which no memory can observe.
//! - [`Variant::Im2col`] runs the operator's im2col form ([`Op::run_im2col`]; for a
//!   convolution [`npu_kernels::int8::conv2d_im2col`]): it writes the gathered patch matrix into the job's
//!   scratch region, then multiplies it by the filter. The scratch is left holding the matrix,
//!   as on hardware, so a scratch that aliased live data would corrupt it visibly.
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
//!
//! Hardware faults ([`crate::faults`]) are reported by `poll` as
//! [`HalError::Fault`](npu_compute::hal::HalError::Fault), not as codes; the trace marks them
//! with these ([`fault_code`], [`code_fault`]):
//!
//! | code | fault |
//! |---|---|
//! | [`CODE_FAULT_DMA`] (7) | a DMA error |
//! | [`CODE_FAULT_BUS`] (8) | a bus error |
//! | [`CODE_FAULT_CANCELLED`] (9) | not run: a dependency faulted, or a reset abandoned it |
//! | [`CODE_FAULT_TIMEOUT`] (10) | a runtime's watchdog expired (never recorded by the simulator) |

use npu_compute::hal::{Region, Space, Variant, MAX_JOB_INPUTS};
use npu_compute::ops::{run_over, split_operands, InputBytes, Op, OpError};

pub use crate::codes::{
    code_fault, fault_code, kernel_error_code, CODE_BAD_REGION, CODE_DEPENDENCY_FAILED,
    CODE_FAULT_BUS, CODE_FAULT_CANCELLED, CODE_FAULT_DMA, CODE_FAULT_TIMEOUT,
    CODE_KERNEL_INVALID_QUANTIZATION, CODE_KERNEL_LENGTH_MISMATCH, CODE_KERNEL_SHAPE_OVERFLOW,
    CODE_KERNEL_UNSUPPORTED, CODE_USER_BASE,
};
use crate::memory::range;

/// Runs `op` as `variant` over device memory, the slow tier and mapped flash: reads `inputs`,
/// writes `output` (in device memory or the slow tier; device memory for
/// [`Variant::Im2col`]) and, for [`Variant::Im2col`], `scratch` (see
/// [Variants](self#variants)). The reference path has the same op dispatch as the server's
/// CPU fallback ([`Op::run`]). On error, `output` may be partially
/// written only if the kernel itself wrote before failing (the kernels check lengths and
/// parameters first).
#[allow(clippy::too_many_arguments)] // each memory apart, as the borrows need
pub(crate) fn run_compute(
    op: &Op,
    variant: Variant,
    device: &mut [u8],
    slow: &mut [u8],
    flash: &[Option<&[u8]>],
    inputs: &[Region],
    output: &Region,
    scratch: Option<&Region>,
) -> Result<(), u32> {
    match (variant, scratch) {
        (Variant::Im2col, Some(scratch)) => {
            run_im2col(op, device, slow, flash, inputs, output, scratch)
        }
        // `submit` refuses Im2col without a scratch; kept total rather than panicking.
        (Variant::Im2col, None) => Err(CODE_BAD_REGION),
        (Variant::Auto | Variant::Block { .. }, _) => {
            run_reference(op, device, slow, flash, inputs, output)
        }
    }
}

/// The bytes of `r` in a memory read whole: `memory` holds `r.space`'s bytes.
fn outside<'m>(memory: &'m [u8], r: &Region) -> Option<InputBytes<'m>> {
    memory.get(range(r, memory.len())?).map(InputBytes::Outside)
}

/// The bytes of `r` in mapped flash segment `segment`.
fn in_flash<'m>(flash: &[Option<&'m [u8]>], segment: u8, r: &Region) -> Option<&'m [u8]> {
    let mem = flash.get(usize::from(segment)).copied().flatten()?;
    mem.get(range(r, mem.len())?)
}

/// The reference kernels, through the operator interpreter ([`run_over`], as the server's
/// CPU fallback computes in place): an input that is the output itself (an op running in
/// place) is read from the output.
fn run_reference(
    op: &Op,
    device: &mut [u8],
    slow: &mut [u8],
    flash: &[Option<&[u8]>],
    inputs: &[Region],
    output: &Region,
) -> Result<(), u32> {
    if op.state_inputs() > 0 {
        // A job writes its output alone: a stateful op, which would update its state
        // operands too, is not a job (`OpKind::is_stateful`), and fails as its plain run does.
        return Err(op_error_code(OpError::State));
    }
    let mut ins: heapless::Vec<InputBytes<'_>, MAX_JOB_INPUTS> = heapless::Vec::new();
    // The memory the output is in is run over; inputs in the other are read whole.
    let (memory, other): (&mut [u8], &[u8]) = match output.space {
        Space::Device => (device, slow),
        Space::Slow => (slow, device),
        Space::Host | Space::Flash(_) => return Err(CODE_BAD_REGION),
    };
    for r in inputs {
        let view = match r.space {
            Space::Flash(segment) => in_flash(flash, segment, r).map(InputBytes::Outside),
            Space::Host => None,
            s if s == output.space => Some(InputBytes::At(r.offset as usize, r.len as usize)),
            Space::Device | Space::Slow => outside(other, r),
        };
        ins.push(view.ok_or(CODE_BAD_REGION)?)
            .map_err(|_| CODE_BAD_REGION)?;
    }
    run_over(
        op,
        memory,
        (output.offset as usize, output.len as usize),
        &ins,
    )
    .ok_or(CODE_BAD_REGION)?
    .map_err(op_error_code)
}

/// The failure code of an interpreter error: the kernel's, or a region that could not be
/// viewed (which `submit`'s validation rules out).
fn op_error_code(e: OpError) -> u32 {
    match e {
        OpError::Kernel(e) => kernel_error_code(e),
        OpError::Misaligned { .. }
        | OpError::InputCount { .. }
        | OpError::NotInPlace
        | OpError::NotIm2col
        | OpError::State => CODE_BAD_REGION,
        // The simulator builds every operator (the default `all-ops`): only a build without
        // it reaches this.
        OpError::NotBuilt => CODE_KERNEL_UNSUPPORTED,
    }
}

/// An operator as gather + matrix product ([`Op::run_im2col`]), with the patch matrix in the
/// `scratch` region of device memory.
///
/// Device memory is split around the scratch first: `submit` checked that the scratch overlaps
/// neither the output nor any input, so the output lies wholly on one side of it (the *near*
/// side, sliced mutably with the inputs it holds) and every other device input wholly on one
/// side or the other.
fn run_im2col(
    op: &Op,
    device: &mut [u8],
    slow: &[u8],
    flash: &[Option<&[u8]>],
    inputs: &[Region],
    output: &Region,
    scratch: &Region,
) -> Result<(), u32> {
    if op.im2col().is_none() {
        // `submit` offers Im2col only to operators that have it.
        return Err(CODE_BAD_REGION);
    }
    let bounds = |r: &Region| {
        let start = r.offset as usize;
        Some((start, start.checked_add(r.len as usize)?))
    };
    let (s_start, s_end) = bounds(scratch).ok_or(CODE_BAD_REGION)?;
    let (o_start, o_end) = bounds(output).ok_or(CODE_BAD_REGION)?;
    if s_end > device.len() {
        return Err(CODE_BAD_REGION);
    }
    let (before, rest) = device.split_at_mut(s_start);
    let (scratch_bytes, after) = rest.split_at_mut(s_end - s_start);
    // (near side, its offset in device memory, far side, its offset)
    let (near, near_base, far, far_base): (&mut [u8], usize, &[u8], usize) = if o_end <= s_start {
        (before, 0, after, s_end)
    } else if o_start >= s_end {
        (after, s_end, before, 0)
    } else {
        return Err(CODE_BAD_REGION);
    };
    let on_far_side = |start: usize, end: usize| {
        if far_base == 0 {
            end <= s_start
        } else {
            start >= s_end
        }
    };
    let mut near_ranges: heapless::Vec<(usize, usize), MAX_JOB_INPUTS> = heapless::Vec::new();
    for r in inputs.iter().filter(|r| r.space == Space::Device) {
        let (start, end) = bounds(r).ok_or(CODE_BAD_REGION)?;
        if !on_far_side(start, end) {
            let relative = start.checked_sub(near_base).ok_or(CODE_BAD_REGION)?;
            near_ranges
                .push((relative, end - start))
                .map_err(|_| CODE_BAD_REGION)?;
        }
    }
    let (out, near_views) =
        split_operands(near, (o_start - near_base, o_end - o_start), &near_ranges)
            .ok_or(CODE_BAD_REGION)?;
    let mut near_views = near_views.into_iter();
    let mut ins: heapless::Vec<&[u8], MAX_JOB_INPUTS> = heapless::Vec::new();
    for r in inputs {
        let view = match r.space {
            Space::Device => {
                let (start, end) = bounds(r).ok_or(CODE_BAD_REGION)?;
                if on_far_side(start, end) {
                    far.get(start - far_base..end - far_base)
                } else {
                    near_views.next()
                }
            }
            Space::Flash(segment) => in_flash(flash, segment, r),
            Space::Slow => slow.get(range(r, slow.len()).ok_or(CODE_BAD_REGION)?),
            Space::Host => None,
        };
        ins.push(view.ok_or(CODE_BAD_REGION)?)
            .map_err(|_| CODE_BAD_REGION)?;
    }

    op.run_im2col(&ins, scratch_bytes, out)
        .map_err(op_error_code)
}
