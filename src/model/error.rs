//! [`ModelError`]: every way a `.tflite` file can be rejected.
//!
//! Each variant names *what* is wrong (a `&'static str` of the form `"Table.field"`) and *where*:
//! a byte offset into the file for structural (flatbuffer) errors, or the index of the tensor,
//! operator, operator code, buffer or subgraph for semantic errors.
//!
//! Every `?` of the reader moves one, so its fields are as narrow as their quantities allow,
//! with no 64-bit field (whose alignment would double the copies on a 32-bit target): byte
//! offsets and counts within the file are `u32` (the reader reads at most 4 GiB), the values of
//! the file's signed enums and indices fit an `i32`, and the reader's capacities a `u16`
//! (`tests::sizes` pins the sizes on 32-bit targets).

/// Why a model was rejected, or why an accessor failed.
///
/// After [`Model::parse`](super::Model::parse) has succeeded, the accessors of the returned
/// model do not return errors (they re-check, but the checks passed once already); the only
/// exceptions are accessors that take an index from the caller, which return
/// [`ModelError::BadIndex`] when that index is out of range.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModelError {
    /// `len` bytes at `offset` do not fit in the `buffer`-byte file.
    OutOfBounds {
        /// What was being read.
        what: &'static str,
        /// Byte offset of the read.
        offset: u32,
        /// Number of bytes wanted.
        len: u32,
        /// Size of the flatbuffer.
        buffer: u32,
    },
    /// An offset stored in the file at `at` is zero, or overflows or points past the end of
    /// the file when added to its position (a truncated file, typically).
    BadOffset {
        /// What the offset points to.
        what: &'static str,
        /// Byte offset of the stored offset.
        at: u32,
        /// The stored value.
        value: u32,
    },
    /// A table, vector or field is not aligned as flatbuffers requires (relative to the start of
    /// the file).
    Misaligned {
        /// What was being read.
        what: &'static str,
        /// Its byte offset.
        offset: u32,
        /// The alignment it needs.
        align: u32,
    },
    /// The vtable of the table at `table` is malformed.
    BadVtable {
        /// The table's type.
        what: &'static str,
        /// Byte offset of the table.
        table: u32,
        /// What is wrong with the vtable.
        reason: &'static str,
    },
    /// Bytes 4..8 are not the TFLite file identifier `"TFL3"`.
    BadIdentifier {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// `Model.version` is not the schema version this reader understands (3).
    UnsupportedVersion {
        /// The version found.
        version: u32,
    },
    /// A required field is absent.
    MissingField {
        /// The table.
        table: &'static str,
        /// The field.
        field: &'static str,
    },
    /// An enum or union tag has a value the schema does not define.
    BadEnum {
        /// The field.
        what: &'static str,
        /// The value found (every enum and union tag of the schema is at most 32 bits wide).
        value: i32,
    },
    /// An index stored in the file (or passed by the caller) is out of range.
    BadIndex {
        /// The field holding the index (or the accessor).
        what: &'static str,
        /// Index of the tensor/operator/subgraph holding it (0 for an index passed to an
        /// accessor, or one in a list of the model itself).
        item: u32,
        /// The index found (an unsigned index above `i32::MAX` is reported as `i32::MAX`: no
        /// list of a model of at most 4 GiB has that many entries).
        index: i32,
        /// The number of valid entries.
        len: u32,
    },
    /// A list is longer than the fixed capacity this reader stores it in.
    CapacityExceeded {
        /// The list.
        what: &'static str,
        /// Name of the capacity constant (e.g. `"MAX_RANK"`).
        capacity: &'static str,
        /// Its value (the reader's capacities are at most [`MAX_TENSORS`](super::MAX_TENSORS),
        /// `u16::MAX`).
        limit: u16,
        /// The length found.
        actual: u32,
    },
    /// A string is not NUL-terminated inside the file.
    NotNulTerminated {
        /// The field.
        what: &'static str,
        /// Byte offset of the string.
        offset: u32,
    },
    /// A string is not valid UTF-8.
    InvalidUtf8 {
        /// The field.
        what: &'static str,
        /// Byte offset of the string.
        offset: u32,
    },
    /// A tensor dimension is negative.
    BadDimension {
        /// The tensor's index.
        tensor: u32,
        /// The axis.
        axis: u32,
        /// The value found.
        value: i32,
    },
    /// A tensor's element count or byte size does not fit in a `u32`.
    TensorTooLarge {
        /// The tensor's index.
        tensor: u32,
    },
    /// A constant tensor's data is not as long as its shape and type say.
    BufferSizeMismatch {
        /// The tensor's index.
        tensor: u32,
        /// Bytes the shape and type need.
        expected: u32,
        /// Bytes in the buffer.
        actual: u32,
    },
    /// A tensor's quantization vectors disagree: `scale` and `zero_point` differ in length, or
    /// per-channel parameters do not match the quantized dimension's size.
    BadQuantization {
        /// The tensor's index.
        tensor: u32,
        /// Length of `scale`.
        scales: u32,
        /// Length of `zero_point`.
        zero_points: u32,
        /// What is wrong.
        reason: &'static str,
    },
    /// An operator's `builtin_options_type` is not the options table its operator takes.
    OptionsMismatch {
        /// The operator's index.
        operator: u32,
        /// Its builtin operator code.
        builtin: i32,
        /// The `builtin_options_type` union tag found.
        options_type: u8,
    },
    /// A buffer stores data both inline (`data`) and outside the flatbuffer (`offset`/`size`).
    ConflictingBufferData {
        /// The buffer's index.
        buffer: u32,
    },
    /// A buffer's `offset`/`size` (data outside the flatbuffer) reaches past the end of the file.
    ExternalBufferOutOfBounds {
        /// The buffer's index.
        buffer: u32,
        /// `Buffer.offset` (a 64-bit field of the file, reported as `usize::MAX` when above it:
        /// past any file this target holds in memory).
        offset: usize,
        /// `Buffer.size` (as `offset`, `usize::MAX` when above it).
        size: usize,
        /// The file's size.
        file: usize,
    },
    /// The model uses a feature this reader does not support (e.g. sparse tensors).
    Unsupported {
        /// The feature.
        what: &'static str,
    },
}

impl core::fmt::Display for ModelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ModelError::OutOfBounds {
                what,
                offset,
                len,
                buffer,
            } => write!(
                f,
                "malformed model: {what} needs {len} bytes at byte {offset}, past the end of the \
                 {buffer}-byte file (is it truncated?)"
            ),
            ModelError::BadOffset { what, at, value } => write!(
                f,
                "malformed model: the offset to {what} stored at byte {at} ({value}) is zero or \
                 points past the end of the file (is it truncated?)"
            ),
            ModelError::Misaligned {
                what,
                offset,
                align,
            } => write!(
                f,
                "malformed model: {what} at byte {offset} is not {align}-byte aligned, as \
                 flatbuffers require"
            ),
            ModelError::BadVtable {
                what,
                table,
                reason,
            } => write!(
                f,
                "malformed model: the vtable of the {what} table at byte {table} is invalid: {reason}"
            ),
            ModelError::BadIdentifier { found } => {
                f.write_str("not a TensorFlow Lite model: bytes 4..8 are \"")?;
                for b in found {
                    write!(f, "{}", core::ascii::escape_default(b))?;
                }
                f.write_str("\", not the identifier \"TFL3\"")
            }
            ModelError::UnsupportedVersion { version } => write!(
                f,
                "TFLite schema version {version} is not supported: this reader reads version 3"
            ),
            ModelError::MissingField { table, field } => {
                write!(f, "malformed model: the required field {table}.{field} is missing")
            }
            ModelError::BadEnum { what, value } => write!(
                f,
                "malformed model: {what} is {value}, a value the TFLite schema does not define"
            ),
            ModelError::BadIndex {
                what,
                item,
                index,
                len,
            } => write!(
                f,
                "malformed model: {what} of item {item} is {index}, outside 0..{len}"
            ),
            ModelError::CapacityExceeded {
                what,
                capacity,
                limit,
                actual,
            } => write!(
                f,
                "{what} has {actual} entries, more than the reader holds ({capacity} = {limit})"
            ),
            ModelError::NotNulTerminated { what, offset } => write!(
                f,
                "malformed model: the string {what} at byte {offset} has no terminating NUL"
            ),
            ModelError::InvalidUtf8 { what, offset } => write!(
                f,
                "malformed model: the string {what} at byte {offset} is not valid UTF-8"
            ),
            ModelError::BadDimension {
                tensor,
                axis,
                value,
            } => write!(
                f,
                "malformed model: tensor {tensor} has dimension {value} on axis {axis}; \
                 dimensions must not be negative"
            ),
            ModelError::TensorTooLarge { tensor } => write!(
                f,
                "tensor {tensor} is larger than 4 GiB (its byte size does not fit a u32)"
            ),
            ModelError::BufferSizeMismatch {
                tensor,
                expected,
                actual,
            } => write!(
                f,
                "malformed model: constant tensor {tensor} has {actual} bytes of data, its shape \
                 and type need {expected}"
            ),
            ModelError::BadQuantization {
                tensor,
                scales,
                zero_points,
                reason,
            } => write!(
                f,
                "malformed model: the quantization of tensor {tensor} ({scales} scales, \
                 {zero_points} zero points) is invalid: {reason}"
            ),
            ModelError::OptionsMismatch {
                operator,
                builtin,
                options_type,
            } => write!(
                f,
                "malformed model: operator {operator} ({}) carries options of union type \
                 {options_type}, which that operator does not take",
                super::BuiltinOp::from_code(builtin).name()
            ),
            ModelError::ConflictingBufferData { buffer } => write!(
                f,
                "malformed model: buffer {buffer} holds data both inside the flatbuffer and \
                 outside it"
            ),
            ModelError::ExternalBufferOutOfBounds {
                buffer,
                offset,
                size,
                file,
            } => write!(
                f,
                "malformed model: buffer {buffer} lies at bytes {offset}..{offset}+{size}, past \
                 the end of the {file}-byte file"
            ),
            ModelError::Unsupported { what } => {
                write!(f, "the model uses {what}, which this reader does not support")
            }
        }
    }
}

impl core::error::Error for ModelError {}

impl ModelError {
    /// An unsigned index as [`ModelError::BadIndex`] reports it (saturated at `i32::MAX`).
    pub(crate) fn index(index: u32) -> i32 {
        i32::try_from(index).unwrap_or(i32::MAX)
    }
}

/// `ModelError`'s size on 32-bit targets (see the checks in `error.rs`): every `?` moves it.
#[cfg(target_pointer_width = "32")]
const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<ModelError>() <= 24 && align_of::<ModelError>() == 4);
};
