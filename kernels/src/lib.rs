//! Reference kernels for npu-compute: the CPU fallback and the simulator's ground truth.
//!
//! - [`int8`]: quantized ADD, SUB and MUL (with broadcasting), RELU, FULLY_CONNECTED (per-tensor
//!   and per-channel), CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN (over any
//!   axes), SOFTMAX, RSQRT, BATCH_MATMUL, TRANSPOSE, CONCATENATION, RESHAPE, QUANTIZE,
//!   DEQUANTIZE, and the stateful SVDF and UNIDIRECTIONAL_SEQUENCE_LSTM; the data movement of
//!   RESIZE_NEAREST_NEIGHBOR (any element type), RESIZE_BILINEAR, GATHER, SHAPE,
//!   SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND and CAST, bit-exact with TensorFlow Lite Micro's
//!   reference kernels (parameters precomputed once, like TFLM's `Prepare`).
//! - [`int16`]: TensorFlow Lite's 16x8 quantization (int16 activations, int8 weights):
//!   FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D with int64 or int32 accumulators, ADD and
//!   MUL with broadcasting, bit-exact with TFLM's int16 reference kernels.
//! - [`f32`](mod@f32): the float versions, in TFLM's order of operations.
//! - [`fixed_point`]: the gemmlowp / TFLM integer arithmetic the int8 kernels are built from
//!   (doubling high multiply, rounding shifts, multiplier quantization), and why it rounds twice.
//! - [`gemmlowp`]: gemmlowp's fixed-point `exp` and reciprocal, used by int8 SOFTMAX.
//!
//! The crate is `no_std` and allocation-free; its only `unsafe` is the inline assembly of the
//! Arm DSP-extension inner loops (`int8::mac`, built for DSP targets only) and, with the `std`
//! feature on x86-64, the calls into the AVX2 kernels (`int8::x86`, `int8::conv::x86`) once
//! the CPU is known to have AVX2; `std` is used for nothing else. Kernels never panic: every
//! buffer length is checked against the shape first ([`KernelError::LengthMismatch`]), shapes
//! whose element counts cannot exist in memory are refused ([`KernelError::ShapeOverflow`]),
//! and quantization parameters TFLM would abort on are refused when the parameters are built
//! ([`KernelError::InvalidQuantization`]). Where TFLM's C++ relies on two's-complement
//! wrap-around (a long int8 dot product overflowing its `int32` accumulator), the kernels wrap
//! the same way instead of panicking in debug builds.

#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

// Only for run-time CPU feature detection (`std` feature, x86-64 hosts): the kernels
// themselves allocate nothing.
#[cfg(feature = "std")]
extern crate std;

pub mod f32;
pub mod fixed_point;
pub mod gemmlowp;
pub mod int16;
pub mod int8;
pub mod movement;
pub mod packed;

/// Shape of a fully-connected (matmul) layer: `output[b][o] = sum_i input[b][i] * weights[o][i] (+ bias[o])`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FcShape {
    /// Rows of the input (batch size).
    pub batches: u32,
    /// Input features per row (the reduction depth).
    pub in_features: u32,
    /// Output features per row (rows of the weight matrix).
    pub out_features: u32,
}

/// Why a kernel refused to run. Kernels never panic on bad shapes or parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KernelError {
    /// A buffer's length does not match what the shape requires.
    LengthMismatch {
        /// Which operand (`"a"`, `"b"`, `"output"`, `"weights"`, `"bias"`, ...).
        operand: &'static str,
        /// Elements the shape requires.
        expected: usize,
        /// Elements the buffer has.
        actual: usize,
    },
    /// A quantization parameter is out of the range the kernel supports.
    InvalidQuantization {
        /// Which parameter (`"input scale"`, `"output zero point"`, ...).
        what: &'static str,
    },
    /// A shape is too large for the kernel's arithmetic (element count overflows).
    ShapeOverflow,
    /// A shape or parameter combination the kernel does not support: zero strides, dilations
    /// or filter sizes, channel counts that do not divide, or a case where TFLM itself would
    /// abort (for example a softmax row whose sum of exponentials reaches 512).
    Unsupported {
        /// What is unsupported (`"stride"`, `"filter input depth"`, ...).
        what: &'static str,
    },
}

impl core::fmt::Display for KernelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            KernelError::LengthMismatch {
                operand,
                expected,
                actual,
            } => write!(
                f,
                "the {operand} buffer has {actual} elements where the shape needs {expected}"
            ),
            KernelError::InvalidQuantization { what } => {
                write!(f, "the {what} is outside the range the kernel supports")
            }
            KernelError::ShapeOverflow => {
                f.write_str("the shape's element count overflows the kernel's arithmetic")
            }
            KernelError::Unsupported { what } => write!(f, "unsupported {what}"),
        }
    }
}

impl core::error::Error for KernelError {}

impl FcShape {
    /// Element counts of the input, weights and output buffers, as `usize`s: refuses shapes
    /// whose counts overflow `usize` or exceed the longest slice of `elem_size`-byte elements.
    pub(crate) fn lens(self, elem_size: usize) -> Result<FcLens, KernelError> {
        let dim = |d: u32| usize::try_from(d).map_err(|_| KernelError::ShapeOverflow);
        let (batches, in_features, out_features) = (
            dim(self.batches)?,
            dim(self.in_features)?,
            dim(self.out_features)?,
        );
        let max_elems = isize::MAX as usize / elem_size.max(1);
        let count = |x: usize, y: usize| {
            x.checked_mul(y)
                .filter(|&n| n <= max_elems)
                .ok_or(KernelError::ShapeOverflow)
        };
        Ok(FcLens {
            in_features,
            out_features,
            input: count(batches, in_features)?,
            weights: count(out_features, in_features)?,
            output: count(batches, out_features)?,
        })
    }
}

/// Buffer lengths a fully-connected shape requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FcLens {
    pub(crate) in_features: usize,
    pub(crate) out_features: usize,
    pub(crate) input: usize,
    pub(crate) weights: usize,
    pub(crate) output: usize,
}

/// `Ok` when a buffer has the length the shape requires.
#[inline]
pub(crate) fn check_len(
    operand: &'static str,
    expected: usize,
    actual: usize,
) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::LengthMismatch {
            operand,
            expected,
            actual,
        })
    }
}

#[cfg(test)]
mod xorshift;

#[cfg(test)]
mod layer_packing_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fc_lens() {
        let shape = FcShape {
            batches: 2,
            in_features: 3,
            out_features: 5,
        };
        let l = shape.lens(4).unwrap();
        assert_eq!((l.input, l.weights, l.output), (6, 15, 10));
        assert_eq!((l.in_features, l.out_features), (3, 5));
    }

    #[test]
    fn fc_lens_overflow() {
        let huge = FcShape {
            batches: u32::MAX,
            in_features: u32::MAX,
            out_features: 1,
        };
        // (2^32 − 1)^2 elements overflow usize on 32-bit targets and exceed isize::MAX on
        // 64-bit ones: no slice that long can exist.
        assert_eq!(huge.lens(1), Err(KernelError::ShapeOverflow));
        let wide = FcShape {
            batches: 1,
            in_features: u32::MAX,
            out_features: u32::MAX,
        };
        assert_eq!(wide.lens(1), Err(KernelError::ShapeOverflow));
        let out = FcShape {
            batches: u32::MAX,
            in_features: 1,
            out_features: u32::MAX,
        };
        assert_eq!(out.lens(4), Err(KernelError::ShapeOverflow));
    }

    #[test]
    fn check_len_reports_operand() {
        assert_eq!(check_len("b", 3, 3), Ok(()));
        assert_eq!(
            check_len("b", 3, 2),
            Err(KernelError::LengthMismatch {
                operand: "b",
                expected: 3,
                actual: 2
            })
        );
    }
}
