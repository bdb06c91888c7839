//! SHAPE, EXPAND_DIMS and SQUEEZE: operators about a tensor's shape, which TFLM knows when it
//! prepares a model.
//!
//! - SHAPE (int32 output, the only type TFLM writes): its value is the input's dimensions,
//!   known at prepare, but it is still a tensor of the model (an output, or another
//!   operator's input), so it lowers to a job with no inputs that writes those dimensions
//!   ([`ShapeI32`]). Vela places SHAPE on an Ethos-U55 (int32 is allowed for it), so the
//!   simulated NPU runs it.
//! - EXPAND_DIMS and SQUEEZE are RESHAPE under other names: the output shares the input's
//!   memory and nothing runs. Their axes are checked as TFLM checks them.

use npu_kernels::int8 as ki;
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::interp::view_mut;
use super::lower::{self, compute, const_i32s, operands, unsupported, LowerCtx};
use super::{CpuKernel, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType, MAX_RANK};

/// SHAPE: writes `dims[..rank]` as int32s. Operands: none.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ShapeI32 {
    /// The input's dimensions, outermost first.
    pub dims: [u32; MAX_RANK],
    /// How many of `dims` there are.
    pub rank: u8,
}

impl ShapeI32 {
    fn dims(&self) -> &[u32] {
        self.dims.get(..usize::from(self.rank)).unwrap_or(&[])
    }
}

impl Operator for ShapeI32 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        w.put_list(self.dims());
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (dims, rank) = r.take_list::<MAX_RANK>()?;
        // At most MAX_RANK.
        Ok(Self {
            dims,
            rank: rank as u8,
        })
    }
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[], 0, u32::from(self.rank) * 4)
    }
    fn macs(&self) -> u64 {
        u64::from(self.rank)
    }
    fn run(&self, _inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::shape(self.dims(), view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // A few words stored: a copy.
        CpuKernel::Reshape
    }
}

/// SHAPE: the input's dimensions as an int32 vector.
pub(super) fn lower_shape(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if y.dtype != DataType::Int32 {
        return Err(unsupported("SHAPE output type other than int32"));
    }
    let rank = x.shape.rank();
    if y.shape.dims() != [rank as u32] {
        return Err(unsupported("SHAPE output shape other than [rank]"));
    }
    let mut dims = [0u32; MAX_RANK];
    dims.get_mut(..rank)
        .ok_or(unsupported("rank above MAX_RANK"))?
        .copy_from_slice(x.shape.dims());
    if x.shape.dims().iter().any(|&d| i32::try_from(d).is_err()) {
        return Err(unsupported("SHAPE of a dimension beyond int32"));
    }
    Ok(compute(
        ShapeI32 {
            dims,
            rank: rank as u8,
        },
        operands(&[]),
    ))
}

/// EXPAND_DIMS: an alias of its input, with a size-1 axis inserted where the constant axis
/// tensor says (negative: counted from the end of the output's dimensions).
pub(super) fn lower_expand_dims(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, axis_t, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    if x.dtype != y.dtype {
        return Err(unsupported("EXPAND_DIMS changing the element type"));
    }
    if axis_t.shape.rank() > 1 {
        return Err(unsupported("EXPAND_DIMS axis of rank above 1"));
    }
    let mut axis = [0i32; 8];
    if const_i32s(&axis_t, &mut axis)? < 1 {
        return Err(unsupported("EXPAND_DIMS without an axis"));
    }
    let (xd, yd) = (x.shape.dims(), y.shape.dims());
    let rank = xd.len() as i32;
    let a = if axis[0] < 0 {
        axis[0] + rank + 1
    } else {
        axis[0]
    };
    let a = usize::try_from(a)
        .ok()
        .filter(|&a| a <= xd.len())
        .ok_or(unsupported("EXPAND_DIMS axis out of range"))?;
    let expected = xd[..a].iter().chain(&[1]).chain(&xd[a..]);
    if !expected.eq(yd.iter()) {
        return Err(unsupported("EXPAND_DIMS output shape"));
    }
    Ok(lower::Lowered::Alias { input: x.index })
}

/// SQUEEZE: an alias of its input without the size-1 axes the options list (every size-1 axis
/// when they list none).
pub(super) fn lower_squeeze(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Squeeze(o) = ctx.options().clone().or_default_for(ctx.builtin()) else {
        return Err(unsupported("operator"));
    };
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype != y.dtype {
        return Err(unsupported("SQUEEZE changing the element type"));
    }
    let xd = x.shape.dims();
    let mut squeeze = [false; MAX_RANK];
    if o.squeeze_dims.is_empty() {
        for (s, &d) in squeeze.iter_mut().zip(xd) {
            *s = d == 1;
        }
    } else {
        for &d in &o.squeeze_dims {
            let a = if d < 0 { d + xd.len() as i32 } else { d };
            let a = usize::try_from(a)
                .ok()
                .filter(|&a| xd.get(a) == Some(&1))
                .ok_or(unsupported("SQUEEZE axis out of range or not of size 1"))?;
            squeeze[a] = true;
        }
    }
    let expected = xd.iter().zip(squeeze).filter(|(_, s)| !s).map(|(d, _)| d);
    if !expected.eq(y.shape.dims().iter()) {
        return Err(unsupported("SQUEEZE output shape"));
    }
    Ok(lower::Lowered::Alias { input: x.index })
}
