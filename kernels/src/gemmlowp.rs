//! gemmlowp's fixed-point transcendental functions, as TFLM's int8 SOFTMAX, LOGISTIC and TANH
//! use them.
//!
//! gemmlowp (`fixedpoint/fixedpoint.h`) represents a real number `r` in the format `Qm.n`
//! (`m` integer bits, `n = 31 − m` fractional bits) by the `i32` "raw" value `r · 2^n`. The
//! functions here take and return raw values; the format is stated in each one's docs.
//!
//! The operations they are built from:
//!
//! - a product of two fixed-point numbers is [`saturating_rounding_doubling_high_mul`] of the
//!   raws (a `Qa` times a `Qb` gives a `Q(a+b)`), rounding to nearest with ties up;
//! - sums and differences are plain 32-bit additions, which wrap like the C++ does on every
//!   two's-complement target (gemmlowp only saturates them for 16-bit raws);
//! - changing the format (`Rescale`) or multiplying by a power of two is
//!   [`saturating_rounding_multiply_by_pot`]: a saturating left shift for positive exponents,
//!   a rounding (half away from zero) right shift for negative ones;
//! - [`rounding_half_sum`] is `(a + b) / 2` rounded half away from zero.
//!
//! On top of these, [`exp_on_negative_values`] evaluates `exp(x)` for `x ≤ 0` by splitting `x`
//! into a multiple of 1/4 and a remainder in `[−1/4, 0)`: the remainder goes through a
//! fourth-order Taylor expansion around −1/8
//! ([`exp_on_interval_between_negative_one_quarter_and_0_excl`]) and each set bit of the
//! multiple of 1/4 multiplies the result by a constant `exp(−2^k)`, `k = −2..=4` (a "barrel
//! shifter"). [`one_over_one_plus_x_for_x_in_0_1`] computes `1 / (1 + x)` by three
//! Newton–Raphson iterations from the classic `48/17 − 32/17 · d` starting point, and
//! [`get_reciprocal`] (TFLM's `GetReciprocal`) normalizes an arbitrary positive fixed-point
//! value into `[1, 2)` with a count of leading zeros before using it. [`logistic`] and [`tanh`]
//! combine the exponential with that division (or with `(1 − x) / (1 + x)`,
//! [`one_minus_x_over_one_plus_x_for_x_in_0_1`]).
//!
//! Every function is total: inputs gemmlowp leaves undefined (shift counts of 32 or more,
//! signed overflow) give the wrapped or saturated value instead of panicking.

use crate::fixed_point::{rounding_divide_by_pot, saturating_rounding_doubling_high_mul};

/// `(a + b) / 2` rounded to nearest, ties away from zero: gemmlowp's `RoundingHalfSum` for
/// `int32` (computed in 64 bits, so it never overflows).
#[inline]
#[must_use]
pub fn rounding_half_sum(a: i32, b: i32) -> i32 {
    let sum = i64::from(a) + i64::from(b);
    let sign = if sum >= 0 { 1 } else { -1 };
    // |sum + sign| / 2 <= 2^31, and only sum = −2^32 would reach −2^31 + … : the quotient is
    // always within i32.
    ((sum + sign) / 2) as i32
}

/// `x · 2^exponent`: gemmlowp's `SaturatingRoundingMultiplyByPOT` (with a run-time exponent).
///
/// For `exponent > 0` this is a left shift that saturates to `i32::MIN` / `i32::MAX` when the
/// result does not fit (gemmlowp compares `x` with `±(2^(31 − exponent) − 1)`); for
/// `exponent < 0` it is [`rounding_divide_by_pot`] by `2^−exponent` (ties away from zero);
/// `exponent == 0` returns `x`. Exponents of 32 or more saturate every non-zero `x`.
#[inline]
#[must_use]
pub fn saturating_rounding_multiply_by_pot(x: i32, exponent: i32) -> i32 {
    if exponent < 0 {
        return rounding_divide_by_pot(x, exponent.saturating_neg());
    }
    if exponent == 0 {
        return x;
    }
    if exponent >= 32 {
        return match x.cmp(&0) {
            core::cmp::Ordering::Greater => i32::MAX,
            core::cmp::Ordering::Less => i32::MIN,
            core::cmp::Ordering::Equal => 0,
        };
    }
    let threshold = (1_i32 << (31 - exponent)).wrapping_sub(1);
    if x > threshold {
        i32::MAX
    } else if x < -threshold {
        i32::MIN
    } else {
        x << exponent
    }
}

/// `exp(a)` for `a` in `[−1/4, 0)`, both in Q0.31: gemmlowp's
/// `exp_on_interval_between_negative_one_quarter_and_0_excl`.
///
/// With `x = a + 1/8`, it evaluates
/// `exp(−1/8) · (1 + x + x²/2 + x³/6 + x⁴/24)`, grouping the last three terms as
/// `((x⁴/4 + x³) / 3 + x²) / 2`, every product and halving rounded as in the module docs.
#[must_use]
pub fn exp_on_interval_between_negative_one_quarter_and_0_excl(a: i32) -> i32 {
    /// exp(−1/8) in Q0.31.
    const EXP_MINUS_ONE_EIGHTH: i32 = 1_895_147_668;
    /// 1/3 in Q0.31.
    const ONE_THIRD: i32 = 715_827_883;
    let mul = saturating_rounding_doubling_high_mul;
    let x = a.wrapping_add(1 << 28); // + 1/8
    let x2 = mul(x, x);
    let x3 = mul(x2, x);
    let x4 = mul(x2, x2);
    let x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2);
    let higher_terms = saturating_rounding_multiply_by_pot(
        mul(x4_over_4.wrapping_add(x3), ONE_THIRD).wrapping_add(x2),
        -1,
    );
    EXP_MINUS_ONE_EIGHTH.wrapping_add(mul(EXP_MINUS_ONE_EIGHTH, x.wrapping_add(higher_terms)))
}

/// `exp(−2^k)` in Q0.31 for `k = −2..=4`, the barrel shifter's multipliers.
const EXP_BARREL: [(i32, i32); 7] = [
    (-2, 1_672_461_947),
    (-1, 1_302_514_674),
    (0, 790_015_084),
    (1, 290_630_308),
    (2, 39_332_535),
    (3, 720_401),
    (4, 242),
];

/// `exp(a)` for `a ≤ 0` given in Q`integer_bits`.(31 − `integer_bits`); the result is in Q0.31
/// (`exp(0)` is `i32::MAX`, gemmlowp's "one"). gemmlowp's `exp_on_negative_values`.
///
/// `a` is split as `a = (a mod 1/4 − 1/4) − r` where `r ≥ 0` is a multiple of 1/4. The first
/// part, in `[−1/4, 0)`, is rescaled to Q0.31 (a saturating left shift by `integer_bits`) and
/// goes through [`exp_on_interval_between_negative_one_quarter_and_0_excl`]; then, for each
/// `k` in `−2..=4` with `k < integer_bits`, if bit `k` of `r` (in units of one) is set the
/// result is multiplied by `exp(−2^k)`. With more than 5 integer bits, inputs below −32 give 0.
/// Finally `a == 0` gives exactly one.
///
/// gemmlowp's `integer_bits` is a template parameter from 0 to 29 (a quarter must be
/// representable); larger values are treated as 29 here. Positive `a` is outside the
/// function's contract; it gives gemmlowp's (meaningless but defined) result.
#[must_use]
pub fn exp_on_negative_values(a: i32, integer_bits: u32) -> i32 {
    let integer_bits = integer_bits.min(29) as i32;
    let fractional_bits = 31 - integer_bits;
    let one_quarter = 1_i32 << (fractional_bits - 2);
    let mask = one_quarter - 1;
    let a_mod_quarter_minus_one_quarter = (a & mask).wrapping_sub(one_quarter);
    let mut result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits),
    );
    let remainder = a_mod_quarter_minus_one_quarter.wrapping_sub(a);
    for &(k, multiplier) in &EXP_BARREL {
        if integer_bits > k && remainder & (1_i32 << (fractional_bits + k)) != 0 {
            result = saturating_rounding_doubling_high_mul(result, multiplier);
        }
    }
    if integer_bits > 5 {
        // −32 in the input format.
        let clamp = -(1_i32 << (36 - integer_bits));
        if a < clamp {
            result = 0;
        }
    }
    if a == 0 {
        result = i32::MAX;
    }
    result
}

/// `1 / (1 + a)` for `a` in `[0, 1)`, both in Q0.31: gemmlowp's
/// `one_over_one_plus_x_for_x_in_0_1`.
///
/// With `d = (1 + a) / 2` (in `[1/2, 1)`, by [`rounding_half_sum`]), the reciprocal `x ≈ 1/d`
/// is kept in Q2.29: it starts at `48/17 − 32/17 · d` and is refined three times by
/// `x ← x + x · (1 − d · x)` (the correction term computed in Q4.27 and rescaled by a
/// saturating left shift of 2). The result `x / 2` is returned in Q0.31.
#[must_use]
pub fn one_over_one_plus_x_for_x_in_0_1(a: i32) -> i32 {
    let x = reciprocal_of_half_denominator(a);
    // x / 2 in Q1.30 has the raw of x; rescaling Q1.30 to Q0.31 is a left shift by one.
    saturating_rounding_multiply_by_pot(x, 1)
}

/// 1.0 in Q2.29.
const ONE_Q2: i32 = 1 << 29;

/// `1 / d` in Q2.29 for `d = (1 + a) / 2`, `a` in Q0.31: the Newton–Raphson division that
/// gemmlowp's `one_over_one_plus_x_for_x_in_0_1` and `one_minus_x_over_one_plus_x_for_x_in_0_1`
/// share (three iterations from `48/17 − 32/17 · d`).
fn reciprocal_of_half_denominator(a: i32) -> i32 {
    /// 48/17 in Q2.29.
    const FORTY_EIGHT_OVER_SEVENTEEN: i32 = 1_515_870_810;
    /// −32/17 in Q2.29.
    const MINUS_THIRTY_TWO_OVER_SEVENTEEN: i32 = -1_010_580_540;
    let mul = saturating_rounding_doubling_high_mul;
    let half_denominator = rounding_half_sum(a, i32::MAX);
    let mut x = FORTY_EIGHT_OVER_SEVENTEEN
        .wrapping_add(mul(half_denominator, MINUS_THIRTY_TWO_OVER_SEVENTEEN));
    for _ in 0..3 {
        let one_minus_dx = ONE_Q2.wrapping_sub(mul(half_denominator, x));
        x = x.wrapping_add(saturating_rounding_multiply_by_pot(mul(x, one_minus_dx), 2));
    }
    x
}

/// `(1 − a) / (1 + a)` for `a` in `[0, 1)`, both in Q0.31: gemmlowp's
/// `one_minus_x_over_one_plus_x_for_x_in_0_1`, the last step of its `tanh`.
///
/// The same Newton–Raphson reciprocal `x ≈ 2 / (1 + a)` as
/// [`one_over_one_plus_x_for_x_in_0_1`] (Q2.29); the result is `x − 1`, rescaled from Q2.29 to
/// Q0.31 by a saturating left shift of 2.
#[must_use]
pub fn one_minus_x_over_one_plus_x_for_x_in_0_1(a: i32) -> i32 {
    let x = reciprocal_of_half_denominator(a);
    saturating_rounding_multiply_by_pot(x.wrapping_sub(ONE_Q2), 2)
}

/// `logistic(a) = 1 / (1 + exp(−a))` for `a` in Q`integer_bits`.(31 − `integer_bits`), the
/// result in Q0.31: gemmlowp's `logistic`.
///
/// For `a > 0` it is [`one_over_one_plus_x_for_x_in_0_1`] of `exp(−a)`
/// ([`exp_on_negative_values`]); for `a < 0` it is one (`i32::MAX`) minus the result for `−a`;
/// `a == 0` gives exactly one half (`2^30`). Negations wrap as gemmlowp's do on
/// two's-complement targets (only `i32::MIN` is affected).
#[must_use]
pub fn logistic(a: i32, integer_bits: u32) -> i32 {
    if a == 0 {
        return 1 << 30;
    }
    let magnitude = if a > 0 { a } else { a.wrapping_neg() };
    let positive = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(
        magnitude.wrapping_neg(),
        integer_bits,
    ));
    if a > 0 {
        positive
    } else {
        i32::MAX.wrapping_sub(positive)
    }
}

/// `tanh(a)` for `a` in Q`integer_bits`.(31 − `integer_bits`), the result in Q0.31: gemmlowp's
/// `tanh`, `(1 − exp(−2|a|)) / (1 + exp(−2|a|))` with the sign of `a`.
///
/// `−|a|` is doubled exactly by reading it with one more integer bit (gemmlowp's
/// `ExactMulByPot<1>`), goes through [`exp_on_negative_values`] and
/// [`one_minus_x_over_one_plus_x_for_x_in_0_1`]; `a == 0` gives 0. Negations wrap.
#[must_use]
pub fn tanh(a: i32, integer_bits: u32) -> i32 {
    if a == 0 {
        return 0;
    }
    let negative = if a < 0 { a } else { a.wrapping_neg() };
    let t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(
        negative,
        integer_bits.saturating_add(1),
    ));
    if a < 0 {
        t.wrapping_neg()
    } else {
        t
    }
}

/// TFLM's `GetReciprocal`: for a positive `x` in Q`x_integer_digits`.(31 − `x_integer_digits`),
/// returns `(r, num_bits_over_unit)` with `1 / x ≈ r · 2^−num_bits_over_unit`, `r` in Q0.31.
///
/// `x` is shifted left until its top bit is bit 31 (its leading-zero count `z`), which makes
/// it a number `1 + f` with `f` in `[0, 1)` in Q1.31 terms; `f` in Q0.31 is the shifted value
/// minus `2^31` (in wrapping arithmetic), `r` is
/// [`one_over_one_plus_x_for_x_in_0_1`]`(f)` and `num_bits_over_unit = x_integer_digits − z`.
/// For `x == 0` (no reciprocal) the shift of 32 gives 0, as if `f` were `−1`.
#[must_use]
pub fn get_reciprocal(x: i32, x_integer_digits: i32) -> (i32, i32) {
    let bits = x as u32;
    let headroom_plus_one = bits.leading_zeros();
    let num_bits_over_unit = x_integer_digits.wrapping_sub(headroom_plus_one as i32);
    let shifted = bits.checked_shl(headroom_plus_one).unwrap_or(0);
    let shifted_minus_one = shifted.wrapping_sub(1 << 31) as i32;
    (
        one_over_one_plus_x_for_x_in_0_1(shifted_minus_one),
        num_bits_over_unit,
    )
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn to_f64(raw: i32, integer_bits: i32) -> f64 {
        f64::from(raw) / 2f64.powi(31 - integer_bits)
    }

    #[test]
    fn half_sum_rounds_away_from_zero() {
        assert_eq!(rounding_half_sum(1, 2), 2);
        assert_eq!(rounding_half_sum(-1, -2), -2);
        assert_eq!(rounding_half_sum(2, 2), 2);
        assert_eq!(rounding_half_sum(-3, 0), -2);
        assert_eq!(rounding_half_sum(0, 0), 0);
        assert_eq!(rounding_half_sum(i32::MAX, i32::MAX), i32::MAX);
        assert_eq!(rounding_half_sum(i32::MIN, i32::MIN), i32::MIN);
        assert_eq!(rounding_half_sum(i32::MAX, i32::MIN), -1); // −0.5 → −1
    }

    #[test]
    fn multiply_by_pot() {
        assert_eq!(saturating_rounding_multiply_by_pot(3, 2), 12);
        assert_eq!(saturating_rounding_multiply_by_pot(-3, 2), -12);
        assert_eq!(saturating_rounding_multiply_by_pot(1 << 29, 2), i32::MAX);
        assert_eq!(
            saturating_rounding_multiply_by_pot((1 << 29) - 1, 2),
            i32::MAX - 3
        );
        assert_eq!(saturating_rounding_multiply_by_pot(-(1 << 29), 2), i32::MIN);
        assert_eq!(
            saturating_rounding_multiply_by_pot(-(1 << 29) + 1, 2),
            i32::MIN + 4
        );
        assert_eq!(saturating_rounding_multiply_by_pot(1, 31), i32::MAX);
        assert_eq!(saturating_rounding_multiply_by_pot(0, 31), 0);
        assert_eq!(saturating_rounding_multiply_by_pot(-1, 31), i32::MIN);
        assert_eq!(saturating_rounding_multiply_by_pot(5, 40), i32::MAX);
        assert_eq!(saturating_rounding_multiply_by_pot(-5, 40), i32::MIN);
        assert_eq!(saturating_rounding_multiply_by_pot(0, 40), 0);
        assert_eq!(saturating_rounding_multiply_by_pot(6, -2), 2); // 1.5 → 2
        assert_eq!(saturating_rounding_multiply_by_pot(-6, -2), -2);
        assert_eq!(saturating_rounding_multiply_by_pot(7, 0), 7);
        assert_eq!(saturating_rounding_multiply_by_pot(7, i32::MIN), 0);
    }

    #[test]
    fn exp_interval_is_accurate() {
        let mut a = -(1_i32 << 29); // −1/4
        while a < 0 {
            let got = to_f64(
                exp_on_interval_between_negative_one_quarter_and_0_excl(a),
                0,
            );
            let want = to_f64(a, 0).exp();
            assert!((got - want).abs() < 5e-7, "a={a} got={got} want={want}");
            a += 1_234_567;
        }
    }

    #[test]
    fn exp_on_negative_values_q5_26() {
        assert_eq!(exp_on_negative_values(0, 5), i32::MAX);
        // Geometrically spaced inputs from −2^−26 down to about −31.
        let mut a: i64 = -1;
        while a > -(31_i64 << 26) {
            let got = to_f64(exp_on_negative_values(a as i32, 5), 0);
            let want = to_f64(a as i32, 5).exp();
            assert!((got - want).abs() < 1e-6, "a={a} got={got} want={want}");
            a = a * 3 / 2 - 7;
        }
        // Exact barrel steps: exp(−1) is exp(−1/4 − 3/4) composed from the constants.
        let e1 = to_f64(exp_on_negative_values(-(1 << 26), 5), 0);
        assert!((e1 - (-1.0_f64).exp()).abs() < 1e-6);
        // Beyond −32 (the most negative Q5.26 value), every barrel stage applies.
        let tiny = exp_on_negative_values(i32::MIN, 5);
        assert!((0..3).contains(&tiny), "{tiny}");
    }

    #[test]
    fn exp_clamps_with_many_integer_bits() {
        // Q10.21: −40 is below −32 → 0; −10 is not.
        assert_eq!(exp_on_negative_values(-40 << 21, 10), 0);
        assert!(exp_on_negative_values(-10 << 21, 10) > 0);
        assert_eq!(exp_on_negative_values(0, 10), i32::MAX);
        // Out-of-range integer bits are clamped, not a panic.
        let _ = exp_on_negative_values(-5, 31);
        let _ = exp_on_negative_values(i32::MIN, u32::MAX);
    }

    #[test]
    fn reciprocal_is_accurate() {
        let mut a = 0_i32;
        while a < i32::MAX - 10_000_000 {
            let got = to_f64(one_over_one_plus_x_for_x_in_0_1(a), 0);
            let want = 1.0 / (1.0 + to_f64(a, 0));
            assert!((got - want).abs() < 1e-8, "a={a}");
            a += 9_876_543;
        }
        // get_reciprocal of 3.0 in Q12.19: 1/3 = (2/3) · 2^−1.
        let (r, bits) = get_reciprocal(3 << 19, 12);
        assert_eq!(bits, 1);
        assert!((to_f64(r, 0) - 2.0 / 3.0).abs() < 1e-8);
        // 1.0: the normalized value is exactly 1, f = 0, r = 1/1 (as 0.99999…).
        let (r, bits) = get_reciprocal(1 << 19, 12);
        assert_eq!(bits, 0);
        assert!(r > i32::MAX - 4);
        assert_eq!(get_reciprocal(0, 12).1, -20);
    }
}
