//! RESIZE_NEAREST_NEIGHBOR (int8, int16) and RESIZE_BILINEAR (int8): an NHWC image scaled to
//! the height and width of a constant size tensor, read at prepare. Operands `[input]`.
//!
//! TFLM copies (nearest) or interpolates (bilinear) the quantized values without requantizing,
//! so the output's quantization is not checked against the input's: the bytes are TFLM's
//! whatever it is.
//!
//! Where they run: Vela places both on an Ethos-U55 for some sizes only (`SUPPORTED_OPS.md`,
//! `constraint_resize`: a 1×1 input, an output of the input's size, or the same upscale of
//! 2, 4 or 8 in height and width, of `size − 1` under `align_corners`; a batch of 1, every
//! dimension at most 65,535, not both `align_corners` and `half_pixel_centers`; a bilinear
//! resize with half-pixel centres only from 1×1 or by exactly 2). The simulator places by
//! family, so a resize Vela runs lowers to [`ResizeNearestI8`] / [`ResizeBilinearI8`]
//! (families `ResizeNearestNeighbor` and `ResizeBilinear`, on the simulated NPU) and any other
//! to the `…Other…` descriptions (on the CPU fallback); both compute with the same kernel.

use npu_kernels::int8::{self as ki, Nhwc, ResizeBilinearParams, ResizeNearestParams};

use super::interp::{i8s, input, view, view_mut};
use super::lower::{self, compute, const_i32s, nhwc, operands, unsupported, LowerCtx};
use super::{bytes, CpuKernel, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// Declares a nearest-neighbour description over elements of `$t`, `$size` bytes each.
macro_rules! nearest {
    ($(#[$doc:meta])* $name:ident, $t:ty, $size:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Shapes and sampling.
            pub params: ResizeNearestParams,
        }

        impl Operator for $name {
            packed_fields!(params);
            fn operands(&self) -> Option<Operands> {
                resize_operands(self.params.input_shape(), self.params.output_shape(), $size)
            }
            fn macs(&self) -> u64 {
                elements(self.params.output_shape())
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                Ok(ki::resize_nearest(
                    &self.params,
                    view::<$t>(input(inputs, 0), 0)?,
                    view_mut::<$t>(output)?,
                )?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::ResizeNearest
            }
            fn taps(&self) -> u64 {
                pixels(self.params.output_shape())
            }
        }
    };
}

/// Declares an int8 bilinear description.
macro_rules! bilinear {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name {
            /// Shapes, sampling and fixed-point scales.
            pub params: ResizeBilinearParams,
        }

        impl Operator for $name {
            packed_fields!(params);
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
    };
}

nearest!(
    /// int8 RESIZE_NEAREST_NEIGHBOR of a size Vela runs on the NPU.
    ResizeNearestI8, i8, 1
);
nearest!(
    /// int16 RESIZE_NEAREST_NEIGHBOR of a size Vela runs on the NPU.
    ResizeNearestI16, i16, 2
);
nearest!(
    /// int8 RESIZE_NEAREST_NEIGHBOR of any other size.
    ResizeNearestOtherI8, i8, 1
);
nearest!(
    /// int16 RESIZE_NEAREST_NEIGHBOR of any other size.
    ResizeNearestOtherI16, i16, 2
);
bilinear!(
    /// int8 RESIZE_BILINEAR of a size Vela runs on the NPU.
    ResizeBilinearI8
);
bilinear!(
    /// int8 RESIZE_BILINEAR of any other size.
    ResizeBilinearOtherI8
);

/// Whether Vela places a resize of `input` to `h × w` on the NPU (see the [module
/// docs](self)).
fn vela_runs(input: Nhwc, (h, w): (u32, u32), align: bool, half: bool, bilinear: bool) -> bool {
    let (ih, iw) = (input.height, input.width);
    let dims = [input.batches, ih, iw, input.channels, h, w];
    if input.batches != 1 || dims.iter().any(|&d| !(1..=65_535).contains(&d)) {
        return false;
    }
    if align && half {
        return false;
    }
    let one_by_one = ih == 1 && iw == 1;
    if bilinear && half && !one_by_one && (h != 2 * ih || w != 2 * iw) {
        return false;
    }
    if one_by_one || (ih == h && iw == w) {
        return true;
    }
    // Vela divides: the same factor on both axes, exactly 2, 4 or 8 (and no factor at all for
    // an input of one row or column under align_corners, where it would divide by zero).
    let (from, to) = if align {
        ((ih - 1, iw - 1), (h - 1, w - 1))
    } else {
        ((ih, iw), (h, w))
    };
    from.0 > 0
        && from.1 > 0
        && [2, 4, 8]
            .iter()
            .any(|&k| to.0 == k * from.0 && to.1 == k * from.1)
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
    let (align, half) = (o.align_corners, o.half_pixel_centers);
    let params = ResizeNearestParams::new(input, h, w, align, half)?;
    let list = operands(&[lower::Operand::Tensor(ctx.input(0)?.index)]);
    let npu = vela_runs(input, (h, w), align, half, false);
    match (dtype, npu) {
        (DataType::Int8, true) => Ok(compute(ResizeNearestI8 { params }, list)),
        (DataType::Int8, false) => Ok(compute(ResizeNearestOtherI8 { params }, list)),
        (DataType::Int16, true) => Ok(compute(ResizeNearestI16 { params }, list)),
        (DataType::Int16, false) => Ok(compute(ResizeNearestOtherI16 { params }, list)),
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
    let (align, half) = (o.align_corners, o.half_pixel_centers);
    let params = ResizeBilinearParams::new(input, h, w, align, half)?;
    let list = operands(&[lower::Operand::Tensor(ctx.input(0)?.index)]);
    Ok(if vela_runs(input, (h, w), align, half, true) {
        compute(ResizeBilinearI8 { params }, list)
    } else {
        compute(ResizeBilinearOtherI8 { params }, list)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(height: u32, width: u32) -> Nhwc {
        Nhwc {
            batches: 1,
            height,
            width,
            channels: 3,
        }
    }

    #[test]
    fn the_sizes_vela_runs() {
        let runs = |i, o, align, half, bilinear| vela_runs(i, o, align, half, bilinear);
        // Upscales of 2, 4 and 8, equal on both axes.
        assert!(runs(image(4, 5), (8, 10), false, false, false));
        assert!(runs(image(4, 5), (32, 40), false, true, false));
        assert!(!runs(image(4, 5), (8, 20), false, false, false));
        assert!(!runs(image(4, 5), (12, 15), false, false, false));
        // align_corners: of size − 1.
        assert!(runs(image(4, 5), (7, 9), true, false, false));
        assert!(!runs(image(4, 5), (8, 10), true, false, false));
        assert!(!runs(image(1, 5), (1, 9), true, false, false));
        // 1×1 inputs and same sizes, whatever the output.
        assert!(runs(image(1, 1), (7, 3), false, false, true));
        assert!(runs(image(6, 7), (6, 7), false, false, false));
        // Bilinear with half-pixel centres: by exactly 2.
        assert!(runs(image(4, 5), (8, 10), false, true, true));
        assert!(!runs(image(4, 5), (16, 20), false, true, true));
        // Never both flags, a batch of 2, a dimension beyond 65,535, or an empty one.
        assert!(!runs(image(4, 5), (4, 5), true, true, false));
        assert!(!runs(
            Nhwc {
                batches: 2,
                ..image(4, 5)
            },
            (8, 10),
            false,
            false,
            false
        ));
        assert!(!runs(image(1, 1), (70_000, 1), false, false, false));
        assert!(!runs(image(4, 5), (0, 10), false, false, false));
    }
}
