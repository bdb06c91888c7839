//! [`SimError`]: why a simulator could not be built.

use core::fmt;

use npu_compute::hal::Space;

/// Why [`SimNpu::new`](crate::SimNpu::new) (or [`SimConfig::validate`](crate::SimConfig::validate))
/// refused a configuration. Job-level errors are [`HalError`](npu_compute::hal::HalError)s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SimError {
    /// [`SimConfig::alignment`](crate::SimConfig::alignment) is not a power of two or is
    /// below 4 (regions must be viewable as 4-byte `f32`/`i32` slices).
    BadAlignment {
        /// The configured alignment.
        alignment: u32,
    },
    /// A non-empty memory's base address is not a multiple of the configured alignment.
    /// Region offsets are only checked relative to the base, so the base itself must be
    /// aligned for aligned regions to be aligned in the address space (and for the `f32`,
    /// `i32` views of them to be possible). Put the memory in an
    /// [`AlignedMemory`](crate::AlignedMemory) (16-byte aligned) or a suitably aligned section.
    MisalignedMemory {
        /// Which memory.
        space: Space,
        /// The configured alignment.
        alignment: u32,
    },
    /// A memory is larger than `u32::MAX` bytes (regions address it with `u32` offsets).
    MemoryTooLarge {
        /// Which memory.
        space: Space,
    },
    /// [`SimConfig::execution_units`](crate::SimConfig::execution_units) is 0.
    NoExecutionUnits,
    /// [`SimConfig::execution_units`](crate::SimConfig::execution_units) exceeds
    /// [`MAX_EXECUTION_UNITS`](crate::MAX_EXECUTION_UNITS).
    TooManyExecutionUnits {
        /// Configured units.
        units: u8,
        /// Most units supported.
        max: u8,
    },
    /// A throughput parameter (`macs_per_cycle`, `sram_bytes_per_cycle` or
    /// `dma_bytes_per_cycle`) is 0.
    ZeroRate {
        /// The parameter's field name.
        parameter: &'static str,
    },
    /// The in-flight capacity `JOBS` is 0 or above `u16::MAX` (the HAL reports it as `u16`).
    BadJobCapacity {
        /// The `JOBS` const parameter.
        jobs: usize,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SimError::BadAlignment { alignment } => {
                write!(f, "alignment {alignment} is not a power of two >= 4")
            }
            SimError::MisalignedMemory { space, alignment } => {
                write!(f, "{space:?} memory base is not {alignment}-byte aligned")
            }
            SimError::MemoryTooLarge { space } => {
                write!(f, "{space:?} memory is larger than u32::MAX bytes")
            }
            SimError::NoExecutionUnits => f.write_str("execution_units is 0"),
            SimError::TooManyExecutionUnits { units, max } => {
                write!(
                    f,
                    "{units} execution units configured, at most {max} supported"
                )
            }
            SimError::ZeroRate { parameter } => write!(f, "{parameter} is 0"),
            SimError::BadJobCapacity { jobs } => {
                write!(f, "in-flight capacity {jobs} is not in 1..=65535")
            }
        }
    }
}

impl core::error::Error for SimError {}
