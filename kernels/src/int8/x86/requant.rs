//! Requantization of eight 32-bit lanes at once: TFLM's `MultiplyByQuantizedMultiplier` with a
//! multiplier and shift per lane, the output offset and the clamp, and the lanes' bytes.
//!
//! The doubling high product `(x · m + 2³⁰) >> 31` is taken from two `VPMULDQ`s (even and odd
//! lanes, exact 64-bit products); without `i32::MIN` as multiplier it never saturates, so its
//! low word is the result. The rounding division by `2^right` adds one when the remainder
//! exceeds half the divisor (or reaches it, for a negative value), as
//! [`rounding_divide_by_pot`](crate::fixed_point::rounding_divide_by_pot) does, with per-lane
//! shifts (`VPSLLVD`, `VPSRAVD`).

use core::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_add_epi64, _mm256_and_si256, _mm256_blend_epi32,
    _mm256_castsi256_si128, _mm256_cmpgt_epi32, _mm256_max_epi32, _mm256_min_epi32,
    _mm256_mul_epi32, _mm256_packs_epi32, _mm256_permute4x64_epi64, _mm256_set1_epi32,
    _mm256_set1_epi64x, _mm256_slli_epi64, _mm256_sllv_epi32, _mm256_srai_epi32, _mm256_srav_epi32,
    _mm256_srli_epi32, _mm256_srli_epi64, _mm256_sub_epi32, _mm_cvtsi128_si64, _mm_packs_epi16,
};

use crate::int8::conv::ChannelMultiplier;

/// Whether [`requantize`] equals the portable requantization for `m`: a shift in −31..=31 and
/// a multiplier other than `i32::MIN` (every multiplier a converter emits).
pub(crate) fn lane_fits(m: ChannelMultiplier) -> bool {
    (-31..=31).contains(&m.shift()) && m.multiplier() != i32::MIN
}

/// The requantization of eight channels as vectors: multiplier, left shift, right shift, bias.
#[derive(Clone, Copy)]
pub(crate) struct Lanes {
    /// Each lane's Q0.31 multiplier.
    pub(crate) multiplier: __m256i,
    /// Each lane's left shift (0 or more).
    pub(crate) left: __m256i,
    /// Each lane's right shift (0 or more).
    pub(crate) right: __m256i,
    /// Each lane's bias (0 without one).
    pub(crate) bias: __m256i,
}

impl Lanes {
    /// The vectors of channels `c0..c0 + 8`, `multiplier(c)` giving channel `c`'s; from the
    /// first channel it has none for, zeros.
    #[target_feature(enable = "avx2")]
    pub(crate) fn new(
        multiplier: &dyn Fn(usize) -> Option<ChannelMultiplier>,
        bias: Option<&[i32]>,
        c0: usize,
    ) -> Self {
        let (mut m, mut l, mut r, mut b) = ([0_i32; 8], [0_i32; 8], [0_i32; 8], [0_i32; 8]);
        for (k, c) in (c0..c0 + 8).enumerate() {
            let Some(channel) = multiplier(c) else {
                break;
            };
            m[k] = channel.multiplier();
            l[k] = channel.shift().max(0);
            r[k] = channel.shift().saturating_neg().max(0);
            if let Some(&bias) = bias.and_then(|b| b.get(c)) {
                b[k] = bias;
            }
        }
        let [multiplier, left, right, bias] = [m, l, r, b].map(bytemuck::cast::<[i32; 8], __m256i>);
        Self {
            multiplier,
            left,
            right,
            bias,
        }
    }
}

/// Where a layer's channels take their multipliers from.
#[derive(Clone, Copy)]
pub(crate) enum Multipliers<'a> {
    /// One multiplier for every channel (a per-tensor quantization).
    Layer(ChannelMultiplier),
    /// One per channel, in order.
    Channels(&'a [ChannelMultiplier]),
}

impl Multipliers<'_> {
    /// Channel `c`'s multiplier (`None` past the last of [`Multipliers::Channels`]).
    pub(crate) fn get(&self, c: usize) -> Option<ChannelMultiplier> {
        match self {
            Self::Layer(m) => Some(*m),
            Self::Channels(ms) => ms.get(c).copied(),
        }
    }

    /// Whether each of the first `channels` channels has a multiplier [`lane_fits`] accepts.
    pub(crate) fn fit(&self, channels: usize) -> bool {
        match self {
            Self::Layer(m) => lane_fits(*m),
            Self::Channels(ms) => {
                ms.len() >= channels && ms[..channels].iter().all(|&m| lane_fits(m))
            }
        }
    }
}

impl Lanes {
    /// The vectors of channels `c0..c0 + 8` from `multipliers` and `bias`, as [`Lanes::new`]
    /// makes them, without a call per channel: a layer's one multiplier is broadcast, and
    /// eight biases are one load.
    #[target_feature(enable = "avx2")]
    pub(crate) fn of_block(multipliers: &Multipliers<'_>, bias: Option<&[i32]>, c0: usize) -> Self {
        let rest = match bias {
            Some(b) => b.get(c0..).unwrap_or(&[]),
            None => &[],
        };
        let bias = match rest.get(..8) {
            Some(b) => bytemuck::pod_read_unaligned(bytemuck::cast_slice(b)),
            None => {
                let mut b = [0_i32; 8];
                b[..rest.len()].copy_from_slice(rest);
                bytemuck::cast(b)
            }
        };
        match multipliers {
            Multipliers::Layer(m) => Self {
                multiplier: _mm256_set1_epi32(m.multiplier()),
                left: _mm256_set1_epi32(m.shift().max(0)),
                right: _mm256_set1_epi32(m.shift().saturating_neg().max(0)),
                bias,
            },
            Multipliers::Channels(ms) => {
                let (mut m, mut l, mut r) = ([0_i32; 8], [0_i32; 8], [0_i32; 8]);
                let block = ms.get(c0..).unwrap_or(&[]);
                for (k, channel) in block.iter().take(8).enumerate() {
                    m[k] = channel.multiplier();
                    l[k] = channel.shift().max(0);
                    r[k] = channel.shift().saturating_neg().max(0);
                }
                let [multiplier, left, right] = [m, l, r].map(bytemuck::cast::<[i32; 8], __m256i>);
                Self {
                    multiplier,
                    left,
                    right,
                    bias,
                }
            }
        }
    }
}

/// The output offset and the activation range in every lane.
#[derive(Clone, Copy)]
pub(crate) struct Clamp {
    /// The output offset.
    pub(crate) offset: __m256i,
    /// The activation minimum.
    pub(crate) min: __m256i,
    /// The activation maximum.
    pub(crate) max: __m256i,
}

impl Clamp {
    /// The vectors of an output offset and an activation range.
    #[target_feature(enable = "avx2")]
    pub(crate) fn new(offset: i32, min: i32, max: i32) -> Self {
        Self {
            offset: _mm256_set1_epi32(offset),
            min: _mm256_set1_epi32(min),
            max: _mm256_set1_epi32(max),
        }
    }
}

/// TFLM's `MultiplyByQuantizedMultiplier` of each lane of `acc` (bias included) by its
/// channel's multiplier, plus the output offset, clamped: the portable `requantize`, for
/// shifts in −31..=31 and multipliers other than `i32::MIN`.
#[target_feature(enable = "avx2")]
pub(crate) fn requantize(acc: __m256i, l: &Lanes, c: &Clamp) -> __m256i {
    let out = _mm256_add_epi32(scale(acc, l), c.offset);
    _mm256_min_epi32(_mm256_max_epi32(out, c.min), c.max)
}

/// `MultiplyByQuantizedMultiplier` of each lane of `x` by `l`'s multiplier and shifts (its
/// bias is not added), for the multipliers [`lane_fits`] accepts.
#[target_feature(enable = "avx2")]
pub(crate) fn scale(x: __m256i, l: &Lanes) -> __m256i {
    let x = _mm256_sllv_epi32(x, l.left);
    // `(x · m + 2³⁰) >> 31` for even and odd lanes: the 64-bit products are exact and the
    // quotient fits 32 bits (no saturation without i32::MIN), so its low word is taken
    // from a logical shift.
    let nudge = _mm256_set1_epi64x(1 << 30);
    let even = _mm256_mul_epi32(x, l.multiplier);
    let odd = _mm256_mul_epi32(
        _mm256_srli_epi64(x, 32),
        _mm256_srli_epi64(l.multiplier, 32),
    );
    let even = _mm256_srli_epi64(_mm256_add_epi64(even, nudge), 31);
    let odd = _mm256_slli_epi64(_mm256_add_epi64(odd, nudge), 1);
    let high = _mm256_blend_epi32(even, odd, 0b1010_1010);
    // Rounding division by 2^right: +1 when the remainder exceeds half the divisor (or
    // reaches it, for a negative value).
    let one = _mm256_set1_epi32(1);
    let mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, l.right), one);
    let remainder = _mm256_and_si256(high, mask);
    let threshold = _mm256_add_epi32(_mm256_srai_epi32(mask, 1), _mm256_srli_epi32(high, 31));
    let quotient = _mm256_srav_epi32(high, l.right);
    _mm256_sub_epi32(quotient, _mm256_cmpgt_epi32(remainder, threshold))
}

/// The eight lanes of `v` (each within int8) as bytes.
#[target_feature(enable = "avx2")]
pub(crate) fn to_bytes(v: __m256i) -> [i8; 8] {
    let words = _mm256_permute4x64_epi64(_mm256_packs_epi32(v, v), 0b1000);
    let low = _mm256_castsi256_si128(words);
    _mm_cvtsi128_si64(_mm_packs_epi16(low, low))
        .to_le_bytes()
        .map(|b| b as i8)
}

/// Writes the first `out.len()` (at most eight) bytes of `v`'s lanes to `out`.
#[target_feature(enable = "avx2")]
pub(crate) fn store(v: __m256i, out: &mut [i8]) {
    let bytes = to_bytes(v);
    // All eight (the usual case) as one store rather than a copy of a variable length.
    if let Ok(whole) = <&mut [i8; 8]>::try_from(&mut *out) {
        *whole = bytes;
        return;
    }
    let n = out.len().min(8);
    out[..n].copy_from_slice(&bytes[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixed_point::multiply_by_quantized_multiplier;

    /// [`requantize`] against the portable arithmetic, lane by lane, on random accumulators
    /// (small and near the `i32` limits), every shift in −31..=31, random multipliers with
    /// the extremes, offsets and clamps.
    #[test]
    fn requantize_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut rng = crate::xorshift::XorShift(0x7f4a_7c15_u32);
        let mut next = move || rng.next();
        for case in 0..20_000 {
            let acc: [i32; 8] = core::array::from_fn(|k| match (case + k) % 3 {
                0 => next() as i32,
                1 => (next() as i32) >> 12,
                _ => (next() as i32) >> 24,
            });
            let multipliers: [ChannelMultiplier; 8] = core::array::from_fn(|k| {
                let m = match (case + k) % 5 {
                    0 => i32::MAX,
                    1 => i32::MIN + 1,
                    _ => next() as i32,
                };
                ChannelMultiplier::from_raw(m, (next() % 63) as i32 - 31)
            });
            let (offset, lo) = ((next() % 256) as i32 - 128, (next() % 128) as i32 - 128);
            let hi = lo + (next() % 128) as i32;
            let (got, expected) = check(acc, &multipliers, (offset, lo, hi));
            assert_eq!(got, expected, "case {case}: {acc:?} {multipliers:?}");
        }

        fn check(
            acc: [i32; 8],
            multipliers: &[ChannelMultiplier; 8],
            (offset, lo, hi): (i32, i32, i32),
        ) -> ([i8; 8], [i8; 8]) {
            let expected = core::array::from_fn(|k| {
                let m = multipliers[k];
                let scaled = multiply_by_quantized_multiplier(acc[k], m.multiplier(), m.shift());
                scaled.wrapping_add(offset).max(lo).min(hi) as i8
            });
            // SAFETY: the caller checked that the CPU has AVX2.
            #[allow(unsafe_code)]
            let got = unsafe { lanes_bytes(acc, multipliers, (offset, lo, hi)) };
            (got, expected)
        }

        #[target_feature(enable = "avx2")]
        fn lanes_bytes(
            acc: [i32; 8],
            multipliers: &[ChannelMultiplier; 8],
            (offset, lo, hi): (i32, i32, i32),
        ) -> [i8; 8] {
            let l = Lanes::new(&|c| multipliers.get(c).copied(), None, 0);
            let c = Clamp::new(offset, lo, hi);
            to_bytes(requantize(bytemuck::cast(acc), &l, &c))
        }
    }
}
