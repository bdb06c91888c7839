//! The error type of the compute stack.
//!
//! Every error says what was wrong and, where a limit was hit, which limit and how far: requested
//! against available bytes, the name of the capacity knob (a const generic) that ran out.

use crate::hal::{HalError, OpKind};
use crate::server::PlanError;
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
}

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
    /// An operation got the wrong number or sizes of operands.
    BadOperands {
        /// The operator.
        op: OpKind,
        /// Operand index (inputs first, then the output).
        operand: u8,
        /// Bytes the operand must have (0 when the operand is missing or extra).
        expected: u32,
        /// Bytes it has.
        actual: u32,
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
    Plan(PlanError),
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
}

impl From<HalError> for Error {
    fn from(e: HalError) -> Self {
        Error::Hal(e)
    }
}

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Self {
        Error::Plan(e)
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
        match self {
            Error::OutOfMemory { requested, free, largest_free } => write!(
                f,
                "arena out of memory: requested {requested} bytes, {free} bytes free, largest free block {largest_free} bytes"
            ),
            Error::StagingExhausted { requested, largest_free } => write!(
                f,
                "host staging memory exhausted: requested {requested} bytes, largest free block {largest_free} bytes"
            ),
            Error::CapacityExceeded { capacity, limit } => {
                write!(f, "capacity {capacity:?} exhausted (limit {limit})")
            }
            Error::StaleHandle { index } => write!(f, "stale tensor handle (slot {index} was released)"),
            Error::ForeignHandle => write!(f, "tensor handle belongs to another client"),
            Error::SizeMismatch { expected, actual } => {
                write!(f, "buffer size mismatch: tensor has {expected} bytes, buffer {actual}")
            }
            Error::BadOperands { op, operand, expected, actual } => write!(
                f,
                "{op:?}: operand {operand} must have {expected} bytes, has {actual}"
            ),
            Error::OutputAliasesInput { op } => write!(f, "{op:?}: output tensor is also an input"),
            Error::ChannelBusy => write!(f, "compute channel is busy (re-entrant call)"),
            Error::Table(TableError::OtherHal { found, expected }) => write!(
                f,
                "tuning table made for another HAL configuration (fingerprint {found:#018x}, this one is {expected:#018x})"
            ),
            Error::Table(TableError::Checksum { stored, computed }) => write!(
                f,
                "tuning table checksum mismatch (stored {stored:#010x}, computed {computed:#010x}): corrupted"
            ),
            Error::Table(e) => write!(f, "tuning table refused: {e:?}"),
            Error::Tune(e) => write!(f, "tuning cache: {e:?}"),
            Error::Plan(PlanError::Stale) => write!(
                f,
                "job plan is stale: the server's tuning changed since it was built"
            ),
            Error::Plan(PlanError::OpCount { expected, actual }) => write!(
                f,
                "job plan of {expected} steps was given {actual} ops"
            ),
            Error::Plan(PlanError::OpMismatch { step, expected, actual }) => write!(
                f,
                "job plan step {step} was built for {expected:?}, given {actual:?}"
            ),
            Error::Plan(PlanError::OnCpu { op }) => write!(
                f,
                "{op:?} would run on the CPU: a job plan holds NPU jobs only"
            ),
            Error::Plan(PlanError::Pinned { op }) => write!(
                f,
                "{op:?}: a pinned tensor cannot be a job plan operand"
            ),
            Error::ReadOnlyTensor => write!(f, "a constant tensor cannot be written"),
            Error::FlashInUse { segment, tensors } => write!(
                f,
                "flash segment {segment} is still used by {tensors} constant tensors"
            ),
            Error::BadPlacement { offset, bytes, pool_bytes } => write!(
                f,
                "placement of {bytes} bytes at offset {offset} does not fit a {pool_bytes}-byte pool (or is misaligned)"
            ),
            Error::PoolInUse { placed } => {
                write!(f, "pool still holds {placed} placed tensors")
            }
            Error::PassAlreadyOpen { key } => {
                write!(f, "a pass (key {key}) is already open: passes do not nest")
            }
            Error::NoPassOpen => write!(f, "end of a pass with no pass open"),
            Error::NotPinned => write!(
                f,
                "host access to a tensor without a pinned host block (make it with `pinned`)"
            ),
            Error::Hal(e) => write!(f, "NPU error: {e:?}"),
            Error::Kernel { op, error } => write!(f, "{op:?} CPU kernel error: {error:?}"),
            Error::Storage(e) => write!(f, "arena bookkeeping error: {e:?}"),
        }
    }
}
