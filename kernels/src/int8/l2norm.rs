//! int8 L2_NORMALIZATION along the innermost dimension (TFLM
//! `kernels/internal/reference/integer_ops/l2normalization.h`, `micro/kernels/l2norm.cc`).
//!
//! ```text
//! acc        = Σ_row (x − input_zp)²                                      (int32, wrapping)
//! (m, s)     = GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift)      1/√acc
//! out        = clamp(MultiplyByQuantizedMultiplier(x − input_zp, m, s + 7), −128, 127)
//! ```
//!
//! The output is in units of 1/128 with zero point 0 whatever the output tensor says: TFLM
//! adds no output zero point and reads no output scale (the converter gives the output scale
//! 1/128 and zero point 0). A row of zeros (`acc ≤ 1`) takes the multiplier `i32::MAX`, shift
//! 0, as TFLM does.

use super::rsqrt::inv_sqrt_quantized_multiplier_exp;
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::{check_len, KernelError};

/// Bits of the output scale: outputs are in units of `2^−7`.
const OUTPUT_SCALE_BITS: i32 = 7;

/// int8 L2_NORMALIZATION of rows of `depth` elements, `input_zero_point` the input's (see the
/// [module docs](self)).
///
/// Errors: [`KernelError::LengthMismatch`] when the lengths differ or are not a multiple of
/// `depth`; [`KernelError::Unsupported`] for `depth == 0` with a non-empty input.
pub fn l2_normalization(
    input_zero_point: i32,
    depth: usize,
    input: &[i8],
    output: &mut [i8],
) -> Result<(), KernelError> {
    check_len("output", input.len(), output.len())?;
    if input.is_empty() {
        return Ok(());
    }
    if depth == 0 {
        return Err(KernelError::Unsupported { what: "depth 0" });
    }
    check_len("input", input.len() - input.len() % depth, input.len())?;
    for (row, out) in input
        .chunks_exact(depth)
        .zip(output.chunks_exact_mut(depth))
    {
        let acc = row.iter().fold(0_i32, |acc, &x| {
            let c = i32::from(x).wrapping_sub(input_zero_point);
            acc.wrapping_add(c.wrapping_mul(c))
        });
        let (multiplier, shift) = inv_sqrt_quantized_multiplier_exp(acc);
        for (o, &x) in out.iter_mut().zip(row) {
            let c = i32::from(x).wrapping_sub(input_zero_point);
            let scaled = multiply_by_quantized_multiplier(c, multiplier, shift + OUTPUT_SCALE_BITS);
            *o = scaled.clamp(-128, 127) as i8;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_unit_norm_in_sevenths() {
        // (3, 4) − zp: norm 5, so 0.6 and 0.8 → 77 and 102 (of 128).
        let mut out = [0; 4];
        l2_normalization(1, 2, &[4, 5, 1, 1], &mut out).unwrap();
        assert_eq!(&out[..2], &[77, 102]);
        // An all-zero row stays zero.
        assert_eq!(&out[2..], &[0, 0]);
        // A single element is ±1: −1.0 is −128 (and +1.0 would clip to 127).
        let mut out = [0; 1];
        l2_normalization(0, 1, &[-50], &mut out).unwrap();
        assert_eq!(out, [-128]);
    }

    #[test]
    fn bad_lengths_are_refused() {
        let mut out = [0; 4];
        assert!(l2_normalization(0, 3, &[0; 4], &mut out).is_err());
        assert!(l2_normalization(0, 2, &[0; 4], &mut out[..3]).is_err());
        assert!(l2_normalization(0, 0, &[0; 4], &mut out).is_err());
        l2_normalization(0, 0, &[], &mut []).unwrap();
    }
}
