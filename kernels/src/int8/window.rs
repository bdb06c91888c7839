//! Sliding-window geometry shared by CONV_2D, DEPTHWISE_CONV_2D and the pooling operators.
//!
//! Along each spatial axis an output position `o` reads the input positions
//! `o · stride − pad + k · dilation` for filter taps `k = 0..filter`. The output size and the
//! leading padding follow TFLM's `ComputePaddingHeightWidth` (`tensorflow/lite/kernels/padding.h`):
//!
//! ```text
//! effective_filter = (filter − 1) · dilation + 1
//! SAME:  out = ceil(in / stride)
//! VALID: out = floor((in − effective_filter) / stride) + 1      (0 when in < effective_filter)
//! pad   = max((out − 1) · stride + effective_filter − in, 0) / 2  (floor: any odd extra
//!                                                                   padding goes at the end)
//! ```
//!
//! Taps that fall outside the image are skipped, never read as the zero point. The kernels
//! work out, once per output row and column, the contiguous range of taps that land inside
//! the image, so their inner loops have no border tests.

use crate::KernelError;

/// How a window treats the image border (TFLite's `Padding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Padding {
    /// Output size `ceil(in / stride)`; the window is centred, with implicit padding that is
    /// skipped (not read as zeros).
    Same,
    /// Only windows that fit entirely inside the image.
    Valid,
}

/// Dimensions of an NHWC tensor (`[batches][height][width][channels]`, row-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Nhwc {
    /// Images in the batch (N).
    pub batches: u32,
    /// Rows per image (H).
    pub height: u32,
    /// Columns per row (W).
    pub width: u32,
    /// Channels per pixel (C), the innermost dimension.
    pub channels: u32,
}

impl Nhwc {
    /// Element count, refusing counts no slice can have.
    pub(crate) fn len(self) -> Result<usize, KernelError> {
        elems(&[self.batches, self.height, self.width, self.channels])
    }
}

/// A 2-D sliding window: filter size, strides, dilations and padding (TFLite's
/// `Conv2DOptions` / `DepthwiseConv2DOptions` without the activation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Window2d {
    /// Filter rows (KH), at least 1.
    pub filter_height: u32,
    /// Filter columns (KW), at least 1.
    pub filter_width: u32,
    /// Vertical step between output rows, at least 1.
    pub stride_height: u32,
    /// Horizontal step between output columns, at least 1.
    pub stride_width: u32,
    /// Vertical distance between filter taps, at least 1 (1 = dense).
    pub dilation_height: u32,
    /// Horizontal distance between filter taps, at least 1 (1 = dense).
    pub dilation_width: u32,
    /// Border treatment.
    pub padding: Padding,
}

impl crate::packed::Packed for Padding {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        w.put(match self {
            Padding::Same => 0,
            Padding::Valid => 1,
        });
    }
    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        match r.take()? {
            0 => Ok(Padding::Same),
            1 => Ok(Padding::Valid),
            _ => Err(KernelError::Unsupported {
                what: "packed padding other than same (0) or valid (1)",
            }),
        }
    }
}

impl crate::packed::Packed for Nhwc {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        for d in [self.batches, self.height, self.width, self.channels] {
            w.put(d);
        }
    }
    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        let shape = Nhwc {
            batches: r.take()?,
            height: r.take()?,
            width: r.take()?,
            channels: r.take()?,
        };
        shape.len()?;
        Ok(shape)
    }
}

impl crate::packed::Packed for Window2d {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        for d in [
            self.filter_height,
            self.filter_width,
            self.stride_height,
            self.stride_width,
            self.dilation_height,
            self.dilation_width,
        ] {
            w.put(d);
        }
        self.padding.pack(w);
    }
    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        // Zero sizes are refused where the window is resolved ([`Axis::new`]).
        Ok(Window2d {
            filter_height: r.take()?,
            filter_width: r.take()?,
            stride_height: r.take()?,
            stride_width: r.take()?,
            dilation_height: r.take()?,
            dilation_width: r.take()?,
            padding: Padding::unpack(r)?,
        })
    }
}

/// One spatial axis of a window, resolved: sizes, padding, stride and dilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) struct Axis {
    pub(crate) in_size: usize,
    pub(crate) out_size: usize,
    pub(crate) filter: usize,
    pub(crate) pad: usize,
    pub(crate) stride: usize,
    pub(crate) dilation: usize,
}

impl Axis {
    /// Resolves an axis as TFLM's `ComputePaddingHeightWidth` does.
    ///
    /// Errors: [`KernelError::Unsupported`] for a zero filter size, stride or dilation;
    /// [`KernelError::ShapeOverflow`] when positions along the axis do not fit an `i32` (TFLM
    /// indexes with `int`).
    pub(crate) fn new(
        padding: Padding,
        in_size: u32,
        filter: u32,
        stride: u32,
        dilation: u32,
    ) -> Result<Self, KernelError> {
        if filter == 0 {
            return Err(KernelError::Unsupported {
                what: "filter size 0",
            });
        }
        if stride == 0 {
            return Err(KernelError::Unsupported { what: "stride 0" });
        }
        if dilation == 0 {
            return Err(KernelError::Unsupported { what: "dilation 0" });
        }
        let (in64, f64_, s64, d64) = (
            u64::from(in_size),
            u64::from(filter),
            u64::from(stride),
            u64::from(dilation),
        );
        // (2^32 − 2) · (2^32 − 1) + 1 < 2^64.
        let effective = (f64_ - 1) * d64 + 1;
        let out = match padding {
            Padding::Same => in64.div_ceil(s64),
            Padding::Valid if in64 >= effective => (in64 - effective) / s64 + 1,
            Padding::Valid => 0,
        };
        let (pad, reach) = if out == 0 {
            (0, 0)
        } else {
            // out − 1 < 2^32 and stride < 2^32: no overflow; reach < 2^65 is checked below.
            let last_origin = (out - 1) * s64;
            let reach = last_origin
                .checked_add(effective)
                .ok_or(KernelError::ShapeOverflow)?;
            (reach.saturating_sub(in64) / 2, reach)
        };
        // Every position the kernel computes (origins, tap positions, padded extents) is
        // below `reach + pad`; keep them within i32 like TFLM's `int` arithmetic.
        let limit = i32::MAX as u64;
        if reach.saturating_add(pad) > limit || in64 > limit {
            return Err(KernelError::ShapeOverflow);
        }
        let to_usize = |v: u64| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        Ok(Self {
            in_size: to_usize(in64)?,
            out_size: to_usize(out)?,
            filter: to_usize(f64_)?,
            pad: to_usize(pad)?,
            stride: to_usize(s64)?,
            dilation: to_usize(d64)?,
        })
    }

    /// The taps of output position `o` that land inside the image: `(first, end, in_pos)`,
    /// where taps `first..end` are valid and `in_pos` is the input position of tap `first`
    /// (tap `first + j` reads `in_pos + j · dilation`). `first == end` when none does.
    #[inline]
    pub(crate) fn taps(&self, o: usize) -> (usize, usize, usize) {
        // o < out_size, so o · stride <= reach < 2^31 (checked in `new`): no overflow.
        let pos = o * self.stride;
        let (first, in_pos) = if pos >= self.pad {
            (0, pos - self.pad)
        } else {
            let before = self.pad - pos; // input is `before` positions left of the image
            let first = before.div_ceil(self.dilation);
            (first, first * self.dilation - before)
        };
        if first >= self.filter || in_pos >= self.in_size {
            return (first, first, in_pos);
        }
        // Undilated (the usual case) without a division: it is paid per output position.
        let fit = if self.dilation == 1 {
            self.in_size - in_pos
        } else {
            (self.in_size - in_pos - 1) / self.dilation + 1
        };
        let end = self.filter.min(first + fit);
        (first, end, in_pos)
    }

    /// The axis that computes outputs `out` (non-empty, within `0..out_size`) from the band of
    /// input positions they read, and that band: `(band_axis, i0..i1)`.
    ///
    /// `i0` is the lowest input position any valid tap of an output in `out` reads and `i1`
    /// one past the highest. The band axis has `in_size = i1 − i0`, `out_size = out.len()` and
    /// leading padding `pad' = pad + i0 − out.start · stride`, so that output `o` of the
    /// original axis is output `o − out.start` of the band axis and its taps land at the same
    /// positions shifted by `−i0`:
    ///
    /// ```text
    /// origin'(o − o0) = (o − o0) · stride − pad' = o · stride − pad − i0 = origin(o) − i0
    /// ```
    ///
    /// `pad' >= 0`: every tap of output `o >= o0` lies at or after `origin(o) >= origin(o0)`,
    /// so the lowest valid tap `i0 >= origin(o0) = o0 · stride − pad`. A tap is inside the
    /// band (`i0 <= x < i1`) exactly when it is inside the image (`0 <= x < in_size`): every
    /// valid tap of these outputs lies in `i0..i1` by the choice of `i0` and `i1`, and
    /// `i0..i1` lies within `0..in_size`. So the band axis skips exactly the taps the original
    /// skips, and visits the others in the same order.
    ///
    /// When no output in `out` has a valid tap (a dilated filter whose taps all straddle a
    /// small image), the band is the single position `i0..i0 + 1` with `i0 =
    /// clamp(origin(o0), 0, in_size − 1)`, which no tap reads: the kernels need a non-empty
    /// input for a non-empty output, and a producer can always supply one row. `pad' >= 0`
    /// there too, since `origin(o) < in_size` for every output (`(out − 1) · stride < in` for
    /// SAME, `origin + effective_filter <= in` for VALID; on a band axis, an output with a
    /// valid tap has its origin at or before that tap, and one without has a negative origin,
    /// since tap 0 of an origin inside the image is valid).
    ///
    /// Visits only the outputs near the borders (those with taps outside the image), not the
    /// whole range.
    pub(crate) fn band(&self, out: core::ops::Range<usize>) -> (Self, core::ops::Range<usize>) {
        // Lowest valid tap: once an output's window starts inside the image (`first == 0`), its
        // first tap is valid (or no later output has any) and every later output's taps lie
        // after it.
        let mut lo: Option<usize> = None;
        for o in out.clone() {
            let (first, end, pos) = self.taps(o);
            if first < end {
                lo = Some(lo.map_or(pos, |l| l.min(pos)));
            }
            if first == 0 {
                break;
            }
        }
        // Highest valid tap: once an output's last filter tap is valid (`end == filter`),
        // every earlier output's taps lie before it.
        let mut hi: Option<usize> = None;
        for o in out.clone().rev() {
            let (first, end, pos) = self.taps(o);
            if first < end {
                // The last valid tap, `pos + (end − first − 1) · dilation`, is inside the image.
                let past = pos + (end - first - 1) * self.dilation + 1;
                hi = Some(hi.map_or(past, |h| h.max(past)));
                if end == self.filter {
                    break;
                }
            }
        }
        // Input position of output `out.start`'s tap 0 is `start_pos − pad` (may be negative).
        let start_pos = out.start * self.stride;
        let (i0, i1) = match (lo, hi) {
            (Some(lo), Some(hi)) => (lo, hi),
            _ => {
                let i0 = start_pos
                    .saturating_sub(self.pad)
                    .min(self.in_size.saturating_sub(1));
                (i0, (i0 + 1).min(self.in_size))
            }
        };
        // pad' = pad + i0 − o0 · stride >= 0 (see above); saturating only keeps this total.
        let pad = (self.pad + i0).saturating_sub(start_pos);
        let band = Self {
            in_size: i1 - i0,
            out_size: out.end - out.start,
            pad,
            ..*self
        };
        (band, i0..i1)
    }
}

/// The row band of a window operator's parameters: checks that the operator has one image and
/// that `out_rows` is a non-empty range of output rows, then returns the band of the row axis
/// (see [`Axis::band`]) and its input rows.
pub(crate) fn row_band(
    rows: &Axis,
    batches: usize,
    out_rows: core::ops::Range<u32>,
) -> Result<(Axis, core::ops::Range<u32>), KernelError> {
    if batches != 1 {
        return Err(KernelError::Unsupported {
            what: "row band of a batch size other than 1",
        });
    }
    if out_rows.start >= out_rows.end {
        return Err(KernelError::Unsupported {
            what: "row band of an empty range of output rows",
        });
    }
    let to_usize = |v: u32| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
    let (o0, o1) = (to_usize(out_rows.start)?, to_usize(out_rows.end)?);
    if o1 > rows.out_size {
        return Err(KernelError::Unsupported {
            what: "row band beyond the last output row",
        });
    }
    let (band, inputs) = rows.band(o0..o1);
    let to_u32 = |v: usize| u32::try_from(v).map_err(|_| KernelError::ShapeOverflow);
    Ok((band, to_u32(inputs.start)?..to_u32(inputs.end)?))
}

/// Element count of a one-image NHWC tensor of `rows × cols × channels`.
pub(crate) fn image_len(rows: usize, cols: usize, channels: usize) -> Result<usize, KernelError> {
    rows.checked_mul(cols)
        .and_then(|n| n.checked_mul(channels))
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or(KernelError::ShapeOverflow)
}

/// Product of dimensions as a slice length: refuses products that overflow `usize` or exceed
/// `isize::MAX` (the longest possible slice of bytes).
pub(crate) fn elems(dims: &[u32]) -> Result<usize, KernelError> {
    let mut n: usize = 1;
    for &d in dims {
        let d = usize::try_from(d).map_err(|_| KernelError::ShapeOverflow)?;
        n = n.checked_mul(d).ok_or(KernelError::ShapeOverflow)?;
    }
    if n > isize::MAX as usize {
        return Err(KernelError::ShapeOverflow);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn axis(p: Padding, i: u32, f: u32, s: u32, d: u32) -> (usize, usize) {
        let a = Axis::new(p, i, f, s, d).unwrap();
        (a.out_size, a.pad)
    }

    #[test]
    fn tflm_padding_formulas() {
        // SAME: out = ceil(in/stride); pad = floor(total/2).
        assert_eq!(axis(Padding::Same, 5, 3, 1, 1), (5, 1));
        assert_eq!(axis(Padding::Same, 5, 3, 2, 1), (3, 1));
        assert_eq!(axis(Padding::Same, 6, 3, 2, 1), (3, 0)); // total 1: all at the end
        assert_eq!(axis(Padding::Same, 4, 4, 1, 1), (4, 1)); // total 3 → 1 before, 2 after
        assert_eq!(axis(Padding::Same, 7, 3, 1, 2), (7, 2)); // effective filter 5
        assert_eq!(axis(Padding::Same, 1, 5, 3, 1), (1, 2));
        // VALID: no padding.
        assert_eq!(axis(Padding::Valid, 5, 3, 1, 1), (3, 0));
        assert_eq!(axis(Padding::Valid, 5, 3, 2, 1), (2, 0));
        assert_eq!(axis(Padding::Valid, 6, 3, 2, 1), (2, 0));
        assert_eq!(axis(Padding::Valid, 7, 3, 1, 2), (3, 0));
        assert_eq!(axis(Padding::Valid, 2, 3, 1, 1), (0, 0));
        assert_eq!(axis(Padding::Valid, 0, 1, 1, 1), (0, 0));
        assert_eq!(axis(Padding::Same, 0, 3, 1, 1), (0, 0));
    }

    #[test]
    fn rejects_degenerate_windows() {
        let e = |r: Result<Axis, KernelError>| r.unwrap_err();
        assert!(matches!(
            e(Axis::new(Padding::Same, 4, 0, 1, 1)),
            KernelError::Unsupported { .. }
        ));
        assert!(matches!(
            e(Axis::new(Padding::Same, 4, 3, 0, 1)),
            KernelError::Unsupported { .. }
        ));
        assert!(matches!(
            e(Axis::new(Padding::Same, 4, 3, 1, 0)),
            KernelError::Unsupported { .. }
        ));
        assert_eq!(
            e(Axis::new(Padding::Same, u32::MAX, 3, 1, 1)),
            KernelError::ShapeOverflow
        );
        assert_eq!(
            e(Axis::new(Padding::Same, 10, u32::MAX, 1, u32::MAX)),
            KernelError::ShapeOverflow
        );
    }

    /// Input positions of output `o`'s valid taps, by brute force.
    fn valid_taps(a: &Axis, o: usize) -> Vec<usize> {
        let origin = (o * a.stride) as isize - a.pad as isize;
        (0..a.filter)
            .map(|k| origin + (k * a.dilation) as isize)
            .filter(|&x| x >= 0 && x < a.in_size as isize)
            .map(|x| x as usize)
            .collect()
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn bands_match_brute_force() {
        let mut empty_bands = 0;
        for p in [Padding::Same, Padding::Valid] {
            for i in 1..10_u32 {
                for f in 1..6_u32 {
                    for s in 1..4_u32 {
                        for d in 1..5_u32 {
                            let a = Axis::new(p, i, f, s, d).unwrap();
                            for o0 in 0..a.out_size {
                                for o1 in o0 + 1..=a.out_size {
                                    let (b, rows) = a.band(o0..o1);
                                    let all: Vec<usize> =
                                        (o0..o1).flat_map(|o| valid_taps(&a, o)).collect();
                                    let ctx = (p, i, f, s, d, o0, o1);
                                    match (all.iter().min(), all.iter().max()) {
                                        (Some(&lo), Some(&hi)) => {
                                            assert_eq!(rows, lo..hi + 1, "{ctx:?}");
                                        }
                                        _ => {
                                            assert_eq!(rows.len(), 1, "{ctx:?}");
                                            empty_bands += 1;
                                        }
                                    }
                                    assert!(rows.end <= a.in_size, "{ctx:?}");
                                    assert_eq!(b.in_size, rows.len());
                                    assert_eq!(b.out_size, o1 - o0);
                                    assert_eq!(
                                        b.pad as isize,
                                        a.pad as isize + rows.start as isize
                                            - (o0 * a.stride) as isize,
                                        "{ctx:?}"
                                    );
                                    for o in o0..o1 {
                                        let want: Vec<usize> = valid_taps(&a, o)
                                            .into_iter()
                                            .map(|x| x - rows.start)
                                            .collect();
                                        assert_eq!(valid_taps(&b, o - o0), want, "{ctx:?} {o}");
                                    }
                                    // A band of a band is the same band.
                                    let (bb, inner) = b.band(0..o1 - o0);
                                    assert_eq!((bb, inner), (b, 0..b.in_size), "{ctx:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
        // Dilated filters whose taps all miss a small image occur above.
        assert!(empty_bands > 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn taps_match_brute_force() {
        for p in [Padding::Same, Padding::Valid] {
            for i in 0..9_u32 {
                for f in 1..6_u32 {
                    for s in 1..4_u32 {
                        for d in 1..4_u32 {
                            let a = Axis::new(p, i, f, s, d).unwrap();
                            for o in 0..a.out_size {
                                let origin = (o * a.stride) as isize - a.pad as isize;
                                let valid: [bool; 8] = core::array::from_fn(|k| {
                                    let x = origin + (k * a.dilation) as isize;
                                    k < a.filter && x >= 0 && x < a.in_size as isize
                                });
                                let (first, end, pos) = a.taps(o);
                                for (k, &v) in valid.iter().enumerate() {
                                    assert_eq!(
                                        v,
                                        (first..end).contains(&k),
                                        "{p:?} {i} {f} {s} {d} {o} {k}"
                                    );
                                }
                                if first < end {
                                    assert_eq!(
                                        pos as isize,
                                        origin + (first * a.dilation) as isize
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
