//! CONCATENATION (int8): tensors joined along an axis, all in one quantization. Operands: the
//! inputs in order, at most [`MAX_CONCAT_INPUTS`](npu_kernels::int8::MAX_CONCAT_INPUTS).
//! Along the outermost axis each input is one block of the output, and a planner may have
//! the producers write there directly ([`Operator::contiguous_inputs`]).

use npu_kernels::int8::{self as ki, ConcatParams, Quant, MAX_CONCAT_INPUTS};

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, quant, unsupported, LowerCtx};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator, MAX_INPUTS};
use crate::model::{BuiltinOptions, Shape};

/// int8 CONCATENATION (inputs and output share one quantization).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ConcatenationI8 {
    /// Shapes and axis.
    pub params: ConcatParams,
}

impl Operator for ConcatenationI8 {
    packed_fields!(params);
    fn operands(&self) -> Option<Operands> {
        let mut inputs = heapless::Vec::<u32, MAX_INPUTS>::new();
        for i in 0..self.params.inputs() {
            inputs.push(bytes(self.params.input_len(i))?).ok()?;
        }
        Operands::new(&inputs, 0, bytes(self.params.output_len())?)
    }
    fn macs(&self) -> u64 {
        self.params.output_len() as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let mut views: heapless::Vec<&[i8], MAX_INPUTS> = heapless::Vec::new();
        for i in 0..inputs.len() {
            let _ = views.push(i8s(inputs, i)?);
        }
        Ok(ki::concatenation(&self.params, &views, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Concatenation
    }
    fn layer(&self) -> Option<Layer> {
        let out = padded(self.params.output_shape().as_slice());
        Some(Layer::new(LayerKind::Concatenation, out, out))
    }
    fn contiguous_inputs(&self) -> Option<heapless::Vec<u32, MAX_INPUTS>> {
        if self.params.outer() != 1 {
            return None;
        }
        let mut lens = heapless::Vec::new();
        for k in 0..self.params.inputs() {
            lens.push(u32::try_from(self.params.input_len(k)).ok()?)
                .ok()?;
        }
        Some(lens)
    }
}

/// CONCATENATION (int8), no fused activation.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Concatenation(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    if lower::activation(o.activation)? != ki::Activation::None {
        return Err(unsupported("fused activation on CONCATENATION"));
    }
    let y = ctx.output()?;
    let n = ctx.input_count();
    if n > MAX_CONCAT_INPUTS {
        return Err(unsupported("more inputs than MAX_CONCAT_INPUTS"));
    }
    let mut shapes: heapless::Vec<Shape, MAX_CONCAT_INPUTS> = heapless::Vec::new();
    let mut quants: heapless::Vec<Quant, MAX_CONCAT_INPUTS> = heapless::Vec::new();
    let mut list = heapless::Vec::new();
    for i in 0..n {
        let x = ctx.input(i)?;
        let _ = shapes.push(x.shape);
        let _ = quants.push(quant(&x)?);
        let _ = list.push(lower::Operand::Tensor(x.index));
    }
    ki::check_same_quant(&quants, quant(&y)?)?;
    let mut dims: heapless::Vec<&[u32], MAX_CONCAT_INPUTS> = heapless::Vec::new();
    for shape in &shapes {
        let _ = dims.push(shape.dims());
    }
    let params = ConcatParams::new(&dims, o.axis)?;
    if params.output_shape().as_slice() != y.shape.dims() {
        return Err(unsupported("CONCATENATION output shape"));
    }
    Ok(compute(ConcatenationI8 { params }, list))
}
