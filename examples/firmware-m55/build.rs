//! Puts this package's `memory.x` (QEMU mps3-an547) where cortex-m-rt's `link.x` finds it:
//! `link.x` does `INCLUDE memory.x`, searched in the linker's library path.

use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let memory_x = manifest_dir.join("memory.x");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    let layout =
        fs::read(&memory_x).unwrap_or_else(|e| panic!("reading {}: {e}", memory_x.display()));
    fs::write(out.join("memory.x"), layout).expect("writing memory.x to OUT_DIR");

    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={}", memory_x.display());
    println!("cargo:rerun-if-changed=build.rs");
}
