//! The tests' seeded generator: xorshift32 (Marsaglia's 13, 17, 5), so that every run draws
//! the same random cases.

/// A xorshift32 generator; its state is the last number drawn (never 0).
pub(crate) struct XorShift(pub(crate) u32);

impl XorShift {
    /// The next number.
    pub(crate) fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}
