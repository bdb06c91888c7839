//! Memory management: chunks and slices over the arena, Burn-Compute's strategy.
//!
//! # Design
//!
//! The arena ([`ArenaStorage`]) hands out *chunks*. A tensor holds either a whole chunk or a
//! *slice*: the first `n` bytes of a larger chunk. To reserve `n` bytes,
//! [`ChunkSliceMemory::reserve`] does exactly what Burn-Compute's `SimpleMemoryManagement` does:
//!
//! 1. drop every free slice (its chunk becomes free again);
//! 2. take a free chunk of exactly `n` bytes if there is one;
//! 3. otherwise put a slice on the smallest free chunk the [`SliceStrategy`] accepts;
//! 4. otherwise carve a new chunk of `n` bytes from the arena. If the arena has no room, release
//!    every free chunk to the arena and retry once; only then fail with
//!    [`Error::OutOfMemory`] (requested, free and largest free bytes);
//! 5. tick the [`DeallocStrategy`]: every `P` reserves, free chunks go back to the arena.
//!
//! Sizes are counted in alignment units (a 10-byte tensor occupies one 16-byte unit on a
//! 16-byte aligned NPU), so "exactly `n`" means the same number of units.
//!
//! A chunk or slice is free when no tensor holds it. Memory released while jobs still read or
//! write it stays safe to reuse at once: each chunk records the newest fence, per hardware
//! queue, of the jobs that read it and of the job that last wrote it ([`Access`]); the server
//! makes every job that writes the chunk's new contents depend on those fences. A chunk goes back
//! to the arena only when all its recorded jobs have completed (the server clears finished
//! fences with [`ChunkSliceMemory::retire_fences`]), because the arena forgets who used a range.
//!
//! Everything lives in fixed tables: at most `CHUNKS` chunks (the const generic, default 64),
//! and running out is [`Error::CapacityExceeded`] naming [`Capacity::Chunks`].
//!
//! For eager workloads that repeat (one inference after another), [`GuidedMemory`] wraps a
//! manager: it measures the first run of each shape and places later runs at planned offsets
//! (see [`GuidedMemory`]). Both it and a prepared model lay tensors out with an
//! [`ArenaPlan`]: fixed offsets from known lifetimes ([`plan_arena`]).

mod arena_plan;
mod guided;

pub use arena_plan::{lower_bound, plan_arena, ArenaPlan, ArenaPlanError, Lifetime};
pub use guided::{GuidedMemory, PassStats, DEFAULT_EFFORT, HELD_POOLS};

use crate::error::{Capacity, Error};
use crate::hal::{Fence, Queue, MAX_QUEUES};
use crate::storage::{ArenaStorage, Block};

/// When a free chunk may take a slice smaller than itself.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SliceStrategy {
    /// Never slice: only exact-size chunks are reused.
    Never,
    /// Slice when `requested / chunk >= r`.
    Ratio(f32),
    /// Slice when the request is at least this many bytes.
    MinimumSize(u32),
    /// Slice when the request is at most this many bytes.
    MaximumSize(u32),
}

impl SliceStrategy {
    /// Whether a free chunk of `chunk` bytes may hold a slice of `slice` bytes.
    pub fn can_use_chunk(&self, chunk: u32, slice: u32) -> bool {
        if slice > chunk {
            return false;
        }
        match *self {
            SliceStrategy::Never => false,
            SliceStrategy::Ratio(r) => slice as f32 / chunk as f32 >= r,
            SliceStrategy::MinimumSize(min) => slice >= min,
            SliceStrategy::MaximumSize(max) => slice <= max,
        }
    }
}

/// When free chunks go back to the arena (besides the release-and-retry on a full arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeallocStrategy {
    /// Keep free chunks for reuse until the arena is full.
    Never,
    /// Release free chunks every `period` reserves (1: at every reserve).
    PeriodTick {
        /// Reserves between releases.
        period: u32,
    },
}

/// The memory manager's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryConfig {
    /// Slicing policy.
    pub slice: SliceStrategy,
    /// Deallocation policy.
    pub dealloc: DeallocStrategy,
}

impl Default for MemoryConfig {
    /// Burn-Compute's recommended setting: slices of at least 80 % of a chunk, release free
    /// chunks every 128 reserves.
    fn default() -> Self {
        MemoryConfig {
            slice: SliceStrategy::Ratio(0.8),
            dealloc: DeallocStrategy::PeriodTick { period: 128 },
        }
    }
}

/// Memory figures, in bytes unless stated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryStats {
    /// Bytes held by tensors now (requested sizes).
    pub in_use: u32,
    /// Most bytes ever held by tensors at once.
    pub in_use_peak: u32,
    /// Bytes of chunks reserved from the arena now.
    pub reserved: u32,
    /// Most bytes of chunks ever reserved at once.
    pub reserved_peak: u32,
    /// Chunks carved from the arena so far.
    pub allocations: u32,
    /// Chunks returned to the arena so far.
    pub deallocations: u32,
    /// Reserves served by an exact free chunk.
    pub exact_reuses: u32,
    /// Reserves served by a slice.
    pub slice_reuses: u32,
    /// The largest contiguous free block of the arena now.
    pub largest_free: u32,
    /// Chunks live now.
    pub chunks: u32,
    /// Most chunk slots ever in use at once (chunks, and tensors placed inside pools): the
    /// `CHUNKS` capacity this run needed. Counted since the manager was made
    /// ([`reset_peak`](MemoryManagement::reset_peak) leaves it).
    pub chunk_slots_peak: u32,
    /// Tensors placed at planned offsets inside pools so far.
    pub placements: u32,
}

/// The newest jobs, per hardware queue, that read a chunk, and those that wrote its contents.
///
/// Jobs on one queue complete in order, so one fence per queue stands for all older ones. A
/// chunk's contents normally have one writer; a placed tensor laid over several earlier ones
/// (a [`place`](MemoryManagement::place)d view, or a concatenation written in parts) inherits
/// all their writers, at most one per queue.
///
/// Every job submission walks the records of its operands, so they are kept short: a bit mask
/// per kind says which queues have a fence, a walk forgets the fences it finds ended, and a
/// walk for a job skips the job's own queue (which orders it already). In a steady stream of
/// jobs on one execution unit the walks then find nothing to visit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Access {
    /// Newest reader per queue ([`Queue::index`]), as `fence + 1` (0: none), so that a
    /// slot is 8 bytes, not the 16 of an `Option<Fence>`.
    reads: [u64; MAX_QUEUES],
    /// Newest writer per queue, the same way.
    writes: [u64; MAX_QUEUES],
    /// Bit `q` set exactly when `reads[q]` holds a fence.
    read_queues: u16,
    /// Bit `q` set exactly when `writes[q]` holds a fence.
    write_queues: u16,
}

// The queue masks of `Access` have a bit per queue.
const _: () = assert!(MAX_QUEUES <= 16);

/// A fence as an [`Access`] slot.
const fn slot(fence: Fence) -> u64 {
    fence.0.saturating_add(1)
}

/// The fence in an [`Access`] slot.
const fn fence_of(slot: u64) -> Option<Fence> {
    match slot {
        0 => None,
        s => Some(Fence(s - 1)),
    }
}

/// The mask bit of queue `queue` (a [`Queue::index`]); 0 for an index out of range.
const fn bit(queue: usize) -> u16 {
    if queue < MAX_QUEUES {
        1 << queue
    } else {
        0
    }
}

/// The queue indices whose bit is set in `mask`, lowest first.
pub(crate) fn queues_in(mut mask: u16) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        (mask != 0).then(|| {
            let q = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            q
        })
    })
}

/// Walks the fences of `slots` whose bit is set in `mask` and clear in `skip`: those `ended`
/// says are over are forgotten, the others passed to `f(queue index, fence)`.
fn walk(
    mask: &mut u16,
    slots: &mut [u64; MAX_QUEUES],
    skip: u16,
    ended: &mut impl FnMut(usize, Fence) -> bool,
    mut f: impl FnMut(usize, Fence),
) {
    let mut todo = *mask & !skip;
    while todo != 0 {
        let q = todo.trailing_zeros() as usize;
        todo &= todo - 1;
        let Some(s) = slots.get_mut(q) else { continue };
        match fence_of(*s) {
            Some(fence) if !ended(q, fence) => f(q, fence),
            _ => {
                *s = 0;
                *mask &= !bit(q);
            }
        }
    }
}

impl Access {
    /// Record a read by a job on `queue`.
    pub fn record_read(&mut self, queue: Queue, fence: Fence) {
        let q = queue.index();
        if let Some(r) = self.reads.get_mut(q) {
            *r = (*r).max(slot(fence));
            self.read_queues |= bit(q);
        }
    }

    /// Record a write; earlier reads and writes are ordered before it by its dependencies.
    #[inline(always)]
    pub fn record_write(&mut self, queue: Queue, fence: Fence) {
        for q in queues_in(self.read_queues) {
            self.reads[q] = 0;
        }
        for q in queues_in(self.write_queues) {
            self.writes[q] = 0;
        }
        self.read_queues = 0;
        self.write_queues = 0;
        let q = queue.index();
        if let Some(w) = self.writes.get_mut(q) {
            *w = slot(fence);
            self.write_queues = bit(q);
        }
    }

    /// Record a write by a job on `queue` beside the writes already recorded: the newest
    /// writers of a replayed [`JobPlan`](crate::client::JobPlan), one per queue, without
    /// the clearing of [`record_write`](Self::record_write).
    pub fn add_write(&mut self, queue: Queue, fence: Fence) {
        let q = queue.index();
        if let Some(w) = self.writes.get_mut(q) {
            *w = (*w).max(slot(fence));
            self.write_queues |= bit(q);
        }
    }

    /// Record, beside the jobs recorded already, the newest job of each queue in `newest`
    /// (indexed by [`Queue::index`]) as a writer (`write`) or a reader: what a job plan, or a
    /// release that could not see which jobs used the memory, hands over in one go.
    pub fn add_newest(&mut self, newest: &[Option<Fence>; MAX_QUEUES], write: bool) {
        let (slots, mask) = if write {
            (&mut self.writes, &mut self.write_queues)
        } else {
            (&mut self.reads, &mut self.read_queues)
        };
        for (q, fence) in newest.iter().enumerate() {
            if let Some(fence) = *fence {
                slots[q] = slots[q].max(slot(fence));
                *mask |= bit(q);
            }
        }
    }

    /// Take on every job recorded in `other` (memory that overlaps this chunk's range): a
    /// reader of this chunk then waits for `other`'s writers, and a writer for all of them.
    pub fn merge(&mut self, other: &Access) {
        for q in queues_in(other.read_queues) {
            self.reads[q] = self.reads[q].max(other.reads[q]);
        }
        for q in queues_in(other.write_queues) {
            self.writes[q] = self.writes[q].max(other.writes[q]);
        }
        self.read_queues |= other.read_queues;
        self.write_queues |= other.write_queues;
    }

    /// Whether no recorded job is still in flight.
    pub fn is_idle(&self) -> bool {
        self.read_queues | self.write_queues == 0
    }

    /// The writers a job on `queue` that reads this memory must wait for: `f(queue index,
    /// fence)` for the newest writer of every other queue, except those `ended` says are over,
    /// which are forgotten.
    #[inline(always)]
    pub fn writers_before(
        &mut self,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        f: impl FnMut(usize, Fence),
    ) {
        let own = bit(queue.index());
        walk(&mut self.write_queues, &mut self.writes, own, ended, f);
    }

    /// The readers a job on `queue` that overwrites this memory must wait for (besides the
    /// [writers](Self::writers_before)), the same way.
    #[inline(always)]
    pub fn readers_before(
        &mut self,
        queue: Queue,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        f: impl FnMut(usize, Fence),
    ) {
        let own = bit(queue.index());
        walk(&mut self.read_queues, &mut self.reads, own, ended, f);
    }

    /// Every recorded writer, and every reader too when `readers`, on any queue:
    /// `f(queue index, fence)` for those `ended` does not say are over (which are forgotten).
    /// What a job list submitted as a whole waits for before its first job on each queue.
    pub fn jobs(
        &mut self,
        readers: bool,
        ended: &mut impl FnMut(usize, Fence) -> bool,
        mut f: impl FnMut(usize, Fence),
    ) {
        walk(&mut self.write_queues, &mut self.writes, 0, ended, &mut f);
        if readers {
            walk(&mut self.read_queues, &mut self.reads, 0, ended, f);
        }
    }

    /// Forget fences for which `ended(queue index, fence)` holds.
    pub fn retire(&mut self, ended: &mut impl FnMut(usize, Fence) -> bool) {
        walk(&mut self.read_queues, &mut self.reads, 0, ended, |_, _| {});
        walk(
            &mut self.write_queues,
            &mut self.writes,
            0,
            ended,
            |_, _| {},
        );
    }
}

/// Which memory a tensor holds: a chunk slot and the generation it had when bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryBinding {
    chunk: u16,
    generation: u32,
}

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

/// Behaviour the compute server needs from a memory manager.
pub trait MemoryManagement {
    /// Reserve `bytes` for a new tensor.
    fn reserve(&mut self, bytes: u32) -> Result<MemoryBinding, Error>;
    /// Place a tensor of `bytes` at `offset` inside `pool`, a reservation whose layout a
    /// planner decided ahead of time: nothing is searched or carved. The range may overlap
    /// earlier placements, released or not (the planner knows their contents are dead, or
    /// that the new tensor is a view of them): the new tensor takes on their recorded jobs, so
    /// a job writing it waits for their readers and a job reading it for their writers.
    ///
    /// Errors: [`Error::BadPlacement`] when `offset` is not aligned or the range leaves the
    /// pool, [`Error::StaleHandle`] for a stale pool, [`Error::CapacityExceeded`] naming
    /// [`Capacity::Chunks`] when the chunk table is full.
    fn place(
        &mut self,
        pool: MemoryBinding,
        offset: u32,
        bytes: u32,
    ) -> Result<MemoryBinding, Error>;
    /// The tensor holding `binding` is gone.
    fn release(&mut self, binding: MemoryBinding) -> Result<(), Error>;
    /// The arena byte range (offset, requested length) of a binding.
    fn block(&self, binding: MemoryBinding) -> Result<Block, Error>;
    /// Jobs recorded against the binding's chunk.
    fn access_mut(&mut self, binding: MemoryBinding) -> Result<&mut Access, Error>;
    /// [`block`](Self::block) and [`access_mut`](Self::access_mut) together, what a job
    /// submission needs of each operand (a manager can find both with one lookup).
    fn block_and_access(&mut self, binding: MemoryBinding) -> Result<(Block, &mut Access), Error> {
        let block = self.block(binding)?;
        Ok((block, self.access_mut(binding)?))
    }
    /// Forget every recorded fence for which `done(queue index, fence)` holds (the server asks
    /// the NPU).
    fn retire_fences(&mut self, done: &mut dyn FnMut(usize, Fence) -> bool);
    /// Whether a free chunk is held back only because a job still uses it, so waiting for
    /// the NPU may let a failed reserve succeed.
    fn has_busy_free_chunks(&self) -> bool;
    /// Current figures.
    fn stats(&self) -> MemoryStats;
    /// The alignment of the manager's blocks: offsets given to [`place`](Self::place) must be
    /// multiples of it. The default, 1, suits a manager without alignment; [`ChunkSliceMemory`]
    /// answers its arena's.
    fn alignment(&self) -> u32 {
        1
    }
    /// Return every free chunk whose jobs are over to the arena (for [`ChunkSliceMemory`],
    /// [`cleanup_chunks`](ChunkSliceMemory::cleanup_chunks)). The default does nothing.
    fn release_free(&mut self) {}
    /// Restart the peaks ([`MemoryStats::in_use_peak`], [`MemoryStats::reserved_peak`]) from
    /// the current figures, to measure a phase of a run. The default does nothing.
    fn reset_peak(&mut self) {}
}

/// Burn-Compute's chunk/slice memory manager over a fixed arena, with at most `CHUNKS` chunks.
#[derive(Debug)]
pub struct ChunkSliceMemory<const CHUNKS: usize = 64> {
    arena: ArenaStorage<CHUNKS>,
    chunks: [Option<Chunk>; CHUNKS],
    config: MemoryConfig,
    reserves_since_dealloc: u32,
    next_generation: u32,
    stats: MemoryStats,
}

impl<const CHUNKS: usize> ChunkSliceMemory<CHUNKS> {
    /// A manager over an arena of `size` bytes aligned to `alignment`.
    pub fn new(size: u32, alignment: u32, config: MemoryConfig) -> Result<Self, Error> {
        let arena = ArenaStorage::new(size, alignment)?;
        let largest_free = arena.size();
        Ok(ChunkSliceMemory {
            arena,
            chunks: [None; CHUNKS],
            config,
            reserves_since_dealloc: 0,
            next_generation: 0,
            stats: MemoryStats {
                largest_free,
                ..MemoryStats::default()
            },
        })
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
        if let Some(c) = self.chunks[index].as_mut() {
            c.state = state;
            c.generation = generation;
        }
        self.stats.in_use += requested;
        self.stats.in_use_peak = self.stats.in_use_peak.max(self.stats.in_use);
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

    /// Step 1: a free slice frees its chunk.
    fn cleanup_slices(&mut self) {
        for c in self.chunks.iter_mut().flatten() {
            if let ChunkState::Slice { held: false, .. } = c.state {
                c.state = ChunkState::Free;
            }
        }
    }

    /// Steps 2 and 3: the exact free chunk, else the smallest free chunk that takes a slice.
    fn find_free_chunk(&self, len: u32) -> Option<usize> {
        let mut best: Option<(usize, u32)> = None;
        for (i, c) in self.chunks.iter().enumerate() {
            let Some(c) = c else { continue };
            if c.state != ChunkState::Free || c.parent.is_some() {
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
                        self.stats.reserved -= c.block.len;
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

    fn create_chunk(&mut self, len: u32) -> Result<usize, Error> {
        let index = self.free_slot()?;
        let block = self.arena.alloc(len)?;
        self.chunks[index] = Some(Chunk {
            block,
            parent: None,
            state: ChunkState::Free,
            generation: 0,
            access: Access::default(),
        });
        self.note_slot(index);
        self.stats.allocations += 1;
        self.stats.reserved += block.len;
        self.stats.reserved_peak = self.stats.reserved_peak.max(self.stats.reserved);
        Ok(index)
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
        let len = self.arena.rounded(bytes).ok_or(Error::OutOfMemory {
            requested: bytes,
            free: self.arena.free_bytes(),
            largest_free: self.arena.largest_free(),
        })?;
        self.cleanup_slices();
        let binding = match self.find_free_chunk(len) {
            Some(i) if self.chunks[i].is_some_and(|c| c.block.len == len) => {
                self.stats.exact_reuses += 1;
                self.bind(i, ChunkState::Whole { bytes }, bytes)
            }
            Some(i) => {
                self.stats.slice_reuses += 1;
                self.bind(i, ChunkState::Slice { bytes, held: true }, bytes)
            }
            None => {
                let index = match self.create_chunk(len) {
                    Ok(i) => i,
                    Err(Error::OutOfMemory { .. } | Error::CapacityExceeded { .. }) => {
                        self.cleanup_chunks();
                        self.create_chunk(len)?
                    }
                    Err(e) => return Err(e),
                };
                self.bind(index, ChunkState::Whole { bytes }, bytes)
            }
        };
        self.tick_dealloc();
        Ok(binding)
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
        if p.parent.is_some() || offset % self.arena.alignment() != 0 {
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
            access,
        });
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
        if let Some(c) = self.chunks[binding.chunk as usize].as_mut() {
            c.state = next;
        }
        self.stats.in_use -= bytes;
        Ok(())
    }

    fn block(&self, binding: MemoryBinding) -> Result<Block, Error> {
        Ok(self.chunk(binding)?.bound_block())
    }

    fn block_and_access(&mut self, binding: MemoryBinding) -> Result<(Block, &mut Access), Error> {
        let c = self.chunk_mut(binding)?;
        Ok((c.bound_block(), &mut c.access))
    }

    fn access_mut(&mut self, binding: MemoryBinding) -> Result<&mut Access, Error> {
        Ok(&mut self.chunk_mut(binding)?.access)
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
            largest_free: self.arena.largest_free(),
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
