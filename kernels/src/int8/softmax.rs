//! int8 SOFTMAX with int8 output (zero point −128, scale 1/256).
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
//!    clamped to int8 (the product is a doubling high multiply).
//!
//! `diff_min = −floor(31 · 2^26 / 2^shift)` (TFLM's `CalculateInputRadius(5, shift)`) is the
//! most negative difference whose scaled value still fits Q5.26, roughly −31 in real units.
//!
//! TFLM aborts (`TFLITE_CHECK`) when step 6's exponent leaves `0..=31`, which happens once a
//! row's sum of exponentials reaches 512 (for example 512 or more equal inputs); [`softmax`]
//! returns [`KernelError::Unsupported`] instead.

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

/// Precomputed parameters of int8 SOFTMAX (TFLM's `SoftmaxParams` for int8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxParams {
    input_multiplier: i32,
    input_left_shift: i32,
    diff_min: i32,
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
        check_quant(input, "input scale", "input zero point")?;
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
        // CalculateInputRadius(5, shift, 31): floor(31 · 2^26 / 2^shift), exact in integers.
        let diff_min = -((31_i32 << 26) >> shift);
        Ok(Self {
            input_multiplier,
            input_left_shift: shift,
            diff_min,
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
        let exponent = bits_over_unit + 31 - 8;
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
                    (unsat - 128).clamp(-128, 127) as i8
                }
                None => i8::MIN,
            };
        }
    }
    Ok(())
}
