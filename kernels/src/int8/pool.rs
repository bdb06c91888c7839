//! int8 AVERAGE_POOL_2D and MAX_POOL_2D.
//!
//! Arithmetic (TFLM `kernels/internal/reference/integer_ops/pooling.h`, parameters from
//! `micro/kernels/pooling_common.cc`): input and output share one quantization (TFLM requires
//! `|input_scale − output_scale| <= 1e−6` and equal zero points), so there is no rescaling.
//! For each output element the window's taps inside the image are visited (padding is
//! skipped; there is no dilation):
//!
//! ```text
//! AVERAGE: acc = Σ x (raw int8 values, zero point included), n = number of taps inside
//!          out = clamp(acc > 0 ? (acc + n/2) / n : (acc − n/2) / n, act_min, act_max)
//! MAX:     out = clamp(max(−128, max x), act_min, act_max)
//! ```
//!
//! The division truncates toward zero, so the average rounds half away from zero — of the raw
//! values, not of the zero-point-corrected ones: with zero point 10, raw inputs 10 and 11
//! average to 11 (10.5 rounded up), raw −10 and −11 to −11.
//!
//! The activation range is TFLM's `CalculateActivationRangeQuantized` on the output.

use super::mac::{Mac, Native};
use super::window::{elems, image_len, row_band, Axis, Nhwc, Padding};
use super::{activation_range, check_quant, Activation, Quant};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Shape of a pooling operator: input and window (TFLite's `Pool2DOptions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolShape {
    /// Input tensor dimensions (NHWC); the output has the same batches and channels.
    pub input: Nhwc,
    /// Window rows, at least 1.
    pub filter_height: u32,
    /// Window columns, at least 1.
    pub filter_width: u32,
    /// Vertical step between output rows, at least 1.
    pub stride_height: u32,
    /// Horizontal step between output columns, at least 1.
    pub stride_width: u32,
    /// Border treatment.
    pub padding: Padding,
}

impl Packed for PoolShape {
    fn pack(&self, w: &mut Words<'_>) {
        self.input.pack(w);
        for d in [
            self.filter_height,
            self.filter_width,
            self.stride_height,
            self.stride_width,
        ] {
            w.put(d);
        }
        self.padding.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(PoolShape {
            input: Nhwc::unpack(r)?,
            filter_height: r.take()?,
            filter_width: r.take()?,
            stride_height: r.take()?,
            stride_width: r.take()?,
            padding: Padding::unpack(r)?,
        })
    }
}

/// Precomputed parameters of int8 AVERAGE_POOL_2D and MAX_POOL_2D (TFLM's `OpDataPooling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolParams {
    rows: Axis,
    cols: Axis,
    batches: usize,
    channels: usize,
    input_len: usize,
    output_len: usize,
    activation_min: i32,
    activation_max: i32,
}

impl PoolParams {
    /// Resolves the geometry (TFLM's `ComputePaddingHeightWidth` with dilation 1) and the
    /// activation range.
    ///
    /// Errors: [`KernelError::Unsupported`] for zero window sizes or strides, or windows of
    /// more than `i32::MAX` taps; [`KernelError::ShapeOverflow`];
    /// [`KernelError::InvalidQuantization`] for bad scales or zero points, and (as TFLM) when
    /// the input and output scales differ by more than `1e−6` or their zero points differ.
    pub fn new(
        shape: PoolShape,
        input: Quant,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        Self::resolve(shape, || {
            check_quant(input, "input scale", "input zero point")?;
            check_quant(output, "output scale", "output zero point")?;
            // TFLM: (double)std::abs(input_scale − output_scale) <= 1e−6, the difference in
            // float.
            if f64::from((input.scale - output.scale).abs()) > 1.0e-6 {
                return Err(KernelError::InvalidQuantization {
                    what: "output scale differs from input scale",
                });
            }
            if input.zero_point != output.zero_point {
                return Err(KernelError::InvalidQuantization {
                    what: "output zero point differs from input zero point",
                });
            }
            activation_range(act, output)
        })
    }

    /// Writes the parameters' activation range ([`packed`](crate::packed)); the geometry is
    /// its shape's, which the caller writes.
    pub fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }

    /// Parameters of `shape` with the activation range [`pack`](Self::pack) wrote, the
    /// geometry resolved as [`new`](Self::new) resolves it.
    ///
    /// Errors as [`new`](Self::new), and for a range not inside int8.
    pub fn unpack(shape: PoolShape, r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let range = r.take_range(-128, 127)?;
        Self::resolve(shape, || Ok(range))
    }

    /// The geometry of `shape`, then the activation range `range` gives (its errors come
    /// after the geometry's).
    fn resolve(
        shape: PoolShape,
        range: impl FnOnce() -> Result<(i32, i32), KernelError>,
    ) -> Result<Self, KernelError> {
        let rows = Axis::new(
            shape.padding,
            shape.input.height,
            shape.filter_height,
            shape.stride_height,
            1,
        )?;
        let cols = Axis::new(
            shape.padding,
            shape.input.width,
            shape.filter_width,
            shape.stride_width,
            1,
        )?;
        // At most min(filter, in) taps per axis are ever counted: keep the count an i32.
        let max_taps = rows.filter.min(rows.in_size) as u64 * cols.filter.min(cols.in_size) as u64;
        if max_taps > i32::MAX as u64 {
            return Err(KernelError::Unsupported {
                what: "pooling window larger than i32::MAX taps",
            });
        }
        let out_dim = |v: usize| u32::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        let output_len = elems(&[
            shape.input.batches,
            out_dim(rows.out_size)?,
            out_dim(cols.out_size)?,
            shape.input.channels,
        ])?;
        let us = |v: u32| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        let (activation_min, activation_max) = range()?;
        Ok(Self {
            rows,
            cols,
            batches: us(shape.input.batches)?,
            channels: us(shape.input.channels)?,
            input_len: shape.input.len()?,
            output_len,
            activation_min,
            activation_max,
        })
    }

    /// Output tensor dimensions.
    #[must_use]
    pub fn output_shape(&self) -> Nhwc {
        Nhwc {
            batches: self.batches as u32,
            height: self.rows.out_size as u32,
            width: self.cols.out_size as u32,
            channels: self.channels as u32,
        }
    }

    /// Leading `(height, width)` padding (TFLM's `padding_values`).
    #[must_use]
    pub fn padding(&self) -> (usize, usize) {
        (self.rows.pad, self.cols.pad)
    }

    /// Inclusive `(min, max)` the outputs are clamped to.
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }

    /// Element counts `(input, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize) {
        (self.input_len, self.output_len)
    }

    /// Input tensor dimensions (for [`row_band`](Self::row_band) parameters, the band's).
    #[must_use]
    pub fn input_shape(&self) -> Nhwc {
        // Every dimension was checked to fit a u32 in `new` (a band's are no larger).
        Nhwc {
            batches: self.batches as u32,
            height: self.rows.in_size as u32,
            width: self.cols.in_size as u32,
            channels: self.channels as u32,
        }
    }

    /// Parameters that compute output rows `out_rows` from the band of input rows they read,
    /// and that band (`input_rows`), for running a layer in horizontal stripes: as
    /// [`Conv2dParams::row_band`](super::Conv2dParams::row_band), for both [`average_pool2d`]
    /// and [`max_pool2d`]. An average's divisor is the number of window taps inside the image,
    /// which are the taps inside the band, so it is unchanged.
    ///
    /// Errors: [`KernelError::Unsupported`] when the batch size is not 1, or `out_rows` is
    /// empty or reaches past the output's last row.
    ///
    /// ```
    /// use npu_kernels::int8::{Activation, Nhwc, Padding, PoolParams, PoolShape, Quant};
    ///
    /// // 2x2 max pool with stride 2 (VALID) of a 7x6x1 image: 3 output rows; row 6 is never read.
    /// let shape = PoolShape {
    ///     input: Nhwc { batches: 1, height: 7, width: 6, channels: 1 },
    ///     filter_height: 2, filter_width: 2, stride_height: 2, stride_width: 2,
    ///     padding: Padding::Valid,
    /// };
    /// let q = Quant { scale: 0.1, zero_point: 0 };
    /// let p = PoolParams::new(shape, q, q, Activation::None)?;
    /// let (band, rows) = p.row_band(0..3)?;
    /// assert_eq!(rows, 0..6);
    /// let (band, rows) = p.row_band(2..3)?;
    /// assert_eq!(rows, 4..6);
    /// assert_eq!(band.lens(), (2 * 6, 3));
    /// Ok::<(), npu_kernels::KernelError>(())
    /// ```
    pub fn row_band(
        &self,
        out_rows: core::ops::Range<u32>,
    ) -> Result<(Self, core::ops::Range<u32>), KernelError> {
        let (rows, input_rows) = row_band(&self.rows, self.batches, out_rows)?;
        let band = Self {
            rows,
            input_len: image_len(rows.in_size, self.cols.in_size, self.channels)?,
            output_len: image_len(rows.out_size, self.cols.out_size, self.channels)?,
            ..*self
        };
        Ok((band, input_rows))
    }

    /// Checks the buffers, then calls `pixel(window_rows, window_cols, in_image, out_pixel)`
    /// for every output pixel, where the windows are the input positions inside the image.
    fn for_each_pixel(
        &self,
        input: &[i8],
        output: &mut [i8],
        mut pixel: impl FnMut(core::ops::Range<usize>, core::ops::Range<usize>, &[i8], &mut [i8]),
    ) -> Result<(), KernelError> {
        check_len("input", self.input_len, input.len())?;
        check_len("output", self.output_len, output.len())?;
        if self.output_len == 0 {
            return Ok(());
        }
        // Non-empty output: all dimensions are at least 1 (a non-empty SAME or VALID output
        // implies a non-empty input), so no chunk size is 0.
        let (rows, cols, c) = (self.rows, self.cols, self.channels);
        for (in_image, out_image) in input
            .chunks_exact(rows.in_size * cols.in_size * c)
            .zip(output.chunks_exact_mut(rows.out_size * cols.out_size * c))
        {
            for (oy, out_row) in out_image.chunks_exact_mut(cols.out_size * c).enumerate() {
                let (ky0, ky1, iy0) = rows.taps(oy);
                for (ox, out_px) in out_row.chunks_exact_mut(c).enumerate() {
                    let (kx0, kx1, ix0) = cols.taps(ox);
                    pixel(
                        iy0..iy0 + (ky1 - ky0),
                        ix0..ix0 + (kx1 - kx0),
                        in_image,
                        out_px,
                    );
                }
            }
        }
        Ok(())
    }
}

/// Channels processed together (a stack accumulator of this many lanes).
const BLOCK: usize = 32;

/// Channels the SIMD paths (the DSP extension, Helium) take together per window pixel; those
/// past the last whole group take the scalar loop.
pub const SIMD_CHANNELS: usize = 16;

/// int8 AVERAGE_POOL_2D (TFLM's `reference_integer_ops::AveragePool`): see the
/// [module docs](self) for the rounding.
///
/// Layouts: `input` NHWC, `output` NHWC with [`PoolParams::output_shape`]. Errors with
/// [`KernelError::LengthMismatch`] before touching `output`.
///
/// With the DSP extension (in 16-bit lanes) and on Helium (in vector registers) sixteen
/// channels at a time are summed per window pixel; the bytes are the same on every path.
pub fn average_pool2d(p: &PoolParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    average_pool2d_with::<Native>(p, input, output)
}

/// [`average_pool2d`] on the window sums of `M`.
pub(crate) fn average_pool2d_with<M: Mac>(
    p: &PoolParams,
    input: &[i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    let (lo, hi) = (p.activation_min, p.activation_max);
    let c = p.channels;
    let row_len = p.cols.in_size * c;
    p.for_each_pixel(input, output, |ys, xs, image, out_px| {
        // Windows always overlap the image for the geometries `Axis` produces (TFLM would fail
        // the whole operator otherwise); `max(1)` only keeps the division total.
        let count = (ys.len() * xs.len()).max(1) as i32; // <= i32::MAX, checked in `new`
        let half = count / 2;
        let average = |a: i32| {
            let avg = if a > 0 {
                a.wrapping_add(half) / count
            } else {
                a.wrapping_sub(half) / count
            };
            avg.max(lo).min(hi) as i8
        };
        let mut c0 = 0;
        if M::WINDOW_SUM16 {
            let start = ys.start * row_len + xs.start * c;
            while c0 + SIMD_CHANNELS <= c {
                let rows = (ys.len(), row_len);
                let acc = M::window_sum16(image, start + c0, rows, (xs.len(), c));
                for (o, &a) in out_px[c0..c0 + SIMD_CHANNELS].iter_mut().zip(&acc) {
                    *o = average(a);
                }
                c0 += SIMD_CHANNELS;
            }
        }
        while c0 < c {
            let n = BLOCK.min(c - c0);
            let mut acc = [0_i32; BLOCK];
            for y in ys.clone() {
                let row = &image[y * row_len..][..row_len];
                for x in xs.clone() {
                    let px = &row[x * c + c0..][..n];
                    for (a, &v) in acc.iter_mut().zip(px) {
                        *a = a.wrapping_add(i32::from(v));
                    }
                }
            }
            for (o, &a) in out_px[c0..c0 + n].iter_mut().zip(&acc) {
                *o = average(a);
            }
            c0 += n;
        }
    })
}

/// int8 MAX_POOL_2D (TFLM's `reference_integer_ops::MaxPool`): the largest value among the
/// window's taps inside the image, clamped to the activation range.
///
/// Layouts and errors as [`average_pool2d`]. With the DSP extension (`SSUB8`/`SEL`) and on
/// Helium (`VMAX.S8`) sixteen channels at a time per window pixel; the same bytes.
pub fn max_pool2d(p: &PoolParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    max_pool2d_with::<Native>(p, input, output)
}

/// [`max_pool2d`] on the window maxima of `M`.
pub(crate) fn max_pool2d_with<M: Mac>(
    p: &PoolParams,
    input: &[i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    // The range lies within int8 (activation_range guarantees it).
    let (lo, hi) = (p.activation_min as i8, p.activation_max as i8);
    let c = p.channels;
    let row_len = p.cols.in_size * c;
    p.for_each_pixel(input, output, |ys, xs, image, out_px| {
        let mut c0 = 0;
        if M::WINDOW_MAX16 {
            let start = ys.start * row_len + xs.start * c;
            while c0 + SIMD_CHANNELS <= c {
                let rows = (ys.len(), row_len);
                let Some(max) = M::window_max16(image, start + c0, rows, (xs.len(), c)) else {
                    break;
                };
                for (o, &a) in out_px[c0..c0 + SIMD_CHANNELS].iter_mut().zip(&max) {
                    *o = a.max(lo).min(hi);
                }
                c0 += SIMD_CHANNELS;
            }
        }
        while c0 < c {
            let n = BLOCK.min(c - c0);
            let mut acc = [i8::MIN; BLOCK];
            for y in ys.clone() {
                let row = &image[y * row_len..][..row_len];
                for x in xs.clone() {
                    let px = &row[x * c + c0..][..n];
                    for (a, &v) in acc.iter_mut().zip(px) {
                        *a = (*a).max(v);
                    }
                }
            }
            for (o, &a) in out_px[c0..c0 + n].iter_mut().zip(&acc) {
                *o = a.max(lo).min(hi);
            }
            c0 += n;
        }
    })
}
