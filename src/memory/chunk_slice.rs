//! [`ChunkSliceMemory`]: Burn-Compute's chunk/slice strategy over the arena (see the
//! [module documentation](super) for the algorithm).

use super::{Access, DeallocStrategy, MemoryBinding, MemoryConfig, MemoryManagement, MemoryStats};
use crate::error::{Capacity, Error};
use crate::hal::Fence;
use crate::storage::{ArenaStorage, Block};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// No tensor holds it.
    Free,
    /// A tensor holds the whole chunk.
    Whole { bytes: u32 },
    /// A tensor holds (or, when `held` is false, held until the next reserve) the first
    /// `bytes` of the chunk.
    Slice { bytes: u32, held: bool },
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    block: Block,
    /// For a placed tensor, the pool chunk it lies in: its block is a range of the pool's, not
    /// an arena block of its own.
    parent: Option<u16>,
    state: ChunkState,
    /// Bumped at every binding so a stale [`MemoryBinding`] is detected.
    generation: u32,
    /// Tensors were placed in it since it was bound: it is a pool, whose bytes its placements'
    /// jobs touch too (see [`ChunkSliceMemory::family_access`]). Cleared when it is released.
    pool: bool,
    /// A pool whose jobs, recorded after its look-up, its placements must still take in.
    pushing: bool,
    access: Access,
}

impl Chunk {
    /// Whether `b` names this chunk as it is bound now.
    fn is_bound_to(&self, b: MemoryBinding) -> bool {
        self.generation == b.generation && self.state != ChunkState::Free
    }

    /// The range its tensor holds: the start of the chunk, the requested length.
    fn bound_block(&self) -> Block {
        let len = match self.state {
            ChunkState::Whole { bytes } | ChunkState::Slice { bytes, .. } => bytes,
            ChunkState::Free => 0,
        };
        Block {
            offset: self.block.offset,
            len,
        }
    }
}

/// Burn-Compute's chunk/slice memory manager over a fixed arena, with at most `CHUNKS` chunks.
#[derive(Debug)]
pub struct ChunkSliceMemory<const CHUNKS: usize = 64> {
    arena: ArenaStorage<CHUNKS>,
    /// Where the arena's fast memory ends and the slow tier behind it starts (the arena's
    /// size without a tier): chunks of one never serve requests for the other.
    fast_end: u32,
    chunks: [Option<Chunk>; CHUNKS],
    config: MemoryConfig,
    reserves_since_dealloc: u32,
    next_generation: u32,
    /// Pools holding placements (or their released ones): chunks whose records are joined.
    pools: u16,
    /// Pools whose records their placements take in at every look-up (see
    /// [`join_placements`](Self::join_placements)).
    pushing: u16,
    stats: MemoryStats,
}

impl<const CHUNKS: usize> ChunkSliceMemory<CHUNKS> {
    /// A manager over an arena of `size` bytes aligned to `alignment`.
    pub fn new(size: u32, alignment: u32, config: MemoryConfig) -> Result<Self, Error> {
        let mut memory = Self::empty(config);
        memory.reset(size, alignment, config)?;
        Ok(memory)
    }

    /// A manager over an arena of no bytes (every reserve fails), until [`reset`](Self::reset)
    /// gives it one: the table of `CHUNKS` chunks made where it lies, with no arena to check.
    pub const fn empty(config: MemoryConfig) -> Self {
        ChunkSliceMemory {
            arena: ArenaStorage::empty(),
            fast_end: 0,
            chunks: [None; CHUNKS],
            config,
            reserves_since_dealloc: 0,
            next_generation: 0,
            pools: 0,
            pushing: 0,
            stats: MemoryStats {
                in_use: 0,
                in_use_peak: 0,
                reserved: 0,
                reserved_peak: 0,
                allocations: 0,
                deallocations: 0,
                exact_reuses: 0,
                slice_reuses: 0,
                largest_free: 0,
                chunks: 0,
                chunk_slots_peak: 0,
                placements: 0,
            },
        }
    }

    /// The manager over a new arena of `size` bytes aligned to `alignment`, as
    /// [`new`](Self::new) makes it, in place: every chunk forgotten (a binding to one is then
    /// stale), the figures restarted. Errors: [`Error::Storage`] when `alignment` is not a
    /// power of two (the manager is then left as it was).
    pub fn reset(&mut self, size: u32, alignment: u32, config: MemoryConfig) -> Result<(), Error> {
        self.reset_tiers(size, 0, alignment, config)
    }

    /// A manager over an arena of `fast` bytes with a slow tier of `slow` bytes behind it:
    /// one address range, the tier's blocks from `fast` (rounded down to the alignment) on,
    /// which [`reserve`](MemoryManagement::reserve) never hands out and
    /// [`reserve_slow`](MemoryManagement::reserve_slow) alone does. A server maps those
    /// offsets to the HAL's slow memory.
    ///
    /// ```
    /// use npu_compute::memory::{ChunkSliceMemory, MemoryConfig, MemoryManagement};
    /// let mut m = ChunkSliceMemory::<8>::with_slow_tier(1024, 4096, 16, MemoryConfig::default()).unwrap();
    /// let fast = m.reserve(512).unwrap();
    /// let slow = m.reserve_slow(2048).unwrap();
    /// assert_eq!(m.block(fast).unwrap().offset, 0);
    /// assert_eq!(m.block(slow).unwrap().offset, 1024);
    /// assert!(m.reserve(1024).is_err(), "the fast arena has 512 bytes left");
    /// ```
    ///
    /// Errors: [`Error::Storage`] when `alignment` is not a power of two,
    /// [`Error::SlowTierOutOfMemory`] when the two sizes together pass `u32::MAX`.
    pub fn with_slow_tier(
        fast: u32,
        slow: u32,
        alignment: u32,
        config: MemoryConfig,
    ) -> Result<Self, Error> {
        let mut memory = Self::empty(config);
        memory.reset_tiers(fast, slow, alignment, config)?;
        Ok(memory)
    }

    /// [`reset`](Self::reset) with a slow tier of `slow` bytes, as
    /// [`with_slow_tier`](Self::with_slow_tier) makes it.
    pub fn reset_tiers(
        &mut self,
        fast: u32,
        slow: u32,
        alignment: u32,
        config: MemoryConfig,
    ) -> Result<(), Error> {
        let fast_end = fast & !alignment.wrapping_sub(1);
        let size = fast_end
            .checked_add(slow)
            .ok_or(Error::SlowTierOutOfMemory {
                requested: slow,
                free: u32::MAX - fast_end,
                largest_free: u32::MAX - fast_end,
            })?;
        self.arena = ArenaStorage::new(size, alignment)?;
        self.fast_end = fast_end.min(self.arena.size());
        self.chunks.fill(None);
        self.config = config;
        self.reserves_since_dealloc = 0;
        self.stats = MemoryStats {
            largest_free: self.fast_end,
            ..MemoryStats::default()
        };
        Ok(())
    }

    /// The arena's fast range, or the slow tier's behind it.
    fn range(&self, slow: bool) -> core::ops::Range<u32> {
        if slow {
            self.fast_end..self.arena.size()
        } else {
            0..self.fast_end
        }
    }

    /// The configuration.
    pub fn config(&self) -> MemoryConfig {
        self.config
    }

    /// The arena bookkeeping (read only).
    pub fn arena(&self) -> &ArenaStorage<CHUNKS> {
        &self.arena
    }

    fn bind(&mut self, index: usize, state: ChunkState, requested: u32) -> MemoryBinding {
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let mut fast = false;
        if let Some(c) = self.chunks[index].as_mut() {
            c.state = state;
            c.generation = generation;
            fast = c.block.offset < self.fast_end;
        }
        // The figures are the fast arena's: the slow tier's bytes are the caller's plan.
        if fast {
            self.stats.in_use += requested;
            self.stats.in_use_peak = self.stats.in_use_peak.max(self.stats.in_use);
        }
        MemoryBinding {
            chunk: index as u16,
            generation,
        }
    }

    fn chunk(&self, b: MemoryBinding) -> Result<&Chunk, Error> {
        match self.chunks.get(b.chunk as usize) {
            Some(Some(c)) if c.is_bound_to(b) => Ok(c),
            _ => Err(Error::StaleHandle { index: b.chunk }),
        }
    }

    /// [`chunk`](Self::chunk), mutably. Every job submission calls it for each operand, so it
    /// is one match, not a chain of adapters.
    fn chunk_mut(&mut self, b: MemoryBinding) -> Result<&mut Chunk, Error> {
        match self.chunks.get_mut(b.chunk as usize) {
            Some(Some(c)) if c.is_bound_to(b) => Ok(c),
            _ => Err(Error::StaleHandle { index: b.chunk }),
        }
    }

    /// The chunk bound to `b`, its access record joined with those of the chunks over the same
    /// bytes: a pool's takes in its placements' jobs, and a pool's own jobs reach its
    /// placements' records. Records are kept per chunk, so that tensors placed side by side
    /// stay independent.
    ///
    /// Every job looks its operands' records up, so the usual case costs one comparison: with
    /// no pool holding placements, no chunk has a family. A graph's tensors are placements in
    /// a pool it never touches whole, so its look-ups only check that.
    #[inline(always)]
    fn family_access(&mut self, b: MemoryBinding) -> Result<&mut Chunk, Error> {
        // Pushing pools hold placements.
        if self.pools != 0 {
            if self.pushing != 0 {
                self.push_pools();
            }
            let pool = self.chunks.get(usize::from(b.chunk));
            if pool.is_some_and(|c| c.is_some_and(|c| c.pool)) {
                self.join_placements(b);
            }
        }
        self.chunk_mut(b)
    }

    /// A pool's record takes in its (non-empty) placements' at its own look-up. A job on the
    /// pool is recorded after that look-up, so the pool is marked `pushing`, and its record
    /// goes on being merged into its placements' at every later look-up until all of its jobs
    /// have ended (see [`push_pools`](Self::push_pools)).
    #[cold]
    #[inline(never)]
    fn join_placements(&mut self, b: MemoryBinding) {
        // A stale binding is reported by the look-up that follows; an empty pool shares no
        // bytes.
        if !self.chunk(b).is_ok_and(|c| c.bound_block().len > 0) {
            return;
        }
        let mut joined = Access::default();
        for p in self.chunks.iter().flatten() {
            if p.parent == Some(b.chunk) && p.bound_block().len > 0 {
                joined.merge(&p.access);
            }
        }
        if let Ok(c) = self.chunk_mut(b) {
            c.access.merge(&joined);
            if !core::mem::replace(&mut c.pushing, true) {
                self.pushing += 1;
            }
        }
    }

    /// Merges the record of every `pushing` pool into those of its (non-empty) placements;
    /// a pool whose jobs have all ended stops pushing.
    #[cold]
    #[inline(never)]
    fn push_pools(&mut self) {
        for k in 0..self.chunks.len() {
            let Some(Some(pool)) = self.chunks.get_mut(k) else {
                continue;
            };
            if !pool.pushing {
                continue;
            }
            if pool.access.is_idle() {
                pool.pushing = false;
                self.pushing -= 1;
                continue;
            }
            let access = pool.access;
            for c in self.chunks.iter_mut().flatten() {
                if c.parent == Some(k as u16) && c.bound_block().len > 0 {
                    c.access.merge(&access);
                }
            }
        }
    }

    /// Step 1: a free slice frees its chunk.
    fn cleanup_slices(&mut self) {
        for c in self.chunks.iter_mut().flatten() {
            if let ChunkState::Slice { held: false, .. } = c.state {
                c.state = ChunkState::Free;
            }
        }
    }

    /// Steps 2 and 3: the exact free chunk, else the smallest free chunk that takes a slice,
    /// in the slow tier or the fast arena as `slow` says.
    fn find_free_chunk(&self, len: u32, slow: bool) -> Option<usize> {
        let mut best: Option<(usize, u32)> = None;
        for (i, c) in self.chunks.iter().enumerate() {
            let Some(c) = c else { continue };
            if c.state != ChunkState::Free || c.parent.is_some() {
                continue;
            }
            if (c.block.offset >= self.fast_end) != slow {
                continue;
            }
            if c.block.len == len {
                return Some(i);
            }
            if self.config.slice.can_use_chunk(c.block.len, len)
                && best.is_none_or(|(_, size)| c.block.len < size)
            {
                best = Some((i, c.block.len));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Return every free chunk whose jobs have completed to the arena.
    ///
    /// A chunk whose slice was released is free only from the next reserve on, so this does
    /// not return it; [`MemoryManagement::release_free`] does.
    pub fn cleanup_chunks(&mut self) {
        for slot in self.chunks.iter_mut() {
            if let Some(c) = slot {
                if c.state == ChunkState::Free && c.parent.is_none() && c.access.is_idle() {
                    // The block came from this arena, so dealloc cannot fail.
                    if self.arena.dealloc(c.block).is_ok() {
                        self.stats.deallocations += 1;
                        if c.block.offset < self.fast_end {
                            self.stats.reserved -= c.block.len;
                        }
                        *slot = None;
                    }
                }
            }
        }
    }

    /// Records that slot `index` was taken. Slots are taken lowest first, so when `index`
    /// was chosen every slot below it was in use: `index + 1` slots at once.
    fn note_slot(&mut self, index: usize) {
        self.stats.chunk_slots_peak = self.stats.chunk_slots_peak.max(index as u32 + 1);
    }

    fn free_slot(&self) -> Result<usize, Error> {
        self.chunks
            .iter()
            .position(Option::is_none)
            .ok_or(Error::CapacityExceeded {
                capacity: Capacity::Chunks,
                limit: CHUNKS as u32,
            })
    }

    /// Removes the released placements of `pool` that overlap `range` (all of them for
    /// `None`), returning the jobs recorded against them: whoever reuses the range must
    /// wait for those. Placements still held are merged but kept.
    fn dissolve_placements(&mut self, pool: u16, range: Option<Block>) -> Access {
        let mut merged = Access::default();
        for slot in self.chunks.iter_mut() {
            let Some(c) = slot else { continue };
            let overlaps =
                range.is_none_or(|r| c.block.offset < r.end() && r.offset < c.block.end());
            if c.parent == Some(pool) && overlaps {
                merged.merge(&c.access);
                if c.state == ChunkState::Free {
                    *slot = None;
                }
            }
        }
        merged
    }

    fn create_chunk(&mut self, len: u32, slow: bool) -> Result<usize, Error> {
        let index = self.free_slot()?;
        let block = self.arena.alloc_in(self.range(slow), len)?;
        self.chunks[index] = Some(Chunk {
            block,
            parent: None,
            state: ChunkState::Free,
            generation: 0,
            pool: false,
            pushing: false,
            access: Access::default(),
        });
        self.note_slot(index);
        self.stats.allocations += 1;
        if !slow {
            self.stats.reserved += block.len;
            self.stats.reserved_peak = self.stats.reserved_peak.max(self.stats.reserved);
        }
        Ok(index)
    }

    /// [`reserve`](MemoryManagement::reserve) in the fast arena or, for `slow`, the tier
    /// behind it.
    fn reserve_in(&mut self, bytes: u32, slow: bool) -> Result<MemoryBinding, Error> {
        let len = self.arena.rounded(bytes).ok_or(Error::OutOfMemory {
            requested: bytes,
            free: self.arena.free_bytes(),
            largest_free: self.arena.largest_free(),
        })?;
        self.cleanup_slices();
        let binding = match self.find_free_chunk(len, slow) {
            Some(i) if self.chunks[i].is_some_and(|c| c.block.len == len) => {
                self.stats.exact_reuses += 1;
                self.bind(i, ChunkState::Whole { bytes }, bytes)
            }
            Some(i) => {
                self.stats.slice_reuses += 1;
                self.bind(i, ChunkState::Slice { bytes, held: true }, bytes)
            }
            None => {
                let index = match self.create_chunk(len, slow) {
                    Ok(i) => i,
                    Err(Error::OutOfMemory { .. } | Error::CapacityExceeded { .. }) => {
                        self.cleanup_chunks();
                        self.create_chunk(len, slow)?
                    }
                    Err(e) => return Err(e),
                };
                self.bind(index, ChunkState::Whole { bytes }, bytes)
            }
        };
        self.tick_dealloc();
        Ok(binding)
    }

    fn tick_dealloc(&mut self) {
        if let DeallocStrategy::PeriodTick { period } = self.config.dealloc {
            self.reserves_since_dealloc += 1;
            if self.reserves_since_dealloc >= period {
                self.reserves_since_dealloc = 0;
                self.cleanup_chunks();
            }
        }
    }
}

impl<const CHUNKS: usize> MemoryManagement for ChunkSliceMemory<CHUNKS> {
    fn reserve(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        self.reserve_in(bytes, false)
    }

    fn reserve_slow(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        self.reserve_in(bytes, true).map_err(|e| match e {
            Error::OutOfMemory {
                requested,
                free,
                largest_free,
            } => Error::SlowTierOutOfMemory {
                requested,
                free,
                largest_free,
            },
            other => other,
        })
    }

    fn place(
        &mut self,
        pool: MemoryBinding,
        offset: u32,
        bytes: u32,
    ) -> Result<MemoryBinding, Error> {
        let p = *self.chunk(pool)?;
        let pool_bytes = self.block(pool)?.len;
        let bad = Error::BadPlacement {
            offset,
            bytes,
            pool_bytes,
        };
        if p.parent.is_some() || !offset.is_multiple_of(self.arena.alignment()) {
            return Err(bad);
        }
        let len = self.arena.rounded(bytes).ok_or(bad)?;
        let pool_len = self.arena.rounded(pool_bytes).ok_or(bad)?;
        if offset.checked_add(len).is_none_or(|end| end > pool_len) {
            return Err(bad);
        }
        let block = Block {
            offset: p.block.offset + offset,
            len,
        };
        // Released placements under the new one go first: their slots are free to reuse, so
        // a graph that places the same offsets at every invoke never needs more slots than it
        // has live tensors.
        let mut access = self.dissolve_placements(pool.chunk, Some(block));
        let index = match self.free_slot() {
            Ok(index) => index,
            Err(e) => {
                // Keep the dissolved placements' jobs on the pool, for whoever places there.
                if let Some(c) = self.chunks[pool.chunk as usize].as_mut() {
                    c.access.merge(&access);
                }
                return Err(e);
            }
        };
        // The pool may be a reused chunk whose old contents jobs still read or write.
        access.merge(&p.access);
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        self.chunks[index] = Some(Chunk {
            block,
            parent: Some(pool.chunk),
            state: ChunkState::Whole { bytes },
            generation,
            pool: false,
            pushing: false,
            access,
        });
        if let Some(c) = self.chunks[pool.chunk as usize].as_mut() {
            if !c.pool {
                c.pool = true;
                self.pools += 1;
            }
        }
        self.note_slot(index);
        self.stats.placements += 1;
        Ok(MemoryBinding {
            chunk: index as u16,
            generation,
        })
    }

    fn release(&mut self, binding: MemoryBinding) -> Result<(), Error> {
        let c = *self.chunk(binding)?;
        if c.parent.is_some() {
            if let Some(c) = self.chunks[binding.chunk as usize].as_mut() {
                c.state = ChunkState::Free;
            }
            return Ok(());
        }
        let held = self
            .chunks
            .iter()
            .flatten()
            .filter(|p| p.parent == Some(binding.chunk) && p.state != ChunkState::Free)
            .count();
        if held > 0 {
            return Err(Error::PoolInUse {
                placed: held as u32,
            });
        }
        // The pool's memory goes back to chunk/slice reuse: its next user waits for every
        // job its placements recorded.
        let access = self.dissolve_placements(binding.chunk, None);
        if let Some(c) = self.chunks[binding.chunk as usize].as_mut() {
            c.access.merge(&access);
            if core::mem::take(&mut c.pool) {
                self.pools -= 1;
            }
            if core::mem::take(&mut c.pushing) {
                self.pushing -= 1;
            }
        }
        let state = c.state;
        let (next, bytes) = match state {
            ChunkState::Whole { bytes } => (ChunkState::Free, bytes),
            ChunkState::Slice { bytes, held: true } => {
                (ChunkState::Slice { bytes, held: false }, bytes)
            }
            _ => {
                return Err(Error::StaleHandle {
                    index: binding.chunk,
                })
            }
        };
        let mut fast = false;
        if let Some(c) = self.chunks[binding.chunk as usize].as_mut() {
            c.state = next;
            fast = c.block.offset < self.fast_end;
        }
        if fast {
            self.stats.in_use -= bytes;
        }
        Ok(())
    }

    fn block(&self, binding: MemoryBinding) -> Result<Block, Error> {
        Ok(self.chunk(binding)?.bound_block())
    }

    #[inline(always)]
    fn block_and_access(&mut self, binding: MemoryBinding) -> Result<(Block, &mut Access), Error> {
        let c = self.family_access(binding)?;
        Ok((c.bound_block(), &mut c.access))
    }

    #[inline(always)]
    fn access_mut(&mut self, binding: MemoryBinding) -> Result<&mut Access, Error> {
        Ok(&mut self.family_access(binding)?.access)
    }

    fn retire_fences(&mut self, done: &mut dyn FnMut(usize, Fence) -> bool) {
        let mut done = |q, f| done(q, f);
        for slot in self.chunks.iter_mut() {
            let Some(c) = slot else { continue };
            c.access.retire(&mut done);
            // A released placement has nothing left to hand on once its jobs are over.
            if c.parent.is_some() && c.state == ChunkState::Free && c.access.is_idle() {
                *slot = None;
            }
        }
    }

    fn has_busy_free_chunks(&self) -> bool {
        self.chunks.iter().flatten().any(|c| {
            c.parent.is_none()
                && matches!(
                    c.state,
                    ChunkState::Free | ChunkState::Slice { held: false, .. }
                )
                && !c.access.is_idle()
        })
    }

    fn stats(&self) -> MemoryStats {
        MemoryStats {
            largest_free: self.arena.largest_free_in(self.range(false)),
            chunks: self.arena.blocks() as u32,
            ..self.stats
        }
    }

    fn alignment(&self) -> u32 {
        self.arena.alignment()
    }

    fn release_free(&mut self) {
        self.cleanup_slices();
        self.cleanup_chunks();
    }

    fn reset_peak(&mut self) {
        self.stats.in_use_peak = self.stats.in_use;
        self.stats.reserved_peak = self.stats.reserved;
    }
}
