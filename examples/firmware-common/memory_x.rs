//! A firmware's memory layout where cortex-m-rt's `link.x` finds it: `link.x` does
//! `INCLUDE memory.x`, searched in the linker's library path, so a build script copies the
//! layout into its `OUT_DIR` and adds that to the path. Included by each firmware's `build.rs`
//! with `#[path]`.

use std::path::PathBuf;
use std::{env, fs};

/// Copies `layout` (a path relative to the package) to `OUT_DIR` as `memory.x`, puts `OUT_DIR`
/// on the linker's search path and returns it (for other linker scripts a build adds there).
pub fn provide(layout: &str) -> PathBuf {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let memory_x = manifest_dir.join(layout);
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    let bytes =
        fs::read(&memory_x).unwrap_or_else(|e| panic!("reading {}: {e}", memory_x.display()));
    fs::write(out.join("memory.x"), bytes).expect("writing memory.x to OUT_DIR");

    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={}", memory_x.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../firmware-common/memory_x.rs");
    out
}
