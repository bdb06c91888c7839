//! Hand-computed and model-based tests of CONV_2D, DEPTHWISE_CONV_2D, the pools and SOFTMAX.
//!
//! The model functions below are direct transcriptions of TFLM's reference loops (signed
//! positions, a border test per tap, `Offset()` indexing), written independently of the
//! kernels' precomputed tap ranges and channel blocks; the kernels must agree with them on
//! many small geometries. The requantization itself is tested in `fixed_point`.

use npu_kernels::fixed_point::multiply_by_quantized_multiplier;
use npu_kernels::int8::{
    average_pool2d, channel_multipliers, conv2d, depthwise_conv2d, max_pool2d, mean_hw, softmax,
    Activation, ChannelMultiplier, Conv2dParams, Conv2dShape, DepthwiseParams, DepthwiseShape,
    MeanParams, Nhwc, Padding, PoolParams, PoolShape, Quant, SoftmaxParams, Window2d,
};
use npu_kernels::KernelError;

mod shapes;
use shapes::{nhwc, q, unit_mults, window};

/// Deterministic pseudo-random int8 data.
fn data(n: usize, seed: u32) -> Vec<i8> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as i8
        })
        .collect()
}

/// 1-channel conv with unit scales: the outputs are the exact integer sums (clamped).
fn conv_unit(
    input: &[i8],
    in_hw: (u32, u32),
    filter: &[i8],
    w: Window2d,
) -> (Vec<i8>, Conv2dParams) {
    let shape = Conv2dShape {
        input: nhwc(1, in_hw.0, in_hw.1, 1),
        out_channels: 1,
        filter_depth: 1,
        window: w,
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let mut out = vec![0; p.lens().2];
    conv2d(&p, &unit_mults(1), input, filter, None, &mut out).unwrap();
    (out, p)
}

#[test]
fn conv_same_vs_valid_3x3() {
    let input: Vec<i8> = (1..=9).collect();
    let ones = [1_i8; 9];
    let (same, p) = conv_unit(
        &input,
        (3, 3),
        &ones,
        window((3, 3), (1, 1), (1, 1), Padding::Same),
    );
    assert_eq!(p.output_shape(), nhwc(1, 3, 3, 1));
    assert_eq!(p.padding(), (1, 1));
    // Neighbourhood sums, padding skipped: corner 1+2+4+5, edge 1+2+3+4+5+6, centre 45.
    assert_eq!(same, [12, 21, 16, 27, 45, 33, 24, 39, 28]);
    let (valid, p) = conv_unit(
        &input,
        (3, 3),
        &ones,
        window((3, 3), (1, 1), (1, 1), Padding::Valid),
    );
    assert_eq!(p.output_shape(), nhwc(1, 1, 1, 1));
    assert_eq!(valid, [45]);
}

#[test]
fn conv_stride_2_and_asymmetric_padding() {
    // 4x4 image, 3x3 filter, stride 2, SAME: out 2x2, total padding 1 → 0 before, 1 after.
    let input: Vec<i8> = (0..16).collect();
    let ones = [1_i8; 9];
    let (out, p) = conv_unit(
        &input,
        (4, 4),
        &ones,
        window((3, 3), (2, 2), (1, 1), Padding::Same),
    );
    assert_eq!(p.padding(), (0, 0));
    // (0,0): rows 0-2 × cols 0-2; (0,1): rows 0-2 × cols 2-3; etc.
    let sum = |rows: core::ops::Range<i32>, cols: core::ops::Range<i32>| -> i8 {
        rows.flat_map(|r| cols.clone().map(move |c| r * 4 + c))
            .sum::<i32>() as i8
    };
    assert_eq!(
        out,
        [
            sum(0..3, 0..3),
            sum(0..3, 2..4),
            sum(2..4, 0..3),
            sum(2..4, 2..4)
        ]
    );
    // 5x5, stride 2, SAME: out 3x3, padding 1 on each side.
    let input = [1_i8; 25];
    let (out, p) = conv_unit(
        &input,
        (5, 5),
        &ones,
        window((3, 3), (2, 2), (1, 1), Padding::Same),
    );
    assert_eq!(p.padding(), (1, 1));
    assert_eq!(out, [4, 6, 4, 6, 9, 6, 4, 6, 4]);
}

#[test]
fn conv_dilation_2() {
    // 5x5 image of its indices, 3x3 filter dilated by 2 (effective 5x5), VALID: one output
    // reading rows/cols 0, 2, 4. Filter weights 1..9 to check tap order.
    let input: Vec<i8> = (0..25).collect();
    let filter: Vec<i8> = (1..=9).collect();
    let (out, p) = conv_unit(
        &input,
        (5, 5),
        &filter,
        window((3, 3), (1, 1), (2, 2), Padding::Valid),
    );
    assert_eq!(p.output_shape(), nhwc(1, 1, 1, 1));
    let mut want = 0;
    for (k, (r, c)) in [0, 2, 4]
        .iter()
        .flat_map(|&r| [0, 2, 4].map(move |c| (r, c)))
        .enumerate()
    {
        want += (k as i32 + 1) * (r * 5 + c);
    }
    assert_eq!(i32::from(out[0]), want.min(127));
    // SAME with dilation 2 on 3x3: effective 5, padding 2. Output (0,0) has taps at −2, 0, 2
    // per axis (positions 0 and 2 valid); the centre has taps at −1, 1, 3 (only 1 valid).
    let input: Vec<i8> = (1..=9).collect();
    let (out, p) = conv_unit(
        &input,
        (3, 3),
        &[1; 9],
        window((3, 3), (1, 1), (2, 2), Padding::Same),
    );
    assert_eq!(p.padding(), (2, 2));
    assert_eq!(out[0], 1 + 3 + 7 + 9);
    assert_eq!(out[4], 5);
    assert_eq!(out[1], 4 + 6); // row taps 0, 2; column tap 1
}

#[test]
fn conv_per_channel_multipliers_and_offsets() {
    // 1x1 conv, 2 input channels, 3 output channels with filter scales 1, 0.5, 0.25;
    // input zero point 5, output zero point −3.
    let shape = Conv2dShape {
        input: nhwc(1, 1, 2, 2),
        out_channels: 3,
        filter_depth: 2,
        window: window((1, 1), (1, 1), (1, 1), Padding::Valid),
    };
    let p = Conv2dParams::new(shape, q(1.0, 5), q(1.0, -3), Activation::None).unwrap();
    let mut m = [ChannelMultiplier::default(); 3];
    channel_multipliers(1.0, &[1.0, 0.5, 0.25], 1.0, &mut m).unwrap();
    assert_eq!(m[0], ChannelMultiplier::from_raw(1 << 30, 1));
    assert_eq!(m[1], ChannelMultiplier::from_raw(1 << 30, 0));
    assert_eq!(m[2], ChannelMultiplier::from_raw(1 << 30, -1));
    // Pixel 0: inputs (6, 7) → centred (1, 2); pixel 1: (2, 4) → (−3, −1).
    let input = [6, 7, 2, 4];
    let filter = [1, 1, 1, 0, 1, 1]; // c0: x0 + x1, c1: x0, c2: x0 + x1
    let bias = [0, 0, 2];
    let mut out = [0_i8; 6];
    conv2d(&p, &m, &input, &filter, Some(&bias), &mut out).unwrap();
    // c0: 3 → 3 − 3 = 0. c1: 1 · 0.5 = 0.5 → 1 (ties up) → −2. c2: (3 + 2) / 4 = 1.25:
    // srdhm gives 2.5 → 3, then 3 / 2 = 1.5 → 2 (double rounding) → −1.
    // Pixel 1: c0: −4 → −7. c1: −3 · 0.5 = −1.5 → −1 → −4. c2: (−4 + 2) / 4 = −0.5: srdhm
    // −1, then −1 / 2 = −0.5 → −1 → −4.
    assert_eq!(out, [0, -2, -1, -7, -4, -4]);
}

#[test]
fn conv_saturates_and_applies_activation() {
    let shape = Conv2dShape {
        input: nhwc(1, 1, 1, 4),
        out_channels: 2,
        filter_depth: 4,
        window: window((1, 1), (1, 1), (1, 1), Padding::Same),
    };
    let input = [127_i8, 127, 127, 127];
    let filter = [127_i8, 127, 127, 127, -127, -127, -127, -127];
    let m = unit_mults(2);
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let mut out = [0_i8; 2];
    conv2d(&p, &m, &input, &filter, None, &mut out).unwrap();
    assert_eq!(out, [127, -128]);
    // RELU with output zero point −128 and scale 1: range [−128, 127]; RELU6 with scale 1/16
    // and zero point −128: [−128, −128 + 96].
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0 / 16.0, -128), Activation::Relu6).unwrap();
    assert_eq!(p.activation_range(), (-128, -32));
    let mut m = [ChannelMultiplier::default(); 2];
    channel_multipliers(1.0, &[1.0], 1.0 / 16.0, &mut m).unwrap();
    conv2d(&p, &m, &input, &filter, None, &mut out).unwrap();
    assert_eq!(out, [-32, -128]);
}

#[test]
fn grouped_conv() {
    // Input depth 4, filter depth 2 → 2 groups; 4 output channels, 2 per group.
    let shape = Conv2dShape {
        input: nhwc(1, 1, 1, 4),
        out_channels: 4,
        filter_depth: 2,
        window: window((1, 1), (1, 1), (1, 1), Padding::Valid),
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let input = [1, 2, 10, 20];
    let filter = [1, 0, 0, 1, 1, 0, 0, 1]; // picks channel 0, 1 of its group
    let mut out = [0; 4];
    conv2d(&p, &unit_mults(4), &input, &filter, None, &mut out).unwrap();
    assert_eq!(out, [1, 2, 10, 20]);
    // Not a multiple: rejected.
    let bad = Conv2dShape {
        filter_depth: 3,
        ..shape
    };
    assert!(matches!(
        Conv2dParams::new(bad, q(1.0, 0), q(1.0, 0), Activation::None),
        Err(KernelError::Unsupported { .. })
    ));
    let bad = Conv2dShape {
        out_channels: 3,
        ..shape
    };
    assert!(matches!(
        Conv2dParams::new(bad, q(1.0, 0), q(1.0, 0), Activation::None),
        Err(KernelError::Unsupported { .. })
    ));
}

#[test]
fn conv_errors_never_panic() {
    let shape = Conv2dShape {
        input: nhwc(2, 3, 3, 2),
        out_channels: 2,
        filter_depth: 2,
        window: window((3, 3), (1, 1), (1, 1), Padding::Same),
    };
    let p = Conv2dParams::new(shape, q(0.5, 1), q(0.25, -1), Activation::Relu).unwrap();
    let (li, lf, lo) = p.lens();
    assert_eq!((li, lf, lo), (36, 36, 36));
    let m = unit_mults(2);
    let (i, f) = (vec![0; li], vec![0; lf]);
    let mut o = vec![0; lo];
    assert_eq!(
        conv2d(&p, &m, &i[1..], &f, None, &mut o),
        Err(KernelError::LengthMismatch {
            operand: "input",
            expected: 36,
            actual: 35
        })
    );
    assert!(conv2d(&p, &m, &i, &f[1..], None, &mut o).is_err());
    assert!(conv2d(&p, &m, &i, &f, None, &mut o[1..]).is_err());
    assert!(conv2d(&p, &m[1..], &i, &f, None, &mut o).is_err());
    assert!(conv2d(&p, &m, &i, &f, Some(&[0]), &mut o).is_err());
    for bad in [
        Window2d {
            stride_height: 0,
            ..shape.window
        },
        Window2d {
            dilation_width: 0,
            ..shape.window
        },
        Window2d {
            filter_width: 0,
            ..shape.window
        },
    ] {
        let s = Conv2dShape {
            window: bad,
            ..shape
        };
        assert!(matches!(
            Conv2dParams::new(s, q(1.0, 0), q(1.0, 0), Activation::None),
            Err(KernelError::Unsupported { .. })
        ));
    }
    let huge = Conv2dShape {
        input: nhwc(u32::MAX, 1 << 20, 1 << 20, 2),
        ..shape
    };
    assert_eq!(
        Conv2dParams::new(huge, q(1.0, 0), q(1.0, 0), Activation::None),
        Err(KernelError::ShapeOverflow)
    );
    assert!(matches!(
        Conv2dParams::new(shape, q(1.0, 200), q(1.0, 0), Activation::None),
        Err(KernelError::InvalidQuantization { .. })
    ));
    assert!(ChannelMultiplier::new(1.0, f32::NAN, 1.0).is_err());
    assert!(ChannelMultiplier::new(1.0, 1e30, 1e-30).is_err());
    assert_eq!(
        ChannelMultiplier::new(1.0, 0.0, 1.0),
        Ok(ChannelMultiplier::from_raw(0, 0))
    );
    let mut two = [ChannelMultiplier::default(); 2];
    assert!(channel_multipliers(1.0, &[1.0, 1.0, 1.0], 1.0, &mut two).is_err());
    // Empty outputs (VALID window larger than the image) are fine.
    let empty = Conv2dShape {
        input: nhwc(1, 2, 2, 2),
        window: window((3, 3), (1, 1), (1, 1), Padding::Valid),
        ..shape
    };
    let p = Conv2dParams::new(empty, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    assert_eq!(p.lens().2, 0);
    conv2d(&p, &m, &[0; 8], &f, None, &mut []).unwrap();
}

/// TFLM's reference loops, transcribed.
mod model {
    use super::*;

    pub struct Geo {
        pub n: usize,
        pub h: usize,
        pub w: usize,
        pub c: usize,
        pub oh: usize,
        pub ow: usize,
        pub kh: usize,
        pub kw: usize,
        pub sh: usize,
        pub sw: usize,
        pub dh: usize,
        pub dw: usize,
        pub ph: usize,
        pub pw: usize,
    }

    impl Geo {
        /// Input positions of each tap of output (oy, ox), `None` outside the image.
        fn tap(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<(usize, usize)> {
            let y = (oy * self.sh) as isize - self.ph as isize + (ky * self.dh) as isize;
            let x = (ox * self.sw) as isize - self.pw as isize + (kx * self.dw) as isize;
            (y >= 0 && x >= 0 && (y as usize) < self.h && (x as usize) < self.w)
                .then_some((y as usize, x as usize))
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub fn conv(
        g: &Geo,
        oc: usize,
        fd: usize,
        input: &[i8],
        filter: &[i8],
        bias: Option<&[i32]>,
        m: &[ChannelMultiplier],
        in_off: i32,
        out_off: i32,
        range: (i32, i32),
    ) -> Vec<i8> {
        let groups = g.c / fd;
        let fpg = oc / groups;
        let mut out = vec![0; g.n * g.oh * g.ow * oc];
        for b in 0..g.n {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    for o in 0..oc {
                        let grp = o / fpg;
                        let mut acc = 0_i32;
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let Some((y, x)) = g.tap(oy, ox, ky, kx) else {
                                    continue;
                                };
                                for i in 0..fd {
                                    let xv = i32::from(
                                        input[((b * g.h + y) * g.w + x) * g.c + i + grp * fd],
                                    );
                                    let wv =
                                        i32::from(filter[((o * g.kh + ky) * g.kw + kx) * fd + i]);
                                    acc = acc.wrapping_add(wv * (xv + in_off));
                                }
                            }
                        }
                        acc = acc.wrapping_add(bias.map_or(0, |b| b[o]));
                        let v =
                            multiply_by_quantized_multiplier(acc, m[o].multiplier(), m[o].shift())
                                .wrapping_add(out_off);
                        out[((b * g.oh + oy) * g.ow + ox) * oc + o] =
                            v.max(range.0).min(range.1) as i8;
                    }
                }
            }
        }
        out
    }

    #[allow(clippy::too_many_arguments)]
    pub fn depthwise(
        g: &Geo,
        mult: usize,
        input: &[i8],
        filter: &[i8],
        bias: Option<&[i32]>,
        m: &[ChannelMultiplier],
        in_off: i32,
        out_off: i32,
        range: (i32, i32),
    ) -> Vec<i8> {
        let oc = g.c * mult;
        let mut out = vec![0; g.n * g.oh * g.ow * oc];
        for b in 0..g.n {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    for ic in 0..g.c {
                        for mm in 0..mult {
                            let o = mm + ic * mult;
                            let mut acc = 0_i32;
                            for ky in 0..g.kh {
                                for kx in 0..g.kw {
                                    let Some((y, x)) = g.tap(oy, ox, ky, kx) else {
                                        continue;
                                    };
                                    let xv = i32::from(input[((b * g.h + y) * g.w + x) * g.c + ic]);
                                    let wv = i32::from(filter[(ky * g.kw + kx) * oc + o]);
                                    acc = acc.wrapping_add(wv * (xv + in_off));
                                }
                            }
                            acc = acc.wrapping_add(bias.map_or(0, |b| b[o]));
                            let v = multiply_by_quantized_multiplier(
                                acc,
                                m[o].multiplier(),
                                m[o].shift(),
                            )
                            .wrapping_add(out_off);
                            out[((b * g.oh + oy) * g.ow + ox) * oc + o] =
                                v.max(range.0).min(range.1) as i8;
                        }
                    }
                }
            }
        }
        out
    }

    pub fn pool(g: &Geo, input: &[i8], avg: bool, range: (i32, i32)) -> Vec<i8> {
        let mut out = vec![0; g.n * g.oh * g.ow * g.c];
        for b in 0..g.n {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    for ch in 0..g.c {
                        let (mut acc, mut count, mut max) = (0_i32, 0_i32, -128_i32);
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let Some((y, x)) = g.tap(oy, ox, ky, kx) else {
                                    continue;
                                };
                                let v = i32::from(input[((b * g.h + y) * g.w + x) * g.c + ch]);
                                acc += v;
                                count += 1;
                                max = max.max(v);
                            }
                        }
                        let v = if avg {
                            if acc > 0 {
                                (acc + count / 2) / count
                            } else {
                                (acc - count / 2) / count
                            }
                        } else {
                            max
                        };
                        out[((b * g.oh + oy) * g.ow + ox) * g.c + ch] =
                            v.max(range.0).min(range.1) as i8;
                    }
                }
            }
        }
        out
    }
}

/// (n, h, w, c, kh, kw, sh, sw, dh, dw, padding).
type Geometry = (u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, Padding);

/// Test geometries.
fn geometries() -> Vec<Geometry> {
    let mut v = Vec::new();
    let mut seed = 0_u32;
    for padding in [Padding::Same, Padding::Valid] {
        for (h, w) in [(1, 1), (4, 5), (7, 6)] {
            for (kh, kw) in [(1, 1), (3, 3), (2, 5), (5, 2)] {
                for (sh, sw) in [(1, 1), (2, 2), (3, 1)] {
                    for (dh, dw) in [(1, 1), (2, 2), (1, 3)] {
                        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        let n = 1 + (seed >> 20) % 2;
                        let c = [1, 3, 8, 33, 40][(seed >> 24) as usize % 5];
                        v.push((n, h, w, c, kh, kw, sh, sw, dh, dw, padding));
                    }
                }
            }
        }
    }
    v
}

fn geo_of(out: Nhwc, pad: (usize, usize), g: Geometry) -> model::Geo {
    let (n, h, w, c, kh, kw, sh, sw, dh, dw, _) = g;
    let u = |v: u32| v as usize;
    model::Geo {
        n: u(n),
        h: u(h),
        w: u(w),
        c: u(c),
        oh: u(out.height),
        ow: u(out.width),
        kh: u(kh),
        kw: u(kw),
        sh: u(sh),
        sw: u(sw),
        dh: u(dh),
        dw: u(dw),
        ph: pad.0,
        pw: pad.1,
    }
}

#[test]
fn conv_matches_tflm_loops() {
    let (iq, oq) = (q(0.05, -7), q(0.11, 3));
    for (k, g) in geometries().into_iter().enumerate() {
        let (n, h, w, c, kh, kw, sh, sw, dh, dw, padding) = g;
        // Ordinary and (when the depth allows) grouped convolutions.
        for fd in [c, if c % 4 == 0 { c / 4 } else { c }] {
            let oc = if fd == c { 5 } else { 8 };
            let shape = Conv2dShape {
                input: nhwc(n, h, w, c),
                out_channels: oc,
                filter_depth: fd,
                window: window((kh, kw), (sh, sw), (dh, dw), padding),
            };
            let act = [Activation::None, Activation::Relu, Activation::Relu6][k % 3];
            let p = Conv2dParams::new(shape, iq, oq, act).unwrap();
            let (li, lf, lo) = p.lens();
            let input = data(li, k as u32);
            let filter = data(lf, k as u32 + 1000);
            let bias: Vec<i32> = (0..oc as i32).map(|i| i * 997 - 2000).collect();
            let scales: Vec<f32> = (0..oc).map(|i| 0.002 + 0.0013 * i as f32).collect();
            let mut m = vec![ChannelMultiplier::default(); oc as usize];
            channel_multipliers(iq.scale, &scales, oq.scale, &mut m).unwrap();
            let mut out = vec![0; lo];
            let with_bias = k % 2 == 0;
            let b = with_bias.then_some(&bias[..]);
            conv2d(&p, &m, &input, &filter, b, &mut out).unwrap();
            let geo = geo_of(p.output_shape(), p.padding(), g);
            let want = model::conv(
                &geo,
                oc as usize,
                fd as usize,
                &input,
                &filter,
                b,
                &m,
                7,
                3,
                p.activation_range(),
            );
            assert_eq!(out, want, "{g:?} fd={fd}");
        }
    }
}

#[test]
fn depthwise_matches_tflm_loops() {
    let (iq, oq) = (q(0.03, 11), q(0.07, -20));
    for (k, g) in geometries().into_iter().enumerate() {
        let (n, h, w, c, kh, kw, sh, sw, dh, dw, padding) = g;
        for mult in [1, 2, 3] {
            let shape = DepthwiseShape {
                input: nhwc(n, h, w, c),
                depth_multiplier: mult,
                window: window((kh, kw), (sh, sw), (dh, dw), padding),
            };
            let p = DepthwiseParams::new(shape, iq, oq, Activation::None).unwrap();
            let (li, lf, lo) = p.lens();
            let oc = (c * mult) as usize;
            let input = data(li, k as u32 + 7);
            let filter = data(lf, k as u32 + 77);
            let bias: Vec<i32> = (0..oc as i32).map(|i| 500 - i * 131).collect();
            let scales: Vec<f32> = (0..oc).map(|i| 0.004 + 0.0007 * i as f32).collect();
            let mut m = vec![ChannelMultiplier::default(); oc];
            channel_multipliers(iq.scale, &scales, oq.scale, &mut m).unwrap();
            let mut out = vec![0; lo];
            depthwise_conv2d(&p, &m, &input, &filter, Some(&bias), &mut out).unwrap();
            let geo = geo_of(p.output_shape(), p.padding(), g);
            let want = model::depthwise(
                &geo,
                mult as usize,
                &input,
                &filter,
                Some(&bias),
                &m,
                -11,
                -20,
                p.activation_range(),
            );
            assert_eq!(out, want, "{g:?} mult={mult}");
        }
    }
}

#[test]
fn pools_match_tflm_loops() {
    for (k, g) in geometries().into_iter().enumerate() {
        let (n, h, w, c, kh, kw, sh, sw, dh, dw, padding) = g;
        if (dh, dw) != (1, 1) {
            continue;
        }
        let shape = PoolShape {
            input: nhwc(n, h, w, c),
            filter_height: kh,
            filter_width: kw,
            stride_height: sh,
            stride_width: sw,
            padding,
        };
        let act = [Activation::None, Activation::Relu, Activation::ReluN1To1][k % 3];
        let quant = q(0.02, 5);
        let p = PoolParams::new(shape, quant, quant, act).unwrap();
        let (li, lo) = p.lens();
        let input = data(li, k as u32 + 99);
        let geo = geo_of(p.output_shape(), p.padding(), g);
        let mut out = vec![0; lo];
        average_pool2d(&p, &input, &mut out).unwrap();
        assert_eq!(
            out,
            model::pool(&geo, &input, true, p.activation_range()),
            "avg {g:?}"
        );
        max_pool2d(&p, &input, &mut out).unwrap();
        assert_eq!(
            out,
            model::pool(&geo, &input, false, p.activation_range()),
            "max {g:?}"
        );
    }
}

#[test]
fn average_pool_rounding_ties() {
    // 1x2 windows, stride 2, VALID: each output averages two neighbours.
    let shape = PoolShape {
        input: nhwc(1, 1, 12, 1),
        filter_height: 1,
        filter_width: 2,
        stride_height: 1,
        stride_width: 2,
        padding: Padding::Valid,
    };
    let p = PoolParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let input = [1, 2, -1, -2, 0, 1, 0, -1, 127, 127, -128, -127];
    let mut out = [0; 6];
    average_pool2d(&p, &input, &mut out).unwrap();
    // 1.5 → 2, −1.5 → −2, 0.5 → 1, −0.5 → −1 (away from zero), 127, −127.5 → −128.
    assert_eq!(out, [2, -2, 1, -1, 127, -128]);
    // 2x2 windows (count 4): sums 6, −6, 5, −2, 2, −5 → 1.5→2, −1.5→−2, 1.25→1, −0.5→−1, 0.5→1,
    // −1.25→−1.
    let shape = PoolShape {
        input: nhwc(1, 2, 12, 1),
        filter_height: 2,
        filter_width: 2,
        stride_height: 2,
        stride_width: 2,
        padding: Padding::Valid,
    };
    let p = PoolParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    #[rustfmt::skip]
    let input = [
        3, 3, -3, -3, 5, 0, -2, 0, 1, 1, -5, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mut out = [0; 6];
    average_pool2d(&p, &input, &mut out).unwrap();
    assert_eq!(out, [2, -2, 1, -1, 1, -1]);
    // SAME 3x3 on 2x2 with stride 1: every window holds the 4 pixels... of which the corner
    // windows see all four (count 4).
    let shape = PoolShape {
        input: nhwc(1, 3, 3, 1),
        filter_height: 3,
        filter_width: 3,
        stride_height: 1,
        stride_width: 1,
        padding: Padding::Same,
    };
    let p = PoolParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let input = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    let mut out = [0; 9];
    average_pool2d(&p, &input, &mut out).unwrap();
    // Corner (0,0): (1+2+4+5)/4 = 3; edge (0,1): 21/6 = 3.5 → 4; centre 45/9 = 5.
    assert_eq!(out, [3, 4, 4, 5, 5, 6, 6, 7, 7]);
    max_pool2d(&p, &input, &mut out).unwrap();
    assert_eq!(out, [5, 6, 6, 8, 9, 9, 8, 9, 9]);
}

#[test]
fn pool_quantization_checks() {
    let shape = PoolShape {
        input: nhwc(1, 2, 2, 1),
        filter_height: 2,
        filter_width: 2,
        stride_height: 1,
        stride_width: 1,
        padding: Padding::Valid,
    };
    assert!(PoolParams::new(shape, q(0.5, 0), q(0.5, 1), Activation::None).is_err());
    assert!(PoolParams::new(shape, q(0.5, 0), q(0.5001, 0), Activation::None).is_err());
    assert!(PoolParams::new(shape, q(0.5, 0), q(0.5000005, 0), Activation::None).is_ok());
    // RELU on zero point −10: clamps below at −10.
    let p = PoolParams::new(shape, q(0.5, -10), q(0.5, -10), Activation::Relu).unwrap();
    let mut out = [0];
    max_pool2d(&p, &[-50, -40, -30, -20], &mut out).unwrap();
    assert_eq!(out, [-10]);
    average_pool2d(&p, &[-50, -40, -30, -20], &mut out).unwrap();
    assert_eq!(out, [-10]); // −35 → clamped
    average_pool2d(&p, &[-50, -40, -30, 100], &mut out).unwrap();
    assert_eq!(out, [-5]); // −20 / 4, above the bound
    assert!(average_pool2d(&p, &[0; 3], &mut out).is_err());
    assert!(max_pool2d(&p, &[0; 4], &mut []).is_err());
}

fn softmax_out() -> Quant {
    q(1.0 / 256.0, -128)
}

#[test]
fn softmax_uniform_rows() {
    let p = SoftmaxParams::new(q(0.1, 0), 1.0, softmax_out()).unwrap();
    for (n, want) in [
        (1, 127),
        (2, 0),
        (4, -64),
        (8, -96),
        (10, -102),
        (16, -112),
        (256, -127),
    ] {
        let input = vec![17_i8; n];
        let mut out = vec![0; n];
        softmax(&p, n, &input, &mut out).unwrap();
        assert!(out.iter().all(|&o| o == want), "n={n}: {out:?}");
    }
    // 511 equal values still work (sum just below 512); 512 make TFLM abort.
    let mut out = vec![0; 512];
    softmax(&p, 511, &[3; 511], &mut out[..511]).unwrap();
    assert_eq!(
        softmax(&p, 512, &[3; 512], &mut out),
        Err(KernelError::Unsupported {
            what: "softmax sum of exponentials >= 512"
        })
    );
}

#[test]
fn softmax_one_hot_and_diff_min() {
    // Scale 1: differences of −255 are far below diff_min.
    let p = SoftmaxParams::new(q(1.0, 0), 1.0, softmax_out()).unwrap();
    // beta · scale · 2^26 = 2^26 = 0.5 · 2^27 → multiplier 2^30, shift 27;
    // diff_min = −floor(31 · 2^26 / 2^27) = −15.
    assert_eq!(p.input_multiplier(), (1 << 30, 27));
    assert_eq!(p.diff_min(), -15);
    let input = [127, -128, -128, -128, 0, -128];
    let mut out = [0; 6];
    softmax(&p, 3, &input, &mut out).unwrap();
    assert_eq!(out, [127, -128, -128, -128, 127, -128]);
    // Differences 0 and −1 (scale 1): 1/(1 + e^−1) = 0.731 → 187.1 → 59; 0.269 → 68.9 → −59.
    let mut out = [0; 2];
    softmax(&p, 2, &[5, 4], &mut out).unwrap();
    assert_eq!(out, [59, -59]);
    // diff_min formula against the float definition for a range of scales.
    for scale in [0.001_f32, 0.01, 0.0625, 0.1, 0.37, 1.0, 3.0, 100.0] {
        let p = SoftmaxParams::new(q(scale, 0), 1.0, softmax_out()).unwrap();
        let shift = p.input_multiplier().1;
        let radius = (31.0 * 2f64.powi(26) / 2f64.powi(shift)).floor() as i32;
        assert_eq!(p.diff_min(), -radius, "scale {scale}");
    }
    // Large scales are capped at 2^31 − 1: multiplier 2^31 − 1, shift 31, diff_min −0 → 0...
    let p = SoftmaxParams::new(q(100.0, 0), 1.0, softmax_out()).unwrap();
    assert_eq!(p.input_multiplier(), (i32::MAX, 31));
    assert_eq!(p.diff_min(), 0);
    let mut out = [0; 3];
    softmax(&p, 3, &[10, 10, 9], &mut out).unwrap();
    assert_eq!(out, [0, 0, -128]);
}

#[test]
fn softmax_close_to_float() {
    let scale = 0.0625_f32;
    let p = SoftmaxParams::new(q(scale, 3), 1.0, softmax_out()).unwrap();
    let input = data(40 * 10, 5);
    let mut out = vec![0; input.len()];
    softmax(&p, 10, &input, &mut out).unwrap();
    for (row, orow) in input.chunks(10).zip(out.chunks(10)) {
        let max = *row.iter().max().unwrap();
        let e: Vec<f64> = row
            .iter()
            .map(|&x| (f64::from(scale) * f64::from(i32::from(x) - i32::from(max))).exp())
            .collect();
        let sum: f64 = e.iter().sum();
        for (&ei, &o) in e.iter().zip(orow) {
            let want = (ei / sum * 256.0).round() - 128.0;
            assert!(
                (f64::from(o) - want.min(127.0)).abs() <= 1.0,
                "{row:?} {orow:?}"
            );
        }
    }
}

#[test]
fn softmax_errors() {
    assert!(SoftmaxParams::new(q(0.1, 0), 1.0, q(1.0 / 255.0, -128)).is_err());
    assert!(SoftmaxParams::new(q(0.1, 0), 1.0, q(1.0 / 256.0, 0)).is_err());
    assert!(SoftmaxParams::new(q(0.1, 0), 0.0, softmax_out()).is_err());
    assert!(SoftmaxParams::new(q(0.1, 0), -1.0, softmax_out()).is_err());
    assert!(SoftmaxParams::new(q(1e-9, 0), 1.0, softmax_out()).is_err()); // 2^26 · 1e−9 < 1
    assert!(SoftmaxParams::new(q(f32::NAN, 0), 1.0, softmax_out()).is_err());
    let p = SoftmaxParams::new(q(0.1, 0), 1.0, softmax_out()).unwrap();
    let mut out = [0; 6];
    assert!(softmax(&p, 4, &[0; 6], &mut out).is_err());
    assert!(softmax(&p, 3, &[0; 6], &mut out[..5]).is_err());
    assert!(softmax(&p, 0, &[0; 6], &mut out).is_err());
    softmax(&p, 0, &[], &mut []).unwrap();
}

#[test]
fn mean_folds_the_count_into_the_multiplier() {
    // 2x2 pixels, 3 channels, equal scales: n = 4, (2^30, 1) becomes (2^30 · 4 / 4, 1 − 2).
    let p = MeanParams::new(nhwc(1, 2, 2, 3), q(0.5, 0), q(0.5, 0)).unwrap();
    assert_eq!(p.multiplier(), (1 << 30, -1));
    assert_eq!(p.lens(), (12, 3));
    let input = [1, -1, 100, 2, -2, 100, 1, -1, 100, 2, -2, 100];
    let mut out = [0; 3];
    mean_hw(&p, &input, &mut out).unwrap();
    // 6/4: srdhm(6, 0.5) = 3, 3/2 → 2; −6/4 → −3, −3/2 → −2; 400/4 = 100.
    assert_eq!(out, [2, -2, 100]);
    // n = 3: k = 1, multiplier floor(2^31 / 3) = 715827882, shift 0: 3 · that / 2^31 → 1.
    let p = MeanParams::new(nhwc(2, 1, 3, 1), q(0.5, 10), q(0.25, -5)).unwrap();
    assert_eq!(p.multiplier(), (715_827_882, 1));
    let mut out = [0; 2];
    // Batch 0: all at the zero point → −5. Batch 1: centred sum 3 → mean 1 · 2 (scale ratio).
    mean_hw(&p, &[10, 10, 10, 11, 11, 11], &mut out).unwrap();
    assert_eq!(out, [-5, -3]);
    // Saturation and an empty reduction.
    let p = MeanParams::new(nhwc(1, 1, 2, 1), q(1.0, 0), q(0.01, 0)).unwrap();
    mean_hw(&p, &[100, 100], &mut out[..1]).unwrap();
    assert_eq!(out[0], 127);
    let p = MeanParams::new(nhwc(1, 0, 2, 2), q(1.0, 0), q(1.0, 3)).unwrap();
    let mut out = [9; 2];
    mean_hw(&p, &[], &mut out).unwrap();
    assert_eq!(out, [0, 0]);
    assert!(mean_hw(&p, &[1], &mut out).is_err());
    assert!(MeanParams::new(nhwc(1, 2, 2, 1), q(1.0, 0), q(f32::INFINITY, 0)).is_err());
    assert!(MeanParams::new(nhwc(1, 2, 2, 1), q(1e20, 0), q(1e-20, 0)).is_err());
}
