//! The 16x8 CONV_2D and DEPTHWISE_CONV_2D kernels (int16 input and output, int8 filter), on
//! the int8 kernels' resolved geometry: see [`crate::int16`].

use super::{check_channel_operands, ChannelMultiplier, Conv2dParams, ConvQuant, PixelTaps};

/// Output channels accumulated together by the depth-multiplier-1 path (the int8 kernel's
/// block).
const DW_BLOCK: usize = 32;
use crate::int16::{Accumulator, Bias};
use crate::int8::DepthwiseParams;
use crate::{check_len, KernelError};

impl ConvQuant {
    /// Requantizes a 16x8 accumulator: rescaled and clamped, no output offset (TFLM's 16x8
    /// convolutions add none).
    #[inline]
    fn finish_int16<A: Accumulator>(&self, acc: A, m: ChannelMultiplier) -> i16 {
        // max/min rather than clamp: never panics, even for an empty range.
        acc.rescale(m)
            .max(self.activation_min)
            .min(self.activation_max) as i16
    }
}

/// See [`crate::int16::conv2d`].
pub(crate) fn conv2d<A: Accumulator>(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i16],
    filter: &[i8],
    bias: Option<Bias<'_, A>>,
    output: &mut [i16],
) -> Result<(), KernelError> {
    check_len("input", p.input_len, input.len())?;
    check_len("filter", p.filter_len, filter.len())?;
    check_len("output", p.output_len, output.len())?;
    check_channel_operands::<A>(p.out_channels, multipliers, None)?;
    if let Some(b) = bias {
        b.check(p.out_channels)?;
    }
    if p.output_len == 0 {
        return Ok(());
    }
    // Non-empty output: every dimension is at least 1, so no chunk size below is 0.
    let (rows, cols) = (p.rows, p.cols);
    let in_row_len = cols.in_size * p.in_channels;
    let out_image_len = rows.out_size * cols.out_size * p.out_channels;
    let fd = p.filter_depth;
    let per_filter = rows.filter * cols.filter * fd;

    for (in_image, out_image) in input
        .chunks_exact(rows.in_size * in_row_len)
        .zip(output.chunks_exact_mut(out_image_len))
    {
        for (oy, out_row) in out_image
            .chunks_exact_mut(cols.out_size * p.out_channels)
            .enumerate()
        {
            let ky = rows.taps(oy);
            for (ox, out_px) in out_row.chunks_exact_mut(p.out_channels).enumerate() {
                let kx = cols.taps(ox);
                for (c, ((o, f), &m)) in out_px
                    .iter_mut()
                    .zip(filter.chunks_exact(per_filter))
                    .zip(multipliers)
                    .enumerate()
                {
                    let group_start = (c / p.filters_per_group) * fd;
                    let taps = PixelTaps {
                        in_image,
                        in_row_len,
                        in_px_len: p.in_channels,
                        filter: f,
                        filter_row_len: cols.filter * fd,
                        filter_px_len: fd,
                        rows: (ky, rows.dilation),
                        cols: (kx, cols.dilation),
                    };
                    let mut acc = A::default();
                    taps.each(|x, w| {
                        let x = &x[group_start..][..fd];
                        // |w · x| <= 2^22: each product fits an int32, as in TFLM.
                        acc = x
                            .iter()
                            .zip(w)
                            .fold(acc, |a, (&x, &w)| a.mac(i32::from(w), i32::from(x)));
                    });
                    if let Some(b) = bias {
                        acc = acc.add_bias(b.get(c));
                    }
                    *o = p.quant.finish_int16(acc, m);
                }
            }
        }
    }
    Ok(())
}

/// See [`crate::int16::depthwise_conv2d`].
pub(crate) fn depthwise_conv2d<A: Accumulator>(
    p: &DepthwiseParams,
    multipliers: &[ChannelMultiplier],
    input: &[i16],
    filter: &[i8],
    bias: Option<Bias<'_, A>>,
    output: &mut [i16],
) -> Result<(), KernelError> {
    check_len("input", p.input_len, input.len())?;
    check_len("filter", p.filter_len, filter.len())?;
    check_len("output", p.output_len, output.len())?;
    check_channel_operands::<A>(p.out_channels, multipliers, None)?;
    if let Some(b) = bias {
        b.check(p.out_channels)?;
    }
    if p.output_len == 0 {
        return Ok(());
    }
    let (rows, cols) = (p.rows, p.cols);
    let (ic, oc, mult) = (p.in_channels, p.out_channels, p.depth_multiplier);
    let in_row_len = cols.in_size * ic;
    let out_image_len = rows.out_size * cols.out_size * oc;

    for (in_image, out_image) in input
        .chunks_exact(rows.in_size * in_row_len)
        .zip(output.chunks_exact_mut(out_image_len))
    {
        for (oy, out_row) in out_image.chunks_exact_mut(cols.out_size * oc).enumerate() {
            let ky = rows.taps(oy);
            for (ox, out_px) in out_row.chunks_exact_mut(oc).enumerate() {
                let taps = PixelTaps {
                    in_image,
                    in_row_len,
                    in_px_len: ic,
                    filter,
                    filter_row_len: cols.filter * oc,
                    filter_px_len: oc,
                    rows: (ky, rows.dilation),
                    cols: (cols.taps(ox), cols.dilation),
                };
                if mult == 1 {
                    // Channel blocks, as the int8 kernel: contiguous input and filter channels.
                    let mut c0 = 0;
                    while c0 < oc {
                        let n = DW_BLOCK.min(oc - c0);
                        let mut acc = [A::default(); DW_BLOCK];
                        taps.each(|x, w| {
                            for ((a, &x), &w) in
                                acc[..n].iter_mut().zip(&x[c0..c0 + n]).zip(&w[c0..c0 + n])
                            {
                                *a = a.mac(i32::from(w), i32::from(x));
                            }
                        });
                        for (k, (o, &a)) in out_px[c0..c0 + n].iter_mut().zip(&acc).enumerate() {
                            let c = c0 + k;
                            let a = bias.map_or(a, |b| a.add_bias(b.get(c)));
                            *o = p.quant.finish_int16(a, multipliers[c]);
                        }
                        c0 += n;
                    }
                } else {
                    for (c, (o, &m)) in out_px.iter_mut().zip(multipliers).enumerate() {
                        let in_c = c / mult;
                        let mut acc = A::default();
                        taps.each(|x, w| {
                            acc = acc.mac(i32::from(w[c]), i32::from(x[in_c]));
                        });
                        let acc = bias.map_or(acc, |b| acc.add_bias(b.get(c)));
                        *o = p.quant.finish_int16(acc, m);
                    }
                }
            }
        }
    }
    Ok(())
}
