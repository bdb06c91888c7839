//! The operator set: every operator the stack runs, each described once.
//!
//! # Design
//!
//! An operator touches every layer: a model's `.tflite` operator is lowered to it, the server
//! checks its operands and dispatches it, the HAL carries it in a job, a driver or the
//! simulator runs it, the CPU fallback computes it, the tuner keys it, the cycle and CPU cost
//! models price it, tiling cuts it into row bands. So that adding one is adding one thing,
//! everything those layers need to know of an operator lives in one file of this module, as a
//! description type implementing [`Operator`]:
//!
//! - its parameters (the type itself, which is what [`Op`] carries for it);
//! - its operands and their byte sizes ([`Operator::operands`]) and its work
//!   ([`Operator::macs`]);
//! - how it computes over byte buffers ([`Operator::run`], on the `npu-kernels` kernel), which
//!   the CPU fallback and the simulator both use;
//! - how it is priced: its class in the Ethos-U cycle model ([`Operator::layer`], a
//!   [`LayerKind`] with the geometry the model needs) and in the CPU model
//!   ([`Operator::cpu_kernel`]);
//! - what the tuner and tiling may do with it (output blocks, im2col, row bands);
//! - and, beside the type, how a `.tflite` operator becomes it (a `lower` function taking the
//!   operator and its tensors through [`LowerCtx`]).
//!
//! This module knows operators and nothing of the runtime: it imports the kernels and the
//! `.tflite` reader's types, and the HAL, the server, the graph and the simulator import it.
//!
//! # Adding an operator
//!
//! A new operator touches three files outside tests:
//!
//! 1. its kernel in `npu-kernels` (bit-exact with TensorFlow Lite Micro's reference kernel);
//! 2. its description here, `src/ops/<family>.rs`: the type, `impl Operator`, and `lower`;
//! 3. the registry in this file (`src/ops/mod.rs`): one line in `operators!` for the [`Op`]
//!    variant (its family in [`OpKind`], its element type, the features of the TFLite
//!    builtins that lower to it), and one in `lowerings!` for each TFLite builtin it lowers
//!    from, with that builtin's cargo feature (a new builtin's `op-` feature is declared in
//!    `Cargo.toml` too; the registry's tests check both).
//!
//! (A kernel in a new file of `npu-kernels` also needs its `mod` line there.) Nothing else
//! changes: the server, the HAL, the graph, the tuner and the simulator work from the
//! description. A new operator family also takes a line in [`OpKind`], in this file, and, if
//! an Ethos-U55 runs it, one in the simulator's `ETHOS_U55_OPS`; a new CPU kernel class (a
//! [`CpuKernel`]) takes its measured rates in the simulator's CPU model. Its tests are models:
//! a case in `tools/opmodels/cases_<family>.py`, whose generated folder under
//! `tests/models/ops/` `tests/operators.rs` runs against TFLM's bytes.
//!
//! # Building fewer operators
//!
//! Every operator is built by default (the cargo feature `all-ops`). A firmware that runs
//! known models turns it off and turns on the `op-` feature of each TFLite operator they use
//! (`op-conv-2d` for `CONV_2D`; `npu-sim inspect` lists a model's): only those lowerings and
//! the [`Op`] variants they lower to are built, so the other operators' lowering, description
//! and kernels stay out of its flash (as TensorFlow Lite Micro's op resolver leaves out the
//! kernels it is not given). A model with an operator left out fails to prepare with
//! [`LowerError::Unsupported`] saying so; an [`Op`] variant left out has a description that
//! refuses to run ([`OpError::NotBuilt`]) and no operand sizes, so a program's own job naming
//! one is refused. The model reader likewise decodes the options tables of the operators built
//! alone. The int16 (16x8) variants also need the feature `int16` (which `all-ops` turns on):
//! an int8 firmware leaves their lowering and kernels out, and an int16 model then fails to
//! prepare at its first int16 operator.

// A build without `all-ops` leaves the lowering and the descriptions of the operators it does
// not build unused.
#![cfg_attr(not(feature = "all-ops"), allow(dead_code, unused_imports))]

/// [`Operator::pack`] and [`Operator::unpack`] for a description whose fields each pack on
/// their own ([`Packed`](npu_kernels::packed::Packed)): written and read back in the order
/// given, each checked by its own `unpack`. Used inside an `impl Operator`.
macro_rules! packed_fields {
    // A shape, then parameters resolved from it, written by `$write` and read back by
    // `$P::$read(shape, r)` (the geometry derived from the shape again).
    (shape => $P:ident :: $read:ident, $write:ident) => {
        fn pack(&self, w: &mut npu_kernels::packed::Words<'_>) -> bool {
            npu_kernels::packed::Packed::pack(&self.shape, w);
            self.params.$write(w);
            true
        }
        fn unpack(
            r: &mut npu_kernels::packed::WordReader<'_>,
        ) -> Result<Self, npu_kernels::KernelError> {
            let shape = npu_kernels::packed::Packed::unpack(r)?;
            let params = $P::$read(shape, r)?;
            Ok(Self { shape, params })
        }
    };
    // Elements `len` in rows of `depth` (read back with `take_rows`: rows that divide the
    // elements), then the other fields.
    (rows($len:ident, $depth:ident), $($field:ident),+) => {
        fn pack(&self, w: &mut npu_kernels::packed::Words<'_>) -> bool {
            w.put(self.$len);
            w.put(self.$depth);
            $(npu_kernels::packed::Packed::pack(&self.$field, w);)+
            true
        }
        fn unpack(
            r: &mut npu_kernels::packed::WordReader<'_>,
        ) -> Result<Self, npu_kernels::KernelError> {
            let ($len, $depth) = r.take_rows()?;
            Ok(Self {
                $len,
                $depth,
                $($field: npu_kernels::packed::Packed::unpack(r)?,)+
            })
        }
    };
    ($($field:ident),+) => {
        fn pack(&self, w: &mut npu_kernels::packed::Words<'_>) -> bool {
            $(npu_kernels::packed::Packed::pack(&self.$field, w);)+
            true
        }
        fn unpack(
            r: &mut npu_kernels::packed::WordReader<'_>,
        ) -> Result<Self, npu_kernels::KernelError> {
            Ok(Self {
                $($field: npu_kernels::packed::Packed::unpack(r)?,)+
            })
        }
    };
}

mod arg_min_max;
mod batch_matmul;
mod binary;
mod binary_int16;
mod cast;
mod concat;
mod conv;
mod depthwise;
mod elementwise;
mod error;
mod fully_connected;
mod gather;
mod interp;
mod l2norm;
mod layer;
mod log_softmax;
mod logistic;
mod lower;
mod lstm;
mod mean;
mod pack;
mod pad;
mod pool;
mod quantize;
mod relu;
mod reshape;
mod resize;
mod rsqrt;
mod set;
mod shape;
mod slice;
mod softmax;
mod space;
mod svdf;
mod transpose;
mod transpose_conv;

pub use arg_min_max::{ArgMaxI8, ArgMinI8};
pub use batch_matmul::BatchMatmulI8;
pub use binary::{AddBroadcastI8, AddF32, AddI8, MulBroadcastI8, MulF32, MulI8, SubI8};
pub use binary_int16::{AddI16, MulI16};
pub use cast::{CastF32, CastI16, CastI32, CastI8};
pub use concat::ConcatenationI8;
pub use conv::{Conv2dI16, Conv2dI8};
pub use depthwise::{DepthwiseConv2dI16, DepthwiseConv2dI8};
pub use elementwise::{
    AbsI8, HardSwishI8, LeakyReluI8, MaximumI8, MinimumI8, NegF32, PreluI8, SquaredDifferenceI8,
};
pub use error::OpError;
pub use fully_connected::{
    FullyConnectedF32, FullyConnectedI16, FullyConnectedI8, FullyConnectedPerChannelI8,
};
pub use gather::GatherI8;
pub use interp::{run_over, split_operands, split_writable, InputBytes, VIEW_ALIGNMENT};
pub use l2norm::L2NormI8;
pub use layer::{CpuKernel, Layer, LayerKind};
pub use log_softmax::LogSoftmaxI8;
pub use logistic::{LogisticI16, LogisticI8, TanhI16, TanhI8};
pub use lower::{LowerCtx, LowerError, Lowered, Operand};
pub use lstm::{LstmI16, LstmI8};
pub use mean::{MeanI8, ReduceMaxI8, ReduceMinI8, SumI8};
pub use pack::{PackI16, PackI8};
pub use pad::{MirrorPadI8, PadI16, PadI8, PadV2I16, PadV2I8};
pub use pool::{AveragePool2dI8, MaxPool2dI8};
pub use quantize::{
    DequantizeI16, DequantizeI8, QuantizeF32, QuantizeF32ToI16, RequantizeI16, RequantizeI16ToI32,
    RequantizeI16ToI8, RequantizeI32ToI16, RequantizeI32ToI8, RequantizeI8, RequantizeI8ToI16,
    RequantizeI8ToI32,
};
pub use relu::{Relu6I8, ReluF32, ReluI8};
pub use reshape::Reshape;
pub use resize::{
    ResizeBilinearI8, ResizeBilinearOtherI8, ResizeNearestI16, ResizeNearestI8,
    ResizeNearestOtherI16, ResizeNearestOtherI8,
};
pub use rsqrt::RsqrtI8;
pub use set::OpSet;
pub use shape::ShapeI32;
pub use slice::{SliceI16, SliceI8, StridedSliceI16, StridedSliceI8};
pub use softmax::{SoftmaxI16, SoftmaxI8, SoftmaxI8ToI16};
pub use space::{BatchToSpaceNdI8, DepthToSpaceI8, SpaceToBatchNdI8, SpaceToDepthI8};
pub use svdf::SvdfI8;
pub use transpose::TransposeI8;
pub use transpose_conv::TransposeConvI8;

use core::ops::Range;

use crate::model::BuiltinOp;
use npu_kernels::int8::Nhwc;
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

/// Most inputs an operator takes (a CONCATENATION of seven tensors, a convolution's input,
/// filter, multipliers and bias): a job carries one region per input.
pub const MAX_INPUTS: usize = 8;

/// Bytes of one per-channel requantization multiplier as it lies in memory: the
/// little-endian `i32` multiplier, then the `i32` shift
/// ([`ChannelMultiplier`](npu_kernels::int8::ChannelMultiplier)).
pub const CHANNEL_MULTIPLIER_BYTES: u32 = 8;

/// Element types an operator computes on: for a quantization or a cast, its input's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum DType {
    /// IEEE 754 single precision, little-endian.
    F32,
    /// Signed 8-bit, affine quantized.
    I8,
    /// Signed 16-bit, symmetric quantized (TensorFlow Lite's 16x8 scheme: int16 activations,
    /// int8 weights).
    I16,
    /// Signed 32-bit integers (indices, shapes, int32 model outputs).
    I32,
}

impl DType {
    /// Every element type, in the order of [`OpSet`]'s bits.
    pub const ALL: [DType; 4] = [DType::F32, DType::I8, DType::I16, DType::I32];

    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I8 => 1,
            DType::I16 => 2,
        }
    }
}

impl core::fmt::Display for DType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DType::F32 => "f32",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
        })
    }
}

/// Declares the operator families: [`OpKind`] and its published order.
macro_rules! op_kinds {
    ($($(#[$doc:meta])* $kind:ident,)*) => {
        /// Operator families, for capability queries, tuning keys and error messages.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum OpKind {
            $($(#[$doc])* $kind,)*
        }

        impl OpKind {
            /// Every operator family, in bit order of [`OpSet`]. The order is published (a
            /// tuning table stores a family's position): new families go at the end.
            pub const ALL: [OpKind; [$(OpKind::$kind),*].len()] = [$(OpKind::$kind),*];
        }
    };
}

op_kinds! {
    /// Elementwise addition.
    Add,
    /// Elementwise multiplication.
    Mul,
    /// Rectified linear unit.
    Relu,
    /// Fully connected layer / matrix multiplication.
    FullyConnected,
    /// 2-D convolution.
    Conv2d,
    /// Depthwise 2-D convolution.
    DepthwiseConv2d,
    /// Average pooling.
    AveragePool2d,
    /// Max pooling.
    MaxPool2d,
    /// Softmax along the innermost axis.
    Softmax,
    /// Mean over axes.
    Mean,
    /// A copy under a new shape (TFLite RESHAPE).
    Reshape,
    /// Batched matrix multiplication.
    BatchMatmul,
    /// Axis permutation.
    Transpose,
    /// Joining tensors along an axis.
    Concatenation,
    /// Elementwise subtraction.
    Sub,
    /// Elementwise reciprocal square root.
    Rsqrt,
    /// Quantization (float to int8) or requantization (int8 to int8).
    Quantize,
    /// Dequantization (int8 to float).
    Dequantize,
    /// Elementwise negation.
    Neg,
    /// Elementwise `(a − b)²`.
    SquaredDifference,
    /// Elementwise maximum.
    Maximum,
    /// Elementwise minimum.
    Minimum,
    /// Leaky ReLU: `x` or `alpha · x`.
    LeakyRelu,
    /// Parametric ReLU: `x` or `alpha · x` with a tensor `alpha`.
    Prelu,
    /// Hard swish: `x · relu6(x + 3) / 6`.
    HardSwish,
    /// Elementwise absolute value.
    Abs,
    /// Constant padding of height and width (TFLite PAD as Vela runs it on the NPU).
    Pad,
    /// Constant padding of any axes with any value (TFLite PADV2, and PAD beyond height and
    /// width).
    PadV2,
    /// Padding with the input's reflection (TFLite MIRROR_PAD).
    MirrorPad,
    /// A box of a tensor, unit strides: SLICE, STRIDED_SLICE, and each output of SPLIT,
    /// SPLIT_V and UNPACK.
    Slice,
    /// A strided box of a tensor (TFLite STRIDED_SLICE with other strides).
    StridedSlice,
    /// Tensors stacked along a new axis (TFLite PACK).
    Pack,
    /// Sum over axes.
    Sum,
    /// Maximum over axes.
    ReduceMax,
    /// Index of the maximum along an axis.
    ArgMax,
    /// Index of the minimum along an axis.
    ArgMin,
    /// Transposed 2-D convolution.
    TransposeConv,
    /// Division of each innermost row by its L2 norm.
    L2Normalization,
    /// Logarithm of the softmax along the innermost axis.
    LogSoftmax,
    /// Minimum over axes.
    ReduceMin,
    /// The logistic function (sigmoid).
    Logistic,
    /// The hyperbolic tangent.
    Tanh,
    /// Singular value decomposition filter, a stateful layer (TFLite SVDF).
    Svdf,
    /// Long short-term memory over a sequence, a stateful layer (TFLite
    /// UNIDIRECTIONAL_SEQUENCE_LSTM).
    Lstm,
    /// Nearest-neighbour image resize, of a size Vela runs on the NPU.
    ResizeNearestNeighbor,
    /// Slices picked along an axis by indices.
    Gather,
    /// A tensor's dimensions as a vector.
    Shape,
    /// Bilinear image resize, of a size Vela runs on the NPU.
    ResizeBilinear,
    /// Depth moved into spatial blocks.
    DepthToSpace,
    /// Spatial blocks moved into depth.
    SpaceToDepth,
    /// Batches moved into spatial blocks, cropped.
    BatchToSpaceNd,
    /// Spatial blocks, padded, moved into batches.
    SpaceToBatchNd,
    /// Element type conversion.
    Cast,
    /// Nearest-neighbour image resize of other sizes.
    ResizeNearestOther,
    /// Bilinear image resize of other sizes.
    ResizeBilinearOther,
    /// Quantization to or from int32 (Vela runs no QUANTIZE with int32).
    QuantizeInt32,
    /// Softmax of int8 input and int16 output (Vela's needs one type).
    SoftmaxToInt16,
}

impl OpKind {
    /// Whether its operators keep state from one invoke to the next, updating
    /// [state operands](Operator::state_inputs) in place (SVDF, LSTM). An NPU job writes one
    /// region, so these run on the CPU fallback: a HAL does not declare them, and
    /// [`OpSet::all`] leaves them out.
    pub const fn is_stateful(self) -> bool {
        matches!(self, OpKind::Svdf | OpKind::Lstm)
    }
}

impl core::fmt::Display for OpKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// The description an [`Op`] variant has when its operator's code is left out of the build
/// (the crate's operator features): it has no operands, no work, and refuses to run
/// ([`OpError::NotBuilt`]). Nothing lowers to such a variant (its TFLite operators are left
/// out too); a program's own job naming one is refused.
struct NotBuilt;

impl Operator for NotBuilt {
    fn operands(&self) -> Option<Operands> {
        None
    }
    fn macs(&self) -> u64 {
        0
    }
    fn run(&self, _inputs: &[&[u8]], _output: &mut [u8]) -> Result<(), OpError> {
        Err(OpError::NotBuilt)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::CopyElements
    }
}

/// Declares [`Op`], one variant per description type, and the methods that hand each question
/// to the variant's description.
macro_rules! operators {
    ($($(#[$doc:meta])* $variant:ident = $kind:ident, $dtype:ident, [$($feature:literal),*] $(+ $needs:literal)?;)*) => {
        /// A compute operation: one of the described operators, with its shape and every
        /// parameter its kernel needs, precomputed once when a model is prepared
        /// (multipliers, offsets, resolved padding), so a job is self-contained and a driver
        /// never looks anything up. Data that grows with the layer (weights, bias,
        /// per-channel multipliers) travels as operand regions instead.
        ///
        /// Operand order is fixed per operator and documented on each description;
        /// [`Op::operands`] gives the byte size each operand must have, which the server
        /// checks before a job is submitted.
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum Op {
            $($(#[$doc])* $variant($variant),)*
        }

        /// Asks the description of an [`Op`] one question: `described!(op, |o| o.macs())`
        /// evaluates the expression with `o` bound to the variant's description ([`NotBuilt`]
        /// for one this build leaves out). A `match` rather than a `&dyn Operator`: a vtable
        /// holds every method of every built operator whether anything calls it or not, so a
        /// CPU-only firmware would carry the band, layer and tuning-key code the NPU
        /// machinery alone asks for; matched, only the questions a build asks are linked.
        macro_rules! described {
            ($op:expr, |$o:ident| $call:expr) => {{
                // With `all-ops` every variant has its arm and the last one is unreachable.
                #[allow(unreachable_patterns)]
                let answer = match $op {
                    $(
                        #[cfg(all(any(feature = "all-ops" $(, feature = $feature)*) $(, feature = $needs)?))]
                        Op::$variant($o) => $call,
                    )*
                    _ => {
                        let $o = &NotBuilt;
                        $call
                    }
                };
                answer
            }};
        }

        $(
            impl From<$variant> for Op {
                fn from(op: $variant) -> Op {
                    Op::$variant(op)
                }
            }
        )*

        impl Op {
            /// The operator family.
            pub const fn kind(&self) -> OpKind {
                match self {
                    $(Op::$variant(_) => OpKind::$kind,)*
                }
            }

            /// The element type.
            pub const fn dtype(&self) -> DType {
                match self {
                    $(Op::$variant(_) => DType::$dtype,)*
                }
            }

            /// Its (family, dtype) bit in an [`OpSet`].
            const fn set_bit(&self) -> u16 {
                match self {
                    $(Op::$variant(_) => OpSet::bit(OpKind::$kind, DType::$dtype),)*
                }
            }

            /// Whether this build has the operator's code (its `op-` feature, and `int16`
            /// for an int16 one).
            const fn is_built(&self) -> bool {
                #[allow(unreachable_patterns)]
                match self {
                    $(
                        #[cfg(all(any(feature = "all-ops" $(, feature = $feature)*) $(, feature = $needs)?))]
                        Op::$variant(_) => true,
                    )*
                    _ => false,
                }
            }

            /// Bytes each operand must have. `None` if a size overflows `u32`.
            // Inlined always: every job's operand check calls it, and outlined it costs a
            // call and a return of the list per job (measured on a Cortex-M4).
            #[inline(always)]
            pub fn operands(&self) -> Option<Operands> {
                #[allow(unreachable_patterns)]
                match self {
                    $(
                        #[cfg(all(any(feature = "all-ops" $(, feature = $feature)*) $(, feature = $needs)?))]
                        Op::$variant(o) => o.operands(),
                    )*
                    _ => None,
                }
            }
        }

        /// The variants' positions in [`OPERATORS`]: the tags of a compiled model's steps.
        #[repr(u16)]
        enum Tag {
            $($variant,)*
        }

        impl Op {
            /// Writes its parameters as words ([`Operator::pack`]); its tag, the variant's
            /// index in [`OPERATORS`], or `None` for an operator that has no packed form or is
            /// not built.
            pub fn pack(&self, w: &mut Words<'_>) -> Option<u16> {
                #[allow(unreachable_patterns)]
                match self {
                    $(
                        #[cfg(all(any(feature = "all-ops" $(, feature = $feature)*) $(, feature = $needs)?))]
                        Op::$variant(o) => o.pack(w).then_some(Tag::$variant as u16),
                    )*
                    _ => None,
                }
            }

            /// The op of tag `tag` read back from its words ([`Operator::unpack`]).
            ///
            /// Errors: [`OpError::NotBuilt`] for a tag this build has no operator for (or none
            /// at all); [`OpError::Kernel`] for words its parameters refuse.
            pub fn unpack(tag: u16, r: &mut WordReader<'_>) -> Result<Op, OpError> {
                $(
                    #[cfg(all(any(feature = "all-ops" $(, feature = $feature)*) $(, feature = $needs)?))]
                    if tag == Tag::$variant as u16 {
                        return Ok(Op::$variant(<$variant as Operator>::unpack(r)?));
                    }
                )*
                let _ = r;
                Err(OpError::NotBuilt)
            }
        }

        /// Each operator's entry, by its variant's name, for [`lowerings!`].
        #[allow(non_upper_case_globals)]
        mod entries {
            use super::{DType, OpKind, OperatorInfo};
            $(
                pub(super) const $variant: OperatorInfo = OperatorInfo {
                    name: stringify!($variant),
                    kind: OpKind::$kind,
                    dtype: DType::$dtype,
                    features: &[$($feature),*],
                };
            )*
        }

        /// Every operator, in [`Op`]'s order.
        pub const OPERATORS: &[OperatorInfo] = &[$(entries::$variant),*];
    };
}

/// What the registry says of one operator, without its parameters: what the README's table of
/// supported operators is generated from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperatorInfo {
    /// The [`Op`] variant (and description type) it is.
    pub name: &'static str,
    /// Its family.
    pub kind: OpKind,
    /// Its element type.
    pub dtype: DType,
    /// The cargo features that build it besides `all-ops`: those of the TFLite operators
    /// that lower to it (none for an operator only a program's own jobs run).
    pub features: &'static [&'static str],
}

/// A TFLite builtin the stack lowers, and the operators it may become.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lowering {
    /// The TFLite operator.
    pub builtin: BuiltinOp,
    /// The operators it may become; none for an operator that runs nothing (RESHAPE: its
    /// output shares its input's memory).
    pub ops: &'static [OperatorInfo],
    /// The cargo feature that builds it (and its operators) without `all-ops`.
    pub feature: &'static str,
}

operators! {
    /// `out = a + b` on f32 elements.
    AddF32 = Add, F32, [];
    /// `out = a * b` on f32 elements.
    MulF32 = Mul, F32, [];
    /// `out = max(0, x)` on f32 elements.
    ReluF32 = Relu, F32, [];
    /// f32 fully connected.
    FullyConnectedF32 = FullyConnected, F32, [];
    /// int8 `out = a + b`, same shapes.
    AddI8 = Add, I8, ["op-add"];
    /// int8 `out = a * b`, same shapes.
    MulI8 = Mul, I8, ["op-mul"];
    /// int8 ReLU family.
    ReluI8 = Relu, I8, ["op-relu"];
    /// int8 fully connected with one output multiplier.
    FullyConnectedI8 = FullyConnected, I8, ["op-fully-connected"];
    /// int8 fully connected with one multiplier per output feature.
    FullyConnectedPerChannelI8 = FullyConnected, I8, ["op-fully-connected"];
    /// int8 CONV_2D.
    Conv2dI8 = Conv2d, I8, ["op-conv-2d"];
    /// int8 DEPTHWISE_CONV_2D.
    DepthwiseConv2dI8 = DepthwiseConv2d, I8, ["op-depthwise-conv-2d"];
    /// int8 AVERAGE_POOL_2D.
    AveragePool2dI8 = AveragePool2d, I8, ["op-average-pool-2d"];
    /// int8 MAX_POOL_2D.
    MaxPool2dI8 = MaxPool2d, I8, ["op-max-pool-2d"];
    /// int8 SOFTMAX.
    SoftmaxI8 = Softmax, I8, ["op-softmax"];
    /// int8 MEAN.
    MeanI8 = Mean, I8, ["op-mean"];
    /// int8 ADD with broadcasting.
    AddBroadcastI8 = Add, I8, ["op-add"];
    /// int8 SUB with broadcasting.
    SubI8 = Sub, I8, ["op-sub"];
    /// int8 MUL with broadcasting.
    MulBroadcastI8 = Mul, I8, ["op-mul"];
    /// int8 RSQRT.
    RsqrtI8 = Rsqrt, I8, ["op-rsqrt"];
    /// int8 to int8 QUANTIZE.
    RequantizeI8 = Quantize, I8, ["op-quantize"];
    /// f32 to int8 QUANTIZE.
    QuantizeF32 = Quantize, F32, ["op-quantize"];
    /// int8 to f32 DEQUANTIZE.
    DequantizeI8 = Dequantize, I8, ["op-dequantize"];
    /// int8 BATCH_MATMUL.
    BatchMatmulI8 = BatchMatmul, I8, ["op-batch-matmul"];
    /// int8 TRANSPOSE.
    TransposeI8 = Transpose, I8, ["op-transpose"];
    /// int8 CONCATENATION.
    ConcatenationI8 = Concatenation, I8, ["op-concatenation"];
    /// A byte copy (RESHAPE when the output cannot share the input's memory).
    Reshape = Reshape, I8, [];
    /// f32 NEG.
    NegF32 = Neg, F32, ["op-neg"];
    /// int8 SQUARED_DIFFERENCE with broadcasting.
    SquaredDifferenceI8 = SquaredDifference, I8, ["op-squared-difference"];
    /// int8 MAXIMUM with broadcasting.
    MaximumI8 = Maximum, I8, ["op-maximum"];
    /// int8 MINIMUM with broadcasting.
    MinimumI8 = Minimum, I8, ["op-minimum"];
    /// int8 RELU6 (a clamp on the input's scale).
    Relu6I8 = Relu, I8, ["op-relu-6"];
    /// int8 LEAKY_RELU.
    LeakyReluI8 = LeakyRelu, I8, ["op-leaky-relu"];
    /// int8 PRELU with broadcasting.
    PreluI8 = Prelu, I8, ["op-prelu"];
    /// int8 HARD_SWISH.
    HardSwishI8 = HardSwish, I8, ["op-hard-swish"];
    /// int8 ABS.
    AbsI8 = Abs, I8, ["op-abs"];
    /// 16x8 fully connected (per tensor or per channel).
    FullyConnectedI16 = FullyConnected, I16, ["op-fully-connected"] + "int16";
    /// 16x8 CONV_2D.
    Conv2dI16 = Conv2d, I16, ["op-conv-2d"] + "int16";
    /// 16x8 DEPTHWISE_CONV_2D.
    DepthwiseConv2dI16 = DepthwiseConv2d, I16, ["op-depthwise-conv-2d"] + "int16";
    /// 16x8 ADD with broadcasting.
    AddI16 = Add, I16, ["op-add"] + "int16";
    /// 16x8 MUL with broadcasting.
    MulI16 = Mul, I16, ["op-mul"] + "int16";
    /// int8 PAD of height and width.
    PadI8 = Pad, I8, ["op-pad"];
    /// int16 PAD of height and width.
    PadI16 = Pad, I16, ["op-pad"] + "int16";
    /// int8 PADV2, or PAD of other axes.
    PadV2I8 = PadV2, I8, ["op-pad", "op-padv-2"];
    /// int16 PADV2, or PAD of other axes.
    PadV2I16 = PadV2, I16, ["op-pad", "op-padv-2"] + "int16";
    /// int8 MIRROR_PAD.
    MirrorPadI8 = MirrorPad, I8, ["op-mirror-pad"];
    /// int8 slice of unit strides (SLICE, SPLIT, SPLIT_V, UNPACK, STRIDED_SLICE).
    SliceI8 = Slice, I8, ["op-slice", "op-split", "op-split-v", "op-strided-slice", "op-unpack"];
    /// int16 slice of unit strides.
    SliceI16 = Slice, I16, ["op-slice", "op-split", "op-split-v", "op-strided-slice", "op-unpack"] + "int16";
    /// int8 STRIDED_SLICE of other strides.
    StridedSliceI8 = StridedSlice, I8, ["op-strided-slice"];
    /// int16 STRIDED_SLICE of other strides.
    StridedSliceI16 = StridedSlice, I16, ["op-strided-slice"] + "int16";
    /// int8 PACK.
    PackI8 = Pack, I8, ["op-pack"];
    /// int16 PACK.
    PackI16 = Pack, I16, ["op-pack"] + "int16";
    /// int8 SUM.
    SumI8 = Sum, I8, ["op-sum"];
    /// int8 REDUCE_MAX.
    ReduceMaxI8 = ReduceMax, I8, ["op-reduce-max"];
    /// int8 ARG_MAX (int32 output).
    ArgMaxI8 = ArgMax, I8, ["op-arg-max"];
    /// int8 ARG_MIN (int32 output).
    ArgMinI8 = ArgMin, I8, ["op-arg-min"];
    /// int8 TRANSPOSE_CONV.
    TransposeConvI8 = TransposeConv, I8, ["op-transpose-conv"];
    /// int8 L2_NORMALIZATION.
    L2NormI8 = L2Normalization, I8, ["op-l-2-normalization"];
    /// int8 LOG_SOFTMAX.
    LogSoftmaxI8 = LogSoftmax, I8, ["op-log-softmax"];
    /// int8 REDUCE_MIN.
    ReduceMinI8 = ReduceMin, I8, ["op-reduce-min"];
    /// int8 LOGISTIC.
    LogisticI8 = Logistic, I8, ["op-logistic"];
    /// int16 LOGISTIC.
    LogisticI16 = Logistic, I16, ["op-logistic"] + "int16";
    /// int8 TANH.
    TanhI8 = Tanh, I8, ["op-tanh"];
    /// int16 TANH.
    TanhI16 = Tanh, I16, ["op-tanh"] + "int16";
    /// int16 to int16 QUANTIZE.
    RequantizeI16 = Quantize, I16, ["op-quantize"] + "int16";
    /// int16 to int8 QUANTIZE.
    RequantizeI16ToI8 = Quantize, I16, ["op-quantize"] + "int16";
    /// int8 to int16 QUANTIZE.
    RequantizeI8ToI16 = Quantize, I8, ["op-quantize"];
    /// f32 to int16 QUANTIZE.
    QuantizeF32ToI16 = Quantize, F32, ["op-quantize"];
    /// int16 to f32 DEQUANTIZE.
    DequantizeI16 = Dequantize, I16, ["op-dequantize"] + "int16";
    /// int16 SOFTMAX.
    SoftmaxI16 = Softmax, I16, ["op-softmax"] + "int16";
    /// int8 SVDF (int8 or int16 activation state).
    SvdfI8 = Svdf, I8, ["op-svdf"];
    /// int8 UNIDIRECTIONAL_SEQUENCE_LSTM (int16 cell state).
    LstmI8 = Lstm, I8, ["op-unidirectional-sequence-lstm"];
    /// int16 (16x8) UNIDIRECTIONAL_SEQUENCE_LSTM (int16 cell state).
    LstmI16 = Lstm, I16, ["op-unidirectional-sequence-lstm"] + "int16";
    /// int8 RESIZE_NEAREST_NEIGHBOR of a size Vela runs on the NPU.
    ResizeNearestI8 = ResizeNearestNeighbor, I8, ["op-resize-nearest-neighbor"];
    /// int16 RESIZE_NEAREST_NEIGHBOR of a size Vela runs on the NPU.
    ResizeNearestI16 = ResizeNearestNeighbor, I16, ["op-resize-nearest-neighbor"] + "int16";
    /// int8 GATHER (int32 indices).
    GatherI8 = Gather, I8, ["op-gather"];
    /// SHAPE (int32 output).
    ShapeI32 = Shape, I32, ["op-shape"];
    /// int8 RESIZE_BILINEAR of a size Vela runs on the NPU.
    ResizeBilinearI8 = ResizeBilinear, I8, ["op-resize-bilinear"];
    /// int8 DEPTH_TO_SPACE.
    DepthToSpaceI8 = DepthToSpace, I8, ["op-depth-to-space"];
    /// int8 SPACE_TO_DEPTH.
    SpaceToDepthI8 = SpaceToDepth, I8, ["op-space-to-depth"];
    /// int8 BATCH_TO_SPACE_ND.
    BatchToSpaceNdI8 = BatchToSpaceNd, I8, ["op-batch-to-space-nd"];
    /// int8 SPACE_TO_BATCH_ND.
    SpaceToBatchNdI8 = SpaceToBatchNd, I8, ["op-space-to-batch-nd"];
    /// CAST from int8.
    CastI8 = Cast, I8, ["op-cast"];
    /// CAST from int16.
    CastI16 = Cast, I16, ["op-cast"] + "int16";
    /// CAST from int32.
    CastI32 = Cast, I32, ["op-cast"];
    /// CAST from float32.
    CastF32 = Cast, F32, ["op-cast"];
    /// int8 RESIZE_NEAREST_NEIGHBOR of another size.
    ResizeNearestOtherI8 = ResizeNearestOther, I8, ["op-resize-nearest-neighbor"];
    /// int16 RESIZE_NEAREST_NEIGHBOR of another size.
    ResizeNearestOtherI16 = ResizeNearestOther, I16, ["op-resize-nearest-neighbor"] + "int16";
    /// int8 RESIZE_BILINEAR of another size.
    ResizeBilinearOtherI8 = ResizeBilinearOther, I8, ["op-resize-bilinear"];
    /// int8 to int32 QUANTIZE.
    RequantizeI8ToI32 = QuantizeInt32, I8, ["op-quantize"];
    /// int16 to int32 QUANTIZE.
    RequantizeI16ToI32 = QuantizeInt32, I16, ["op-quantize"] + "int16";
    /// int32 to int8 QUANTIZE.
    RequantizeI32ToI8 = QuantizeInt32, I32, ["op-quantize"];
    /// int32 to int16 QUANTIZE.
    RequantizeI32ToI16 = QuantizeInt32, I32, ["op-quantize"];
    /// SOFTMAX of int8 input and int16 output.
    SoftmaxI8ToI16 = SoftmaxToInt16, I8, ["op-softmax"];
}

/// Declares how each TFLite builtin is lowered, and the list of them.
macro_rules! lowerings {
    ($($builtin:ident => $lower:path: [$($op:ident),*], $feature:literal,)*) => {
        /// Lowers operator `ctx` of a model (see [`Lowered`]). Errors: [`LowerError`] naming
        /// what is unsupported or inconsistent, or that this build leaves the operator out
        /// (the crate's operator features).
        pub fn lower(ctx: &LowerCtx<'_, '_>) -> Result<Lowered, LowerError> {
            let lowered = match ctx.builtin() {
                $(
                    #[cfg(any(feature = "all-ops", feature = $feature))]
                    BuiltinOp::$builtin => $lower(ctx),
                    // One message for all (the error names the operator): a message per
                    // operator would add its text to the flash the feature saves.
                    #[cfg(not(any(feature = "all-ops", feature = $feature)))]
                    BuiltinOp::$builtin => Err(LowerError::Unsupported(
                        "operator left out of this build (its `op-` cargo feature builds it)",
                    )),
                )*
                _ => Err(LowerError::Unsupported("operator")),
            }?;
            match lowered {
                // The operator's feature is on but not its element type's.
                Lowered::Compute { op, .. } if !op.is_built() => {
                    Err(LowerError::Unsupported(lower::INT16_LEFT_OUT))
                }
                lowered => Ok(lowered),
            }
        }

        /// Every TFLite builtin the stack lowers, with the operators it may become.
        pub const LOWERINGS: &[Lowering] = &[$(Lowering {
            builtin: BuiltinOp::$builtin,
            ops: &[$(entries::$op),*],
            feature: $feature,
        },)*];
    };
}

lowerings! {
    Abs => elementwise::lower_unary: [AbsI8], "op-abs",
    Add => binary::lower: [AddI8, AddBroadcastI8, AddI16], "op-add",
    ArgMax => arg_min_max::lower: [ArgMaxI8], "op-arg-max",
    ArgMin => arg_min_max::lower: [ArgMinI8], "op-arg-min",
    AveragePool2d => pool::lower: [AveragePool2dI8], "op-average-pool-2d",
    BatchMatmul => batch_matmul::lower: [BatchMatmulI8], "op-batch-matmul",
    BatchToSpaceNd => space::lower_batch_to_space: [BatchToSpaceNdI8], "op-batch-to-space-nd",
    Cast => cast::lower: [CastI8, CastI16, CastI32, CastF32], "op-cast",
    Concatenation => concat::lower: [ConcatenationI8], "op-concatenation",
    Conv2d => conv::lower: [Conv2dI8, Conv2dI16], "op-conv-2d",
    DepthToSpace => space::lower_depth_to_space: [DepthToSpaceI8], "op-depth-to-space",
    DepthwiseConv2d => depthwise::lower: [DepthwiseConv2dI8, DepthwiseConv2dI16], "op-depthwise-conv-2d",
    Dequantize => quantize::lower_dequantize: [DequantizeI8, DequantizeI16], "op-dequantize",
    ExpandDims => shape::lower_expand_dims: [], "op-expand-dims",
    FullyConnected => fully_connected::lower: [
        FullyConnectedI8,
        FullyConnectedPerChannelI8,
        FullyConnectedI16
    ], "op-fully-connected",
    Gather => gather::lower: [GatherI8], "op-gather",
    HardSwish => elementwise::lower_unary: [HardSwishI8], "op-hard-swish",
    L2Normalization => l2norm::lower: [L2NormI8], "op-l-2-normalization",
    LeakyRelu => elementwise::lower_unary: [LeakyReluI8], "op-leaky-relu",
    LogSoftmax => log_softmax::lower: [LogSoftmaxI8], "op-log-softmax",
    Logistic => logistic::lower: [LogisticI8, LogisticI16], "op-logistic",
    MaxPool2d => pool::lower: [MaxPool2dI8], "op-max-pool-2d",
    Maximum => elementwise::lower_binary: [MaximumI8], "op-maximum",
    Mean => mean::lower: [MeanI8], "op-mean",
    Minimum => elementwise::lower_binary: [MinimumI8], "op-minimum",
    MirrorPad => pad::lower_mirror: [MirrorPadI8], "op-mirror-pad",
    Mul => binary::lower: [MulI8, MulBroadcastI8, MulI16], "op-mul",
    Neg => elementwise::lower_neg: [NegF32], "op-neg",
    Pack => pack::lower: [PackI8, PackI16], "op-pack",
    Pad => pad::lower: [PadI8, PadI16, PadV2I8, PadV2I16], "op-pad",
    Padv2 => pad::lower: [PadV2I8, PadV2I16], "op-padv-2",
    Prelu => elementwise::lower_binary: [PreluI8], "op-prelu",
    Quantize => quantize::lower: [
        RequantizeI8,
        QuantizeF32,
        RequantizeI16,
        RequantizeI16ToI8,
        RequantizeI8ToI16,
        QuantizeF32ToI16,
        RequantizeI8ToI32,
        RequantizeI16ToI32,
        RequantizeI32ToI8,
        RequantizeI32ToI16
    ], "op-quantize",
    ReduceMax => mean::lower: [ReduceMaxI8], "op-reduce-max",
    ReduceMin => mean::lower: [ReduceMinI8], "op-reduce-min",
    Relu => relu::lower: [ReluI8], "op-relu",
    Relu6 => relu::lower: [Relu6I8], "op-relu-6",
    Reshape => reshape::lower: [], "op-reshape",
    ResizeBilinear => resize::lower_bilinear: [ResizeBilinearI8, ResizeBilinearOtherI8], "op-resize-bilinear",
    ResizeNearestNeighbor => resize::lower_nearest: [
        ResizeNearestI8,
        ResizeNearestI16,
        ResizeNearestOtherI8,
        ResizeNearestOtherI16
    ], "op-resize-nearest-neighbor",
    Rsqrt => rsqrt::lower: [RsqrtI8], "op-rsqrt",
    Shape => shape::lower_shape: [ShapeI32], "op-shape",
    Slice => slice::lower_slice: [SliceI8, SliceI16], "op-slice",
    Softmax => softmax::lower: [SoftmaxI8, SoftmaxI16, SoftmaxI8ToI16], "op-softmax",
    SpaceToBatchNd => space::lower_space_to_batch: [SpaceToBatchNdI8], "op-space-to-batch-nd",
    SpaceToDepth => space::lower_space_to_depth: [SpaceToDepthI8], "op-space-to-depth",
    Split => slice::lower_split: [SliceI8, SliceI16], "op-split",
    SplitV => slice::lower_split_v: [SliceI8, SliceI16], "op-split-v",
    SquaredDifference => elementwise::lower_binary: [SquaredDifferenceI8], "op-squared-difference",
    Squeeze => shape::lower_squeeze: [], "op-squeeze",
    StridedSlice => slice::lower_strided_slice: [SliceI8, SliceI16, StridedSliceI8, StridedSliceI16], "op-strided-slice",
    Sub => binary::lower: [SubI8], "op-sub",
    Sum => mean::lower: [SumI8], "op-sum",
    Svdf => svdf::lower: [SvdfI8], "op-svdf",
    Tanh => logistic::lower_tanh: [TanhI8, TanhI16], "op-tanh",
    Transpose => transpose::lower: [TransposeI8], "op-transpose",
    TransposeConv => transpose_conv::lower: [TransposeConvI8], "op-transpose-conv",
    UnidirectionalSequenceLstm => lstm::lower: [LstmI8, LstmI16], "op-unidirectional-sequence-lstm",
    Unpack => slice::lower_unpack: [SliceI8, SliceI16], "op-unpack",
}

/// Byte sizes of an op's operands, as [`Op::operands`] reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operands {
    /// Bytes of each input, in operand order.
    pub inputs: heapless::Vec<u32, MAX_INPUTS>,
    /// How many trailing inputs may be left out (an optional bias).
    pub optional: u8,
    /// Bytes of the output.
    pub output: u32,
}

impl Operands {
    /// The sizes of `inputs` (the last `optional` of them may be left out) and `output`.
    /// `None` for more than [`MAX_INPUTS`] inputs.
    pub fn new(inputs: &[u32], optional: u8, output: u32) -> Option<Self> {
        Some(Operands {
            inputs: heapless::Vec::from_slice(inputs).ok()?,
            optional,
            output,
        })
    }

    /// Whether `n` inputs is a valid count.
    pub fn accepts(&self, n: usize) -> bool {
        n <= self.inputs.len() && n + usize::from(self.optional) >= self.inputs.len()
    }
}

/// Bytes 3..=15 of an operator's tuning key: the parameters that decide which kernel variants
/// can run, exact, and five sizes, which the key rounds to powers of two (see
/// [`TuneKey`](crate::tune::TuneKey)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyShape {
    /// Padding SAME (1) or not, filter height and width, stride height and width, dilation
    /// height and width, and groups (convolution) or depth multiplier (depthwise); 0 where the
    /// operator has none.
    pub window: [u32; 8],
    /// Five sizes, per operator.
    pub sizes: [u64; 5],
}

/// What an operator that can run as a gather of each output pixel's window into a matrix and
/// one matrix product (im2col) needs for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Im2col {
    /// Bytes of the matrix (`None` if they overflow `u32`).
    pub bytes: Option<u32>,
    /// Whether it can beat the direct kernel: a window of more than one tap, or a stride
    /// above 1 (else each output pixel already reads one input row).
    pub helps: bool,
}

/// What every layer needs to know of one operator: implemented by each description type (see
/// the [module docs](self)). Only the first four are required; the defaults describe an
/// operator the tuner, tiling and the cycle model have nothing special for.
pub trait Operator {
    /// Bytes each operand must have, inputs in operand order, or `None` if a size overflows
    /// `u32`.
    fn operands(&self) -> Option<Operands>;
    /// Multiply-accumulates (for elementwise and data-movement ops: output elements; for
    /// depthwise convolutions and pools: window taps), the unit of cost models.
    fn macs(&self) -> u64;
    /// Computes the op from `inputs` (operand order) into `output`, raw bytes as they lie in
    /// memory (little-endian, aligned for their element type), with the `npu-kernels`
    /// kernel. The input count is checked before.
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError>;
    /// The fallback kernel the CPU cost model prices it by.
    fn cpu_kernel(&self) -> CpuKernel;

    /// The op as a cycle model's layer, or `None` for one it prices by elements or MACs alone
    /// (f32 ops and plain int8 elementwise ones).
    fn layer(&self) -> Option<Layer> {
        None
    }
    /// Filter positions the CPU kernel visits (`outputs × kh × kw` for a convolution, whose
    /// padding tests dominate a shallow one; output pixels × kh × kw for a depthwise one,
    /// whose channels share a pixel's list of taps); for a pool the taps of the channels past
    /// the last sixteen (which SIMD cores leave to the scalar loop); for a strided copy
    /// (slices, pads, pack) the rows it copies, each with a cost of its own; for an int8
    /// broadcasting ADD, SUB or MUL its innermost runs (a step of its loop nest and a SIMD
    /// loop's set-up each); 0 for others.
    fn taps(&self) -> u64 {
        0
    }
    /// Output elements, for an op whose output's element type is not its dtype (the
    /// quantizations); `None` for the others, whose count follows from the output's bytes.
    fn output_elements(&self) -> Option<u64> {
        None
    }
    /// The exact parameters and the sizes of its tuning key (by default: its work, no window).
    fn key_shape(&self) -> KeyShape {
        KeyShape {
            window: [0; 8],
            sizes: [self.macs(), 0, 0, 0, 0],
        }
    }
    /// The output extent (height, width) a forced output block is clipped to, for operators
    /// an NPU walks in blocks; `None` for others.
    fn block_extent(&self) -> Option<(u32, u32)> {
        None
    }
    /// What running it as im2col needs, for operators that can; `None` for others.
    fn im2col(&self) -> Option<Im2col> {
        None
    }
    /// Computes the op as im2col: the gathered matrix into `matrix` (at least
    /// [`Im2col::bytes`] long), then the product into `output`.
    fn run_im2col(
        &self,
        inputs: &[&[u8]],
        matrix: &mut [u8],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let _ = (inputs, matrix, output);
        Err(OpError::NotIm2col)
    }
    /// Whether the op may write its output over one of its inputs (the same region): each
    /// output element depends only on the input elements at the same index, so a streaming
    /// engine reads them before it writes.
    fn runs_in_place(&self) -> bool {
        false
    }
    /// The same op over the first `len` elements, for an op that runs in place (computed in
    /// chunks through a stack copy).
    fn prefix(&self, len: u32) -> Option<Op> {
        let _ = len;
        None
    }
    /// For an operator whose output rows each depend on a band of input rows (a convolution
    /// or a pool: tiling cuts it into stripes), its input and output shapes.
    fn rows(&self) -> Option<(Nhwc, Nhwc)> {
        None
    }
    /// The operator computing output rows `out_rows` from a band of its input, and that
    /// band's rows; `None` for operators without rows.
    fn band(&self, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
        let _ = out_rows;
        None
    }
    /// For an operator that lays its inputs end to end as its output (a concatenation along
    /// its outermost axis), each input's byte length: a planner can then have the inputs'
    /// producers write straight into their blocks.
    fn contiguous_inputs(&self) -> Option<heapless::Vec<u32, MAX_INPUTS>> {
        None
    }
    /// How many of its leading inputs are *state*: memory the op reads and writes back, which
    /// lives from one invoke to the next (TFLite's variable tensors, such as SVDF's activation
    /// state). 0 for a stateless op.
    ///
    /// A state operand is an in-out operand, not a second output: it is listed with the
    /// inputs (so the operand count and sizes are checked as for any input) and the op
    /// updates it in place ([`run_stateful`](Self::run_stateful)). The CPU fallback brings it
    /// to the host with the other inputs and writes it back with the output. A job for the
    /// NPU carries one written region, so a HAL does not declare a stateful operator: they
    /// run on the CPU fallback.
    fn state_inputs(&self) -> u8 {
        0
    }
    /// Computes a stateful op: `state` holds its first [`state_inputs`](Self::state_inputs)
    /// inputs, read and updated in place, `inputs` the others, in operand order.
    fn run_stateful(
        &self,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let _ = (state, inputs, output);
        Err(OpError::State)
    }
    /// Writes its parameters as the words of a compiled model (see
    /// [`npu_kernels::packed`]): its shape, and its quantization resolved. `false` for an
    /// operator that has no packed form yet (a model using it is not compiled).
    fn pack(&self, w: &mut Words<'_>) -> bool {
        let _ = w;
        false
    }
    /// Reads back what [`pack`](Self::pack) wrote, checked as lowering checks it: the
    /// geometry derived from the shape again, the quantization in the ranges it can have.
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError>
    where
        Self: Sized,
    {
        let _ = r;
        Err(KernelError::Unsupported {
            what: "operator without a packed form",
        })
    }
}

/// The questions every layer asks of an operator, answered by its description.
impl Op {
    /// Multiply-accumulates, the unit of cost models (see [`Operator::macs`]).
    pub fn macs(&self) -> u64 {
        described!(self, |o| o.macs())
    }

    /// Computes the op from `inputs` into `output` over byte buffers (see [`Operator::run`]).
    /// Errors: [`OpError::InputCount`] for a number of inputs the op does not take,
    /// [`OpError::Misaligned`] for a buffer its elements cannot be viewed in, the kernel's
    /// refusals.
    pub fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let accepted = self
            .operands()
            .is_some_and(|operands| operands.accepts(inputs.len()));
        if !accepted {
            return Err(OpError::InputCount {
                given: inputs.len() as u8,
            });
        }
        described!(self, |o| kernel::run(o, inputs, output))
    }

    /// How many of its leading inputs are state, read and written back (see
    /// [`Operator::state_inputs`]).
    pub fn state_inputs(&self) -> u8 {
        described!(self, |o| o.state_inputs())
    }

    /// Computes a stateful op: its state operands `state` (read, then updated in place), its
    /// other inputs `inputs`, into `output` (see [`Operator::run_stateful`]). Errors: those of
    /// [`run`](Self::run), and [`OpError::State`] when `state` is not as many buffers as the op
    /// has state operands.
    pub fn run_stateful(
        &self,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        if state.len() != usize::from(self.state_inputs()) {
            return Err(OpError::State);
        }
        let given = state.len() + inputs.len();
        let accepted = self
            .operands()
            .is_some_and(|operands| operands.accepts(given));
        if !accepted {
            return Err(OpError::InputCount { given: given as u8 });
        }
        if state.is_empty() {
            return described!(self, |o| kernel::run(o, inputs, output));
        }
        described!(self, |o| kernel::run_stateful(o, state, inputs, output))
    }

    /// Computes the op into `inout`, which also holds the inputs given as `None` (the others
    /// are separate buffers), for an op that [runs in place](Self::runs_in_place). Each chunk
    /// of `inout` is copied to the stack first, so the kernel sees disjoint input and output
    /// slices and the result is the one [`run`](Self::run) gives on separate buffers.
    pub fn run_in_place(&self, inputs: &[Option<&[u8]>], inout: &mut [u8]) -> Result<(), OpError> {
        interp::run_in_place(self, inputs, inout)
    }

    /// Computes the op as im2col (see [`Operator::run_im2col`]).
    pub fn run_im2col(
        &self,
        inputs: &[&[u8]],
        matrix: &mut [u8],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        described!(self, |o| kernel::run_im2col(o, inputs, matrix, output))
    }

    /// Whether the op may write its output over one of its inputs (see
    /// [`Operator::runs_in_place`]).
    pub fn runs_in_place(&self) -> bool {
        described!(self, |o| o.runs_in_place())
    }

    /// The op as a cycle model's layer (see [`Operator::layer`]).
    pub fn layer(&self) -> Option<Layer> {
        described!(self, |o| o.layer())
    }

    /// The fallback kernel the CPU cost model prices it by.
    pub fn cpu_kernel(&self) -> CpuKernel {
        described!(self, |o| o.cpu_kernel())
    }

    /// Filter positions the CPU kernel visits (see [`Operator::taps`]).
    pub fn taps(&self) -> u64 {
        described!(self, |o| o.taps())
    }

    /// Output elements, 0 when the sizes overflow.
    pub fn output_elements(&self) -> u64 {
        described!(self, |o| o.output_elements())
            .unwrap_or_else(|| output_elements_of(self.operands(), self.dtype()))
    }

    /// The parameters and sizes of its tuning key (see [`Operator::key_shape`]).
    pub fn key_shape(&self) -> KeyShape {
        described!(self, |o| o.key_shape())
    }

    /// The extent a forced output block is clipped to (see [`Operator::block_extent`]).
    pub fn block_extent(&self) -> Option<(u32, u32)> {
        described!(self, |o| o.block_extent())
    }

    /// What running it as im2col needs (see [`Operator::im2col`]).
    pub fn im2col(&self) -> Option<Im2col> {
        described!(self, |o| o.im2col())
    }

    /// Input and output shapes of a row-local op (see [`Operator::rows`]).
    pub fn rows(&self) -> Option<(Nhwc, Nhwc)> {
        described!(self, |o| o.rows())
    }

    /// The same op over its first `len` elements (see [`Operator::prefix`]).
    pub fn prefix(&self, len: u32) -> Option<Op> {
        described!(self, |o| o.prefix(len))
    }

    /// The band of it computing `out_rows` (see [`Operator::band`]).
    pub fn band(&self, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
        described!(self, |o| o.band(out_rows))
    }

    /// Each input's bytes, for an op that lays them end to end (see
    /// [`Operator::contiguous_inputs`]).
    pub fn contiguous_inputs(&self) -> Option<heapless::Vec<u32, MAX_INPUTS>> {
        described!(self, |o| o.contiguous_inputs())
    }
}

/// The computing methods of a description, each called as the vtable called it.
///
/// [`Op`] reaches its description by a `match` ([`described!`]), so the compiler sees which
/// `run` each arm calls, and would inline it into one `Op::run` of every operator or rewrite
/// its parameters; either changes how the kernels' loops are compiled (a firmware's CPU cost
/// check measures it: a clamp loop took an instruction more per element). Each is called
/// through a function pointer the compiler cannot see through ([`core::hint::black_box`]),
/// as a vtable entry is: each operator's method is compiled on its own with the signature
/// it declares, as before, and only the methods a build calls are linked.
mod kernel {
    use super::{OpError, Operator};
    use core::hint::black_box;

    /// [`Operator::run`] of `O` as a pointer.
    type Run<O> = fn(&O, &[&[u8]], &mut [u8]) -> Result<(), OpError>;
    /// [`Operator::run_stateful`] of `O` as a pointer.
    type RunStateful<O> = fn(&O, &mut [&mut [u8]], &[&[u8]], &mut [u8]) -> Result<(), OpError>;
    /// [`Operator::run_im2col`] of `O` as a pointer.
    type RunIm2col<O> = fn(&O, &[&[u8]], &mut [u8], &mut [u8]) -> Result<(), OpError>;

    /// [`Operator::run`], through a pointer.
    pub(super) fn run<O: Operator>(
        o: &O,
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let run: Run<O> = O::run;
        black_box(run)(o, inputs, output)
    }

    /// [`Operator::run_stateful`], through a pointer.
    pub(super) fn run_stateful<O: Operator>(
        o: &O,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let run: RunStateful<O> = O::run_stateful;
        black_box(run)(o, state, inputs, output)
    }

    /// [`Operator::run_im2col`], through a pointer.
    pub(super) fn run_im2col<O: Operator>(
        o: &O,
        inputs: &[&[u8]],
        matrix: &mut [u8],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let run: RunIm2col<O> = O::run_im2col;
        black_box(run)(o, inputs, matrix, output)
    }
}

/// Bytes of `elements`, if they fit a `u32`.
fn bytes(elements: usize) -> Option<u32> {
    u32::try_from(elements).ok()
}

/// `dims` (outermost first, at most 4 used) right-aligned into NHWC, extents beyond four
/// folded into the outermost one: how the cycle model sees a tensor of another rank.
fn padded(dims: &[u32]) -> [u32; 4] {
    let mut out = [1; 4];
    let take = dims.len().min(4);
    let folded: u32 = dims[..dims.len() - take]
        .iter()
        .fold(1u32, |a, &d| a.saturating_mul(d));
    for (o, &d) in out[4 - take..].iter_mut().zip(&dims[dims.len() - take..]) {
        *o = d;
    }
    out[4 - take] = out[4 - take].saturating_mul(folded);
    out
}

/// An NHWC shape as the cycle model's array.
fn nhwc(n: Nhwc) -> [u32; 4] {
    [n.batches, n.height, n.width, n.channels]
}

/// `len` elements as rows of `depth`, for the cycle model.
fn rows_of(len: u32, depth: u32) -> [u32; 4] {
    [1, 1, len / depth.max(1), depth]
}

/// Output elements from the operand sizes (the default of [`Operator::output_elements`]).
fn output_elements_of(operands: Option<Operands>, dtype: DType) -> u64 {
    operands.map_or(0, |o| u64::from(o.output) / u64::from(dtype.size().max(1)))
}

#[cfg(test)]
mod feature_tests {
    //! The operator features agree with the registry: a build with one TFLite operator's
    //! feature has every [`Op`] variant it lowers to, and every feature is declared.

    extern crate std;
    use std::{format, vec::Vec};

    use super::{LOWERINGS, OPERATORS};

    const CARGO_TOML: &str = include_str!("../../Cargo.toml");

    #[test]
    fn every_lowering_has_a_declared_feature_named_after_its_operator() {
        for l in LOWERINGS {
            assert!(
                CARGO_TOML.contains(&format!("\n{} = []\n", l.feature)),
                "{} is not declared in Cargo.toml",
                l.feature
            );
            let name = format!("{:?}", l.builtin).to_lowercase();
            assert_eq!(
                l.feature.replace('-', ""),
                format!("op{name}"),
                "{:?}",
                l.builtin
            );
        }
    }

    #[test]
    fn every_operator_is_built_by_exactly_the_features_of_what_lowers_to_it() {
        for op in OPERATORS {
            let mut lowered_by: Vec<&str> = LOWERINGS
                .iter()
                .filter(|l| l.ops.iter().any(|o| o.name == op.name))
                .map(|l| l.feature)
                .collect();
            lowered_by.sort_unstable();
            lowered_by.dedup();
            let mut features = op.features.to_vec();
            features.sort_unstable();
            assert_eq!(features, lowered_by, "{}", op.name);
        }
    }
}
