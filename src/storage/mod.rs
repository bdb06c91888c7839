//! Storage: the fixed arena, carved into aligned blocks.
//!
//! # Design
//!
//! The firmware gives the NPU driver one region of memory; [`ArenaStorage`] plans byte ranges
//! ("blocks") inside it and never touches the bytes themselves (they belong to the NPU: see
//! [`hal`](crate::hal)). It keeps only the blocks in use, sorted by offset; the free space is
//! the gaps between them. Freeing a block therefore coalesces it with its free neighbours by
//! construction, and the bookkeeping needs one table of fixed capacity `N` (the number of blocks
//! that can be live at once) and no heap.
//!
//! Allocation is best fit: the smallest gap that holds the request, lowest offset on ties. Every
//! size is rounded up to the alignment (and a zero-byte request takes one alignment unit so that
//! live blocks never share an address), and the arena is aligned, so every block is aligned.
//!
//! ```
//! use npu_compute::storage::ArenaStorage;
//! let mut arena = ArenaStorage::<8>::new(1024, 16).unwrap();
//! let a = arena.alloc(100).unwrap(); // rounded to 112
//! let b = arena.alloc(16).unwrap();
//! assert_eq!((a.offset, a.len, b.offset), (0, 112, 112));
//! arena.dealloc(a).unwrap();
//! assert_eq!(arena.largest_free(), 1024 - 128);
//! ```

/// A byte range of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Block {
    /// Offset from the start of the arena.
    pub offset: u32,
    /// Length in bytes (a multiple of the alignment).
    pub len: u32,
}

impl Block {
    /// One past the last byte.
    pub const fn end(&self) -> u32 {
        self.offset + self.len
    }
}

/// Why the arena refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StorageError {
    /// No gap holds the request.
    OutOfMemory {
        /// Bytes requested, rounded up to the alignment.
        requested: u32,
        /// Free bytes in all gaps.
        free: u32,
        /// The largest gap.
        largest_free: u32,
    },
    /// The block table is full (`N` blocks live).
    TooManyBlocks {
        /// `N`.
        limit: u32,
    },
    /// `dealloc` was given a block this arena did not hand out.
    UnknownBlock(Block),
    /// The alignment is not a power of two, or the arena size is not a multiple of it.
    BadGeometry {
        /// Arena size.
        size: u32,
        /// Alignment.
        alignment: u32,
    },
}

impl core::fmt::Display for StorageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            StorageError::OutOfMemory {
                requested,
                free,
                largest_free,
            } => write!(
                f,
                "no gap holds {requested} bytes: {free} bytes free, the largest gap {largest_free}"
            ),
            StorageError::TooManyBlocks { limit } => {
                write!(f, "the block table is full ({limit} blocks live)")
            }
            StorageError::UnknownBlock(b) => write!(
                f,
                "bytes {}..{} were not handed out by this arena",
                b.offset,
                u64::from(b.offset) + u64::from(b.len)
            ),
            StorageError::BadGeometry { size, alignment } => write!(
                f,
                "an arena of {size} bytes cannot be aligned to {alignment}: the alignment must be \
                 a power of two that divides the size"
            ),
        }
    }
}

impl core::error::Error for StorageError {}

/// Offset planner over a fixed arena of `size` bytes, with at most `N` live blocks.
#[derive(Clone, Debug)]
pub struct ArenaStorage<const N: usize> {
    size: u32,
    alignment: u32,
    /// Live blocks, sorted by offset, never overlapping.
    used: heapless::Vec<Block, N>,
    used_bytes: u32,
}

impl<const N: usize> ArenaStorage<N> {
    /// An empty arena of `size` bytes whose blocks are aligned to `alignment` (a power of two).
    /// A size that is not a multiple of the alignment is rounded down.
    pub fn new(size: u32, alignment: u32) -> Result<Self, StorageError> {
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(StorageError::BadGeometry { size, alignment });
        }
        Ok(ArenaStorage {
            size: size & !(alignment - 1),
            alignment,
            used: heapless::Vec::new(),
            used_bytes: 0,
        })
    }

    /// An arena of no bytes (every allocation fails): a placeholder until the real one is
    /// known, as in [`NpuServer::unset`](crate::server::NpuServer::unset).
    pub const fn empty() -> Self {
        ArenaStorage {
            size: 0,
            alignment: 1,
            used: heapless::Vec::new(),
            used_bytes: 0,
        }
    }

    /// Arena size in bytes.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Alignment of every block.
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// Bytes a request of `bytes` occupies: rounded up to the alignment, at least one unit.
    /// `None` if that overflows.
    pub fn rounded(&self, bytes: u32) -> Option<u32> {
        let mask = self.alignment - 1;
        Some(bytes.max(1).checked_add(mask)? & !mask)
    }

    /// Bytes in live blocks.
    pub fn used_bytes(&self) -> u32 {
        self.used_bytes
    }

    /// Bytes not in any live block.
    pub fn free_bytes(&self) -> u32 {
        self.size - self.used_bytes
    }

    /// Number of live blocks.
    pub fn blocks(&self) -> usize {
        self.used.len()
    }

    /// Gaps between live blocks as `(index to insert at, gap)`, in offset order.
    fn gaps(&self) -> impl Iterator<Item = (usize, Block)> + '_ {
        let ends = core::iter::once(0).chain(self.used.iter().map(Block::end));
        let starts = self
            .used
            .iter()
            .map(|b| b.offset)
            .chain(core::iter::once(self.size));
        ends.zip(starts).enumerate().map(|(i, (start, end))| {
            (
                i,
                Block {
                    offset: start,
                    len: end - start,
                },
            )
        })
    }

    /// The largest contiguous free range.
    pub fn largest_free(&self) -> u32 {
        self.largest_free_in(0..self.size)
    }

    /// The largest contiguous free range within `range`.
    pub fn largest_free_in(&self, range: core::ops::Range<u32>) -> u32 {
        self.gaps_in(range).map(|(_, g)| g.len).max().unwrap_or(0)
    }

    /// [`gaps`](Self::gaps) cut to `range` (a gap outside it has no bytes).
    fn gaps_in(&self, range: core::ops::Range<u32>) -> impl Iterator<Item = (usize, Block)> + '_ {
        self.gaps().map(move |(i, g)| {
            let start = g.offset.max(range.start);
            let len = g.end().min(range.end).saturating_sub(start);
            (i, Block { offset: start, len })
        })
    }

    /// Reserve a block of at least `bytes` (rounded up to the alignment).
    pub fn alloc(&mut self, bytes: u32) -> Result<Block, StorageError> {
        self.alloc_in(0..self.size, bytes)
    }

    /// [`alloc`](Self::alloc) within `range` of the arena only (its ends aligned): the best
    /// fit among the gaps' parts inside it. An arena split in ranges (the fast memory, then a
    /// slower tier behind it) keeps each range's blocks apart this way; the errors' figures
    /// are those of the range.
    pub fn alloc_in(
        &mut self,
        range: core::ops::Range<u32>,
        bytes: u32,
    ) -> Result<Block, StorageError> {
        let oom = |s: &Self, requested| {
            let gaps = || s.gaps_in(range.clone()).map(|(_, g)| g.len);
            StorageError::OutOfMemory {
                requested,
                free: gaps().sum(),
                largest_free: gaps().max().unwrap_or(0),
            }
        };
        let len = self.rounded(bytes).ok_or_else(|| oom(self, bytes))?;
        let best = self
            .gaps_in(range.clone())
            .filter(|(_, g)| g.len >= len)
            .min_by_key(|(_, g)| g.len)
            .ok_or_else(|| oom(self, len))?;
        if self.used.is_full() {
            return Err(StorageError::TooManyBlocks { limit: N as u32 });
        }
        let block = Block {
            offset: best.1.offset,
            len,
        };
        // Cannot fail: capacity was checked above and the index is at most len().
        self.used
            .insert(best.0, block)
            .map_err(|_| StorageError::TooManyBlocks { limit: N as u32 })?;
        self.used_bytes += len;
        Ok(block)
    }

    /// Return a block; its space merges with the free gaps around it.
    pub fn dealloc(&mut self, block: Block) -> Result<(), StorageError> {
        let index = self
            .used
            .binary_search_by_key(&block.offset, |b| b.offset)
            .ok()
            .filter(|&i| self.used[i] == block)
            .ok_or(StorageError::UnknownBlock(block))?;
        self.used.remove(index);
        self.used_bytes -= block.len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_fit_and_coalescing() {
        let mut a = ArenaStorage::<8>::new(256, 16).unwrap();
        let b0 = a.alloc(32).unwrap();
        let b1 = a.alloc(64).unwrap();
        let b2 = a.alloc(32).unwrap();
        let b3 = a.alloc(16).unwrap();
        assert_eq!(
            [b0.offset, b1.offset, b2.offset, b3.offset],
            [0, 32, 96, 128]
        );
        a.dealloc(b1).unwrap(); // gap of 64 at 32
        a.dealloc(b3).unwrap(); // tail gap 144..256 = 112
                                // 48 fits both gaps; the 64-byte gap is the best fit.
        assert_eq!(a.alloc(48).unwrap().offset, 32);
        a.dealloc(Block {
            offset: 32,
            len: 48,
        })
        .unwrap();
        a.dealloc(b2).unwrap(); // merges 32..96, 96..128 and the tail
        assert_eq!(a.largest_free(), 256 - 32);
        assert_eq!(a.free_bytes(), 256 - 32);
    }

    #[test]
    fn errors_name_the_limit() {
        let mut a = ArenaStorage::<2>::new(64, 16).unwrap();
        assert_eq!(
            a.alloc(80),
            Err(StorageError::OutOfMemory {
                requested: 80,
                free: 64,
                largest_free: 64
            })
        );
        a.alloc(1).unwrap();
        a.alloc(1).unwrap();
        assert_eq!(a.alloc(1), Err(StorageError::TooManyBlocks { limit: 2 }));
        assert_eq!(
            a.dealloc(Block { offset: 0, len: 32 }),
            Err(StorageError::UnknownBlock(Block { offset: 0, len: 32 }))
        );
        assert!(ArenaStorage::<2>::new(64, 12).is_err());
        assert!(a.alloc(u32::MAX).is_err());
    }

    #[test]
    fn a_range_keeps_its_blocks_and_its_figures() {
        // A fast range of 64 bytes, a slow one of 192 behind it.
        let mut a = ArenaStorage::<8>::new(256, 16).unwrap();
        let slow = a.alloc_in(64..256, 32).unwrap();
        assert_eq!(slow.offset, 64);
        let fast = a.alloc_in(0..64, 48).unwrap();
        assert_eq!(fast.offset, 0);
        // 32 bytes fit the slow range's gaps but not the 16 left of the fast one.
        assert_eq!(
            a.alloc_in(0..64, 32),
            Err(StorageError::OutOfMemory {
                requested: 32,
                free: 16,
                largest_free: 16
            })
        );
        assert_eq!(a.alloc_in(64..256, 160).unwrap().offset, 96);
        // The whole arena's alloc is the range of all of it.
        assert_eq!(a.alloc(16).unwrap().offset, 48);
    }

    #[test]
    fn zero_bytes_take_one_unit() {
        let mut a = ArenaStorage::<4>::new(64, 16).unwrap();
        let x = a.alloc(0).unwrap();
        let y = a.alloc(0).unwrap();
        assert_ne!(x.offset, y.offset);
        assert_eq!(x.len, 16);
    }
}
