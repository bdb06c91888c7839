//! The codes a failed job reports in [`HalError::JobFailed`](npu_compute::hal::HalError::JobFailed).
//!
//! A leaf: running a job ([`exec`](crate::exec)) and copying its bytes (`memory`) both fail
//! with these codes. [`exec`](crate::exec#failure-codes) documents them and re-exports them.

use npu_compute::hal::Fault;
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
/// A hardware fault stopped the job: a DMA error ([`Fault::Dma`](npu_compute::hal::Fault::Dma)).
/// `poll` reports it as [`HalError::Fault`](npu_compute::hal::HalError::Fault); the code marks
/// the job in the trace.
pub const CODE_FAULT_DMA: u32 = 7;
/// A bus error ([`Fault::Bus`](npu_compute::hal::Fault::Bus)), as [`CODE_FAULT_DMA`].
pub const CODE_FAULT_BUS: u32 = 8;
/// The job was cancelled ([`Fault::Cancelled`](npu_compute::hal::Fault::Cancelled)): abandoned
/// by a reset, or not run because a job it depends on faulted; as [`CODE_FAULT_DMA`].
pub const CODE_FAULT_CANCELLED: u32 = 9;
/// [`Fault::Timeout`](npu_compute::hal::Fault::Timeout), which only a runtime's watchdog
/// concludes (the simulator never records it); as [`CODE_FAULT_DMA`].
pub const CODE_FAULT_TIMEOUT: u32 = 10;
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

/// The trace code of a hardware fault (`CODE_FAULT_*`).
pub const fn fault_code(fault: Fault) -> u32 {
    match fault {
        Fault::Dma => CODE_FAULT_DMA,
        Fault::Bus => CODE_FAULT_BUS,
        Fault::Cancelled => CODE_FAULT_CANCELLED,
        Fault::Timeout => CODE_FAULT_TIMEOUT,
    }
}

/// The hardware fault a trace code stands for; `None` for the other codes.
pub const fn code_fault(code: u32) -> Option<Fault> {
    match code {
        CODE_FAULT_DMA => Some(Fault::Dma),
        CODE_FAULT_BUS => Some(Fault::Bus),
        CODE_FAULT_CANCELLED => Some(Fault::Cancelled),
        CODE_FAULT_TIMEOUT => Some(Fault::Timeout),
        _ => None,
    }
}
