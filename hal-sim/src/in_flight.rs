//! The in-flight table's entries: a job accepted by `submit`, kept (its op copied) with its
//! schedule until it retires.

use npu_compute::hal::{
    Cycles, Fence, JobKind, Queue, Region, Variant, MAX_JOB_DEPS, MAX_JOB_INPUTS,
};
use npu_compute::ops::Op;

use crate::failures::Failure;
use crate::faults::{FaultKind, NEVER};

/// What a job does, owned: a submitted [`Job`](npu_compute::hal::Job) borrows its op only for
/// the call to `submit`, and the simulator runs the job later.
#[derive(Debug)]
// Stored by value in the fixed in-flight table (no heap to box the op into), so a transfer
// takes as much room as a compute job.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Work {
    Transfer {
        src: Region,
        dst: Region,
    },
    Compute {
        op: Op,
        variant: Variant,
        inputs: heapless::Vec<Region, MAX_JOB_INPUTS>,
        output: Region,
        scratch: Option<Region>,
    },
}

impl Work {
    /// A copy of a submitted job's work, its op included.
    pub(crate) fn of(kind: &JobKind<'_>) -> Self {
        match kind {
            JobKind::Transfer { src, dst } => Work::Transfer {
                src: *src,
                dst: *dst,
            },
            JobKind::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => Work::Compute {
                op: **op,
                variant: *variant,
                inputs: inputs.clone(),
                output: *output,
                scratch: *scratch,
            },
        }
    }

    /// The job again, borrowing the kept op.
    pub(crate) fn kind(&self) -> JobKind<'_> {
        match self {
            Work::Transfer { src, dst } => JobKind::Transfer {
                src: *src,
                dst: *dst,
            },
            Work::Compute {
                op,
                variant,
                inputs,
                output,
                scratch,
            } => JobKind::Compute {
                op,
                variant: *variant,
                inputs: inputs.clone(),
                output: *output,
                scratch: *scratch,
            },
        }
    }
}

/// A job accepted by `submit` and not yet retired.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) fence: Fence,
    pub(crate) queue: Queue,
    pub(crate) work: Work,
    pub(crate) start: Cycles,
    pub(crate) end: Cycles,
    /// Dependencies that were still in flight at submit (to propagate their failure).
    pub(crate) deps: heapless::Vec<Fence, MAX_JOB_DEPS>,
    /// How a dependency failed, if one did: the job will not run and fails with
    /// `CODE_DEPENDENCY_FAILED` (after a failure code) or `Fault::Cancelled` (after a fault).
    pub(crate) dep_failed: Option<Failure>,
    /// The fault injected into it at submit, if any (see [`crate::faults`]): a DMA or bus
    /// fault takes effect at retire; a hang, an overrun and the interrupts are already in the
    /// schedule and in `irq`.
    pub(crate) fault: Option<FaultKind>,
    /// Whether the job raises the completion interrupt at its end (not when its interrupt is
    /// lost, nor for a job that never ends).
    pub(crate) irq: bool,
}

impl InFlight {
    /// Whether the job ever ends (not hung, nor stuck behind a hung job).
    pub(crate) fn ends(&self) -> bool {
        self.end != NEVER
    }
}
