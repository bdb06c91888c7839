//! int8 SOFTMAX with int8 output (zero point −128, scale 1/256), or with int16 output (zero
//! point −32768, scale 1/65536: TFLM's int8-to-int16 form, [`softmax_i8_to_i16`]).
//!
//! Arithmetic (TFLM `kernels/internal/reference/softmax.h`, the quantized `Softmax`, with
//! parameters from `micro/kernels/softmax_common.cc` and `kernels/internal/quantization_util.cc`),
//! applied independently to each row of `depth` elements (the innermost dimension):
//!
//! 1. `diff = x − max(row)` (an integer in `[−255, 0]`).
//! 2. Elements with `diff < diff_min` contribute nothing and output −128.
//! 3. Otherwise `diff` is scaled into Q5.26 (5 integer bits, `kScaledDiffIntegerBits`) by the
//!    "greater than one" multiplier of `min(beta · input_scale · 2^26, 2^31 − 1)` (computed in
//!    `double`; [`quantize_multiplier`](crate::fixed_point::quantize_multiplier), shift ≥ 0),
//!    i.e. `x << shift` then a doubling high multiply, and gemmlowp's
//!    [`exp_on_negative_values`] gives `exp(beta · input_scale · diff)` in Q0.31.
//! 4. The exponentials, each rescaled to Q12.19 (a rounding right shift by 12), are summed.
//! 5. [`get_reciprocal`] gives `1 / sum` as a Q0.31 mantissa and `num_bits_over_unit`.
//! 6. Each output is `RoundingDivideByPOT(reciprocal · exp, num_bits_over_unit + 31 − 8) − 128`,
//!    clamped to int8 (the product is a doubling high multiply). For int16 output (TFLM's
//!    `Softmax<int8_t, int16_t>`) the shift is `num_bits_over_unit + 31 − 16`, the offset
//!    −32768 and the clamp int16's; the parameters are the same but for the output check.
//!
//! `diff_min = −floor(31 · 2^26 / 2^shift)` (TFLM's `CalculateInputRadius(5, shift)`) is the
//! most negative difference whose scaled value still fits Q5.26, roughly −31 in real units.
//!
//! TFLM aborts (`TFLITE_CHECK`) when step 6's exponent leaves `0..=31`, which happens once a
//! row's sum of exponentials reaches 512 (for example 512 or more equal inputs); [`softmax`]
//! returns [`KernelError::Unsupported`] instead. With int16 output the exponent stays in range
//! (`num_bits_over_unit` is at most 12).

use super::{check_quant, check_scale, Quant};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier_greater_than_one, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
};
use crate::gemmlowp::{exp_on_negative_values, get_reciprocal};
use crate::{check_len, KernelError};

/// Integer bits of the scaled differences (Q5.26), TFLM's `kScaledDiffIntegerBits`.
const SCALED_DIFF_INTEGER_BITS: u32 = 5;
/// Integer bits of the sum of exponentials (Q12.19), TFLM's `kAccumulationIntegerBits`.
const ACCUMULATION_INTEGER_BITS: i32 = 12;

/// `CalculateInputRadius(5, shift, 31)`: `floor(31 · 2^26 / 2^shift)`, exact in integers,
/// negated: the most negative difference from a row's maximum that still contributes.
pub(crate) fn diff_min(shift: i32) -> i32 {
    -((31_i32 << 26) >> shift.clamp(0, 31))
}

/// Precomputed parameters of int8 SOFTMAX (TFLM's `SoftmaxParams` for int8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxParams {
    input_multiplier: i32,
    input_left_shift: i32,
    diff_min: i32,
}

/// The input multiplier and its left shift (`diff_min` follows from the shift). Read back: a
/// multiplier in `[2^30, 2^31)` (a normalised Q0.31 mantissa, as the scaling makes it) and a
/// shift in `0..=31`, else [`KernelError::InvalidQuantization`].
impl crate::packed::Packed for SoftmaxParams {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        w.put_i32(self.input_multiplier);
        w.put_i32(self.input_left_shift);
    }
    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        let input_multiplier = r.take_in(1 << 30, i32::MAX, "softmax input multiplier")?;
        let shift = r.take_in(0, 31, "softmax input shift")?;
        Ok(Self {
            input_multiplier,
            input_left_shift: shift,
            diff_min: diff_min(shift),
        })
    }
}

impl SoftmaxParams {
    /// Parameters from the input quantization, `beta` (TFLite's `SoftmaxOptions.beta`, usually
    /// 1) and the output quantization, which must be TFLM's fixed int8 softmax output.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when the input scale is not finite and
    /// positive, a zero point is outside int8, the output zero point is not −128 or its scale
    /// not exactly `1/256` (TFLM's checks), or `beta · input_scale · 2^26` is not greater than
    /// one (TFLM's `QuantizeMultiplierGreaterThanOne` aborts on that; it includes `beta <= 0`).
    pub fn new(input: Quant, beta: f32, output: Quant) -> Result<Self, KernelError> {
        check_scale(output.scale, "output scale")?;
        if output.zero_point != -128 {
            return Err(KernelError::InvalidQuantization {
                what: "output zero point (must be -128)",
            });
        }
        if output.scale != 1.0 / 256.0 {
            return Err(KernelError::InvalidQuantization {
                what: "output scale (must be 1/256)",
            });
        }
        Self::scaling(input, beta)
    }

    /// Parameters for [`softmax_i8_to_i16`]: as [`new`](Self::new), but the output must be
    /// TFLM's int16 softmax output: zero point −32768 and a scale within `0.001 / 65536` of
    /// `1/65536` (TFLM's `TF_LITE_ENSURE_NEAR`, in `float`).
    ///
    /// Errors as [`new`](Self::new), with those output checks.
    pub fn with_i16_output(input: Quant, beta: f32, output: Quant) -> Result<Self, KernelError> {
        check_scale(output.scale, "output scale")?;
        if output.zero_point != -32768 {
            return Err(KernelError::InvalidQuantization {
                what: "output zero point (must be -32768)",
            });
        }
        let unit = 1.0_f32 / 65536.0;
        if (output.scale - unit).abs() > 0.001_f32 * unit {
            return Err(KernelError::InvalidQuantization {
                what: "output scale (must be 1/65536)",
            });
        }
        Self::scaling(input, beta)
    }

    /// The input scaling, which does not depend on the output type.
    fn scaling(input: Quant, beta: f32) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        // PreprocessSoftmaxScaling: min(beta · input_scale · 2^(31 − 5), 2^31 − 1) in double.
        let max_real = f64::from(i32::MAX);
        let real = f64::from(beta) * f64::from(input.scale) * f64::from(1_u32 << 26);
        let real = if real > max_real { max_real } else { real };
        let (input_multiplier, input_left_shift) = quantize_multiplier_greater_than_one(real)
            .ok_or(KernelError::InvalidQuantization {
                what: "beta * input scale",
            })?;
        // real in (1, 2^31 − 1] gives a shift in 1..=31.
        let shift = input_left_shift.clamp(0, 31);
        Ok(Self {
            input_multiplier,
            input_left_shift: shift,
            diff_min: diff_min(shift),
        })
    }

    /// `(multiplier, left_shift)` scaling input differences into Q5.26.
    #[must_use]
    pub const fn input_multiplier(&self) -> (i32, i32) {
        (self.input_multiplier, self.input_left_shift)
    }

    /// The most negative `x − max(row)` that still contributes (TFLM's `diff_min`).
    #[must_use]
    pub const fn diff_min(&self) -> i32 {
        self.diff_min
    }

    /// `exp(beta · input_scale · diff)` in Q0.31, for `diff >= diff_min`.
    #[inline]
    fn exp(&self, diff: i32) -> i32 {
        let scaled =
            multiply_by_quantized_multiplier(diff, self.input_multiplier, self.input_left_shift);
        exp_on_negative_values(scaled, SCALED_DIFF_INTEGER_BITS)
    }
}

/// An output element type of int8 SOFTMAX (TFLM's `OutputT`).
trait SoftmaxOutput: Copy {
    /// `8 · sizeof(OutputT)`.
    const BITS: i32;
    /// The type's minimum, the offset added to every output (and the output of elements
    /// below `diff_min`).
    const MIN: Self;
    /// `min(max(v + MIN, MIN), MAX)`.
    fn from_unsaturated(v: i32) -> Self;
}

impl SoftmaxOutput for i8 {
    const BITS: i32 = 8;
    const MIN: i8 = i8::MIN;
    #[inline(always)]
    fn from_unsaturated(v: i32) -> i8 {
        (v - 128).clamp(-128, 127) as i8
    }
}

impl SoftmaxOutput for i16 {
    const BITS: i32 = 16;
    const MIN: i16 = i16::MIN;
    #[inline(always)]
    fn from_unsaturated(v: i32) -> i16 {
        (v - 32768).clamp(-32768, 32767) as i16
    }
}

/// int8 SOFTMAX along the innermost dimension (TFLM's quantized `reference_ops::Softmax`
/// with int8 input and output).
///
/// `input` and `output` hold rows of `depth` elements (any number of rows, including none).
/// Errors: [`KernelError::LengthMismatch`] when the lengths differ or are not a multiple of
/// `depth` (operand `"input"`: the expected length is the next smaller multiple),
/// [`KernelError::Unsupported`] for `depth == 0` with a non-empty input, or — after the
/// preceding rows have been written — when a row's sum of exponentials is 512 or more, where
/// TFLM aborts.
pub fn softmax(
    p: &SoftmaxParams,
    depth: usize,
    input: &[i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    softmax_to(p, depth, input, output)
}

/// int8 SOFTMAX with int16 output along the innermost dimension (TFLM's
/// `reference_ops::Softmax<int8_t, int16_t>`), with parameters from
/// [`SoftmaxParams::with_i16_output`].
///
/// Errors as [`softmax`], but for the sum of exponentials, which has no limit here.
pub fn softmax_i8_to_i16(
    p: &SoftmaxParams,
    depth: usize,
    input: &[i8],
    output: &mut [i16],
) -> Result<(), KernelError> {
    softmax_to(p, depth, input, output)
}

/// TFLM's quantized `Softmax<int8_t, OutputT>`.
#[inline(always)]
fn softmax_to<O: SoftmaxOutput>(
    p: &SoftmaxParams,
    depth: usize,
    input: &[i8],
    output: &mut [O],
) -> Result<(), KernelError> {
    check_len("output", input.len(), output.len())?;
    if input.is_empty() {
        return Ok(());
    }
    if depth == 0 {
        return Err(KernelError::Unsupported { what: "depth 0" });
    }
    check_len("input", input.len() - input.len() % depth, input.len())?;

    // exp(diff) depends only on diff ∈ [−255, 0]: cache it per call (−1 = not yet computed).
    let mut cache = [-1_i32; 256];
    for (row, out_row) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = row.iter().copied().max().unwrap_or(i8::MIN);
        let mut exp_of = |x: i8| -> Option<i32> {
            let diff = i32::from(x) - i32::from(max);
            if diff < p.diff_min {
                return None;
            }
            // diff ∈ [−255, 0], so −diff fits a u8 index.
            let slot = &mut cache[usize::from((-diff) as u8)];
            if *slot < 0 {
                *slot = p.exp(diff);
            }
            Some(*slot)
        };
        let mut sum = 0_i32;
        for &x in row {
            if let Some(e) = exp_of(x) {
                // Rescale Q0.31 → Q12.19; the sum wraps like gemmlowp's int32 addition.
                sum = sum.wrapping_add(rounding_divide_by_pot(e, 31 - 19));
            }
        }
        let (reciprocal, bits_over_unit) = get_reciprocal(sum, ACCUMULATION_INTEGER_BITS);
        let exponent = bits_over_unit + 31 - O::BITS;
        if !(0..=31).contains(&exponent) {
            return Err(KernelError::Unsupported {
                what: "softmax sum of exponentials >= 512",
            });
        }
        for (o, &x) in out_row.iter_mut().zip(row) {
            *o = match exp_of(x) {
                Some(e) => {
                    let unsat = rounding_divide_by_pot(
                        saturating_rounding_doubling_high_mul(reciprocal, e),
                        exponent,
                    );
                    O::from_unsaturated(unsat)
                }
                None => O::MIN,
            };
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn int16_output_checks_its_quantization() {
        let input = q(0.1, 0);
        let out16 = q(1.0 / 65536.0, -32768);
        assert!(SoftmaxParams::with_i16_output(input, 1.0, out16).is_ok());
        // Within TFLM's tolerance of 1/65536, and just outside it.
        let near = q(1.0005 / 65536.0, -32768);
        assert!(SoftmaxParams::with_i16_output(input, 1.0, near).is_ok());
        let far = q(1.002 / 65536.0, -32768);
        assert!(SoftmaxParams::with_i16_output(input, 1.0, far).is_err());
        assert!(SoftmaxParams::with_i16_output(input, 1.0, q(1.0 / 65536.0, 0)).is_err());
        assert!(SoftmaxParams::with_i16_output(input, 1.0, q(1.0 / 256.0, -128)).is_err());
        assert!(SoftmaxParams::new(input, 1.0, out16).is_err());
    }

    #[test]
    fn int16_output_of_equal_and_far_apart_inputs() {
        let p = SoftmaxParams::with_i16_output(q(0.5, 0), 1.0, q(1.0 / 65536.0, -32768)).unwrap();
        // Four equal inputs: a quarter each; one far below the rest: nothing.
        let mut out = [0i16; 8];
        softmax_i8_to_i16(&p, 4, &[3, 3, 3, 3, 100, 100, -128, 100], &mut out).unwrap();
        assert_eq!(out[..4], [-16384; 4]);
        assert_eq!(out[6], i16::MIN);
        // 512 equal inputs: where int8 output aborts, int16 output is 1/512 each.
        let mut wide = [0i16; 512];
        softmax_i8_to_i16(&p, 512, &[7; 512], &mut wide).unwrap();
        assert!(wide.iter().all(|&v| v == -32768 + 128));
        let mut narrow = [0i8; 512];
        let p8 = SoftmaxParams::new(q(0.5, 0), 1.0, q(1.0 / 256.0, -128)).unwrap();
        assert!(softmax(&p8, 512, &[7; 512], &mut narrow).is_err());
        // Lengths and depth are checked.
        assert!(softmax_i8_to_i16(&p, 4, &[0; 4], &mut out).is_err());
        assert!(softmax_i8_to_i16(&p, 3, &[0; 8], &mut out).is_err());
        assert!(softmax_i8_to_i16(&p, 0, &[0; 8], &mut out).is_err());
    }
}
