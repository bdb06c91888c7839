//! [`CompiledError`]: why a compiled model was refused, or a step of it failed.

use crate::ops::OpError;

/// Why a compiled model was refused ([`CompiledModel::new`](super::CompiledModel::new),
/// [`CompiledModel::session`](super::CompiledModel::session)) or could not run a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CompiledError {
    /// Shorter than its header, or than the length its header gives.
    Truncated {
        /// Bytes needed.
        needed: u32,
        /// Bytes given.
        len: u32,
    },
    /// Not a compiled model (wrong magic), a layout this crate does not read, or a header
    /// whose fields contradict each other.
    BadFormat,
    /// Made by a version of the runtime with another operator set: its steps' tags would
    /// name other operators.
    OtherRegistry {
        /// The image's registry fingerprint.
        found: u32,
        /// This build's.
        expected: u32,
    },
    /// The bytes after the header do not match their CRC: they were damaged.
    Checksum,
    /// The image or the arena does not start at the alignment it needs.
    Misaligned {
        /// `"image"` or `"arena"`.
        what: &'static str,
        /// The alignment it needs, in bytes.
        alignment: u32,
    },
    /// An input's, output's or variable's region lies outside the arena.
    BadRegion {
        /// `"input"`, `"output"` or `"variable"`.
        what: &'static str,
        /// Its index.
        index: u16,
    },
    /// A step is malformed: what is wrong with it.
    BadStep {
        /// The step's index.
        step: u16,
        /// What is wrong.
        what: &'static str,
    },
    /// A step's operator was refused (its parameters, or an operator this build leaves out),
    /// or failed to run.
    Op {
        /// The step's index.
        step: u16,
        /// The operator's error.
        error: OpError,
    },
    /// The arena given is smaller than the image's offsets need.
    ArenaTooSmall {
        /// Bytes the image needs.
        needed: u32,
        /// Bytes given.
        len: u32,
    },
}

impl core::fmt::Display for CompiledError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        const AGAIN: &str = "compile the model again with `npu-sim compile MODEL --output FILE`";
        match *self {
            CompiledError::Truncated { needed, len } => write!(
                f,
                "compiled model truncated: {len} bytes, its header needs {needed}; {AGAIN}"
            ),
            CompiledError::BadFormat => write!(
                f,
                "not a compiled model of format {}; {AGAIN}",
                super::format::FORMAT
            ),
            CompiledError::OtherRegistry { found, expected } => write!(
                f,
                "compiled model made by a runtime with another operator set (registry \
                 {found:#010x}, this one {expected:#010x}); {AGAIN}"
            ),
            CompiledError::Checksum => write!(f, "compiled model damaged (CRC); {AGAIN}"),
            CompiledError::Misaligned { what, alignment } => write!(
                f,
                "the {what} must start at a multiple of {alignment} bytes (include a compiled \
                 model with `include_aligned!`; align the arena with `#[repr(align(16))]`)"
            ),
            CompiledError::BadRegion { what, index } => write!(
                f,
                "compiled model's {what} {index} lies outside its arena; {AGAIN}"
            ),
            CompiledError::BadStep { step, what } => {
                write!(f, "compiled model's step {step}: {what}; {AGAIN}")
            }
            CompiledError::Op { step, error } => {
                write!(f, "compiled model's step {step}: {error}")
            }
            CompiledError::ArenaTooSmall { needed, len } => write!(
                f,
                "arena of {len} bytes, the compiled model needs {needed}: give it at least that"
            ),
        }
    }
}

impl core::error::Error for CompiledError {}
