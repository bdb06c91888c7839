//! TRANSPOSE_CONV (int8): every input pixel scattered through the filter into the output,
//! requantized per output channel, TFLM's arithmetic and padding.
//!
//! Operands `[input, filter, multipliers]` or `[input, filter, multipliers, bias]`, as
//! CONV_2D's (the filter OHWI, `[out_channels, kh, kw, in_channels]`, read in place; the
//! multipliers computed at prepare). The `.tflite` operator's own order is `[output_shape,
//! filter, input, bias]`; the output shape is a constant that TFLM never reads (the output
//! tensor's shape is used) and it never reaches the device.
//!
//! Where it runs: Vela (3.10) runs TRANSPOSE_CONV on the Ethos-U55 with an 8-bit constant
//! filter, strides 1×1 or 2×2 (2×1 for a single input row), an output of `input × stride`
//! (SAME) or `input × stride + max(kernel − stride, 0)` (VALID), kernels up to 64 rows and
//! 4,096 taps: what TensorFlow's `Conv2DTranspose` layers give. The simulator places the family
//! on the NPU without checking those per operator (as for MEAN). Vela runs it as a CONV_2D over
//! the input upscaled by the strides (zeros inserted), stride 1, so the cycle model prices it
//! as [`LayerKind::Conv2d`] with that geometry: `[n, h · sh, w · sw, c]` in, the output out, the
//! filter's window. That is the work an Ethos-U does for it (every output pixel's full window);
//! the zeros it multiplies are not skipped there either. On the CPU it prices as
//! [`CpuKernel::TransposeConv`] (rates measured by the firmware): per MAC, per dot product
//! over the input channels ([`Operator::taps`]) and per output.

use npu_kernels::int8::{self as ki, Nhwc, TransposeConvParams};
use npu_kernels::packed::{WordReader, Words};
use npu_kernels::KernelError;

use super::conv::per_channel;
use super::interp::{bias, i8s, input, view, view_mut};
use super::lower::{
    self, compute, filter_scale_count, multipliers, nhwc, operands, quant, unsupported, LowerCtx,
};
use super::{nhwc as array, CpuKernel, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType};

/// int8 TRANSPOSE_CONV.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TransposeConvI8 {
    /// Resolved geometry and requantization.
    pub params: TransposeConvParams,
}

impl Operator for TransposeConvI8 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.params.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            params: TransposeConvParams::unpack(r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        let (i, f, o) = self.params.lens();
        per_channel(i, f, o, self.params.output_shape().channels)
    }
    fn macs(&self) -> u64 {
        self.params.macs()
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, f) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        Ok(ki::transpose_conv(
            &self.params,
            m,
            x,
            f,
            bias(inputs, 3)?,
            out,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::TransposeConv
    }
    /// (input pixel, filter position, output channel) triples, as [`Operator::macs`] counts
    /// them: each is one dot product over the input channels, whose set-up dominates a
    /// shallow input.
    fn taps(&self) -> u64 {
        let depth = u64::from(self.params.input_shape().channels);
        self.params.macs().checked_div(depth).unwrap_or(0)
    }
    fn layer(&self) -> Option<Layer> {
        let (i, o) = (self.params.input_shape(), self.params.output_shape());
        let (sh, sw) = self.params.stride();
        let upscaled = Nhwc {
            height: i.height.saturating_mul(sh),
            width: i.width.saturating_mul(sw),
            ..i
        };
        Some(Layer {
            kernel: self.params.filter(),
            weights: Some(1),
            ..Layer::new(LayerKind::Conv2d, array(upscaled), array(o))
        })
    }
}

/// TRANSPOSE_CONV (int8), filter scales per tensor or per output channel, optional bias.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::TransposeConv(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    // Input 0, the output shape, only has to be there.
    let (_, f, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?, ctx.output()?);
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let (input, output) = (nhwc(&x)?, nhwc(&y)?);
    let [out_channels, fh, fw, depth] = *f.shape.dims() else {
        return Err(unsupported("filter rank other than 4"));
    };
    if depth != input.channels || out_channels != output.channels {
        return Err(unsupported(
            "TRANSPOSE_CONV filter not matching its input and output",
        ));
    }
    filter_scale_count(&f, out_channels)?;
    let params = TransposeConvParams::new(
        input,
        output,
        (fh, fw),
        (
            lower::positive(o.stride_h, "stride")?,
            lower::positive(o.stride_w, "stride")?,
        ),
        lower::padding(o.padding),
        xq,
        yq,
        lower::activation(o.activation)?,
    )?;
    let mut list = operands(&[
        lower::Operand::Tensor(x.index),
        lower::Operand::Tensor(f.index),
        multipliers(xq, &f, yq, out_channels),
    ]);
    if let Some(b) = ctx.optional_input(3)? {
        if b.dtype != DataType::Int32 {
            return Err(unsupported("bias type other than int32"));
        }
        lower::check_elements(&b, out_channels as usize)?;
        // Three operands before it.
        let _ = list.push(lower::Operand::Tensor(b.index));
    }
    Ok(compute(TransposeConvI8 { params }, list))
}
