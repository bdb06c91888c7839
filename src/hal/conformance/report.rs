//! What a run reports: each check's [`Outcome`], why a check was skipped or failed, and the
//! [`Report`] of a whole run with its [`Summary`].

use core::fmt;

use super::Check;
use crate::hal::{Fence, HalError, Space};

#[cfg(doc)]
use super::{requirements, run, Options};
#[cfg(doc)]
use crate::hal::{Capabilities, Npu};

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
    pub(super) outcomes: [Outcome; Check::COUNT],
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
        Space::Slow => "slow",
    }
}
