//! CONV_2D as a matrix product in blocks of four output pixels by one output channel, over
//! the raw int8 taps: the blocking for 16-lane byte vectors (Helium).
//!
//! A vector unit that multiplies sixteen int8 pairs and adds them into a scalar in one
//! instruction (`VMLADAVA.S8`) wants both operands as plain bytes, sixteen contiguous taps at a
//! time, and gains nothing from [`blocked`](super::blocked)'s widened 16-bit patches. So each
//! group of four output pixels gathers its input windows once as bytes (a 1×1 filter's window
//! is the input pixel itself, read in place), and every filter row then gives four dot
//! products from one pass over the taps: each loaded filter vector serves four pixels. The
//! input offset is not added to the taps (`x + input_offset` does not fit a byte); instead
//!
//! ```text
//! Σ w·(x + input_offset) = Σ w·x + input_offset · Σ w
//! ```
//!
//! with `Σ w` taken in the same pass ([`Mac::dot_4x1`]). The four accumulators share the
//! channel's multiplier, so they are requantized together ([`Mac::requantize4`]) and written to
//! the four pixels' bytes of that channel.
//!
//! Exactness: a tap in the padding is gathered as the input zero point, so its
//! `w·(x + input_offset)` is exactly 0, as the direct kernel's skipped tap. All sums wrap
//! (modulo 2³², where regrouping and distributing are exact), so the accumulator is the direct
//! kernel's bit for bit before the shared requantization.
//!
//! An output whose pixel count is not a multiple of four ends with a block that overlaps the
//! one before it, whose pixels are written again with the same bytes.

use super::{ChannelMultiplier, Conv2dParams, MAX_PATCH_TAPS};
use crate::int8::im2col::gather_patch;
use crate::int8::mac::Mac;

/// Output pixels per block.
const PIXELS: usize = 4;

/// Whether the quad path runs `p`: one group, a window of at most [`MAX_PATCH_TAPS`], and
/// at least one block of output pixels.
pub(super) fn fits(p: &Conv2dParams) -> bool {
    p.in_channels == p.filter_depth
        && p.rows.filter * p.cols.filter * p.filter_depth <= MAX_PATCH_TAPS
        && p.batches * p.rows.out_size * p.cols.out_size >= PIXELS
}

/// The quad convolution, on operands [`conv2d`](super::conv2d) checked (lengths, a non-empty
/// output) and a shape [`fits`] accepted.
pub(super) fn conv2d<M: Mac>(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) {
    let (rows, cols) = (p.rows, p.cols);
    let ch = p.in_channels;
    let taps = rows.filter * cols.filter * ch;
    let oc = p.out_channels;
    let image_len = rows.in_size * cols.in_size * ch;
    let per_image = rows.out_size * cols.out_size;
    let pixels = p.batches * per_image;
    let offset = p.quant.input_offset;
    // The zero point, gathered for padded taps; `ConvQuant` holds int8 zero points only.
    let pad = offset.wrapping_neg() as i8;
    let in_place = rows.filter == 1 && cols.filter == 1;
    let q = &p.quant;
    let requant = (q.output_offset, q.activation_min, q.activation_max);
    let quad_out = M::quad_output(requant, oc, multipliers);
    if taps == 0 || image_len == 0 || per_image == 0 || oc == 0 || pixels < PIXELS {
        return;
    }

    let mut gathered = [[0_i8; MAX_PATCH_TAPS]; PIXELS];
    let mut n = 0;
    while n < pixels {
        let first = n.min(pixels - PIXELS);
        let mut windows: [&[i8]; PIXELS] = [&[]; PIXELS];
        for ((px, window), buf) in (first..).zip(&mut windows).zip(&mut gathered) {
            let (b, r) = (px / per_image, px % per_image);
            let (oy, ox) = (r / cols.out_size, r % cols.out_size);
            let in_image = &input[b * image_len..][..image_len];
            *window = if in_place {
                // A 1×1 window is always inside the image (its padding is 0).
                let (_, _, iy) = rows.taps(oy);
                let (_, _, ix) = cols.taps(ox);
                &in_image[(iy * cols.in_size + ix) * ch..][..ch]
            } else {
                gather_patch(p, in_image, (oy, ox), pad, &mut buf[..taps]);
                &buf[..taps]
            };
        }
        // The block's outputs: pixel k's channel c at `k · oc + c`.
        let out = &mut output[first * oc..][..PIXELS * oc];
        M::quad_channels(
            windows,
            filter,
            taps,
            multipliers,
            bias,
            offset,
            &quad_out,
            out,
        );
        n += PIXELS;
    }
}

#[cfg(test)]
mod tests {
    use super::super::random_cases::{equal_direct, Sweep};
    use super::*;
    use crate::int8::mac::Portable;

    /// The quad path (on the portable operations) against the direct loop (TFLM's order) on
    /// pseudo-random shapes, depths up to 37 (past two sixteen-byte vectors), shifts both ways.
    #[test]
    fn quads_equal_direct() {
        let sweep = Sweep {
            seed: 0x0bad_5eed_u32,
            max_depth: 37,
            shifts: (-10, 2),
        };
        equal_direct(sweep, fits, |p, m, input, filter, bias, out| {
            conv2d::<Portable>(p, m, input, filter, bias, out)
        });
    }
}
