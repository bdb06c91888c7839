//! int8 FULLY_CONNECTED with per-channel quantized weights: one weight scale, hence one
//! requantization multiplier, per output feature.
//!
//! Arithmetic (TFLM `kernels/internal/reference/integer_ops/fully_connected.h`
//! `FullyConnectedPerChannel`, the overload with quantized multipliers that
//! `micro/kernels/fully_connected.cc` calls when the weights have more than one scale;
//! parameters from `micro/kernels/fully_connected_common.cc` `CalculateOpDataFullyConnected`):
//!
//! ```text
//! m[o], shift[o] = QuantizeMultiplier((double)in_scale · (double)w_scale[o] / (double)out_scale)
//! acc[b][o] = Σ_i weights[o][i] · (input[b][i] − in_zp) + bias[o]            (int32, wrapping)
//! out[b][o] = clamp(MultiplyByQuantizedMultiplier(acc, m[o], shift[o]) + out_zp, act_min, act_max)
//! ```
//!
//! - The multipliers are [`ChannelMultiplier`]s, built by [`channel_multipliers`] exactly as
//!   TFLM computes them (the product of scales in `double`, as for convolutions).
//! - Weights are symmetric: TFLM's per-channel kernel never applies a weight zero point.
//! - The bias is int32 in units of `in_scale · w_scale[o]`.
//! - TFLM picks this path only when the weight tensor has more than one scale. With a single
//!   scale it takes the per-tensor path ([`FcParams`](super::FcParams) and
//!   [`fully_connected`](super::fully_connected)), whose multiplier is computed from the
//!   `float` product of the scales, rounded to `float` before the division: its Q0.31 mantissa
//!   typically differs from the per-channel formula's in the low bits (by tens of units for
//!   the MLPerf models' layers), which can change an output by one step. Use that path for
//!   per-tensor weights to stay bit-exact.
//! - Inputs of rank above 2 (`[..][in_features]`) are `batches` rows, the product of the outer
//!   dimensions, as TFLM's `FlatSizeSkipDim`; `keep_num_dims` does not change the bytes.
//!
//! [`channel_multipliers`]: super::channel_multipliers

use super::fc_rows::{fc_row, FcMultipliers};
use super::mac::{Mac, Native};
use super::Quant;
use super::{activation_range, check_quant, requantized_to_i8, Activation, ChannelMultiplier};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::{check_len, FcShape, KernelError};

/// Precomputed parameters of per-channel int8 FULLY_CONNECTED (TFLM's
/// `OpDataFullyConnected` with `is_per_channel`, minus the per-channel multipliers, which the
/// kernel takes as a [`ChannelMultiplier`] slice so that no allocation is needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FcPerChannelParams {
    input_offset: i32,
    output_offset: i32,
    activation_min: i32,
    activation_max: i32,
}

/// Packed ([`packed`](crate::packed)): the offsets and the activation range (the multipliers
/// are an operand), checked: [`KernelError::InvalidQuantization`] for ones no int8 layer has.
impl crate::packed::Packed for FcPerChannelParams {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        crate::packed::Int8Quant {
            input_offset: self.input_offset,
            output_offset: self.output_offset,
            activation_min: self.activation_min,
            activation_max: self.activation_max,
        }
        .pack(w);
    }

    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        let q = crate::packed::Int8Quant::unpack(r)?;
        Ok(Self {
            input_offset: q.input_offset,
            output_offset: q.output_offset,
            activation_min: q.activation_min,
            activation_max: q.activation_max,
        })
    }
}

impl FcPerChannelParams {
    /// The offsets and the fused activation's clamp range (TFLM's
    /// `CalculateActivationRangeQuantized`) from the input and output quantization. The
    /// weight scales enter only through the multipliers (see [`channel_multipliers`]).
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is outside the int8 range, or the activation's bounds do not fit
    /// an `int32`.
    ///
    /// [`channel_multipliers`]: super::channel_multipliers
    pub fn new(input: Quant, output: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let (activation_min, activation_max) = activation_range(act, output)?;
        Ok(Self {
            input_offset: -input.zero_point,
            output_offset: output.zero_point,
            activation_min,
            activation_max,
        })
    }

    /// Added to every input element before the dot product: `−input.zero_point`.
    #[must_use]
    pub const fn input_offset(&self) -> i32 {
        self.input_offset
    }

    /// Added after rescaling: `output.zero_point`.
    #[must_use]
    pub const fn output_offset(&self) -> i32 {
        self.output_offset
    }

    /// Inclusive `(min, max)` the outputs are clamped to (the fused activation within int8).
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }

    #[inline]
    fn requantize(&self, acc: i32, m: ChannelMultiplier) -> i8 {
        let scaled = multiply_by_quantized_multiplier(acc, m.multiplier(), m.shift());
        requantized_to_i8(
            scaled,
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

/// Fully connected with per-channel quantized weights, TFLM's
/// `reference_integer_ops::FullyConnectedPerChannel` (see the [module docs](self)).
///
/// Layouts (row-major): `input` `[batches][in_features]`, `weights`
/// `[out_features][in_features]`, `multipliers` and `bias` `[out_features]`, `out`
/// `[batches][out_features]`. Errors, before anything is written: [`KernelError::ShapeOverflow`]
/// for shapes no buffer can have, [`KernelError::LengthMismatch`] for buffers of the wrong
/// length. Accumulation wraps on `int32` overflow like TFLM's.
pub fn fully_connected_per_channel(
    p: &FcPerChannelParams,
    shape: FcShape,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    fully_connected_per_channel_with::<Native>(p, shape, multipliers, input, weights, bias, out)
}

/// [`fully_connected_per_channel`] with the dot products and requantization of `M`.
pub(crate) fn fully_connected_per_channel_with<M: Mac>(
    p: &FcPerChannelParams,
    shape: FcShape,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let lens = shape.lens(core::mem::size_of::<i8>())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.weights, weights.len())?;
    check_len("multipliers", lens.out_features, multipliers.len())?;
    if let Some(bias) = bias {
        check_len("bias", lens.out_features, bias.len())?;
    }
    check_len("output", lens.output, out.len())?;
    if lens.output == 0 {
        return Ok(());
    }
    // Non-empty output: out_features >= 1, so the output rows below are well defined.
    let bias_of = |o: usize| bias.map_or(0, |b| b[o]);

    if lens.in_features == 0 {
        // Empty dot products: each output is the requantized bias.
        for out_row in out.chunks_exact_mut(lens.out_features) {
            for (o, (y, &m)) in out_row.iter_mut().zip(multipliers).enumerate() {
                *y = p.requantize(bias_of(o), m);
            }
        }
        return Ok(());
    }

    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        let layer = super::conv::x86::FcLayer {
            shape: (
                lens.output / lens.out_features,
                lens.in_features,
                lens.out_features,
            ),
            multipliers: super::x86::requant::Multipliers::Channels(multipliers),
            bias,
            input_offset: p.input_offset,
            output: (p.output_offset, p.activation_min, p.activation_max),
        };
        if super::conv::x86::fully_connected(&layer, input, weights, out) {
            return Ok(());
        }
    }
    let offset = p.input_offset;
    let requant = (p.output_offset, p.activation_min, p.activation_max);
    for (in_row, out_row) in input
        .chunks_exact(lens.in_features)
        .zip(out.chunks_exact_mut(lens.out_features))
    {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if super::x86::dot::each_dot(in_row, offset, weights, out_row.len(), |o, acc| {
            out_row[o] = p.requantize(acc.wrapping_add(bias_of(o)), multipliers[o]);
        }) {
            continue;
        }
        let m = FcMultipliers::PerChannel(multipliers);
        fc_row::<M>(in_row, offset, weights, bias, m, requant, out_row);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{channel_multipliers, fully_connected, FcParams};
    use super::*;

    const fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    fn shape(batches: u32, in_features: u32, out_features: u32) -> FcShape {
        FcShape {
            batches,
            in_features,
            out_features,
        }
    }

    #[test]
    fn per_channel_hand_computed() {
        // Input scale 0.5, zero point 1; output scale 1, zero point −3. Weight scales 1, 0.5
        // and 0.25 give real multipliers 0.5, 0.25 and 0.125, quantized as 2^30 with shifts
        // 0, −1 and −2: a doubling high multiply by 2^30 (x/2 rounded half up), then a
        // rounding right shift (ties away from zero).
        let p = FcPerChannelParams::new(q(0.5, 1), q(1.0, -3), Activation::None).unwrap();
        let mut m = [ChannelMultiplier::default(); 3];
        channel_multipliers(0.5, &[1.0, 0.5, 0.25], 1.0, &mut m).unwrap();
        assert_eq!(m[2], ChannelMultiplier::from_raw(1 << 30, -2));
        let input = [3_i8, -1, 5, 1]; // centred: 2, −2, 4, 0
        let weights = [
            1_i8, 1, 1, 1, // acc 4
            3, 0, 0, 0, // acc 6 (+ bias 1 = 7)
            0, 0, 10, 9, // acc 40 (+ bias −1 = 39)
        ];
        let bias = [0, 1, -1];
        let mut out = [0_i8; 3];
        let s = shape(1, 4, 3);
        fully_connected_per_channel(&p, s, &m, &input, &weights, Some(&bias), &mut out).unwrap();
        // 4 · 0.5 = 2 → −1; 7 · 0.25 = 1.75 → 2 → −1; 39 · 0.125 = 4.875 → 5 → 2.
        assert_eq!(out, [-1, -1, 2]);

        // Three rows centred at 6, −6 and 5 through the 0.25 channel:
        // 6 · 0.25 = 1.5 → 2 (the high multiply gives 3, then 3 / 2 rounds away from zero);
        // −6 → −1.5 → −2; 5 → 1.25, yet TFLM's double rounding gives 2 (the high multiply
        // rounds 2.5 up to 3, then 3 / 2 = 1.5 rounds to 2).
        let input = [7_i8, 1, 1, 1, -5, 1, 1, 1, 6, 1, 1, 1];
        let weights = [0_i8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        let mut out = [0_i8; 9];
        fully_connected_per_channel(&p, shape(3, 4, 3), &m, &input, &weights, None, &mut out)
            .unwrap();
        assert_eq!(out, [-3, -3 + 2, -3, -3, -3 - 2, -3, -3, -3 + 2, -3]);
    }

    #[test]
    fn per_channel_clamps_and_wraps() {
        let p = FcPerChannelParams::new(q(1.0, -128), q(1.0, 0), Activation::Relu6).unwrap();
        // Relu6 at scale 1: [0, 6].
        assert_eq!(p.activation_range(), (0, 6));
        let mut m = [ChannelMultiplier::default(); 2];
        channel_multipliers(1.0, &[1.0, 1.0], 1.0, &mut m).unwrap();
        let input = [127_i8, 127]; // centred 255 each
        let weights = [127_i8, 127, -128, -128]; // acc 64770 and −65280
        let mut out = [0_i8; 2];
        fully_connected_per_channel(&p, shape(1, 2, 2), &m, &input, &weights, None, &mut out)
            .unwrap();
        assert_eq!(out, [6, 0]);

        // Without an activation the int8 range clamps; a huge bias wraps the int32 sum like
        // TFLM's: 64770 + (i32::MAX − 1000) wraps to about −2^31, times 0.5 still far below
        // −128.
        let p = FcPerChannelParams::new(q(1.0, -128), q(2.0, 0), Activation::None).unwrap();
        channel_multipliers(1.0, &[1.0, 1.0], 2.0, &mut m).unwrap();
        let bias = [0, i32::MAX - 1000];
        let weights = [127_i8, 127, 127, 127];
        let s = shape(1, 2, 2);
        fully_connected_per_channel(&p, s, &m, &input, &weights, Some(&bias), &mut out).unwrap();
        assert_eq!(out, [127, -128]);
    }

    #[test]
    fn zero_scale_channel_and_empty_depth() {
        // A zero weight scale (an all-zero channel) gives a zero multiplier: the output is the
        // zero point whatever the accumulator.
        let p = FcPerChannelParams::new(q(0.5, 0), q(0.5, 5), Activation::None).unwrap();
        let mut m = [ChannelMultiplier::default(); 2];
        channel_multipliers(0.5, &[0.0, 1.0], 0.5, &mut m).unwrap();
        let mut out = [0_i8; 2];
        fully_connected_per_channel(
            &p,
            shape(1, 1, 2),
            &m,
            &[10],
            &[100, 3],
            Some(&[7, 7]),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [5, 5 + 37]);
        // No input features: the outputs are the requantized biases.
        fully_connected_per_channel(&p, shape(1, 0, 2), &m, &[], &[], Some(&[7, -9]), &mut out)
            .unwrap();
        assert_eq!(out, [5, 5 - 9]);
        // No batches: nothing to do.
        fully_connected_per_channel(&p, shape(0, 3, 2), &m, &[], &[0; 6], None, &mut []).unwrap();
    }

    #[test]
    fn broadcast_single_scale_matches_per_tensor_for_exact_products() {
        // With a single scale whose float product is exact, both paths agree.
        let (input_q, output_q) = (q(0.25, 3), q(0.125, -7));
        let pc = FcPerChannelParams::new(input_q, output_q, Activation::Relu).unwrap();
        let pt = FcParams::new(input_q, 0.5, output_q, Activation::Relu).unwrap();
        let mut m = [ChannelMultiplier::default(); 3];
        channel_multipliers(input_q.scale, &[0.5], output_q.scale, &mut m).unwrap();
        let input: [i8; 10] = [1, -2, 3, -4, 5, -6, 7, -8, 9, 127];
        let weights: [i8; 15] = [3, -1, 4, -1, 5, -9, 2, 6, -5, 3, -128, 127, 0, 1, -1];
        let bias = [100, -200, 300];
        let (mut a, mut b) = ([0_i8; 6], [0_i8; 6]);
        let s = shape(2, 5, 3);
        fully_connected_per_channel(&pc, s, &m, &input, &weights, Some(&bias), &mut a).unwrap();
        fully_connected(&pt, s, &input, &weights, Some(&bias), &mut b).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn length_errors_before_writing() {
        let p = FcPerChannelParams::new(q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
        let m = [ChannelMultiplier::from_raw(1 << 30, 1); 2];
        let mut out = [9_i8; 2];
        let s = shape(1, 2, 2);
        let err = |operand, expected, actual| KernelError::LengthMismatch {
            operand,
            expected,
            actual,
        };
        assert_eq!(
            fully_connected_per_channel(&p, s, &m, &[0; 3], &[0; 4], None, &mut out),
            Err(err("input", 2, 3))
        );
        assert_eq!(
            fully_connected_per_channel(&p, s, &m, &[0; 2], &[0; 3], None, &mut out),
            Err(err("weights", 4, 3))
        );
        assert_eq!(
            fully_connected_per_channel(&p, s, &m[..1], &[0; 2], &[0; 4], None, &mut out),
            Err(err("multipliers", 2, 1))
        );
        assert_eq!(
            fully_connected_per_channel(&p, s, &m, &[0; 2], &[0; 4], Some(&[0; 3]), &mut out),
            Err(err("bias", 2, 3))
        );
        assert_eq!(
            fully_connected_per_channel(&p, s, &m, &[0; 2], &[0; 4], None, &mut out[..1]),
            Err(err("output", 2, 1))
        );
        assert_eq!(out, [9, 9]);
        let huge = shape(u32::MAX, u32::MAX, 1);
        assert_eq!(
            fully_connected_per_channel(&p, huge, &m[..1], &[], &[], None, &mut []),
            Err(KernelError::ShapeOverflow)
        );
    }

    #[test]
    fn bad_quantization() {
        assert_eq!(
            FcPerChannelParams::new(q(0.0, 0), q(1.0, 0), Activation::None),
            Err(KernelError::InvalidQuantization {
                what: "input scale"
            })
        );
        assert_eq!(
            FcPerChannelParams::new(q(1.0, 0), q(1.0, 128), Activation::None),
            Err(KernelError::InvalidQuantization {
                what: "output zero point"
            })
        );
    }
}
