//! CONCATENATION of up to [`MAX_CONCAT_INPUTS`] int8 tensors along one axis.
//!
//! TFLM (`micro/kernels/concatenation.cc`, `kernels/internal/reference/concatenation.h`):
//! for int8, every input must have exactly the output's scale and zero point (Prepare fails
//! otherwise; there is no requantization, see [`check_same_quant`]), and there is no fused
//! activation. With `outer` the product of the dimensions before the axis and `inner` the
//! product of those after it, the output is, for each of the `outer` slices in turn, each
//! input's slice of `dims[axis] · inner` contiguous elements, in input order:
//!
//! ```text
//! for o in 0..outer: for each input t: output ← t[o · n_t .. (o + 1) · n_t],  n_t = t.dims[axis] · inner
//! ```
//!
//! Inputs must have the same rank (1 to 6) and the same dimensions except along the axis.
//! A negative axis counts from the end (`rank + axis`), as TFLM's `CalculatePositiveAxis`.

use super::dims::{count, us, Dims, MAX_DIMS};
use super::{check_quant, Quant};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Most inputs a [`ConcatParams`] describes. TFLM allows 10; 7 keeps the parameters small
/// enough to travel by value in an NPU job, and covers the inception-style blocks of the
/// reference models (4 inputs). More inputs are refused with
/// [`KernelError::Unsupported`].
pub const MAX_CONCAT_INPUTS: usize = 7;

/// Precomputed CONCATENATION geometry (TFLM's `ConcatenationParams` with the shapes
/// resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConcatParams {
    output: Dims,
    /// Each input's size along the axis.
    axis_sizes: [u32; MAX_CONCAT_INPUTS],
    inputs: u8,
    /// The axis, non-negative: kept for [`Packed`], which makes the parameters again from it.
    axis: u8,
    /// Product of the dimensions before the axis (0 for an empty output).
    outer: u32,
    /// Product of the dimensions after the axis (0 for an empty output).
    inner: u32,
}

impl ConcatParams {
    /// Resolves the output shape from the inputs' dimensions (outermost first) and the axis.
    ///
    /// Errors: [`KernelError::Unsupported`] for no inputs or more than
    /// [`MAX_CONCAT_INPUTS`], a rank outside 1 to 6, inputs of different ranks or whose
    /// dimensions differ other than along the axis, or an axis outside `−rank..rank`;
    /// [`KernelError::ShapeOverflow`] for an output of more than `u32::MAX` elements.
    pub fn new(inputs: &[&[u32]], axis: i32) -> Result<Self, KernelError> {
        let first = match inputs {
            [] => {
                return Err(KernelError::Unsupported {
                    what: "concatenation of no inputs",
                })
            }
            [first, ..] if inputs.len() <= MAX_CONCAT_INPUTS => *first,
            _ => {
                return Err(KernelError::Unsupported {
                    what: "more than MAX_CONCAT_INPUTS (7) concatenation inputs",
                })
            }
        };
        let rank = first.len();
        if !(1..=MAX_DIMS).contains(&rank) {
            return Err(KernelError::Unsupported {
                what: "concatenation rank outside 1 to 6",
            });
        }
        // Both conversions are exact: |axis| and rank are small.
        let axis = if axis < 0 {
            rank as i64 + i64::from(axis)
        } else {
            i64::from(axis)
        };
        let axis =
            usize::try_from(axis)
                .ok()
                .filter(|&a| a < rank)
                .ok_or(KernelError::Unsupported {
                    what: "concatenation axis out of range",
                })?;

        let mut axis_sizes = [0_u32; MAX_CONCAT_INPUTS];
        let mut total: u32 = 0;
        for (size, dims) in axis_sizes.iter_mut().zip(inputs) {
            if dims.len() != rank {
                return Err(KernelError::Unsupported {
                    what: "concatenation inputs of different ranks",
                });
            }
            let same_elsewhere = dims
                .iter()
                .zip(first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
            if !same_elsewhere {
                return Err(KernelError::Unsupported {
                    what: "concatenation inputs differ outside the axis",
                });
            }
            *size = dims[axis];
            total = total
                .checked_add(dims[axis])
                .ok_or(KernelError::ShapeOverflow)?;
        }
        let mut out = [0_u32; MAX_DIMS];
        out[..rank].copy_from_slice(first);
        out[axis] = total;
        let output = Dims::new(&out[..rank])?;
        let (outer, inner) = if count(output.as_slice())? == 0 {
            (0, 0)
        } else {
            // Both divide the non-zero element count, which fits a u32.
            (count(&out[..axis])?, count(&out[axis + 1..rank])?)
        };
        Ok(Self {
            output,
            axis_sizes,
            // At most MAX_CONCAT_INPUTS.
            inputs: inputs.len() as u8,
            // Below the rank, at most 6.
            axis: axis as u8,
            outer,
            inner,
        })
    }

    /// The output's dimensions: the inputs', with the axis's sizes summed.
    #[must_use]
    pub const fn output_shape(&self) -> Dims {
        self.output
    }

    /// Number of inputs.
    #[must_use]
    pub const fn inputs(&self) -> usize {
        self.inputs as usize
    }

    /// Product of the dimensions before the axis: how many slices each input is cut into
    /// (0 for an empty output). With 1, every input is one contiguous block of the output,
    /// in input order, so its producer can write it straight into place.
    #[must_use]
    pub const fn outer(&self) -> u32 {
        self.outer
    }

    /// Element count of input `i` (0 for an `i` beyond the inputs).
    #[must_use]
    pub fn input_len(&self, i: usize) -> usize {
        self.axis_sizes
            .get(i)
            .map_or(0, |&n| us(self.outer) * self.chunk(n))
    }

    /// Element count of the output.
    #[must_use]
    pub fn output_len(&self) -> usize {
        (0..self.inputs()).map(|i| self.input_len(i)).sum()
    }

    /// Elements an input with `axis_size` contributes per outer slice.
    #[inline]
    fn chunk(&self, axis_size: u32) -> usize {
        us(axis_size) * us(self.inner)
    }
}

/// Packed as the output's dimensions, the axis and each input's size along it; read back as
/// the inputs' dimensions through [`ConcatParams::new`].
impl Packed for ConcatParams {
    fn pack(&self, w: &mut Words<'_>) {
        self.output.pack(w);
        w.put(u32::from(self.axis));
        w.put_list(&self.axis_sizes[..self.inputs()]);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let output = Dims::unpack(r)?;
        let axis = r.take()?;
        let (sizes, n) = r.take_list::<MAX_CONCAT_INPUTS>()?;
        let rank = output.rank();
        let axis =
            usize::try_from(axis)
                .ok()
                .filter(|&a| a < rank)
                .ok_or(KernelError::Unsupported {
                    what: "concatenation axis out of range",
                })?;
        let mut shapes = [[0_u32; MAX_DIMS]; MAX_CONCAT_INPUTS];
        for (shape, &size) in shapes.iter_mut().zip(&sizes) {
            shape[..rank].copy_from_slice(output.as_slice());
            shape[axis] = size;
        }
        let dims: [&[u32]; MAX_CONCAT_INPUTS] = core::array::from_fn(|i| &shapes[i][..rank]);
        // Below the rank, at most 6.
        Self::new(&dims[..n], axis as i32)
    }
}

/// Checks TFLM's int8 requirement that every input has exactly the output's quantization
/// (scale equal as a `double`, zero point equal): CONCATENATION moves bytes without
/// requantizing.
///
/// Errors with [`KernelError::InvalidQuantization`]: `"output scale"` / `"output zero point"`
/// for an invalid output quantization, `"input scale differs from output scale"` or
/// `"input zero point differs from output zero point"` otherwise.
pub fn check_same_quant(inputs: &[Quant], out: Quant) -> Result<(), KernelError> {
    check_quant(out, "output scale", "output zero point")?;
    for q in inputs {
        if f64::from(q.scale) != f64::from(out.scale) {
            return Err(KernelError::InvalidQuantization {
                what: "input scale differs from output scale",
            });
        }
        if q.zero_point != out.zero_point {
            return Err(KernelError::InvalidQuantization {
                what: "input zero point differs from output zero point",
            });
        }
    }
    Ok(())
}

/// CONCATENATION of int8 tensors (see the [module docs](self)).
///
/// `inputs` are the tensors given to [`ConcatParams::new`], in order; `output` has
/// [`output_shape`](ConcatParams::output_shape). Errors with [`KernelError::LengthMismatch`]
/// before anything is written: operand `"inputs"` for a wrong number of inputs, `"input"` for
/// an input of the wrong length, `"output"`.
pub fn concatenation(
    p: &ConcatParams,
    inputs: &[&[i8]],
    output: &mut [i8],
) -> Result<(), KernelError> {
    check_len("inputs", p.inputs(), inputs.len())?;
    for (i, input) in inputs.iter().enumerate() {
        check_len("input", p.input_len(i), input.len())?;
    }
    check_len("output", p.output_len(), output.len())?;
    let mut rest = output;
    for o in 0..us(p.outer) {
        for (input, &size) in inputs.iter().zip(&p.axis_sizes) {
            let n = p.chunk(size);
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(n);
            head.copy_from_slice(&input[o * n..(o + 1) * n]);
            rest = tail;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn last_axis_by_hand() {
        // [2][2] and [2][1] along axis −1 → [2][3].
        let p = ConcatParams::new(&[&[2, 2], &[2, 1]], -1).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 3]);
        assert_eq!((p.input_len(0), p.input_len(1), p.output_len()), (4, 2, 6));
        let mut out = [0_i8; 6];
        concatenation(&p, &[&[1, 2, 3, 4], &[-5, -6]], &mut out).unwrap();
        assert_eq!(out, [1, 2, -5, 3, 4, -6]);
    }

    #[test]
    fn first_and_middle_axes() {
        let p = ConcatParams::new(&[&[1, 2], &[2, 2]], 0).unwrap();
        let mut out = [0_i8; 6];
        concatenation(&p, &[&[1, 2], &[3, 4, 5, 6]], &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
        // One outer slice: each input is one contiguous block of the output.
        assert_eq!(p.outer(), 1);

        // [2][1][2], [2][2][2], [2][0][2] along axis 1 → [2][3][2].
        let p = ConcatParams::new(&[&[2, 1, 2], &[2, 2, 2], &[2, 0, 2]], 1).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 3, 2]);
        assert_eq!(p.outer(), 2);
        let mut out = [0_i8; 12];
        let a = [1, 2, 3, 4];
        let b = [10, 11, 12, 13, 14, 15, 16, 17];
        concatenation(&p, &[&a, &b, &[]], &mut out).unwrap();
        assert_eq!(out, [1, 2, 10, 11, 12, 13, 3, 4, 14, 15, 16, 17]);
    }

    #[test]
    fn seven_inputs_and_empty_output() {
        let shapes: [&[u32]; 7] = [&[1, 1]; 7];
        let p = ConcatParams::new(&shapes, 1).unwrap();
        let data: [[i8; 1]; 7] = [[1], [2], [3], [4], [5], [6], [7]];
        let inputs: [&[i8]; 7] = data.each_ref().map(|d| &d[..]);
        let mut out = [0_i8; 7];
        concatenation(&p, &inputs, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7]);

        let p = ConcatParams::new(&[&[0, 65_536, 65_536], &[0, 65_536, 1]], 2).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[0, 65_536, 65_537]);
        assert_eq!(p.output_len(), 0);
        concatenation(&p, &[&[], &[]], &mut []).unwrap();
    }

    #[test]
    fn shape_errors() {
        let unsupported = |what| Err(KernelError::Unsupported { what });
        assert_eq!(
            ConcatParams::new(&[], 0),
            unsupported("concatenation of no inputs")
        );
        assert_eq!(
            ConcatParams::new(&[&[1_u32, 1][..]; 8], 0),
            unsupported("more than MAX_CONCAT_INPUTS (7) concatenation inputs")
        );
        assert_eq!(
            ConcatParams::new(&[&[]], 0),
            unsupported("concatenation rank outside 1 to 6")
        );
        assert_eq!(
            ConcatParams::new(&[&[1; 7]], 0),
            unsupported("concatenation rank outside 1 to 6")
        );
        for axis in [2, -3, i32::MIN, i32::MAX] {
            assert_eq!(
                ConcatParams::new(&[&[1, 2], &[1, 2]], axis),
                unsupported("concatenation axis out of range")
            );
        }
        assert_eq!(
            ConcatParams::new(&[&[1, 2], &[1, 2, 1]], 1),
            unsupported("concatenation inputs of different ranks")
        );
        assert_eq!(
            ConcatParams::new(&[&[1, 2], &[2, 2]], 1),
            unsupported("concatenation inputs differ outside the axis")
        );
        assert_eq!(
            ConcatParams::new(&[&[u32::MAX], &[1]], 0),
            Err(KernelError::ShapeOverflow)
        );
        assert_eq!(
            ConcatParams::new(&[&[65_536, 1], &[65_536, 65_535]], 1),
            Err(KernelError::ShapeOverflow)
        );
    }

    #[test]
    fn length_errors_before_writing() {
        let p = ConcatParams::new(&[&[2], &[1]], 0).unwrap();
        let mut out = [9_i8; 3];
        let err = |operand, expected, actual| {
            Err(KernelError::LengthMismatch {
                operand,
                expected,
                actual,
            })
        };
        assert_eq!(concatenation(&p, &[&[1, 2]], &mut out), err("inputs", 2, 1));
        assert_eq!(
            concatenation(&p, &[&[1, 2], &[3, 4]], &mut out),
            err("input", 1, 2)
        );
        assert_eq!(
            concatenation(&p, &[&[1, 2], &[3]], &mut out[..2]),
            err("output", 3, 2)
        );
        assert_eq!(out, [9; 3]);
    }

    #[test]
    fn quantization_must_match() {
        let out = q(0.5, -3);
        assert_eq!(check_same_quant(&[out, out, out], out), Ok(()));
        assert_eq!(check_same_quant(&[], out), Ok(()));
        assert_eq!(
            // One ulp above 0.5: TFLM compares the scales exactly.
            check_same_quant(&[out, q(f32::from_bits(0.5_f32.to_bits() + 1), -3)], out),
            Err(KernelError::InvalidQuantization {
                what: "input scale differs from output scale"
            })
        );
        assert_eq!(
            check_same_quant(&[q(0.5, -2)], out),
            Err(KernelError::InvalidQuantization {
                what: "input zero point differs from output zero point"
            })
        );
        assert_eq!(
            check_same_quant(&[q(0.5, 200)], q(0.5, 200)),
            Err(KernelError::InvalidQuantization {
                what: "output zero point"
            })
        );
    }
}
