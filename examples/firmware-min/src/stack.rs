//! The stack's high-water mark, by painting: at boot every word between the end of the
//! statics (`_stack_end`, cortex-m-rt's symbol) and just below the current stack pointer is
//! set to [`PAINT`]; after the run, the lowest word that no longer holds it is the deepest the
//! stack reached. The figure counts from the top of the stack (`_stack_start`), so it includes
//! the frames of the reset handler and `main` as well as every runtime frame.
//!
//! A word the run wrote with the very value [`PAINT`] would go unnoticed only if every word
//! below it did too; the figure is a lower bound to within such a run of words, which the
//! pattern makes unlikely.

/// The pattern. Not a value the runtime's tables start with (zeros, small counts, pointers
/// into RAM at 0x2000_0000 or flash at 0x0).
const PAINT: u32 = 0xC5AC_CE55;
/// Words left unpainted below the stack pointer: `paint`'s own frame, should the compiler
/// spill there.
const MARGIN_WORDS: usize = 16;

extern "C" {
    /// The top of the stack (it grows down from here).
    static _stack_start: u32;
    /// The lowest address the stack may reach: the end of `.bss` and `.uninit`.
    static _stack_end: u32;
}

/// The stack's limits, `(lowest, top)` addresses.
fn limits() -> (usize, usize) {
    // Only the symbols' addresses are taken (safe on an extern static); nothing is read
    // through them.
    (
        core::ptr::addr_of!(_stack_end) as usize,
        core::ptr::addr_of!(_stack_start) as usize,
    )
}

/// Paints the unused stack. Call it first thing in `main`, with no interrupt enabled.
#[inline(never)]
pub fn paint() {
    let (lowest, _) = limits();
    let sp = cortex_m::register::msp::read() as usize;
    let end = sp.saturating_sub(MARGIN_WORDS * 4);
    let mut at = lowest;
    while at < end {
        // SAFETY: `at` is a word-aligned address (the linker asserts `_stack_end % 4 == 0`)
        // between the end of the statics and below the stack pointer minus a margin: memory
        // that holds no Rust object (nothing is allocated there but stack frames, and all the
        // live ones are above the stack pointer), with no interrupt enabled that could push a
        // frame there meanwhile.
        unsafe { core::ptr::write_volatile(at as *mut u32, PAINT) };
        at += 4;
    }
}

/// Bytes of stack used since [`paint`]: from its top down to the lowest word not holding the
/// pattern any more.
pub fn used() -> usize {
    let (lowest, top) = limits();
    let mut at = lowest;
    // SAFETY: word-aligned addresses of the stack region below the current frames, read as
    // plain words; every one was written by `paint` or by a frame since, so it is
    // initialised, and nothing else writes it concurrently.
    while at < top && unsafe { core::ptr::read_volatile(at as *const u32) } == PAINT {
        at += 4;
    }
    top - at
}
