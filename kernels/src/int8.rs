//! int8 kernels, bit-exact with TensorFlow Lite Micro's reference kernels.
//!
//! Tensors are asymmetrically quantized, `real = scale · (q − zero_point)` ([`Quant`]); weights
//! are symmetric (zero point 0). Each operator comes in two parts, like a TFLM kernel's
//! `Prepare` and `Eval`:
//!
//! - a `…Params::new` constructor that does all the floating-point work once — the real
//!   rescaling multipliers, computed in `double` from the `float` scales in exactly TFLM's order
//!   of operations, turned into Q0.31 mantissas and shifts by
//!   [`quantize_multiplier`], and the fused activation's
//!   clamp range — and refuses parameters TFLM would abort on;
//! - a kernel function that uses integers only: subtract the input zero points, accumulate,
//!   requantize with [`multiply_by_quantized_multiplier`] (which rounds twice, see
//!   [`fixed_point`](crate::fixed_point)), add the output zero point, clamp.
//!
//! Sources of the arithmetic (tflite-micro): `micro/kernels/add_common.cc` and
//! `kernels/internal/reference/integer_ops/add.h` (ADD), `micro/kernels/mul_common.cc` and
//! `reference/integer_ops/mul.h` (MUL), `micro/kernels/activations_common.cc` and
//! `micro/kernels/activations.h` (RELU), `micro/kernels/fully_connected_common.cc`,
//! `kernels/kernel_util.cc` and `reference/integer_ops/fully_connected.h` (FULLY_CONNECTED).
//!
//! [`add`] and [`mul`] take operands of equal lengths; [`broadcast`] has the broadcasting
//! versions (and SUB's), and [`sub`](mod@sub), [`rsqrt`](mod@rsqrt), [`quantize`] and
//! [`elementwise`] the other elementwise operators.
//!
//! Spatial operators, in submodules re-exported here (NHWC layout, any batch size):
//!
//! - [`conv`]: CONV_2D (including grouped) and DEPTHWISE_CONV_2D with per-channel weights
//!   ([`Conv2dParams`], [`DepthwiseParams`], [`ChannelMultiplier`]);
//! - [`im2col`](mod@im2col): CONV_2D as a gather of input windows into a matrix and one
//!   matrix product ([`conv2d_im2col`]), bit-exact with [`conv2d`]: how an NPU may run a
//!   convolution whose input is too shallow for its MAC array;
//! - [`transpose_conv`](mod@transpose_conv): TRANSPOSE_CONV with per-channel weights
//!   ([`TransposeConvParams`]);
//! - [`pool`]: AVERAGE_POOL_2D and MAX_POOL_2D ([`PoolParams`]);
//! - [`mean`](mod@mean): MEAN and SUM over any axes, of which height and width
//!   ([`MeanParams`]), and REDUCE_MAX and REDUCE_MIN ([`ReduceShape`]);
//! - [`l2norm`]: L2_NORMALIZATION along the innermost dimension ([`l2_normalization`]);
//! - [`log_softmax`](mod@log_softmax): LOG_SOFTMAX with TFLM's fixed int8 output
//!   quantization ([`LogSoftmaxParams`]);
//! - [`logistic`](mod@logistic): LOGISTIC and TANH, int8 and int16 ([`LogisticParams`],
//!   [`TanhParams`], [`Logistic16Params`], [`Tanh16Params`]);
//! - [`softmax`](mod@softmax): SOFTMAX with TFLM's fixed int8 output quantization
//!   ([`SoftmaxParams`]), and [`softmax16`]: int16 SOFTMAX ([`Softmax16Params`]);
//! - [`window`]: the shared sliding-window geometry ([`Padding`], [`Nhwc`], [`Window2d`]).
//!
//! Matrix and tensor operators, likewise:
//!
//! - [`fc_per_channel`]: FULLY_CONNECTED with one weight scale per output feature
//!   ([`FcPerChannelParams`]);
//! - [`batch_matmul`](mod@batch_matmul): BATCH_MATMUL with batch broadcasting
//!   ([`BatchMatmulParams`]);
//! - [`transpose`](mod@transpose) ([`TransposeParams`]), [`concat`](mod@concat) (CONCATENATION,
//!   [`ConcatParams`]) and [`reshape`](mod@reshape) (with SHAPE): data movement;
//! - [`resize`]: RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR ([`ResizeNearestParams`],
//!   [`ResizeBilinearParams`]); [`gather`](mod@gather): GATHER ([`GatherParams`]);
//!   [`cast`](mod@cast): CAST between int8, int16, int32 and float32;
//!   [`space`]: SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND ([`SpaceBatchParams`]; DEPTH_TO_SPACE
//!   and SPACE_TO_DEPTH are transposes of a rank-6 view);
//! - [`arg_min_max`](mod@arg_min_max): ARG_MAX and ARG_MIN, int32 indices
//!   ([`ArgMinMaxParams`]);
//! - [`dims`]: dimensions of tensors of rank up to 6 ([`Dims`]).

use crate::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier, quantize_multiplier_smaller_than_one_exp,
};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, FcShape, KernelError};

pub mod arg_min_max;
#[cfg(all(npu_arm_dsp, not(npu_arm_mve)))]
#[allow(unsafe_code)]
mod arith_dsp;
#[cfg(npu_arm_mve)]
#[allow(unsafe_code)]
mod arith_mve;
pub mod batch_matmul;
pub mod broadcast;
pub mod cast;
pub mod concat;
pub mod conv;
pub mod dims;
pub mod elementwise;
pub mod fc_per_channel;
mod fc_rows;
pub mod gather;
pub mod im2col;
pub mod l2norm;
pub mod log_softmax;
pub mod logistic;
pub mod lstm;
pub(crate) mod mac;
pub mod mean;
pub mod pool;
pub mod portable;
pub mod quantize;
pub mod reshape;
pub mod resize;
pub mod rsqrt;
pub mod softmax;
pub mod softmax16;
pub mod space;
pub mod sub;
pub mod svdf;
pub mod transpose;
pub mod transpose_conv;
pub mod window;
#[cfg(all(feature = "std", target_arch = "x86_64"))]
mod x86;

pub use arg_min_max::{arg_min_max, ArgMinMaxParams};
pub use batch_matmul::{batch_matmul, BatchMatmulParams};
pub use broadcast::{add_broadcast, mul_broadcast, sub_broadcast, BroadcastShape};
pub use cast::{cast, CastTo};
pub use concat::{check_same_quant, concatenation, ConcatParams, MAX_CONCAT_INPUTS};
pub use conv::{
    channel_multipliers, conv2d, depthwise_conv2d, ChannelMultiplier, Conv2dParams, Conv2dShape,
    DepthwiseParams, DepthwiseShape, MAX_PATCH_TAPS,
};
pub use dims::{Dims, MAX_DIMS};
pub use elementwise::{
    abs, hard_swish, leaky_relu, maximum, minimum, prelu, relu6, squared_difference, AbsParams,
    HardSwishParams, LeakyReluParams, PreluParams, Relu6Params, SquaredDifferenceParams,
};
pub use fc_per_channel::{fully_connected_per_channel, FcPerChannelParams};
pub use gather::{gather, GatherParams};
pub use im2col::{conv2d_im2col, im2col, im2col_len};
pub use l2norm::l2_normalization;
pub use log_softmax::{log_softmax, LogSoftmaxParams};
pub use logistic::{
    logistic, logistic_i16, tanh, tanh_i16, Logistic16Params, LogisticParams, Tanh16Params,
    TanhParams,
};
pub use lstm::{lstm, CellGate, LstmActivation, LstmParams, LstmQuant, LstmShape};
pub use mean::{mean, mean_hw, reduce_max, reduce_min, sum, MeanParams, ReduceShape};
pub use pool::{average_pool2d, max_pool2d, PoolParams, PoolShape};
pub use quantize::{
    dequantize, dequantize_i16, quantize_f32, quantize_f32_to_i16, requantize, requantize_i16,
    requantize_i16_to_i32, requantize_i16_to_i8, requantize_i32_to_i16, requantize_i32_to_i8,
    requantize_i8_to_i16, requantize_i8_to_i32, IntType, RequantizeParams,
};
pub use reshape::{reshape, shape};
pub use resize::{resize_bilinear, resize_nearest, ResizeBilinearParams, ResizeNearestParams};
pub use rsqrt::{rsqrt, RsqrtParams};
pub use softmax::{softmax, softmax_i8_to_i16, SoftmaxParams};
pub use softmax16::{softmax_i16, Softmax16Params, MAX_SOFTMAX16_DEPTH};
pub use space::{batch_to_space, space_to_batch, SpaceBatchParams};
pub use sub::{sub, SubParams};
pub use svdf::{svdf, SvdfParams, SvdfShape, SvdfState};
pub use transpose::{transpose, TransposeParams};
pub use transpose_conv::{transpose_conv, TransposeConvParams};
pub use window::{Nhwc, Padding, Window2d};

/// Affine quantization of a tensor: `real = scale * (q - zero_point)`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Quant {
    /// Real value of one quantization step.
    pub scale: f32,
    /// Quantized value that represents real zero.
    pub zero_point: i32,
}

/// Fused activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Activation {
    /// No clamping beyond the int8 range.
    None,
    /// max(0, x).
    Relu,
    /// min(6, max(0, x)).
    Relu6,
    /// min(1, max(-1, x)).
    ReluN1To1,
}

/// Bits by which int8 ADD shifts its zero-point-corrected inputs left before rescaling them
/// (TFLM's `left_shift` for 8-bit outputs), leaving room for the rescaling's precision.
pub const ADD_LEFT_SHIFT: i32 = 20;

/// Precomputed parameters of int8 ADD (TFLM's `OpDataAdd`).
///
/// Both inputs are brought to a common scale, twice the larger input scale divided by
/// 2^[`ADD_LEFT_SHIFT`], summed, and the sum rescaled to the output scale:
///
/// ```text
/// a' = rescale((a − a_zp) · 2^20, a_scale / (2 · max_scale))     (multiplier ≤ 0.5)
/// b' = rescale((b − b_zp) · 2^20, b_scale / (2 · max_scale))     (multiplier ≤ 0.5)
/// out = clamp(rescale(a' + b', 2 · max_scale / (2^20 · out_scale)) + out_zp)
/// ```
///
/// Each `rescale` is a doubling high multiply followed by a rounding right shift (all three
/// multipliers are below one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddParams {
    input1_offset: i32,
    input2_offset: i32,
    output_offset: i32,
    input1_multiplier: i32,
    input1_shift: i32,
    input2_multiplier: i32,
    input2_shift: i32,
    output_multiplier: i32,
    output_shift: i32,
    activation_min: i32,
    activation_max: i32,
}

impl AddParams {
    /// Parameters from the operands' quantization, as TFLM's Prepare computes them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, the output scale is so small relative to the
    /// inputs' that the output multiplier is not below one (TFLM aborts on that), or the fused
    /// activation's bounds do not fit an `int32`.
    pub fn new(a: Quant, b: Quant, out: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(a, "a scale", "a zero point")?;
        check_quant(b, "b scale", "b zero point")?;
        check_quant(out, "output scale", "output zero point")?;
        let (qmin, qmax) = (i64::from(i8::MIN), i64::from(i8::MAX));
        Self::resolve(a, b, out, act, ADD_LEFT_SHIFT, (qmin, qmax))
    }

    /// The multipliers, offsets and activation range for inputs shifted left by `left_shift`
    /// and outputs within `range` (TFLM's `CalculateOpDataAdd`, whose shift is 20 for int8 and
    /// 15 for int16); the quantizations are checked by the caller.
    pub(crate) fn resolve(
        a: Quant,
        b: Quant,
        out: Quant,
        act: Activation,
        left_shift: i32,
        (qmin, qmax): (i64, i64),
    ) -> Result<Self, KernelError> {
        let twice_max_input_scale =
            2.0 * f64::from(if a.scale > b.scale { a.scale } else { b.scale });
        let real_input1 = f64::from(a.scale) / twice_max_input_scale;
        let real_input2 = f64::from(b.scale) / twice_max_input_scale;
        let real_output =
            twice_max_input_scale / (f64::from(1_i32 << left_shift) * f64::from(out.scale));

        // The input multipliers are in (0, 0.5] by construction; only the output one can fail.
        let (input1_multiplier, input1_shift) =
            quantize_multiplier_smaller_than_one_exp(real_input1)
                .ok_or(KernelError::InvalidQuantization { what: "a scale" })?;
        let (input2_multiplier, input2_shift) =
            quantize_multiplier_smaller_than_one_exp(real_input2)
                .ok_or(KernelError::InvalidQuantization { what: "b scale" })?;
        let (output_multiplier, output_shift) = quantize_multiplier_smaller_than_one_exp(
            real_output,
        )
        .ok_or(KernelError::InvalidQuantization {
            what: "output scale",
        })?;
        let (activation_min, activation_max) = activation_range_in(act, out, qmin, qmax)?;

        Ok(Self {
            input1_offset: -a.zero_point,
            input2_offset: -b.zero_point,
            output_offset: out.zero_point,
            input1_multiplier,
            input1_shift,
            input2_multiplier,
            input2_shift,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        })
    }

    /// Added to `a` before rescaling: `−a.zero_point`.
    #[must_use]
    pub const fn input1_offset(&self) -> i32 {
        self.input1_offset
    }

    /// Added to `b` before rescaling: `−b.zero_point`.
    #[must_use]
    pub const fn input2_offset(&self) -> i32 {
        self.input2_offset
    }

    /// Added after the output rescaling: `out.zero_point`.
    #[must_use]
    pub const fn output_offset(&self) -> i32 {
        self.output_offset
    }

    /// `(multiplier, shift)` of `a`'s rescaling; the shift is at most 0 (a right shift).
    #[must_use]
    pub const fn input1_multiplier(&self) -> (i32, i32) {
        (self.input1_multiplier, self.input1_shift)
    }

    /// `(multiplier, shift)` of `b`'s rescaling; the shift is at most 0 (a right shift).
    #[must_use]
    pub const fn input2_multiplier(&self) -> (i32, i32) {
        (self.input2_multiplier, self.input2_shift)
    }

    /// `(multiplier, shift)` of the sum's rescaling to the output scale; the shift is at most 0.
    #[must_use]
    pub const fn output_multiplier(&self) -> (i32, i32) {
        (self.output_multiplier, self.output_shift)
    }

    /// Inclusive `(min, max)` the outputs are clamped to (the fused activation within int8).
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }
}

/// Precomputed parameters of int8 MUL (TFLM's `OpDataMul`).
///
/// `out = clamp(rescale((a − a_zp) · (b − b_zp), a_scale · b_scale / out_scale) + out_zp)`,
/// the multiplier computed in `double` and applied with [`multiply_by_quantized_multiplier`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulParams {
    input1_offset: i32,
    input2_offset: i32,
    output_offset: i32,
    output_multiplier: i32,
    output_shift: i32,
    activation_min: i32,
    activation_max: i32,
}

impl MulParams {
    /// Parameters from the operands' quantization.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, the multiplier `a_scale · b_scale / out_scale`
    /// is `2^31` or more (its shift would not fit a 32-bit left shift), or the fused
    /// activation's bounds do not fit an `int32`.
    pub fn new(a: Quant, b: Quant, out: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(a, "a scale", "a zero point")?;
        check_quant(b, "b scale", "b zero point")?;
        check_quant(out, "output scale", "output zero point")?;
        let (qmin, qmax) = (i64::from(i8::MIN), i64::from(i8::MAX));
        Self::resolve(a, b, out, act, (qmin, qmax))
    }

    /// The multiplier, offsets and activation range for outputs within `range` (int8's, or
    /// int16's for TFLM's 16x8 MUL); the quantizations are checked by the caller.
    pub(crate) fn resolve(
        a: Quant,
        b: Quant,
        out: Quant,
        act: Activation,
        (qmin, qmax): (i64, i64),
    ) -> Result<Self, KernelError> {
        let real = f64::from(a.scale) * f64::from(b.scale) / f64::from(out.scale);
        let (output_multiplier, output_shift) = general_multiplier(real, "output scale")?;
        let (activation_min, activation_max) = activation_range_in(act, out, qmin, qmax)?;
        Ok(Self {
            input1_offset: -a.zero_point,
            input2_offset: -b.zero_point,
            output_offset: out.zero_point,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        })
    }

    /// Added to `a` before multiplying: `−a.zero_point`.
    #[must_use]
    pub const fn input1_offset(&self) -> i32 {
        self.input1_offset
    }

    /// Added to `b` before multiplying: `−b.zero_point`.
    #[must_use]
    pub const fn input2_offset(&self) -> i32 {
        self.input2_offset
    }

    /// Added after rescaling: `out.zero_point`.
    #[must_use]
    pub const fn output_offset(&self) -> i32 {
        self.output_offset
    }

    /// `(multiplier, shift)` of the product's rescaling (see
    /// [`quantize_multiplier`]).
    #[must_use]
    pub const fn output_multiplier(&self) -> (i32, i32) {
        (self.output_multiplier, self.output_shift)
    }

    /// Inclusive `(min, max)` the outputs are clamped to (the fused activation within int8).
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }
}

/// Precomputed parameters of int8 RELU (TFLM's `ReluOpData`).
///
/// `out = clamp(rescale(input − in_zp, in_scale / out_scale) + out_zp, out_zp, 127)`: the
/// lower bound is the output's quantized zero, the upper the int8 maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReluParams {
    input_offset: i32,
    output_offset: i32,
    output_multiplier: i32,
    output_shift: i32,
    activation_min: i32,
    activation_max: i32,
}

impl ReluParams {
    /// Parameters from the input and output quantization.
    ///
    /// Like TFLM, the multiplier is the `float` quotient `input.scale / output.scale`, widened
    /// to `double` only afterwards. Errors with [`KernelError::InvalidQuantization`] when a scale
    /// is not finite and positive, a zero point is outside the int8 range, or that quotient
    /// overflows or reaches `2^31`.
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let real = f64::from(input.scale / output.scale);
        let (output_multiplier, output_shift) = general_multiplier(real, "output scale")?;
        // TFLM: max(int8 min, zp + round(0 / scale)) and the int8 max (its act_max is +inf).
        let (activation_min, activation_max) = activation_range(Activation::Relu, output)?;
        Ok(Self {
            input_offset: -input.zero_point,
            output_offset: output.zero_point,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        })
    }

    /// Added to the input before rescaling: `−input.zero_point`.
    #[must_use]
    pub const fn input_offset(&self) -> i32 {
        self.input_offset
    }

    /// Added after rescaling: `output.zero_point`.
    #[must_use]
    pub const fn output_offset(&self) -> i32 {
        self.output_offset
    }

    /// `(multiplier, shift)` of the rescaling to the output scale.
    #[must_use]
    pub const fn output_multiplier(&self) -> (i32, i32) {
        (self.output_multiplier, self.output_shift)
    }

    /// Inclusive `(min, max)` the outputs are clamped to: `(max(−128, out_zp), 127)`.
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }

    #[inline]
    fn apply(&self, x: i8) -> i8 {
        let centered = i32::from(x) + self.input_offset; // in [−255, 255]
        let scaled =
            multiply_by_quantized_multiplier(centered, self.output_multiplier, self.output_shift);
        requantized_to_i8(
            scaled,
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

impl AddParams {
    /// Its quantization as [`packed::CommonScale`](crate::packed).
    fn common_scale(&self) -> crate::packed::CommonScale {
        crate::packed::CommonScale {
            input1_offset: self.input1_offset,
            input2_offset: self.input2_offset,
            output_offset: self.output_offset,
            input1: (self.input1_multiplier, self.input1_shift),
            input2: (self.input2_multiplier, self.input2_shift),
            output: (self.output_multiplier, self.output_shift),
        }
    }
}

/// Packed ([`packed`](crate::packed)): the offsets, the three rescalings and the activation
/// range, read back checked as [`AddParams::new`] makes them (offsets of int8 zero points,
/// rescalings below one, a range inside int8).
impl Packed for AddParams {
    fn pack(&self, w: &mut Words<'_>) {
        self.common_scale().pack(w);
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Self::unpack_in(r, I8_RANGE)
    }
}

impl AddParams {
    /// Reads what [`Packed::pack`] wrote for outputs of `range` (int8's, or int16's for the
    /// 16x8 ADD): zero points inside it, and an activation range too.
    pub(crate) fn unpack_in(
        r: &mut WordReader<'_>,
        range: (i32, i32),
    ) -> Result<Self, KernelError> {
        let q = crate::packed::CommonScale::unpack(r, range, 0)?;
        let (activation_min, activation_max) = r.take_range(range.0, range.1)?;
        Ok(Self {
            input1_offset: q.input1_offset,
            input2_offset: q.input2_offset,
            output_offset: q.output_offset,
            input1_multiplier: q.input1.0,
            input1_shift: q.input1.1,
            input2_multiplier: q.input2.0,
            input2_shift: q.input2.1,
            output_multiplier: q.output.0,
            output_shift: q.output.1,
            activation_min,
            activation_max,
        })
    }
}

/// Packed ([`packed`](crate::packed)): the offsets, the rescaling and the activation range,
/// read back checked as [`MulParams::new`] makes them.
impl Packed for MulParams {
    fn pack(&self, w: &mut Words<'_>) {
        for offset in [self.input1_offset, self.input2_offset, self.output_offset] {
            w.put_i32(offset);
        }
        w.put_multiplier((self.output_multiplier, self.output_shift));
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Self::unpack_in(r, I8_RANGE, I8_RANGE)
    }
}

impl MulParams {
    /// Reads what [`Packed::pack`] wrote for zero points in `zero_points` (int8's, or only 0
    /// for the 16x8 MUL; the input offsets their negations) and outputs of `range`.
    pub(crate) fn unpack_in(
        r: &mut WordReader<'_>,
        (zp_min, zp_max): (i32, i32),
        range: (i32, i32),
    ) -> Result<Self, KernelError> {
        let input1_offset = r.take_in(-zp_max, -zp_min, "a zero point")?;
        let input2_offset = r.take_in(-zp_max, -zp_min, "b zero point")?;
        let output_offset = r.take_in(zp_min, zp_max, "output zero point")?;
        let (output_multiplier, output_shift) = r.take_multiplier(31, "output scale")?;
        let (activation_min, activation_max) = r.take_range(range.0, range.1)?;
        Ok(Self {
            input1_offset,
            input2_offset,
            output_offset,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        })
    }
}

/// Packed ([`packed`](crate::packed)): the offsets, the rescaling and the activation range,
/// read back checked as [`ReluParams::new`] makes them (the range is RELU's: from the output
/// zero point, or −128 if lower, to 127).
impl Packed for ReluParams {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_offset);
        w.put_i32(self.output_offset);
        w.put_multiplier((self.output_multiplier, self.output_shift));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_offset = r.take_input_offset("input zero point")?;
        let output_offset = r.take_zero_point("output zero point")?;
        let (output_multiplier, output_shift) = r.take_multiplier(31, "output scale")?;
        Ok(Self {
            input_offset,
            output_offset,
            output_multiplier,
            output_shift,
            activation_min: output_offset,
            activation_max: I8_RANGE.1,
        })
    }
}

/// int8's bounds, as `i32`s.
const I8_RANGE: (i32, i32) = (i8::MIN as i32, i8::MAX as i32);

/// Precomputed parameters of per-tensor int8 FULLY_CONNECTED (TFLM's `OpDataFullyConnected`).
///
/// ```text
/// acc[b][o] = Σ_i weights[o][i] · (input[b][i] − in_zp) + bias[o]          (int32, wrapping)
/// out[b][o] = clamp(rescale(acc, in_scale · w_scale / out_scale) + out_zp)
/// ```
///
/// The bias is int32 in units of `in_scale · w_scale`. Weights are symmetric (zero point 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FcParams {
    input_offset: i32,
    output_offset: i32,
    output_multiplier: i32,
    output_shift: i32,
    activation_min: i32,
    activation_max: i32,
}

/// Packed ([`packed`](crate::packed)): the output multiplier and shift (any pair the
/// arithmetic applies, as [`ChannelMultiplier::from_raw`]), the offsets and the activation range
/// (checked: [`KernelError::InvalidQuantization`] for ones no int8 layer has).
impl crate::packed::Packed for FcParams {
    fn pack(&self, w: &mut crate::packed::Words<'_>) {
        w.put_i32(self.output_multiplier);
        w.put_i32(self.output_shift);
        crate::packed::Int8Quant {
            input_offset: self.input_offset,
            output_offset: self.output_offset,
            activation_min: self.activation_min,
            activation_max: self.activation_max,
        }
        .pack(w);
    }

    fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        let (output_multiplier, output_shift) = (r.take_i32()?, r.take_i32()?);
        let q = crate::packed::Int8Quant::unpack(r)?;
        Ok(Self {
            input_offset: q.input_offset,
            output_offset: q.output_offset,
            output_multiplier,
            output_shift,
            activation_min: q.activation_min,
            activation_max: q.activation_max,
        })
    }
}

impl FcParams {
    /// Parameters from the quantization of input, weights (per tensor) and output.
    ///
    /// Like TFLM's `GetQuantizedConvolutionMultipler`, the multiplier is the `float` product
    /// `input.scale · weights_scale`, widened to `double` and then divided by the output scale.
    /// (TFLM also checks that the bias scale is close to that product; the bias's scale is not
    /// an argument here, so that check is the caller's.)
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, the product of scales overflows `f32`, the
    /// multiplier reaches `2^31`, or the fused activation's bounds do not fit an `int32`.
    pub fn new(
        input: Quant,
        weights_scale: f32,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_scale(weights_scale, "weights scale")?;
        check_quant(output, "output scale", "output zero point")?;
        let input_product_scale = input.scale * weights_scale;
        if !input_product_scale.is_finite() {
            return Err(KernelError::InvalidQuantization {
                what: "input scale * weights scale",
            });
        }
        let real = f64::from(input_product_scale) / f64::from(output.scale);
        let (output_multiplier, output_shift) = general_multiplier(real, "output scale")?;
        let (activation_min, activation_max) = activation_range(act, output)?;
        Ok(Self {
            input_offset: -input.zero_point,
            output_offset: output.zero_point,
            output_multiplier,
            output_shift,
            activation_min,
            activation_max,
        })
    }

    /// Added to every input element before the dot product: `−input.zero_point`.
    #[must_use]
    pub const fn input_offset(&self) -> i32 {
        self.input_offset
    }

    /// Added after rescaling: `output.zero_point`.
    #[must_use]
    pub const fn output_offset(&self) -> i32 {
        self.output_offset
    }

    /// `(multiplier, shift)` of the accumulator's rescaling to the output scale.
    #[must_use]
    pub const fn output_multiplier(&self) -> (i32, i32) {
        (self.output_multiplier, self.output_shift)
    }

    /// Inclusive `(min, max)` the outputs are clamped to (the fused activation within int8).
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }

    #[inline]
    fn requantize(&self, acc: i32) -> i8 {
        let scaled =
            multiply_by_quantized_multiplier(acc, self.output_multiplier, self.output_shift);
        requantized_to_i8(
            scaled,
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

/// A target's SIMD loop for an int8 binary operator: over contiguous `a`, `b` and `out`, it
/// writes a prefix of `out` (whole groups of its vector width) and returns its length.
/// Called once per run; it may keep state between runs (the DSP loops' buffer).
pub(crate) trait SimdRun: FnMut(&[i8], &[i8], &mut [i8]) -> usize {}

impl<F: FnMut(&[i8], &[i8], &mut [i8]) -> usize> SimdRun for F {}

/// No SIMD loop (the type of a [`SimdRun`] that is `None`).
pub(crate) type NoSimd = fn(&[i8], &[i8], &mut [i8]) -> usize;

/// The target's SIMD ADD for `p` ([`arith_dsp`]'s on the DSP extension, [`arith_mve`]'s on
/// Helium), or `None` where there is none or `p` is outside its forms.
#[cfg(all(npu_arm_dsp, not(npu_arm_mve)))]
fn add_simd(p: &AddParams) -> Option<impl SimdRun> {
    let plan = arith_dsp::AddPlan::new(p)?;
    // One buffer for every run of a call.
    let mut block = arith_dsp::Block::new();
    Some(move |a: &[i8], b: &[i8], out: &mut [i8]| plan.run(&mut block, a, b, out))
}

/// The target's SIMD ADD for `p` (see the DSP build's).
#[cfg(npu_arm_mve)]
fn add_simd(p: &AddParams) -> Option<impl SimdRun + '_> {
    Some(move |a: &[i8], b: &[i8], out: &mut [i8]| arith_mve::add(p, a, b, out))
}

/// The target's SIMD ADD for `p`: none on this target.
#[cfg(not(npu_arm_dsp))]
fn add_simd(_: &AddParams) -> Option<NoSimd> {
    None
}

/// The target's SIMD MUL for `p` ([`arith_dsp`]'s on the DSP extension, [`arith_mve`]'s on
/// Helium), or `None` where there is none or `p` is outside its forms.
#[cfg(all(npu_arm_dsp, not(npu_arm_mve)))]
fn mul_simd(p: &MulParams) -> Option<impl SimdRun> {
    let plan = arith_dsp::MulPlan::new(p)?;
    let mut block = arith_dsp::Block::new();
    Some(move |a: &[i8], b: &[i8], out: &mut [i8]| plan.run(&mut block, a, b, out))
}

/// The target's SIMD MUL for `p` (see the DSP build's).
#[cfg(npu_arm_mve)]
fn mul_simd(p: &MulParams) -> Option<impl SimdRun + '_> {
    Some(move |a: &[i8], b: &[i8], out: &mut [i8]| arith_mve::mul(p, a, b, out))
}

/// The target's SIMD MUL for `p`: none on this target.
#[cfg(not(npu_arm_dsp))]
fn mul_simd(_: &MulParams) -> Option<NoSimd> {
    None
}

/// out = a + b, elementwise, with TFLM's int8 ADD arithmetic (see [`AddParams`]).
///
/// `a`, `b` and `out` must have the same length ([`KernelError::LengthMismatch`] names the
/// first operand that differs from `a`).
pub fn add(p: &AddParams, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if x86::add::add(p, a, b, out) {
        return Ok(());
    }
    let done = add_simd(p).as_mut().map_or(0, |run| run(a, b, out));
    // The per-element arithmetic is the `BinaryOp` implementation in broadcast.rs.
    broadcast::elementwise(p, &a[done..], &b[done..], &mut out[done..]);
    Ok(())
}

/// out = a * b, elementwise, with TFLM's int8 MUL arithmetic (see [`MulParams`]).
///
/// `a`, `b` and `out` must have the same length.
pub fn mul(p: &MulParams, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    let done = mul_simd(p).as_mut().map_or(0, |run| run(a, b, out));
    // The per-element arithmetic is the `BinaryOp` implementation in broadcast.rs.
    broadcast::elementwise(p, &a[done..], &b[done..], &mut out[done..]);
    Ok(())
}

/// out = relu(input), elementwise, with TFLM's int8 RELU arithmetic (see [`ReluParams`]).
///
/// `input` and `out` must have the same length.
pub fn relu(p: &ReluParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = p.apply(x);
    }
    Ok(())
}

/// Fully connected, with TFLM's per-tensor int8 arithmetic (see [`FcParams`]).
///
/// Layouts (row-major): `input` `[batches][in_features]`, `weights`
/// `[out_features][in_features]` (TFLite's layout), `bias` `[out_features]` in units of
/// `input_scale · weights_scale`, `out` `[batches][out_features]`. Errors with
/// [`KernelError::ShapeOverflow`] for shapes no buffer can have and
/// [`KernelError::LengthMismatch`] for buffers of the wrong length.
///
/// Accumulation is in `int32` and wraps on overflow, as TFLM's does in practice (it would take
/// more than 65,000 maximal products).
pub fn fully_connected(
    p: &FcParams,
    shape: FcShape,
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    fully_connected_with::<mac::Native>(p, shape, input, weights, bias, out)
}

/// [`fully_connected`] with the dot products and requantization of `M`.
pub(crate) fn fully_connected_with<M: mac::Mac>(
    p: &FcParams,
    shape: FcShape,
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    out: &mut [i8],
) -> Result<(), KernelError> {
    let lens = shape.lens(core::mem::size_of::<i8>())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.weights, weights.len())?;
    if let Some(bias) = bias {
        check_len("bias", lens.out_features, bias.len())?;
    }
    check_len("output", lens.output, out.len())?;
    if lens.output == 0 {
        return Ok(());
    }
    // The bias, or zeros: adding 0 is what TFLM's "no bias" amounts to.
    let biases = || {
        bias.unwrap_or(&[])
            .iter()
            .copied()
            .chain(core::iter::repeat(0))
    };

    if lens.in_features == 0 {
        // Empty dot products: each output is the requantized bias.
        for out_row in out.chunks_exact_mut(lens.out_features) {
            for (o, b) in out_row.iter_mut().zip(biases()) {
                *o = p.requantize(b);
            }
        }
        return Ok(());
    }

    // One multiplier for every channel: the per-channel product with a constant one.
    let m = ChannelMultiplier::from_raw(p.output_multiplier, p.output_shift);
    let requant = (p.output_offset, p.activation_min, p.activation_max);
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        let layer = conv::x86::FcLayer {
            shape: (
                lens.output / lens.out_features,
                lens.in_features,
                lens.out_features,
            ),
            multipliers: x86::requant::Multipliers::Layer(m),
            bias,
            input_offset: p.input_offset,
            output: requant,
        };
        if conv::x86::fully_connected(&layer, input, weights, out) {
            return Ok(());
        }
    }
    let offset = p.input_offset;
    for (in_row, out_row) in input
        .chunks_exact(lens.in_features)
        .zip(out.chunks_exact_mut(lens.out_features))
    {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if x86::dot::each_dot(in_row, offset, weights, out_row.len(), |o, acc| {
            let b = bias.map_or(0, |b| b[o]);
            out_row[o] = p.requantize(acc.wrapping_add(b));
        }) {
            continue;
        }
        let m = fc_rows::FcMultipliers::One(m);
        fc_rows::fc_row::<M>(in_row, offset, weights, bias, m, requant, out_row);
    }
    Ok(())
}

/// Adds the output offset to a rescaled value and clamps it to the activation range (which
/// lies within int8).
///
/// The addition wraps: with multipliers of `2^15` or more the rescaled value can approach the
/// `int32` limits, and TFLM's `output_offset + MultiplyByQuantizedMultiplier(…)` then wraps
/// on every two's-complement target. For any sane quantization it never does.
#[inline(always)]
fn requantized_to_i8(scaled: i32, offset: i32, min: i32, max: i32) -> i8 {
    // max/min rather than clamp: never panics, even for an empty range.
    scaled.wrapping_add(offset).max(min).min(max) as i8
}

// Out of line: each parameter constructor checks several scales, and inlined, each check
// builds its error in place.
#[inline(never)]
pub(crate) fn check_scale(scale: f32, what: &'static str) -> Result<(), KernelError> {
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(KernelError::InvalidQuantization { what })
    }
}

fn check_quant(q: Quant, scale: &'static str, zero_point: &'static str) -> Result<(), KernelError> {
    check_scale(q.scale, scale)?;
    if (i32::from(i8::MIN)..=i32::from(i8::MAX)).contains(&q.zero_point) {
        Ok(())
    } else {
        Err(KernelError::InvalidQuantization { what: zero_point })
    }
}

/// TFLM's `QuantizeMultiplier` for a rescaling applied with [`multiply_by_quantized_multiplier`],
/// refusing multipliers it cannot apply: non-finite ones and those whose shift exceeds 31.
pub(crate) fn general_multiplier(real: f64, what: &'static str) -> Result<(i32, i32), KernelError> {
    if !(real.is_finite() && real >= 0.0) {
        return Err(KernelError::InvalidQuantization { what });
    }
    let (multiplier, shift) = quantize_multiplier(real);
    if shift > 31 {
        return Err(KernelError::InvalidQuantization { what });
    }
    Ok((multiplier, shift))
}

/// `round(x)` for `f32`, ties away from zero (C's `roundf`, TFLM's `TfLiteRound`); `core` has
/// no float rounding without `std`.
pub(crate) fn round_half_away_from_zero(x: f32) -> f32 {
    const EXACT: f32 = 8_388_608.0; // 2^23: every f32 at least this large is an integer.
    if !(x < EXACT && x > -EXACT) {
        return x; // integral, infinite or NaN
    }
    let truncated = x as i32 as f32; // exact for |x| < 2^23
    let fraction = x - truncated; // exact (Sterbenz)
    if fraction >= 0.5 {
        truncated + 1.0
    } else if fraction <= -0.5 {
        truncated - 1.0
    } else {
        truncated
    }
}

/// TFLM's `Quantize` helper of `CalculateActivationRangeQuantized`: `zero_point + round(f /
/// scale)`, computed in `float`, refused when the rounded quotient is outside the `int32` range.
fn quantize_bound(output: Quant, f: f32) -> Result<i64, KernelError> {
    let q = round_half_away_from_zero(f / output.scale);
    // TFLM's check: −2^31 <= q <= (float)INT32_MAX, which is 2^31. NaN fails it.
    if !(-2_147_483_648.0..=2_147_483_648.0).contains(&q) {
        return Err(KernelError::InvalidQuantization {
            what: "output scale",
        });
    }
    // q = 2^31 passes TFLM's range check but has no int32 value (the C++ cast is undefined);
    // Rust's saturating cast gives i32::MAX, as Arm's float-to-int conversion does.
    Ok(i64::from(output.zero_point) + i64::from(q as i32))
}

/// TFLM's `CalculateActivationRangeQuantized` for int8 outputs.
fn activation_range(act: Activation, output: Quant) -> Result<(i32, i32), KernelError> {
    activation_range_in(act, output, i64::from(i8::MIN), i64::from(i8::MAX))
}

/// TFLM's `CalculateActivationRangeQuantized` for outputs of range `qmin..=qmax` (int8's, or
/// int16's for the 16x8 kernels).
pub(crate) fn activation_range_in(
    act: Activation,
    output: Quant,
    qmin: i64,
    qmax: i64,
) -> Result<(i32, i32), KernelError> {
    let (min, max) = match act {
        Activation::None => (qmin, qmax),
        Activation::Relu => (quantize_bound(output, 0.0)?.max(qmin), qmax),
        Activation::Relu6 => (
            quantize_bound(output, 0.0)?.max(qmin),
            quantize_bound(output, 6.0)?.min(qmax),
        ),
        Activation::ReluN1To1 => (
            quantize_bound(output, -1.0)?.max(qmin),
            quantize_bound(output, 1.0)?.min(qmax),
        ),
    };
    // The zero point is within the output type's range, so min <= max and both are within it
    // here; the clamp only guards the casts.
    Ok((min.clamp(qmin, qmax) as i32, max.clamp(qmin, qmax) as i32))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod pointwise_packed_tests;
