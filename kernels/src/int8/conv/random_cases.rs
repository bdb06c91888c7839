//! Seeded pseudo-random convolutions for the tests that hold a faster path to the direct loop
//! (TFLM's order): odd pixel and channel counts, depths up to a bound, padding, strides,
//! dilations, offsets, shifts in a range, with and without bias. One generator, so that every
//! path is checked over the same kinds of shape.

extern crate std;
use std::vec;
use std::vec::Vec;

use super::{conv2d_direct, ChannelMultiplier, Conv2dParams};
use crate::int8::{Activation, Conv2dShape, Nhwc, Padding, Quant, Window2d};

/// What varies between the paths' sweeps.
pub(super) struct Sweep {
    /// The generator's seed.
    pub seed: u32,
    /// Input depths drawn from `1..=max_depth`.
    pub max_depth: u32,
    /// Multiplier shifts drawn from this inclusive range (negative: right shifts).
    pub shifts: (i32, i32),
}

/// Runs `kernel` on the sweep's cases the path takes (`fits`) and asserts its output equals
/// the direct loop's on each; at least a quarter of the cases must run.
pub(super) fn equal_direct(
    sweep: Sweep,
    fits: impl Fn(&Conv2dParams) -> bool,
    kernel: impl Fn(&Conv2dParams, &[ChannelMultiplier], &[i8], &[i8], Option<&[i32]>, &mut [i8]),
) {
    let mut rng = crate::xorshift::XorShift(sweep.seed);
    let mut next = move || rng.next();
    let mut ran = 0;
    // Under miri (which interprets every step) a few shapes check the same code for undefined
    // behaviour; the sweep is for the host.
    let cases = if cfg!(miri) { 12 } else { 400 };
    for case in 0..cases {
        let mut r = |lo: u32, hi: u32| lo + next() % (hi - lo + 1);
        let window = Window2d {
            filter_height: r(1, 4),
            filter_width: r(1, 4),
            stride_height: r(1, 3),
            stride_width: r(1, 3),
            dilation_height: r(1, 2),
            dilation_width: r(1, 2),
            padding: if r(0, 1) == 0 {
                Padding::Same
            } else {
                Padding::Valid
            },
        };
        let depth = r(1, sweep.max_depth);
        let shape = Conv2dShape {
            input: Nhwc {
                batches: r(1, 2),
                height: r(1, 8),
                width: r(1, 8),
                channels: depth,
            },
            out_channels: r(1, 9),
            filter_depth: depth,
            window,
        };
        let zp = |v: u32| v as i32 - 128;
        let qi = Quant {
            scale: 0.05,
            zero_point: zp(r(0, 255)),
        };
        let qo = Quant {
            scale: 0.05,
            zero_point: zp(r(0, 255)),
        };
        let Ok(p) = Conv2dParams::new(shape, qi, qo, Activation::None) else {
            continue;
        };
        let (il, fl, ol) = p.lens();
        if ol == 0 || !fits(&p) {
            continue;
        }
        let input: Vec<i8> = (0..il).map(|_| r(0, 255) as u8 as i8).collect();
        let filter: Vec<i8> = (0..fl).map(|_| r(0, 255) as u8 as i8).collect();
        let oc = shape.out_channels as usize;
        let (lo, hi) = sweep.shifts;
        let m: Vec<ChannelMultiplier> = (0..oc)
            .map(|_| {
                let shift = lo + r(0, (hi - lo) as u32) as i32;
                ChannelMultiplier::from_raw((1 << 30) + (r(0, 1 << 29) as i32), shift)
            })
            .collect();
        let bias: Vec<i32> = (0..oc).map(|_| r(0, 40_000) as i32 - 20_000).collect();
        let b = (case % 2 == 0).then_some(&bias[..]);
        let (mut fast, mut direct) = (vec![0_i8; ol], vec![0_i8; ol]);
        kernel(&p, &m, &input, &filter, b, &mut fast);
        conv2d_direct(&p, &m, &input, &filter, b, &mut direct);
        assert_eq!(fast, direct, "case {case}: {shape:?}");
        ran += 1;
    }
    assert!(ran > cases / 4, "only {ran} of {cases} cases ran");
}
