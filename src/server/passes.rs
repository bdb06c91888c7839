//! Passes: the server's side of [`GuidedMemory`]'s measured-then-guided runs of an eager
//! workload. Only a server whose memory manager is a `GuidedMemory` has them, so a client of
//! any other server has no pass to begin (see [`PassServer`]).

use super::{ComputeServer, NpuServer};
use crate::error::Error;
use crate::hal::Npu;
use crate::memory::{GuidedMemory, MemoryManagement, PassStats};

/// A server whose memory manager learns from repeated runs: [`NpuServer`] over a
/// [`GuidedMemory`]. Bracket each run of an eager workload (one inference) with a pass, most
/// simply through [`ComputeClient::pass`](crate::client::ComputeClient::pass).
pub trait PassServer: ComputeServer {
    /// Starts a pass: one run of the workload, whose shape `key` names (a sequence length, a
    /// batch size). The first pass of a key is measured; later ones are placed at planned
    /// offsets. Waits for running jobs when only they hold back the memory the pass needs.
    /// Errors: [`Error::PassAlreadyOpen`] while a pass is open.
    fn begin_pass(&mut self, key: u32) -> Result<(), Error>;
    /// Ends the pass. Errors: [`Error::NoPassOpen`] without a pass.
    fn end_pass(&mut self) -> Result<(), Error>;
    /// Counters of the passes.
    fn pass_stats(&self) -> PassStats;
}

impl<
        H: Npu,
        M: MemoryManagement,
        const PLANS: usize,
        const EVENTS: usize,
        const HANDLES: usize,
        const STAGING: usize,
        const TUNE: usize,
    > PassServer for NpuServer<H, GuidedMemory<M, PLANS, EVENTS>, HANDLES, STAGING, TUNE>
{
    fn begin_pass(&mut self, key: u32) -> Result<(), Error> {
        self.with_memory_retry(|m| m.begin_pass(key))
    }

    fn end_pass(&mut self) -> Result<(), Error> {
        // Chunks whose jobs are over can then go back to the arena.
        self.retire_memory_fences();
        self.memory.end_pass()
    }

    fn pass_stats(&self) -> PassStats {
        self.memory.pass_stats()
    }
}
