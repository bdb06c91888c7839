//! The tuning cache: one fixed table of choices per device.

use super::candidate::Candidate;
use super::key::TuneKey;
use heapless::index_map::FnvIndexMap;

/// The default capacity of a [`TuneCache`]: 64 keys cover every product model of the
/// benchmarks (the largest has a few dozen distinct layer shapes) in about 2.3 KiB.
pub const DEFAULT_TUNE_ENTRIES: usize = 64;

/// A tuned choice for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Choice {
    /// The winner: the fastest candidate, the earliest of equal ones.
    pub candidate: Candidate,
    /// The winner's best sample, in HAL cycles (saturated to `u32`).
    pub cycles: u32,
    /// `Npu(Auto)`'s best sample, to report the gain (saturated to `u32`).
    pub auto_cycles: u32,
    /// Candidates that were timed (before the budget or an error stopped the search).
    pub timed: u8,
    /// Samples per candidate.
    pub samples: u8,
    /// Whether the candidates' outputs were checked against `Auto`'s while tuning.
    pub verified: bool,
    /// Whether the choice comes from a measurement (tuned here or imported). `false` marks a
    /// tuning that failed: kept so it is not retried, never exported.
    pub measured: bool,
}

impl Choice {
    /// The choice stored when tuning a key failed: `Auto`, unmeasured.
    pub const FAILED: Choice = Choice {
        candidate: Candidate::Npu(crate::hal::Variant::Auto),
        cycles: 0,
        auto_cycles: 0,
        timed: 0,
        samples: 0,
        verified: false,
        measured: false,
    };
}

/// A cached key's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Entry {
    /// Claimed and being measured.
    InProgress,
    /// Tuned.
    Done(Choice),
}

/// What [`TuneCache::lookup`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Lookup {
    /// The key is tuned: run this.
    Hit(Choice),
    /// Someone is tuning the key: run `Auto`, unmeasured.
    InProgress,
    /// The key is unknown: claim it to tune it.
    Miss,
}

/// Why the cache refused a claim or a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CacheError {
    /// Every slot holds another key (the `N` const generic of [`TuneCache`]).
    Full {
        /// The cache's capacity.
        capacity: u16,
    },
    /// The key is already claimed and being tuned.
    InProgress,
    /// The key is already tuned.
    Done,
}

impl core::fmt::Display for CacheError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            CacheError::Full { capacity } => write!(
                f,
                "the tuning cache is full ({capacity} keys, NpuServer's TUNE); raise TUNE"
            ),
            CacheError::InProgress => f.write_str("the key is being tuned already"),
            CacheError::Done => f.write_str("the key is tuned already"),
        }
    }
}

impl core::error::Error for CacheError {}

/// A fixed-capacity map from [`TuneKey`] to [`Entry`] (see the [module docs](crate::tune)).
///
/// `N` must be a power of two greater than 1 (the index map's requirement; another value fails
/// to compile in [`new`](Self::new)). Each slot costs about 36 bytes.
#[derive(Clone)]
pub struct TuneCache<const N: usize = DEFAULT_TUNE_ENTRIES> {
    map: FnvIndexMap<TuneKey, Entry, N>,
}

impl<const N: usize> Default for TuneCache<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for TuneCache<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries(self.map.iter()).finish()
    }
}

impl<const N: usize> TuneCache<N> {
    /// An empty cache.
    pub const fn new() -> Self {
        TuneCache {
            map: FnvIndexMap::new(),
        }
    }

    /// The capacity `N`, saturated to `u16` (the width of a table's entry count).
    pub const fn capacity() -> u16 {
        if N > u16::MAX as usize {
            u16::MAX
        } else {
            N as u16
        }
    }

    /// The state of `key`.
    pub fn lookup(&self, key: TuneKey) -> Lookup {
        match self.map.get(&key) {
            Some(Entry::Done(c)) => Lookup::Hit(*c),
            Some(Entry::InProgress) => Lookup::InProgress,
            None => Lookup::Miss,
        }
    }

    /// Marks a missing key [`Entry::InProgress`]: the caller now owns its tuning and must
    /// [`finish`](Self::finish) it (with [`Choice::FAILED`] if tuning fails).
    ///
    /// Errors: [`CacheError::InProgress`] or [`CacheError::Done`] if the key is present, so
    /// only one caller ever tunes a key; [`CacheError::Full`] when every slot holds another
    /// key.
    pub fn claim(&mut self, key: TuneKey) -> Result<(), CacheError> {
        match self.map.get(&key) {
            Some(Entry::InProgress) => Err(CacheError::InProgress),
            Some(Entry::Done(_)) => Err(CacheError::Done),
            None => self
                .map
                .insert(key, Entry::InProgress)
                .map(|_| ())
                .map_err(|_| CacheError::Full {
                    capacity: Self::capacity(),
                }),
        }
    }

    /// Stores `choice` for `key`, replacing a claim or an earlier choice.
    ///
    /// Errors: [`CacheError::Full`] only if the key was never claimed and every slot holds
    /// another key.
    pub fn finish(&mut self, key: TuneKey, choice: Choice) -> Result<(), CacheError> {
        self.map
            .insert(key, Entry::Done(choice))
            .map(|_| ())
            .map_err(|_| CacheError::Full {
                capacity: Self::capacity(),
            })
    }

    /// Keys held, claimed or tuned.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every tuned key and its choice, in insertion order.
    pub fn iter_done(&self) -> impl Iterator<Item = (TuneKey, Choice)> + '_ {
        self.map.iter().filter_map(|(k, e)| match e {
            Entry::Done(c) => Some((*k, *c)),
            Entry::InProgress => None,
        })
    }

    /// Forgets every key, claimed or tuned.
    pub fn clear(&mut self) {
        self.map.clear();
    }

    /// The raw entry of `key`, for the table import's checks.
    pub(super) fn get(&self, key: &TuneKey) -> Option<&Entry> {
        self.map.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::Variant;

    fn key(i: u8) -> TuneKey {
        let mut k = [0; 16];
        k[15] = i;
        TuneKey(k)
    }

    fn won(cycles: u32) -> Choice {
        Choice {
            candidate: Candidate::Npu(Variant::Block { h: 8, w: 8 }),
            cycles,
            auto_cycles: cycles + 100,
            timed: 6,
            samples: 3,
            verified: true,
            measured: true,
        }
    }

    #[test]
    fn a_key_is_claimed_once_then_hit() {
        let mut c = TuneCache::<4>::new();
        assert_eq!(c.lookup(key(1)), Lookup::Miss);
        assert_eq!(c.claim(key(1)), Ok(()));
        // A second caller sees the claim and cannot take it.
        assert_eq!(c.lookup(key(1)), Lookup::InProgress);
        assert_eq!(c.claim(key(1)), Err(CacheError::InProgress));
        assert_eq!(c.iter_done().count(), 0);
        assert_eq!(c.len(), 1);
        c.finish(key(1), won(500)).unwrap();
        assert_eq!(c.lookup(key(1)), Lookup::Hit(won(500)));
        assert_eq!(c.claim(key(1)), Err(CacheError::Done));
        assert_eq!(c.len(), 1);
        let mut done = c.iter_done();
        assert_eq!(done.next(), Some((key(1), won(500))));
        assert_eq!(done.next(), None);
    }

    #[test]
    fn a_full_cache_names_its_capacity() {
        let mut c = TuneCache::<2>::new();
        assert_eq!(TuneCache::<2>::capacity(), 2);
        c.claim(key(1)).unwrap();
        c.claim(key(2)).unwrap();
        assert_eq!(c.claim(key(3)), Err(CacheError::Full { capacity: 2 }));
        assert_eq!(
            c.finish(key(3), won(1)),
            Err(CacheError::Full { capacity: 2 })
        );
        // Finishing a held key needs no new slot.
        assert_eq!(c.finish(key(2), won(1)), Ok(()));
        assert_eq!(c.lookup(key(3)), Lookup::Miss);
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_failed_tuning_is_kept_unmeasured() {
        let mut c = TuneCache::<4>::default();
        c.claim(key(7)).unwrap();
        c.finish(key(7), Choice::FAILED).unwrap();
        let Lookup::Hit(choice) = c.lookup(key(7)) else {
            panic!("not stored")
        };
        assert_eq!(choice.candidate, Candidate::Npu(Variant::Auto));
        assert!(!choice.measured);
        // Not retried.
        assert_eq!(c.claim(key(7)), Err(CacheError::Done));
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn default_capacity() {
        assert_eq!(TuneCache::<DEFAULT_TUNE_ENTRIES>::capacity(), 64);
        let c: TuneCache = TuneCache::new();
        assert_eq!(c.len(), 0);
    }
}
