//! Why a model could not be prepared or invoked.

use crate::error::Error;
use crate::hal::{HalError, SetupError};
use crate::memory::ArenaPlanError;
use crate::model::{BuiltinOp, ModelError};
use npu_kernels::KernelError;

/// A graph error: every variant names the operator (by its index in the model and its
/// builtin code) or the capacity involved.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GraphError {
    /// The model bytes are malformed or use a feature the reader does not support.
    Model(ModelError),
    /// An operator, or one of its parameters, that the runtime does not support.
    Unsupported {
        /// Operator index in the subgraph.
        op_index: u32,
        /// The operator.
        op: BuiltinOp,
        /// What is unsupported.
        what: &'static str,
    },
    /// A kernel refused an operator's shapes or quantization while it was prepared.
    Kernel {
        /// Operator index in the subgraph.
        op_index: u32,
        /// The operator.
        op: BuiltinOp,
        /// The kernel's reason.
        error: KernelError,
    },
    /// A tensor's shape disagrees with what its operator computes.
    ShapeMismatch {
        /// Operator index in the subgraph.
        op_index: u32,
        /// The operator.
        op: BuiltinOp,
        /// The tensor.
        tensor: u16,
        /// Elements the operator produces or needs.
        expected: u32,
        /// Elements the tensor has.
        actual: u32,
    },
    /// The compute stack failed (arena full, handle table full, NPU error...), while preparing
    /// constants (`op_index: None`) or running an operator.
    Compute {
        /// The operator being run, if any.
        op_index: Option<u32>,
        /// The stack's error.
        error: Error,
    },
    /// A fixed capacity of the graph is too small for this model.
    CapacityExceeded {
        /// The const generic or constant (`"OPS"`, `"TENSORS"`, `"MAX_IO"`).
        capacity: &'static str,
        /// Its value.
        limit: u32,
        /// What this model needs.
        needed: u32,
    },
    /// The arena planner refused the model's activations (more buffers than its capacity,
    /// or a plan beyond 4 GiB).
    Plan(ArenaPlanError),
    /// A tensor listed in [`PrepareOptions::slow_tensors`](super::PrepareOptions::slow_tensors)
    /// cannot be kept in the slow tier.
    SlowTensor {
        /// The tensor's index in the model.
        tensor: u16,
        /// Why, and what to change.
        reason: &'static str,
    },
    /// An input or output buffer has the wrong length.
    BadIo {
        /// `"input"` or `"output"`.
        what: &'static str,
        /// Which one: the model input's (or output's) position.
        index: u32,
        /// Bytes the model's tensor has.
        expected: u32,
        /// Bytes the buffer has.
        actual: u32,
    },
    /// More or fewer input (or output) buffers were given than the model has inputs (or
    /// outputs): nothing was checked of their lengths.
    IoCount {
        /// `"input"` or `"output"`.
        what: &'static str,
        /// The model's inputs (or outputs).
        expected: u32,
        /// Buffers given.
        given: u32,
    },
    /// A schedule table given to prepare was refused (made for another model or other
    /// units, damaged, or naming steps this model does not have).
    ScheduleTable(super::schedule_table::GraphTableError),
}

impl From<ModelError> for GraphError {
    fn from(e: ModelError) -> Self {
        GraphError::Model(e)
    }
}

impl From<Error> for GraphError {
    /// A stack error outside any one operator (`op_index: None`).
    fn from(error: Error) -> Self {
        GraphError::Compute {
            op_index: None,
            error,
        }
    }
}

impl From<HalError> for GraphError {
    /// A driver's refusal outside any one operator, as the stack reports it.
    fn from(e: HalError) -> Self {
        Error::from(e).into()
    }
}

impl From<SetupError> for GraphError {
    /// A driver that could not be set up (its constructor's error), as the stack reports it.
    fn from(e: SetupError) -> Self {
        Error::from(e).into()
    }
}

impl From<ArenaPlanError> for GraphError {
    fn from(e: ArenaPlanError) -> Self {
        GraphError::Plan(e)
    }
}

impl core::error::Error for GraphError {}

impl core::fmt::Display for GraphError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GraphError::Model(e) => e.fmt(f),
            GraphError::Plan(e) => write!(f, "the arena plan failed: {e}"),
            GraphError::SlowTensor { tensor, reason } => {
                write!(f, "tensor {tensor} cannot be kept in the slow tier: {reason}")
            }
            GraphError::ScheduleTable(e) => e.fmt(f),
            GraphError::Unsupported { op_index, op, what } => write!(
                f,
                "operator {op_index} ({}): unsupported {what}",
                op.name()
            ),
            GraphError::Kernel {
                op_index,
                op,
                error,
            } => write!(
                f,
                "operator {op_index} ({}): its parameters are refused: {error}",
                op.name()
            ),
            GraphError::ShapeMismatch {
                op_index,
                op,
                tensor,
                expected,
                actual,
            } => write!(
                f,
                "operator {op_index} ({}): tensor {tensor} has {actual} elements, the operator needs {expected}",
                op.name()
            ),
            GraphError::Compute {
                op_index: Some(i),
                error,
            } => write!(f, "operator {i}: {error}"),
            GraphError::Compute {
                op_index: None,
                error,
            } => write!(f, "{error}"),
            GraphError::CapacityExceeded {
                capacity,
                limit,
                needed,
            } => write!(
                f,
                "capacity {capacity} = {limit} is too small: this model needs {needed}; raise {capacity}"
            ),
            GraphError::BadIo {
                what,
                index,
                expected,
                actual,
            } => write!(
                f,
                "{what} {index}: expected {expected} bytes, got {actual}"
            ),
            GraphError::IoCount {
                what,
                expected,
                given,
            } => write!(
                f,
                "the model has {expected} {what}{}, {given} {} given: pass one buffer per model \
                 {what}, in the model's order",
                if *expected == 1 { "" } else { "s" },
                if *given == 1 { "was" } else { "were" }
            ),
        }
    }
}

/// `GraphError`'s size on 32-bit targets (see the checks in `error.rs`): every `?` moves it.
#[cfg(target_pointer_width = "32")]
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<GraphError>() <= 40);
};
