//! Elementwise int8 activations and binary operators beyond ADD, SUB and MUL, each bit-exact
//! with TensorFlow Lite Micro's reference kernel.
//!
//! Unary, over equal lengths:
//!
//! - RELU6 ([`Relu6Params`], [`relu6`]): TFLM clamps the raw input to its own quantized 0 and 6
//!   and copies it; the output's quantization is not used (`micro/kernels/activations.cc`);
//! - LEAKY_RELU ([`LeakyReluParams`], [`leaky_relu`]): one rescaling for non-negative inputs,
//!   another (by `alpha`, which may be negative) for negative ones
//!   (`micro/kernels/leaky_relu_common.cc`, `reference/leaky_relu.h`);
//! - ABS ([`AbsParams`], [`abs`]): `|x − zp|`, rescaled only when the scales differ
//!   (`micro/kernels/elementwise.cc`);
//! - HARD_SWISH ([`HardSwishParams`], [`hard_swish`]): TFLite's 16-bit fixed-point
//!   approximation (`micro/kernels/hard_swish_common.cc`, `reference/hard_swish.h`).
//!
//! Binary, with TFLite broadcasting over a [`BroadcastShape`] (the loop nest of
//! [`broadcast`](super::broadcast), whose per-element split they implement):
//!
//! - SQUARED_DIFFERENCE ([`SquaredDifferenceParams`], [`squared_difference`]): both inputs
//!   brought to a common scale as ADD does, but with a left shift of 7, then the squared
//!   difference rescaled (`micro/kernels/squared_difference.cc`);
//! - MAXIMUM and MINIMUM ([`maximum`], [`minimum`]): TFLM compares the raw int8 values and
//!   ignores quantization (`reference/maximum_minimum.h`; the converter gives the inputs and
//!   the output one scale);
//! - PRELU ([`PreluParams`], [`prelu`]): the input rescaled when non-negative, else its product
//!   with `alpha` rescaled (`micro/kernels/prelu_common.cc`, `reference/prelu.h`).
//!
//! TFLM has no int8 kernel for NEG, SQRT, EXP, LOG or RELU_N1_TO_1 (float only, or no
//! registration at all), so none is here.

use super::broadcast::{broadcast, rescale_smaller_than_one, BinaryOp, BroadcastShape};
use super::{check_quant, general_multiplier, requantized_to_i8, round_half_away_from_zero, Quant};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier, quantize_multiplier_smaller_than_one_exp,
};
use crate::packed::{CommonScale, Packed, WordReader, Words};
use crate::{check_len, KernelError};

const I8_MIN: i32 = i8::MIN as i32;
const I8_MAX: i32 = i8::MAX as i32;

/// Applies `f` to each element of `input` into `out`, after checking the lengths agree.
fn map(input: &[i8], out: &mut [i8], f: impl Fn(i8) -> i8) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = f(x);
    }
    Ok(())
}

/// TFLM's `FloatToQuantizedType<int8_t>`: `round(value / scale) + zero_point`, clamped to
/// int8. Refuses a quotient whose conversion to `int32` TFLM would leave undefined.
fn float_to_quantized(value: f32, q: Quant) -> Result<i32, KernelError> {
    let r = round_half_away_from_zero(value / q.scale);
    if !(-2_147_483_648.0..2_147_483_648.0).contains(&r) {
        return Err(KernelError::InvalidQuantization { what: "scale" });
    }
    let v = i64::from(r as i32) + i64::from(q.zero_point);
    Ok(v.clamp(i64::from(I8_MIN), i64::from(I8_MAX)) as i32)
}

/// Parameters of int8 RELU6 as TFLM computes it (`Relu6OpData`): the input clamped to
/// `[quantized 0, quantized 6]` on the input's scale, copied unrescaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Relu6Params {
    lower: i8,
    upper: i8,
}

impl Relu6Params {
    /// From the input's quantization (TFLM's `Relu6Prepare`: `zero` is the zero point, `six`
    /// is `FloatToQuantizedType(6.0)`). Errors: [`KernelError::InvalidQuantization`] for a
    /// scale that is not finite and positive, a zero point outside int8, or a scale so small
    /// that 6 has no `int32` quantized value.
    pub fn new(input: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        let six = float_to_quantized(6.0, input)?;
        Ok(Self {
            lower: input.zero_point as i8,
            upper: six as i8,
        })
    }

    /// Inclusive `(lower, upper)` bounds, in the input's quantized units.
    #[must_use]
    pub const fn bounds(&self) -> (i8, i8) {
        (self.lower, self.upper)
    }
}

/// int8 RELU6: `out = x > upper ? upper : x < lower ? lower : x` (see [`Relu6Params`]).
/// `input` and `out` must have the same length.
pub fn relu6(p: &Relu6Params, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    let (lower, upper) = (p.lower, p.upper);
    map(input, out, |x| {
        if x > upper {
            upper
        } else if x < lower {
            lower
        } else {
            x
        }
    })
}

/// Parameters of int8 LEAKY_RELU (TFLM's `LeakyReluOpData`).
///
/// ```text
/// v = x − in_zp
/// out = clamp(out_zp + rescale(v, in_scale / out_scale))                  v >= 0
/// out = clamp(out_zp ± rescale(v, |in_scale · alpha / out_scale|))        v < 0, sign of alpha
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeakyReluParams {
    input_zero_point: i32,
    output_zero_point: i32,
    alpha_multiplier: i32,
    alpha_shift: i32,
    alpha_negative: bool,
    identity_multiplier: i32,
    identity_shift: i32,
}

impl LeakyReluParams {
    /// From the quantizations and `alpha`. As TFLM, the alpha multiplier is the `float`
    /// `in_scale · alpha / out_scale` and the identity one the `float` `in_scale / out_scale`,
    /// each widened to `double` and split by `QuantizeMultiplier`; a negative alpha keeps its
    /// sign aside and rescales by the magnitude.
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for invalid scales or zero points, an
    /// alpha that is not finite, or a multiplier of `2^31` or more (TFLM's shift would not fit
    /// a 32-bit shift; its negation of the most negative mantissa would overflow).
    pub fn new(input: Quant, output: Quant, alpha: f32) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let (identity_multiplier, identity_shift) =
            general_multiplier(f64::from(input.scale / output.scale), "output scale")?;
        let real = f64::from(input.scale * alpha / output.scale);
        if !real.is_finite() {
            return Err(KernelError::InvalidQuantization { what: "alpha" });
        }
        let (m, alpha_shift) = quantize_multiplier(real);
        if alpha_shift > 31 || m == i32::MIN {
            return Err(KernelError::InvalidQuantization { what: "alpha" });
        }
        Ok(Self {
            input_zero_point: input.zero_point,
            output_zero_point: output.zero_point,
            alpha_multiplier: m.abs(),
            alpha_shift,
            alpha_negative: m < 0,
            identity_multiplier,
            identity_shift,
        })
    }

    #[inline]
    fn apply(&self, x: i8) -> i8 {
        let v = i32::from(x) - self.input_zero_point;
        let scaled = if v >= 0 {
            multiply_by_quantized_multiplier(v, self.identity_multiplier, self.identity_shift)
        } else {
            let s = multiply_by_quantized_multiplier(v, self.alpha_multiplier, self.alpha_shift);
            if self.alpha_negative {
                s.wrapping_neg()
            } else {
                s
            }
        };
        requantized_to_i8(scaled, self.output_zero_point, I8_MIN, I8_MAX)
    }
}

/// int8 LEAKY_RELU (see [`LeakyReluParams`]). `input` and `out` must have the same length.
pub fn leaky_relu(p: &LeakyReluParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    map(input, out, |x| p.apply(x))
}

/// Parameters of int8 ABS (TFLM's `OpDataAbsRsqrt`).
///
/// `out = clamp(|x − in_zp| + out_zp)` when the two scales are equal (as `float`s), else
/// `clamp(rescale(|x − in_zp|, in_scale / out_scale) + out_zp)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AbsParams {
    input_zero_point: i32,
    output_zero_point: i32,
    rescale: bool,
    multiplier: i32,
    shift: i32,
}

impl AbsParams {
    /// From the input and output quantization. Errors: [`KernelError::InvalidQuantization`]
    /// for invalid scales or zero points, or a multiplier of `2^31` or more.
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let rescale = input.scale != output.scale;
        let (multiplier, shift) = if rescale {
            general_multiplier(f64::from(input.scale / output.scale), "output scale")?
        } else {
            (0, 0)
        };
        Ok(Self {
            input_zero_point: input.zero_point,
            output_zero_point: output.zero_point,
            rescale,
            multiplier,
            shift,
        })
    }

    #[inline]
    fn apply(&self, x: i8) -> i8 {
        let v = (i32::from(x) - self.input_zero_point).abs(); // at most 255
        let scaled = if self.rescale {
            multiply_by_quantized_multiplier(v, self.multiplier, self.shift)
        } else {
            v
        };
        requantized_to_i8(scaled, self.output_zero_point, I8_MIN, I8_MAX)
    }
}

/// int8 ABS (see [`AbsParams`]). `input` and `out` must have the same length.
pub fn abs(p: &AbsParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    map(input, out, |x| p.apply(x))
}

/// Parameters of int8 HARD_SWISH (TFLite's `HardSwishParams`): two 16-bit fixed-point
/// multipliers with their exponents, from the "high-resolution" input scale (`in_scale / 128`)
/// to the output scale and to the "relu-ish" scale on which 3.0 is 32768.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HardSwishParams {
    input_zero_point: i16,
    output_zero_point: i16,
    output_multiplier: i16,
    output_exponent: i32,
    reluish_multiplier: i16,
    reluish_exponent: i32,
}

/// TFLite's `DownScaleInt32ToInt16Multiplier`: a Q0.31 multiplier rounded to Q0.15.
fn down_scale_to_i16(m: i32) -> i16 {
    const ROUNDING: i32 = 1 << 15;
    if m >= i32::MAX - ROUNDING {
        i16::MAX
    } else {
        // m >= 0 (from a positive real), so the sum is below 2^31 and the shift below 2^15.
        ((m + ROUNDING) >> 16) as i16
    }
}

impl HardSwishParams {
    /// From the input and output quantization, as TFLM's `HardSwishPrepare`: every scale
    /// quotient in `float`, widened to `double` for `QuantizeMultiplier`.
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for invalid scales or zero points, an
    /// output multiplier of 1 or more (TFLM's `output_multiplier_exponent <= 0` check), or a
    /// relu-ish exponent above 31.
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let hires_input_scale = (1.0_f32 / 128.0) * input.scale;
        let reluish_scale = 3.0_f32 / 32768.0;
        let (om, output_exponent) =
            general_multiplier(f64::from(hires_input_scale / output.scale), "output scale")?;
        if output_exponent > 0 {
            return Err(KernelError::InvalidQuantization {
                what: "output scale",
            });
        }
        let (rm, reluish_exponent) =
            general_multiplier(f64::from(hires_input_scale / reluish_scale), "input scale")?;
        Ok(Self {
            input_zero_point: input.zero_point as i16,
            output_zero_point: output.zero_point as i16,
            output_multiplier: down_scale_to_i16(om),
            output_exponent,
            reluish_multiplier: down_scale_to_i16(rm),
            reluish_exponent,
        })
    }

    #[inline]
    fn apply(&self, x: i8) -> i8 {
        // |x − zp| <= 255, so both fit an i16 as in TFLite (255 · 128 = 32640).
        let input_value = (i16::from(x)).wrapping_sub(self.input_zero_point);
        let hires = input_value.wrapping_mul(1 << 7);
        let preshift_output = srdhm16(hires, self.output_multiplier);
        let mut reluish = hires;
        if self.reluish_exponent > 0 {
            reluish = saturating_left_shift16(reluish, self.reluish_exponent - 1);
        }
        reluish = srdhm16(reluish, self.reluish_multiplier);
        if self.reluish_exponent > 0 {
            reluish = saturating_left_shift16(reluish, 1);
        }
        if self.reluish_exponent < 0 {
            reluish = rounding_divide_by_pot16(reluish, -self.reluish_exponent);
        }
        // From [−1, 1] to [0, 1] in Q0.15: (r + 2^15) >> 1 is in [0, 32767].
        reluish = ((i32::from(reluish) + (1 << 15)) >> 1) as i16;
        let preshift_output_value = sdhm16(reluish, preshift_output);
        let out = rounding_divide_by_pot16(preshift_output_value, -self.output_exponent)
            .wrapping_add(self.output_zero_point);
        out.clamp(i16::from(i8::MIN), i16::from(i8::MAX)) as i8
    }
}

/// gemmlowp's `SaturatingRoundingDoublingHighMul` on `int16`.
fn srdhm16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    let ab = i32::from(a) * i32::from(b);
    let nudge = if ab >= 0 { 1 << 14 } else { 1 - (1 << 14) };
    // C++ division truncates toward zero, as Rust's does.
    ((ab + nudge) / (1 << 15)) as i16
}

/// TFLite's `SaturatingDoublingHighMul` on `int16` (truncating, not rounding).
fn sdhm16(a: i16, b: i16) -> i16 {
    if a == b && a == i16::MIN {
        return i16::MAX;
    }
    ((i32::from(a) * i32::from(b)) / (1 << 15)) as i16
}

/// TFLite's `SaturatingLeftShift` on `int16`.
fn saturating_left_shift16(value: i16, amount: i32) -> i16 {
    // Exponents come from `general_multiplier` (at most 31), so `amount` is in 0..=30.
    let r = i64::from(value) << amount.clamp(0, 62);
    r.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16
}

/// gemmlowp's `RoundingDivideByPOT` on `int16`, exponent in `0..=31`: the mask is
/// `2^exponent − 1` truncated to 16 bits (all ones from exponent 16 on), as the template
/// computes it.
fn rounding_divide_by_pot16(x: i16, exponent: i32) -> i16 {
    let e = exponent.clamp(0, 31);
    let mask = ((1_i64 << e) - 1) as i16;
    let remainder = x & mask;
    let threshold = (mask >> 1).wrapping_add(i16::from(x < 0));
    let shifted = (i32::from(x) >> e) as i16;
    shifted.wrapping_add(i16::from(remainder > threshold))
}

/// int8 HARD_SWISH (see [`HardSwishParams`]). `input` and `out` must have the same length.
pub fn hard_swish(p: &HardSwishParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    map(input, out, |x| p.apply(x))
}

/// Bits by which SQUARED_DIFFERENCE shifts its zero-point-corrected inputs left (TFLM's
/// `left_shift = 7`: `255² · 2^14` still fits an `int32`).
pub const SQUARED_DIFFERENCE_LEFT_SHIFT: i32 = 7;

/// Parameters of int8 SQUARED_DIFFERENCE (TFLM's `ArithmeticParams` from its
/// `PrepareQuantized`).
///
/// ```text
/// a' = rescale((a − a_zp) · 2^7, a_scale / (2 · max_scale))
/// b' = rescale((b − b_zp) · 2^7, b_scale / (2 · max_scale))
/// out = clamp(rescale((a' − b')², (2 · max_scale)² / (2^14 · out_scale)) + out_zp)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SquaredDifferenceParams {
    input1_offset: i32,
    input2_offset: i32,
    output_offset: i32,
    input1_multiplier: i32,
    input1_shift: i32,
    input2_multiplier: i32,
    input2_shift: i32,
    output_multiplier: i32,
    output_shift: i32,
}

impl SquaredDifferenceParams {
    /// From the operands' quantization. Errors: [`KernelError::InvalidQuantization`] for
    /// invalid scales or zero points, or an output multiplier of `2^31` or more.
    pub fn new(a: Quant, b: Quant, out: Quant) -> Result<Self, KernelError> {
        check_quant(a, "a scale", "a zero point")?;
        check_quant(b, "b scale", "b zero point")?;
        check_quant(out, "output scale", "output zero point")?;
        let twice_max = 2.0 * f64::from(a.scale.max(b.scale));
        let input = |s: f32, what| {
            quantize_multiplier_smaller_than_one_exp(f64::from(s) / twice_max)
                .ok_or(KernelError::InvalidQuantization { what })
        };
        let (input1_multiplier, input1_shift) = input(a.scale, "a scale")?;
        let (input2_multiplier, input2_shift) = input(b.scale, "b scale")?;
        // (1 << 14) * scale is an int times a float: a float product, then widened.
        let shifted_out = (1 << (2 * SQUARED_DIFFERENCE_LEFT_SHIFT)) as f32 * out.scale;
        let real = (twice_max * twice_max) / f64::from(shifted_out);
        let (output_multiplier, output_shift) = general_multiplier(real, "output scale")?;
        Ok(Self {
            input1_offset: -a.zero_point,
            input2_offset: -b.zero_point,
            output_offset: out.zero_point,
            input1_multiplier,
            input1_shift,
            input2_multiplier,
            input2_shift,
            output_multiplier,
            output_shift,
        })
    }
}

impl BinaryOp for SquaredDifferenceParams {
    type Elem = i8;
    const TABULATE: bool = true;

    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        let shifted = (i32::from(a) + self.input1_offset) << SQUARED_DIFFERENCE_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, self.input1_multiplier, self.input1_shift)
    }

    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        let shifted = (i32::from(b) + self.input2_offset) << SQUARED_DIFFERENCE_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, self.input2_multiplier, self.input2_shift)
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        // |a|, |b| <= 255 · 2^7 / 2 (multipliers <= 0.5), so the square is below 2^30.
        let diff = a - b;
        let scaled = multiply_by_quantized_multiplier(
            diff.wrapping_mul(diff),
            self.output_multiplier,
            self.output_shift,
        );
        requantized_to_i8(scaled, self.output_offset, I8_MIN, I8_MAX)
    }
}

/// int8 SQUARED_DIFFERENCE with broadcasting over `s` (see [`SquaredDifferenceParams`]).
/// `a`, `b` and `out` must have the lengths [`BroadcastShape::lens`] gives.
pub fn squared_difference(
    p: &SquaredDifferenceParams,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    broadcast(p, s, a, b, out)
}

/// MAXIMUM's raw comparison.
struct Max;
/// MINIMUM's raw comparison.
struct Min;

impl BinaryOp for Max {
    type Elem = i8;
    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        i32::from(a)
    }
    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        i32::from(b)
    }
    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        // Both are int8 values.
        (if a > b { a } else { b }) as i8
    }
}

impl BinaryOp for Min {
    type Elem = i8;
    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        i32::from(a)
    }
    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        i32::from(b)
    }
    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        (if a < b { a } else { b }) as i8
    }
}

/// int8 MAXIMUM with broadcasting: the larger raw value (TFLM ignores quantization here).
/// Lengths as for [`squared_difference`].
pub fn maximum(s: &BroadcastShape, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    broadcast(&Max, s, a, b, out)
}

/// int8 MINIMUM with broadcasting: the smaller raw value. Lengths as for
/// [`squared_difference`].
pub fn minimum(s: &BroadcastShape, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    broadcast(&Min, s, a, b, out)
}

/// Parameters of int8 PRELU (TFLite's `PreluParams`).
///
/// ```text
/// v = x − in_zp
/// out = clamp(rescale(v, in_scale / out_scale) + out_zp)                          v >= 0
/// out = clamp(rescale(v · (alpha − alpha_zp), in_scale · alpha_scale / out_scale) + out_zp)
/// ```
///
/// with both multipliers computed in `double`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PreluParams {
    input_offset: i32,
    alpha_offset: i32,
    output_offset: i32,
    multiplier_1: i32,
    shift_1: i32,
    multiplier_2: i32,
    shift_2: i32,
}

impl PreluParams {
    /// From the quantization of the input, of alpha and of the output. Errors:
    /// [`KernelError::InvalidQuantization`] for invalid scales or zero points, or a multiplier
    /// of `2^31` or more.
    pub fn new(input: Quant, alpha: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(alpha, "alpha scale", "alpha zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let (i, a, o) = (
            f64::from(input.scale),
            f64::from(alpha.scale),
            f64::from(output.scale),
        );
        let (multiplier_1, shift_1) = general_multiplier(i / o, "output scale")?;
        let (multiplier_2, shift_2) = general_multiplier(i * a / o, "alpha scale")?;
        Ok(Self {
            input_offset: -input.zero_point,
            alpha_offset: -alpha.zero_point,
            output_offset: output.zero_point,
            multiplier_1,
            shift_1,
            multiplier_2,
            shift_2,
        })
    }
}

impl BinaryOp for PreluParams {
    type Elem = i8;
    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        i32::from(a) + self.input_offset
    }
    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        i32::from(b) + self.alpha_offset
    }
    #[inline]
    fn combine(&self, v: i32, alpha: i32) -> i8 {
        // Both in [−255, 255]: the product fits easily.
        let scaled = if v >= 0 {
            multiply_by_quantized_multiplier(v, self.multiplier_1, self.shift_1)
        } else {
            multiply_by_quantized_multiplier(v * alpha, self.multiplier_2, self.shift_2)
        };
        requantized_to_i8(scaled, self.output_offset, I8_MIN, I8_MAX)
    }
}

/// int8 PRELU with `alpha` broadcast against the input over `s` (see [`PreluParams`]).
/// Lengths as for [`squared_difference`] (`a` the input, `b` alpha).
pub fn prelu(
    p: &PreluParams,
    s: &BroadcastShape,
    input: &[i8],
    alpha: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    broadcast(p, s, input, alpha, out)
}

// Packed forms ([`packed`](crate::packed)): each read back checked as its constructor makes
// it, zero points and offsets of int8, rescalings as `quantize_multiplier` gives them.

/// Packed: the two bounds, in int8 and in order (the quantized 6 is at least the zero point).
impl Packed for Relu6Params {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.lower.into());
        w.put_i32(self.upper.into());
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (lower, upper) = r.take_range(I8_MIN, I8_MAX)?;
        // Both inside int8 (checked just above).
        Ok(Self {
            lower: lower as i8,
            upper: upper as i8,
        })
    }
}

/// Packed: the zero points, the identity rescaling, alpha's (its mantissa's magnitude, never
/// `2^31`) and alpha's sign.
impl Packed for LeakyReluParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point);
        w.put_i32(self.output_zero_point);
        w.put_multiplier((self.identity_multiplier, self.identity_shift));
        w.put_multiplier((self.alpha_multiplier, self.alpha_shift));
        self.alpha_negative.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_zero_point = r.take_zero_point("input zero point")?;
        let output_zero_point = r.take_zero_point("output zero point")?;
        let (identity_multiplier, identity_shift) = r.take_multiplier(31, "output scale")?;
        let (alpha_multiplier, alpha_shift) = r.take_multiplier(31, "alpha")?;
        Ok(Self {
            input_zero_point,
            output_zero_point,
            alpha_multiplier,
            alpha_shift,
            alpha_negative: bool::unpack(r)?,
            identity_multiplier,
            identity_shift,
        })
    }
}

/// Packed: the zero points, whether it rescales, and the rescaling (`(0, 0)` when it does
/// not, as [`AbsParams::new`] leaves it).
impl Packed for AbsParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point);
        w.put_i32(self.output_zero_point);
        self.rescale.pack(w);
        w.put_multiplier((self.multiplier, self.shift));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_zero_point = r.take_zero_point("input zero point")?;
        let output_zero_point = r.take_zero_point("output zero point")?;
        let rescale = bool::unpack(r)?;
        let (multiplier, shift) = r.take_multiplier(31, "output scale")?;
        if !rescale && (multiplier, shift) != (0, 0) {
            return Err(KernelError::InvalidQuantization {
                what: "output scale",
            });
        }
        Ok(Self {
            input_zero_point,
            output_zero_point,
            rescale,
            multiplier,
            shift,
        })
    }
}

/// The Q0.15 multipliers [`down_scale_to_i16`] makes of a Q0.31 one from `quantize_multiplier`:
/// 0, or `2^14..=2^15 − 1`.
fn take_multiplier16(r: &mut WordReader<'_>, what: &'static str) -> Result<i16, KernelError> {
    let m = r.take_in(0, i16::MAX.into(), what)?;
    if m != 0 && m < 1 << 14 {
        return Err(KernelError::InvalidQuantization { what });
    }
    // In 0..=i16::MAX (checked above).
    Ok(m as i16)
}

/// Packed: the zero points, and the two Q0.15 multipliers with their exponents (the output's
/// at most 0, the relu-ish one's in `−31..=31`).
impl Packed for HardSwishParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point.into());
        w.put_i32(self.output_zero_point.into());
        w.put_i32(self.output_multiplier.into());
        w.put_i32(self.output_exponent);
        w.put_i32(self.reluish_multiplier.into());
        w.put_i32(self.reluish_exponent);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        // Zero points of int8 (checked), so they fit an i16.
        let input_zero_point = r.take_zero_point("input zero point")? as i16;
        let output_zero_point = r.take_zero_point("output zero point")? as i16;
        Ok(Self {
            input_zero_point,
            output_zero_point,
            output_multiplier: take_multiplier16(r, "output scale")?,
            output_exponent: r.take_in(-31, 0, "output scale")?,
            reluish_multiplier: take_multiplier16(r, "input scale")?,
            reluish_exponent: r.take_in(-31, 31, "input scale")?,
        })
    }
}

/// Packed as [`AddParams`](super::AddParams)' quantization is, without an activation range
/// and with the output rescaling's shift up to 31.
impl Packed for SquaredDifferenceParams {
    fn pack(&self, w: &mut Words<'_>) {
        CommonScale {
            input1_offset: self.input1_offset,
            input2_offset: self.input2_offset,
            output_offset: self.output_offset,
            input1: (self.input1_multiplier, self.input1_shift),
            input2: (self.input2_multiplier, self.input2_shift),
            output: (self.output_multiplier, self.output_shift),
        }
        .pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let q = CommonScale::unpack(r, (I8_MIN, I8_MAX), 31)?;
        Ok(Self {
            input1_offset: q.input1_offset,
            input2_offset: q.input2_offset,
            output_offset: q.output_offset,
            input1_multiplier: q.input1.0,
            input1_shift: q.input1.1,
            input2_multiplier: q.input2.0,
            input2_shift: q.input2.1,
            output_multiplier: q.output.0,
            output_shift: q.output.1,
        })
    }
}

/// Packed: the input's and alpha's offsets, the output zero point, and the two rescalings.
impl Packed for PreluParams {
    fn pack(&self, w: &mut Words<'_>) {
        for offset in [self.input_offset, self.alpha_offset, self.output_offset] {
            w.put_i32(offset);
        }
        w.put_multiplier((self.multiplier_1, self.shift_1));
        w.put_multiplier((self.multiplier_2, self.shift_2));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_offset = r.take_input_offset("input zero point")?;
        let alpha_offset = r.take_input_offset("alpha zero point")?;
        let output_offset = r.take_zero_point("output zero point")?;
        let (multiplier_1, shift_1) = r.take_multiplier(31, "output scale")?;
        let (multiplier_2, shift_2) = r.take_multiplier(31, "alpha scale")?;
        Ok(Self {
            input_offset,
            alpha_offset,
            output_offset,
            multiplier_1,
            shift_1,
            multiplier_2,
            shift_2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn lengths_are_checked_before_writing() {
        let p = AbsParams::new(q(0.1, 0), q(0.1, 0)).unwrap();
        let mut out = [7_i8; 3];
        assert!(abs(&p, &[1, 2], &mut out).is_err());
        assert_eq!(out, [7; 3]);
        let s = BroadcastShape::new(&[2, 3], &[3], &[2, 3]).unwrap();
        assert!(maximum(&s, &[0; 6], &[0; 2], &mut [0; 6]).is_err());
        assert!(minimum(&s, &[0; 6], &[0; 3], &mut [0; 5]).is_err());
        let sd = SquaredDifferenceParams::new(q(0.1, 0), q(0.1, 0), q(0.1, 0)).unwrap();
        assert!(squared_difference(&sd, &s, &[0; 5], &[0; 3], &mut [0; 6]).is_err());
    }

    #[test]
    fn bad_quantization_is_refused() {
        assert!(Relu6Params::new(q(0.0, 0)).is_err());
        assert!(Relu6Params::new(q(1e-30, 0)).is_err());
        assert!(Relu6Params::new(q(0.1, 200)).is_err());
        assert!(LeakyReluParams::new(q(0.1, 0), q(0.1, 0), f32::NAN).is_err());
        assert!(LeakyReluParams::new(q(1e30, 0), q(1e-30, 0), 0.5).is_err());
        assert!(AbsParams::new(q(f32::INFINITY, 0), q(0.1, 0)).is_err());
        // TFLM refuses an output multiplier of 1 or more.
        assert!(HardSwishParams::new(q(1.0, 0), q(0.001, 0)).is_err());
        assert!(SquaredDifferenceParams::new(q(0.1, 0), q(-0.1, 0), q(0.1, 0)).is_err());
        assert!(PreluParams::new(q(0.1, 0), q(0.1, -129), q(0.1, 0)).is_err());
    }

    #[test]
    fn relu6_clamps_on_the_input_scale() {
        let p = Relu6Params::new(q(0.05, -10)).unwrap();
        assert_eq!(p.bounds(), (-10, 110));
        let mut out = [0; 4];
        relu6(&p, &[-128, -10, 50, 127], &mut out).unwrap();
        assert_eq!(out, [-10, -10, 50, 110]);
    }

    #[test]
    fn max_min_compare_raw_values_with_broadcast() {
        let s = BroadcastShape::new(&[2, 2], &[1, 2], &[2, 2]).unwrap();
        let mut out = [0; 4];
        maximum(&s, &[1, -5, 3, 9], &[2, 0], &mut out).unwrap();
        assert_eq!(out, [2, 0, 3, 9]);
        minimum(&s, &[1, -5, 3, 9], &[2, 0], &mut out).unwrap();
        assert_eq!(out, [1, -5, 2, 0]);
    }

    #[test]
    fn zero_size_extents_write_nothing() {
        let s = BroadcastShape::new(&[0, 3], &[1, 3], &[0, 3]).unwrap();
        assert_eq!(s.lens(), (0, 3, 0));
        maximum(&s, &[], &[1, 2, 3], &mut []).unwrap();
        let p = PreluParams::new(q(0.1, 0), q(0.1, 0), q(0.1, 0)).unwrap();
        prelu(&p, &s, &[], &[1, 2, 3], &mut []).unwrap();
        let h = HardSwishParams::new(q(0.1, 0), q(0.1, 0)).unwrap();
        hard_swish(&h, &[], &mut []).unwrap();
    }

    #[test]
    fn negative_alpha_flips_the_sign() {
        let p = LeakyReluParams::new(q(0.1, 0), q(0.1, 0), -0.5).unwrap();
        let mut out = [0; 3];
        leaky_relu(&p, &[-20, 0, 20], &mut out).unwrap();
        assert_eq!(out, [10, 0, 20]);
    }

    /// Every kernel over every int8 input (every pair for the binary ones) at extreme but
    /// accepted quantizations: no arithmetic overflows (debug builds would panic).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn no_overflow_on_any_input() {
        let all: [i8; 256] = core::array::from_fn(|i| i as u8 as i8);
        let quants = [
            q(1e-6, -128),
            q(0.002, 127),
            q(0.05, 0),
            q(3.0, -7),
            q(1000.0, 100),
        ];
        let mut out = [0_i8; 256];
        for &a in &quants {
            if let Ok(p) = Relu6Params::new(a) {
                relu6(&p, &all, &mut out).unwrap();
            }
            for &b in &quants {
                for alpha in [-3.0, -0.5, 0.0, 0.01, 0.3, 2.5] {
                    if let Ok(p) = LeakyReluParams::new(a, b, alpha) {
                        leaky_relu(&p, &all, &mut out).unwrap();
                    }
                }
                if let Ok(p) = AbsParams::new(a, b) {
                    abs(&p, &all, &mut out).unwrap();
                }
                if let Ok(p) = HardSwishParams::new(a, b) {
                    hard_swish(&p, &all, &mut out).unwrap();
                }
                let s = BroadcastShape::new(&[256, 1], &[256], &[256, 256]).unwrap();
                let mut wide = [0_i8; 65536];
                for &o in &quants {
                    if let Ok(p) = SquaredDifferenceParams::new(a, b, o) {
                        squared_difference(&p, &s, &all, &all, &mut wide).unwrap();
                    }
                    if let Ok(p) = PreluParams::new(a, b, o) {
                        prelu(&p, &s, &all, &all, &mut wide).unwrap();
                    }
                }
            }
        }
    }

    #[test]
    fn hard_swish_is_close_to_the_real_function() {
        let (i, o) = (q(0.05, 3), q(0.04, -60));
        let p = HardSwishParams::new(i, o).unwrap();
        let all: [i8; 256] = core::array::from_fn(|k| k as u8 as i8);
        let mut out = [0_i8; 256];
        hard_swish(&p, &all, &mut out).unwrap();
        for (&x, &y) in all.iter().zip(&out) {
            let r = 0.05 * (f32::from(x) - 3.0);
            let want = r * (r + 3.0).clamp(0.0, 6.0) / 6.0;
            let got = 0.04 * (f32::from(y) + 60.0);
            assert!((got - want).abs() <= 0.05, "x {x}: {got} vs {want}");
        }
    }

    #[test]
    fn int16_helpers_follow_gemmlowp() {
        assert_eq!(rounding_divide_by_pot16(5, 1), 3);
        assert_eq!(rounding_divide_by_pot16(-5, 1), -3);
        assert_eq!(rounding_divide_by_pot16(-6, 2), -2);
        // From 16 on the 16-bit mask is all ones: non-negative values round to 1.
        assert_eq!(rounding_divide_by_pot16(100, 20), 1);
        assert_eq!(rounding_divide_by_pot16(-100, 20), -1);
        assert_eq!(srdhm16(i16::MIN, i16::MIN), i16::MAX);
        assert_eq!(srdhm16(16384, 16384), 8192);
        assert_eq!(sdhm16(-3, 16384), -1);
        assert_eq!(saturating_left_shift16(20000, 1), i16::MAX);
        assert_eq!(down_scale_to_i16(i32::MAX), i16::MAX);
    }
}
