//! A conformance suite for [`Npu`] drivers (cargo feature `conformance`).
//!
//! # Why
//!
//! The compute server never looks behind the HAL: it trusts its driver to keep the rules of
//! the [`Npu`] contract, and most broken rules do not fail loudly. A driver that completes a
//! job before its dependency, or one queue's jobs out of order, makes the server read stale
//! bytes now and then; a driver that accepts a misaligned region corrupts memory on the board;
//! a driver that drops a job when its table is full makes a model's output wrong. Those show up
//! as wrong inferences long after the driver was written. This suite drives the driver
//! directly, the way the server does, and names the rule that does not hold, what was expected
//! and what the driver did.
//!
//! It is generic over any [`Npu`], `no_std`, allocates nothing, has no `unsafe` and never
//! panics: [`run`] returns a [`Report`] with one [`Outcome`] per [`Check`]. A driver author runs
//! it from a host test (against a driver over simulated registers, or a wrapper of
//! `npu_sim::SimNpu`) or from firmware on the board, and fails the test or the boot when
//! [`Report::is_ok`] is false.
//!
//! # Checks
//!
//! [`Check::ALL`] lists them in the order they run; [`Check::rule`] states each rule. In short:
//! the capabilities are consistent; fences increase and one queue's jobs complete in order;
//! dependencies across queues hold (DMA → unit 0, unit 0 → unit 1) and dependents read their
//! dependencies' bytes; transfers and flash mappings move the right bytes; misaligned,
//! out-of-bounds, wrong-space, overlapping, wrong-queue and unsupported jobs are refused with
//! the contract's [`HalError`] and leave the driver usable; interrupts and waits behave; a full
//! in-flight table answers [`HalError::QueueFull`] with the declared capacity; an unknown fence
//! answers [`HalError::UnknownFence`].
//!
//! A check is skipped, never passed, when it cannot run: the driver moves no bytes
//! ([`Options::moves_bytes`]), does not validate regions ([`Options::validates_regions`]), has
//! one execution unit, declares none of the operators the suite uses, or offers too little
//! memory. The [`Skip`] says why.
//!
//! # What it needs of the driver
//!
//! - **Idle at the start.** Call [`run`] before handing the driver to a server, or when
//!   everything submitted has completed. Every check leaves it idle again: it waits for every
//!   job it submitted, so the driver is idle when [`run`] returns (unless a job never
//!   completes, which fails the check).
//! - **Memory.** With alignment `a`, the suite works in blocks of `s = max(32, a)` bytes and
//!   `8·s` bytes: it overwrites the first `3·s + 16·s` bytes of device memory and the first
//!   `16·s` bytes of host memory (608 and 512 bytes at `a = 16`; see [`requirements`]). A
//!   driver that declares less has its checks skipped with [`Skip::NotEnoughMemory`].
//!   Region checks also name offsets past the end of both memories, which a correct driver
//!   refuses without touching anything.
//! - **An operator on the execution units.** Jobs on [`Queue::Unit`] are compute jobs of one
//!   tiny operator the driver declares in [`Capabilities::ops`]: RESHAPE in int8 (a byte copy)
//!   or else RELU in f32 (a copy of the suite's non-negative data). Without either, the checks
//!   that need a unit job are skipped.
//! - **Flash.** A driver that [reads flash](Capabilities::reads_flash) gets a 64-byte static
//!   of the suite mapped with [`Npu::map_flash`] and unmapped again; region checks name segment
//!   [`MAX_FLASH_SEGMENTS`], which no driver can have mapped.
//! - **Time.** Each wait calls [`Npu::wait_for_event`] at most [`Options::max_waits`] times
//!   before failing with "never completed". On hardware `wait_for_event` is a `WFI` that any
//!   interrupt ends; raise the bound if other interrupts are frequent.
//!
//! On the stack it keeps the [`Report`] (1 512 bytes on a Cortex-M4, 72 per check) and a
//! list of 32 fences (256 bytes), besides the driver's own frames.
//!
//! # Example
//!
//! The simulator stands in for a board driver here; on a board, pass your driver and
//! [`Options`] that say what it does.
//!
//! ```
//! use npu_compute::hal::conformance::{self, Options};
//! use npu_sim::{AlignedMemory, SimConfig, SimNpu};
//!
//! let mut device = AlignedMemory::<4096>::new();
//! let mut host = AlignedMemory::<4096>::new();
//! let mut npu: SimNpu =
//!     SimNpu::new(device.as_mut_slice(), host.as_mut_slice(), SimConfig::default()).unwrap();
//!
//! let report = conformance::run(&mut npu, &Options::new());
//! // One line per check: "pass", "FAIL" with the reason, or "skip" with the reason.
//! println!("{report}");
//! match report.result() {
//!     Ok(summary) => println!("{summary}"), // "19 passed, 0 failed, 2 skipped"
//!     // A sentence: the check, what the suite did, what it expected, what the driver did.
//!     Err(failure) => panic!("{failure}"),
//! }
//! ```

mod capabilities;
mod check;
mod dependencies;
mod fences;
mod interrupts;
mod jobs;
mod layout;
mod queue_full;
mod refusals;
mod regions;
mod report;
mod suite;
mod transfers;

pub use check::Check;
pub use report::{Answer, Failure, Outcome, Problem, Report, Skip, Summary};

use capabilities::capabilities;
use layout::{Layout, BIG_BLOCKS};
use suite::Suite;

use super::{Npu, Space};

#[cfg(doc)]
use super::{Capabilities, HalError, Queue, MAX_FLASH_SEGMENTS};

/// What the suite may assume about the driver under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Options {
    /// Whether jobs really move bytes. `false` for a driver that only does the bookkeeping
    /// (a null driver measuring dispatch costs): the checks that compare data are skipped.
    pub moves_bytes: bool,
    /// Whether `submit` validates regions (alignment, bounds, spaces, overlap, flash segments),
    /// as the contract requires. `false` for a driver that trusts its caller to submit only
    /// valid regions: the checks that submit invalid regions are skipped (and reported so),
    /// since such a driver would run them.
    pub validates_regions: bool,
    /// Most calls of [`Npu::wait_for_event`] one wait may take before its job is declared
    /// never completed.
    pub max_waits: u32,
}

impl Options {
    /// A driver that moves bytes and validates regions, with 10 000 waits per job.
    pub const fn new() -> Self {
        Options {
            moves_bytes: true,
            validates_regions: true,
            max_waits: 10_000,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Self::new()
    }
}

/// Memory the suite needs of a driver (see [`requirements`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Requirements {
    /// Bytes of device memory, from offset 0, that the suite overwrites.
    pub device_bytes: u32,
    /// Bytes of host memory, from offset 0, that the suite overwrites.
    pub host_bytes: u32,
}

/// Memory the suite needs of a driver whose [`Capabilities::alignment`] is `alignment` (a power
/// of two): `3·s + 16·s` bytes of device memory and `16·s` of host memory, `s = max(32,
/// alignment)`. Saturates at `u32::MAX`, which no driver can offer (see [`run_check`]).
pub const fn requirements(alignment: u32) -> Requirements {
    let small = Layout::new(alignment).small as u64;
    let device = small * (3 + 2 * BIG_BLOCKS);
    let host = small * 2 * BIG_BLOCKS;
    Requirements {
        device_bytes: if device > u32::MAX as u64 {
            u32::MAX
        } else {
            device as u32
        },
        host_bytes: if host > u32::MAX as u64 {
            u32::MAX
        } else {
            host as u32
        },
    }
}

/// Runs every check of [`Check::ALL`] against `npu`, in that order, and reports each one.
///
/// The driver must be idle when called; it is idle again when this returns, unless a job never
/// completed (that check then fails).
pub fn run<N: Npu + ?Sized>(npu: &mut N, options: &Options) -> Report {
    let mut outcomes = [Outcome::Passed; Check::COUNT];
    for (outcome, check) in outcomes.iter_mut().zip(Check::ALL) {
        *outcome = run_check(npu, options, check);
    }
    Report { outcomes }
}

/// Runs one check against `npu` (the driver must be idle; it is idle again afterwards).
///
/// A check other than [`Check::Capabilities`] is skipped when the capabilities are
/// inconsistent or declare too little memory.
pub fn run_check<N: Npu + ?Sized>(npu: &mut N, options: &Options, check: Check) -> Outcome {
    let caps = npu.capabilities();
    let valid = capabilities(npu, caps);
    if check == Check::Capabilities {
        return match valid {
            Ok(()) => Outcome::Passed,
            Err(stop) => stop.into_outcome(check),
        };
    }
    if valid.is_err() {
        return Outcome::Skipped(Skip::CapabilitiesInvalid);
    }
    let needed = requirements(caps.alignment);
    for (space, needed, declared) in [
        (Space::Device, needed.device_bytes, caps.device_memory_bytes),
        (Space::Host, needed.host_bytes, caps.host_memory_bytes),
    ] {
        // A saturated requirement cannot be met: the layout's offsets would not fit a u32.
        if declared < needed || needed == u32::MAX {
            return Outcome::Skipped(Skip::NotEnoughMemory {
                space,
                needed,
                declared,
            });
        }
    }
    let mut suite = Suite::new(npu, *options, caps, check);
    let result = suite.check(check);
    // Every check leaves the driver idle, whatever happened.
    let drained = suite.drain();
    match (result, drained) {
        (Err(stop), _) => stop.into_outcome(check),
        (Ok(()), Err(stop)) => stop.into_outcome(check),
        (Ok(()), Ok(())) => Outcome::Passed,
    }
}
