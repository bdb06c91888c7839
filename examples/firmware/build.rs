//! Puts the repository's `memory.x` (QEMU mps2-an386 layout with the NPU arena region) where
//! cortex-m-rt's `link.x` finds it: `link.x` does `INCLUDE memory.x`, searched in the linker's
//! library path. Do not add a `memory.x` to this package's root: it would shadow this one.

#[path = "../firmware-common/memory_x.rs"]
mod memory_x;

fn main() {
    memory_x::provide("../../memory.x");
}
