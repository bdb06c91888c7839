//! What can go wrong below the runtime: a job the NPU refuses or fails ([`HalError`]), and a
//! driver that cannot start with the configuration it was given ([`SetupError`]).
//!
//! Both print a sentence naming the region, operator, fence or parameter at fault and, where a
//! limit was hit, the limit: a log line a board integrator can act on.

use super::Variant;
use super::{Fence, Region, Space, MAX_JOB_INPUTS};
use crate::ops::{DType, OpKind};

/// Why the HAL refused or failed a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HalError {
    /// Too many jobs in flight; retry after one completes.
    QueueFull {
        /// The driver's in-flight capacity.
        capacity: u16,
    },
    /// The NPU does not run this operator in this dtype.
    Unsupported {
        /// The operator.
        op: OpKind,
        /// The dtype.
        dtype: DType,
    },
    /// A region lies outside its address space.
    OutOfBounds {
        /// The region.
        region: Region,
        /// Size of its address space.
        space_bytes: u32,
    },
    /// A region's offset is not a multiple of the required alignment.
    Misaligned {
        /// The region.
        region: Region,
        /// Required alignment.
        alignment: u32,
    },
    /// A region's length does not match what the operation needs.
    BadLength {
        /// Operand index (inputs in order, then the output as `MAX_JOB_INPUTS`).
        operand: u8,
        /// Bytes needed.
        expected: u32,
        /// Bytes given.
        actual: u32,
    },
    /// The output region overlaps an input region (in-place execution is not offered).
    Overlap {
        /// The overlapping input's index.
        operand: u8,
    },
    /// A compute job writes outside device or slow memory or reads host memory, a transfer writes
    /// flash or copies host to host, or a transfer's two regions differ in length.
    WrongSpace {
        /// The offending region.
        region: Region,
    },
    /// The queue names an execution unit that does not exist.
    NoSuchUnit {
        /// Requested unit.
        unit: u8,
        /// Units present.
        units: u8,
    },
    /// A region names a flash segment that is not mapped.
    FlashNotMapped {
        /// The segment index.
        segment: u8,
    },
    /// Every flash segment is mapped ([`MAX_FLASH_SEGMENTS`](super::MAX_FLASH_SEGMENTS) or the driver's own limit).
    FlashSegmentsFull {
        /// Segments the driver maps at once.
        capacity: u8,
    },
    /// This NPU cannot read flash ([`Capabilities::reads_flash`](super::Capabilities::reads_flash) is false).
    FlashUnreadable,
    /// The NPU does not run this operator in this [`Variant`] (or the job lacks the scratch
    /// memory the variant needs).
    VariantUnsupported {
        /// The operator.
        op: OpKind,
        /// The variant asked for.
        variant: Variant,
    },
    /// A fence that was never issued by this NPU.
    UnknownFence(Fence),
    /// The job failed on the device (the kernel rejected its parameters, ...).
    JobFailed {
        /// The failed job's fence.
        fence: Fence,
        /// Driver-specific code.
        code: u32,
    },
    /// The hardware faulted while running the job (see [`Fault`]); what it wrote is undefined
    /// and the NPU should be [`reset`](super::Npu::reset) before it is trusted again.
    Fault {
        /// The faulted job's fence (or, for [`Fault::Cancelled`], the cancelled job's).
        fence: Fence,
        /// What went wrong.
        fault: Fault,
    },
    /// The driver cannot reset the NPU ([`Npu::reset`](super::Npu::reset)'s default).
    ResetUnsupported,
}

/// A hardware fault on a job the NPU had accepted: what an Ethos-U driver reads from its
/// status register before it resets the NPU, and what the runtime's watchdog concludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// A DMA transfer of the job (or the job itself, a transfer) got an error response.
    Dma,
    /// A read or write of the job hit a bus error in the memory it addressed.
    Bus,
    /// The job did not complete by its watchdog deadline: it hung, or overran its predicted
    /// cycles by more than the watchdog's margin. Reported by the runtime, never by a driver.
    Timeout,
    /// The job was abandoned in flight by [`Npu::reset`](super::Npu::reset), or did not run
    /// because a job it depends on faulted.
    Cancelled,
}

impl core::fmt::Display for Fault {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Fault::Dma => "a DMA error",
            Fault::Bus => "a bus error",
            Fault::Timeout => "no completion by its watchdog deadline",
            Fault::Cancelled => "cancelled by a reset or a faulted dependency",
        })
    }
}

impl core::fmt::Display for HalError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            HalError::QueueFull { capacity } => write!(
                f,
                "the NPU's job queue is full ({capacity} jobs in flight): wait for one to complete"
            ),
            HalError::Unsupported { op, dtype } => {
                write!(f, "the NPU does not run {op} on {dtype}")
            }
            HalError::OutOfBounds {
                region,
                space_bytes,
            } => write!(
                f,
                "{region} lies outside the {space_bytes} bytes of {}",
                region.space
            ),
            HalError::Misaligned { region, alignment } => write!(
                f,
                "{region} does not start on a multiple of {alignment} bytes, as the NPU needs"
            ),
            HalError::BadLength {
                operand,
                expected,
                actual,
            } => {
                if usize::from(operand) == MAX_JOB_INPUTS {
                    write!(
                        f,
                        "the output region has {actual} bytes, the op needs {expected}"
                    )
                } else {
                    write!(
                        f,
                        "input region {operand} has {actual} bytes, the op needs {expected}"
                    )
                }
            }
            HalError::Overlap { operand } => write!(
                f,
                "the output region overlaps input region {operand}, and the op does not run in \
                 place"
            ),
            HalError::WrongSpace { region } => write!(
                f,
                "{region} is in the wrong address space for this job (compute jobs write device \
                 or slow memory and read those or flash; transfers never write flash nor copy \
                 host to host)"
            ),
            HalError::NoSuchUnit { unit, units } => write!(
                f,
                "execution unit {unit} does not exist: the NPU has {units}"
            ),
            HalError::FlashNotMapped { segment } => {
                write!(f, "flash segment {segment} is not mapped")
            }
            HalError::FlashSegmentsFull { capacity } => write!(
                f,
                "every flash segment is mapped ({capacity}): unmap a model first"
            ),
            HalError::FlashUnreadable => f.write_str("this NPU cannot read flash"),
            HalError::VariantUnsupported { op, variant } => {
                write!(f, "the NPU does not run {op} as {variant}")
            }
            HalError::UnknownFence(fence) => {
                write!(f, "fence {} was never issued by this NPU", fence.0)
            }
            HalError::JobFailed { fence, code } => write!(
                f,
                "the job of fence {} failed on the NPU (driver code {code:#x})",
                fence.0
            ),
            HalError::Fault { fence, fault } => write!(
                f,
                "the job of fence {} faulted on the NPU: {fault}; the NPU needs a reset",
                fence.0
            ),
            HalError::ResetUnsupported => f.write_str(
                "this NPU driver cannot reset the NPU: implement Npu::reset for the board",
            ),
        }
    }
}

impl core::error::Error for HalError {}

/// Why a driver (or the server over it) refused its configuration at start.
///
/// A board driver returns these from its constructor for the problems every driver meets; the
/// simulator's own error converts into it, so firmware can use one error type throughout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SetupError {
    /// A memory handed to the driver does not start on the alignment its regions need.
    MisalignedMemory {
        /// Which memory.
        space: Space,
        /// The alignment it needs, in bytes.
        alignment: u32,
    },
    /// A memory is larger than regions can address (`u32` offsets).
    MemoryTooLarge {
        /// Which memory.
        space: Space,
        /// The most bytes a memory may have.
        limit: u64,
    },
    /// A configuration value is outside what the driver or the server supports.
    OutOfRange {
        /// The parameter, as the user sets it (`"SimConfig::execution_units"`).
        parameter: &'static str,
        /// The value given (every parameter checked is a count or size: a `usize` holds it).
        value: usize,
        /// What it must be (`"between 1 and 8"`).
        expected: &'static str,
    },
}

impl core::fmt::Display for SetupError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            SetupError::MisalignedMemory { space, alignment } => write!(
                f,
                "the {space} given to the NPU driver does not start on a multiple of {alignment} \
                 bytes: place it in an aligned section or buffer"
            ),
            SetupError::MemoryTooLarge { space, limit } => write!(
                f,
                "the {space} given to the NPU driver is larger than {limit} bytes, which regions \
                 cannot address: give it a smaller one"
            ),
            SetupError::OutOfRange {
                parameter,
                value,
                expected,
            } => write!(f, "{parameter} is {value}; it must be {expected}"),
        }
    }
}

impl core::error::Error for SetupError {}
