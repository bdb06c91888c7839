//! The HAL conformance suite (`npu_compute::hal::conformance`) against the null NPU, on the
//! target.
//!
//! # Why
//!
//! The null NPU ([`crate::null_npu`]) stands in for a board driver in the dispatch measurement,
//! so its figures mean something only if it keeps the rules the server relies on: increasing
//! fences, in-order completion per queue, dependencies, `QueueFull` with its declared
//! capacity, `UnknownFence`, interrupts and waits that behave. Running the suite here checks
//! that, and shows a driver author the suite running `no_std` on a Cortex-M4F, from firmware,
//! with a kilobyte of host memory.
//!
//! It runs after the measurements, on a null NPU of its own, so that they measure the same
//! program state as before. Building `npu-compute` with the suite still moves their figures a
//! little: with the crate's extra code in the LTO module, LLVM merges a few stores on the
//! planned-job path differently (+2 instructions per planned job, measured; an empty feature
//! changes nothing).
//!
//! The null NPU moves no bytes, and it validates queues and operators but not regions
//! (checking every region would add to the very dispatch cost it exists to measure): the
//! options say so, and the report lists the checks skipped for each reason.

use defmt::Display2Format;
use npu_compute::hal::conformance::{self, Failure, Options, Outcome, Summary};
use npu_sim::AlignedMemory;

use crate::null_npu::NullNpu;

/// Bytes of the null NPU's host memory here: the suite needs 512 at alignment 16.
const HOST_BYTES: usize = 1024;

/// What the null NPU does: it moves no bytes and validates no regions; it retires everything
/// at the first wait, so a few waits are plenty.
const OPTIONS: Options = Options {
    moves_bytes: false,
    validates_regions: false,
    max_waits: 16,
};

/// Why the suite did not pass.
#[derive(defmt::Format)]
pub enum ConformanceError {
    /// The host buffer was already taken.
    MemoryTaken,
    /// `failed` checks failed; the first one.
    Failed {
        /// Checks failed.
        failed: u8,
        /// The first failure.
        first: Failure,
    },
}

/// Runs every check against a fresh null NPU, logs one line per check and the summary, and
/// returns the summary when no check failed.
pub fn run() -> Result<Summary, ConformanceError> {
    let host = cortex_m::singleton!(: AlignedMemory<HOST_BYTES> = AlignedMemory::new())
        .ok_or(ConformanceError::MemoryTaken)?
        .as_mut_slice();
    let mut npu = NullNpu::new(host);
    let report = conformance::run(&mut npu, &OPTIONS);
    for (check, outcome) in report.iter() {
        match outcome {
            Outcome::Passed => defmt::info!("conformance: pass {=str}", check.name()),
            Outcome::Skipped(skip) => defmt::info!(
                "conformance: skip {=str}: {}",
                check.name(),
                Display2Format(skip)
            ),
            Outcome::Failed(failure) => {
                defmt::error!("conformance: FAIL {}", Display2Format(failure))
            }
        }
    }
    let summary = report.summary();
    defmt::info!(
        "conformance: null NPU: {} ({=u64} jobs submitted); Report {=usize} bytes",
        Display2Format(&summary),
        npu.submitted(),
        core::mem::size_of::<conformance::Report>()
    );
    match report.first_failure() {
        Some(first) => Err(ConformanceError::Failed {
            failed: summary.failed,
            first: *first,
        }),
        None => Ok(summary),
    }
}
