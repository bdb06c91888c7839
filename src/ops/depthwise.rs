//! DEPTHWISE_CONV_2D (int8): each input channel convolved with its own filters (a depth
//! multiplier of them), requantized per output channel.
//!
//! Operands as [`Conv2dI8`](super::Conv2dI8)'s: `[input, filter, multipliers]` or
//! `[input, filter, multipliers, bias]`. An NPU walks it in output blocks, and tiling cuts it
//! into row bands.

use core::ops::Range;

use npu_kernels::int8::{self as ki, DepthwiseParams, DepthwiseShape, Nhwc};

use super::conv::{key_sizes, key_window, per_channel, windowed};
use super::interp::{bias, i8s, input, view, view_mut};
use super::lower::{
    self, compute, filter_scale_count, multipliers, nhwc, operands, positive, push_bias, quant,
    unsupported, LowerCtx,
};
use super::{CpuKernel, KeyShape, Layer, LayerKind, Op, OpError, Operands, Operator};
use crate::model::BuiltinOptions;

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
    let (x, f, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
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
