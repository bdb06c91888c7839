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
        let fit = (self.in_size - in_pos - 1) / self.dilation + 1;
        let end = self.filter.min(first + fit);
        (first, end, in_pos)
    }
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
    use super::*;

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

    #[test]
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
