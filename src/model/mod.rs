//! A zero-copy, validating reader of TensorFlow Lite (`.tflite`) models.
//!
//! Firmware keeps its model in flash as a `&'static [u8]`; this module reads it in place, with
//! no heap, no `alloc` and no `unsafe`. Everything returned borrows from that slice: tensor
//! names are `&'a str`, constant tensor data is `&'a [u8]`, quantization parameters are decoded
//! element by element from the file.
//!
//! # Design
//!
//! - **Validate up front.** [`Model::parse`] checks the header (file identifier `"TFL3"`,
//!   schema version 3) and then walks *every* table the runtime reads, through the same
//!   decoding code the accessors use: every operator code, every buffer, and for every subgraph
//!   every tensor, operator, options table and input/output index. A malformed file gives a
//!   [`ModelError`] naming what is wrong and where; nothing panics, reads out of bounds or
//!   overflows.
//! - **What is trusted after `parse`.** Nothing is cached: accessors decode again from the
//!   bytes, and still go through the checked readers (so they return `Result`), but with the
//!   bytes unchanged they cannot fail — except when *the caller* passes an index out of range.
//!   A [`Model`] is a few words (`Copy`); all indices it hands out (tensor indices of operators
//!   and subgraph inputs/outputs, opcode and buffer indices) are in range, every tensor's shape
//!   has non-negative dimensions, at most [`MAX_RANK`] of them and a byte size that fits a `u32`,
//!   every constant buffer is exactly as long as its tensor needs, and quantization vectors have
//!   consistent lengths. Option *values* (strides, axes, ...) are decoded but not checked
//!   against the tensors: that is a kernel's job. (A build that leaves operators out, by the
//!   crate's `op-` features, decodes only the options tables of those it lowers; the others
//!   are validated as tables and returned as [`BuiltinOptions::Other`].)
//! - **Flatbuffers, checked.** The generic layer (`flatbuffer.rs`) validates each table's vtable
//!   (inside the file, even size >= 4, fields inside the table), every `uoffset` (non-zero, no
//!   overflow, inside the file), vector lengths (`len * size` inside the file), strings
//!   (NUL-terminated, UTF-8) and alignment relative to the file start. Scalars are decoded with
//!   `from_le_bytes` from byte slices, so the file need not be aligned in memory, and typed
//!   vectors (`int32` shapes, `float` scales, `int64` zero points) are read element by element,
//!   never cast in place.
//! - **Bounded work.** The reader is not recursive: the nesting of tables is fixed by the schema
//!   (`Model` → `SubGraph` → `Tensor` → `QuantizationParameters`), and every loop runs over a
//!   vector whose length was checked against the file size, so `parse` always terminates. Its
//!   work is linear in the size of files a converter writes; a hostile file can make many
//!   tables share one long string (a name, a custom op's code), each sharer re-validating its
//!   UTF-8, so the worst case is quadratic in the file size — still finite and panic-free.
//! - **Fixed capacities.** Lists the reader copies out have documented capacities
//!   ([`MAX_RANK`], [`MAX_OP_INPUTS`], [`MAX_OP_OUTPUTS`], [`MAX_TENSORS`]); a model exceeding
//!   one is rejected with [`ModelError::CapacityExceeded`] naming the constant.
//!
//! Large models may keep buffer data outside the flatbuffer (`Buffer.offset`/`Buffer.size`,
//! relative to the start of the file, used when `offset > 1`); pass the whole file to
//! [`Model::parse`] and such data is returned the same way, checked to lie inside the file.
//! Sparse tensors and `QuantizationParameters.details` are rejected as
//! [`ModelError::Unsupported`].
//!
//! ```no_run
//! fn demo(bytes: &'static [u8]) -> Result<(), npu_compute::model::ModelError> {
//! use npu_compute::model::{BuiltinOp, Model};
//! let model = Model::parse(bytes)?;
//! let graph = model.subgraph();
//! for op in graph.operators() {
//!     let op = op?;
//!     if op.builtin == BuiltinOp::Conv2d {
//!         let filter = graph.tensor(op.inputs[1].unwrap_or(0))?;
//!         let _weights: Option<&'static [u8]> = filter.data;
//!     }
//! }
//! Ok(()) }
//! ```

mod error;
mod flatbuffer;
mod operator;
mod ops;
mod options;
mod schema;
mod subgraph;
mod tensor;

pub use error::ModelError;
pub use operator::OperatorInfo;
pub use ops::BuiltinOp;
pub use options::{
    AddSubOptions, BatchMatMulOptions, BuiltinOptions, ConcatenationOptions, Conv2dOptions,
    DepthwiseConv2dOptions, FullyConnectedOptions, L2NormOptions, LeakyReluOptions, MirrorPadMode,
    MirrorPadOptions, MulOptions, PackOptions, Pool2dOptions, ReducerOptions, ReshapeOptions,
    SoftmaxOptions, SplitOptions, StridedSliceOptions, TransposeConvOptions,
    UnidirectionalSequenceLstmOptions, MAX_OPTIONS_TYPE,
};
pub use options::{BlockSizeOptions, GatherOptions, ResizeOptions, SqueezeOptions};
pub use schema::{Activation, DataType, Padding, WeightsFormat};

pub use subgraph::{Operators, SubGraph, TensorIndices, Tensors};
pub use tensor::{Quantization, Shape, TensorInfo};

use flatbuffer::{Table, Tables};
use schema::slot;

type Result<T> = core::result::Result<T, ModelError>;

/// Maximum tensor rank (dimensions in a shape, and entries in `ReshapeOptions.new_shape`).
pub const MAX_RANK: usize = 6;
/// Maximum inputs of one operator (24 covers every builtin, e.g. `LSTM`).
pub const MAX_OP_INPUTS: usize = 24;
/// Maximum outputs of one operator.
pub const MAX_OP_OUTPUTS: usize = 8;
/// Maximum tensors in one subgraph: tensor indices are handed out as `u16`.
pub const MAX_TENSORS: u32 = u16::MAX as u32;
/// The schema version this reader understands (`Model.version`).
pub const SCHEMA_VERSION: u32 = 3;
/// The TFLite file identifier, at bytes 4..8.
pub const FILE_IDENTIFIER: [u8; 4] = *b"TFL3";

/// Parts of the model every subgraph needs.
#[derive(Clone, Copy, Debug)]
struct Shared<'a> {
    /// The whole file (external buffer data is relative to its start).
    file: &'a [u8],
    opcodes: Tables<'a>,
    buffers: Tables<'a>,
}

/// A validated TFLite model, borrowing the file's bytes. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    shared: Shared<'a>,
    version: u32,
    description: Option<&'a str>,
    subgraphs: Tables<'a>,
    main: SubGraph<'a>,
}

impl<'a> Model<'a> {
    /// Parses and validates a `.tflite` file (see the [module docs](self) for what is checked).
    ///
    /// # Errors
    ///
    /// A [`ModelError`] naming the first problem found.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let fb = &bytes[..bytes.len().min(u32::MAX as usize)];
        let header = flatbuffer::slice(fb, 0, 8, "file header")?;
        let found = [header[4], header[5], header[6], header[7]];
        if found != FILE_IDENTIFIER {
            return Err(ModelError::BadIdentifier { found });
        }
        let root = Table::at_offset(fb, 0, "Model")?;
        let version = root.scalar(slot::model::VERSION, "Model.version", 0u32)?;
        if version != SCHEMA_VERSION {
            return Err(ModelError::UnsupportedVersion { version });
        }
        let shared = Shared {
            file: bytes,
            opcodes: root.tables(slot::model::OPERATOR_CODES, "OperatorCode")?,
            buffers: root.tables(slot::model::BUFFERS, "Buffer")?,
        };
        let description = root.string(slot::model::DESCRIPTION, "Model.description")?;
        let subgraphs = root.tables(slot::model::SUBGRAPHS, "SubGraph")?;
        if subgraphs.len() == 0 {
            return Err(ModelError::MissingField {
                table: "Model",
                field: "subgraphs",
            });
        }
        for i in 0..shared.opcodes.len() {
            shared.opcode(i)?;
        }
        for i in 0..shared.buffers.len() {
            shared.buffer(i)?;
        }
        for i in 0..subgraphs.len() {
            SubGraph::new(shared, subgraphs, i)?.validate()?;
        }
        let main = SubGraph::new(shared, subgraphs, 0)?;
        Ok(Self {
            shared,
            version,
            description,
            subgraphs,
            main,
        })
    }

    /// The file's bytes, as passed to [`Model::parse`].
    pub fn bytes(&self) -> &'a [u8] {
        self.shared.file
    }

    /// `Model.version` (always [`SCHEMA_VERSION`]).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// `Model.description` (the converter's name, usually), if present.
    pub fn description(&self) -> Option<&'a str> {
        self.description
    }

    /// The main subgraph (subgraph 0), the one inference runs.
    pub fn subgraph(&self) -> SubGraph<'a> {
        self.main
    }

    /// Number of subgraphs (at least 1; more when the model has control flow, e.g. `WHILE`).
    pub fn subgraph_count(&self) -> u32 {
        self.subgraphs.len()
    }

    /// Subgraph `index` (all subgraphs are validated by [`Model::parse`]).
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= subgraph_count()`.
    pub fn subgraph_at(&self, index: u32) -> Result<SubGraph<'a>> {
        SubGraph::new(self.shared, self.subgraphs, index)
    }

    /// Number of operator codes.
    pub fn opcode_count(&self) -> u32 {
        self.shared.opcodes.len()
    }

    /// Operator code `index`.
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= opcode_count()`.
    pub fn opcode(&self, index: u32) -> Result<OpCode<'a>> {
        self.shared.opcode(index)
    }

    /// Number of buffers (buffer 0 is, by convention, the empty buffer).
    pub fn buffer_count(&self) -> u32 {
        self.shared.buffers.len()
    }

    /// The data of buffer `index`: inside the flatbuffer, or outside it (`offset`/`size`), or
    /// `None` when the buffer is empty.
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= buffer_count()`.
    pub fn buffer(&self, index: u32) -> Result<Option<&'a [u8]>> {
        self.shared.buffer(index)
    }
}

/// An operator code: which operator an [`OperatorInfo`] runs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OpCode<'a> {
    /// The builtin operator: `max(deprecated_builtin_code, builtin_code)`, as TFLite resolves it.
    pub builtin: BuiltinOp,
    /// The operator's version (default 1).
    pub version: i32,
    /// The custom operator's name (required when `builtin` is [`BuiltinOp::Custom`]).
    pub custom_code: Option<&'a str>,
}

impl<'a> Shared<'a> {
    fn opcode(&self, index: u32) -> Result<OpCode<'a>> {
        let t = self.opcodes.get(index)?;
        let deprecated: i8 = t.scalar(
            slot::opcode::DEPRECATED_BUILTIN_CODE,
            "OperatorCode.deprecated_builtin_code",
            0,
        )?;
        let extended: i32 = t.scalar(slot::opcode::BUILTIN_CODE, "OperatorCode.builtin_code", 0)?;
        let code = extended.max(i32::from(deprecated));
        if code < 0 {
            return Err(ModelError::BadEnum {
                what: "OperatorCode.builtin_code",
                value: code,
            });
        }
        let builtin = BuiltinOp::from_code(code);
        let custom_code = t.string(slot::opcode::CUSTOM_CODE, "OperatorCode.custom_code")?;
        if builtin == BuiltinOp::Custom && custom_code.is_none() {
            return Err(ModelError::MissingField {
                table: "OperatorCode",
                field: "custom_code",
            });
        }
        Ok(OpCode {
            builtin,
            version: t.scalar(slot::opcode::VERSION, "OperatorCode.version", 1)?,
            custom_code,
        })
    }

    fn buffer(&self, index: u32) -> Result<Option<&'a [u8]>> {
        let t = self.buffers.get(index)?;
        let data = t.vector_or_empty::<u8>(slot::buffer::DATA, "Buffer.data")?;
        let offset: u64 = t.scalar(slot::buffer::OFFSET, "Buffer.offset", 0)?;
        let size: u64 = t.scalar(slot::buffer::SIZE, "Buffer.size", 0)?;
        if offset > 1 {
            // Data outside the flatbuffer, relative to the start of the file.
            if data.len() != 0 {
                return Err(ModelError::ConflictingBufferData { buffer: index });
            }
            let wide = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let oob = ModelError::ExternalBufferOutOfBounds {
                buffer: index,
                offset: wide(offset),
                size: wide(size),
                file: self.file.len(),
            };
            // An offset or a size above usize::MAX lies past the end of any file in memory.
            let (Ok(start), Ok(len)) = (usize::try_from(offset), usize::try_from(size)) else {
                return Err(oob);
            };
            let bytes = start
                .checked_add(len)
                .and_then(|end| self.file.get(start..end))
                .ok_or(oob)?;
            return Ok((!bytes.is_empty()).then_some(bytes));
        }
        let bytes = data.bytes();
        Ok((!bytes.is_empty()).then_some(bytes))
    }
}
