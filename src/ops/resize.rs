//! RESIZE_NEAREST_NEIGHBOR (int8, int16) and RESIZE_BILINEAR (int8): an NHWC image scaled to
//! the height and width of a constant size tensor, read at prepare. Operands `[input]`.
//!
//! TFLM copies (nearest) or interpolates (bilinear) the quantized values without requantizing,
//! so the output's quantization is not checked against the input's: the bytes are TFLM's
//! whatever it is.
//!
//! Where they run: Vela places both on an Ethos-U55 only for some sizes (a 1×1 input, an
//! output the input's size, or equal height and width upscales of 2, 4 or 8), and the
//! simulator's placement is per operator family and dtype, not per shape; so both run on the
//! CPU fallback, which every size takes.

use npu_kernels::int8::{self as ki, Nhwc, ResizeBilinearParams, ResizeNearestParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, const_i32s, nhwc, operands, unsupported, LowerCtx};
use super::{bytes, CpuKernel, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// int8 RESIZE_NEAREST_NEIGHBOR.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeNearestI8 {
    /// Shapes and sampling.
    pub params: ResizeNearestParams,
}

/// int16 RESIZE_NEAREST_NEIGHBOR.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeNearestI16 {
    /// Shapes and sampling.
    pub params: ResizeNearestParams,
}

/// int8 RESIZE_BILINEAR.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ResizeBilinearI8 {
    /// Shapes, sampling and fixed-point scales.
    pub params: ResizeBilinearParams,
}

/// Elements of an NHWC shape (0 if they overflow: the kernel refuses such shapes first).
fn elements(n: Nhwc) -> u64 {
    [n.batches, n.height, n.width, n.channels]
        .iter()
        .fold(1u64, |a, &d| a.saturating_mul(u64::from(d)))
}

/// Pixels of an NHWC shape: what a resize works out input positions for (the CPU model's
/// [`Operator::taps`]).
fn pixels(n: Nhwc) -> u64 {
    elements(Nhwc { channels: 1, ..n })
}

/// Operand sizes of an image resized from `i` to `o`, `size` bytes per element.
fn resize_operands(i: Nhwc, o: Nhwc, size: u64) -> Option<Operands> {
    let b = |n: Nhwc| bytes(usize::try_from(elements(n).checked_mul(size)?).ok()?);
    Operands::new(&[b(i)?], 0, b(o)?)
}

impl Operator for ResizeNearestI8 {
    fn operands(&self) -> Option<Operands> {
        resize_operands(self.params.input_shape(), self.params.output_shape(), 1)
    }
    fn macs(&self) -> u64 {
        elements(self.params.output_shape())
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::resize_nearest(
            &self.params,
            i8s(inputs, 0)?,
            view_mut::<i8>(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ResizeNearest
    }
    fn taps(&self) -> u64 {
        pixels(self.params.output_shape())
    }
}

impl Operator for ResizeNearestI16 {
    fn operands(&self) -> Option<Operands> {
        resize_operands(self.params.input_shape(), self.params.output_shape(), 2)
    }
    fn macs(&self) -> u64 {
        elements(self.params.output_shape())
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::resize_nearest(
            &self.params,
            view::<i16>(input(inputs, 0), 0)?,
            view_mut::<i16>(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ResizeNearest
    }
    fn taps(&self) -> u64 {
        pixels(self.params.output_shape())
    }
}

impl Operator for ResizeBilinearI8 {
    fn operands(&self) -> Option<Operands> {
        resize_operands(self.params.input_shape(), self.params.output_shape(), 1)
    }
    fn macs(&self) -> u64 {
        elements(self.params.output_shape())
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::resize_bilinear(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::ResizeBilinear
    }
    fn taps(&self) -> u64 {
        pixels(self.params.output_shape())
    }
}

/// The input's shape, the output's height and width from the constant size tensor (checked
/// against the output's shape), and the options.
fn resize_shapes(
    ctx: &LowerCtx<'_, '_>,
    what: &'static str,
) -> Result<(Nhwc, u32, u32, DataType), lower::LowerError> {
    let (x, size, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    if x.dtype != y.dtype {
        return Err(unsupported(what));
    }
    let input = nhwc(&x)?;
    let mut hw = [0i32; 8];
    if size.shape.rank() != 1 || const_i32s(&size, &mut hw)? != 2 {
        return Err(unsupported("resize size other than a constant int32 pair"));
    }
    let (Ok(h), Ok(w)) = (u32::try_from(hw[0]), u32::try_from(hw[1])) else {
        return Err(unsupported("negative resize size"));
    };
    if y.shape.dims() != [input.batches, h, w, input.channels] {
        return Err(unsupported("resize output shape other than the size"));
    }
    Ok((input, h, w, x.dtype))
}

/// RESIZE_NEAREST_NEIGHBOR (int8, int16).
pub(super) fn lower_nearest(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::ResizeNearestNeighbor(o) =
        ctx.options().clone().or_default_for(ctx.builtin())
    else {
        return Err(unsupported("operator"));
    };
    let (input, h, w, dtype) = resize_shapes(ctx, "RESIZE_NEAREST_NEIGHBOR changing the type")?;
    let params = ResizeNearestParams::new(input, h, w, o.align_corners, o.half_pixel_centers)?;
    let list = operands(&[lower::Operand::Tensor(ctx.input(0)?.index)]);
    match dtype {
        DataType::Int8 => Ok(compute(ResizeNearestI8 { params }, list)),
        DataType::Int16 => Ok(compute(ResizeNearestI16 { params }, list)),
        _ => Err(unsupported(
            "RESIZE_NEAREST_NEIGHBOR type other than int8 or int16",
        )),
    }
}

/// RESIZE_BILINEAR (int8).
pub(super) fn lower_bilinear(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::ResizeBilinear(o) = ctx.options().clone().or_default_for(ctx.builtin())
    else {
        return Err(unsupported("operator"));
    };
    let (input, h, w, dtype) = resize_shapes(ctx, "RESIZE_BILINEAR changing the type")?;
    if dtype != DataType::Int8 {
        return Err(unsupported("RESIZE_BILINEAR type other than int8"));
    }
    let params = ResizeBilinearParams::new(input, h, w, o.align_corners, o.half_pixel_centers)?;
    Ok(compute(
        ResizeBilinearI8 { params },
        operands(&[lower::Operand::Tensor(ctx.input(0)?.index)]),
    ))
}
