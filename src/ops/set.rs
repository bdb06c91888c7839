//! [`OpSet`]: which (operator family, element type) pairs a driver runs, as a bitset.

use super::{DType, Op, OpKind};

/// Words of an [`OpSet`]: room for 128 operator families in each of the four dtypes.
const WORDS: usize = 16;

// Every family's bits fit, and `WORDS` is a power of two (`OpSet::has` masks with it).
const _: () =
    assert!(OpKind::ALL.len() * DType::ALL.len() <= WORDS * 32 && WORDS.is_power_of_two());

/// A set of (operator family, dtype) pairs, as a bitset: bit `4 × family + dtype`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpSet([u32; WORDS]);

impl OpSet {
    /// The set's bits, word by word (bit `kind × 4 + dtype`), to fingerprint it.
    pub const fn words(&self) -> [u32; WORDS] {
        self.0
    }

    /// No operator.
    pub const EMPTY: OpSet = OpSet([0; WORDS]);

    /// The bit of one (family, dtype) pair.
    pub(super) const fn bit(op: OpKind, dtype: DType) -> u16 {
        op as u16 * 4 + dtype as u16
    }

    /// Every operator family, in every dtype, but the stateful ones ([`OpKind::is_stateful`]),
    /// which no NPU job can run.
    pub const fn all() -> OpSet {
        let mut set = Self::EMPTY;
        let mut i = 0;
        while i < OpKind::ALL.len() {
            let mut d = 0;
            while d < DType::ALL.len() && !OpKind::ALL[i].is_stateful() {
                set = set.with(OpKind::ALL[i], DType::ALL[d]);
                d += 1;
            }
            i += 1;
        }
        set
    }

    /// This set plus one pair.
    pub const fn with(mut self, op: OpKind, dtype: DType) -> OpSet {
        let b = Self::bit(op, dtype) as usize;
        self.0[b / 32] |= 1 << (b % 32);
        self
    }

    /// This set less one pair.
    pub const fn without(mut self, op: OpKind, dtype: DType) -> OpSet {
        let b = Self::bit(op, dtype) as usize;
        self.0[b / 32] &= !(1 << (b % 32));
        self
    }

    /// Whether the pair is in the set.
    pub const fn contains(&self, op: OpKind, dtype: DType) -> bool {
        self.has(Self::bit(op, dtype))
    }

    /// Whether `op`'s (family, dtype) pair is in the set: what a dispatch asks of every job.
    #[inline]
    pub fn runs(&self, op: &Op) -> bool {
        // One match from variant to bit rather than `contains(op.kind(), op.dtype())`, whose
        // two matches cost a dozen instructions more per job on a Cortex-M4.
        self.has(op.set_bit())
    }

    /// Whether bit `b` is set.
    #[inline]
    const fn has(&self, b: u16) -> bool {
        // Masked rather than bounds-checked: every bit of a family in `OpKind::ALL` is below
        // `WORDS × 32` (checked at compile time below), and the mask spares the per-job check.
        let b = b as usize;
        self.0[(b / 32) & (WORDS - 1)] & (1 << (b % 32)) != 0
    }

    /// The set as little-endian bytes, for fingerprints that must not change with the host.
    pub fn to_le_bytes(self) -> [u8; WORDS * 4] {
        let mut out = [0; WORDS * 4];
        for (chunk, w) in out.chunks_exact_mut(4).zip(self.0) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        out
    }
}
