//! The two memories the runtime plans in, as `static`s in RAM (`.bss`, zeroed at reset),
//! each handed out once as `&'static mut [u8]`.
//!
//! Their sizes are this model's, measured: the arena is what `npu-sim plan` reports (16,000
//! bytes of activations and 4,704 of per-channel multipliers and biases the runtime prepares;
//! the weights stay in flash), and the staging holds the largest operator's inputs, weights and
//! output at once, which the CPU fallback computes over (`ServerStats::staging_bytes_peak`
//! of an invoke on [`CpuOnly`](npu_compute::hal::CpuOnly), checked by
//! `tests/cpu_only.rs`).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes of the arena (device memory).
pub const ARENA_BYTES: usize = 20_704;
/// Bytes of the staging (host memory).
pub const STAGING_BYTES: usize = 20_864;

/// Bytes with the alignment the HAL's regions need (16 covers `CpuOnly::ALIGNMENT`, 4).
#[repr(C, align(16))]
struct Aligned<const N: usize>([u8; N]);

/// A `static` handed out once as `&'static mut [u8]`.
struct Memory<const N: usize>(UnsafeCell<Aligned<N>>);

// SAFETY: the bytes are reached only through the single `&'static mut [u8]` that `take`
// hands out; the static itself is never read.
unsafe impl<const N: usize> Sync for Memory<N> {}

static ARENA: Memory<ARENA_BYTES> = Memory(UnsafeCell::new(Aligned([0; ARENA_BYTES])));
static STAGING: Memory<STAGING_BYTES> = Memory(UnsafeCell::new(Aligned([0; STAGING_BYTES])));
/// Whether the memories have been handed out.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The arena and the staging; `None` after the first call.
pub fn take() -> Option<(&'static mut [u8], &'static mut [u8])> {
    if TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: the swap lets exactly one caller through, once, so these are the only
    // references to the two statics that ever exist, and statics live for 'static.
    unsafe { Some((&mut (*ARENA.0.get()).0, &mut (*STAGING.0.get()).0)) }
}
