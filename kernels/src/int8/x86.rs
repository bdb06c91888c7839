//! AVX2 building blocks of the int8 kernels on x86-64 hosts (`std` feature): the CPU is asked
//! at run time whether it has AVX2 ([`has_avx2`]), and the portable kernels run when it does
//! not, so a host binary runs on any x86-64.
//!
//! On the host the simulator runs every operator on these kernels, and the portable loops,
//! written for a Cortex-M's registers, leave most of an x86-64 core idle. Each module here
//! vectorises one job and is tested byte for byte against the portable path it replaces:
//!
//! - [`requant`]: TFLM's requantization of eight 32-bit lanes (shared by everything below and
//!   by the convolutions in `conv::x86`);
//! - [`dot`]: dot products of int8 rows, the inner loop of FULLY_CONNECTED;
//! - [`add`]: elementwise int8 ADD without broadcasting.
//!
//! Every `unsafe` block is a call into a `#[target_feature(enable = "avx2")]` function after
//! [`has_avx2`] said yes; the vector code itself is safe (loads go through `bytemuck` from
//! checked slices).

pub(crate) mod add;
pub(crate) mod dot;
pub(crate) mod requant;

/// Whether this CPU has AVX2 (`std` caches the answer).
pub(crate) fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// Whether the tests of the AVX2 paths can run here: whether this CPU has AVX2. One without it
/// skips them, unless `NPU_KERNELS_REQUIRE_AVX2` is set: `.ci/run` sets it, so that a CI
/// machine without AVX2 fails rather than passing with those paths untested.
#[cfg(test)]
pub(crate) fn avx2_for_tests() -> bool {
    let has = has_avx2();
    assert!(
        has || std::env::var_os("NPU_KERNELS_REQUIRE_AVX2").is_none(),
        "NPU_KERNELS_REQUIRE_AVX2 is set, but this CPU has no AVX2: the x86-64 kernels' tests \
         cannot run (unset it to skip them)"
    );
    has
}
