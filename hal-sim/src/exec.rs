//! Running a compute job's effect: slicing its regions out of device memory, viewing them as
//! typed slices and calling the `npu-kernels` reference kernel.
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
//! | [`CODE_BAD_REGION`] (4) | a region could not be sliced or viewed as the element type (cannot happen after `submit`'s validation; kept so the simulator never panics) |
//! | [`CODE_DEPENDENCY_FAILED`] (5) | a dependency failed, so the job did not run |
//!
//! A failed job writes nothing.

use npu_compute::hal::{Op, Region, MAX_JOB_INPUTS};
use npu_kernels::KernelError;

use crate::memory::{range, split_io};

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
/// Suggested lowest code for injected faults; the simulator's own codes are below it.
pub const CODE_USER_BASE: u32 = 0x100;

/// The failure code of a kernel error.
pub const fn kernel_error_code(error: KernelError) -> u32 {
    match error {
        KernelError::LengthMismatch { .. } => CODE_KERNEL_LENGTH_MISMATCH,
        KernelError::InvalidQuantization { .. } => CODE_KERNEL_INVALID_QUANTIZATION,
        KernelError::ShapeOverflow => CODE_KERNEL_SHAPE_OVERFLOW,
    }
}

/// Runs `op` over device memory: reads `inputs`, writes `output`. On error, `output` may be
/// partially written only if the kernel itself wrote before failing (the kernels check
/// lengths and parameters first).
pub(crate) fn run_compute(
    op: &Op,
    device: &mut [u8],
    inputs: &[Region],
    output: &Region,
) -> Result<(), u32> {
    if inputs.len() > MAX_JOB_INPUTS {
        return Err(CODE_BAD_REGION);
    }
    let len = device.len();
    let out_range = range(output, len).ok_or(CODE_BAD_REGION)?;
    let mut in_ranges = [0..0, 0..0, 0..0];
    for (slot, region) in in_ranges.iter_mut().zip(inputs) {
        *slot = range(region, len).ok_or(CODE_BAD_REGION)?;
    }
    let in_ranges = in_ranges.get(..inputs.len()).ok_or(CODE_BAD_REGION)?;
    let (out, ins) = split_io(device, out_range, in_ranges).ok_or(CODE_BAD_REGION)?;
    let with_bias = inputs.len() == 3;
    let [a, b, c] = ins;
    typed_kernel(op, out, a, b, with_bias.then_some(c)).map_err(|e| match e {
        ViewError::Cast => CODE_BAD_REGION,
        ViewError::Kernel(e) => kernel_error_code(e),
    })
}

/// Why a typed kernel call failed.
enum ViewError {
    /// Bytes could not be viewed as the element type (misaligned or ragged length).
    Cast,
    /// The kernel refused.
    Kernel(KernelError),
}

impl From<KernelError> for ViewError {
    fn from(e: KernelError) -> Self {
        ViewError::Kernel(e)
    }
}

fn typed_kernel(
    op: &Op,
    out: &mut [u8],
    a: &[u8],
    b: &[u8],
    c: Option<&[u8]>,
) -> Result<(), ViewError> {
    use npu_kernels::{f32 as kf, int8 as ki};
    match op {
        Op::AddF32 { .. } => kf::add(view(a)?, view(b)?, view_mut(out)?)?,
        Op::MulF32 { .. } => kf::mul(view(a)?, view(b)?, view_mut(out)?)?,
        Op::ReluF32 { .. } => kf::relu(view(a)?, view_mut(out)?)?,
        Op::FullyConnectedF32 { shape } => {
            let bias = match c {
                Some(c) => Some(view::<f32>(c)?),
                None => None,
            };
            kf::fully_connected(*shape, view(a)?, view(b)?, bias, view_mut(out)?)?
        }
        Op::AddI8 { params, .. } => ki::add(params, view(a)?, view(b)?, view_mut(out)?)?,
        Op::MulI8 { params, .. } => ki::mul(params, view(a)?, view(b)?, view_mut(out)?)?,
        Op::ReluI8 { params, .. } => ki::relu(params, view(a)?, view_mut(out)?)?,
        Op::FullyConnectedI8 { shape, params } => {
            let bias = match c {
                Some(c) => Some(view::<i32>(c)?),
                None => None,
            };
            ki::fully_connected(params, *shape, view(a)?, view(b)?, bias, view_mut(out)?)?
        }
    }
    Ok(())
}

/// Views bytes as `T`s. Empty slices are always fine (whatever their address).
fn view<T: bytemuck::AnyBitPattern>(bytes: &[u8]) -> Result<&[T], ViewError> {
    if bytes.is_empty() {
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| ViewError::Cast)
}

fn view_mut<T: bytemuck::AnyBitPattern + bytemuck::NoUninit>(
    bytes: &mut [u8],
) -> Result<&mut [T], ViewError> {
    if bytes.is_empty() {
        return Ok(&mut []);
    }
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| ViewError::Cast)
}
