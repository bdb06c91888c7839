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

/// SHAPE: writes a tensor's dimensions `dims` (outermost first) as int32s to `output`, which
/// must have one element per dimension ([`KernelError::LengthMismatch`]). TFLM
/// (`micro/kernels/shape.cc`) writes int32 only; a dimension beyond `i32` is refused
/// ([`KernelError::ShapeOverflow`]), before anything is written.
pub fn shape(dims: &[u32], output: &mut [i32]) -> Result<(), KernelError> {
    check_len("output", dims.len(), output.len())?;
    if dims.iter().any(|&d| i32::try_from(d).is_err()) {
        return Err(KernelError::ShapeOverflow);
    }
    for (o, &d) in output.iter_mut().zip(dims) {
        *o = d as i32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_writes_dims() {
        let mut out = [0_i32; 3];
        shape(&[1, 20, 3], &mut out).unwrap();
        assert_eq!(out, [1, 20, 3]);
        assert!(shape(&[1, 2], &mut out).is_err());
        assert_eq!(
            shape(&[1, 1 << 31, 3], &mut out),
            Err(KernelError::ShapeOverflow)
        );
        shape(&[], &mut []).unwrap();
    }

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
