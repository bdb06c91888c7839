//! DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND (int8, the integer
//! type TFLM takes for them): pixels moved between the spatial, depth and batch dimensions.
//! Operands `[input]`; block sizes, paddings and crops are constants read at prepare.
//!
//! DEPTH_TO_SPACE and SPACE_TO_DEPTH are permutations of a rank-6 view of the tensor, and run
//! on the TRANSPOSE kernel: `[N, H, W, b, b, C]` to `[N, H, b, W, b, C]` and back.
//!
//! Where they run: Vela does not place any of the four on an Ethos-U55, so the CPU fallback
//! runs them.

use npu_kernels::int8::{self as ki, Nhwc, SpaceBatchParams, TransposeParams};
use npu_kernels::packed::{Packed, WordReader, Words};
use npu_kernels::KernelError;

use super::interp::{i8s, view_mut};
use super::lower::{self, compute, const_i32s, nhwc, operands, unsupported, LowerCtx};
use super::{bytes, CpuKernel, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// int8 DEPTH_TO_SPACE, as the permutation it is.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DepthToSpaceI8 {
    /// The rank-6 view and its permutation.
    pub params: TransposeParams,
    /// Elements the kernel copies at once: a block row's `b · C` output channels, contiguous
    /// in the input too.
    pub run: u32,
}

/// int8 SPACE_TO_DEPTH, as the permutation it is.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SpaceToDepthI8 {
    /// The rank-6 view and its permutation.
    pub params: TransposeParams,
    /// Elements the kernel copies at once: a block row's `b · C` input channels, contiguous
    /// in the output too.
    pub run: u32,
}

/// int8 BATCH_TO_SPACE_ND.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BatchToSpaceNdI8 {
    /// Shapes, blocks and crops.
    pub params: SpaceBatchParams,
}

/// int8 SPACE_TO_BATCH_ND.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SpaceToBatchNdI8 {
    /// Shapes, blocks and paddings.
    pub params: SpaceBatchParams,
    /// What padded positions get: the output's zero point.
    pub pad: i8,
}

macro_rules! permutation {
    ($t:ident, $view:ident) => {
        impl Operator for $t {
            fn pack(&self, w: &mut Words<'_>) -> bool {
                let (input, block) = $view(&self.params);
                input.pack(w);
                w.put(block);
                true
            }
            fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
                let input = Nhwc::unpack(r)?;
                $t::new(input, r.take()?)
            }
            fn operands(&self) -> Option<Operands> {
                let n = bytes(self.params.elements())?;
                Operands::new(&[n], 0, n)
            }
            fn macs(&self) -> u64 {
                self.params.elements() as u64
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                Ok(ki::transpose(
                    &self.params,
                    i8s(inputs, 0)?,
                    view_mut(output)?,
                )?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::SpaceDepth
            }
            fn taps(&self) -> u64 {
                self.params.elements() as u64 / u64::from(self.run.max(1))
            }
        }
    };
}

permutation!(DepthToSpaceI8, depth_to_space_view);
permutation!(SpaceToDepthI8, space_to_depth_view);

/// A shape of no pixels, for a view no lowering made (refused when read back: block 0).
const NO_PIXELS: Nhwc = Nhwc {
    batches: 0,
    height: 0,
    width: 0,
    channels: 0,
};

/// The input and block size of a DEPTH_TO_SPACE from its permuted view `[N, H, b, W, b, C]`.
fn depth_to_space_view(p: &TransposeParams) -> (Nhwc, u32) {
    let o = p.output_shape();
    let &[batches, height, b, width, _, c] = o.as_slice() else {
        return (NO_PIXELS, 0);
    };
    // The input's depth (saturating only for parameters no lowering made).
    let channels = b.saturating_mul(b).saturating_mul(c);
    (
        Nhwc {
            batches,
            height,
            width,
            channels,
        },
        b,
    )
}

/// The input and block size of a SPACE_TO_DEPTH from its permuted view `[N, h, w, b, b, C]`.
fn space_to_depth_view(p: &TransposeParams) -> (Nhwc, u32) {
    let o = p.output_shape();
    let &[batches, h, w, b, _, channels] = o.as_slice() else {
        return (NO_PIXELS, 0);
    };
    // The input's sizes (saturating only for parameters no lowering made).
    let (height, width) = (h.saturating_mul(b), w.saturating_mul(b));
    (
        Nhwc {
            batches,
            height,
            width,
            channels,
        },
        b,
    )
}

impl DepthToSpaceI8 {
    /// DEPTH_TO_SPACE of `n` by blocks of `b`: `[N, H, W, b·b·C]` to `[N, H·b, W·b, C]`.
    fn new(n: Nhwc, b: u32) -> Result<Self, KernelError> {
        let unsupported = |what| KernelError::Unsupported { what };
        let bb = b
            .checked_mul(b)
            .filter(|&bb| bb > 0)
            .ok_or(unsupported("block size"))?;
        if !n.channels.is_multiple_of(bb) {
            return Err(unsupported(
                "DEPTH_TO_SPACE depth the block does not divide",
            ));
        }
        let c = n.channels / bb;
        let view = [n.batches, n.height, n.width, b, b, c];
        let params = TransposeParams::new(&view, &[0, 1, 3, 2, 4, 5])?;
        // b · c divides the depth.
        Ok(Self { params, run: b * c })
    }
}

impl SpaceToDepthI8 {
    /// SPACE_TO_DEPTH of `n` by blocks of `b`: `[N, H·b, W·b, C]` to `[N, H, W, b·b·C]`.
    fn new(n: Nhwc, b: u32) -> Result<Self, KernelError> {
        let unsupported = |what| KernelError::Unsupported { what };
        if b == 0 || !n.height.is_multiple_of(b) || !n.width.is_multiple_of(b) {
            return Err(unsupported("SPACE_TO_DEPTH size the block does not divide"));
        }
        let (h, w) = (n.height / b, n.width / b);
        let view = [n.batches, h, b, w, b, n.channels];
        let params = TransposeParams::new(&view, &[0, 1, 3, 2, 4, 5])?;
        let run = b
            .checked_mul(n.channels)
            .and_then(|run| run.checked_mul(b).map(|_| run))
            .ok_or(unsupported("SPACE_TO_DEPTH depth"))?;
        Ok(Self { params, run })
    }
}

/// Elements of an NHWC shape (saturating: the kernel refuses such shapes first).
fn elements(n: Nhwc) -> u64 {
    [n.batches, n.height, n.width, n.channels]
        .iter()
        .fold(1u64, |a, &d| a.saturating_mul(u64::from(d)))
}

fn space_batch_operands(p: &SpaceBatchParams) -> Option<Operands> {
    let b = |n: Nhwc| bytes(usize::try_from(elements(n)).ok()?);
    Operands::new(&[b(p.input_shape())?], 0, b(p.output_shape())?)
}

impl Operator for BatchToSpaceNdI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(false, w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: SpaceBatchParams::unpack(false, r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        space_batch_operands(&self.params)
    }
    fn macs(&self) -> u64 {
        elements(self.params.output_shape())
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::batch_to_space(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        // A copy of each pixel's channels to a position worked out per pixel.
        CpuKernel::Transpose
    }
}

impl Operator for SpaceToBatchNdI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(true, w);
        w.put_i32(i32::from(self.pad));
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let params = SpaceBatchParams::unpack(true, r)?;
        // In range: checked.
        let pad = r.take_in(-128, 127, "output zero point")? as i8;
        Ok(Self { params, pad })
    }
    fn operands(&self) -> Option<Operands> {
        space_batch_operands(&self.params)
    }
    fn macs(&self) -> u64 {
        elements(self.params.output_shape())
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        Ok(ki::space_to_batch(
            &self.params,
            i8s(inputs, 0)?,
            view_mut(output)?,
            self.pad,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Transpose
    }
}

/// The int8 input and output of a space operator, of equal types.
fn int8_io<'s>(
    ctx: &LowerCtx<'s, '_>,
    what: &'static str,
) -> Result<(crate::model::TensorInfo<'s>, crate::model::TensorInfo<'s>), lower::LowerError> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype != DataType::Int8 || y.dtype != DataType::Int8 {
        return Err(unsupported(what));
    }
    Ok((x, y))
}

/// The block size of DEPTH_TO_SPACE or SPACE_TO_DEPTH.
fn block_size(ctx: &LowerCtx<'_, '_>) -> Result<u32, lower::LowerError> {
    let size = match ctx.options().clone().or_default_for(ctx.builtin()) {
        BuiltinOptions::DepthToSpace(o) | BuiltinOptions::SpaceToDepth(o) => o.block_size,
        _ => return Err(unsupported("operator")),
    };
    lower::positive(size, "block size below 1")
}

/// DEPTH_TO_SPACE (int8): `[N, H, W, b·b·C]` to `[N, H·b, W·b, C]`.
pub(super) fn lower_depth_to_space(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = int8_io(ctx, "DEPTH_TO_SPACE type other than int8")?;
    let b = block_size(ctx)?;
    let n = nhwc(&x)?;
    let bb = b.checked_mul(b).ok_or(unsupported("block size"))?;
    if n.channels % bb != 0 {
        return Err(unsupported(
            "DEPTH_TO_SPACE depth the block does not divide",
        ));
    }
    let c = n.channels / bb;
    let op = DepthToSpaceI8::new(n, b)?;
    let out = [
        Some(n.batches),
        n.height.checked_mul(b),
        n.width.checked_mul(b),
        Some(c),
    ];
    if !out.iter().zip(y.shape.dims()).all(|(o, &d)| *o == Some(d)) || y.shape.rank() != 4 {
        return Err(unsupported("DEPTH_TO_SPACE output shape"));
    }
    Ok(compute(op, operands(&[lower::Operand::Tensor(x.index)])))
}

/// SPACE_TO_DEPTH (int8): `[N, H·b, W·b, C]` to `[N, H, W, b·b·C]`.
pub(super) fn lower_space_to_depth(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, y) = int8_io(ctx, "SPACE_TO_DEPTH type other than int8")?;
    let b = block_size(ctx)?;
    let n = nhwc(&x)?;
    if n.height % b != 0 || n.width % b != 0 {
        return Err(unsupported("SPACE_TO_DEPTH size the block does not divide"));
    }
    let (h, w) = (n.height / b, n.width / b);
    let op = SpaceToDepthI8::new(n, b)?;
    let depth = op.run.checked_mul(b);
    let out = [Some(n.batches), Some(h), Some(w), depth];
    if !out.iter().zip(y.shape.dims()).all(|(o, &d)| *o == Some(d)) || y.shape.rank() != 4 {
        return Err(unsupported("SPACE_TO_DEPTH output shape"));
    }
    Ok(compute(op, operands(&[lower::Operand::Tensor(x.index)])))
}

/// The NHWC view (NHC as NH1C), blocks `[h, w]` and edges `[top, bottom, left, right]` of a
/// BATCH_TO_SPACE_ND or SPACE_TO_BATCH_ND, and its input and output.
#[allow(clippy::type_complexity)]
fn space_batch<'s>(
    ctx: &LowerCtx<'s, '_>,
    what: &'static str,
) -> Result<
    (
        Nhwc,
        [i32; 2],
        [i32; 4],
        crate::model::TensorInfo<'s>,
        crate::model::TensorInfo<'s>,
    ),
    lower::LowerError,
> {
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    if x.dtype != DataType::Int8 || y.dtype != DataType::Int8 {
        return Err(unsupported(what));
    }
    let (block_t, edges_t) = (ctx.input(1)?, ctx.input(2)?);
    let mut block = [0i32; 8];
    let mut edges = [0i32; 8];
    let nb = const_i32s(&block_t, &mut block)?;
    let ne = const_i32s(&edges_t, &mut edges)?;
    let d = x.shape.dims();
    match (d.len(), nb, ne) {
        (4, 2, 4) => Ok((
            Nhwc {
                batches: d[0],
                height: d[1],
                width: d[2],
                channels: d[3],
            },
            [block[0], block[1]],
            [edges[0], edges[1], edges[2], edges[3]],
            x,
            y,
        )),
        (3, 1, 2) => Ok((
            Nhwc {
                batches: d[0],
                height: d[1],
                width: 1,
                channels: d[2],
            },
            [block[0], 1],
            [edges[0], edges[1], 0, 0],
            x,
            y,
        )),
        _ => Err(unsupported(
            "input rank other than 3 or 4, or block and edges of another size",
        )),
    }
}

/// That `y` has the shape `o` (NHC when the input was).
fn check_output(
    y: &crate::model::TensorInfo<'_>,
    rank: usize,
    o: Nhwc,
    what: &'static str,
) -> Result<(), lower::LowerError> {
    let ok = match rank {
        3 => y.shape.dims() == [o.batches, o.height, o.channels],
        _ => y.shape.dims() == [o.batches, o.height, o.width, o.channels],
    };
    if ok {
        Ok(())
    } else {
        Err(unsupported(what))
    }
}

/// BATCH_TO_SPACE_ND (int8, NHWC or NHC).
pub(super) fn lower_batch_to_space(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (n, block, crops, x, y) = space_batch(ctx, "BATCH_TO_SPACE_ND type other than int8")?;
    let params = SpaceBatchParams::batch_to_space(n, block, crops)?;
    check_output(
        &y,
        x.shape.rank(),
        params.output_shape(),
        "BATCH_TO_SPACE_ND output shape",
    )?;
    Ok(compute(
        BatchToSpaceNdI8 { params },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}

/// SPACE_TO_BATCH_ND (int8, NHWC or NHC). Padded positions get the output's zero point, as
/// in TensorFlow Lite; TFLM leaves its padding value unset (see `npu_kernels::int8::space`), so
/// only unpadded ones can be compared with it.
pub(super) fn lower_space_to_batch(
    ctx: &LowerCtx<'_, '_>,
) -> Result<lower::Lowered, lower::LowerError> {
    let (n, block, paddings, x, y) = space_batch(ctx, "SPACE_TO_BATCH_ND type other than int8")?;
    let params = SpaceBatchParams::space_to_batch(n, block, paddings)?;
    check_output(
        &y,
        x.shape.rank(),
        params.output_shape(),
        "SPACE_TO_BATCH_ND output shape",
    )?;
    let pad = i8::try_from(lower::quant(&y)?.zero_point)
        .map_err(|_| unsupported("output zero point outside int8"))?;
    Ok(compute(
        SpaceToBatchNdI8 { params, pad },
        operands(&[lower::Operand::Tensor(x.index)]),
    ))
}
