//! Memory: [`AlignedMemory`] storage, region checks and disjoint borrows of a job's regions.

use core::ops::Range;

use npu_compute::hal::{HalError, Region, Space, MAX_JOB_INPUTS};

use crate::exec::CODE_BAD_REGION;

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
    if region.offset % alignment.max(1) != 0 {
        return Err(HalError::Misaligned {
            region: *region,
            alignment,
        });
    }
    Ok(())
}

/// Borrows the output of a compute job mutably and its inputs shared, all from one memory.
///
/// The output must not overlap any input (checked at submit); inputs may overlap each other.
/// Unused input slots are empty. `None` if a range is out of bounds or overlaps the output.
pub(crate) fn split_io<'m>(
    mem: &'m mut [u8],
    output: Range<usize>,
    inputs: &[Range<usize>],
) -> Option<(&'m mut [u8], [&'m [u8]; MAX_JOB_INPUTS])> {
    if output.start > output.end || inputs.len() > MAX_JOB_INPUTS {
        return None;
    }
    let (before, rest) = mem.split_at_mut_checked(output.start)?;
    let (out, after) = rest.split_at_mut_checked(output.end - output.start)?;
    let before: &'m [u8] = before;
    let after: &'m [u8] = after;
    let mut views: [&'m [u8]; MAX_JOB_INPUTS] = [&before[..0]; MAX_JOB_INPUTS];
    for (view, input) in views.iter_mut().zip(inputs) {
        *view = if input.start == input.end {
            &before[..0]
        } else if input.end <= output.start {
            before.get(input.clone())?
        } else if input.start >= output.end {
            after.get(input.start - output.end..input.end - output.end)?
        } else {
            return None;
        };
    }
    Some((out, views))
}

/// Applies a transfer: copies `src` to `dst` (lengths equal, both in bounds; device→device
/// and host→host use `copy_within`). Errors with [`CODE_BAD_REGION`] instead of panicking
/// if that does not hold.
pub(crate) fn transfer(
    device: &mut [u8],
    host: &mut [u8],
    src: &Region,
    dst: &Region,
) -> Result<(), u32> {
    if src.len != dst.len {
        return Err(CODE_BAD_REGION);
    }
    match (src.space, dst.space) {
        (Space::Host, Space::Device) => copy(host, device, src, dst),
        (Space::Device, Space::Host) => copy(device, host, src, dst),
        (Space::Device, Space::Device) => copy_within(device, src, dst),
        (Space::Host, Space::Host) => copy_within(host, src, dst),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_io_borrows_disjointly_and_allows_overlapping_inputs() {
        let mut mem = [0u8; 64];
        for (i, b) in mem.iter_mut().enumerate() {
            *b = i as u8;
        }
        let (out, ins) = split_io(&mut mem, 16..32, &[0..16, 0..16, 32..48]).unwrap();
        assert_eq!(out.len(), 16);
        assert_eq!(ins[0][0], 0);
        assert_eq!(ins[1][15], 15);
        assert_eq!(ins[2][0], 32);
        out[0] = 99;
        assert_eq!(mem[16], 99);
    }

    #[test]
    fn split_io_rejects_overlap_and_out_of_bounds() {
        let mut mem = [0u8; 64];
        assert!(split_io(&mut mem, 16..32, &[0..16, 8..24]).is_none());
        assert!(split_io(&mut mem, 16..32, &[0..16, 32..80]).is_none());
        assert!(split_io(&mut mem, 60..80, &[]).is_none());
        // Empty inputs are fine anywhere.
        let (_, ins) = split_io(&mut mem, 16..32, &[20..20, 0..0]).unwrap();
        assert!(ins[0].is_empty() && ins[1].is_empty());
    }

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
