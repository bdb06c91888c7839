//! LOGISTIC and TANH, int8 and int16, bit-exact with TFLM's reference kernels.
//!
//! # int8 (`reference_integer_ops::Logistic` / `Tanh` for `int8_t`, parameters from
//! `micro/kernels/logistic_common.cc` and `micro/kernels/tanh.cc`)
//!
//! TFLM computes them in gemmlowp fixed point, not through a lookup table (TensorFlow Lite's
//! optimized kernels use a table; TFLM's reference kernels do not):
//!
//! ```text
//! (m, s)  = frexp(double(input_scale) · 2^27)        m → round(m · 2^31)
//! radius  = floor(15 · 2^27 / 2^s)                   (CalculateInputRadius(4, s, 31))
//! d       = x − input_zp
//! d ≤ −radius → −128;   d ≥ radius → 127;   otherwise
//! q4      = MultiplyByQuantizedMultiplier(d, m, s)   (Q4.27)
//! LOGISTIC: clamp(RoundingDivideByPOT(gemmlowp::logistic(q4), 23) − 128, −128, 127)
//! TANH:     clamp(RoundingDivideByPOT(gemmlowp::tanh(q4), 24), −128, 127)
//! ```
//!
//! The output quantization is implied (LOGISTIC: scale 1/256, zero point −128; TANH: 1/128,
//! 0): TFLM checks LOGISTIC's output zero point only, and nothing of TANH's output, so neither
//! do these parameters.
//!
//! # int16 (`reference_integer_ops::Logistic` / `Tanh` for `int16_t`)
//!
//! Both interpolate the 256-entry table of `sigmoid(i / 24)` in Q0.16 that TFLM shares
//! between them (`sigmoid_table_uint16`, `kernels/internal/common.h`; `tanh(x) =
//! 2 · sigmoid(2x) − 1`). The input is first rescaled to units of `1 / (3 · 4096)`:
//!
//! - when the input scale is a power of two (TFLM's `CheckedLog2`) with
//!   `12 + log2(scale)` equal to 0 (LOGISTIC) or to 0 or 1 (TANH), by `x · (3 << that)`;
//! - otherwise by `(x · m + 2^(k−1)) >> k` with `m = trunc(scale · 3 · 4096 · 2^k)`, `k` the
//!   number of doublings that bring `scale · 12288` above 16383.5 (at most 31).
//!
//! The table index is the magnitude's top bits (`>> 9` for LOGISTIC, `>> 8` for TANH), the
//! low bits interpolate linearly between two entries, and the sign folds the result around
//! one half (LOGISTIC) or zero (TANH). Both zero points must be 0 and the output scale
//! `2^−15` (TFLM's checks).

use super::{check_scale, Quant};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, quantize_multiplier, rounding_divide_by_pot,
};
use crate::gemmlowp;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Integer bits of the rescaled int8 input (Q4.27), TFLM's `kInputIntegerBits` for int8.
const INPUT_INTEGER_BITS: u32 = 4;

/// Parameters of the int8 kernels, shared by LOGISTIC and TANH (TFLM's `OpDataLogistic` and
/// TANH's `OpData`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Fixed8 {
    input_zero_point: i32,
    input_range_radius: i32,
    input_multiplier: i32,
    input_left_shift: i32,
}

impl Fixed8 {
    fn new(input: Quant) -> Result<Self, KernelError> {
        check_scale(input.scale, "input scale")?;
        check_zero_point(
            input.zero_point,
            i8::MIN.into(),
            i8::MAX.into(),
            "input zero point",
        )?;
        let real = f64::from(input.scale) * f64::from(1_u32 << (31 - INPUT_INTEGER_BITS));
        // frexp then round(fraction · 2^31): quantize_multiplier's first steps. Its two
        // adjustments cannot apply: an f32 scale's fraction has 24 bits, so it never rounds up
        // to 2^31, and a shift below −31 (flushed to a zero multiplier) is refused below.
        let (multiplier, shift) = quantize_multiplier(real);
        // TFLM's radius divides by `1LL << shift`, undefined for a negative shift (an input
        // scale below 2^−28): refused.
        if shift < 0 || multiplier == 0 {
            return Err(KernelError::InvalidQuantization {
                what: "input scale",
            });
        }
        Ok(Self {
            input_zero_point: input.zero_point,
            input_range_radius: input_radius(shift),
            input_multiplier: multiplier,
            input_left_shift: shift,
        })
    }

    /// The saturated output for `x`, or the input in Q4.27 to compute it from.
    #[inline]
    fn rescale(&self, x: i8) -> Result<i32, i8> {
        let d = i32::from(x) - self.input_zero_point;
        if d <= -self.input_range_radius {
            Err(i8::MIN)
        } else if d >= self.input_range_radius {
            Err(i8::MAX)
        } else {
            Ok(multiply_by_quantized_multiplier(
                d,
                self.input_multiplier,
                self.input_left_shift,
            ))
        }
    }
}

/// TFLM's `CalculateInputRadius(4, shift, 31)`: `floor(15 · 2^27 / 2^shift)`, the largest
/// input difference whose Q4.27 rescaling stays below 16, computed exactly in integers.
fn input_radius(shift: i32) -> i32 {
    let max_rescaled: u64 = ((1 << INPUT_INTEGER_BITS) - 1) << (31 - INPUT_INTEGER_BITS);
    // For shifts of 31 and more the quotient is below one (the radius is 0).
    u32::try_from(shift)
        .ok()
        .and_then(|s| max_rescaled.checked_shr(s))
        .map_or(0, |r| r as i32)
}

fn check_zero_point(zp: i32, min: i32, max: i32, what: &'static str) -> Result<(), KernelError> {
    if (min..=max).contains(&zp) {
        Ok(())
    } else {
        Err(KernelError::InvalidQuantization { what })
    }
}

/// Precomputed parameters of int8 LOGISTIC; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LogisticParams(Fixed8);

impl LogisticParams {
    /// Parameters for an `input`-quantized tensor and an `output` one, as TFLM's Prepare
    /// computes them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when the input scale is not finite and
    /// positive or below `2^−28`, the input zero point is outside int8, or the output zero point
    /// is not −128 (TFLM's check; the output scale is not checked, as in TFLM).
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        if output.zero_point != -128 {
            return Err(KernelError::InvalidQuantization {
                what: "output zero point",
            });
        }
        Fixed8::new(input).map(Self)
    }

    /// `(multiplier, shift)` of the input rescaling to Q4.27 and the input radius.
    #[must_use]
    pub const fn input_rescale(&self) -> (i32, i32, i32) {
        (
            self.0.input_multiplier,
            self.0.input_left_shift,
            self.0.input_range_radius,
        )
    }
}

/// Precomputed parameters of int8 TANH; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TanhParams(Fixed8);

impl TanhParams {
    /// Parameters for an `input`-quantized tensor, as TFLM's Prepare computes them (TFLM
    /// checks nothing of the output's quantization; the kernel's output is in units of 1/128
    /// around zero).
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when the input scale is not finite and
    /// positive or below `2^−28`, or the input zero point is outside int8.
    pub fn new(input: Quant) -> Result<Self, KernelError> {
        Fixed8::new(input).map(Self)
    }

    /// `(multiplier, shift)` of the input rescaling to Q4.27 and the input radius.
    #[must_use]
    pub const fn input_rescale(&self) -> (i32, i32, i32) {
        (
            self.0.input_multiplier,
            self.0.input_left_shift,
            self.0.input_range_radius,
        )
    }
}

/// int8 LOGISTIC, elementwise (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn logistic(p: &LogisticParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = match p.0.rescale(x) {
            Err(saturated) => saturated,
            Ok(q4) => {
                let q0 = gemmlowp::logistic(q4, INPUT_INTEGER_BITS);
                // Q0.31 to units of 1/256, then the output zero point −128.
                let y = rounding_divide_by_pot(q0, 31 - 8) - 128;
                y.clamp(i8::MIN.into(), i8::MAX.into()) as i8
            }
        };
    }
    Ok(())
}

/// int8 TANH, elementwise (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn tanh(p: &TanhParams, input: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = match p.0.rescale(x) {
            Err(saturated) => saturated,
            Ok(q4) => {
                let q0 = gemmlowp::tanh(q4, INPUT_INTEGER_BITS);
                // Q0.31 to units of 1/128.
                let y = rounding_divide_by_pot(q0, 31 - 7);
                y.clamp(i8::MIN.into(), i8::MAX.into()) as i8
            }
        };
    }
    Ok(())
}

/// TFLM's `sigmoid_table_uint16`: `sigmoid(i / 24)` in Q0.16 for `i` in `0..256` (the last
/// entry saturated to 65535).
const SIGMOID_TABLE: [u16; 256] = [
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
];

/// Fractional bits of an int16 LOGISTIC or TANH output (its scale must be 2^−15).
const OUTPUT_FRACTIONAL_BITS: i32 = 15;

/// Parameters of the int16 kernels: the input rescaling to units of 1/(3 · 4096), a
/// multiplication then a rounding right shift (TFLM's `input_multiplier` and
/// `input_left_shift`, with the power-of-two case's multiplier already substituted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Table16 {
    multiplier: i32,
    shift: u32,
}

impl Table16 {
    /// `max_pot_shift`: the largest `12 + log2(scale)` TFLM takes the power-of-two path for
    /// (0 for LOGISTIC, 1 for TANH).
    fn new(input: Quant, output: Quant, max_pot_shift: i32) -> Result<Self, KernelError> {
        check_scale(input.scale, "input scale")?;
        check_scale(output.scale, "output scale")?;
        if input.zero_point != 0 {
            return Err(KernelError::InvalidQuantization {
                what: "input zero point",
            });
        }
        if output.zero_point != 0 {
            return Err(KernelError::InvalidQuantization {
                what: "output zero point",
            });
        }
        if checked_log2(output.scale) != Some(-OUTPUT_FRACTIONAL_BITS) {
            return Err(KernelError::InvalidQuantization {
                what: "output scale",
            });
        }
        // kInputIntegerBits = 3: 15 − 3 + log2(scale).
        let pot_shift = checked_log2(input.scale).map(|l| 12 + l);
        if let Some(s) = pot_shift.filter(|s| (0..=max_pot_shift).contains(s)) {
            return Ok(Self {
                multiplier: 3 << s,
                shift: 0,
            });
        }
        // Exact in double: a float scale times 3 · 2^12 and powers of two.
        let mut multiplier = f64::from(input.scale) * 4096.0 * 3.0;
        let mut shift = 0;
        while multiplier <= 32767.0 / 2.0 && shift <= 30 {
            shift += 1;
            multiplier *= 2.0;
        }
        // TFLM's `static_cast<int32_t>` truncates; a multiplier above 32767 (an input scale
        // above 2.67, which TFLM only DCHECKs) is refused: its products would overflow.
        if multiplier > 32767.0 {
            return Err(KernelError::InvalidQuantization {
                what: "input scale",
            });
        }
        Ok(Self {
            multiplier: multiplier as i32,
            shift,
        })
    }

    /// The input in units of 1/12288: LOGISTIC's table steps of 1/24 are then 2^9 units,
    /// TANH's of 1/48 (its input is doubled) 2^8.
    #[inline]
    fn rescale(&self, x: i16) -> i32 {
        let round = match self.shift {
            0 => 0,
            s => 1 << (s - 1),
        };
        // |x| ≤ 2^15 and the multiplier ≤ 32767 (or 6 when a power of two): no overflow.
        (i32::from(x) * self.multiplier + round) >> self.shift
    }
}

/// TFLM's `CheckedLog2` of a positive scale: `Some(round(log2(x)))` when `log2(x)` is within
/// 0.001 of an integer, else `None`.
///
/// TFLM computes `log2` as `logf(x) · (1 / logf(2))` in `float`; this compares the mantissa with
/// the exact thresholds `2^0.001`, `√2` and `2^0.999` instead (`core` has no logarithm). The two
/// can only disagree for a scale within a few float rounding errors of one of those thresholds,
/// which no quantizer produces.
fn checked_log2(x: f32) -> Option<i32> {
    /// 2^0.001, √2 and 2^0.999, as fractions of [1, 2).
    const NEAR_ONE: f64 = 1.000_693_387_462_580_7;
    const SQRT_2: f64 = core::f64::consts::SQRT_2;
    const NEAR_TWO: f64 = 1.998_614_185_801_146_5;
    if !(x.is_finite() && x > 0.0) {
        return None;
    }
    // x = m · 2^e with m in [1, 2), by the f64 bits (every f32 is a normal f64).
    let bits = f64::from(x).to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32 - 1023;
    let m = f64::from_bits((bits & ((1 << 52) - 1)) | (1023 << 52));
    let rounded = if m < SQRT_2 { e } else { e + 1 };
    (!(NEAR_ONE..=NEAR_TWO).contains(&m)).then_some(rounded)
}

/// Precomputed parameters of int16 LOGISTIC; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Logistic16Params(Table16);

impl Logistic16Params {
    /// Parameters from the input and output quantizations, as TFLM's Prepare computes them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is not 0, the output scale is not `2^−15` (TFLM's checks), or the
    /// input scale is above `32767 / 12288` (its multiplier would overflow TFLM's arithmetic).
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        Table16::new(input, output, 0).map(Self)
    }

    /// `(multiplier, right shift)` of the input rescaling.
    #[must_use]
    pub const fn input_rescale(&self) -> (i32, u32) {
        (self.0.multiplier, self.0.shift)
    }
}

/// Precomputed parameters of int16 TANH; see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Tanh16Params(Table16);

impl Tanh16Params {
    /// Parameters from the input and output quantizations, as TFLM's Prepare computes them.
    ///
    /// Errors as [`Logistic16Params::new`].
    pub fn new(input: Quant, output: Quant) -> Result<Self, KernelError> {
        Table16::new(input, output, 1).map(Self)
    }

    /// `(multiplier, right shift)` of the input rescaling.
    #[must_use]
    pub const fn input_rescale(&self) -> (i32, u32) {
        (self.0.multiplier, self.0.shift)
    }
}

/// int16 LOGISTIC, elementwise (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn logistic_i16(
    p: &Logistic16Params,
    input: &[i16],
    out: &mut [i16],
) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        let v = p.0.rescale(x);
        let magnitude = v.unsigned_abs();
        // Table steps of 1/24 are 2^9 input units of 1/12288.
        let index = (magnitude >> 9) as usize;
        let mut result: u32 = match (SIGMOID_TABLE.get(index), SIGMOID_TABLE.get(index + 1)) {
            (Some(&a), Some(&b)) if index < 255 => {
                let (a, b) = (u32::from(a), u32::from(b));
                (a << 9).wrapping_add((magnitude & 0x1ff).wrapping_mul(b.wrapping_sub(a)))
            }
            _ => 0x7fff << 10,
        };
        // sigmoid(−x) = 1 − sigmoid(x), rounded back to Q0.15 (in unsigned wrapping
        // arithmetic, as TFLM's uint32_t).
        result = if v >= 0 {
            result.wrapping_add(1 << 9)
        } else {
            (1_u32 << 25)
                .wrapping_sub(result)
                .wrapping_add((1 << 9) - 1)
        };
        *o = (result >> 10) as u16 as i16;
    }
    Ok(())
}

/// int16 TANH, elementwise (see the [module docs](self)).
///
/// `input` and `out` must have the same length ([`KernelError::LengthMismatch`] otherwise).
pub fn tanh_i16(p: &Tanh16Params, input: &[i16], out: &mut [i16]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        let v = p.0.rescale(x);
        let magnitude = v.unsigned_abs();
        // tanh(x) = 2 · sigmoid(2x) − 1: table steps of 1/48 are 2^8 input units.
        let index = (magnitude >> 8) as usize;
        let mut result: i32 = match (SIGMOID_TABLE.get(index), SIGMOID_TABLE.get(index + 1)) {
            (Some(&a), Some(&b)) if index < 255 => {
                let (a, b) = (u32::from(a), u32::from(b));
                (a << 8).wrapping_add((magnitude & 0xff).wrapping_mul(b.wrapping_sub(a))) as i32
            }
            _ => 0xffff << 8,
        };
        result = if v >= 0 {
            result - (1 << 23) + (1 << 7)
        } else {
            -result + (1 << 23) + (1 << 7) - 1
        };
        *o = (result >> 8) as i16;
    }
    Ok(())
}

/// Most an int8 input rescaling's shift can be: an `f32` scale is below `2^128`, times `2^27`.
const MAX_FIXED8_SHIFT: i32 = 155;

/// Packed ([`packed`](crate::packed)): the input zero point and rescaling; the radius follows
/// from the shift, as [`Fixed8::new`] derives it.
impl Packed for Fixed8 {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.input_zero_point);
        w.put_i32(self.input_multiplier);
        w.put_i32(self.input_left_shift);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let input_zero_point = r.take_zero_point("input zero point")?;
        let input_multiplier = r.take_in(1 << 30, i32::MAX, "input scale")?;
        let input_left_shift = r.take_in(0, MAX_FIXED8_SHIFT, "input scale")?;
        Ok(Self {
            input_zero_point,
            input_range_radius: input_radius(input_left_shift),
            input_multiplier,
            input_left_shift,
        })
    }
}

/// Packed ([`packed`](crate::packed)): the multiplier, at most 32767 (the bound that keeps the
/// rescaling's product inside `i32`), and the right shift, at most 31.
impl Packed for Table16 {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_i32(self.multiplier);
        w.put(self.shift);
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let multiplier = r.take_in(0, 32767, "input scale")?;
        // In 0..=31 (checked), so it fits a u32.
        let shift = r.take_in(0, 31, "input scale")? as u32;
        Ok(Self { multiplier, shift })
    }
}

/// The four parameter types pack as the arithmetic they wrap.
macro_rules! packed_as_inner {
    ($($params:ident($inner:ident)),*) => {$(
        impl Packed for $params {
            fn pack(&self, w: &mut Words<'_>) {
                self.0.pack(w);
            }
            fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
                $inner::unpack(r).map(Self)
            }
        }
    )*};
}

packed_as_inner!(
    LogisticParams(Fixed8),
    TanhParams(Fixed8),
    Logistic16Params(Table16),
    Tanh16Params(Table16)
);

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn int8_logistic_follows_the_real_function() {
        let p = LogisticParams::new(q(0.1, 3), q(1.0 / 256.0, -128)).unwrap();
        let input: std::vec::Vec<i8> = (-128..=127).collect();
        let mut out = [0i8; 256];
        logistic(&p, &input, &mut out).unwrap();
        for (&x, &y) in input.iter().zip(&out) {
            let want = 1.0 / (1.0 + (-(0.1 * f64::from(i32::from(x) - 3))).exp());
            let got = (f64::from(y) + 128.0) / 256.0;
            assert!((got - want).abs() <= 1.0 / 256.0, "x={x} y={y}");
        }
    }

    #[test]
    fn int8_tanh_follows_the_real_function() {
        let p = TanhParams::new(q(0.03, -5)).unwrap();
        let input: std::vec::Vec<i8> = (-128..=127).collect();
        let mut out = [0i8; 256];
        tanh(&p, &input, &mut out).unwrap();
        for (&x, &y) in input.iter().zip(&out) {
            let want = (0.03 * f64::from(i32::from(x) + 5)).tanh();
            let got = f64::from(y) / 128.0;
            assert!((got - want).abs() <= 1.0 / 128.0 + 1e-9, "x={x} y={y}");
        }
    }

    #[test]
    fn int8_radius_saturates() {
        // Scale 1: 2^27 = 0.5 · 2^28, shift 28, radius floor(15 · 2^27 / 2^28) = 7.
        let p = TanhParams::new(q(1.0, 0)).unwrap();
        assert_eq!(p.input_rescale().1, 28);
        assert_eq!(p.input_rescale().2, 7);
        let mut out = [0i8; 4];
        tanh(&p, &[-7, 7, 6, 0], &mut out).unwrap();
        assert_eq!(out, [-128, 127, 127, 0]);
        // A huge scale: radius 0, so even zero saturates (to −128), as in TFLM.
        let p = LogisticParams::new(q(1e10, 0), q(1.0 / 256.0, -128)).unwrap();
        assert_eq!(p.input_rescale().2, 0);
        logistic(&p, &[0, 1, -1, 127], &mut out).unwrap();
        assert_eq!(out, [-128, 127, -128, 127]);
    }

    #[test]
    fn int8_refusals() {
        let out_q = q(1.0 / 256.0, -128);
        assert!(LogisticParams::new(q(0.1, 0), q(1.0 / 256.0, 0)).is_err());
        assert!(LogisticParams::new(q(0.0, 0), out_q).is_err());
        assert!(LogisticParams::new(q(f32::NAN, 0), out_q).is_err());
        assert!(LogisticParams::new(q(0.1, 200), out_q).is_err());
        assert!(TanhParams::new(q(1e-9, 0)).is_err());
        let p = TanhParams::new(q(0.1, 0)).unwrap();
        assert!(matches!(
            tanh(&p, &[0; 3], &mut [0; 2]),
            Err(KernelError::LengthMismatch { .. })
        ));
        let p = LogisticParams::new(q(0.1, 0), out_q).unwrap();
        assert!(logistic(&p, &[0; 3], &mut [0; 4]).is_err());
    }

    #[test]
    fn checked_log2_finds_powers_of_two() {
        assert_eq!(checked_log2(1.0 / 32768.0), Some(-15));
        assert_eq!(checked_log2(1.0), Some(0));
        assert_eq!(checked_log2(4096.0), Some(12));
        assert_eq!(checked_log2(1.0 / 4096.0 * 1.0001), Some(-12));
        assert_eq!(checked_log2(1.0 / 4096.0 * 0.9999), Some(-12));
        assert_eq!(checked_log2(3.0), None);
        assert_eq!(checked_log2(1.0 / 30000.0), None);
        assert_eq!(checked_log2(0.0), None);
        assert_eq!(checked_log2(f32::INFINITY), None);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn int16_follows_the_real_functions() {
        let out_q = q(1.0 / 32768.0, 0);
        for scale in [
            1.0 / 4096.0,
            1.0 / 2048.0,
            8.0 / 32768.0 * 1.3,
            0.0004,
            1e-6,
        ] {
            let input: std::vec::Vec<i16> = (-32768..=32767).step_by(7).collect();
            let mut out = std::vec![0i16; input.len()];
            let p = Logistic16Params::new(q(scale, 0), out_q).unwrap();
            logistic_i16(&p, &input, &mut out).unwrap();
            for (&x, &y) in input.iter().zip(&out) {
                let r = f64::from(scale) * f64::from(x);
                let want = 1.0 / (1.0 + (-r).exp());
                assert!(
                    (f64::from(y) / 32768.0 - want).abs() < 2e-4,
                    "s={scale} x={x} y={y}"
                );
            }
            let p = Tanh16Params::new(q(scale, 0), out_q).unwrap();
            tanh_i16(&p, &input, &mut out).unwrap();
            for (&x, &y) in input.iter().zip(&out) {
                let want = (f64::from(scale) * f64::from(x)).tanh();
                assert!(
                    (f64::from(y) / 32768.0 - want).abs() < 4e-4,
                    "s={scale} x={x} y={y}"
                );
            }
        }
    }

    #[test]
    fn int16_power_of_two_paths() {
        let out_q = q(1.0 / 32768.0, 0);
        let p = Logistic16Params::new(q(1.0 / 4096.0, 0), out_q).unwrap();
        assert_eq!(p.input_rescale(), (3, 0));
        // 2^−11 is a power of two but beyond LOGISTIC's: the general path.
        let p = Logistic16Params::new(q(1.0 / 2048.0, 0), out_q).unwrap();
        assert_eq!(p.input_rescale(), (3 << 13, 12));
        let p = Tanh16Params::new(q(1.0 / 2048.0, 0), out_q).unwrap();
        assert_eq!(p.input_rescale(), (6, 0));
        // Saturation at both ends, and zero.
        let p = Tanh16Params::new(q(1.0 / 1024.0, 0), out_q).unwrap();
        let mut out = [0i16; 3];
        tanh_i16(&p, &[i16::MIN, i16::MAX, 0], &mut out).unwrap();
        assert_eq!(out, [-32767, 32767, 0]);
        let p = Logistic16Params::new(q(1.0 / 1024.0, 0), out_q).unwrap();
        logistic_i16(&p, &[i16::MIN, i16::MAX, 0], &mut out).unwrap();
        assert_eq!(out, [1, 32767, 16384]);
    }

    #[test]
    fn int16_refusals() {
        let out_q = q(1.0 / 32768.0, 0);
        assert!(Logistic16Params::new(q(0.001, 1), out_q).is_err());
        assert!(Logistic16Params::new(q(0.001, 0), q(1.0 / 32768.0, 1)).is_err());
        assert!(Logistic16Params::new(q(0.001, 0), q(1.0 / 32000.0, 0)).is_err());
        assert!(Tanh16Params::new(q(0.001, 0), q(1.0 / 16384.0, 0)).is_err());
        assert!(Tanh16Params::new(q(3.0, 0), out_q).is_err());
        assert!(Tanh16Params::new(q(-1.0, 0), out_q).is_err());
        let p = Tanh16Params::new(q(0.001, 0), out_q).unwrap();
        assert!(tanh_i16(&p, &[0; 2], &mut [0; 3]).is_err());
        let p = Logistic16Params::new(q(0.001, 0), out_q).unwrap();
        assert!(logistic_i16(&p, &[0; 2], &mut [0; 1]).is_err());
    }
}
