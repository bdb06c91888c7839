//! int8 ARG_MAX and ARG_MIN: the index of the largest (smallest) element along one axis, as
//! int32 (TFLM `kernels/internal/reference/arg_min_max.h`, `micro/kernels/arg_min_max.cc`).
//!
//! TFLM compares with a strict `>` (`<`), so the first of equal elements wins. The output
//! is int32 only: TFLM's micro kernel refuses any other output type. The input's
//! quantization does not matter (a monotonic map of the values).

use crate::packed::{WordReader, Words};
use crate::{check_len, KernelError};

/// The geometry of an ARG_MAX / ARG_MIN: `outer × axis × inner` input elements, `outer ×
/// inner` outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArgMinMaxParams {
    outer: u32,
    axis: u32,
    inner: u32,
    /// ARG_MAX (else ARG_MIN).
    max: bool,
}

impl ArgMinMaxParams {
    /// The reduction of a tensor of dimensions `shape` (outermost first, rank at least 1)
    /// along `axis` (negative counts from the end), for ARG_MAX if `max`, else ARG_MIN.
    ///
    /// Errors: [`KernelError::Unsupported`] `"axis out of range"` (TFLM reads outside the
    /// shape), or `"empty axis with outputs"` (TFLM reads outside the input);
    /// [`KernelError::ShapeOverflow`] for an element count above `u32::MAX` or that no slice
    /// can have.
    pub fn new(shape: &[u32], axis: i32, max: bool) -> Result<Self, KernelError> {
        let rank = i32::try_from(shape.len()).map_err(|_| KernelError::ShapeOverflow)?;
        let resolved = if axis < 0 {
            axis.saturating_add(rank)
        } else {
            axis
        };
        if !(0..rank).contains(&resolved) {
            return Err(KernelError::Unsupported {
                what: "axis out of range",
            });
        }
        let a = resolved as usize;
        let product = |dims: &[u32]| {
            dims.iter()
                .try_fold(1_u32, |n, &d| n.checked_mul(d))
                .ok_or(KernelError::ShapeOverflow)
        };
        let (outer, inner) = (product(&shape[..a])?, product(&shape[a + 1..])?);
        let p = Self {
            outer,
            axis: shape[a],
            inner,
            max,
        };
        let input = outer
            .checked_mul(p.axis)
            .and_then(|n| n.checked_mul(inner))
            .ok_or(KernelError::ShapeOverflow)?;
        let output = outer.checked_mul(inner).ok_or(KernelError::ShapeOverflow)?;
        // The output is int32: its bytes must fit a slice too.
        if input as usize > isize::MAX as usize || output as usize > isize::MAX as usize / 4 {
            return Err(KernelError::ShapeOverflow);
        }
        if p.axis == 0 && output != 0 {
            return Err(KernelError::Unsupported {
                what: "empty axis with outputs",
            });
        }
        Ok(p)
    }

    /// Element counts `(input, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize) {
        // Both fit: checked in `new`.
        let output = self.outer as usize * self.inner as usize;
        (output * self.axis as usize, output)
    }

    /// `(outer, axis, inner)` extents.
    #[must_use]
    pub const fn extents(&self) -> (u32, u32, u32) {
        (self.outer, self.axis, self.inner)
    }

    /// Whether it is ARG_MAX (else ARG_MIN).
    #[must_use]
    pub const fn is_max(&self) -> bool {
        self.max
    }
}

/// Packed forms ([`packed`](crate::packed)).
impl ArgMinMaxParams {
    /// Writes the `(outer, axis, inner)` extents (which of the two it is, the operator knows).
    pub fn pack(&self, w: &mut Words<'_>) {
        for d in [self.outer, self.axis, self.inner] {
            w.put(d);
        }
    }

    /// Reads what [`pack`](Self::pack) wrote, for ARG_MAX if `max`: the extents checked as
    /// [`new`](Self::new) checks a shape (they are one, reduced along its middle axis).
    ///
    /// Errors as [`new`](Self::new).
    pub fn unpack(r: &mut WordReader<'_>, max: bool) -> Result<Self, KernelError> {
        let shape = [r.take()?, r.take()?, r.take()?];
        Self::new(&shape, 1, max)
    }
}

/// int8 ARG_MAX or ARG_MIN (see the [module docs](self)).
///
/// Errors with [`KernelError::LengthMismatch`] before touching `output`.
pub fn arg_min_max(
    p: &ArgMinMaxParams,
    input: &[i8],
    output: &mut [i32],
) -> Result<(), KernelError> {
    let (input_len, output_len) = p.lens();
    check_len("input", input_len, input.len())?;
    check_len("output", output_len, output.len())?;
    if output_len == 0 {
        return Ok(());
    }
    let (axis, inner) = (p.axis as usize, p.inner as usize);
    // One copy of the loops per comparison, so the inner loops do not test which it is.
    if p.max {
        arg_best(axis, inner, input, output, |c, m| c > m);
    } else {
        arg_best(axis, inner, input, output, |c, m| c < m);
    }
    Ok(())
}

/// The index along `axis` of the best element of each `(outer, inner)` lane, `better(c, m)`
/// TFLM's strict comparison of a candidate with the best so far (ties keep the first index).
/// Lengths are checked by the caller and `axis` is at least 1 (outputs exist).
#[inline(always)]
fn arg_best(
    axis: usize,
    inner: usize,
    input: &[i8],
    output: &mut [i32],
    better: impl Fn(i8, i8) -> bool,
) {
    if inner == 1 {
        // Contiguous rows: the common case (the innermost axis).
        for (row, o) in input.chunks_exact(axis).zip(output.iter_mut()) {
            let (mut best, mut at) = (row[0], 0);
            for (i, &x) in row.iter().enumerate().skip(1) {
                if better(x, best) {
                    best = x;
                    at = i;
                }
            }
            *o = at as i32;
        }
        return;
    }
    for (plane, out) in input
        .chunks_exact(axis * inner)
        .zip(output.chunks_exact_mut(inner))
    {
        // The first row seeds each lane; later rows replace it where strictly better.
        let mut best = [0_i8; 32];
        for (block, out) in out.chunks_mut(32).enumerate() {
            let lane0 = block * 32;
            let n = out.len();
            best[..n].copy_from_slice(&plane[lane0..lane0 + n]);
            out.fill(0);
            for (i, row) in plane.chunks_exact(inner).enumerate().skip(1) {
                for ((b, o), &x) in best
                    .iter_mut()
                    .zip(out.iter_mut())
                    .zip(&row[lane0..lane0 + n])
                {
                    if better(x, *b) {
                        *b = x;
                        *o = i as i32;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_of_equal_extremes_wins() {
        // [2, 3] along the last axis, then along the first.
        let x = [3, 7, 7, -1, -5, -5];
        let mut out = [9; 2];
        arg_min_max(
            &ArgMinMaxParams::new(&[2, 3], -1, true).unwrap(),
            &x,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [1, 0]);
        arg_min_max(
            &ArgMinMaxParams::new(&[2, 3], 1, false).unwrap(),
            &x,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [0, 1]);
        let mut out = [9; 3];
        arg_min_max(
            &ArgMinMaxParams::new(&[2, 3], 0, true).unwrap(),
            &x,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [0, 0, 0]);
        arg_min_max(
            &ArgMinMaxParams::new(&[2, 3], 0, false).unwrap(),
            &x,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [1, 1, 1]);
    }

    #[test]
    fn wide_inner_extents_use_every_block() {
        // [3, 40]: along axis 0, lane j is largest in row j % 3.
        let mut x = [0_i8; 120];
        for j in 0..40 {
            x[(j % 3) * 40 + j] = 1;
        }
        let mut out = [0; 40];
        arg_min_max(
            &ArgMinMaxParams::new(&[3, 40], 0, true).unwrap(),
            &x,
            &mut out,
        )
        .unwrap();
        for (j, &o) in out.iter().enumerate() {
            assert_eq!(o, (j % 3) as i32);
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(ArgMinMaxParams::new(&[2, 3], 2, true).is_err());
        assert!(ArgMinMaxParams::new(&[2, 3], -3, true).is_err());
        assert!(ArgMinMaxParams::new(&[], 0, true).is_err());
        assert!(ArgMinMaxParams::new(&[2, 0, 3], 1, true).is_err());
        assert!(ArgMinMaxParams::new(&[u32::MAX, 2], 1, true).is_err());
        // No outputs: an empty axis is harmless.
        let p = ArgMinMaxParams::new(&[0, 0], 1, true).unwrap();
        arg_min_max(&p, &[], &mut []).unwrap();
        let p = ArgMinMaxParams::new(&[2, 3], 1, true).unwrap();
        assert!(arg_min_max(&p, &[0; 5], &mut [0; 2]).is_err());
        assert!(arg_min_max(&p, &[0; 6], &mut [0; 3]).is_err());
    }
}
