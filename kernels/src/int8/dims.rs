//! Dimensions of tensors of any rank up to [`MAX_DIMS`], for the operators that take general
//! shapes (BATCH_MATMUL, TRANSPOSE, CONCATENATION).
//!
//! Dimensions are `u32`s stored inline (no heap), so parameter structs that hold them stay
//! small and `Copy`. Element counts are refused ([`KernelError::ShapeOverflow`]) when they do
//! not fit a `u32` or a slice: TFLM's flat sizes are `int`, so no tensor TFLM runs is larger,
//! and keeping counts in 32 bits keeps the parameter structs small.

use crate::KernelError;

/// Most dimensions a [`Dims`] holds: TFLite's `RuntimeShape::kMaxSmallSize` and TRANSPOSE's
/// `kTransposeMaxDimensions`.
pub const MAX_DIMS: usize = 6;

/// The dimensions of a row-major tensor, outermost first, rank 0 to [`MAX_DIMS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Dims {
    dims: [u32; MAX_DIMS],
    rank: u8,
}

impl Dims {
    /// Copies `dims` (outermost first).
    ///
    /// Errors with [`KernelError::Unsupported`] for more than [`MAX_DIMS`] dimensions.
    pub fn new(dims: &[u32]) -> Result<Self, KernelError> {
        let mut d = [0; MAX_DIMS];
        d.get_mut(..dims.len())
            .ok_or(KernelError::Unsupported {
                what: "rank above 6",
            })?
            .copy_from_slice(dims);
        Ok(Self {
            dims: d,
            // At most MAX_DIMS, checked above.
            rank: dims.len() as u8,
        })
    }

    /// The dimensions, outermost first.
    #[must_use]
    pub fn as_slice(&self) -> &[u32] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Number of dimensions.
    #[must_use]
    pub const fn rank(&self) -> usize {
        self.rank as usize
    }
}

impl crate::packed::Packed for Dims {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        w.put_list(self.as_slice());
    }
    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        let (dims, rank) = r.take_list::<MAX_DIMS>()?;
        Self::new(&dims[..rank])
    }
}

/// The element count of a tensor with dimensions `dims`, refused
/// ([`KernelError::ShapeOverflow`]) when it exceeds `u32::MAX` or the longest slice.
pub(crate) fn count(dims: &[u32]) -> Result<u32, KernelError> {
    if dims.contains(&0) {
        return Ok(0); // even if the other dimensions' product overflows
    }
    dims.iter()
        .try_fold(1_u32, |n, &d| n.checked_mul(d))
        .filter(|&n| usize::try_from(n).is_ok_and(|n| n <= isize::MAX as usize))
        .ok_or(KernelError::ShapeOverflow)
}

/// A count already checked by [`count`] as a `usize` (it fits one by construction).
#[inline]
pub(crate) const fn us(n: u32) -> usize {
    n as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_round_trip() {
        let d = Dims::new(&[1, 2, 3]).unwrap();
        assert_eq!(d.as_slice(), &[1, 2, 3]);
        assert_eq!(d.rank(), 3);
        assert_eq!(Dims::new(&[]).unwrap().as_slice(), &[] as &[u32]);
        assert_eq!(Dims::new(&[7; 6]).unwrap().rank(), 6);
        assert_eq!(
            Dims::new(&[1; 7]),
            Err(KernelError::Unsupported {
                what: "rank above 6"
            })
        );
    }

    #[test]
    fn counts() {
        assert_eq!(count(&[]), Ok(1));
        assert_eq!(count(&[2, 0, 3]), Ok(0));
        assert_eq!(count(&[2, 3, 4]), Ok(24));
        assert_eq!(count(&[65_536, 65_535]), Ok(u32::MAX - 65_535));
        assert_eq!(count(&[65_536, 65_536]), Err(KernelError::ShapeOverflow));
        assert_eq!(count(&[u32::MAX, 2, 0]), Ok(0));
        assert_eq!(count(&[u32::MAX, 2]), Err(KernelError::ShapeOverflow));
    }
}
