//! The builtin options tables this reader decodes, and the `builtin_options` union that holds
//! them: checked to be the table the operator takes, then decoded field by field (slots and
//! defaults are the schema's).
//!
//! Only the tables of the operators the build lowers are decoded (the crate's `op-` features,
//! as `ops::lower` is gated; all of them by default): a firmware built for a few operators
//! would otherwise carry every table's field decoding in its flash for nothing, since a model
//! with another operator is refused at prepare anyway, naming it. The table of an operator left
//! out is still checked to be the one it takes and to be a well-formed table, and is returned
//! as [`BuiltinOptions::Other`].

// A build without `all-ops` leaves the decoding helpers of the tables it does not decode
// unused.
#![cfg_attr(not(feature = "all-ops"), allow(dead_code, unused_imports))]

use super::error::ModelError;
use super::flatbuffer::Table;
use super::ops::BuiltinOp;
use super::schema::{activation, data_type, padding, Activation, DataType, Padding, WeightsFormat};
use super::MAX_RANK;

type Result<T> = core::result::Result<T, ModelError>;

/// `Conv2DOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conv2dOptions {
    /// Padding (default `Same`).
    pub padding: Padding,
    /// Horizontal stride (default 0).
    pub stride_w: i32,
    /// Vertical stride (default 0).
    pub stride_h: i32,
    /// Fused activation (default `None`).
    pub activation: Activation,
    /// Horizontal dilation (default 1).
    pub dilation_w_factor: i32,
    /// Vertical dilation (default 1).
    pub dilation_h_factor: i32,
    /// Bias/accumulator type for quantized kernels (default `Float32`, meaning "not set").
    pub quantized_bias_type: DataType,
}

/// `DepthwiseConv2DOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DepthwiseConv2dOptions {
    /// Padding (default `Same`).
    pub padding: Padding,
    /// Horizontal stride (default 0).
    pub stride_w: i32,
    /// Vertical stride (default 0).
    pub stride_h: i32,
    /// Output channels per input channel (default 0; redundant with the filter's shape).
    pub depth_multiplier: i32,
    /// Fused activation (default `None`).
    pub activation: Activation,
    /// Horizontal dilation (default 1).
    pub dilation_w_factor: i32,
    /// Vertical dilation (default 1).
    pub dilation_h_factor: i32,
}

/// `Pool2DOptions` (average, max and L2 pooling).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Pool2dOptions {
    /// Padding (default `Same`).
    pub padding: Padding,
    /// Horizontal stride (default 0).
    pub stride_w: i32,
    /// Vertical stride (default 0).
    pub stride_h: i32,
    /// Window width (default 0).
    pub filter_width: i32,
    /// Window height (default 0).
    pub filter_height: i32,
    /// Fused activation (default `None`).
    pub activation: Activation,
}

/// `FullyConnectedOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FullyConnectedOptions {
    /// Fused activation (default `None`).
    pub activation: Activation,
    /// Weights layout (default `Default`).
    pub weights_format: WeightsFormat,
    /// Keep the input's rank in the output (default false).
    pub keep_num_dims: bool,
    /// Hybrid kernels: quantize inputs asymmetrically (default false).
    pub asymmetric_quantize_inputs: bool,
    /// Bias/accumulator type for quantized kernels (default `Float32`, meaning "not set").
    pub quantized_bias_type: DataType,
}

/// `SoftmaxOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SoftmaxOptions {
    /// Input multiplier (default 0.0).
    pub beta: f32,
}

/// `ConcatenationOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConcatenationOptions {
    /// Axis (may be negative: counts from the end; default 0).
    pub axis: i32,
    /// Fused activation (default `None`).
    pub activation: Activation,
}

/// `AddOptions` and `SubOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddSubOptions {
    /// Fused activation (default `None`).
    pub activation: Activation,
    /// int16 kernels: power-of-two scales (default true).
    pub pot_scale_int16: bool,
}

/// `MulOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulOptions {
    /// Fused activation (default `None`).
    pub activation: Activation,
}

/// `ReshapeOptions`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReshapeOptions {
    /// The target shape (`-1` for one inferred dimension), or `None` when absent (the shape
    /// then comes from the operator's second input).
    pub new_shape: Option<heapless::Vec<i32, MAX_RANK>>,
}

/// `ReducerOptions` (`MEAN`, `SUM`, `REDUCE_MAX`, ...).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReducerOptions {
    /// Keep reduced dimensions with size 1 (default false).
    pub keep_dims: bool,
}

/// `BatchMatMulOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BatchMatMulOptions {
    /// Transpose (adjoint) the left operand (default false).
    pub adj_x: bool,
    /// Transpose (adjoint) the right operand (default false).
    pub adj_y: bool,
    /// Hybrid kernels: quantize inputs asymmetrically (default false).
    pub asymmetric_quantize_inputs: bool,
}

/// `LeakyReluOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeakyReluOptions {
    /// Slope for negative inputs (default 0.0).
    pub alpha: f32,
}

/// `StridedSliceOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StridedSliceOptions {
    /// Bit `i` set: axis `i` starts at its first element (last for a negative stride).
    pub begin_mask: i32,
    /// Bit `i` set: axis `i` runs to its end.
    pub end_mask: i32,
    /// Bit `i` set: index `i` stands for the axes not named.
    pub ellipsis_mask: i32,
    /// Bit `i` set: a new axis of size 1 at `i`.
    pub new_axis_mask: i32,
    /// Bit `i` set: axis `i` is indexed (one element) and removed.
    pub shrink_axis_mask: i32,
    /// The end tensor is an offset from the begin tensor (default false).
    pub offset: bool,
}

/// `SplitOptions` and `SplitVOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SplitOptions {
    /// Outputs.
    pub num_splits: i32,
}

/// `PackOptions` and `UnpackOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PackOptions {
    /// Tensors stacked (PACK's `values_count`) or unstacked (UNPACK's `num`).
    pub count: i32,
    /// The axis stacked along.
    pub axis: i32,
}

/// `MirrorPadMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MirrorPadMode {
    /// The reflection leaves out the border element.
    Reflect,
    /// The reflection includes the border element.
    Symmetric,
}

/// `MirrorPadOptions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MirrorPadOptions {
    /// Reflection mode (default `Reflect`).
    pub mode: MirrorPadMode,
}

/// `TransposeConvOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransposeConvOptions {
    /// Padding (default `Same`).
    pub padding: Padding,
    /// Horizontal stride (default 0).
    pub stride_w: i32,
    /// Vertical stride (default 0).
    pub stride_h: i32,
    /// Fused activation (default `None`).
    pub activation: Activation,
    /// Bias/accumulator type for quantized kernels (default `Float32`, meaning "not set").
    pub quantized_bias_type: DataType,
}

/// `L2NormOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct L2NormOptions {
    /// Fused activation (default `None`; TFLM refuses any other).
    pub activation: Activation,
}

/// `UnidirectionalSequenceLSTMOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnidirectionalSequenceLstmOptions {
    /// The cell gate's nonlinearity (default `None`).
    pub activation: Activation,
    /// Cell state clip, 0 for none (default 0.0).
    pub cell_clip: f32,
    /// Projection clip, 0 for none (default 0.0).
    pub proj_clip: f32,
    /// Input and output are `[time][batch][...]` (default false: `[batch][time][...]`).
    pub time_major: bool,
    /// Hybrid kernels: quantize inputs asymmetrically (default false).
    pub asymmetric_quantize_inputs: bool,
    /// Recurrent weights are diagonal (default false).
    pub diagonal_recurrent_tensors: bool,
}

/// `ResizeBilinearOptions` and `ResizeNearestNeighborOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeOptions {
    /// Align the corner pixels of input and output (default false).
    pub align_corners: bool,
    /// Sample at pixel centres (default false).
    pub half_pixel_centers: bool,
}

/// `GatherOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GatherOptions {
    /// The gathered axis (may be negative: counts from the end; default 0).
    pub axis: i32,
    /// Leading dimensions shared by the input and the indices (default 0).
    pub batch_dims: i32,
}

/// `SqueezeOptions`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SqueezeOptions {
    /// The size-1 axes to remove (may be negative); empty: every size-1 axis.
    pub squeeze_dims: heapless::Vec<i32, MAX_RANK>,
}

/// `SpaceToDepthOptions` and `DepthToSpaceOptions`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockSizeOptions {
    /// The block's height and width (default 0).
    pub block_size: i32,
}

/// An operator's decoded `builtin_options` union.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BuiltinOptions {
    /// No options table (`builtin_options_type` is `NONE`). For operators that take options,
    /// TFLite then uses the defaults; see [`BuiltinOptions::or_default_for`].
    None,
    /// `Conv2DOptions` (`CONV_2D`).
    Conv2d(Conv2dOptions),
    /// `DepthwiseConv2DOptions` (`DEPTHWISE_CONV_2D`).
    DepthwiseConv2d(DepthwiseConv2dOptions),
    /// `Pool2DOptions` (`AVERAGE_POOL_2D`, `MAX_POOL_2D`, `L2_POOL_2D`).
    Pool2d(Pool2dOptions),
    /// `FullyConnectedOptions` (`FULLY_CONNECTED`).
    FullyConnected(FullyConnectedOptions),
    /// `SoftmaxOptions` (`SOFTMAX`).
    Softmax(SoftmaxOptions),
    /// `ConcatenationOptions` (`CONCATENATION`).
    Concatenation(ConcatenationOptions),
    /// `AddOptions` (`ADD`).
    Add(AddSubOptions),
    /// `SubOptions` (`SUB`).
    Sub(AddSubOptions),
    /// `MulOptions` (`MUL`).
    Mul(MulOptions),
    /// `ReshapeOptions` (`RESHAPE`).
    Reshape(ReshapeOptions),
    /// `ReducerOptions` (`MEAN`, `SUM`, `REDUCE_PROD`, `REDUCE_MAX`, `REDUCE_MIN`, `REDUCE_ANY`,
    /// `REDUCE_ALL`).
    Reducer(ReducerOptions),
    /// `BatchMatMulOptions` (`BATCH_MATMUL`).
    BatchMatMul(BatchMatMulOptions),
    /// `TransposeOptions` (`TRANSPOSE`; the table has no fields).
    Transpose,
    /// `StridedSliceOptions` (`STRIDED_SLICE`).
    StridedSlice(StridedSliceOptions),
    /// `SplitOptions` (`SPLIT`).
    Split(SplitOptions),
    /// `SplitVOptions` (`SPLIT_V`).
    SplitV(SplitOptions),
    /// `PackOptions` (`PACK`).
    Pack(PackOptions),
    /// `UnpackOptions` (`UNPACK`).
    Unpack(PackOptions),
    /// `MirrorPadOptions` (`MIRROR_PAD`).
    MirrorPad(MirrorPadOptions),
    /// `UnidirectionalSequenceLSTMOptions` (`UNIDIRECTIONAL_SEQUENCE_LSTM`).
    UnidirectionalSequenceLstm(UnidirectionalSequenceLstmOptions),
    /// `ResizeBilinearOptions` (`RESIZE_BILINEAR`).
    ResizeBilinear(ResizeOptions),
    /// `ResizeNearestNeighborOptions` (`RESIZE_NEAREST_NEIGHBOR`).
    ResizeNearestNeighbor(ResizeOptions),
    /// `GatherOptions` (`GATHER`).
    Gather(GatherOptions),
    /// `SqueezeOptions` (`SQUEEZE`).
    Squeeze(SqueezeOptions),
    /// `SpaceToDepthOptions` (`SPACE_TO_DEPTH`).
    SpaceToDepth(BlockSizeOptions),
    /// `DepthToSpaceOptions` (`DEPTH_TO_SPACE`).
    DepthToSpace(BlockSizeOptions),
    /// Another options table this reader does not decode, or one of an operator this build
    /// leaves out (the crate's `op-` features); its table is still validated.
    Other {
        /// The `builtin_options_type` union tag (1..=[`MAX_OPTIONS_TYPE`]).
        options_type: u8,
    },
    /// `LeakyReluOptions` (`LEAKY_RELU`).
    LeakyRelu(LeakyReluOptions),
    /// `TransposeConvOptions` (`TRANSPOSE_CONV`).
    TransposeConv(TransposeConvOptions),
    /// `L2NormOptions` (`L2_NORMALIZATION`).
    L2Norm(L2NormOptions),
}

/// The highest `BuiltinOptions` union tag in the schema (`RightShiftOptions`).
pub const MAX_OPTIONS_TYPE: u8 = 126;

/// `BuiltinOptions` union tags of the tables decoded here.
mod tag {
    pub(super) const CONV_2D: u8 = 1;
    pub(super) const DEPTHWISE_CONV_2D: u8 = 2;
    pub(super) const POOL_2D: u8 = 5;
    pub(super) const FULLY_CONNECTED: u8 = 8;
    pub(super) const SOFTMAX: u8 = 9;
    pub(super) const CONCATENATION: u8 = 10;
    pub(super) const ADD: u8 = 11;
    pub(super) const RESHAPE: u8 = 17;
    pub(super) const MUL: u8 = 21;
    pub(super) const TRANSPOSE: u8 = 26;
    pub(super) const REDUCER: u8 = 27;
    pub(super) const SUB: u8 = 28;
    pub(super) const BATCH_MATMUL: u8 = 101;
    pub(super) const LEAKY_RELU: u8 = 75;
    pub(super) const STRIDED_SLICE: u8 = 32;
    pub(super) const SPLIT: u8 = 35;
    pub(super) const PACK: u8 = 59;
    pub(super) const UNPACK: u8 = 64;
    pub(super) const MIRROR_PAD: u8 = 77;
    pub(super) const SPLIT_V: u8 = 79;
    pub(super) const TRANSPOSE_CONV: u8 = 49;
    pub(super) const L2_NORM: u8 = 12;
    pub(super) const RESIZE_BILINEAR: u8 = 15;
    pub(super) const SPACE_TO_DEPTH: u8 = 19;
    pub(super) const GATHER: u8 = 23;
    pub(super) const SQUEEZE: u8 = 30;
    pub(super) const RESIZE_NEAREST_NEIGHBOR: u8 = 74;
    pub(super) const DEPTH_TO_SPACE: u8 = 94;

    pub(super) const UNIDIRECTIONAL_SEQUENCE_LSTM: u8 = 71;
}

/// The operators that take one of the tables decoded here (by their `BuiltinOperator` codes,
/// all below 256), each with its tag: a small table rather than a `match`, which compiles to a
/// jump table over every operator code.
const EXPECTED_TAGS: [(u8, u8); 37] = [
    (code(BuiltinOp::Conv2d), tag::CONV_2D),
    (code(BuiltinOp::DepthwiseConv2d), tag::DEPTHWISE_CONV_2D),
    (code(BuiltinOp::AveragePool2d), tag::POOL_2D),
    (code(BuiltinOp::MaxPool2d), tag::POOL_2D),
    (code(BuiltinOp::L2Pool2d), tag::POOL_2D),
    (code(BuiltinOp::FullyConnected), tag::FULLY_CONNECTED),
    (code(BuiltinOp::Softmax), tag::SOFTMAX),
    (code(BuiltinOp::Concatenation), tag::CONCATENATION),
    (code(BuiltinOp::Add), tag::ADD),
    (code(BuiltinOp::Reshape), tag::RESHAPE),
    (code(BuiltinOp::Mul), tag::MUL),
    (code(BuiltinOp::Transpose), tag::TRANSPOSE),
    (code(BuiltinOp::Mean), tag::REDUCER),
    (code(BuiltinOp::Sum), tag::REDUCER),
    (code(BuiltinOp::ReduceProd), tag::REDUCER),
    (code(BuiltinOp::ReduceMax), tag::REDUCER),
    (code(BuiltinOp::ReduceMin), tag::REDUCER),
    (code(BuiltinOp::ReduceAny), tag::REDUCER),
    (code(BuiltinOp::ReduceAll), tag::REDUCER),
    (code(BuiltinOp::Sub), tag::SUB),
    (code(BuiltinOp::BatchMatmul), tag::BATCH_MATMUL),
    (code(BuiltinOp::LeakyRelu), tag::LEAKY_RELU),
    (code(BuiltinOp::StridedSlice), tag::STRIDED_SLICE),
    (code(BuiltinOp::Split), tag::SPLIT),
    (code(BuiltinOp::Pack), tag::PACK),
    (code(BuiltinOp::Unpack), tag::UNPACK),
    (code(BuiltinOp::MirrorPad), tag::MIRROR_PAD),
    (code(BuiltinOp::SplitV), tag::SPLIT_V),
    (code(BuiltinOp::TransposeConv), tag::TRANSPOSE_CONV),
    (code(BuiltinOp::L2Normalization), tag::L2_NORM),
    (
        code(BuiltinOp::UnidirectionalSequenceLstm),
        tag::UNIDIRECTIONAL_SEQUENCE_LSTM,
    ),
    (code(BuiltinOp::ResizeBilinear), tag::RESIZE_BILINEAR),
    (code(BuiltinOp::SpaceToDepth), tag::SPACE_TO_DEPTH),
    (code(BuiltinOp::Gather), tag::GATHER),
    (code(BuiltinOp::Squeeze), tag::SQUEEZE),
    (
        code(BuiltinOp::ResizeNearestNeighbor),
        tag::RESIZE_NEAREST_NEIGHBOR,
    ),
    (code(BuiltinOp::DepthToSpace), tag::DEPTH_TO_SPACE),
];

/// `op`'s code as a byte (checked when the table is built).
const fn code(op: BuiltinOp) -> u8 {
    assert!(op.code() >= 0 && op.code() <= u8::MAX as i32);
    op.code() as u8
}

/// The options tag an operator this reader decodes must carry (or `None` for other operators).
fn expected_tag(op: BuiltinOp) -> Option<u8> {
    EXPECTED_TAGS
        .iter()
        .find(|&&(code, _)| BuiltinOp::from_code(i32::from(code)) == op)
        .map(|&(_, tag)| tag)
}

/// `op.code()`, found through [`BuiltinOp::from_code`] (a comparison) rather than by
/// [`BuiltinOp::code`]'s `match` of every operator, which a build optimised for size compiles
/// to a jump table of 1 kB, here for an error message alone.
fn code_of(op: BuiltinOp) -> i32 {
    match op {
        BuiltinOp::Other(code) => code,
        // Every other operator has a code from 0 up: the search ends at it.
        named => (0..=i32::MAX)
            .find(|&code| BuiltinOp::from_code(code) == named)
            .unwrap_or(i32::MAX),
    }
}

impl BuiltinOptions {
    /// Decodes and validates an operator's options: the union tag must be one the schema
    /// defines, must be the table `op` takes (for the operators decoded here; other operators
    /// may not carry one of the decoded tables), and the table must be well formed. Tables of
    /// operators this build leaves out are not decoded ([`BuiltinOptions::Other`]).
    pub(crate) fn decode(
        op: BuiltinOp,
        operator: u32,
        options_type: u8,
        table: Option<Table<'_>>,
    ) -> Result<Self> {
        if options_type > MAX_OPTIONS_TYPE {
            return Err(ModelError::BadEnum {
                what: "Operator.builtin_options_type",
                value: i32::from(options_type),
            });
        }
        if options_type == 0 {
            return Ok(Self::None);
        }
        let mismatch = ModelError::OptionsMismatch {
            operator,
            builtin: code_of(op),
            options_type,
        };
        match expected_tag(op) {
            Some(expected) if expected != options_type => return Err(mismatch),
            None if EXPECTED_TAGS.iter().any(|&(_, t)| t == options_type) => return Err(mismatch),
            _ => {}
        }
        // Read by no arm in a build that decodes no table.
        #[cfg_attr(not(feature = "all-ops"), allow(unused_variables))]
        let t = table.ok_or(ModelError::MissingField {
            table: "Operator",
            field: "builtin_options",
        })?;
        // Each table is decoded only by a build that lowers an operator taking it (module
        // docs); the others fall to `Other`.
        Ok(match options_type {
            #[cfg(any(feature = "all-ops", feature = "op-conv-2d"))]
            tag::CONV_2D => Self::Conv2d(Conv2dOptions {
                padding: padding(&t, 0, "Conv2DOptions.padding")?,
                stride_w: t.scalar(1, "Conv2DOptions.stride_w", 0)?,
                stride_h: t.scalar(2, "Conv2DOptions.stride_h", 0)?,
                activation: activation(&t, 3, "Conv2DOptions.fused_activation_function")?,
                dilation_w_factor: t.scalar(4, "Conv2DOptions.dilation_w_factor", 1)?,
                dilation_h_factor: t.scalar(5, "Conv2DOptions.dilation_h_factor", 1)?,
                quantized_bias_type: data_type(&t, 6, "Conv2DOptions.quantized_bias_type")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-depthwise-conv-2d"))]
            tag::DEPTHWISE_CONV_2D => Self::DepthwiseConv2d(DepthwiseConv2dOptions {
                padding: padding(&t, 0, "DepthwiseConv2DOptions.padding")?,
                stride_w: t.scalar(1, "DepthwiseConv2DOptions.stride_w", 0)?,
                stride_h: t.scalar(2, "DepthwiseConv2DOptions.stride_h", 0)?,
                depth_multiplier: t.scalar(3, "DepthwiseConv2DOptions.depth_multiplier", 0)?,
                activation: activation(&t, 4, "DepthwiseConv2DOptions.fused_activation_function")?,
                dilation_w_factor: t.scalar(5, "DepthwiseConv2DOptions.dilation_w_factor", 1)?,
                dilation_h_factor: t.scalar(6, "DepthwiseConv2DOptions.dilation_h_factor", 1)?,
            }),
            #[cfg(any(
                feature = "all-ops",
                feature = "op-average-pool-2d",
                feature = "op-max-pool-2d"
            ))]
            tag::POOL_2D => Self::Pool2d(Pool2dOptions {
                padding: padding(&t, 0, "Pool2DOptions.padding")?,
                stride_w: t.scalar(1, "Pool2DOptions.stride_w", 0)?,
                stride_h: t.scalar(2, "Pool2DOptions.stride_h", 0)?,
                filter_width: t.scalar(3, "Pool2DOptions.filter_width", 0)?,
                filter_height: t.scalar(4, "Pool2DOptions.filter_height", 0)?,
                activation: activation(&t, 5, "Pool2DOptions.fused_activation_function")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-fully-connected"))]
            tag::FULLY_CONNECTED => Self::FullyConnected(FullyConnectedOptions {
                activation: activation(&t, 0, "FullyConnectedOptions.fused_activation_function")?,
                weights_format: match t.scalar::<i8>(
                    1,
                    "FullyConnectedOptions.weights_format",
                    0,
                )? {
                    0 => WeightsFormat::Default,
                    1 => WeightsFormat::Shuffled4x16Int8,
                    v => {
                        return Err(ModelError::BadEnum {
                            what: "FullyConnectedOptions.weights_format",
                            value: i32::from(v),
                        })
                    }
                },
                keep_num_dims: t.boolean(2, "FullyConnectedOptions.keep_num_dims", false)?,
                asymmetric_quantize_inputs: t.boolean(
                    3,
                    "FullyConnectedOptions.asymmetric_quantize_inputs",
                    false,
                )?,
                quantized_bias_type: data_type(&t, 4, "FullyConnectedOptions.quantized_bias_type")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-softmax"))]
            tag::SOFTMAX => Self::Softmax(SoftmaxOptions {
                beta: t.scalar(0, "SoftmaxOptions.beta", 0.0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-concatenation"))]
            tag::CONCATENATION => Self::Concatenation(ConcatenationOptions {
                axis: t.scalar(0, "ConcatenationOptions.axis", 0)?,
                activation: activation(&t, 1, "ConcatenationOptions.fused_activation_function")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-add"))]
            tag::ADD => Self::Add(AddSubOptions {
                activation: activation(&t, 0, "AddOptions.fused_activation_function")?,
                pot_scale_int16: t.boolean(1, "AddOptions.pot_scale_int16", true)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-sub"))]
            tag::SUB => Self::Sub(AddSubOptions {
                activation: activation(&t, 0, "SubOptions.fused_activation_function")?,
                pot_scale_int16: t.boolean(1, "SubOptions.pot_scale_int16", true)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-mul"))]
            tag::MUL => Self::Mul(MulOptions {
                activation: activation(&t, 0, "MulOptions.fused_activation_function")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-reshape"))]
            tag::RESHAPE => {
                let new_shape = match t.vector::<i32>(0, "ReshapeOptions.new_shape")? {
                    None => None,
                    Some(v) => {
                        let mut dims = heapless::Vec::new();
                        if v.len() > MAX_RANK as u32 {
                            return Err(ModelError::CapacityExceeded {
                                what: "ReshapeOptions.new_shape",
                                capacity: "MAX_RANK",
                                limit: MAX_RANK as u16,
                                actual: v.len(),
                            });
                        }
                        for d in v.iter() {
                            // Capacity checked above.
                            let _ = dims.push(d);
                        }
                        Some(dims)
                    }
                };
                Self::Reshape(ReshapeOptions { new_shape })
            }
            #[cfg(any(
                feature = "all-ops",
                feature = "op-mean",
                feature = "op-sum",
                feature = "op-reduce-max",
                feature = "op-reduce-min"
            ))]
            tag::REDUCER => Self::Reducer(ReducerOptions {
                keep_dims: t.boolean(0, "ReducerOptions.keep_dims", false)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-batch-matmul"))]
            tag::BATCH_MATMUL => Self::BatchMatMul(BatchMatMulOptions {
                adj_x: t.boolean(0, "BatchMatMulOptions.adj_x", false)?,
                adj_y: t.boolean(1, "BatchMatMulOptions.adj_y", false)?,
                asymmetric_quantize_inputs: t.boolean(
                    2,
                    "BatchMatMulOptions.asymmetric_quantize_inputs",
                    false,
                )?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-transpose"))]
            tag::TRANSPOSE => Self::Transpose,
            #[cfg(any(feature = "all-ops", feature = "op-leaky-relu"))]
            tag::LEAKY_RELU => Self::LeakyRelu(LeakyReluOptions {
                alpha: t.scalar(0, "LeakyReluOptions.alpha", 0.0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-strided-slice"))]
            tag::STRIDED_SLICE => Self::StridedSlice(StridedSliceOptions {
                begin_mask: t.scalar(0, "StridedSliceOptions.begin_mask", 0)?,
                end_mask: t.scalar(1, "StridedSliceOptions.end_mask", 0)?,
                ellipsis_mask: t.scalar(2, "StridedSliceOptions.ellipsis_mask", 0)?,
                new_axis_mask: t.scalar(3, "StridedSliceOptions.new_axis_mask", 0)?,
                shrink_axis_mask: t.scalar(4, "StridedSliceOptions.shrink_axis_mask", 0)?,
                offset: t.boolean(5, "StridedSliceOptions.offset", false)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-split"))]
            tag::SPLIT => Self::Split(SplitOptions {
                num_splits: t.scalar(0, "SplitOptions.num_splits", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-split-v"))]
            tag::SPLIT_V => Self::SplitV(SplitOptions {
                num_splits: t.scalar(0, "SplitVOptions.num_splits", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-pack"))]
            tag::PACK => Self::Pack(PackOptions {
                count: t.scalar(0, "PackOptions.values_count", 0)?,
                axis: t.scalar(1, "PackOptions.axis", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-unpack"))]
            tag::UNPACK => Self::Unpack(PackOptions {
                count: t.scalar(0, "UnpackOptions.num", 0)?,
                axis: t.scalar(1, "UnpackOptions.axis", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-mirror-pad"))]
            tag::MIRROR_PAD => Self::MirrorPad(MirrorPadOptions {
                mode: match t.scalar::<i8>(0, "MirrorPadOptions.mode", 0)? {
                    0 => MirrorPadMode::Reflect,
                    1 => MirrorPadMode::Symmetric,
                    v => {
                        return Err(ModelError::BadEnum {
                            what: "MirrorPadOptions.mode",
                            value: i32::from(v),
                        })
                    }
                },
            }),
            #[cfg(any(feature = "all-ops", feature = "op-transpose-conv"))]
            tag::TRANSPOSE_CONV => Self::TransposeConv(TransposeConvOptions {
                padding: padding(&t, 0, "TransposeConvOptions.padding")?,
                stride_w: t.scalar(1, "TransposeConvOptions.stride_w", 0)?,
                stride_h: t.scalar(2, "TransposeConvOptions.stride_h", 0)?,
                activation: activation(&t, 3, "TransposeConvOptions.fused_activation_function")?,
                quantized_bias_type: data_type(&t, 4, "TransposeConvOptions.quantized_bias_type")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-l-2-normalization"))]
            tag::L2_NORM => Self::L2Norm(L2NormOptions {
                activation: activation(&t, 0, "L2NormOptions.fused_activation_function")?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-unidirectional-sequence-lstm"))]
            tag::UNIDIRECTIONAL_SEQUENCE_LSTM => {
                const T: &str = "UnidirectionalSequenceLSTMOptions";
                Self::UnidirectionalSequenceLstm(UnidirectionalSequenceLstmOptions {
                    activation: activation(&t, 0, T)?,
                    cell_clip: t.scalar(1, T, 0.0)?,
                    proj_clip: t.scalar(2, T, 0.0)?,
                    time_major: t.boolean(3, T, false)?,
                    asymmetric_quantize_inputs: t.boolean(4, T, false)?,
                    diagonal_recurrent_tensors: t.boolean(5, T, false)?,
                })
            }
            // Slots 0 and 1 are the deprecated new_height and new_width.
            #[cfg(any(feature = "all-ops", feature = "op-resize-bilinear"))]
            tag::RESIZE_BILINEAR => Self::ResizeBilinear(ResizeOptions {
                align_corners: t.boolean(2, "ResizeBilinearOptions.align_corners", false)?,
                half_pixel_centers: t.boolean(
                    3,
                    "ResizeBilinearOptions.half_pixel_centers",
                    false,
                )?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-resize-nearest-neighbor"))]
            tag::RESIZE_NEAREST_NEIGHBOR => Self::ResizeNearestNeighbor(ResizeOptions {
                align_corners: t.boolean(0, "ResizeNearestNeighborOptions.align_corners", false)?,
                half_pixel_centers: t.boolean(
                    1,
                    "ResizeNearestNeighborOptions.half_pixel_centers",
                    false,
                )?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-gather"))]
            tag::GATHER => Self::Gather(GatherOptions {
                axis: t.scalar(0, "GatherOptions.axis", 0)?,
                batch_dims: t.scalar(1, "GatherOptions.batch_dims", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-squeeze"))]
            tag::SQUEEZE => {
                let mut squeeze_dims = heapless::Vec::new();
                if let Some(v) = t.vector::<i32>(0, "SqueezeOptions.squeeze_dims")? {
                    if v.len() > MAX_RANK as u32 {
                        return Err(ModelError::CapacityExceeded {
                            what: "SqueezeOptions.squeeze_dims",
                            capacity: "MAX_RANK",
                            limit: MAX_RANK as u16,
                            actual: v.len(),
                        });
                    }
                    for d in v.iter() {
                        // Capacity checked above.
                        let _ = squeeze_dims.push(d);
                    }
                }
                Self::Squeeze(SqueezeOptions { squeeze_dims })
            }
            #[cfg(any(feature = "all-ops", feature = "op-space-to-depth"))]
            tag::SPACE_TO_DEPTH => Self::SpaceToDepth(BlockSizeOptions {
                block_size: t.scalar(0, "SpaceToDepthOptions.block_size", 0)?,
            }),
            #[cfg(any(feature = "all-ops", feature = "op-depth-to-space"))]
            tag::DEPTH_TO_SPACE => Self::DepthToSpace(BlockSizeOptions {
                block_size: t.scalar(0, "DepthToSpaceOptions.block_size", 0)?,
            }),
            other => Self::Other {
                options_type: other,
            },
        })
    }

    /// These options, or — when the file has none ([`BuiltinOptions::None`]) — the schema's
    /// defaults for the table `op` takes, as TFLite uses them. Operators without a decoded
    /// options table keep `None`.
    pub fn or_default_for(self, op: BuiltinOp) -> Self {
        if self != Self::None {
            return self;
        }
        let padding = Padding::Same;
        let activation = Activation::None;
        match expected_tag(op) {
            Some(tag::CONV_2D) => Self::Conv2d(Conv2dOptions {
                padding,
                stride_w: 0,
                stride_h: 0,
                activation,
                dilation_w_factor: 1,
                dilation_h_factor: 1,
                quantized_bias_type: DataType::Float32,
            }),
            Some(tag::DEPTHWISE_CONV_2D) => Self::DepthwiseConv2d(DepthwiseConv2dOptions {
                padding,
                stride_w: 0,
                stride_h: 0,
                depth_multiplier: 0,
                activation,
                dilation_w_factor: 1,
                dilation_h_factor: 1,
            }),
            Some(tag::POOL_2D) => Self::Pool2d(Pool2dOptions {
                padding,
                stride_w: 0,
                stride_h: 0,
                filter_width: 0,
                filter_height: 0,
                activation,
            }),
            Some(tag::FULLY_CONNECTED) => Self::FullyConnected(FullyConnectedOptions {
                activation,
                weights_format: WeightsFormat::Default,
                keep_num_dims: false,
                asymmetric_quantize_inputs: false,
                quantized_bias_type: DataType::Float32,
            }),
            Some(tag::SOFTMAX) => Self::Softmax(SoftmaxOptions { beta: 0.0 }),
            Some(tag::CONCATENATION) => Self::Concatenation(ConcatenationOptions {
                axis: 0,
                activation,
            }),
            Some(tag::ADD) => Self::Add(AddSubOptions {
                activation,
                pot_scale_int16: true,
            }),
            Some(tag::SUB) => Self::Sub(AddSubOptions {
                activation,
                pot_scale_int16: true,
            }),
            Some(tag::MUL) => Self::Mul(MulOptions { activation }),
            Some(tag::RESHAPE) => Self::Reshape(ReshapeOptions { new_shape: None }),
            Some(tag::REDUCER) => Self::Reducer(ReducerOptions { keep_dims: false }),
            Some(tag::BATCH_MATMUL) => Self::BatchMatMul(BatchMatMulOptions {
                adj_x: false,
                adj_y: false,
                asymmetric_quantize_inputs: false,
            }),
            Some(tag::TRANSPOSE) => Self::Transpose,
            Some(tag::LEAKY_RELU) => Self::LeakyRelu(LeakyReluOptions { alpha: 0.0 }),
            Some(tag::STRIDED_SLICE) => Self::StridedSlice(StridedSliceOptions {
                begin_mask: 0,
                end_mask: 0,
                ellipsis_mask: 0,
                new_axis_mask: 0,
                shrink_axis_mask: 0,
                offset: false,
            }),
            Some(tag::SPLIT) => Self::Split(SplitOptions { num_splits: 0 }),
            Some(tag::SPLIT_V) => Self::SplitV(SplitOptions { num_splits: 0 }),
            Some(tag::PACK) => Self::Pack(PackOptions { count: 0, axis: 0 }),
            Some(tag::UNPACK) => Self::Unpack(PackOptions { count: 0, axis: 0 }),
            Some(tag::MIRROR_PAD) => Self::MirrorPad(MirrorPadOptions {
                mode: MirrorPadMode::Reflect,
            }),
            Some(tag::TRANSPOSE_CONV) => Self::TransposeConv(TransposeConvOptions {
                padding,
                stride_w: 0,
                stride_h: 0,
                activation,
                quantized_bias_type: DataType::Float32,
            }),
            Some(tag::L2_NORM) => Self::L2Norm(L2NormOptions { activation }),
            Some(tag::UNIDIRECTIONAL_SEQUENCE_LSTM) => {
                Self::UnidirectionalSequenceLstm(UnidirectionalSequenceLstmOptions {
                    activation,
                    cell_clip: 0.0,
                    proj_clip: 0.0,
                    time_major: false,
                    asymmetric_quantize_inputs: false,
                    diagonal_recurrent_tensors: false,
                })
            }
            Some(tag::RESIZE_BILINEAR) => Self::ResizeBilinear(ResizeOptions {
                align_corners: false,
                half_pixel_centers: false,
            }),
            Some(tag::RESIZE_NEAREST_NEIGHBOR) => Self::ResizeNearestNeighbor(ResizeOptions {
                align_corners: false,
                half_pixel_centers: false,
            }),
            Some(tag::GATHER) => Self::Gather(GatherOptions {
                axis: 0,
                batch_dims: 0,
            }),
            Some(tag::SQUEEZE) => Self::Squeeze(SqueezeOptions {
                squeeze_dims: heapless::Vec::new(),
            }),
            Some(tag::SPACE_TO_DEPTH) => Self::SpaceToDepth(BlockSizeOptions { block_size: 0 }),
            Some(tag::DEPTH_TO_SPACE) => Self::DepthToSpace(BlockSizeOptions { block_size: 0 }),
            _ => Self::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_of_is_code() {
        for code in (-3..=300).chain([i32::MIN, i32::MAX]) {
            let op = BuiltinOp::from_code(code);
            assert_eq!(code_of(op), op.code(), "{op:?}");
        }
    }

    #[test]
    fn expected_tags_name_each_operator_once() {
        for (i, &(code, _)) in EXPECTED_TAGS.iter().enumerate() {
            assert!(EXPECTED_TAGS[..i].iter().all(|&(c, _)| c != code), "{code}");
            let op = BuiltinOp::from_code(i32::from(code));
            assert_eq!(expected_tag(op), Some(EXPECTED_TAGS[i].1), "{op:?}");
        }
    }
}
