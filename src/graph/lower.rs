//! Lowering: one TFLite operator to one HAL [`Op`] with its operands.
//!
//! Everything an operator's kernel needs is resolved here, once, when a model is prepared:
//! shapes are checked against what the kernel computes, quantization is turned into
//! fixed-point multipliers, and the operands are listed in the order the [`Op`] documents.
//! Parameters that only describe shapes (a RESHAPE's new shape, a MEAN's axes) are read from
//! their constant tensors here and never reach the device.

use npu_kernels::int8::{
    self as ki, Conv2dShape, DepthwiseShape, Nhwc, PoolShape, Quant, Window2d,
};
use npu_kernels::{FcShape, KernelError};

use super::GraphError;
use crate::hal::{Op, MAX_JOB_INPUTS};
use crate::model::{
    Activation, BuiltinOp, BuiltinOptions, DataType, OperatorInfo, Padding, SubGraph, TensorInfo,
    WeightsFormat,
};

/// One operand of a lowered operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Operand {
    /// A tensor of the model (activation or constant).
    Tensor(u16),
    /// Per-channel multipliers computed at prepare time from the scales of the input, of
    /// each channel of `filter`, and of the output.
    Multipliers {
        /// Input scale.
        input_scale: f32,
        /// The filter tensor whose per-channel scales are used.
        filter: u16,
        /// Output scale.
        output_scale: f32,
        /// Output channels (multipliers to produce).
        channels: u32,
    },
}

/// What an operator becomes.
#[derive(Clone, Debug, PartialEq)]
// Lowered once per operator at prepare time and moved into a step at once: never stored.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Lowered {
    /// A compute job.
    Compute {
        /// The operation.
        op: Op,
        /// Its operands, in the order the op documents.
        operands: heapless::Vec<Operand, MAX_JOB_INPUTS>,
    },
    /// The output is the input's bytes under another shape: it shares the input's memory.
    Alias {
        /// The input tensor.
        input: u16,
    },
}

/// The operator being lowered, for error messages.
#[derive(Clone, Copy)]
struct Ctx {
    op_index: u32,
    op: BuiltinOp,
}

impl Ctx {
    fn unsupported(self, what: &'static str) -> GraphError {
        GraphError::Unsupported {
            op_index: self.op_index,
            op: self.op,
            what,
        }
    }

    fn kernel(self, error: KernelError) -> GraphError {
        GraphError::Kernel {
            op_index: self.op_index,
            op: self.op,
            error,
        }
    }

    fn check_elements(self, t: &TensorInfo<'_>, expected: usize) -> Result<(), GraphError> {
        if t.shape.num_elements() as usize == expected {
            Ok(())
        } else {
            Err(GraphError::ShapeMismatch {
                op_index: self.op_index,
                op: self.op,
                tensor: t.index,
                expected: u32::try_from(expected).unwrap_or(u32::MAX),
                actual: t.shape.num_elements(),
            })
        }
    }
}

/// The operator's input `i`, which must be present.
fn input<'a>(
    sub: &SubGraph<'a>,
    info: &OperatorInfo<'_>,
    ctx: Ctx,
    i: usize,
) -> Result<TensorInfo<'a>, GraphError> {
    let index = info
        .input(i)
        .ok_or(ctx.unsupported("missing required input"))?;
    Ok(sub.tensor(index)?)
}

fn output<'a>(
    sub: &SubGraph<'a>,
    info: &OperatorInfo<'_>,
    ctx: Ctx,
) -> Result<TensorInfo<'a>, GraphError> {
    if info.outputs.len() != 1 {
        return Err(ctx.unsupported("output count other than 1"));
    }
    let index = info.output(0).ok_or(ctx.unsupported("omitted output"))?;
    Ok(sub.tensor(index)?)
}

/// Per-tensor int8 quantization of an activation tensor.
fn quant(t: &TensorInfo<'_>, ctx: Ctx) -> Result<Quant, GraphError> {
    if t.dtype != DataType::Int8 {
        return Err(ctx.unsupported("tensor type other than int8"));
    }
    let q = t
        .quantization
        .as_ref()
        .ok_or(ctx.unsupported("int8 tensor without quantization"))?;
    if q.len() != 1 {
        return Err(ctx.unsupported("per-channel quantization of an activation"));
    }
    let scale = q.scale(0).ok_or(ctx.unsupported("missing scale"))?;
    let zero_point = q
        .zero_point(0)
        .and_then(|z| i32::try_from(z).ok())
        .ok_or(ctx.unsupported("zero point out of range"))?;
    Ok(Quant { scale, zero_point })
}

/// The scales of a constant int8 filter: one per output channel (along `axis`) or one.
fn filter_scale_count(
    t: &TensorInfo<'_>,
    axis: usize,
    channels: u32,
    ctx: Ctx,
) -> Result<(), GraphError> {
    if t.dtype != DataType::Int8 {
        return Err(ctx.unsupported("filter type other than int8"));
    }
    if t.data.is_none() {
        return Err(ctx.unsupported("non-constant filter"));
    }
    let q = t
        .quantization
        .as_ref()
        .ok_or(ctx.unsupported("filter without quantization"))?;
    let per_channel_ok = q.len() == channels as usize && q.quantized_dimension() == Some(axis);
    if q.len() == 1 || per_channel_ok {
        Ok(())
    } else {
        Err(ctx.unsupported("filter scales neither per-tensor nor per output channel"))
    }
}

/// Appends the optional int32 bias (input 2) of `channels` elements to `list`, checked.
fn push_bias(
    list: &mut heapless::Vec<Operand, MAX_JOB_INPUTS>,
    sub: &SubGraph<'_>,
    info: &OperatorInfo<'_>,
    ctx: Ctx,
    channels: u32,
) -> Result<(), GraphError> {
    let Some(index) = info.input(2) else {
        return Ok(());
    };
    let t = sub.tensor(index)?;
    if t.dtype != DataType::Int32 {
        return Err(ctx.unsupported("bias type other than int32"));
    }
    ctx.check_elements(&t, channels as usize)?;
    // Lists built here have at most three operands before the bias.
    let _ = list.push(Operand::Tensor(index));
    Ok(())
}

/// A convolution window from a TFLite operator's options.
fn window(
    ctx: Ctx,
    (filter_height, filter_width): (u32, u32),
    (stride_h, stride_w): (i32, i32),
    (dilation_h, dilation_w): (i32, i32),
    p: Padding,
) -> Result<Window2d, GraphError> {
    Ok(Window2d {
        filter_height,
        filter_width,
        stride_height: positive(stride_h, ctx, "stride")?,
        stride_width: positive(stride_w, ctx, "stride")?,
        dilation_height: positive(dilation_h, ctx, "dilation")?,
        dilation_width: positive(dilation_w, ctx, "dilation")?,
        padding: padding(p),
    })
}

fn activation(a: Activation, ctx: Ctx) -> Result<ki::Activation, GraphError> {
    Ok(match a {
        Activation::None => ki::Activation::None,
        Activation::Relu => ki::Activation::Relu,
        Activation::Relu6 => ki::Activation::Relu6,
        Activation::ReluN1To1 => ki::Activation::ReluN1To1,
        _ => return Err(ctx.unsupported("fused activation")),
    })
}

fn padding(p: Padding) -> ki::Padding {
    match p {
        Padding::Same => ki::Padding::Same,
        Padding::Valid => ki::Padding::Valid,
    }
}

fn nhwc(t: &TensorInfo<'_>, ctx: Ctx) -> Result<Nhwc, GraphError> {
    match *t.shape.dims() {
        [batches, height, width, channels] => Ok(Nhwc {
            batches,
            height,
            width,
            channels,
        }),
        _ => Err(ctx.unsupported("tensor rank other than 4")),
    }
}

fn positive(v: i32, ctx: Ctx, what: &'static str) -> Result<u32, GraphError> {
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or(ctx.unsupported(what))
}

fn operands(list: &[Operand]) -> heapless::Vec<Operand, MAX_JOB_INPUTS> {
    // Every list built here has at most four entries, below MAX_JOB_INPUTS.
    heapless::Vec::from_slice(list).unwrap_or_default()
}

/// Lowers operator `info` of `sub`.
pub(crate) fn lower(sub: &SubGraph<'_>, info: &OperatorInfo<'_>) -> Result<Lowered, GraphError> {
    let ctx = Ctx {
        op_index: info.index,
        op: info.builtin,
    };
    match (info.builtin, &info.options) {
        (BuiltinOp::Conv2d, BuiltinOptions::Conv2d(o)) => {
            let (x, f, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let (xq, yq) = (quant(&x, ctx)?, quant(&y, ctx)?);
            let fs = f.shape.dims();
            let [out_channels, fh, fw, depth] = *fs else {
                return Err(ctx.unsupported("filter rank other than 4"));
            };
            filter_scale_count(&f, 0, out_channels, ctx)?;
            let shape = Conv2dShape {
                input: nhwc(&x, ctx)?,
                out_channels,
                filter_depth: depth,
                window: window(
                    ctx,
                    (fh, fw),
                    (o.stride_h, o.stride_w),
                    (o.dilation_h_factor, o.dilation_w_factor),
                    o.padding,
                )?,
            };
            let params = ki::Conv2dParams::new(shape, xq, yq, activation(o.activation, ctx)?)
                .map_err(|e| ctx.kernel(e))?;
            ctx.check_elements(&y, params.lens().2)?;
            let mut list = operands(&[
                Operand::Tensor(x.index),
                Operand::Tensor(f.index),
                multipliers(xq, &f, yq, out_channels),
            ]);
            push_bias(&mut list, sub, info, ctx, out_channels)?;
            Ok(Lowered::Compute {
                op: Op::Conv2dI8 { shape, params },
                operands: list,
            })
        }
        (BuiltinOp::DepthwiseConv2d, BuiltinOptions::DepthwiseConv2d(o)) => {
            let (x, f, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let (xq, yq) = (quant(&x, ctx)?, quant(&y, ctx)?);
            let [1, fh, fw, out_channels] = *f.shape.dims() else {
                return Err(ctx.unsupported("depthwise filter shape other than [1, H, W, C]"));
            };
            filter_scale_count(&f, 3, out_channels, ctx)?;
            let input_shape = nhwc(&x, ctx)?;
            let depth_multiplier = positive(o.depth_multiplier, ctx, "depth multiplier")?;
            if input_shape.channels.checked_mul(depth_multiplier) != Some(out_channels) {
                return Err(ctx.unsupported("filter channels other than input × depth multiplier"));
            }
            let shape = DepthwiseShape {
                input: input_shape,
                depth_multiplier,
                window: window(
                    ctx,
                    (fh, fw),
                    (o.stride_h, o.stride_w),
                    (o.dilation_h_factor, o.dilation_w_factor),
                    o.padding,
                )?,
            };
            let params = ki::DepthwiseParams::new(shape, xq, yq, activation(o.activation, ctx)?)
                .map_err(|e| ctx.kernel(e))?;
            ctx.check_elements(&y, params.lens().2)?;
            let mut list = operands(&[
                Operand::Tensor(x.index),
                Operand::Tensor(f.index),
                multipliers(xq, &f, yq, out_channels),
            ]);
            push_bias(&mut list, sub, info, ctx, out_channels)?;
            Ok(Lowered::Compute {
                op: Op::DepthwiseConv2dI8 { shape, params },
                operands: list,
            })
        }
        (BuiltinOp::AveragePool2d | BuiltinOp::MaxPool2d, BuiltinOptions::Pool2d(o)) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            let shape = PoolShape {
                input: nhwc(&x, ctx)?,
                filter_height: positive(o.filter_height, ctx, "filter size")?,
                filter_width: positive(o.filter_width, ctx, "filter size")?,
                stride_height: positive(o.stride_h, ctx, "stride")?,
                stride_width: positive(o.stride_w, ctx, "stride")?,
                padding: padding(o.padding),
            };
            let params = ki::PoolParams::new(
                shape,
                quant(&x, ctx)?,
                quant(&y, ctx)?,
                activation(o.activation, ctx)?,
            )
            .map_err(|e| ctx.kernel(e))?;
            ctx.check_elements(&y, params.lens().1)?;
            let op = if info.builtin == BuiltinOp::AveragePool2d {
                Op::AveragePool2dI8 { shape, params }
            } else {
                Op::MaxPool2dI8 { shape, params }
            };
            Ok(Lowered::Compute {
                op,
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::FullyConnected, BuiltinOptions::FullyConnected(o)) => {
            if o.weights_format != WeightsFormat::Default {
                return Err(ctx.unsupported("shuffled weights format"));
            }
            let (x, w, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let (xq, yq) = (quant(&x, ctx)?, quant(&y, ctx)?);
            let [out_features, in_features] = *w.shape.dims() else {
                return Err(ctx.unsupported("weights rank other than 2"));
            };
            filter_scale_count(&w, 0, out_features, ctx)?;
            if in_features == 0 || x.shape.num_elements() % in_features != 0 {
                return Err(ctx.unsupported("input size not a multiple of the weights' depth"));
            }
            let shape = FcShape {
                batches: x.shape.num_elements() / in_features,
                in_features,
                out_features,
            };
            ctx.check_elements(&y, shape.batches as usize * out_features as usize)?;
            let act = activation(o.activation, ctx)?;
            let per_tensor_scale = w
                .quantization
                .as_ref()
                .filter(|q| q.len() == 1)
                .and_then(|q| q.scale(0));
            // TFLM computes a per-tensor multiplier differently (the scale product in float):
            // keep its path for per-tensor weights.
            let (op, mut list) = match per_tensor_scale {
                Some(w_scale) => (
                    Op::FullyConnectedI8 {
                        shape,
                        params: ki::FcParams::new(xq, w_scale, yq, act)
                            .map_err(|e| ctx.kernel(e))?,
                    },
                    operands(&[Operand::Tensor(x.index), Operand::Tensor(w.index)]),
                ),
                None => (
                    Op::FullyConnectedPerChannelI8 {
                        shape,
                        params: ki::FcPerChannelParams::new(xq, yq, act)
                            .map_err(|e| ctx.kernel(e))?,
                    },
                    operands(&[
                        Operand::Tensor(x.index),
                        Operand::Tensor(w.index),
                        multipliers(xq, &w, yq, out_features),
                    ]),
                ),
            };
            push_bias(&mut list, sub, info, ctx, out_features)?;
            Ok(Lowered::Compute { op, operands: list })
        }
        (BuiltinOp::Softmax, BuiltinOptions::Softmax(o)) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            let params = ki::SoftmaxParams::new(quant(&x, ctx)?, o.beta, quant(&y, ctx)?)
                .map_err(|e| ctx.kernel(e))?;
            let len = x.shape.num_elements();
            ctx.check_elements(&y, len as usize)?;
            let depth = x
                .shape
                .dims()
                .last()
                .copied()
                .ok_or(ctx.unsupported("scalar input"))?;
            Ok(Lowered::Compute {
                op: Op::SoftmaxI8 { len, depth, params },
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::Mean, BuiltinOptions::Reducer(_)) => {
            let (x, axes_t, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let mut axes = [0i32; 8];
            let n = const_i32s(&axes_t, &mut axes, ctx)?;
            let axes = &axes[..n];
            let params =
                ki::MeanParams::for_axes(x.shape.dims(), axes, quant(&x, ctx)?, quant(&y, ctx)?)
                    .map_err(|e| ctx.kernel(e))?;
            ctx.check_elements(&y, params.lens().1)?;
            Ok(Lowered::Compute {
                op: Op::MeanI8 { params },
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::Add | BuiltinOp::Sub | BuiltinOp::Mul, options) => {
            let act = match options {
                BuiltinOptions::Add(o) | BuiltinOptions::Sub(o) => o.activation,
                BuiltinOptions::Mul(o) => o.activation,
                BuiltinOptions::None => Activation::None,
                _ => return Err(ctx.unsupported("options")),
            };
            let act = activation(act, ctx)?;
            let (a, b, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let (aq, bq, yq) = (quant(&a, ctx)?, quant(&b, ctx)?, quant(&y, ctx)?);
            let shape = ki::BroadcastShape::new(a.shape.dims(), b.shape.dims(), y.shape.dims())
                .map_err(|e| ctx.kernel(e))?;
            let kernel = |e| ctx.kernel(e);
            // Without broadcasting, ADD and MUL are plain elementwise ops, which can run in
            // place (the same arithmetic: TFLM's broadcast kernels compute each element the
            // same way).
            let (a_len, b_len, len) = shape.lens();
            let plain = a_len == len && b_len == len;
            let op = match info.builtin {
                BuiltinOp::Add if plain => Op::AddI8 {
                    len: len as u32,
                    params: ki::AddParams::new(aq, bq, yq, act).map_err(kernel)?,
                },
                BuiltinOp::Mul if plain => Op::MulI8 {
                    len: len as u32,
                    params: ki::MulParams::new(aq, bq, yq, act).map_err(kernel)?,
                },
                BuiltinOp::Add => Op::AddBroadcastI8 {
                    shape,
                    params: ki::AddParams::new(aq, bq, yq, act).map_err(kernel)?,
                },
                BuiltinOp::Sub => Op::SubI8 {
                    shape,
                    params: ki::SubParams::new(aq, bq, yq, act).map_err(kernel)?,
                },
                _ => Op::MulBroadcastI8 {
                    shape,
                    params: ki::MulParams::new(aq, bq, yq, act).map_err(kernel)?,
                },
            };
            Ok(Lowered::Compute {
                op,
                operands: operands(&[Operand::Tensor(a.index), Operand::Tensor(b.index)]),
            })
        }
        (BuiltinOp::Rsqrt, _) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            let len = x.shape.num_elements();
            ctx.check_elements(&y, len as usize)?;
            let params = ki::RsqrtParams::new(quant(&x, ctx)?, quant(&y, ctx)?)
                .map_err(|e| ctx.kernel(e))?;
            Ok(Lowered::Compute {
                op: Op::RsqrtI8 { len, params },
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::Quantize, _) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            let len = x.shape.num_elements();
            ctx.check_elements(&y, len as usize)?;
            let yq = quant(&y, ctx)?;
            let op = match x.dtype {
                DataType::Float32 => Op::QuantizeF32 { len, quant: yq },
                DataType::Int8 => Op::RequantizeI8 {
                    len,
                    params: ki::RequantizeParams::new(quant(&x, ctx)?, yq)
                        .map_err(|e| ctx.kernel(e))?,
                },
                _ => return Err(ctx.unsupported("QUANTIZE input type other than float32 or int8")),
            };
            Ok(Lowered::Compute {
                op,
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::Dequantize, _) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            if y.dtype != DataType::Float32 {
                return Err(ctx.unsupported("DEQUANTIZE output type other than float32"));
            }
            let len = x.shape.num_elements();
            ctx.check_elements(&y, len as usize)?;
            Ok(Lowered::Compute {
                op: Op::DequantizeI8 {
                    len,
                    quant: quant(&x, ctx)?,
                },
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::BatchMatmul, BuiltinOptions::BatchMatMul(o)) => {
            let (a, b, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            let params = ki::BatchMatmulParams::new(
                a.shape.dims(),
                b.shape.dims(),
                o.adj_x,
                o.adj_y,
                quant(&a, ctx)?,
                quant(&b, ctx)?,
                quant(&y, ctx)?,
            )
            .map_err(|e| ctx.kernel(e))?;
            ctx.check_elements(&y, params.lens().2)?;
            Ok(Lowered::Compute {
                op: Op::BatchMatmulI8 { params },
                operands: operands(&[Operand::Tensor(a.index), Operand::Tensor(b.index)]),
            })
        }
        (BuiltinOp::Transpose, _) => {
            let (x, perm_t, y) = (
                input(sub, info, ctx, 0)?,
                input(sub, info, ctx, 1)?,
                output(sub, info, ctx)?,
            );
            if quant(&x, ctx)? != quant(&y, ctx)? {
                return Err(ctx.unsupported("TRANSPOSE changing the quantization"));
            }
            let mut perm = [0i32; 8];
            let n = const_i32s(&perm_t, &mut perm, ctx)?;
            let params =
                ki::TransposeParams::new(x.shape.dims(), &perm[..n]).map_err(|e| ctx.kernel(e))?;
            if params.output_shape().as_slice() != y.shape.dims() {
                return Err(ctx.unsupported("TRANSPOSE output shape other than the permuted input"));
            }
            Ok(Lowered::Compute {
                op: Op::TransposeI8 { params },
                operands: operands(&[Operand::Tensor(x.index)]),
            })
        }
        (BuiltinOp::Concatenation, BuiltinOptions::Concatenation(o)) => {
            if activation(o.activation, ctx)? != ki::Activation::None {
                return Err(ctx.unsupported("fused activation on CONCATENATION"));
            }
            let y = output(sub, info, ctx)?;
            let n = info.inputs.len();
            if n > ki::MAX_CONCAT_INPUTS {
                return Err(ctx.unsupported("more inputs than MAX_CONCAT_INPUTS"));
            }
            let mut shapes: heapless::Vec<crate::model::Shape, { ki::MAX_CONCAT_INPUTS }> =
                heapless::Vec::new();
            let mut quants: heapless::Vec<Quant, { ki::MAX_CONCAT_INPUTS }> = heapless::Vec::new();
            let mut list = heapless::Vec::new();
            for i in 0..n {
                let x = input(sub, info, ctx, i)?;
                let _ = shapes.push(x.shape);
                let _ = quants.push(quant(&x, ctx)?);
                let _ = list.push(Operand::Tensor(x.index));
            }
            ki::check_same_quant(&quants, quant(&y, ctx)?).map_err(|e| ctx.kernel(e))?;
            let mut dims: heapless::Vec<&[u32], { ki::MAX_CONCAT_INPUTS }> = heapless::Vec::new();
            for shape in &shapes {
                let _ = dims.push(shape.dims());
            }
            let params = ki::ConcatParams::new(&dims, o.axis).map_err(|e| ctx.kernel(e))?;
            if params.output_shape().as_slice() != y.shape.dims() {
                return Err(ctx.unsupported("CONCATENATION output shape"));
            }
            Ok(Lowered::Compute {
                op: Op::ConcatenationI8 { params },
                operands: list,
            })
        }
        (BuiltinOp::Reshape, _) => {
            let (x, y) = (input(sub, info, ctx, 0)?, output(sub, info, ctx)?);
            if x.dtype != y.dtype {
                return Err(ctx.unsupported("RESHAPE changing the element type"));
            }
            ctx.check_elements(&y, x.shape.num_elements() as usize)?;
            Ok(Lowered::Alias { input: x.index })
        }
        _ => Err(ctx.unsupported("operator")),
    }
}

/// The multipliers operand of a per-channel operator.
fn multipliers(xq: Quant, filter: &TensorInfo<'_>, yq: Quant, channels: u32) -> Operand {
    Operand::Multipliers {
        input_scale: xq.scale,
        filter: filter.index,
        output_scale: yq.scale,
        channels,
    }
}

/// Reads a small constant int32 tensor (axes, permutations) into `out`; returns the count.
fn const_i32s(t: &TensorInfo<'_>, out: &mut [i32], ctx: Ctx) -> Result<usize, GraphError> {
    let data = t
        .data
        .filter(|_| t.dtype == DataType::Int32)
        .ok_or(ctx.unsupported("non-constant or non-int32 parameter tensor"))?;
    let n = data.len() / 4;
    if n > out.len() {
        return Err(ctx.unsupported("parameter tensor with more than 8 elements"));
    }
    for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
        *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    Ok(n)
}
