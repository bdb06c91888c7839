//! CONV_2D as a matrix product in 2×2 blocks: two output pixels by two output channels at a
//! time, over widened patches.
//!
//! For each pair of output pixels, their input windows are gathered (a 1×1 filter's window is
//! the input pixel itself, read in place) and widened once into a fixed stack buffer with the
//! input offset added (the [`mac`](crate::int8::mac) layout: 16-bit lanes that `SMLAD` reads
//! directly). Every pair of filter rows then gives four accumulators from one pass over the
//! taps, so each loaded filter word serves two pixels and each patch word two channels. The
//! widening is paid once per pixel and shared by all output channels.
//!
//! Exactness: a tap in the padding is gathered as the input zero point, so its widened value
//! `x + input_offset` is exactly 0 and it adds nothing, as the direct kernel's skipped tap;
//! every other product is the direct kernel's `w · (x + input_offset)`. The sums wrap (modulo
//! 2³²), where their order does not matter, so the accumulator, bias and requantization are
//! bit for bit the direct kernel's.
//!
//! The buffer holds [`MAX_PATCH_TAPS`] taps per pixel; a deeper window, and a grouped
//! convolution, run on the direct kernel instead.

use super::{ChannelMultiplier, Conv2dParams};
use crate::int8::im2col::gather_patch;
use crate::int8::mac::{self, Mac};

/// Most taps (`filter_h · filter_w · filter_depth`) of the blocked path: two widened patches
/// of this many taps live on the stack (4 bytes per 2 taps, so 2,304 bytes), and a gathered
/// one. The default (the feature `patch-576`) covers a 3×3 window over 64 channels and a 1×1
/// one over 576; without the feature, 64 (a 1×1 window over 64 channels), for a firmware whose
/// models have small windows only: a deeper window runs the direct loop.
pub const MAX_PATCH_TAPS: usize = if cfg!(feature = "patch-576") { 576 } else { 64 };

/// Whether the blocked path runs `p`: one group, a window of at most [`MAX_PATCH_TAPS`], and
/// at least two output channels and two output pixels (a block's).
pub(super) fn fits(p: &Conv2dParams) -> bool {
    p.in_channels == p.filter_depth
        && p.rows.filter * p.cols.filter * p.filter_depth <= MAX_PATCH_TAPS
        && p.out_channels >= 2
        && p.batches * p.rows.out_size * p.cols.out_size >= 2
}

/// The blocked convolution, on operands [`conv2d`](super::conv2d) checked (lengths, a
/// non-empty output) and a shape [`fits`] accepted.
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
    let words = mac::widened_words(taps);
    let offset = p.quant.input_offset;
    // The zero point, gathered for padded taps; `ConvQuant` holds int8 zero points only.
    let pad = offset.wrapping_neg() as i8;
    let in_place = rows.filter == 1 && cols.filter == 1;
    if taps == 0 || image_len == 0 || per_image == 0 || oc < 2 || pixels < 2 {
        return;
    }

    let mut gathered = [0_i8; MAX_PATCH_TAPS];
    let mut pair = mac::PatchPair::new();
    let mut n = 0;
    while n < pixels {
        // An odd last pixel pairs with the one before it, which is written again with the
        // same bytes.
        let first = n.min(pixels - 2);
        for (px, wide) in (first..first + 2).zip(pair.words.iter_mut()) {
            let (b, r) = (px / per_image, px % per_image);
            let (oy, ox) = (r / cols.out_size, r % cols.out_size);
            let in_image = &input[b * image_len..][..image_len];
            let window: &[i8] = if in_place {
                // A 1×1 window is always inside the image (its padding is 0).
                let (_, _, iy) = rows.taps(oy);
                let (_, _, ix) = cols.taps(ox);
                &in_image[(iy * cols.in_size + ix) * ch..][..ch]
            } else {
                gather_patch(p, in_image, (oy, ox), pad, &mut gathered[..taps]);
                &gathered[..taps]
            };
            mac::widen::<M>(window, offset, &mut wide[..words]);
        }
        // Output rows of the two pixels, adjacent (see above).
        let (row0, row1) = output[first * oc..][..2 * oc].split_at_mut(oc);
        let pairs = filter
            .chunks_exact(2 * taps)
            .zip(multipliers.chunks_exact(2))
            .zip(row0.chunks_exact_mut(2).zip(row1.chunks_exact_mut(2)));
        for (k, ((w, m), (o0, o1))) in pairs.enumerate() {
            let b = bias.map_or([0, 0], |b| [b[2 * k], b[2 * k + 1]]);
            block::<M>(p, &pair, w.split_at(taps), [m[0], m[1]], b, o0, o1);
        }
        if oc % 2 == 1 {
            // An odd last channel pairs with the one before it, which is written again with
            // the same bytes.
            let j = oc - 2;
            let w = filter[j * taps..][..2 * taps].split_at(taps);
            let m = [multipliers[j], multipliers[j + 1]];
            let b = bias.map_or([0, 0], |b| [b[j], b[j + 1]]);
            block::<M>(p, &pair, w, m, b, &mut row0[j..][..2], &mut row1[j..][..2]);
        }
        n += 2;
    }
}

/// One 2×2 block: the dot products of the pair's two patches with filter rows `w`, plus the
/// biases, requantized into `o0` (first pixel) and `o1` (second), two channels each.
#[inline(always)]
fn block<M: Mac>(
    p: &Conv2dParams,
    pair: &mac::PatchPair,
    w: (&[i8], &[i8]),
    m: [ChannelMultiplier; 2],
    b: [i32; 2],
    o0: &mut [i8],
    o1: &mut [i8],
) {
    let taps = w.0.len();
    let acc = mac::dot_2x2::<M>(pair, taps, w.0, w.1);
    let q = &p.quant;
    let out = |acc: i32, k: usize| {
        M::requantize(
            acc.wrapping_add(b[k]),
            m[k],
            q.output_offset,
            q.activation_min,
            q.activation_max,
        )
    };
    if let ([a, b], [c, d]) = (o0, o1) {
        *a = out(acc[0], 0);
        *b = out(acc[1], 1);
        *c = out(acc[2], 0);
        *d = out(acc[3], 1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::random_cases::{equal_direct, Sweep};
    use super::*;
    use crate::int8::mac::Portable;

    /// The blocked path against the direct loop (TFLM's order) on pseudo-random shapes,
    /// depths up to 11 (not multiples of four).
    #[test]
    fn blocked_equals_direct() {
        let sweep = Sweep {
            seed: 0x1234_5678_u32,
            max_depth: 11,
            shifts: (-10, 0),
        };
        equal_direct(sweep, fits, |p, m, input, filter, bias, out| {
            conv2d::<Portable>(p, m, input, filter, bias, out)
        });
    }
}
