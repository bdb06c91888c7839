//! A firmware's two memories, the arena (the driver's device memory) and the host staging, as
//! one zero-initialised `static` (`.bss`) whose bytes are handed out once as
//! `&'static mut [u8]`: `static MEMORIES: Memories<ARENA, STAGING> = Memories::new();`, then
//! `MEMORIES.take()`. Included by path; each firmware chooses the sizes.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes with the alignment the HAL's regions need (16 covers `CpuOnly::ALIGNMENT` and the
/// simulator's).
#[repr(C, align(16))]
struct Aligned<const N: usize>([u8; N]);

/// An arena of `A` bytes and a staging of `S` bytes, handed out once.
pub struct Memories<const A: usize, const S: usize> {
    arena: UnsafeCell<Aligned<A>>,
    staging: UnsafeCell<Aligned<S>>,
    taken: AtomicBool,
}

// SAFETY: the bytes are reached only through the single pair of `&'static mut [u8]` that
// `take` hands out (its flag lets one caller through, once); nothing else reads them.
unsafe impl<const A: usize, const S: usize> Sync for Memories<A, S> {}

impl<const A: usize, const S: usize> Memories<A, S> {
    /// Both memories zeroed, not yet handed out.
    pub const fn new() -> Self {
        Memories {
            arena: UnsafeCell::new(Aligned([0; A])),
            staging: UnsafeCell::new(Aligned([0; S])),
            taken: AtomicBool::new(false),
        }
    }

    /// The arena and the staging; `None` after the first call.
    #[allow(
        clippy::mut_from_ref,
        reason = "the flag hands the buffers out once, so these are their only references"
    )]
    pub fn take(&'static self) -> Option<(&'static mut [u8], &'static mut [u8])> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the swap lets exactly one caller through, once, so these are the only
        // references to the two buffers that ever exist, and `self` lives for 'static.
        unsafe { Some((&mut (*self.arena.get()).0, &mut (*self.staging.get()).0)) }
    }
}
