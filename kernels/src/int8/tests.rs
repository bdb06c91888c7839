//! Tests of the int8 kernels. (Over 700 lines on purpose: a test-only file whose tests all share
//! the independent [`model`] and the helpers below.)
//!
//! Three kinds of expectations, none of them produced by the code under test:
//! - exhaustive checks for scales whose rescaling is exact (powers of two), against plain
//!   integer formulas;
//! - a few vectors with realistic scales, whose bytes were derived outside this crate (one
//!   element of each derived step by step in the comments);
//! - exhaustive comparisons with [`model`], an independent re-derivation of TFLM's arithmetic
//!   written with `std` floats and 128-bit integers and different formulas (floor-based
//!   doubling high multiply, magnitude-based rounding shift, loop-based `frexp`), plus a check
//!   that every result is within one step of the real-number result.

extern crate std;

use std::vec::Vec;

use super::*;

const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

/// All 65,536 (a, b) pairs of int8 values.
fn all_pairs() -> (Vec<i8>, Vec<i8>) {
    let mut a = Vec::with_capacity(1 << 16);
    let mut b = Vec::with_capacity(1 << 16);
    for x in i8::MIN..=i8::MAX {
        for y in i8::MIN..=i8::MAX {
            a.push(x);
            b.push(y);
        }
    }
    (a, b)
}

fn all_i8() -> Vec<i8> {
    (i8::MIN..=i8::MAX).collect()
}

fn mismatch(operand: &'static str, expected: usize, actual: usize) -> KernelError {
    KernelError::LengthMismatch {
        operand,
        expected,
        actual,
    }
}

fn bad(what: &'static str) -> KernelError {
    KernelError::InvalidQuantization { what }
}

/// An independent model of TFLM's int8 arithmetic.
mod model {
    use super::{Activation, Quant};

    /// frexp by repeated halving/doubling, then `f64::round` (ties away from zero).
    pub fn quantize_multiplier(real: f64) -> (i32, i32) {
        if real == 0.0 {
            return (0, 0);
        }
        let (mut frac, mut exp) = (real, 0);
        while frac >= 1.0 {
            frac /= 2.0;
            exp += 1;
        }
        while frac < 0.5 {
            frac *= 2.0;
            exp -= 1;
        }
        let mut q = (frac * 2_147_483_648.0).round() as i64;
        if q == 1 << 31 {
            q /= 2;
            exp += 1;
        }
        if exp < -31 {
            return (0, 0);
        }
        (q as i32, exp)
    }

    /// Round-half-up of a·b / 2^31, by flooring.
    pub fn srdhm(a: i32, b: i32) -> i32 {
        let v = (i128::from(a) * i128::from(b) + (1 << 30)) >> 31;
        v.min(i128::from(i32::MAX)) as i32
    }

    /// Round-half-away-from-zero of x / 2^e, on the magnitude.
    pub fn rdbpot(x: i32, e: i32) -> i32 {
        let m = i64::from(x).abs();
        let r = if e == 0 { m } else { (m + (1 << (e - 1))) >> e };
        (if x < 0 { -r } else { r }) as i32
    }

    pub fn mbqm(x: i32, m: i32, shift: i32) -> i32 {
        let shifted = (i64::from(x) << shift.max(0)) as i32; // keeps the low 32 bits: wraps
        rdbpot(srdhm(shifted, m), (-shift).max(0))
    }

    pub fn act_range(act: Activation, out: Quant) -> (i32, i32) {
        let bound = |f: f32| out.zero_point + (f / out.scale).round() as i32;
        match act {
            Activation::None => (-128, 127),
            Activation::Relu => (bound(0.0).max(-128), 127),
            Activation::Relu6 => (bound(0.0).max(-128), bound(6.0).min(127)),
            Activation::ReluN1To1 => (bound(-1.0).max(-128), bound(1.0).min(127)),
        }
    }

    pub fn add(a: Quant, b: Quant, out: Quant, act: Activation, x: i8, y: i8) -> i8 {
        let twice_max = 2.0 * f64::from(a.scale.max(b.scale));
        let (m1, s1) = quantize_multiplier(f64::from(a.scale) / twice_max);
        let (m2, s2) = quantize_multiplier(f64::from(b.scale) / twice_max);
        let (mo, so) = quantize_multiplier(twice_max / (1048576.0 * f64::from(out.scale)));
        let xs = mbqm((i32::from(x) - a.zero_point) * 1048576, m1, s1);
        let ys = mbqm((i32::from(y) - b.zero_point) * 1048576, m2, s2);
        let r = mbqm(xs + ys, mo, so) + out.zero_point;
        let (lo, hi) = act_range(act, out);
        r.clamp(lo, hi) as i8
    }

    pub fn mul(a: Quant, b: Quant, out: Quant, act: Activation, x: i8, y: i8) -> i8 {
        let (m, s) =
            quantize_multiplier(f64::from(a.scale) * f64::from(b.scale) / f64::from(out.scale));
        let p = (i32::from(x) - a.zero_point) * (i32::from(y) - b.zero_point);
        let (lo, hi) = act_range(act, out);
        (mbqm(p, m, s) + out.zero_point).clamp(lo, hi) as i8
    }

    pub fn relu(input: Quant, out: Quant, x: i8) -> i8 {
        let (m, s) = quantize_multiplier(f64::from(input.scale / out.scale));
        let (lo, hi) = act_range(Activation::Relu, out);
        (mbqm(i32::from(x) - input.zero_point, m, s) + out.zero_point).clamp(lo, hi) as i8
    }

    pub fn fc_requant(input: Quant, w_scale: f32, out: Quant, act: Activation, acc: i64) -> i8 {
        let (m, s) = quantize_multiplier(f64::from(input.scale * w_scale) / f64::from(out.scale));
        let (lo, hi) = act_range(act, out);
        (mbqm(acc as i32, m, s) + out.zero_point).clamp(lo, hi) as i8
    }
}

/// Real-number result, rounded and clamped: TFLM must be within one step of it.
fn ideal(real: f64, out: Quant, range: (i32, i32)) -> i32 {
    let v = (real / f64::from(out.scale)).round() + f64::from(out.zero_point);
    (v.clamp(f64::from(range.0), f64::from(range.1))) as i32
}

// ---------------------------------------------------------------------------------------------
// Activation ranges and rounding helpers.

#[test]
fn round_half_away_from_zero_f32() {
    for (x, r) in [
        (0.5, 1.0),
        (-0.5, -1.0),
        (1.5, 2.0),
        (2.5, 3.0),
        (-2.5, -3.0),
        (0.499_999_97, 0.0),
        (-0.499_999_97, 0.0),
        (1.0, 1.0),
        (-7.25, -7.0),
        (8_388_607.5, 8_388_608.0),
        (1e10, 1e10),
        (-1e10, -1e10),
    ] {
        assert_eq!(round_half_away_from_zero(x), r, "{x}");
    }
    assert!(round_half_away_from_zero(f32::NAN).is_nan());
    assert_eq!(round_half_away_from_zero(f32::INFINITY), f32::INFINITY);
}

#[test]
fn activation_ranges() {
    // None: the whole int8 range whatever the scale.
    assert_eq!(
        activation_range(Activation::None, q(1e-30, 5)),
        Ok((-128, 127))
    );
    // Relu: from the quantized zero.
    assert_eq!(
        activation_range(Activation::Relu, q(0.1, -10)),
        Ok((-10, 127))
    );
    assert_eq!(
        activation_range(Activation::Relu, q(0.1, 127)),
        Ok((127, 127))
    );
    // Relu6, scale 4: 6 / 4 = 1.5, a tie, rounds away from zero to 2.
    assert_eq!(activation_range(Activation::Relu6, q(4.0, 0)), Ok((0, 2)));
    // Relu6, scale 0.05, zp −128: 6 / 0.05 = 120 → −8.
    assert_eq!(
        activation_range(Activation::Relu6, q(0.05, -128)),
        Ok((-128, -8))
    );
    // Relu6 with a fine scale: 6000 steps, clamped to 127.
    assert_eq!(
        activation_range(Activation::Relu6, q(1e-3, 0)),
        Ok((0, 127))
    );
    // ReluN1To1, scale 2: ±0.5 round to ±1 → (3 − 1, 3 + 1).
    assert_eq!(
        activation_range(Activation::ReluN1To1, q(2.0, 3)),
        Ok((2, 4))
    );
    // ReluN1To1, scale 0.3, zp 100: 1 / 0.3 = 3.33 → 3.
    assert_eq!(
        activation_range(Activation::ReluN1To1, q(0.3, 100)),
        Ok((97, 103))
    );
    // 6 / 1e−12 does not fit an int32: TFLM's Quantize fails, and so do we.
    assert_eq!(
        activation_range(Activation::Relu6, q(1e-12, 0)),
        Err(bad("output scale"))
    );
    assert_eq!(
        activation_range(Activation::ReluN1To1, q(f32::from_bits(1), 0)),
        Err(bad("output scale"))
    );
    // Relu only quantizes 0, which always fits.
    assert_eq!(
        activation_range(Activation::Relu, q(1e-12, 4)),
        Ok((4, 127))
    );
}

#[test]
fn activation_ranges_match_model() {
    for &scale in &[
        0.003_f32,
        0.02,
        0.0235,
        0.1,
        0.3,
        1.0 / 3.0,
        0.5,
        1.0,
        2.0,
        4.0,
        12.0,
    ] {
        for zp in [-128, -100, -3, 0, 7, 99, 127] {
            for act in [
                Activation::None,
                Activation::Relu,
                Activation::Relu6,
                Activation::ReluN1To1,
            ] {
                let out = q(scale, zp);
                assert_eq!(
                    activation_range(act, out),
                    Ok(model::act_range(act, out)),
                    "{act:?} {out:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ADD

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
fn add_unit_scales_is_exact_integer_add() {
    // All scales 1: multipliers 0.5, 0.5 and 2 / 2^20 are exact, so
    // out = clamp((a + 3) + (b − 10) − 5).
    let p = AddParams::new(q(1.0, -3), q(1.0, 10), q(1.0, -5), Activation::None).unwrap();
    assert_eq!(p.input1_multiplier(), (1 << 30, 0));
    assert_eq!(p.input2_multiplier(), (1 << 30, 0));
    assert_eq!(p.output_multiplier(), (1 << 30, -18));
    assert_eq!(
        (p.input1_offset(), p.input2_offset(), p.output_offset()),
        (3, -10, -5)
    );
    let (a, b) = all_pairs();
    let mut out = std::vec![0_i8; a.len()];
    add(&p, &a, &b, &mut out).unwrap();
    for ((&x, &y), &o) in a.iter().zip(&b).zip(&out) {
        let expected = (i32::from(x) + 3 + i32::from(y) - 10 - 5).clamp(-128, 127);
        assert_eq!(i32::from(o), expected, "a={x} b={y}");
    }
    // Saturation at both ends.
    assert_eq!(out[0], -128); // −128 + 3 − 128 − 10 − 5
    assert_eq!(*out.last().unwrap(), 127); // 127 + 3 + 127 − 10 − 5
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
fn add_power_of_two_scales() {
    // a in halves, b in eighths, out in quarters: the real result is 2a + b/2 output steps.
    // Every intermediate is exact (a' = a · 2^19, b' = b · 2^17, sum = (4a + b) · 2^17, then
    // (4a + b) · 2^16 after the doubling high multiply) until the final rounding shift by 17,
    // which rounds the ties of odd b away from zero: out = clamp(round_away((4a + b) / 2)).
    let p = AddParams::new(q(0.5, 0), q(0.125, 0), q(0.25, 0), Activation::None).unwrap();
    assert_eq!(p.input1_multiplier(), (1 << 30, 0)); // 0.5 / (2 · 0.5) = 0.5
    assert_eq!(p.input2_multiplier(), (1 << 30, -2)); // 0.125 / 1 = 0.125
    assert_eq!(p.output_multiplier(), (1 << 30, -17)); // 1 / (2^20 · 0.25) = 2^−18
    let (a, b) = all_pairs();
    let mut out = std::vec![0_i8; a.len()];
    add(&p, &a, &b, &mut out).unwrap();
    for ((&x, &y), &o) in a.iter().zip(&b).zip(&out) {
        // Twice the result, 4a + b, is an integer; halve it rounding ties away from zero.
        let twice = 4 * i32::from(x) + i32::from(y);
        let r = (twice + twice.signum()) / 2;
        assert_eq!(i32::from(o), r.clamp(-128, 127), "a={x} b={y}");
    }
}

#[test]
fn add_hand_computed() {
    // a: scale 0.05, zp −3; b: scale 0.1, zp 10; out: scale 0.12, zp −5.
    // twice_max = 0.2; a multiplier 0.25 → (2^30, −1); b 0.5 → (2^30, 0);
    // output 0.2 / (2^20 · 0.12) = 1.5894573e−6 → (1789569773, −19).
    //
    // Element 3, a = 50, b = −20:
    //   a: (50 + 3) · 2^20 = 55574528; srdhm(·, 2^30) = 27787264; rdbpot(·, 1) = 13893632
    //   b: (−20 − 10) · 2^20 = −31457280; srdhm(·, 2^30) = −15728640 (exact)
    //   sum −1835008; srdhm(·, 1789569773) = round(−1529173.39) = −1529173;
    //   rdbpot(·, 19) = round(−2.9167) = −3; + (−5) = −8.
    //   Real: (0.05 · 53 − 0.1 · 30) / 0.12 = −2.9167 → −3 → −8.
    // Element 4 saturates: real 14.7 / 0.12 − 5 = 117.5 + … → 147 → 127.
    let p = AddParams::new(q(0.05, -3), q(0.1, 10), q(0.12, -5), Activation::None).unwrap();
    assert_eq!(p.input1_multiplier(), (1 << 30, -1));
    assert_eq!(p.input2_multiplier(), (1 << 30, 0));
    assert_eq!(p.output_multiplier(), (1_789_569_773, -19));
    let a = [-128, -3, 0, 50, 127, 100, -60, 7];
    let b = [127, 10, -128, -20, 127, -100, 33, 9];
    let mut out = [0; 8];
    add(&p, &a, &b, &mut out).unwrap();
    assert_eq!(out, [40, -5, -119, -8, 127, -54, -10, -2]);

    // Same with a fused Relu6: range (zp + round(0), zp + round(6 / 0.12)) = (−5, 45).
    let p = AddParams::new(q(0.05, -3), q(0.1, 10), q(0.12, -5), Activation::Relu6).unwrap();
    assert_eq!(p.activation_range(), (-5, 45));
    add(&p, &a, &b, &mut out).unwrap();
    assert_eq!(out, [40, -5, -5, -5, 45, -5, -5, -2]);
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
fn add_matches_model_and_reals() {
    let cases = [
        (q(0.05, -3), q(0.1, 10), q(0.12, -5), Activation::None),
        (
            q(0.0078125, -128),
            q(0.0235, 4),
            q(0.031, -20),
            Activation::Relu,
        ),
        (
            q(0.3, 50),
            q(0.0123, -77),
            q(0.29, 0),
            Activation::ReluN1To1,
        ),
        (q(1.7, 0), q(0.9, 1), q(2.1, 127), Activation::Relu6),
        (
            q(0.004, 13),
            q(0.004, -13),
            q(0.0011, -128),
            Activation::None,
        ),
    ];
    let (a, b) = all_pairs();
    let mut out = std::vec![0_i8; a.len()];
    for (qa, qb, qo, act) in cases {
        let p = AddParams::new(qa, qb, qo, act).unwrap();
        add(&p, &a, &b, &mut out).unwrap();
        let range = p.activation_range();
        for ((&x, &y), &o) in a.iter().zip(&b).zip(&out) {
            assert_eq!(
                o,
                model::add(qa, qb, qo, act, x, y),
                "{qa:?} {qb:?} {qo:?} a={x} b={y}"
            );
            let real = f64::from(qa.scale) * f64::from(i32::from(x) - qa.zero_point)
                + f64::from(qb.scale) * f64::from(i32::from(y) - qb.zero_point);
            let diff = i32::from(o) - ideal(real, qo, range);
            assert!(
                diff.abs() <= 1,
                "{qa:?} {qb:?} {qo:?} a={x} b={y}: off by {diff}"
            );
        }
    }
}

#[test]
fn add_rejects_bad_quantization() {
    let ok = q(0.1, 0);
    let none = Activation::None;
    assert_eq!(AddParams::new(q(0.0, 0), ok, ok, none), Err(bad("a scale")));
    assert_eq!(
        AddParams::new(q(-0.1, 0), ok, ok, none),
        Err(bad("a scale"))
    );
    assert_eq!(
        AddParams::new(ok, q(f32::NAN, 0), ok, none),
        Err(bad("b scale"))
    );
    assert_eq!(
        AddParams::new(ok, ok, q(f32::INFINITY, 0), none),
        Err(bad("output scale"))
    );
    assert_eq!(
        AddParams::new(q(0.1, 128), ok, ok, none),
        Err(bad("a zero point"))
    );
    assert_eq!(
        AddParams::new(ok, q(0.1, -129), ok, none),
        Err(bad("b zero point"))
    );
    assert_eq!(
        AddParams::new(ok, ok, q(0.1, 200), none),
        Err(bad("output zero point"))
    );
    // Output multiplier 0.2 / (2^20 · 1e−7) ≈ 1.9 is not below one: TFLM aborts.
    assert_eq!(
        AddParams::new(ok, ok, q(1e-7, 0), none),
        Err(bad("output scale"))
    );
    // Exactly at the limit: 2 · 0.5 / (2^20 · 2^−20) = 1. (Powers of two written as divisions:
    // miri rounds `powi` nondeterministically.)
    assert_eq!(
        AddParams::new(q(0.5, 0), ok, q(1.0 / 1_048_576.0, 0), none),
        Err(bad("output scale"))
    );
    // Just inside: 1 / (2^20 · 2^−19) = 0.5.
    assert!(AddParams::new(q(0.5, 0), ok, q(1.0 / 524_288.0, 0), none).is_ok());
    // An activation range that does not fit int32.
    assert_eq!(
        AddParams::new(q(1e-12, 0), q(1e-12, 0), q(1e-12, 0), Activation::Relu6),
        Err(bad("output scale"))
    );
}

#[test]
fn add_length_errors() {
    let p = AddParams::new(q(0.1, 0), q(0.1, 0), q(0.1, 0), Activation::None).unwrap();
    let mut out = [0; 3];
    assert_eq!(
        add(&p, &[1; 3], &[1; 4], &mut out),
        Err(mismatch("b", 3, 4))
    );
    assert_eq!(
        add(&p, &[1; 2], &[1; 2], &mut out),
        Err(mismatch("output", 2, 3))
    );
    assert_eq!(out, [0; 3]); // untouched
    add(&p, &[], &[], &mut []).unwrap();
}

// ---------------------------------------------------------------------------------------------
// MUL

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
fn mul_exact_when_multiplier_is_one() {
    // 0.5 · 0.25 / 0.125 = 1 → (2^30, 1): out = clamp((a − 4)(b + 9) + 11).
    let p = MulParams::new(q(0.5, 4), q(0.25, -9), q(0.125, 11), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, 1));
    let (a, b) = all_pairs();
    let mut out = std::vec![0_i8; a.len()];
    mul(&p, &a, &b, &mut out).unwrap();
    let mut saturated = (0, 0);
    for ((&x, &y), &o) in a.iter().zip(&b).zip(&out) {
        let expected = (i32::from(x) - 4) * (i32::from(y) + 9) + 11;
        assert_eq!(i32::from(o), expected.clamp(-128, 127), "a={x} b={y}");
        saturated.0 += usize::from(o == -128);
        saturated.1 += usize::from(o == 127);
    }
    assert!(saturated.0 > 1000 && saturated.1 > 1000);
}

#[test]
fn mul_rounds_twice() {
    // 0.5 · 0.5 / 1 = 0.25 → (2^30, −1): a doubling high multiply by 0.5 (ties up), then a
    // rounding halving (ties away from zero).
    let p = MulParams::new(q(0.5, 0), q(0.5, 0), q(1.0, 0), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, -1));
    let a = [5, -5, -7, 3, 1, -1, 2, -2];
    let mut out = [0; 8];
    mul(&p, &a, &[1; 8], &mut out).unwrap();
    // 5 → 2.5 → 3 → 1.5 → 2 (exact 1.25 would round to 1); −5 → −2.5 → −2 → −1;
    // −7 → −3.5 → −3 → −1.5 → −2; 3 → 1.5 → 2 → 1; 1 → 0.5 → 1 → 0.5 → 1 (exact 0.25!);
    // −1 → −0.5 → 0 → 0; 2 → 1 → 0.5 → 1; −2 → −1 → −0.5 → −1.
    assert_eq!(out, [2, -1, -2, 1, 1, 0, 1, -1]);
}

#[test]
fn mul_hand_computed() {
    // 0.02 · 0.03 / 0.01 (as f32s widened to double) = 0.0599999987 → (2061584256, −4).
    // Element 3, a = 50, b = −20: (50 − 5)(−20 + 7) = −585; srdhm(−585, 2061584256) =
    // round(−561.6) = −562; rdbpot(−562, 4) = round(−35.125) = −35; + 2 = −33.
    // Element 0 saturates: (−133)(134) · 0.06 = −1069 → −128.
    let p = MulParams::new(q(0.02, 5), q(0.03, -7), q(0.01, 2), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (2_061_584_256, -4));
    assert_eq!(
        (p.input1_offset(), p.input2_offset(), p.output_offset()),
        (-5, 7, 2)
    );
    let a = [-128, -3, 0, 50, 127, 100, -60, 7];
    let b = [127, 10, -128, -20, 127, -100, 33, 9];
    let mut out = [0; 8];
    mul(&p, &a, &b, &mut out).unwrap();
    assert_eq!(out, [-128, -6, 38, -33, 127, -128, -128, 4]);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
fn mul_matches_model_and_reals() {
    let cases = [
        (q(0.02, 5), q(0.03, -7), q(0.01, 2), Activation::None),
        (
            q(0.0078125, -128),
            q(0.0235, 4),
            q(0.5, -20),
            Activation::Relu,
        ),
        (
            q(0.3, 50),
            q(0.0123, -77),
            q(0.0071, 0),
            Activation::ReluN1To1,
        ),
        (q(1.7, 0), q(0.9, 1), q(50.0, 127), Activation::Relu6),
        (q(0.1, 0), q(0.1, 0), q(1e-5, 0), Activation::None), // multiplier 1000: left shift
    ];
    let (a, b) = all_pairs();
    let mut out = std::vec![0_i8; a.len()];
    for (qa, qb, qo, act) in cases {
        let p = MulParams::new(qa, qb, qo, act).unwrap();
        mul(&p, &a, &b, &mut out).unwrap();
        let range = p.activation_range();
        for ((&x, &y), &o) in a.iter().zip(&b).zip(&out) {
            assert_eq!(
                o,
                model::mul(qa, qb, qo, act, x, y),
                "{qa:?} {qb:?} {qo:?} a={x} b={y}"
            );
            let real = f64::from(qa.scale)
                * f64::from(i32::from(x) - qa.zero_point)
                * f64::from(qb.scale)
                * f64::from(i32::from(y) - qb.zero_point);
            let diff = i32::from(o) - ideal(real, qo, range);
            assert!(
                diff.abs() <= 1,
                "{qa:?} {qb:?} {qo:?} a={x} b={y}: off by {diff}"
            );
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "miri gives powi a nondeterministic rounding error, and the test builds exact powers of two with it"
)]
fn mul_rejects_bad_quantization() {
    let ok = q(0.1, 0);
    let none = Activation::None;
    assert_eq!(MulParams::new(q(0.0, 0), ok, ok, none), Err(bad("a scale")));
    assert_eq!(
        MulParams::new(ok, q(-1.0, 0), ok, none),
        Err(bad("b scale"))
    );
    assert_eq!(
        MulParams::new(ok, ok, q(f32::NAN, 0), none),
        Err(bad("output scale"))
    );
    assert_eq!(
        MulParams::new(q(0.1, -200), ok, ok, none),
        Err(bad("a zero point"))
    );
    assert_eq!(
        MulParams::new(ok, ok, q(0.1, 128), none),
        Err(bad("output zero point"))
    );
    // 1e20 · 1e20 / 1e−20 = 1e60: a shift of 200, not a 32-bit left shift.
    assert_eq!(
        MulParams::new(q(1e20, 0), q(1e20, 0), q(1e-20, 0), none),
        Err(bad("output scale"))
    );
    // Just below 2^31 is still accepted (shift 31).
    assert!(MulParams::new(q(1_073_741_824.0, 0), q(1.5, 0), q(1.0, 0), none).is_ok());
    assert!(MulParams::new(q(2_147_483_648.0, 0), q(1.0, 0), q(1.0, 0), none).is_err());
}

#[test]
fn mul_length_errors() {
    let p = MulParams::new(q(0.1, 0), q(0.1, 0), q(0.1, 0), Activation::None).unwrap();
    let mut out = [0; 2];
    assert_eq!(
        mul(&p, &[1; 2], &[1; 1], &mut out),
        Err(mismatch("b", 2, 1))
    );
    assert_eq!(
        mul(&p, &[1; 3], &[1; 3], &mut out),
        Err(mismatch("output", 3, 2))
    );
}

// ---------------------------------------------------------------------------------------------
// RELU

#[test]
fn relu_same_scale_is_shift_and_clamp() {
    for (zi, zo) in [(0, 0), (-20, 7), (100, -128), (-128, 127), (127, -128)] {
        let p = ReluParams::new(q(0.07, zi), q(0.07, zo)).unwrap();
        assert_eq!(p.output_multiplier(), (1 << 30, 1));
        assert_eq!(p.activation_range(), (zo, 127));
        let input = all_i8();
        let mut out = std::vec![0_i8; input.len()];
        relu(&p, &input, &mut out).unwrap();
        for (&x, &o) in input.iter().zip(&out) {
            let expected = (i32::from(x) - zi + zo).clamp(zo, 127);
            assert_eq!(i32::from(o), expected, "zi={zi} zo={zo} x={x}");
        }
    }
}

#[test]
fn relu_rounding_ties() {
    // Ratio 0.5 → (2^30, 0): one doubling high multiply, ties rounded up.
    let p = ReluParams::new(q(0.5, 0), q(1.0, 0)).unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, 0));
    let mut out = [0; 6];
    relu(&p, &[3, 5, 1, -3, 7, -1], &mut out).unwrap();
    // 1.5 → 2, 2.5 → 3, 0.5 → 1, −1.5 → −1 → clamped to 0, 3.5 → 4, −0.5 → 0.
    assert_eq!(out, [2, 3, 1, 0, 4, 0]);
}

#[test]
fn relu_hand_computed() {
    // TFLM divides the scales in float: 0.1f / 0.07f = 1.4285715f → (1533916928, 1). (The
    // double quotient would give 1533916908.)
    // x = 50: (50 + 20) · 2 = 140; srdhm(140, 1533916928) = round(100.0000024) = 100;
    // + (−128) = −28. Real: 0.1 · 70 / 0.07 = 100 → −28.
    let p = ReluParams::new(q(0.1, -20), q(0.07, -128)).unwrap();
    assert_eq!(p.output_multiplier(), (1_533_916_928, 1));
    assert_ne!(
        p.output_multiplier(),
        crate::fixed_point::quantize_multiplier(0.1_f32 as f64 / 0.07_f32 as f64)
    );
    assert_eq!((p.input_offset(), p.output_offset()), (20, -128));
    let mut out = [0; 8];
    relu(&p, &[-128, -3, 0, 50, 127, 100, -60, 7], &mut out).unwrap();
    assert_eq!(out, [-128, -104, -99, -28, 82, 43, -128, -89]);
}

#[test]
fn relu_matches_model() {
    let input = all_i8();
    let mut out = std::vec![0_i8; input.len()];
    for (qi, qo) in [
        (q(0.1, -20), q(0.07, -128)),
        (q(0.3, 0), q(0.7, 5)),
        (q(0.013, 100), q(0.011, -3)),
        (q(0.0235, -128), q(0.0173, -128)),
        (q(5.0, 0), q(0.01, 0)), // ratio 500: left shift 9
    ] {
        let p = ReluParams::new(qi, qo).unwrap();
        relu(&p, &input, &mut out).unwrap();
        for (&x, &o) in input.iter().zip(&out) {
            assert_eq!(o, model::relu(qi, qo, x), "{qi:?} {qo:?} x={x}");
        }
    }
}

#[test]
fn relu_rejects_bad_quantization() {
    let ok = q(0.1, 0);
    assert_eq!(ReluParams::new(q(0.0, 0), ok), Err(bad("input scale")));
    assert_eq!(
        ReluParams::new(ok, q(f32::NEG_INFINITY, 0)),
        Err(bad("output scale"))
    );
    assert_eq!(
        ReluParams::new(q(0.1, 128), ok),
        Err(bad("input zero point"))
    );
    assert_eq!(
        ReluParams::new(ok, q(0.1, -129)),
        Err(bad("output zero point"))
    );
    // 3e38 / 1e−38 overflows f32.
    assert_eq!(
        ReluParams::new(q(3e38, 0), q(1e-38, 0)),
        Err(bad("output scale"))
    );
    let p = ReluParams::new(ok, ok).unwrap();
    assert_eq!(
        relu(&p, &[0; 4], &mut [0; 5]),
        Err(mismatch("output", 4, 5))
    );
}

// ---------------------------------------------------------------------------------------------
// FULLY_CONNECTED

const SHAPE_2X4X3: FcShape = FcShape {
    batches: 2,
    in_features: 4,
    out_features: 3,
};

#[test]
fn fc_exact_multiplier_one() {
    // 0.5 · 0.5 / 0.25 = 1: out = clamp(acc + zp_out), acc = Σ w · (x − zp_in) + bias.
    let p = FcParams::new(q(0.5, 2), 0.5, q(0.25, -1), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, 1));
    let input = [3, 2, 1, 0, 10, -10, 2, 2];
    let weights = [1, 1, 1, 1, 2, -1, 0, 3, -5, 0, 0, 100];
    let bias = [0, 7, -3];
    let mut out = [0; 6];
    fully_connected(&p, SHAPE_2X4X3, &input, &weights, Some(&bias), &mut out).unwrap();
    // x − 2: [1, 0, −1, −2] and [8, −12, 0, 0].
    // b0: 1 + 0 − 1 − 2 = −2 → −3; 2 − 0 + 0 − 6 + 7 = 3 → 2; −5 − 200 − 3 = −208 → −128.
    // b1: 8 − 12 = −4 → −5; 16 + 12 + 7 = 35 → 34; −40 − 3 = −43 → −44.
    assert_eq!(out, [-3, 2, -128, -5, 34, -44]);
    fully_connected(&p, SHAPE_2X4X3, &input, &weights, None, &mut out).unwrap();
    assert_eq!(out, [-3, -5, -128, -5, 27, -41]);
}

#[test]
fn fc_hand_computed() {
    // in: 0.02 zp −10; weights 0.0031; out: 0.05 zp 3.
    // Multiplier: the f32 product 0.02f · 0.0031f = 6.2e−5f, widened, / 0.05 = 0.00123999996
    // → (1363394380, −9). The double product would give 1363394407.
    // b0, o1: acc = 127·(−118) − 128·0 + 0·15 + 5·137 = −14301; + bias −2000 = −16301;
    // srdhm(−16301, 1363394380) = round(−10349.18) = −10349; rdbpot(·, 9) = round(−20.21) = −20;
    // + 3 = −17.
    let p = FcParams::new(q(0.02, -10), 0.0031, q(0.05, 3), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (1_363_394_380, -9));
    assert_ne!(
        p.output_multiplier(),
        crate::fixed_point::quantize_multiplier(
            0.02_f32 as f64 * 0.0031_f32 as f64 / 0.05_f32 as f64
        )
    );
    let input = [-128, -10, 5, 127, 0, -1, 60, -77];
    let weights = [1, -2, 3, -4, 127, -128, 0, 5, -7, 8, -9, 10];
    let mut out = [0; 6];
    fully_connected(
        &p,
        SHAPE_2X4X3,
        &input,
        &weights,
        Some(&[100, -2000, 12345]),
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [2, -17, 21, 4, 0, 17]);
    // Without bias and with a fused Relu (range (3, 127)).
    let p = FcParams::new(q(0.02, -10), 0.0031, q(0.05, 3), Activation::Relu).unwrap();
    assert_eq!(p.activation_range(), (3, 127));
    fully_connected(&p, SHAPE_2X4X3, &input, &weights, None, &mut out).unwrap();
    assert_eq!(out, [3, 3, 6, 4, 3, 3]);
}

/// Deterministic pseudo-random int8 data (a 32-bit LCG).
fn lcg_bytes(seed: u32, n: usize) -> Vec<i8> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (s >> 24) as u8 as i8
        })
        .collect()
}

#[test]
fn fc_matches_model_and_reals() {
    let cases = [
        (3, 17, 5, q(0.02, -10), 0.0031, q(0.05, 3), Activation::None),
        (
            1,
            64,
            10,
            q(0.0078125, -128),
            0.0042,
            q(0.09, -7),
            Activation::Relu,
        ),
        (4, 9, 7, q(0.11, 12), 0.02, q(0.4, 0), Activation::Relu6),
        (
            2,
            33,
            3,
            q(0.5, 0),
            0.25,
            q(0.001, -128),
            Activation::ReluN1To1,
        ),
        (2, 5, 4, q(0.004, 1), 0.001, q(0.5, 0), Activation::None),
    ];
    for (i, &(batches, inf, outf, qi, ws, qo, act)) in cases.iter().enumerate() {
        let seed = i as u32 * 7919;
        let input = lcg_bytes(seed, batches * inf);
        let weights = lcg_bytes(seed + 1, outf * inf);
        let bias: Vec<i32> = lcg_bytes(seed + 2, outf)
            .iter()
            .map(|&b| i32::from(b) * 97)
            .collect();
        let shape = FcShape {
            batches: batches as u32,
            in_features: inf as u32,
            out_features: outf as u32,
        };
        let p = FcParams::new(qi, ws, qo, act).unwrap();
        let mut out = std::vec![0_i8; batches * outf];
        fully_connected(&p, shape, &input, &weights, Some(&bias), &mut out).unwrap();
        for b in 0..batches {
            for o in 0..outf {
                let mut acc = i64::from(bias[o]);
                for k in 0..inf {
                    acc += i64::from(weights[o * inf + k])
                        * (i64::from(input[b * inf + k]) - i64::from(qi.zero_point));
                }
                let got = out[b * outf + o];
                assert_eq!(
                    got,
                    model::fc_requant(qi, ws, qo, act, acc),
                    "case {i} b={b} o={o}"
                );
                let real = acc as f64 * f64::from(qi.scale) * f64::from(ws);
                let diff = i32::from(got) - ideal(real, qo, p.activation_range());
                assert!(diff.abs() <= 1, "case {i} b={b} o={o}: off by {diff}");
            }
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "miri gives powi a nondeterministic rounding error, and the test builds exact powers of two with it"
)]
fn fc_accumulator_wraps_like_tflm() {
    // 70,000 products of −128 · (127 + 128) = −32640 sum to −2,284,800,000, below i32::MIN;
    // TFLM's int32 accumulator wraps to +2,010,167,296. With a multiplier of 2^−24 that is
    // +119.8 → 120 (+ zp 0), where the unwrapped sum would have saturated at −128.
    let n = 70_000_usize;
    let shape = FcShape {
        batches: 1,
        in_features: n as u32,
        out_features: 1,
    };
    let p = FcParams::new(
        q(2f32.powi(-12), -128),
        2f32.powi(-12),
        q(1.0, 0),
        Activation::None,
    )
    .unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, -23));
    let input = std::vec![127_i8; n];
    let weights = std::vec![-128_i8; n];
    let mut out = [0];
    fully_connected(&p, shape, &input, &weights, None, &mut out).unwrap();
    let wrapped = (-32640_i64 * n as i64) as i32;
    assert_eq!(wrapped, 2_010_167_296);
    assert_eq!(out, [120]);
    // The bias is added with wrap-around too (a plain `+` would panic in debug builds): + i32::MAX
    // wraps back to −137,316,353, the exact sum, · 2^−24 = −8.18 → −8.
    fully_connected(&p, shape, &input, &weights, Some(&[i32::MAX]), &mut out).unwrap();
    assert_eq!(out, [-8]);
}

#[test]
fn fc_degenerate_shapes() {
    let p = FcParams::new(q(0.5, 0), 0.5, q(0.25, 1), Activation::None).unwrap();
    // No input features: each output is the requantized bias (multiplier 1) plus the zp.
    let shape = FcShape {
        batches: 2,
        in_features: 0,
        out_features: 3,
    };
    let mut out = [0; 6];
    fully_connected(&p, shape, &[], &[], Some(&[5, -300, 126]), &mut out).unwrap();
    assert_eq!(out, [6, -128, 127, 6, -128, 127]);
    fully_connected(&p, shape, &[], &[], None, &mut out).unwrap();
    assert_eq!(out, [1; 6]);
    // No batches / no outputs: nothing to do, but the lengths are still checked.
    let shape = FcShape {
        batches: 0,
        in_features: 4,
        out_features: 3,
    };
    fully_connected(&p, shape, &[], &[0; 12], None, &mut []).unwrap();
    assert_eq!(
        fully_connected(&p, shape, &[], &[0; 11], None, &mut []),
        Err(mismatch("weights", 12, 11))
    );
    let shape = FcShape {
        batches: 2,
        in_features: 4,
        out_features: 0,
    };
    fully_connected(&p, shape, &[0; 8], &[], Some(&[]), &mut []).unwrap();
}

#[test]
fn fc_errors() {
    let p = FcParams::new(q(0.5, 0), 0.5, q(0.25, 1), Activation::None).unwrap();
    let (input, weights, bias) = ([0_i8; 8], [0_i8; 12], [0_i32; 3]);
    let mut out = [0_i8; 6];
    assert_eq!(
        fully_connected(&p, SHAPE_2X4X3, &input[..7], &weights, None, &mut out),
        Err(mismatch("input", 8, 7))
    );
    assert_eq!(
        fully_connected(&p, SHAPE_2X4X3, &input, &[0; 13], None, &mut out),
        Err(mismatch("weights", 12, 13))
    );
    assert_eq!(
        fully_connected(
            &p,
            SHAPE_2X4X3,
            &input,
            &weights,
            Some(&bias[..2]),
            &mut out
        ),
        Err(mismatch("bias", 3, 2))
    );
    assert_eq!(
        fully_connected(
            &p,
            SHAPE_2X4X3,
            &input,
            &weights,
            Some(&bias),
            &mut out[..5]
        ),
        Err(mismatch("output", 6, 5))
    );
    let huge = FcShape {
        batches: u32::MAX,
        in_features: u32::MAX,
        out_features: 2,
    };
    assert_eq!(
        fully_connected(&p, huge, &[], &[], None, &mut []),
        Err(KernelError::ShapeOverflow)
    );

    let ok = q(0.1, 0);
    let none = Activation::None;
    assert_eq!(
        FcParams::new(q(0.0, 0), 0.1, ok, none),
        Err(bad("input scale"))
    );
    assert_eq!(FcParams::new(ok, -0.1, ok, none), Err(bad("weights scale")));
    assert_eq!(
        FcParams::new(ok, f32::NAN, ok, none),
        Err(bad("weights scale"))
    );
    assert_eq!(
        FcParams::new(ok, 0.1, q(0.0, 0), none),
        Err(bad("output scale"))
    );
    assert_eq!(
        FcParams::new(q(0.1, 300), 0.1, ok, none),
        Err(bad("input zero point"))
    );
    assert_eq!(
        FcParams::new(ok, 0.1, q(0.1, -300), none),
        Err(bad("output zero point"))
    );
    assert_eq!(
        FcParams::new(q(1e30, 0), 1e30, ok, none),
        Err(bad("input scale * weights scale"))
    );
    assert_eq!(
        FcParams::new(q(1e10, 0), 1e10, q(1e-10, 0), none),
        Err(bad("output scale"))
    );
    // A product that underflows f32 gives a zero multiplier, as in TFLM: outputs are the zp.
    let p = FcParams::new(q(1e-30, 0), 1e-30, q(1.0, 9), none).unwrap();
    assert_eq!(p.output_multiplier(), (0, 0));
    fully_connected(&p, SHAPE_2X4X3, &[127; 8], &[127; 12], None, &mut out).unwrap();
    assert_eq!(out, [9; 6]);
}

// ---------------------------------------------------------------------------------------------
// Robustness: every constructor either refuses or yields parameters the kernels run on.

#[test]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
#[cfg_attr(
    miri,
    ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
)]
fn extreme_parameters_never_panic() {
    let scales = [
        f32::from_bits(1),
        1e-38,
        1e-20,
        1.0 / 1_048_576.0,
        0.003,
        0.5,
        1.0,
        3.0,
        1e10,
        1e20,
        f32::MAX,
    ];
    let zps = [-128, 0, 127];
    let acts = [
        Activation::None,
        Activation::Relu,
        Activation::Relu6,
        Activation::ReluN1To1,
    ];
    let data = all_i8();
    let flipped: Vec<i8> = data.iter().rev().copied().collect();
    let mut out = std::vec![0_i8; data.len()];
    let mut built = 0;
    for &s1 in &scales {
        for &s2 in &scales {
            for &so in &scales {
                for &z in &zps {
                    for &act in &acts {
                        let (a, b, o) = (q(s1, z), q(s2, -z), q(so, z));
                        if let Ok(p) = AddParams::new(a, b, o, act) {
                            add(&p, &data, &flipped, &mut out).unwrap();
                            built += 1;
                        }
                        if let Ok(p) = MulParams::new(a, b, o, act) {
                            mul(&p, &data, &flipped, &mut out).unwrap();
                            built += 1;
                        }
                        if let Ok(p) = FcParams::new(a, s2, o, act) {
                            let shape = FcShape {
                                batches: 16,
                                in_features: 16,
                                out_features: 16,
                            };
                            fully_connected(
                                &p,
                                shape,
                                &data,
                                &flipped,
                                Some(&[i32::MIN; 16]),
                                &mut out,
                            )
                            .unwrap();
                            built += 1;
                        }
                    }
                }
                if let Ok(p) = ReluParams::new(q(s1, 0), q(so, -128)) {
                    relu(&p, &data, &mut out).unwrap();
                    built += 1;
                }
            }
        }
    }
    assert!(built > 1000, "{built}");
}

#[test]
fn broadcast_runs_count_the_innermost_runs() {
    let runs = |a: &[u32], b: &[u32], out: &[u32]| BroadcastShape::new(a, b, out).unwrap().runs();
    // Equal shapes: one flat run.
    assert_eq!(runs(&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]), 1);
    // A per-channel vector: a run of 16 per pixel.
    assert_eq!(runs(&[1, 8, 8, 16], &[16], &[1, 8, 8, 16]), 64);
    // A scalar: one run of all the elements.
    assert_eq!(runs(&[2, 3], &[], &[2, 3]), 1);
    // Each input repeated along a different outer axis: 4 · 3 runs of 5.
    assert_eq!(runs(&[4, 1, 5], &[1, 3, 5], &[4, 3, 5]), 12);
    // No output: no run.
    assert_eq!(runs(&[0, 5], &[5], &[0, 5]), 0);
}
