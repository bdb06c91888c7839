//! int8 SUB, bit-exact with TFLM's reference kernel.
//!
//! Arithmetic (TFLM `micro/kernels/sub_common.cc` `CalculateOpDataSub` for the parameters,
//! `kernels/internal/reference/sub.h` `SubElementwise` / `BroadcastQuantSubSlow` per element):
//!
//! ```text
//! twice_max = 2 · max(a_scale, b_scale)                                   (float)
//! a' = rescale((a − a_zp) · 2^20, a_scale / twice_max)   (float quotient, then double)
//! b' = rescale((b − b_zp) · 2^20, b_scale / twice_max)
//! out = clamp(rescale(a' − b', twice_max / (2^20 · out_scale)) + out_zp)
//! ```
//!
//! This is ADD's arithmetic with a subtraction, except for one detail of the parameters: where
//! ADD computes the three real multipliers in `double`, SUB computes them in `float` and only
//! widens the quotients (`static_cast<double>(input1->params.scale / twice_max_input_scale)`),
//! so the multipliers can differ from ADD's in the last bits. Each `rescale` is a doubling high
//! multiply and a rounding right shift (TFLM's `MultiplyByQuantizedMultiplierSmallerThanOneExp`).
//! The second input is rescaled exactly like the first and then subtracted: TFLM does not fold
//! the subtraction into a negated input-2 multiplier, which would round the ties of `b'` the
//! other way (the doubling high multiply rounds ties towards +∞, so `−x·m` and `−(x·m)` can
//! differ by one).
//!
//! Broadcasting shapes: [`sub_broadcast`](super::sub_broadcast).

use super::broadcast::elementwise;
use super::{activation_range, check_quant, Activation, Quant, ADD_LEFT_SHIFT};
use crate::fixed_point::quantize_multiplier_smaller_than_one_exp;
use crate::packed::{CommonScale, Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed parameters of int8 SUB (TFLM's `OpDataSub`); see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubParams {
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

impl SubParams {
    /// Parameters for `out = a − b` from the operands' quantization, as TFLM's Prepare computes
    /// them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, a multiplier is not in `(0, 1)` once quantized
    /// (TFLM's `QuantizeMultiplierSmallerThanOneExp` aborts on that: an output scale so small
    /// relative to the inputs' that `twice_max / (2^20 · out_scale)` reaches one, or float
    /// overflow or underflow of the intermediate products), or the fused activation's bounds do
    /// not fit an `int32`.
    pub fn new(a: Quant, b: Quant, out: Quant, act: Activation) -> Result<Self, KernelError> {
        check_quant(a, "a scale", "a zero point")?;
        check_quant(b, "b scale", "b zero point")?;
        check_quant(out, "output scale", "output zero point")?;

        // All in float, as sub_common.cc does; std::max(x, y) is `x < y ? y : x`.
        let twice_max_input_scale = 2.0 * if a.scale < b.scale { b.scale } else { a.scale };
        let real_input1 = f64::from(a.scale / twice_max_input_scale);
        let real_input2 = f64::from(b.scale / twice_max_input_scale);
        // `(1 << left_shift) * output_scale` is an int times a float: a float product.
        let left_shift_scale = (1_i32 << ADD_LEFT_SHIFT) as f32;
        let real_output = f64::from(twice_max_input_scale / (left_shift_scale * out.scale));

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
        let (activation_min, activation_max) = activation_range(act, out)?;

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

    /// `(multiplier, shift)` of the difference's rescaling to the output scale; the shift is
    /// at most 0.
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

/// Packed ([`packed`](crate::packed)) as [`AddParams`](super::AddParams) is: the offsets, the
/// three rescalings (each below one) and the activation range, read back checked as
/// [`SubParams::new`] makes them.
impl Packed for SubParams {
    fn pack(&self, w: &mut Words<'_>) {
        CommonScale {
            input1_offset: self.input1_offset,
            input2_offset: self.input2_offset,
            output_offset: self.output_offset,
            input1: self.input1_multiplier(),
            input2: self.input2_multiplier(),
            output: self.output_multiplier(),
        }
        .pack(w);
        w.put_i32(self.activation_min);
        w.put_i32(self.activation_max);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let q = CommonScale::unpack(r, (i8::MIN.into(), i8::MAX.into()), 0)?;
        let (activation_min, activation_max) = r.take_range(i8::MIN.into(), i8::MAX.into())?;
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

/// out = a − b, elementwise, with TFLM's int8 SUB arithmetic (see [`SubParams`]).
///
/// `a`, `b` and `out` must have the same length ([`KernelError::LengthMismatch`] names the
/// first operand that differs from `a`).
pub fn sub(p: &SubParams, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    // The per-element arithmetic is SubParams' `BinaryOp` implementation in broadcast.rs.
    elementwise(p, a, b, out);
    Ok(())
}
