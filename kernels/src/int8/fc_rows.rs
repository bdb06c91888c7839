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
