//! Lowering: a TFLite operator as the NPU passes Vela generates for it. Vela costs the NPU
//! operations it lowers an operator to (28 for a softmax), not the operator, so the calibrated
//! figures hold only as long as the lowering is Vela's. The im2col variant lives here too: it
//! is another lowering of the same convolution (a gather and one matrix product), not another
//! block.

use core::cmp::{max, min};

use super::compute::pass_cost;
use super::pass::{ao, fmt_for, Fmt, NpuOp, Pass, Shp};
use super::{CostBreakdown, LayerDesc, LayerKind, U55Config};

/// Calls `emit` with every NPU pass of `desc`.
pub(super) fn lower(desc: &LayerDesc, cfg: &U55Config, emit: &mut dyn FnMut(&Pass)) {
    let shapes_empty =
        desc.ifm.contains(&0) || desc.ofm.contains(&0) || desc.ifm2.is_some_and(|s| s.contains(&0));
    if shapes_empty {
        return;
    }
    let ifm = Shp::nhwc(desc.ifm);
    let ofm = Shp::nhwc(desc.ofm);
    let ifm2 = desc.ifm2.map(Shp::nhwc);
    let weights = cfg.encoded_weight_bytes(desc.weight_bytes);
    let scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(ofm.c));
    // Feature maps of 8 bits (the passes' default) or 16 (a 16x8 layer).
    let bits = u32::from(desc.element_bits);
    let with_weights = |mut p: Pass| {
        p.weights = weights;
        p.scales = scales;
        p.consts_in_flash = desc.weights_in_flash;
        p.kernel = desc.kernel;
        p.stride = desc.stride;
        p.dilation = desc.dilation;
        p.bits(bits, bits, bits)
    };
    match desc.kind {
        LayerKind::Conv2d => emit(&with_weights(Pass::new(NpuOp::Conv, ifm, ofm))),
        LayerKind::DepthwiseConv2d => emit(&with_weights(Pass::new(NpuOp::Depthwise, ifm, ofm))),
        LayerKind::FullyConnected => {
            // Vela folds the batch rows into a roughly square H x W.
            let cin = desc.ifm[3];
            let rows = (ifm.elems() / u64::from(cin.max(1))).max(1);
            let (h, w) = fc_rows(rows);
            let mut p = with_weights(Pass::new(
                NpuOp::VectorProduct,
                Shp::new(h, w, cin),
                Shp::new(h, w, ofm.c),
            ));
            p.kernel = (1, 1);
            p.stride = (1, 1);
            p.dilation = (1, 1);
            emit(&p);
        }
        LayerKind::AveragePool | LayerKind::MaxPool => {
            let mut p = Pass::new(NpuOp::Pooling, ifm, ofm);
            p.kernel = desc.kernel;
            p.stride = desc.stride;
            if desc.kind == LayerKind::MaxPool {
                p.ao_quarters = ao::MAX_POOL;
            }
            emit(&p);
        }
        LayerKind::Add | LayerKind::Sub | LayerKind::Mul => {
            let quarters = if desc.kind == LayerKind::Mul {
                ao::MUL
            } else {
                ao::ADD_SUB
            };
            let second = ifm2.unwrap_or(ifm);
            let mut p = Pass::new(NpuOp::Elementwise, ifm, ofm)
                .with_ifm2(second, fmt_for(second.c))
                .ao(quarters)
                .bits(bits, bits, bits);
            p.ifm2_in_flash = desc.ifm2_in_flash;
            emit(&p);
        }
        LayerKind::Rsqrt | LayerKind::Logistic | LayerKind::Tanh => {
            // An output-stage pass (Vela's AvgPool "nop") through a 256-entry lookup table.
            let mut p = Pass::new(NpuOp::Pooling, ifm, ofm).ao(ao::LUT);
            p.lut_bytes = 256;
            emit(&p);
        }
        LayerKind::Relu | LayerKind::Quantize => emit(&Pass::new(NpuOp::Pooling, ifm, ofm)),
        LayerKind::Softmax => lower_softmax(desc.ofm, emit),
        LayerKind::Mean => lower_mean(desc, cfg, emit),
        LayerKind::Transpose => emit(&Pass::new(NpuOp::Transpose, ifm, ofm)),
        LayerKind::BatchMatmul => {
            // The right operand as Vela reads it (pre-transposed): B x N x K.
            let rhs = ifm2.unwrap_or(ifm);
            let transposed = Shp::new(rhs.h, ofm.c, ifm.c);
            emit(&Pass::new(NpuOp::MatMul, ifm, ofm).with_ifm2(transposed, Fmt::Nhwc));
        }
        LayerKind::Concatenation | LayerKind::Reshape => {}
    }
}

/// Vela's reshape of `rows` fully-connected rows into H x W: W about the square root.
fn fc_rows(rows: u64) -> (u32, u32) {
    if rows <= 1 {
        return (1, 1);
    }
    // The first divisor from about the square root up; bounded, since a large prime would take
    // as many steps as its size (Vela then ends at W = rows).
    let first = max(rows / 16, isqrt_ceil(rows));
    let w = (first..first.saturating_add(4096))
        .find(|w| rows.is_multiple_of(*w))
        .unwrap_or(rows);
    let h = rows / w;
    (
        u32::try_from(h).unwrap_or(u32::MAX),
        u32::try_from(w).unwrap_or(u32::MAX),
    )
}

fn isqrt_ceil(n: u64) -> u64 {
    // Newton's method on integers; n > 1 here.
    let mut x = n;
    let mut y = x.div_ceil(2);
    while y < x {
        x = y;
        y = x.saturating_add(n / x) / 2;
    }
    // x = floor(sqrt(n))
    if x.saturating_mul(x) < n {
        x + 1
    } else {
        x
    }
}

/// `MEAN`: a depthwise sum over the reduced extent (into 32-bit accumulators) and a 32-bit
/// multiply by the reciprocal of the count, read from flash.
fn lower_mean(desc: &LayerDesc, cfg: &U55Config, emit: &mut dyn FnMut(&Pass)) {
    let [n, h, w, c] = desc.ifm;
    let (rh, rw, rc) = (
        desc.axes & 0b0010 != 0,
        desc.axes & 0b0100 != 0,
        desc.axes & 0b1000 != 0,
    );
    let (input, kernel, output) = if rc {
        // Reduce the depth: Vela views the tensor as rows x C x 1 and sums along W.
        let mut rows = u64::from(n);
        let mut len = u64::from(c);
        for (dim, reduced) in [(h, rh), (w, rw)] {
            if reduced {
                len = len.saturating_mul(u64::from(dim));
            } else {
                rows = rows.saturating_mul(u64::from(dim));
            }
        }
        let rows = u32::try_from(rows).unwrap_or(u32::MAX);
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        (Shp::new(rows, len, 1), (1, len), Shp::new(rows, 1, 1))
    } else {
        let kh = if rh { h } else { 1 };
        let kw = if rw { w } else { 1 };
        (
            Shp::new(n.saturating_mul(h), w, c),
            (kh, kw),
            Shp::new(
                n.saturating_mul(if rh { 1 } else { h }),
                if rw { 1 } else { w },
                c,
            ),
        )
    };
    // The summing weights are generated ones, which the encoder compresses to almost nothing;
    // the scales are per output channel.
    let scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(output.c));
    let mut sum = Pass::new(NpuOp::Depthwise, input, output).bits(8, 8, 32);
    sum.kernel = kernel;
    sum.scales = scales;
    sum.consts_in_flash = true;
    sum.ofm_fmt = Fmt::Brick;
    emit(&sum);
    let rescale = Pass::new(NpuOp::Elementwise, output, output)
        .with_ifm2(Shp::new(1, 1, 1), Fmt::Nhwc)
        .bits(32, 32, 8)
        .formats(Fmt::Brick, fmt_for(output.c))
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm2_in_flash: true,
        ..rescale
    });
}

/// `SOFTMAX` (int8) as Vela lowers it: the row maximum, `exp(x - max)` through a lookup table
/// into 32 bits, the row sums, a reciprocal of each sum by Newton-Raphson iterations on the
/// row vector (20 small 32-bit passes, 10 of them reading a constant from flash), and the
/// scaling of every element.
fn lower_softmax(ofm: [u32; 4], emit: &mut dyn FnMut(&Pass)) {
    let [n, h, w, c] = ofm;
    let nh = n.saturating_mul(h);
    let rows = nh.saturating_mul(w);
    let all = Shp::new(nh, w, c);
    let row_sums = Shp::new(nh, w, 1);
    let row_vec = Shp::new(nh, 1, w);
    let scalar = Shp::new(1, 1, 1);
    let ew = |ifm: Shp, ofm: Shp| Pass::new(NpuOp::Elementwise, ifm, ofm);

    let mut max_pass = Pass::new(NpuOp::Pooling, Shp::new(rows, c, 1), Shp::new(rows, 1, 1))
        .formats(Fmt::Nhwc, Fmt::Nhwc)
        .ao(ao::MAX_POOL);
    max_pass.kernel = (1, c);
    emit(&max_pass);
    let mut exp = ew(all, all)
        .with_ifm2(row_sums, Fmt::Nhwc)
        .bits(8, 8, 32)
        .formats(Fmt::Nhwc, Fmt::Brick)
        .ao(max(ao::ADD_SUB, ao::LUT));
    exp.lut_bytes = 1024;
    emit(&exp);
    let shift = ew(all, all)
        .with_ifm2(scalar, Fmt::Nhwc)
        .bits(32, 32, 32)
        .formats(Fmt::Brick, Fmt::Nhwc)
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm2_in_flash: true,
        ..shift
    });
    emit(
        &Pass::new(NpuOp::ReduceSum, all, row_sums)
            .bits(32, 32, 32)
            .formats(Fmt::Nhwc, Fmt::Nhwc),
    );
    emit(
        &ew(row_vec, row_vec)
            .bits(32, 32, 32)
            .formats(Fmt::Nhwc, Fmt::Brick)
            .ao(ao::EW32_UNARY),
    );
    // The reciprocal: which of the 20 passes read a constant from flash, as the first or the
    // second operand.
    const CONST_FIRST: [usize; 4] = [0, 6, 11, 16];
    const CONST_SECOND: [usize; 6] = [1, 3, 4, 8, 13, 18];
    for i in 0..20 {
        let base = ew(row_vec, row_vec)
            .bits(32, 32, 32)
            .formats(Fmt::Brick, Fmt::Brick)
            .ao(ao::EW32_BINARY);
        let pass = if CONST_FIRST.contains(&i) {
            Pass {
                ifm: scalar,
                ifm_fmt: Fmt::Nhwc,
                ifm_in_flash: true,
                ..base.with_ifm2(row_vec, Fmt::Brick)
            }
        } else if CONST_SECOND.contains(&i) {
            Pass {
                ifm2_in_flash: true,
                ..base.with_ifm2(scalar, Fmt::Nhwc)
            }
        } else {
            base.with_ifm2(row_vec, Fmt::Brick)
        };
        emit(&pass);
    }
    emit(
        &ew(all, all)
            .with_ifm2(row_sums, Fmt::Nhwc)
            .bits(32, 32, 32)
            .formats(Fmt::Brick, Fmt::Brick)
            .ao(ao::EW32_BINARY),
    );
    let add = ew(all, all)
        .with_ifm2(all, Fmt::Brick)
        .bits(32, 32, 32)
        .formats(Fmt::Nhwc, Fmt::Brick)
        .ao(ao::EW32_BINARY);
    emit(&Pass {
        ifm_in_flash: true,
        ..add
    });
    emit(
        &ew(all, all)
            .with_ifm2(row_sums, Fmt::Nhwc)
            .bits(32, 32, 8)
            .formats(Fmt::Brick, Fmt::Nhwc)
            .ao(ao::EW32_BINARY),
    );
}

/// [`Variant::Im2col`]: a DMA gathers every output pixel's receptive field into a
/// `rows x K` int8 matrix in SRAM (`rows = N * OH * OW`, `K = KH * KW * Cin`), then one
/// vector-product pass multiplies it by the OHWI filter, which is already the `Cout x K`
/// matrix. Both run in series within the job.
pub(super) fn im2col_cycles(desc: &LayerDesc, cfg: &U55Config) -> Option<CostBreakdown> {
    if desc.kind != LayerKind::Conv2d {
        return None;
    }
    let (kh, kw) = desc.kernel;
    let window = u64::from(kh).saturating_mul(u64::from(kw));
    // A 1 x 1, stride-1 convolution already is a matrix product: there is nothing to gather.
    if window <= 1 && desc.stride.0 <= 1 && desc.stride.1 <= 1 {
        return None;
    }
    if desc.ifm.contains(&0) || desc.ofm.contains(&0) {
        return Some(CostBreakdown::default());
    }
    let [n, oh, ow, cout] = desc.ofm;
    let cin = desc.ifm[3];
    let k = window.saturating_mul(u64::from(cin));
    // Grouped convolutions (a filter shallower than the input) are not one matrix product.
    if u64::from(desc.weight_bytes) != k.saturating_mul(u64::from(cout)) {
        return None;
    }
    let k = u32::try_from(k).ok()?;
    let rows = u64::from(n)
        .saturating_mul(u64::from(oh))
        .saturating_mul(u64::from(ow));
    let matrix = rows.saturating_mul(u64::from(k));
    // Each patch row is KH segments of KW * Cin contiguous input bytes (Cin bytes when the
    // window is dilated along W); a segment shorter than a burst is charged the whole burst.
    let segment = u64::from(if desc.dilation.1 <= 1 {
        kw.saturating_mul(cin)
    } else {
        cin
    });
    let sram = cfg.sram();
    let read = matrix.saturating_mul(sram.burst) / min(sram.burst, segment.max(1));
    // SRAM to SRAM: Vela's MemToMem rule, the slower of the (burst-scaled) read and the write.
    let gather = max(
        (read / sram.bytes_per_cycle).saturating_add(sram.read_latency),
        (matrix / sram.bytes_per_cycle).saturating_add(sram.write_latency),
    );
    // The product: the FC lowering, rows folded into H x W, the matrix read as NHWC.
    let (h, w) = fc_rows(rows);
    let mut product = Pass::new(
        NpuOp::VectorProduct,
        Shp::new(h, w, k),
        Shp::new(h, w, cout),
    );
    product.ifm_fmt = Fmt::Nhwc;
    product.weights = cfg.encoded_weight_bytes(desc.weight_bytes);
    product.scales = u64::from(cfg.scale_bytes_per_channel).saturating_mul(u64::from(cout));
    product.consts_in_flash = desc.weights_in_flash;
    let mut cost = pass_cost(&product, cfg, None)?;
    cost.compute = cost.compute.saturating_add(gather);
    let gather_sram = read.saturating_add(matrix) / sram.bytes_per_cycle;
    cost.sram = cost.sram.saturating_add(gather_sram);
    cost.prefetched_sram = cost.prefetched_sram.saturating_add(gather_sram);
    cost.total = cost.total.saturating_add(gather);
    cost.prefetched = cost.prefetched.saturating_add(gather);
    Some(cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::fixtures::{as_variant, resident, CFG};
    use crate::cost::{layer_cycles, Variant};

    #[test]
    fn free_kinds_cost_nothing() {
        for kind in [LayerKind::Reshape, LayerKind::Concatenation] {
            let d = LayerDesc::new(kind, [1, 4, 4, 4], [1, 4, 4, 4]);
            assert_eq!(layer_cycles(&d, &CFG).total, 0);
        }
    }

    #[test]
    fn kws_conv0_im2col_is_a_gather_and_a_product() {
        let d = resident(
            LayerKind::Conv2d,
            [1, 49, 10, 1],
            [1, 25, 5, 64],
            (10, 4),
            2,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 25001);
        let c = layer_cycles(&as_variant(d, Variant::Im2col), &CFG);
        assert_eq!(c.total, 11884);
        // The product alone: 125 rows of K = 40 (folded into 5 x 25), read as NHWC.
        let mut product = Pass::new(
            NpuOp::VectorProduct,
            Shp::new(5, 25, 40),
            Shp::new(5, 25, 64),
        );
        product.ifm_fmt = Fmt::Nhwc;
        product.weights = CFG.encoded_weight_bytes(2560);
        product.scales = 640;
        let product = pass_cost(&product, &CFG, None).unwrap_or_default();
        assert_eq!(product.total, 6852);
        // The gather: S = 125 x 40 = 5,000 bytes in 4-byte segments (KW x Cin), each charged
        // a 32-byte burst: max(40,000 / 8 + 32, 5,000 / 8 + 32).
        assert_eq!(c.total - product.total, 5032);
        // Weights in flash: the same gather on top of the product's prefetched figure.
        let flash = LayerDesc {
            weights_in_flash: true,
            ..as_variant(d, Variant::Im2col)
        };
        let c = layer_cycles(&flash, &CFG);
        assert!(c.prefetch > 0);
        assert_eq!(c.prefetched, 11884);
    }

    #[test]
    fn ic_conv_im2col_loses_to_its_gather() {
        let d = resident(
            LayerKind::Conv2d,
            [1, 32, 32, 16],
            [1, 32, 32, 16],
            (3, 3),
            1,
        );
        assert_eq!(layer_cycles(&d, &CFG).total, 25715);
        let block = layer_cycles(&as_variant(d, Variant::Block { h: 8, w: 8 }), &CFG);
        assert_eq!(block.total, 25498);
        let im2col = layer_cycles(&as_variant(d, Variant::Im2col), &CFG);
        assert_eq!(im2col.total, 55104);
    }

    #[test]
    fn fc_rows_follow_vela() {
        assert_eq!(fc_rows(16), (4, 4));
        assert_eq!(fc_rows(1), (1, 1));
        assert_eq!(fc_rows(7), (1, 7));
        assert_eq!(isqrt_ceil(17), 5);
    }
}
