//! DEPTHWISE_CONV_2D (int8): each input channel convolved with its own filters (a depth
//! multiplier of them), requantized per output channel.
//!
//! Operands as [`Conv2dI8`](super::Conv2dI8)'s: `[input, filter, multipliers]` or
//! `[input, filter, multipliers, bias]`. An NPU walks it in output blocks, and tiling cuts it
//! into row bands.
//!
//! And in 16x8 ([`DepthwiseConv2dI16`]: int16 input and output, int8 filter, int64 bias).

use core::ops::Range;

use npu_kernels::int8::{self as ki, DepthwiseParams, DepthwiseShape, Nhwc};

use npu_kernels::int16 as k16;

use super::conv::{key_sizes, key_window, per_channel, per_channel_i16, windowed};
use super::interp::{bias, bias_of, i16s, i8s, input, view, view_mut};
use super::lower::{
    self, compute, filter_scale_count, multipliers, nhwc, operands, positive, push_bias,
    push_bias_of, quant, quant_i16, unsupported, LowerCtx,
};
use super::{CpuKernel, KeyShape, Layer, LayerKind, Op, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType, DepthwiseConv2dOptions};

/// int8 DEPTHWISE_CONV_2D.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DepthwiseConv2dI8 {
    /// Input, depth multiplier and window.
    pub shape: DepthwiseShape,
    /// Resolved geometry and requantization.
    pub params: DepthwiseParams,
}

impl Operator for DepthwiseConv2dI8 {
    packed_fields!(shape => DepthwiseParams::unpack, pack);
    fn operands(&self) -> Option<Operands> {
        let (i, f, o) = self.params.lens();
        per_channel(i, f, o, self.params.output_shape().channels)
    }
    fn macs(&self) -> u64 {
        let w = self.shape.window;
        let taps = u64::from(w.filter_height) * u64::from(w.filter_width);
        (self.params.lens().2 as u64).saturating_mul(taps)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, f) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        Ok(ki::depthwise_conv2d(
            &self.params,
            m,
            x,
            f,
            bias(inputs, 3)?,
            out,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Depthwise
    }
    /// The filter positions of each output *pixel*: the kernel lists a pixel's taps once for
    /// all its channels, a cost per pixel that shallow layers feel most.
    fn taps(&self) -> u64 {
        let (w, out) = (self.shape.window, self.params.output_shape());
        [
            out.batches,
            out.height,
            out.width,
            w.filter_height,
            w.filter_width,
        ]
        .into_iter()
        .fold(1_u64, |n, d| n.saturating_mul(u64::from(d)))
    }
    fn layer(&self) -> Option<Layer> {
        let (input, output) = (self.shape.input, self.params.output_shape());
        Some(windowed(
            LayerKind::DepthwiseConv2d,
            input,
            output,
            self.shape.window,
        ))
    }
    fn key_shape(&self) -> KeyShape {
        KeyShape {
            window: key_window(self.shape.window, self.shape.depth_multiplier),
            sizes: key_sizes(self.shape.input, self.params.output_shape().channels),
        }
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        let out = self.params.output_shape();
        Some((out.height, out.width))
    }
    fn rows(&self) -> Option<(Nhwc, Nhwc)> {
        Some((self.shape.input, self.params.output_shape()))
    }
    fn band(&self, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
        let (params, rows) = self.params.row_band(out_rows).ok()?;
        let mut shape = self.shape;
        shape.input = params.input_shape();
        Some((DepthwiseConv2dI8 { shape, params }.into(), rows))
    }
}

/// DEPTHWISE_CONV_2D (int8): a `[1, H, W, C]` filter, `C` the input channels times the depth
/// multiplier.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::DepthwiseConv2d(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let x = ctx.input(0)?;
    if x.dtype == DataType::Int16 {
        return lower::int16(|| lower_i16(ctx, o));
    }
    let (f, y) = (ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let [1, fh, fw, out_channels] = *f.shape.dims() else {
        return Err(unsupported(
            "depthwise filter shape other than [1, H, W, C]",
        ));
    };
    filter_scale_count(&f, out_channels)?;
    let input_shape = nhwc(&x)?;
    let depth_multiplier = positive(o.depth_multiplier, "depth multiplier")?;
    if input_shape.channels.checked_mul(depth_multiplier) != Some(out_channels) {
        return Err(unsupported(
            "filter channels other than input × depth multiplier",
        ));
    }
    let shape = DepthwiseShape {
        input: input_shape,
        depth_multiplier,
        window: lower::window(
            (fh, fw),
            (o.stride_h, o.stride_w),
            (o.dilation_h_factor, o.dilation_w_factor),
            o.padding,
        )?,
    };
    let params = DepthwiseParams::new(shape, xq, yq, lower::activation(o.activation)?)?;
    lower::check_elements(&y, params.lens().2)?;
    let mut list = operands(&[
        lower::Operand::Tensor(x.index),
        lower::Operand::Tensor(f.index),
        multipliers(xq, &f, yq, out_channels),
    ]);
    push_bias(&mut list, ctx, out_channels)?;
    Ok(compute(DepthwiseConv2dI8 { shape, params }, list))
}

/// 16x8 DEPTHWISE_CONV_2D (int16 input and output, int8 filter), TFLM's int16
/// `DepthwiseConvPerChannel`: no zero points, a 64-bit accumulator and an int64 bias (TFLM's
/// only int16 path).
///
/// Operands as [`DepthwiseConv2dI8`]'s, the bias little-endian i64. Runs on the NPU (Vela maps
/// 16x8 DEPTHWISE_CONV_2D to the Ethos-U55); not cut into row bands (tiling's row arithmetic
/// is int8's).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DepthwiseConv2dI16 {
    /// Input, depth multiplier and window.
    pub shape: DepthwiseShape,
    /// Resolved geometry and activation range ([`DepthwiseParams::new_int16`]).
    pub params: DepthwiseParams,
}

impl Operator for DepthwiseConv2dI16 {
    packed_fields!(shape => DepthwiseParams::unpack_int16, pack_int16);
    fn operands(&self) -> Option<Operands> {
        let channels = self.params.output_shape().channels;
        per_channel_i16(self.params.lens(), channels, 8)
    }
    fn macs(&self) -> u64 {
        let w = self.shape.window;
        let taps = u64::from(w.filter_height) * u64::from(w.filter_width);
        (self.params.lens().2 as u64).saturating_mul(taps)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, f) = (i16s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        let bias = bias_of::<i64>(inputs, 3);
        Ok(k16::depthwise_conv2d(&self.params, m, x, f, bias, out)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Depthwise16
    }
    fn layer(&self) -> Option<Layer> {
        let (input, output) = (self.shape.input, self.params.output_shape());
        Some(Layer {
            element_bits: 16,
            ..windowed(LayerKind::DepthwiseConv2d, input, output, self.shape.window)
        })
    }
    fn key_shape(&self) -> KeyShape {
        KeyShape {
            window: key_window(self.shape.window, self.shape.depth_multiplier),
            sizes: key_sizes(self.shape.input, self.params.output_shape().channels),
        }
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        let out = self.params.output_shape();
        Some((out.height, out.width))
    }
}

/// DEPTHWISE_CONV_2D (16x8): as the int8 lowering, with an int64 bias (TFLM reads any int16
/// depthwise bias as int64, so an int32 one is refused).
fn lower_i16(
    ctx: &LowerCtx<'_, '_>,
    o: &DepthwiseConv2dOptions,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, f, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant_i16(&x)?, quant_i16(&y)?);
    let [1, fh, fw, out_channels] = *f.shape.dims() else {
        return Err(unsupported(
            "depthwise filter shape other than [1, H, W, C]",
        ));
    };
    filter_scale_count(&f, out_channels)?;
    let input_shape = nhwc(&x)?;
    let depth_multiplier = positive(o.depth_multiplier, "depth multiplier")?;
    if input_shape.channels.checked_mul(depth_multiplier) != Some(out_channels) {
        return Err(unsupported(
            "filter channels other than input × depth multiplier",
        ));
    }
    let shape = DepthwiseShape {
        input: input_shape,
        depth_multiplier,
        window: lower::window(
            (fh, fw),
            (o.stride_h, o.stride_w),
            (o.dilation_h_factor, o.dilation_w_factor),
            o.padding,
        )?,
    };
    let params = DepthwiseParams::new_int16(shape, xq, yq, lower::activation(o.activation)?)?;
    lower::check_elements(&y, params.lens().2)?;
    let mut list = operands(&[
        lower::Operand::Tensor(x.index),
        lower::Operand::Tensor(f.index),
        multipliers(xq, &f, yq, out_channels),
    ]);
    let int64 = [DataType::Int64];
    push_bias_of(
        &mut list,
        ctx,
        out_channels,
        &int64,
        "bias type other than int64",
    )?;
    Ok(compute(DepthwiseConv2dI16 { shape, params }, list))
}
