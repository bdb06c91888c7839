//! Puts this package's `memory.x` (QEMU mps3-an547) where cortex-m-rt's `link.x` finds it:
//! `link.x` does `INCLUDE memory.x`, searched in the linker's library path.

#[path = "../firmware-common/memory_x.rs"]
mod memory_x;

fn main() {
    memory_x::provide("memory.x");
}
