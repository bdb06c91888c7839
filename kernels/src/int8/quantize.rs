//! int8 QUANTIZE (float → int8, and int8 → int8 requantization) and DEQUANTIZE (int8 →
//! float), bit-exact with TFLM's reference kernels.
//!
//! - [`requantize`]: TFLM's int8 → int8 QUANTIZE (`micro/kernels/quantize_common.cc`, which
//!   calls `reference_ops::Requantize` from `kernels/internal/reference/requantize.h`):
//!
//!   ```text
//!   (m, s) = QuantizeMultiplier(double(in_scale) / double(out_scale))
//!   out    = clamp(MultiplyByQuantizedMultiplier(x − in_zp, m, s) + out_zp, −128, 127)
//!   ```
//!
//!   `Requantize`'s shortcut for equal scales (an XOR with `0x80`) applies only between int8
//!   and uint8, never to int8 → int8, which always takes the multiplier path; with equal
//!   scales the multiplier is `(2^30, 1)` and the rescaling is exact.
//! - [`quantize_f32`]: TFLM's float → int8 QUANTIZE (`reference_ops::AffineQuantize`,
//!   `kernels/internal/reference/quantize.h`): `out = clamp(round(x / scale) + zp)`, where the
//!   division is in `float` (TFLM keeps the scale as a `double` but casts it back to `float`
//!   for the division) and `round` is `TfLiteRound`, C's `roundf`: ties away from zero.
//! - [`dequantize`]: TFLM's int8 → float DEQUANTIZE (`reference_ops::Dequantize`,
//!   `kernels/internal/reference/dequantize.h`): `out = float(double(scale) · (x − zp))`. The
//!   product of a `float` and an integer of at most 9 bits is exact in `double`, so the result
//!   is that product rounded once to `float` (which a `float` multiplication would also give).
//!
//! The same three with int16 on either side (TensorFlow Lite's 16x8 models): [`requantize_i16`]
//! (int16 → int16), [`requantize_i16_to_i8`], [`requantize_i8_to_i16`] (the same `Requantize`
//! arithmetic, clamped to the output type; [`RequantizeParams::with_ranges`]),
//! [`quantize_f32_to_i16`] and [`dequantize_i16`]. For int16 the products of step 1 and of
//! DEQUANTIZE have at most 17 significant bits, so they stay exact in `double`.
//!
//! And TFLM's integer QUANTIZE forms with int32 on one side: [`requantize_i8_to_i32`],
//! [`requantize_i16_to_i32`], [`requantize_i32_to_i8`], [`requantize_i32_to_i16`] (the same
//! `Requantize` loop; an int32 zero point may be any int32). With an int32 input, `x − zp` and
//! the final `+ zp` can overflow 32 bits, which TFLM's C++ leaves undefined; here they wrap, as
//! they do on the Arm targets TFLM runs on; so does the multiplier's left shift (an input of
//! `2^30` or more in magnitude with equal scales, whose shift is 1). `Requantize`'s equal-scale shortcut is for int8 ↔
//! uint8 only, so none of these take it: equal scales multiply by `(2^30, 1)`, an exact
//! identity.

use super::{
    check_quant, check_scale, general_multiplier, requantized_to_i8, round_half_away_from_zero,
    Quant,
};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed parameters of int8 → int8 QUANTIZE (TFLM's `OpDataQuantizeReference`); see
/// the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RequantizeParams {
    input_zero_point: i32,
    output_zero_point: i32,
    multiplier: i32,
    shift: i32,
}

impl RequantizeParams {
    /// Parameters for re-expressing `input`-quantized values in the `output` quantization.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and positive,
    /// a zero point is outside the int8 range, or `input.scale / output.scale` is `2^31` or
    /// more (its shift would not fit a 32-bit left shift).
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let real = f64::from(input.scale) / f64::from(output.scale);
        let (multiplier, shift) = general_multiplier(real, "output scale")?;
        Ok(Self {
            input_zero_point: input.zero_point,
            output_zero_point: output.zero_point,
            multiplier,
            shift,
        })
    }

    /// Parameters for re-expressing values of an `input`-quantized tensor of element type
    /// `input_type` in the `output` quantization of type `output_type` (int8 or int16 on
    /// either side): [`new`](Self::new) with each zero point checked against its own type.
    ///
    /// Errors as [`new`](Self::new).
    pub fn with_ranges(
        input: Quant,
        input_type: IntType,
        output: Quant,
        output_type: IntType,
    ) -> Result<Self, KernelError> {
        check_scale(input.scale, "input scale")?;
        check_scale(output.scale, "output scale")?;
        input_type.check_zero_point(input.zero_point, "input zero point")?;
        output_type.check_zero_point(output.zero_point, "output zero point")?;
        let real = f64::from(input.scale) / f64::from(output.scale);
        let (multiplier, shift) = general_multiplier(real, "output scale")?;
        Ok(Self {
            input_zero_point: input.zero_point,
            output_zero_point: output.zero_point,
            multiplier,
            shift,
        })
    }

    /// `(multiplier, shift)` of the rescaling (see
    /// [`quantize_multiplier`](crate::fixed_point::quantize_multiplier)).
    #[must_use]
    pub const fn multiplier(&self) -> (i32, i32) {
        (self.multiplier, self.shift)
    }

    /// `(input, output)` zero points.
    #[must_use]
    pub const fn zero_points(&self) -> (i32, i32) {
        (self.input_zero_point, self.output_zero_point)
    }
}

/// Packed forms ([`packed`](crate::packed)).
impl RequantizeParams {
    /// Writes the zero points and the rescaling.
    pub fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point);
        w.put_i32(self.output_zero_point);
        w.put_multiplier((self.multiplier, self.shift));
    }

    /// Reads what [`pack`](Self::pack) wrote for a rescaling from `input_type` to
    /// `output_type`, checked as [`with_ranges`](Self::with_ranges) makes it: each zero point
    /// inside its type, the rescaling as `quantize_multiplier` gives one (shift at most 31).
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for anything else.
    pub fn unpack(
        r: &mut WordReader<'_>,
        input_type: IntType,
        output_type: IntType,
    ) -> Result<Self, KernelError> {
        let ((imin, imax), (omin, omax)) = (input_type.range(), output_type.range());
        let input_zero_point = r.take_in(imin, imax, "input zero point")?;
        let output_zero_point = r.take_in(omin, omax, "output zero point")?;
        let (multiplier, shift) = r.take_multiplier(31, "output scale")?;
        Ok(Self {
            input_zero_point,
            output_zero_point,
            multiplier,
            shift,
        })
    }
}

impl Quant {
    /// Writes the quantization ([`packed`](crate::packed)): the scale's bits and the zero
    /// point (for the float conversions, which take the scale itself).
    pub fn pack(&self, w: &mut Words<'_>) {
        w.put(self.scale.to_bits());
        w.put_i32(self.zero_point);
    }

    /// Reads what [`pack`](Self::pack) wrote for a tensor of `int_type`: a finite positive
    /// scale and a zero point inside the type, as the conversions check them.
    ///
    /// Errors: [`KernelError::InvalidQuantization`] for anything else.
    pub fn unpack(r: &mut WordReader<'_>, int_type: IntType) -> Result<Self, KernelError> {
        let scale = f32::from_bits(r.take()?);
        check_scale(scale, "scale")?;
        let (min, max) = int_type.range();
        let zero_point = r.take_in(min, max, "zero point")?;
        Ok(Self { scale, zero_point })
    }
}

/// int8 → int8 QUANTIZE (requantization), elementwise (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize(p: &RequantizeParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        // x − zp is in [−255, 255].
        let scaled = multiply_by_quantized_multiplier(
            i32::from(x) - p.input_zero_point,
            p.multiplier,
            p.shift,
        );
        *o = requantized_to_i8(scaled, p.output_zero_point, -128, 127);
    }
    Ok(())
}

/// A quantized element type: where a zero point must lie and what an output clamps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IntType {
    /// int8.
    I8,
    /// int16.
    I16,
    /// int32 (QUANTIZE only; every zero point fits, and clamping to it changes nothing).
    I32,
}

impl IntType {
    /// The type's value range.
    const fn range(self) -> (i32, i32) {
        match self {
            IntType::I8 => (i8::MIN as i32, i8::MAX as i32),
            IntType::I16 => (i16::MIN as i32, i16::MAX as i32),
            IntType::I32 => (i32::MIN, i32::MAX),
        }
    }

    fn check_zero_point(self, zero_point: i32, what: &'static str) -> Result<(), KernelError> {
        let (min, max) = self.range();
        if (min..=max).contains(&zero_point) {
            Ok(())
        } else {
            Err(KernelError::InvalidQuantization { what })
        }
    }
}

/// TFLM's `Requantize` loop for any pair of int8 / int16 / int32 element types, the output
/// clamped to `output_type`'s range.
fn requantize_any<I: Copy + Into<i32>, O>(
    p: &RequantizeParams,
    output_type: IntType,
    input: &[I],
    out: &mut [O],
    narrow: impl Fn(i32) -> O,
) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    let (min, max) = output_type.range();
    for (o, &x) in out.iter_mut().zip(input) {
        // x − zp fits an i32 for int8 and int16; for int32 it wraps (see the module docs).
        let scaled = multiply_by_quantized_multiplier(
            x.into().wrapping_sub(p.input_zero_point),
            p.multiplier,
            p.shift,
        );
        *o = narrow(scaled.wrapping_add(p.output_zero_point).max(min).min(max));
    }
    Ok(())
}

/// int16 → int16 QUANTIZE (requantization), elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i16(
    p: &RequantizeParams,
    input: &[i16],
    out: &mut [i16],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I16, input, out, |v| v as i16)
}

/// int16 → int8 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i16_to_i8(
    p: &RequantizeParams,
    input: &[i16],
    out: &mut [i8],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I8, input, out, |v| v as i8)
}

/// int8 → int16 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i8_to_i16(
    p: &RequantizeParams,
    input: &[i8],
    out: &mut [i16],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I16, input, out, |v| v as i16)
}

/// int8 → int32 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i8_to_i32(
    p: &RequantizeParams,
    input: &[i8],
    out: &mut [i32],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I32, input, out, |v| v)
}

/// int16 → int32 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i16_to_i32(
    p: &RequantizeParams,
    input: &[i16],
    out: &mut [i32],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I32, input, out, |v| v)
}

/// int32 → int8 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i32_to_i8(
    p: &RequantizeParams,
    input: &[i32],
    out: &mut [i8],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I8, input, out, |v| v as i8)
}

/// int32 → int16 QUANTIZE, elementwise, with parameters from
/// [`RequantizeParams::with_ranges`] (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn requantize_i32_to_i16(
    p: &RequantizeParams,
    input: &[i32],
    out: &mut [i16],
) -> Result<(), KernelError> {
    requantize_any(p, IntType::I16, input, out, |v| v as i16)
}

/// float → int16 QUANTIZE with the quantization `q`, elementwise: [`quantize_f32`]'s
/// arithmetic clamped to the int16 range (TFLM's `AffineQuantize<float, int16_t>`).
///
/// Errors: [`KernelError::InvalidQuantization`] for a scale that is not finite and positive or
/// a zero point outside int16; [`KernelError::LengthMismatch`] when `out` is not as long as
/// `input`. Nothing is written on error.
pub fn quantize_f32_to_i16(q: Quant, input: &[f32], out: &mut [i16]) -> Result<(), KernelError> {
    check_scale(q.scale, "scale")?;
    IntType::I16.check_zero_point(q.zero_point, "zero point")?;
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        let rounded = round_half_away_from_zero(x / q.scale) as i32;
        *o = rounded
            .wrapping_add(q.zero_point)
            .max(i16::MIN.into())
            .min(i16::MAX.into()) as i16;
    }
    Ok(())
}

/// int16 → float DEQUANTIZE with the quantization `q`, elementwise: [`dequantize`]'s
/// arithmetic (TFLM's `Dequantize<int16_t>`).
///
/// Errors: [`KernelError::InvalidQuantization`] for a scale that is not finite and positive or
/// a zero point outside int16; [`KernelError::LengthMismatch`] when `out` is not as long as
/// `input`. Nothing is written on error.
pub fn dequantize_i16(q: Quant, input: &[i16], out: &mut [f32]) -> Result<(), KernelError> {
    check_scale(q.scale, "scale")?;
    IntType::I16.check_zero_point(q.zero_point, "zero point")?;
    check_len("output", input.len(), out.len())?;
    let scale = f64::from(q.scale);
    for (o, &x) in out.iter_mut().zip(input) {
        // x − zp has at most 17 bits: exact in double, one rounding to float.
        *o = (scale * f64::from(i32::from(x) - q.zero_point)) as f32;
    }
    Ok(())
}

/// float → int8 QUANTIZE with the quantization `q`, elementwise (see the [module docs](self)).
///
/// Values beyond the `int32` range after division (and NaN) are outside what TFLM's C++
/// defines (a float-to-int conversion that overflows); this function gives what TFLM does on
/// Arm, the targets it runs on: the conversion saturates (NaN converts to 0, Rust's `as` and
/// Arm's `VCVT` agree) and the zero point is added with two's-complement wrap-around, so for
/// example `+inf` with a positive zero point wraps to a negative sum and clamps to −128. Every
/// value whose quotient is below `2^31 − 128` in magnitude is unaffected.
///
/// Errors: [`KernelError::InvalidQuantization`] for a scale that is not finite and positive or
/// a zero point outside int8; [`KernelError::LengthMismatch`] when `out` is not as long as
/// `input`. Nothing is written on error.
pub fn quantize_f32(q: Quant, input: &[f32], out: &mut [i8]) -> Result<(), KernelError> {
    check_quant(q, "scale", "zero point")?;
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        let rounded = round_half_away_from_zero(x / q.scale);
        *o = requantized_to_i8(rounded as i32, q.zero_point, -128, 127);
    }
    Ok(())
}

/// int8 → float DEQUANTIZE with the quantization `q`, elementwise (see the
/// [module docs](self)).
///
/// Errors: [`KernelError::InvalidQuantization`] for a scale that is not finite and positive or
/// a zero point outside int8; [`KernelError::LengthMismatch`] when `out` is not as long as
/// `input`. Nothing is written on error.
pub fn dequantize(q: Quant, input: &[i8], out: &mut [f32]) -> Result<(), KernelError> {
    check_quant(q, "scale", "zero point")?;
    check_len("output", input.len(), out.len())?;
    let scale = f64::from(q.scale);
    for (o, &x) in out.iter_mut().zip(input) {
        // Exact in double; one rounding to float, as TFLM's static_cast<float>.
        *o = (scale * f64::from(i32::from(x) - q.zero_point)) as f32;
    }
    Ok(())
}

#[cfg(test)]
mod tests_int16 {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn int16_requantizations_clamp_to_their_output_type() {
        let (i8t, i16t) = (IntType::I8, IntType::I16);
        // int16 (scale 1/1000) to int8 (scale 1/100, zero point 3): x / 10 + 3.
        let p = RequantizeParams::with_ranges(q(0.001, 0), i16t, q(0.01, 3), i8t).unwrap();
        let mut out = [0i8; 5];
        requantize_i16_to_i8(&p, &[0, 15, -15, 30_000, -30_000], &mut out).unwrap();
        assert_eq!(out, [3, 5, 1, 127, -128]);
        // int8 to int16 with a finer scale: (x − zp) · 256.
        let p = RequantizeParams::with_ranges(q(1.0, -2), i8t, q(1.0 / 256.0, 0), i16t).unwrap();
        let mut out = [0i16; 3];
        requantize_i8_to_i16(&p, &[-2, 127, -128], &mut out).unwrap();
        assert_eq!(out, [0, i16::MAX, -126 * 256]);
        // int16 to int16, doubling: saturates at both ends.
        let p = RequantizeParams::with_ranges(q(2.0, 0), i16t, q(1.0, 0), i16t).unwrap();
        requantize_i16(&p, &[-20_000, 7, 20_000], &mut out).unwrap();
        assert_eq!(out, [i16::MIN, 14, i16::MAX]);
        assert!(requantize_i16(&p, &[0; 2], &mut out).is_err());
    }

    #[test]
    fn int16_zero_points_are_checked_against_their_type() {
        let (i8t, i16t) = (IntType::I8, IntType::I16);
        assert!(RequantizeParams::with_ranges(q(1.0, 300), i16t, q(1.0, 0), i8t).is_ok());
        assert!(RequantizeParams::with_ranges(q(1.0, 0), i16t, q(1.0, 300), i8t).is_err());
        assert!(RequantizeParams::with_ranges(q(1.0, 40_000), i16t, q(1.0, 0), i16t).is_err());
        assert!(RequantizeParams::with_ranges(q(0.0, 0), i16t, q(1.0, 0), i16t).is_err());
        assert!(quantize_f32_to_i16(q(1.0, 40_000), &[], &mut []).is_err());
        assert!(dequantize_i16(q(f32::NAN, 0), &[], &mut []).is_err());
    }

    #[test]
    fn int32_requantizations() {
        let (i8t, i16t, i32t) = (IntType::I8, IntType::I16, IntType::I32);
        // int16 to int32 with a finer scale and a large zero point: (x − 1) · 65536 + 10^9.
        let p =
            RequantizeParams::with_ranges(q(1.0, 1), i16t, q(1.0 / 65536.0, 1_000_000_000), i32t)
                .unwrap();
        let mut wide = [0i32; 3];
        requantize_i16_to_i32(&p, &[1, 2, -100], &mut wide).unwrap();
        assert_eq!(
            wide,
            [1_000_000_000, 1_000_065_536, 1_000_000_000 - 101 * 65536]
        );
        // int32 to int16, equal scales: the identity, then the clamp.
        let p = RequantizeParams::with_ranges(q(0.5, 0), i32t, q(0.5, 0), i16t).unwrap();
        assert_eq!(p.multiplier(), (1 << 30, 1));
        let mut out = [0i16; 4];
        requantize_i32_to_i16(&p, &[-5, 40_000, -(1 << 29), 1 << 29], &mut out).unwrap();
        assert_eq!(out, [-5, i16::MAX, i16::MIN, i16::MAX]);
        // From 2^30 in magnitude the multiplier's left shift wraps, as TFLM's does on Arm.
        requantize_i32_to_i16(&p, &[i32::MIN, i32::MAX], &mut out[..2]).unwrap();
        assert_eq!(out[..2], [0, -1]);
        // int32 to int8 and int8 to int32.
        let p = RequantizeParams::with_ranges(q(1.0, -7), i32t, q(4.0, 2), i8t).unwrap();
        let mut out8 = [0i8; 3];
        requantize_i32_to_i8(&p, &[-7, 1, 10_000], &mut out8).unwrap();
        assert_eq!(out8, [2, 4, 127]);
        let p = RequantizeParams::with_ranges(q(2.0, 3), i8t, q(1.0, -100_000), i32t).unwrap();
        requantize_i8_to_i32(&p, &[3, -128], &mut wide[..2]).unwrap();
        assert_eq!(wide[..2], [-100_000, -100_000 - 262]);
        // An int32 zero point of any value; lengths checked.
        assert!(RequantizeParams::with_ranges(q(1.0, i32::MIN), i32t, q(1.0, 0), i8t).is_ok());
        assert!(requantize_i32_to_i8(&p, &[0; 2], &mut out8).is_err());
        assert!(requantize_i8_to_i32(&p, &[0; 2], &mut wide).is_err());
    }

    #[test]
    fn int16_float_conversions() {
        let mut out = [0i16; 6];
        quantize_f32_to_i16(
            q(0.5, 1),
            &[0.25, -0.25, 1.0, 1e9, -1e9, f32::NAN],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [2, 0, 3, i16::MAX, i16::MIN, 1]);
        let mut f = [0f32; 3];
        dequantize_i16(q(0.5, 1), &[1, i16::MAX, i16::MIN], &mut f).unwrap();
        assert_eq!(f, [0.0, 16383.0, -16384.5]);
        assert!(dequantize_i16(q(0.5, 1), &[1], &mut f).is_err());
    }
}
