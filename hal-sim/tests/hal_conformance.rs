//! The HAL conformance suite (`npu_compute::hal::conformance`) against the simulator, which
//! must pass every check it can run, and against wrappers of it that each break one rule of
//! the contract, which must fail the check for that rule with a message that names it.

mod common;

use common::*;
use npu_compute::hal::conformance::{
    self, Answer, Check, Failure, Options, Outcome, Problem, Report, Skip,
};
use npu_compute::hal::{
    Capabilities, CpuOnly, Cycles, Fence, HalError, Job, JobKind, Npu, Queue, Region, Space,
};
use npu_compute::ops::{DType, OpKind, OpSet};
use npu_sim::{AlignedMemory, SimConfig, SimNpu};

/// Runs the suite with `options`, prints the report, and checks that the driver was left idle.
fn run_on_sim(npu: &mut SimNpu<'static>, options: &Options) -> Report {
    let report = conformance::run(npu, options);
    println!("{report}");
    assert_eq!(npu.in_flight(), 0, "the suite leaves the driver idle");
    report
}

/// Every check passed except `skipped`, each skipped for the given reason.
fn assert_passes_except(report: &Report, skipped: &[(Check, Skip)]) {
    for (check, outcome) in report.iter() {
        match skipped.iter().find(|(c, _)| *c == check) {
            Some((_, why)) => assert_eq!(*outcome, Outcome::Skipped(*why), "{check}"),
            None => assert_eq!(*outcome, Outcome::Passed, "{check}: {outcome}"),
        }
    }
    assert!(report.is_ok());
    assert_eq!(report.summary().skipped as usize, skipped.len());
}

#[test]
fn the_simulator_with_one_unit_passes_every_check_it_can_run() {
    let mut npu = sim(SimConfig::default());
    let report = run_on_sim(&mut npu, &Options::new());
    // The default part: one execution unit, every operator declared.
    assert_passes_except(
        &report,
        &[
            (Check::DependencyUnitToUnit, Skip::OneExecutionUnit),
            (Check::UnsupportedOp, Skip::EveryOpSupported),
        ],
    );
    assert_eq!(report.result().map(|s| s.passed), Ok(19));
}

#[test]
fn the_simulator_with_two_units_passes_every_check() {
    let mut npu = sim(SimConfig {
        ops: OpSet::all().without(OpKind::Relu, DType::F32),
        ..two_units()
    });
    let report = run_on_sim(&mut npu, &Options::new());
    assert_passes_except(&report, &[]);
    assert_eq!(report.to_string().lines().count(), Check::COUNT + 1);
    assert!(report
        .to_string()
        .ends_with("21 passed, 0 failed, 0 skipped"));
}

#[test]
fn the_simulator_passes_with_relu_as_the_unit_operator_and_without_flash() {
    let mut npu = sim(SimConfig {
        ops: OpSet::EMPTY.with(OpKind::Relu, DType::F32),
        reads_flash: false,
        ..two_units()
    });
    let report = run_on_sim(&mut npu, &Options::new());
    // RESHAPE int8 is the unsupported operator now; flash mapping checks FlashUnreadable.
    assert_passes_except(&report, &[]);
}

#[test]
fn skipped_checks_are_reported_as_skipped_with_their_reason() {
    let mut npu = sim(SimConfig {
        ops: OpSet::EMPTY,
        ..SimConfig::default()
    });
    let options = Options {
        moves_bytes: false,
        validates_regions: false,
        ..Options::new()
    };
    let report = run_on_sim(&mut npu, &options);
    for check in [
        Check::TransferRoundTrip,
        Check::DeviceCopy,
        Check::FlashMapping,
        Check::DependencyData,
    ] {
        assert_eq!(report.outcome(check), Outcome::Skipped(Skip::NoByteMoves));
    }
    for check in [
        Check::Misaligned,
        Check::OutOfBounds,
        Check::FlashNotMapped,
        Check::WrongSpace,
        Check::Overlap,
    ] {
        assert_eq!(
            report.outcome(check),
            Outcome::Skipped(Skip::RegionsNotValidated)
        );
    }
    for check in [Check::DependencyDmaToUnit, Check::DependencyUnitToUnit] {
        assert_eq!(report.outcome(check), Outcome::Skipped(Skip::NoUnitOp));
    }
    assert!(report.is_ok());
    let summary = report.summary();
    assert_eq!((summary.failed, summary.skipped), (0, 11), "{summary}");
    assert!(report
        .to_string()
        .contains("skip transfer round trip: Options::moves_bytes is false"));
}

#[test]
fn too_little_memory_skips_with_what_is_needed() {
    let device = Box::leak(Box::new(AlignedMemory::<512>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<4096>::new()));
    let mut npu: SimNpu<'static> = SimNpu::new(
        device.as_mut_slice(),
        host.as_mut_slice(),
        SimConfig::default(),
    )
    .unwrap();
    let report = run_on_sim(&mut npu, &Options::new());
    let needed = conformance::requirements(16);
    assert_eq!((needed.device_bytes, needed.host_bytes), (608, 512));
    assert_eq!(report.outcome(Check::Capabilities), Outcome::Passed);
    assert_eq!(
        report.outcome(Check::FenceOrder),
        Outcome::Skipped(Skip::NotEnoughMemory {
            space: Space::Device,
            needed: 608,
            declared: 512
        })
    );
    assert!(report
        .to_string()
        .contains("the suite needs 608 bytes of device memory, the driver declares 512"));
}

// ---------------------------------------------------------------------------------------------
// Broken drivers
// ---------------------------------------------------------------------------------------------

/// One rule a [`Broken`] driver breaks (or, for `RetiresInSubmit`, a correct behaviour the
/// simulator does not show on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    /// Drops every job's dependencies: jobs start as soon as their queue is free.
    IgnoresDeps,
    /// Accepts regions at misaligned offsets (and runs them rounded down).
    AcceptsMisaligned,
    /// Runs every second DMA transfer on the last execution unit, so a small transfer
    /// submitted after a big one finishes first.
    CompletesOutOfOrder,
    /// When its table is full, drops the job and returns the previous job's fence.
    DropsWhenFull,
    /// Declares twice the jobs in flight it holds.
    OverstatesCapacity,
    /// Answers `Ok` for fences it never issued.
    NoUnknownFence,
    /// Accepts regions past the end of their memory (and runs them moved back inside).
    AcceptsOutOfBounds,
    /// Copies only the first half of every transfer.
    TruncatesTransfers,
    /// Lends 16 bytes less host memory than it declares.
    ShortHostMemory,
    /// Declares an alignment of 12, which is no power of two.
    AlignmentTwelve,
    /// Declares 2^31-byte alignment and 4 GiB of device memory.
    HugeAlignment,
    /// Correct: when its table is full, retires everything (as a driver that waits for the
    /// hardware inside `submit` would) and accepts the job.
    RetiresInSubmit,
}

/// The simulator with one [`Bug`].
struct Broken {
    inner: SimNpu<'static>,
    bug: Bug,
    /// DMA transfers submitted (for `CompletesOutOfOrder`).
    transfers: u32,
    /// The newest fence issued.
    newest: Option<Fence>,
}

impl Broken {
    fn new(bug: Bug, config: SimConfig) -> Self {
        Broken {
            inner: sim(config),
            bug,
            transfers: 0,
            newest: None,
        }
    }
}

fn align_down(region: &mut Region, alignment: u32) {
    region.offset -= region.offset % alignment;
}

/// Moves `region` back inside its memory if it sticks out (device, host or slow).
fn clamp(region: &mut Region, caps: &Capabilities) {
    let size = match region.space {
        Space::Device => caps.device_memory_bytes,
        Space::Host => caps.host_memory_bytes,
        Space::Slow => caps.slow_memory_bytes,
        Space::Flash(_) => return,
    };
    if region.end() > u64::from(size) {
        region.offset = (size - region.len) / caps.alignment * caps.alignment;
    }
}

impl Npu for Broken {
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.inner.capabilities();
        match self.bug {
            Bug::OverstatesCapacity => caps.max_in_flight *= 2,
            Bug::AlignmentTwelve => caps.alignment = 12,
            Bug::HugeAlignment => {
                caps.alignment = 1 << 31;
                caps.device_memory_bytes = u32::MAX;
            }
            _ => {}
        }
        caps
    }

    fn submit(&mut self, job: &Job<'_>) -> Result<Fence, HalError> {
        let mut job = job.clone();
        let caps = self.inner.capabilities();
        match self.bug {
            Bug::IgnoresDeps => job.deps.clear(),
            Bug::AcceptsMisaligned => match &mut job.kind {
                JobKind::Transfer { src, dst } => {
                    align_down(src, caps.alignment);
                    align_down(dst, caps.alignment);
                }
                JobKind::Compute { inputs, output, .. } => {
                    inputs
                        .iter_mut()
                        .for_each(|r| align_down(r, caps.alignment));
                    align_down(output, caps.alignment);
                }
            },
            Bug::AcceptsOutOfBounds => match &mut job.kind {
                JobKind::Transfer { src, dst } => {
                    clamp(src, &caps);
                    clamp(dst, &caps);
                }
                JobKind::Compute { inputs, output, .. } => {
                    inputs.iter_mut().for_each(|r| clamp(r, &caps));
                    clamp(output, &caps);
                }
            },
            Bug::TruncatesTransfers => {
                if let JobKind::Transfer { src, dst } = &mut job.kind {
                    src.len /= 2;
                    dst.len /= 2;
                }
            }
            Bug::CompletesOutOfOrder
                if matches!(job.kind, JobKind::Transfer { .. }) && job.queue == Queue::Dma =>
            {
                self.transfers += 1;
                if self.transfers.is_multiple_of(2) {
                    job.queue = Queue::Unit(caps.execution_units - 1);
                }
            }
            _ => {}
        }
        let result = match (self.bug, self.inner.submit(&job)) {
            (Bug::DropsWhenFull, Err(HalError::QueueFull { .. })) if self.newest.is_some() => {
                return Ok(self.newest.unwrap());
            }
            (Bug::RetiresInSubmit, Err(HalError::QueueFull { .. })) => {
                self.inner.run_until_idle();
                self.inner.submit(&job)
            }
            (_, result) => result,
        };
        if let Ok(fence) = result {
            self.newest = Some(fence);
        }
        result
    }

    fn poll(&mut self, fence: Fence) -> nb::Result<(), HalError> {
        if self.bug == Bug::NoUnknownFence && self.newest.is_none_or(|newest| fence > newest) {
            return Ok(());
        }
        self.inner.poll(fence)
    }

    fn wait_for_event(&mut self) {
        self.inner.wait_for_event()
    }

    fn on_interrupt(&mut self) {
        self.inner.on_interrupt()
    }

    fn now(&self) -> Cycles {
        self.inner.now()
    }

    fn host_memory(&mut self) -> &mut [u8] {
        let host = self.inner.host_memory();
        if self.bug == Bug::ShortHostMemory {
            let len = host.len() - 16;
            return &mut host[..len];
        }
        host
    }

    fn map_flash(&mut self, bytes: &'static [u8]) -> Result<u8, HalError> {
        self.inner.map_flash(bytes)
    }

    fn unmap_flash(&mut self, segment: u8) {
        self.inner.unmap_flash(segment)
    }
}

/// Runs the suite on the simulator with `bug` (two units), checks the driver is idle after it,
/// and returns the report.
fn run_broken(bug: Bug) -> Report {
    let mut npu = Broken::new(bug, two_units());
    let report = conformance::run(&mut npu, &Options::new());
    println!("{bug:?}:\n{report}");
    assert_eq!(npu.inner.in_flight(), 0, "the suite leaves the driver idle");
    report
}

/// The failure of `check`, which must have failed.
fn failure(report: &Report, check: Check) -> Failure {
    match report.outcome(check) {
        Outcome::Failed(failure) => {
            assert_eq!(failure.check, check);
            failure
        }
        other => panic!("{check} should fail, got: {other}"),
    }
}

#[test]
fn a_driver_that_ignores_dependencies_fails_the_dependency_checks() {
    let report = run_broken(Bug::IgnoresDeps);
    for check in [Check::DependencyDmaToUnit, Check::DependencyUnitToUnit] {
        let failure = failure(&report, check);
        assert!(
            matches!(failure.problem, Problem::BeforeDependency { dependency, dependent } if dependency < dependent),
            "{failure}"
        );
        assert!(failure
            .to_string()
            .contains("had not; a job must start only after every fence in its deps"));
    }
    // And the data a dependent job reads is the old one.
    let failure = failure(&report, Check::DependencyData);
    assert!(
        matches!(failure.problem, Problem::WrongBytes { offset: 0, .. }),
        "{failure}"
    );
    assert!(failure.to_string().contains("the data did not arrive"));
    // Same-queue order still holds, so the fence order check passes.
    assert_eq!(report.outcome(Check::FenceOrder), Outcome::Passed);
}

#[test]
fn a_driver_that_accepts_misaligned_regions_fails_the_misaligned_check() {
    let report = run_broken(Bug::AcceptsMisaligned);
    let failure = failure(&report, Check::Misaligned);
    // X, one byte past its aligned start.
    let device = Region::device(3 * 32 + 1, 32);
    assert!(
        matches!(
            failure.problem,
            Problem::Accepted {
                expected: HalError::Misaligned {
                    region,
                    alignment: 16
                },
                ..
            } if region == device
        ),
        "{failure}"
    );
    let message = failure.to_string();
    assert!(
        message.starts_with("misaligned regions: submitted a transfer into device memory at an offset one byte past an aligned one: expected the driver to refuse it with Misaligned"),
        "{message}"
    );
    assert!(
        message.contains("but it accepted it as Fence("),
        "{message}"
    );
    assert!(!report.is_ok());
    assert_eq!(
        report.first_failure().map(|f| f.check),
        Some(Check::Misaligned)
    );
}

#[test]
fn a_driver_that_completes_one_queue_out_of_order_fails_the_fence_order_check() {
    let report = run_broken(Bug::CompletesOutOfOrder);
    let failure = failure(&report, Check::FenceOrder);
    assert!(
        matches!(failure.problem, Problem::OutOfOrder { earlier, later } if earlier < later),
        "{failure}"
    );
    assert!(failure
        .to_string()
        .contains("submitted before it on the same queue, had not"));
}

#[test]
fn a_driver_that_drops_jobs_when_full_fails_the_queue_full_check() {
    let report = run_broken(Bug::DropsWhenFull);
    let failure = failure(&report, Check::QueueFull);
    assert!(
        matches!(failure.problem, Problem::FenceNotIncreasing { previous, next } if previous == next),
        "{failure}"
    );
    assert!(failure
        .to_string()
        .contains("fences must increase and are never reused"));
}

#[test]
fn a_driver_that_overstates_its_capacity_fails_the_queue_full_check() {
    let report = run_broken(Bug::OverstatesCapacity);
    let failure = failure(&report, Check::QueueFull);
    assert_eq!(
        failure.problem,
        Problem::QueueFullEarly {
            accepted: 32,
            declared: 64
        }
    );
    assert!(failure.to_string().contains(
        "the driver answered QueueFull after accepting 32 jobs, but declares max_in_flight 64"
    ));
}

#[test]
fn a_driver_that_never_reports_unknown_fences_fails_the_unknown_fence_check() {
    let report = run_broken(Bug::NoUnknownFence);
    let failure = failure(&report, Check::UnknownFence);
    assert!(
        matches!(
            failure.problem,
            Problem::Poll {
                expected: Answer::Error(HalError::UnknownFence(_)),
                got: Answer::Done,
                ..
            }
        ),
        "{failure}"
    );
    assert!(failure
        .to_string()
        .contains("answered Ok (complete), expected UnknownFence"));
}

#[test]
fn a_driver_that_accepts_regions_past_the_end_fails_the_out_of_bounds_check() {
    let report = run_broken(Bug::AcceptsOutOfBounds);
    let failure = failure(&report, Check::OutOfBounds);
    assert!(
        matches!(
            failure.problem,
            Problem::Accepted {
                expected: HalError::OutOfBounds { space_bytes, .. },
                ..
            } if space_bytes == MEM as u32
        ),
        "{failure}"
    );
    assert!(failure.to_string().contains(
        "crosses the end of device memory: expected the driver to refuse it with OutOfBounds"
    ));
}

#[test]
fn a_driver_that_truncates_transfers_fails_the_data_checks() {
    let report = run_broken(Bug::TruncatesTransfers);
    for check in [Check::TransferRoundTrip, Check::DeviceCopy] {
        let failure = failure(&report, check);
        // X and Y are 256 bytes: the second half never arrives.
        assert!(
            matches!(failure.problem, Problem::WrongBytes { offset: 128, .. }),
            "{failure}"
        );
    }
}

#[test]
fn a_driver_whose_host_memory_is_shorter_than_declared_fails_the_capabilities_check() {
    let report = run_broken(Bug::ShortHostMemory);
    let failure = failure(&report, Check::Capabilities);
    assert_eq!(
        failure.problem,
        Problem::BadCapability {
            field: "host_memory().len()",
            value: MEM as u64 - 16,
            rule: "it must equal Capabilities::host_memory_bytes",
        }
    );
    // Nothing else is meaningful then.
    assert_eq!(report.summary().skipped as usize, Check::COUNT - 1);
    assert_eq!(
        report.outcome(Check::FenceOrder),
        Outcome::Skipped(Skip::CapabilitiesInvalid)
    );
}

#[test]
fn absurd_capabilities_are_reported_not_panicked_on() {
    let report = run_broken(Bug::AlignmentTwelve);
    let failure = failure(&report, Check::Capabilities);
    assert_eq!(
        failure.to_string(),
        "capabilities: read capabilities() and host_memory(): Capabilities::alignment is 12, but it must be a power of two"
    );
    // The host memory cannot start on a 2^31 boundary, and the suite's layout would not fit a
    // u32 anyway: reported, nothing overflows.
    let report = run_broken(Bug::HugeAlignment);
    assert!(matches!(
        report.outcome(Check::Capabilities),
        Outcome::Failed(Failure {
            problem: Problem::BadCapability {
                field: "host_memory()'s address",
                ..
            },
            ..
        })
    ));
    assert_eq!(
        conformance::requirements(1 << 31).device_bytes,
        u32::MAX,
        "saturates"
    );
}

#[test]
fn a_driver_that_retires_in_submit_when_full_passes_the_queue_full_check() {
    let report = run_broken(Bug::RetiresInSubmit);
    assert_eq!(report.outcome(Check::QueueFull), Outcome::Passed);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn one_check_runs_alone() {
    let mut npu = Broken::new(Bug::AcceptsMisaligned, SimConfig::default());
    let options = Options::new();
    assert!(matches!(
        conformance::run_check(&mut npu, &options, Check::Misaligned),
        Outcome::Failed(_)
    ));
    assert_eq!(
        conformance::run_check(&mut npu, &options, Check::FenceOrder),
        Outcome::Passed
    );
    assert_eq!(npu.inner.in_flight(), 0);
}

#[test]
fn the_cpu_only_hal_passes_every_check_that_needs_no_npu_operator() {
    // `hal::CpuOnly`, the driver of a part without an NPU: it moves bytes and validates
    // regions, and runs no operator, so the checks that need a job on an execution unit are
    // skipped, and asking it for any operator is the refusal checked.
    let device = Box::leak(Box::new(AlignedMemory::<4096>::new()));
    let host = Box::leak(Box::new(AlignedMemory::<4096>::new()));
    let mut npu = CpuOnly::new(device.as_mut_slice(), host.as_mut_slice());
    let report = conformance::run(&mut npu, &Options::new());
    println!("{report}");
    for (check, outcome) in report.iter() {
        match check {
            Check::DependencyDmaToUnit | Check::DependencyUnitToUnit | Check::DependencyData => {
                assert_eq!(*outcome, Outcome::Skipped(Skip::NoUnitOp), "{check}")
            }
            _ => assert_eq!(*outcome, Outcome::Passed, "{check}: {outcome}"),
        }
    }
    assert!(report.is_ok());
}
