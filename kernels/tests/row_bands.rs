//! Row bands (`row_band`) of CONV_2D, DEPTHWISE_CONV_2D and the pools: computing a layer in
//! horizontal stripes, each from only the band of input rows it reads, gives exactly the
//! whole layer's output.
//!
//! For many pseudo-random geometries (filters 1..=5, strides 1..=3, dilations 1..=2, SAME and
//! VALID, heights 1..=20, widths 1..=7, channels 1..=4, random quantization and activations),
//! the output rows are cut into stripes of 1, 2 and 3 rows and at random points; every
//! stripe's kernel runs on a copy of its band alone (so a read outside the band would panic)
//! and the concatenated stripes must equal the whole kernel's output byte for byte.

use std::ops::Range;

use npu_kernels::int8::{
    average_pool2d, channel_multipliers, conv2d, depthwise_conv2d, max_pool2d, Activation,
    ChannelMultiplier, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape, Nhwc, Padding,
    PoolParams, PoolShape, Quant, Window2d,
};
use npu_kernels::KernelError;

/// xorshift32: deterministic pseudo-random numbers.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.next() % (hi - lo + 1)
    }

    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.next() >> 8) as i8).collect()
    }

    fn scale(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * (self.next() % 10_000) as f32 / 10_000.0
    }

    fn zero_point(&mut self) -> i32 {
        self.range(0, 40) as i32 - 20
    }

    fn activation(&mut self) -> Activation {
        [
            Activation::None,
            Activation::Relu,
            Activation::Relu6,
            Activation::ReluN1To1,
        ][self.range(0, 3) as usize]
    }

    fn padding(&mut self) -> Padding {
        if self.next().is_multiple_of(2) {
            Padding::Same
        } else {
            Padding::Valid
        }
    }
}

const fn nhwc(height: u32, width: u32, channels: u32) -> Nhwc {
    Nhwc {
        batches: 1,
        height,
        width,
        channels,
    }
}

fn random_window(r: &mut Rng, dilated: bool) -> Window2d {
    let d = |r: &mut Rng| if dilated { r.range(1, 2) } else { 1 };
    Window2d {
        filter_height: r.range(1, 5),
        filter_width: r.range(1, 5),
        stride_height: r.range(1, 3),
        stride_width: r.range(1, 3),
        dilation_height: d(r),
        dilation_width: d(r),
        padding: r.padding(),
    }
}

fn random_input(r: &mut Rng) -> Nhwc {
    nhwc(r.range(1, 20), r.range(1, 7), r.range(1, 4))
}

/// Ways to cut `height` output rows into stripes: every 1, 2 and 3 rows, and at random points.
fn splits(height: u32, r: &mut Rng) -> Vec<Vec<Range<u32>>> {
    let fixed = |n: u32| -> Vec<Range<u32>> {
        (0..height.div_ceil(n))
            .map(|s| s * n..((s + 1) * n).min(height))
            .collect()
    };
    let mut random = Vec::new();
    let mut start = 0;
    while start < height {
        let end = (start + r.range(1, 6)).min(height);
        random.push(start..end);
        start = end;
    }
    vec![fixed(1), fixed(2), fixed(3), random]
}

/// A layer's geometry and kernel, over its parameter type.
trait Layer: Sized + Copy {
    fn input_shape(&self) -> Nhwc;
    fn output_shape(&self) -> Nhwc;
    fn lens(&self) -> (usize, usize);
    fn row_band(&self, rows: Range<u32>) -> Result<(Self, Range<u32>), KernelError>;
    /// Runs the kernel (its constant operands are captured by the caller's closure).
    fn run(&self, ops: &Operands, input: &[i8], output: &mut [i8]);
}

/// Filter, bias and multipliers of a convolution (empty for pools), and which pool.
#[derive(Default)]
struct Operands {
    filter: Vec<i8>,
    bias: Option<Vec<i32>>,
    multipliers: Vec<ChannelMultiplier>,
    average: bool,
}

impl Layer for Conv2dParams {
    fn input_shape(&self) -> Nhwc {
        Conv2dParams::input_shape(self)
    }
    fn output_shape(&self) -> Nhwc {
        Conv2dParams::output_shape(self)
    }
    fn lens(&self) -> (usize, usize) {
        let (i, _, o) = Conv2dParams::lens(self);
        (i, o)
    }
    fn row_band(&self, rows: Range<u32>) -> Result<(Self, Range<u32>), KernelError> {
        Conv2dParams::row_band(self, rows)
    }
    fn run(&self, ops: &Operands, input: &[i8], output: &mut [i8]) {
        conv2d(
            self,
            &ops.multipliers,
            input,
            &ops.filter,
            ops.bias.as_deref(),
            output,
        )
        .unwrap();
    }
}

impl Layer for DepthwiseParams {
    fn input_shape(&self) -> Nhwc {
        DepthwiseParams::input_shape(self)
    }
    fn output_shape(&self) -> Nhwc {
        DepthwiseParams::output_shape(self)
    }
    fn lens(&self) -> (usize, usize) {
        let (i, _, o) = DepthwiseParams::lens(self);
        (i, o)
    }
    fn row_band(&self, rows: Range<u32>) -> Result<(Self, Range<u32>), KernelError> {
        DepthwiseParams::row_band(self, rows)
    }
    fn run(&self, ops: &Operands, input: &[i8], output: &mut [i8]) {
        depthwise_conv2d(
            self,
            &ops.multipliers,
            input,
            &ops.filter,
            ops.bias.as_deref(),
            output,
        )
        .unwrap();
    }
}

impl Layer for PoolParams {
    fn input_shape(&self) -> Nhwc {
        PoolParams::input_shape(self)
    }
    fn output_shape(&self) -> Nhwc {
        PoolParams::output_shape(self)
    }
    fn lens(&self) -> (usize, usize) {
        PoolParams::lens(self)
    }
    fn row_band(&self, rows: Range<u32>) -> Result<(Self, Range<u32>), KernelError> {
        PoolParams::row_band(self, rows)
    }
    fn run(&self, ops: &Operands, input: &[i8], output: &mut [i8]) {
        if ops.average {
            average_pool2d(self, input, output).unwrap();
        } else {
            max_pool2d(self, input, output).unwrap();
        }
    }
}

fn row_len(t: Nhwc) -> usize {
    (t.width * t.channels) as usize
}

fn elems(t: Nhwc) -> usize {
    (t.batches * t.height * t.width * t.channels) as usize
}

/// Runs the band of `p` for `out_rows` on a copy of its input rows alone; returns the stripe.
fn run_band<L: Layer>(p: &L, ops: &Operands, input: &[i8], out_rows: Range<u32>) -> Vec<i8> {
    let (inp, out) = (p.input_shape(), p.output_shape());
    let (band, rows) = p.row_band(out_rows.clone()).unwrap();
    // The band's shapes and lengths describe the band.
    assert!(rows.start < rows.end && rows.end <= inp.height, "{rows:?}");
    let (bi, bo) = (band.input_shape(), band.output_shape());
    assert_eq!(
        bi,
        Nhwc {
            height: rows.end - rows.start,
            ..inp
        }
    );
    assert_eq!(
        bo,
        Nhwc {
            height: out_rows.end - out_rows.start,
            ..out
        }
    );
    assert_eq!(band.lens(), (elems(bi), elems(bo)));
    let band_input =
        input[rows.start as usize * row_len(inp)..rows.end as usize * row_len(inp)].to_vec();
    let mut stripe = vec![0; band.lens().1];
    band.run(ops, &band_input, &mut stripe);
    stripe
}

/// Every split of `p`'s output rows, stripe by stripe, against the whole output; also a band of
/// a band.
fn check_layer<L: Layer + std::fmt::Debug>(p: &L, ops: &Operands, r: &mut Rng) {
    let input = r.i8s(p.lens().0);
    let mut whole = vec![0; p.lens().1];
    p.run(ops, &input, &mut whole);
    let out = p.output_shape();
    let out_row = row_len(out);
    for split in splits(out.height, r) {
        let mut stripes = Vec::new();
        for rows in &split {
            stripes.extend(run_band(p, ops, &input, rows.clone()));
        }
        assert_eq!(stripes, whole, "{p:?} {split:?}");
    }
    if out.height > 0 {
        // A stripe of a band's output, from the band's own band.
        let o0 = r.range(0, out.height - 1);
        let o1 = r.range(o0 + 1, out.height);
        let (band, rows) = p.row_band(o0..o1).unwrap();
        let band_input = &input[rows.start as usize * row_len(p.input_shape())..][..band.lens().0];
        let a = r.range(0, o1 - o0 - 1);
        let b = r.range(a + 1, o1 - o0);
        let stripe = run_band(&band, ops, band_input, a..b);
        let want = &whole[(o0 + a) as usize * out_row..(o0 + b) as usize * out_row];
        assert_eq!(stripe, want, "{p:?} {o0}..{o1} then {a}..{b}");
    }
}

fn random_multipliers(r: &mut Rng, iq: Quant, oq: Quant, n: usize) -> Vec<ChannelMultiplier> {
    let scales: Vec<f32> = if r.next().is_multiple_of(4) {
        vec![r.scale(0.001, 0.02)]
    } else {
        (0..n).map(|_| r.scale(0.001, 0.02)).collect()
    };
    let mut m = vec![ChannelMultiplier::default(); n];
    channel_multipliers(iq.scale, &scales, oq.scale, &mut m).unwrap();
    m
}

fn random_quants(r: &mut Rng) -> (Quant, Quant) {
    let iq = Quant {
        scale: r.scale(0.01, 0.1),
        zero_point: r.zero_point(),
    };
    let oq = Quant {
        scale: r.scale(0.02, 0.2),
        zero_point: r.zero_point(),
    };
    (iq, oq)
}

#[test]
fn conv_stripes_match_whole() {
    let mut r = Rng(0x1234_5678);
    for _ in 0..600 {
        let input = random_input(&mut r);
        // Ordinary, or grouped when the depth allows.
        let filter_depth = if input.channels.is_multiple_of(2) && r.next().is_multiple_of(2) {
            input.channels / 2
        } else {
            input.channels
        };
        let groups = input.channels / filter_depth;
        let out_channels = groups * r.range(1, 3);
        let shape = Conv2dShape {
            input,
            out_channels,
            filter_depth,
            window: random_window(&mut r, true),
        };
        let (iq, oq) = random_quants(&mut r);
        let p = Conv2dParams::new(shape, iq, oq, r.activation()).unwrap();
        let oc = out_channels as usize;
        let ops = Operands {
            filter: r.i8s(p.lens().1),
            bias: (!r.next().is_multiple_of(3))
                .then(|| (0..oc).map(|_| r.range(0, 4000) as i32 - 2000).collect()),
            multipliers: random_multipliers(&mut r, iq, oq, oc),
            average: false,
        };
        check_layer(&p, &ops, &mut r);
    }
}

#[test]
fn depthwise_stripes_match_whole() {
    let mut r = Rng(0x9e37_79b9);
    for _ in 0..600 {
        let input = random_input(&mut r);
        let depth_multiplier = r.range(1, 3);
        let shape = DepthwiseShape {
            input,
            depth_multiplier,
            window: random_window(&mut r, true),
        };
        let (iq, oq) = random_quants(&mut r);
        let p = DepthwiseParams::new(shape, iq, oq, r.activation()).unwrap();
        let oc = (input.channels * depth_multiplier) as usize;
        let ops = Operands {
            filter: r.i8s(p.lens().1),
            bias: (!r.next().is_multiple_of(3))
                .then(|| (0..oc).map(|_| r.range(0, 4000) as i32 - 2000).collect()),
            multipliers: random_multipliers(&mut r, iq, oq, oc),
            average: false,
        };
        check_layer(&p, &ops, &mut r);
    }
}

#[test]
fn pool_stripes_match_whole() {
    let mut r = Rng(0x0bad_cafe);
    for k in 0..600 {
        let input = random_input(&mut r);
        let w = random_window(&mut r, false);
        let shape = PoolShape {
            input,
            filter_height: w.filter_height,
            filter_width: w.filter_width,
            stride_height: w.stride_height,
            stride_width: w.stride_width,
            padding: w.padding,
        };
        let q = random_quants(&mut r).0;
        let p = PoolParams::new(shape, q, q, r.activation()).unwrap();
        let ops = Operands {
            average: k % 2 == 0,
            ..Operands::default()
        };
        check_layer(&p, &ops, &mut r);
    }
}

/// A chain run the way the runtime tiles it: conv → depthwise → max pool, each stripe of the
/// last output computed from bands worked out backwards, every intermediate held only as a
/// band.
#[test]
fn chain_of_bands_matches_whole() {
    let mut r = Rng(0x5eed_0001);
    for _ in 0..200 {
        let input = random_input(&mut r);
        let (iq, oq) = random_quants(&mut r);
        let conv = Conv2dParams::new(
            Conv2dShape {
                input,
                out_channels: r.range(1, 4),
                filter_depth: input.channels,
                window: random_window(&mut r, true),
            },
            iq,
            oq,
            Activation::Relu,
        )
        .unwrap();
        let mid = conv.output_shape();
        if mid.height == 0 || mid.width == 0 {
            continue;
        }
        let dw = DepthwiseParams::new(
            DepthwiseShape {
                input: mid,
                depth_multiplier: r.range(1, 2),
                window: random_window(&mut r, true),
            },
            oq,
            oq,
            Activation::None,
        )
        .unwrap();
        let last_in = dw.output_shape();
        if last_in.height == 0 || last_in.width == 0 {
            continue;
        }
        let pw = random_window(&mut r, false);
        let pool = PoolParams::new(
            PoolShape {
                input: last_in,
                filter_height: pw.filter_height,
                filter_width: pw.filter_width,
                stride_height: pw.stride_height,
                stride_width: pw.stride_width,
                padding: pw.padding,
            },
            oq,
            oq,
            Activation::None,
        )
        .unwrap();
        let conv_ops = Operands {
            filter: r.i8s(conv.lens().1),
            bias: Some((0..mid.channels as i32).map(|c| c * 300 - 500).collect()),
            multipliers: random_multipliers(&mut r, iq, oq, mid.channels as usize),
            average: false,
        };
        let dw_ops = Operands {
            filter: r.i8s(dw.lens().1),
            bias: None,
            multipliers: random_multipliers(&mut r, oq, oq, last_in.channels as usize),
            average: false,
        };
        let pool_ops = Operands::default();

        let x = r.i8s(conv.lens().0);
        let mut y1 = vec![0; conv.lens().2];
        conv.run(&conv_ops, &x, &mut y1);
        let mut y2 = vec![0; dw.lens().2];
        dw.run(&dw_ops, &y1, &mut y2);
        let mut whole = vec![0; pool.lens().1];
        pool.run(&pool_ops, &y2, &mut whole);

        let height = pool.output_shape().height;
        for split in splits(height, &mut r) {
            let mut stripes = Vec::new();
            for rows in split {
                let (pool_b, r2) = pool.row_band(rows).unwrap();
                let (dw_b, r1) = dw.row_band(r2).unwrap();
                let (conv_b, r0) = conv.row_band(r1).unwrap();
                let row = row_len(input);
                let x_band = &x[r0.start as usize * row..r0.end as usize * row];
                let mut b1 = vec![0; conv_b.lens().2];
                conv_b.run(&conv_ops, x_band, &mut b1);
                let mut b2 = vec![0; dw_b.lens().2];
                dw_b.run(&dw_ops, &b1, &mut b2);
                let mut b3 = vec![0; pool_b.lens().1];
                pool_b.run(&pool_ops, &b2, &mut b3);
                stripes.extend(b3);
            }
            assert_eq!(stripes, whole, "{conv:?} {dw:?} {pool:?}");
        }
    }
}

fn unit_quant() -> Quant {
    Quant {
        scale: 1.0,
        zero_point: 0,
    }
}

fn conv3x3(input: Nhwc, padding: Padding, dilation: u32) -> Conv2dParams {
    conv_kx3(input, padding, 3, dilation)
}

/// A `filter_height`x3 convolution to one channel, unit scales, stride 1.
fn conv_kx3(input: Nhwc, padding: Padding, filter_height: u32, dilation: u32) -> Conv2dParams {
    let shape = Conv2dShape {
        input,
        out_channels: 1,
        filter_depth: input.channels,
        window: Window2d {
            filter_height,
            filter_width: 3,
            stride_height: 1,
            stride_width: 1,
            dilation_height: dilation,
            dilation_width: 1,
            padding,
        },
    };
    Conv2dParams::new(shape, unit_quant(), unit_quant(), Activation::None).unwrap()
}

#[test]
fn band_geometry() {
    // 3x3 SAME on 6 rows: one row of halo each side, clipped at the image's borders.
    let p = conv3x3(nhwc(6, 4, 1), Padding::Same, 1);
    let rows = |o: Range<u32>| p.row_band(o).unwrap().1;
    assert_eq!(rows(0..6), 0..6);
    assert_eq!(rows(0..1), 0..2);
    assert_eq!(rows(2..4), 1..5);
    assert_eq!(rows(5..6), 4..6);
    assert_eq!(p.row_band(0..2).unwrap().0.padding(), (1, 1));
    assert_eq!(p.row_band(2..4).unwrap().0.padding(), (0, 1));
    // The whole range is the whole layer again.
    assert_eq!(p.row_band(0..6).unwrap().0, p);
    // VALID with a stride above the filter: rows between windows are never read.
    let shape = PoolShape {
        input: nhwc(10, 1, 1),
        filter_height: 1,
        filter_width: 1,
        stride_height: 3,
        stride_width: 1,
        padding: Padding::Valid,
    };
    let p = PoolParams::new(shape, unit_quant(), unit_quant(), Activation::None).unwrap();
    assert_eq!(p.output_shape().height, 4);
    assert_eq!(p.row_band(0..4).unwrap().1, 0..10);
    assert_eq!(p.row_band(1..3).unwrap().1, 3..7);
    assert_eq!(p.row_band(1..3).unwrap().0.lens(), (4, 2));
    let mut out = [0; 2];
    max_pool2d(&p.row_band(1..3).unwrap().0, &[1, 2, 3, 4], &mut out).unwrap();
    assert_eq!(out, [1, 4]);
}

#[test]
fn band_with_no_valid_taps() {
    // Two rows, a 2-tap column filter dilated by 5 (SAME): effective height 6, leading
    // padding 2, so output rows read rows −2, 3 and −1, 4: every tap falls outside the image.
    let p = conv_kx3(nhwc(2, 1, 1), Padding::Same, 2, 5);
    assert_eq!(p.output_shape().height, 2);
    assert_eq!(p.padding().0, 2);
    let m = [ChannelMultiplier::new(1.0, 1.0, 1.0).unwrap()];
    let filter = [1; 6];
    let mut whole = [0; 2];
    conv2d(&p, &m, &[10, 20], &filter, Some(&[7]), &mut whole).unwrap();
    // Nothing is accumulated: the bias alone.
    assert_eq!(whole, [7, 7]);
    for o in [0..1, 1..2, 0..2] {
        let (band, rows) = p.row_band(o.clone()).unwrap();
        // One (unread) row, so that the band is a tensor the previous layer can produce.
        assert_eq!(rows.len(), 1, "{o:?}");
        let mut out = vec![0; band.lens().2];
        conv2d(&band, &m, &[-99], &filter, Some(&[7]), &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 7), "{o:?}");
    }
}

#[test]
fn band_errors() {
    let unsupported = |r: Result<(Conv2dParams, Range<u32>), KernelError>| match r {
        Err(KernelError::Unsupported { what }) => what,
        other => panic!("{other:?}"),
    };
    let p = conv3x3(nhwc(5, 3, 2), Padding::Valid, 1);
    assert_eq!(p.output_shape().height, 3);
    assert_eq!(
        unsupported(p.row_band(1..1)),
        "row band of an empty range of output rows"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 2..1;
    assert_eq!(
        unsupported(p.row_band(backwards)),
        "row band of an empty range of output rows"
    );
    assert_eq!(
        unsupported(p.row_band(2..4)),
        "row band beyond the last output row"
    );
    assert_eq!(
        unsupported(p.row_band(3..4)),
        "row band beyond the last output row"
    );
    assert!(p.row_band(2..3).is_ok());
    // No output rows at all: every range is out of range.
    let p = conv3x3(nhwc(2, 3, 1), Padding::Valid, 1);
    assert_eq!(p.output_shape().height, 0);
    assert!(p.row_band(0..1).is_err());
    // Batches other than 1.
    for batches in [0, 2] {
        let input = Nhwc {
            batches,
            ..nhwc(5, 3, 2)
        };
        let p = conv3x3(input, Padding::Same, 1);
        assert_eq!(
            unsupported(p.row_band(0..1)),
            "row band of a batch size other than 1"
        );
        let d = DepthwiseParams::new(
            DepthwiseShape {
                input,
                depth_multiplier: 1,
                window: random_window(&mut Rng(7), true),
            },
            unit_quant(),
            unit_quant(),
            Activation::None,
        )
        .unwrap();
        assert!(matches!(
            d.row_band(0..1),
            Err(KernelError::Unsupported { .. })
        ));
        let pool = PoolParams::new(
            PoolShape {
                input,
                filter_height: 2,
                filter_width: 2,
                stride_height: 1,
                stride_width: 1,
                padding: Padding::Same,
            },
            unit_quant(),
            unit_quant(),
            Activation::None,
        )
        .unwrap();
        assert!(matches!(
            pool.row_band(0..1),
            Err(KernelError::Unsupported { .. })
        ));
    }
    // Band parameters check their buffers like any others.
    let p = conv3x3(nhwc(6, 2, 1), Padding::Same, 1);
    let (band, _) = p.row_band(1..3).unwrap();
    let m = [ChannelMultiplier::default()];
    let mut out = [0; 4];
    assert!(matches!(
        conv2d(&band, &m, &[0; 12], &[0; 9], None, &mut out),
        Err(KernelError::LengthMismatch {
            operand: "input",
            ..
        })
    ));
    conv2d(&band, &m, &[0; 8], &[0; 9], None, &mut out).unwrap();
}
