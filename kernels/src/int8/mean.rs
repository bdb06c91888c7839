//! int8 MEAN over the spatial axes (H and W) of an NHWC tensor: global average pooling as
//! TFLite converters emit it.
//!
//! Arithmetic (TFLM `kernels/internal/reference/reduce.h` `QuantizedMeanOrSum`, parameters
//! from `micro/kernels/reduce_common.cc`):
//!
//! ```text
//! (m, s)  = QuantizeMultiplier(input_scale / output_scale)            (double)
//! n       = H · W,  k = min(floor(log2 n), 32, 31 + s)
//! m'      = (m · 2^k) / n   (64-bit, truncating),  s' = s − k
//! sum[c]  = Σ_hw x[h][w][c]                                            (int32, wrapping)
//! out[c]  = clamp(MultiplyByQuantizedMultiplier(sum[c] − input_zp · n, m', s') + output_zp,
//!                 −128, 127)
//! ```
//!
//! The division by the element count is folded into the multiplier (with `k` extra bits of
//! precision), so the result is not always the correctly rounded mean. There is no fused
//! activation. An empty reduction (`H · W = 0`) writes zeros, as TFLM does.

use super::window::{elems, Nhwc};
use super::{check_quant, general_multiplier, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::{check_len, KernelError};

/// Precomputed parameters of int8 MEAN over axes 1 and 2 (TFLM's `OpDataReduce`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MeanParams {
    batches: usize,
    pixels: usize,
    channels: usize,
    input_len: usize,
    output_len: usize,
    /// `input_zp · n`, subtracted from each sum (wrapping like TFLM's int32).
    zero_point_sum: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

impl MeanParams {
    /// Parameters for averaging `input` over its height and width; the output is
    /// `[batches][channels]` (with or without TFLite's `keep_dims`, the bytes are the same).
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for bad scales or zero points or a
    /// multiplier `input_scale / output_scale` of `2^31` or more; [`KernelError::ShapeOverflow`]
    /// for sizes no buffer can have.
    pub fn new(input: Nhwc, input_q: Quant, output_q: Quant) -> Result<Self, KernelError> {
        check_quant(input_q, "input scale", "input zero point")?;
        check_quant(output_q, "output scale", "output zero point")?;
        let real = f64::from(input_q.scale) / f64::from(output_q.scale);
        let (multiplier, shift) = general_multiplier(real, "output scale")?;
        let input_len = input.len()?;
        let output_len = elems(&[input.batches, input.channels])?;
        let pixels = elems(&[input.height, input.width])?;
        let n = pixels as u64;
        let (multiplier, shift) = if n == 0 {
            (multiplier, shift)
        } else {
            // floor(log2 n), clamped so the shift stays within MultiplyByQuantizedMultiplier's
            // range (shift ≥ −31 after the adjustment) and the 64-bit product cannot overflow.
            let k = (63 - n.leading_zeros() as i32)
                .min(32)
                .min(31 + shift)
                .max(0);
            // |multiplier| < 2^31 and k <= 32: the product fits an i64, and the quotient's
            // magnitude is at most |multiplier| because n >= 2^k.
            let scaled = (i64::from(multiplier) << k) / n as i64;
            (scaled as i32, shift - k)
        };
        let us = |v: u32| usize::try_from(v).map_err(|_| KernelError::ShapeOverflow);
        Ok(Self {
            batches: us(input.batches)?,
            pixels,
            channels: us(input.channels)?,
            input_len,
            output_len,
            zero_point_sum: input_q.zero_point.wrapping_mul(pixels as i32),
            output_zero_point: output_q.zero_point,
            multiplier,
            shift,
        })
    }

    /// `(multiplier, shift)` applied to the zero-point-corrected sums (the count folded in).
    #[must_use]
    pub const fn multiplier(&self) -> (i32, i32) {
        (self.multiplier, self.shift)
    }

    /// Output dimensions `(batches, channels)`.
    #[must_use]
    pub const fn output_shape(&self) -> (usize, usize) {
        (self.batches, self.channels)
    }

    /// Element counts `(input, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize) {
        (self.input_len, self.output_len)
    }
}

/// Channels summed together (a stack accumulator of this many lanes).
const BLOCK: usize = 32;

/// int8 MEAN over height and width (see the [module docs](self)).
///
/// Layouts: `input` NHWC, `output` `[batches][channels]`. Errors with
/// [`KernelError::LengthMismatch`] before touching `output`.
pub fn mean_hw(p: &MeanParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    check_len("input", p.input_len, input.len())?;
    check_len("output", p.output_len, output.len())?;
    if p.output_len == 0 {
        return Ok(());
    }
    if p.pixels == 0 {
        output.fill(0);
        return Ok(());
    }
    let c = p.channels;
    for (image, out) in input
        .chunks_exact(p.pixels * c)
        .zip(output.chunks_exact_mut(c))
    {
        let mut c0 = 0;
        while c0 < c {
            let n = BLOCK.min(c - c0);
            let mut acc = [0_i32; BLOCK];
            for px in image.chunks_exact(c) {
                for (a, &v) in acc.iter_mut().zip(&px[c0..c0 + n]) {
                    *a = a.wrapping_add(i32::from(v));
                }
            }
            for (o, &a) in out[c0..c0 + n].iter_mut().zip(&acc) {
                let scaled = multiply_by_quantized_multiplier(
                    a.wrapping_sub(p.zero_point_sum),
                    p.multiplier,
                    p.shift,
                );
                *o = scaled.wrapping_add(p.output_zero_point).clamp(-128, 127) as i8;
            }
            c0 += n;
        }
    }
    Ok(())
}
