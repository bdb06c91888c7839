//! Tiled execution across layers: a chain of convolutions and pools run in stripes of rows.
//!
//! # Design
//!
//! Whole-tensor planning cannot go below the largest sum of tensors live at one step. Vela's
//! cascading and patch-based inference go below it by running several layers on a horizontal
//! stripe at a time, so that only a band of each intermediate tensor exists. This module does
//! the same for a [`Tile`]: consecutive steps, each a CONV_2D, DEPTHWISE_CONV_2D or pool whose
//! input is the previous step's output and read by nothing else.
//!
//! - The chain's last output is cut into stripes of `rows` rows. For each stripe, the rows
//!   every step must produce are worked out backwards with the kernels' row bands
//!   (`row_band`): a convolution needs the rows under its window, halo included.
//! - Each step then runs on its band: its input is a band of the previous step's band buffer
//!   (or of the chain's input tensor, which stays whole), and its output goes to its own band
//!   buffer (or straight into its rows of the chain's output tensor). The halo rows are
//!   recomputed by the next stripe rather than kept, so band buffers are plain contiguous
//!   tensors that need no wrap-around addressing.
//! - For the arena plan, an intermediate tensor becomes its band buffer (the most rows any
//!   stripe needs), the chain's input lives until the chain's last step and its output from
//!   the chain's first step.
//!
//! NHWC rows are contiguous only for one batch, and a band is placed at a row offset, so every
//! tensor of a chain must have one batch and rows of a whole number of alignment units.

use core::ops::Range;

use crate::ops::Op;
use npu_kernels::int8::Nhwc;

/// Most steps in one tiled chain.
pub const MAX_CHAIN: usize = 32;

/// A chain of steps `first..=last` run in stripes of `rows` output rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Tile {
    /// First step of the chain.
    pub first: u16,
    /// Last step of the chain.
    pub last: u16,
    /// Rows of the chain's output per stripe.
    pub rows: u16,
    /// Whether the chain's output shares memory with its input (when nothing reads the input
    /// after the chain): stripes overwrite the input rows no later stripe reads.
    pub in_place: bool,
}

/// The input and output shapes of a row-local operator, or `None` for any other.
pub(crate) fn shapes(op: &Op) -> Option<(Nhwc, Nhwc)> {
    op.rows()
}

/// Bytes of one row of an int8 NHWC tensor.
pub(crate) fn row_bytes(t: Nhwc) -> u32 {
    t.width.saturating_mul(t.channels)
}

/// The operator computing output rows `out_rows` of `op` from a band of its input, and that
/// band's rows. The band op's shape describes the band's input (its window keeps the layer's
/// filter size and strides; the band's own padding is in the params).
pub(crate) fn band_op(op: &Op, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
    op.band(out_rows)
}

/// The output rows of each stripe of a chain whose last output has `height` rows.
pub(crate) fn stripes(height: u32, rows: u16) -> impl Iterator<Item = Range<u32>> {
    let rows = u32::from(rows.max(1));
    (0..height.div_ceil(rows)).map(move |s| s * rows..((s + 1) * rows).min(height))
}

/// The input rows each op of a chain reads for one stripe, in chain order; `out_rows` are the
/// last op's output rows. Op `k` then produces rows `rows[k + 1]` (`out_rows` for the last),
/// and [`band_op`] gives the operator that does it. `op(k)` is the chain's `k`-th op of `len`.
pub(crate) fn stripe_rows<'o>(
    len: usize,
    op: impl Fn(usize) -> Option<&'o Op>,
    out_rows: Range<u32>,
) -> Option<heapless::Vec<Range<u32>, MAX_CHAIN>> {
    let mut rows: heapless::Vec<Range<u32>, MAX_CHAIN> = heapless::Vec::new();
    let mut out = out_rows;
    for k in (0..len).rev() {
        let (_, input_rows) = band_op(op(k)?, out)?;
        out = input_rows.clone();
        rows.push(input_rows).ok()?;
    }
    rows.reverse();
    Some(rows)
}

/// What tiling a chain in stripes costs.
pub(crate) struct ChainCost {
    /// The most rows each intermediate tensor's band holds (one per op but the last, whose
    /// output is written in place in the chain's output).
    pub band_rows: heapless::Vec<u32, MAX_CHAIN>,
    /// Multiply-accumulates computed more than once, because stripes overlap (halos).
    pub extra_macs: u64,
    /// How far (in bytes) the chain's output may start below its input when the two share
    /// memory: stripe `s` writes output rows that end at most this far past the first input
    /// byte a later stripe still reads. Placing the input this far above the output lets the
    /// output overwrite only input rows no later stripe needs.
    pub input_lag: u32,
}

/// The cost of tiling a chain of `len` ops in stripes of `rows` rows, or `None` if some op
/// cannot be cut.
pub(crate) fn chain_cost<'o>(
    len: usize,
    op: impl Fn(usize) -> Option<&'o Op> + Copy,
    rows: u16,
) -> Option<ChainCost> {
    let (in_shape, out_shape) = (shapes(op(0)?)?.0, shapes(op(len.checked_sub(1)?)?)?.1);
    let height = out_shape.height;
    let mut input_lag = 0u32;
    let mut written_end: Option<u32> = None;
    let mut band_rows: heapless::Vec<u32, MAX_CHAIN> = heapless::Vec::new();
    let _ = band_rows.resize(len.saturating_sub(1), 0);
    let mut computed = 0u64;
    for out_rows in stripes(height, rows) {
        let input_rows = stripe_rows(len, op, out_rows.clone())?;
        if let Some(end) = written_end {
            let first_read = input_rows.first()?.start.checked_mul(row_bytes(in_shape))?;
            input_lag = input_lag.max(end.saturating_sub(first_read));
        }
        written_end = Some(out_rows.end.checked_mul(row_bytes(out_shape))?);
        for k in 0..len {
            let produced = input_rows.get(k + 1).cloned().unwrap_or(out_rows.clone());
            computed += band_op(op(k)?, produced)?.0.macs();
            if let Some(r) = band_rows.get_mut(k) {
                let need = input_rows[k + 1].end - input_rows[k + 1].start;
                *r = (*r).max(need);
            }
        }
    }
    let whole: u64 = (0..len).filter_map(op).map(Op::macs).sum();
    Some(ChainCost {
        band_rows,
        extra_macs: computed.saturating_sub(whole),
        input_lag,
    })
}
