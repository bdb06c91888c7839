//! Elementwise int8 ADD with AVX2: TFLM's arithmetic (see [`AddParams`]) on eight lanes at a
//! time.
//!
//! Each input is offset, shifted left by [`ADD_LEFT_SHIFT`] and rescaled by its multiplier
//! (`MultiplyByQuantizedMultiplierSmallerThanOneExp`: the [`scale`] of a right shift), the two
//! are added (below 2²⁸ in magnitude: no overflow) and the sum is requantized with the output
//! multiplier, offset and clamp, all with the portable kernel's integer steps. Layers whose
//! multipliers shift left or are `i32::MIN`, whose input offsets lie outside −128..=128 or
//! whose activation range leaves int8 run the portable loop.

use core::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_cvtepi8_epi32, _mm256_set1_epi32, _mm256_setzero_si256,
    _mm256_slli_epi32, _mm_cvtsi64_si128,
};

use super::has_avx2;
use super::requant::{lane_fits, requantize, scale, store, Clamp, Lanes};
use crate::int8::conv::ChannelMultiplier;
use crate::int8::{AddParams, ADD_LEFT_SHIFT};

/// `out = a + b` elementwise over the shortest of the three on AVX2 when the CPU has it and
/// the parameters fit (see the module docs): `true` when it ran.
pub(crate) fn add(p: &AddParams, a: &[i8], b: &[i8], out: &mut [i8]) -> bool {
    let right_shift =
        |m: i32, shift: i32| shift <= 0 && lane_fits(ChannelMultiplier::from_raw(m, shift));
    let fits = right_shift(p.input1_multiplier, p.input1_shift)
        && right_shift(p.input2_multiplier, p.input2_shift)
        && right_shift(p.output_multiplier, p.output_shift)
        && (-128..=128).contains(&p.input1_offset)
        && (-128..=128).contains(&p.input2_offset)
        && p.activation_min >= i32::from(i8::MIN)
        && p.activation_max <= i32::from(i8::MAX);
    if !fits || !has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        add_avx2(p, a, b, out);
    }
    true
}

/// The same multiplier and right shift in every lane, no bias.
#[target_feature(enable = "avx2")]
fn uniform(multiplier: i32, shift: i32) -> Lanes {
    Lanes {
        multiplier: _mm256_set1_epi32(multiplier),
        left: _mm256_setzero_si256(),
        right: _mm256_set1_epi32(-shift),
        bias: _mm256_setzero_si256(),
    }
}

/// Eight bytes sign-extended to 32-bit lanes (`bytes` has at least eight; zeros after).
#[target_feature(enable = "avx2")]
fn widen8(bytes: &[i8]) -> __m256i {
    let mut word = [0_u8; 8];
    for (w, &b) in word.iter_mut().zip(bytes) {
        *w = b as u8;
    }
    _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(i64::from_le_bytes(word)))
}

/// [`add`] once the parameters are known to fit.
#[target_feature(enable = "avx2")]
fn add_avx2(p: &AddParams, a: &[i8], b: &[i8], out: &mut [i8]) {
    let l1 = uniform(p.input1_multiplier, p.input1_shift);
    let l2 = uniform(p.input2_multiplier, p.input2_shift);
    let lo = uniform(p.output_multiplier, p.output_shift);
    let clamp = Clamp::new(p.output_offset, p.activation_min, p.activation_max);
    let (o1, o2) = (
        _mm256_set1_epi32(p.input1_offset),
        _mm256_set1_epi32(p.input2_offset),
    );
    let n = out.len().min(a.len()).min(b.len());
    for k in (0..n).step_by(8) {
        let end = (k + 8).min(n);
        let x = _mm256_slli_epi32(_mm256_add_epi32(widen8(&a[k..end]), o1), ADD_LEFT_SHIFT);
        let y = _mm256_slli_epi32(_mm256_add_epi32(widen8(&b[k..end]), o2), ADD_LEFT_SHIFT);
        let sum = _mm256_add_epi32(scale(x, &l1), scale(y, &l2));
        store(requantize(sum, &lo, &clamp), &mut out[k..end]);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::int8::{broadcast, Activation, Quant};

    /// The AVX2 ADD against the portable per-element arithmetic on random quantizations
    /// (every zero point, scales in both orders, the three activations) and lengths around
    /// the eight-lane steps.
    #[test]
    fn add_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut rng = crate::xorshift::XorShift(0x0bad_f00d_u32);
        let mut next = move || rng.next();
        let mut ran = 0;
        for case in 0..300 {
            let mut q = || Quant {
                scale: 0.005 + (next() % 1000) as f32 / 2000.0,
                zero_point: (next() % 256) as i32 - 128,
            };
            let (qa, qb, qo) = (q(), q(), q());
            let act = [Activation::None, Activation::Relu, Activation::Relu6][case % 3];
            let Ok(p) = AddParams::new(qa, qb, qo, act) else {
                continue;
            };
            let n = (next() % 70) as usize;
            let a: Vec<i8> = (0..n).map(|_| next() as i8).collect();
            let b: Vec<i8> = (0..n).map(|_| next() as i8).collect();
            let (mut fast, mut reference) = (vec![0_i8; n], vec![0_i8; n]);
            if !add(&p, &a, &b, &mut fast) {
                continue;
            }
            broadcast::elementwise(&p, &a, &b, &mut reference);
            assert_eq!(fast, reference, "case {case}: {qa:?} {qb:?} {qo:?} {act:?}");
            ran += 1;
        }
        assert!(ran > 200, "only {ran} cases ran");
    }
}
