//! 16x8 kernels (TensorFlow Lite's int16 activations with int8 weights), bit-exact with
//! TensorFlow Lite Micro's reference kernels.
//!
//! Activations are int16, quantized symmetrically by the converter (zero point 0); weights are
//! int8 and symmetric, per channel. The parameters are built like the int8 kernels' (a
//! `…Params` constructor doing TFLM's `Prepare` once), and many are the int8 ones:
//! [`Conv2dParams::new_int16`], [`DepthwiseParams::new_int16`], [`ChannelMultiplier`],
//! [`BroadcastShape`].
//!
//! # Accumulators
//!
//! TFLM's FULLY_CONNECTED and CONV_2D on int16 accumulate in the bias's type: `int64` for the
//! int64 bias the converter emits by default, `int32` for a model converted with an int32
//! bias (or without a bias, when the operator's `quantized_bias_type` says int32).
//! DEPTHWISE_CONV_2D always takes the int64 path. The kernels are generic over the
//! [`Accumulator`]: `i64` rescales with TFLM's 64-bit `MultiplyByQuantizedMultiplier`
//! ([`multiply_by_quantized_multiplier_i64`]: a 16-bit multiplier, one rounding), `i32` with
//! the 32-bit one of the int8 kernels (two roundings), and both wrap like TFLM's on overflow.
//!
//! # Zero points
//!
//! As in TFLM (`reference_integer_ops/conv.h`, `depthwise_conv.h`, the int16 overloads),
//! CONV_2D and DEPTHWISE_CONV_2D apply no zero point on int16; FULLY_CONNECTED applies the
//! input's and the output's (`reference_integer_ops/fully_connected.h`, the same template as
//! int8); ADD applies them (`reference_ops::AddElementwise`, a left shift of 15); MUL needs
//! them to be 0 (TFLM's Prepare refuses others).
//!
//! # ADD
//!
//! TFLM's ADD on int16 always takes the general path (`reference_ops::Add(..., pot_scale =
//! false)`, and `BroadcastAdd6DSlow` when shapes differ): the int8 arithmetic with a left
//! shift of 15 instead of 20. TensorFlow Lite's own special power-of-two-scale path for zero
//! zero points (`pot_scale_int16`) is not in TFLM, and is not here.
//!
//! [`Conv2dParams::new_int16`]: crate::int8::Conv2dParams::new_int16
//! [`DepthwiseParams::new_int16`]: crate::int8::DepthwiseParams::new_int16
//! [`multiply_by_quantized_multiplier_i64`]: crate::fixed_point::multiply_by_quantized_multiplier_i64

use crate::fixed_point::{multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_i64};
use crate::int8::broadcast::{broadcast_untabulated, rescale_smaller_than_one, BinaryOp};
use crate::int8::conv::int16 as conv16;
use crate::int8::{
    activation_range_in, check_scale, general_multiplier, Activation, AddParams, MulParams, Quant,
};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, FcShape, KernelError};

pub use crate::int8::{
    BroadcastShape, ChannelMultiplier, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape,
};

/// int16's range, as TFLM's `CalculateActivationRangeQuantized` takes it.
const RANGE: (i64, i64) = (i16::MIN as i64, i16::MAX as i64);

/// Left shift of int16 ADD's inputs before rescaling (TFLM's `left_shift` for int16 outputs).
pub const ADD_LEFT_SHIFT: i32 = 15;

mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for i64 {}
}

/// The accumulator of a 16x8 FULLY_CONNECTED or convolution, which is the bias's type (see the
/// [module docs](self#accumulators)): `i64` or `i32`.
pub trait Accumulator: Copy + Default + bytemuck::Pod + core::fmt::Debug + sealed::Sealed {
    /// Bytes of one element.
    const BYTES: usize;
    /// The element stored little-endian in `bytes` (exactly [`BYTES`](Self::BYTES) long; a
    /// shorter slice reads as zeros).
    fn from_le(bytes: &[u8]) -> Self;
    /// `self + w · x`, wrapping (the product is taken in the accumulator's width, where it
    /// is exact: TFLM's int32 product never overflows for these operands).
    fn mac(self, w: i32, x: i32) -> Self;
    /// `self + bias`, wrapping.
    fn add_bias(self, bias: Self) -> Self;
    /// TFLM's `MultiplyByQuantizedMultiplier` for this accumulator type.
    fn rescale(self, m: ChannelMultiplier) -> i32;
}

impl Accumulator for i32 {
    const BYTES: usize = 4;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        bytes.try_into().map_or(0, i32::from_le_bytes)
    }
    #[inline]
    fn mac(self, w: i32, x: i32) -> Self {
        self.wrapping_add(w.wrapping_mul(x))
    }
    #[inline]
    fn add_bias(self, bias: Self) -> Self {
        self.wrapping_add(bias)
    }
    #[inline]
    fn rescale(self, m: ChannelMultiplier) -> i32 {
        multiply_by_quantized_multiplier(self, m.multiplier(), m.shift())
    }
}

impl Accumulator for i64 {
    const BYTES: usize = 8;
    #[inline]
    fn from_le(bytes: &[u8]) -> Self {
        bytes.try_into().map_or(0, i64::from_le_bytes)
    }
    #[inline]
    fn mac(self, w: i32, x: i32) -> Self {
        // One multiply-accumulate long (SMLAL on Arm).
        self.wrapping_add(i64::from(w) * i64::from(x))
    }
    #[inline]
    fn add_bias(self, bias: Self) -> Self {
        self.wrapping_add(bias)
    }
    #[inline]
    fn rescale(self, m: ChannelMultiplier) -> i32 {
        multiply_by_quantized_multiplier_i64(self, m.multiplier(), m.shift())
    }
}

/// A bias of accumulator-typed elements, as little-endian bytes at any alignment: a `.tflite`
/// file aligns its int64 biases to 4 bytes only, and a kernel reading them in place (from
/// flash) must not require 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bias<'a, A> {
    bytes: &'a [u8],
    element: core::marker::PhantomData<A>,
}

impl<'a, A: Accumulator> Bias<'a, A> {
    /// The bias stored little-endian in `bytes` (whose length the kernels check).
    #[must_use]
    pub const fn from_le_bytes(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            element: core::marker::PhantomData,
        }
    }

    /// The bias `values` (their in-memory bytes: little-endian on every target this crate
    /// supports).
    #[must_use]
    pub fn new(values: &'a [A]) -> Self {
        Self::from_le_bytes(bytemuck::cast_slice(values))
    }

    /// Checks that it holds exactly `channels` elements.
    pub(crate) fn check(&self, channels: usize) -> Result<(), KernelError> {
        let expected = channels
            .checked_mul(A::BYTES)
            .ok_or(KernelError::ShapeOverflow)?;
        check_len("bias bytes", expected, self.bytes.len())
    }

    /// Element `i` (zero past the end; lengths are checked first).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> A {
        A::from_le(
            self.bytes
                .get(i * A::BYTES..(i + 1) * A::BYTES)
                .unwrap_or_default(),
        )
    }
}

/// A scale that must be finite and positive and a zero point within int16.
fn check_quant(q: Quant, scale: &'static str, zero_point: &'static str) -> Result<(), KernelError> {
    check_scale(q.scale, scale)?;
    if (RANGE.0..=RANGE.1).contains(&i64::from(q.zero_point)) {
        Ok(())
    } else {
        Err(KernelError::InvalidQuantization { what: zero_point })
    }
}

/// Adds the offset to a rescaled value and clamps it to the activation range (within int16);
/// the addition wraps like TFLM's.
#[inline]
fn requantized_to_i16(scaled: i32, offset: i32, min: i32, max: i32) -> i16 {
    // max/min rather than clamp: never panics, even for an empty range.
    scaled.wrapping_add(offset).max(min).min(max) as i16
}

/// Precomputed parameters of 16x8 FULLY_CONNECTED (TFLM's `OpDataFullyConnected`), per
/// tensor (one multiplier, in the parameters) or per channel (one multiplier per output
/// feature, an operand of [`fully_connected`]).
///
/// ```text
/// acc[b][o] = Σ_i weights[o][i] · (input[b][i] − in_zp) + bias[o]     (accumulator A, wrapping)
/// out[b][o] = clamp(rescale_A(acc, m[o]) + out_zp, act_min, act_max)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FcParams {
    input_offset: i32,
    output_offset: i32,
    activation_min: i32,
    activation_max: i32,
    /// The per-tensor multiplier; `None` for per-channel weights.
    multiplier: Option<ChannelMultiplier>,
}

impl FcParams {
    /// Per-tensor weights: the multiplier as TFLM's `GetQuantizedConvolutionMultipler`
    /// computes it (the `float` product `input.scale · weights_scale`, widened to `double`,
    /// divided by the output scale), as for int8.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is outside int16, the product of scales overflows, the
    /// multiplier reaches `2^31`, or the activation's bounds do not fit an `int32`.
    pub fn per_tensor(
        input: Quant,
        weights_scale: f32,
        output: Quant,
        act: Activation,
    ) -> Result<Self, KernelError> {
        check_scale(weights_scale, "weights scale")?;
        let mut p = Self::per_channel(input, output, act)?;
        let product = input.scale * weights_scale;
        if !product.is_finite() {
            return Err(KernelError::InvalidQuantization {
                what: "input scale * weights scale",
            });
        }
        let real = f64::from(product) / f64::from(output.scale);
        let (m, shift) = general_multiplier(real, "output scale")?;
        p.multiplier = Some(ChannelMultiplier::from_raw(m, shift));
        Ok(p)
    }

    /// Per-channel weights: the offsets and the activation range; the multipliers are an
    /// operand of the kernel (see [`channel_multipliers`](crate::int8::channel_multipliers)).
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is outside int16, or the activation's bounds do not fit an
    /// `int32`.
    pub fn per_channel(input: Quant, output: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let (activation_min, activation_max) = activation_range_in(act, output, RANGE.0, RANGE.1)?;
        Ok(Self {
            input_offset: -input.zero_point,
            output_offset: output.zero_point,
            activation_min,
            activation_max,
            multiplier: None,
        })
    }

    /// Writes the parameters ([`packed`](crate::packed)): offsets, activation range, and
    /// whether a per-tensor multiplier follows, then its pair.
    pub fn pack(&self, w: &mut crate::packed::Words<'_>) {
        use crate::packed::Packed;
        w.put_i32(self.input_offset);
        w.put_i32(self.output_offset);
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
        self.multiplier.is_some().pack(w);
        if let Some(m) = self.multiplier {
            w.put_i32(m.multiplier());
            w.put_i32(m.shift());
        }
    }

    /// Reads what [`pack`](Self::pack) wrote: offsets of int16 zero points, the activation
    /// range inside int16, and any multiplier pair (the arithmetic applies any, as
    /// [`ChannelMultiplier::from_raw`] documents).
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for an offset or range no 16x8 layer has.
    pub fn unpack(r: &mut crate::packed::WordReader<'_>) -> Result<Self, KernelError> {
        use crate::packed::Packed;
        let (lo, hi) = (RANGE.0 as i32, RANGE.1 as i32);
        let input_offset = r.take_in(-hi, -lo, "input zero point")?;
        let output_offset = r.take_in(lo, hi, "output zero point")?;
        let (activation_min, activation_max) = r.take_range(lo, hi)?;
        let multiplier = if bool::unpack(r)? {
            Some(ChannelMultiplier::from_raw(r.take_i32()?, r.take_i32()?))
        } else {
            None
        };
        Ok(Self {
            input_offset,
            output_offset,
            activation_min,
            activation_max,
            multiplier,
        })
    }

    /// The per-tensor multiplier, `None` for per-channel parameters.
    #[must_use]
    pub const fn multiplier(&self) -> Option<ChannelMultiplier> {
        self.multiplier
    }

    /// Inclusive `(min, max)` the outputs are clamped to (the fused activation within int16).
    #[must_use]
    pub const fn activation_range(&self) -> (i32, i32) {
        (self.activation_min, self.activation_max)
    }
}

/// 16x8 FULLY_CONNECTED, TFLM's `reference_integer_ops::FullyConnected` (per-tensor
/// parameters) or `FullyConnectedPerChannel` (per-channel ones) on int16 input, int8 weights
/// and bias of the accumulator's type `A`.
///
/// Layouts as [`int8::fully_connected`](crate::int8::fully_connected); `multipliers` has one
/// per output feature for per-channel parameters and is ignored (may be empty) for per-tensor
/// ones. Errors, before anything is written: [`KernelError::ShapeOverflow`],
/// [`KernelError::LengthMismatch`].
pub fn fully_connected<A: Accumulator>(
    p: &FcParams,
    shape: FcShape,
    multipliers: &[ChannelMultiplier],
    input: &[i16],
    weights: &[i8],
    bias: Option<Bias<'_, A>>,
    out: &mut [i16],
) -> Result<(), KernelError> {
    let lens = shape.lens(core::mem::size_of::<i16>())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.weights, weights.len())?;
    if p.multiplier.is_none() {
        check_len("multipliers", lens.out_features, multipliers.len())?;
    }
    if let Some(bias) = bias {
        bias.check(lens.out_features)?;
    }
    check_len("output", lens.output, out.len())?;
    if lens.output == 0 {
        return Ok(());
    }
    let multiplier = |o: usize| p.multiplier.unwrap_or_else(|| multipliers[o]);
    let requantize = |acc: A, o: usize| {
        let acc = bias.map_or(acc, |bias| acc.add_bias(bias.get(o)));
        requantized_to_i16(
            acc.rescale(multiplier(o)),
            p.output_offset,
            p.activation_min,
            p.activation_max,
        )
    };
    if lens.in_features == 0 {
        // Empty dot products: each output is the requantized bias.
        for out_row in out.chunks_exact_mut(lens.out_features) {
            for (o, y) in out_row.iter_mut().enumerate() {
                *y = requantize(A::default(), o);
            }
        }
        return Ok(());
    }
    let offset = p.input_offset;
    for (in_row, out_row) in input
        .chunks_exact(lens.in_features)
        .zip(out.chunks_exact_mut(lens.out_features))
    {
        for (o, (y, w_row)) in out_row
            .iter_mut()
            .zip(weights.chunks_exact(lens.in_features))
            .enumerate()
        {
            // |w · (x − zp)| < 2^24: each product is exact, as TFLM's int32 one.
            let acc = w_row
                .iter()
                .zip(in_row)
                .fold(A::default(), |acc, (&w, &x)| {
                    acc.mac(i32::from(w), i32::from(x) + offset)
                });
            *y = requantize(acc, o);
        }
    }
    Ok(())
}

/// 16x8 CONV_2D with per-channel quantization (TFLM's int16 `ConvPerChannel<AccumScalar>`):
/// `p` from [`Conv2dParams::new_int16`], layouts as [`int8::conv2d`](crate::int8::conv2d),
/// the bias of the accumulator's type. Errors with [`KernelError::LengthMismatch`] before
/// touching `output`.
pub fn conv2d<A: Accumulator>(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i16],
    filter: &[i8],
    bias: Option<Bias<'_, A>>,
    output: &mut [i16],
) -> Result<(), KernelError> {
    conv16::conv2d(p, multipliers, input, filter, bias, output)
}

/// 16x8 DEPTHWISE_CONV_2D with per-channel quantization (TFLM's int16
/// `DepthwiseConvPerChannel`, which takes an int64 bias: use `A = i64` to match it): `p` from
/// [`DepthwiseParams::new_int16`], layouts as
/// [`int8::depthwise_conv2d`](crate::int8::depthwise_conv2d). Errors with
/// [`KernelError::LengthMismatch`] before touching `output`.
pub fn depthwise_conv2d<A: Accumulator>(
    p: &DepthwiseParams,
    multipliers: &[ChannelMultiplier],
    input: &[i16],
    filter: &[i8],
    bias: Option<Bias<'_, A>>,
    output: &mut [i16],
) -> Result<(), KernelError> {
    conv16::depthwise_conv2d(p, multipliers, input, filter, bias, output)
}

/// Precomputed parameters of 16x8 ADD: TFLM's `OpDataAdd` for int16 outputs, the int8
/// arithmetic ([`AddParams`]) with a left shift of [`ADD_LEFT_SHIFT`] and int16 bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddParamsI16(AddParams);

impl AddParamsI16 {
    /// Parameters from the operands' quantization, as TFLM's `CalculateOpDataAdd`.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is outside int16, the output multiplier is not below one, or the
    /// activation's bounds do not fit an `int32`.
    pub fn new(a: Quant, b: Quant, out: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(a, "a scale", "a zero point")?;
        check_quant(b, "b scale", "b zero point")?;
        check_quant(out, "output scale", "output zero point")?;
        AddParams::resolve(a, b, out, act, ADD_LEFT_SHIFT, RANGE).map(Self)
    }

    /// The shared arithmetic's parameters (offsets, multipliers, range).
    #[must_use]
    pub const fn params(&self) -> &AddParams {
        &self.0
    }
}

/// The int8 ADD's rescaling of a `(multiplier, shift)` pair.
#[inline]
fn rescale((multiplier, shift): (i32, i32), x: i32) -> i32 {
    rescale_smaller_than_one(x, multiplier, shift)
}

impl BinaryOp for AddParamsI16 {
    type Elem = i16;

    #[inline]
    fn prep_a(&self, a: i16) -> i32 {
        // |a − zp| < 2^16, shifted below 2^31: TFLM's int32 product, which never overflows.
        let shifted = (i32::from(a) + self.0.input1_offset()).wrapping_shl(ADD_LEFT_SHIFT as u32);
        rescale(self.0.input1_multiplier(), shifted)
    }

    #[inline]
    fn prep_b(&self, b: i16) -> i32 {
        let shifted = (i32::from(b) + self.0.input2_offset()).wrapping_shl(ADD_LEFT_SHIFT as u32);
        rescale(self.0.input2_multiplier(), shifted)
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i16 {
        // Each rescaled input is at most half its shifted value: the sum fits.
        let sum = rescale(self.0.output_multiplier(), a.wrapping_add(b));
        let (min, max) = self.0.activation_range();
        requantized_to_i16(sum, self.0.output_offset(), min, max)
    }
}

/// Precomputed parameters of 16x8 MUL: TFLM's `OpDataMul` for int16, the int8 arithmetic
/// ([`MulParams`]) with int16 bounds, and zero points that must be 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulParamsI16(MulParams);

impl MulParamsI16 {
    /// Parameters from the operands' quantization, as TFLM's `CalculateOpDataMul`.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is not 0 (TFLM refuses others on int16), the multiplier is
    /// `2^31` or more, or the activation's bounds do not fit an `int32`.
    pub fn new(a: Quant, b: Quant, out: Quant, act: Activation) -> Result<Self, KernelError> {
        for (q, scale, zero_point) in [
            (a, "a scale", "a zero point"),
            (b, "b scale", "b zero point"),
            (out, "output scale", "output zero point"),
        ] {
            check_scale(q.scale, scale)?;
            if q.zero_point != 0 {
                return Err(KernelError::InvalidQuantization { what: zero_point });
            }
        }
        MulParams::resolve(a, b, out, act, RANGE).map(Self)
    }

    /// The shared arithmetic's parameters (multiplier, range).
    #[must_use]
    pub const fn params(&self) -> &MulParams {
        &self.0
    }
}

impl BinaryOp for MulParamsI16 {
    type Elem = i16;

    #[inline]
    fn prep_a(&self, a: i16) -> i32 {
        i32::from(a)
    }

    #[inline]
    fn prep_b(&self, b: i16) -> i32 {
        i32::from(b)
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i16 {
        // Both factors are int16 (zero points 0): the product is at most 2^30.
        let (multiplier, shift) = self.0.output_multiplier();
        let scaled = multiply_by_quantized_multiplier(a * b, multiplier, shift);
        let (min, max) = self.0.activation_range();
        requantized_to_i16(scaled, self.0.output_offset(), min, max)
    }
}

/// int16's bounds, as `i32`s.
const RANGE_I32: (i32, i32) = (i16::MIN as i32, i16::MAX as i32);

/// Packed ([`packed`](crate::packed)) as [`AddParams`] is, read back with int16 zero points
/// and an activation range inside int16.
impl Packed for AddParamsI16 {
    fn pack(&self, w: &mut Words<'_>) {
        self.0.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        AddParams::unpack_in(r, RANGE_I32).map(Self)
    }
}

/// Packed ([`packed`](crate::packed)) as [`MulParams`] is, read back with zero points of 0
/// and an activation range inside int16.
impl Packed for MulParamsI16 {
    fn pack(&self, w: &mut Words<'_>) {
        self.0.pack(w);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        MulParams::unpack_in(r, (0, 0), RANGE_I32).map(Self)
    }
}

/// 16x8 ADD with broadcasting: `out = a + b` over the shapes of `s` (TFLM's int16 `Add` with
/// `pot_scale = false`, or `BroadcastAdd4DSlow`: the same arithmetic). `a`, `b` and `out`
/// must have the lengths [`BroadcastShape::lens`] gives ([`KernelError::LengthMismatch`]
/// otherwise, before anything is written).
pub fn add(
    p: &AddParamsI16,
    s: &BroadcastShape,
    a: &[i16],
    b: &[i16],
    out: &mut [i16],
) -> Result<(), KernelError> {
    broadcast_untabulated(p, s, a, b, out)
}

/// 16x8 MUL with broadcasting: `out = a · b` over the shapes of `s` (TFLM's
/// `reference_integer_ops::Mul` / `BroadcastMul4DSlow` on int16). Lengths as for [`add`].
pub fn mul(
    p: &MulParamsI16,
    s: &BroadcastShape,
    a: &[i16],
    b: &[i16],
    out: &mut [i16],
) -> Result<(), KernelError> {
    broadcast_untabulated(p, s, a, b, out)
}

#[cfg(test)]
mod tests;
