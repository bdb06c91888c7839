//! How fast a memory tier moves bytes, as a driver declares it ([`Npu::bandwidth`]).
//!
//! A planner that keeps some tensors in a slower memory ([`Space::Slow`]) needs to know what
//! a byte there costs against a byte in the arena before it has measured anything, as the
//! static scheduler needs each unit's throughput. A rate in bytes per cycle is not enough:
//! a PSRAM behind a quad-SPI port moves less than one byte a cycle of the CPU's clock, so the
//! rate is a fraction, with the latency every access pays before its first byte.
//!
//! [`Npu::bandwidth`]: super::Npu::bandwidth
//! [`Space::Slow`]: super::Space::Slow

use super::Cycles;

/// `bytes` every `cycles` cycles of the HAL's clock, after `latency` cycles per access.
///
/// ```
/// use npu_compute::hal::Bandwidth;
/// // A HyperRAM at a quarter of the core clock on an 8-byte port: 2 bytes a cycle.
/// let hyperram = Bandwidth { bytes: 2, cycles: 1, latency: 64 };
/// assert_eq!(hyperram.cycles_for(1024), 64 + 512);
/// // A quad-SPI PSRAM: one byte every two cycles.
/// let psram = Bandwidth { bytes: 1, cycles: 2, latency: 100 };
/// assert_eq!(psram.cycles_for(1024), 100 + 2048);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Bandwidth {
    /// Bytes moved every `cycles` cycles (a declared 0 is read as 1).
    pub bytes: u32,
    /// Cycles those bytes take (a declared 0 is read as 1).
    pub cycles: u32,
    /// Cycles an access waits before its first byte.
    pub latency: u32,
}

impl Bandwidth {
    /// Cycles one access of `bytes` takes: the latency, then the bytes at the rate, rounded
    /// up. Saturates rather than overflowing.
    pub const fn cycles_for(&self, bytes: u64) -> Cycles {
        let per = if self.bytes == 0 { 1 } else { self.bytes } as u64;
        let cycles = if self.cycles == 0 { 1 } else { self.cycles } as u64;
        let moving = bytes.saturating_mul(cycles).div_ceil(per);
        moving.saturating_add(self.latency as u64)
    }
}
