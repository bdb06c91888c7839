//! TRANSPOSE: permutes the dimensions of a tensor of rank 1 to 6 (any element type of one
//! byte; int8 here).
//!
//! TFLM (`micro/kernels/transpose.cc`, `transpose_common.cc`,
//! `kernels/internal/reference/transpose.h`): `output.dims[i] = input.dims[perm[i]]`, and
//! `output[i_0]…[i_{r−1}] = input[j]` with `j[perm[k]] = i_k`. Pure data movement, so
//! bit-exactness is a matter of moving the right bytes; TFLM checks only that each `perm`
//! entry is in range, this crate also refuses repeated axes (TFLM would read the wrong
//! elements). TFLM's TRANSPOSE accepts inputs of rank 1 to 5 (its reference kernel, also used
//! by BATCH_MATMUL, handles 6); this kernel takes rank 1 to 6.
//!
//! [`TransposeParams::new`] simplifies the permutation once, so that small tensors move in
//! long runs:
//!
//! - axes of size 1 are dropped (they change no element's position);
//! - axes adjacent in the input that stay adjacent, in the same order, in the output are
//!   merged into one (`[1, 16, 2, 16]` with perm `[0, 2, 1, 3]` becomes `[16, 2, 16]` with
//!   perm `[1, 0, 2]`);
//! - if what is left is at most one axis, the transpose is a copy.
//!
//! The kernel walks the output in order, one innermost row at a time, keeping the input
//! position with an odometer (no division per element); when the innermost output axis is
//! the innermost input axis, each row is one contiguous copy.

use super::dims::{count, us, Dims, MAX_DIMS};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed TRANSPOSE: the output shape and the simplified permutation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransposeParams {
    output: Dims,
    /// The input's dimensions after dropping size-1 axes and merging runs.
    dims: [u32; MAX_DIMS],
    /// Output axis `i` reads simplified input axis `perm[i]`.
    perm: [u8; MAX_DIMS],
    /// Simplified rank; at most 1 means a plain copy.
    rank: u8,
    len: u32,
    /// The permutation it was made with (output axis `i` is input axis `axes[i]`): kept for
    /// [`Packed`], which makes it again from it and the output's dimensions.
    axes: [u8; MAX_DIMS],
}

impl TransposeParams {
    /// Validates `perm` against `shape` (the input's dimensions, outermost first) and
    /// simplifies the permutation.
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank outside 1 to 6, a `perm` entry outside
    /// `0..rank` or an axis that `perm` names twice; [`KernelError::LengthMismatch`] (operand
    /// `"perm"`) when `perm` does not have one entry per dimension;
    /// [`KernelError::ShapeOverflow`] for more than `u32::MAX` elements.
    pub fn new(shape: &[u32], perm: &[i32]) -> Result<Self, KernelError> {
        let rank = shape.len();
        if !(1..=MAX_DIMS).contains(&rank) {
            return Err(KernelError::Unsupported {
                what: "transpose rank outside 1 to 6",
            });
        }
        check_len("perm", rank, perm.len())?;
        let mut axes = [0_usize; MAX_DIMS];
        let mut seen = [false; MAX_DIMS];
        for (a, &p) in axes.iter_mut().zip(perm) {
            *a = usize::try_from(p)
                .ok()
                .filter(|&p| p < rank)
                .ok_or(KernelError::Unsupported {
                    what: "transpose perm entry out of range",
                })?;
            if core::mem::replace(&mut seen[*a], true) {
                return Err(KernelError::Unsupported {
                    what: "transpose perm repeats an axis",
                });
            }
        }
        let mut kept = [0_u8; MAX_DIMS];
        for (k, &a) in kept.iter_mut().zip(&axes[..rank]) {
            // Below the rank, at most 6.
            *k = a as u8;
        }
        let axes = &axes[..rank];
        let len = count(shape)?;
        let mut out = [0_u32; MAX_DIMS];
        for (o, &a) in out.iter_mut().zip(axes) {
            *o = shape[a];
        }
        let output = Dims::new(&out[..rank])?;

        let (dims, perm, rank) = if len == 0 {
            // Nothing moves (and merged sizes could overflow): no simplified shape needed.
            ([0; MAX_DIMS], [0; MAX_DIMS], 0)
        } else {
            simplify(shape, axes)
        };
        Ok(Self {
            output,
            dims,
            perm,
            rank,
            len,
            axes: kept,
        })
    }

    /// The output's dimensions: `output[i] = shape[perm[i]]`.
    #[must_use]
    pub const fn output_shape(&self) -> Dims {
        self.output
    }

    /// Elements of the input and of the output.
    #[must_use]
    pub const fn elements(&self) -> usize {
        us(self.len)
    }

    /// Whether the simplified permutation is the identity, making the transpose a copy.
    #[must_use]
    pub const fn is_copy(&self) -> bool {
        self.rank <= 1
    }
}

/// Packed as the input's dimensions and the permutation; read back through
/// [`TransposeParams::new`].
impl Packed for TransposeParams {
    fn pack(&self, w: &mut Words<'_>) {
        let rank = self.output.rank();
        let mut shape = [0; MAX_DIMS];
        for (&d, &a) in self.output.as_slice().iter().zip(&self.axes) {
            shape[usize::from(a)] = d;
        }
        w.put_list(&shape[..rank]);
        let mut perm = [0; MAX_DIMS];
        for (p, &a) in perm.iter_mut().zip(&self.axes) {
            *p = u32::from(a);
        }
        w.put_list(&perm[..rank]);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (shape, rank) = r.take_list::<MAX_DIMS>()?;
        let (perm, n) = r.take_list_i32::<MAX_DIMS>()?;
        Self::new(&shape[..rank], &perm[..n])
    }
}

/// Drops size-1 axes and merges input runs that stay together; `shape` has no zero and
/// `perm` is a valid permutation of its axes. Returns the simplified input dimensions, the
/// simplified permutation and its rank.
fn simplify(shape: &[u32], perm: &[usize]) -> ([u32; MAX_DIMS], [u8; MAX_DIMS], u8) {
    // Runs of the output order whose input axes are consecutive (size-1 axes skipped):
    // (first input axis, product of sizes).
    let mut runs = [(0_usize, 1_u32); MAX_DIMS];
    let mut n = 0;
    let mut last: Option<usize> = None;
    for &a in perm {
        if shape[a] == 1 {
            continue;
        }
        // Consecutive when every input axis strictly between the previous one and this one
        // has size 1 (those were skipped, so they do not separate the two).
        let continues = last.is_some_and(|l| a > l && shape[l + 1..a].iter().all(|&d| d == 1));
        if continues {
            // The product divides the element count, which fits a u32.
            runs[n - 1].1 *= shape[a];
        } else {
            runs[n] = (a, shape[a]);
            n += 1;
        }
        last = Some(a);
    }
    // Simplified input axes are the runs in input order; output axis i is run i.
    let mut dims = [1_u32; MAX_DIMS];
    let mut new_perm = [0_u8; MAX_DIMS];
    for (i, &(start, size)) in runs[..n].iter().enumerate() {
        let position = runs[..n].iter().filter(|r| r.0 < start).count();
        dims[position] = size;
        new_perm[i] = position as u8; // < MAX_DIMS
    }
    (dims, new_perm, n as u8)
}

/// TRANSPOSE of an int8 tensor (see the [module docs](self)).
///
/// `input` has the shape given to [`TransposeParams::new`], `output` its
/// [`output_shape`](TransposeParams::output_shape); both must have
/// [`elements`](TransposeParams::elements) elements ([`KernelError::LengthMismatch`]).
pub fn transpose(p: &TransposeParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    let len = us(p.len);
    check_len("input", len, input.len())?;
    check_len("output", len, output.len())?;
    let rank = usize::from(p.rank);
    if rank <= 1 {
        output.copy_from_slice(input);
        return Ok(());
    }
    // Row-major strides of the simplified input, then, per output axis, its size and the
    // input step it takes. All sizes are at least 2 (size-1 axes were dropped; len > 0).
    let mut in_stride = [1_usize; MAX_DIMS];
    for j in (0..rank - 1).rev() {
        in_stride[j] = in_stride[j + 1] * us(p.dims[j + 1]);
    }
    let mut size = [0_usize; MAX_DIMS];
    let mut step = [0_usize; MAX_DIMS];
    for i in 0..rank {
        let a = usize::from(p.perm[i]);
        size[i] = us(p.dims[a]);
        step[i] = in_stride[a];
    }
    let (inner, inner_step) = (size[rank - 1], step[rank - 1]);

    // Odometer over the outer output axes; `base` is the input index of the current row's
    // first element.
    let mut index = [0_usize; MAX_DIMS];
    let mut base = 0_usize;
    for row in output.chunks_exact_mut(inner) {
        if inner_step == 1 {
            row.copy_from_slice(&input[base..base + inner]);
        } else {
            for (o, &x) in row.iter_mut().zip(input[base..].iter().step_by(inner_step)) {
                *o = x;
            }
        }
        for axis in (0..rank - 1).rev() {
            index[axis] += 1;
            base += step[axis];
            if index[axis] < size[axis] {
                break;
            }
            base -= step[axis] * size[axis];
            index[axis] = 0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    /// Straightforward transpose: for every output index, the input index with
    /// `j[perm[k]] = i_k`.
    fn naive(shape: &[u32], perm: &[i32], input: &[i8]) -> Vec<i8> {
        let r = shape.len();
        let out_shape: Vec<usize> = perm.iter().map(|&a| shape[a as usize] as usize).collect();
        let n: usize = out_shape.iter().product();
        let mut out = Vec::with_capacity(n);
        for flat in 0..n {
            let mut rem = flat;
            let mut i = std::vec![0_usize; r];
            for k in (0..r).rev() {
                i[k] = rem % out_shape[k];
                rem /= out_shape[k];
            }
            let mut j = std::vec![0_usize; r];
            for k in 0..r {
                j[perm[k] as usize] = i[k];
            }
            let src = j
                .iter()
                .zip(shape)
                .fold(0, |acc, (&x, &d)| acc * d as usize + x);
            out.push(input[src]);
        }
        out
    }

    fn run(shape: &[u32], perm: &[i32]) {
        let p = TransposeParams::new(shape, perm).unwrap();
        let n = p.elements();
        let input: Vec<i8> = (0..n).map(|i| (i * 37 % 256) as u8 as i8).collect();
        let mut out = std::vec![0_i8; n];
        transpose(&p, &input, &mut out).unwrap();
        assert_eq!(out, naive(shape, perm, &input), "{shape:?} {perm:?}");
        let expected: Vec<u32> = perm.iter().map(|&a| shape[a as usize]).collect();
        assert_eq!(p.output_shape().as_slice(), expected.as_slice());
    }

    /// All permutations of `0..n`.
    fn permutations(n: usize) -> Vec<Vec<i32>> {
        if n == 0 {
            return std::vec![Vec::new()];
        }
        let mut all = Vec::new();
        for p in permutations(n - 1) {
            for at in 0..n {
                let mut q = p.clone();
                q.insert(at, (n - 1) as i32);
                all.push(q);
            }
        }
        all
    }

    #[test]
    fn matrix_by_hand() {
        let p = TransposeParams::new(&[2, 3], &[1, 0]).unwrap();
        let mut out = [0_i8; 6];
        transpose(&p, &[1, 2, 3, 4, 5, 6], &mut out).unwrap();
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
        assert_eq!(p.output_shape().as_slice(), &[3, 2]);
    }

    #[test]
    fn attention_head_split_simplifies() {
        // tiny_transformer's [1, 16, 2, 16] → [1, 2, 16, 16].
        let p = TransposeParams::new(&[1, 16, 2, 16], &[0, 2, 1, 3]).unwrap();
        assert_eq!(
            (&p.dims[..3], &p.perm[..3], p.rank),
            (&[16, 2, 16][..], &[1, 0, 2][..], 3)
        );
        run(&[1, 16, 2, 16], &[0, 2, 1, 3]);
        // Merging: [2, 3, 4, 5] with perm [2, 3, 0, 1] is a 2-D transpose of [6][20].
        let p = TransposeParams::new(&[2, 3, 4, 5], &[2, 3, 0, 1]).unwrap();
        assert_eq!(
            (&p.dims[..2], &p.perm[..2], p.rank),
            (&[6, 20][..], &[1, 0][..], 2)
        );
        // Size-1 axes between merged ones do not prevent merging.
        let p = TransposeParams::new(&[3, 1, 4, 5], &[2, 3, 0, 1]).unwrap();
        assert_eq!((&p.dims[..2], &p.perm[..2]), (&[3, 20][..], &[1, 0][..]));
        let p = TransposeParams::new(&[3, 1, 4, 5], &[0, 2, 1, 3]).unwrap();
        assert!(p.is_copy());
        assert!(TransposeParams::new(&[7], &[0]).unwrap().is_copy());
        assert!(TransposeParams::new(&[1, 1], &[1, 0]).unwrap().is_copy());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn every_permutation_matches_naive() {
        for shape in [
            &[2, 3, 4][..],
            &[3, 1, 2, 2],
            &[2, 3, 1, 2, 3],
            &[2, 1, 3, 2, 1, 2],
            &[1, 1, 1, 1],
            &[4],
        ] {
            for perm in permutations(shape.len()) {
                run(shape, &perm);
            }
        }
    }

    #[test]
    fn empty_tensor() {
        let p = TransposeParams::new(&[0, 65_536, 65_536], &[2, 1, 0]).unwrap();
        assert_eq!(p.elements(), 0);
        assert_eq!(p.output_shape().as_slice(), &[65_536, 65_536, 0]);
        transpose(&p, &[], &mut []).unwrap();
    }

    #[test]
    fn errors() {
        let unsupported = |what| Err(KernelError::Unsupported { what });
        assert_eq!(
            TransposeParams::new(&[], &[]),
            unsupported("transpose rank outside 1 to 6")
        );
        assert_eq!(
            TransposeParams::new(&[1; 7], &[0, 1, 2, 3, 4, 5, 6]),
            unsupported("transpose rank outside 1 to 6")
        );
        assert_eq!(
            TransposeParams::new(&[2, 3], &[1, 2]),
            unsupported("transpose perm entry out of range")
        );
        assert_eq!(
            TransposeParams::new(&[2, 3], &[-1, 0]),
            unsupported("transpose perm entry out of range")
        );
        assert_eq!(
            TransposeParams::new(&[2, 3, 4], &[1, 1, 0]),
            unsupported("transpose perm repeats an axis")
        );
        assert_eq!(
            TransposeParams::new(&[2, 3], &[1, 0, 2]),
            Err(KernelError::LengthMismatch {
                operand: "perm",
                expected: 2,
                actual: 3
            })
        );
        assert_eq!(
            TransposeParams::new(&[65_536, 65_536], &[1, 0]),
            Err(KernelError::ShapeOverflow)
        );
        let p = TransposeParams::new(&[2, 3], &[1, 0]).unwrap();
        let mut out = [7_i8; 6];
        assert_eq!(
            transpose(&p, &[0; 5], &mut out),
            Err(KernelError::LengthMismatch {
                operand: "input",
                expected: 6,
                actual: 5
            })
        );
        assert_eq!(
            transpose(&p, &[0; 6], &mut out[..4]),
            Err(KernelError::LengthMismatch {
                operand: "output",
                expected: 6,
                actual: 4
            })
        );
        assert_eq!(out, [7; 6]);
    }
}
