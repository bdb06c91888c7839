//! [`OpSet`]: which (operator family, element type) pairs a driver runs, as a bitset.

use super::{DType, Op, OpKind};

/// A set of (operator family, dtype) pairs, as a bitset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet(pub u64);

impl OpSet {
    /// No operator.
    pub const EMPTY: OpSet = OpSet(0);

    /// The bit of one (family, dtype) pair.
    pub(super) const fn bit(op: OpKind, dtype: DType) -> u64 {
        let d = match dtype {
            DType::F32 => 0,
            DType::I8 => 1,
        };
        1 << (op as u32 * 2 + d)
    }

    /// Every operator family, in every dtype.
    pub const fn all() -> OpSet {
        let mut bits = 0;
        let mut i = 0;
        while i < OpKind::ALL.len() {
            bits |= Self::bit(OpKind::ALL[i], DType::F32) | Self::bit(OpKind::ALL[i], DType::I8);
            i += 1;
        }
        OpSet(bits)
    }

    /// This set plus one pair.
    pub const fn with(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 | Self::bit(op, dtype))
    }

    /// This set less one pair.
    pub const fn without(self, op: OpKind, dtype: DType) -> OpSet {
        OpSet(self.0 & !Self::bit(op, dtype))
    }

    /// Whether the pair is in the set.
    pub const fn contains(self, op: OpKind, dtype: DType) -> bool {
        self.0 & Self::bit(op, dtype) != 0
    }

    /// Whether `op`'s (family, dtype) pair is in the set: what a dispatch asks of every job.
    #[inline]
    pub fn runs(self, op: &Op) -> bool {
        // One match from variant to bit rather than `contains(op.kind(), op.dtype())`, whose
        // two matches cost a dozen instructions more per job on a Cortex-M4.
        self.0 & op.set_bit() != 0
    }
}
