//! UNIDIRECTIONAL_SEQUENCE_LSTM with int8 weights and an int16 cell state, over int8
//! activations or int16 ones (16x8): a stateful operator, TFLM's integer reference arithmetic
//! ([`npu_kernels::int8::lstm`]).
//!
//! Operands `[hidden_state, cell_state, input, input_weights, recurrent_weights, biases]`:
//! the two states first, as the op's [state operands](super::Operator::state_inputs)
//! (TFLite's variable tensors, inputs 18 and 19 of the `.tflite` operator: of the activation
//! type and int16, `batches · units` elements each), read and written back at every invoke;
//! the four gates' input weights (`[units][input_size]` each, gates in TFLite's order input,
//! forget, cell, output), recurrent weights (`[units][units]` each) and biases (`[units]`
//! each, int32 for int8 activations, int64 for int16), each joined into one constant at
//! prepare time. The output is every time step's hidden state.
//!
//! What TFLM's kernel refuses is refused here too: peephole, projection and layer-norm
//! tensors, a coupled input gate (no input gate weights), a cell gate other than tanh.
//!
//! Runs on the CPU fallback: Vela does not run UNIDIRECTIONAL_SEQUENCE_LSTM on the Ethos-U55
//! (it may split it into other operators, which this runtime does not), and an NPU job
//! writes one region (see [`Operator::state_inputs`]).

use npu_kernels::int8::{self as ki, CellGate, LstmActivation, LstmParams, LstmQuant, LstmShape};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, first_quant, unsupported, LowerCtx, Operand};
use super::{CpuKernel, OpError, Operands, Operator};
use crate::model::{Activation, BuiltinOptions, DataType, TensorInfo};

/// int8 UNIDIRECTIONAL_SEQUENCE_LSTM (int32 biases).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LstmI8 {
    /// Shape and requantization.
    pub params: LstmParams,
}

/// int16 (16x8) UNIDIRECTIONAL_SEQUENCE_LSTM: int16 activations, int8 weights, int64 biases.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LstmI16 {
    /// Shape and requantization.
    pub params: LstmParams,
}

/// Operand sizes for activations of `size` bytes and biases of `bias` bytes.
fn operands(p: &LstmParams, size: u32, bias: u32) -> Option<Operands> {
    let s = p.shape;
    let state = s.batches.checked_mul(s.units)?;
    let rows = s.batches.checked_mul(s.time_steps)?;
    let gates = s.units.checked_mul(4)?;
    Operands::new(
        &[
            state.checked_mul(size)?,
            state.checked_mul(2)?,
            rows.checked_mul(s.input_size)?.checked_mul(size)?,
            gates.checked_mul(s.input_size)?,
            gates.checked_mul(s.units)?,
            gates.checked_mul(bias)?,
        ],
        0,
        rows.checked_mul(s.units)?.checked_mul(size)?,
    )
}

fn macs(p: &LstmParams) -> u64 {
    let s = p.shape;
    u64::from(s.batches)
        .saturating_mul(u64::from(s.time_steps))
        .saturating_mul(4 * u64::from(s.units))
        .saturating_mul(u64::from(s.input_size) + u64::from(s.units))
}

/// The kernel over typed views of the operands (see [`Operator::run_stateful`]).
fn run<A>(
    p: &LstmParams,
    state: &mut [&mut [u8]],
    inputs: &[&[u8]],
    output: &mut [u8],
) -> Result<(), OpError>
where
    A: LstmActivation + bytemuck::Pod,
    A::Bias: bytemuck::Pod,
{
    let [hidden, cell] = state else {
        return Err(OpError::State);
    };
    let hidden = view_mut::<A>(hidden).map_err(|_| OpError::Misaligned { operand: 0 })?;
    let cell = view_mut::<i16>(cell).map_err(|_| OpError::Misaligned { operand: 1 })?;
    // `inputs` are operands 2.. (the states are 0 and 1).
    let x = view::<A>(input(inputs, 0), 2)?;
    let w = view::<i8>(input(inputs, 1), 3)?;
    let r = view::<i8>(input(inputs, 2), 4)?;
    let b = view::<A::Bias>(input(inputs, 3), 5)?;
    Ok(ki::lstm(p, hidden, cell, x, w, r, b, view_mut(output)?)?)
}

impl Operator for LstmI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: LstmParams::unpack::<i8>(r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        operands(&self.params, 1, 4)
    }
    fn macs(&self) -> u64 {
        macs(&self.params)
    }
    fn run(&self, _inputs: &[&[u8]], _output: &mut [u8]) -> Result<(), OpError> {
        // The states must be writable: see `run_stateful`.
        Err(OpError::State)
    }
    fn state_inputs(&self) -> u8 {
        2
    }
    fn run_stateful(
        &self,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        run::<i8>(&self.params, state, inputs, output)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Lstm
    }
}

impl Operator for LstmI16 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: LstmParams::unpack::<i16>(r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        operands(&self.params, 2, 8)
    }
    fn macs(&self) -> u64 {
        macs(&self.params)
    }
    fn run(&self, _inputs: &[&[u8]], _output: &mut [u8]) -> Result<(), OpError> {
        Err(OpError::State)
    }
    fn state_inputs(&self) -> u8 {
        2
    }
    fn run_stateful(
        &self,
        state: &mut [&mut [u8]],
        inputs: &[&[u8]],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        run::<i16>(&self.params, state, inputs, output)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Lstm
    }
}

/// A constant int8 weight matrix of `rows × cols`, with one scale and zero point 0.
fn weights(t: &TensorInfo<'_>, rows: u32, cols: u32) -> Result<f32, lower::LowerError> {
    if t.dtype != DataType::Int8 || t.data.is_none() {
        return Err(unsupported("LSTM weights other than constant int8"));
    }
    if *t.shape.dims() != [rows, cols] {
        return Err(unsupported("LSTM weights shape"));
    }
    let q = t
        .quantization
        .as_ref()
        .ok_or(unsupported("LSTM weights without quantization"))?;
    // TFLM's LSTM reads one scale, and folds the zero point into nothing.
    if q.len() != 1 || q.zero_point(0).unwrap_or(0) != 0 {
        return Err(unsupported("LSTM weights not per-tensor symmetric"));
    }
    first_quant(t).map(|q| q.scale)
}

/// UNIDIRECTIONAL_SEQUENCE_LSTM (int8, or int16 activations with int8 weights).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    if ctx.input_count() != 24 {
        return Err(unsupported("LSTM input count other than 24"));
    }
    let BuiltinOptions::UnidirectionalSequenceLstm(opts) =
        ctx.options().clone().or_default_for(ctx.builtin())
    else {
        return Err(unsupported("LSTM options"));
    };
    if opts.activation != Activation::Tanh {
        return Err(unsupported("LSTM cell gate other than tanh"));
    }
    for absent in [9, 10, 11, 16, 17, 20, 21, 22, 23] {
        if ctx.optional_input(absent)?.is_some() {
            return Err(unsupported("LSTM peephole, projection or layer norm"));
        }
    }
    let (x, hidden, cell, y) = (ctx.input(0)?, ctx.input(18)?, ctx.input(19)?, ctx.output()?);
    let [d0, d1, input_size] = *x.shape.dims() else {
        return Err(unsupported("LSTM input rank other than 3"));
    };
    let (batches, time_steps) = if opts.time_major { (d1, d0) } else { (d0, d1) };
    let units = match *y.shape.dims() {
        [a, b, u] if (a, b) == (d0, d1) => u,
        _ => return Err(unsupported("LSTM output shape")),
    };
    if !hidden.is_variable || !cell.is_variable {
        return Err(unsupported("LSTM state that is not a variable tensor"));
    }
    let int16 = match x.dtype {
        DataType::Int8 => false,
        DataType::Int16 => true,
        _ => return Err(unsupported("LSTM input other than int8 or int16")),
    };
    if hidden.dtype != x.dtype || y.dtype != x.dtype || cell.dtype != DataType::Int16 {
        return Err(unsupported(
            "LSTM states other than the input's type and int16",
        ));
    }
    let state_elements = batches as usize * units as usize;
    lower::check_elements(&hidden, state_elements)?;
    lower::check_elements(&cell, state_elements)?;
    // The output is the hidden state's bytes, copied: it must be quantized alike.
    let (xq, hq) = (first_quant(&x)?, first_quant(&hidden)?);
    if first_quant(&y)? != hq {
        return Err(unsupported("LSTM output quantized unlike its hidden state"));
    }
    let bias_type = if int16 {
        DataType::Int64
    } else {
        DataType::Int32
    };
    let mut parts = [[0u16; 4]; 3];
    let mut input_weights = [0f32; 4];
    let mut recurrent_weights = [0f32; 4];
    for g in 0..4 {
        let (w, r, b) = (ctx.input(1 + g)?, ctx.input(5 + g)?, ctx.input(12 + g)?);
        input_weights[g] = weights(&w, units, input_size)?;
        recurrent_weights[g] = weights(&r, units, units)?;
        if b.dtype != bias_type || b.data.is_none() || *b.shape.dims() != [units] {
            return Err(unsupported(
                "LSTM bias other than constant int32 (int64) of units",
            ));
        }
        parts[0][g] = w.index;
        parts[1][g] = r.index;
        parts[2][g] = b.index;
    }
    let shape = LstmShape {
        batches,
        time_steps,
        input_size,
        units,
        time_major: opts.time_major,
    };
    let q = LstmQuant {
        input: xq,
        input_weights,
        recurrent_weights,
        hidden: hq,
        cell_scale: first_quant(&cell)?.scale,
    };
    let list = lower::operands(&[
        Operand::Tensor(hidden.index),
        Operand::Tensor(cell.index),
        Operand::Tensor(x.index),
        Operand::Joined(parts[0]),
        Operand::Joined(parts[1]),
        Operand::Joined(parts[2]),
    ]);
    let (clip, gate) = (opts.cell_clip, CellGate::Tanh);
    Ok(if int16 {
        let params = LstmParams::new::<i16>(shape, &q, clip, gate)?;
        compute(LstmI16 { params }, list)
    } else {
        let params = LstmParams::new::<i8>(shape, &q, clip, gate)?;
        compute(LstmI8 { params }, list)
    })
}
