//! CPU kernel cost: instructions the CPU fallback kernels take per operator.
//!
//! # Why
//!
//! When the NPU does not run an operator, the server runs it on the CPU with the fallback
//! kernels ([`Op::run`]), and a simulator that predicts a model's latency
//! needs a CPU cost model for those operators: instructions as a function of the operator's
//! work ([`Op::macs`]: multiply-accumulates, or output elements for elementwise and
//! data-movement operators). This module measures that cost on a real Cortex-M4 instruction
//! stream, for every operator of the keyword-spotting model and for synthetic operators of
//! every kernel the fallback runs (int8 and f32 elementwise, broadcast, quantization, softmax at two
//! sizes, mean, transpose, concatenation, batch matmul, pooling, convolutions, fully
//! connected). [`check`] then holds the simulator's model (`npu_sim::CpuModel`, fitted to
//! these figures) to them: every operator within [`OP_TOLERANCE_PERCENT`], the model's
//! operators together within [`TOTAL_TOLERANCE_PERCENT`], or the firmware fails.
//!
//! # How
//!
//! The clock is the one of [`dispatch_cost`](crate::dispatch_cost): SysTick under QEMU's
//! `-icount shift=0` counts instructions, and the [`Calibration`] gives instructions per tick
//! (40 on mps2-an386). For each operator:
//!
//! - its operands are carved from one 16-byte-aligned scratch area, in the sizes
//!   [`Op::operands`] gives (the optional bias included), each padded to 16 bytes;
//! - they are filled deterministically: int8 data with a fixed pseudo-random sequence (so the
//!   kernels see varied values rather than a run of zeros), per-channel multipliers with a
//!   realistic fixed-point multiplier (0.5 · 2⁻⁷), biases with small int32 values, and f32
//!   operands with the same pseudo-random int8 values over 16 (multiples of 1/16 in ±8, so
//!   that QUANTIZE rounds and, at the ends, clamps);
//! - ONE call of [`Op::run`] is timed with [`Ticks::time`], and converted to instructions with
//!   the calibration. The kernels have no data caches to warm under QEMU and count the same
//!   instructions on every call, so one call is the cost; it is exact to one tick (40
//!   instructions) either way.
//!
//! The fixed cost of a timed single call (reading SysTick twice, the loop and the indirect call
//! of the closure) is measured first: an empty closure timed alone, [`OVERHEAD_SAMPLES`] times,
//! each after a pseudo-random delay so that it starts at a random phase of a tick; the ticks
//! summed over the samples average to the cost, finer than one tick (about 20 instructions
//! with this crate's release profile). That average is subtracted from every figure; the call
//! of `Op::run` itself (operand count check, views of the buffers, the dispatch on the op)
//! stays in it, as it is part of running an operator on the CPU.
//!
//! Every operator's line logs its shape (a short description for the synthetic ones), work,
//! output elements, input bytes and net instructions, and [`measure`] returns the same figures
//! as [`KernelCost`]s.

use npu_compute::graph::LoweredOperator;
use npu_compute::hal::MAX_JOB_INPUTS;
use npu_compute::kernels::int16::{self as k16, AddParamsI16, MulParamsI16};
use npu_compute::kernels::int8::{
    AbsParams, Activation, AddParams, ArgMinMaxParams, BatchMatmulParams, BroadcastShape,
    ConcatParams, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape, FcParams,
    FcPerChannelParams, HardSwishParams, IntType, LeakyReluParams, Logistic16Params,
    LogisticParams, MeanParams, MulParams, Nhwc, Padding, PoolParams, PoolShape, PreluParams,
    Quant, Relu6Params, ReluParams, RequantizeParams, RsqrtParams, Softmax16Params, SoftmaxParams,
    SquaredDifferenceParams, SubParams, Tanh16Params, TanhParams, TransposeParams, Window2d,
};
use npu_compute::kernels::int8::{
    CellGate, LstmParams, LstmQuant, LstmShape, SvdfParams, SvdfShape,
};
use npu_compute::kernels::int8::{
    GatherParams, ResizeBilinearParams, ResizeNearestParams, SpaceBatchParams,
};
use npu_compute::kernels::int8::{LogSoftmaxParams, ReduceShape, TransposeConvParams};
use npu_compute::kernels::movement::{MirrorPadParams, PackParams, PadParams, SliceParams};
use npu_compute::kernels::{FcShape, KernelError};
use npu_compute::ops::{
    AbsI8, AddBroadcastI8, AddF32, AddI16, AddI8, AveragePool2dI8, BatchMatmulI8, ConcatenationI8,
    Conv2dI16, Conv2dI8, DType, DepthwiseConv2dI16, DepthwiseConv2dI8, DequantizeI8,
    FullyConnectedF32, FullyConnectedI16, FullyConnectedI8, FullyConnectedPerChannelI8,
    HardSwishI8, LeakyReluI8, MaxPool2dI8, MaximumI8, MeanI8, MinimumI8, MirrorPadI8,
    MulBroadcastI8, MulF32, MulI16, MulI8, NegF32, Op, OpError, OpKind, PackI8, PadI8, PreluI8,
    QuantizeF32, Relu6I8, ReluF32, ReluI8, RequantizeI8, Reshape, RsqrtI8, SliceI16, SliceI8,
    SoftmaxI8, SquaredDifferenceI8, StridedSliceI8, SubI8, TransposeI8, CHANNEL_MULTIPLIER_BYTES,
};
use npu_compute::ops::{
    ArgMaxI8, ArgMinI8, L2NormI8, LogSoftmaxI8, ReduceMaxI8, SumI8, TransposeConvI8,
};
use npu_compute::ops::{
    CastF32, CastI32, DepthToSpaceI8, GatherI8, ResizeBilinearI8, ResizeNearestI8, SpaceToBatchNdI8,
};
use npu_compute::ops::{LstmI16, LstmI8, SvdfI8};

use npu_compute::ops::{
    DequantizeI16, LogisticI16, LogisticI8, QuantizeF32ToI16, RequantizeI16, RequantizeI16ToI8,
    RequantizeI8ToI16, SoftmaxI16, TanhI16, TanhI8,
};
use npu_compute::ops::{
    RequantizeI16ToI32, RequantizeI32ToI16, RequantizeI32ToI8, RequantizeI8ToI32, SoftmaxI8ToI16,
};

use npu_sim::CpuModel;

use crate::dispatch_cost::{Calibration, CostError, Ticks};

/// Most operators of a model this measurement takes.
pub const MAX_MODEL_OPS: usize = 16;
/// Most figures [`measure`] returns: the model's operators and the synthetic ones.
pub const MAX_COSTS: usize = MAX_MODEL_OPS + SYNTHETIC_OPS;
/// Synthetic operators measured after the model's (see [`synthetic_ops`]).
const SYNTHETIC_OPS: usize = 104;
/// How far the simulator's CPU model may be from one operator's measurement, in percent.
pub const OP_TOLERANCE_PERCENT: u64 = 20;
/// How far it may be from the measured total of the model's operators, in percent.
pub const TOTAL_TOLERANCE_PERCENT: u64 = 5;
/// Empty single calls timed to measure the fixed cost of a timed call.
pub const OVERHEAD_SAMPLES: u32 = 1000;
/// Most state operands of an op (an LSTM's hidden and cell states).
const MAX_STATE: usize = 2;
/// Alignment (and padding) of each operand in the scratch area, as Ethos-U regions need.
const ALIGN: usize = 16;
/// The per-channel multiplier written into multiplier operands: 0.5 in Q0.31 ...
const MULTIPLIER: i32 = 1 << 30;
/// ... scaled by 2⁻⁷: a real scale of about 0.004, typical of an int8 convolution.
const SHIFT: i32 = -7;

/// Where a measured operator comes from.
#[derive(Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum Source {
    /// An operator of the prepared model, in model order.
    Model,
    /// A synthetic operator of [`synthetic_ops`].
    Synthetic,
}

/// A synthetic operator, with a short description of its shape for the log.
#[derive(Clone, Copy)]
pub struct Synthetic {
    /// Shape and parameters, in a few words.
    pub what: &'static str,
    /// The operator.
    pub op: Op,
}

/// What one operator cost on the CPU.
#[derive(Clone, Copy, defmt::Format)]
pub struct KernelCost {
    /// Where the operator comes from.
    pub source: Source,
    /// Its shape in a few words (for the model's operators, the model's name).
    pub what: &'static str,
    /// The operator family.
    pub kind: OpKind,
    /// Work units: [`Op::macs`].
    pub work: u64,
    /// Output elements ([`Op::output_elements`], what the CPU model charges per output).
    pub outputs: u64,
    /// Bytes of all inputs (the optional bias included).
    pub input_bytes: u64,
    /// Instructions of one [`Op::run`] call, the fixed cost of a timed call subtracted.
    pub instructions: u64,
    /// Cycles the simulator's CPU model charges for it ([`CpuModel::cycles`]).
    pub predicted: u64,
}

/// Why the measurement could not be made.
#[derive(defmt::Format)]
pub enum CpuCostError {
    /// SysTick could not time a call (see [`CostError`]).
    Cost(CostError),
    /// A synthetic operator's parameters were refused.
    Kernel(KernelError),
    /// The fallback kernel refused operator `index` (in measurement order).
    Op {
        /// Position in the measurement.
        index: usize,
        /// The operator family.
        kind: OpKind,
        /// What `Op::run` returned.
        error: OpError,
    },
    /// Operator `index`'s operand sizes overflow.
    NoOperands {
        /// Position in the measurement.
        index: usize,
    },
    /// Operator `index` needs more scratch than there is.
    ScratchTooSmall {
        /// Position in the measurement.
        index: usize,
        /// Bytes its operands need, padded.
        needed: usize,
        /// Bytes of scratch.
        have: usize,
    },
    /// More operators than the lists hold.
    TooManyOps,
    /// The simulator's CPU model is off by more than [`OP_TOLERANCE_PERCENT`] for operator
    /// `index`: recalibrate `npu_sim::CpuModel::CORTEX_M4_SCALAR`.
    ModelOff {
        /// Position in the measurement.
        index: usize,
        /// The operator family.
        kind: OpKind,
        /// Instructions measured.
        measured: u64,
        /// Cycles the model charges.
        predicted: u64,
    },
    /// The model's total over the model's operators is off by more than
    /// [`TOTAL_TOLERANCE_PERCENT`].
    ModelTotalOff {
        /// Instructions measured.
        measured: u64,
        /// Cycles the model charges.
        predicted: u64,
    },
}

impl From<CostError> for CpuCostError {
    fn from(e: CostError) -> Self {
        CpuCostError::Cost(e)
    }
}

impl From<KernelError> for CpuCostError {
    fn from(e: KernelError) -> Self {
        CpuCostError::Kernel(e)
    }
}

/// Hundredths as `integer.fraction` for the log.
struct Centi(u64);

impl defmt::Format for Centi {
    fn format(&self, f: defmt::Formatter) {
        defmt::write!(f, "{=u64}.{=u64:02}", self.0 / 100, self.0 % 100);
    }
}

/// The HAL operations of a prepared model's operators, in model order (aliases such as
/// RESHAPE, which run nothing, left out).
pub fn model_ops(
    plans: impl Iterator<Item = LoweredOperator>,
) -> Result<heapless::Vec<Op, MAX_MODEL_OPS>, CpuCostError> {
    let mut ops = heapless::Vec::new();
    for op in plans.filter_map(|plan| plan.op) {
        ops.push(op).map_err(|_| CpuCostError::TooManyOps)?;
    }
    Ok(ops)
}

/// `ticks` in hundredths of an instruction.
fn centi(cal: &Calibration, ticks: u64) -> u64 {
    ticks * u64::from(cal.instructions) * 100 / u64::from(cal.ticks).max(1)
}

/// A window of `size`×`size` taps, stride `stride`, dense, with `padding`.
fn window(size: u32, stride: u32, padding: Padding) -> Window2d {
    Window2d {
        filter_height: size,
        filter_width: size,
        stride_height: stride,
        stride_width: stride,
        dilation_height: 1,
        dilation_width: 1,
        padding,
    }
}

/// One image of `height`×`width`×`channels`.
fn image(height: u32, width: u32, channels: u32) -> Nhwc {
    Nhwc {
        batches: 1,
        height,
        width,
        channels,
    }
}

/// Operators of shapes the model does not have, to see how the cost scales and to cover every
/// fallback kernel: valid parameters, typical int8 quantizations, second sizes of pooling,
/// softmax and fully connected.
pub fn synthetic_ops() -> Result<heapless::Vec<Synthetic, SYNTHETIC_OPS>, CpuCostError> {
    let input = Quant {
        scale: 0.02,
        zero_point: -3,
    };
    let other = Quant {
        scale: 0.03,
        zero_point: 5,
    };
    let output = Quant {
        scale: 0.05,
        zero_point: -1,
    };
    // RSQRT fails on an input below its zero point: with −128 every int8 value is valid (0 to
    // 5.1, whose reciprocal square roots 0.44 to 7.1 fit this output without clamping).
    let rsqrt_in = Quant {
        scale: 0.02,
        zero_point: -128,
    };
    let rsqrt_out = Quant {
        scale: 0.06,
        zero_point: -128,
    };
    // TFLM's fixed int8 softmax output.
    let probabilities = Quant {
        scale: 1.0 / 256.0,
        zero_point: -128,
    };
    // int16 activations (16x8): a scale that is not a power of two, and the 2^-15 output of
    // LOGISTIC, TANH and SOFTMAX.
    let input16 = Quant {
        scale: 1.3 / 4096.0,
        zero_point: 0,
    };
    let unit16 = Quant {
        scale: 1.0 / 32768.0,
        zero_point: 0,
    };
    let softmax16 = Softmax16Params::new(input16, 1.0, unit16)?;
    let act = Activation::None;
    let add = AddParams::new(input, other, output, act)?;
    let mul = MulParams::new(input, other, output, act)?;
    let softmax = SoftmaxParams::new(input, 1.0, probabilities)?;
    // TFLM's fixed int8 log-softmax output.
    let log_probabilities = Quant {
        scale: 16.0 / 256.0,
        zero_point: 127,
    };
    let log_softmax = LogSoftmaxParams::new(input, log_probabilities)?;
    // TFLM's int16 output of an int8 softmax, and an int32 tensor of a fine scale.
    let softmax_to16 = SoftmaxParams::with_i16_output(
        input,
        1.0,
        Quant {
            scale: 1.0 / 65536.0,
            zero_point: -32768,
        },
    )?;
    let wide = Quant {
        scale: 1e-6,
        zero_point: 1000,
    };
    let transpose_conv = |i: Nhwc, o: Nhwc, k: u32, s: u32| {
        TransposeConvParams::new(i, o, (k, k), (s, s), Padding::Same, input, output, act)
    };
    let pool = |input: Nhwc, size: u32, stride: u32, padding: Padding| PoolShape {
        input,
        filter_height: size,
        filter_width: size,
        stride_height: stride,
        stride_width: stride,
        padding,
    };
    let max_pool = pool(image(16, 16, 16), 2, 2, Padding::Valid);
    let avg_pool = pool(image(16, 16, 16), 3, 1, Padding::Same);
    let max_pool_s2 = pool(image(32, 32, 8), 3, 2, Padding::Valid);
    let avg_pool_s2 = pool(image(32, 32, 8), 3, 2, Padding::Valid);
    let conv3 = Conv2dShape {
        input: image(16, 16, 8),
        out_channels: 16,
        filter_depth: 8,
        window: window(3, 1, Padding::Same),
    };
    let conv1 = Conv2dShape {
        input: image(8, 8, 32),
        out_channels: 32,
        filter_depth: 32,
        window: window(1, 1, Padding::Valid),
    };
    let depthwise = DepthwiseShape {
        input: image(16, 16, 16),
        depth_multiplier: 1,
        window: window(3, 1, Padding::Same),
    };
    let fc = FcShape {
        batches: 1,
        in_features: 256,
        out_features: 32,
    };
    // Four bytes per weight: half the inputs of `fc` keeps it within the scratch area.
    let fc_f32 = FcShape {
        in_features: 128,
        ..fc
    };
    let fc_wide = FcShape {
        batches: 1,
        in_features: 1024,
        out_features: 10,
    };
    // 8×8×16 with one 16-channel vector (a per-channel bias or scale), broadcast over the pixels.
    let per_channel = || BroadcastShape::new(&[1, 8, 8, 16], &[16], &[1, 8, 8, 16]);
    let svdf = SvdfShape {
        batches: 1,
        input_size: 32,
        filters: 64,
        rank: 2,
        memory: 8,
    };
    let state8 = Quant {
        scale: 0.03,
        zero_point: 2,
    };
    let state16 = Quant {
        scale: 0.0001,
        zero_point: 0,
    };
    let lstm = LstmShape {
        batches: 1,
        time_steps: 8,
        input_size: 16,
        units: 16,
        time_major: false,
    };
    let lstm_q = LstmQuant {
        input,
        input_weights: [0.004; 4],
        recurrent_weights: [0.004; 4],
        hidden: output,
        cell_scale: 1.0 / 32768.0,
    };
    let symmetric = |q: Quant| Quant {
        scale: q.scale / 256.0,
        zero_point: 0,
    };
    let lstm_q16 = LstmQuant {
        input: symmetric(input),
        hidden: symmetric(output),
        ..lstm_q
    };
    let entry = |what: &'static str, op: Op| Synthetic { what, op };
    // 16x8: symmetric int16 activations.
    let (input16, other16, output16) = (
        Quant {
            scale: 0.0004,
            zero_point: 0,
        },
        Quant {
            scale: 0.0003,
            zero_point: 0,
        },
        Quant {
            scale: 0.0005,
            zero_point: 0,
        },
    );
    let elements = || BroadcastShape::new(&[1024], &[1024], &[1024]);
    let ops: [Synthetic; SYNTHETIC_OPS] = [
        entry(
            "1024 elements",
            Op::AddI8(AddI8 {
                len: 1024,
                params: add,
            }),
        ),
        entry(
            "1x8x8x16 + [16]",
            Op::AddBroadcastI8(AddBroadcastI8 {
                shape: per_channel()?,
                params: add,
            }),
        ),
        entry(
            "1x8x8x16 - [16]",
            Op::SubI8(SubI8 {
                shape: per_channel()?,
                params: SubParams::new(input, other, output, act)?,
            }),
        ),
        entry(
            "16x16x16, 2x2 s2 valid",
            Op::MaxPool2dI8(MaxPool2dI8 {
                shape: max_pool,
                params: PoolParams::new(max_pool, input, input, act)?,
            }),
        ),
        entry(
            "16x16x16, 3x3 s1 same",
            Op::AveragePool2dI8(AveragePool2dI8 {
                shape: avg_pool,
                params: PoolParams::new(avg_pool, input, input, act)?,
            }),
        ),
        entry(
            "16x16x8 -> 16, 3x3 s1 same",
            Op::Conv2dI8(Conv2dI8 {
                shape: conv3,
                params: Conv2dParams::new(conv3, input, output, act)?,
            }),
        ),
        entry(
            "8x8x32 -> 32, 1x1",
            Op::Conv2dI8(Conv2dI8 {
                shape: conv1,
                params: Conv2dParams::new(conv1, input, output, act)?,
            }),
        ),
        entry(
            "16x16x16, 3x3 s1 same",
            Op::DepthwiseConv2dI8(DepthwiseConv2dI8 {
                shape: depthwise,
                params: DepthwiseParams::new(depthwise, input, output, act)?,
            }),
        ),
        entry(
            "256 -> 32",
            Op::FullyConnectedI8(FullyConnectedI8 {
                shape: fc,
                params: FcParams::new(input, 0.004, output, act)?,
            }),
        ),
        entry(
            "256 -> 32 per-channel",
            Op::FullyConnectedPerChannelI8(FullyConnectedPerChannelI8 {
                shape: fc,
                params: FcPerChannelParams::new(input, output, act)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::ReluI8(ReluI8 {
                len: 1024,
                params: ReluParams::new(input, output)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::MulI8(MulI8 {
                len: 1024,
                params: mul,
            }),
        ),
        entry(
            "1x8x8x16 * [16]",
            Op::MulBroadcastI8(MulBroadcastI8 {
                shape: per_channel()?,
                params: mul,
            }),
        ),
        entry(
            "int8 -> int8, 1024 elements",
            Op::RequantizeI8(RequantizeI8 {
                len: 1024,
                params: RequantizeParams::new(input, output)?,
            }),
        ),
        entry(
            "f32 -> int8, 1024 elements",
            Op::QuantizeF32(QuantizeF32 {
                len: 1024,
                quant: output,
            }),
        ),
        entry(
            "int8 -> f32, 1024 elements",
            Op::DequantizeI8(DequantizeI8 {
                len: 1024,
                quant: input,
            }),
        ),
        entry(
            "1024 elements",
            Op::RsqrtI8(RsqrtI8 {
                len: 1024,
                params: RsqrtParams::new(rsqrt_in, rsqrt_out)?,
            }),
        ),
        entry(
            "1 row of 16",
            Op::SoftmaxI8(SoftmaxI8 {
                len: 16,
                depth: 16,
                params: softmax,
            }),
        ),
        entry(
            "1 row of 1000",
            Op::SoftmaxI8(SoftmaxI8 {
                len: 1000,
                depth: 1000,
                params: softmax,
            }),
        ),
        entry(
            "1x8x8x32 over H, W",
            Op::MeanI8(MeanI8 {
                params: MeanParams::new(image(8, 8, 32), input, output)?,
            }),
        ),
        entry(
            "1x16x16x8, perm 0,3,1,2",
            Op::TransposeI8(TransposeI8 {
                params: TransposeParams::new(&[1, 16, 16, 8], &[0, 3, 1, 2])?,
            }),
        ),
        entry(
            "2 x 1x8x8x16 on channels",
            Op::ConcatenationI8(ConcatenationI8 {
                params: ConcatParams::new(&[&[1, 8, 8, 16], &[1, 8, 8, 16]], 3)?,
            }),
        ),
        entry(
            "1x16x32 by 1x32x16",
            Op::BatchMatmulI8(BatchMatmulI8 {
                params: BatchMatmulParams::new(
                    &[1, 16, 32],
                    &[1, 32, 16],
                    false,
                    false,
                    input,
                    other,
                    output,
                )?,
            }),
        ),
        entry(
            "32x32x8, 3x3 s2 valid",
            Op::MaxPool2dI8(MaxPool2dI8 {
                shape: max_pool_s2,
                params: PoolParams::new(max_pool_s2, input, input, act)?,
            }),
        ),
        entry(
            "32x32x8, 3x3 s2 valid",
            Op::AveragePool2dI8(AveragePool2dI8 {
                shape: avg_pool_s2,
                params: PoolParams::new(avg_pool_s2, input, input, act)?,
            }),
        ),
        entry(
            "1024 -> 10",
            Op::FullyConnectedI8(FullyConnectedI8 {
                shape: fc_wide,
                params: FcParams::new(input, 0.004, output, act)?,
            }),
        ),
        entry("1024 elements", Op::Reshape(Reshape { len: 1024 })),
        entry("1024 elements", Op::AddF32(AddF32 { len: 1024 })),
        entry("1024 elements", Op::MulF32(MulF32 { len: 1024 })),
        entry("1024 elements", Op::ReluF32(ReluF32 { len: 1024 })),
        entry(
            "128 -> 32",
            Op::FullyConnectedF32(FullyConnectedF32 { shape: fc_f32 }),
        ),
        entry("1024 elements", Op::NegF32(NegF32 { len: 1024 })),
        entry(
            "1x8x8x16 - [16], squared",
            Op::SquaredDifferenceI8(SquaredDifferenceI8 {
                shape: per_channel()?,
                params: SquaredDifferenceParams::new(input, other, output)?,
            }),
        ),
        entry(
            "1x8x8x16 max [16]",
            Op::MaximumI8(MaximumI8 {
                shape: per_channel()?,
            }),
        ),
        entry(
            "1024 elements",
            Op::MinimumI8(MinimumI8 {
                shape: BroadcastShape::new(&[1024], &[1024], &[1024])?,
            }),
        ),
        entry(
            "1024 elements",
            Op::Relu6I8(Relu6I8 {
                len: 1024,
                params: Relu6Params::new(input)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::LeakyReluI8(LeakyReluI8 {
                len: 1024,
                params: LeakyReluParams::new(input, output, 0.2)?,
            }),
        ),
        entry(
            "1x8x8x16, alpha [16]",
            Op::PreluI8(PreluI8 {
                shape: per_channel()?,
                params: PreluParams::new(input, other, output)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::HardSwishI8(HardSwishI8 {
                len: 1024,
                params: HardSwishParams::new(input, output)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::AbsI8(AbsI8 {
                len: 1024,
                params: AbsParams::new(input, output)?,
            }),
        ),
        entry(
            "16x8 16x16x8 -> 16, 3x3 s1 same",
            Op::Conv2dI16(Conv2dI16 {
                shape: conv3,
                params: Conv2dParams::new_int16(conv3, input16, output16, act)?,
                wide: true,
            }),
        ),
        entry(
            "16x8 16x16x16, 3x3 s1 same",
            Op::DepthwiseConv2dI16(DepthwiseConv2dI16 {
                shape: depthwise,
                params: DepthwiseParams::new_int16(depthwise, input16, output16, act)?,
            }),
        ),
        entry(
            "16x8 256 -> 32 per-channel",
            Op::FullyConnectedI16(FullyConnectedI16 {
                shape: fc,
                params: k16::FcParams::per_channel(input16, output16, act)?,
                wide: true,
            }),
        ),
        entry(
            "16x8 1024 elements",
            Op::AddI16(AddI16 {
                shape: elements()?,
                params: AddParamsI16::new(input16, other16, output16, act)?,
            }),
        ),
        entry(
            "16x8 1x8x8x16 + [16]",
            Op::AddI16(AddI16 {
                shape: per_channel()?,
                params: AddParamsI16::new(input16, other16, output16, act)?,
            }),
        ),
        entry(
            "16x8 1024 elements",
            Op::MulI16(MulI16 {
                shape: elements()?,
                params: MulParamsI16::new(input16, other16, output16, act)?,
            }),
        ),
        entry(
            "1x16x16x8, channels 2..6",
            Op::SliceI8(SliceI8 {
                params: SliceParams::new(&[1, 16, 16, 8], &[0, 0, 0, 2], &[1, 16, 16, 4], &[1; 4])?,
            }),
        ),
        entry(
            "1x16x16x8, rows 4..12",
            Op::SliceI8(SliceI8 {
                params: SliceParams::new(&[1, 16, 16, 8], &[0, 4, 0, 0], &[1, 8, 16, 8], &[1; 4])?,
            }),
        ),
        entry(
            "1x32x32x1, every 2nd row and column",
            Op::StridedSliceI8(StridedSliceI8 {
                params: SliceParams::new(
                    &[1, 32, 32, 1],
                    &[0, 0, 0, 0],
                    &[1, 16, 16, 1],
                    &[1, 2, 2, 1],
                )?,
            }),
        ),
        entry(
            "1x16x16x8, channels 2..6",
            Op::SliceI16(SliceI16 {
                params: SliceParams::new(&[1, 16, 16, 8], &[0, 0, 0, 2], &[1, 16, 16, 4], &[1; 4])?,
            }),
        ),
        entry(
            "1x16x16x8, every 2nd column, channels reversed",
            Op::StridedSliceI8(StridedSliceI8 {
                params: SliceParams::new(
                    &[1, 16, 16, 8],
                    &[0, 0, 0, 7],
                    &[1, 16, 8, 8],
                    &[1, 1, 2, -1],
                )?,
            }),
        ),
        entry(
            "1x16x16x8, 1 around H and W",
            Op::PadI8(PadI8 {
                params: PadParams::new(&[1, 16, 16, 8], &[0, 1, 1, 0], &[0, 1, 1, 0])?,
                value: -3,
            }),
        ),
        entry(
            "1x16x16x8, reflect 2 around H and W",
            Op::MirrorPadI8(MirrorPadI8 {
                params: MirrorPadParams::new(&[1, 16, 16, 8], &[0, 2, 2, 0], &[0, 2, 2, 0], true)?,
            }),
        ),
        entry(
            "1x8x8x16, 2 around channels",
            Op::PadI8(PadI8 {
                params: PadParams::new(&[1, 8, 8, 16], &[0, 0, 0, 2], &[0, 0, 0, 2])?,
                value: 0,
            }),
        ),
        entry(
            "48x48, symmetric 4 around",
            Op::MirrorPadI8(MirrorPadI8 {
                params: MirrorPadParams::new(&[48, 48], &[4, 4], &[4, 4], false)?,
            }),
        ),
        entry(
            "2 x 8x8x16 on axis 2",
            Op::PackI8(PackI8 {
                params: PackParams::new(&[8, 8, 16], 2, 2)?,
            }),
        ),
        entry(
            "2 x 32x32 on axis 0",
            Op::PackI8(PackI8 {
                params: PackParams::new(&[32, 32], 0, 2)?,
            }),
        ),
        entry(
            "1x16x16x8, rows 4..12",
            Op::SliceI16(SliceI16 {
                params: SliceParams::new(&[1, 16, 16, 8], &[0, 4, 0, 0], &[1, 8, 16, 8], &[1; 4])?,
            }),
        ),
        entry(
            "4 x 64x4 on axis 2",
            Op::PackI8(PackI8 {
                params: PackParams::new(&[64, 4], 2, 4)?,
            }),
        ),
        entry(
            "1x8x8x32 over C",
            Op::SumI8(SumI8 {
                params: MeanParams::for_sum(&[1, 8, 8, 32], &[3], input, output)?,
            }),
        ),
        entry(
            "1x8x8x32 over H, W",
            Op::ReduceMaxI8(ReduceMaxI8 {
                shape: ReduceShape::new(&[1, 8, 8, 32], &[1, 2])?,
            }),
        ),
        entry(
            "16x64 along the last axis",
            Op::ArgMaxI8(ArgMaxI8 {
                params: ArgMinMaxParams::new(&[16, 64], -1, true)?,
            }),
        ),
        entry(
            "4x10 along the last axis",
            Op::ArgMaxI8(ArgMaxI8 {
                params: ArgMinMaxParams::new(&[4, 10], -1, true)?,
            }),
        ),
        entry(
            "8x4x32 along axis 1",
            Op::ArgMinI8(ArgMinI8 {
                params: ArgMinMaxParams::new(&[8, 4, 32], 1, false)?,
            }),
        ),
        entry(
            "8x8x8 -> 16x16x8, 3x3 s2 same",
            Op::TransposeConvI8(TransposeConvI8 {
                params: transpose_conv(image(8, 8, 8), image(16, 16, 8), 3, 2)?,
            }),
        ),
        entry(
            "4x4x32 -> 8x8x16, 3x3 s2 same",
            Op::TransposeConvI8(TransposeConvI8 {
                params: transpose_conv(image(4, 4, 32), image(8, 8, 16), 3, 2)?,
            }),
        ),
        entry(
            "8x8x4 -> 8x8x8, 3x3 s1 same",
            Op::TransposeConvI8(TransposeConvI8 {
                params: transpose_conv(image(8, 8, 4), image(8, 8, 8), 3, 1)?,
            }),
        ),
        entry(
            "16 rows of 64",
            Op::L2NormI8(L2NormI8 {
                len: 1024,
                depth: 64,
                input_zero_point: input.zero_point,
            }),
        ),
        entry(
            "64 rows of 16",
            Op::L2NormI8(L2NormI8 {
                len: 1024,
                depth: 16,
                input_zero_point: input.zero_point,
            }),
        ),
        entry(
            "2 rows of 512",
            Op::L2NormI8(L2NormI8 {
                len: 1024,
                depth: 512,
                input_zero_point: input.zero_point,
            }),
        ),
        entry(
            "1 row of 1000",
            Op::LogSoftmaxI8(LogSoftmaxI8 {
                len: 1000,
                depth: 1000,
                params: log_softmax,
            }),
        ),
        entry(
            "1 row of 16",
            Op::LogSoftmaxI8(LogSoftmaxI8 {
                len: 16,
                depth: 16,
                params: log_softmax,
            }),
        ),
        entry(
            "16 rows of 64",
            Op::LogSoftmaxI8(LogSoftmaxI8 {
                len: 1024,
                depth: 64,
                params: log_softmax,
            }),
        ),
        entry(
            "1024 elements",
            Op::LogisticI8(LogisticI8 {
                len: 1024,
                params: LogisticParams::new(input, probabilities)?,
            }),
        ),
        entry(
            "1024 elements",
            Op::TanhI8(TanhI8 {
                len: 1024,
                params: TanhParams::new(input)?,
            }),
        ),
        entry(
            "int16, 1024 elements",
            Op::LogisticI16(LogisticI16 {
                len: 1024,
                params: Logistic16Params::new(input16, unit16)?,
            }),
        ),
        entry(
            "int16, 1024 elements",
            Op::TanhI16(TanhI16 {
                len: 1024,
                params: Tanh16Params::new(input16, unit16)?,
            }),
        ),
        entry(
            "int16, 1 row of 16",
            Op::SoftmaxI16(SoftmaxI16 {
                len: 16,
                depth: 16,
                params: softmax16,
            }),
        ),
        entry(
            "int16, 1 row of 1000",
            Op::SoftmaxI16(SoftmaxI16 {
                len: 1000,
                depth: 1000,
                params: softmax16,
            }),
        ),
        entry(
            "int16 -> int16, 1024 elements",
            Op::RequantizeI16(RequantizeI16 {
                len: 1024,
                params: RequantizeParams::with_ranges(input16, IntType::I16, unit16, IntType::I16)?,
            }),
        ),
        entry(
            "int16 -> int8, 1024 elements",
            Op::RequantizeI16ToI8(RequantizeI16ToI8 {
                len: 1024,
                params: RequantizeParams::with_ranges(input16, IntType::I16, output, IntType::I8)?,
            }),
        ),
        entry(
            "int8 -> int16, 1024 elements",
            Op::RequantizeI8ToI16(RequantizeI8ToI16 {
                len: 1024,
                params: RequantizeParams::with_ranges(input, IntType::I8, input16, IntType::I16)?,
            }),
        ),
        entry(
            "f32 -> int16, 1024 elements",
            Op::QuantizeF32ToI16(QuantizeF32ToI16 {
                len: 1024,
                quant: input16,
            }),
        ),
        entry(
            "int16 -> f32, 1024 elements",
            Op::DequantizeI16(DequantizeI16 {
                len: 1024,
                quant: input16,
            }),
        ),
        entry(
            "32 -> 64 filters (rank 2), memory 8, int8 state",
            Op::SvdfI8(SvdfI8 {
                params: SvdfParams::new::<i8>(svdf, input, 0.004, state8, 0.004, output)?,
                state_i16: false,
            }),
        ),
        entry(
            "32 -> 64 filters (rank 2), memory 8, int16 state",
            Op::SvdfI8(SvdfI8 {
                params: SvdfParams::new::<i16>(svdf, input, 0.004, state16, 0.004, output)?,
                state_i16: true,
            }),
        ),
        entry(
            "8 steps, 16 -> 16 units",
            Op::LstmI8(LstmI8 {
                params: LstmParams::new::<i8>(lstm, &lstm_q, 10.0, CellGate::Tanh)?,
            }),
        ),
        entry(
            "8 steps, 16 -> 16 units, 16x8",
            Op::LstmI16(LstmI16 {
                params: LstmParams::new::<i16>(lstm, &lstm_q16, 10.0, CellGate::Tanh)?,
            }),
        ),
        entry(
            "1x8x8x16 -> 16x16",
            Op::ResizeNearestI8(ResizeNearestI8 {
                params: ResizeNearestParams::new(image(8, 8, 16), 16, 16, false, false)?,
            }),
        ),
        entry(
            "1x8x8x2 -> 16x16",
            Op::ResizeNearestI8(ResizeNearestI8 {
                params: ResizeNearestParams::new(image(8, 8, 2), 16, 16, false, false)?,
            }),
        ),
        entry(
            "1x8x8x16 -> 16x16, half pixel",
            Op::ResizeBilinearI8(ResizeBilinearI8 {
                params: ResizeBilinearParams::new(image(8, 8, 16), 16, 16, false, true)?,
            }),
        ),
        entry(
            "1x8x8x2 -> 16x16, half pixel",
            Op::ResizeBilinearI8(ResizeBilinearI8 {
                params: ResizeBilinearParams::new(image(8, 8, 2), 16, 16, false, true)?,
            }),
        ),
        entry(
            "64x16 by 32 indices",
            Op::GatherI8(GatherI8 {
                params: GatherParams::new(&[64, 16], &[32], 0, 0)?,
            }),
        ),
        entry(
            "1x8x8x64, block 2",
            Op::DepthToSpaceI8(DepthToSpaceI8 {
                params: TransposeParams::new(&[1, 8, 8, 2, 2, 16], &[0, 1, 3, 2, 4, 5])?,
                run: 32,
            }),
        ),
        entry(
            "1x8x8x8, block 2",
            Op::DepthToSpaceI8(DepthToSpaceI8 {
                params: TransposeParams::new(&[1, 8, 8, 2, 2, 2], &[0, 1, 3, 2, 4, 5])?,
                run: 4,
            }),
        ),
        entry(
            "1x16x16x8, block 2x2",
            Op::SpaceToBatchNdI8(SpaceToBatchNdI8 {
                params: SpaceBatchParams::space_to_batch(image(16, 16, 8), [2, 2], [0; 4])?,
                pad: 0,
            }),
        ),
        entry(
            "int32 -> int8, 1024 elements",
            Op::CastI32(CastI32 {
                len: 1024,
                to: DType::I8,
            }),
        ),
        entry(
            "f32 -> int8, 1024 elements",
            Op::CastF32(CastF32 {
                len: 1024,
                to: DType::I8,
            }),
        ),
        entry(
            "int8 -> int16, 1 row of 16",
            Op::SoftmaxI8ToI16(SoftmaxI8ToI16 {
                len: 16,
                depth: 16,
                params: softmax_to16,
            }),
        ),
        entry(
            "int8 -> int16, 1 row of 1000",
            Op::SoftmaxI8ToI16(SoftmaxI8ToI16 {
                len: 1000,
                depth: 1000,
                params: softmax_to16,
            }),
        ),
        entry(
            "int8 -> int32, 1024 elements",
            Op::RequantizeI8ToI32(RequantizeI8ToI32 {
                len: 1024,
                params: RequantizeParams::with_ranges(input, IntType::I8, wide, IntType::I32)?,
            }),
        ),
        entry(
            "int16 -> int32, 1024 elements",
            Op::RequantizeI16ToI32(RequantizeI16ToI32 {
                len: 1024,
                params: RequantizeParams::with_ranges(input16, IntType::I16, wide, IntType::I32)?,
            }),
        ),
        entry(
            "int32 -> int8, 1024 elements",
            Op::RequantizeI32ToI8(RequantizeI32ToI8 {
                len: 1024,
                params: RequantizeParams::with_ranges(wide, IntType::I32, output, IntType::I8)?,
            }),
        ),
        entry(
            "int32 -> int16, 1024 elements",
            Op::RequantizeI32ToI16(RequantizeI32ToI16 {
                len: 1024,
                params: RequantizeParams::with_ranges(wide, IntType::I32, input16, IntType::I16)?,
            }),
        ),
    ];
    let mut list = heapless::Vec::new();
    for op in ops {
        list.push(op).map_err(|_| CpuCostError::TooManyOps)?;
    }
    Ok(list)
}

/// What an input operand holds, for filling it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// int8 activations or weights.
    Data,
    /// f32 values: pseudo-random multiples of 1/16 in ±8.
    Float,
    /// Per-channel multipliers.
    Multipliers,
    /// int32 bias.
    Bias,
    /// int64 bias (the 16x8 operators').
    Bias64,
    /// int32 indices within 0..8 (GATHER's).
    Indices,
}

/// The role of input `i` of `op` (operand order as documented on [`Op`]).
fn role(op: &Op, i: usize) -> Role {
    match (op, i) {
        (Op::FullyConnectedF32(_), _) => Role::Float,
        (Op::FullyConnectedI8(_), 2) => Role::Bias,
        (Op::Conv2dI8(_) | Op::DepthwiseConv2dI8(_) | Op::FullyConnectedPerChannelI8(_), 2) => {
            Role::Multipliers
        }
        (Op::Conv2dI8(_) | Op::DepthwiseConv2dI8(_) | Op::FullyConnectedPerChannelI8(_), 3) => {
            Role::Bias
        }
        (Op::Conv2dI16(_) | Op::DepthwiseConv2dI16(_) | Op::FullyConnectedI16(_), 2) => {
            Role::Multipliers
        }
        (Op::Conv2dI16(_) | Op::DepthwiseConv2dI16(_) | Op::FullyConnectedI16(_), 3) => {
            Role::Bias64
        }
        (Op::TransposeConvI8(_), 2) => Role::Multipliers,
        (Op::TransposeConvI8(_), 3) => Role::Bias,
        (Op::QuantizeF32(_), _) => Role::Float,
        (Op::SvdfI8(_), 4) | (Op::LstmI8(_), 5) => Role::Bias,
        (Op::LstmI16(_), 5) => Role::Bias64,
        (Op::GatherI8(_), 1) => Role::Indices,
        _ if op.dtype() == DType::F32 => Role::Float,
        _ => Role::Data,
    }
}

/// Fills `bytes` as `role` says; `seed` varies the int8 sequence between operands.
fn fill(bytes: &mut [u8], role: Role, seed: u32) {
    // A linear congruential sequence (Numerical Recipes' constants), top byte.
    let mut state = seed.wrapping_mul(0x9E37_79B9) | 1;
    let mut next = move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 24) as u8
    };
    match role {
        Role::Float => {
            for word in bytes.chunks_exact_mut(4) {
                let value = f32::from(next() as i8) / 16.0;
                word.copy_from_slice(&value.to_le_bytes());
            }
        }
        Role::Data => bytes.fill_with(next),
        Role::Multipliers => {
            for pair in bytes.chunks_exact_mut(CHANNEL_MULTIPLIER_BYTES as usize) {
                let (m, s) = pair.split_at_mut(4);
                m.copy_from_slice(&MULTIPLIER.to_le_bytes());
                s.copy_from_slice(&SHIFT.to_le_bytes());
            }
        }
        Role::Indices => {
            for word in bytes.chunks_exact_mut(4) {
                word.copy_from_slice(&i32::from(next() % 8).to_le_bytes());
            }
        }
        Role::Bias => {
            for (k, word) in bytes.chunks_exact_mut(4).enumerate() {
                let bias = (k as i32 * 37) % 1024 - 512;
                word.copy_from_slice(&bias.to_le_bytes());
            }
        }
        Role::Bias64 => {
            for (k, word) in bytes.chunks_exact_mut(8).enumerate() {
                let bias = (k as i64 * 37) % 1024 - 512;
                word.copy_from_slice(&bias.to_le_bytes());
            }
        }
    }
}

/// `len` rounded up to [`ALIGN`].
fn padded(len: usize) -> Option<usize> {
    len.checked_next_multiple_of(ALIGN)
}

/// The first `len` bytes of `rest` (which then starts after them, padded to [`ALIGN`]).
fn carve<'a>(rest: &mut &'a mut [u8], len: usize) -> Option<&'a mut [u8]> {
    let (head, tail) = core::mem::take(rest).split_at_mut_checked(padded(len)?)?;
    *rest = tail;
    head.get_mut(..len)
}

/// Times one `Op::run` of `op` (from `source`, described as `what`) over operands carved from
/// `scratch`; returns its figures with `overhead` (hundredths of an instruction) subtracted,
/// and the ticks it took.
fn measure_op(
    t: &Ticks,
    cal: &Calibration,
    index: usize,
    (source, what): (Source, &'static str),
    op: &Op,
    (overhead, model): (u64, &CpuModel),
    scratch: &mut [u8],
) -> Result<(KernelCost, u32), CpuCostError> {
    let operands = op.operands().ok_or(CpuCostError::NoOperands { index })?;
    let lens = |b: u32| usize::try_from(b).ok().and_then(padded);
    let needed = operands
        .inputs
        .iter()
        .chain([&operands.output])
        .try_fold(0usize, |sum, &b| sum.checked_add(lens(b)?))
        .unwrap_or(usize::MAX);
    let too_small = CpuCostError::ScratchTooSmall {
        index,
        needed,
        have: scratch.len(),
    };
    let mut rest = scratch;
    let Some(output) = carve(&mut rest, operands.output as usize) else {
        return Err(too_small);
    };
    output.fill(0);
    // A stateful op's leading state operands are read and written: carved apart.
    let state_count = usize::from(op.state_inputs());
    let mut state: [&mut [u8]; MAX_STATE] = Default::default();
    let mut inputs: [&[u8]; MAX_JOB_INPUTS] = [&[]; MAX_JOB_INPUTS];
    let mut input_bytes = 0u64;
    for (i, &bytes) in operands.inputs.iter().enumerate() {
        let Some(buffer) = carve(&mut rest, bytes as usize) else {
            return Err(too_small);
        };
        fill(buffer, role(op, i), (index * MAX_JOB_INPUTS + i) as u32);
        let slot = if i < state_count {
            state.get_mut(i).map(|s| *s = buffer)
        } else {
            inputs.get_mut(i - state_count).map(|s| *s = buffer)
        };
        slot.ok_or(CpuCostError::NoOperands { index })?;
        input_bytes += u64::from(bytes);
    }
    let state = state
        .get_mut(..state_count)
        .ok_or(CpuCostError::NoOperands { index })?;
    let inputs = inputs
        .get(..operands.inputs.len() - state_count)
        .ok_or(CpuCostError::NoOperands { index })?;

    let mut result = Ok(());
    let ticks = t.time(1, &mut || {
        result = if state.is_empty() {
            op.run(inputs, output)
        } else {
            op.run_stateful(state, inputs, output)
        };
        Ok(())
    })?;
    result.map_err(|error| CpuCostError::Op {
        index,
        kind: op.kind(),
        error,
    })?;

    let net = centi(cal, u64::from(ticks)).saturating_sub(overhead);
    let cost = KernelCost {
        source,
        what,
        kind: op.kind(),
        work: op.macs(),
        outputs: op.output_elements(),
        input_bytes,
        instructions: (net + 50) / 100,
        predicted: model.cycles(op),
    };
    defmt::info!(
        "cpu cost #{=usize} {} {} ({=str}): work {=u64}, outputs {=u64}, input bytes {=u64}: {=u32} ticks, {=u64} instructions, {} per work unit; model {=u64} ({} of measured)",
        index,
        cost.source,
        cost.kind,
        cost.what,
        cost.work,
        cost.outputs,
        cost.input_bytes,
        ticks,
        cost.instructions,
        Centi(net / cost.work.max(1)),
        cost.predicted,
        Centi(cost.predicted * 100 / cost.instructions.max(1))
    );
    Ok((cost, ticks))
}

/// Measures one `Op::run` call of every operator of `model` and of [`synthetic_ops`], with
/// operands carved from `scratch` (16-byte aligned; it must hold the largest operator's
/// operands, each padded to 16 bytes). Logs one line per operator and a summary, and returns
/// the figures in measurement order (the model's operators first).
pub fn measure(
    t: &Ticks,
    cal: &Calibration,
    model: &heapless::Vec<Op, MAX_MODEL_OPS>,
    cpu_model: &CpuModel,
    scratch: &mut [u8],
) -> Result<heapless::Vec<KernelCost, MAX_COSTS>, CpuCostError> {
    // The fixed cost of timing one call: an empty closure, timed alone many times, each time
    // after a pseudo-random delay of 2 to 80 instructions so that the calls start at every
    // phase of a tick (two instructions apart) and the sum of ticks averages to the cost.
    let mut empty_ticks = 0u64;
    let mut state = 1u32;
    for _ in 0..OVERHEAD_SAMPLES {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        cortex_m::asm::delay((state >> 24) % 40);
        empty_ticks += u64::from(t.time(1, &mut || Ok(()))?);
    }
    let overhead = centi(cal, empty_ticks) / u64::from(OVERHEAD_SAMPLES);
    defmt::info!(
        "cpu cost: fixed cost of a timed call {} instructions ({=u64} ticks over {=u32} empty calls), subtracted from every figure",
        Centi(overhead),
        empty_ticks,
        OVERHEAD_SAMPLES
    );

    let synthetic = synthetic_ops()?;
    let ops = model
        .iter()
        .map(|op| (Source::Model, "kws_dscnn", op))
        .chain(synthetic.iter().map(|s| (Source::Synthetic, s.what, &s.op)));
    let mut costs = heapless::Vec::new();
    let (mut model_work, mut model_instructions, mut model_ticks) = (0u64, 0u64, 0u64);
    let mut largest = 0u64;
    for (index, (source, what, op)) in ops.enumerate() {
        let (cost, ticks) = measure_op(
            t,
            cal,
            index,
            (source, what),
            op,
            (overhead, cpu_model),
            scratch,
        )?;
        if cost.source == Source::Model {
            model_work += cost.work;
            model_instructions += cost.instructions;
            model_ticks += u64::from(ticks);
        }
        largest = largest.max(cost.instructions);
        costs.push(cost).map_err(|_| CpuCostError::TooManyOps)?;
    }
    defmt::info!(
        "cpu cost: model: {=usize} operators, {=u64} work units, {=u64} instructions ({=u64} ticks), {} per work unit; {=usize} synthetic operators; largest single call {=u64} instructions",
        model.len(),
        model_work,
        model_instructions,
        model_ticks,
        Centi(model_instructions * 100 / model_work.max(1)),
        synthetic.len(),
        largest
    );
    Ok(costs)
}

/// Checks the simulator's CPU model against `costs`: each operator within
/// [`OP_TOLERANCE_PERCENT`] of its measurement, the model's operators together within
/// [`TOTAL_TOLERANCE_PERCENT`].
pub fn check(costs: &[KernelCost]) -> Result<(), CpuCostError> {
    let off = |measured: u64, predicted: u64, percent: u64| {
        measured.abs_diff(predicted) * 100 > measured * percent
    };
    for (index, c) in costs.iter().enumerate() {
        if off(c.instructions, c.predicted, OP_TOLERANCE_PERCENT) {
            return Err(CpuCostError::ModelOff {
                index,
                kind: c.kind,
                measured: c.instructions,
                predicted: c.predicted,
            });
        }
    }
    let model = costs.iter().filter(|c| c.source == Source::Model);
    let (measured, predicted) =
        model.fold((0, 0), |(m, p), c| (m + c.instructions, p + c.predicted));
    if off(measured, predicted, TOTAL_TOLERANCE_PERCENT) {
        return Err(CpuCostError::ModelTotalOff {
            measured,
            predicted,
        });
    }
    defmt::info!(
        "cpu cost: the simulator's CPU model is within {=u64}% of every operator and {=u64}% of the model's total ({=u64} cycles for {=u64} instructions)",
        OP_TOLERANCE_PERCENT,
        TOTAL_TOLERANCE_PERCENT,
        predicted,
        measured
    );
    Ok(())
}
