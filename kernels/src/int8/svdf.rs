//! int8 SVDF (singular value decomposition filter), bit-exact with TFLM's reference kernel,
//! with an int8 or an int16 activation state.
//!
//! TFLM (`micro/kernels/svdf.cc`, `svdf_common.cc`, `EvalIntegerSvdfReference<T>`), where `T`
//! is the type of the time weights and of the activation state (int8 or int16):
//!
//! ```text
//! Prepare:  (m1, s1) = QuantizeMultiplier(double(in_scale · feature_scale / state_scale))
//!           (m2, s2) = QuantizeMultiplier(double(state_scale · time_scale / out_scale))
//!           (each product and quotient in float, left to right)
//! Eval:     state ← state shifted left by one element, over the whole flat buffer
//!           for b, f:  d = Σ_i feature[f][i] · (x[b][i] − in_zp)          (int32)
//!                      d = clamp(MultiplyByQuantizedMultiplier(d, m1, s1), T::MIN, T::MAX)
//!                      state[b][f][memory − 1] = T(state_zp + d)          (truncated)
//!           for b, f:  t[b][f] = Σ_j time[f][j] · (state[b][f][j] − state_zp)
//!           for b, u:  acc = bias[u] (or 0) + Σ_r t[b][u · rank + r]
//!                      out[b][u] = clamp(MultiplyByQuantizedMultiplier(acc, m2, s2) + out_zp,
//!                                        −128, 127)
//! ```
//!
//! The fused activation is not applied on this path (TFLM's integer SVDF ignores it). The
//! state is the operator's memory between invokes: the kernel reads it and writes it back.
//! TFLM keeps the per-filter sums `t` in a scratch buffer; this kernel sums each unit's `rank`
//! filters as it goes (int32 sums wrap like TFLM's, so the order does not change the result).

use super::{check_quant, general_multiplier, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::{check_len, KernelError};

/// An element type of SVDF's activation state and time weights: int8 or int16.
pub trait SvdfState: Copy + Into<i32> + sealed::Sealed {
    /// Smallest value.
    const MIN: i32;
    /// Largest value.
    const MAX: i32;
    /// `v` truncated to the type, as C++'s conversion from `int32_t` does.
    fn truncate(v: i32) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for i8 {}
    impl Sealed for i16 {}
}

impl SvdfState for i8 {
    const MIN: i32 = i8::MIN as i32;
    const MAX: i32 = i8::MAX as i32;
    fn truncate(v: i32) -> Self {
        v as i8
    }
}

impl SvdfState for i16 {
    const MIN: i32 = i16::MIN as i32;
    const MAX: i32 = i16::MAX as i32;
    fn truncate(v: i32) -> Self {
        v as i16
    }
}

/// Shape of an SVDF layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SvdfShape {
    /// Rows of the input (batch size).
    pub batches: u32,
    /// Input features per row.
    pub input_size: u32,
    /// Filters (rows of the feature and time weights): `units · rank`.
    pub filters: u32,
    /// Filters per output unit.
    pub rank: u32,
    /// Time steps each filter remembers (columns of the time weights).
    pub memory: u32,
}

/// Element counts of SVDF's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SvdfLens {
    input: usize,
    feature: usize,
    time: usize,
    state: usize,
    units: usize,
    output: usize,
}

impl SvdfShape {
    /// Output units (`filters / rank`); `None` when `rank` is 0 or does not divide `filters`.
    pub fn units(&self) -> Option<u32> {
        (self.rank > 0 && self.filters.is_multiple_of(self.rank)).then(|| self.filters / self.rank)
    }

    fn lens(&self) -> Result<SvdfLens, KernelError> {
        let units = self
            .units()
            .ok_or(KernelError::Unsupported { what: "SVDF rank" })?;
        if self.memory == 0 {
            return Err(KernelError::Unsupported {
                what: "SVDF memory size",
            });
        }
        let n = |d: u32| usize::try_from(d).map_err(|_| KernelError::ShapeOverflow);
        // Element counts of at most 2-byte elements.
        let max = isize::MAX as usize / 2;
        let mul = |a: usize, b: usize| {
            a.checked_mul(b)
                .filter(|&v| v <= max)
                .ok_or(KernelError::ShapeOverflow)
        };
        let (b, i, f, m) = (
            n(self.batches)?,
            n(self.input_size)?,
            n(self.filters)?,
            n(self.memory)?,
        );
        Ok(SvdfLens {
            input: mul(b, i)?,
            feature: mul(f, i)?,
            time: mul(f, m)?,
            state: mul(mul(b, f)?, m)?,
            units: n(units)?,
            output: mul(b, n(units)?)?,
        })
    }
}

/// Precomputed parameters of int8 SVDF (TFLM's `OpDataSvdf`); see the [module docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SvdfParams {
    /// The layer's shape.
    pub shape: SvdfShape,
    input_zero_point: i32,
    state_zero_point: i32,
    output_zero_point: i32,
    feature_multiplier: (i32, i32),
    output_multiplier: (i32, i32),
}

impl SvdfParams {
    /// Parameters from the quantization of the input, the feature weights' scale, the
    /// state's quantization, the time weights' scale and the output's quantization, as TFLM's
    /// Prepare computes them.
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank that does not divide the filters or a
    /// memory of 0, [`KernelError::ShapeOverflow`] for buffers that cannot exist,
    /// [`KernelError::InvalidQuantization`] for a scale that is not finite and positive, an
    /// input or output zero point outside int8, a state zero point outside the state's type
    /// (`T`), or a multiplier of `2^31` or more.
    pub fn new<T: SvdfState>(
        shape: SvdfShape,
        input: Quant,
        feature_scale: f32,
        state: Quant,
        time_scale: f32,
        output: Quant,
    ) -> Result<Self, KernelError> {
        shape.lens()?;
        check_quant(input, "input scale", "input zero point")?;
        check_quant(output, "output scale", "output zero point")?;
        let positive = |s: f32, what| {
            if s.is_finite() && s > 0.0 {
                Ok(s)
            } else {
                Err(KernelError::InvalidQuantization { what })
            }
        };
        let feature_scale = positive(feature_scale, "feature weights scale")?;
        let time_scale = positive(time_scale, "time weights scale")?;
        let state_scale = positive(state.scale, "state scale")?;
        if !(T::MIN..=T::MAX).contains(&state.zero_point) {
            return Err(KernelError::InvalidQuantization {
                what: "state zero point",
            });
        }
        // In float, as TFLM computes them, then widened.
        let scale_1 = input.scale * feature_scale / state_scale;
        let scale_2 = state_scale * time_scale / output.scale;
        Ok(SvdfParams {
            shape,
            input_zero_point: input.zero_point,
            state_zero_point: state.zero_point,
            output_zero_point: output.zero_point,
            feature_multiplier: general_multiplier(f64::from(scale_1), "feature multiplier")?,
            output_multiplier: general_multiplier(f64::from(scale_2), "output multiplier")?,
        })
    }
}

impl SvdfParams {
    /// Writes the parameters ([`packed`](crate::packed)): the shape, the zero points and the
    /// two rescalings.
    pub fn pack(&self, w: &mut crate::packed::Words<'_>) {
        let s = self.shape;
        for d in [s.batches, s.input_size, s.filters, s.rank, s.memory] {
            w.put(d);
        }
        for zp in [
            self.input_zero_point,
            self.state_zero_point,
            self.output_zero_point,
        ] {
            w.put_i32(zp);
        }
        w.put_multiplier(self.feature_multiplier);
        w.put_multiplier(self.output_multiplier);
    }

    /// Reads what [`pack`](Self::pack) wrote for a state of type `T`: the shape checked as
    /// [`new`](Self::new) checks it, the zero points in their types, the rescalings as
    /// `QuantizeMultiplier` makes them.
    ///
    /// Errors as [`new`](Self::new).
    pub fn unpack<T: SvdfState>(
        r: &mut crate::packed::WordReader<'_>,
    ) -> Result<Self, KernelError> {
        let shape = SvdfShape {
            batches: r.take()?,
            input_size: r.take()?,
            filters: r.take()?,
            rank: r.take()?,
            memory: r.take()?,
        };
        shape.lens()?;
        Ok(SvdfParams {
            shape,
            input_zero_point: r.take_zero_point("input zero point")?,
            state_zero_point: r.take_in(T::MIN, T::MAX, "state zero point")?,
            output_zero_point: r.take_zero_point("output zero point")?,
            feature_multiplier: r.take_multiplier(31, "feature multiplier")?,
            output_multiplier: r.take_multiplier(31, "output multiplier")?,
        })
    }
}

/// int8 SVDF: updates `state` (`[batches][filters][memory]`, read and written) with `input`
/// (`[batches][input_size]`) through `feature` (`[filters][input_size]`), then computes
/// `output` (`[batches][units]`) from it through `time` (`[filters][memory]`) and the optional
/// `bias` (`[units]`). See the [module docs](self).
///
/// Errors: [`KernelError::LengthMismatch`] for a buffer whose length is not the shape's;
/// nothing is written then.
pub fn svdf<T: SvdfState>(
    p: &SvdfParams,
    state: &mut [T],
    input: &[i8],
    feature: &[i8],
    time: &[T],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    let s = p.shape;
    let lens = s.lens()?;
    check_len("state", lens.state, state.len())?;
    check_len("input", lens.input, input.len())?;
    check_len("weights", lens.feature, feature.len())?;
    check_len("time weights", lens.time, time.len())?;
    if let Some(bias) = bias {
        check_len("bias", lens.units, bias.len())?;
    }
    check_len("output", lens.output, output.len())?;
    let (input_size, filters, memory, rank) = (
        s.input_size as usize,
        s.filters as usize,
        s.memory as usize,
        s.rank as usize,
    );
    // Shift the whole buffer left by one: each row's oldest step drops out (the last element
    // of a row takes the next row's first, overwritten below).
    if !state.is_empty() {
        state.copy_within(1.., 0);
    }
    let (m1, s1) = p.feature_multiplier;
    let (m2, s2) = p.output_multiplier;
    for b in 0..s.batches as usize {
        let x = &input[b * input_size..(b + 1) * input_size];
        let rows = &mut state[b * filters * memory..(b + 1) * filters * memory];
        for f in 0..filters {
            let w = &feature[f * input_size..(f + 1) * input_size];
            let dot = x.iter().zip(w).fold(0i32, |acc, (&x, &w)| {
                acc.wrapping_add(
                    i32::from(w).wrapping_mul(i32::from(x).wrapping_sub(p.input_zero_point)),
                )
            });
            let d = multiply_by_quantized_multiplier(dot, m1, s1)
                .max(T::MIN)
                .min(T::MAX);
            // memory > 0: checked by the shape.
            rows[f * memory + memory - 1] = T::truncate(p.state_zero_point.wrapping_add(d));
        }
        let out = &mut output[b * lens.units..(b + 1) * lens.units];
        for (u, o) in out.iter_mut().enumerate() {
            let mut acc = bias.map_or(0, |b| b[u]);
            for f in u * rank..(u + 1) * rank {
                let row = &rows[f * memory..(f + 1) * memory];
                let w = &time[f * memory..(f + 1) * memory];
                let t = row.iter().zip(w).fold(0i32, |acc, (&v, &w)| {
                    let v: i32 = v.into();
                    let w: i32 = w.into();
                    acc.wrapping_add(w.wrapping_mul(v.wrapping_sub(p.state_zero_point)))
                });
                acc = acc.wrapping_add(t);
            }
            let scaled = multiply_by_quantized_multiplier(acc, m2, s2);
            *o = scaled
                .wrapping_add(p.output_zero_point)
                .max(i32::from(i8::MIN))
                .min(i32::from(i8::MAX)) as i8;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    fn shape() -> SvdfShape {
        SvdfShape {
            batches: 2,
            input_size: 3,
            filters: 4,
            rank: 2,
            memory: 3,
        }
    }

    fn params<T: SvdfState>() -> SvdfParams {
        SvdfParams::new::<T>(shape(), q(0.05, 3), 0.01, q(0.02, 0), 0.03, q(0.04, -2)).unwrap()
    }

    #[test]
    fn refuses_bad_shapes_and_quantization() {
        let bad_rank = SvdfShape { rank: 3, ..shape() };
        let sq = q(0.02, 0);
        let r = SvdfParams::new::<i8>(bad_rank, q(0.05, 0), 0.01, sq, 0.03, q(0.04, 0));
        assert_eq!(r, Err(KernelError::Unsupported { what: "SVDF rank" }));
        let no_memory = SvdfShape {
            memory: 0,
            ..shape()
        };
        assert!(SvdfParams::new::<i8>(no_memory, q(0.05, 0), 0.01, sq, 0.03, q(0.04, 0)).is_err());
        let huge = SvdfShape {
            batches: u32::MAX,
            filters: u32::MAX - 1,
            rank: 1,
            ..shape()
        };
        assert_eq!(
            SvdfParams::new::<i16>(huge, q(0.05, 0), 0.01, sq, 0.03, q(0.04, 0)),
            Err(KernelError::ShapeOverflow)
        );
        let state_zp = q(0.02, 200);
        assert!(
            SvdfParams::new::<i8>(shape(), q(0.05, 0), 0.01, state_zp, 0.03, q(0.04, 0)).is_err()
        );
        assert!(
            SvdfParams::new::<i16>(shape(), q(0.05, 0), 0.01, state_zp, 0.03, q(0.04, 0)).is_ok()
        );
        assert!(
            SvdfParams::new::<i8>(shape(), q(0.05, 0), f32::NAN, sq, 0.03, q(0.04, 0)).is_err()
        );
    }

    #[test]
    fn refuses_wrong_lengths_without_writing() {
        let p = params::<i16>();
        let mut state = [5i16; 24];
        let mut out = [9i8; 4];
        let r = svdf(&p, &mut state, &[0; 5], &[0; 12], &[0; 12], None, &mut out);
        assert!(matches!(r, Err(KernelError::LengthMismatch { .. })));
        let r = svdf(
            &p,
            &mut state,
            &[0; 6],
            &[0; 12],
            &[0; 12],
            Some(&[0; 3]),
            &mut out,
        );
        assert!(matches!(r, Err(KernelError::LengthMismatch { .. })));
        assert_eq!(state, [5; 24]);
        assert_eq!(out, [9; 4]);
    }

    /// The kernel against a direct transcription of TFLM's loops (with its scratch buffers).
    #[test]
    fn matches_tflm_loops() {
        let p = params::<i8>();
        let input: [i8; 6] = [1, -7, 100, -128, 127, 3];
        let feature: [i8; 12] = core::array::from_fn(|i| (i as i8).wrapping_mul(37) ^ 0x55);
        let time: [i8; 12] = core::array::from_fn(|i| (i as i8).wrapping_mul(91) ^ 0x1b);
        let bias = [1000, -2000];
        let mut state: [i8; 24] = core::array::from_fn(|i| (i as i8).wrapping_mul(29));
        let mut expected_state = state;
        let mut out = [0i8; 4];
        svdf(
            &p,
            &mut state,
            &input,
            &feature,
            &time,
            Some(&bias),
            &mut out,
        )
        .unwrap();

        let (b_n, i_n, f_n, m_n, rank) = (2, 3, 4, 3, 2);
        let st = &mut expected_state;
        st.copy_within(1.., 0);
        for b in 0..b_n {
            for f in 0..f_n {
                let mut d = 0i32;
                for i in 0..i_n {
                    d += i32::from(feature[f * i_n + i]) * (i32::from(input[b * i_n + i]) - 3);
                }
                let (m, s) = p.feature_multiplier;
                let d = multiply_by_quantized_multiplier(d, m, s).clamp(-128, 127);
                st[(b * f_n + f) * m_n + m_n - 1] = d as i8;
            }
        }
        let mut expected_out = [0i8; 4];
        for b in 0..b_n {
            let mut scratch = [0i32; 4];
            for (f, s) in scratch.iter_mut().enumerate() {
                for j in 0..m_n {
                    *s += i32::from(time[f * m_n + j]) * i32::from(st[(b * f_n + f) * m_n + j]);
                }
            }
            for u in 0..2 {
                let mut acc = bias[u];
                for r in 0..rank {
                    acc += scratch[u * rank + r];
                }
                let (m, s) = p.output_multiplier;
                let v = (multiply_by_quantized_multiplier(acc, m, s) - 2).clamp(-128, 127);
                expected_out[b * 2 + u] = v as i8;
            }
        }
        assert_eq!(state, expected_state);
        assert_eq!(out, expected_out);
    }
}
