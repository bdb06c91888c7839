//! SVDF (int8 input and output, with an int8 or an int16 activation state): a stateful
//! operator, TFLM's integer reference arithmetic ([`npu_kernels::int8::svdf`]).
//!
//! Operands `[state, input, weights_feature, weights_time]` or
//! `[state, input, weights_feature, weights_time, bias]`: the activation state first, as the
//! op's one [state operand](super::Operator::state_inputs) (TFLite's variable tensor, input 4
//! of the `.tflite` operator), read and written back at every invoke; the time weights and the
//! state of the state's element type (int8 or int16); the bias little-endian i32.
//!
//! Runs on the CPU fallback: Vela does not run SVDF on the Ethos-U55, and an NPU job writes
//! one region (see [`Operator::state_inputs`]).

use npu_kernels::int8::{self as ki, SvdfParams, SvdfShape};
use npu_kernels::packed::{Packed, WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{bias, i8s, input, view, view_mut};
use super::lower::{self, compute, first_quant, operands, quant, unsupported, LowerCtx, Operand};
use super::{CpuKernel, OpError, Operands, Operator};
use crate::model::{DataType, TensorInfo};

/// int8 SVDF.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SvdfI8 {
    /// Shape and requantization.
    pub params: SvdfParams,
    /// The activation state and the time weights are int16 (else int8).
    pub state_i16: bool,
}

impl SvdfI8 {
    fn state_size(&self) -> u32 {
        if self.state_i16 {
            2
        } else {
            1
        }
    }
}

impl Operator for SvdfI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.state_i16.pack(w);
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let state_i16 = bool::unpack(r)?;
        let params = if state_i16 {
            SvdfParams::unpack::<i16>(r)?
        } else {
            SvdfParams::unpack::<i8>(r)?
        };
        Ok(Self { params, state_i16 })
    }
    fn operands(&self) -> Option<Operands> {
        let s = self.params.shape;
        let units = s.units()?;
        let size = self.state_size();
        let state = s
            .batches
            .checked_mul(s.filters)?
            .checked_mul(s.memory)?
            .checked_mul(size)?;
        let input = s.batches.checked_mul(s.input_size)?;
        let feature = s.filters.checked_mul(s.input_size)?;
        let time = s.filters.checked_mul(s.memory)?.checked_mul(size)?;
        let bias = units.checked_mul(4)?;
        Operands::new(
            &[state, input, feature, time, bias],
            1,
            s.batches.checked_mul(units)?,
        )
    }
    fn macs(&self) -> u64 {
        let s = self.params.shape;
        u64::from(s.batches)
            .saturating_mul(u64::from(s.filters))
            .saturating_mul(u64::from(s.input_size) + u64::from(s.memory))
    }
    fn run(&self, _inputs: &[&[u8]], _output: &mut [u8]) -> Result<(), OpError> {
        // The state must be writable: see `run_stateful`.
        Err(OpError::State)
    }
    fn state_inputs(&self) -> u8 {
        1
    }
    fn run_stateful(
        &self,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let [state] = state else {
            return Err(OpError::State);
        };
        // `inputs` are operands 1.. (the state is operand 0).
        let x = i8s(inputs, 0)?;
        let feature = i8s(inputs, 1)?;
        let b = bias(inputs, 3)?;
        let out = view_mut(output)?;
        let p = &self.params;
        if self.state_i16 {
            let state = view_mut::<i16>(state).map_err(|_| OpError::Misaligned { operand: 0 })?;
            let time = view::<i16>(input(inputs, 2), 3)?;
            ki::svdf(p, state, x, feature, time, b, out)?;
        } else {
            let state = view_mut::<i8>(state).map_err(|_| OpError::Misaligned { operand: 0 })?;
            ki::svdf(p, state, x, feature, i8s(inputs, 2)?, b, out)?;
        }
        Ok(())
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Svdf
    }
}

/// A rank-2 tensor's dimensions.
fn dims2(t: &TensorInfo<'_>) -> Result<(u32, u32), lower::LowerError> {
    match *t.shape.dims() {
        [a, b] => Ok((a, b)),
        _ => Err(unsupported("SVDF tensor rank other than 2")),
    }
}

/// SVDF (int8). The rank is the feature filters over the output's units (TFLM checks the
/// options' rank against exactly that).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    if ctx.input_count() != 5 {
        return Err(unsupported("SVDF input count other than 5"));
    }
    let (x, feature, time, state, y) = (
        ctx.input(0)?,
        ctx.input(1)?,
        ctx.input(2)?,
        ctx.input(4)?,
        ctx.output()?,
    );
    let b = ctx.optional_input(3)?;
    let (batches, input_size) = dims2(&x)?;
    let (filters, feature_input) = dims2(&feature)?;
    let (time_filters, memory) = dims2(&time)?;
    let (out_batches, units) = dims2(&y)?;
    if feature_input != input_size || time_filters != filters || out_batches != batches {
        return Err(unsupported("SVDF shapes that disagree"));
    }
    if units == 0 || !filters.is_multiple_of(units) {
        return Err(unsupported("SVDF units that do not divide the filters"));
    }
    let state_len = filters
        .checked_mul(memory)
        .ok_or(unsupported("SVDF state size"))?;
    if dims2(&state)? != (batches, state_len) {
        return Err(unsupported("SVDF state shape"));
    }
    if !state.is_variable {
        return Err(unsupported("SVDF state that is not a variable tensor"));
    }
    if feature.dtype != DataType::Int8 || feature.data.is_none() || time.data.is_none() {
        return Err(unsupported("SVDF weights other than constant int8"));
    }
    let state_i16 = match (time.dtype, state.dtype) {
        (DataType::Int8, DataType::Int8) => false,
        (DataType::Int16, DataType::Int16) => true,
        _ => return Err(unsupported("SVDF time weights and state types")),
    };
    let shape = SvdfShape {
        batches,
        input_size,
        filters,
        rank: filters / units,
        memory,
    };
    let (xq, sq, yq) = (quant(&x)?, first_quant(&state)?, quant(&y)?);
    let (fs, ts) = (first_quant(&feature)?.scale, first_quant(&time)?.scale);
    let params = if state_i16 {
        SvdfParams::new::<i16>(shape, xq, fs, sq, ts, yq)?
    } else {
        SvdfParams::new::<i8>(shape, xq, fs, sq, ts, yq)?
    };
    let mut list = operands(&[
        Operand::Tensor(state.index),
        Operand::Tensor(x.index),
        Operand::Tensor(feature.index),
        Operand::Tensor(time.index),
    ]);
    if let Some(b) = b {
        if b.dtype != DataType::Int32 || b.data.is_none() {
            return Err(unsupported("SVDF bias other than constant int32"));
        }
        lower::check_elements(&b, units as usize)?;
        // TFLM's Prepare refuses a bias whose scale is not the state's times the time weights'.
        let expected = f64::from(sq.scale * ts);
        if (f64::from(first_quant(&b)?.scale) - expected).abs() >= 1e-5 {
            return Err(unsupported("SVDF bias scale"));
        }
        // Four operands before: room for the fifth.
        let _ = list.push(Operand::Tensor(b.index));
    }
    Ok(compute(SvdfI8 { params, state_i16 }, list))
}
