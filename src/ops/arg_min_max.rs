//! ARG_MAX and ARG_MIN (int8 input, int32 output): the index of the largest (smallest)
//! element along one axis, TFLM's tie rule (the first wins). Operands `[input]`; the axis, a
//! constant tensor, is read at prepare and never reaches the device. The output is int32, the
//! only type TFLM's kernel writes (an int64 output is refused).
//!
//! Where they run: Vela (3.10, `SUPPORTED_OPS.md`) runs ARG_MAX on the Ethos-U55 for an int8
//! input along the depth (innermost) axis of at most 127 elements, which is how a classifier's
//! ARG_MAX comes; the simulator places the family on the NPU without checking those
//! constraints per operator (as it does for MEAN's). ARG_MIN is not in Vela's list and runs on
//! the CPU fallback. On the NPU, ARG_MAX is priced as the max pooling over the axis that is
//! the main pass of Vela's lowering (a 1 × axis window over `[1, outer, axis, inner]`). On the
//! CPU both price as [`CpuKernel::ArgMinMax`] (rates measured by the firmware).

use npu_kernels::int8::{self as ki, ArgMinMaxParams};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, const_i32s, operands, unsupported, LowerCtx};
use super::{bytes, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOp, DataType};

/// int8 ARG_MAX, int32 indices.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArgMaxI8 {
    /// Geometry.
    pub params: ArgMinMaxParams,
}

/// int8 ARG_MIN, int32 indices.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ArgMinI8 {
    /// Geometry.
    pub params: ArgMinMaxParams,
}

/// Bytes of the int8 input and of the int32 output.
fn sizes(p: &ArgMinMaxParams) -> Option<Operands> {
    let (i, o) = p.lens();
    Operands::new(&[bytes(i)?], 0, bytes(o)?.checked_mul(4)?)
}

fn run(p: &ArgMinMaxParams, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
    Ok(ki::arg_min_max(p, i8s(inputs, 0)?, view_mut(output)?)?)
}

impl Operator for ArgMaxI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: ArgMinMaxParams::unpack(r, true)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        sizes(&self.params)
    }
    fn macs(&self) -> u64 {
        self.params.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        run(&self.params, inputs, output)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ArgMinMax
    }
    fn output_elements(&self) -> Option<u64> {
        Some(self.params.lens().1 as u64)
    }
    fn layer(&self) -> Option<Layer> {
        let (outer, axis, inner) = self.params.extents();
        Some(Layer {
            kernel: (1, axis),
            ..Layer::new(
                LayerKind::MaxPool,
                [1, outer, axis, inner],
                [1, outer, 1, inner],
            )
        })
    }
}

impl Operator for ArgMinI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: ArgMinMaxParams::unpack(r, false)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        sizes(&self.params)
    }
    fn macs(&self) -> u64 {
        self.params.lens().0 as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        run(&self.params, inputs, output)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ArgMinMax
    }
    fn output_elements(&self) -> Option<u64> {
        Some(self.params.lens().1 as u64)
    }
}

/// ARG_MAX and ARG_MIN (int8 input, int32 output).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, axis_t, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    if x.dtype != DataType::Int8 {
        return Err(unsupported("tensor type other than int8"));
    }
    if y.dtype != DataType::Int32 {
        return Err(unsupported(
            "ARG_MAX / ARG_MIN output type other than int32",
        ));
    }
    let mut axis = [0i32; 8];
    if const_i32s(&axis_t, &mut axis)? == 0 {
        return Err(unsupported("ARG_MAX / ARG_MIN without an axis"));
    }
    // TFLM reads the first element of the axis tensor.
    let max = ctx.builtin() == BuiltinOp::ArgMax;
    let params = ArgMinMaxParams::new(x.shape.dims(), axis[0], max)?;
    lower::check_elements(&y, params.lens().1)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(if max {
        compute(ArgMaxI8 { params }, list)
    } else {
        compute(ArgMinI8 { params }, list)
    })
}
