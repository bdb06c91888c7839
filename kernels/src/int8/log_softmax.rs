//! int8 LOG_SOFTMAX along the innermost dimension, output scale 16/256 and zero point 127
//! (TFLM `kernels/internal/reference/log_softmax.h` `LogSoftmaxQuantized`, parameters from
//! `micro/kernels/log_softmax.cc` and `kernels/internal/quantization_util.cc`).
//!
//! Per row:
//!
//! 1. `diff = x − max(row)`; differences below `diff_min` (as SOFTMAX's, TFLM's
//!    `CalculateInputRadius(5, left_shift)`) are left out of the sum.
//! 2. Each other `diff` is scaled into Q5.26 by SOFTMAX's input multiplier (beta 1) and
//!    gemmlowp's `exp_on_negative_values` gives its exponential in Q0.31; rescaled to Q12.19
//!    (rounding right shift by 12) they are summed.
//! 3. `log(sum)` in Q5.26 is gemmlowp's `log_x_for_x_greater_than_or_equal_to_1<5>` of the
//!    Q12.19 sum (TFLM's `common.h`, here `log_x_ge_1`).
//! 4. `adjusted_diff_min = max(diff_min − 1, MultiplyByQuantizedMultiplier(log_sum − 2^31,
//!    reverse_divisor, reverse_shift))`, where `reverse_divisor · 2^reverse_shift` is
//!    `2^(31 − left_shift) / input_multiplier` (`PreprocessLogSoftmaxScalingExp`): the
//!    smallest difference whose output is representable.
//! 5. Each output is `RoundingDivideByPOT(scaled(diff) − log_sum, 22) + 127` clamped to int8
//!    where `diff > adjusted_diff_min` (strictly), −128 elsewhere.
//!
//! TFLM refuses an output whose scale is not exactly `16/256` or zero point not 127.

use super::softmax::diff_min;
use super::{check_quant, check_scale, Quant};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier_greater_than_one,
    quantize_multiplier_smaller_than_one_exp, rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
};
use crate::gemmlowp::{
    exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1, rounding_half_sum,
    saturating_rounding_multiply_by_pot,
};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Integer bits of the scaled differences and of the log (Q5.26).
const INPUT_INTEGER_BITS: i32 = 5;
/// Integer bits of the sum of exponentials (Q12.19).
const ACCUMULATION_INTEGER_BITS: i32 = 12;
/// Integer bits of the output before the final shift (TFLM's `kOutputIntegerBits`).
const OUTPUT_INTEGER_BITS: i32 = 4;

/// Precomputed parameters of int8 LOG_SOFTMAX (TFLM's `LogSoftmaxOpData`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogSoftmaxParams {
    input_multiplier: i32,
    input_left_shift: i32,
    reverse_scaling_divisor: i32,
    reverse_scaling_shift: i32,
    diff_min: i32,
}

impl LogSoftmaxParams {
    /// Parameters from the input and output quantization.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] for an input scale that is not finite
    /// and positive or below `2^−26` (TFLM's `QuantizeMultiplierGreaterThanOne` aborts), a zero
    /// point outside int8, or an output other than scale `16/256`, zero point 127.
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_scale(output.scale, "output scale")?;
        if output.scale != 16.0 / 256.0 {
            return Err(KernelError::InvalidQuantization {
                what: "output scale (must be 16/256)",
            });
        }
        if output.zero_point != 127 {
            return Err(KernelError::InvalidQuantization {
                what: "output zero point (must be 127)",
            });
        }
        let bad = KernelError::InvalidQuantization {
            what: "input scale",
        };
        // PreprocessSoftmaxScaling with beta 1: min(input_scale · 2^26, 2^31 − 1).
        let real = f64::from(input.scale) * f64::from(1_u32 << 26);
        let real = real.min(f64::from(i32::MAX));
        let (input_multiplier, shift) = quantize_multiplier_greater_than_one(real).ok_or(bad)?;
        // real in (1, 2^31 − 1] gives a shift in 1..=31.
        let input_left_shift = shift.clamp(1, 31);
        // PreprocessLogSoftmaxScalingExp's reverse scaling, in double.
        let reverse = f64::from(1_i32 << (31 - input_left_shift)) / f64::from(input_multiplier);
        let (reverse_scaling_divisor, reverse_scaling_shift) =
            quantize_multiplier_smaller_than_one_exp(reverse).ok_or(bad)?;
        Ok(Self {
            input_multiplier,
            input_left_shift,
            reverse_scaling_divisor,
            reverse_scaling_shift,
            diff_min: diff_min(input_left_shift),
        })
    }

    #[inline]
    fn scaled(&self, diff: i32) -> i32 {
        multiply_by_quantized_multiplier(diff, self.input_multiplier, self.input_left_shift)
    }
}

/// Packed ([`packed`](crate::packed)): the input rescaling (a normalised mantissa and a left
/// shift in `1..=31`, as the scaling makes them) and the reverse scaling (below one); the
/// radius follows from the shift, as [`LogSoftmaxParams::new`] derives it.
impl Packed for LogSoftmaxParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_multiplier((self.input_multiplier, self.input_left_shift));
        w.put_multiplier((self.reverse_scaling_divisor, self.reverse_scaling_shift));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_multiplier = r.take_in(1 << 30, i32::MAX, "input scale")?;
        let input_left_shift = r.take_in(1, 31, "input scale")?;
        let (reverse_scaling_divisor, reverse_scaling_shift) =
            r.take_multiplier(0, "input scale")?;
        Ok(Self {
            input_multiplier,
            input_left_shift,
            reverse_scaling_divisor,
            reverse_scaling_shift,
            diff_min: diff_min(input_left_shift),
        })
    }
}

/// gemmlowp's `SaturatingRoundingMultiplyByPOTParam` as TFLM's `common.h` has it, for the
/// exponents it is used with here (0 to 31; a negative one, from an input TFLM's arithmetic
/// has already wrapped, rounds down instead of being undefined).
#[inline]
fn pot(x: i32, exponent: i32) -> i32 {
    saturating_rounding_multiply_by_pot(x, exponent)
}

/// TFLM's `log_x_for_x_greater_than_or_equal_to_1_impl<5, 12>`: `log(x)` in Q5.26 of `x` in
/// Q12.19, every product a doubling high multiply and every sum wrapping, as gemmlowp's
/// fixed-point type computes them.
pub(crate) fn log_x_ge_1(x: i32) -> i32 {
    const ACCUM_INTEGER_BITS: i32 = INPUT_INTEGER_BITS + 1;
    const LOG_2: i32 = 1_488_522_236;
    const SQRT_SQRT_HALF: i32 = 1_805_811_301;
    const SQRT_HALF: i32 = 1_518_500_250;
    const ONE_QUARTER: i32 = 536_870_912;
    const ALPHA_N: i32 = 117_049_297;
    const ALPHA_D: i32 = 127_690_142;
    const ALPHA_I: i32 = 1_057_819_769;
    const ALPHA_F: i32 = 638_450_708;
    let mul = saturating_rounding_doubling_high_mul;
    let saturate = |v: i64| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;

    // Rescale<6>(1/4): a rounding right shift by 6.
    let shifted_quarter = rounding_divide_by_pot(ONE_QUARTER, ACCUM_INTEGER_BITS);
    let z_a = x;
    let z_a_headroom_plus_1 = (z_a as u32).leading_zeros() as i32;
    let r_a_tmp = pot(z_a, z_a_headroom_plus_1 - 1);
    let r_a_raw = pot(mul(r_a_tmp, SQRT_HALF), 1);
    let z_a_pow_2_adj = saturate(
        i64::from(pot(
            ACCUMULATION_INTEGER_BITS - z_a_headroom_plus_1,
            31 - ACCUM_INTEGER_BITS,
        )) + i64::from(shifted_quarter),
    );
    let z_b = mul(z_a, SQRT_HALF);
    let z_b_headroom = (z_b as u32).leading_zeros() as i32 - 1;
    let r_b_raw = pot(z_a, z_b_headroom);
    let z_b_pow_2_adj = saturate(
        i64::from(pot(
            ACCUMULATION_INTEGER_BITS - z_b_headroom,
            31 - ACCUM_INTEGER_BITS,
        )) - i64::from(shifted_quarter),
    );
    let r = r_a_raw.min(r_b_raw);
    let z_pow_2_adj = z_a_pow_2_adj.max(z_b_pow_2_adj);

    let p = rounding_half_sum(r, SQRT_SQRT_HALF);
    let mut q = r.wrapping_sub(SQRT_SQRT_HALF);
    q = q.wrapping_add(q);
    let common_sq = mul(q, q);
    let num = mul(q, r).wrapping_add(mul(mul(q, common_sq), ALPHA_N));
    let denom_minus_one = mul(
        p,
        ALPHA_I
            .wrapping_add(q)
            .wrapping_add(mul(ALPHA_D, common_sq)),
    )
    .wrapping_add(mul(ALPHA_F, q));
    let recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one);
    // Rescale<6>(num), then the Q6.25 sum rescaled to Q5.26 (a saturating doubling).
    let num_scaled = rounding_divide_by_pot(num, ACCUM_INTEGER_BITS);
    let sum = mul(z_pow_2_adj, LOG_2).wrapping_add(mul(num_scaled, recip_denom));
    saturating_rounding_multiply_by_pot(sum, ACCUM_INTEGER_BITS - INPUT_INTEGER_BITS)
}

/// int8 LOG_SOFTMAX along the innermost dimension (see the [module docs](self)): `input` and
/// `output` hold rows of `depth` elements.
///
/// Errors: [`KernelError::LengthMismatch`] when the lengths differ or are not a multiple of
/// `depth`; [`KernelError::Unsupported`] for `depth == 0` with a non-empty input.
pub fn log_softmax(
    p: &LogSoftmaxParams,
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
    for (row, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = row.iter().copied().max().unwrap_or(i8::MIN);
        let diff = |x: i8| i32::from(x) - i32::from(max);
        let mut sum = 0_i32;
        for &x in row {
            let d = diff(x);
            if d >= p.diff_min {
                let e = exp_on_negative_values(p.scaled(d), INPUT_INTEGER_BITS as u32);
                sum = sum.wrapping_add(rounding_divide_by_pot(e, ACCUMULATION_INTEGER_BITS));
            }
        }
        let log_sum = log_x_ge_1(sum);
        let shifted_log_sum = log_sum.wrapping_add(i32::MIN);
        let adjusted_diff_min = (p.diff_min - 1).max(multiply_by_quantized_multiplier(
            shifted_log_sum,
            p.reverse_scaling_divisor,
            p.reverse_scaling_shift,
        ));
        for (o, &x) in out.iter_mut().zip(row) {
            let d = diff(x);
            *o = if d > adjusted_diff_min {
                let shifted = rounding_divide_by_pot(
                    p.scaled(d).wrapping_sub(log_sum),
                    31 - INPUT_INTEGER_BITS - OUTPUT_INTEGER_BITS,
                );
                shifted.wrapping_add(127).clamp(-128, 127) as i8
            } else {
                i8::MIN
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
    fn log_of_powers_of_two_and_e() {
        // log(1) = 0 and log(2) = 0.693..., log(e) = 1 in Q5.26.
        let one = 1 << 19;
        let tol = 1 << 6;
        assert!((log_x_ge_1(one)).abs() < tol);
        let ln2 = (core::f64::consts::LN_2 * f64::from(1 << 26)) as i32;
        assert!((log_x_ge_1(2 * one) - ln2).abs() < tol);
        let e = (core::f64::consts::E * f64::from(1 << 19)) as i32;
        assert!((log_x_ge_1(e) - (1 << 26)).abs() < tol);
        let big = (1000.0_f64.ln() * f64::from(1 << 26)) as i32;
        assert!((log_x_ge_1(1000 * one) - big).abs() < tol * 4);
    }

    #[test]
    fn rows_approximate_the_log_softmax() {
        let p = LogSoftmaxParams::new(q(0.1, 0), q(16.0 / 256.0, 127)).unwrap();
        let x = [10_i8, 0, -10, 5];
        let mut out = [0; 4];
        log_softmax(&p, 4, &x, &mut out).unwrap();
        let reals: [f64; 4] = x.map(|v| f64::from(v) * 0.1);
        let lse = reals.iter().map(|r| r.exp()).sum::<f64>().ln();
        for (o, r) in out.iter().zip(reals) {
            let want = ((r - lse) / 0.0625 + 127.0).round().clamp(-128.0, 127.0);
            assert!((f64::from(*o) - want).abs() <= 1.0, "{o} vs {want}");
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn bad_parameters_are_refused() {
        assert!(LogSoftmaxParams::new(q(0.1, 0), q(0.0625, 0)).is_err());
        assert!(LogSoftmaxParams::new(q(0.1, 0), q(0.07, 127)).is_err());
        assert!(LogSoftmaxParams::new(q(1e-9, 0), q(0.0625, 127)).is_err());
        assert!(LogSoftmaxParams::new(q(f32::NAN, 0), q(0.0625, 127)).is_err());
        let p = LogSoftmaxParams::new(q(0.1, 0), q(0.0625, 127)).unwrap();
        let mut out = [0; 4];
        assert!(log_softmax(&p, 3, &[0; 4], &mut out).is_err());
        assert!(log_softmax(&p, 0, &[0; 4], &mut out).is_err());
        assert!(log_softmax(&p, 2, &[0; 4], &mut out[..3]).is_err());
        log_softmax(&p, 0, &[], &mut []).unwrap();
        // Huge rows wrap the sum as TFLM's int32 does, without panicking.
        let big = [0_i8; 5000];
        let mut out = [0; 5000];
        log_softmax(&p, 5000, &big, &mut out).unwrap();
    }
}
