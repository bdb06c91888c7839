//! [`OpError`]: why an operator could not run over the buffers it was given.

use super::MAX_INPUTS;
use npu_kernels::KernelError;

#[cfg(doc)]
use super::Op;

/// Why an op could not run over the given buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OpError {
    /// The kernel refused the operands.
    Kernel(KernelError),
    /// A buffer is not aligned for its element type, or its length is not a whole number of
    /// elements.
    Misaligned {
        /// Operand index (inputs first, then the output as [`MAX_INPUTS`]).
        operand: u8,
    },
    /// The op needs a different number of inputs.
    InputCount {
        /// Inputs given.
        given: u8,
    },
    /// The op cannot write over its input ([`Op::runs_in_place`] is false).
    NotInPlace,
    /// The op does not run as im2col ([`Op::im2col`] is `None`).
    NotIm2col,
    /// A stateful op run without its state writable ([`Op::run`] rather than
    /// [`Op::run_stateful`]), or state given to an op that has none.
    State,
    /// The operator's code is left out of this build: none of the cargo features that build
    /// it (`all-ops`, or the `op-` feature of a TFLite operator it lowers from) is on.
    NotBuilt,
}

impl core::fmt::Display for OpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            OpError::Kernel(e) => e.fmt(f),
            OpError::Misaligned { operand } if usize::from(operand) == MAX_INPUTS => f.write_str(
                "the output buffer is not aligned for its element type, or not a whole \
                     number of elements",
            ),
            OpError::Misaligned { operand } => write!(
                f,
                "input buffer {operand} is not aligned for its element type, or not a whole \
                 number of elements"
            ),
            OpError::InputCount { given } => {
                write!(f, "{given} inputs given, not a number the op takes")
            }
            OpError::NotInPlace => f.write_str("the op cannot write over its input"),
            OpError::NotIm2col => f.write_str("the op does not run as im2col"),
            OpError::State => f.write_str("the op's state operands are not given writable"),
            OpError::NotBuilt => f.write_str(
                "the op's code is left out of this build (turn on the cargo feature `all-ops` \
                 or the `op-` feature of a TFLite operator that lowers to it)",
            ),
        }
    }
}

impl core::error::Error for OpError {}

impl From<KernelError> for OpError {
    fn from(e: KernelError) -> Self {
        OpError::Kernel(e)
    }
}
