//! int16 SOFTMAX with int16 output (zero point 0, scale 1/32768), bit-exact with TFLM's
//! `reference_ops::SoftmaxInt16` (`kernels/internal/reference/softmax.h`, parameters and
//! tables from `micro/kernels/softmax_common.cc`).
//!
//! TFLM's int16 softmax uses two 513-entry lookup tables with linear interpolation
//! ([`lut_lookup`], TFLM's `LUTLookup`: the top 9 bits of an int16 pick an entry, the low 7
//! interpolate towards the next), one of `exp(x)` over `[−10, 0]` and one of `1 / (1 + x)` over
//! `[0, 1]`, each in Q0.15. Per row of `depth` elements (the innermost dimension):
//!
//! 1. `diff = x − max(row)`, in `[−65535, 0]`, is scaled by
//!    `QuantizeMultiplier(input_scale · beta / (10 / 65535))` (so that `−65535` is `−10`),
//!    recentred by `+32767` and saturated to int16; the exp table gives `e` in Q0.15.
//! 2. `sum = Σ e` (the row's maximum contributes about 32767, so `sum > 0`).
//! 3. With `z` the leading zeros of `sum`, `s = ((sum << (z − 1)) + 2^13) >> 14` lies in
//!    `[2^16, 2^17]`; `s − 3 · 2^15` saturated to int16 goes through the reciprocal table:
//!    `r ≈ 2^15 / (sum · 2^(z − 17))`.
//! 4. Each output is `clamp((e · r + 2^(30 − z)) >> (31 − z), 0, 32767)`.
//!
//! The tables do not depend on the tensors' quantization: TFLM fills them at Prepare with
//! `LUTPopulate<int16_t>` in `float` (`std::exp`, `1 / (1 + x)`, rounding of the samples and a
//! midpoint bias); here they are constants, that function's output (printed by compiling it,
//! verbatim, with the same two transforms: `tools/softmax16_luts.cc`).

use super::{check_scale, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Precomputed parameters of int16 SOFTMAX (TFLM's `SoftmaxParams` for int16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Softmax16Params {
    input_multiplier: i32,
    input_left_shift: i32,
}

/// Most elements per row: each row's sum of up to 32767 per element must fit an `i32` (TFLM's
/// `int32_t` sum would overflow, undefined, beyond it).
pub const MAX_SOFTMAX16_DEPTH: usize = 65536;

impl Softmax16Params {
    /// Parameters from the input quantization, `beta` (TFLite's `SoftmaxOptions.beta`) and the
    /// output quantization, as TFLM's Prepare computes them.
    ///
    /// Errors with [`KernelError::InvalidQuantization`] when a scale is not finite and
    /// positive, a zero point is not 0, the output scale is not within `0.001 / 32768` of
    /// `1 / 32768` (TFLM's checks), or `input_scale · beta · 6553.5` is negative, not finite or
    /// `2^31` or more (its multiplier would not fit TFLM's arithmetic).
    pub fn new(input: Quant, beta: f32, output: Quant) -> Result<Self, KernelError> {
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
        // TF_LITE_ENSURE_NEAR in float.
        let want = 1.0_f32 / 32768.0;
        let delta = if output.scale > want {
            output.scale - want
        } else {
            want - output.scale
        };
        if delta > 0.001_f32 * 1.0 / 32768.0 {
            return Err(KernelError::InvalidQuantization {
                what: "output scale",
            });
        }
        let real = f64::from(input.scale) * f64::from(beta) / (10.0 / 65535.0);
        let (input_multiplier, input_left_shift) = super::general_multiplier(real, "beta")?;
        Ok(Self {
            input_multiplier,
            input_left_shift,
        })
    }

    /// `(multiplier, shift)` of the difference scaling (see
    /// [`quantize_multiplier`](crate::fixed_point::quantize_multiplier)).
    #[must_use]
    pub const fn input_multiplier(&self) -> (i32, i32) {
        (self.input_multiplier, self.input_left_shift)
    }
}

/// Packed ([`packed`](crate::packed)): the difference scaling, as `quantize_multiplier` gives
/// one (shift at most 31).
impl Packed for Softmax16Params {
    fn pack(&self, w: &mut Words<'_>) {
        w.put_multiplier((self.input_multiplier, self.input_left_shift));
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (input_multiplier, input_left_shift) = r.take_multiplier(31, "beta")?;
        Ok(Self {
            input_multiplier,
            input_left_shift,
        })
    }
}

/// TFLM's `LUTLookup(int16_t, const int16_t*)`: entry `256 + (value >> 7)` of a 513-entry
/// table, plus the slope to the next entry times the low 7 bits, rounded.
#[inline]
#[must_use]
pub fn lut_lookup(value: i16, lut: &[i16; 513]) -> i16 {
    // value >> 7 is in [−256, 255]: the index is in [0, 511].
    let index = (256 + (i32::from(value) >> 7)) as usize;
    let offset = i32::from(value & 0x7f);
    let (base, next) = match (lut.get(index), lut.get(index + 1)) {
        (Some(&b), Some(&n)) => (b, n),
        _ => return 0,
    };
    // int16_t slope: the difference truncated to 16 bits, as TFLM's assignment does.
    let slope = i32::from(next.wrapping_sub(base));
    let delta = (slope * offset + 64) >> 7;
    (i32::from(base) + delta) as i16
}

/// int16 SOFTMAX over rows of `depth` elements (see the [module docs](self)).
///
/// Errors: [`KernelError::LengthMismatch`] when `output` is not as long as `input` or `input`
/// is not a whole number of rows; [`KernelError::Unsupported`] for `depth` 0 (with a non-empty
/// input) or above [`MAX_SOFTMAX16_DEPTH`].
pub fn softmax_i16(
    p: &Softmax16Params,
    depth: usize,
    input: &[i16],
    output: &mut [i16],
) -> Result<(), KernelError> {
    check_len("output", input.len(), output.len())?;
    if input.is_empty() {
        return Ok(());
    }
    if depth == 0 {
        return Err(KernelError::Unsupported { what: "depth 0" });
    }
    if depth > MAX_SOFTMAX16_DEPTH {
        return Err(KernelError::Unsupported {
            what: "softmax depth above 65536",
        });
    }
    check_len("input", input.len() - input.len() % depth, input.len())?;
    for (row, out_row) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let max = i32::from(row.iter().copied().max().unwrap_or(i16::MIN));
        // The exponentials, kept in the output row as TFLM does, and their sum (at most
        // 65536 · 32767: no overflow).
        let mut sum: i32 = 0;
        for (o, &x) in out_row.iter_mut().zip(row) {
            let scaled = multiply_by_quantized_multiplier(
                i32::from(x) - max,
                p.input_multiplier,
                p.input_left_shift,
            );
            let sym = scaled
                .wrapping_add(32767)
                .clamp(i16::MIN.into(), i16::MAX.into()) as i16;
            *o = lut_lookup(sym, &EXP_LUT);
            sum += i32::from(*o);
        }
        // sum ≥ 1 (the maximum's entry), so 1 ≤ z ≤ 31; the entries are positive, so sum is
        // at least the table's exp(0), 32767, and z ≤ 17.
        let z = (sum as u32).leading_zeros();
        let shifted = ((i64::from(sum) << z.saturating_sub(1)) + (1 << 13)) >> 14;
        let sym = (shifted - ((1 << 15) + (1 << 16))).clamp(i16::MIN.into(), i16::MAX.into());
        let reciprocal = i64::from(lut_lookup(sym as i16, &ONE_OVER_ONE_PLUS_X_LUT));
        let right_shift = 31_u32.saturating_sub(z);
        let round = match right_shift {
            0 => 0,
            s => 1_i64 << (s - 1),
        };
        for o in out_row.iter_mut() {
            let result = (i64::from(*o) * reciprocal + round) >> right_shift;
            *o = result.clamp(0, i64::from(i16::MAX)) as i16;
        }
    }
    Ok(())
}

/// `exp(x)` for `x` in `[−10, 0]` in 512 steps, Q0.15: TFLM's `exp_lut` for int16 SOFTMAX.
const EXP_LUT: [i16; 513] = [
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9,
    10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15,
    15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19, 19, 19, 20, 20, 21, 21, 21, 22, 22, 23, 23, 24, 24,
    25, 25, 26, 26, 27, 27, 28, 28, 29, 29, 30, 30, 31, 32, 32, 33, 34, 34, 35, 36, 36, 37, 37, 38,
    39, 40, 40, 42, 42, 43, 44, 45, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 59, 60, 60,
    62, 63, 65, 65, 67, 68, 69, 71, 73, 74, 75, 77, 78, 80, 81, 83, 85, 86, 88, 90, 92, 93, 95, 97,
    99, 101, 103, 105, 107, 109, 112, 114, 116, 118, 121, 123, 126, 128, 131, 133, 135, 139, 141,
    144, 147, 149, 152, 155, 158, 162, 165, 168, 171, 174, 178, 181, 185, 189, 192, 196, 200, 204,
    208, 212, 217, 221, 225, 230, 234, 239, 243, 248, 253, 258, 263, 268, 273, 279, 284, 290, 296,
    302, 308, 314, 320, 327, 333, 340, 346, 353, 360, 366, 374, 381, 389, 397, 404, 413, 421, 429,
    437, 446, 455, 464, 473, 482, 492, 501, 511, 522, 532, 543, 553, 564, 575, 586, 598, 610, 622,
    634, 646, 659, 672, 685, 699, 713, 727, 741, 756, 771, 786, 801, 817, 833, 850, 866, 884, 901,
    919, 937, 955, 974, 993, 1013, 1033, 1053, 1074, 1095, 1117, 1139, 1161, 1184, 1207, 1232,
    1256, 1281, 1306, 1332, 1358, 1385, 1412, 1440, 1468, 1497, 1527, 1557, 1587, 1619, 1651, 1683,
    1716, 1750, 1785, 1820, 1856, 1892, 1930, 1968, 2006, 2046, 2087, 2128, 2170, 2212, 2256, 2300,
    2346, 2392, 2439, 2488, 2537, 2587, 2638, 2690, 2743, 2796, 2852, 2908, 2966, 3024, 3084, 3145,
    3207, 3270, 3334, 3400, 3467, 3535, 3605, 3677, 3749, 3822, 3898, 3975, 4053, 4133, 4214, 4297,
    4383, 4469, 4557, 4647, 4739, 4833, 4927, 5024, 5124, 5225, 5328, 5433, 5541, 5649, 5761, 5875,
    5991, 6109, 6230, 6352, 6477, 6605, 6736, 6868, 7004, 7141, 7282, 7427, 7572, 7722, 7874, 8030,
    8188, 8350, 8514, 8683, 8854, 9028, 9206, 9387, 9572, 9762, 9954, 10151, 10351, 10555, 10763,
    10976, 11191, 11412, 11637, 11867, 12102, 12341, 12583, 12831, 13085, 13342, 13606, 13874,
    14148, 14427, 14711, 15002, 15297, 15599, 15907, 16221, 16541, 16867, 17199, 17539, 17884,
    18237, 18597, 18964, 19338, 19719, 20108, 20505, 20909, 21322, 21742, 22171, 22608, 23054,
    23509, 23973, 24445, 24928, 25419, 25921, 26432, 26953, 27485, 28027, 28580, 29143, 29718,
    30304, 30902, 31512, 32133, 32767,
];

/// `1 / (1 + x)` for `x` in `[0, 1]` in 512 steps, Q0.15: TFLM's `one_over_one_plus_x_lut`.
const ONE_OVER_ONE_PLUS_X_LUT: [i16; 513] = [
    32767, 32704, 32640, 32578, 32514, 32451, 32388, 32326, 32264, 32202, 32141, 32079, 32018,
    31957, 31896, 31835, 31775, 31715, 31655, 31596, 31537, 31476, 31418, 31359, 31301, 31242,
    31184, 31127, 31069, 31011, 30954, 30897, 30840, 30784, 30727, 30671, 30615, 30560, 30504,
    30449, 30394, 30339, 30283, 30229, 30175, 30121, 30067, 30013, 29960, 29906, 29853, 29800,
    29746, 29694, 29642, 29589, 29537, 29486, 29434, 29382, 29331, 29280, 29229, 29177, 29127,
    29076, 29026, 28976, 28926, 28877, 28827, 28777, 28728, 28679, 28630, 28581, 28532, 28484,
    28436, 28388, 28340, 28292, 28244, 28197, 28150, 28103, 28056, 28008, 27962, 27915, 27869,
    27823, 27777, 27731, 27685, 27640, 27594, 27549, 27504, 27459, 27413, 27369, 27324, 27280,
    27236, 27192, 27148, 27104, 27060, 27016, 26973, 26930, 26887, 26844, 26801, 26758, 26715,
    26673, 26630, 26588, 26546, 26504, 26463, 26421, 26380, 26338, 26297, 26255, 26214, 26174,
    26132, 26092, 26051, 26011, 25971, 25931, 25891, 25851, 25811, 25772, 25732, 25693, 25653,
    25614, 25575, 25536, 25497, 25458, 25420, 25381, 25343, 25305, 25267, 25229, 25191, 25153,
    25116, 25078, 25041, 25003, 24966, 24928, 24892, 24855, 24818, 24781, 24745, 24709, 24672,
    24636, 24600, 24564, 24528, 24492, 24457, 24421, 24385, 24350, 24315, 24280, 24245, 24210,
    24175, 24140, 24105, 24070, 24036, 24002, 23967, 23933, 23899, 23865, 23831, 23798, 23764,
    23730, 23697, 23664, 23630, 23597, 23564, 23530, 23498, 23465, 23432, 23399, 23366, 23334,
    23302, 23269, 23237, 23205, 23173, 23141, 23109, 23077, 23046, 23014, 22982, 22951, 22920,
    22888, 22857, 22826, 22795, 22764, 22733, 22703, 22672, 22641, 22611, 22580, 22550, 22520,
    22490, 22459, 22429, 22400, 22370, 22340, 22310, 22281, 22251, 22221, 22192, 22163, 22134,
    22104, 22075, 22046, 22017, 21988, 21959, 21931, 21902, 21874, 21845, 21817, 21788, 21760,
    21732, 21704, 21676, 21648, 21620, 21592, 21565, 21537, 21509, 21482, 21455, 21427, 21400,
    21372, 21345, 21318, 21291, 21264, 21237, 21210, 21183, 21157, 21130, 21103, 21077, 21050,
    21024, 20998, 20971, 20945, 20919, 20893, 20867, 20841, 20816, 20790, 20764, 20738, 20713,
    20687, 20662, 20636, 20611, 20586, 20560, 20535, 20510, 20485, 20460, 20435, 20410, 20385,
    20360, 20336, 20311, 20287, 20262, 20238, 20213, 20189, 20165, 20141, 20117, 20092, 20068,
    20044, 20021, 19997, 19973, 19949, 19926, 19902, 19878, 19855, 19832, 19808, 19784, 19762,
    19738, 19715, 19692, 19668, 19645, 19622, 19600, 19577, 19553, 19531, 19508, 19485, 19463,
    19440, 19418, 19395, 19373, 19351, 19328, 19306, 19284, 19262, 19240, 19218, 19196, 19174,
    19152, 19130, 19109, 19087, 19065, 19044, 19022, 19000, 18979, 18958, 18936, 18915, 18893,
    18872, 18851, 18830, 18809, 18787, 18766, 18745, 18725, 18704, 18682, 18662, 18641, 18620,
    18600, 18579, 18559, 18538, 18518, 18497, 18477, 18457, 18436, 18416, 18396, 18376, 18356,
    18336, 18316, 18296, 18276, 18256, 18236, 18216, 18197, 18177, 18157, 18138, 18118, 18099,
    18079, 18059, 18040, 18021, 18001, 17982, 17963, 17944, 17924, 17905, 17886, 17867, 17848,
    17829, 17810, 17791, 17772, 17754, 17735, 17716, 17697, 17679, 17660, 17641, 17623, 17604,
    17586, 17568, 17549, 17531, 17513, 17494, 17476, 17458, 17440, 17422, 17404, 17386, 17368,
    17350, 17332, 17314, 17296, 17278, 17261, 17243, 17225, 17208, 17190, 17172, 17155, 17137,
    17120, 17102, 17085, 17067, 17050, 17033, 17015, 16999, 16981, 16964, 16947, 16930, 16913,
    16895, 16878, 16862, 16845, 16828, 16810, 16794, 16777, 16760, 16743, 16727, 16710, 16693,
    16677, 16660, 16644, 16627, 16611, 16594, 16578, 16562, 16545, 16529, 16513, 16497, 16480,
    16464, 16448, 16432, 16416, 16400, 16384,
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    #[test]
    fn rows_follow_the_real_softmax() {
        let scale = 0.0005;
        let p = Softmax16Params::new(q(scale, 0), 1.0, q(1.0 / 32768.0, 0)).unwrap();
        let input: std::vec::Vec<i16> = (0..60)
            .map(|i| ((i * 7919) % 16000 - 8000) as i16)
            .collect();
        let mut out = [0i16; 60];
        softmax_i16(&p, 20, &input, &mut out).unwrap();
        for (row, got) in input.chunks(20).zip(out.chunks(20)) {
            let e: std::vec::Vec<f64> = row
                .iter()
                .map(|&x| (f64::from(x) * f64::from(scale)).exp())
                .collect();
            let total: f64 = e.iter().sum();
            for (&g, &v) in got.iter().zip(&e) {
                assert!(
                    (f64::from(g) / 32768.0 - v / total).abs() < 2e-3,
                    "{g} {}",
                    v / total
                );
            }
        }
    }

    #[test]
    fn lookup_interpolates_and_ends() {
        // Entry 511 (32133) plus 127/128 of the step of 634 to entry 512 (32767), rounded:
        // (634 · 127 + 64) >> 7 = 629.
        assert_eq!(lut_lookup(i16::MAX, &EXP_LUT), 32133 + 629);
        assert_eq!(lut_lookup(i16::MIN, &EXP_LUT), 2);
        assert_eq!(lut_lookup(i16::MIN, &ONE_OVER_ONE_PLUS_X_LUT), 32767);
        assert_eq!(lut_lookup(i16::MAX, &ONE_OVER_ONE_PLUS_X_LUT), 16384);
    }

    #[test]
    fn refusals() {
        let out_q = q(1.0 / 32768.0, 0);
        assert!(Softmax16Params::new(q(0.001, 1), 1.0, out_q).is_err());
        assert!(Softmax16Params::new(q(0.001, 0), 1.0, q(1.0 / 32768.0, 3)).is_err());
        assert!(Softmax16Params::new(q(0.001, 0), 1.0, q(1.0 / 30000.0, 0)).is_err());
        assert!(Softmax16Params::new(q(0.001, 0), -1.0, out_q).is_err());
        assert!(Softmax16Params::new(q(0.001, 0), 1.0, q(1.0 / 32768.0 * 1.00002, 0)).is_ok());
        let p = Softmax16Params::new(q(0.001, 0), 1.0, out_q).unwrap();
        assert!(softmax_i16(&p, 0, &[1], &mut [0]).is_err());
        assert!(softmax_i16(&p, 3, &[1; 4], &mut [0; 4]).is_err());
        assert!(softmax_i16(&p, 2, &[1; 4], &mut [0; 3]).is_err());
        assert!(softmax_i16(&p, 0, &[], &mut []).is_ok());
        assert!(softmax_i16(&p, 70_000, &[0; 70_000], &mut [0; 70_000]).is_err());
        // One element: the whole probability, 32767.
        let mut out = [0i16; 1];
        softmax_i16(&p, 1, &[-123], &mut out).unwrap();
        assert!(out[0] >= 32760, "{}", out[0]);
    }
}
