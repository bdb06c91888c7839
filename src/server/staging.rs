//! Host staging memory: blocks of the HAL's DMA-capable host memory that carry a transfer.
//!
//! A block stays allocated until the transfer that reads or fills it has completed, so the DMA
//! engine never sees its bytes reused under it. Released blocks wait in a fixed list with their
//! fence (`STAGING` entries, the same capacity as the block table) and are reaped as fences
//! complete.

use crate::error::{Capacity, Error};
use crate::hal::Fence;
use crate::storage::{ArenaStorage, Block, StorageError};

/// Host staging blocks, at most `STAGING` allocated or awaiting their fence.
#[derive(Debug)]
pub struct Staging<const STAGING: usize> {
    blocks: ArenaStorage<STAGING>,
    pending: heapless::Vec<(Fence, Block), STAGING>,
    /// Most blocks ever allocated or pending at once.
    peak_blocks: u32,
    /// The highest end of a block ever allocated: host memory of this size served every
    /// allocation so far at the same offsets.
    high_water: u32,
    /// The largest block ever allocated.
    largest: u32,
}

impl<const STAGING: usize> Staging<STAGING> {
    /// Staging over `size` bytes of host memory aligned to `alignment`.
    pub fn new(size: u32, alignment: u32) -> Result<Self, Error> {
        Ok(Staging {
            blocks: ArenaStorage::new(size, alignment)?,
            pending: heapless::Vec::new(),
            peak_blocks: 0,
            high_water: 0,
            largest: 0,
        })
    }

    /// Staging over no host memory (every allocation fails), until [`new`](Self::new)'s
    /// replaces it.
    pub const fn empty() -> Self {
        Staging {
            blocks: ArenaStorage::empty(),
            pending: heapless::Vec::new(),
            peak_blocks: 0,
            high_water: 0,
            largest: 0,
        }
    }

    /// A block of at least `bytes`, or why not (after the caller has reaped what it could).
    pub fn alloc(&mut self, bytes: u32) -> Result<Block, Error> {
        let block = self.blocks.alloc(bytes).map_err(|e| match e {
            StorageError::TooManyBlocks { limit } => Error::CapacityExceeded {
                capacity: Capacity::StagingBlocks,
                limit,
            },
            _ => Error::StagingExhausted {
                requested: bytes,
                largest_free: self.blocks.largest_free(),
            },
        })?;
        self.peak_blocks = self.peak_blocks.max(self.blocks.blocks() as u32);
        self.high_water = self.high_water.max(block.end());
        self.largest = self.largest.max(block.len);
        Ok(block)
    }

    /// Most blocks allocated or awaiting their fence at once, the highest byte any block
    /// reached (the host memory that served the run so far without waiting for a transfer to
    /// free a block), and the largest block.
    pub fn peaks(&self) -> (u32, u32, u32) {
        (self.peak_blocks, self.high_water, self.largest)
    }

    /// Free a block now (no transfer uses it).
    pub fn free(&mut self, block: Block) -> Result<(), Error> {
        Ok(self.blocks.dealloc(block)?)
    }

    /// Free a block once `fence` has completed.
    pub fn free_after(&mut self, fence: Fence, block: Block) -> Result<(), Error> {
        // The pending list and the block table have the same capacity and a block is in at
        // most one of them as pending, so this push cannot fail; report rather than lose it.
        self.pending
            .push((fence, block))
            .map_err(|_| Error::CapacityExceeded {
                capacity: Capacity::StagingBlocks,
                limit: STAGING as u32,
            })
    }

    /// Blocks allocated now (pending ones included), their bytes, and how many are pending.
    pub fn usage(&self) -> (u32, u32, u32) {
        (
            self.blocks.blocks() as u32,
            self.blocks.used_bytes(),
            self.pending.len() as u32,
        )
    }

    /// Blocks allocated now (pending ones included).
    pub fn in_use(&self) -> usize {
        self.blocks.blocks()
    }

    /// Whether blocks are waiting for a transfer to finish.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Free every pending block whose fence `done` says has completed (staging fences are all
    /// transfers, on the DMA queue).
    pub fn reap(&mut self, mut done: impl FnMut(Fence) -> bool) {
        let mut i = 0;
        while i < self.pending.len() {
            let (fence, block) = self.pending[i];
            if done(fence) {
                self.pending.swap_remove(i);
                let _ = self.blocks.dealloc(block);
            } else {
                i += 1;
            }
        }
    }
}
