//! Dot products of int8 rows with AVX2, for FULLY_CONNECTED.
//!
//! A fully connected layer of batch 1 is one input row against every weight row: each weight
//! byte is used once, so the work is streaming the weights through `VPMADDWD`. Sixteen input
//! bytes are widened to 16 bits with the input offset added (`|x + offset| ≤ 255`: exact) once
//! for eight weight rows, whose bytes are widened and multiplied into eight vectors of eight
//! 32-bit accumulators; the lanes are summed at the end of the rows. The sums wrap modulo 2³²
//! (`VPADDD`), where their order does not matter, so every accumulator is the portable one.

use core::arch::x86_64::{
    __m128i, __m256i, _mm256_add_epi16, _mm256_add_epi32, _mm256_castsi256_si128,
    _mm256_cvtepi8_epi16, _mm256_extracti128_si256, _mm256_hadd_epi32, _mm256_madd_epi16,
    _mm256_permute2x128_si256, _mm256_set1_epi16, _mm256_setzero_si256, _mm_add_epi32,
    _mm_cvtsi128_si32, _mm_hadd_epi32,
};

use super::requant::{requantize, store, Clamp, Lanes, Multipliers};

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

/// Rows accumulated together: each widened input chunk serves this many weight rows.
const ROWS: usize = 8;

/// The sixteen-byte chunks of `bytes`, as many as `chunks` (the caller keeps them within it).
fn chunks16(bytes: &[i8], chunks: usize) -> &[[u8; 16]] {
    let bytes: &[u8] = bytemuck::cast_slice(bytes);
    let whole: &[[u8; 16]] = bytemuck::cast_slice(&bytes[..bytes.len() / 16 * 16]);
    &whole[..chunks.min(whole.len())]
}

/// A chunk widened to sixteen 16-bit lanes.
#[target_feature(enable = "avx2")]
fn widen(chunk: [u8; 16]) -> __m256i {
    _mm256_cvtepi8_epi16(bytemuck::cast::<[u8; 16], __m128i>(chunk))
}

/// The lane sums of eight accumulators, in order, wrapping, as the lanes of one vector.
#[target_feature(enable = "avx2")]
fn sums(acc: [__m256i; ROWS]) -> __m256i {
    let [a0, a1, a2, a3, a4, a5, a6, a7] = acc;
    let q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    let q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(a4, a5), _mm256_hadd_epi32(a6, a7));
    // q0 holds rows 0..4 (each 128-bit half one half of every row's lanes), q1 rows 4..8.
    let low = _mm256_permute2x128_si256(q0, q1, 0x20);
    let high = _mm256_permute2x128_si256(q0, q1, 0x31);
    _mm256_add_epi32(low, high)
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
    dots(x, offset, weights, rows, |r0, acc, count| {
        let acc: [i32; ROWS] = bytemuck::cast(acc);
        for (j, a) in acc.into_iter().take(count).enumerate() {
            f(r0 + j, a);
        }
    });
}

/// The dot products of `x` (with `offset` added) and each of the `rows` weight rows, a block
/// of eight rows (fewer at the end) from `r0` as the lanes of one vector: `block(r0, acc,
/// count)`, lanes past `count` zero. `weights` holds at least `rows` rows of
/// `x.len()` bytes and `offset` is within −128..=128 (the callers check).
#[target_feature(enable = "avx2")]
fn dots(
    x: &[i8],
    offset: i32,
    weights: &[i8],
    rows: usize,
    mut block: impl FnMut(usize, __m256i, usize),
) {
    let n = x.len();
    let chunks = n / 16;
    let full = chunks * 16;
    let off = _mm256_set1_epi16(offset as i16);
    let xs = chunks16(x, chunks);
    let tail = |w: &[i8]| {
        w.iter().zip(&x[full..]).fold(0_i32, |a, (&w, &x)| {
            a.wrapping_add(i32::from(w) * (i32::from(x) + offset))
        })
    };
    let row = |r: usize| weights.get(r * n..(r + 1) * n).unwrap_or(&[]);
    let mut r = 0;
    while r + ROWS <= rows {
        // Every row has `chunks` whole chunks: with the lengths equal, the loop below indexes
        // them without a check per row and chunk.
        // (A loop rather than `array::from_fn`: closures made here are not inlined into
        // functions without AVX2 enabled.)
        let mut w: [&[[u8; 16]]; ROWS] = [&[]; ROWS];
        for (j, wj) in w.iter_mut().enumerate() {
            *wj = chunks16(
                weights.get((r + j) * n..(r + j + 1) * n).unwrap_or(&[]),
                chunks,
            );
        }
        let mut acc = [_mm256_setzero_si256(); ROWS];
        if w.iter().all(|wj| wj.len() == xs.len()) {
            for (k, &xc) in xs.iter().enumerate() {
                let xv = _mm256_add_epi16(widen(xc), off);
                for (a, wj) in acc.iter_mut().zip(&w) {
                    *a = _mm256_add_epi32(*a, _mm256_madd_epi16(widen(wj[k]), xv));
                }
            }
        }
        let mut tails = [0_i32; ROWS];
        if full < n {
            for (j, t) in tails.iter_mut().enumerate() {
                *t = tail(&row(r + j)[full..]);
            }
        }
        block(r, _mm256_add_epi32(sums(acc), bytemuck::cast(tails)), ROWS);
        r += ROWS;
    }
    // The last rows one by one, gathered into one block.
    let last = r;
    let mut rest = [0_i32; ROWS];
    while r < rows {
        let w = chunks16(row(r), chunks);
        let mut acc = _mm256_setzero_si256();
        for (&xc, &wc) in xs.iter().zip(w) {
            let xv = _mm256_add_epi16(widen(xc), off);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(widen(wc), xv));
        }
        rest[r - last] = lane_sum(acc).wrapping_add(tail(&row(r)[full.min(n)..]));
        r += 1;
    }
    if last < rows {
        block(last, bytemuck::cast(rest), rows - last);
    }
}

/// One row of a fully connected layer streamed through the weights: the dot products of `x`
/// (with `offset` added) and the `out.len()` weight rows, each channel's bias added, as
/// requantized bytes, eight channels to a vector. `false` (nothing written) when the CPU lacks
/// AVX2, `offset` is outside −128..=128, `weights` is shorter than the rows or a channel's
/// multiplier is missing or outside what the vector requantization covers.
pub(crate) fn requantized_row(
    x: &[i8],
    offset: i32,
    weights: &[i8],
    multipliers: &Multipliers<'_>,
    bias: Option<&[i32]>,
    (out_offset, min, max): (i32, i32, i32),
    out: &mut [i8],
) -> bool {
    let rows = out.len();
    let fits = (-128..=128).contains(&offset)
        && min >= i32::from(i8::MIN)
        && max <= i32::from(i8::MAX)
        && rows
            .checked_mul(x.len())
            .is_some_and(|n| n <= weights.len())
        && multipliers.fit(rows);
    if !fits || !super::has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        requantized_row_avx2(
            x,
            offset,
            weights,
            multipliers,
            bias,
            (out_offset, min, max),
            out,
        );
    }
    true
}

/// [`requantized_row`] once the operands are known to fit.
#[target_feature(enable = "avx2")]
fn requantized_row_avx2(
    x: &[i8],
    offset: i32,
    weights: &[i8],
    multipliers: &Multipliers<'_>,
    bias: Option<&[i32]>,
    (out_offset, min, max): (i32, i32, i32),
    out: &mut [i8],
) {
    let clamp = Clamp::new(out_offset, min, max);
    dots(x, offset, weights, out.len(), |c0, acc, count| {
        let l = Lanes::of_block(multipliers, bias, c0);
        let acc = requantize(_mm256_add_epi32(acc, l.bias), &l, &clamp);
        store(acc, &mut out[c0..c0 + count]);
    });
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
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut rng = crate::xorshift::XorShift(0x1357_9bdf_u32);
        let mut next = move || rng.next();
        for case in 0..200 {
            let n = (next() % 80) as usize + usize::from(case % 5 == 0) * 600;
            let rows = (next() % 20) as usize;
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
