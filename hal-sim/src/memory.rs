//! Memory: [`AlignedMemory`] storage, region checks and disjoint borrows of a job's regions.

use core::ops::Range;

use npu_compute::hal::{HalError, Region, Space};

use crate::codes::CODE_BAD_REGION;

/// A 16-byte aligned byte array to back the simulator's device arena or host memory.
///
/// Firmware can place one in a `static` (e.g. with `#[link_section = ".npu_arena"]`); tests
/// can keep one on the stack or `Box::leak` one. Alignments above 16
/// ([`SimConfig::alignment`](crate::SimConfig::alignment)) need a wrapper of their own.
#[derive(Clone, Debug, PartialEq, Eq)]
#[repr(C, align(16))]
pub struct AlignedMemory<const N: usize>(pub [u8; N]);

impl<const N: usize> AlignedMemory<N> {
    /// `N` zero bytes.
    pub const fn new() -> Self {
        AlignedMemory([0; N])
    }

    /// The bytes, mutably (what [`SimNpu::new`](crate::SimNpu::new) takes).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
}

impl<const N: usize> Default for AlignedMemory<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The byte range of a region, if it lies within a memory of `space_len` bytes.
pub(crate) fn range(region: &Region, space_len: usize) -> Option<Range<usize>> {
    let end = usize::try_from(region.end()).ok()?;
    if end > space_len {
        return None;
    }
    Some(region.offset as usize..end)
}

/// Checks that `region` lies within a space of `space_len` bytes and starts on `alignment`.
pub(crate) fn check_region(
    region: &Region,
    space_len: usize,
    alignment: u32,
) -> Result<(), HalError> {
    if range(region, space_len).is_none() {
        return Err(HalError::OutOfBounds {
            region: *region,
            // Memories are at most u32::MAX bytes (checked at construction).
            space_bytes: u32::try_from(space_len).unwrap_or(u32::MAX),
        });
    }
    if !region.offset.is_multiple_of(alignment.max(1)) {
        return Err(HalError::Misaligned {
            region: *region,
            alignment,
        });
    }
    Ok(())
}

/// The simulator's writable memories, borrowed together so that a transfer can copy from
/// one to another.
pub(crate) struct Memories<'m> {
    pub(crate) device: &'m mut [u8],
    pub(crate) host: &'m mut [u8],
    pub(crate) slow: &'m mut [u8],
}

impl Memories<'_> {
    /// The writable memory of `space`; `None` for flash.
    fn get_mut(&mut self, space: Space) -> Option<&mut [u8]> {
        match space {
            Space::Device => Some(self.device),
            Space::Host => Some(self.host),
            Space::Slow => Some(self.slow),
            Space::Flash(_) => None,
        }
    }

    /// Two different writable memories, the first read, the second written.
    fn pair(&mut self, from: Space, to: Space) -> Option<(&[u8], &mut [u8])> {
        let Memories { device, host, slow } = self;
        match (from, to) {
            (Space::Device, Space::Host) => Some((device, host)),
            (Space::Device, Space::Slow) => Some((device, slow)),
            (Space::Host, Space::Device) => Some((host, device)),
            (Space::Host, Space::Slow) => Some((host, slow)),
            (Space::Slow, Space::Device) => Some((slow, device)),
            (Space::Slow, Space::Host) => Some((slow, host)),
            _ => None,
        }
    }
}

/// Applies a transfer: copies `src` to `dst` (lengths equal, both in bounds; within one
/// memory with `copy_within`; flash is only ever a source). Errors with [`CODE_BAD_REGION`]
/// instead of panicking if that does not hold.
pub(crate) fn transfer(
    mems: &mut Memories<'_>,
    flash: &[Option<&[u8]>],
    src: &Region,
    dst: &Region,
) -> Result<(), u32> {
    if src.len != dst.len {
        return Err(CODE_BAD_REGION);
    }
    if let Space::Flash(segment) = src.space {
        let from = flash
            .get(usize::from(segment))
            .copied()
            .flatten()
            .ok_or(CODE_BAD_REGION)?;
        let to = mems.get_mut(dst.space).ok_or(CODE_BAD_REGION)?;
        return copy(from, to, src, dst);
    }
    if src.space == dst.space {
        let mem = mems.get_mut(src.space).ok_or(CODE_BAD_REGION)?;
        return copy_within(mem, src, dst);
    }
    let (from, to) = mems.pair(src.space, dst.space).ok_or(CODE_BAD_REGION)?;
    copy(from, to, src, dst)
}

fn copy(from: &[u8], to: &mut [u8], src: &Region, dst: &Region) -> Result<(), u32> {
    let s = range(src, from.len())
        .and_then(|r| from.get(r))
        .ok_or(CODE_BAD_REGION)?;
    let to_len = to.len();
    let d = range(dst, to_len)
        .and_then(|r| to.get_mut(r))
        .ok_or(CODE_BAD_REGION)?;
    d.copy_from_slice(s);
    Ok(())
}

fn copy_within(mem: &mut [u8], src: &Region, dst: &Region) -> Result<(), u32> {
    let s = range(src, mem.len()).ok_or(CODE_BAD_REGION)?;
    let d = range(dst, mem.len()).ok_or(CODE_BAD_REGION)?;
    mem.copy_within(s, d.start);
    Ok(())
}

/// Fills `region` of a writable memory with `byte` (what a faulted job leaves); a region
/// out of bounds, or in flash, is left alone.
pub(crate) fn fill(mems: &mut Memories<'_>, region: &Region, byte: u8) {
    let Some(mem) = mems.get_mut(region.space) else {
        return;
    };
    let len = mem.len();
    if let Some(bytes) = range(region, len).and_then(|r| mem.get_mut(r)) {
        bytes.fill(byte);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_region_reports_bounds_then_alignment() {
        let r = Region::device(48, 32);
        assert_eq!(
            check_region(&r, 64, 16),
            Err(HalError::OutOfBounds {
                region: r,
                space_bytes: 64
            })
        );
        let r = Region::device(8, 8);
        assert_eq!(
            check_region(&r, 64, 16),
            Err(HalError::Misaligned {
                region: r,
                alignment: 16
            })
        );
        assert_eq!(check_region(&Region::device(48, 16), 64, 16), Ok(()));
        // offset + len overflowing u32 is out of bounds, not a wrap-around.
        let r = Region::device(u32::MAX - 15, 32);
        assert!(matches!(
            check_region(&r, 64, 16),
            Err(HalError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn aligned_memory_is_aligned() {
        let mut m = AlignedMemory::<40>::new();
        assert_eq!(m.as_mut_slice().as_ptr() as usize % 16, 0);
        assert_eq!(m.as_slice().len(), 40);
    }
}
