//! The codes a failed job reports in [`HalError::JobFailed`](npu_compute::hal::HalError::JobFailed).
//!
//! A leaf: running a job ([`exec`](crate::exec)) and copying its bytes (`memory`) both fail
//! with these codes. [`exec`](crate::exec#failure-codes) documents them and re-exports them.

use npu_kernels::KernelError;

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
