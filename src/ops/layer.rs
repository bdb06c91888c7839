//! How the cost models see an operator: its class and feature-map geometry in the Ethos-U
//! cycle model ([`Layer`]), and the kernel the CPU model prices it by ([`CpuKernel`]).

#[cfg(doc)]
use super::Operator;

/// A cycle model's class of an operator: what a TFLite operator is to an NPU compiler (the
/// Ethos-U cost model of `npu-sim` lowers each class to its NPU passes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LayerKind {
    /// `CONV_2D`: `kernel`, `stride`, `dilation`, weights (`OHWI` filter).
    Conv2d,
    /// `DEPTHWISE_CONV_2D`: `kernel`, `stride`, `dilation`, weights.
    DepthwiseConv2d,
    /// `FULLY_CONNECTED`: input features are `ifm[3]`, every other input dimension is a batch
    /// row; weights.
    FullyConnected,
    /// `AVERAGE_POOL_2D`: `kernel` is the window, `stride`.
    AveragePool,
    /// `MAX_POOL_2D`: `kernel` is the window, `stride`.
    MaxPool,
    /// `ADD` (`ifm2` the second operand, broadcast as in TFLite).
    Add,
    /// `SUB`.
    Sub,
    /// `MUL`.
    Mul,
    /// `SOFTMAX` over the innermost dimension.
    Softmax,
    /// `MEAN` over the dimensions in `axes`.
    Mean,
    /// `RSQRT` (a lookup table).
    Rsqrt,
    /// `LOGISTIC` (a lookup table).
    Logistic,
    /// `TANH` (a lookup table).
    Tanh,
    /// A standalone `RELU`, `RELU6` or `RELU_N1_TO_1` (one pass through the output stage).
    Relu,
    /// `TRANSPOSE`: one read and one write of the tensor.
    Transpose,
    /// `CONCATENATION`: free (producers write into the concatenated tensor).
    Concatenation,
    /// `RESHAPE`, `SQUEEZE`, `EXPAND_DIMS`: free.
    Reshape,
    /// `BATCH_MATMUL`: `ifm` is the left operand `[1, B, M, K]`, `ifm2` the right operand
    /// `[1, B, K, N]`, `ofm` `[1, B, M, N]`.
    BatchMatmul,
    /// `QUANTIZE` / `REQUANTIZE` between int8 scales (one pass through the output stage).
    Quantize,
}

/// An operator as a cycle model sees it: its class and the geometry of its feature maps
/// (NHWC with 4 dimensions; lower ranks padded at the front), as [`Operator::layer`] gives it.
/// Where its constant operands live (flash or SRAM) is the job's, not the operator's: the
/// layer names the operands that hold its weights and its second input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Layer {
    /// The class.
    pub kind: LayerKind,
    /// The (first) input feature map.
    pub ifm: [u32; 4],
    /// The second input of binary operators, broadcast against `ifm`.
    pub ifm2: Option<[u32; 4]>,
    /// The output feature map.
    pub ofm: [u32; 4],
    /// Window height and width; `(1, 1)` for operators without one.
    pub kernel: (u32, u32),
    /// Strides; `(1, 1)` for operators without them.
    pub stride: (u32, u32),
    /// Dilations; `(1, 1)` for operators without them.
    pub dilation: (u32, u32),
    /// For [`LayerKind::Mean`]: bit `i` set when NHWC dimension `i` is reduced.
    pub axes: u8,
    /// The input operand holding the weights, if any.
    pub weights: Option<u8>,
    /// The input operand that is `ifm2`, if any.
    pub ifm2_operand: Option<u8>,
    /// Bits of each activation element (input, second input and output feature maps): 8,
    /// or 16 for the 16x8 operators, which the NPU reads, computes and writes at that width.
    pub element_bits: u8,
}

impl Layer {
    /// A layer of class `kind` from `ifm` to `ofm`, with no window, weights or second input.
    pub const fn new(kind: LayerKind, ifm: [u32; 4], ofm: [u32; 4]) -> Self {
        Layer {
            kind,
            ifm,
            ifm2: None,
            ofm,
            kernel: (1, 1),
            stride: (1, 1),
            dilation: (1, 1),
            axes: 0,
            weights: None,
            ifm2_operand: None,
            element_bits: 8,
        }
    }
}

/// A CPU cost model's class of an operator: the `npu-kernels` kernel the fallback runs for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum CpuKernel {
    /// Int8 convolution (a blocked matrix product, SIMD inner loops where the target has them).
    Conv,
    /// Int8 depthwise convolution (four channels at a time, SIMD where the target has them).
    Depthwise,
    /// Int8 fully connected (per-tensor or per-channel).
    FullyConnected,
    /// Int8 batch matmul.
    BatchMatmul,
    /// Int8 average pooling.
    AveragePool,
    /// Int8 max pooling.
    MaxPool,
    /// Int8 mean.
    Mean,
    /// Int8 add, same shapes or broadcast (per element, and per innermost run of a broadcast:
    /// [`Operator::taps`]).
    Add,
    /// Int8 sub (broadcast).
    Sub,
    /// Int8 mul, same shapes or broadcast (per element, and per innermost run of a broadcast:
    /// [`Operator::taps`]).
    Mul,
    /// Int8 ReLU family.
    Relu,
    /// Int8 reciprocal square root.
    Rsqrt,
    /// Int8 to int8 requantisation.
    Requantize,
    /// F32 to int8 quantisation.
    Quantize,
    /// Int8 to f32 dequantisation.
    Dequantize,
    /// Int8 softmax.
    Softmax,
    /// Int8 transpose.
    Transpose,
    /// Int8 concatenation.
    Concatenation,
    /// Reshape: a copy.
    Reshape,
    /// F32 add.
    AddF32,
    /// F32 mul.
    MulF32,
    /// F32 ReLU.
    ReluF32,
    /// F32 fully connected.
    FullyConnectedF32,
    /// F32 negation.
    NegF32,
    /// Int8 raw comparisons, no arithmetic: maximum, minimum (same shapes or broadcast), and
    /// RELU6's clamp.
    Compare,
    /// 16x8 add, same shapes or broadcast (no lookup tables: int16 has 65,536 values).
    AddI16,
    /// A strided copy of whole rows, contiguous on both sides (slices, split, unpack, pack,
    /// pad), of [`SHORT_ROW`](npu_kernels::movement::SHORT_ROW) elements or more (`memcpy`):
    /// per element and per row ([`Operator::taps`] counts the rows).
    CopyRows,
    /// The same with shorter rows (the kernel's own loop).
    CopyShortRows,
    /// A strided copy element by element (negative or other strides): per element and per
    /// row.
    CopyElements,
    /// Mirror padding: per element and per output row.
    MirrorPad,
    /// Int8 arg max / arg min.
    ArgMinMax,
    /// Int8 transposed convolution.
    TransposeConv,
    /// Int8 L2 normalization.
    L2Norm,
    /// Int8 log softmax.
    LogSoftmax,
    /// Int8 logistic (gemmlowp fixed point).
    Logistic,
    /// Int8 tanh (gemmlowp fixed point).
    Tanh,
    /// Int16 logistic and tanh: an interpolated lookup in the sigmoid table.
    SigmoidTable16,
    /// Int16 softmax (interpolated exp and reciprocal tables).
    Softmax16,
    /// Int16 or int8 to int16 requantisation.
    Requantize16,
    /// Int8 SVDF (int8 or int16 state).
    Svdf,
    /// LSTM over a sequence (int8 or int16 activations).
    Lstm,
    /// Nearest-neighbour resize: a copy per element, and per output pixel ([`Operator::taps`])
    /// its input column and row.
    ResizeNearest,
    /// Int8 bilinear resize: four 64-bit products per element, and per output pixel
    /// ([`Operator::taps`]) its four neighbours' positions.
    ResizeBilinear,
    /// A transpose moving runs of elements (DEPTH_TO_SPACE, SPACE_TO_DEPTH): a copy per
    /// element, and per run ([`Operator::taps`]) the transpose's odometer step.
    SpaceDepth,
    /// 16x8 convolution (int16 activations: the direct loop, no SIMD).
    Conv16,
    /// 16x8 depthwise convolution (likewise).
    Depthwise16,
    /// 16x8 fully connected (int16 activations, int8 weights; per-tensor or per-channel).
    FullyConnected16,
    /// CAST: a conversion per element, and per float-to-integer one ([`Operator::taps`]) the
    /// saturation.
    Cast,
    /// A product and a rescaling per element on the scalar path: 16x8 mul (same shapes or
    /// broadcast) and int8 PRELU (int8 MUL has SIMD loops of its own).
    MulScalar,
}

impl CpuKernel {
    /// How many kernels there are.
    pub const COUNT: usize = 49;
}
