//! What a compute job is, in the terms of the Ethos-U55 cost model ([`cost`](crate::cost)):
//! the [`LayerDesc`] of an [`Op`], built from the shapes the op carries and the address space
//! of its operands (weights read from flash or from SRAM).
//!
//! Ops whose shapes reach the kernels fused (broadcasts, MEAN) are described by their fused
//! extents, right-aligned into NHWC: the element counts and the reduced or repeated extents are
//! exact, the split of rows into height and width is not (it moves Vela's block choice a little,
//! not the traffic). The f32 ops and the issue-2 elementwise ops (`AddI8`, `MulI8`, `ReluI8`
//! over plain lengths) have no layer description: the simple cycle model of
//! [`SimConfig`](crate::SimConfig) costs them.

use npu_compute::hal::{Op, Region, Space, Variant};
use npu_kernels::int8::Nhwc;

use crate::cost::{LayerDesc, LayerKind};

fn nhwc(n: Nhwc) -> [u32; 4] {
    [n.batches, n.height, n.width, n.channels]
}

/// `dims` (outermost first, at most 4 used) right-aligned into NHWC.
fn padded(dims: &[u32]) -> [u32; 4] {
    let mut out = [1; 4];
    let take = dims.len().min(4);
    // Fold any extents beyond four into the outermost one.
    let folded: u32 = dims[..dims.len() - take]
        .iter()
        .fold(1u32, |a, &d| a.saturating_mul(d));
    for (o, &d) in out[4 - take..].iter_mut().zip(&dims[dims.len() - take..]) {
        *o = d;
    }
    out[4 - take] = out[4 - take].saturating_mul(folded);
    out
}

fn rows(len: u32, depth: u32) -> [u32; 4] {
    [1, 1, len / depth.max(1), depth]
}

fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn in_flash(r: Option<&Region>) -> bool {
    matches!(r.map(|r| r.space), Some(Space::Flash(_)))
}

/// The layer a compute job runs as `variant`, if the cost model has one for its op.
///
/// The variant is part of the description, so the simulator's layer cache (keyed on the
/// whole [`LayerDesc`]) keeps each variant's cost apart.
pub fn describe(op: &Op, variant: Variant, inputs: &[Region]) -> Option<LayerDesc> {
    describe_auto(op, inputs).map(|desc| LayerDesc { variant, ..desc })
}

/// [`describe`] for [`Variant::Auto`].
fn describe_auto(op: &Op, inputs: &[Region]) -> Option<LayerDesc> {
    let weights = inputs.get(1);
    let with_weights = |kind, ifm, ofm| LayerDesc {
        weight_bytes: weights.map_or(0, |r| r.len),
        weights_in_flash: in_flash(weights),
        ..LayerDesc::new(kind, ifm, ofm)
    };
    Some(match *op {
        Op::Conv2dI8 { shape, params } => {
            let w = shape.window;
            LayerDesc {
                kernel: (w.filter_height, w.filter_width),
                stride: (w.stride_height, w.stride_width),
                dilation: (w.dilation_height, w.dilation_width),
                ..with_weights(
                    LayerKind::Conv2d,
                    nhwc(shape.input),
                    nhwc(params.output_shape()),
                )
            }
        }
        Op::DepthwiseConv2dI8 { shape, params } => {
            let w = shape.window;
            LayerDesc {
                kernel: (w.filter_height, w.filter_width),
                stride: (w.stride_height, w.stride_width),
                dilation: (w.dilation_height, w.dilation_width),
                ..with_weights(
                    LayerKind::DepthwiseConv2d,
                    nhwc(shape.input),
                    nhwc(params.output_shape()),
                )
            }
        }
        Op::FullyConnectedI8 { shape, .. } | Op::FullyConnectedPerChannelI8 { shape, .. } => {
            with_weights(
                LayerKind::FullyConnected,
                [1, 1, shape.batches, shape.in_features],
                [1, 1, shape.batches, shape.out_features],
            )
        }
        Op::AveragePool2dI8 { shape, params } | Op::MaxPool2dI8 { shape, params } => {
            let kind = if matches!(op, Op::MaxPool2dI8 { .. }) {
                LayerKind::MaxPool
            } else {
                LayerKind::AveragePool
            };
            LayerDesc {
                kernel: (shape.filter_height, shape.filter_width),
                stride: (shape.stride_height, shape.stride_width),
                ..LayerDesc::new(kind, nhwc(shape.input), nhwc(params.output_shape()))
            }
        }
        Op::AddBroadcastI8 { shape, .. }
        | Op::SubI8 { shape, .. }
        | Op::MulBroadcastI8 { shape, .. } => {
            let kind = match op {
                Op::AddBroadcastI8 { .. } => LayerKind::Add,
                Op::SubI8 { .. } => LayerKind::Sub,
                _ => LayerKind::Mul,
            };
            let loops = shape.loops();
            let (a_rep, b_rep) = shape.repeats();
            let operand = |repeated: u8| {
                let mut dims = [1u32; 6];
                for (i, (&d, o)) in loops.iter().zip(dims.iter_mut()).enumerate() {
                    *o = if repeated >> i & 1 != 0 { 1 } else { d };
                }
                padded(&dims[..loops.len()])
            };
            let (a, b) = (operand(a_rep), operand(b_rep));
            // The full-size operand goes first, as Vela orders a broadcast operand second.
            let (first, second, second_region) = if a_rep != 0 && b_rep == 0 {
                (b, a, inputs.first())
            } else {
                (a, b, inputs.get(1))
            };
            LayerDesc {
                ifm2: Some(second),
                ifm2_in_flash: in_flash(second_region),
                ..LayerDesc::new(kind, first, padded(loops))
            }
        }
        Op::SoftmaxI8 { len, depth, .. } => {
            LayerDesc::new(LayerKind::Softmax, rows(len, depth), rows(len, depth))
        }
        Op::MeanI8 { params } => {
            let (extents, reduced) = params.extents();
            let ifm = padded(extents);
            let mut ofm = ifm;
            let mut axes = 0u8;
            let shift = 4 - extents.len().min(4);
            for i in 0..extents.len().min(4) {
                if reduced >> i & 1 != 0 {
                    axes |= 1 << (i + shift);
                    ofm[i + shift] = 1;
                }
            }
            LayerDesc {
                axes,
                ..LayerDesc::new(LayerKind::Mean, ifm, ofm)
            }
        }
        Op::RsqrtI8 { len, .. } => LayerDesc::new(LayerKind::Rsqrt, rows(len, 1), rows(len, 1)),
        Op::RequantizeI8 { len, .. } | Op::QuantizeF32 { len, .. } => {
            LayerDesc::new(LayerKind::Quantize, rows(len, 1), rows(len, 1))
        }
        Op::TransposeI8 { params } => {
            let out = padded(params.output_shape().as_slice());
            LayerDesc::new(LayerKind::Transpose, out, out)
        }
        Op::ConcatenationI8 { params } => {
            let out = padded(params.output_shape().as_slice());
            LayerDesc::new(LayerKind::Concatenation, out, out)
        }
        Op::Reshape { len } => LayerDesc::new(LayerKind::Reshape, rows(len, 1), rows(len, 1)),
        Op::BatchMatmulI8 { params } => {
            let (lhs, rhs, _) = params.lens();
            let out = padded(params.output_shape().as_slice());
            let depth = u32_of(lhs) / (out[0] * out[1] * out[2]).max(1);
            let ifm = [out[0], out[1], out[2], depth];
            let rhs_rows = u32_of(rhs) / (out[0] * out[1] * out[3]).max(1);
            LayerDesc {
                ifm2: Some([out[0], out[1], rhs_rows, out[3]]),
                ifm2_in_flash: in_flash(inputs.get(1)),
                ..LayerDesc::new(LayerKind::BatchMatmul, ifm, out)
            }
        }
        _ => return None,
    })
}
