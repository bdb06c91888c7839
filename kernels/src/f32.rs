//! f32 kernels, in TensorFlow Lite Micro's order of operations.
//!
//! Float results are only reproducible if the operations happen in the same order with the same
//! intermediate roundings, so these follow TFLM's reference kernels exactly
//! (`kernels/internal/reference/add.h`, `mul.h`, `fully_connected.h`,
//! `micro/kernels/activations_common.cc`):
//!
//! - ADD and MUL apply TFLM's "no activation" clamp to `[f32::MIN, f32::MAX]` as
//!   `min(max(x, lowest), max)` with C++'s `std::min`/`std::max`. That turns infinities into
//!   `±f32::MAX` and lets NaN through.
//! - RELU is `x < 0 ? 0 : x`: NaN and `-0.0` pass through unchanged.
//! - FULLY_CONNECTED sums `input · weight` products one at a time, in input order, from `+0.0`,
//!   without fused multiply-adds, then adds the bias (`0.0` when there is none) and applies the
//!   same clamp as ADD.
//!
//! Broadcasting is not supported yet: elementwise operands must have equal lengths.

use crate::{check_len, FcShape, KernelError};

/// TFLM's `ActivationFunctionWithMinMax(x, lowest, max)`: `std::min(std::max(x, lowest), max)`,
/// where `std::max(a, b)` is `a < b ? b : a` and `std::min(a, b)` is `b < a ? b : a`.
#[inline]
fn clamp_no_activation(x: f32) -> f32 {
    let lower_bounded = if x < f32::MIN { f32::MIN } else { x };
    if f32::MAX < lower_bounded {
        f32::MAX
    } else {
        lower_bounded
    }
}

/// out = a + b, elementwise (TFLM's float ADD with no fused activation).
///
/// `a`, `b` and `out` must have the same length ([`KernelError::LengthMismatch`] names the
/// first operand that differs from `a`). Sums that overflow to infinity give `±f32::MAX`, as in
/// TFLM.
pub fn add(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = clamp_no_activation(x + y);
    }
    Ok(())
}

/// out = a * b, elementwise (TFLM's float MUL with no fused activation).
///
/// `a`, `b` and `out` must have the same length. Products that overflow to infinity give
/// `±f32::MAX`, as in TFLM.
pub fn mul(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = clamp_no_activation(x * y);
    }
    Ok(())
}

/// out = max(0, input), elementwise, as TFLM's `ReluFloat`: `x < 0 ? 0 : x`.
///
/// `input` and `out` must have the same length. NaN and `-0.0` are passed through.
pub fn relu(input: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = if x < 0.0 { 0.0 } else { x };
    }
    Ok(())
}

/// out = −input, elementwise, as TFLM's `Negate` (its only NEG kernel: float32). A sign flip,
/// so `0.0` becomes `-0.0` and NaN keeps its payload.
///
/// `input` and `out` must have the same length.
pub fn neg(input: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
    check_len("output", input.len(), out.len())?;
    for (o, &x) in out.iter_mut().zip(input) {
        *o = -x;
    }
    Ok(())
}

/// Fully connected: `out[b][o] = Σ_i input[b][i] · weights[o][i] + bias[o]`.
///
/// Layouts (row-major): `input` `[batches][in_features]`, `weights`
/// `[out_features][in_features]` (TFLite's layout), `bias` `[out_features]`, `out`
/// `[batches][out_features]`. Errors with [`KernelError::ShapeOverflow`] for shapes no buffer
/// can have and [`KernelError::LengthMismatch`] for buffers of the wrong length. The sum is
/// accumulated in TFLM's order (see the [module docs](self)).
pub fn fully_connected(
    shape: FcShape,
    input: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let lens = shape.lens(core::mem::size_of::<f32>())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.weights, weights.len())?;
    if let Some(bias) = bias {
        check_len("bias", lens.out_features, bias.len())?;
    }
    check_len("output", lens.output, out.len())?;
    if lens.output == 0 {
        return Ok(());
    }
    // TFLM adds a bias value of 0.0 when there is no bias tensor.
    let biases = || {
        bias.unwrap_or(&[])
            .iter()
            .copied()
            .chain(core::iter::repeat(0.0))
    };

    if lens.in_features == 0 {
        for out_row in out.chunks_exact_mut(lens.out_features) {
            for (o, b) in out_row.iter_mut().zip(biases()) {
                *o = clamp_no_activation(0.0 + b);
            }
        }
        return Ok(());
    }

    for (in_row, out_row) in input
        .chunks_exact(lens.in_features)
        .zip(out.chunks_exact_mut(lens.out_features))
    {
        for ((o, w_row), b) in out_row
            .iter_mut()
            .zip(weights.chunks_exact(lens.in_features))
            .zip(biases())
        {
            let total = in_row
                .iter()
                .zip(w_row)
                .fold(0.0_f32, |total, (&x, &w)| total + x * w);
            *o = clamp_no_activation(total + b);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_mul_basic() {
        let a = [1.5, -2.0, 0.25, 1e30];
        let b = [2.0, 0.5, -0.25, 1e30];
        let mut out = [0.0; 4];
        add(&a, &b, &mut out).unwrap();
        assert_eq!(out, [3.5, -1.5, 0.0, 2e30]);
        mul(&a, &b, &mut out).unwrap();
        // 1e30 · 1e30 overflows to +inf, which TFLM's clamp turns into f32::MAX.
        assert_eq!(out, [3.0, -1.0, -0.0625, f32::MAX]);
    }

    #[test]
    fn clamp_semantics() {
        let a = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MAX, -0.0];
        let b = [1.0, 1.0, 1.0, f32::MAX, -0.0];
        let mut out = [0.0; 5];
        add(&a, &b, &mut out).unwrap();
        assert_eq!(out[0], f32::MAX);
        assert_eq!(out[1], f32::MIN);
        assert!(out[2].is_nan());
        assert_eq!(out[3], f32::MAX); // overflow to +inf, clamped
        assert_eq!(out[4].to_bits(), (-0.0_f32).to_bits()); // −0 + −0 = −0, kept
        mul(&[f32::NEG_INFINITY, 3.0], &[2.0, f32::NAN], &mut out[..2]).unwrap();
        assert_eq!(out[0], f32::MIN);
        assert!(out[1].is_nan());
    }

    #[test]
    fn relu_semantics() {
        let input = [
            -1.0,
            0.0,
            -0.0,
            2.5,
            f32::NAN,
            f32::NEG_INFINITY,
            f32::INFINITY,
        ];
        let mut out = [9.0; 7];
        relu(&input, &mut out).unwrap();
        assert_eq!(out[0].to_bits(), 0.0_f32.to_bits());
        assert_eq!(out[1].to_bits(), 0.0_f32.to_bits());
        assert_eq!(out[2].to_bits(), (-0.0_f32).to_bits());
        assert_eq!(out[3], 2.5);
        assert!(out[4].is_nan());
        assert_eq!(out[5], 0.0);
        assert_eq!(out[6], f32::INFINITY); // no upper clamp in RELU
    }

    #[test]
    fn elementwise_length_errors() {
        let mut out = [0.0; 3];
        assert_eq!(
            add(&[1.0; 3], &[1.0; 2], &mut out),
            Err(KernelError::LengthMismatch {
                operand: "b",
                expected: 3,
                actual: 2
            })
        );
        assert_eq!(
            mul(&[1.0; 2], &[1.0; 2], &mut out),
            Err(KernelError::LengthMismatch {
                operand: "output",
                expected: 2,
                actual: 3
            })
        );
        assert_eq!(
            relu(&[1.0; 4], &mut out),
            Err(KernelError::LengthMismatch {
                operand: "output",
                expected: 4,
                actual: 3
            })
        );
        // Nothing was written on error.
        assert_eq!(out, [0.0; 3]);
        add(&[], &[], &mut []).unwrap();
    }

    #[test]
    fn fc_hand_computed() {
        let shape = FcShape {
            batches: 2,
            in_features: 3,
            out_features: 2,
        };
        let input = [1.0, 2.0, 3.0, -1.0, 0.5, 0.0];
        let weights = [0.5, -1.0, 2.0, 1.0, 1.0, 1.0];
        let bias = [0.25, -10.0];
        let mut out = [0.0; 4];
        fully_connected(shape, &input, &weights, Some(&bias), &mut out).unwrap();
        // b0: 0.5 − 2 + 6 + 0.25 = 4.75 ; 1 + 2 + 3 − 10 = −4
        // b1: −0.5 − 0.5 + 0 + 0.25 = −0.75 ; −1 + 0.5 + 0 − 10 = −10.5
        assert_eq!(out, [4.75, -4.0, -0.75, -10.5]);
        fully_connected(shape, &input, &weights, None, &mut out).unwrap();
        assert_eq!(out, [4.5, 6.0, -1.0, -0.5]);
    }

    #[test]
    fn fc_summation_order() {
        // Sequential left-to-right summation: (1e8 + 1) − 1e8 = 0 in f32 (1e8 + 1 rounds back to
        // 1e8), whereas a pairwise or reordered sum could give 1.
        let shape = FcShape {
            batches: 1,
            in_features: 3,
            out_features: 1,
        };
        let mut out = [7.0];
        fully_connected(shape, &[1e8, 1.0, -1e8], &[1.0, 1.0, 1.0], None, &mut out).unwrap();
        assert_eq!(out, [0.0]);
        fully_connected(shape, &[1.0, 1e8, -1e8], &[1.0, 1.0, 1.0], None, &mut out).unwrap();
        assert_eq!(out, [0.0]);
        fully_connected(shape, &[1e8, -1e8, 1.0], &[1.0, 1.0, 1.0], None, &mut out).unwrap();
        assert_eq!(out, [1.0]);
        // Overflowing dot products are clamped like ADD's.
        fully_connected(shape, &[1e30, 1e30, 0.0], &[1e30, 1.0, 1.0], None, &mut out).unwrap();
        assert_eq!(out, [f32::MAX]);
    }

    #[test]
    fn fc_degenerate_shapes() {
        let mut out = [9.0; 2];
        // in_features = 0: outputs are the bias (or 0).
        let shape = FcShape {
            batches: 1,
            in_features: 0,
            out_features: 2,
        };
        fully_connected(shape, &[], &[], Some(&[1.5, -2.0]), &mut out).unwrap();
        assert_eq!(out, [1.5, -2.0]);
        fully_connected(shape, &[], &[], None, &mut out).unwrap();
        assert_eq!(out, [0.0, 0.0]);
        // Zero batches or zero outputs: nothing to write, but lengths are still checked.
        let shape = FcShape {
            batches: 0,
            in_features: 3,
            out_features: 2,
        };
        fully_connected(shape, &[], &[0.0; 6], None, &mut []).unwrap();
        let shape = FcShape {
            batches: 2,
            in_features: 3,
            out_features: 0,
        };
        fully_connected(shape, &[0.0; 6], &[], Some(&[]), &mut []).unwrap();
        assert_eq!(
            fully_connected(shape, &[0.0; 5], &[], None, &mut []),
            Err(KernelError::LengthMismatch {
                operand: "input",
                expected: 6,
                actual: 5
            })
        );
    }

    #[test]
    fn fc_errors() {
        let shape = FcShape {
            batches: 2,
            in_features: 3,
            out_features: 2,
        };
        let mut out = [0.0; 4];
        let err = |operand, expected, actual| {
            Err(KernelError::LengthMismatch {
                operand,
                expected,
                actual,
            })
        };
        assert_eq!(
            fully_connected(shape, &[0.0; 5], &[0.0; 6], None, &mut out),
            err("input", 6, 5)
        );
        assert_eq!(
            fully_connected(shape, &[0.0; 6], &[0.0; 7], None, &mut out),
            err("weights", 6, 7)
        );
        assert_eq!(
            fully_connected(shape, &[0.0; 6], &[0.0; 6], Some(&[0.0; 3]), &mut out),
            err("bias", 2, 3)
        );
        assert_eq!(
            fully_connected(shape, &[0.0; 6], &[0.0; 6], None, &mut out[..3]),
            err("output", 4, 3)
        );
        let huge = FcShape {
            batches: u32::MAX,
            in_features: u32::MAX,
            out_features: u32::MAX,
        };
        assert_eq!(
            fully_connected(huge, &[], &[], None, &mut []),
            Err(KernelError::ShapeOverflow)
        );
    }
}
