//! int8 CONV_2D as im2col + matrix product, bit-exact with the direct
//! [`conv2d`](super::conv2d).
//!
//! [`im2col`] copies each output pixel's input window into one row of a scratch matrix, taps in
//! filter order `(ky, kx, c)`; the OHWI filter already is an `out_channels × (KH·KW·depth)`
//! matrix with the same column order, so the convolution becomes one matrix product
//! `patches · filterᵀ` followed by the usual per-channel requantization.
//!
//! Why: the direct kernel reduces over the input channels innermost, which is what a
//! channel-parallel MAC array vectorizes. A 1- or 3-channel input (the first layer of most
//! vision models) then fills one or three lanes of a wide array. As a matrix product the
//! reduction is `KH·KW·C` deep whatever `C` is, and the operands are plain dense int8 rows an
//! NPU's matrix engine streams without border logic. The price is scratch memory
//! ([`im2col_len`]: every input byte is copied about `KH·KW / (stride_h·stride_w)` times) and
//! the gather traffic to fill it, so the direct kernel stays the better choice for deep inputs.
//!
//! Exactness: the direct kernel skips taps in the padding; here they are filled with the
//! input zero point, so that `x + input_offset = 0` and they add exactly zero. The product is
//! computed filter-stationary as `Σ w·x + (input_offset·Σ w + bias)`, a pure int8 × int8 dot
//! product per element plus one correction per channel, as an NPU would run it. All sums wrap,
//! i.e. are arithmetic modulo 2³², where regrouping and distributing are exact, so the
//! accumulator equals the direct kernel's `Σ w·(x + input_offset) + bias` bit for bit before
//! the shared requantization.
//!
//! Only ordinary (one-group) convolutions are offered: a grouped one would need a different
//! column range per group, and the direct kernel already serves it.

use super::conv::{ChannelMultiplier, Conv2dParams};
use crate::{check_len, KernelError};

/// Bytes of the im2col matrix for `p`: `batches · out_h · out_w` rows of
/// `filter_h · filter_w · filter_depth` bytes (one row per output pixel, taps in filter order
/// `(ky, kx, c)`, NHWC-like). `None` when the count overflows `usize` or exceeds `isize::MAX`
/// (the longest possible slice).
#[must_use]
pub fn im2col_len(p: &Conv2dParams) -> Option<usize> {
    let (rows, cols) = p.axes();
    let (batches, _, filter_depth, _) = p.channel_dims();
    batches
        .checked_mul(rows.out_size)?
        .checked_mul(cols.out_size)?
        .checked_mul(rows.filter)?
        .checked_mul(cols.filter)?
        .checked_mul(filter_depth)
        .filter(|&n| n <= isize::MAX as usize)
}

/// Fills `scratch` (exactly [`im2col_len`] bytes) with each output pixel's input window, one row
/// per output pixel in NHWC output order; taps in the padding get the input zero point (so they
/// contribute exactly 0 after the input offset).
///
/// Errors, before writing anything: [`KernelError::Unsupported`] for a grouped convolution
/// (input depth ≠ filter depth); [`KernelError::LengthMismatch`] when `input` or `scratch` has
/// the wrong length; [`KernelError::ShapeOverflow`] when [`im2col_len`] is `None`.
pub fn im2col(p: &Conv2dParams, input: &[i8], scratch: &mut [i8]) -> Result<(), KernelError> {
    let pad = check_gather(p, input, scratch)?;
    gather(p, input, scratch, pad);
    Ok(())
}

/// int8 CONV_2D through im2col: gathers into `scratch` (see [`im2col`]), multiplies each row by
/// each filter (the OHWI filter is an `out_channels × (KH·KW·depth)` matrix), then requantizes
/// exactly as [`conv2d`](super::conv2d), whose output it reproduces bit for bit.
///
/// Operands as [`conv2d`](super::conv2d), plus `scratch` of [`im2col_len`] bytes, which is
/// overwritten.
/// Errors, before writing `scratch` or `output`: [`KernelError::Unsupported`] for a grouped
/// convolution; [`KernelError::LengthMismatch`] when any buffer has the wrong length;
/// [`KernelError::ShapeOverflow`] when [`im2col_len`] is `None`.
pub fn conv2d_im2col(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    scratch: &mut [i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    let pad = check_gather(p, input, scratch)?;
    let (_, filter_len, output_len) = p.lens();
    let (_, _, _, out_channels) = p.channel_dims();
    check_len("filter", filter_len, filter.len())?;
    check_len("output", output_len, output.len())?;
    check_len("multipliers", out_channels, multipliers.len())?;
    if let Some(bias) = bias {
        check_len("bias", out_channels, bias.len())?;
    }
    if output_len == 0 {
        return Ok(());
    }
    gather(p, input, scratch, pad);

    // Non-empty output: every dimension is at least 1, so no chunk or step size below is 0.
    let (rows, cols) = p.axes();
    let depth = rows.filter * cols.filter * p.channel_dims().2;
    let offset = p.input_offset();
    // Filter-stationary: the filter's weight sum (for the offset correction) is computed once
    // per channel, and the inner loop is the bare int8 dot product a MAC array runs.
    for (c, (f, &m)) in filter.chunks_exact(depth).zip(multipliers).enumerate() {
        let weight_sum = f.iter().fold(0_i32, |a, &w| a.wrapping_add(i32::from(w)));
        let b = bias.map_or(0, |b| b[c]);
        let correction = offset.wrapping_mul(weight_sum).wrapping_add(b);
        let outputs = output.iter_mut().skip(c).step_by(out_channels);
        for (patch, o) in scratch.chunks_exact(depth).zip(outputs) {
            let dot = patch.iter().zip(f).fold(0_i32, |a, (&x, &w)| {
                a.wrapping_add(i32::from(x) * i32::from(w))
            });
            *o = p.requantize(dot.wrapping_add(correction), m);
        }
    }
    Ok(())
}

/// Checks the gather's operands and returns the padding fill value.
fn check_gather(p: &Conv2dParams, input: &[i8], scratch: &[i8]) -> Result<i8, KernelError> {
    let (_, in_channels, filter_depth, _) = p.channel_dims();
    if in_channels != filter_depth {
        return Err(KernelError::Unsupported {
            what: "im2col of a grouped convolution",
        });
    }
    check_len("input", p.lens().0, input.len())?;
    let len = im2col_len(p).ok_or(KernelError::ShapeOverflow)?;
    check_len("scratch", len, scratch.len())?;
    // The zero point, so that a padded tap's `x + input_offset` is 0. `Conv2dParams::new` only
    // accepts int8 zero points; the error path just keeps this panic-free.
    p.input_offset()
        .checked_neg()
        .and_then(|v| i8::try_from(v).ok())
        .ok_or(KernelError::InvalidQuantization {
            what: "input zero point",
        })
}

/// The gather, on operands `check_gather` accepted.
fn gather(p: &Conv2dParams, input: &[i8], scratch: &mut [i8], pad: i8) {
    let (rows, cols) = p.axes();
    let (_, ch, _, _) = p.channel_dims();
    let in_row_len = cols.in_size * ch;
    let in_image_len = rows.in_size * in_row_len;
    let filter_row_len = cols.filter * ch;
    let patch_len = rows.filter * filter_row_len;
    let patches_per_image = rows.out_size * cols.out_size * patch_len;
    // An output implies a non-empty input image (see `Axis::new`); testing keeps chunk sizes
    // non-zero without relying on it.
    if scratch.is_empty() || in_image_len == 0 {
        return;
    }
    for (in_image, image_patches) in input
        .chunks_exact(in_image_len)
        .zip(scratch.chunks_exact_mut(patches_per_image))
    {
        let mut patches = image_patches.chunks_exact_mut(patch_len);
        for oy in 0..rows.out_size {
            for ox in 0..cols.out_size {
                let Some(patch) = patches.next() else {
                    return;
                };
                gather_patch(p, in_image, (oy, ox), pad, patch);
            }
        }
    }
}

/// Gathers output pixel `(oy, ox)`'s input window from one image (`in_image`, NHWC, one image)
/// into `patch` (`filter_h · filter_w · depth` bytes, taps in filter order `(ky, kx, c)`);
/// taps in the padding get `pad`. For a one-group convolution (input depth = filter depth).
pub(super) fn gather_patch(
    p: &Conv2dParams,
    in_image: &[i8],
    (oy, ox): (usize, usize),
    pad: i8,
    patch: &mut [i8],
) {
    let (rows, cols) = p.axes();
    let (_, ch, _, _) = p.channel_dims();
    let in_row_len = cols.in_size * ch;
    let filter_row_len = cols.filter * ch;
    if filter_row_len == 0 {
        return;
    }
    let (ky0, ky1, iy0) = rows.taps(oy);
    // When no tap is inside, `taps` may report a first tap past the filter's end.
    let (kx0, kx1, ix0) = cols.taps(ox);
    let (kx0, kx1) = (kx0.min(cols.filter), kx1.min(cols.filter));
    for (ky, patch_row) in patch.chunks_exact_mut(filter_row_len).enumerate() {
        if !(ky0..ky1).contains(&ky) {
            patch_row.fill(pad);
            continue;
        }
        let iy = iy0 + (ky - ky0) * rows.dilation;
        let in_row = &in_image[iy * in_row_len..][..in_row_len];
        let (before, rest) = patch_row.split_at_mut(kx0 * ch);
        let (inside, after) = rest.split_at_mut((kx1 - kx0) * ch);
        // Most window rows have no padding: skip the (library) fill calls then.
        if !before.is_empty() {
            before.fill(pad);
        }
        if !after.is_empty() {
            after.fill(pad);
        }
        if cols.dilation == 1 {
            // Undilated taps are adjacent pixels: one copy of the whole span.
            copy_span(inside, &in_row[ix0 * ch..][..inside.len()]);
        } else {
            for (i, tap) in inside.chunks_exact_mut(ch).enumerate() {
                let ix = ix0 + i * cols.dilation;
                copy_span(tap, &in_row[ix * ch..][..ch]);
            }
        }
    }
}

/// Copies `src` into `dst` (equal lengths). A window row of a shallow input is a few bytes
/// (four for a 10×4 filter over one channel), for which a `memcpy` call costs several times
/// the copy: spans of up to [`SHORT_SPAN`] bytes are copied four bytes at a time in place.
#[inline(always)]
fn copy_span(dst: &mut [i8], src: &[i8]) {
    if dst.len() > SHORT_SPAN || dst.len() != src.len() {
        dst.copy_from_slice(src);
        return;
    }
    let (mut d, mut s) = (dst.chunks_exact_mut(4), src.chunks_exact(4));
    for (d, s) in (&mut d).zip(&mut s) {
        if let (Ok(d), Ok(s)) = (<&mut [i8; 4]>::try_from(d), <&[i8; 4]>::try_from(s)) {
            *d = *s;
        }
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}

/// Longest span [`copy_span`] copies without a library call.
const SHORT_SPAN: usize = 16;
