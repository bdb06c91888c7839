//! RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR: an NHWC image scaled to a new height and width.
//!
//! TFLM (`micro/kernels/resize_nearest_neighbor.cc`, `micro/kernels/resize_bilinear.cc`,
//! `kernels/internal/reference/resize_nearest_neighbor.h` and `resize_bilinear.h`):
//!
//! - **Nearest neighbour** (int8 and int16 here; any element type, it copies pixels): output
//!   row `y` reads input row
//!
//!   ```text
//!   scale = align_corners && out > 1 ? (in − 1) / (out − 1) : in / out        (float)
//!   v     = (y + (half_pixel_centers ? 0.5 : 0)) · scale                       (float)
//!   in_y  = min(align_corners ? round(v) : floor(v), in − 1)   (then max(·, 0) if half pixel)
//!   ```
//!
//!   in `float` arithmetic, exactly as TFLM computes it (`round` ties away from zero); columns
//!   likewise. The quantization passes through unchanged.
//! - **Bilinear** (int8; TFLM's `ResizeBilinearInteger`, no floating point): scales in
//!   1/1024ths, `scale_10 = (1024 · in + out / 2) / out` (with `in − 1` and `out − 1` under
//!   `align_corners`), each output position `v = y · scale_10` (or
//!   `y · scale_10 + scale_10 / 2 − 512` with half-pixel centres), the rows
//!   `y0 = max(v / 1024, 0)` and `y1 = min(ceil(v / 1024), in − 1)` (C division, truncating),
//!   and the four neighbours weighted in 1/2^20ths, summed in 64 bits and divided by 2^20
//!   rounding half away from zero (TFLM's default, double-rounding build).
//!
//! TFLM leaves two cases undefined that these kernels refuse when the parameters are built
//! ([`KernelError::Unsupported`]): an empty input with a non-empty output (TFLM reads before
//! the input), and a bilinear scale whose rounding carries `y0` past the last input row (for
//! example 1 row resized to 70: TFLM reads past the input). Position arithmetic that would
//! overflow TFLM's `int32` is refused too ([`KernelError::ShapeOverflow`]).

use super::dims::us;
use super::window::Nhwc;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed RESIZE_NEAREST_NEIGHBOR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeNearestParams {
    input: Nhwc,
    out_height: u32,
    out_width: u32,
    align_corners: bool,
    half_pixel_centers: bool,
}

impl ResizeNearestParams {
    /// Resizes `input` to `out_height × out_width` (batches and channels unchanged).
    ///
    /// Errors: [`KernelError::Unsupported`] for an empty input height or width with a
    /// non-empty output; [`KernelError::ShapeOverflow`] for element counts no slice can have
    /// or sizes beyond `i32`.
    pub fn new(
        input: Nhwc,
        out_height: u32,
        out_width: u32,
        align_corners: bool,
        half_pixel_centers: bool,
    ) -> Result<Self, KernelError> {
        let p = Self {
            input,
            out_height,
            out_width,
            align_corners,
            half_pixel_centers,
        };
        check_sizes(input, p.output_shape())?;
        Ok(p)
    }

    /// The input's shape.
    #[must_use]
    pub const fn input_shape(&self) -> Nhwc {
        self.input
    }

    /// The output's shape.
    #[must_use]
    pub const fn output_shape(&self) -> Nhwc {
        Nhwc {
            height: self.out_height,
            width: self.out_width,
            ..self.input
        }
    }
}

/// The words of a resize: the input's shape, the output's size, and the two sampling flags.
fn pack_resize(input: Nhwc, out: (u32, u32), flags: (bool, bool), w: &mut Words<'_>) {
    input.pack(w);
    w.put(out.0);
    w.put(out.1);
    flags.0.pack(w);
    flags.1.pack(w);
}

/// Reads what [`pack_resize`] wrote and makes the parameters with `new` from it.
fn unpack_resize<P>(
    r: &mut WordReader<'_>,
    new: fn(Nhwc, u32, u32, bool, bool) -> Result<P, KernelError>,
) -> Result<P, KernelError> {
    let input = Nhwc::unpack(r)?;
    let (height, width) = (r.take()?, r.take()?);
    let (align, half) = (bool::unpack(r)?, bool::unpack(r)?);
    new(input, height, width, align, half)
}

/// Packed as what made it; read back through [`ResizeNearestParams::new`].
impl Packed for ResizeNearestParams {
    fn pack(&self, w: &mut Words<'_>) {
        let out = (self.out_height, self.out_width);
        pack_resize(
            self.input,
            out,
            (self.align_corners, self.half_pixel_centers),
            w,
        );
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        unpack_resize(r, Self::new)
    }
}

/// Packed as what made it; read back through [`ResizeBilinearParams::new`].
impl Packed for ResizeBilinearParams {
    fn pack(&self, w: &mut Words<'_>) {
        let out = (self.out_height, self.out_width);
        pack_resize(
            self.input,
            out,
            (self.align_corners, self.half_pixel_centers),
            w,
        );
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        unpack_resize(r, Self::new)
    }
}

/// Refuses shapes the kernels cannot index: counts beyond a slice, sizes beyond `i32`, and an
/// empty input image resized to a non-empty one.
fn check_sizes(input: Nhwc, output: Nhwc) -> Result<(), KernelError> {
    input.len()?;
    let out_len = output.len()?;
    let dims = [input.height, input.width, output.height, output.width];
    if dims.iter().any(|&d| i32::try_from(d).is_err()) {
        return Err(KernelError::ShapeOverflow);
    }
    if out_len > 0 && (input.height == 0 || input.width == 0) {
        return Err(KernelError::Unsupported {
            what: "resize of an empty image",
        });
    }
    Ok(())
}

/// `floor(x)` for a non-negative finite `f32`, as an index (truncation equals floor there).
fn floor_index(x: f32) -> i32 {
    x as i32
}

/// TFLM's `GetNearestNeighbor`, in its `float` arithmetic.
fn nearest(value: u32, input_size: u32, output_size: u32, align: bool, half: bool) -> usize {
    let (input_size, output_size) = (input_size as i32, output_size as i32); // < 2^31, checked
    let scale = if align && output_size > 1 {
        (input_size - 1) as f32 / (output_size - 1) as f32
    } else {
        input_size as f32 / output_size as f32
    };
    let offset = if half { 0.5_f32 } else { 0.0 };
    let v = (value as i32 as f32 + offset) * scale;
    let index = if align {
        super::round_half_away_from_zero(v) as i32
    } else {
        floor_index(v)
    };
    // v ≥ 0, so the index is never below 0; TFLM's max(·, 0) under half pixel is a no-op.
    us(index.min(input_size - 1).max(0) as u32)
}

/// Output columns whose input columns [`resize_nearest`] works out at once: the float
/// arithmetic of a column is then done once per chunk, not once per pixel.
const COLUMNS: usize = 64;

/// RESIZE_NEAREST_NEIGHBOR (see the [module docs](self)) over elements of any type (int8 and
/// int16 models use it): `input` and `output` must have the parameters' input and output
/// element counts ([`KernelError::LengthMismatch`]).
///
/// The output is written in chunks of up to 64 columns, every row of every image for one
/// chunk before the next, so each column's input column is computed once.
pub fn resize_nearest<T: Copy>(
    p: &ResizeNearestParams,
    input: &[T],
    output: &mut [T],
) -> Result<(), KernelError> {
    let (i, o) = (p.input, p.output_shape());
    check_len("input", i.len()?, input.len())?;
    check_len("output", o.len()?, output.len())?;
    if output.is_empty() {
        return Ok(()); // also when the depth is 0
    }
    let depth = us(i.channels);
    let row = us(i.width) * depth;
    let image = us(i.height) * row;
    let out_row = us(o.width) * depth;
    let (align, half) = (p.align_corners, p.half_pixel_centers);
    let mut columns = [0_usize; COLUMNS];
    for x0 in (0..o.width).step_by(COLUMNS) {
        let n = (o.width - x0).min(COLUMNS as u32);
        for (k, c) in columns.iter_mut().take(us(n)).enumerate() {
            *c = nearest(x0 + k as u32, i.width, o.width, align, half) * depth;
        }
        let columns = &columns[..us(n)];
        let start = us(x0) * depth;
        for b in 0..us(i.batches) {
            let image_in = &input[b * image..(b + 1) * image];
            for y in 0..o.height {
                let in_y = nearest(y, i.height, o.height, align, half);
                let row_in = &image_in[in_y * row..(in_y + 1) * row];
                let at = (b * us(o.height) + us(y)) * out_row + start;
                let out = &mut output[at..at + columns.len() * depth];
                for (pixel, &c) in out.chunks_exact_mut(depth).zip(columns) {
                    pixel.copy_from_slice(&row_in[c..c + depth]);
                }
            }
        }
    }
    Ok(())
}

/// One is 1024 in the bilinear kernel's positions.
const ONE_10: i32 = 1 << 10;

/// Precomputed int8 RESIZE_BILINEAR (TFLM's `ResizeBilinearInteger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeBilinearParams {
    input: Nhwc,
    out_height: u32,
    out_width: u32,
    half_pixel_centers: bool,
    /// Kept for [`Packed`], which makes the parameters again from it (the scales follow).
    align_corners: bool,
    height_scale_10: i32,
    width_scale_10: i32,
}

/// TFLM's `scale_10` of one axis.
fn scale_10(input_size: i64, output_size: i64, align: bool) -> i64 {
    let (i, o) = if align && output_size > 1 {
        (input_size - 1, output_size - 1)
    } else {
        (input_size, output_size)
    };
    // C division of non-negative values.
    (i64::from(ONE_10) * i + o / 2) / o.max(1)
}

/// TFLM's `ComputeInterpolationValuesInteger`: the position in 1/1024ths and the two
/// neighbouring input indices.
fn interpolation(value: i32, scale_10: i32, half: bool, input_size: i32) -> (i32, i32, i32) {
    let v = if half {
        value * scale_10 + scale_10 / 2 - (1 << 9)
    } else {
        value * scale_10
    };
    let lower = (v / ONE_10).max(0);
    let upper = ((v + ONE_10 - 1) / ONE_10).min(input_size - 1);
    (v, lower, upper)
}

impl ResizeBilinearParams {
    /// Resizes `input` to `out_height × out_width` (batches and channels unchanged).
    ///
    /// Errors: [`KernelError::Unsupported`] when both `align_corners` and
    /// `half_pixel_centers` are set (TFLM refuses that), for an empty input with a non-empty
    /// output, and for sizes whose rounded scale reads past the input (see the [module
    /// docs](self)); [`KernelError::ShapeOverflow`] when a position overflows `i32` as TFLM
    /// computes it, or for counts no slice can have.
    pub fn new(
        input: Nhwc,
        out_height: u32,
        out_width: u32,
        align_corners: bool,
        half_pixel_centers: bool,
    ) -> Result<Self, KernelError> {
        if align_corners && half_pixel_centers {
            return Err(KernelError::Unsupported {
                what: "resize with both align_corners and half_pixel_centers",
            });
        }
        let output = Nhwc {
            height: out_height,
            width: out_width,
            ..input
        };
        check_sizes(input, output)?;
        let nonempty = output.len()? > 0;
        let mut scales = [0_i32; 2];
        for (s, (i, o)) in scales
            .iter_mut()
            .zip([(input.height, out_height), (input.width, out_width)])
        {
            let scale = scale_10(i64::from(i), i64::from(o), align_corners);
            // The last position (and the one after it, which the upper bound adds) fits i32.
            let last = i64::from(o) * scale + scale / 2 + i64::from(ONE_10);
            *s = i32::try_from(scale)
                .ok()
                .filter(|_| i32::try_from(last).is_ok())
                .ok_or(KernelError::ShapeOverflow)?;
            if nonempty {
                let (_, lower, _) = interpolation(o as i32 - 1, *s, half_pixel_centers, i as i32);
                if lower > i as i32 - 1 {
                    return Err(KernelError::Unsupported {
                        what: "resize scale whose rounding reads past the input",
                    });
                }
            }
        }
        Ok(Self {
            input,
            out_height,
            out_width,
            half_pixel_centers,
            align_corners,
            height_scale_10: scales[0],
            width_scale_10: scales[1],
        })
    }

    /// The input's shape.
    #[must_use]
    pub const fn input_shape(&self) -> Nhwc {
        self.input
    }

    /// The output's shape.
    #[must_use]
    pub const fn output_shape(&self) -> Nhwc {
        Nhwc {
            height: self.out_height,
            width: self.out_width,
            ..self.input
        }
    }
}

/// `(x + round) / 2^20` with C's truncating division, `round` ±2^19 by the sign of `x`
/// (TFLM's double-rounding build): shifts of the magnitude, no 64-bit division.
fn round_20(x: i64) -> i64 {
    if x > 0 {
        (x + (1 << 19)) >> 20
    } else {
        -((-x + (1 << 19)) >> 20)
    }
}

/// int8 RESIZE_BILINEAR (see the [module docs](self)): `input` and `output` must have the
/// parameters' input and output element counts ([`KernelError::LengthMismatch`]).
pub fn resize_bilinear(
    p: &ResizeBilinearParams,
    input: &[i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    let (i, o) = (p.input, p.output_shape());
    check_len("input", i.len()?, input.len())?;
    check_len("output", o.len()?, output.len())?;
    if output.is_empty() {
        return Ok(());
    }
    let depth = us(i.channels);
    let row = us(i.width) * depth;
    let image = us(i.height) * row;
    let (in_h, in_w) = (i.height as i32, i.width as i32);
    let mut out = output.chunks_exact_mut(depth.max(1));
    for b in 0..us(i.batches) {
        let image_in = &input[b * image..(b + 1) * image];
        for y in 0..o.height as i32 {
            let (input_y, y0, y1) = interpolation(y, p.height_scale_10, p.half_pixel_centers, in_h);
            let dy = i64::from(input_y - ONE_10 * y0);
            let (row0, row1) = (us(y0 as u32) * row, us(y1 as u32) * row);
            for x in 0..o.width as i32 {
                let (input_x, x0, x1) =
                    interpolation(x, p.width_scale_10, p.half_pixel_centers, in_w);
                let dx = i64::from(input_x - ONE_10 * x0);
                let (c0, c1) = (us(x0 as u32) * depth, us(x1 as u32) * depth);
                let one = i64::from(ONE_10);
                let Some(pixel) = out.next() else {
                    return Ok(());
                };
                for (c, value) in pixel.iter_mut().enumerate() {
                    let at = |r: usize, col: usize| i64::from(image_in[r + col + c]);
                    let sum = at(row0, c0) * (one - dy) * (one - dx)
                        + at(row1, c0) * dy * (one - dx)
                        + at(row0, c1) * (one - dy) * dx
                        + at(row1, c1) * dy * dx;
                    // TFLM's static_cast<int8_t>: the weights sum to 2^20, so the result is
                    // within the neighbours' range; the cast wraps as C's would otherwise.
                    *value = round_20(sum) as i8;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iota<const N: usize>() -> [i8; N] {
        core::array::from_fn(|k| (k as i32 * 7 % 251 - 125) as i8)
    }

    fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
        Nhwc {
            batches,
            height,
            width,
            channels,
        }
    }

    #[test]
    fn nearest_doubles_and_halves() {
        let p = ResizeNearestParams::new(nhwc(1, 2, 2, 1), 4, 4, false, false).unwrap();
        let mut out = [0_i8; 16];
        resize_nearest(&p, &[1, 2, 3, 4], &mut out).unwrap();
        assert_eq!(out, [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
        let p = ResizeNearestParams::new(nhwc(1, 1, 4, 2), 1, 2, false, false).unwrap();
        let mut out = [0_i16; 4];
        resize_nearest(&p, &[1, 2, 3, 4, 5, 6, 7, 8], &mut out).unwrap();
        assert_eq!(out, [1, 2, 5, 6]);
    }

    #[test]
    fn nearest_wide_rows_cross_column_chunks() {
        // 100 columns: two chunks of output columns.
        let input: [i16; 2 * 50] = core::array::from_fn(|k| k as i16);
        let p = ResizeNearestParams::new(nhwc(2, 1, 50, 1), 2, 100, false, false).unwrap();
        let mut out = [0_i16; 2 * 2 * 100];
        resize_nearest(&p, &input, &mut out).unwrap();
        for (k, &v) in out.iter().enumerate() {
            let (b, x) = (k / 200, k % 100);
            assert_eq!(v, (b * 50 + x / 2) as i16);
        }
    }

    #[test]
    fn nearest_align_corners_and_half_pixel() {
        // 3 -> 5 with align_corners: scale 0.5, positions 0, 0.5, 1, 1.5, 2 round to 0 1 1 2 2.
        let p = ResizeNearestParams::new(nhwc(1, 1, 3, 1), 1, 5, true, false).unwrap();
        let mut out = [0_i8; 5];
        resize_nearest(&p, &[10, 20, 30], &mut out).unwrap();
        assert_eq!(out, [10, 20, 20, 30, 30]);
        // 2 -> 3 with half-pixel centres: (x + 0.5) · 2/3 = 1/3, 1, 5/3: floors 0, 1, 1.
        let p = ResizeNearestParams::new(nhwc(1, 1, 2, 1), 1, 3, false, true).unwrap();
        let mut out = [0_i8; 3];
        resize_nearest(&p, &[10, 20], &mut out).unwrap();
        assert_eq!(out, [10, 20, 20]);
    }

    #[test]
    fn bilinear_interpolates_and_rounds() {
        // 1x2 -> 1x4: scale_10 = 512, positions 0, 0.5, 1, 1.5 (the last clamps to 1).
        let p = ResizeBilinearParams::new(nhwc(1, 1, 2, 1), 1, 4, false, false).unwrap();
        let mut out = [0_i8; 4];
        resize_bilinear(&p, &[-3, 10], &mut out).unwrap();
        // -3 + 0.5 · 13 = 3.5 rounds away from zero to 4; at 1.5 both neighbours are 10
        // (weights 1.5 and -0.5 on the same pixel).
        assert_eq!(out, [-3, 4, 10, 10]);
        let input = iota::<48>();
        let p = ResizeBilinearParams::new(nhwc(2, 2, 3, 4), 3, 5, false, true).unwrap();
        let mut out = [0_i8; 120];
        resize_bilinear(&p, &input, &mut out).unwrap();
        // Same-size resizes copy.
        let p = ResizeBilinearParams::new(nhwc(2, 2, 3, 4), 2, 3, false, false).unwrap();
        let mut same = [0_i8; 48];
        resize_bilinear(&p, &input, &mut same).unwrap();
        assert_eq!(same, input);
        assert_eq!(round_20(-(1 << 19)), -1);
        assert_eq!(round_20((1 << 19) - 1), 0);
        assert_eq!(round_20(-(1 << 19) + 1), 0);
    }

    #[test]
    fn refusals() {
        let unsupported = |what| KernelError::Unsupported { what };
        assert_eq!(
            ResizeNearestParams::new(nhwc(1, 0, 2, 1), 2, 2, false, false),
            Err(unsupported("resize of an empty image"))
        );
        assert!(ResizeNearestParams::new(nhwc(1, 0, 2, 1), 0, 2, false, false).is_ok());
        assert_eq!(
            ResizeBilinearParams::new(nhwc(1, 2, 2, 1), 4, 4, true, true),
            Err(unsupported(
                "resize with both align_corners and half_pixel_centers"
            ))
        );
        assert_eq!(
            ResizeBilinearParams::new(nhwc(1, 1, 1, 1), 70, 1, false, false),
            Err(unsupported(
                "resize scale whose rounding reads past the input"
            ))
        );
        assert_eq!(
            ResizeNearestParams::new(nhwc(1, 1, 1, 1), 1 << 31, 1, false, false),
            Err(KernelError::ShapeOverflow)
        );
        assert_eq!(
            ResizeBilinearParams::new(nhwc(1, 3_000_000, 1, 1), 3_000_000, 1, false, false),
            Err(KernelError::ShapeOverflow)
        );
        let p = ResizeNearestParams::new(nhwc(1, 2, 2, 1), 3, 3, false, false).unwrap();
        let mut out = [5_i8; 9];
        assert!(resize_nearest(&p, &[0; 3], &mut out).is_err());
        assert!(resize_nearest(&p, &[0; 4], &mut out[..8]).is_err());
        assert_eq!(out, [5; 9]);
        let p = ResizeBilinearParams::new(nhwc(1, 2, 2, 1), 3, 3, false, false).unwrap();
        assert!(resize_bilinear(&p, &[0; 5], &mut out).is_err());
    }
}
