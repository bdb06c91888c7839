//! Selects the Arm DSP-extension kernels at build time.
//!
//! Rust's `target_feature = "dsp"` is an unstable Arm feature: stable rustc evaluates
//! `cfg(target_feature = "dsp")` to false on every target, even thumbv7em, so the crate cannot
//! ask for it directly. This script decides from what Cargo tells it and sets `cfg(npu_arm_dsp)`:
//!
//! - `thumbv7em-*` (Armv7E-M: Cortex-M4, M7): the DSP extension is part of the architecture;
//! - `thumbv8m.main-*` (Armv8-M Mainline): it is optional, so only when the build names a core
//!   that has it (`-C target-cpu=cortex-m33|cortex-m35p|cortex-m55|cortex-m85`) or the feature
//!   itself (`-C target-feature=+dsp`, or `+mve`, which requires it);
//! - everything else (thumbv6m, thumbv7m, RISC-V, the host): the portable kernels.
//!
//! `NPU_KERNELS_DSP=0` turns the DSP kernels off (and `=1` on, for an Arm target this script
//! does not know), e.g. to measure the portable path on a DSP core.
//!
//! Helium (MVE, Armv8.1-M) is decided the same way and sets `cfg(npu_arm_mve)`: on
//! `thumbv8m.main-*` when the build names a core that has it (`target-cpu=cortex-m55` or
//! `cortex-m85`) or the features (`+mve` or `+mve.fp`, with `+lob`: the Helium kernels' loops
//! use Armv8.1-M's low-overhead branches, which `+mve` alone does not enable), and only
//! together with the DSP kernels (every Helium core has the DSP extension, and the Helium
//! kernels use both; MVE's inline assembly only assembles when the build enables it).
//! `NPU_KERNELS_MVE=0` turns the Helium kernels off (leaving the DSP ones), e.g. to measure the
//! DSP path on a Cortex-M55.

use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(npu_arm_dsp)");
    println!("cargo::rustc-check-cfg=cfg(npu_arm_mve)");
    println!("cargo::rerun-if-env-changed=NPU_KERNELS_DSP");
    println!("cargo::rerun-if-env-changed=NPU_KERNELS_MVE");
    let target = env::var("TARGET").unwrap_or_default();
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let flags: Vec<&str> = flags.split('\x1f').collect();
    let dsp = match env::var("NPU_KERNELS_DSP").as_deref() {
        Ok("0") => false,
        Ok("1") => target.starts_with("thumb"),
        _ => {
            target.starts_with("thumbv7em-")
                || (target.starts_with("thumbv8m.main-") && names_dsp_core(&flags))
        }
    };
    if dsp {
        println!("cargo::rustc-cfg=npu_arm_dsp");
    }
    let mve = dsp
        && env::var("NPU_KERNELS_MVE").as_deref() != Ok("0")
        && target.starts_with("thumbv8m.main-")
        && names_mve_core(&flags);
    if mve {
        println!("cargo::rustc-cfg=npu_arm_mve");
    }
}

/// Whether the rustflags pick a core with Helium (MVE), or the features (MVE and the
/// low-overhead branches).
fn names_mve_core(flags: &[&str]) -> bool {
    names_core_or_feature(flags, &["cortex-m55", "cortex-m85"], &[])
        || (names_core_or_feature(flags, &[], &["+mve", "+mve.fp"])
            && names_core_or_feature(flags, &[], &["+lob"]))
}

/// Whether the rustflags pick an Armv8-M Mainline core with the DSP extension, or the feature.
fn names_dsp_core(flags: &[&str]) -> bool {
    const CORES: [&str; 4] = ["cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85"];
    names_core_or_feature(flags, &CORES, &["+dsp", "+mve", "+mve.fp"])
}

/// Whether the rustflags name one of `cores` (`-C target-cpu`) or enable one of `features`
/// (`-C target-feature`).
fn names_core_or_feature(flags: &[&str], cores: &[&str], features: &[&str]) -> bool {
    // `-C target-cpu=X` arrives as two flags or as `-Ctarget-cpu=X`; either way one flag
    // ends with the assignment.
    flags.iter().any(|f| {
        let f = f.trim_start_matches("-C");
        if let Some(cpu) = f.strip_prefix("target-cpu=") {
            return cores.contains(&cpu);
        }
        if let Some(list) = f.strip_prefix("target-feature=") {
            return list.split(',').any(|feat| features.contains(&feat));
        }
        false
    })
}
