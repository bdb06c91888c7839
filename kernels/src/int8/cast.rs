//! CAST between int8, int16, int32 and float32: each value converted as C++'s `static_cast`
//! converts it, the quantization ignored (TFLM, `micro/kernels/cast.cc`).
//!
//! - Integer to a narrower integer keeps the low bits (two's complement wrap-around);
//!   integer to a wider integer sign-extends.
//! - Integer to float rounds to nearest (exact for int8 and int16).
//! - Float to integer truncates toward zero. Values outside the integer's range are undefined
//!   behaviour in C++, and what TFLM gives for them depends on its compiler and target; the
//!   `tflite-micro` build the test models are checked against saturates to the integer's
//!   range (300.5 to int8 is 127), and so does this kernel (Rust's `as`; NaN gives 0). Every
//!   value within the range converts as TFLM converts it on any target.

use crate::{check_len, KernelError};

/// One element type's conversion to another, as C++'s `static_cast`.
pub trait CastTo<T> {
    /// The converted value.
    fn cast_to(self) -> T;
}

macro_rules! int_casts {
    ($($from:ty),*) => {$(
        impl CastTo<i8> for $from {
            fn cast_to(self) -> i8 {
                self as i8
            }
        }
        impl CastTo<i16> for $from {
            fn cast_to(self) -> i16 {
                self as i16
            }
        }
        impl CastTo<i32> for $from {
            fn cast_to(self) -> i32 {
                self as i32
            }
        }
        impl CastTo<f32> for $from {
            fn cast_to(self) -> f32 {
                self as f32
            }
        }
    )*};
}

int_casts!(i8, i16, i32);

impl CastTo<i8> for f32 {
    fn cast_to(self) -> i8 {
        self as i8
    }
}

impl CastTo<i16> for f32 {
    fn cast_to(self) -> i16 {
        self as i16
    }
}

impl CastTo<i32> for f32 {
    fn cast_to(self) -> i32 {
        self as i32
    }
}

impl CastTo<f32> for f32 {
    fn cast_to(self) -> f32 {
        self
    }
}

/// CAST (see the [module docs](self)): `output` must have `input`'s length
/// ([`KernelError::LengthMismatch`]).
pub fn cast<A: CastTo<B> + Copy, B>(input: &[A], output: &mut [B]) -> Result<(), KernelError> {
    check_len("output", input.len(), output.len())?;
    for (o, &x) in output.iter_mut().zip(input) {
        *o = x.cast_to();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_cast_semantics() {
        let mut o8 = [0_i8; 4];
        cast(&[300_i32, -129, 127, -1], &mut o8).unwrap();
        assert_eq!(o8, [44, 127, 127, -1]);
        let mut o16 = [0_i16; 3];
        cast(&[-5_i8, 127, -128], &mut o16).unwrap();
        assert_eq!(o16, [-5, 127, -128]);
        let mut o32 = [0_i32; 5];
        cast(&[2.9_f32, -2.9, 3e9, f32::NAN, -0.5], &mut o32).unwrap();
        assert_eq!(o32, [2, -2, i32::MAX, 0, 0]);
        cast(&[200.7_f32, -129.0, 1e10, -5.5], &mut o8).unwrap();
        assert_eq!(o8, [127, -128, 127, -5]);
        let mut f = [0_f32; 2];
        cast(&[16_777_217_i32, -3], &mut f).unwrap();
        assert_eq!(f, [16_777_216.0, -3.0]);
        assert!(cast(&[1_i8, 2], &mut f[..1]).is_err());
    }
}
