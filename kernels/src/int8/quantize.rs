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

use super::{check_quant, general_multiplier, requantized_to_i8, round_half_away_from_zero, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
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
