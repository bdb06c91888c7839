//! int8 TRANSPOSE_CONV with per-channel weights (TFLM
//! `kernels/internal/reference/integer_ops/transpose_conv.h`, parameters from
//! `micro/kernels/transpose_conv.cc`).
//!
//! Every input pixel scatters `(x − input_zp) · w[oc][ky][kx][ic]` to output pixel
//! `(iy · stride_h − pad_h + ky, ix · stride_w − pad_w + kx)` where that lies inside the
//! output; each output then gets its bias, is requantized per channel like a convolution
//! ([`ChannelMultiplier`]), offset and clamped to the fused activation's range:
//!
//! ```text
//! acc[o, oc] = Σ_{ky, kx, ic : o = i · stride − pad + k}  (x[i, ic] − input_zp) · w[oc, ky, kx, ic]
//! out        = clamp(MultiplyByQuantizedMultiplier(acc + bias[oc], m[oc], s[oc]) + output_zp)
//! ```
//!
//! TFLM accumulates in an int32 scratch buffer the size of the output; the sums are the same
//! in any order (int32 addition, wrapping here), so this kernel gathers each output's taps
//! instead and needs no scratch. The filter is OHWI (`[out_channels, kh, kw, in_channels]`),
//! its zero point ignored as TFLM ignores it. The padding is TFLM's: `ComputePaddingHeightWidth`
//! run forwards from the *output* size with dilation 1,
//!
//! ```text
//! n     = SAME: (out + s − 1) / s      VALID: (out + s − k) / s      (C division)
//! pad   = max((n − 1) · s + k − out, 0) / 2
//! ```
//!
//! The output size is the output tensor's (TFLM never reads the output-shape operand).

use super::conv::ChannelMultiplier;
use super::window::{elems, Nhwc, Padding};
use super::{activation_range, check_quant, requantized_to_i8, Activation, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Int8Quant, Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed parameters of int8 TRANSPOSE_CONV (TFLM's `OpData`): the geometry resolved,
/// the offsets and the activation range. The per-channel multipliers travel separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransposeConvParams {
    input: Nhwc,
    output: Nhwc,
    filter_height: u32,
    filter_width: u32,
    stride_height: u32,
    stride_width: u32,
    pad_height: u32,
    pad_width: u32,
    /// Kept for [`pack`](Self::pack), which writes it in place of the paddings it gives.
    padding: Padding,
    input_offset: i32,
    output_offset: i32,
    activation_min: i32,
    activation_max: i32,
}

/// Output channels accumulated together on the stack.
const BLOCK: usize = 32;

/// TFLM's padding of a transposed axis (see the [module docs](self)).
fn pad(padding: Padding, out: u32, filter: u32, stride: u32) -> u32 {
    let (o, k, s) = (i64::from(out), i64::from(filter), i64::from(stride));
    let n = match padding {
        Padding::Same => (o + s - 1) / s,
        Padding::Valid => (o + s - k) / s,
    };
    // |values| < 2^34: no overflow; the result is below max(k, s) ≤ u32::MAX.
    (((n - 1) * s + k - o).max(0) / 2) as u32
}

impl TransposeConvParams {
    /// Parameters of a transposed convolution of `input` into `output` (both NHWC) with a
    /// `[output.channels, filter_height, filter_width, input.channels]` filter.
    ///
    /// Errors: [`KernelError::Unsupported`] for a zero filter size or stride, or batches
    /// that differ between input and output; [`KernelError::InvalidQuantization`] for bad
    /// scales or zero points; [`KernelError::ShapeOverflow`] for element counts no slice can
    /// have or positions beyond `i32`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: Nhwc,
        output: Nhwc,
        (filter_height, filter_width): (u32, u32),
        (stride_height, stride_width): (u32, u32),
        padding: Padding,
        input_q: Quant,
        output_q: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        let filter = (filter_height, filter_width);
        let stride = (stride_height, stride_width);
        Self::resolve(input, output, filter, stride, padding, || {
            check_quant(input_q, "input scale", "input zero point")?;
            let (activation_min, activation_max) = activation_range(act, output_q)?;
            Ok(Int8Quant {
                input_offset: -input_q.zero_point,
                output_offset: output_q.zero_point,
                activation_min,
                activation_max,
            })
        })
    }

    /// Writes the parameters ([`packed`](crate::packed)) as what made them: the shapes, the
    /// window, and the int8 offsets and activation range (the multipliers are an operand).
    pub fn pack(&self, w: &mut Words<'_>) {
        self.input.pack(w);
        self.output.pack(w);
        for v in [
            self.filter_height,
            self.filter_width,
            self.stride_height,
            self.stride_width,
        ] {
            w.put(v);
        }
        self.padding.pack(w);
        Int8Quant {
            input_offset: self.input_offset,
            output_offset: self.output_offset,
            activation_min: self.activation_min,
            activation_max: self.activation_max,
        }
        .pack(w);
    }

    /// Reads what [`pack`](Self::pack) wrote, the geometry resolved as [`new`](Self::new)
    /// resolves it.
    ///
    /// Errors as [`new`](Self::new), and for quantization no int8 layer has.
    pub fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (input, output) = (Nhwc::unpack(r)?, Nhwc::unpack(r)?);
        let filter = (r.take()?, r.take()?);
        let stride = (r.take()?, r.take()?);
        let padding = Padding::unpack(r)?;
        let quant = Int8Quant::unpack(r)?;
        Self::resolve(input, output, filter, stride, padding, || Ok(quant))
    }

    /// The geometry, then the quantization `quant` gives (its errors come after the
    /// geometry's checks that precede it in TFLM's order: sizes, strides, batches).
    fn resolve(
        input: Nhwc,
        output: Nhwc,
        (filter_height, filter_width): (u32, u32),
        (stride_height, stride_width): (u32, u32),
        padding: Padding,
        quant: impl FnOnce() -> Result<Int8Quant, KernelError>,
    ) -> Result<Self, KernelError> {
        if filter_height == 0 || filter_width == 0 {
            return Err(KernelError::Unsupported {
                what: "filter size 0",
            });
        }
        if stride_height == 0 || stride_width == 0 {
            return Err(KernelError::Unsupported { what: "stride 0" });
        }
        if input.batches != output.batches {
            return Err(KernelError::Unsupported {
                what: "batches differing between input and output",
            });
        }
        let q = quant()?;
        input.len()?;
        output.len()?;
        elems(&[output.channels, filter_height, filter_width, input.channels])?;
        // Positions are computed in i64 from u32s; TFLM's are `int`.
        let limit = i64::from(i32::MAX);
        for v in [
            i64::from(input.height) * i64::from(stride_height) + i64::from(filter_height),
            i64::from(input.width) * i64::from(stride_width) + i64::from(filter_width),
            i64::from(output.height) + i64::from(filter_height),
            i64::from(output.width) + i64::from(filter_width),
        ] {
            if v > limit {
                return Err(KernelError::ShapeOverflow);
            }
        }
        Ok(Self {
            input,
            output,
            filter_height,
            filter_width,
            stride_height,
            stride_width,
            pad_height: pad(padding, output.height, filter_height, stride_height),
            pad_width: pad(padding, output.width, filter_width, stride_width),
            padding,
            input_offset: q.input_offset,
            output_offset: q.output_offset,
            activation_min: q.activation_min,
            activation_max: q.activation_max,
        })
    }

    /// Element counts `(input, filter, output)` the buffers must have (the bias and the
    /// multipliers have `output.channels`).
    #[must_use]
    pub const fn lens(&self) -> (usize, usize, usize) {
        // All fit a usize: checked in `new`.
        let (i, o) = (self.input, self.output);
        (
            i.batches as usize * i.height as usize * i.width as usize * i.channels as usize,
            o.channels as usize
                * self.filter_height as usize
                * self.filter_width as usize
                * i.channels as usize,
            o.batches as usize * o.height as usize * o.width as usize * o.channels as usize,
        )
    }

    /// The input shape.
    #[must_use]
    pub const fn input_shape(&self) -> Nhwc {
        self.input
    }

    /// The output shape.
    #[must_use]
    pub const fn output_shape(&self) -> Nhwc {
        self.output
    }

    /// `(filter_height, filter_width)`.
    #[must_use]
    pub const fn filter(&self) -> (u32, u32) {
        (self.filter_height, self.filter_width)
    }

    /// `(stride_height, stride_width)`.
    #[must_use]
    pub const fn stride(&self) -> (u32, u32) {
        (self.stride_height, self.stride_width)
    }

    /// Leading padding `(height, width)`, as TFLM computes it.
    #[must_use]
    pub const fn padding(&self) -> (u32, u32) {
        (self.pad_height, self.pad_width)
    }

    /// Multiply-accumulates TFLM's scatter performs (input pixels × taps landing inside the
    /// output × channels), counted as every input pixel × every tap: an upper bound.
    #[must_use]
    pub const fn macs(&self) -> u64 {
        (self.lens().0 as u64)
            .saturating_mul(self.output.channels as u64)
            .saturating_mul(self.filter_height as u64)
            .saturating_mul(self.filter_width as u64)
    }
}

/// The input positions along one axis that reach output position `o`: pairs `(k, i)` with
/// `o = i · stride − pad + k`, `0 ≤ i < in_size`, `0 ≤ k < filter`, calling `f(k, i)`.
#[inline]
fn taps(o: u32, pad: u32, stride: u32, filter: u32, in_size: u32, mut f: impl FnMut(usize, usize)) {
    let (o, pad, s) = (i64::from(o), i64::from(pad), i64::from(stride));
    for k in 0..i64::from(filter) {
        let num = o + pad - k;
        if num < 0 {
            break; // larger k only lowers it
        }
        if num % s == 0 && num / s < i64::from(in_size) {
            f(k as usize, (num / s) as usize);
        }
    }
}

/// int8 TRANSPOSE_CONV (see the [module docs](self)).
///
/// Layouts: `input` and `output` NHWC, `filter` OHWI, `multipliers` and `bias` one per
/// output channel. Errors with [`KernelError::LengthMismatch`] before touching `output`.
pub fn transpose_conv(
    p: &TransposeConvParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    let (input_len, filter_len, output_len) = p.lens();
    let channels = p.output.channels as usize;
    check_len("input", input_len, input.len())?;
    check_len("filter", filter_len, filter.len())?;
    check_len("multipliers", channels, multipliers.len())?;
    if let Some(b) = bias {
        check_len("bias", channels, b.len())?;
    }
    check_len("output", output_len, output.len())?;
    if output_len == 0 {
        return Ok(());
    }
    let (ih, iw, ic) = (
        p.input.height as usize,
        p.input.width as usize,
        p.input.channels as usize,
    );
    let (fh, fw) = (p.filter_height as usize, p.filter_width as usize);
    let mut pixels = output.chunks_exact_mut(channels);
    for b in 0..p.output.batches as usize {
        for oy in 0..p.output.height {
            for ox in 0..p.output.width {
                let Some(pixel) = pixels.next() else {
                    return Ok(());
                };
                // Channels in blocks of `BLOCK`, so the tap search is shared by a block.
                for (block, out) in pixel.chunks_mut(BLOCK).enumerate() {
                    let oc0 = block * BLOCK;
                    let mut acc = [0_i32; BLOCK];
                    let (sh, sw) = (p.stride_height, p.stride_width);
                    taps(
                        oy,
                        p.pad_height,
                        sh,
                        p.filter_height,
                        p.input.height,
                        |ky, iy| {
                            taps(
                                ox,
                                p.pad_width,
                                sw,
                                p.filter_width,
                                p.input.width,
                                |kx, ix| {
                                    let x0 = ((b * ih + iy) * iw + ix) * ic;
                                    let x = &input[x0..x0 + ic];
                                    for (j, a) in acc[..out.len()].iter_mut().enumerate() {
                                        let w0 = (((oc0 + j) * fh + ky) * fw + kx) * ic;
                                        for (&x, &w) in x.iter().zip(&filter[w0..w0 + ic]) {
                                            let product =
                                                (i32::from(x) + p.input_offset) * i32::from(w);
                                            *a = a.wrapping_add(product);
                                        }
                                    }
                                },
                            );
                        },
                    );
                    for (j, (o, &a)) in out.iter_mut().zip(&acc).enumerate() {
                        let oc = oc0 + j;
                        let a = match bias {
                            Some(bias) => a.wrapping_add(bias[oc]),
                            None => a,
                        };
                        let m = multipliers[oc];
                        let scaled = multiply_by_quantized_multiplier(a, m.multiplier(), m.shift());
                        *o = requantized_to_i8(
                            scaled,
                            p.output_offset,
                            p.activation_min,
                            p.activation_max,
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
        Nhwc {
            batches,
            height,
            width,
            channels,
        }
    }

    const Q: Quant = Quant {
        scale: 1.0,
        zero_point: 0,
    };

    /// TFLM's scatter, as written there, for comparison.
    fn scatter(
        p: &TransposeConvParams,
        m: &[ChannelMultiplier],
        x: &[i8],
        w: &[i8],
        bias: Option<&[i32]>,
    ) -> Vec<i8> {
        let (i, o) = (p.input, p.output);
        let mut acc = vec![0_i32; p.lens().2];
        let (fh, fw) = p.filter();
        let (sh, sw) = p.stride();
        let (ph, pw) = p.padding();
        for b in 0..i.batches as i64 {
            for iy in 0..i.height as i64 {
                for ix in 0..i.width as i64 {
                    for c in 0..i.channels as i64 {
                        for ky in 0..fh as i64 {
                            for kx in 0..fw as i64 {
                                for oc in 0..o.channels as i64 {
                                    let oy = iy * sh as i64 - ph as i64 + ky;
                                    let ox = ix * sw as i64 - pw as i64 + kx;
                                    if oy < 0
                                        || ox < 0
                                        || oy >= o.height as i64
                                        || ox >= o.width as i64
                                    {
                                        continue;
                                    }
                                    let xv = x[(((b * i.height as i64 + iy) * i.width as i64 + ix)
                                        * i.channels as i64
                                        + c)
                                        as usize];
                                    let wv = w[(((oc * fh as i64 + ky) * fw as i64 + kx)
                                        * i.channels as i64
                                        + c)
                                        as usize];
                                    let at = (((b * o.height as i64 + oy) * o.width as i64 + ox)
                                        * o.channels as i64
                                        + oc) as usize;
                                    acc[at] += (i32::from(xv) + p.input_offset) * i32::from(wv);
                                }
                            }
                        }
                    }
                }
            }
        }
        acc.iter()
            .enumerate()
            .map(|(at, &a)| {
                let oc = at % o.channels as usize;
                let a = a + bias.map_or(0, |b| b[oc]);
                let s = multiply_by_quantized_multiplier(a, m[oc].multiplier(), m[oc].shift());
                requantized_to_i8(s, p.output_offset, p.activation_min, p.activation_max)
            })
            .collect()
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn gather_matches_tflms_scatter() {
        let mut seed = 7_u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as i8
        };
        for (padding, (ih, iw), (oh, ow), (kh, kw), (sh, sw)) in [
            (Padding::Same, (3, 4), (6, 8), (3, 3), (2, 2)),
            (Padding::Valid, (3, 4), (7, 9), (3, 3), (2, 2)),
            (Padding::Same, (4, 4), (4, 4), (3, 2), (1, 1)),
            (Padding::Valid, (2, 3), (5, 4), (4, 2), (1, 1)),
            (Padding::Same, (2, 2), (6, 5), (2, 3), (3, 2)),
            (Padding::Valid, (2, 2), (3, 3), (1, 1), (2, 2)),
        ] {
            let (ic, oc) = (3, 34);
            let iq = Quant {
                scale: 0.5,
                zero_point: 3,
            };
            let oq = Quant {
                scale: 0.7,
                zero_point: -4,
            };
            let p = TransposeConvParams::new(
                nhwc(2, ih, iw, ic),
                nhwc(2, oh, ow, oc),
                (kh, kw),
                (sh, sw),
                padding,
                iq,
                oq,
                Activation::None,
            )
            .unwrap();
            let (il, fl, ol) = p.lens();
            let x: Vec<i8> = (0..il).map(|_| next()).collect();
            let w: Vec<i8> = (0..fl).map(|_| next()).collect();
            let m: Vec<ChannelMultiplier> = (0..oc)
                .map(|c| ChannelMultiplier::new(0.5, 0.01 + 0.002 * c as f32, 0.7).unwrap())
                .collect();
            let bias: Vec<i32> = (0..oc as i32).map(|c| 100 - 150 * c).collect();
            let mut out = vec![0; ol];
            transpose_conv(&p, &m, &x, &w, Some(&bias), &mut out).unwrap();
            assert_eq!(out, scatter(&p, &m, &x, &w, Some(&bias)));
            transpose_conv(&p, &m, &x, &w, None, &mut out).unwrap();
            assert_eq!(out, scatter(&p, &m, &x, &w, None));
        }
    }

    #[test]
    fn tflm_padding() {
        // SAME, out 8, k 3, s 2: n = 4, total = 3·2 + 3 − 8 = 1 → 0.
        assert_eq!(pad(Padding::Same, 8, 3, 2), 0);
        // SAME, out 4, k 3, s 1: total 2 → 1.
        assert_eq!(pad(Padding::Same, 4, 3, 1), 1);
        // VALID: no padding.
        assert_eq!(pad(Padding::Valid, 7, 3, 2), 0);
        assert_eq!(pad(Padding::Same, 6, 4, 2), 1);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let (i, o) = (nhwc(1, 2, 2, 1), nhwc(1, 4, 4, 1));
        let new = |i, o, k, s| {
            TransposeConvParams::new(i, o, k, s, Padding::Same, Q, Q, Activation::None)
        };
        assert!(new(i, o, (0, 1), (1, 1)).is_err());
        assert!(new(i, o, (1, 1), (1, 0)).is_err());
        assert!(new(i, nhwc(2, 4, 4, 1), (1, 1), (1, 1)).is_err());
        assert!(new(nhwc(1, u32::MAX, 2, 1), o, (1, 1), (2, 2)).is_err());
        let bad_q = Quant {
            scale: 0.0,
            zero_point: 0,
        };
        assert!(TransposeConvParams::new(
            i,
            o,
            (1, 1),
            (1, 1),
            Padding::Same,
            bad_q,
            Q,
            Activation::None
        )
        .is_err());
        let p = new(i, o, (2, 2), (2, 2)).unwrap();
        let m = [ChannelMultiplier::new(1.0, 1.0, 1.0).unwrap()];
        let mut out = [0; 16];
        assert!(transpose_conv(&p, &m, &[0; 3], &[0; 4], None, &mut out).is_err());
        assert!(transpose_conv(&p, &m, &[0; 4], &[0; 3], None, &mut out).is_err());
        assert!(transpose_conv(&p, &[], &[0; 4], &[0; 4], None, &mut out).is_err());
        assert!(transpose_conv(&p, &m, &[0; 4], &[0; 4], Some(&[]), &mut out).is_err());
        assert!(transpose_conv(&p, &m, &[0; 4], &[0; 4], None, &mut out[..15]).is_err());
        transpose_conv(&p, &m, &[1; 4], &[1; 4], Some(&[2]), &mut out).unwrap();
        assert_eq!(out, [3; 16]);
    }
}
