//! ADD and MUL in 16x8 (int16 operands and output), with TFLite broadcasting: TFLM's int16
//! paths (see [`npu_kernels::int16`]: ADD is the int8 arithmetic with a left shift of 15,
//! whatever the zero points; MUL needs zero points of 0).
//!
//! Operands `[a, b]`. Both run on the NPU: Vela maps 16x8 ADD and MUL to the Ethos-U55's
//! elementwise unit.

use npu_kernels::int16::{self as k16, AddParamsI16, MulParamsI16};
use npu_kernels::int8::{Activation, BroadcastShape};

use super::binary::broadcast_layer;
use super::interp::{i16s, view_mut};
use super::lower::{self, compute, operands, quant_i16, unsupported, LowerCtx};
use super::{bytes, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::BuiltinOp;

/// 16x8 ADD with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddI16 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: AddParamsI16,
}

/// 16x8 MUL with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulI16 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: MulParamsI16,
}

/// The int8 ops' layer (the full-size operand first), on 16-bit feature maps.
fn layer16(kind: LayerKind, shape: &BroadcastShape) -> Layer {
    Layer {
        element_bits: 16,
        ..broadcast_layer(kind, shape)
    }
}

/// Operands of a broadcast op on int16 elements.
fn operands_of(shape: &BroadcastShape) -> Option<Operands> {
    let (a, b, o) = shape.lens();
    let two = |n: usize| bytes(n.checked_mul(2)?);
    Operands::new(&[two(a)?, two(b)?], 0, two(o)?)
}

impl Operator for AddI16 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        operands_of(&self.shape)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().2 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (i16s(inputs, 0)?, i16s(inputs, 1)?);
        Ok(k16::add(
            &self.params,
            &self.shape,
            a,
            b,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::AddI16
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer16(LayerKind::Add, &self.shape))
    }
}

impl Operator for MulI16 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        operands_of(&self.shape)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().2 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (i16s(inputs, 0)?, i16s(inputs, 1)?);
        Ok(k16::mul(
            &self.params,
            &self.shape,
            a,
            b,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::MulScalar
    }
    fn layer(&self) -> Option<Layer> {
        Some(layer16(LayerKind::Mul, &self.shape))
    }
}

/// ADD and MUL (16x8), `act` the fused activation; SUB on int16 is refused.
pub(super) fn lower(
    ctx: &LowerCtx<'_, '_>,
    act: Activation,
) -> Result<lower::Lowered, lower::LowerError> {
    let (a, b, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let (aq, bq, yq) = (quant_i16(&a)?, quant_i16(&b)?, quant_i16(&y)?);
    let shape = BroadcastShape::new(a.shape.dims(), b.shape.dims(), y.shape.dims())?;
    let list = operands(&[
        lower::Operand::Tensor(a.index),
        lower::Operand::Tensor(b.index),
    ]);
    Ok(match ctx.builtin() {
        BuiltinOp::Add => compute(
            AddI16 {
                shape,
                params: AddParamsI16::new(aq, bq, yq, act)?,
            },
            list,
        ),
        BuiltinOp::Mul => compute(
            MulI16 {
                shape,
                params: MulParamsI16::new(aq, bq, yq, act)?,
            },
            list,
        ),
        _ => return Err(unsupported("int16 operator")),
    })
}
