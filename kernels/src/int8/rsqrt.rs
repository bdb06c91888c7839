//! int8 RSQRT (`1 / sqrt(x)`), bit-exact with TFLM's reference kernel.
//!
//! TFLM (`micro/kernels/elementwise.cc`, `PrepareAbsRsqrt` and `RsqrtEvalQuantized`):
//!
//! ```text
//! Prepare:  (m, s) = QuantizeMultiplier(1.0 / double(sqrtf(in_scale) · out_scale))
//!                    (the square root and the product in float, the reciprocal in double)
//! Eval:     v = x − in_zp                     TFLM fails the whole op if any v < 0
//!           v == 0:  out = 127                 ("any value close to 0 represents the max")
//!           else:    (r, e) = GetInvSqrtQuantizedMultiplierExp(v, kReverseShift)
//!                    d   = MultiplyByQuantizedMultiplier(1, r, e + 20)
//!                    out = clamp(MultiplyByQuantizedMultiplier(d, m, s − 20) + out_zp,
//!                                −128, 127)
//! ```
//!
//! `GetInvSqrtQuantizedMultiplierExp` (`kernels/internal/common.h`) computes `1 / sqrt(v)` as a
//! Q0.31 mantissa `r` and a power-of-two exponent `e`: it normalizes `v` by an even power of
//! two into `[2^27, 2^29)`, runs five Newton–Raphson steps `x ← 1.5·x − (v/2)·x³` in gemmlowp
//! Q3.28 fixed point from `x = 1`, multiplies by `sqrt(2)/2` and folds a negative exponent back
//! into the mantissa; `v = 1` (and 0) give `(2^31 − 1, 0)`. The intermediate `d` is
//! `2^20 / sqrt(v)` rounded to an integer, so the result has about 20 bits of precision before
//! the output rescaling.
//!
//! The kernel checks every input before writing anything; TFLM writes the outputs before the
//! first negative input and then fails.

use super::{check_quant, general_multiplier, requantized_to_i8, Quant};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
};
use crate::gemmlowp::saturating_rounding_multiply_by_pot;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// TFLM's `kShift`: `1 / sqrt(v)` is carried as an integer scaled by `2^20`.
const INV_SQRT_SHIFT: i32 = 20;

/// Precomputed parameters of int8 RSQRT (TFLM's `OpDataAbsRsqrt`); see the
/// [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RsqrtParams {
    input_zero_point: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

impl RsqrtParams {
    /// Parameters from the input and output quantization, as TFLM's Prepare computes them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, `sqrtf(in_scale) · out_scale` overflows or
    /// underflows `float` (TFLM would divide by zero or infinity), or the multiplier
    /// `1 / (sqrt(in_scale) · out_scale)` is `2^31` or more.
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let product = sqrt_f32(input.scale) * output.scale;
        if !(product.is_finite() && product > 0.0) {
            return Err(KernelError::InvalidQuantization {
                what: "output scale",
            });
        }
        let real = 1.0 / f64::from(product);
        let (multiplier, shift) = general_multiplier(real, "output scale")?;
        Ok(Self {
            input_zero_point: input.zero_point,
            output_zero_point: output.zero_point,
            multiplier,
            shift,
        })
    }

    /// `(multiplier, shift)` of the output rescaling, `1 / (sqrt(in_scale) · out_scale)`.
    #[must_use]
    pub const fn multiplier(&self) -> (i32, i32) {
        (self.multiplier, self.shift)
    }

    /// `(input, output)` zero points.
    #[must_use]
    pub const fn zero_points(&self) -> (i32, i32) {
        (self.input_zero_point, self.output_zero_point)
    }

    /// The output for one input already checked to be at least the input zero point.
    fn apply(&self, x: i8) -> i8 {
        let value = i32::from(x) - self.input_zero_point;
        if value == 0 {
            return i8::MAX;
        }
        let (inv_sqrt, inv_shift) = inv_sqrt_quantized_multiplier_exp(value);
        let data = multiply_by_quantized_multiplier(1, inv_sqrt, inv_shift + INV_SQRT_SHIFT);
        let scaled =
            multiply_by_quantized_multiplier(data, self.multiplier, self.shift - INV_SQRT_SHIFT);
        requantized_to_i8(scaled, self.output_zero_point, -128, 127)
    }
}

/// Packed ([`packed`](crate::packed)): the zero points, of int8, and the output rescaling, as
/// `quantize_multiplier` gives one (shift at most 31).
impl Packed for RsqrtParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point);
        w.put_i32(self.output_zero_point);
        w.put_multiplier((self.multiplier, self.shift));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_zero_point = r.take_zero_point("input zero point")?;
        let output_zero_point = r.take_zero_point("output zero point")?;
        let (multiplier, shift) = r.take_multiplier(31, "output scale")?;
        Ok(Self {
            input_zero_point,
            output_zero_point,
            multiplier,
            shift,
        })
    }
}

/// int8 RSQRT, elementwise (see the [module docs](self)).
///
/// Errors: [`KernelError::LengthMismatch`] when `out` is not as long as `input`;
/// [`KernelError::Unsupported`] `"rsqrt of a negative value"` when an input is below the input
/// zero point (TFLM: "Rsqrt is only defined for positive values"). Nothing is written on error.
pub fn rsqrt(p: &RsqrtParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    if input.iter().any(|&x| i32::from(x) < p.input_zero_point) {
        return Err(KernelError::Unsupported {
            what: "rsqrt of a negative value",
        });
    }
    if input.len() > 256 {
        // Each output depends on the input byte only: tabulate the (at most 256) valid inputs
        // once rather than running the Newton iteration per element.
        let mut table = [0_i8; 256];
        for x in i8::MIN..=i8::MAX {
            if i32::from(x) >= p.input_zero_point {
                table[usize::from(x as u8)] = p.apply(x);
            }
        }
        for (o, &x) in out.iter_mut().zip(input) {
            *o = table[usize::from(x as u8)];
        }
    } else {
        for (o, &x) in out.iter_mut().zip(input) {
            *o = p.apply(x);
        }
    }
    Ok(())
}

/// TFLM's `GetInvSqrtQuantizedMultiplierExp(input, kReverseShift)`: `1 / sqrt(input)` as a
/// Q0.31 mantissa and a left shift, for `input >= 0`.
pub(crate) fn inv_sqrt_quantized_multiplier_exp(input: i32) -> (i32, i32) {
    if input <= 1 {
        // TFLM treats 0 like 1 (its callers never pass 0).
        return (i32::MAX, 0);
    }
    let mut input = input;
    let mut shift = 11;
    while input >= 1 << 29 {
        input /= 4;
        shift += 1;
    }
    // Normalize into [2^27, 2^29) by an even shift (input is in [2, 2^29), so at least 3
    // leading zeros: the pair count below is at least 1).
    let max_left_shift_bits = input.leading_zeros() - 1;
    let left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
    shift -= left_shift_bit_pairs as i32;
    input <<= 2 * left_shift_bit_pairs;

    // gemmlowp fixed point: Q3.28 values (raw = real · 2^28); a product of a Qa and a Qb is the
    // doubling high multiply of the raws, a Q(a+b); Rescale back to Q3 is a saturating left
    // shift by the difference in integer bits.
    let q3_input = input >> 1;
    let half_input = rounding_divide_by_pot(q3_input, 1); // SaturatingRoundingMultiplyByPOT<−1>
    let half_three = (1 << 28) + (1 << 27); // 1.5 in Q3.28
    let mut x = 1 << 28; // 1.0 in Q3.28
    for _ in 0..5 {
        let x3 =
            saturating_rounding_doubling_high_mul(saturating_rounding_doubling_high_mul(x, x), x);
        let x3 = saturating_rounding_multiply_by_pot(x3, 6); // Q9 → Q3
        let step = saturating_rounding_doubling_high_mul(half_three, x)
            .wrapping_sub(saturating_rounding_doubling_high_mul(half_input, x3));
        x = saturating_rounding_multiply_by_pot(step, 3); // Q6 → Q3
    }
    // × sqrt(2)/2 in Q0.31 (gemmlowp's constant 1518500250); Q3 × Q0 is read back as Q3.
    let mut inv_sqrt = saturating_rounding_doubling_high_mul(x, 1_518_500_250);
    if shift < 0 {
        // The C++ `<<=` on int32; for inputs up to 255 it never overflows (tested).
        inv_sqrt = inv_sqrt.wrapping_shl(shift.unsigned_abs());
        shift = 0;
    }
    // kReverseShift = −1: TFLM's right shift becomes a left shift.
    (inv_sqrt, -shift)
}

/// `sqrtf(x)` for finite positive `x`, correctly rounded (IEEE 754 requires `sqrtf` to be, and
/// `core` has no float square root without `std`).
///
/// Exact integer square root of the significand scaled to 62 bits, with a sticky bit for the
/// remainder, then one rounding to `f32` (to nearest, ties to even) through an exact `f64`.
pub(crate) fn sqrt_f32(x: f32) -> f32 {
    let bits = x.to_bits();
    let biased = ((bits >> 23) & 0xff) as i32;
    let fraction = u64::from(bits & 0x7f_ffff);
    // x = m · 2^e with an integer m.
    let (mut m, mut e) = if biased == 0 {
        (fraction, -149)
    } else {
        (fraction | 1 << 23, biased - 150)
    };
    if m == 0 || biased == 0xff || bits >> 31 != 0 {
        return f32::NAN; // not a finite positive number: outside this function's contract
    }
    if e % 2 != 0 {
        m <<= 1;
        e -= 1;
    }
    // Shift m left by an even amount so its top bit is bit 61 or 62: its square root then has
    // 31 or 32 bits, more than f32's 24 plus a rounding bit.
    let top = 63 - m.leading_zeros() as i32;
    let pairs = (62 - top) / 2;
    let scaled = m << (2 * pairs);
    let root = scaled.isqrt();
    let sticky = u64::from(root * root != scaled);
    // sqrt(x) = sqrt(scaled) · 2^(e/2 − pairs), and sqrt(scaled) lies in [root, root + 1),
    // strictly inside when sticky is 1; (2·root + sticky) / 2 rounds the same way, and it and
    // the power of two are exact in f64 (33 bits; an exponent within ±100).
    let exponent = e / 2 - pairs - 1;
    let pow2 = f64::from_bits(((exponent + 1023) as u64) << 52);
    ((2 * root + sticky) as f64 * pow2) as f32
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn sqrt_f32_is_correctly_rounded() {
        // Against std's sqrt (IEEE-exact) on normal powers of two and their neighbours,
        // subnormals, the extremes, and a sweep of the whole range.
        let mut values = std::vec![
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            3.0,
            0.002_152_984_5,
            0.009_580_351,
        ];
        for e in -126..128 {
            let b = 2f32.powi(e).to_bits();
            values.extend([b - 1, b, b + 1].map(f32::from_bits));
        }
        let mut bits = 1_u32;
        while bits < 0x7f80_0000 {
            values.push(f32::from_bits(bits));
            bits += 9_973;
        }
        for x in values {
            assert_eq!(sqrt_f32(x).to_bits(), x.sqrt().to_bits(), "sqrt({x:e})");
        }
    }

    #[test]
    fn inv_sqrt_is_accurate_and_never_overflows() {
        assert_eq!(inv_sqrt_quantized_multiplier_exp(0), (i32::MAX, 0));
        assert_eq!(inv_sqrt_quantized_multiplier_exp(1), (i32::MAX, 0));
        let mut worst = 0.0_f64;
        for v in 2..=255 {
            let (m, shift) = inv_sqrt_quantized_multiplier_exp(v);
            let approx = f64::from(m) * 2f64.powi(shift - 31);
            let exact = 1.0 / f64::from(v).sqrt();
            worst = worst.max(((approx - exact) / exact).abs());
            // The folded mantissa did not wrap (TFLM's `<<=` stays within int32).
            assert!(m > 0 && shift <= 0, "v={v}");
            // The intermediate d ≈ 2^20 / sqrt(v) that RSQRT rescales.
            let d = multiply_by_quantized_multiplier(1, m, shift + INV_SQRT_SHIFT);
            let rel = f64::from(d) / (exact * 1_048_576.0) - 1.0;
            assert!(rel.abs() < 1e-5, "v={v}: d={d}");
        }
        // Five Newton steps from 1 leave TFLM's 1/sqrt with a relative error of about 1e−6
        // where 1/sqrt of the normalized input is furthest from 1 (v = 2 · 4^k): enough for
        // int8, and part of the bit-exact result.
        assert!(worst < 2e-6 && worst > 1e-7, "worst relative error {worst}");
    }
}
