//! CONV_2D (int8): every output pixel a dot product of its input window with each filter,
//! requantized per output channel.
//!
//! Operands `[input, filter, multipliers]` or `[input, filter, multipliers, bias]` (bias
//! little-endian i32, multipliers
//! [`CHANNEL_MULTIPLIER_BYTES`](super::CHANNEL_MULTIPLIER_BYTES) per output channel). An NPU
//! walks it in output blocks, may run it as im2col (a gather of each output pixel's window
//! into a matrix, then one matrix product with the filter), and tiling cuts it into row bands.
//!
//! And in 16x8 ([`Conv2dI16`]: int16 input and output, int8 filter), with TFLM's int64 or
//! int32 accumulator (the bias's type).

use core::ops::Range;

use npu_kernels::int8::{
    self as ki, conv2d_im2col, im2col_len, ChannelMultiplier, Conv2dParams, Conv2dShape, Nhwc,
    Padding, Window2d,
};

use npu_kernels::int16 as k16;
use npu_kernels::packed::{Packed, WordReader, Words};
use npu_kernels::KernelError;

use super::fully_connected::{bias_bytes, wide_accumulator};
use super::interp::{bias, bias_of, i16s, i8s, input, view, view_mut};
use super::lower::{
    self, compute, filter_scale_count, multipliers, nhwc, operands, push_bias, push_bias_of, quant,
    quant_i16, unsupported, LowerCtx,
};
use super::{
    bytes, nhwc as array, CpuKernel, Im2col, KeyShape, Layer, LayerKind, Op, OpError, Operands,
    Operator, CHANNEL_MULTIPLIER_BYTES, MAX_INPUTS,
};
use crate::model::{BuiltinOptions, Conv2dOptions, DataType};

/// int8 CONV_2D.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conv2dI8 {
    /// Input and window.
    pub shape: Conv2dShape,
    /// Resolved geometry and requantization.
    pub params: Conv2dParams,
}

/// Operands of a per-channel operator: input, filter, multipliers and the optional bias.
pub(super) fn per_channel(
    input: usize,
    filter: usize,
    output: usize,
    channels: u32,
) -> Option<Operands> {
    let m = channels.checked_mul(CHANNEL_MULTIPLIER_BYTES)?;
    let bias = channels.checked_mul(4)?;
    Operands::new(&[bytes(input)?, bytes(filter)?, m, bias], 1, bytes(output)?)
}

/// Key bytes 3..=10 of a window: the padding flag, the exact window, and `last` (the groups
/// of a convolution, the depth multiplier of a depthwise one).
pub(super) fn key_window(w: Window2d, last: u32) -> [u32; 8] {
    [
        u32::from(w.padding == Padding::Same),
        w.filter_height,
        w.filter_width,
        w.stride_height,
        w.stride_width,
        w.dilation_height,
        w.dilation_width,
        last,
    ]
}

/// Key sizes of an NHWC input and the output's channels.
pub(super) fn key_sizes(i: Nhwc, out_channels: u32) -> [u64; 5] {
    [
        u64::from(i.batches),
        u64::from(i.height),
        u64::from(i.width),
        u64::from(i.channels),
        u64::from(out_channels),
    ]
}

/// A windowed layer with weights in operand 1.
pub(super) fn windowed(kind: LayerKind, input: Nhwc, output: Nhwc, w: Window2d) -> Layer {
    Layer {
        kernel: (w.filter_height, w.filter_width),
        stride: (w.stride_height, w.stride_width),
        dilation: (w.dilation_height, w.dilation_width),
        weights: Some(1),
        ..Layer::new(kind, array(input), array(output))
    }
}

impl Operator for Conv2dI8 {
    packed_fields!(shape => Conv2dParams::unpack, pack);
    fn operands(&self) -> Option<Operands> {
        let (i, f, o) = self.params.lens();
        per_channel(i, f, o, self.shape.out_channels)
    }
    fn macs(&self) -> u64 {
        let w = self.shape.window;
        let taps = u64::from(w.filter_height)
            * u64::from(w.filter_width)
            * u64::from(self.shape.filter_depth);
        (self.params.lens().2 as u64).saturating_mul(taps)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, f) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        Ok(ki::conv2d(&self.params, m, x, f, bias(inputs, 3)?, out)?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Conv
    }
    fn taps(&self) -> u64 {
        let w = self.shape.window;
        self.operands()
            .map_or(0, |o| u64::from(o.output))
            .saturating_mul(u64::from(w.filter_height))
            .saturating_mul(u64::from(w.filter_width))
    }
    fn layer(&self) -> Option<Layer> {
        let (input, output) = (self.shape.input, self.params.output_shape());
        Some(windowed(
            LayerKind::Conv2d,
            input,
            output,
            self.shape.window,
        ))
    }
    fn key_shape(&self) -> KeyShape {
        let i = self.shape.input;
        let groups = i.channels.checked_div(self.shape.filter_depth).unwrap_or(0);
        KeyShape {
            window: key_window(self.shape.window, groups),
            sizes: key_sizes(i, self.params.output_shape().channels),
        }
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        let out = self.params.output_shape();
        Some((out.height, out.width))
    }
    fn im2col(&self) -> Option<Im2col> {
        // The matrix: `batches · out_h · out_w` rows of `filter_h · filter_w · in_channels`.
        let (out, w) = (self.params.output_shape(), self.shape.window);
        let rows = u64::from(out.batches) * u64::from(out.height) * u64::from(out.width);
        let row = u64::from(w.filter_height)
            * u64::from(w.filter_width)
            * u64::from(self.shape.filter_depth);
        let taps = u64::from(w.filter_height) * u64::from(w.filter_width);
        let window = taps > 1 || w.stride_height > 1 || w.stride_width > 1;
        Some(Im2col {
            bytes: rows.checked_mul(row).and_then(|b| u32::try_from(b).ok()),
            // Grouped convolutions are not one matrix product.
            helps: window && self.shape.filter_depth == self.shape.input.channels,
        })
    }
    fn run_im2col(
        &self,
        inputs: &[&[u8]],
        matrix: &mut [u8],
        output: &mut [u8],
    ) -> Result<(), OpError> {
        let [x, f, m, rest @ ..] = inputs else {
            return Err(OpError::InputCount {
                given: inputs.len() as u8,
            });
        };
        let m: &[ChannelMultiplier] = view(m, 2)?;
        let (x, f): (&[i8], &[i8]) = (view(x, 0)?, view(f, 1)?);
        let bias = match rest.first() {
            Some(b) => Some(view::<i32>(b, 3)?),
            None => None,
        };
        let out = view_mut(output)?;
        // The kernel wants the matrix's exact length; a longer scratch keeps its tail untouched.
        let len = im2col_len(&self.params).ok_or(npu_kernels::KernelError::ShapeOverflow)?;
        let matrix = matrix.get_mut(..len).ok_or(OpError::Misaligned {
            operand: MAX_INPUTS as u8,
        })?;
        let matrix: &mut [i8] = view_mut(matrix)?;
        Ok(conv2d_im2col(&self.params, m, x, f, bias, matrix, out)?)
    }
    fn rows(&self) -> Option<(Nhwc, Nhwc)> {
        Some((self.shape.input, self.params.output_shape()))
    }
    fn band(&self, out_rows: Range<u32>) -> Option<(Op, Range<u32>)> {
        let (params, rows) = self.params.row_band(out_rows).ok()?;
        let mut shape = self.shape;
        shape.input = params.input_shape();
        Some((Conv2dI8 { shape, params }.into(), rows))
    }
}

/// CONV_2D (int8), filter scales per tensor or per output channel.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::Conv2d(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    let x = ctx.input(0)?;
    if x.dtype == DataType::Int16 {
        return lower::int16(|| lower_i16(ctx, o));
    }
    let (f, y) = (ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let [out_channels, fh, fw, depth] = *f.shape.dims() else {
        return Err(unsupported("filter rank other than 4"));
    };
    filter_scale_count(&f, out_channels)?;
    let shape = Conv2dShape {
        input: nhwc(&x)?,
        out_channels,
        filter_depth: depth,
        window: lower::window(
            (fh, fw),
            (o.stride_h, o.stride_w),
            (o.dilation_h_factor, o.dilation_w_factor),
            o.padding,
        )?,
    };
    let params = Conv2dParams::new(shape, xq, yq, lower::activation(o.activation)?)?;
    lower::check_elements(&y, params.lens().2)?;
    let mut list = operands(&[
        lower::Operand::Tensor(x.index),
        lower::Operand::Tensor(f.index),
        multipliers(xq, &f, yq, out_channels),
    ]);
    push_bias(&mut list, ctx, out_channels)?;
    Ok(compute(Conv2dI8 { shape, params }, list))
}

/// 16x8 CONV_2D (int16 input and output, int8 filter), TFLM's int16 `ConvPerChannel`: no zero
/// points, accumulating in the bias's type.
///
/// Operands as [`Conv2dI8`]'s, the bias little-endian i64 when `wide`, i32 otherwise. Runs on
/// the NPU (Vela maps 16x8 CONV_2D to the Ethos-U55, its MAC array at half the int8 rate);
/// not as im2col, and not cut into row bands (tiling's row arithmetic is int8's).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Conv2dI16 {
    /// Input and window.
    pub shape: Conv2dShape,
    /// Resolved geometry and activation range ([`Conv2dParams::new_int16`]).
    pub params: Conv2dParams,
    /// 64-bit accumulator and int64 bias (TFLM's default for 16x8); else 32-bit and int32.
    pub wide: bool,
}

/// Operands of a 16x8 per-channel operator: `input`, `filter` and `output` elements, int16
/// activations, a bias of `bias` bytes per channel.
pub(super) fn per_channel_i16(
    (input, filter, output): (usize, usize, usize),
    channels: u32,
    bias: u32,
) -> Option<Operands> {
    let m = channels.checked_mul(CHANNEL_MULTIPLIER_BYTES)?;
    let bias = channels.checked_mul(bias)?;
    let input = bytes(input.checked_mul(2)?)?;
    let output = bytes(output.checked_mul(2)?)?;
    Operands::new(&[input, bytes(filter)?, m, bias], 1, output)
}

impl Operator for Conv2dI16 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.shape.pack(w);
        self.params.pack_int16(w);
        self.wide.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let shape = Packed::unpack(r)?;
        let params = Conv2dParams::unpack_int16(shape, r)?;
        let wide = Packed::unpack(r)?;
        Ok(Self {
            shape,
            params,
            wide,
        })
    }
    fn operands(&self) -> Option<Operands> {
        let channels = self.shape.out_channels;
        per_channel_i16(self.params.lens(), channels, bias_bytes(self.wide))
    }
    fn macs(&self) -> u64 {
        let w = self.shape.window;
        let taps = u64::from(w.filter_height)
            * u64::from(w.filter_width)
            * u64::from(self.shape.filter_depth);
        (self.params.lens().2 as u64).saturating_mul(taps)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, f) = (i16s(inputs, 0)?, i8s(inputs, 1)?);
        let (p, out) = (&self.params, view_mut(output)?);
        Ok(if self.wide {
            k16::conv2d::<i64>(p, m, x, f, bias_of(inputs, 3), out)
        } else {
            k16::conv2d::<i32>(p, m, x, f, bias_of(inputs, 3), out)
        }?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::Conv16
    }
    fn layer(&self) -> Option<Layer> {
        let (input, output) = (self.shape.input, self.params.output_shape());
        Some(Layer {
            element_bits: 16,
            ..windowed(LayerKind::Conv2d, input, output, self.shape.window)
        })
    }
    fn taps(&self) -> u64 {
        let w = self.shape.window;
        (self.params.lens().2 as u64)
            .saturating_mul(u64::from(w.filter_height))
            .saturating_mul(u64::from(w.filter_width))
    }
    fn key_shape(&self) -> KeyShape {
        let i = self.shape.input;
        let groups = i.channels.checked_div(self.shape.filter_depth).unwrap_or(0);
        KeyShape {
            window: key_window(self.shape.window, groups),
            sizes: key_sizes(i, self.params.output_shape().channels),
        }
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        let out = self.params.output_shape();
        Some((out.height, out.width))
    }
}

/// CONV_2D (16x8), filter scales per tensor or per output channel, an int64 or int32 bias.
fn lower_i16(
    ctx: &LowerCtx<'_, '_>,
    o: &Conv2dOptions,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, f, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant_i16(&x)?, quant_i16(&y)?);
    let [out_channels, fh, fw, depth] = *f.shape.dims() else {
        return Err(unsupported("filter rank other than 4"));
    };
    filter_scale_count(&f, out_channels)?;
    let shape = Conv2dShape {
        input: nhwc(&x)?,
        out_channels,
        filter_depth: depth,
        window: lower::window(
            (fh, fw),
            (o.stride_h, o.stride_w),
            (o.dilation_h_factor, o.dilation_w_factor),
            o.padding,
        )?,
    };
    let params = Conv2dParams::new_int16(shape, xq, yq, lower::activation(o.activation)?)?;
    lower::check_elements(&y, params.lens().2)?;
    let mut list = operands(&[
        lower::Operand::Tensor(x.index),
        lower::Operand::Tensor(f.index),
        multipliers(xq, &f, yq, out_channels),
    ]);
    let types = [DataType::Int64, DataType::Int32];
    let refusal = "bias type other than int64 or int32";
    let bias = push_bias_of(&mut list, ctx, out_channels, &types, refusal)?;
    let wide = wide_accumulator(bias, o.quantized_bias_type);
    Ok(compute(
        Conv2dI16 {
            shape,
            params,
            wide,
        },
        list,
    ))
}
