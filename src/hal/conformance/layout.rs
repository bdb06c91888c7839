//! Where the suite works in the driver's memories, and the data it writes there: the blocks of
//! device and host memory, the test pattern and the flash probe.

use super::Check;
use crate::hal::Region;

/// Small blocks in a big one.
pub(super) const BIG_BLOCKS: u64 = 8;

/// Where the suite works. Device: blocks `A`, `B`, `C` of `small` bytes, then `X`, `Y` of `big`
/// bytes; host: `H0`, `H1` of `big` bytes. Small blocks carry the data of unit jobs; big ones
/// keep a queue busy, so that a job allowed to start too early finishes first and shows it.
#[derive(Clone, Copy)]
pub(super) struct Layout {
    pub(super) align: u32,
    pub(super) small: u32,
    pub(super) big: u32,
}

impl Layout {
    pub(super) const fn new(alignment: u32) -> Self {
        // A power of two above 32 is a multiple of 32 and below it divides 32: `small` is a
        // multiple of the alignment either way, so every block starts aligned.
        let small = if alignment > 32 { alignment } else { 32 };
        Layout {
            align: alignment,
            small,
            big: small.saturating_mul(BIG_BLOCKS as u32),
        }
    }

    pub(super) fn a(&self) -> Region {
        Region::device(0, self.small)
    }

    pub(super) fn b(&self) -> Region {
        Region::device(self.small, self.small)
    }

    pub(super) fn c(&self) -> Region {
        Region::device(2 * self.small, self.small)
    }

    /// `A`, `B` and `C` as one region.
    pub(super) fn abc(&self) -> Region {
        Region::device(0, 3 * self.small)
    }

    pub(super) fn x(&self) -> Region {
        Region::device(3 * self.small, self.big)
    }

    pub(super) fn y(&self) -> Region {
        Region::device(3 * self.small + self.big, self.big)
    }

    /// The first `len` bytes of `H0`.
    pub(super) fn h0(&self, len: u32) -> Region {
        Region::host(0, len)
    }

    /// The first `len` bytes of `H1`.
    pub(super) fn h1(&self, len: u32) -> Region {
        Region::host(self.big, len)
    }

    /// An aligned offset at which `len` bytes cross the end of a memory of `space_bytes`:
    /// the last aligned offset inside it when the region then sticks out (the off-by-one a
    /// driver gets wrong), else the end itself. `None` past `u32::MAX`.
    pub(super) fn past_end(&self, space_bytes: u32, len: u32) -> Option<u32> {
        let mask = !(u64::from(self.align) - 1);
        let last = u64::from(space_bytes.saturating_sub(1)) & mask;
        let offset = if last + u64::from(len) > u64::from(space_bytes) {
            last
        } else {
            last + u64::from(self.align)
        };
        u32::try_from(offset).ok()
    }

    /// The last aligned offset below 2^32: any region there of `small` bytes wraps a `u32`.
    pub(super) fn wrapping(&self) -> u32 {
        !(self.align - 1)
    }
}

/// Byte `i` of the test data `seed`. Every fourth byte (the top byte of a little-endian `f32`)
/// is in 1..=126, so each word is a positive, normal, finite `f32` and RELU copies it exactly;
/// two seeds differ in most bytes, so stale data never passes for fresh.
pub(super) const fn pattern(seed: u8, i: u32) -> u8 {
    if i % 4 == 3 {
        1 + ((seed as u32 * 7 + i / 4) % 126) as u8
    } else {
        ((seed as u32).wrapping_mul(31) ^ i.wrapping_mul(7)) as u8
    }
}

/// Data seeds each check may use (see [`Suite::next_seed`](super::suite::Suite::next_seed)).
pub(super) const SEEDS_PER_CHECK: u8 = 8;
/// Seed of the flash probe's data: above every check's range.
pub(super) const PROBE_SEED: u8 = 0xFF;
const _: () = assert!((Check::COUNT as u32) * (SEEDS_PER_CHECK as u32) < PROBE_SEED as u32);
/// Bytes of the flash probe.
pub(super) const PROBE_BYTES: usize = 64;

/// Constant data for [`Check::FlashMapping`], 64-byte aligned as NPUs reading flash need.
#[repr(C, align(64))]
pub(super) struct FlashProbe(pub(super) [u8; PROBE_BYTES]);

pub(super) static FLASH_PROBE: FlashProbe = FlashProbe(probe_bytes());

const fn probe_bytes() -> [u8; PROBE_BYTES] {
    let mut bytes = [0; PROBE_BYTES];
    let mut i = 0;
    while i < PROBE_BYTES {
        bytes[i] = pattern(PROBE_SEED, i as u32);
        i += 1;
    }
    bytes
}
