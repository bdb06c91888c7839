//! The arena the compiled model runs in, a `static` in RAM (`.bss`, zeroed at reset), handed
//! out once as `&'static mut [u8]`.
//!
//! Its size is the image's (`npu-sim compile` prints it: kws_dscnn's activations, placed by
//! the arena plan the host made). Nothing else of the runtime lives in RAM but the stack.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Bytes of the arena.
pub const ARENA_BYTES: usize = 16_000;

/// The arena's bytes, at the alignment the image asks for (16).
#[repr(C, align(16))]
struct Aligned([u8; ARENA_BYTES]);

/// The arena, handed out once.
struct Arena {
    bytes: UnsafeCell<Aligned>,
    taken: AtomicBool,
}

// SAFETY: the bytes are reached only through the single `&'static mut [u8]` that `take` hands
// out (its flag lets one caller through, once); nothing else reads them.
unsafe impl Sync for Arena {}

static ARENA: Arena = Arena {
    bytes: UnsafeCell::new(Aligned([0; ARENA_BYTES])),
    taken: AtomicBool::new(false),
};

/// The arena; `None` after the first call.
pub fn take() -> Option<&'static mut [u8]> {
    if ARENA.taken.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: the swap lets exactly one caller through, once, so this is the only reference
    // to the buffer that ever exists, and the static lives for 'static.
    unsafe { Some(&mut (*ARENA.bytes.get()).0) }
}
