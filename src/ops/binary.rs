//! ADD, SUB and MUL: two operands combined element by element, in f32, in int8 over equal
//! shapes (which may run in place), and in int8 with TFLite broadcasting.
//!
//! Operands `[a, b]`. Without broadcasting, ADD and MUL are plain elementwise ops; TFLM's
//! broadcast kernels compute each element the same way, so the lowering picks the plain form
//! whenever the shapes agree.

use npu_kernels::f32 as kf;
use npu_kernels::int8::{self as ki, AddParams, BroadcastShape, MulParams, SubParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, Op, OpError, Operands, Operator};
use crate::model::{Activation, BuiltinOp, BuiltinOptions, DataType};

/// `out = a + b` on `len` f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddF32 {
    /// Elements.
    pub len: u32,
}

/// `out = a * b` on `len` f32 elements.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulF32 {
    /// Elements.
    pub len: u32,
}

/// int8 `out = a + b` on `len` elements, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddI8 {
    /// Elements.
    pub len: u32,
    /// Requantization parameters.
    pub params: AddParams,
}

/// int8 `out = a * b` on `len` elements, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulI8 {
    /// Elements.
    pub len: u32,
    /// Requantization parameters.
    pub params: MulParams,
}

/// int8 ADD with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddBroadcastI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: AddParams,
}

/// int8 SUB with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SubI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: SubParams,
}

/// int8 MUL with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MulBroadcastI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: MulParams,
}

/// Operands of an elementwise op of `len` elements of `size` bytes.
fn same_shapes(len: u32, size: u32) -> Option<Operands> {
    let b = len.checked_mul(size)?;
    Operands::new(&[b, b], 0, b)
}

/// Operands of a broadcast op.
fn broadcast(shape: &BroadcastShape) -> Option<Operands> {
    let (a, b, o) = shape.lens();
    Operands::new(&[bytes(a)?, bytes(b)?], 0, bytes(o)?)
}

/// A broadcast op as a cycle model's layer: the full-size operand first, as Vela orders a
/// broadcast operand second.
pub(super) fn broadcast_layer(kind: LayerKind, shape: &BroadcastShape) -> Layer {
    let loops = shape.loops();
    let (a_rep, b_rep) = shape.repeats();
    let operand = |repeated: u8| {
        let mut dims = [1u32; 6];
        for (i, (&d, o)) in loops.iter().zip(dims.iter_mut()).enumerate() {
            *o = if repeated >> i & 1 != 0 { 1 } else { d };
        }
        padded(&dims[..loops.len()])
    };
    let (a, b) = (operand(a_rep), operand(b_rep));
    let (first, second, second_operand) = if a_rep != 0 && b_rep == 0 {
        (b, a, 0)
    } else {
        (a, b, 1)
    };
    Layer {
        ifm2: Some(second),
        ifm2_operand: Some(second_operand),
        ..Layer::new(kind, first, padded(loops))
    }
}

impl Operator for AddF32 {
    packed_fields!(len);
    fn operands(&self) -> Option<Operands> {
        same_shapes(self.len, 4)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (view(input(inputs, 0), 0)?, view(input(inputs, 1), 1)?);
        Ok(kf::add(a, b, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::AddF32
    }
}

impl Operator for MulF32 {
    packed_fields!(len);
    fn operands(&self) -> Option<Operands> {
        same_shapes(self.len, 4)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (view(input(inputs, 0), 0)?, view(input(inputs, 1), 1)?);
        Ok(kf::mul(a, b, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::MulF32
    }
}

impl Operator for AddI8 {
    packed_fields!(len, params);
    fn operands(&self) -> Option<Operands> {
        same_shapes(self.len, 1)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        Ok(ki::add(&self.params, a, b, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Add
    }
    fn runs_in_place(&self) -> bool {
        true
    }
    fn prefix(&self, len: u32) -> Option<Op> {
        Some(AddI8 { len, ..*self }.into())
    }
}

impl Operator for MulI8 {
    packed_fields!(len, params);
    fn operands(&self) -> Option<Operands> {
        same_shapes(self.len, 1)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        Ok(ki::mul(&self.params, a, b, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Mul
    }
    fn runs_in_place(&self) -> bool {
        true
    }
    fn prefix(&self, len: u32) -> Option<Op> {
        Some(MulI8 { len, ..*self }.into())
    }
}

/// Describes an int8 binary operator with broadcasting: `$kernel` of `npu-kernels` computes
/// it, and both cost models price it as `$class`. The broadcasting ones differ only there.
macro_rules! broadcast_operator {
    ($op:ident, $kernel:path, $class:ident) => {
        impl Operator for $op {
            packed_fields!(shape, params);
            fn operands(&self) -> Option<Operands> {
                broadcast(&self.shape)
            }
            fn macs(&self) -> u64 {
                self.shape.lens().2 as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let (a, b) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
                let out = view_mut(output)?;
                Ok($kernel(&self.params, &self.shape, a, b, out)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::$class
            }
            fn taps(&self) -> u64 {
                self.shape.runs()
            }
            fn layer(&self) -> Option<Layer> {
                Some(broadcast_layer(LayerKind::$class, &self.shape))
            }
        }
    };
}

broadcast_operator!(AddBroadcastI8, ki::add_broadcast, Add);
broadcast_operator!(SubI8, ki::sub_broadcast, Sub);
broadcast_operator!(MulBroadcastI8, ki::mul_broadcast, Mul);

/// ADD, SUB and MUL (int8): the plain ops for equal shapes (ADD and MUL), the broadcast ones
/// otherwise.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let act = match ctx.options() {
        BuiltinOptions::Add(o) | BuiltinOptions::Sub(o) => o.activation,
        BuiltinOptions::Mul(o) => o.activation,
        BuiltinOptions::None => Activation::None,
        _ => return Err(unsupported("options")),
    };
    let act = lower::activation(act)?;
    let a = ctx.input(0)?;
    if a.dtype == DataType::Int16 {
        return lower::int16(|| super::binary_int16::lower(ctx, act));
    }
    let (b, y) = (ctx.input(1)?, ctx.output()?);
    let (aq, bq, yq) = (quant(&a)?, quant(&b)?, quant(&y)?);
    let shape = BroadcastShape::new(a.shape.dims(), b.shape.dims(), y.shape.dims())?;
    let (a_len, b_len, len) = shape.lens();
    let plain = a_len == len && b_len == len;
    let list = operands(&[
        lower::Operand::Tensor(a.index),
        lower::Operand::Tensor(b.index),
    ]);
    Ok(match ctx.builtin() {
        BuiltinOp::Add if plain => compute(
            AddI8 {
                len: len as u32,
                params: AddParams::new(aq, bq, yq, act)?,
            },
            list,
        ),
        BuiltinOp::Mul if plain => compute(
            MulI8 {
                len: len as u32,
                params: MulParams::new(aq, bq, yq, act)?,
            },
            list,
        ),
        BuiltinOp::Add => compute(
            AddBroadcastI8 {
                shape,
                params: AddParams::new(aq, bq, yq, act)?,
            },
            list,
        ),
        BuiltinOp::Sub => compute(
            SubI8 {
                shape,
                params: SubParams::new(aq, bq, yq, act)?,
            },
            list,
        ),
        _ => compute(
            MulBroadcastI8 {
                shape,
                params: MulParams::new(aq, bq, yq, act)?,
            },
            list,
        ),
    })
}
