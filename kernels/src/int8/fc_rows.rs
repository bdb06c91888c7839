//! The fully connected kernel's rows on the target's multiply-accumulate instructions.
//!
//! One output feature is the dot product of its weight row with the input row, the input
//! offset added to every input byte. [`Mac::dot_rows2`] takes two weight rows against one
//! input row, so that the input's loads (and, on the DSP extension, its widening with the
//! offset) serve two features; Helium applies the offset through the row's sum instead
//! (`Σ w·(x + o) = Σ w·x + o·Σ w`, equal modulo 2³²). The accumulators of a block of
//! [`FC_BLOCK`] features are then requantized together by [`Mac::requantize_run`], which
//! runs four lanes at a time on Helium. Every path gives [`Portable`](super::mac::Portable)'s
//! integers, which are TFLM's.

use super::mac::Mac;
use super::ChannelMultiplier;

/// Output features accumulated before one requantization run.
const FC_BLOCK: usize = 16;

/// The requantization multipliers of a fully connected layer's features.
#[derive(Clone, Copy)]
pub(crate) enum FcMultipliers<'a> {
    /// One for every feature (per-tensor weights).
    One(ChannelMultiplier),
    /// One per feature (per-channel weights).
    PerChannel(&'a [ChannelMultiplier]),
}

/// One batch row of a fully connected layer: `out[o] = requantize(Σ w_o·(x + offset) +
/// bias[o])` for the weight rows `w_o` (`x.len()` bytes each, consecutive in `weights`), by
/// the multiplier of feature `o`, into `(offset, min, max)`. Features past what `weights`,
/// `bias` (when given) or the multipliers hold are left alone (the callers checked the
/// lengths).
pub(crate) fn fc_row<M: Mac>(
    x: &[i8],
    input_offset: i32,
    weights: &[i8],
    bias: Option<&[i32]>,
    multipliers: FcMultipliers<'_>,
    requant: (i32, i32, i32),
    out: &mut [i8],
) {
    let n = x.len();
    if n == 0 {
        return;
    }
    let features = out.len().min(weights.len() / n);
    let features = bias.map_or(features, |b| features.min(b.len()));
    let (features, ones, fast) = match multipliers {
        FcMultipliers::One(m) => (features, [m; FC_BLOCK], M::fast_requantize(&[m])),
        FcMultipliers::PerChannel(m) => {
            let m = m.get(..features).unwrap_or(m);
            (
                m.len(),
                [ChannelMultiplier::default(); FC_BLOCK],
                M::fast_requantize(m),
            )
        }
    };
    let mut acc = [0_i32; FC_BLOCK];
    for f0 in (0..features).step_by(FC_BLOCK) {
        let k = FC_BLOCK.min(features - f0);
        let (Some(block), Some(out)) = (weights.get(f0 * n..(f0 + k) * n), out.get_mut(f0..f0 + k))
        else {
            return;
        };
        let m = match multipliers {
            FcMultipliers::One(_) => &ones[..k],
            FcMultipliers::PerChannel(m) => match m.get(f0..f0 + k) {
                Some(m) => m,
                None => return,
            },
        };
        // Two rows at a time; an odd last row is paired with itself and its twin dropped.
        for (a, rows) in acc[..k].chunks_mut(2).zip(block.chunks(2 * n)) {
            let (w0, w1) = rows.split_at(n.min(rows.len()));
            let w1 = if w1.is_empty() { w0 } else { w1 };
            let dots = M::dot_rows2(x, input_offset, w0, w1);
            a.copy_from_slice(&dots[..a.len()]);
        }
        if let Some(b) = bias.and_then(|b| b.get(f0..f0 + k)) {
            for (a, &b) in acc[..k].iter_mut().zip(b) {
                *a = a.wrapping_add(b);
            }
        }
        M::requantize_run(&acc[..k], m, fast, out, requant);
    }
}

#[cfg(test)]
mod tests {
    use super::super::mac::Portable;
    use super::*;
    use crate::fixed_point::multiply_by_quantized_multiplier;
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    /// The plain per-feature loop the blocked rows must equal.
    fn reference(
        x: &[i8],
        offset: i32,
        weights: &[i8],
        bias: Option<&[i32]>,
        m: &[ChannelMultiplier],
        (zp, min, max): (i32, i32, i32),
        out: &mut [i8],
    ) {
        for (o, (y, w)) in out
            .iter_mut()
            .zip(weights.chunks_exact(x.len()))
            .enumerate()
        {
            let acc = w.iter().zip(x).fold(0_i32, |a, (&w, &x)| {
                a.wrapping_add(i32::from(w) * (i32::from(x) + offset))
            });
            let acc = acc.wrapping_add(bias.map_or(0, |b| b[o]));
            let s = multiply_by_quantized_multiplier(acc, m[o].multiplier(), m[o].shift());
            *y = s.wrapping_add(zp).max(min).min(max) as i8;
        }
    }

    #[test]
    fn blocked_rows_equal_the_plain_loop() {
        let mut seed = 0x1234_5678_u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        // Odd and even feature counts, across a block boundary; depths with and without tails.
        for (case, (n, features)) in [
            (1, 1),
            (3, 2),
            (7, 5),
            (16, 17),
            (33, 16),
            (64, 12),
            (5, 35),
        ]
        .into_iter()
        .enumerate()
        {
            let x: Vec<i8> = (0..n).map(|_| next() as i8).collect();
            let w: Vec<i8> = (0..n * features).map(|_| next() as i8).collect();
            let bias: Vec<i32> = (0..features)
                .map(|_| (next() % 40_000) as i32 - 20_000)
                .collect();
            let m: Vec<ChannelMultiplier> = (0..features)
                .map(|_| {
                    ChannelMultiplier::from_raw(
                        (1 << 30) + (next() >> 2) as i32,
                        -((next() % 12) as i32),
                    )
                })
                .collect();
            let offset = (next() % 256) as i32 - 127;
            let requant = ((next() % 256) as i32 - 128, -100, 110);
            let b = (case % 2 == 0).then_some(&bias[..]);
            let mut want = vec![0_i8; features];
            reference(&x, offset, &w, b, &m, requant, &mut want);
            let mut got = vec![0_i8; features];
            fc_row::<Portable>(
                &x,
                offset,
                &w,
                b,
                FcMultipliers::PerChannel(&m),
                requant,
                &mut got,
            );
            assert_eq!(got, want, "per-channel, case {case}");
            let one = vec![m[0]; features];
            reference(&x, offset, &w, b, &one, requant, &mut want);
            fc_row::<Portable>(
                &x,
                offset,
                &w,
                b,
                FcMultipliers::One(m[0]),
                requant,
                &mut got,
            );
            assert_eq!(got, want, "per-tensor, case {case}");
        }
    }
}
