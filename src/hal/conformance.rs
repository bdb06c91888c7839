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

use core::fmt;

use crate::ops::{Op, ReluF32, Reshape};

use super::{
    Capabilities, Fence, HalError, Job, JobKind, Npu, Queue, Region, Space, Variant,
    MAX_EXECUTION_UNITS, MAX_FLASH_SEGMENTS, MAX_JOB_DEPS,
};

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

// ---------------------------------------------------------------------------------------------
// Checks and results
// ---------------------------------------------------------------------------------------------

/// One rule of the [`Npu`] contract that the suite checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Check {
    /// [`Npu::capabilities`] is consistent with itself and with [`Npu::host_memory`].
    Capabilities,
    /// Fences increase; one queue's jobs complete in submission order.
    FenceOrder,
    /// A unit job that depends on a DMA transfer never completes before it.
    DependencyDmaToUnit,
    /// A job on unit 1 that depends on a job of unit 0 never completes before it.
    DependencyUnitToUnit,
    /// Dependent jobs read the bytes their dependencies wrote.
    DependencyData,
    /// Host → device → host transfers give back the same bytes.
    TransferRoundTrip,
    /// A device → device transfer copies the bytes.
    DeviceCopy,
    /// [`Npu::map_flash`] answers as [`Capabilities::reads_flash`] says, mapped bytes are
    /// readable and an unmapped segment is refused.
    FlashMapping,
    /// Misaligned regions are refused with [`HalError::Misaligned`].
    Misaligned,
    /// Regions past the end of their memory are refused with [`HalError::OutOfBounds`].
    OutOfBounds,
    /// A unit that does not exist is refused with [`HalError::NoSuchUnit`], a compute job on
    /// the DMA queue with [`HalError::Unsupported`].
    BadQueue,
    /// An operator the driver does not declare is refused with [`HalError::Unsupported`].
    UnsupportedOp,
    /// A flash segment that is not mapped is refused with [`HalError::FlashNotMapped`].
    FlashNotMapped,
    /// Host → host transfers, writes into flash, transfers of unequal lengths and compute jobs
    /// on host memory are refused with [`HalError::WrongSpace`].
    WrongSpace,
    /// Overlapping source and destination are refused with [`HalError::Overlap`].
    Overlap,
    /// After refusing jobs the driver accepts and completes valid ones.
    UsableAfterRefusal,
    /// [`Npu::on_interrupt`] with nothing pending is harmless.
    SpuriousInterrupt,
    /// Completion is observed through [`Npu::wait_for_event`], [`Npu::on_interrupt`] and
    /// [`Npu::poll`].
    InterruptCompletion,
    /// [`Npu::wait_for_event`] returns when nothing is in flight.
    IdleWait,
    /// One job more than [`Capabilities::max_in_flight`] is refused with
    /// [`HalError::QueueFull`] (or accepted after the driver retired some), and submission
    /// works again after a wait.
    QueueFull,
    /// Polling a fence never issued answers [`HalError::UnknownFence`].
    UnknownFence,
}

impl Check {
    /// Number of checks.
    pub const COUNT: usize = 21;

    /// Every check, in the order [`run`] runs them.
    pub const ALL: [Check; Check::COUNT] = [
        Check::Capabilities,
        Check::FenceOrder,
        Check::DependencyDmaToUnit,
        Check::DependencyUnitToUnit,
        Check::DependencyData,
        Check::TransferRoundTrip,
        Check::DeviceCopy,
        Check::FlashMapping,
        Check::Misaligned,
        Check::OutOfBounds,
        Check::BadQueue,
        Check::UnsupportedOp,
        Check::FlashNotMapped,
        Check::WrongSpace,
        Check::Overlap,
        Check::UsableAfterRefusal,
        Check::SpuriousInterrupt,
        Check::InterruptCompletion,
        Check::IdleWait,
        Check::QueueFull,
        Check::UnknownFence,
    ];

    /// A short name, as reports print it.
    pub const fn name(self) -> &'static str {
        match self {
            Check::Capabilities => "capabilities",
            Check::FenceOrder => "fence order",
            Check::DependencyDmaToUnit => "dependency DMA -> unit",
            Check::DependencyUnitToUnit => "dependency unit -> unit",
            Check::DependencyData => "dependency data",
            Check::TransferRoundTrip => "transfer round trip",
            Check::DeviceCopy => "device copy",
            Check::FlashMapping => "flash mapping",
            Check::Misaligned => "misaligned regions",
            Check::OutOfBounds => "out-of-bounds regions",
            Check::BadQueue => "bad queue",
            Check::UnsupportedOp => "unsupported operator",
            Check::FlashNotMapped => "unmapped flash",
            Check::WrongSpace => "wrong space",
            Check::Overlap => "overlap",
            Check::UsableAfterRefusal => "usable after refusal",
            Check::SpuriousInterrupt => "spurious interrupt",
            Check::InterruptCompletion => "interrupt completion",
            Check::IdleWait => "idle wait",
            Check::QueueFull => "queue full",
            Check::UnknownFence => "unknown fence",
        }
    }

    /// The rule the check holds the driver to, in a sentence.
    pub const fn rule(self) -> &'static str {
        match self {
            Check::Capabilities => "capabilities() is stable and consistent: alignments are powers of two, 1 to 8 execution units, at least one job in flight, and host_memory() is as long as declared and starts on the alignment",
            Check::FenceOrder => "fences increase, and jobs on one queue complete in submission order (a later fence done implies every earlier one done), and stay done",
            Check::DependencyDmaToUnit => "a job on execution unit 0 that depends on a DMA transfer never completes before the transfer",
            Check::DependencyUnitToUnit => "a job on execution unit 1 that depends on a job of unit 0 never completes before it",
            Check::DependencyData => "a dependent job reads the bytes its dependency wrote (DMA -> unit 0 -> unit 1 -> DMA)",
            Check::TransferRoundTrip => "a host -> device transfer and a device -> host transfer give back the same bytes",
            Check::DeviceCopy => "a device -> device transfer copies the bytes",
            Check::FlashMapping => "map_flash answers FlashUnreadable when the NPU reads no flash; otherwise a mapped segment's bytes reach device memory, and after unmap_flash the segment is refused with FlashNotMapped",
            Check::Misaligned => "a region whose offset is not a multiple of the alignment is refused with Misaligned",
            Check::OutOfBounds => "a region past the end of device or host memory, or past 2^32, is refused with OutOfBounds",
            Check::BadQueue => "a job on a unit that does not exist is refused with NoSuchUnit, a compute job on the DMA queue with Unsupported",
            Check::UnsupportedOp => "a compute job whose operator the driver does not declare is refused with Unsupported",
            Check::FlashNotMapped => "a region in a flash segment that is not mapped is refused with FlashNotMapped (or FlashUnreadable on an NPU that reads no flash)",
            Check::WrongSpace => "host -> host transfers, writes into flash, transfers of unequal lengths and compute jobs on host memory are refused with WrongSpace",
            Check::Overlap => "a transfer or a compute job whose output overlaps its input is refused with Overlap",
            Check::UsableAfterRefusal => "after refusing jobs, the driver accepts and completes valid ones with increasing fences",
            Check::SpuriousInterrupt => "on_interrupt with nothing pending is harmless: completed fences stay completed and new jobs complete",
            Check::InterruptCompletion => "a job's completion is observed through wait_for_event, on_interrupt and poll, and on_interrupt while it runs is harmless",
            Check::IdleWait => "wait_for_event returns at once when nothing is in flight",
            Check::QueueFull => "one job more than max_in_flight is refused with QueueFull carrying the declared capacity (or accepted with a new fence after the driver retired finished jobs), and submission works again after a wait",
            Check::UnknownFence => "polling a fence never issued answers UnknownFence with that fence",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of one check.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome {
    /// The driver keeps the rule.
    Passed,
    /// The check could not run; the rule is untested.
    Skipped(Skip),
    /// The driver breaks the rule.
    Failed(Failure),
}

impl Outcome {
    /// Whether the check passed.
    pub const fn is_passed(&self) -> bool {
        matches!(self, Outcome::Passed)
    }

    /// Whether the check was skipped.
    pub const fn is_skipped(&self) -> bool {
        matches!(self, Outcome::Skipped(_))
    }

    /// The failure, if the check failed.
    pub const fn failure(&self) -> Option<&Failure> {
        match self {
            Outcome::Failed(failure) => Some(failure),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Passed => f.write_str("passed"),
            Outcome::Skipped(skip) => write!(f, "skipped: {skip}"),
            Outcome::Failed(failure) => write!(f, "failed: {failure}"),
        }
    }
}

/// Why a check did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Skip {
    /// [`Options::moves_bytes`] is false: no data to compare.
    NoByteMoves,
    /// [`Options::validates_regions`] is false: the driver would run invalid regions.
    RegionsNotValidated,
    /// The check needs two execution units.
    OneExecutionUnit,
    /// The driver declares neither RESHAPE int8 nor RELU f32, the operators the suite runs on
    /// execution units.
    NoUnitOp,
    /// The driver declares every operator the suite can build, so none is unsupported.
    EveryOpSupported,
    /// The alignment is 1: every offset is aligned.
    AlignmentOne,
    /// The suite's flash static is 64-byte aligned; the driver needs more.
    FlashAlignment {
        /// The alignment the driver needs.
        alignment: u32,
    },
    /// Every flash segment is already mapped.
    FlashSegmentsFull,
    /// The driver declares less memory than the suite needs ([`requirements`]).
    NotEnoughMemory {
        /// Which memory.
        space: Space,
        /// Bytes the suite needs.
        needed: u32,
        /// Bytes the driver declares.
        declared: u32,
    },
    /// [`Check::Capabilities`] fails: nothing else is meaningful.
    CapabilitiesInvalid,
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skip::NoByteMoves => f.write_str(
                "Options::moves_bytes is false (the driver moves no bytes), so no data is compared",
            ),
            Skip::RegionsNotValidated => f.write_str(
                "Options::validates_regions is false: the driver does not validate regions, as the contract requires, and would run these invalid jobs",
            ),
            Skip::OneExecutionUnit => f.write_str("the driver has one execution unit"),
            Skip::NoUnitOp => f.write_str(
                "the driver declares neither RESHAPE int8 nor RELU f32, the operators the suite runs on execution units",
            ),
            Skip::EveryOpSupported => f.write_str(
                "the driver declares every operator the suite builds (RESHAPE int8, RELU f32), so none can be refused",
            ),
            Skip::AlignmentOne => f.write_str("the alignment is 1: every offset is aligned"),
            Skip::FlashAlignment { alignment } => write!(
                f,
                "the driver needs {alignment}-byte aligned flash; the suite's flash static is 64-byte aligned"
            ),
            Skip::FlashSegmentsFull => f.write_str("every flash segment is already mapped"),
            Skip::NotEnoughMemory {
                space,
                needed,
                declared,
            } => write!(
                f,
                "the suite needs {needed} bytes of {} memory, the driver declares {declared}",
                space_name(*space)
            ),
            Skip::CapabilitiesInvalid => {
                f.write_str("the capabilities are inconsistent (see the capabilities check)")
            }
        }
    }
}

/// A broken rule: which check, what the suite did, and what went wrong.
///
/// `Display` gives one sentence, e.g. "misaligned regions: submitted a transfer into device
/// memory at an offset one byte past an aligned one: expected the driver to refuse it with
/// Misaligned { .. }, but it accepted it as Fence(12)".
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Failure {
    /// The check that failed.
    pub check: Check,
    /// What the suite did when it went wrong.
    pub step: &'static str,
    /// What the driver did, against what was expected.
    pub problem: Problem,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.check, self.step, self.problem)
    }
}

/// What a driver did wrong.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Problem {
    /// A capability breaks a rule.
    BadCapability {
        /// The field or call.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The rule it breaks.
        rule: &'static str,
    },
    /// `submit` refused a valid job.
    Refused(HalError),
    /// `submit` accepted a job the contract says it refuses.
    Accepted {
        /// The fence it returned.
        fence: Fence,
        /// The refusal expected.
        expected: HalError,
    },
    /// `submit` refused with another error than the contract's.
    WrongError {
        /// The refusal expected.
        expected: HalError,
        /// The refusal given.
        got: HalError,
    },
    /// A fence is not greater than the one issued before it.
    FenceNotIncreasing {
        /// The fence issued before.
        previous: Fence,
        /// The fence issued next.
        next: Fence,
    },
    /// A job completed while an earlier job of its queue had not.
    OutOfOrder {
        /// The earlier job, not complete.
        earlier: Fence,
        /// The later job, complete.
        later: Fence,
    },
    /// A job completed while a job it depends on had not.
    BeforeDependency {
        /// The dependency, not complete.
        dependency: Fence,
        /// The dependent job, complete.
        dependent: Fence,
    },
    /// A job did not complete within [`Options::max_waits`] waits.
    NeverCompleted {
        /// Its fence.
        fence: Fence,
        /// Waits made.
        waits: u32,
    },
    /// `poll` reported that a valid job failed.
    JobFailed {
        /// Its fence.
        fence: Fence,
        /// The error `poll` answered.
        error: HalError,
    },
    /// A byte read back differs from the byte written.
    WrongBytes {
        /// Offset in the checked data.
        offset: u32,
        /// The byte written.
        expected: u8,
        /// The byte read back.
        got: u8,
    },
    /// `poll` answered something else than the contract says.
    Poll {
        /// The fence polled.
        fence: Fence,
        /// The answer expected.
        expected: Answer,
        /// The answer given.
        got: Answer,
    },
    /// [`HalError::QueueFull`] came before [`Capabilities::max_in_flight`] jobs were in flight.
    QueueFullEarly {
        /// Jobs accepted before the refusal.
        accepted: u32,
        /// The declared capacity.
        declared: u16,
    },
    /// [`HalError::QueueFull`] carries another capacity than the declared one.
    QueueFullCapacity {
        /// [`Capabilities::max_in_flight`].
        declared: u16,
        /// The capacity in the error.
        reported: u16,
    },
    /// [`Npu::map_flash`] answered otherwise than the contract says.
    MapFlash {
        /// The answer expected (`None`: a segment).
        expected: Option<HalError>,
        /// The answer given (`Ok` segment or error).
        got: Result<u8, HalError>,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::BadCapability { field, value, rule } => {
                write!(f, "{field} is {value}, but {rule}")
            }
            Problem::Refused(error) => write!(
                f,
                "the driver refused it with {error:?}, but the job is valid for the declared capabilities"
            ),
            Problem::Accepted { fence, expected } => write!(
                f,
                "expected the driver to refuse it with {expected:?}, but it accepted it as {fence:?}"
            ),
            Problem::WrongError { expected, got } => write!(
                f,
                "expected the driver to refuse it with {expected:?}, but it refused it with {got:?}"
            ),
            Problem::FenceNotIncreasing { previous, next } => write!(
                f,
                "submit returned {next:?} after {previous:?}; fences must increase and are never reused"
            ),
            Problem::OutOfOrder { earlier, later } => write!(
                f,
                "{later:?} completed while {earlier:?}, submitted before it on the same queue, had not; jobs on one queue must complete in submission order"
            ),
            Problem::BeforeDependency {
                dependency,
                dependent,
            } => write!(
                f,
                "{dependent:?} completed while its dependency {dependency:?} had not; a job must start only after every fence in its deps"
            ),
            Problem::NeverCompleted { fence, waits } => write!(
                f,
                "{fence:?} did not complete after {waits} calls of wait_for_event (raise Options::max_waits if the driver's wait_for_event returns often)"
            ),
            Problem::JobFailed { fence, error } => write!(
                f,
                "polling {fence:?} reported {error:?}, but the job is valid"
            ),
            Problem::WrongBytes {
                offset,
                expected,
                got,
            } => write!(
                f,
                "byte {offset} read back is {got:#04x}, expected {expected:#04x}: the data did not arrive"
            ),
            Problem::Poll {
                fence,
                expected,
                got,
            } => write!(f, "poll({fence:?}) answered {got}, expected {expected}"),
            Problem::QueueFullEarly { accepted, declared } => write!(
                f,
                "the driver answered QueueFull after accepting {accepted} jobs, but declares max_in_flight {declared}"
            ),
            Problem::QueueFullCapacity { declared, reported } => write!(
                f,
                "QueueFull says capacity {reported}, but the driver declares max_in_flight {declared}"
            ),
            Problem::MapFlash { expected, got } => {
                match expected {
                    Some(e) => write!(f, "expected map_flash to answer {e:?}")?,
                    None => f.write_str("expected map_flash to map the segment")?,
                }
                match got {
                    Ok(segment) => write!(f, ", but it mapped segment {segment}"),
                    Err(e) => write!(f, ", but it answered {e:?}"),
                }
            }
        }
    }
}

/// An answer of [`Npu::poll`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Answer {
    /// `Ok(())`: complete.
    Done,
    /// `Err(WouldBlock)`: in flight.
    WouldBlock,
    /// `Err(Other(error))`.
    Error(HalError),
}

impl From<nb::Result<(), HalError>> for Answer {
    fn from(answer: nb::Result<(), HalError>) -> Self {
        match answer {
            Ok(()) => Answer::Done,
            Err(nb::Error::WouldBlock) => Answer::WouldBlock,
            Err(nb::Error::Other(e)) => Answer::Error(e),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Done => f.write_str("Ok (complete)"),
            Answer::WouldBlock => f.write_str("WouldBlock (in flight)"),
            Answer::Error(e) => write!(f, "{e:?}"),
        }
    }
}

/// Counts of a [`Report`]'s outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Summary {
    /// Checks passed.
    pub passed: u8,
    /// Checks failed.
    pub failed: u8,
    /// Checks skipped.
    pub skipped: u8,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        )
    }
}

/// The outcome of every check of a [`run`], in [`Check::ALL`] order.
///
/// `Display` prints one line per check: `pass`, `FAIL` or `skip`, the check's name and, for the
/// last two, the reason; then the [`Summary`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Report {
    outcomes: [Outcome; Check::COUNT],
}

impl Report {
    /// Each check with its outcome, in [`Check::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Check, &Outcome)> + '_ {
        Check::ALL.into_iter().zip(self.outcomes.iter())
    }

    /// The outcome of `check`.
    pub fn outcome(&self, check: Check) -> Outcome {
        self.iter()
            .find(|(c, _)| *c == check)
            // Every check is in `Check::ALL`, so this default is never used.
            .map_or(Outcome::Passed, |(_, o)| *o)
    }

    /// How many checks passed, failed and were skipped.
    pub fn summary(&self) -> Summary {
        let mut summary = Summary::default();
        for outcome in &self.outcomes {
            match outcome {
                Outcome::Passed => summary.passed += 1,
                Outcome::Failed(_) => summary.failed += 1,
                Outcome::Skipped(_) => summary.skipped += 1,
            }
        }
        summary
    }

    /// Every failure, in check order.
    pub fn failures(&self) -> impl Iterator<Item = &Failure> + '_ {
        self.outcomes.iter().filter_map(Outcome::failure)
    }

    /// The first failure, if any.
    pub fn first_failure(&self) -> Option<&Failure> {
        self.failures().next()
    }

    /// Whether no check failed (skipped checks do not count; see [`Report::summary`]).
    pub fn is_ok(&self) -> bool {
        self.first_failure().is_none()
    }

    /// The summary if no check failed, else the first failure.
    pub fn result(&self) -> Result<Summary, Failure> {
        match self.first_failure() {
            Some(failure) => Err(*failure),
            None => Ok(self.summary()),
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (check, outcome) in self.iter() {
            match outcome {
                Outcome::Passed => writeln!(f, "pass {check}")?,
                Outcome::Skipped(skip) => writeln!(f, "skip {check}: {skip}")?,
                // The failure's sentence starts with the check's name.
                Outcome::Failed(failure) => writeln!(f, "FAIL {failure}")?,
            }
        }
        write!(f, "{}", self.summary())
    }
}

fn space_name(space: Space) -> &'static str {
    match space {
        Space::Device => "device",
        Space::Host => "host",
        Space::Flash(_) => "flash",
    }
}

// ---------------------------------------------------------------------------------------------
// The driver's side: layout, data, jobs
// ---------------------------------------------------------------------------------------------

/// Small blocks in a big one.
const BIG_BLOCKS: u64 = 8;

/// Where the suite works. Device: blocks `A`, `B`, `C` of `small` bytes, then `X`, `Y` of `big`
/// bytes; host: `H0`, `H1` of `big` bytes. Small blocks carry the data of unit jobs; big ones
/// keep a queue busy, so that a job allowed to start too early finishes first and shows it.
#[derive(Clone, Copy)]
struct Layout {
    align: u32,
    small: u32,
    big: u32,
}

impl Layout {
    const fn new(alignment: u32) -> Self {
        // A power of two above 32 is a multiple of 32 and below it divides 32: `small` is a
        // multiple of the alignment either way, so every block starts aligned.
        let small = if alignment > 32 { alignment } else { 32 };
        Layout {
            align: alignment,
            small,
            big: small.saturating_mul(BIG_BLOCKS as u32),
        }
    }

    fn a(&self) -> Region {
        Region::device(0, self.small)
    }

    fn b(&self) -> Region {
        Region::device(self.small, self.small)
    }

    fn c(&self) -> Region {
        Region::device(2 * self.small, self.small)
    }

    /// `A`, `B` and `C` as one region.
    fn abc(&self) -> Region {
        Region::device(0, 3 * self.small)
    }

    fn x(&self) -> Region {
        Region::device(3 * self.small, self.big)
    }

    fn y(&self) -> Region {
        Region::device(3 * self.small + self.big, self.big)
    }

    /// The first `len` bytes of `H0`.
    fn h0(&self, len: u32) -> Region {
        Region::host(0, len)
    }

    /// The first `len` bytes of `H1`.
    fn h1(&self, len: u32) -> Region {
        Region::host(self.big, len)
    }

    /// An aligned offset at which `len` bytes cross the end of a memory of `space_bytes`:
    /// the last aligned offset inside it when the region then sticks out (the off-by-one a
    /// driver gets wrong), else the end itself. `None` past `u32::MAX`.
    fn past_end(&self, space_bytes: u32, len: u32) -> Option<u32> {
        let mask = !(u64::from(self.align) - 1);
        let last = u64::from(space_bytes.saturating_sub(1)) & mask;
        let offset = if last + u64::from(len) > u64::from(space_bytes) {
            last
        } else {
            last + u64::from(self.align)
        };
        u32::try_from(offset).ok()
    }

    /// The last aligned offset below 2^32: any region there of `small` bytes wraps a `u32`.
    fn wrapping(&self) -> u32 {
        !(self.align - 1)
    }
}

/// Byte `i` of the test data `seed`. Every fourth byte (the top byte of a little-endian `f32`)
/// is in 1..=126, so each word is a positive, normal, finite `f32` and RELU copies it exactly;
/// two seeds differ in most bytes, so stale data never passes for fresh.
const fn pattern(seed: u8, i: u32) -> u8 {
    if i % 4 == 3 {
        1 + ((seed as u32 * 7 + i / 4) % 126) as u8
    } else {
        ((seed as u32).wrapping_mul(31) ^ i.wrapping_mul(7)) as u8
    }
}

/// Data seeds each check may use (see [`Suite::next_seed`]).
const SEEDS_PER_CHECK: u8 = 8;
/// Seed of the flash probe's data: above every check's range.
const PROBE_SEED: u8 = 0xFF;
const _: () = assert!((Check::COUNT as u32) * (SEEDS_PER_CHECK as u32) < PROBE_SEED as u32);
/// Bytes of the flash probe.
const PROBE_BYTES: usize = 64;

/// Constant data for [`Check::FlashMapping`], 64-byte aligned as NPUs reading flash need.
#[repr(C, align(64))]
struct FlashProbe([u8; PROBE_BYTES]);

static FLASH_PROBE: FlashProbe = FlashProbe(probe_bytes());

const fn probe_bytes() -> [u8; PROBE_BYTES] {
    let mut bytes = [0; PROBE_BYTES];
    let mut i = 0;
    while i < PROBE_BYTES {
        bytes[i] = pattern(PROBE_SEED, i as u32);
        i += 1;
    }
    bytes
}

/// The operators the suite runs on execution units: each copies the suite's data unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UnitOp {
    /// RESHAPE (int8): a byte copy.
    Reshape,
    /// RELU f32: a copy of non-negative data.
    ReluF32,
}

impl UnitOp {
    /// In order of preference: the byte copy first.
    const ALL: [UnitOp; 2] = [UnitOp::Reshape, UnitOp::ReluF32];
}

/// The suite's only constructor of [`Op`]s: `which`, over `bytes` of input and of output
/// (`bytes` a multiple of 4). Kept in one place so that a change to `Op`'s form touches one
/// function.
fn build_op(which: UnitOp, bytes: u32) -> Op {
    match which {
        UnitOp::Reshape => Op::Reshape(Reshape { len: bytes }),
        UnitOp::ReluF32 => Op::ReluF32(ReluF32 { len: bytes / 4 }),
    }
}

fn dep_list(deps: &[Fence]) -> heapless::Vec<Fence, MAX_JOB_DEPS> {
    let mut list = heapless::Vec::new();
    for dep in deps.iter().take(MAX_JOB_DEPS) {
        // Cannot fail: at most MAX_JOB_DEPS are taken.
        let _ = list.push(*dep);
    }
    list
}

fn transfer(src: Region, dst: Region, deps: &[Fence]) -> Job<'static> {
    Job {
        kind: JobKind::Transfer { src, dst },
        queue: Queue::Dma,
        deps: dep_list(deps),
    }
}

fn compute<'o>(op: &'o Op, input: Region, output: Region, queue: Queue, deps: &[Fence]) -> Job<'o> {
    let mut inputs = heapless::Vec::new();
    // Cannot fail: one input, capacity MAX_JOB_INPUTS.
    let _ = inputs.push(input);
    Job {
        kind: JobKind::Compute {
            op,
            variant: Variant::Auto,
            inputs,
            output,
            scratch: None,
        },
        queue,
        deps: dep_list(deps),
    }
}

/// Why a check stopped early.
enum Stop {
    Skip(Skip),
    Fail(&'static str, Problem),
}

impl Stop {
    fn into_outcome(self, check: Check) -> Outcome {
        match self {
            Stop::Skip(skip) => Outcome::Skipped(skip),
            Stop::Fail(step, problem) => Outcome::Failed(Failure {
                check,
                step,
                problem,
            }),
        }
    }
}

type Step<T = ()> = Result<T, Stop>;

fn fail<T>(step: &'static str, problem: Problem) -> Step<T> {
    Err(Stop::Fail(step, problem))
}

fn skip<T>(why: Skip) -> Step<T> {
    Err(Stop::Skip(why))
}

/// Which rule an [`Suite::observe`] list of fences follows.
#[derive(Clone, Copy)]
enum Order {
    /// Jobs of one queue, in submission order.
    Queue,
    /// A chain, each job depending on the one before.
    Dependency,
}

/// Fences remembered for the final drain: more than any check keeps in flight, except the
/// queue-full burst, whose jobs share a queue (its newest fence stands for the rest).
const PENDING: usize = 32;
/// Jobs that keep a queue busy ahead of a dependency.
const BUSY_JOBS: usize = 3;

/// The capabilities check, shared by [`run_check`].
fn capabilities<N: Npu + ?Sized>(npu: &mut N, caps: Capabilities) -> Step {
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
            "it must be 1 to MAX_EXECUTION_UNITS (8)",
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
    if len != 0 && address % u64::from(caps.alignment) != 0 {
        return bad(
            "host_memory()'s address",
            address,
            "it must be a multiple of Capabilities::alignment",
        );
    }
    Ok(())
}

/// One check's state: the driver, what it declared, and the fences to drain.
struct Suite<'n, N: Npu + ?Sized> {
    npu: &'n mut N,
    options: Options,
    caps: Capabilities,
    layout: Layout,
    /// The operator for unit jobs, if the driver declares one.
    unit_op: Option<UnitOp>,
    /// The last data seed drawn.
    seed: u8,
    /// The newest fence issued.
    newest: Option<Fence>,
    /// Fences to wait for before the check ends (oldest dropped when full).
    pending: heapless::Vec<Fence, PENDING>,
}

impl<'n, N: Npu + ?Sized> Suite<'n, N> {
    fn new(npu: &'n mut N, options: Options, caps: Capabilities, check: Check) -> Self {
        let unit_op = UnitOp::ALL
            .into_iter()
            .find(|&which| caps.ops.runs(&build_op(which, 4)));
        Suite {
            npu,
            options,
            caps,
            layout: Layout::new(caps.alignment),
            unit_op,
            // Each check draws at most SEEDS_PER_CHECK seeds from its own range, so that data
            // left in memory by an earlier check never passes for this one's.
            seed: (check as u8).wrapping_mul(SEEDS_PER_CHECK),
            newest: None,
            pending: heapless::Vec::new(),
        }
    }

    fn check(&mut self, check: Check) -> Step {
        match check {
            // Run by `run_check` itself.
            Check::Capabilities => Ok(()),
            Check::FenceOrder => self.fence_order(),
            Check::DependencyDmaToUnit => self.dependency_dma_to_unit(),
            Check::DependencyUnitToUnit => self.dependency_unit_to_unit(),
            Check::DependencyData => self.dependency_data(),
            Check::TransferRoundTrip => self.transfer_round_trip(),
            Check::DeviceCopy => self.device_copy(),
            Check::FlashMapping => self.flash_mapping(),
            Check::Misaligned => self.misaligned(),
            Check::OutOfBounds => self.out_of_bounds(),
            Check::BadQueue => self.bad_queue(),
            Check::UnsupportedOp => self.unsupported_op(),
            Check::FlashNotMapped => self.flash_not_mapped(),
            Check::WrongSpace => self.wrong_space(),
            Check::Overlap => self.overlap(),
            Check::UsableAfterRefusal => self.usable_after_refusal(),
            Check::SpuriousInterrupt => self.spurious_interrupt(),
            Check::InterruptCompletion => self.interrupt_completion(),
            Check::IdleWait => self.idle_wait(),
            Check::QueueFull => self.queue_full(),
            Check::UnknownFence => self.unknown_fence(),
        }
    }

    // --- preconditions ------------------------------------------------------------------------

    fn needs_bytes(&self) -> Step {
        if self.options.moves_bytes {
            Ok(())
        } else {
            skip(Skip::NoByteMoves)
        }
    }

    fn needs_validation(&self) -> Step {
        if self.options.validates_regions {
            Ok(())
        } else {
            skip(Skip::RegionsNotValidated)
        }
    }

    fn needs_unit_op(&self) -> Step<UnitOp> {
        self.unit_op.ok_or(Stop::Skip(Skip::NoUnitOp))
    }

    // --- submitting and waiting ---------------------------------------------------------------

    /// Remembers an accepted fence for the drain; returns the fence issued before it.
    fn track(&mut self, fence: Fence) -> Option<Fence> {
        if self.pending.is_full() {
            self.pending.remove(0);
        }
        // Cannot fail: room was made above.
        let _ = self.pending.push(fence);
        self.newest.replace(fence)
    }

    /// Remembers an accepted fence for the drain and checks that it is newer than the last.
    fn accepted(&mut self, step: &'static str, fence: Fence) -> Step {
        match self.track(fence) {
            Some(previous) if fence <= previous => fail(
                step,
                Problem::FenceNotIncreasing {
                    previous,
                    next: fence,
                },
            ),
            _ => Ok(()),
        }
    }

    /// Submits a valid job.
    fn submit(&mut self, step: &'static str, job: &Job<'_>) -> Step<Fence> {
        match self.npu.submit(job) {
            Ok(fence) => {
                self.accepted(step, fence)?;
                Ok(fence)
            }
            Err(error) => fail(step, Problem::Refused(error)),
        }
    }

    /// Submits an invalid job that must be refused with `expected` (or, where the contract
    /// leaves a choice, an error `also` accepts).
    fn refuse(
        &mut self,
        step: &'static str,
        job: &Job<'_>,
        expected: HalError,
        also: impl Fn(&HalError) -> bool,
    ) -> Step {
        match self.npu.submit(job) {
            Ok(fence) => {
                // Accepting it is the failure, whatever its fence.
                self.track(fence);
                fail(step, Problem::Accepted { fence, expected })
            }
            Err(got) if got == expected || also(&got) => Ok(()),
            Err(got) => fail(step, Problem::WrongError { expected, got }),
        }
    }

    /// [`refuse`](Self::refuse) with exactly `expected`.
    fn refuse_exactly(&mut self, step: &'static str, job: &Job<'_>, expected: HalError) -> Step {
        self.refuse(step, job, expected, |_| false)
    }

    /// Polls `fence` until complete, waiting in between, at most `max_waits` times.
    fn wait(&mut self, step: &'static str, fence: Fence) -> Step {
        let mut waits = 0;
        loop {
            match self.npu.poll(fence) {
                Ok(()) => return Ok(()),
                Err(nb::Error::Other(error)) => {
                    return fail(step, Problem::JobFailed { fence, error })
                }
                Err(nb::Error::WouldBlock) if waits < self.options.max_waits => {
                    self.npu.wait_for_event();
                    waits += 1;
                }
                Err(nb::Error::WouldBlock) => {
                    return fail(step, Problem::NeverCompleted { fence, waits })
                }
            }
        }
    }

    /// Waits for `fences` (oldest first, each ordered after the one before as `order` says)
    /// and checks at every wait that no fence completed before an earlier one. The later
    /// fence is polled first: if it is complete, the earlier one, polled after it, must be too.
    /// Then checks that every fence stays complete.
    fn observe(&mut self, step: &'static str, fences: &[Fence], order: Order) -> Step {
        let mut waits = 0;
        loop {
            let mut done_after: Option<Fence> = None;
            let mut oldest_pending: Option<Fence> = None;
            for &fence in fences.iter().rev() {
                match self.npu.poll(fence) {
                    Ok(()) => {
                        done_after.get_or_insert(fence);
                    }
                    Err(nb::Error::WouldBlock) => {
                        oldest_pending = Some(fence);
                        if let Some(later) = done_after {
                            let problem = match order {
                                Order::Queue => Problem::OutOfOrder {
                                    earlier: fence,
                                    later,
                                },
                                Order::Dependency => Problem::BeforeDependency {
                                    dependency: fence,
                                    dependent: later,
                                },
                            };
                            return fail(step, problem);
                        }
                    }
                    Err(nb::Error::Other(error)) => {
                        return fail(step, Problem::JobFailed { fence, error })
                    }
                }
            }
            let Some(fence) = oldest_pending else {
                break;
            };
            if waits >= self.options.max_waits {
                return fail(step, Problem::NeverCompleted { fence, waits });
            }
            self.npu.wait_for_event();
            waits += 1;
        }
        for &fence in fences {
            self.still_done(step, fence)?;
        }
        Ok(())
    }

    /// A completed fence answers `Ok` again.
    fn still_done(&mut self, step: &'static str, fence: Fence) -> Step {
        let got = Answer::from(self.npu.poll(fence));
        if got == Answer::Done {
            Ok(())
        } else {
            fail(
                step,
                Problem::Poll {
                    fence,
                    expected: Answer::Done,
                    got,
                },
            )
        }
    }

    /// Waits for every fence this check submitted, ignoring how each ended: the check's own
    /// result is already decided, this only leaves the driver idle. Fails only if a job never
    /// completes.
    fn drain(&mut self) -> Step {
        const STEP: &str = "waited for every job the check submitted, to leave the driver idle";
        let pending = core::mem::take(&mut self.pending);
        for &fence in pending.iter() {
            let mut waits = 0;
            while self.npu.poll(fence) == Err(nb::Error::WouldBlock) {
                if waits >= self.options.max_waits {
                    return fail(STEP, Problem::NeverCompleted { fence, waits });
                }
                self.npu.wait_for_event();
                waits += 1;
            }
        }
        Ok(())
    }

    // --- data ---------------------------------------------------------------------------------

    fn next_seed(&mut self) -> u8 {
        self.seed = self.seed.wrapping_add(1);
        self.seed
    }

    /// The CPU's view of a host region; a host memory shorter than declared is refused by the
    /// capabilities check before any check runs, so this fails only on a driver that shrinks
    /// it later.
    fn host_bytes(&mut self, step: &'static str, region: Region) -> Step<&mut [u8]> {
        let host = self.npu.host_memory();
        let len = host.len() as u64;
        let range = region.offset as usize..region.end() as usize;
        match host.get_mut(range) {
            Some(bytes) => Ok(bytes),
            None => fail(
                step,
                Problem::BadCapability {
                    field: "host_memory().len()",
                    value: len,
                    rule: "host memory must keep its declared length",
                },
            ),
        }
    }

    /// Fills host `region` with the data of `seed`.
    fn fill(&mut self, step: &'static str, region: Region, seed: u8) -> Step {
        for (i, byte) in self.host_bytes(step, region)?.iter_mut().enumerate() {
            *byte = pattern(seed, i as u32);
        }
        Ok(())
    }

    /// Checks that host `region` holds the data of `seed`.
    fn compare(&mut self, step: &'static str, region: Region, seed: u8) -> Step {
        let bytes = self.host_bytes(step, region)?;
        for (i, &got) in bytes.iter().enumerate() {
            let expected = pattern(seed, i as u32);
            if got != expected {
                return fail(
                    step,
                    Problem::WrongBytes {
                        offset: i as u32,
                        expected,
                        got,
                    },
                );
            }
        }
        Ok(())
    }

    /// Fills `count` big transfers X → Y on the DMA queue, to keep it busy.
    fn busy_dma(&mut self, step: &'static str) -> Step {
        let job = transfer(self.layout.x(), self.layout.y(), &[]);
        for _ in 0..BUSY_JOBS {
            self.submit(step, &job)?;
        }
        Ok(())
    }

    /// Submits big unit jobs X → Y on `unit`, to keep it busy.
    fn busy_unit(&mut self, step: &'static str, op: UnitOp, unit: u8) -> Step {
        let big = build_op(op, self.layout.big);
        let job = compute(
            &big,
            self.layout.x(),
            self.layout.y(),
            Queue::Unit(unit),
            &[],
        );
        for _ in 0..BUSY_JOBS {
            self.submit(step, &job)?;
        }
        Ok(())
    }

    // --- the checks ---------------------------------------------------------------------------

    fn fence_order(&mut self) -> Step {
        const STEP_DMA: &str =
            "submitted a big then two small transfers on the DMA queue and polled them newest first at every wait";
        const STEP_UNIT: &str =
            "submitted a big then two small compute jobs on one execution unit and polled them newest first at every wait";
        let l = self.layout;
        let big = transfer(l.x(), l.y(), &[]);
        let small = transfer(l.a(), l.b(), &[]);
        let fences = [
            self.submit(STEP_DMA, &big)?,
            self.submit(STEP_DMA, &small)?,
            self.submit(STEP_DMA, &small)?,
        ];
        self.observe(STEP_DMA, &fences, Order::Queue)?;
        if let Some(op) = self.unit_op {
            let (big_op, small_op) = (build_op(op, l.big), build_op(op, l.small));
            for unit in 0..self.caps.execution_units {
                let big = compute(&big_op, l.x(), l.y(), Queue::Unit(unit), &[]);
                let small = compute(&small_op, l.a(), l.b(), Queue::Unit(unit), &[]);
                let fences = [
                    self.submit(STEP_UNIT, &big)?,
                    self.submit(STEP_UNIT, &small)?,
                    self.submit(STEP_UNIT, &small)?,
                ];
                self.observe(STEP_UNIT, &fences, Order::Queue)?;
            }
        }
        Ok(())
    }

    fn dependency_dma_to_unit(&mut self) -> Step {
        const STEP: &str = "behind big transfers on the DMA queue, submitted a transfer host -> device, then a job on unit 0 that depends on it, and polled the dependent job first at every wait";
        let op = self.needs_unit_op()?;
        let l = self.layout;
        self.busy_dma(STEP)?;
        let upload = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let small = build_op(op, l.small);
        let dependent = self.submit(
            STEP,
            &compute(&small, l.a(), l.b(), Queue::Unit(0), &[upload]),
        )?;
        self.observe(STEP, &[upload, dependent], Order::Dependency)
    }

    fn dependency_unit_to_unit(&mut self) -> Step {
        const STEP: &str = "behind big jobs on unit 0, submitted a small job on unit 0, then a job on unit 1 that depends on it, and polled the dependent job first at every wait";
        let op = self.needs_unit_op()?;
        if self.caps.execution_units < 2 {
            return skip(Skip::OneExecutionUnit);
        }
        let l = self.layout;
        self.busy_unit(STEP, op, 0)?;
        let small = build_op(op, l.small);
        let first = self.submit(STEP, &compute(&small, l.a(), l.b(), Queue::Unit(0), &[]))?;
        let dependent = self.submit(
            STEP,
            &compute(&small, l.b(), l.c(), Queue::Unit(1), &[first]),
        )?;
        self.observe(STEP, &[first, dependent], Order::Dependency)
    }

    fn dependency_data(&mut self) -> Step {
        const SETUP: &str = "wrote old data into device blocks A, B and C (host -> device)";
        const STEP: &str = "behind big transfers on the DMA queue, ran the chain host -> A (DMA), A -> B (unit 0), B -> C (unit 1, with 2+ units), C -> host (DMA), each depending on the one before, and read the result back";
        self.needs_bytes()?;
        let op = self.needs_unit_op()?;
        let l = self.layout;
        // Old data in A, B and C, so that a job that runs too early copies something else.
        let old = self.next_seed();
        self.fill(SETUP, l.h0(3 * l.small), old)?;
        let setup = self.submit(SETUP, &transfer(l.h0(3 * l.small), l.abc(), &[]))?;
        self.wait(SETUP, setup)?;

        let seed = self.next_seed();
        self.fill(STEP, l.h0(l.small), seed)?;
        let stale = self.next_seed();
        self.fill(STEP, l.h1(l.small), stale)?;
        self.busy_dma(STEP)?;
        let small = build_op(op, l.small);
        let upload = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let mut last = self.submit(
            STEP,
            &compute(&small, l.a(), l.b(), Queue::Unit(0), &[upload]),
        )?;
        let mut result = l.b();
        if self.caps.execution_units >= 2 {
            last = self.submit(
                STEP,
                &compute(&small, l.b(), l.c(), Queue::Unit(1), &[last]),
            )?;
            result = l.c();
        }
        let download = self.submit(STEP, &transfer(result, l.h1(l.small), &[last]))?;
        self.wait(STEP, download)?;
        self.compare(STEP, l.h1(l.small), seed)
    }

    fn transfer_round_trip(&mut self) -> Step {
        const STEP: &str =
            "copied host H0 -> device X -> host H1 on the DMA queue and compared H1 with H0";
        self.needs_bytes()?;
        let l = self.layout;
        let (seed, stale) = (self.next_seed(), self.next_seed());
        self.fill(STEP, l.h0(l.big), seed)?;
        self.fill(STEP, l.h1(l.big), stale)?;
        self.submit(STEP, &transfer(l.h0(l.big), l.x(), &[]))?;
        let back = self.submit(STEP, &transfer(l.x(), l.h1(l.big), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.big), seed)
    }

    fn device_copy(&mut self) -> Step {
        const STEP: &str = "copied host H0 -> device X -> device Y -> host H1 on the DMA queue and compared H1 with H0";
        self.needs_bytes()?;
        let l = self.layout;
        let (seed, stale) = (self.next_seed(), self.next_seed());
        self.fill(STEP, l.h0(l.big), seed)?;
        self.fill(STEP, l.h1(l.big), stale)?;
        self.submit(STEP, &transfer(l.h0(l.big), l.x(), &[]))?;
        self.submit(STEP, &transfer(l.x(), l.y(), &[]))?;
        let back = self.submit(STEP, &transfer(l.y(), l.h1(l.big), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.big), seed)
    }

    fn flash_mapping(&mut self) -> Step {
        const UNREADABLE: &str =
            "called map_flash on a driver whose capabilities say reads_flash = false";
        const MAP: &str = "called map_flash with a 64-byte aligned static of 64 bytes";
        if !self.caps.reads_flash {
            return match self.npu.map_flash(&FLASH_PROBE.0) {
                Err(HalError::FlashUnreadable) => Ok(()),
                got => {
                    if let Ok(segment) = got {
                        self.npu.unmap_flash(segment);
                    }
                    fail(
                        UNREADABLE,
                        Problem::MapFlash {
                            expected: Some(HalError::FlashUnreadable),
                            got,
                        },
                    )
                }
            };
        }
        self.needs_bytes()?;
        let l = self.layout;
        let alignment = self.caps.alignment.max(self.caps.flash_alignment);
        if alignment as usize > core::mem::align_of::<FlashProbe>()
            || l.small as usize > PROBE_BYTES
        {
            return skip(Skip::FlashAlignment { alignment });
        }
        let segment = match self.npu.map_flash(&FLASH_PROBE.0) {
            Ok(segment) => segment,
            Err(HalError::FlashSegmentsFull { .. }) => return skip(Skip::FlashSegmentsFull),
            Err(e) => {
                return fail(
                    MAP,
                    Problem::MapFlash {
                        expected: None,
                        got: Err(e),
                    },
                )
            }
        };
        let read = self.read_flash(segment);
        // The segment's jobs must be over before it is unmapped.
        let drained = self.drain();
        self.npu.unmap_flash(segment);
        read?;
        drained?;
        if self.options.validates_regions {
            const UNMAPPED: &str = "after unmap_flash, submitted a transfer from the unmapped segment to device memory";
            let flash = Region::flash(segment, 0, l.small);
            self.refuse_exactly(
                UNMAPPED,
                &transfer(flash, l.a(), &[]),
                HalError::FlashNotMapped { segment },
            )?;
        }
        Ok(())
    }

    fn read_flash(&mut self, segment: u8) -> Step {
        const STEP: &str =
            "copied a mapped flash segment -> device A -> host H1 and compared H1 with the static";
        let l = self.layout;
        let stale = self.next_seed();
        self.fill(STEP, l.h1(l.small), stale)?;
        let flash = Region::flash(segment, 0, l.small);
        self.submit(STEP, &transfer(flash, l.a(), &[]))?;
        let back = self.submit(STEP, &transfer(l.a(), l.h1(l.small), &[]))?;
        self.wait(STEP, back)?;
        self.compare(STEP, l.h1(l.small), PROBE_SEED)
    }

    fn misaligned(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        if l.align == 1 {
            return skip(Skip::AlignmentOne);
        }
        let alignment = l.align;
        // One byte past an aligned offset, inside X: in bounds and overlapping nothing.
        let device = Region::device(l.x().offset + 1, l.small);
        let host = Region::host(1, l.small);
        self.refuse_exactly(
            "submitted a transfer into device memory at an offset one byte past an aligned one",
            &transfer(l.h0(l.small), device, &[]),
            HalError::Misaligned {
                region: device,
                alignment,
            },
        )?;
        self.refuse_exactly(
            "submitted a transfer from host memory at an offset one byte past an aligned one",
            &transfer(host, l.a(), &[]),
            HalError::Misaligned {
                region: host,
                alignment,
            },
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose input is one byte past an aligned offset",
                &compute(&small, device, l.b(), Queue::Unit(0), &[]),
                HalError::Misaligned {
                    region: device,
                    alignment,
                },
            )?;
        }
        Ok(())
    }

    fn out_of_bounds(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let (device_bytes, host_bytes) =
            (self.caps.device_memory_bytes, self.caps.host_memory_bytes);
        if let Some(offset) = l.past_end(device_bytes, l.small) {
            let region = Region::device(offset, l.small);
            let expected = HalError::OutOfBounds {
                region,
                space_bytes: device_bytes,
            };
            self.refuse_exactly(
                "submitted a transfer into device memory whose region crosses the end of device memory",
                &transfer(l.h0(l.small), region, &[]),
                expected,
            )?;
            if let Some(op) = self.unit_op {
                let small = build_op(op, l.small);
                self.refuse_exactly(
                    "submitted a compute job on unit 0 whose output crosses the end of device memory",
                    &compute(&small, l.a(), region, Queue::Unit(0), &[]),
                    expected,
                )?;
            }
        }
        if let Some(offset) = l.past_end(host_bytes, l.small) {
            let region = Region::host(offset, l.small);
            self.refuse_exactly(
                "submitted a transfer from host memory whose region crosses the end of host memory",
                &transfer(region, l.a(), &[]),
                HalError::OutOfBounds {
                    region,
                    space_bytes: host_bytes,
                },
            )?;
        }
        let region = Region::device(l.wrapping(), l.small);
        self.refuse_exactly(
            "submitted a transfer into device memory whose offset + length overflows a u32",
            &transfer(l.h0(l.small), region, &[]),
            HalError::OutOfBounds {
                region,
                space_bytes: device_bytes,
            },
        )
    }

    fn bad_queue(&mut self) -> Step {
        let l = self.layout;
        let units = self.caps.execution_units;
        let op = self.unit_op.map(|op| build_op(op, l.small));
        for unit in [units, u8::MAX] {
            let expected = HalError::NoSuchUnit { unit, units };
            match &op {
                Some(op) => self.refuse_exactly(
                    "submitted a compute job on an execution unit that does not exist",
                    &compute(op, l.a(), l.b(), Queue::Unit(unit), &[]),
                    expected,
                )?,
                None => {
                    let mut job = transfer(l.h0(l.small), l.a(), &[]);
                    job.queue = Queue::Unit(unit);
                    self.refuse_exactly(
                        "submitted a transfer on an execution unit that does not exist",
                        &job,
                        expected,
                    )?
                }
            }
        }
        if let Some(op) = &op {
            self.refuse_exactly(
                "submitted a compute job on the DMA queue",
                &compute(op, l.a(), l.b(), Queue::Dma, &[]),
                HalError::Unsupported {
                    op: op.kind(),
                    dtype: op.dtype(),
                },
            )?;
        }
        Ok(())
    }

    fn unsupported_op(&mut self) -> Step {
        let l = self.layout;
        let Some(which) = UnitOp::ALL
            .into_iter()
            .find(|&which| !self.caps.ops.runs(&build_op(which, 4)))
        else {
            return skip(Skip::EveryOpSupported);
        };
        let op = build_op(which, l.small);
        self.refuse_exactly(
            "submitted a compute job on unit 0 whose operator is not in Capabilities::ops",
            &compute(&op, l.a(), l.b(), Queue::Unit(0), &[]),
            HalError::Unsupported {
                op: op.kind(),
                dtype: op.dtype(),
            },
        )
    }

    fn flash_not_mapped(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let segment = MAX_FLASH_SEGMENTS as u8;
        let flash = Region::flash(segment, 0, l.small);
        let expected = HalError::FlashNotMapped { segment };
        // An NPU that reads no flash has nothing mapped and may say so.
        let unreadable = !self.caps.reads_flash;
        let also = |e: &HalError| unreadable && *e == HalError::FlashUnreadable;
        self.refuse(
            "submitted a transfer from a flash segment that is not mapped",
            &transfer(flash, l.a(), &[]),
            expected,
            also,
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse(
                "submitted a compute job on unit 0 reading a flash segment that is not mapped",
                &compute(&small, flash, l.b(), Queue::Unit(0), &[]),
                expected,
                also,
            )?;
        }
        Ok(())
    }

    fn wrong_space(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let (src, dst) = (l.h0(l.small), l.h1(l.small));
        // The contract names "the offending region"; of two it may be either.
        let either = |a: Region, b: Region| {
            move |e: &HalError| {
                *e == HalError::WrongSpace { region: a } || *e == HalError::WrongSpace { region: b }
            }
        };
        self.refuse(
            "submitted a host -> host transfer",
            &transfer(src, dst, &[]),
            HalError::WrongSpace { region: dst },
            either(src, dst),
        )?;
        let flash = Region::flash(0, 0, l.small);
        self.refuse_exactly(
            "submitted a transfer from device memory into flash",
            &transfer(l.a(), flash, &[]),
            HalError::WrongSpace { region: flash },
        )?;
        let longer = Region::device(l.x().offset, 2 * l.small);
        self.refuse(
            "submitted a transfer whose destination is twice as long as its source",
            &transfer(src, longer, &[]),
            HalError::WrongSpace { region: longer },
            either(src, longer),
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose output is in host memory",
                &compute(&small, l.a(), dst, Queue::Unit(0), &[]),
                HalError::WrongSpace { region: dst },
            )?;
            self.refuse_exactly(
                "submitted a compute job on unit 0 whose input is in host memory",
                &compute(&small, src, l.b(), Queue::Unit(0), &[]),
                HalError::WrongSpace { region: src },
            )?;
        }
        Ok(())
    }

    fn overlap(&mut self) -> Step {
        self.needs_validation()?;
        let l = self.layout;
        let x = l.x().offset;
        let (src, dst) = (
            Region::device(x, 2 * l.small),
            Region::device(x + l.small, 2 * l.small),
        );
        let any_operand = |e: &HalError| matches!(e, HalError::Overlap { .. });
        self.refuse(
            "submitted a device -> device transfer whose destination overlaps its source",
            &transfer(src, dst, &[]),
            HalError::Overlap { operand: 0 },
            any_operand,
        )?;
        if let Some(op) = self.unit_op {
            let small = build_op(op, l.small);
            self.refuse(
                "submitted a compute job on unit 0 whose output is its input (the operator does not run in place)",
                &compute(&small, l.a(), l.a(), Queue::Unit(0), &[]),
                HalError::Overlap { operand: 0 },
                any_operand,
            )?;
        }
        Ok(())
    }

    fn usable_after_refusal(&mut self) -> Step {
        const REFUSE: &str = "submitted invalid jobs (a unit that does not exist; with region validation also misaligned, out-of-bounds and host -> host ones)";
        const STEP: &str =
            "after the refusals, copied host H0 -> device A -> host H1 and compared H1 with H0";
        let l = self.layout;
        let before = self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        self.wait(STEP, before)?;
        let units = self.caps.execution_units;
        let mut invalid = transfer(l.h0(l.small), l.a(), &[]);
        invalid.queue = Queue::Unit(units);
        let mut jobs = heapless::Vec::<(Job<'static>, HalError), 4>::new();
        let _ = jobs.push((invalid, HalError::NoSuchUnit { unit: units, units }));
        if self.options.validates_regions {
            let (src, dst) = (l.h0(l.small), l.h1(l.small));
            let _ = jobs.push((
                transfer(src, dst, &[]),
                HalError::WrongSpace { region: dst },
            ));
            let device_bytes = self.caps.device_memory_bytes;
            let end = l.past_end(device_bytes, l.small).unwrap_or(l.wrapping());
            let region = Region::device(end, l.small);
            let _ = jobs.push((
                transfer(src, region, &[]),
                HalError::OutOfBounds {
                    region,
                    space_bytes: device_bytes,
                },
            ));
            if l.align > 1 {
                let region = Region::device(l.x().offset + 1, l.small);
                let _ = jobs.push((
                    transfer(src, region, &[]),
                    HalError::Misaligned {
                        region,
                        alignment: l.align,
                    },
                ));
            }
        }
        for (job, expected) in &jobs {
            // Which error is the other checks' business; here only that it was refused.
            if let Ok(fence) = self.npu.submit(job) {
                self.track(fence);
                let expected = *expected;
                return fail(REFUSE, Problem::Accepted { fence, expected });
            }
        }
        self.still_done(STEP, before)?;
        let seed = self.next_seed();
        if self.options.moves_bytes {
            let stale = self.next_seed();
            self.fill(STEP, l.h0(l.small), seed)?;
            self.fill(STEP, l.h1(l.small), stale)?;
        }
        self.submit(STEP, &transfer(l.h0(l.small), l.a(), &[]))?;
        let back = self.submit(STEP, &transfer(l.a(), l.h1(l.small), &[]))?;
        self.wait(STEP, back)?;
        if self.options.moves_bytes {
            self.compare(STEP, l.h1(l.small), seed)?;
        }
        Ok(())
    }

    fn spurious_interrupt(&mut self) -> Step {
        const STEP: &str = "with nothing in flight, called on_interrupt three times, then polled a completed fence and ran a new transfer";
        let l = self.layout;
        let done = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, done)?;
        for _ in 0..3 {
            self.npu.on_interrupt();
        }
        self.still_done(STEP, done)?;
        let next = self.submit(STEP, &transfer(l.b(), l.c(), &[]))?;
        self.wait(STEP, next)?;
        self.still_done(STEP, done)
    }

    fn interrupt_completion(&mut self) -> Step {
        const STEP: &str = "submitted a transfer, called on_interrupt at once, then looped wait_for_event, on_interrupt, poll";
        let l = self.layout;
        let fence = self.submit(STEP, &transfer(l.x(), l.y(), &[]))?;
        // While the job runs: must neither complete it early nor lose it.
        self.npu.on_interrupt();
        let mut waits = 0;
        loop {
            match self.npu.poll(fence) {
                Ok(()) => return Ok(()),
                Err(nb::Error::Other(error)) => {
                    return fail(STEP, Problem::JobFailed { fence, error })
                }
                Err(nb::Error::WouldBlock) if waits < self.options.max_waits => {
                    self.npu.wait_for_event();
                    self.npu.on_interrupt();
                    waits += 1;
                }
                Err(nb::Error::WouldBlock) => {
                    return fail(STEP, Problem::NeverCompleted { fence, waits })
                }
            }
        }
    }

    fn idle_wait(&mut self) -> Step {
        const STEP: &str = "with nothing in flight, called wait_for_event twice (a hang here is the failure), then polled a completed fence and ran a new transfer";
        let l = self.layout;
        let done = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, done)?;
        self.npu.wait_for_event();
        self.npu.wait_for_event();
        self.still_done(STEP, done)?;
        let next = self.submit(STEP, &transfer(l.b(), l.c(), &[]))?;
        self.wait(STEP, next)
    }

    fn queue_full(&mut self) -> Step {
        const STEP: &str = "submitted max_in_flight + 1 transfers on the DMA queue without waiting";
        const AFTER: &str = "after the burst, waited for its last job and submitted one more";
        const DATA: &str = "after the burst, read back the destination its last job wrote";
        let l = self.layout;
        let declared = self.caps.max_in_flight;
        // The jobs alternate between two sources: the destination ends up holding the last
        // accepted job's source, so a job dropped when the table was full shows.
        let sources = [l.h0(l.small), Region::host(l.small, l.small)];
        let seeds = [self.next_seed(), self.next_seed()];
        if self.options.moves_bytes {
            for (source, seed) in sources.into_iter().zip(seeds) {
                self.fill(STEP, source, seed)?;
            }
        }
        let mut accepted: u32 = 0;
        let mut last = None;
        for i in 0..=u32::from(declared) {
            let source = sources[(i % 2) as usize];
            match self.npu.submit(&transfer(source, l.a(), &[])) {
                Ok(fence) => {
                    self.accepted(STEP, fence)?;
                    accepted += 1;
                    last = Some((fence, i));
                }
                Err(HalError::QueueFull { capacity }) => {
                    if accepted < u32::from(declared) {
                        return fail(STEP, Problem::QueueFullEarly { accepted, declared });
                    }
                    if capacity != declared {
                        return fail(
                            STEP,
                            Problem::QueueFullCapacity {
                                declared,
                                reported: capacity,
                            },
                        );
                    }
                    break;
                }
                Err(error) => return fail(STEP, Problem::Refused(error)),
            }
        }
        // Every accepted job shares the DMA queue: the last one's completion implies the rest.
        let Some((last, index)) = last else {
            return Ok(());
        };
        self.wait(AFTER, last)?;
        if self.options.moves_bytes {
            let stale = self.next_seed();
            self.fill(DATA, l.h1(l.small), stale)?;
            let back = self.submit(DATA, &transfer(l.a(), l.h1(l.small), &[]))?;
            self.wait(DATA, back)?;
            self.compare(DATA, l.h1(l.small), seeds[(index % 2) as usize])?;
        }
        let again = self.submit(AFTER, &transfer(l.h0(l.small), l.a(), &[]))?;
        self.wait(AFTER, again)
    }

    fn unknown_fence(&mut self) -> Step {
        const STEP: &str =
            "polled fences never issued: the one after the newest, and Fence(u64::MAX)";
        let l = self.layout;
        let newest = self.submit(STEP, &transfer(l.a(), l.b(), &[]))?;
        self.wait(STEP, newest)?;
        for fence in [newest.0.checked_add(1), Some(u64::MAX)]
            .into_iter()
            .flatten()
        {
            let fence = Fence(fence);
            let expected = Answer::Error(HalError::UnknownFence(fence));
            let got = Answer::from(self.npu.poll(fence));
            if got != expected {
                return fail(
                    STEP,
                    Problem::Poll {
                        fence,
                        expected,
                        got,
                    },
                );
            }
        }
        Ok(())
    }
}
