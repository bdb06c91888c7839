//! The two memories the runtime plans in, as `static`s in RAM (`.bss`, zeroed at reset),
//! each handed out once as `&'static mut [u8]`.
//!
//! Their sizes are this model's, measured: the arena is what `npu-sim plan` reports (16,000
//! bytes of activations and 4,704 of per-channel multipliers and biases the runtime prepares;
//! the weights stay in flash), and the staging holds the largest transfer: the CPU fallback
//! computes in the arena in place ([`CpuOnly`](npu_compute::hal::CpuOnly) lends it), so only
//! the input written, the scores read and the constants prepared pass through staging, one
//! at a time (`ServerStats::staging_bytes_peak` of an invoke, checked by
//! `tests/cpu_only.rs`).

#[path = "../../firmware-common/memories.rs"]
mod memories;

use memories::Memories;

/// Bytes of the arena (device memory).
pub const ARENA_BYTES: usize = 20_704;
/// Bytes of the staging (host memory).
pub const STAGING_BYTES: usize = 512;

/// The arena and the staging.
static MEMORIES: Memories<ARENA_BYTES, STAGING_BYTES> = Memories::new();

/// The arena and the staging; `None` after the first call.
pub fn take() -> Option<(&'static mut [u8], &'static mut [u8])> {
    MEMORIES.take()
}
