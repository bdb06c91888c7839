//! The error type of the compute stack.
//!
//! Every error says what was wrong and, where a limit was hit, which limit and how far: requested
//! against available bytes, the name of the capacity knob (a const generic) that ran out.

use crate::hal::{Fault, Fence, HalError, SetupError, MAX_JOB_INPUTS};
use crate::ops::{Op, OpKind};
use crate::storage::StorageError;
use crate::tune::{CacheError, TableError};
use npu_kernels::KernelError;

/// A fixed capacity of the stack, named so an error can say which knob to turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Capacity {
    /// The tensor handle table (`NpuServer`'s `HANDLES` const generic).
    Handles,
    /// The chunk table of the memory manager (`ChunkSliceMemory`'s `CHUNKS` const generic).
    Chunks,
    /// Blocks of host staging memory in flight (`NpuServer`'s `STAGING` const generic).
    StagingBlocks,
    /// The channel's deferred-release counters (`RefCellChannel`/`CriticalSectionChannel`'s `N`).
    ChannelSlots,
    /// Jobs in a job plan (`JobPlan`'s `STEPS` const generic).
    PlanSteps,
    /// Distinct tensors in a job plan (`JobPlan`'s `TENSORS` const generic).
    PlanTensors,
    /// Tasks in a static schedule (`Schedule`'s `TASKS` const generic).
    ScheduleTasks,
}

impl Capacity {
    /// The knob to turn: the const generic (or constant) and whose it is.
    pub const fn knob(self) -> &'static str {
        match self {
            Capacity::Handles => "NpuServer's HANDLES",
            Capacity::Chunks => "ChunkSliceMemory's CHUNKS",
            Capacity::StagingBlocks => "NpuServer's STAGING",
            Capacity::ChannelSlots => "the channel's N",
            Capacity::PlanSteps => "the job plan's STEPS",
            Capacity::PlanTensors => "the job plan's TENSORS",
            Capacity::ScheduleTasks => "the schedule's TASKS",
        }
    }

    /// What the capacity counts, as a phrase.
    pub const fn counts(self) -> &'static str {
        match self {
            Capacity::Handles => "tensors alive at once",
            Capacity::Chunks => "chunks of arena memory",
            Capacity::StagingBlocks => "host staging blocks allocated or in flight",
            Capacity::ChannelSlots => "deferred-release slots",
            Capacity::PlanSteps => "jobs in one job plan",
            Capacity::PlanTensors => "tensors in one job plan",
            Capacity::ScheduleTasks => "tasks in one schedule",
        }
    }
}

impl core::fmt::Display for Capacity {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.knob())
    }
}

/// Why a job plan could not be built or run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum JobPlanError {
    /// The server's tuning changed since the plan was built: build it again.
    Stale,
    /// A run was given `actual` ops for a plan of `expected` steps.
    OpCount {
        /// Steps in the plan.
        expected: u32,
        /// Ops given.
        actual: u32,
    },
    /// The op given for `step` is not of the kind the step was built for.
    OpMismatch {
        /// The step.
        step: u32,
        /// Its kind when built.
        expected: OpKind,
        /// The kind given.
        actual: OpKind,
    },
    /// The op cannot be a step of a job plan. Job plans hold CPU steps (an op the NPU does not
    /// run, or whose tuned choice is the CPU), so building one no longer returns it; a graph
    /// reports with it the tiled chains it keeps job by job.
    OnCpu {
        /// The op.
        op: OpKind,
    },
    /// An operand is a pinned tensor, whose residency changes between runs.
    Pinned {
        /// The op.
        op: OpKind,
    },
}

impl core::fmt::Display for JobPlanError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            JobPlanError::Stale => f.write_str(
                "the job plan is stale: the server's tuning changed since it was built; build it \
                 again",
            ),
            JobPlanError::OpCount { expected, actual } => write!(
                f,
                "the job plan has {expected} steps but was run with {actual} ops: give one op per \
                 step, in order"
            ),
            JobPlanError::OpMismatch {
                step,
                expected,
                actual,
            } => write!(
                f,
                "step {step} of the job plan was built for {expected}, and run with {actual}"
            ),
            JobPlanError::OnCpu { op } => write!(f, "{op} cannot be a step of a job plan"),
            JobPlanError::Pinned { op } => write!(
                f,
                "{op} has a pinned operand, which a job plan cannot hold (its residency changes \
                 between runs)"
            ),
        }
    }
}

impl core::error::Error for JobPlanError {}

/// Errors of the compute stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The arena cannot hold a new chunk, even after releasing every free chunk.
    OutOfMemory {
        /// Bytes requested (rounded up to the alignment).
        requested: u32,
        /// Free bytes in the arena, in all blocks.
        free: u32,
        /// The largest contiguous free block.
        largest_free: u32,
    },
    /// The slow memory tier cannot hold a tensor asked for there: it has no gap that large,
    /// or the NPU declares none (`free` and `largest_free` 0).
    SlowTierOutOfMemory {
        /// Bytes requested (rounded up to the alignment).
        requested: u32,
        /// Free bytes in the tier.
        free: u32,
        /// Its largest free block.
        largest_free: u32,
    },
    /// Host staging memory cannot hold a transfer, even after every in-flight transfer finished.
    StagingExhausted {
        /// Bytes requested.
        requested: u32,
        /// The largest contiguous free block of host memory.
        largest_free: u32,
    },
    /// A fixed capacity ran out.
    CapacityExceeded {
        /// Which knob.
        capacity: Capacity,
        /// Its value.
        limit: u32,
    },
    /// The handle's slot has been released and reused (its generation is older).
    StaleHandle {
        /// Slot index.
        index: u16,
    },
    /// The handle belongs to another server or client.
    ForeignHandle,
    /// A buffer does not have the tensor's size.
    SizeMismatch {
        /// Bytes the tensor has (or the operand needs).
        expected: u32,
        /// Bytes given.
        actual: u32,
    },
    /// An operand of an operation does not have the size the operation's parameters give it.
    BadOperands {
        /// The operator.
        op: OpKind,
        /// Which operand: an input's position among the inputs, or [`Error::OUTPUT_OPERAND`]
        /// for the output (the output has no position among the inputs; the message calls it
        /// "the output").
        operand: u8,
        /// Bytes the operand must have.
        expected: u32,
        /// Bytes it has.
        actual: u32,
    },
    /// An operation was given more or fewer inputs than it takes: nothing was checked of
    /// their sizes.
    OperandCount {
        /// The operator.
        op: OpKind,
        /// The fewest inputs it takes (trailing optional ones, such as a bias, left out).
        min: u8,
        /// The most inputs it takes.
        max: u8,
        /// Inputs given.
        given: u32,
    },
    /// An operation's parameters give an operand more bytes than a `u32` counts (4 GiB), more
    /// than any memory of the NPU holds: its shape or length is wrong.
    OperandTooLarge {
        /// The operator.
        op: OpKind,
    },
    /// The same tensor is used as output and input of one operation.
    OutputAliasesInput {
        /// The operator.
        op: OpKind,
    },
    /// The channel is in use by an enclosing call (re-entrant use from a callback or an ISR).
    ChannelBusy,
    /// A tuning table was refused (malformed, or made for another configuration).
    Table(TableError),
    /// The autotuner's cache refused a choice (full: the server's `TUNE` capacity).
    Tune(CacheError),
    /// A job plan could not be built or run.
    JobPlan(JobPlanError),
    /// The NPU driver, or the server over it, could not start with its configuration.
    Setup(SetupError),
    /// A constant tensor (made by `create_const` or `create_const_with`) was given as an
    /// operator's output, or written, copied into or placed in.
    ReadOnlyTensor,
    /// A flash segment cannot be unmapped while tensors still refer to it.
    FlashInUse {
        /// The segment.
        segment: u8,
        /// Tensors still bound in it.
        tensors: u32,
    },
    /// A placement does not fit its pool: the offset is not a multiple of the arena's
    /// alignment, or `offset + bytes` (rounded to the alignment) passes the pool's end.
    BadPlacement {
        /// Offset asked for, from the pool's start.
        offset: u32,
        /// Bytes asked for.
        bytes: u32,
        /// The pool's size.
        pool_bytes: u32,
    },
    /// A pool cannot be released while tensors are still placed in it.
    PoolInUse {
        /// Tensors still placed in it.
        placed: u32,
    },
    /// A pass was begun while another is open: passes do not nest.
    PassAlreadyOpen {
        /// The key of the open pass.
        key: u32,
    },
    /// A pass was ended with none open.
    NoPassOpen,
    /// A host-side access ([`ComputeClient::host_mut`](crate::client::ComputeClient::host_mut)
    /// and friends) to a tensor that has no pinned host block.
    NotPinned,
    /// A pinned tensor was given as the pool of a placement: its newest bytes may be in its
    /// host block, which a tensor placed over its device memory would not see (nor it, the
    /// writes through such a tensor). Make pools with `empty`.
    PinnedPool,
    /// The NPU refused or failed a job.
    Hal(HalError),
    /// A CPU fallback kernel refused its operands.
    Kernel {
        /// The operator.
        op: OpKind,
        /// The kernel's reason.
        error: KernelError,
    },
    /// The arena bookkeeping was handed a block it does not own (a bug, reported instead of a
    /// panic).
    Storage(StorageError),
    /// The NPU faulted on a job, or the job missed its watchdog deadline
    /// ([`WatchdogConfig`](crate::server::WatchdogConfig)). When `recovered`, the server reset
    /// the NPU and abandoned every job in flight: what they were producing is lost (see
    /// [`ContentsLost`](Error::ContentsLost)), everything else is as it was, and the next
    /// job runs on a clean device. Otherwise the driver cannot reset the NPU.
    Fault {
        /// What went wrong.
        fault: Fault,
        /// The faulted job's fence.
        fence: Fence,
        /// Its operator, for a compute job (`None` for a transfer, or a job the watchdog no
        /// longer followed).
        op: Option<OpKind>,
        /// Whether the server reset the NPU and went on ([`Npu::reset`](crate::hal::Npu::reset)
        /// succeeded).
        recovered: bool,
    },
    /// The tensor's newest bytes were being produced by a job that a recovery from a fault
    /// abandoned ([`Error::Fault`]): reading it, or reading it in a job, is refused until it is
    /// written again (by `write`, `copy`, or as a job's output).
    ContentsLost,
    /// What was asked needs a part of the runtime this build leaves out: the cargo feature
    /// named builds it (see the crate's features: `static-schedule`, `striping`, `tuning`).
    NotBuilt {
        /// The cargo feature of `npu-compute` that builds it.
        feature: &'static str,
    },
}

impl From<HalError> for Error {
    fn from(e: HalError) -> Self {
        Error::Hal(e)
    }
}

impl From<JobPlanError> for Error {
    fn from(e: JobPlanError) -> Self {
        Error::JobPlan(e)
    }
}

impl From<SetupError> for Error {
    fn from(e: SetupError) -> Self {
        Error::Setup(e)
    }
}

impl From<TableError> for Error {
    fn from(e: TableError) -> Self {
        Error::Table(e)
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        match e {
            StorageError::OutOfMemory {
                requested,
                free,
                largest_free,
            } => Error::OutOfMemory {
                requested,
                free,
                largest_free,
            },
            StorageError::TooManyBlocks { limit } => Error::CapacityExceeded {
                capacity: Capacity::Chunks,
                limit,
            },
            other => Error::Storage(other),
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Error::OutOfMemory {
                requested,
                free,
                largest_free,
            } => write!(
                f,
                "arena out of memory: requested {requested} bytes, {free} bytes free, largest free \
                 block {largest_free} bytes; give the NPU a larger arena (`npu-sim plan` sizes it \
                 for a model) or release tensors sooner"
            ),
            Error::SlowTierOutOfMemory {
                requested,
                free,
                largest_free,
            } => write!(
                f,
                "slow memory tier out of memory: requested {requested} bytes, {free} bytes free, \
                 largest free block {largest_free} bytes; give the NPU driver a slow memory of \
                 more bytes (Capabilities::slow_memory_bytes; 0 means it has none)"
            ),
            Error::StagingExhausted {
                requested,
                largest_free,
            } => write!(
                f,
                "host staging memory exhausted: requested {requested} bytes, largest free block \
                 {largest_free} bytes; give the NPU driver more host memory"
            ),
            Error::CapacityExceeded { capacity, limit } => write!(
                f,
                "too many {}: the limit is {limit} ({}); raise it",
                capacity.counts(),
                capacity.knob()
            ),
            Error::StaleHandle { index } => write!(
                f,
                "the tensor handle in slot {index} is stale: its tensor was released"
            ),
            Error::ForeignHandle => {
                f.write_str("the tensor handle belongs to another client or server")
            }
            Error::SizeMismatch { expected, actual } => write!(
                f,
                "the buffer has {actual} bytes, the tensor {expected}"
            ),
            Error::BadOperands {
                op,
                operand,
                expected,
                actual,
            } => {
                if operand == Error::OUTPUT_OPERAND {
                    write!(f, "{op}: the output must have {expected} bytes, it has {actual}")
                } else {
                    write!(
                        f,
                        "{op}: input {operand} must have {expected} bytes, it has {actual}"
                    )
                }
            }
            Error::OperandCount {
                op,
                min,
                max,
                given,
            } => {
                write!(f, "{op} takes ")?;
                if min == max {
                    write!(f, "{max} input{}", plural(u32::from(max)))?;
                } else {
                    write!(f, "{min} to {max} inputs")?;
                }
                write!(
                    f,
                    ", {given} {} given: pass one tensor per input of the operator, in order",
                    if given == 1 { "was" } else { "were" }
                )
            }
            Error::OperandTooLarge { op } => write!(
                f,
                "{op}: its parameters give an operand of more than {} bytes (a u32 byte count), \
                 more than any NPU memory holds: check the operator's shape or length",
                u32::MAX
            ),
            Error::OutputAliasesInput { op } => write!(
                f,
                "{op}: the output tensor is also an input; give it a tensor of its own"
            ),
            Error::ChannelBusy => f.write_str(
                "the compute channel is busy: a call was made from inside another call (a \
                 callback or an interrupt handler); make it after that call returns",
            ),
            Error::Table(e) => write!(f, "tuning table refused: {e}"),
            Error::Tune(e) => write!(f, "tuning cache: {e}"),
            Error::JobPlan(e) => e.fmt(f),
            Error::Setup(e) => e.fmt(f),
            Error::ReadOnlyTensor => f.write_str(
                "a constant tensor (or one bound in flash) cannot be written, copied into, placed \
                 in, or be an operator's output",
            ),
            Error::FlashInUse { segment, tensors } => write!(
                f,
                "flash segment {segment} cannot be unmapped: {tensors} constant tensors still use \
                 it; release them first"
            ),
            Error::BadPlacement {
                offset,
                bytes,
                pool_bytes,
            } => write!(
                f,
                "a placement of {bytes} bytes at offset {offset} does not fit its {pool_bytes}-byte \
                 pool, or its offset is not a multiple of the arena's alignment"
            ),
            Error::PoolInUse { placed } => write!(
                f,
                "the pool cannot be released: {placed} tensors are still placed in it"
            ),
            Error::PassAlreadyOpen { key } => write!(
                f,
                "a pass (key {key}) is already open: passes do not nest; end it first"
            ),
            Error::NoPassOpen => f.write_str("end of a pass with no pass open"),
            Error::NotPinned => f.write_str(
                "host access to a tensor without a pinned host block: make it with `pinned`",
            ),
            Error::PinnedPool => f.write_str(
                "a pinned tensor cannot be a pool (its host block and the tensors placed in \
                 its device memory would each miss the other's writes): make pools with `empty`",
            ),
            Error::Hal(e) => write!(f, "NPU: {e}"),
            Error::Kernel { op, error } => write!(f, "{op} on the CPU: {error}"),
            Error::Storage(e) => write!(f, "arena bookkeeping (a bug, please report it): {e}"),
            Error::Fault {
                fault,
                fence,
                op,
                recovered,
            } => {
                write!(f, "the NPU job of fence {}", fence.0)?;
                if let Some(op) = op {
                    write!(f, " ({op})")?;
                }
                write!(f, " failed with {fault}; ")?;
                if recovered {
                    f.write_str(
                        "the NPU was reset and every job in flight abandoned: what they were \
                         computing is lost (constants are intact), so run it again",
                    )
                } else {
                    f.write_str(
                        "the driver cannot reset the NPU (Npu::reset), so it cannot be trusted \
                         again: reset the board, or give the driver a reset",
                    )
                }
            }
            Error::ContentsLost => f.write_str(
                "the tensor's contents were lost: the job producing them was abandoned when the \
                 NPU was reset after a fault; write or compute it again",
            ),
            Error::NotBuilt { feature } => write!(
                f,
                "this build of npu-compute leaves it out: its cargo feature `{feature}` builds it"
            ),
        }
    }
}

impl core::error::Error for Error {}

impl Error {
    /// The [`Error::BadOperands`] operand index that names the output: past every input
    /// position (an operation has at most [`MAX_JOB_INPUTS`] inputs).
    pub const OUTPUT_OPERAND: u8 = MAX_JOB_INPUTS as u8;

    /// [`Error::OperandCount`] for `given` inputs to `op`, or [`Error::OperandTooLarge`] when
    /// `op`'s sizes overflow (its operand list cannot be made).
    // Out of line and cold: an error path, kept out of the code of `execute`, which every
    // job takes (inlined there it cost 16 instructions per job on a Cortex-M4, measured).
    #[cold]
    #[inline(never)]
    pub fn operand_count(op: &Op, given: usize) -> Error {
        match op.operands() {
            Some(need) => {
                let max = need.inputs.len();
                Error::OperandCount {
                    op: op.kind(),
                    min: max.saturating_sub(usize::from(need.optional)) as u8,
                    max: max as u8,
                    given: u32::try_from(given).unwrap_or(u32::MAX),
                }
            }
            None => Error::OperandTooLarge { op: op.kind() },
        }
    }
}

/// `"s"` unless `n` is 1.
const fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The sizes of the runtime's error types on 32-bit targets, checked when the crate is built
/// for one (every microcontroller target CI builds).
///
/// Every `?` moves an error, inside a `Result` as large as it, so their sizes are paid in code
/// at each one. None holds a 64-bit field it can do without: the model reader's and the
/// lowering's are 4-byte aligned (checked beside them, as is the graph's). These keep the
/// 64-bit fields their callers read (a [`Fence`], a memory limit, a tuning table's
/// fingerprint), which make them 8-byte aligned; the checks keep them from growing.
#[cfg(target_pointer_width = "32")]
const _: () = {
    use core::mem::size_of;

    assert!(size_of::<SetupError>() <= 24);
    assert!(size_of::<HalError>() <= 24);
    assert!(size_of::<Error>() <= 32);
};
