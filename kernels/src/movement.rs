//! Data movement over elements of any type (int8, int16, ...): the operators that only move
//! elements, never compute on them. TFLM's kernels for these are templates over the element
//! type, and so are these.
//!
//! One strided copy, [`Walk`] and [`copy`], does the moving for all of them: it visits a box
//! of up to [`MAX_DIMS`] extents, reading the source and writing the destination each with its
//! own start offset and per-axis strides (negative strides walk backwards). On it:
//!
//! - [`SliceParams`] / [`slice()`]: SLICE, STRIDED_SLICE (any strides, negative too), and each
//!   output of SPLIT, SPLIT_V and UNPACK (a slice along one axis);
//! - [`PackParams`] / [`pack`]: PACK, each input written into its interleaved place;
//! - [`PadParams`] / [`pad`]: PAD and PADV2, the output filled with the pad value and the input
//!   copied into its interior.
//!
//! MIRROR_PAD reads each output element from a reflected input position, which is no box
//! walk: [`MirrorPadParams`] / [`mirror_pad`] compute it as TFLM does (`mirror_pad.cc`).
//!
//! Sources (tflite-micro): `micro/kernels/slice.cc` and `reference/slice.h`;
//! `micro/kernels/strided_slice.cc`, `strided_slice_common.cc`, `reference/strided_slice.h`
//! and `strided_slice_logic.h` (the begin/end/mask resolution is the caller's, see
//! `src/ops/slice.rs`); `micro/kernels/split.cc`, `split_v.cc`, `pack.cc`, `unpack.cc`;
//! `micro/kernels/pad.cc`, `pad_common.cc` and `reference/pad.h`; `micro/kernels/mirror_pad.cc`.
//! Every one of them writes its output in row-major order from input elements chosen by index
//! arithmetic, so bit-exactness is a matter of choosing the same elements.
//!
//! Parameters are checked once when they are built: every position a walk can reach lies
//! within the lengths the parameters report, so a kernel given buffers of those lengths never
//! indexes out of bounds (and checks every access anyway, returning an error rather than
//! panicking).

use crate::int8::dims::{count, us, Dims, MAX_DIMS};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// A box walk for [`copy`]: extents, and for the source and the destination a start offset and
/// per-axis strides (in elements). Axes of extent 1 are dropped and axes that are contiguous
/// on both sides merged, so rows are as long as they can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Walk {
    extents: [u32; MAX_DIMS],
    src_strides: [i32; MAX_DIMS],
    dst_strides: [i32; MAX_DIMS],
    src_offset: u32,
    dst_offset: u32,
    /// Simplified rank, at least 1.
    rank: u8,
    /// Elements visited.
    len: u32,
    /// One past the highest source position visited (0 when nothing is).
    src_span: u32,
    /// One past the highest destination position visited.
    dst_span: u32,
}

/// One past the highest position a walk from `offset` with `strides` over `extents` (none
/// zero) reaches, if every position it reaches lies in `0..u32::MAX`.
fn span(extents: &[u32], strides: &[i32], offset: u32) -> Option<u32> {
    let (mut lo, mut hi) = (i64::from(offset), i64::from(offset));
    for (&e, &s) in extents.iter().zip(strides) {
        let reach = i64::from(e - 1).checked_mul(i64::from(s))?;
        if reach < 0 {
            lo = lo.checked_add(reach)?;
        } else {
            hi = hi.checked_add(reach)?;
        }
    }
    u32::try_from(lo).ok()?;
    u32::try_from(hi.checked_add(1)?).ok()
}

impl Walk {
    /// A walk over `extents` (outermost first), reading the source at
    /// `src_offset + Σ i_k · src_strides[k]` and writing the destination at
    /// `dst_offset + Σ i_k · dst_strides[k]`.
    ///
    /// Errors: [`KernelError::Unsupported`] for more than [`MAX_DIMS`] extents or a position
    /// below 0; [`KernelError::LengthMismatch`] when the stride lists are not one per extent;
    /// [`KernelError::ShapeOverflow`] when the element count or a position exceeds `u32`.
    pub fn new(
        extents: &[u32],
        (src_offset, src_strides): (u32, &[i32]),
        (dst_offset, dst_strides): (u32, &[i32]),
    ) -> Result<Self, KernelError> {
        if extents.len() > MAX_DIMS {
            return Err(KernelError::Unsupported {
                what: "walk rank above 6",
            });
        }
        check_len("source strides", extents.len(), src_strides.len())?;
        check_len("destination strides", extents.len(), dst_strides.len())?;
        let len = count(extents)?;
        let mut walk = Walk {
            extents: [1; MAX_DIMS],
            src_strides: [0; MAX_DIMS],
            dst_strides: [0; MAX_DIMS],
            src_offset,
            dst_offset,
            rank: 1,
            len,
            src_span: 0,
            dst_span: 0,
        };
        if len == 0 {
            return Ok(walk);
        }
        walk.src_span = span(extents, src_strides, src_offset).ok_or(OUT_OF_RANGE)?;
        walk.dst_span = span(extents, dst_strides, dst_offset).ok_or(OUT_OF_RANGE)?;
        // Simplify: drop extent-1 axes, merge an axis into the previous one when the
        // previous one's strides are this one's times its extent on both sides.
        let mut n = 0_usize;
        for ((&e, &s), &d) in extents.iter().zip(src_strides).zip(dst_strides) {
            if e == 1 {
                continue;
            }
            let merges = n > 0
                && i64::from(walk.src_strides[n - 1]) == i64::from(s) * i64::from(e)
                && i64::from(walk.dst_strides[n - 1]) == i64::from(d) * i64::from(e);
            if merges {
                // The merged extent divides `len`, which fits a u32.
                walk.extents[n - 1] *= e;
                walk.src_strides[n - 1] = s;
                walk.dst_strides[n - 1] = d;
            } else {
                walk.extents[n] = e;
                walk.src_strides[n] = s;
                walk.dst_strides[n] = d;
                n += 1;
            }
        }
        if n == 0 {
            // A single element: one axis of extent 1.
            walk.extents[0] = 1;
            walk.src_strides[0] = 1;
            walk.dst_strides[0] = 1;
            n = 1;
        }
        walk.rank = n as u8;
        Ok(walk)
    }

    /// Elements the walk visits.
    #[must_use]
    pub const fn elements(&self) -> usize {
        us(self.len)
    }

    /// Rows the walk copies: runs along its innermost axis, each with a cost of its own.
    #[must_use]
    pub const fn rows(&self) -> usize {
        us(self.len / self.extents[self.rank as usize - 1])
    }

    /// Whether its rows are shorter than [`SHORT_ROW`].
    #[must_use]
    pub const fn short_rows(&self) -> bool {
        us(self.extents[self.rank as usize - 1]) < SHORT_ROW
    }

    /// Whether the innermost axis is contiguous on both sides, so each row is copied whole.
    #[must_use]
    pub const fn unit_rows(&self) -> bool {
        let last = self.rank as usize - 1;
        self.src_strides[last] == 1 && self.dst_strides[last] == 1
    }

    /// Elements the source must have: one past the highest position read.
    #[must_use]
    pub const fn source_span(&self) -> usize {
        us(self.src_span)
    }

    /// Elements the destination must have: one past the highest position written.
    #[must_use]
    pub const fn destination_span(&self) -> usize {
        us(self.dst_span)
    }
}

/// A position a walk reaches below 0 or beyond `u32`.
const OUT_OF_RANGE: KernelError = KernelError::Unsupported {
    what: "walk reaching outside its tensor",
};

/// The error of an access outside a buffer, which a checked walk never makes.
const OUT_OF_BOUNDS: KernelError = KernelError::Unsupported {
    what: "walk outside its buffer",
};

/// Copies the elements `walk` visits from `src` to `dst` (elements of `dst` it does not
/// visit are left as they are).
///
/// Errors: [`KernelError::LengthMismatch`] when `src` or `dst` is shorter than the walk's
/// spans (operands `"input"`, `"output"`), before anything is written.
pub fn copy<T: Copy>(walk: &Walk, src: &[T], dst: &mut [T]) -> Result<(), KernelError> {
    if walk.len == 0 {
        return Ok(());
    }
    if src.len() < walk.source_span() {
        return Err(KernelError::LengthMismatch {
            operand: "input",
            expected: walk.source_span(),
            actual: src.len(),
        });
    }
    if dst.len() < walk.destination_span() {
        return Err(KernelError::LengthMismatch {
            operand: "output",
            expected: walk.destination_span(),
            actual: dst.len(),
        });
    }
    let rank = usize::from(walk.rank);
    let last = rank - 1;
    let row = us(walk.extents[last]);
    let rows = walk.len / walk.extents[last];
    // Positions move in wrapping `usize` steps (a negative stride is its two's complement):
    // `Walk::new` checked that every position the walk reaches lies in 0..span, so each row's
    // start is exact whatever the intermediate sums, and every access is checked anyway.
    let step = |stride: i32| stride as isize as usize;
    let mut src_step = [0_usize; MAX_DIMS];
    let mut dst_step = [0_usize; MAX_DIMS];
    let mut src_back = [0_usize; MAX_DIMS];
    let mut dst_back = [0_usize; MAX_DIMS];
    for a in 0..last {
        let e = us(walk.extents[a]);
        src_step[a] = step(walk.src_strides[a]);
        dst_step[a] = step(walk.dst_strides[a]);
        src_back[a] = src_step[a].wrapping_mul(e);
        dst_back[a] = dst_step[a].wrapping_mul(e);
    }
    let (ss, ds) = (step(walk.src_strides[last]), step(walk.dst_strides[last]));
    let unit = walk.unit_rows();
    // The axis outside the rows is a counted loop; the odometer turns once per block of rows.
    let (mid, mid_src, mid_dst) = if last > 0 {
        (
            walk.extents[last - 1],
            src_step[last - 1],
            dst_step[last - 1],
        )
    } else {
        (1, 0, 0)
    };
    let outer = last.saturating_sub(1);
    let mut idx = [0_u32; MAX_DIMS];
    let (mut s, mut d) = (us(walk.src_offset), us(walk.dst_offset));
    for _ in 0..rows / mid {
        let (mut sr, mut dr) = (s, d);
        for _ in 0..mid {
            let to = dst
                .get_mut(dr..dr.wrapping_add(if ds == 1 { row } else { 0 }))
                .ok_or(OUT_OF_BOUNDS)?;
            if unit {
                let from = src.get(sr..sr.wrapping_add(row)).ok_or(OUT_OF_BOUNDS)?;
                if row < SHORT_ROW {
                    short_copy(to, from);
                } else {
                    to.copy_from_slice(from);
                }
            } else if ds == 1 {
                // A contiguous output row (every slice's): one check per element read.
                let mut sj = sr;
                for o in to.iter_mut() {
                    *o = *src.get(sj).ok_or(OUT_OF_BOUNDS)?;
                    sj = sj.wrapping_add(ss);
                }
            } else if ss == 1 {
                // A contiguous input row scattered (a pack's along its last axis).
                let from = src.get(sr..sr.wrapping_add(row)).ok_or(OUT_OF_BOUNDS)?;
                let mut dj = dr;
                for i in from {
                    *dst.get_mut(dj).ok_or(OUT_OF_BOUNDS)? = *i;
                    dj = dj.wrapping_add(ds);
                }
            } else {
                let (mut sj, mut dj) = (sr, dr);
                for _ in 0..row {
                    *dst.get_mut(dj).ok_or(OUT_OF_BOUNDS)? = *src.get(sj).ok_or(OUT_OF_BOUNDS)?;
                    sj = sj.wrapping_add(ss);
                    dj = dj.wrapping_add(ds);
                }
            }
            sr = sr.wrapping_add(mid_src);
            dr = dr.wrapping_add(mid_dst);
        }
        // Odometer over the axes outside those two.
        let mut a = outer;
        while a > 0 {
            a -= 1;
            idx[a] += 1;
            s = s.wrapping_add(src_step[a]);
            d = d.wrapping_add(dst_step[a]);
            if idx[a] < walk.extents[a] {
                break;
            }
            s = s.wrapping_sub(src_back[a]);
            d = d.wrapping_sub(dst_back[a]);
            idx[a] = 0;
        }
    }
    Ok(())
}

/// Rows shorter than this (in elements) are copied by a loop of the kernel's own, longer ones
/// by `copy_from_slice` (a call to `memcpy`, whose set-up a short row does not repay).
pub const SHORT_ROW: usize = 64;

/// Copies a short row: four elements a step, a loop that costs less than a call to `memcpy`
/// (which a plain element loop would be turned into).
#[inline(always)]
fn short_copy<T: Copy>(to: &mut [T], from: &[T]) {
    let mut to = to.chunks_exact_mut(4);
    let mut from = from.chunks_exact(4);
    for (o, i) in (&mut to).zip(&mut from) {
        o[0] = i[0];
        o[1] = i[1];
        o[2] = i[2];
        o[3] = i[3];
    }
    for (o, i) in to.into_remainder().iter_mut().zip(from.remainder()) {
        *o = *i;
    }
}

/// Row-major strides (in elements) of a tensor with dimensions `dims` (zeros counted as 1),
/// refused ([`KernelError::ShapeOverflow`]) when that count exceeds `i32::MAX`: then every
/// product of a stride and an index within the tensor fits an `i32`.
fn row_major(dims: &[u32]) -> Result<[i32; MAX_DIMS], KernelError> {
    let mut strides = [0_i32; MAX_DIMS];
    let mut s = 1_i64;
    for (o, &d) in strides.iter_mut().zip(dims).rev() {
        *o = i32::try_from(s).map_err(|_| KernelError::ShapeOverflow)?;
        s = s.saturating_mul(i64::from(d.max(1)));
    }
    i32::try_from(s).map_err(|_| KernelError::ShapeOverflow)?;
    Ok(strides)
}

/// A slice of a tensor: along each axis `count` elements from `begin` every `stride`
/// (negative: backwards), written out contiguously in row-major order. SLICE is the case of
/// unit strides, STRIDED_SLICE the general one (its masks and negative indices resolved by the
/// caller), an output of SPLIT, SPLIT_V or UNPACK a slice along one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SliceParams {
    walk: Walk,
    input_len: u32,
    output: Dims,
    /// What it was made of, besides the counts (the output's dimensions): kept for
    /// [`Packed`], which makes it again from them.
    input: Dims,
    begin: [u32; MAX_DIMS],
    strides: [i32; MAX_DIMS],
}

impl SliceParams {
    /// The slice of an input of dimensions `input` taking, along axis `k`, `counts[k]`
    /// elements at `begin[k] + i · strides[k]`.
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank above [`MAX_DIMS`], a zero stride or an
    /// element outside the input (a `begin` outside `0..input[k]` when `counts[k] > 0`, or a
    /// last element past either end); [`KernelError::LengthMismatch`] when `begin`, `counts`
    /// or `strides` do not have one entry per axis; [`KernelError::ShapeOverflow`] for more
    /// than `i32::MAX` input elements.
    pub fn new(
        input: &[u32],
        begin: &[u32],
        counts: &[u32],
        strides: &[i32],
    ) -> Result<Self, KernelError> {
        let rank = input.len();
        if rank > MAX_DIMS {
            return Err(KernelError::Unsupported {
                what: "slice rank above 6",
            });
        }
        check_len("begin", rank, begin.len())?;
        check_len("counts", rank, counts.len())?;
        check_len("strides", rank, strides.len())?;
        let input_len = count(input)?;
        let in_strides = row_major(input)?;
        let out_strides = row_major(counts)?;
        let empty = counts.contains(&0);
        let mut src = [0_i32; MAX_DIMS];
        let mut offset = 0_i64;
        for k in 0..rank {
            if strides[k] == 0 {
                return Err(KernelError::Unsupported {
                    what: "slice stride 0",
                });
            }
            if !empty {
                let last = i64::from(begin[k]) + i64::from(counts[k] - 1) * i64::from(strides[k]);
                if begin[k] >= input[k] || !(0..i64::from(input[k])).contains(&last) {
                    return Err(KernelError::Unsupported {
                        what: "slice element outside the input",
                    });
                }
            }
            // With more than one element along the axis, |stride| < input[k] and the product
            // lies within the input; with one, the stride is never taken.
            src[k] = if counts[k] > 1 {
                i32::try_from(i64::from(strides[k]) * i64::from(in_strides[k]))
                    .map_err(|_| KernelError::ShapeOverflow)?
            } else {
                1
            };
            offset += i64::from(begin[k].min(input[k])) * i64::from(in_strides[k]);
        }
        let offset = u32::try_from(offset).map_err(|_| KernelError::ShapeOverflow)?;
        let walk = Walk::new(counts, (offset, &src[..rank]), (0, &out_strides[..rank]))?;
        let (mut b, mut st) = ([0; MAX_DIMS], [0; MAX_DIMS]);
        b[..rank].copy_from_slice(begin);
        st[..rank].copy_from_slice(strides);
        Ok(Self {
            walk,
            input_len,
            output: Dims::new(counts)?,
            input: Dims::new(input)?,
            begin: b,
            strides: st,
        })
    }

    /// Elements of the input.
    #[must_use]
    pub const fn input_elements(&self) -> usize {
        us(self.input_len)
    }

    /// Elements of the output.
    #[must_use]
    pub const fn output_elements(&self) -> usize {
        self.walk.elements()
    }

    /// The walk copying it.
    #[must_use]
    pub const fn walk(&self) -> &Walk {
        &self.walk
    }

    /// The output's dimensions: the counts (with any axis a shrink removes still there).
    #[must_use]
    pub const fn output_shape(&self) -> Dims {
        self.output
    }
}

/// Copies the slice `p` of `input` into `output`.
///
/// Errors: [`KernelError::LengthMismatch`] when `input` or `output` does not have the length
/// the parameters say (operands `"input"`, `"output"`).
pub fn slice<T: Copy>(p: &SliceParams, input: &[T], output: &mut [T]) -> Result<(), KernelError> {
    check_len("input", p.input_elements(), input.len())?;
    check_len("output", p.output_elements(), output.len())?;
    copy(&p.walk, input, output)
}

/// PACK: `count` inputs of `outer · inner` elements each, stacked along a new axis: the
/// output is `[outer][count][inner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PackParams {
    outer: u32,
    inner: u32,
    count: u32,
    /// The walk of input 0; input `k`'s is it shifted by `k · inner`.
    walk: Walk,
}

impl PackParams {
    /// Stacks `inputs` inputs of dimensions `input` along a new axis `axis` (`0..=rank`).
    ///
    /// Errors: [`KernelError::Unsupported`] for an axis past the rank, no input, or an input
    /// rank at or above [`MAX_DIMS`]; [`KernelError::ShapeOverflow`] when the output has more
    /// than `i32::MAX` elements.
    pub fn new(input: &[u32], axis: usize, inputs: u32) -> Result<Self, KernelError> {
        if input.len() >= MAX_DIMS {
            return Err(KernelError::Unsupported {
                what: "pack input rank above 5",
            });
        }
        if axis > input.len() || inputs == 0 {
            return Err(KernelError::Unsupported {
                what: "pack axis or input count",
            });
        }
        let outer = count(&input[..axis])?;
        let inner = count(&input[axis..])?;
        // The output's count and strides fit an i32.
        row_major(&[outer, inputs, inner])?;
        // The output's strides fit an i32, checked above.
        let walk = Walk::new(
            &[outer, inner],
            (0, &[inner as i32, 1]),
            (0, &[(inputs * inner) as i32, 1]),
        )?;
        Ok(Self {
            outer,
            inner,
            count: inputs,
            walk,
        })
    }

    /// Elements of each input.
    #[must_use]
    pub const fn input_elements(&self) -> usize {
        us(self.outer) * us(self.inner)
    }

    /// Elements of the output.
    #[must_use]
    pub const fn output_elements(&self) -> usize {
        self.input_elements() * us(self.count)
    }

    /// How many inputs.
    #[must_use]
    pub const fn inputs(&self) -> usize {
        us(self.count)
    }

    /// The walk copying input `k` into its place (the same for each but for its offset).
    ///
    /// Errors: [`KernelError::Unsupported`] for `k` past the inputs.
    pub fn walk(&self, k: u32) -> Result<Walk, KernelError> {
        if k >= self.count {
            return Err(KernelError::Unsupported {
                what: "pack input past the count",
            });
        }
        let shift = k * self.inner;
        let mut walk = self.walk;
        walk.dst_offset += shift;
        if walk.len > 0 {
            // Within the output: its last block ends at outer · count · inner.
            walk.dst_span += shift;
        }
        Ok(walk)
    }

    /// The output as `[outer, count, inner]`.
    #[must_use]
    pub const fn output_shape(&self) -> [u32; 3] {
        [self.outer, self.count, self.inner]
    }
}

/// Stacks `inputs` into `output` as `p` says.
///
/// Errors: [`KernelError::LengthMismatch`] for a number of inputs other than the parameters'
/// (operand `"inputs"`), or an input or output of another length (`"input"`, `"output"`).
pub fn pack<T: Copy>(p: &PackParams, inputs: &[&[T]], output: &mut [T]) -> Result<(), KernelError> {
    check_len("inputs", p.inputs(), inputs.len())?;
    check_len("output", p.output_elements(), output.len())?;
    for (k, input) in inputs.iter().enumerate() {
        check_len("input", p.input_elements(), input.len())?;
        copy(&p.walk(k as u32)?, input, output)?;
    }
    Ok(())
}

/// PAD and PADV2: the input surrounded, along each axis, by `before` and `after` elements of
/// a constant value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PadParams {
    walk: Walk,
    input_len: u32,
    output: Dims,
    /// What it was made of: kept for [`Packed`], which makes it again from them (the
    /// padding after the input is the output's dimensions less these).
    input: Dims,
    before: [u32; MAX_DIMS],
}

impl PadParams {
    /// Pads an input of dimensions `input` with `before[k]` elements before and `after[k]`
    /// after it along axis `k`.
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank above [`MAX_DIMS`];
    /// [`KernelError::LengthMismatch`] when `before` or `after` do not have one entry per
    /// axis; [`KernelError::ShapeOverflow`] when an output dimension or the output's element
    /// count overflows.
    pub fn new(input: &[u32], before: &[u32], after: &[u32]) -> Result<Self, KernelError> {
        let rank = input.len();
        if rank > MAX_DIMS {
            return Err(KernelError::Unsupported {
                what: "pad rank above 6",
            });
        }
        check_len("before", rank, before.len())?;
        check_len("after", rank, after.len())?;
        let mut out = [0_u32; MAX_DIMS];
        for k in 0..rank {
            out[k] = input[k]
                .checked_add(before[k])
                .and_then(|d| d.checked_add(after[k]))
                .ok_or(KernelError::ShapeOverflow)?;
        }
        let output = Dims::new(&out[..rank])?;
        let _ = count(output.as_slice())?;
        let input_len = count(input)?;
        let in_strides = row_major(input)?;
        let out_strides = row_major(output.as_slice())?;
        let mut offset = 0_i64;
        for k in 0..rank {
            offset += i64::from(before[k]) * i64::from(out_strides[k]);
        }
        // Within the output, whose count fits a u32.
        let offset = u32::try_from(offset).map_err(|_| KernelError::ShapeOverflow)?;
        let walk = Walk::new(
            input,
            (0, &in_strides[..rank]),
            (offset, &out_strides[..rank]),
        )?;
        let mut b = [0; MAX_DIMS];
        b[..rank].copy_from_slice(before);
        Ok(Self {
            walk,
            input_len,
            output,
            input: Dims::new(input)?,
            before: b,
        })
    }

    /// Elements of the input.
    #[must_use]
    pub const fn input_elements(&self) -> usize {
        us(self.input_len)
    }

    /// Elements of the output.
    #[must_use]
    pub fn output_elements(&self) -> usize {
        // Checked to fit a u32 by `new`.
        self.output.as_slice().iter().map(|&d| us(d)).product()
    }

    /// The output's dimensions.
    #[must_use]
    pub const fn output_shape(&self) -> Dims {
        self.output
    }

    /// The walk copying the input into its place.
    #[must_use]
    pub const fn walk(&self) -> &Walk {
        &self.walk
    }
}

/// Pads `input` into `output` with `value` as `p` says: what TFLM's `reference_ops::Pad` writes
/// (the pad value everywhere outside the input's place).
///
/// Errors: [`KernelError::LengthMismatch`] when `input` or `output` does not have the length
/// the parameters say (operands `"input"`, `"output"`), before anything is written.
pub fn pad<T: Copy>(
    p: &PadParams,
    value: T,
    input: &[T],
    output: &mut [T],
) -> Result<(), KernelError> {
    check_len("input", p.input_elements(), input.len())?;
    check_len("output", p.output_elements(), output.len())?;
    output.fill(value);
    copy(&p.walk, input, output)
}

/// MIRROR_PAD: the input surrounded by its own reflection along each axis, without the border
/// element (REFLECT) or with it (SYMMETRIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MirrorPadParams {
    input: Dims,
    output: Dims,
    before: [u32; MAX_DIMS],
    /// 1 for REFLECT, 0 for SYMMETRIC (TFLM's `offset`).
    offset: u8,
}

impl MirrorPadParams {
    /// Mirror-pads an input of dimensions `input` with `before[k]` and `after[k]` elements
    /// along axis `k`, reflecting without the border element (`reflect`) or with it.
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank above [`MAX_DIMS`], or a padding
    /// larger than the input's extent (less one for REFLECT), which TensorFlow refuses and
    /// TFLM would read outside its input for; [`KernelError::LengthMismatch`] when `before`
    /// or `after` do not have one entry per axis; [`KernelError::ShapeOverflow`] when the
    /// output's element count overflows.
    pub fn new(
        input: &[u32],
        before: &[u32],
        after: &[u32],
        reflect: bool,
    ) -> Result<Self, KernelError> {
        let rank = input.len();
        if rank > MAX_DIMS {
            return Err(KernelError::Unsupported {
                what: "mirror pad rank above 6",
            });
        }
        check_len("before", rank, before.len())?;
        check_len("after", rank, after.len())?;
        let offset = u32::from(reflect);
        let mut out = [0_u32; MAX_DIMS];
        let mut b = [0_u32; MAX_DIMS];
        for k in 0..rank {
            let limit = input[k].saturating_sub(offset);
            let padded = before[k] > 0 || after[k] > 0;
            if padded && (input[k] == 0 || before[k] > limit || after[k] > limit) {
                return Err(KernelError::Unsupported {
                    what: "mirror padding larger than the input",
                });
            }
            // At most 3 · input[k] by the check above.
            out[k] = input[k]
                .checked_add(before[k])
                .and_then(|d| d.checked_add(after[k]))
                .ok_or(KernelError::ShapeOverflow)?;
            b[k] = before[k];
        }
        let output = Dims::new(&out[..rank])?;
        let _ = count(output.as_slice())?;
        let _ = count(input)?;
        let _ = row_major(input)?;
        Ok(Self {
            input: Dims::new(input)?,
            output,
            before: b,
            offset: offset as u8,
        })
    }

    /// Elements of the input.
    #[must_use]
    pub fn input_elements(&self) -> usize {
        self.input.as_slice().iter().map(|&d| us(d)).product()
    }

    /// Elements of the output.
    #[must_use]
    pub fn output_elements(&self) -> usize {
        self.output.as_slice().iter().map(|&d| us(d)).product()
    }

    /// The output's dimensions.
    #[must_use]
    pub const fn output_shape(&self) -> Dims {
        self.output
    }

    /// Rows the kernel writes: runs along the output's innermost axis.
    #[must_use]
    pub fn rows(&self) -> usize {
        match self.output.as_slice().split_last() {
            Some((&last, _)) if last > 0 => self.output_elements() / us(last),
            _ => 0,
        }
    }

    /// The input coordinate output coordinate `p` of axis `k` reads: TFLM's
    /// `GetInputDimension`, with its clamps.
    fn source(&self, k: usize, p: u32) -> u32 {
        let (left, dim) = (
            i64::from(self.before[k]),
            i64::from(self.input.as_slice()[k]),
        );
        let offset = i64::from(self.offset);
        let p = i64::from(p);
        let i = if p < left {
            let original = left + offset - 1;
            original - p.min(original - offset)
        } else if p - left >= dim {
            let q = p - left - dim;
            let original = dim - (1 + offset);
            original - q.min(original)
        } else {
            p - left
        };
        // In 0..dim by the checks of `new`.
        i.clamp(0, dim.max(1) - 1) as u32
    }
}

/// Mirror-pads `input` into `output` as `p` says.
///
/// Errors: [`KernelError::LengthMismatch`] when `input` or `output` does not have the length
/// the parameters say (operands `"input"`, `"output"`), before anything is written.
pub fn mirror_pad<T: Copy>(
    p: &MirrorPadParams,
    input: &[T],
    output: &mut [T],
) -> Result<(), KernelError> {
    check_len("input", p.input_elements(), input.len())?;
    check_len("output", p.output_elements(), output.len())?;
    if output.is_empty() {
        return Ok(());
    }
    let rank = p.output.rank();
    if rank == 0 {
        output[0] = *input.first().ok_or(OUT_OF_BOUNDS)?;
        return Ok(());
    }
    let out_dims = p.output.as_slice();
    let in_strides = row_major(p.input.as_slice())?;
    let last = rank - 1;
    let row = us(out_dims[last]);
    // The innermost axis in three runs: its reflection before (the `before` elements after the
    // border, reversed), the input row, its reflection after. Under the checks of `new` these
    // are exactly the positions TFLM's `GetInputDimension` gives (its clamps never act).
    let dim = us(p.input.as_slice()[last]);
    let left = us(p.before[last]);
    let off = usize::from(p.offset);
    let right = row - dim - left;
    let mut idx = [0_u32; MAX_DIMS];
    for chunk in output.chunks_exact_mut(row) {
        let mut base = 0_usize;
        for k in 0..last {
            base += us(p.source(k, idx[k])) * in_strides[k] as usize;
        }
        let line = input.get(base..base + dim).ok_or(OUT_OF_BOUNDS)?;
        let (before, rest) = chunk.split_at_mut(left);
        let (middle, after) = rest.split_at_mut(dim);
        let reflected = line.get(off..off + left).ok_or(OUT_OF_BOUNDS)?;
        for (o, i) in before.iter_mut().zip(reflected.iter().rev()) {
            *o = *i;
        }
        middle.copy_from_slice(line);
        let end = dim.checked_sub(off).ok_or(OUT_OF_BOUNDS)?;
        let reflected = line
            .get(end.checked_sub(right).ok_or(OUT_OF_BOUNDS)?..end)
            .ok_or(OUT_OF_BOUNDS)?;
        for (o, i) in after.iter_mut().zip(reflected.iter().rev()) {
            *o = *i;
        }
        let mut a = last;
        while a > 0 {
            a -= 1;
            idx[a] += 1;
            if idx[a] < out_dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    Ok(())
}

/// The paddings after the input along each axis: the output's dimensions less the input's and
/// the paddings before it (as `new` added them up, so no subtraction underflows).
fn after(input: &Dims, before: &[u32; MAX_DIMS], output: &Dims) -> [u32; MAX_DIMS] {
    let mut after = [0; MAX_DIMS];
    for (k, (&i, &o)) in input.as_slice().iter().zip(output.as_slice()).enumerate() {
        after[k] = o - i - before[k];
    }
    after
}

/// Packed as what it is made of: the input's dimensions, the begin, the counts and the
/// strides; read back through [`SliceParams::new`].
impl Packed for SliceParams {
    fn pack(&self, w: &mut Words<'_>) {
        let rank = self.input.rank();
        self.input.pack(w);
        w.put_list(&self.begin[..rank]);
        self.output.pack(w);
        w.put_list_i32(&self.strides[..rank]);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input = Dims::unpack(r)?;
        let (begin, b) = r.take_list::<MAX_DIMS>()?;
        let counts = Dims::unpack(r)?;
        let (strides, s) = r.take_list_i32::<MAX_DIMS>()?;
        Self::new(
            input.as_slice(),
            &begin[..b],
            counts.as_slice(),
            &strides[..s],
        )
    }
}

/// Packed as `[outer, inner]` stacked along axis 1, which [`PackParams::new`] makes into the
/// same parameters as the input's dimensions did.
impl Packed for PackParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put(self.outer);
        w.put(self.inner);
        w.put(self.count);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (outer, inner, inputs) = (r.take()?, r.take()?, r.take()?);
        Self::new(&[outer, inner], 1, inputs)
    }
}

/// Packed as the input's dimensions and the paddings before and after it; read back through
/// [`PadParams::new`].
impl Packed for PadParams {
    fn pack(&self, w: &mut Words<'_>) {
        let rank = self.input.rank();
        self.input.pack(w);
        w.put_list(&self.before[..rank]);
        w.put_list(&after(&self.input, &self.before, &self.output)[..rank]);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input = Dims::unpack(r)?;
        let (before, b) = r.take_list::<MAX_DIMS>()?;
        let (after, a) = r.take_list::<MAX_DIMS>()?;
        Self::new(input.as_slice(), &before[..b], &after[..a])
    }
}

/// Packed as the input's dimensions, the paddings and the mode; read back through
/// [`MirrorPadParams::new`].
impl Packed for MirrorPadParams {
    fn pack(&self, w: &mut Words<'_>) {
        let rank = self.input.rank();
        self.input.pack(w);
        w.put_list(&self.before[..rank]);
        w.put_list(&after(&self.input, &self.before, &self.output)[..rank]);
        (self.offset == 1).pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input = Dims::unpack(r)?;
        let (before, b) = r.take_list::<MAX_DIMS>()?;
        let (after, a) = r.take_list::<MAX_DIMS>()?;
        let reflect = bool::unpack(r)?;
        Self::new(input.as_slice(), &before[..b], &after[..a], reflect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `0, 1, 2, ...` as i8.
    fn iota(n: usize) -> std::vec::Vec<i8> {
        (0..n).map(|i| i as i8).collect()
    }

    extern crate std;

    #[test]
    fn slice_with_negative_strides() {
        // [2][3][4], take [1..2][2,0][3,1] (strides 1, -2, -2).
        let x = iota(24);
        let p = SliceParams::new(&[2, 3, 4], &[1, 2, 3], &[1, 2, 2], &[1, -2, -2]).unwrap();
        let mut y = [0_i8; 4];
        slice(&p, &x, &mut y).unwrap();
        assert_eq!(y, [12 + 8 + 3, 12 + 8 + 1, 12 + 3, 12 + 1]);
    }

    #[test]
    fn slice_merges_rows_and_handles_empty() {
        let x: std::vec::Vec<i16> = (0..24).collect();
        let p = SliceParams::new(&[2, 3, 4], &[1, 0, 0], &[1, 3, 4], &[1, 1, 1]).unwrap();
        assert_eq!(p.walk.rank, 1);
        let mut y = [0_i16; 12];
        slice(&p, &x, &mut y).unwrap();
        assert_eq!(y.to_vec(), (12..24).collect::<std::vec::Vec<_>>());
        let p = SliceParams::new(&[2, 3, 4], &[5, 0, 0], &[0, 3, 4], &[1, 1, 1]).unwrap();
        slice(&p, &x, &mut []).unwrap();
    }

    #[test]
    fn slice_refuses_out_of_range() {
        let bad = |r| {
            assert!(matches!(r, Err(KernelError::Unsupported { .. })), "{r:?}");
        };
        bad(SliceParams::new(&[4], &[4], &[1], &[1]));
        bad(SliceParams::new(&[4], &[1], &[4], &[1]));
        bad(SliceParams::new(&[4], &[1], &[3], &[-1]));
        bad(SliceParams::new(&[4], &[0], &[1], &[0]));
        bad(SliceParams::new(&[1; 7], &[0; 7], &[1; 7], &[1; 7]));
        assert!(matches!(
            SliceParams::new(&[4], &[0, 0], &[1], &[1]),
            Err(KernelError::LengthMismatch { .. })
        ));
        let p = SliceParams::new(&[4], &[1], &[2], &[1]).unwrap();
        assert!(matches!(
            slice(&p, &[0_i8; 3], &mut [0; 2]),
            Err(KernelError::LengthMismatch { .. })
        ));
        assert!(matches!(
            slice(&p, &[0_i8; 4], &mut [0; 3]),
            Err(KernelError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn walk_checks_its_reach() {
        assert!(Walk::new(&[3], (1, &[-1]), (0, &[1])).is_err());
        let w = Walk::new(&[3], (2, &[-1]), (0, &[1])).unwrap();
        assert_eq!(w.source_span(), 3);
        let mut d = [0_i8; 3];
        copy(&w, &[1, 2, 3], &mut d).unwrap();
        assert_eq!(d, [3, 2, 1]);
        assert!(copy(&w, &[1, 2], &mut d).is_err());
        assert!(Walk::new(&[u32::MAX, 2], (0, &[1, 1]), (0, &[1, 1])).is_err());
        assert!(Walk::new(&[1 << 20], (0, &[1 << 20]), (0, &[1])).is_err());
    }

    #[test]
    fn pack_interleaves() {
        // Two [2][2] inputs along axis 1: [2][2][2].
        let p = PackParams::new(&[2, 2], 1, 2).unwrap();
        let mut y = [0_i8; 8];
        pack(&p, &[&[1, 2, 3, 4], &[5, 6, 7, 8]], &mut y).unwrap();
        assert_eq!(y, [1, 2, 5, 6, 3, 4, 7, 8]);
        assert!(pack(&p, &[&[1, 2, 3, 4]], &mut y).is_err());
        assert!(pack(&p, &[&[1, 2, 3], &[5, 6, 7, 8]], &mut y).is_err());
        assert!(PackParams::new(&[2, 2], 3, 2).is_err());
        assert!(PackParams::new(&[2, 2], 0, 0).is_err());
    }

    #[test]
    fn pad_fills_and_places() {
        let p = PadParams::new(&[2, 2], &[1, 0], &[0, 1]).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[3, 3]);
        let mut y = [0_i8; 9];
        pad(&p, -7, &[1, 2, 3, 4], &mut y).unwrap();
        assert_eq!(y, [-7, -7, -7, 1, 2, -7, 3, 4, -7]);
        assert!(pad(&p, 0, &[1, 2, 3], &mut y).is_err());
        assert!(PadParams::new(&[2], &[u32::MAX], &[0]).is_err());
        // Zero-size input: all padding.
        let p = PadParams::new(&[0, 2], &[1, 0], &[0, 0]).unwrap();
        let mut y = [0_i8; 2];
        pad(&p, 5, &[], &mut y).unwrap();
        assert_eq!(y, [5, 5]);
    }

    #[test]
    fn mirror_pad_rows_are_tflm_positions() {
        // The row runs against TFLM's per-element formula, every allowed padding of 1-D to
        // 2-D inputs.
        for reflect in [false, true] {
            for dim in 1..5_u32 {
                let limit = dim - u32::from(reflect);
                for (l, r) in (0..=limit).flat_map(|l| (0..=limit).map(move |r| (l, r))) {
                    let shape = [2, dim];
                    let p = MirrorPadParams::new(&shape, &[1, l], &[0, r], reflect).unwrap();
                    let x = iota(p.input_elements());
                    let mut y = std::vec![0_i8; p.output_elements()];
                    mirror_pad(&p, &x, &mut y).unwrap();
                    let width = (dim + l + r) as usize;
                    for (i, &v) in y.iter().enumerate() {
                        let (h, w) = ((i / width) as u32, (i % width) as u32);
                        let src = p.source(0, h) * dim + p.source(1, w);
                        assert_eq!(v, x[src as usize], "{reflect} {dim} {l} {r} at {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn mirror_pad_reflects() {
        let x = [1_i8, 2, 3];
        let p = MirrorPadParams::new(&[3], &[2], &[2], true).unwrap();
        let mut y = [0_i8; 7];
        mirror_pad(&p, &x, &mut y).unwrap();
        assert_eq!(y, [3, 2, 1, 2, 3, 2, 1]);
        let p = MirrorPadParams::new(&[3], &[2], &[3], false).unwrap();
        let mut y = [0_i8; 8];
        mirror_pad(&p, &x, &mut y).unwrap();
        assert_eq!(y, [2, 1, 1, 2, 3, 3, 2, 1]);
        assert!(MirrorPadParams::new(&[3], &[3], &[0], true).is_err());
        assert!(MirrorPadParams::new(&[3], &[0], &[4], false).is_err());
        // 2-D: rows reflected too.
        let p = MirrorPadParams::new(&[2, 2], &[1, 1], &[0, 0], false).unwrap();
        let mut y = [0_i8; 9];
        mirror_pad(&p, &[1, 2, 3, 4], &mut y).unwrap();
        assert_eq!(y, [1, 1, 2, 1, 1, 2, 3, 3, 4]);
    }
}
