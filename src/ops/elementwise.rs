//! Elementwise operators beyond ADD, SUB and MUL: the unary activations LEAKY_RELU, ABS and
//! HARD_SWISH (operands `[input]`), the broadcasting binaries SQUARED_DIFFERENCE, MAXIMUM,
//! MINIMUM (operands `[a, b]`) and PRELU (operands `[input, alpha]`), and NEG on float32.
//!
//! # Where they run
//!
//! Vela (`SUPPORTED_OPS.md`) places all the int8 ones on an Ethos-U55: MAXIMUM, MINIMUM and ABS
//! as elementwise passes, LEAKY_RELU and HARD_SWISH as 256-entry lookup tables, PRELU and
//! SQUARED_DIFFERENCE as short chains of elementwise passes. Its constraints (at most 4-D, batch
//! 1, at least one input of the output's shape, equal quantization for MAXIMUM and MINIMUM) are
//! not checked per operator here: like ADD's, each family is on the NPU set whole.
//!
//! The cycle model prices each with an existing class: MAXIMUM and MINIMUM as a broadcast ADD
//! pass, SQUARED_DIFFERENCE and PRELU as a broadcast MUL pass (the last pass of Vela's chain:
//! the chain's other passes are not counted), ABS as a RELU pass, LEAKY_RELU and HARD_SWISH as
//! a lookup-table pass. The CPU model, measured on the firmware's synthetic operators: SUB's
//! rate for SQUARED_DIFFERENCE, MUL's for PRELU, RELU's for LEAKY_RELU and ABS, RSQRT's for
//! HARD_SWISH (each within 8% of its own measurement), and classes of their own for the raw
//! comparisons of MAXIMUM and MINIMUM ([`CpuKernel::Compare`]) and for NEG
//! ([`CpuKernel::NegF32`]).
//!
//! TFLM has NEG only on float32 (its int8 case is a TODO), which is where Keras'
//! LayerNormalization has it (between a DEQUANTIZE and a QUANTIZE): [`NegF32`] runs on the CPU,
//! as Vela does not take NEG.

use npu_kernels::f32 as kf;
use npu_kernels::int8::{
    self as ki, AbsParams, BroadcastShape, HardSwishParams, LeakyReluParams, PreluParams,
    SquaredDifferenceParams,
};

use super::binary::broadcast_layer;
use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, quant, unsupported, LowerCtx};
use super::{bytes, rows_of, CpuKernel, Layer, LayerKind, Op, OpError, Operands, Operator};
use crate::model::{BuiltinOp, BuiltinOptions, DataType};

/// `out = −x` on `len` f32 elements (TFLM's only NEG kernel).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NegF32 {
    /// Elements.
    pub len: u32,
}

/// int8 SQUARED_DIFFERENCE with broadcasting, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SquaredDifferenceI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: SquaredDifferenceParams,
}

/// int8 MAXIMUM with broadcasting: the larger raw value (TFLM ignores quantization).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MaximumI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
}

/// int8 MINIMUM with broadcasting: the smaller raw value (TFLM ignores quantization).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MinimumI8 {
    /// Shapes of `a`, `b` and the output.
    pub shape: BroadcastShape,
}

/// int8 LEAKY_RELU on `len` elements, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LeakyReluI8 {
    /// Elements.
    pub len: u32,
    /// Requantization parameters (alpha included).
    pub params: LeakyReluParams,
}

/// int8 PRELU, alpha broadcast against the input, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PreluI8 {
    /// Shapes of the input, of alpha and of the output.
    pub shape: BroadcastShape,
    /// Requantization parameters.
    pub params: PreluParams,
}

/// int8 HARD_SWISH on `len` elements, TFLite's 16-bit fixed-point arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HardSwishI8 {
    /// Elements.
    pub len: u32,
    /// Fixed-point parameters.
    pub params: HardSwishParams,
}

/// int8 ABS on `len` elements, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AbsI8 {
    /// Elements.
    pub len: u32,
    /// Requantization parameters.
    pub params: AbsParams,
}

/// Operands of a broadcast op.
fn broadcast_operands(shape: &BroadcastShape) -> Option<Operands> {
    let (a, b, o) = shape.lens();
    Operands::new(&[bytes(a)?, bytes(b)?], 0, bytes(o)?)
}

/// A unary op over `len` elements as a cycle model's layer of class `kind`.
fn unary_layer(kind: LayerKind, len: u32) -> Layer {
    let rows = rows_of(len, 1);
    Layer::new(kind, rows, rows)
}

impl Operator for NegF32 {
    packed_fields!(len);
    fn operands(&self) -> Option<Operands> {
        let b = self.len.checked_mul(4)?;
        Operands::new(&[b], 0, b)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(kf::neg(view(input(inputs, 0), 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::NegF32
    }
    fn runs_in_place(&self) -> bool {
        true
    }
    fn prefix(&self, len: u32) -> Option<Op> {
        Some(NegF32 { len }.into())
    }
}

/// Describes an int8 unary operator over `len` elements: `$kernel` computes it, the CPU model
/// prices it as `$cpu` and the cycle model as a `$layer` pass.
macro_rules! unary_operator {
    ($op:ident, $kernel:path, $cpu:ident, $layer:ident) => {
        impl Operator for $op {
            packed_fields!(len, params);
            fn operands(&self) -> Option<Operands> {
                Operands::new(&[self.len], 0, self.len)
            }
            fn macs(&self) -> u64 {
                u64::from(self.len)
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                Ok($kernel(&self.params, i8s(inputs, 0)?, view_mut(output)?)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::$cpu
            }
            fn layer(&self) -> Option<Layer> {
                Some(unary_layer(LayerKind::$layer, self.len))
            }
            fn runs_in_place(&self) -> bool {
                true
            }
            fn prefix(&self, len: u32) -> Option<Op> {
                Some($op { len, ..*self }.into())
            }
        }
    };
}

// One requantization per element, as RELU's loop; the lookup-table ones on the NPU.
unary_operator!(LeakyReluI8, ki::leaky_relu, Relu, Logistic);
unary_operator!(AbsI8, ki::abs, Relu, Relu);
// A chain of 16-bit fixed-point steps per element: priced as RSQRT's.
unary_operator!(HardSwishI8, ki::hard_swish, Rsqrt, Logistic);

impl Operator for SquaredDifferenceI8 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        broadcast_operands(&self.shape)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().2 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (a, b) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        Ok(ki::squared_difference(
            &self.params,
            &self.shape,
            a,
            b,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // Two rescaled inputs and one rescaled result per element, as SUB.
        CpuKernel::Sub
    }
    fn layer(&self) -> Option<Layer> {
        Some(broadcast_layer(LayerKind::Mul, &self.shape))
    }
}

impl Operator for PreluI8 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        broadcast_operands(&self.shape)
    }
    fn macs(&self) -> u64 {
        self.shape.lens().2 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (x, alpha) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        Ok(ki::prelu(
            &self.params,
            &self.shape,
            x,
            alpha,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // One product and one rescaling per element, as 16x8 MUL.
        CpuKernel::MulScalar
    }
    fn layer(&self) -> Option<Layer> {
        Some(broadcast_layer(LayerKind::Mul, &self.shape))
    }
}

/// Describes MAXIMUM or MINIMUM: `$kernel` computes it; the CPU model prices it as raw
/// compares, the cycle model as a broadcast ADD-class pass.
macro_rules! compare_operator {
    ($op:ident, $kernel:path) => {
        impl Operator for $op {
            packed_fields!(shape);
            fn operands(&self) -> Option<Operands> {
                broadcast_operands(&self.shape)
            }
            fn macs(&self) -> u64 {
                self.shape.lens().2 as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let (a, b) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
                Ok($kernel(&self.shape, a, b, view_mut(output)?)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::Compare
            }
            fn layer(&self) -> Option<Layer> {
                Some(broadcast_layer(LayerKind::Add, &self.shape))
            }
        }
    };
}

compare_operator!(MaximumI8, ki::maximum);
compare_operator!(MinimumI8, ki::minimum);

/// The operator's one input and output, which must have equal element counts.
fn unary_tensors<'s>(
    ctx: &LowerCtx<'s, '_>,
) -> Result<
    (
        crate::model::TensorInfo<'s>,
        crate::model::TensorInfo<'s>,
        u32,
    ),
    lower::LowerError,
> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let len = x.shape.num_elements();
    lower::check_elements(&y, len as usize)?;
    Ok((x, y, len))
}

/// NEG (float32: TFLM has no other).
pub(super) fn lower_neg(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y, len) = unary_tensors(ctx)?;
    if x.dtype != DataType::Float32 || y.dtype != DataType::Float32 {
        return Err(unsupported(
            "NEG type other than float32 (TFLM has no other)",
        ));
    }
    Ok(compute(
        NegF32 { len },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}

/// LEAKY_RELU, ABS and HARD_SWISH (int8).
pub(super) fn lower_unary(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y, len) = unary_tensors(ctx)?;
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(match ctx.builtin() {
        BuiltinOp::LeakyRelu => {
            let alpha = match ctx.options() {
                BuiltinOptions::LeakyRelu(o) => o.alpha,
                // The schema's default.
                BuiltinOptions::None => 0.0,
                _ => return Err(unsupported("options")),
            };
            let params = LeakyReluParams::new(xq, yq, alpha)?;
            compute(LeakyReluI8 { len, params }, list)
        }
        BuiltinOp::Abs => compute(
            AbsI8 {
                len,
                params: AbsParams::new(xq, yq)?,
            },
            list,
        ),
        _ => compute(
            HardSwishI8 {
                len,
                params: HardSwishParams::new(xq, yq)?,
            },
            list,
        ),
    })
}

/// SQUARED_DIFFERENCE, MAXIMUM, MINIMUM and PRELU (int8), with broadcasting.
pub(super) fn lower_binary(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (a, b, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let shape = BroadcastShape::new(a.shape.dims(), b.shape.dims(), y.shape.dims())?;
    let list = operands(&[
        lower::Operand::Tensor(a.index),
        lower::Operand::Tensor(b.index),
    ]);
    Ok(match ctx.builtin() {
        BuiltinOp::Maximum | BuiltinOp::Minimum => {
            // TFLM compares raw values whatever their quantization: only the type matters.
            if [&a, &b, &y].iter().any(|t| t.dtype != DataType::Int8) {
                return Err(unsupported("tensor type other than int8"));
            }
            if ctx.builtin() == BuiltinOp::Maximum {
                compute(MaximumI8 { shape }, list)
            } else {
                compute(MinimumI8 { shape }, list)
            }
        }
        BuiltinOp::Prelu => compute(
            PreluI8 {
                shape,
                params: PreluParams::new(quant(&a)?, quant(&b)?, quant(&y)?)?,
            },
            list,
        ),
        _ => compute(
            SquaredDifferenceI8 {
                shape,
                params: SquaredDifferenceParams::new(quant(&a)?, quant(&b)?, quant(&y)?)?,
            },
            list,
        ),
    })
}
