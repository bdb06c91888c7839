//! int8 MEAN over any set of axes of a tensor of rank up to 6: global average pooling
//! (`[N, H, W, C]` over H and W, as TFLite converters emit it) and the row means of layer
//! normalization (`[1, 16, 32]` over the last axis).
//!
//! Arithmetic (TFLM `kernels/internal/reference/reduce.h` `QuantizedMeanOrSum`, parameters
//! from `micro/kernels/reduce_common.cc`):
//!
//! ```text
//! (m, s)  = QuantizeMultiplier(input_scale / output_scale)            (double)
//! n       = product of the reduced dimensions
//! k       = min(floor(log2 n), 32, 31 + s)
//! m'      = (m · 2^k) / n   (64-bit, truncating),  s' = s − k
//! sum     = Σ x over the reduced axes                                  (int32, wrapping)
//! out     = clamp(MultiplyByQuantizedMultiplier(sum − input_zp · n, m', s') + output_zp,
//!                 −128, 127)
//! ```
//!
//! The division by the element count is folded into the multiplier (with `k` extra bits of
//! precision), so the result is not always the correctly rounded mean. There is no fused
//! activation, and `keep_dims` does not change the bytes.
//!
//! This is the only int8 path of TFLM's MEAN, whatever the axes and whether or not the input
//! and output quantization are equal: TFLM once had a special 4-D kernel for axes 1 and 2 and
//! an integer-division path (`sum / n`, truncating) for equal scales and zero points, and
//! removed both in April 2023 ("Align mean kernel to TFL", tflite-micro #1908). An input with
//! a dimension of size 0 writes zeros, as TFLM does.
//!
//! Axes are resolved as TFLM's `ResolveAxis`: negative axes count from the end, duplicates are
//! ignored, an axis outside the shape is an error, and a scalar input ignores its axes.
//!
//! SUM is the same kernel without the count folded in: TFLM's `QuantizedMeanOrSum` with
//! `compute_sum`, `(m, s) = QuantizeMultiplier(input_scale / output_scale)` applied as it is
//! ([`MeanParams::for_sum`]). REDUCE_MAX ([`reduce_max`]) walks the same loops with TFLM's
//! `ReduceGeneric`: each output is the largest of its inputs, −128 (the initial value) where
//! it has none, and TFLM refuses it unless the input and output quantization are equal, so no
//! arithmetic touches the values; REDUCE_MIN ([`reduce_min`]) likewise with the smallest, and
//! 127. All four take their geometry from a [`ReduceShape`].

use super::{check_quant, general_multiplier, Nhwc, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Most dimensions a MEAN input may have.
pub const MAX_MEAN_RANK: usize = 6;

/// The geometry of a reduction: a tensor of rank up to 6 and the axes reduced, as TFLM's
/// `ResolveAxis` resolves them (see the [module docs](self)).
///
/// The shape is kept as at most six fused extents (outermost first): dimensions of size 1 are
/// dropped and neighbouring dimensions that are both reduced, or both kept, are merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReduceShape {
    /// Fused extents, outermost first; `rank` of them are used.
    dims: [u32; MAX_MEAN_RANK],
    /// Bit `i` set: `dims[i]` is reduced.
    reduced: u8,
    rank: u8,
    input_len: u32,
    output_len: u32,
    /// Product of the reduced dimensions (meaningful only for a non-empty input).
    count: u32,
}

impl ReduceShape {
    /// The reduction of a tensor of dimensions `shape` (outermost first, rank 0 to 6) over
    /// `axes` (TFLite's axis tensor: negative values count from the end, duplicates are
    /// ignored). The output holds the kept dimensions in order.
    ///
    /// Errors: [`KernelError::Unsupported`] `"rank above 6"` or `"axis out of range"` (TFLM
    /// fails the op on the latter); [`KernelError::ShapeOverflow`] for element counts above
    /// `u32::MAX` or that no slice can have.
    pub fn new(shape: &[u32], axes: &[i32]) -> Result<Self, KernelError> {
        if shape.len() > MAX_MEAN_RANK {
            return Err(KernelError::Unsupported {
                what: "rank above 6",
            });
        }
        // ResolveAxis. A scalar has no axes to resolve (TFLM returns before looking at them).
        let rank = shape.len() as i32; // at most 6
        let mut reduced_axes = 0_u8;
        if rank > 0 {
            for &axis in axes {
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
                reduced_axes |= 1 << resolved;
            }
        }

        let mut p = Self {
            dims: [0; MAX_MEAN_RANK],
            reduced: 0,
            rank: 0,
            input_len: 0,
            output_len: 0,
            count: 0,
        };
        let count = |n: u32, d: u32| n.checked_mul(d).ok_or(KernelError::ShapeOverflow);
        let (mut input_len, mut output_len, mut n) = (1_u32, 1_u32, 1_u32);
        let mut last = None;
        for (i, &d) in shape.iter().enumerate() {
            let is_reduced = reduced_axes >> i & 1 != 0;
            input_len = count(input_len, d)?;
            if is_reduced {
                n = n.saturating_mul(d); // only used when the input is not empty (see below)
            } else {
                output_len = count(output_len, d)?;
            }
            if d == 1 {
                continue; // neither a loop nor a factor of the count
            }
            let r = usize::from(p.rank);
            if last == Some(is_reduced) {
                p.dims[r - 1] = count(p.dims[r - 1], d)?;
            } else {
                p.dims[r] = d;
                p.reduced |= u8::from(is_reduced) << r;
                p.rank += 1;
                last = Some(is_reduced);
            }
        }
        for len in [input_len, output_len] {
            let len = usize::try_from(len).map_err(|_| KernelError::ShapeOverflow)?;
            if len > isize::MAX as usize {
                return Err(KernelError::ShapeOverflow);
            }
        }
        p.input_len = input_len;
        p.output_len = output_len;
        // Non-empty input: n divides input_len, so the saturating product above was exact.
        p.count = n;
        Ok(p)
    }

    /// The fused input extents, outermost first, and a bit mask of the reduced ones (bit `i`:
    /// extent `i`).
    #[must_use]
    pub fn extents(&self) -> (&[u32], u8) {
        (&self.dims[..usize::from(self.rank)], self.reduced)
    }

    /// Element counts `(input, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize) {
        // Both fit a usize: checked in `new`.
        (self.input_len as usize, self.output_len as usize)
    }

    /// The fused loop extents, outermost first, each with whether it is reduced.
    fn loops(&self) -> impl Iterator<Item = (usize, bool)> + '_ {
        self.dims[..usize::from(self.rank)]
            .iter()
            .enumerate()
            .map(|(i, &d)| (d as usize, self.reduced >> i & 1 != 0))
    }
}

/// Precomputed parameters of int8 MEAN or SUM (TFLM's `OpDataReduce`); see the [module
/// docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MeanParams {
    shape: ReduceShape,
    /// `input_zp · n`, subtracted from each sum (wrapping like TFLM's int32).
    zero_point_sum: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

impl MeanParams {
    /// Parameters for averaging an NHWC `input` over its height and width (axes 1 and 2); the
    /// output is `[batches][channels]` (with or without TFLite's `keep_dims`, the bytes are the
    /// same).
    ///
    /// Errors as [`MeanParams::for_axes`].
    pub fn new(input: Nhwc, input_q: Quant, output_q: Quant) -> Result<Self, KernelError> {
        let shape = [input.batches, input.height, input.width, input.channels];
        Self::for_axes(&shape, &[1, 2], input_q, output_q)
    }

    /// Parameters for averaging a tensor of dimensions `shape` (outermost first, rank 0 to 6)
    /// over `axes` (TFLite's axis tensor: negative values count from the end, duplicates are
    /// ignored). The output holds the kept dimensions in order.
    ///
    /// Errors: [`KernelError::Unsupported`] `"rank above 6"` or `"axis out of range"` (TFLM
    /// fails the op on the latter); [`KernelError::InvalidQuantization`] for bad scales or zero
    /// points or a multiplier `input_scale / output_scale` of `2^31` or more;
    /// [`KernelError::ShapeOverflow`] for element counts above `u32::MAX` or that no slice can
    /// have.
    pub fn for_axes(
        shape: &[u32],
        axes: &[i32],
        input_q: Quant,
        output_q: Quant,
    ) -> Result<Self, KernelError> {
        Self::build(ReduceShape::new(shape, axes)?, input_q, output_q, true)
    }

    /// Parameters for summing a tensor of dimensions `shape` over `axes` (TFLite's SUM: the
    /// sums rescaled by `input_scale / output_scale`, no division by the count).
    ///
    /// Errors as [`MeanParams::for_axes`].
    pub fn for_sum(
        shape: &[u32],
        axes: &[i32],
        input_q: Quant,
        output_q: Quant,
    ) -> Result<Self, KernelError> {
        Self::build(ReduceShape::new(shape, axes)?, input_q, output_q, false)
    }

    /// TFLM's `PrepareMeanOrSumHelper` and the multiplier adjustment of `QuantizedMeanOrSum`:
    /// `mean` folds the count into the multiplier.
    fn build(
        shape: ReduceShape,
        input_q: Quant,
        output_q: Quant,
        mean: bool,
    ) -> Result<Self, KernelError> {
        check_quant(input_q, "input scale", "input zero point")?;
        check_quant(output_q, "output scale", "output zero point")?;
        let real = f64::from(input_q.scale) / f64::from(output_q.scale);
        let (multiplier, shift) = general_multiplier(real, "output scale")?;
        let mut p = Self {
            shape,
            zero_point_sum: 0,
            output_zero_point: output_q.zero_point,
            multiplier,
            shift,
        };
        if shape.input_len == 0 {
            // TFLM writes zeros and returns before computing the count or the multiplier.
            return Ok(p);
        }
        let n = u64::from(shape.count);
        if mean {
            // floor(log2 n), clamped so the shift stays within MultiplyByQuantizedMultiplier's
            // range (shift ≥ −31 after the adjustment) and the 64-bit product cannot overflow.
            let k = (63 - n.leading_zeros() as i32)
                .min(32)
                .min(31 + shift)
                .max(0);
            // |multiplier| < 2^31 and k <= 32: the product fits an i64, and the quotient's
            // magnitude is at most |multiplier| because n >= 2^k.
            p.multiplier = ((i64::from(multiplier) << k) / n as i64) as i32;
            p.shift = shift - k;
        }
        // TFLM computes `temp_sum − input_zp · n` in 64 bits and truncates it to int32; the
        // same value mod 2^32 as these wrapping 32-bit operations.
        p.zero_point_sum = input_q.zero_point.wrapping_mul(n as u32 as i32);
        Ok(p)
    }

    /// `(multiplier, shift)` applied to the zero-point-corrected sums (for MEAN, the count
    /// folded in).
    #[must_use]
    pub const fn multiplier(&self) -> (i32, i32) {
        (self.multiplier, self.shift)
    }

    /// The geometry.
    #[must_use]
    pub const fn shape(&self) -> &ReduceShape {
        &self.shape
    }

    /// The fused input extents, outermost first, and a bit mask of the reduced ones (bit `i`:
    /// extent `i`).
    #[must_use]
    pub fn extents(&self) -> (&[u32], u8) {
        self.shape.extents()
    }

    /// Element counts `(input, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize) {
        self.shape.lens()
    }

    #[inline]
    fn requantize(&self, sum: i32) -> i8 {
        let scaled = multiply_by_quantized_multiplier(
            sum.wrapping_sub(self.zero_point_sum),
            self.multiplier,
            self.shift,
        );
        scaled.wrapping_add(self.output_zero_point).clamp(-128, 127) as i8
    }
}

/// Packed ([`packed`](crate::packed)) as the tensor and axes it reduces: the rank, the fused
/// extents and a mask of the reduced ones, read back through [`ReduceShape::new`] (the fused
/// extents are a shape whose reduction is itself: no size 1, no neighbours to merge).
impl Packed for ReduceShape {
    fn pack(&self, w: &mut Words<'_>) {
        let (dims, reduced) = self.extents();
        w.put(dims.len() as u32);
        for &d in dims {
            w.put(d);
        }
        w.put(reduced.into());
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let rank = r.take()? as usize;
        if rank > MAX_MEAN_RANK {
            return Err(KernelError::Unsupported {
                what: "rank above 6",
            });
        }
        let mut dims = [0u32; MAX_MEAN_RANK];
        for d in &mut dims[..rank] {
            *d = r.take()?;
        }
        let reduced = r.take()?;
        if reduced >> rank != 0 {
            return Err(KernelError::Unsupported {
                what: "axis out of range",
            });
        }
        let (mut axes, mut n) = ([0i32; MAX_MEAN_RANK], 0);
        for i in (0..rank).filter(|i| reduced >> i & 1 != 0) {
            axes[n] = i as i32; // below 6
            n += 1;
        }
        Self::new(&dims[..rank], &axes[..n])
    }
}

impl MeanParams {
    /// Writes the parameters ([`packed`](crate::packed)): the shape, the zero points and the
    /// rescaling (for MEAN, the count folded in).
    pub fn pack(&self, w: &mut Words<'_>) {
        self.shape.pack(w);
        // The input zero point whose multiple by the count the sums are corrected by: one
        // exists (`build` made it so), and any such gives the same correction.
        let n = self.shape.zero_point_count() as i32;
        let input_zero_point = (i32::from(i8::MIN)..=i32::from(i8::MAX))
            .find(|zp| zp.wrapping_mul(n) == self.zero_point_sum)
            .unwrap_or(0);
        w.put_i32(input_zero_point);
        w.put_i32(self.output_zero_point);
        w.put_multiplier((self.multiplier, self.shift));
    }

    /// Reads what [`pack`](Self::pack) wrote, for MEAN (`mean`) or SUM: the shape resolved as
    /// [`ReduceShape::new`] resolves it, zero points of int8, and a rescaling as `build` makes
    /// it: for SUM as `quantize_multiplier` gives one; for MEAN, whose multiplier has the
    /// count divided into it, a non-negative multiplier and a shift in `−31..=31` (which
    /// [`multiply_by_quantized_multiplier`] applies, as any pair, without panicking).
    ///
    /// Errors: as [`ReduceShape::new`]; [`KernelError::InvalidQuantization`] for quantization
    /// no int8 layer has.
    pub fn unpack(r: &mut WordReader<'_>, mean: bool) -> Result<Self, KernelError> {
        let shape = ReduceShape::unpack(r)?;
        let input_zero_point = r.take_zero_point("input zero point")?;
        let output_zero_point = r.take_zero_point("output zero point")?;
        let (multiplier, shift) = if mean {
            (
                r.take_in(0, i32::MAX, "output scale")?,
                r.take_in(-31, 31, "output scale")?,
            )
        } else {
            r.take_multiplier(31, "output scale")?
        };
        Ok(Self {
            shape,
            zero_point_sum: input_zero_point.wrapping_mul(shape.zero_point_count() as i32),
            output_zero_point,
            multiplier,
            shift,
        })
    }
}

impl ReduceShape {
    /// The count the zero point is multiplied by: the reduced elements per output, or 0 for
    /// an empty input (TFLM's correction is then never computed).
    fn zero_point_count(&self) -> u32 {
        if self.input_len == 0 {
            0
        } else {
            self.count
        }
    }
}

/// Lanes of the stack accumulator when the innermost dimension is kept.
const BLOCK: usize = 32;

/// Up to [`MAX_MEAN_RANK`] nested loops, each an `(extent, stride)`, outermost first.
#[derive(Clone, Copy)]
struct Nest {
    loops: [(usize, usize); MAX_MEAN_RANK],
    len: usize,
}

impl Nest {
    const EMPTY: Self = Self {
        loops: [(1, 0); MAX_MEAN_RANK],
        len: 0,
    };

    fn push(&mut self, extent: usize, stride: usize) {
        self.loops[self.len] = (extent, stride);
        self.len += 1;
    }

    /// Calls `f` with the offset `Σ index · stride` of every point of the nest, in row-major
    /// order (once, with 0, for an empty nest). Extents are at least 2 here.
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize)) {
        let loops = &self.loops[..self.len];
        let mut index = [0_usize; MAX_MEAN_RANK];
        let mut offset = 0;
        loop {
            f(offset);
            let mut d = loops.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                offset += loops[d].1;
                if index[d] < loops[d].0 {
                    break;
                }
                index[d] = 0;
                offset -= loops[d].0 * loops[d].1;
            }
        }
    }
}

/// Walks the reduction `shape` of `input` into `output`: each output starts at `init`, takes
/// each of its inputs with `step`, and is written with `finish`. Lengths are checked by the
/// caller; an empty input leaves `output` alone.
#[inline(always)]
fn walk<A: Copy>(
    shape: &ReduceShape,
    input: &[i8],
    output: &mut [i8],
    init: A,
    step: impl Fn(A, i8) -> A,
    finish: impl Fn(A) -> i8,
) {
    let (input_len, output_len) = shape.lens();
    if output_len == 0 || input_len == 0 {
        return;
    }
    // Strides of the fused loops in the input, and the loops split by kind. Every fused extent
    // is at least 2 (the input is not empty and size-1 dimensions were dropped).
    let mut kept = Nest::EMPTY;
    let mut reduced = Nest::EMPTY;
    let mut stride = input_len;
    let mut innermost = None;
    for (extent, is_reduced) in shape.loops() {
        stride /= extent; // exact: the extents' product is input_len
        if is_reduced {
            reduced.push(extent, stride);
        } else {
            kept.push(extent, stride);
        }
        innermost = Some((extent, is_reduced));
    }

    match innermost {
        // Rank 0 after fusing: every dimension is 1, a single element.
        None => output[0] = finish(step(init, input[0])),
        Some((run, true)) => {
            // The innermost loop is reduced: each output takes contiguous runs of `run`
            // inputs, one run per point of the other reduced loops.
            reduced.len -= 1;
            let mut outputs = output.iter_mut();
            kept.for_each(|base| {
                let mut acc = init;
                reduced.for_each(|offset| {
                    let start = base + offset;
                    for &x in &input[start..start + run] {
                        acc = step(acc, x);
                    }
                });
                if let Some(o) = outputs.next() {
                    *o = finish(acc);
                }
            });
        }
        Some((width, false)) => {
            // The innermost loop is kept: outputs come in rows of `width`, each reduced over
            // the reduced loops, `BLOCK` lanes at a time in a stack accumulator.
            kept.len -= 1;
            let mut rows = output.chunks_exact_mut(width);
            kept.for_each(|base| {
                let Some(row) = rows.next() else { return };
                for (block, out) in row.chunks_mut(BLOCK).enumerate() {
                    let lane0 = base + block * BLOCK;
                    let mut acc = [init; BLOCK];
                    reduced.for_each(|offset| {
                        let start = lane0 + offset;
                        for (a, &x) in acc.iter_mut().zip(&input[start..start + out.len()]) {
                            *a = step(*a, x);
                        }
                    });
                    for (o, &a) in out.iter_mut().zip(&acc) {
                        *o = finish(a);
                    }
                }
            });
        }
    }
}

/// int8 MEAN or SUM (see the [module docs](self)), as the parameters say.
///
/// Layouts: `input` row-major in the shape given to [`MeanParams::for_axes`], `output` the kept
/// dimensions in order. Errors with [`KernelError::LengthMismatch`] before touching `output`.
pub fn mean(p: &MeanParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    let (input_len, output_len) = p.lens();
    check_len("input", input_len, input.len())?;
    check_len("output", output_len, output.len())?;
    if input_len == 0 {
        output.fill(0);
        return Ok(());
    }
    walk(
        &p.shape,
        input,
        output,
        0_i32,
        |sum, x| sum.wrapping_add(i32::from(x)),
        |sum| p.requantize(sum),
    );
    Ok(())
}

/// int8 SUM: [`mean`] with parameters from [`MeanParams::for_sum`].
pub fn sum(p: &MeanParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    mean(p, input, output)
}

/// int8 REDUCE_MIN over `shape`: [`reduce_max`] with the minimum, 127 (TFLM's initial value)
/// where an output has no input.
///
/// Errors with [`KernelError::LengthMismatch`] before touching `output`.
pub fn reduce_min(shape: &ReduceShape, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    let (input_len, output_len) = shape.lens();
    check_len("input", input_len, input.len())?;
    check_len("output", output_len, output.len())?;
    if input_len == 0 {
        output.fill(i8::MAX);
        return Ok(());
    }
    walk(
        shape,
        input,
        output,
        i32::from(i8::MAX),
        |m, x| m.min(i32::from(x)),
        |m| m as i8,
    );
    Ok(())
}

/// int8 REDUCE_MAX over `shape` (TFLM's `ReduceGeneric` with the maximum): the input and
/// output quantization are equal (the caller checks; TFLM refuses the op otherwise), so the
/// values are compared as they are. An output with no input (a reduced dimension of size 0)
/// is −128, TFLM's initial value.
///
/// Errors with [`KernelError::LengthMismatch`] before touching `output`.
pub fn reduce_max(shape: &ReduceShape, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    let (input_len, output_len) = shape.lens();
    check_len("input", input_len, input.len())?;
    check_len("output", output_len, output.len())?;
    if input_len == 0 {
        output.fill(i8::MIN);
        return Ok(());
    }
    // An i32 accumulator: the same loads and compares as MEAN's sums, without narrowing.
    walk(
        shape,
        input,
        output,
        i32::from(i8::MIN),
        |m, x| m.max(i32::from(x)),
        |m| m as i8,
    );
    Ok(())
}

/// int8 MEAN over height and width: [`mean`] with parameters from [`MeanParams::new`] (kept
/// for callers of the spatial-only version; both accept any [`MeanParams`]).
pub fn mean_hw(p: &MeanParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    mean(p, input, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn sum_rescales_without_dividing() {
        // [2, 3] over the last axis, scale ratio 2 (shift 2 with multiplier 2^30), zp 1 in.
        let p = MeanParams::for_sum(&[2, 3], &[-1], q(1.0, 1), q(0.5, -2)).unwrap();
        assert_eq!(p.multiplier(), (1 << 30, 2));
        let mut out = [0; 2];
        sum(&p, &[1, 2, 3, 10, 20, 100], &mut out).unwrap();
        // (6 − 3) · 2 − 2 = 4; (130 − 3) · 2 − 2 = 252 → 127.
        assert_eq!(out, [4, 127]);
        assert!(sum(&p, &[0; 5], &mut out).is_err());
        assert!(sum(&p, &[0; 6], &mut out[..1]).is_err());
    }

    #[test]
    fn reduce_max_takes_the_largest_and_fills_empty_reductions() {
        let s = ReduceShape::new(&[2, 3, 2], &[1]).unwrap();
        let mut out = [0; 4];
        reduce_max(&s, &[1, -5, 7, -6, 3, -7, 0, 0, -1, 9, -128, 4], &mut out).unwrap();
        assert_eq!(out, [7, -5, 0, 9]);
        // Innermost reduced, with duplicates and a negative axis.
        let s = ReduceShape::new(&[2, 3], &[1, -1]).unwrap();
        let mut out = [0; 2];
        reduce_max(&s, &[-3, -2, -1, 5, 4, 3], &mut out).unwrap();
        assert_eq!(out, [-1, 5]);
        // A reduced dimension of size 0: every output has no input.
        let s = ReduceShape::new(&[3, 0], &[1]).unwrap();
        let mut out = [5; 3];
        reduce_max(&s, &[], &mut out).unwrap();
        assert_eq!(out, [-128; 3]);
        assert!(reduce_max(&s, &[1], &mut out).is_err());
        assert!(reduce_max(&s, &[], &mut out[..2]).is_err());
    }

    #[test]
    fn reduce_min_takes_the_smallest_and_fills_empty_reductions() {
        let s = ReduceShape::new(&[2, 3, 2], &[1]).unwrap();
        let mut out = [0; 4];
        reduce_min(&s, &[1, -5, 7, -6, 3, -7, 0, 0, -1, 9, -128, 4], &mut out).unwrap();
        assert_eq!(out, [1, -7, -128, 0]);
        let s = ReduceShape::new(&[3, 0], &[-1]).unwrap();
        let mut out = [5; 3];
        reduce_min(&s, &[], &mut out).unwrap();
        assert_eq!(out, [127; 3]);
        assert!(reduce_min(&s, &[], &mut out[..1]).is_err());
    }

    #[test]
    fn bad_shapes_and_axes_are_refused() {
        assert!(ReduceShape::new(&[2, 3], &[2]).is_err());
        assert!(ReduceShape::new(&[2, 3], &[-3]).is_err());
        assert!(ReduceShape::new(&[2, 3], &[i32::MIN]).is_err());
        assert!(ReduceShape::new(&[1; 7], &[0]).is_err());
        assert!(ReduceShape::new(&[u32::MAX, 2], &[0]).is_err());
        // A scalar ignores its axes, as TFLM does.
        assert_eq!(ReduceShape::new(&[], &[5]).unwrap().lens(), (1, 1));
    }
}
