//! RESHAPE: the same bytes under another shape. A model's RESHAPE runs nothing (its output
//! shares its input's memory); the copy is for a client that needs the bytes elsewhere.
//! Operands `[input]`.

use npu_kernels::int8 as ki;

use super::interp::{i8s, view_mut};
use super::lower::{self, unsupported, LowerCtx};
use super::{rows_of, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};

/// A byte copy of `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reshape {
    /// Bytes.
    pub len: u32,
}

impl Operator for Reshape {
    packed_fields!(len);
    fn operands(&self) -> Option<Operands> {
        Operands::new(&[self.len], 0, self.len)
    }
    fn macs(&self) -> u64 {
        u64::from(self.len)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::reshape(i8s(inputs, 0)?, view_mut(output)?)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Reshape
    }
    fn layer(&self) -> Option<Layer> {
        let rows = rows_of(self.len, 1);
        Some(Layer::new(LayerKind::Reshape, rows, rows))
    }
}

/// RESHAPE: an alias of its input, of the same element type and count.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype != y.dtype {
        return Err(unsupported("RESHAPE changing the element type"));
    }
    lower::check_elements(&y, x.shape.num_elements() as usize)?;
    Ok(lower::Lowered::Alias { input: x.index })
}
