//! How an operator is cut into bands for several execution units: by rows of its output (a
//! convolution, depthwise convolution or pool, whose band reads the input rows under its
//! window), or by ranges of elements (an elementwise operator whose operands all have its
//! output's shape, whose band reads the same range of each).

// Without the planner (`static-schedule`) only the per-job path's band views cut operators.
#![cfg_attr(not(feature = "static-schedule"), allow(dead_code))]

use core::ops::Range;

use super::tile;
use crate::ops::Op;

/// The way an operator can be cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// Bands of output rows (units: rows); the band reads a band of input rows of its first
    /// operand and every other operand whole.
    Rows {
        /// Bytes of one row of the first input.
        in_row: u32,
        /// Bytes of one row of the output.
        out_row: u32,
        /// Rows of the output.
        rows: u32,
    },
    /// Ranges of elements (units: elements); the band reads the same range of every operand.
    Elements {
        /// Bytes of one element.
        bytes: u32,
        /// Elements of the output.
        elements: u32,
    },
}

impl Cut {
    /// How `op` can be cut, if at all (one batch for rows; operands of the output's size
    /// for elements).
    pub(super) fn of(op: &Op) -> Option<Cut> {
        if let Some((i, o)) = tile::shapes(op) {
            return (i.batches == 1 && o.batches == 1).then_some(Cut::Rows {
                in_row: tile::row_bytes(i),
                out_row: tile::row_bytes(o),
                rows: o.height,
            });
        }
        let bytes = op.prefix(1)?.operands()?.output;
        let operands = op.operands()?;
        let same = operands.inputs.iter().all(|&b| b == operands.output);
        (same && bytes > 0).then(|| Cut::Elements {
            bytes,
            elements: operands.output / bytes,
        })
    }

    /// Units (rows or elements) of the output.
    pub(super) fn len(&self) -> u32 {
        match *self {
            Cut::Rows { rows, .. } => rows,
            Cut::Elements { elements, .. } => elements,
        }
    }

    /// The operator computing output units `out`, and the units of the sliced inputs it reads.
    pub(super) fn band(&self, op: &Op, out: Range<u32>) -> Option<(Op, Range<u32>)> {
        match self {
            Cut::Rows { .. } => tile::band_op(op, out),
            Cut::Elements { .. } => Some((op.prefix(out.end.checked_sub(out.start)?)?, out)),
        }
    }

    /// Whether operand `k` is sliced (else the band reads it whole).
    pub(super) fn slices(&self, k: usize) -> bool {
        match self {
            Cut::Rows { .. } => k == 0,
            Cut::Elements { .. } => true,
        }
    }

    /// `(offset, bytes)` within a sliced input of input units `units`.
    pub(super) fn input_bytes(&self, units: &Range<u32>) -> (u32, u32) {
        let unit = match *self {
            Cut::Rows { in_row, .. } => in_row,
            Cut::Elements { bytes, .. } => bytes,
        };
        (units.start * unit, (units.end - units.start) * unit)
    }

    /// `(offset, bytes)` within the output of output units `units`.
    pub(super) fn output_bytes(&self, units: &Range<u32>) -> (u32, u32) {
        let unit = match *self {
            Cut::Rows { out_row, .. } => out_row,
            Cut::Elements { bytes, .. } => bytes,
        };
        (units.start * unit, (units.end - units.start) * unit)
    }
}
