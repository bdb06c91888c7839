//! Residency: where a tensor's newest bytes live, and the pinned host copy that lets them
//! move without a staging copy.
//!
//! Most tensors live on the device only: the CPU reaches them through staging blocks, one
//! copy each way. A *pinned* tensor also owns a block of the HAL's DMA-capable host memory,
//! aligned as the DMA engine needs. The CPU writes and reads that block in place, and
//! transfers go straight between it and device memory. Each side may hold the newest bytes:
//!
//! | state | host block | device memory |
//! |---|---|---|
//! | [`Residency::Host`] | newest | stale or not reserved yet |
//! | [`Residency::Device`] | stale | newest |
//! | [`Residency::Both`] | newest | newest |
//!
//! Only the types live here, so that the tensor table, the transfers and the pinned-block
//! operations ([`pinned`](super::pinned)) can all use them without importing one another.

use crate::hal::Fence;
use crate::storage::Block;

/// Where a tensor's newest bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Residency {
    /// Only in its pinned host block (the device copy is stale or not reserved).
    Host,
    /// Only in device memory (or flash).
    Device,
    /// In both, identical.
    Both,
}

impl Residency {
    /// Whether the device side holds the newest bytes.
    pub const fn on_device(self) -> bool {
        matches!(self, Residency::Device | Residency::Both)
    }

    /// Whether the host side holds the newest bytes.
    pub const fn on_host(self) -> bool {
        matches!(self, Residency::Host | Residency::Both)
    }
}

/// A pinned tensor's host block and the DMA jobs using it.
#[derive(Clone, Copy, Debug)]
pub(super) struct HostCopy {
    pub(super) block: Block,
    /// The newest upload reading the block.
    pub(super) read: Option<Fence>,
    /// The newest download filling the block.
    pub(super) write: Option<Fence>,
}

impl HostCopy {
    /// A block no DMA job has used.
    pub(super) const fn new(block: Block) -> Self {
        HostCopy {
            block,
            read: None,
            write: None,
        }
    }

    /// The newest DMA job reading or writing the block: once it completes, none touches it
    /// (all of them run on the DMA queue, in order).
    pub(super) fn last_dma(&self) -> Option<Fence> {
        self.read.max(self.write)
    }
}
