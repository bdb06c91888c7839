//! AVERAGE_POOL_2D and MAX_POOL_2D (int8): each output pixel the average or the maximum of
//! its input window, per channel. Operands `[input]`. An NPU walks them in output blocks, and
//! tiling cuts them into row bands.

use core::ops::Range;

use npu_kernels::int8::{self as ki, Nhwc, Padding, PoolParams, PoolShape};

use super::conv::key_sizes;
use super::interp::{i8s, view_mut};
use super::lower::{self, compute, nhwc, operands, positive, quant, unsupported, LowerCtx};
use super::{bytes, nhwc as array, CpuKernel, KeyShape, Layer, LayerKind, Op, OpError};
use super::{Operands, Operator};
use crate::model::{BuiltinOp, BuiltinOptions};

/// int8 AVERAGE_POOL_2D.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AveragePool2dI8 {
    /// Input and window.
    pub shape: PoolShape,
    /// Resolved geometry and activation range.
    pub params: PoolParams,
}

/// int8 MAX_POOL_2D.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MaxPool2dI8 {
    /// Input and window.
    pub shape: PoolShape,
    /// Resolved geometry and activation range.
    pub params: PoolParams,
}

fn operands_of(params: &PoolParams) -> Option<Operands> {
    let (i, o) = params.lens();
    Operands::new(&[bytes(i)?], 0, bytes(o)?)
}

fn macs(shape: &PoolShape, params: &PoolParams) -> u64 {
    let taps = u64::from(shape.filter_height) * u64::from(shape.filter_width);
    (params.lens().1 as u64).saturating_mul(taps)
}

/// The window taps of the channels past the last whole group of
/// [`SIMD_CHANNELS`](ki::pool::SIMD_CHANNELS): SIMD cores take a pixel's channels that many at
/// a time, these in the scalar loop, several times dearer per tap.
fn scalar_taps(shape: &PoolShape, params: &PoolParams) -> u64 {
    let out = params.output_shape();
    let pixels = u64::from(out.batches) * u64::from(out.height) * u64::from(out.width);
    let window = u64::from(shape.filter_height) * u64::from(shape.filter_width);
    pixels
        .saturating_mul(window)
        .saturating_mul(u64::from(shape.input.channels) % ki::pool::SIMD_CHANNELS as u64)
}

fn layer(kind: LayerKind, shape: &PoolShape, params: &PoolParams) -> Layer {
    Layer {
        kernel: (shape.filter_height, shape.filter_width),
        stride: (shape.stride_height, shape.stride_width),
        ..Layer::new(kind, array(shape.input), array(params.output_shape()))
    }
}

fn key_shape(shape: &PoolShape) -> KeyShape {
    KeyShape {
        window: [
            u32::from(shape.padding == Padding::Same),
            shape.filter_height,
            shape.filter_width,
            shape.stride_height,
            shape.stride_width,
            // A pool window is dense.
            1,
            1,
            0,
        ],
        sizes: key_sizes(shape.input, shape.input.channels),
    }
}

fn block_extent(params: &PoolParams) -> Option<(u32, u32)> {
    let out = params.output_shape();
    Some((out.height, out.width))
}

/// A band of a pool computing `out_rows`, as `make` builds the pool.
fn band(
    shape: &PoolShape,
    params: &PoolParams,
    out_rows: Range<u32>,
    make: impl FnOnce(PoolShape, PoolParams) -> Op,
) -> Option<(Op, Range<u32>)> {
    let (params, rows) = params.row_band(out_rows).ok()?;
    let mut shape = *shape;
    shape.input = params.input_shape();
    Some((make(shape, params), rows))
}

/// Describes an int8 pooling operator: `$kernel` of `npu-kernels` computes it, both cost
/// models price it as `$class`; operands, work, tuning key, blocks and row bands are the
/// window's, the same for every pool.
macro_rules! pool_operator {
    ($op:ident, $kernel:path, $class:ident) => {
        impl Operator for $op {
            packed_fields!(shape => PoolParams::unpack, pack);
            fn operands(&self) -> Option<Operands> {
                operands_of(&self.params)
            }
            fn macs(&self) -> u64 {
                macs(&self.shape, &self.params)
            }
            fn taps(&self) -> u64 {
                scalar_taps(&self.shape, &self.params)
            }
            fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
                let out = view_mut(output)?;
                Ok($kernel(&self.params, i8s(inputs, 0)?, out)?)
            }
            fn cpu_kernel(&self) -> CpuKernel {
                CpuKernel::$class
            }
            fn layer(&self) -> Option<Layer> {
                Some(layer(LayerKind::$class, &self.shape, &self.params))
            }
            fn key_shape(&self) -> KeyShape {
                key_shape(&self.shape)
            }
            fn block_extent(&self) -> Option<(u32, u32)> {
                block_extent(&self.params)
            }
            fn rows(&self) -> Option<(Nhwc, Nhwc)> {
                Some((self.shape.input, self.params.output_shape()))
            }
            fn band(&self, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
                band(&self.shape, &self.params, out_rows, |shape, params| {
                    $op { shape, params }.into()
                })
            }
        }
    };
}

pool_operator!(AveragePool2dI8, ki::average_pool2d, AveragePool);
pool_operator!(MaxPool2dI8, ki::max_pool2d, MaxPool);

/// AVERAGE_POOL_2D and MAX_POOL_2D (int8).
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Pool2d(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let (x, y) = (ctx.input(0)?, ctx.output()?);
    let shape = PoolShape {
        input: nhwc(&x)?,
        filter_height: positive(o.filter_height, "filter size")?,
        filter_width: positive(o.filter_width, "filter size")?,
        stride_height: positive(o.stride_h, "stride")?,
        stride_width: positive(o.stride_w, "stride")?,
        padding: lower::padding(o.padding),
    };
    let params = PoolParams::new(
        shape,
        quant(&x)?,
        quant(&y)?,
        lower::activation(o.activation)?,
    )?;
    lower::check_elements(&y, params.lens().1)?;
    let list = operands(&[lower::Operand::Tensor(x.index)]);
    Ok(if ctx.builtin() == BuiltinOp::AveragePool2d {
        compute(AveragePool2dI8 { shape, params }, list)
    } else {
        compute(MaxPool2dI8 { shape, params }, list)
    })
}
