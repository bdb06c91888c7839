//! GATHER: slices of a tensor picked along one axis by a tensor of indices (int8 here; any
//! element type, it copies).
//!
//! TFLM (`micro/kernels/gather.cc`): with `axis` and `batch_dims` made non-negative, the input
//! is seen as `[batch][outer][axis][inner]` and the indices as `[batch][coord]`, and
//!
//! ```text
//! output[batch][outer][coord][..inner] = input[batch][outer][indices[batch][coord]][..inner]
//! ```
//!
//! so the output's shape is `input[..axis] ++ indices[batch_dims..] ++ input[axis + 1..]`.
//! TFLM takes int32 indices only, and only checks them with debug assertions: an index outside
//! `0..axis_size` reads outside the input there. Here it is refused when the kernel runs
//! ([`KernelError::Unsupported`], before anything is written).

use super::dims::{count, us};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed GATHER: the input and indices seen as `[batch][outer][axis][inner]` and
/// `[batch][coord]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GatherParams {
    batch: u32,
    outer: u32,
    axis_size: u32,
    inner: u32,
    coords: u32,
}

impl GatherParams {
    /// GATHER of an input of dimensions `input` by indices of dimensions `indices` along
    /// `axis`, the first `batch_dims` dimensions of both being batches (both may be negative,
    /// counting from the end of the input's and of the indices' dimensions, as TFLM does).
    ///
    /// Errors: [`KernelError::Unsupported`] for an axis or a batch count out of range, a batch
    /// count above the axis, or batch dimensions that differ; [`KernelError::ShapeOverflow`]
    /// for counts no slice can have.
    pub fn new(
        input: &[u32],
        indices: &[u32],
        axis: i32,
        batch_dims: i32,
    ) -> Result<Self, KernelError> {
        let unsupported = |what| KernelError::Unsupported { what };
        let resolve = |v: i32, rank: usize| {
            let v = i64::from(v);
            if v < 0 {
                v + rank as i64
            } else {
                v
            }
        };
        let axis = resolve(axis, input.len());
        let batch_dims = resolve(batch_dims, indices.len());
        if !(0..input.len() as i64).contains(&axis) {
            return Err(unsupported("gather axis out of range"));
        }
        if batch_dims < 0 || batch_dims >= input.len() as i64 || batch_dims > indices.len() as i64 {
            return Err(unsupported("gather batch_dims out of range"));
        }
        if batch_dims > axis {
            return Err(unsupported("gather batch_dims above the axis"));
        }
        let (axis, batch_dims) = (axis as usize, batch_dims as usize);
        if input[..batch_dims] != indices[..batch_dims] {
            return Err(unsupported("gather batch dimensions that differ"));
        }
        count(input)?;
        count(indices)?;
        let p = Self {
            batch: count(&input[..batch_dims])?,
            outer: count(&input[batch_dims..axis])?,
            axis_size: input[axis],
            inner: count(&input[axis + 1..])?,
            coords: count(&indices[batch_dims..])?,
        };
        // `count` lets a zero dimension hide the others' product, but the element counts
        // below multiply all four: with each zero taken as 1, they must fit.
        for dims in [
            [p.batch, p.outer, p.axis_size, p.inner],
            [p.batch, p.outer, p.coords, p.inner],
        ] {
            count(&dims.map(|d| d.max(1)))?;
        }
        Ok(p)
    }

    /// Elements of the input.
    #[must_use]
    pub const fn input_elements(&self) -> usize {
        us(self.batch) * us(self.outer) * us(self.axis_size) * us(self.inner)
    }

    /// Elements of the indices.
    #[must_use]
    pub const fn index_elements(&self) -> usize {
        us(self.batch) * us(self.coords)
    }

    /// Elements of the output.
    #[must_use]
    pub const fn output_elements(&self) -> usize {
        us(self.batch) * us(self.outer) * us(self.coords) * us(self.inner)
    }
}

/// Packed as its five counts; read back as an input `[batch, outer, axis, inner]` gathered
/// along axis 2 by indices `[batch, coords]` with one batch dimension, which
/// [`GatherParams::new`] makes into the same parameters.
impl Packed for GatherParams {
    fn pack(&self, w: &mut Words<'_>) {
        for v in [
            self.batch,
            self.outer,
            self.axis_size,
            self.inner,
            self.coords,
        ] {
            w.put(v);
        }
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let [batch, outer, axis, inner, coords] =
            [r.take()?, r.take()?, r.take()?, r.take()?, r.take()?];
        Self::new(&[batch, outer, axis, inner], &[batch, coords], 2, 1)
    }
}

/// GATHER (see the [module docs](self)) over elements of any type.
///
/// `input`, `indices` and `output` must have the parameters' element counts
/// ([`KernelError::LengthMismatch`]); an index outside the gathered axis is refused
/// ([`KernelError::Unsupported`]) before anything is written.
pub fn gather<T: Copy>(
    p: &GatherParams,
    input: &[T],
    indices: &[i32],
    output: &mut [T],
) -> Result<(), KernelError> {
    check_len("input", p.input_elements(), input.len())?;
    check_len("indices", p.index_elements(), indices.len())?;
    check_len("output", p.output_elements(), output.len())?;
    if indices
        .iter()
        .any(|&i| u32::try_from(i).map_or(true, |i| i >= p.axis_size))
    {
        return Err(KernelError::Unsupported {
            what: "gather index outside the axis",
        });
    }
    let inner = us(p.inner);
    if inner == 0 {
        return Ok(());
    }
    let slab = us(p.axis_size) * inner;
    let coords = us(p.coords);
    let mut out = output.chunks_exact_mut(inner);
    let mut slabs = input.chunks_exact(slab.max(1));
    for batch in 0..us(p.batch) {
        let picks = &indices[batch * coords..(batch + 1) * coords];
        for _ in 0..us(p.outer) {
            // Empty when the axis is: then there are no indices to pick either.
            let from = slabs.next().unwrap_or(&[]);
            for (&i, o) in picks.iter().zip(&mut out) {
                let start = us(i as u32) * inner; // checked against the axis above
                o.copy_from_slice(&from[start..start + inner]);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_along_each_axis() {
        // [2, 3] by [2] along axis 1: columns 2 and 0 of each row.
        let p = GatherParams::new(&[2, 3], &[2], 1, 0).unwrap();
        let mut out = [0_i8; 4];
        gather(&p, &[1, 2, 3, 4, 5, 6], &[2, 0], &mut out).unwrap();
        assert_eq!(out, [3, 1, 6, 4]);
        // Along axis 0 (negative: -2), indices of rank 2: rows [1, 1, 0].
        let p = GatherParams::new(&[2, 3], &[1, 3], -2, 0).unwrap();
        let mut out = [0_i8; 9];
        gather(&p, &[1, 2, 3, 4, 5, 6], &[1, 1, 0], &mut out).unwrap();
        assert_eq!(out, [4, 5, 6, 4, 5, 6, 1, 2, 3]);
        // batch_dims 1: each row picks with its own indices.
        let p = GatherParams::new(&[2, 3], &[2, 2], 1, 1).unwrap();
        let mut out = [0_i16; 4];
        gather(&p, &[1, 2, 3, 4, 5, 6], &[0, 2, 1, 1], &mut out).unwrap();
        assert_eq!(out, [1, 3, 5, 5]);
        assert_eq!(p.output_elements(), 4);
    }

    #[test]
    fn refusals() {
        let unsupported = |what| KernelError::Unsupported { what };
        assert_eq!(
            GatherParams::new(&[2, 3], &[2], 2, 0),
            Err(unsupported("gather axis out of range"))
        );
        assert_eq!(
            GatherParams::new(&[2, 3], &[2], -3, 0),
            Err(unsupported("gather axis out of range"))
        );
        assert_eq!(
            GatherParams::new(&[2, 3], &[2], 1, 2),
            Err(unsupported("gather batch_dims out of range"))
        );
        assert_eq!(
            GatherParams::new(&[2, 3, 4], &[2, 2], 0, 1),
            Err(unsupported("gather batch_dims above the axis"))
        );
        assert_eq!(
            GatherParams::new(&[2, 3], &[3, 2], 1, 1),
            Err(unsupported("gather batch dimensions that differ"))
        );
        let p = GatherParams::new(&[2, 3], &[2], 1, 0).unwrap();
        let mut out = [9_i8; 4];
        for bad in [3, -1, i32::MIN] {
            assert_eq!(
                gather(&p, &[0; 6], &[0, bad], &mut out),
                Err(unsupported("gather index outside the axis"))
            );
        }
        assert_eq!(out, [9; 4]);
        assert!(gather(&p, &[0; 5], &[0, 1], &mut out).is_err());
        assert!(gather(&p, &[0; 6], &[0], &mut out).is_err());
        assert!(gather(&p, &[0; 6], &[0, 1], &mut out[..3]).is_err());
        // An empty axis takes no index.
        let p = GatherParams::new(&[2, 0], &[0], 1, 0).unwrap();
        gather::<i8>(&p, &[], &[], &mut []).unwrap();
        // Empty, yet the other counts' product overflows (what a damaged compiled model held,
        // found by its fuzzer): the element counts would overflow, so it is refused.
        let huge = 1 << 22;
        assert_eq!(
            GatherParams::new(&[huge, huge, huge, 0], &[huge, 1], 2, 1),
            Err(KernelError::ShapeOverflow)
        );
    }
}
