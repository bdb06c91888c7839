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

mod access;
mod arena_plan;
mod chunk_slice;
mod guided;

pub(crate) use access::queues_in;
pub use access::Access;
pub use arena_plan::{lower_bound, plan_arena, ArenaPlan, ArenaPlanError, Lifetime};
pub use chunk_slice::ChunkSliceMemory;
pub use guided::{GuidedMemory, PassStats, DEFAULT_EFFORT, HELD_POOLS};

/// The default `CHUNKS` of a [`ChunkSliceMemory`] (the server's default memory manager):
/// chunk slots, for chunks and for tensors placed inside pools.
pub const DEFAULT_CHUNKS: usize = 64;

use crate::error::Error;
use crate::hal::Fence;
use crate::storage::Block;

#[cfg(doc)]
use crate::error::Capacity;
#[cfg(doc)]
use crate::storage::ArenaStorage;

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

/// Memory figures, in bytes unless stated. With a slow tier
/// ([`ChunkSliceMemory::with_slow_tier`]) the byte figures are the fast arena's alone; the
/// counts (allocations, reuses, chunks) take in both.
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
    /// The largest contiguous free block of the (fast) arena now.
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

/// Which memory a tensor holds: a chunk slot and the generation it had when bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MemoryBinding {
    chunk: u16,
    generation: u32,
}

/// Behaviour the compute server needs from a memory manager.
pub trait MemoryManagement {
    /// Reserve `bytes` for a new tensor.
    fn reserve(&mut self, bytes: u32) -> Result<MemoryBinding, Error>;
    /// Place a tensor of `bytes` at `offset` inside `pool`, a reservation whose layout a
    /// planner decided ahead of time: nothing is searched or carved. The range may overlap
    /// earlier placements, released or not (the planner knows their contents are dead, or
    /// that the new tensor is a view of them): the new tensor takes on their recorded jobs, so
    /// a job writing it waits for their readers and a job reading it for their writers. That
    /// order is taken once, at placement: later jobs on two placements that overlap are not
    /// ordered against each other (a planner uses tensors over the same bytes one after the
    /// other). Jobs on a pool and on its placements always are (see
    /// [`access_mut`](Self::access_mut)).
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
    /// Reserve `bytes` for a new tensor in the slow memory tier behind the arena, where the
    /// manager was given one: its blocks then lie from the arena's size on (see
    /// [`ChunkSliceMemory::with_slow_tier`]). The default has none.
    ///
    /// Errors: [`Error::SlowTierOutOfMemory`] (with no bytes free where there is no tier),
    /// [`Error::CapacityExceeded`] naming [`Capacity::Chunks`].
    fn reserve_slow(&mut self, bytes: u32) -> Result<MemoryBinding, Error> {
        Err(Error::SlowTierOutOfMemory {
            requested: bytes,
            free: 0,
            largest_free: 0,
        })
    }
    /// The tensor holding `binding` is gone.
    fn release(&mut self, binding: MemoryBinding) -> Result<(), Error>;
    /// The arena byte range (offset, requested length) of a binding.
    fn block(&self, binding: MemoryBinding) -> Result<Block, Error>;
    /// Jobs recorded against the binding's bytes. A pool's record takes in its placements',
    /// and its own jobs reach its placements' records, so that a job or transfer on either
    /// waits for the other's; placements do not take in each other's (see
    /// [`place`](Self::place)).
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
