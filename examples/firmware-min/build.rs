//! Puts the repository's `memory.x` (QEMU mps2-an386) where cortex-m-rt's `link.x` finds it,
//! as the other firmware do, and, without the `defmt` feature, an empty `defmt.x`: the root
//! `.cargo/config.toml` links every bare-metal Arm binary with `-Tdefmt.x`, which the `defmt`
//! crate provides only when it is linked in.

use std::{env, fs};

#[path = "../firmware-common/memory_x.rs"]
mod memory_x;

fn main() {
    let out = memory_x::provide("../../memory.x");
    let defmt_x = out.join("defmt.x");
    if env::var_os("CARGO_FEATURE_DEFMT").is_none() {
        fs::write(&defmt_x, "/* defmt is not linked: nothing to add */\n")
            .expect("writing defmt.x to OUT_DIR");
    } else {
        // The defmt crate's own defmt.x must be the one found.
        let _ = fs::remove_file(&defmt_x);
    }
}
