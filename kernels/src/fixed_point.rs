//! Fixed-point arithmetic of TensorFlow Lite Micro's integer kernels.
//!
//! Every int8 kernel in TFLM ends the same way: an `i32` accumulator, in units of
//! `input_scale · weight_scale` (or some other product of scales), has to be re-expressed in units
//! of the output scale. The ratio of the two scales, the *real multiplier* `M`, is a `double`
//! computed once when the model is prepared; at run time it is never used as a float. Instead
//! [`quantize_multiplier`] splits it into a 31-bit mantissa `q` (a Q0.31 number in `[0.5, 1)`)
//! and a power-of-two exponent `shift`, so that `M ≈ q · 2^(shift − 31)`, and
//! [`multiply_by_quantized_multiplier`] applies it with integer operations only.
//!
//! # Double rounding
//!
//! TFLM's default build (`TFLITE_SINGLE_ROUNDING` is not defined) applies the multiplier in two
//! steps, each of which rounds:
//!
//! 1. if `shift > 0`, `x` is first multiplied by `2^shift` (in wrapping 32-bit arithmetic, so a
//!    large left shift silently overflows exactly as the C++ does on every real compiler);
//! 2. [`saturating_rounding_doubling_high_mul`] computes `x · q / 2^31`, rounded to the nearest
//!    integer with ties going **up** (towards +∞);
//! 3. if `shift < 0`, [`rounding_divide_by_pot`] divides by `2^−shift`, rounded to the nearest
//!    integer with ties going **away from zero**.
//!
//! Rounding twice is not the same as rounding once: for `x = 5`, `q = 2^30` (0.5) and
//! `shift = −1` the exact result is `5 · 0.25 = 1.25`, but step 2 gives `round(2.5) = 3` and
//! step 3 `round(1.5) = 2`. Optimized LiteRT kernels, and TFLM built with
//! `TFLITE_SINGLE_ROUNDING`, use a single 64-bit rounding step and therefore differ from the
//! reference by ±1 on such values; the reference kernels this crate matches are the
//! double-rounding ones, so this module reproduces both roundings, including the asymmetric tie
//! rule of step 2 (`−2.5` rounds to `−2`, `2.5` to `3`).
//!
//! The arithmetic comes from gemmlowp's `fixedpoint/fixedpoint.h`
//! (`SaturatingRoundingDoublingHighMul`, `RoundingDivideByPOT`) and TFLM's
//! `kernels/internal/common.cc` and `quantization_util.cc`. Everything here is total: functions
//! accept every input without panicking, and give TFLM's result wherever TFLM's behaviour is
//! defined.

/// `round(a · b / 2^31)` with ties towards +∞, saturating: gemmlowp's
/// `SaturatingRoundingDoublingHighMul` for `int32`.
///
/// This is the high 32 bits of the doubled 64-bit product `2 · a · b`, rounded. gemmlowp nudges
/// the product by `+2^30` when it is non-negative and by `1 − 2^30` when it is negative, then
/// divides by `2^31` truncating toward zero. The combined effect is round-half-up (`a · b / 2^31
/// = −2.5` gives `−2`, `+2.5` gives `3`), which is what this function computes directly, with
/// one add and an arithmetic shift and no sign-dependent nudge or division:
///
/// - for `ab >= 0`, truncation is flooring, so gemmlowp's result is `floor((ab + 2^30) / 2^31)`;
/// - for `ab < 0` the nudged value `v = ab + 1 − 2^30` is negative, and truncating a negative
///   quotient is rounding it up: `ceil(v / 2^31) = floor((v + 2^31 − 1) / 2^31)
///   = floor((ab + 2^30) / 2^31)`, the same expression.
///
/// So the sign correction cancels out exactly, for every product. (The tests compare this
/// against gemmlowp's division formula on edge values and a million pseudo-random pairs.)
///
/// The only product whose result does not fit, `i32::MIN · i32::MIN` (`+1.0` in Q0.31), saturates
/// to `i32::MAX`.
#[inline(always)]
#[must_use]
pub fn saturating_rounding_doubling_high_mul(a: i32, b: i32) -> i32 {
    // |a·b| <= 2^62, so adding 2^30 cannot overflow an i64.
    let ab = i64::from(a) * i64::from(b);
    let rounded = (ab + (1 << 30)) >> 31;
    // Only i32::MIN · i32::MIN = 2^62 gives 2^31, one past i32::MAX; min() saturates it and
    // leaves every other (in-range) quotient unchanged, without a branch.
    rounded.min(i64::from(i32::MAX)) as i32
}

/// `x / 2^exponent` rounded to the nearest integer, ties away from zero: gemmlowp's
/// `RoundingDivideByPOT`, also known as a rounding arithmetic right shift.
///
/// The quotient is the arithmetic shift `x >> exponent` (which rounds toward −∞), plus one when
/// the discarded bits `x & (2^exponent − 1)` exceed half of `2^exponent` — by "more than half"
/// for non-negative `x` and "at least half" for negative `x`, which makes ties go away from
/// zero: `3 / 2 → 2`, `−3 / 2 → −2`, `5 / 4 → 1`, `−5 / 4 → −1`, `6 / 4 → 2`, `−6 / 4 → −2`.
///
/// TFLM only uses exponents in `0..=31` (gemmlowp asserts it). Outside that range this function
/// stays total: negative exponents are treated as `0` (returns `x`), and exponents above 31 round
/// the exact quotient the same way (so the result is `0`, or `−1` for `x = i32::MIN` and
/// exponent 32).
#[inline]
#[must_use]
pub fn rounding_divide_by_pot(x: i32, exponent: i32) -> i32 {
    if exponent <= 0 {
        return x;
    }
    if exponent <= 31 {
        // 2^31 − 1 fits an i32 as i32::MAX, so the mask needs no wider type.
        let mask = ((1_i64 << exponent) - 1) as i32;
        let remainder = x & mask;
        let threshold = (mask >> 1) + i32::from(x < 0);
        (x >> exponent) + i32::from(remainder > threshold)
    } else {
        rounding_divide_by_pot_wide(x, exponent)
    }
}

/// The out-of-contract exponents (> 31) of [`rounding_divide_by_pot`], in 64-bit arithmetic.
#[cold]
fn rounding_divide_by_pot_wide(x: i32, exponent: i32) -> i32 {
    // Any exponent above 32 gives 0 for every i32 (|x| / 2^33 < 0.5); 33 is a safe i64 shift.
    let e = exponent.min(33);
    let x = i64::from(x);
    let mask = (1_i64 << e) - 1;
    let remainder = x & mask;
    let threshold = (mask >> 1) + i64::from(x < 0);
    // The quotient is 0 or −1, which fits an i32.
    ((x >> e) + i64::from(remainder > threshold)) as i32
}

/// Multiplies `x` by the real number `multiplier · 2^(shift − 31)`, exactly as TFLM's
/// (double-rounding) `MultiplyByQuantizedMultiplier(int32_t, int32_t, int)` does.
///
/// `multiplier` and `shift` normally come from [`quantize_multiplier`]. The steps are:
/// `x · 2^max(shift, 0)` in wrapping 32-bit arithmetic, then
/// [`saturating_rounding_doubling_high_mul`] by `multiplier`, then
/// [`rounding_divide_by_pot`] by `max(−shift, 0)`. See the [module docs](self) for why this
/// rounds twice.
///
/// The left shift wraps like TFLM's `x * (1 << left_shift)` on two's-complement hardware;
/// a left shift of 32 or more (which TFLM never produces for sane scales, and whose C++ is
/// undefined) gives the mathematically wrapped value `0`.
// Always inlined: it is the requantization of every int8 output, and a call costs as much as
// the arithmetic.
#[inline(always)]
#[must_use]
pub fn multiply_by_quantized_multiplier(x: i32, multiplier: i32, shift: i32) -> i32 {
    if !(-31..=31).contains(&shift) {
        return multiply_by_quantized_multiplier_general(x, multiplier, shift);
    }
    // Every shift TFLM produces: the same steps without branches (a right shift of 0 has
    // mask 0 and never rounds up, a left shift of 0 is the identity).
    let left = shift.max(0) as u32;
    let right = shift.saturating_neg().max(0) as u32;
    let shifted = x.wrapping_shl(left);
    let high = saturating_rounding_doubling_high_mul(shifted, multiplier);
    let mask = ((1_u32 << right) - 1) as i32;
    let threshold = (mask >> 1) + i32::from(high < 0);
    (high >> right) + i32::from((high & mask) > threshold)
}

/// [`multiply_by_quantized_multiplier`] for any shift (those out of `−31..=31` come here).
#[cold]
fn multiply_by_quantized_multiplier_general(x: i32, multiplier: i32, shift: i32) -> i32 {
    let (left_shift, right_shift) = if shift > 0 {
        (shift, 0)
    } else {
        (0, shift.saturating_neg())
    };
    let shifted = if left_shift >= 32 {
        0
    } else {
        // x · 2^left_shift mod 2^32: a wrapping shift is a wrapping multiply by a power of two.
        x.wrapping_shl(left_shift as u32)
    };
    rounding_divide_by_pot(
        saturating_rounding_doubling_high_mul(shifted, multiplier),
        right_shift,
    )
}

/// Multiplies a 64-bit accumulator `x` by `multiplier · 2^(shift − 31)`, exactly as TFLM's
/// `MultiplyByQuantizedMultiplier(int64_t, int32_t, int)` does (the int16 kernels' 64-bit
/// accumulators): the multiplier is first reduced to 16 bits (rounded, `0x7FFF` from
/// `0x7FFF0000` up), then one product and one rounding right shift by `15 − shift`, the
/// result truncated to 32 bits.
///
/// Unlike the 32-bit form it rounds once. TFLM asserts `−31 ≤ shift < 8` and `|x| < 2^47`;
/// within them this is exact. Outside them TFLM's C++ overflows or shifts by a negative
/// amount (undefined): here the product wraps, and a total shift below 1 is taken as 1 (and
/// above 63 as 63), so that every input gives some value without panicking.
#[inline]
#[must_use]
pub fn multiply_by_quantized_multiplier_i64(x: i64, multiplier: i32, shift: i32) -> i32 {
    let reduced = if multiplier < 0x7FFF_0000 {
        multiplier.wrapping_add(1 << 15) >> 16
    } else {
        0x7FFF
    };
    let total_shift = (15_i64 - i64::from(shift)).clamp(1, 63) as u32;
    let rounded = x
        .wrapping_mul(i64::from(reduced))
        .wrapping_add(1_i64 << (total_shift - 1));
    // TFLM's `int32_t result = x >> total_shift`: the conversion keeps the low 32 bits.
    (rounded >> total_shift) as i32
}

/// An `f64` split as `frexp` does: `value = ±(mantissa / 2^53) · 2^exponent`, with the 53-bit
/// integer `mantissa` in `[2^52, 2^53)` (so the fraction is in `[0.5, 1)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frexp {
    negative: bool,
    mantissa: u64,
    exponent: i32,
}

const F64_FRACTION_BITS: u32 = 52;
const F64_FRACTION_MASK: u64 = (1 << F64_FRACTION_BITS) - 1;
const F64_EXPONENT_MASK: u64 = 0x7ff;

/// `frexp` by bit manipulation (`core` has no `frexp` without `std`). `None` for zero, infinities
/// and NaN; subnormals are normalized.
fn frexp(value: f64) -> Option<Frexp> {
    let bits = value.to_bits();
    let negative = bits >> 63 != 0;
    let biased = ((bits >> F64_FRACTION_BITS) & F64_EXPONENT_MASK) as i32;
    let fraction = bits & F64_FRACTION_MASK;
    let (mantissa, exponent) = match biased {
        0x7ff => return None,
        0 if fraction == 0 => return None,
        // Subnormal: value = fraction · 2^−1074. Shift the leading one up to bit 52.
        0 => {
            let normalize = fraction.leading_zeros() - (63 - F64_FRACTION_BITS);
            (fraction << normalize, -1021 - normalize as i32)
        }
        // Normal: value = (2^52 + fraction) · 2^(biased − 1075) = (mantissa / 2^53) · 2^(biased − 1022).
        _ => (fraction | (1 << F64_FRACTION_BITS), biased - 1022),
    };
    Some(Frexp {
        negative,
        mantissa,
        exponent,
    })
}

/// Splits a real multiplier into a Q0.31 mantissa and a power-of-two exponent, exactly as TFLM's
/// `QuantizeMultiplier` (`kernels/internal/quantization_util.cc`): returns `(q, shift)` with
/// `real ≈ q · 2^(shift − 31)`.
///
/// - `real = frexp_fraction · 2^shift` with `|frexp_fraction|` in `[0.5, 1)`;
/// - `q = round(frexp_fraction · 2^31)`, ties away from zero, so `|q|` is in `[2^30, 2^31]`;
/// - a `q` of exactly `+2^31` (fractions within 2^-32 of 1) is halved and `shift` incremented;
///   the negative counterpart `−2^31` is kept as `i32::MIN`, as in TFLM;
/// - a `shift` below −31 (roughly `|real| < 2^−32`) flushes to `(0, 0)`;
/// - `real == 0` gives `(0, 0)`.
///
/// `shift` is not clamped from above: multipliers of `2^31` or more give shifts above 31, which
/// the kernels' parameter constructors reject. NaN and infinities, for which TFLM's behaviour is
/// undefined, also give `(0, 0)`; the constructors reject them before calling this.
#[must_use]
pub fn quantize_multiplier(real: f64) -> (i32, i32) {
    let Some(f) = frexp(real) else {
        return (0, 0);
    };
    // round(mantissa / 2^53 · 2^31) = round(mantissa / 2^22), ties away from zero on the
    // magnitude (the sign is applied afterwards, which is what round() does for negatives).
    let magnitude = (f.mantissa + (1 << 21)) >> 22;
    let mut shift = f.exponent;
    let q: i64 = if f.negative {
        -(magnitude as i64)
    } else if magnitude == 1 << 31 {
        shift += 1;
        1 << 30
    } else {
        magnitude as i64
    };
    if shift < -31 {
        return (0, 0);
    }
    // |q| <= 2^31 and only the negative extreme reaches it, so q fits an i32.
    (q as i32, shift)
}

/// TFLM's `QuantizeMultiplierSmallerThanOneExp`: [`quantize_multiplier`] for a multiplier in
/// `(0, 1)`, whose `shift` is then at most 0 (a pure right shift).
///
/// Returns `None` where TFLM's `TFLITE_CHECK`s would abort: `real` not in the open interval
/// `(0, 1)`, or a multiplier so close to 1 that its mantissa rounds up to 1.0 (`shift` 1).
#[must_use]
pub fn quantize_multiplier_smaller_than_one_exp(real: f64) -> Option<(i32, i32)> {
    if !(real > 0.0 && real < 1.0) {
        return None;
    }
    let (q, shift) = quantize_multiplier(real);
    (shift <= 0).then_some((q, shift))
}

/// TFLM's `QuantizeMultiplierGreaterThanOne`: [`quantize_multiplier`] for a multiplier above 1,
/// whose `shift` is then at least 1 (a pure left shift).
///
/// Returns `None` where TFLM's `TFLITE_CHECK`s would abort: `real` not greater than 1 (or NaN,
/// or infinite).
#[must_use]
pub fn quantize_multiplier_greater_than_one(real: f64) -> Option<(i32, i32)> {
    if !(real > 1.0 && real.is_finite()) {
        return None;
    }
    Some(quantize_multiplier(real))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// Independent model of the doubling high multiply: round-half-up of `a·b / 2^31`, as a
    /// floor (arithmetic shift) of the product plus half, saturated to i32.
    fn srdhm_model(a: i32, b: i32) -> i32 {
        let v = (i128::from(a) * i128::from(b) + (1 << 30)) >> 31;
        v.clamp(i128::from(i32::MIN), i128::from(i32::MAX)) as i32
    }

    /// Independent model of the rounding divide: round half away from zero on the magnitude.
    fn rdbpot_model(x: i32, e: u32) -> i32 {
        let m = i64::from(x).abs();
        let q = if e == 0 { m } else { (m + (1 << (e - 1))) >> e };
        (if x < 0 { -q } else { q }) as i32
    }

    const SAMPLES: [i32; 24] = [
        0,
        1,
        -1,
        2,
        -2,
        3,
        -3,
        5,
        -5,
        127,
        -128,
        255,
        -255,
        1 << 20,
        -(1 << 20),
        (1 << 30) - 1,
        1 << 30,
        -(1 << 30),
        123_456_789,
        -987_654_321,
        i32::MAX,
        i32::MIN,
        i32::MAX - 1,
        i32::MIN + 1,
    ];

    #[test]
    fn srdhm_saturates_only_for_min_times_min() {
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MIN),
            i32::MAX
        );
        // −1.0 · (1 − 2^−31) in Q0.31: −(2^31 − 1) exactly, no saturation.
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MIN, i32::MAX),
            -i32::MAX
        );
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MAX, i32::MIN),
            -i32::MAX
        );
        // (2^31 − 1)^2 / 2^31 = 2^31 − 2 + 2^−31 → 2^31 − 2.
        assert_eq!(
            saturating_rounding_doubling_high_mul(i32::MAX, i32::MAX),
            i32::MAX - 1
        );
    }

    #[test]
    fn srdhm_rounds_ties_upward() {
        // a·b / 2^31 = ±0.5, ±1.5, ±2.5 with b = 2^30 (0.5 in Q0.31).
        let half = 1 << 30;
        assert_eq!(saturating_rounding_doubling_high_mul(1, half), 1);
        assert_eq!(saturating_rounding_doubling_high_mul(-1, half), 0);
        assert_eq!(saturating_rounding_doubling_high_mul(3, half), 2);
        assert_eq!(saturating_rounding_doubling_high_mul(-3, half), -1);
        assert_eq!(saturating_rounding_doubling_high_mul(5, half), 3);
        assert_eq!(saturating_rounding_doubling_high_mul(-5, half), -2);
        // Not ties: 0.25 → 0, −0.75 → −1.
        assert_eq!(saturating_rounding_doubling_high_mul(1, 1 << 29), 0);
        assert_eq!(saturating_rounding_doubling_high_mul(-3, 1 << 29), -1);
    }

    #[test]
    fn srdhm_matches_model() {
        for &a in &SAMPLES {
            for &b in &SAMPLES {
                assert_eq!(
                    saturating_rounding_doubling_high_mul(a, b),
                    srdhm_model(a, b),
                    "a={a} b={b}"
                );
            }
        }
    }

    /// gemmlowp's formula verbatim: sign-dependent nudge, then a truncating 64-bit division.
    fn srdhm_gemmlowp_division(a: i32, b: i32) -> i32 {
        if a == i32::MIN && b == i32::MIN {
            return i32::MAX;
        }
        let ab = i64::from(a) * i64::from(b);
        let nudge: i64 = if ab >= 0 { 1 << 30 } else { 1 - (1 << 30) };
        ((ab + nudge) / (1_i64 << 31)) as i32
    }

    /// xorshift64*: a deterministic stream of pseudo-random 32-bit words.
    fn words(mut state: u64) -> impl Iterator<Item = i32> {
        core::iter::from_fn(move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            Some((state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32 as i32)
        })
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
    fn srdhm_shift_form_equals_gemmlowp_division() {
        // Edge values: extremes, ±1 around them, the tie-producing powers of two, and their
        // neighbours, in every pairing (i32::MIN with itself included).
        let mut edges = std::vec::Vec::from(SAMPLES);
        for k in 0..31 {
            for d in [-1, 0, 1] {
                edges.push((1_i32 << k).wrapping_add(d));
                edges.push((-(1_i32 << k)).wrapping_add(d));
            }
        }
        for &a in &edges {
            for &b in &edges {
                assert_eq!(
                    saturating_rounding_doubling_high_mul(a, b),
                    srdhm_gemmlowp_division(a, b),
                    "a={a} b={b}"
                );
            }
        }
        // Exact ties of both signs: a · b = (2j + 1) · 2^30 for odd multiples.
        for j in -1000..1000_i32 {
            let a = 2 * j + 1;
            for b in [1 << 30, -(1 << 30)] {
                assert_eq!(
                    saturating_rounding_doubling_high_mul(a, b),
                    srdhm_gemmlowp_division(a, b),
                    "a={a} b={b}"
                );
            }
        }
        // A million pseudo-random pairs, plus each random value against i32::MIN, i32::MAX and
        // small multipliers (the kernels' typical Q0.31 multipliers are in [2^30, 2^31)).
        let mut w = words(0x9e37_79b9_7f4a_7c15);
        for _ in 0..1_000_000 {
            let (a, b) = (w.next().unwrap(), w.next().unwrap());
            assert_eq!(
                saturating_rounding_doubling_high_mul(a, b),
                srdhm_gemmlowp_division(a, b),
                "a={a} b={b}"
            );
            // Small a (an int8-derived accumulator) times a large multiplier.
            let small = a >> 16;
            let mult = (b as u32 >> 1) as i32 | (1 << 30);
            for (x, y) in [(a, i32::MIN), (i32::MIN, b), (a, i32::MAX), (small, mult)] {
                assert_eq!(
                    saturating_rounding_doubling_high_mul(x, y),
                    srdhm_gemmlowp_division(x, y),
                    "a={x} b={y}"
                );
            }
        }
    }

    #[test]
    fn rdbpot_rounds_half_away_from_zero() {
        assert_eq!(rounding_divide_by_pot(3, 1), 2); // 1.5
        assert_eq!(rounding_divide_by_pot(-3, 1), -2); // −1.5
        assert_eq!(rounding_divide_by_pot(1, 1), 1); // 0.5
        assert_eq!(rounding_divide_by_pot(-1, 1), -1); // −0.5
        assert_eq!(rounding_divide_by_pot(5, 1), 3); // 2.5
        assert_eq!(rounding_divide_by_pot(-5, 1), -3); // −2.5
        assert_eq!(rounding_divide_by_pot(5, 2), 1); // 1.25
        assert_eq!(rounding_divide_by_pot(-5, 2), -1); // −1.25
        assert_eq!(rounding_divide_by_pot(6, 2), 2); // 1.5
        assert_eq!(rounding_divide_by_pot(-6, 2), -2); // −1.5
        assert_eq!(rounding_divide_by_pot(7, 2), 2); // 1.75
        assert_eq!(rounding_divide_by_pot(-7, 2), -2); // −1.75
        assert_eq!(rounding_divide_by_pot(-2, 2), -1); // −0.5
        assert_eq!(rounding_divide_by_pot(-1, 2), 0); // −0.25
        assert_eq!(rounding_divide_by_pot(42, 0), 42);
    }

    #[test]
    fn rdbpot_extremes() {
        assert_eq!(rounding_divide_by_pot(i32::MAX, 31), 1); // 0.99999…
        assert_eq!(rounding_divide_by_pot(i32::MIN, 31), -1); // −1.0 exactly
        assert_eq!(rounding_divide_by_pot(1 << 30, 31), 1); // 0.5
        assert_eq!(rounding_divide_by_pot(-(1 << 30), 31), -1); // −0.5
        assert_eq!(rounding_divide_by_pot((1 << 30) - 1, 31), 0);
        assert_eq!(rounding_divide_by_pot(i32::MAX, 1), 1 << 30); // 2^30 − 0.5 → 2^30
        assert_eq!(rounding_divide_by_pot(i32::MIN, 1), -(1 << 30));
        // Out of TFLM's range but still defined.
        assert_eq!(rounding_divide_by_pot(7, -3), 7);
        assert_eq!(rounding_divide_by_pot(i32::MIN, i32::MIN), i32::MIN);
        assert_eq!(rounding_divide_by_pot(i32::MIN, 32), -1); // exactly −0.5
        assert_eq!(rounding_divide_by_pot(i32::MAX, 32), 0); // just below 0.5
        assert_eq!(rounding_divide_by_pot(i32::MIN, 33), 0);
        assert_eq!(rounding_divide_by_pot(i32::MAX, i32::MAX), 0);
    }

    #[test]
    fn rdbpot_matches_model() {
        for &x in &SAMPLES {
            for e in 0..=31 {
                assert_eq!(
                    rounding_divide_by_pot(x, e as i32),
                    rdbpot_model(x, e),
                    "x={x} e={e}"
                );
            }
        }
    }

    #[test]
    fn mbqm_rounds_twice() {
        // Multiplier 0.5 (2^30), shift −1: ×0.25 overall.
        // 5 · 0.25 = 1.25, but 5 · 0.5 = 2.5 → 3 (first rounding), 3 / 2 = 1.5 → 2.
        assert_eq!(multiply_by_quantized_multiplier(5, 1 << 30, -1), 2);
        // −5: −2.5 → −2 (ties up), −2 / 2 = −1 exactly.
        assert_eq!(multiply_by_quantized_multiplier(-5, 1 << 30, -1), -1);
        // −7: −3.5 → −3, −3 / 2 = −1.5 → −2 (ties away); exact −1.75 → −2 too.
        assert_eq!(multiply_by_quantized_multiplier(-7, 1 << 30, -1), -2);
        // −3: −1.5 → −1, −1 / 2 = −0.5 → −1; exact −0.75.
        assert_eq!(multiply_by_quantized_multiplier(-3, 1 << 30, -1), -1);
        // shift 0 is one srdhm only: 3 · 0.5 = 1.5 → 2, −3 · 0.5 → −1.
        assert_eq!(multiply_by_quantized_multiplier(3, 1 << 30, 0), 2);
        assert_eq!(multiply_by_quantized_multiplier(-3, 1 << 30, 0), -1);
    }

    #[test]
    fn mbqm_left_shift() {
        // 3 · 4 = 12, × 0.5 = 6.
        assert_eq!(multiply_by_quantized_multiplier(3, 1 << 30, 2), 6);
        // ×1.0 expressed as 0.5 · 2^1.
        for &x in &[0, 1, -1, 255, -255, 65_025, -65_025] {
            assert_eq!(multiply_by_quantized_multiplier(x, 1 << 30, 1), x);
        }
        // 2^30 · 4 wraps to 0 in 32 bits, as the C++ does.
        assert_eq!(multiply_by_quantized_multiplier(1 << 30, 1 << 30, 2), 0);
        // 3 · 2^30 · 2 wraps to −2^31; × 0.5 = −2^30.
        assert_eq!(
            multiply_by_quantized_multiplier(3 << 30, 1 << 30, 1),
            -(1 << 30)
        );
    }

    #[test]
    fn mbqm_is_total() {
        for &x in &SAMPLES {
            for &m in &SAMPLES {
                for shift in [
                    i32::MIN,
                    -100,
                    -32,
                    -31,
                    -1,
                    0,
                    1,
                    30,
                    31,
                    32,
                    100,
                    i32::MAX,
                ] {
                    let _ = multiply_by_quantized_multiplier(x, m, shift);
                }
            }
        }
        assert_eq!(multiply_by_quantized_multiplier(12345, 1 << 30, 40), 0);
        assert_eq!(multiply_by_quantized_multiplier(12345, 1 << 30, -40), 0);
        assert_eq!(
            multiply_by_quantized_multiplier(i32::MAX, i32::MAX, 0),
            i32::MAX - 1
        );
    }

    #[test]
    fn frexp_normal_and_subnormal() {
        let f = frexp(1.0).unwrap();
        assert_eq!((f.negative, f.mantissa, f.exponent), (false, 1 << 52, 1));
        let f = frexp(-0.75).unwrap();
        assert_eq!((f.negative, f.mantissa, f.exponent), (true, 3 << 51, 0));
        // Smallest subnormal 2^−1074 = 0.5 · 2^−1073.
        let f = frexp(f64::from_bits(1)).unwrap();
        assert_eq!((f.mantissa, f.exponent), (1 << 52, -1073));
        // Largest subnormal (2^52 − 1) · 2^−1074 = ((2^53 − 2) / 2^53) · 2^−1022.
        let f = frexp(f64::from_bits(F64_FRACTION_MASK)).unwrap();
        assert_eq!((f.mantissa, f.exponent), ((1 << 53) - 2, -1022));
        assert_eq!(frexp(f64::MIN_POSITIVE).unwrap().exponent, -1021);
        assert!(frexp(0.0).is_none());
        assert!(frexp(-0.0).is_none());
        assert!(frexp(f64::INFINITY).is_none());
        assert!(frexp(f64::NAN).is_none());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "miri gives powi a nondeterministic rounding error, and the test checks an exact reconstruction through it"
    )]
    fn frexp_matches_std_reconstruction() {
        for &v in &[
            1e-290,
            3.0e-10,
            0.1,
            0.3,
            1.0 / 3.0,
            7.5,
            1e10,
            -2.5e-5,
            1e300,
        ] {
            let f = frexp(v).unwrap();
            let back = (f.mantissa as f64) * 2f64.powi(f.exponent - 53);
            let back = if f.negative { -back } else { back };
            assert_eq!(back, v);
        }
    }

    #[test]
    fn quantize_multiplier_powers_of_two() {
        assert_eq!(quantize_multiplier(1.0), (1 << 30, 1));
        assert_eq!(quantize_multiplier(0.5), (1 << 30, 0));
        assert_eq!(quantize_multiplier(0.25), (1 << 30, -1));
        assert_eq!(quantize_multiplier(2.0), (1 << 30, 2));
        assert_eq!(quantize_multiplier(2f64.powi(40)), (1 << 30, 41));
        // 2^−31 = 0.5 · 2^−30, 2^−32 = 0.5 · 2^−31 (the smallest kept), 2^−33 flushes.
        assert_eq!(quantize_multiplier(2f64.powi(-31)), (1 << 30, -30));
        assert_eq!(quantize_multiplier(2f64.powi(-32)), (1 << 30, -31));
        assert_eq!(quantize_multiplier(2f64.powi(-33)), (0, 0));
    }

    #[test]
    fn quantize_multiplier_rounding() {
        // 0.75 = 0.75 · 2^0 → 0.75 · 2^31.
        assert_eq!(quantize_multiplier(0.75), (3 << 29, 0));
        assert_eq!(quantize_multiplier(3.0), (3 << 29, 2));
        // frexp(0.1) = 0.8 · 2^−3; 0.8 · 2^31 = 1717986918.4 → 1717986918.
        assert_eq!(quantize_multiplier(0.1), (1_717_986_918, -3));
        // 0.5 + 2^−32: 2^30 + 0.5 exactly, a tie → away from zero.
        assert_eq!(
            quantize_multiplier(0.5 + 2f64.powi(-32)),
            ((1 << 30) + 1, 0)
        );
        // 0.5 + 2^−33: 2^30 + 0.25 → 2^30.
        assert_eq!(quantize_multiplier(0.5 + 2f64.powi(-33)), (1 << 30, 0));
        // 1 − 2^−31: 2^31 − 1, fits.
        assert_eq!(quantize_multiplier(1.0 - 2f64.powi(-31)), (i32::MAX, 0));
        // 1 − 2^−32: 2^31 − 0.5 → 2^31 (tie away), halved with shift + 1: same as 1.0.
        assert_eq!(quantize_multiplier(1.0 - 2f64.powi(-32)), (1 << 30, 1));
        // 1 − 2^−40 → 2^31 − 2^−9 → 2^31 → halved.
        assert_eq!(quantize_multiplier(1.0 - 2f64.powi(-40)), (1 << 30, 1));
    }

    #[test]
    fn quantize_multiplier_negative_and_degenerate() {
        assert_eq!(quantize_multiplier(-0.5), (-(1 << 30), 0));
        assert_eq!(quantize_multiplier(-0.1), (-1_717_986_918, -3));
        // −(1 − 2^−32) rounds to −2^31, which TFLM does not halve: i32::MIN.
        assert_eq!(quantize_multiplier(-(1.0 - 2f64.powi(-32))), (i32::MIN, 0));
        assert_eq!(quantize_multiplier(0.0), (0, 0));
        assert_eq!(quantize_multiplier(-0.0), (0, 0));
        assert_eq!(quantize_multiplier(1e-20), (0, 0));
        assert_eq!(quantize_multiplier(f64::from_bits(1)), (0, 0));
        assert_eq!(quantize_multiplier(f64::NAN), (0, 0));
        assert_eq!(quantize_multiplier(f64::INFINITY), (0, 0));
        assert_eq!(quantize_multiplier(f64::NEG_INFINITY), (0, 0));
        // Huge multipliers keep their (large) shift; the kernels reject them. f64::MAX is
        // (1 − 2^−53) · 2^1024, whose mantissa rounds up to 2^31: (2^30, 1025).
        assert_eq!(quantize_multiplier(f64::MAX), (1 << 30, 1025));
    }

    #[test]
    fn quantize_multiplier_matches_std_model() {
        // Independent model with std's frexp-free float ops: normalize by repeated halving /
        // doubling, then f64::round (ties away from zero).
        fn model(real: f64) -> (i32, i32) {
            let (mut frac, mut exp) = (real, 0);
            while frac >= 1.0 {
                frac /= 2.0;
                exp += 1;
            }
            while frac < 0.5 {
                frac *= 2.0;
                exp -= 1;
            }
            let mut q = (frac * 2f64.powi(31)).round() as i64;
            if q == 1 << 31 {
                q /= 2;
                exp += 1;
            }
            if exp < -31 {
                return (0, 0);
            }
            (q as i32, exp)
        }
        let mut v = 1.7e-10_f64;
        while v < 1e7 {
            assert_eq!(quantize_multiplier(v), model(v), "{v}");
            let (q, s) = quantize_multiplier(v);
            let back = f64::from(q) * 2f64.powi(s - 31);
            assert!((back - v).abs() <= 2f64.powi(s - 32), "{v}");
            v *= 1.37;
        }
    }

    #[test]
    fn smaller_than_one_exp() {
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(0.5),
            Some((1 << 30, 0))
        );
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(0.1),
            Some((1_717_986_918, -3))
        );
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(1e-12),
            Some((0, 0))
        );
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(1.0 - 2f64.powi(-31)),
            Some((i32::MAX, 0))
        );
        // Rounds up to 1.0: shift 1 is rejected like TFLM's CHECK_LE(shift, 0).
        assert_eq!(
            quantize_multiplier_smaller_than_one_exp(1.0 - 2f64.powi(-40)),
            None
        );
        assert_eq!(quantize_multiplier_smaller_than_one_exp(1.0), None);
        assert_eq!(quantize_multiplier_smaller_than_one_exp(0.0), None);
        assert_eq!(quantize_multiplier_smaller_than_one_exp(-0.5), None);
        assert_eq!(quantize_multiplier_smaller_than_one_exp(f64::NAN), None);
    }

    #[test]
    fn greater_than_one() {
        assert_eq!(
            quantize_multiplier_greater_than_one(2.0),
            Some((1 << 30, 2))
        );
        assert_eq!(
            quantize_multiplier_greater_than_one(3.0),
            Some((3 << 29, 2))
        );
        assert_eq!(quantize_multiplier_greater_than_one(1.0), None);
        assert_eq!(quantize_multiplier_greater_than_one(0.5), None);
        assert_eq!(quantize_multiplier_greater_than_one(f64::INFINITY), None);
        assert_eq!(quantize_multiplier_greater_than_one(f64::NAN), None);
    }

    #[test]
    fn branch_free_requantization_equals_the_stepwise_one() {
        // The general form is the step-by-step one for every shift; the inlined form must give
        // the same for every shift it takes, including the saturating and wrapping corners.
        let mut rng = crate::xorshift::XorShift(0x2545_f491_u32);
        let mut next = || {
            let state = rng.next();
            state as i32
        };
        let corners = [
            0,
            1,
            -1,
            i32::MIN,
            i32::MAX,
            1 << 30,
            -(1 << 30),
            0x4000_0001,
        ];
        // Fewer random pairs under miri, which interprets every step; the corners all run.
        let pairs = if cfg!(miri) { 8 } else { 400 };
        for shift in -31..=31 {
            for _ in 0..pairs {
                let (x, m) = (next(), next());
                for (x, m) in [(x, m), (x >> 12, m), (x, 0x7fff_ffff), (i32::MIN, i32::MIN)] {
                    assert_eq!(
                        multiply_by_quantized_multiplier(x, m, shift),
                        multiply_by_quantized_multiplier_general(x, m, shift),
                        "x {x} m {m} shift {shift}"
                    );
                }
            }
            for &x in &corners {
                for &m in &corners {
                    assert_eq!(
                        multiply_by_quantized_multiplier(x, m, shift),
                        multiply_by_quantized_multiplier_general(x, m, shift),
                        "x {x} m {m} shift {shift}"
                    );
                }
            }
        }
    }
}
