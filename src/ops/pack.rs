//! PACK (int8, int16): tensors of one shape stacked along a new axis
//! ([`npu_kernels::movement::pack`]). Operands: the inputs in order, at most
//! [`MAX_INPUTS`]. Stacked along the outermost axis each input is one block of the output,
//! and a planner may have the producers write there directly
//! ([`Operator::contiguous_inputs`]), as for a CONCATENATION.
//!
//! Where it runs: Vela places PACK on an Ethos-U55 (int8, int16) without constraints of its
//! own (it becomes a concatenation of the inputs under the new shape), so the `Pack` family
//! is on the NPU, priced as a concatenation.

use core::mem::size_of;

use npu_kernels::movement::{self as mv, PackParams};

use super::interp::{input, view, view_mut};
use super::lower::{self, compute, unsupported, LowerCtx, LowerError};
use super::slice::{copy_kernel, element_type};
use super::{bytes, padded, CpuKernel, Layer, LayerKind, OpError, Operands, Operator, MAX_INPUTS};
use crate::model::{BuiltinOptions, DataType};

/// Declares a PACK description for one element type.
macro_rules! pack_op {
    ($($(#[$doc:meta])* $name:ident: $t:ty;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// The stacking: `[outer, inputs, inner]`.
            pub params: PackParams,
        }

        impl Operator for $name {
            packed_fields!(params);
            fn operands(&self) -> Option<Operands> {
                let size = size_of::<$t>();
                let each = bytes(self.params.input_elements().checked_mul(size)?)?;
                let mut inputs = heapless::Vec::<u32, MAX_INPUTS>::new();
                for _ in 0..self.params.inputs() {
                    inputs.push(each).ok()?;
                }
                Operands::new(&inputs, 0, bytes(self.params.output_elements().checked_mul(size)?)?)
            }
            /// The bytes it copies: what its loops' cost follows (elements for int8).
            fn macs(&self) -> u64 {
                (self.params.output_elements() * size_of::<$t>()) as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let mut views: heapless::Vec<&[$t], MAX_INPUTS> = heapless::Vec::new();
                for i in 0..inputs.len() {
                    views
                        .push(view::<$t>(input(inputs, i), i)?)
                        .map_err(|_| OpError::InputCount { given: inputs.len() as u8 })?;
                }
                Ok(mv::pack(&self.params, &views, view_mut::<$t>(output)?)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                self.params.walk(0).map_or(CpuKernel::CopyElements, |w| copy_kernel(&w))
            }
            fn taps(&self) -> u64 {
                let rows = self.params.walk(0).map_or(0, |w| w.rows() as u64);
                rows * self.params.inputs() as u64
            }
            fn layer(&self) -> Option<Layer> {
                let out = padded(&self.params.output_shape());
                Some(Layer::new(LayerKind::Concatenation, out, out))
            }
            fn contiguous_inputs(&self) -> Option<heapless::Vec<u32, MAX_INPUTS>> {
                let [outer, _, _] = self.params.output_shape();
                if outer != 1 {
                    return None;
                }
                let each = u32::try_from(self.params.input_elements().checked_mul(size_of::<$t>())?).ok()?;
                let mut lens = heapless::Vec::new();
                for _ in 0..self.params.inputs() {
                    lens.push(each).ok()?;
                }
                Some(lens)
            }
        }
    )*};
}

pack_op! {
    /// int8 PACK.
    PackI8: i8;
    /// int16 PACK.
    PackI16: i16;
}

/// PACK (int8, int16): every input of one shape and type, at most [`MAX_INPUTS`] of them; the
/// options' count must be the input count (TFLM loops over the count).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, LowerError> {
    let BuiltinOptions::Pack(o) = ctx.options().clone().or_default_for(ctx.builtin()) else {
        return Err(unsupported("PACK options"));
    };
    let n = ctx.input_count();
    if n > MAX_INPUTS {
        return Err(unsupported("PACK of more inputs than MAX_INPUTS (8)"));
    }
    if usize::try_from(o.count).ok() != Some(n) || n == 0 {
        return Err(unsupported("PACK values_count other than its input count"));
    }
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let dtype = element_type(&x, &y)?;
    let mut list = heapless::Vec::new();
    for i in 0..n {
        let t = ctx.input(i)?;
        if t.shape != x.shape || t.dtype != x.dtype {
            return Err(unsupported("PACK inputs of different shapes or types"));
        }
        // At most MAX_INPUTS, checked above.
        let _ = list.push(lower::Operand::Tensor(t.index));
    }
    let rank = x.shape.rank();
    let axis = super::slice::axis_in(o.axis, rank + 1)?;
    let params = PackParams::new(x.shape.dims(), axis, n as u32)?;
    let mut shape = [0u32; 6];
    shape[..axis].copy_from_slice(&x.shape.dims()[..axis]);
    shape[axis] = n as u32;
    shape[axis + 1..=rank].copy_from_slice(&x.shape.dims()[axis..]);
    if y.shape.dims() != &shape[..=rank] {
        return Err(unsupported("PACK output shape"));
    }
    Ok(if dtype == DataType::Int8 {
        compute(PackI8 { params }, list)
    } else {
        compute(PackI16 { params }, list)
    })
}
