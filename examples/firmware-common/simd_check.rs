//! The SIMD kernels against the portable ones, on the core that runs them.
//!
//! # Why
//!
//! On the firmware's targets the int8 convolution, depthwise, fully connected and pool kernels
//! and the same-shape ADD and MUL (and each row of a per-channel broadcast, [`elementwise`])
//! run their inner loops on the core's SIMD instructions: the DSP extension (`SXTB16`,
//! `SMLAD`, `SMMLAR`, ...) on the
//! Cortex-M4 (`examples/firmware`), Helium (`VMLADAVA`, `VMULLB`, `VQRDMULH`, ...) on the
//! Cortex-M55 (`examples/firmware-m55`). The host's unit tests never execute them: they test
//! the portable path. [`kernels`] runs both paths here, on the core that executes the
//! assembly, over deterministic pseudo-random shapes chosen to reach every edge of the fast
//! paths (odd channel and pixel counts, depths that are not multiples of the vector width,
//! padding, strides, dilations, input and output offsets, grouped and deep windows that take
//! the direct loop), and fails the firmware on any byte that differs. (kws_dscnn on the CPU
//! fallback is checked against TFLM's bytes by `cpu_layers`, with these same kernels.) Each
//! core gets the [`Ranges`] its kernels need: [`DSP`] (four-byte groups) and [`HELIUM`]
//! (sixteen-lane vectors, so channel counts past 32, and every requantization shift).
//!
//! The cases are small (at most a few thousand MACs each) so the check adds well under a second
//! of QEMU time.

use npu_compute::kernels::int8::{
    self, portable, Activation, AddParams, BroadcastShape, ChannelMultiplier, Conv2dParams,
    Conv2dShape, DepthwiseParams, DepthwiseShape, FcParams, FcPerChannelParams, MulParams, Nhwc,
    Padding, PoolParams, PoolShape, Quant, Window2d,
};
use npu_compute::kernels::{FcShape, KernelError};

/// Elements of the input, filter and output buffers (a case may use fewer, [`Ranges`]).
const BUFFER_ELEMS: usize = 8192;
/// Largest channel count (output channels).
const MAX_CHANNELS: usize = 128;

/// The shapes and quantizations a core's cases are drawn from (inclusive ranges).
pub struct Ranges {
    /// Random cases per kernel.
    pub cases: u32,
    /// Largest input, filter and output a case may have (elements; larger ones are skipped).
    pub max_elems: usize,
    /// Input height and width of a convolution.
    pub conv_size: (i32, i32),
    /// Filter depth of a convolution.
    pub conv_depth: (i32, i32),
    /// Output channels of a convolution (per group).
    pub conv_out_channels: (i32, i32),
    /// Input height and width of a depthwise convolution.
    pub depthwise_size: (i32, i32),
    /// Input channels of a depthwise convolution.
    pub depthwise_channels: (i32, i32),
    /// Channels of a pool (the SIMD paths take sixteen at a time).
    pub pool_channels: (i32, i32),
    /// Every how many cases (when not 0) the multipliers' shifts span −40..=40 (TFLM's
    /// −31..=31 and beyond it, which the vector requantization hands to the scalar one)
    /// rather than the usual −10..=1.
    pub wide_shifts_every: u32,
    /// Input features of a fully connected layer.
    pub fc_in_features: (i32, i32),
    /// Output features of a fully connected layer.
    pub fc_out_features: (i32, i32),
}

/// The Cortex-M4's cases (the DSP extension).
// Each firmware uses its own core's ranges.
#[allow(dead_code)]
pub const DSP: Ranges = Ranges {
    cases: 120,
    max_elems: 4096,
    conv_size: (1, 9),
    conv_depth: (1, 11),
    conv_out_channels: (1, 9),
    depthwise_size: (1, 10),
    depthwise_channels: (1, 13),
    pool_channels: (1, 40),
    wide_shifts_every: 0,
    fc_in_features: (1, 40),
    fc_out_features: (1, 21),
};

/// The Cortex-M55's cases (Helium): depths and channel counts past two 16-lane vectors, more
/// output channels, shifts of every size.
#[allow(dead_code)]
pub const HELIUM: Ranges = Ranges {
    cases: 160,
    max_elems: BUFFER_ELEMS,
    conv_size: (1, 8),
    conv_depth: (1, 40),
    conv_out_channels: (1, 12),
    depthwise_size: (1, 8),
    depthwise_channels: (1, 40),
    pool_channels: (1, 40),
    wide_shifts_every: 3,
    fc_in_features: (1, 100),
    fc_out_features: (1, 40),
};

/// Why the check failed.
#[derive(defmt::Format)]
pub enum SimdCheckError {
    /// Case `case` of `kernel` gave different bytes on the SIMD and the portable paths.
    Differs {
        /// `"conv2d"`, `"depthwise_conv2d"`, `"average_pool2d"`, `"fully_connected"`,
        /// `"fully_connected_per_channel"`, `"add"`, `"mul"` or `"max_pool2d"`.
        kernel: &'static str,
        /// The case's number.
        case: u32,
        /// Output bytes that differ.
        bytes: usize,
    },
    /// One path refused a case the other ran, or both refused with different errors.
    Refused {
        /// The kernel.
        kernel: &'static str,
        /// The case's number.
        case: u32,
        /// What the SIMD path returned.
        error: KernelError,
    },
}

/// A xorshift generator: the same cases on every run.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }

    /// A value in `lo..=hi`.
    fn range(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.next() % (hi - lo + 1) as u32) as i32
    }

    fn fill(&mut self, buf: &mut [i8]) {
        for b in buf {
            *b = self.next() as i8;
        }
    }
}

/// Random per-channel multipliers (realistic mantissas, shifts from `shifts`) and biases.
fn channel_operands(
    rng: &mut Rng,
    m: &mut [ChannelMultiplier],
    bias: &mut [i32],
    shifts: (i32, i32),
) {
    for (m, b) in m.iter_mut().zip(bias) {
        let mantissa = (1 << 30) + (rng.next() >> 2) as i32;
        *m = ChannelMultiplier::from_raw(mantissa, rng.range(shifts.0, shifts.1));
        *b = rng.range(-20_000, 20_000);
    }
}

/// A random window: filter 1–5, stride 1–3, dilation 1–2, SAME or VALID.
fn window(rng: &mut Rng) -> Window2d {
    Window2d {
        filter_height: rng.range(1, 5) as u32,
        filter_width: rng.range(1, 5) as u32,
        stride_height: rng.range(1, 3) as u32,
        stride_width: rng.range(1, 3) as u32,
        dilation_height: rng.range(1, 2) as u32,
        dilation_width: rng.range(1, 2) as u32,
        padding: if rng.next().is_multiple_of(2) {
            Padding::Same
        } else {
            Padding::Valid
        },
    }
}

fn quant(rng: &mut Rng) -> (Quant, Quant, Activation) {
    let q = |zp| Quant {
        scale: 0.05,
        zero_point: zp,
    };
    let act = if rng.next().is_multiple_of(3) {
        Activation::Relu
    } else {
        Activation::None
    };
    (q(rng.range(-128, 127)), q(rng.range(-128, 127)), act)
}

/// Compares the two outputs of one case.
fn compare(
    kernel: &'static str,
    case: u32,
    simd: Result<(), KernelError>,
    reference: Result<(), KernelError>,
    a: &[i8],
    b: &[i8],
) -> Result<bool, SimdCheckError> {
    match (simd, reference) {
        (Ok(()), Ok(())) => {
            let bytes = a.iter().zip(b).filter(|(x, y)| x != y).count();
            if bytes == 0 {
                Ok(true)
            } else {
                Err(SimdCheckError::Differs {
                    kernel,
                    case,
                    bytes,
                })
            }
        }
        (Err(e), Err(f)) if e == f => Ok(false),
        (Err(error), _) | (Ok(()), Err(error)) => Err(SimdCheckError::Refused {
            kernel,
            case,
            error,
        }),
    }
}

/// A kernel's entry point: parameters, per-channel multipliers, input, filter, bias, output.
type Kernel<P> = fn(
    &P,
    &[ChannelMultiplier],
    &[i8],
    &[i8],
    Option<&[i32]>,
    &mut [i8],
) -> Result<(), KernelError>;

/// The operands and the two outputs of a case, sized for the largest.
struct Operands {
    input: [i8; BUFFER_ELEMS],
    filter: [i8; BUFFER_ELEMS],
    out_simd: [i8; BUFFER_ELEMS],
    out_ref: [i8; BUFFER_ELEMS],
    mults: [ChannelMultiplier; MAX_CHANNELS],
    bias: [i32; MAX_CHANNELS],
    /// Largest input, filter and output a case may have ([`Ranges::max_elems`]).
    max_elems: usize,
    /// The multipliers' shifts of the next case.
    shifts: (i32, i32),
}

impl Operands {
    /// Case `case` of `kernel` with parameters `p`, whose input, filter and output have
    /// `lens` elements over `channels` output channels: random operands (a bias when
    /// `with_bias`), then `simd` and `reference` compared. `Ok(true)` when it ran; `Ok(false)`
    /// when the case is beyond the buffers or has no output, or both paths refused it alike.
    fn check<P>(
        &mut self,
        rng: &mut Rng,
        (kernel, case): (&'static str, u32),
        p: &P,
        (il, fl, ol): (usize, usize, usize),
        (channels, with_bias): (usize, bool),
        (simd, reference): (Kernel<P>, Kernel<P>),
    ) -> Result<bool, SimdCheckError> {
        let max = self.max_elems.min(BUFFER_ELEMS);
        if il > max || fl > max || ol > max || ol == 0 || channels > MAX_CHANNELS {
            return Ok(false);
        }
        rng.fill(&mut self.input[..il]);
        rng.fill(&mut self.filter[..fl]);
        let (m, b) = (&mut self.mults[..channels], &mut self.bias[..channels]);
        channel_operands(rng, m, b, self.shifts);
        let b = with_bias.then_some(&self.bias[..channels]);
        let (x, f, m) = (
            &self.input[..il],
            &self.filter[..fl],
            &self.mults[..channels],
        );
        let got = simd(p, m, x, f, b, &mut self.out_simd[..ol]);
        let want = reference(p, m, x, f, b, &mut self.out_ref[..ol]);
        compare(
            kernel,
            case,
            got,
            want,
            &self.out_simd[..ol],
            &self.out_ref[..ol],
        )
    }
}

/// Runs `ranges.cases` random convolutions and depthwise convolutions on both paths; returns
/// how many of each ran (the others had no valid output, e.g. a VALID window larger than the
/// image, or were larger than `ranges.max_elems`).
pub fn kernels(ranges: &Ranges) -> Result<(u32, u32), SimdCheckError> {
    let r = ranges;
    let mut rng = Rng(0x9e37_79b9);
    let mut operands = Operands {
        input: [0; BUFFER_ELEMS],
        filter: [0; BUFFER_ELEMS],
        out_simd: [0; BUFFER_ELEMS],
        out_ref: [0; BUFFER_ELEMS],
        mults: [ChannelMultiplier::default(); MAX_CHANNELS],
        bias: [0; MAX_CHANNELS],
        max_elems: r.max_elems,
        shifts: (0, 0),
    };
    let (mut convs, mut depthwise) = (0, 0);

    for case in 0..r.cases {
        let wide = r.wide_shifts_every != 0 && case % r.wide_shifts_every == 0;
        operands.shifts = if wide { (-40, 40) } else { (-10, 1) };
        // CONV_2D: every fifth case grouped (two groups), every seventh deep enough (a 5×5
        // window over 24 channels, 600 taps) for the direct loop.
        let groups = if case % 5 == 4 { 2 } else { 1 };
        let mut w = window(&mut rng);
        let depth = if case % 7 == 6 {
            w.filter_height = 5;
            w.filter_width = 5;
            24
        } else {
            rng.range(r.conv_depth.0, r.conv_depth.1) as u32
        };
        let shape = Conv2dShape {
            input: Nhwc {
                batches: rng.range(1, 2) as u32,
                height: rng.range(r.conv_size.0, r.conv_size.1) as u32,
                width: rng.range(r.conv_size.0, r.conv_size.1) as u32,
                channels: depth * groups,
            },
            out_channels: rng.range(r.conv_out_channels.0, r.conv_out_channels.1) as u32 * groups,
            filter_depth: depth,
            window: w,
        };
        let (qi, qo, act) = quant(&mut rng);
        if let Ok(p) = Conv2dParams::new(shape, qi, qo, act) {
            let channels = shape.out_channels as usize;
            let ran = operands.check(
                &mut rng,
                ("conv2d", case),
                &p,
                p.lens(),
                (channels, case % 3 != 0),
                (int8::conv2d, portable::conv2d),
            )?;
            convs += u32::from(ran);
        }

        // DEPTHWISE_CONV_2D: depth multiplier 1 most of the time (the four-channel path),
        // 2 or 3 every fourth case.
        let mult = if case % 4 == 3 { rng.range(2, 3) } else { 1 } as u32;
        let shape = DepthwiseShape {
            input: Nhwc {
                batches: rng.range(1, 2) as u32,
                height: rng.range(r.depthwise_size.0, r.depthwise_size.1) as u32,
                width: rng.range(r.depthwise_size.0, r.depthwise_size.1) as u32,
                channels: rng.range(r.depthwise_channels.0, r.depthwise_channels.1) as u32,
            },
            depth_multiplier: mult,
            window: window(&mut rng),
        };
        let (qi, qo, act) = quant(&mut rng);
        if let Ok(p) = DepthwiseParams::new(shape, qi, qo, act) {
            let channels = (shape.input.channels * mult) as usize;
            let ran = operands.check(
                &mut rng,
                ("depthwise_conv2d", case),
                &p,
                p.lens(),
                (channels, case % 3 != 1),
                (int8::depthwise_conv2d, portable::depthwise_conv2d),
            )?;
            depthwise += u32::from(ran);
        }
    }
    Ok((convs, depthwise))
}

/// Runs `ranges.cases` random average pools and max pools on both paths (windows 1–5,
/// strides 1–3, SAME or VALID, the depthwise sizes and the pool channel counts of `ranges`,
/// every with and without RELU), then two whole-image pools of sixteen channels over 256
/// pixels of −128 (the most the DSP path's 16-bit sums hold) and 272 random ones (past it:
/// the portable sums); returns how many average and max pools ran.
pub fn pools(ranges: &Ranges) -> Result<(u32, u32), SimdCheckError> {
    let r = ranges;
    let mut rng = Rng(0x2545_f491);
    let mut input = [0_i8; BUFFER_ELEMS];
    let mut outputs = ([0_i8; BUFFER_ELEMS], [0_i8; BUFFER_ELEMS]);
    let (mut ran, mut max_pools) = (0, 0);
    let limits = [(16, Some(i8::MIN)), (17, None)];
    for case in 0..r.cases + limits.len() as u32 {
        let limit = case
            .checked_sub(r.cases)
            .and_then(|k| limits.get(k as usize));
        let (shape, fill) = match limit {
            Some(&(height, fill)) => (
                PoolShape {
                    input: Nhwc {
                        batches: 1,
                        height,
                        width: 16,
                        channels: 16,
                    },
                    filter_height: height,
                    filter_width: 16,
                    stride_height: 1,
                    stride_width: 1,
                    padding: Padding::Valid,
                },
                fill,
            ),
            None => (
                PoolShape {
                    input: Nhwc {
                        batches: rng.range(1, 2) as u32,
                        height: rng.range(r.depthwise_size.0, r.depthwise_size.1) as u32,
                        width: rng.range(r.depthwise_size.0, r.depthwise_size.1) as u32,
                        channels: rng.range(r.pool_channels.0, r.pool_channels.1) as u32,
                    },
                    filter_height: rng.range(1, 5) as u32,
                    filter_width: rng.range(1, 5) as u32,
                    stride_height: rng.range(1, 3) as u32,
                    stride_width: rng.range(1, 3) as u32,
                    padding: if rng.next().is_multiple_of(2) {
                        Padding::Same
                    } else {
                        Padding::Valid
                    },
                },
                None,
            ),
        };
        let (q, _, act) = quant(&mut rng);
        let Ok(p) = PoolParams::new(shape, q, q, act) else {
            continue;
        };
        let (il, ol) = p.lens();
        // The limit cases are larger than a core's random ones may be.
        let max = if limit.is_some() {
            BUFFER_ELEMS
        } else {
            r.max_elems.min(BUFFER_ELEMS)
        };
        if il > max || ol > max || ol == 0 {
            continue;
        }
        match fill {
            Some(v) => input[..il].fill(v),
            None => rng.fill(&mut input[..il]),
        }
        let (simd, reference) = (&mut outputs.0[..ol], &mut outputs.1[..ol]);
        let got = int8::average_pool2d(&p, &input[..il], simd);
        let want = portable::average_pool2d(&p, &input[..il], reference);
        ran += u32::from(compare("average_pool2d", case, got, want, simd, reference)?);
        let got = int8::max_pool2d(&p, &input[..il], simd);
        let want = portable::max_pool2d(&p, &input[..il], reference);
        max_pools += u32::from(compare("max_pool2d", case, got, want, simd, reference)?);
    }
    Ok((ran, max_pools))
}

/// Largest fully connected input and output of a case (elements, all batches).
const FC_ROWS: usize = 512;

/// Runs `ranges.cases` random fully connected layers on both paths, per-tensor and
/// per-channel in turn (one to three batches, the feature counts of `ranges`, with and
/// without a bias, multipliers shifting from far right to left); returns how many ran.
pub fn fully_connected(ranges: &Ranges) -> Result<u32, SimdCheckError> {
    let r = ranges;
    let mut rng = Rng(0x6a09_e667);
    let mut input = [0_i8; FC_ROWS];
    let mut weights = [0_i8; BUFFER_ELEMS];
    let mut bias = [0_i32; MAX_CHANNELS];
    let mut mults = [ChannelMultiplier::default(); MAX_CHANNELS];
    let (mut out_simd, mut out_ref) = ([0_i8; FC_ROWS], [0_i8; FC_ROWS]);
    let mut ran = 0;
    for case in 0..r.cases {
        let shape = FcShape {
            batches: rng.range(1, 3) as u32,
            in_features: rng.range(r.fc_in_features.0, r.fc_in_features.1) as u32,
            out_features: rng.range(r.fc_out_features.0, r.fc_out_features.1) as u32,
        };
        let (i, o, b) = (
            shape.in_features as usize,
            shape.out_features as usize,
            shape.batches as usize,
        );
        if i * b > FC_ROWS || o * b > FC_ROWS || i * o > BUFFER_ELEMS || o > MAX_CHANNELS {
            continue;
        }
        let (qi, mut qo, act) = quant(&mut rng);
        // Output scales from 2⁻¹⁴ to 2⁶ of the product of the others: multipliers shifting
        // from 14 left to 6 right (TFLM's usual range is a few bits right).
        qo.scale =
            0.05 * 0.01 * (rng.range(1, 1000) as f32) / (1u32 << rng.range(0, 20)) as f32 * 64.0;
        rng.fill(&mut input[..i * b]);
        rng.fill(&mut weights[..i * o]);
        // Odd cases per-channel (multipliers as random as the convolutions'), even per-tensor.
        let wide = r.wide_shifts_every != 0 && case % r.wide_shifts_every == 0;
        let shifts = if wide { (-40, 40) } else { (-10, 1) };
        channel_operands(&mut rng, &mut mults[..o], &mut bias[..o], shifts);
        let with_bias = (case % 3 != 2).then_some(&bias[..o]);
        let (x, w) = (&input[..i * b], &weights[..i * o]);
        let (ys, yr) = (&mut out_simd[..o * b], &mut out_ref[..o * b]);
        let (kernel, got, want) = if case % 2 == 1 {
            let Ok(p) = FcPerChannelParams::new(qi, qo, act) else {
                continue;
            };
            let m = &mults[..o];
            (
                "fully_connected_per_channel",
                int8::fully_connected_per_channel(&p, shape, m, x, w, with_bias, ys),
                portable::fully_connected_per_channel(&p, shape, m, x, w, with_bias, yr),
            )
        } else {
            let Ok(p) = FcParams::new(qi, 0.01, qo, act) else {
                continue;
            };
            (
                "fully_connected",
                int8::fully_connected(&p, shape, x, w, with_bias, ys),
                portable::fully_connected(&p, shape, x, w, with_bias, yr),
            )
        };
        ran += u32::from(compare(
            kernel,
            case,
            got,
            want,
            &out_simd[..o * b],
            &out_ref[..o * b],
        )?);
    }
    Ok(ran)
}

/// Longest elementwise case (elements).
const ELEMENTWISE_LEN: usize = 300;

/// A zero point: one of the extremes or 0 two times in five, else any int8 value.
fn zero_point(rng: &mut Rng) -> i32 {
    match rng.range(0, 4) {
        0 => i32::from(i8::MIN),
        1 => i32::from(i8::MAX),
        2 => 0,
        _ => rng.range(-128, 127),
    }
}

/// Compares the SIMD and portable ADD (or MUL) of one case: same shapes over `x` and `y`,
/// then `x`'s first `rows · c` elements with `y`'s first `c` repeated along the rows (a
/// per-channel vector broadcast, which runs each row on the same-shape loop) against the
/// portable same-shape kernel over the repeated operand. Returns how many of the two ran.
fn check_binary<P>(
    (kernel, case): (&'static str, u32),
    p: &P,
    (x, y): (&[i8], &[i8]),
    (rows, c): (usize, usize),
    (simd, broadcast, reference): (Binary<P>, BroadcastBinary<P>, Binary<P>),
) -> Result<u32, SimdCheckError> {
    let n = x.len();
    let (mut out_simd, mut out_ref) = ([0_i8; ELEMENTWISE_LEN], [0_i8; ELEMENTWISE_LEN]);
    let got = simd(p, x, y, &mut out_simd[..n]);
    let want = reference(p, x, y, &mut out_ref[..n]);
    let (s, r) = (&out_simd[..n], &out_ref[..n]);
    let mut ran = u32::from(compare(kernel, case, got, want, s, r)?);
    let m = rows * c;
    if m == 0 || m > n {
        return Ok(ran);
    }
    let mut repeated = [0_i8; ELEMENTWISE_LEN];
    for row in repeated[..m].chunks_exact_mut(c) {
        row.copy_from_slice(&y[..c]);
    }
    let (rows32, c32) = (rows as u32, c as u32);
    let Ok(shape) = BroadcastShape::new(&[rows32, c32], &[c32], &[rows32, c32]) else {
        return Ok(ran);
    };
    let got = broadcast(p, &shape, &x[..m], &y[..c], &mut out_simd[..m]);
    let want = reference(p, &x[..m], &repeated[..m], &mut out_ref[..m]);
    let (s, r) = (&out_simd[..m], &out_ref[..m]);
    ran += u32::from(compare(kernel, case, got, want, s, r)?);
    Ok(ran)
}

/// A same-shape binary kernel: parameters, the two inputs, the output.
type Binary<P> = fn(&P, &[i8], &[i8], &mut [i8]) -> Result<(), KernelError>;

/// A broadcasting binary kernel.
type BroadcastBinary<P> =
    fn(&P, &BroadcastShape, &[i8], &[i8], &mut [i8]) -> Result<(), KernelError>;

/// Runs `ranges.cases` random ADDs and as many MULs on both paths, each same-shape and with a
/// per-channel vector broadcast (rows of 1 to 40 channels): lengths 1 to 300 (every tail of
/// the vector loops), inputs starting at any byte, zero points at both int8 extremes, 0 or
/// anything, and every fused activation. ADD's input scales are equal, or one a fraction or
/// a multiple of the other, or just below it (a multiplier just below 2³¹); its output scales
/// give rescalings from a 1-bit to a 30-bit right shift, saturating often. MUL's output
/// scales shift the product from about 23 bits right to 31 left (larger multipliers fail
/// `MulParams::new`, and the case skips MUL). Returns how many ADDs and MULs ran, the
/// broadcasting ones included.
pub fn elementwise(ranges: &Ranges) -> Result<(u32, u32), SimdCheckError> {
    let mut rng = Rng(0x3c6e_f372);
    let mut a = [0_i8; ELEMENTWISE_LEN + 3];
    let mut b = [0_i8; ELEMENTWISE_LEN + 3];
    let (mut adds, mut muls) = (0, 0);
    for case in 0..ranges.cases {
        let n = rng.range(1, ELEMENTWISE_LEN as i32) as usize;
        let (ia, ib) = (rng.range(0, 3) as usize, rng.range(0, 3) as usize);
        rng.fill(&mut a);
        rng.fill(&mut b);
        let (x, y) = (&a[ia..ia + n], &b[ib..ib + n]);
        let c = rng.range(1, 40) as usize;
        let rows = n / c;
        let act = match rng.range(0, 3) {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => Activation::Relu6,
            _ => Activation::ReluN1To1,
        };
        let q = |rng: &mut Rng, scale: f32| Quant {
            scale,
            zero_point: zero_point(rng),
        };
        let qa = q(&mut rng, 0.01);
        let sb = match case % 4 {
            0 => 0.01,
            1 => 0.0025 * rng.range(1, 16) as f32,
            2 => 0.01 * rng.range(2, 9) as f32,
            _ => 0.01 * (1.0 - 1.0e-7 * rng.range(1, 30) as f32),
        };
        let qb = q(&mut rng, sb);
        let s_add = 0.000_05 * rng.range(1, 64) as f32 * (1 << rng.range(0, 14)) as f32;
        let q_add = q(&mut rng, s_add);
        let s_mul = 0.000_025 * (rng.range(1, 1000) as f32) * (1 << rng.range(0, 14)) as f32
            / (1u64 << rng.range(0, 36)) as f32;
        let q_mul = q(&mut rng, s_mul);
        if let Ok(p) = AddParams::new(qa, qb, q_add, act) {
            let kernels = (
                int8::add as Binary<AddParams>,
                int8::add_broadcast as BroadcastBinary<AddParams>,
                portable::add as Binary<AddParams>,
            );
            adds += check_binary(("add", case), &p, (x, y), (rows, c), kernels)?;
        }
        if let Ok(p) = MulParams::new(qa, qb, q_mul, act) {
            let kernels = (
                int8::mul as Binary<MulParams>,
                int8::mul_broadcast as BroadcastBinary<MulParams>,
                portable::mul as Binary<MulParams>,
            );
            muls += check_binary(("mul", case), &p, (x, y), (rows, c), kernels)?;
        }
    }
    Ok((adds, muls))
}
