//! Puts the repository's `memory.x` (QEMU mps2-an386) where cortex-m-rt's `link.x` finds it,
//! as the other firmware do, and, without the `defmt` feature, an empty `defmt.x`: the root
//! `.cargo/config.toml` links every bare-metal Arm binary with `-Tdefmt.x`, which the `defmt`
//! crate provides only when it is linked in.

use std::path::PathBuf;
use std::{env, fs};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let memory_x = manifest_dir.join("../../memory.x");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    let layout =
        fs::read(&memory_x).unwrap_or_else(|e| panic!("reading {}: {e}", memory_x.display()));
    fs::write(out.join("memory.x"), layout).expect("writing memory.x to OUT_DIR");
    let defmt_x = out.join("defmt.x");
    if env::var_os("CARGO_FEATURE_DEFMT").is_none() {
        fs::write(&defmt_x, "/* defmt is not linked: nothing to add */\n")
            .expect("writing defmt.x to OUT_DIR");
    } else {
        // The defmt crate's own defmt.x must be the one found.
        let _ = fs::remove_file(&defmt_x);
    }

    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={}", memory_x.display());
    println!("cargo:rerun-if-changed=build.rs");
}
