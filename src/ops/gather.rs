//! GATHER (int8): slices of the input picked along an axis by int32 indices. Operands
//! `[input, indices]`; either may be a constant (an embedding table) or an activation (indices
//! given as a model input), and the indices are read when the operator runs: one outside the
//! axis is the kernel's error then, never a read outside the input.
//!
//! Where it runs: Vela does not place GATHER on an Ethos-U55, so the CPU fallback runs it.

use npu_kernels::int8::{self as ki, GatherParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, operands, unsupported, LowerCtx};
use super::{bytes, CpuKernel, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// int8 GATHER with int32 indices.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GatherI8 {
    /// Shapes, axis and batch dimensions.
    pub params: GatherParams,
}

impl Operator for GatherI8 {
    packed_fields!(params);
    fn operands(&self) -> Option<Operands> {
        let p = &self.params;
        Operands::new(
            &[
                bytes(p.input_elements())?,
                bytes(p.index_elements().checked_mul(4)?)?,
            ],
            0,
            bytes(p.output_elements())?,
        )
    }
    fn macs(&self) -> u64 {
        self.params.output_elements() as u64
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::gather(
            &self.params,
            i8s(inputs, 0)?,
            view::<i32>(input(inputs, 1), 1)?,
            view_mut::<i8>(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // Runs of the input copied into the output one after another: CONCATENATION's loop.
        CpuKernel::Concatenation
    }
}

/// GATHER (int8 input, int32 indices: the types TFLM takes for an int8 model).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Gather(o) = ctx.options().clone().or_default_for(ctx.builtin()) else {
        return Err(unsupported("operator"));
    };
    let (x, indices, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    if x.dtype != DataType::Int8 || y.dtype != DataType::Int8 {
        return Err(unsupported("GATHER type other than int8"));
    }
    if indices.dtype != DataType::Int32 {
        return Err(unsupported("GATHER indices other than int32"));
    }
    let params = GatherParams::new(x.shape.dims(), indices.shape.dims(), o.axis, o.batch_dims)?;
    // The output's shape: input[..axis] ++ indices[batch_dims..] ++ input[axis + 1..].
    let rank = x.shape.rank();
    let axis = if o.axis < 0 {
        o.axis + rank as i32
    } else {
        o.axis
    } as usize;
    let batch_dims = if o.batch_dims < 0 {
        o.batch_dims + indices.shape.rank() as i32
    } else {
        o.batch_dims
    } as usize;
    let (xd, id, yd) = (x.shape.dims(), indices.shape.dims(), y.shape.dims());
    let expected = xd[..axis]
        .iter()
        .chain(&id[batch_dims..])
        .chain(&xd[axis + 1..]);
    if !expected.eq(yd.iter()) {
        return Err(unsupported("GATHER output shape"));
    }
    Ok(compute(
        GatherI8 { params },
        operands(&[
            lower::Operand::Tensor(x.index),
            lower::Operand::Tensor(indices.index),
        ]),
    ))
}
