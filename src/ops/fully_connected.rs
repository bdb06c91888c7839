//! FULLY_CONNECTED: every input row times the weight matrix, in f32, in int8 with one output
//! multiplier (per-tensor weights), and in int8 with one multiplier per output feature
//! (per-channel weights).
//!
//! Operands `[input, weights]` or `[input, weights, bias]` (bias f32 for f32, little-endian
//! i32 for int8); the per-channel form `[input, weights, multipliers]` or
//! `[input, weights, multipliers, bias]`, multipliers
//! [`CHANNEL_MULTIPLIER_BYTES`](super::CHANNEL_MULTIPLIER_BYTES) per output feature.
//!
//! And in 16x8 ([`FullyConnectedI16`]: int16 input and output, int8 weights), per tensor or
//! per channel, with TFLM's int64 or int32 accumulator (the bias's type).

use npu_kernels::f32 as kf;
use npu_kernels::int16 as k16;
use npu_kernels::int8::{self as ki, FcParams, FcPerChannelParams};
use npu_kernels::packed::{Packed, WordReader, Words};
use npu_kernels::FcShape;
use npu_kernels::KernelError;

use super::interp::{bias, bias_of, i16s, i8s, input, view, view_mut};
use super::lower::{
    self, compute, filter_scale_count, multipliers, operands, push_bias, push_bias_of, quant,
    quant_i16, unsupported, LowerCtx,
};
use super::{CpuKernel, KeyShape, Layer, LayerKind, OpError, Operands, Operator};
use crate::model::{BuiltinOptions, DataType, FullyConnectedOptions, WeightsFormat};

/// f32 fully connected.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FullyConnectedF32 {
    /// Shape.
    pub shape: FcShape,
}

/// int8 fully connected with one output multiplier, TFLM arithmetic.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FullyConnectedI8 {
    /// Shape.
    pub shape: FcShape,
    /// Requantization parameters.
    pub params: FcParams,
}

/// int8 fully connected with one multiplier per output feature.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FullyConnectedPerChannelI8 {
    /// Shape.
    pub shape: FcShape,
    /// Offsets and activation range.
    pub params: FcPerChannelParams,
}

/// Element counts of the input, weights and output.
fn elements(s: FcShape) -> Option<(u32, u32, u32)> {
    Some((
        s.batches.checked_mul(s.in_features)?,
        s.out_features.checked_mul(s.in_features)?,
        s.batches.checked_mul(s.out_features)?,
    ))
}

/// Operands of the per-tensor forms, elements of `size` bytes; the bias is four bytes per
/// output feature either way.
fn per_tensor(s: FcShape, size: u32) -> Option<Operands> {
    let (input, weights, out) = elements(s)?;
    let bias = s.out_features.checked_mul(4)?;
    Operands::new(
        &[input.checked_mul(size)?, weights.checked_mul(size)?, bias],
        1,
        out.checked_mul(size)?,
    )
}

fn macs(s: FcShape) -> u64 {
    u64::from(s.batches)
        .saturating_mul(u64::from(s.in_features))
        .saturating_mul(u64::from(s.out_features))
}

/// The layer, its weights operand 1.
fn layer(s: FcShape) -> Option<Layer> {
    Some(Layer {
        weights: Some(1),
        ..Layer::new(
            LayerKind::FullyConnected,
            [1, 1, s.batches, s.in_features],
            [1, 1, s.batches, s.out_features],
        )
    })
}

fn key_shape(s: FcShape) -> KeyShape {
    KeyShape {
        window: [0; 8],
        sizes: [
            u64::from(s.batches),
            0,
            0,
            u64::from(s.in_features),
            u64::from(s.out_features),
        ],
    }
}

/// A fully connected layer has no image: the driver folds its `batches` rows into some H × W
/// with H · W = batches (Vela makes it about square). Both are at most `batches`, so clipping
/// to `batches × batches` never merges two blocks the fold would tell apart.
fn block_extent(s: FcShape) -> Option<(u32, u32)> {
    Some((s.batches, s.batches))
}

impl Operator for FullyConnectedF32 {
    packed_fields!(shape);
    fn operands(&self) -> Option<Operands> {
        per_tensor(self.shape, 4)
    }
    fn macs(&self) -> u64 {
        macs(self.shape)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let bias = inputs.get(2).map(|b| view::<f32>(b, 2)).transpose()?;
        let (x, w) = (view(input(inputs, 0), 0)?, view(input(inputs, 1), 1)?);
        Ok(kf::fully_connected(
            self.shape,
            x,
            w,
            bias,
            view_mut(output)?,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::FullyConnectedF32
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.shape)
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        block_extent(self.shape)
    }
}

impl Operator for FullyConnectedI8 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        per_tensor(self.shape, 1)
    }
    fn macs(&self) -> u64 {
        macs(self.shape)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (x, w) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        Ok(ki::fully_connected(
            &self.params,
            self.shape,
            x,
            w,
            bias(inputs, 2)?,
            out,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::FullyConnected
    }
    fn layer(&self) -> Option<Layer> {
        layer(self.shape)
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.shape)
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        block_extent(self.shape)
    }
}

impl Operator for FullyConnectedPerChannelI8 {
    packed_fields!(shape, params);
    fn operands(&self) -> Option<Operands> {
        let (input, weights, out) = elements(self.shape)?;
        let channels = self.shape.out_features;
        let m = channels.checked_mul(super::CHANNEL_MULTIPLIER_BYTES)?;
        Operands::new(&[input, weights, m, channels.checked_mul(4)?], 1, out)
    }
    fn macs(&self) -> u64 {
        macs(self.shape)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let m = view(input(inputs, 2), 2)?;
        let (x, w) = (i8s(inputs, 0)?, i8s(inputs, 1)?);
        let out = view_mut(output)?;
        Ok(ki::fully_connected_per_channel(
            &self.params,
            self.shape,
            m,
            x,
            w,
            bias(inputs, 3)?,
            out,
        )?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::FullyConnected
    }
    fn layer(&self) -> Option<Layer> {
        layer(self.shape)
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.shape)
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        block_extent(self.shape)
    }
}

/// FULLY_CONNECTED (int8): per-tensor weights keep TFLM's per-tensor path (it computes the
/// multiplier from the scale product in float), per-channel ones take multipliers.
pub(super) fn lower(ctx: &LowerCtx<'_, '_>) -> Result<lower::Lowered, lower::LowerError> {
    let BuiltinOptions::FullyConnected(o) = ctx.options() else {
        return Err(unsupported("operator"));
    };
    if o.weights_format != WeightsFormat::Default {
        return Err(unsupported("shuffled weights format"));
    }
    let x = ctx.input(0)?;
    if x.dtype == DataType::Int16 {
        return lower::int16(|| lower_i16(ctx, o));
    }
    let (w, y) = (ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant(&x)?, quant(&y)?);
    let [out_features, in_features] = *w.shape.dims() else {
        return Err(unsupported("weights rank other than 2"));
    };
    filter_scale_count(&w, out_features)?;
    if in_features == 0 || x.shape.num_elements() % in_features != 0 {
        return Err(unsupported(
            "input size not a multiple of the weights' depth",
        ));
    }
    let shape = FcShape {
        batches: x.shape.num_elements() / in_features,
        in_features,
        out_features,
    };
    lower::check_elements(&y, shape.batches as usize * out_features as usize)?;
    let act = lower::activation(o.activation)?;
    let per_tensor_scale = w
        .quantization
        .as_ref()
        .filter(|q| q.len() == 1)
        .and_then(|q| q.scale(0));
    let x_op = lower::Operand::Tensor(x.index);
    let w_op = lower::Operand::Tensor(w.index);
    let (op, mut list): (super::Op, _) = match per_tensor_scale {
        Some(w_scale) => (
            FullyConnectedI8 {
                shape,
                params: FcParams::new(xq, w_scale, yq, act)?,
            }
            .into(),
            operands(&[x_op, w_op]),
        ),
        None => (
            FullyConnectedPerChannelI8 {
                shape,
                params: FcPerChannelParams::new(xq, yq, act)?,
            }
            .into(),
            operands(&[x_op, w_op, multipliers(xq, &w, yq, out_features)]),
        ),
    };
    push_bias(&mut list, ctx, out_features)?;
    Ok(compute(op, list))
}

/// 16x8 fully connected (int16 input and output, int8 weights), TFLM's
/// `reference_integer_ops::FullyConnected` (per-tensor weights: the multiplier is in the
/// parameters) or `FullyConnectedPerChannel` (per-channel weights: a multipliers operand),
/// accumulating in the bias's type.
///
/// Operands `[input, weights, (multipliers,) bias?]`, the bias little-endian i64 when `wide`,
/// i32 otherwise. Runs on the NPU: Vela maps 16x8 FULLY_CONNECTED to the Ethos-U55 (its MAC
/// array at half the int8 rate).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FullyConnectedI16 {
    /// Shape.
    pub shape: FcShape,
    /// Offsets, activation range, and the per-tensor multiplier if any.
    pub params: k16::FcParams,
    /// 64-bit accumulator and int64 bias (TFLM's default for 16x8); else 32-bit and int32.
    pub wide: bool,
}

/// Bytes of one bias element: int64 for a wide accumulator, else int32.
pub(super) fn bias_bytes(wide: bool) -> u32 {
    if wide {
        8
    } else {
        4
    }
}

impl Operator for FullyConnectedI16 {
    fn pack(&self, w: &mut Words<'_>) -> bool {
        self.shape.pack(w);
        self.params.pack(w);
        self.wide.pack(w);
        true
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        Ok(Self {
            shape: Packed::unpack(r)?,
            params: k16::FcParams::unpack(r)?,
            wide: Packed::unpack(r)?,
        })
    }
    fn operands(&self) -> Option<Operands> {
        let (input, weights, out) = elements(self.shape)?;
        let channels = self.shape.out_features;
        let bias = channels.checked_mul(bias_bytes(self.wide))?;
        let (input, out) = (input.checked_mul(2)?, out.checked_mul(2)?);
        if self.params.multiplier().is_some() {
            Operands::new(&[input, weights, bias], 1, out)
        } else {
            let m = channels.checked_mul(super::CHANNEL_MULTIPLIER_BYTES)?;
            Operands::new(&[input, weights, m, bias], 1, out)
        }
    }
    fn macs(&self) -> u64 {
        macs(self.shape)
    }
    fn run(&self, inputs: &[&[u8]], output: &mut [u8]) -> Result<(), OpError> {
        let (x, w) = (i16s(inputs, 0)?, i8s(inputs, 1)?);
        let (m, b) = match self.params.multiplier() {
            Some(_) => (&[][..], 2),
            None => (view(input(inputs, 2), 2)?, 3),
        };
        let (p, s, out) = (&self.params, self.shape, view_mut(output)?);
        Ok(if self.wide {
            k16::fully_connected::<i64>(p, s, m, x, w, bias_of(inputs, b), out)
        } else {
            k16::fully_connected::<i32>(p, s, m, x, w, bias_of(inputs, b), out)
        }?)
    }
    fn cpu_kernel(&self) -> CpuKernel {
        CpuKernel::FullyConnected16
    }
    fn layer(&self) -> Option<Layer> {
        layer(self.shape).map(|l| Layer {
            element_bits: 16,
            ..l
        })
    }
    fn key_shape(&self) -> KeyShape {
        key_shape(self.shape)
    }
    fn block_extent(&self) -> Option<(u32, u32)> {
        block_extent(self.shape)
    }
}

/// Whether a 16x8 operator accumulates in 64 bits, as TFLM decides for FULLY_CONNECTED and
/// CONV_2D: in 32 bits only with an int32 bias, or without a bias when the operator's
/// `quantized_bias_type` says int32.
pub(super) fn wide_accumulator(bias: Option<DataType>, quantized_bias_type: DataType) -> bool {
    bias.unwrap_or(quantized_bias_type) != DataType::Int32
}

/// FULLY_CONNECTED (16x8): int16 input and output, int8 weights per tensor or per channel,
/// an int64 or int32 bias.
fn lower_i16(
    ctx: &LowerCtx<'_, '_>,
    o: &FullyConnectedOptions,
) -> Result<lower::Lowered, lower::LowerError> {
    let (x, w, y) = (ctx.input(0)?, ctx.input(1)?, ctx.output()?);
    let (xq, yq) = (quant_i16(&x)?, quant_i16(&y)?);
    let [out_features, in_features] = *w.shape.dims() else {
        return Err(unsupported("weights rank other than 2"));
    };
    filter_scale_count(&w, out_features)?;
    if in_features == 0 || x.shape.num_elements() % in_features != 0 {
        return Err(unsupported(
            "input size not a multiple of the weights' depth",
        ));
    }
    let shape = FcShape {
        batches: x.shape.num_elements() / in_features,
        in_features,
        out_features,
    };
    lower::check_elements(&y, shape.batches as usize * out_features as usize)?;
    let act = lower::activation(o.activation)?;
    let per_tensor_scale = w
        .quantization
        .as_ref()
        .filter(|q| q.len() == 1)
        .and_then(|q| q.scale(0));
    let x_op = lower::Operand::Tensor(x.index);
    let w_op = lower::Operand::Tensor(w.index);
    let (params, mut list) = match per_tensor_scale {
        Some(w_scale) => (
            k16::FcParams::per_tensor(xq, w_scale, yq, act)?,
            operands(&[x_op, w_op]),
        ),
        None => (
            k16::FcParams::per_channel(xq, yq, act)?,
            operands(&[x_op, w_op, multipliers(xq, &w, yq, out_features)]),
        ),
    };
    let types = [DataType::Int64, DataType::Int32];
    let refusal = "bias type other than int64 or int32";
    let bias = push_bias_of(&mut list, ctx, out_features, &types, refusal)?;
    let wide = wide_accumulator(bias, o.quantized_bias_type);
    Ok(compute(
        FullyConnectedI16 {
            shape,
            params,
            wide,
        },
        list,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulator_width_follows_tflm() {
        // The bias's type decides; without a bias, the operator's `quantized_bias_type`
        // (FLOAT32, "not set", means int64 as for any type but int32).
        assert!(wide_accumulator(Some(DataType::Int64), DataType::Int32));
        assert!(!wide_accumulator(Some(DataType::Int32), DataType::Int64));
        assert!(!wide_accumulator(None, DataType::Int32));
        assert!(wide_accumulator(None, DataType::Float32));
        assert!(wide_accumulator(None, DataType::Int64));
    }

    #[test]
    fn int16_operands_follow_the_bias_width() {
        let shape = FcShape {
            batches: 2,
            in_features: 3,
            out_features: 4,
        };
        let q = |scale| npu_kernels::int8::Quant {
            scale,
            zero_point: 0,
        };
        let act = npu_kernels::int8::Activation::None;
        let per_tensor = k16::FcParams::per_tensor(q(0.5), 0.25, q(1.0), act).unwrap();
        let per_channel = k16::FcParams::per_channel(q(0.5), q(1.0), act).unwrap();
        let op = |params, wide| FullyConnectedI16 {
            shape,
            params,
            wide,
        };
        let o = op(per_tensor, true).operands().unwrap();
        assert_eq!((&o.inputs[..], o.output), (&[12, 12, 32][..], 16));
        let o = op(per_channel, false).operands().unwrap();
        assert_eq!((&o.inputs[..], o.output), (&[12, 12, 32, 16][..], 16));
    }
}
