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
//!   against the tensors: that is a kernel's job.
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
mod ops;
mod schema;

pub use error::ModelError;
pub use ops::BuiltinOp;
pub use schema::{
    Activation, AddSubOptions, BatchMatMulOptions, BuiltinOptions, ConcatenationOptions,
    Conv2dOptions, DataType, DepthwiseConv2dOptions, FullyConnectedOptions, MulOptions, Padding,
    Pool2dOptions, ReducerOptions, ReshapeOptions, SoftmaxOptions, WeightsFormat, MAX_OPTIONS_TYPE,
};

use flatbuffer::{Table, Tables, Vector};
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
                value: i64::from(code),
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
            let file = self.file.len() as u64;
            let oob = ModelError::ExternalBufferOutOfBounds {
                buffer: index,
                offset,
                size,
                file,
            };
            let end = offset.checked_add(size).ok_or(oob)?;
            if end > file {
                return Err(oob);
            }
            let (start, end) = (
                usize::try_from(offset).map_err(|_| oob)?,
                usize::try_from(end).map_err(|_| oob)?,
            );
            let bytes = self.file.get(start..end).ok_or(oob)?;
            return Ok((!bytes.is_empty()).then_some(bytes));
        }
        let bytes = data.bytes();
        Ok((!bytes.is_empty()).then_some(bytes))
    }
}

/// A subgraph: tensors, operators in execution order, and the graph's inputs and outputs.
#[derive(Clone, Copy, Debug)]
pub struct SubGraph<'a> {
    shared: Shared<'a>,
    index: u32,
    name: Option<&'a str>,
    tensors: Tables<'a>,
    operators: Tables<'a>,
    inputs: Vector<'a, i32>,
    outputs: Vector<'a, i32>,
}

impl<'a> SubGraph<'a> {
    fn new(shared: Shared<'a>, subgraphs: Tables<'a>, index: u32) -> Result<Self> {
        let t = subgraphs.get(index)?;
        let tensors = t.tables(slot::subgraph::TENSORS, "Tensor")?;
        if tensors.len() > MAX_TENSORS {
            return Err(ModelError::CapacityExceeded {
                what: "SubGraph.tensors",
                capacity: "MAX_TENSORS",
                limit: MAX_TENSORS,
                actual: tensors.len(),
            });
        }
        Ok(Self {
            shared,
            index,
            name: t.string(slot::subgraph::NAME, "SubGraph.name")?,
            tensors,
            operators: t.tables(slot::subgraph::OPERATORS, "Operator")?,
            inputs: t.vector_or_empty(slot::subgraph::INPUTS, "SubGraph.inputs")?,
            outputs: t.vector_or_empty(slot::subgraph::OUTPUTS, "SubGraph.outputs")?,
        })
    }

    /// Decodes everything once, so that later accessors cannot fail.
    fn validate(&self) -> Result<()> {
        for i in 0..self.tensors.len() {
            self.tensor(i as u16)?;
        }
        for i in 0..self.operators.len() {
            self.operator(i)?;
        }
        for (list, what) in [
            (self.inputs, "SubGraph.inputs"),
            (self.outputs, "SubGraph.outputs"),
        ] {
            for index in list.iter() {
                if index < 0 || index as u32 >= self.tensors.len() {
                    return Err(ModelError::BadIndex {
                        what,
                        item: self.index,
                        index: i64::from(index),
                        len: self.tensors.len(),
                    });
                }
            }
        }
        Ok(())
    }

    /// This subgraph's index in the model (0 for the main subgraph).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// `SubGraph.name`, if present.
    pub fn name(&self) -> Option<&'a str> {
        self.name
    }

    /// Number of tensors (at most [`MAX_TENSORS`]).
    pub fn tensor_count(&self) -> u16 {
        // Checked against MAX_TENSORS (= u16::MAX) in `new`.
        u16::try_from(self.tensors.len()).unwrap_or(u16::MAX)
    }

    /// Tensor `index`.
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= tensor_count()`.
    pub fn tensor(&self, index: u16) -> Result<TensorInfo<'a>> {
        TensorInfo::decode(&self.shared, self.tensors, index)
    }

    /// All tensors, in index order.
    pub fn tensors(&self) -> Tensors<'a> {
        Tensors {
            graph: *self,
            next: 0,
        }
    }

    /// Number of operators.
    pub fn operator_count(&self) -> u32 {
        self.operators.len()
    }

    /// Operator `index` (execution order).
    ///
    /// # Errors
    ///
    /// [`ModelError::BadIndex`] if `index >= operator_count()`.
    pub fn operator(&self, index: u32) -> Result<OperatorInfo<'a>> {
        OperatorInfo::decode(
            &self.shared,
            self.operators.get(index)?,
            index,
            self.tensors.len(),
        )
    }

    /// All operators, in execution order.
    pub fn operators(&self) -> Operators<'a> {
        Operators {
            graph: *self,
            next: 0,
        }
    }

    /// Indices of the graph's input tensors.
    pub fn inputs(&self) -> TensorIndices<'a> {
        TensorIndices {
            list: self.inputs,
            next: 0,
        }
    }

    /// Indices of the graph's output tensors.
    pub fn outputs(&self) -> TensorIndices<'a> {
        TensorIndices {
            list: self.outputs,
            next: 0,
        }
    }
}

/// Iterator over a subgraph's tensors ([`SubGraph::tensors`]).
#[derive(Clone, Debug)]
pub struct Tensors<'a> {
    graph: SubGraph<'a>,
    next: u16,
}

impl<'a> Iterator for Tensors<'a> {
    type Item = Result<TensorInfo<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.graph.tensor_count() {
            return None;
        }
        let item = self.graph.tensor(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(self.graph.tensor_count().saturating_sub(self.next));
        (left, Some(left))
    }
}

impl ExactSizeIterator for Tensors<'_> {}

/// Iterator over a subgraph's operators ([`SubGraph::operators`]).
#[derive(Clone, Debug)]
pub struct Operators<'a> {
    graph: SubGraph<'a>,
    next: u32,
}

impl<'a> Iterator for Operators<'a> {
    type Item = Result<OperatorInfo<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.graph.operator_count() {
            return None;
        }
        let item = self.graph.operator(self.next);
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.graph.operator_count().saturating_sub(self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Operators<'_> {}

/// The validated tensor indices of a subgraph's inputs or outputs (zero-copy, read from the
/// file). Iterates `u16` indices, each less than [`SubGraph::tensor_count`].
#[derive(Clone, Debug)]
pub struct TensorIndices<'a> {
    list: Vector<'a, i32>,
    next: u32,
}

impl TensorIndices<'_> {
    /// Number of indices (including those already iterated).
    pub fn len(&self) -> usize {
        self.list.len() as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.len() == 0
    }

    /// Index `i` of the list.
    pub fn get(&self, i: usize) -> Option<u16> {
        let i = u32::try_from(i).ok()?;
        self.list.get(i).ok().and_then(|v| u16::try_from(v).ok())
    }
}

impl Iterator for TensorIndices<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        while self.next < self.list.len() {
            let v = self.list.get(self.next).ok();
            self.next += 1;
            // Validated by `Model::parse`: every entry converts.
            if let Some(v) = v.and_then(|v| u16::try_from(v).ok()) {
                return Some(v);
            }
        }
        None
    }
}

/// A tensor's shape: up to [`MAX_RANK`] non-negative dimensions whose product (and byte size)
/// fits a `u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shape {
    dims: [u32; MAX_RANK],
    rank: u8,
    elements: u32,
}

impl Shape {
    /// The dimensions, outermost first (NHWC for images).
    pub fn dims(&self) -> &[u32] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Number of dimensions (0 for a scalar).
    pub fn rank(&self) -> usize {
        usize::from(self.rank)
    }

    /// Number of elements (the product of the dimensions; 1 for a scalar).
    pub fn num_elements(&self) -> u32 {
        self.elements
    }

    /// Dimension `axis`, if `axis < rank()`.
    pub fn dim(&self, axis: usize) -> Option<u32> {
        self.dims().get(axis).copied()
    }
}

/// A tensor's affine quantization: `real = scale[c] * (q - zero_point[c])`, with one `(scale,
/// zero_point)` pair per tensor, or one per channel along
/// [`quantized_dimension`](Quantization::quantized_dimension). Zero-copy: the values are decoded
/// from the file when asked for.
#[derive(Clone, Copy, Debug)]
pub struct Quantization<'a> {
    scale: Vector<'a, f32>,
    zero_point: Vector<'a, i64>,
    axis: Option<u8>,
}

impl<'a> Quantization<'a> {
    /// Number of `(scale, zero_point)` pairs: 1 per tensor, or the quantized dimension's size.
    pub fn len(&self) -> usize {
        self.scale.len() as usize
    }

    /// Always false: a tensor with no quantization pairs has no [`Quantization`].
    pub fn is_empty(&self) -> bool {
        self.scale.len() == 0
    }

    /// The axis the pairs run along, for per-channel quantization (`None` for per-tensor).
    pub fn quantized_dimension(&self) -> Option<usize> {
        self.axis.map(usize::from)
    }

    /// Whether there is one pair per channel.
    pub fn is_per_channel(&self) -> bool {
        self.axis.is_some()
    }

    /// Scale `i`.
    pub fn scale(&self, i: usize) -> Option<f32> {
        self.scale.get(u32::try_from(i).ok()?).ok()
    }

    /// Zero point `i`.
    pub fn zero_point(&self, i: usize) -> Option<i64> {
        self.zero_point.get(u32::try_from(i).ok()?).ok()
    }

    /// All scales.
    pub fn scales(&self) -> impl Iterator<Item = f32> + 'a {
        self.scale.iter()
    }

    /// All zero points.
    pub fn zero_points(&self) -> impl Iterator<Item = i64> + 'a {
        self.zero_point.iter()
    }

    fn decode(t: Table<'a>, shape: &Shape, tensor: u16) -> Result<Option<Self>> {
        let details: u8 = t.scalar(
            slot::quant::DETAILS_TYPE,
            "QuantizationParameters.details_type",
            0,
        )?;
        match details {
            0 => {}
            1..=3 => {
                return Err(ModelError::Unsupported {
                    what: "QuantizationParameters.details",
                })
            }
            v => {
                return Err(ModelError::BadEnum {
                    what: "QuantizationParameters.details_type",
                    value: i64::from(v),
                })
            }
        }
        let scale = t.vector_or_empty::<f32>(slot::quant::SCALE, "QuantizationParameters.scale")?;
        let zero_point =
            t.vector_or_empty::<i64>(slot::quant::ZERO_POINT, "QuantizationParameters.zero_point")?;
        let (n, m) = (scale.len(), zero_point.len());
        let bad = |reason| ModelError::BadQuantization {
            tensor: u32::from(tensor),
            scales: n,
            zero_points: m,
            reason,
        };
        if n == 0 && m == 0 {
            return Ok(None);
        }
        if n != m {
            return Err(bad("scale and zero_point differ in length"));
        }
        let mut axis = None;
        if n > 1 {
            let qd: i32 = t.scalar(
                slot::quant::QUANTIZED_DIMENSION,
                "QuantizationParameters.quantized_dimension",
                0,
            )?;
            let dim = usize::try_from(qd).ok().and_then(|a| shape.dim(a));
            let Some(dim) = dim else {
                return Err(ModelError::BadIndex {
                    what: "QuantizationParameters.quantized_dimension",
                    item: u32::from(tensor),
                    index: i64::from(qd),
                    len: shape.rank() as u32,
                });
            };
            if dim != n {
                return Err(bad(
                    "per-channel length is not the quantized dimension's size",
                ));
            }
            // qd < rank <= MAX_RANK.
            axis = Some(qd as u8);
        }
        Ok(Some(Self {
            scale,
            zero_point,
            axis,
        }))
    }
}

/// A tensor's description, decoded from the file (zero-copy: `name` and `data` borrow it).
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo<'a> {
    /// Index in the subgraph.
    pub index: u16,
    /// `Tensor.name` (empty if absent).
    pub name: &'a str,
    /// Element type.
    pub dtype: DataType,
    /// Shape.
    pub shape: Shape,
    /// Bytes the tensor occupies (sub-byte types packed, rounded up), or `None` for types
    /// without a fixed size (`String`, `Resource`, `Variant`).
    pub byte_size: Option<u32>,
    /// Index of its buffer in the model.
    pub buffer: u32,
    /// The constant data (`None` for activations and empty buffers). Exactly `byte_size` bytes
    /// (for 4- and 2-bit types, either packed or one element per byte). Not necessarily
    /// aligned: read multi-byte elements with `from_le_bytes`.
    pub data: Option<&'a [u8]>,
    /// Quantization parameters, if the tensor is quantized.
    pub quantization: Option<Quantization<'a>>,
    /// Whether the tensor is a variable (state kept across invocations).
    pub is_variable: bool,
}

impl<'a> TensorInfo<'a> {
    /// Whether the tensor has constant data.
    pub fn is_constant(&self) -> bool {
        self.data.is_some()
    }

    fn decode(shared: &Shared<'a>, tensors: Tables<'a>, index: u16) -> Result<Self> {
        let t = tensors.get(u32::from(index))?;
        let item = u32::from(index);
        let dims = t.vector_or_empty::<i32>(slot::tensor::SHAPE, "Tensor.shape")?;
        if dims.len() > MAX_RANK as u32 {
            return Err(ModelError::CapacityExceeded {
                what: "Tensor.shape",
                capacity: "MAX_RANK",
                limit: MAX_RANK as u32,
                actual: dims.len(),
            });
        }
        let mut shape = Shape {
            dims: [0; MAX_RANK],
            rank: dims.len() as u8,
            elements: 1,
        };
        let too_large = ModelError::TensorTooLarge { tensor: item };
        for (axis, d) in dims.iter().enumerate() {
            let d = u32::try_from(d).map_err(|_| ModelError::BadDimension {
                tensor: item,
                axis: axis as u32,
                value: d,
            })?;
            shape.dims[axis] = d;
            shape.elements = shape.elements.checked_mul(d).ok_or(too_large)?;
        }
        let code: i8 = t.scalar(slot::tensor::TYPE, "Tensor.type", 0)?;
        let dtype = DataType::from_code(code).ok_or(ModelError::BadEnum {
            what: "Tensor.type",
            value: i64::from(code),
        })?;
        let byte_size = match dtype.bits() {
            Some(bits) => {
                let bits = u64::from(shape.elements) * u64::from(bits);
                Some(u32::try_from(bits.div_ceil(8)).map_err(|_| too_large)?)
            }
            None => None,
        };
        if t.table(slot::tensor::SPARSITY, "SparsityParameters")?
            .is_some()
        {
            return Err(ModelError::Unsupported {
                what: "Tensor.sparsity",
            });
        }
        let buffer: u32 = t.scalar(slot::tensor::BUFFER, "Tensor.buffer", 0)?;
        let data = if buffer == 0 && shared.buffers.len() == 0 {
            None
        } else if buffer >= shared.buffers.len() {
            return Err(ModelError::BadIndex {
                what: "Tensor.buffer",
                item,
                index: i64::from(buffer),
                len: shared.buffers.len(),
            });
        } else {
            shared.buffer(buffer)?
        };
        if let (Some(d), Some(size)) = (data, byte_size) {
            let actual = u32::try_from(d.len()).unwrap_or(u32::MAX);
            let unpacked = dtype.bits().is_some_and(|b| b < 8) && actual == shape.elements;
            if actual != size && !unpacked {
                return Err(ModelError::BufferSizeMismatch {
                    tensor: item,
                    expected: size,
                    actual,
                });
            }
        }
        let quantization = match t.table(slot::tensor::QUANTIZATION, "QuantizationParameters")? {
            Some(q) => Quantization::decode(q, &shape, index)?,
            None => None,
        };
        Ok(Self {
            index,
            name: t.string(slot::tensor::NAME, "Tensor.name")?.unwrap_or(""),
            dtype,
            shape,
            byte_size,
            buffer,
            data,
            quantization,
            is_variable: t.boolean(slot::tensor::IS_VARIABLE, "Tensor.is_variable", false)?,
        })
    }
}

/// An operator, decoded from the file.
#[derive(Clone, Debug)]
pub struct OperatorInfo<'a> {
    /// Index in the subgraph (execution order).
    pub index: u32,
    /// Index of its operator code in the model.
    pub opcode_index: u32,
    /// The builtin operator.
    pub builtin: BuiltinOp,
    /// The operator code's version.
    pub version: i32,
    /// The custom operator's name, for [`BuiltinOp::Custom`].
    pub custom_code: Option<&'a str>,
    /// Input tensor indices; `None` for an omitted optional input (`-1` in the file).
    pub inputs: heapless::Vec<Option<u16>, MAX_OP_INPUTS>,
    /// Output tensor indices; `None` for an omitted optional output (`-1` in the file).
    pub outputs: heapless::Vec<Option<u16>, MAX_OP_OUTPUTS>,
    /// The decoded builtin options (checked to be the table this operator takes).
    pub options: BuiltinOptions,
    /// `Operator.custom_options` (opaque bytes, usually a FlexBuffer), if present.
    pub custom_options: Option<&'a [u8]>,
}

impl<'a> OperatorInfo<'a> {
    /// Input `i`, if present (`None` if `i` is out of range or the input is omitted).
    pub fn input(&self, i: usize) -> Option<u16> {
        self.inputs.get(i).copied().flatten()
    }

    /// Output `i`, if present.
    pub fn output(&self, i: usize) -> Option<u16> {
        self.outputs.get(i).copied().flatten()
    }

    fn decode(shared: &Shared<'a>, t: Table<'a>, index: u32, tensor_count: u32) -> Result<Self> {
        let opcode_index: u32 =
            t.scalar(slot::operator::OPCODE_INDEX, "Operator.opcode_index", 0)?;
        if opcode_index >= shared.opcodes.len() {
            return Err(ModelError::BadIndex {
                what: "Operator.opcode_index",
                item: index,
                index: i64::from(opcode_index),
                len: shared.opcodes.len(),
            });
        }
        let opcode = shared.opcode(opcode_index)?;
        let inputs = tensor_list::<MAX_OP_INPUTS>(
            &t,
            slot::operator::INPUTS,
            ("Operator.inputs", "MAX_OP_INPUTS"),
            index,
            tensor_count,
        )?;
        let outputs = tensor_list::<MAX_OP_OUTPUTS>(
            &t,
            slot::operator::OUTPUTS,
            ("Operator.outputs", "MAX_OP_OUTPUTS"),
            index,
            tensor_count,
        )?;
        let options_type: u8 = t.scalar(
            slot::operator::BUILTIN_OPTIONS_TYPE,
            "Operator.builtin_options_type",
            0,
        )?;
        let table = if options_type != 0 && options_type <= MAX_OPTIONS_TYPE {
            t.table(slot::operator::BUILTIN_OPTIONS, "Operator.builtin_options")?
        } else {
            None
        };
        let options = BuiltinOptions::decode(opcode.builtin, index, options_type, table)?;
        let custom_options = t
            .vector::<u8>(slot::operator::CUSTOM_OPTIONS, "Operator.custom_options")?
            .map(|v| v.bytes());
        Ok(Self {
            index,
            opcode_index,
            builtin: opcode.builtin,
            version: opcode.version,
            custom_code: opcode.custom_code,
            inputs,
            outputs,
            options,
            custom_options,
        })
    }
}

/// Reads an operator's list of tensor indices (`-1` → `None`), checking each against the
/// subgraph's tensor count and the list against its capacity `N`.
fn tensor_list<const N: usize>(
    t: &Table<'_>,
    slot: u16,
    (what, capacity): (&'static str, &'static str),
    operator: u32,
    tensor_count: u32,
) -> Result<heapless::Vec<Option<u16>, N>> {
    let list = t.vector_or_empty::<i32>(slot, what)?;
    if list.len() > N as u32 {
        return Err(ModelError::CapacityExceeded {
            what,
            capacity,
            limit: N as u32,
            actual: list.len(),
        });
    }
    let mut out = heapless::Vec::new();
    for index in list.iter() {
        let entry = if index == -1 {
            None
        } else {
            match u16::try_from(index) {
                Ok(i) if u32::from(i) < tensor_count => Some(i),
                _ => {
                    return Err(ModelError::BadIndex {
                        what,
                        item: operator,
                        index: i64::from(index),
                        len: tensor_count,
                    })
                }
            }
        };
        out.push(entry).map_err(|_| ModelError::CapacityExceeded {
            what,
            capacity,
            limit: N as u32,
            actual: list.len(),
        })?;
    }
    Ok(out)
}
