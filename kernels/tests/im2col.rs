//! im2col + matrix product CONV_2D against the direct `conv2d`: bit-exact over a
//! deterministic pseudo-random sweep of shapes and quantizations (the crate has no proptest
//! dev-dependency), the gathered layout on a hand-checked case, and the error paths.

use npu_kernels::int8::{
    channel_multipliers, conv2d, conv2d_im2col, im2col, im2col_len, Activation, ChannelMultiplier,
    Conv2dParams, Conv2dShape, Padding,
};
use npu_kernels::KernelError;

mod shapes;
use shapes::{nhwc, q, unit_mults, window};

/// xorshift64*: deterministic, so a failure names a reproducible case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi` (the bias is negligible for these small ranges).
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    fn u32(&mut self, lo: u32, hi: u32) -> u32 {
        self.range(i64::from(lo), i64::from(hi)) as u32
    }

    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| (self.next() >> 56) as i8).collect()
    }
}

#[test]
fn matches_direct_conv2d_on_random_shapes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut nonempty = 0;
    for case in 0..1500 {
        let shape = Conv2dShape {
            input: nhwc(rng.u32(1, 2), rng.u32(1, 9), rng.u32(1, 9), rng.u32(1, 8)),
            out_channels: rng.u32(1, 8),
            filter_depth: 0, // set below: one group
            window: window(
                (rng.u32(1, 4), rng.u32(1, 4)),
                (rng.u32(1, 3), rng.u32(1, 3)),
                (rng.u32(1, 2), rng.u32(1, 2)),
                if rng.next().is_multiple_of(2) {
                    Padding::Same
                } else {
                    Padding::Valid
                },
            ),
        };
        let shape = Conv2dShape {
            filter_depth: shape.input.channels,
            ..shape
        };
        let iq = q(
            0.01 + rng.range(0, 100) as f32 * 0.002,
            rng.range(-128, 127) as i32,
        );
        let oq = q(
            0.02 + rng.range(0, 100) as f32 * 0.003,
            rng.range(-128, 127) as i32,
        );
        let act = [
            Activation::None,
            Activation::Relu,
            Activation::Relu6,
            Activation::ReluN1To1,
        ][rng.range(0, 3) as usize];
        let p = Conv2dParams::new(shape, iq, oq, act).unwrap();
        let (li, lf, lo) = p.lens();
        let oc = shape.out_channels as usize;
        let input = rng.i8s(li);
        let filter = rng.i8s(lf);
        let scales: Vec<f32> = (0..oc)
            .map(|_| 0.0005 + rng.range(0, 1000) as f32 * 0.00002)
            .collect();
        let mut m = vec![ChannelMultiplier::default(); oc];
        channel_multipliers(iq.scale, &scales, oq.scale, &mut m).unwrap();
        // Every third case draws biases within 2^20 of the i32 extremes, so accumulators wrap
        // (often) and the regrouped sum must wrap to the same value.
        let bias: Vec<i32> = (0..oc)
            .map(|_| {
                if case % 3 == 0 {
                    let margin = rng.range(0, 1 << 20) as i32;
                    if rng.next().is_multiple_of(2) {
                        i32::MAX - margin
                    } else {
                        i32::MIN + margin
                    }
                } else {
                    rng.range(-20_000, 20_000) as i32
                }
            })
            .collect();
        let b = (case % 2 == 0).then_some(&bias[..]);

        let mut want = vec![0; lo];
        conv2d(&p, &m, &input, &filter, b, &mut want).unwrap();
        let len = im2col_len(&p).unwrap();
        // Stale scratch contents must not leak into the result.
        let mut scratch = rng.i8s(len);
        let mut got = rng.i8s(lo);
        conv2d_im2col(&p, &m, &input, &filter, b, &mut scratch, &mut got).unwrap();
        assert_eq!(got, want, "case {case}: {shape:?} {iq:?} {oq:?} {act:?}");
        if lo > 0 {
            nonempty += 1;
        }
    }
    // VALID with a filter larger than the image gives empty outputs; most cases must not.
    assert!(nonempty > 1000, "{nonempty}");
}

#[test]
fn im2col_len_counts_rows_of_taps() {
    let shape = Conv2dShape {
        input: nhwc(2, 5, 7, 3),
        out_channels: 4,
        filter_depth: 3,
        window: window((3, 2), (2, 1), (1, 2), Padding::Same),
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let out = p.output_shape();
    assert_eq!((out.height, out.width), (3, 7));
    assert_eq!(im2col_len(&p), Some(2 * 3 * 7 * (3 * 2 * 3)));
}

#[test]
fn gathered_layout_and_padding_fill() {
    // 3x3 image, 2 channels, 2x2 SAME filter, stride 2: outputs (0,0) (0,1) (1,0) (1,1); the
    // total padding of 1 goes after the image, so the second output row and column reach past
    // it. Input pixel (y, x) holds channels (10y + x, −(10y + x)).
    let shape = Conv2dShape {
        input: nhwc(1, 3, 3, 2),
        out_channels: 1,
        filter_depth: 2,
        window: window((2, 2), (2, 2), (1, 1), Padding::Same),
    };
    let zp = -5;
    let p = Conv2dParams::new(shape, q(1.0, zp), q(1.0, 0), Activation::None).unwrap();
    let input: Vec<i8> = (0..3)
        .flat_map(|y| (0..3).flat_map(move |x| [10 * y + x, -(10 * y + x)]))
        .collect();
    let mut scratch = vec![99; im2col_len(&p).unwrap()];
    im2col(&p, &input, &mut scratch).unwrap();
    let px = |y: i8, x: i8| [10 * y + x, -(10 * y + x)];
    let z = [zp as i8; 2];
    // Rows: taps (0,0) (0,1) (1,0) (1,1), each 2 channels.
    let want: Vec<[[i8; 2]; 4]> = vec![
        [px(0, 0), px(0, 1), px(1, 0), px(1, 1)],
        [px(0, 2), z, px(1, 2), z],
        [px(2, 0), px(2, 1), z, z],
        [px(2, 2), z, z, z],
    ];
    let want: Vec<i8> = want.into_iter().flatten().flatten().collect();
    assert_eq!(scratch, want);
}

#[test]
fn dilated_taps_are_gathered_apart() {
    // 1x5 image, 1x2 filter dilated by 3, VALID: outputs 0 and 1 read pixels (0, 3), (1, 4).
    let shape = Conv2dShape {
        input: nhwc(1, 1, 5, 1),
        out_channels: 1,
        filter_depth: 1,
        window: window((1, 2), (1, 1), (1, 3), Padding::Valid),
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let mut scratch = vec![0; 4];
    im2col(&p, &[1, 2, 3, 4, 5], &mut scratch).unwrap();
    assert_eq!(scratch, [1, 4, 2, 5]);
}

fn small() -> (Conv2dParams, Vec<i8>, Vec<i8>, usize) {
    let shape = Conv2dShape {
        input: nhwc(1, 4, 4, 2),
        out_channels: 3,
        filter_depth: 2,
        window: window((3, 3), (1, 1), (1, 1), Padding::Same),
    };
    let p = Conv2dParams::new(shape, q(0.5, 1), q(0.25, -1), Activation::Relu).unwrap();
    let (li, lf, _) = p.lens();
    let mut rng = Rng(7);
    (p, rng.i8s(li), rng.i8s(lf), im2col_len(&p).unwrap())
}

fn mismatch(operand: &'static str, expected: usize, actual: usize) -> Result<(), KernelError> {
    Err(KernelError::LengthMismatch {
        operand,
        expected,
        actual,
    })
}

#[test]
fn length_errors_never_panic_nor_write() {
    let (p, i, f, len) = small();
    let (li, lf, lo) = p.lens();
    let m = unit_mults(3);
    let bias = [1, 2, 3];
    let mut s = vec![7; len + 1];
    let mut o = vec![7; lo + 1];
    let untouched = |s: &[i8], o: &[i8]| s.iter().chain(o).all(|&v| v == 7);

    // Short and long scratch.
    assert_eq!(
        conv2d_im2col(&p, &m, &i, &f, None, &mut s[..len - 1], &mut o[..lo]),
        mismatch("scratch", len, len - 1)
    );
    assert_eq!(
        conv2d_im2col(&p, &m, &i, &f, None, &mut s, &mut o[..lo]),
        mismatch("scratch", len, len + 1)
    );
    assert_eq!(
        im2col(&p, &i, &mut s[..len - 1]),
        mismatch("scratch", len, len - 1)
    );
    // Short input.
    assert_eq!(
        conv2d_im2col(&p, &m, &i[1..], &f, None, &mut s[..len], &mut o[..lo]),
        mismatch("input", li, li - 1)
    );
    assert_eq!(
        im2col(&p, &i[1..], &mut s[..len]),
        mismatch("input", li, li - 1)
    );
    // The other operands.
    assert_eq!(
        conv2d_im2col(&p, &m, &i, &f[1..], None, &mut s[..len], &mut o[..lo]),
        mismatch("filter", lf, lf - 1)
    );
    assert_eq!(
        conv2d_im2col(&p, &m, &i, &f, None, &mut s[..len], &mut o),
        mismatch("output", lo, lo + 1)
    );
    assert_eq!(
        conv2d_im2col(&p, &m[1..], &i, &f, None, &mut s[..len], &mut o[..lo]),
        mismatch("multipliers", 3, 2)
    );
    assert_eq!(
        conv2d_im2col(
            &p,
            &m,
            &i,
            &f,
            Some(&bias[1..]),
            &mut s[..len],
            &mut o[..lo]
        ),
        mismatch("bias", 3, 2)
    );
    assert!(untouched(&s, &o));

    // And the correct lengths work.
    conv2d_im2col(&p, &m, &i, &f, Some(&bias), &mut s[..len], &mut o[..lo]).unwrap();
    let mut want = vec![0; lo];
    conv2d(&p, &m, &i, &f, Some(&bias), &mut want).unwrap();
    assert_eq!(o[..lo], want[..]);
}

#[test]
fn grouped_convolution_is_unsupported() {
    // 4 input channels in 2 groups of 2.
    let shape = Conv2dShape {
        input: nhwc(1, 3, 3, 4),
        out_channels: 4,
        filter_depth: 2,
        window: window((2, 2), (1, 1), (1, 1), Padding::Valid),
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let (li, lf, lo) = p.lens();
    let len = im2col_len(&p).unwrap();
    assert_eq!(len, 2 * 2 * (2 * 2 * 2));
    let (i, f, m) = (vec![1; li], vec![1; lf], unit_mults(4));
    let (mut s, mut o) = (vec![7; len], vec![7; lo]);
    let unsupported = Err(KernelError::Unsupported {
        what: "im2col of a grouped convolution",
    });
    assert_eq!(im2col(&p, &i, &mut s), unsupported);
    assert_eq!(
        conv2d_im2col(&p, &m, &i, &f, None, &mut s, &mut o),
        unsupported
    );
    assert!(s.iter().chain(&o).all(|&v| v == 7));
}

#[test]
fn empty_output_needs_empty_scratch() {
    // VALID 3x3 filter on a 2x2 image: no output pixel, no rows.
    let shape = Conv2dShape {
        input: nhwc(2, 2, 2, 1),
        out_channels: 2,
        filter_depth: 1,
        window: window((3, 3), (1, 1), (1, 1), Padding::Valid),
    };
    let p = Conv2dParams::new(shape, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    assert_eq!(im2col_len(&p), Some(0));
    let f = vec![1; p.lens().1];
    conv2d_im2col(&p, &unit_mults(2), &[0; 8], &f, None, &mut [], &mut []).unwrap();
    im2col(&p, &[0; 8], &mut []).unwrap();
}
