//! [`Check::Capabilities`](super::Check::Capabilities): what the driver declares is consistent
//! with itself and with its host memory. Every other check needs it to hold.

use super::suite::{fail, Step};
use super::Problem;
use crate::hal::{Capabilities, Npu, MAX_EXECUTION_UNITS};

/// The capabilities check, shared by [`run_check`](super::run_check).
pub(super) fn capabilities<N: Npu + ?Sized>(npu: &mut N, caps: Capabilities) -> Step {
    const STEP: &str = "read capabilities() and host_memory()";
    let bad = |field, value: u64, rule| fail(STEP, Problem::BadCapability { field, value, rule });
    if npu.capabilities() != caps {
        return bad(
            "capabilities()",
            0,
            "two calls answered differently; capabilities must not change",
        );
    }
    if !caps.alignment.is_power_of_two() {
        return bad(
            "Capabilities::alignment",
            caps.alignment.into(),
            "it must be a power of two",
        );
    }
    if !caps.flash_alignment.is_power_of_two() {
        return bad(
            "Capabilities::flash_alignment",
            caps.flash_alignment.into(),
            "it must be a power of two",
        );
    }
    if caps.execution_units == 0 || usize::from(caps.execution_units) > MAX_EXECUTION_UNITS {
        return bad(
            "Capabilities::execution_units",
            caps.execution_units.into(),
            "it must be 1 to MAX_EXECUTION_UNITS (a capacity of the build: npu-compute's \
             features units-2, units-4, units-8)",
        );
    }
    if caps.max_in_flight == 0 {
        return bad(
            "Capabilities::max_in_flight",
            0,
            "at least one job must fit in flight",
        );
    }
    let host = npu.host_memory();
    let len = host.len() as u64;
    // The address only, to check its alignment: DMA offsets are relative to it.
    let address = host.as_ptr() as usize as u64;
    if len != u64::from(caps.host_memory_bytes) {
        return bad(
            "host_memory().len()",
            len,
            "it must equal Capabilities::host_memory_bytes",
        );
    }
    if len != 0 && !address.is_multiple_of(u64::from(caps.alignment)) {
        return bad(
            "host_memory()'s address",
            address,
            "it must be a multiple of Capabilities::alignment",
        );
    }
    Ok(())
}
