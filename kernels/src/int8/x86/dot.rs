//! Dot products of int8 rows with AVX2, for FULLY_CONNECTED.
//!
//! A fully connected layer of batch 1 is one input row against every weight row: each weight
//! byte is used once, so the work is streaming the weights through `VPMADDWD`. Sixteen input
//! bytes are widened to 16 bits with the input offset added (`|x + offset| ≤ 255`: exact) once
//! for four weight rows, whose bytes are widened and multiplied into four vectors of eight
//! 32-bit accumulators; the lanes are summed at the end of the rows. The sums wrap modulo 2³²
//! (`VPADDD`), where their order does not matter, so every accumulator is the portable one.

use core::arch::x86_64::{
    __m128i, __m256i, _mm256_add_epi16, _mm256_add_epi32, _mm256_castsi256_si128,
    _mm256_cvtepi8_epi16, _mm256_extracti128_si256, _mm256_madd_epi16, _mm256_set1_epi16,
    _mm256_setzero_si256, _mm_add_epi32, _mm_cvtsi128_si32, _mm_hadd_epi32,
};

/// Calls `f(r, acc)` for each of the `rows` weight rows of `weights` (`x.len()` bytes each, in
/// order), `acc` being `Σ w[i] · (x[i] + offset)`, wrapping; `false` (and no call) when the
/// CPU lacks AVX2, `offset` is outside −128..=128 or `weights` is shorter than the rows.
pub(crate) fn each_dot(
    x: &[i8],
    offset: i32,
    weights: &[i8],
    rows: usize,
    f: impl FnMut(usize, i32),
) -> bool {
    let fits = (-128..=128).contains(&offset)
        && rows
            .checked_mul(x.len())
            .is_some_and(|n| n <= weights.len());
    if !fits || !super::has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        each_dot_avx2(x, offset, weights, rows, f);
    }
    true
}

/// Sixteen bytes of `bytes` from `at`, widened to 16-bit lanes (the caller keeps `at + 16`
/// within `bytes`; past its end the lanes are 0).
#[target_feature(enable = "avx2")]
fn widen16(bytes: &[i8], at: usize) -> __m256i {
    let bytes: &[u8] = bytemuck::cast_slice(bytes);
    let v: __m128i = match bytes.get(at..at + 16) {
        Some(b) => bytemuck::pod_read_unaligned(b),
        None => bytemuck::cast([0_u8; 16]),
    };
    _mm256_cvtepi8_epi16(v)
}

/// The sum of the eight lanes of `v`, wrapping.
#[target_feature(enable = "avx2")]
fn lane_sum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_hadd_epi32(s, s);
    _mm_cvtsi128_si32(_mm_hadd_epi32(s, s))
}

/// [`each_dot`] once the operands are known to fit.
#[target_feature(enable = "avx2")]
fn each_dot_avx2(
    x: &[i8],
    offset: i32,
    weights: &[i8],
    rows: usize,
    mut f: impl FnMut(usize, i32),
) {
    let n = x.len();
    let full = n / 16 * 16;
    let off = _mm256_set1_epi16(offset as i16);
    let tail = |w: &[i8]| {
        w.iter().zip(&x[full..]).fold(0_i32, |a, (&w, &x)| {
            a.wrapping_add(i32::from(w) * (i32::from(x) + offset))
        })
    };
    let mut r = 0;
    while r + 4 <= rows {
        let w = &weights[r * n..(r + 4) * n];
        let mut acc = [_mm256_setzero_si256(); 4];
        for k in (0..full).step_by(16) {
            let xv = _mm256_add_epi16(widen16(x, k), off);
            for (j, a) in acc.iter_mut().enumerate() {
                *a = _mm256_add_epi32(*a, _mm256_madd_epi16(widen16(w, j * n + k), xv));
            }
        }
        for (j, a) in acc.into_iter().enumerate() {
            let row = &w[j * n..(j + 1) * n];
            f(r + j, lane_sum(a).wrapping_add(tail(&row[full..])));
        }
        r += 4;
    }
    while r < rows {
        let row = &weights[r * n..(r + 1) * n];
        let mut acc = _mm256_setzero_si256();
        for k in (0..full).step_by(16) {
            let xv = _mm256_add_epi16(widen16(x, k), off);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(widen16(row, k), xv));
        }
        f(r, lane_sum(acc).wrapping_add(tail(&row[full..])));
        r += 1;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    /// Every accumulator equals the scalar dot product, for lengths around the sixteen-byte
    /// steps and row counts around the four-row blocks, over all offsets' extremes.
    #[test]
    fn each_dot_equals_scalar() {
        if !crate::int8::x86::has_avx2() {
            return;
        }
        let mut state = 0x1357_9bdf_u32;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        for case in 0..200 {
            let n = (next() % 80) as usize + usize::from(case % 5 == 0) * 600;
            let rows = (next() % 11) as usize;
            let offset = [-128, 128, 0, (next() % 257) as i32 - 128][case % 4];
            let x: Vec<i8> = (0..n).map(|_| next() as i8).collect();
            let w: Vec<i8> = (0..n * rows).map(|_| next() as i8).collect();
            let mut seen = Vec::new();
            assert!(each_dot(&x, offset, &w, rows, |r, acc| seen.push((r, acc))));
            let expected: Vec<(usize, i32)> = (0..rows)
                .map(|r| {
                    let acc = w[r * n..(r + 1) * n]
                        .iter()
                        .zip(&x)
                        .fold(0_i32, |a, (&w, &x)| {
                            a.wrapping_add(i32::from(w) * (i32::from(x) + offset))
                        });
                    (r, acc)
                })
                .collect();
            assert_eq!(
                seen, expected,
                "case {case}: n {n}, rows {rows}, offset {offset}"
            );
        }
    }
}
