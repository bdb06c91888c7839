//! RESHAPE: the bytes stay as they are, only the shape changes.
//!
//! TFLM (`micro/kernels/reshape.cc`, `reshape_common.cc`) checks that the element counts
//! agree and copies the data when the output does not share the input's memory; the
//! quantization is the input's. The shape bookkeeping (including TFLite's `−1` dimension) is
//! the caller's; this is the length-checked copy.

use crate::{check_len, KernelError};

/// RESHAPE's data movement: copies `input` to `output`, which must have the same length
/// ([`KernelError::LengthMismatch`], operand `"output"`, before anything is written).
pub fn reshape(input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    check_len("output", input.len(), output.len())?;
    output.copy_from_slice(input);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_or_refuses() {
        let mut out = [0_i8; 4];
        reshape(&[1, -2, 3, -128], &mut out).unwrap();
        assert_eq!(out, [1, -2, 3, -128]);
        assert_eq!(
            reshape(&[1, 2, 3], &mut out),
            Err(KernelError::LengthMismatch {
                operand: "output",
                expected: 3,
                actual: 4
            })
        );
        assert_eq!(out, [1, -2, 3, -128]);
        reshape(&[], &mut []).unwrap();
    }
}
