//! [`SimError`]: why a simulator could not be built.

use core::fmt;

use npu_compute::hal::{SetupError, Space, MAX_EXECUTION_UNITS};

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
    /// `dma_bytes_per_cycle`), or `idle_tick_cycles`, is 0.
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
    /// The sentence of the driver-neutral [`SetupError`] it converts into, so that the same
    /// mistake reads the same whichever type reports it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&SetupError::from(*self), f)
    }
}

impl core::error::Error for SimError {}

impl From<SimError> for SetupError {
    /// The driver-neutral form, so that firmware using the simulator and firmware using a
    /// board's driver handle setup failures alike.
    fn from(e: SimError) -> Self {
        match e {
            SimError::BadAlignment { alignment } => SetupError::OutOfRange {
                parameter: "SimConfig::alignment",
                value: alignment as usize,
                expected: "a power of two of at least 4",
            },
            SimError::MisalignedMemory { space, alignment } => {
                SetupError::MisalignedMemory { space, alignment }
            }
            SimError::MemoryTooLarge { space } => SetupError::MemoryTooLarge {
                space,
                limit: u64::from(u32::MAX),
            },
            SimError::NoExecutionUnits => SetupError::OutOfRange {
                parameter: "SimConfig::execution_units",
                value: 0,
                expected: "at least 1",
            },
            SimError::TooManyExecutionUnits { units, .. } => SetupError::OutOfRange {
                parameter: "SimConfig::execution_units",
                value: usize::from(units),
                expected: MAX_UNITS_TEXT,
            },
            SimError::ZeroRate { parameter } => SetupError::OutOfRange {
                parameter,
                value: 0,
                expected: "at least 1",
            },
            SimError::BadJobCapacity { jobs } => SetupError::OutOfRange {
                parameter: "SimNpu's JOBS",
                value: jobs,
                expected: "between 1 and 65535",
            },
        }
    }
}

impl From<SimError> for npu_compute::Error {
    fn from(e: SimError) -> Self {
        npu_compute::Error::Setup(e.into())
    }
}

impl From<SimError> for npu_compute::graph::GraphError {
    fn from(e: SimError) -> Self {
        npu_compute::Error::from(e).into()
    }
}

/// [`MAX_EXECUTION_UNITS`] as text, for [`SetupError::OutOfRange::expected`].
const MAX_UNITS_TEXT: &str = "between 1 and 8 (MAX_EXECUTION_UNITS)";
const _: () = assert!(MAX_EXECUTION_UNITS == 8, "MAX_UNITS_TEXT names the limit");
