//! [`ModelError`]: every way a `.tflite` file can be rejected.
//!
//! Each variant names *what* is wrong (a `&'static str` of the form `"Table.field"`) and *where*:
//! a byte offset into the file for structural (flatbuffer) errors, or the index of the tensor,
//! operator, operator code, buffer or subgraph for semantic errors.

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
    /// An offset stored in the file at `at` is zero or overflows when added to its position.
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
        /// The value found.
        value: i64,
    },
    /// An index stored in the file (or passed by the caller) is out of range.
    BadIndex {
        /// The field holding the index (or the accessor).
        what: &'static str,
        /// Index of the tensor/operator/subgraph holding it (0 for an index passed to an
        /// accessor, or one in a list of the model itself).
        item: u32,
        /// The index found.
        index: i64,
        /// The number of valid entries.
        len: u32,
    },
    /// A list is longer than the fixed capacity this reader stores it in.
    CapacityExceeded {
        /// The list.
        what: &'static str,
        /// Name of the capacity constant (e.g. `"MAX_RANK"`).
        capacity: &'static str,
        /// Its value.
        limit: u32,
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
        /// `Buffer.offset`.
        offset: u64,
        /// `Buffer.size`.
        size: u64,
        /// The file's size.
        file: u64,
    },
    /// The model uses a feature this reader does not support (e.g. sparse tensors).
    Unsupported {
        /// The feature.
        what: &'static str,
    },
}

impl core::fmt::Display for ModelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The Debug form names every field; it is the most useful message.
        write!(f, "invalid TFLite model: {self:?}")
    }
}

impl core::error::Error for ModelError {}
