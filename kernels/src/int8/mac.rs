//! Multiply-accumulate micro-kernels: the inner loops of the convolutions, the fully connected
//! rows ([`Mac::dot_rows2`]) and the average pool's sums, portable, with the Arm DSP extension
//! and with Helium.
//!
//! # Why
//!
//! A Cortex-M4 without SIMD spends most of an int8 convolution on loads, sign extensions and
//! loop control around each single multiply. The DSP extension (Armv7E-M, and Armv8-M
//! Mainline cores that have it) packs two 16-bit lanes in a register: `SXTB16` sign-extends
//! bytes 0 and 2 (or, rotated by 8, bytes 1 and 3) of a loaded word into the two lanes,
//! `SADD16` adds a zero-point offset to both lanes, and `SMLAD` adds both lane products to an
//! accumulator: two multiply-accumulates per instruction, four bytes per load. CMSIS-NN's
//! kernels are built the same way.
//!
//! Helium (MVE, Armv8.1-M: Cortex-M55, M85) has 128-bit vectors of sixteen bytes and
//! instructions that multiply sixteen int8 pairs and add them into a scalar (`VMLADAVA`), so its
//! best blocking differs: four pixels by one channel over the raw bytes, the input offset
//! applied through the filter row's sum ([`Mac::QUAD_CONV`], [`Mac::quad_channels`]), sixteen
//! depthwise channels per tap ([`Mac::depthwise_quads`]), and the requantization four lanes at
//! a time.
//!
//! # Design
//!
//! The convolution kernels are written once, generic over [`Mac`], the few operations whose
//! best form differs per instruction set; [`Portable`] implements them in plain Rust (the
//! reference, and the path for thumbv6m, RISC-V and the host) and, on DSP targets (the build
//! script's `cfg(npu_arm_dsp)`), `dsp::Dsp` implements them with inline assembly; on Helium
//! targets (`cfg(npu_arm_mve)`) `mve::Mve` does, delegating what Helium does not speed up to
//! `Dsp`. The larger operations (a block of pixels through every channel, a depthwise pixel)
//! are trait methods too, with the portable loop as their default, so that an implementation
//! can run a whole block in one assembly loop. [`Native`] is the one the public kernels use.
//! All give identical integers: every sum is taken modulo 2³² (the instructions wrap like
//! `wrapping_add`), where the order of the terms does not matter, and the requantization is
//! TFLM's on every path.
//!
//! Operand layouts chosen for `SXTB16`:
//!
//! - A *widened patch* holds one output pixel's taps, input offset added (`x + input_offset`,
//!   in `−255..=255`, so exact in 16 bits), as `u32` words of two `i16` lanes. Taps `4g..4g+4`
//!   of each full group are stored as the words `(x₀, x₂)` and `(x₁, x₃)` — the lanes `SXTB16`
//!   makes of a filter word `[w₀ w₁ w₂ w₃]` and of the same word rotated by 8 — so that two
//!   `SMLAD`s give `x₀w₀ + x₁w₁ + x₂w₂ + x₃w₃`. The last `K mod 4` taps follow in plain
//!   order, two per word (the second lane 0 when there is one left).
//! - Filter rows stay the int8 bytes of the model (OHWI), read four at a time.

use super::conv::{ChannelMultiplier, MAX_PATCH_TAPS};
use crate::fixed_point::multiply_by_quantized_multiplier;

/// Operations whose fastest form depends on the instruction set. Each returns exactly what
/// [`Portable`]'s does.
pub(crate) trait Mac {
    /// Widens four int8 taps (the little-endian bytes of `x`) with `offset` added, to the two
    /// words of a widened patch: `(x₀ + o, x₂ + o)` and `(x₁ + o, x₃ + o)`, low lane first.
    fn widen4(x: u32, offset: i32) -> (u32, u32);

    /// The 2×2 block of dot products of the two widened patches of `pair` (their first `words`
    /// words, two per group of four taps) with two filter rows (`w0`, `w1`, four bytes per
    /// group), over the whole groups all four hold: `[p0·w0, p0·w1, p1·w0, p1·w1]`, wrapping.
    fn dot_2x2(pair: &PatchPair, words: usize, w0: &[i8], w1: &[i8]) -> [i32; 4];

    /// Depthwise accumulation over four channels at the taps of `list`: `acc[i] += w[i] ·
    /// (x[i] + offset)` for the four bytes at `x[x_offset + c0..]` and `w[w_offset + c0..]`
    /// of each tap, wrapping. Does nothing when a tap's bytes would lie outside `x` or `w`.
    fn mac4(acc: [i32; 4], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) -> [i32; 4];

    /// [`mac4`](Self::mac4) on each whole quad of `acc` in turn, quad `k` being channels
    /// `c0 + 4k..c0 + 4k + 4`: a run of channels through the same taps.
    #[inline(always)]
    fn mac4_run(acc: &mut [i32], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) {
        for (k, a) in acc.chunks_exact_mut(4).enumerate() {
            let sums = Self::mac4([a[0], a[1], a[2], a[3]], list, x, w, c0 + 4 * k, offset);
            a.copy_from_slice(&sums);
        }
    }

    /// The int8 output of an accumulator (bias included): TFLM's
    /// `MultiplyByQuantizedMultiplier` by `m`, plus `offset`, clamped to `min..=max`.
    fn requantize(acc: i32, m: ChannelMultiplier, offset: i32, min: i32, max: i32) -> i8;

    /// [`requantize`](Self::requantize) of each accumulator of `acc` (bias included) by the
    /// multiplier of the same index into `out`, over the shortest of the three.
    /// `fast` tells that [`fast_requantize`](Self::fast_requantize) holds for `multipliers`.
    #[inline(always)]
    fn requantize_run(
        acc: &[i32],
        multipliers: &[ChannelMultiplier],
        fast: bool,
        out: &mut [i8],
        (offset, min, max): (i32, i32, i32),
    ) {
        let _ = fast;
        for ((o, &a), &m) in out.iter_mut().zip(acc).zip(multipliers) {
            *o = Self::requantize(a, m, offset, min, max);
        }
    }

    /// Whether [`requantize_run`](Self::requantize_run)'s fast form covers every multiplier
    /// of `multipliers` (checked once per layer, outside the inner loops): by default the
    /// multipliers [`right_shifts_only`] accepts.
    #[inline(always)]
    fn fast_requantize(multipliers: &[ChannelMultiplier]) -> bool {
        right_shifts_only(multipliers)
    }

    /// Whether the one-group convolutions run on [`dot_4x1`](Self::dot_4x1) blocks (four
    /// pixels by one channel over the raw int8 taps, the shape 16-lane byte vectors want)
    /// rather than on [`dot_2x2`](Self::dot_2x2) over widened patches.
    const QUAD_CONV: bool = false;

    /// The dot products of the rows of `x` (four output pixels' raw int8 taps, no offset
    /// added) with the filter row `w`, and the sum of `w`'s bytes, all wrapping, over the
    /// first `n` bytes of each, `n` the shortest length of the five:
    /// `([x₀·w, x₁·w, x₂·w, x₃·w], Σw)`.
    #[inline(always)]
    fn dot_4x1(x: [&[i8]; 4], w: &[i8]) -> ([i32; 4], i32) {
        Portable::dot_4x1(x, w)
    }

    /// The depthwise outputs (depth multiplier 1) of one pixel's channels `0..out.len()`
    /// (whole quads; the rest are left alone) over the taps of `ch.list`, the bias starting
    /// each sum: by default blocks of [`DW_BLOCK`] channels, each accumulated by
    /// [`mac4_run`](Self::mac4_run) and then requantized by
    /// [`requantize_run`](Self::requantize_run), in a loop of its own so that it gets the
    /// registers it needs.
    #[inline(always)]
    fn depthwise_quads(ch: &DepthwiseChannels<'_>, out: &mut [i8]) {
        depthwise_blocks::<Self>(ch, 0, out);
    }

    /// The dot products of two filter rows `w0`, `w1` with one input row `x`, `offset` added
    /// to every input byte, over the first `n` bytes of each (`n` the shortest length of the
    /// three), wrapping: `[Σ w0·(x + offset), Σ w1·(x + offset)]` (the fully connected
    /// kernel's rows, two output features sharing the input's loads).
    #[inline(always)]
    fn dot_rows2(x: &[i8], offset: i32, w0: &[i8], w1: &[i8]) -> [i32; 2] {
        let n = x.len().min(w0.len()).min(w1.len());
        let (x, w0, w1) = (&x[..n], &w0[..n], &w1[..n]);
        let dot = |w: &[i8]| {
            w.iter().zip(x).fold(0_i32, |acc, (&w, &x)| {
                acc.wrapping_add(i32::from(w) * (i32::from(x) + offset))
            })
        };
        [dot(w0), dot(w1)]
    }

    /// Whether the average pool sums sixteen channels at a time with
    /// [`window_sum16`](Self::window_sum16) rather than in its plain block loop.
    const WINDOW_SUM16: bool = false;

    /// The sums of sixteen channels over a window of `rows × cols` pixels: lane `i` is
    /// `Σ image[start + r · row_step + c · col_step + i]` over `r < rows`, `c < cols`,
    /// wrapping. All zeros when a pixel's sixteen bytes would lie outside `image`.
    #[inline(always)]
    fn window_sum16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> [i32; 16] {
        let mut acc = [0_i32; 16];
        if !window_fits(image.len(), start, (rows, row_step), (cols, col_step)) {
            return acc;
        }
        for r in 0..rows {
            for c in 0..cols {
                let at = start + r * row_step + c * col_step;
                for (a, &v) in acc.iter_mut().zip(&image[at..at + 16]) {
                    *a = a.wrapping_add(i32::from(v));
                }
            }
        }
        acc
    }

    /// Whether the max pool takes sixteen channels at a time with
    /// [`window_max16`](Self::window_max16) rather than its plain block loop.
    const WINDOW_MAX16: bool = false;

    /// The largest byte of each of sixteen channels over a window of `rows × cols` pixels
    /// laid out as [`window_sum16`](Self::window_sum16)'s. `None` when the window is empty or
    /// a pixel's sixteen bytes would lie outside `image` (the caller then takes its own loop).
    #[inline(always)]
    fn window_max16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> Option<[i8; 16]> {
        if !window_inside(image.len(), start, (rows, row_step), (cols, col_step)) {
            return None;
        }
        let mut max = [i8::MIN; 16];
        for r in 0..rows {
            for c in 0..cols {
                let at = start + r * row_step + c * col_step;
                for (m, &v) in max.iter_mut().zip(&image[at..at + 16]) {
                    *m = (*m).max(v);
                }
            }
        }
        Some(max)
    }

    /// What [`requantize4`](Self::requantize4) needs of a layer besides the multiplier,
    /// prepared once per layer by [`quad_output`](Self::quad_output).
    type QuadOutput;

    /// The [`QuadOutput`](Self::QuadOutput) for the output offset, range
    /// `(offset, min, max)`, the distance `stride` between two pixels' bytes of a channel and
    /// the layer's `multipliers`.
    fn quad_output(
        requant: (i32, i32, i32),
        stride: usize,
        multipliers: &[ChannelMultiplier],
    ) -> Self::QuadOutput;

    /// One block of four output pixels through every output channel: for each channel `c`
    /// (filter row `c` of `taps` bytes, `multipliers[c]`, the bias `bias[c]` or 0), the
    /// [`dot_4x1`](Self::dot_4x1) products of `windows` with the row plus
    /// `bias[c] + input_offset · Σw`, requantized ([`requantize4`](Self::requantize4)) into
    /// the four pixels' bytes of channel `c` of `out` (pixel `k`'s at `c + k · stride`), over
    /// the channels all of `filter`, `multipliers` and `bias` hold.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn quad_channels(
        windows: [&[i8]; 4],
        filter: &[i8],
        taps: usize,
        multipliers: &[ChannelMultiplier],
        bias: Option<&[i32]>,
        input_offset: i32,
        q: &Self::QuadOutput,
        out: &mut [i8],
    ) {
        let rows = (windows, filter, taps);
        quad_channels_each::<Self>(rows, multipliers, bias, input_offset, q, out);
    }

    /// [`requantize`](Self::requantize) of four accumulators of one channel (one multiplier),
    /// each plus `base`, into `out[0]`, `out[s]`, `out[2s]`, `out[3s]` (`s` the stride of `q`:
    /// four pixels' bytes of one channel in an NHWC output). Does nothing when `out` is too
    /// short for the last.
    fn requantize4(
        acc: [i32; 4],
        base: i32,
        m: ChannelMultiplier,
        q: &Self::QuadOutput,
        out: &mut [i8],
    );
}

/// Whether every pixel's sixteen bytes of a [`Mac::window_sum16`] window lie inside an image
/// of `len` bytes (the last pixel's are the furthest).
#[inline(always)]
pub(crate) fn window_fits(
    len: usize,
    start: usize,
    (rows, row_step): (usize, usize),
    (cols, col_step): (usize, usize),
) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    (rows - 1)
        .checked_mul(row_step)
        .zip((cols - 1).checked_mul(col_step))
        .and_then(|(r, c)| start.checked_add(r)?.checked_add(c)?.checked_add(16))
        .is_some_and(|end| end <= len)
}

/// Whether a window has a pixel and [`window_fits`] in an image of `len` bytes: what the
/// assembly window loops, which run at least once, need.
#[inline(always)]
pub(crate) fn window_inside(
    len: usize,
    start: usize,
    rows: (usize, usize),
    cols: (usize, usize),
) -> bool {
    rows.0 != 0 && cols.0 != 0 && window_fits(len, start, rows, cols)
}

/// Output channels accumulated together by [`Mac::depthwise_quads`]' default blocks.
pub(crate) const DW_BLOCK: usize = 32;

/// One pixel of a depthwise convolution with depth multiplier 1, for
/// [`Mac::depthwise_quads`]: channel `c` of tap `[xo, wo]` of `list` is the input byte
/// `input[xo + c]` and the weight `filter[wo + c]`.
pub(crate) struct DepthwiseChannels<'a> {
    /// The pixel's taps inside the image.
    pub(crate) list: &'a TapList,
    /// The input image.
    pub(crate) input: &'a [i8],
    /// The filter.
    pub(crate) filter: &'a [i8],
    /// The per-channel bias, if any.
    pub(crate) bias: Option<&'a [i32]>,
    /// The per-channel multipliers.
    pub(crate) multipliers: &'a [ChannelMultiplier],
    /// [`Mac::fast_requantize`] of `multipliers`.
    pub(crate) fast: bool,
    /// Added to every input byte.
    pub(crate) input_offset: i32,
    /// The output offset and range.
    pub(crate) requant: (i32, i32, i32),
}

/// [`Mac::depthwise_quads`]' default, from channel `c0` on (the channels before it are left
/// alone): blocks of [`DW_BLOCK`] channels on [`Mac::mac4_run`] and [`Mac::requantize_run`].
/// Stops at a block the bias or multipliers do not cover.
#[inline(always)]
pub(crate) fn depthwise_blocks<M: Mac + ?Sized>(
    ch: &DepthwiseChannels<'_>,
    c0: usize,
    out: &mut [i8],
) {
    let quads = out.len() / 4 * 4;
    let mut acc = [0_i32; DW_BLOCK];
    for b0 in (c0..quads).step_by(DW_BLOCK) {
        let n = DW_BLOCK.min(quads - b0);
        let Some(multipliers) = ch.multipliers.get(b0..b0 + n) else {
            return;
        };
        // The bias starts the sums (they wrap: the order does not matter).
        match ch.bias.map(|b| b.get(b0..b0 + n)) {
            Some(Some(b)) => acc[..n].copy_from_slice(b),
            Some(None) => return,
            None => acc[..n].fill(0),
        }
        M::mac4_run(
            &mut acc[..n],
            ch.list,
            ch.input,
            ch.filter,
            b0,
            ch.input_offset,
        );
        M::requantize_run(
            &acc[..n],
            multipliers,
            ch.fast,
            &mut out[b0..b0 + n],
            ch.requant,
        );
    }
}

/// [`Mac::quad_channels`]' default: one channel after the other on [`Mac::dot_4x1`] and
/// [`Mac::requantize4`] (`rows` the windows, the filter and the taps per row).
#[inline(always)]
pub(crate) fn quad_channels_each<M: Mac + ?Sized>(
    (windows, filter, taps): ([&[i8]; 4], &[i8], usize),
    multipliers: &[ChannelMultiplier],
    bias: Option<&[i32]>,
    input_offset: i32,
    q: &M::QuadOutput,
    out: &mut [i8],
) {
    if taps == 0 {
        return;
    }
    let rows = filter.chunks_exact(taps).zip(multipliers).enumerate();
    for (c, (w, &m)) in rows {
        let b = match bias {
            Some(b) => match b.get(c) {
                Some(&b) => b,
                None => return,
            },
            None => 0,
        };
        let (acc, sum) = M::dot_4x1(windows, w);
        let base = input_offset.wrapping_mul(sum).wrapping_add(b);
        if let Some(o) = out.get_mut(c..) {
            M::requantize4(acc, base, m, q, o);
        }
    }
}

/// [`Portable`]'s [`Mac::QuadOutput`]: the output offset, range and stride as given.
pub(crate) struct QuadOutput {
    requant: (i32, i32, i32),
    stride: usize,
}

/// [`Mac::requantize4`] on [`Mac::requantize`], one accumulator after the other.
#[inline(always)]
pub(crate) fn requantize4_scalar<M: Mac + ?Sized>(
    acc: [i32; 4],
    base: i32,
    m: ChannelMultiplier,
    q: &QuadOutput,
    out: &mut [i8],
) {
    let ((offset, min, max), stride) = (q.requant, q.stride);
    if stride.checked_mul(3).is_none_or(|last| last >= out.len()) {
        return;
    }
    for (k, a) in acc.into_iter().enumerate() {
        out[k * stride] = M::requantize(a.wrapping_add(base), m, offset, min, max);
    }
}

/// Whether every multiplier of `multipliers` shifts right (shift in −31..=0) and has a
/// multiplier other than `i32::MIN`: the multipliers whose requantization needs no
/// saturation, which the DSP path computes without branches. Every scale a converter emits
/// gives such multipliers; checking once per layer keeps the check out of the inner loops.
pub(crate) fn right_shifts_only(multipliers: &[ChannelMultiplier]) -> bool {
    multipliers
        .iter()
        .all(|m| (-31..=0).contains(&m.shift()) && m.multiplier() != i32::MIN)
}

/// The plain-Rust [`Mac`]: the reference every other implementation must equal.
pub(crate) struct Portable;

/// The [`Mac`] the public kernels run on this target.
#[cfg(not(npu_arm_dsp))]
pub(crate) type Native = Portable;
/// The [`Mac`] the public kernels run on this target.
#[cfg(all(npu_arm_dsp, not(npu_arm_mve)))]
pub(crate) type Native = dsp::Dsp;
/// The [`Mac`] the public kernels run on this target.
#[cfg(npu_arm_mve)]
pub(crate) type Native = mve::Mve;

/// The two `i16` lanes of a widened-patch word, low first.
#[inline(always)]
fn lanes(word: u32) -> (i32, i32) {
    (i32::from(word as i16), i32::from((word >> 16) as i16))
}

/// A word of two `i16` lanes, low first (each value truncated to 16 bits).
#[inline(always)]
pub(crate) fn pack(lo: i32, hi: i32) -> u32 {
    u32::from(lo as u16) | (u32::from(hi as u16) << 16)
}

/// The signed bytes of a little-endian word.
#[inline(always)]
fn bytes(word: u32) -> [i32; 4] {
    word.to_le_bytes().map(|b| i32::from(b as i8))
}

/// Four bytes as a little-endian word (the caller passes exactly four).
#[inline(always)]
pub(crate) fn word(b: &[i8]) -> u32 {
    match b {
        [a, b, c, d, ..] => u32::from_le_bytes([*a as u8, *b as u8, *c as u8, *d as u8]),
        _ => 0,
    }
}

impl Mac for Portable {
    type QuadOutput = QuadOutput;

    #[inline(always)]
    fn quad_output(
        requant: (i32, i32, i32),
        stride: usize,
        _multipliers: &[ChannelMultiplier],
    ) -> QuadOutput {
        QuadOutput { requant, stride }
    }

    #[inline(always)]
    fn requantize4(acc: [i32; 4], base: i32, m: ChannelMultiplier, q: &QuadOutput, out: &mut [i8]) {
        requantize4_scalar::<Self>(acc, base, m, q, out);
    }

    #[inline(always)]
    fn requantize(acc: i32, m: ChannelMultiplier, offset: i32, min: i32, max: i32) -> i8 {
        let scaled = multiply_by_quantized_multiplier(acc, m.multiplier(), m.shift());
        // max/min rather than clamp: never panics, even for an empty range.
        scaled.wrapping_add(offset).max(min).min(max) as i8
    }

    #[inline(always)]
    fn widen4(x: u32, offset: i32) -> (u32, u32) {
        let [x0, x1, x2, x3] = bytes(x);
        (
            pack(x0 + offset, x2 + offset),
            pack(x1 + offset, x3 + offset),
        )
    }

    #[inline(always)]
    fn dot_2x2(pair: &PatchPair, words: usize, w0: &[i8], w1: &[i8]) -> [i32; 4] {
        let [p0, p1] = &pair.words;
        let words = words.min(PATCH_WORDS);
        let (p0, p1) = (&p0[..words], &p1[..words]);
        let (mut a00, mut a01, mut a10, mut a11) = (0_i32, 0_i32, 0_i32, 0_i32);
        let groups = p0
            .chunks_exact(2)
            .zip(p1.chunks_exact(2))
            .zip(w0.chunks_exact(4).zip(w1.chunks_exact(4)));
        // Plain scalar code the compiler keeps in registers (and vectorises on the host). A
        // group's four products fit an i32 without wrapping (|x| ≤ 255, |w| ≤ 128); the
        // accumulators wrap.
        for ((a, b), (wa, wb)) in groups {
            let ((x0, x2), (x1, x3)) = (lanes(a[0]), lanes(a[1]));
            let ((y0, y2), (y1, y3)) = (lanes(b[0]), lanes(b[1]));
            // Element by element: `array::map` stays a loop at opt-level "s".
            let (u0, u1, u2, u3) = (
                i32::from(wa[0]),
                i32::from(wa[1]),
                i32::from(wa[2]),
                i32::from(wa[3]),
            );
            let (v0, v1, v2, v3) = (
                i32::from(wb[0]),
                i32::from(wb[1]),
                i32::from(wb[2]),
                i32::from(wb[3]),
            );
            a00 = a00.wrapping_add(x0 * u0 + x1 * u1 + x2 * u2 + x3 * u3);
            a01 = a01.wrapping_add(x0 * v0 + x1 * v1 + x2 * v2 + x3 * v3);
            a10 = a10.wrapping_add(y0 * u0 + y1 * u1 + y2 * u2 + y3 * u3);
            a11 = a11.wrapping_add(y0 * v0 + y1 * v1 + y2 * v2 + y3 * v3);
        }
        [a00, a01, a10, a11]
    }

    #[inline(always)]
    fn dot_4x1(x: [&[i8]; 4], w: &[i8]) -> ([i32; 4], i32) {
        let n = x.iter().fold(w.len(), |n, row| n.min(row.len()));
        let w = &w[..n];
        let mut acc = [0_i32; 4];
        for (a, row) in acc.iter_mut().zip(x) {
            *a = row.iter().zip(w).fold(0_i32, |s, (&x, &w)| {
                s.wrapping_add(i32::from(x) * i32::from(w))
            });
        }
        let sum = w.iter().fold(0_i32, |s, &w| s.wrapping_add(i32::from(w)));
        (acc, sum)
    }

    #[inline(always)]
    fn mac4(acc: [i32; 4], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) -> [i32; 4] {
        if !list.fits(x.len(), w.len(), c0) {
            return acc;
        }
        let [mut a0, mut a1, mut a2, mut a3] = acc;
        for &[xo, wo] in list.taps() {
            // In bounds for every tap (checked above); the slices keep it panic-free anyway.
            let (Some(xs), Some(ws)) = (
                x.get(xo as usize + c0..xo as usize + c0 + 4),
                w.get(wo as usize + c0..wo as usize + c0 + 4),
            ) else {
                continue;
            };
            let tap = |x: i8, w: i8| i32::from(w) * (i32::from(x) + offset);
            a0 = a0.wrapping_add(tap(xs[0], ws[0]));
            a1 = a1.wrapping_add(tap(xs[1], ws[1]));
            a2 = a2.wrapping_add(tap(xs[2], ws[2]));
            a3 = a3.wrapping_add(tap(xs[3], ws[3]));
        }
        [a0, a1, a2, a3]
    }
}

/// Most taps of a depthwise window the four-channel path takes (a 7×7 window has 49); larger
/// windows run the kernel's channel-block loop.
pub(crate) const MAX_WINDOW_TAPS: usize = 64;

/// One output pixel's taps inside the image, as `[input offset, filter offset]` pairs (of
/// each tap's channel 0), for [`Mac::mac4`].
pub(crate) struct TapList {
    pairs: [[u32; 2]; MAX_WINDOW_TAPS],
    len: usize,
    max_x: usize,
    max_w: usize,
}

impl TapList {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self {
            pairs: [[0; 2]; MAX_WINDOW_TAPS],
            len: 0,
            max_x: 0,
            max_w: 0,
        }
    }

    /// Empties the list.
    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.max_x = 0;
        self.max_w = 0;
    }

    /// Lists the taps of a window (and nothing else): `rows × cols` taps, the first at
    /// offsets `start`, each row `row_steps` further than the one before, each tap of a row
    /// `col_steps` further than the one before it. `false` (and the list empty) when they do
    /// not fit the list or an offset exceeds `u32`. One pass with the length and maxima in
    /// registers, for the once-per-pixel listing of a depthwise window.
    #[inline(always)]
    pub(crate) fn set_window(
        &mut self,
        start: (usize, usize),
        (rows, row_steps): (usize, (usize, usize)),
        (cols, col_steps): (usize, (usize, usize)),
    ) -> bool {
        self.clear();
        let n = rows.saturating_mul(cols);
        if n == 0 {
            return true;
        }
        if n > MAX_WINDOW_TAPS {
            return false;
        }
        // The steps are non-negative, so the last tap has the largest offsets.
        let last = |s: usize, row: usize, col: usize| {
            (rows - 1)
                .checked_mul(row)
                .zip((cols - 1).checked_mul(col))
                .and_then(|(r, c)| s.checked_add(r)?.checked_add(c))
                .filter(|&v| u32::try_from(v).is_ok())
        };
        let (Some(max_x), Some(max_w)) = (
            last(start.0, row_steps.0, col_steps.0),
            last(start.1, row_steps.1, col_steps.1),
        ) else {
            return false;
        };
        // Every offset is at most the last one, which fits a u32 (checked above).
        let (row_x, row_w, col_x, col_w) = (
            row_steps.0 as u32,
            row_steps.1 as u32,
            col_steps.0 as u32,
            col_steps.1 as u32,
        );
        let (mut x, mut w) = (start.0 as u32, start.1 as u32);
        for row in self.pairs[..n].chunks_exact_mut(cols) {
            let (mut tx, mut tw) = (x, w);
            for pair in row {
                *pair = [tx, tw];
                tx = tx.wrapping_add(col_x);
                tw = tw.wrapping_add(col_w);
            }
            x = x.wrapping_add(row_x);
            w = w.wrapping_add(row_w);
        }
        self.len = n;
        self.max_x = max_x;
        self.max_w = max_w;
        true
    }

    /// The taps.
    #[inline(always)]
    pub(crate) fn taps(&self) -> &[[u32; 2]] {
        &self.pairs[..self.len.min(MAX_WINDOW_TAPS)]
    }

    /// Whether the four bytes from channel `c0` of every tap lie inside an input of `x_len`
    /// and a filter of `w_len` bytes.
    #[inline(always)]
    pub(crate) fn fits(&self, x_len: usize, w_len: usize, c0: usize) -> bool {
        let inside = |max: usize, len: usize| {
            max.checked_add(c0)
                .and_then(|v| v.checked_add(4))
                .is_some_and(|end| end <= len)
        };
        inside(self.max_x, x_len) && inside(self.max_w, w_len)
    }
}

/// Widens `taps` (one output pixel's int8 taps in filter order) with `offset` added into the
/// widened-patch layout of [the module docs](self). `out` has [`widened_words`]`(taps.len())`
/// words (extra words are left alone).
#[inline(always)]
pub(crate) fn widen<M: Mac>(taps: &[i8], offset: i32, out: &mut [u32]) {
    let full = taps.len() / 4 * 4;
    let (head, tail) = taps.split_at(full);
    let (head_out, tail_out) = out.split_at_mut((full / 2).min(out.len()));
    for (x, o) in head.chunks_exact(4).zip(head_out.chunks_exact_mut(2)) {
        let (even, odd) = M::widen4(word(x), offset);
        o[0] = even;
        o[1] = odd;
    }
    for (pair, o) in tail.chunks(2).zip(tail_out) {
        let lo = pair.first().map_or(0, |&x| i32::from(x) + offset);
        let hi = pair.get(1).map_or(0, |&x| i32::from(x) + offset);
        *o = pack(lo, hi);
    }
}

/// Words of a widened patch of `taps` taps.
#[inline]
pub(crate) const fn widened_words(taps: usize) -> usize {
    taps / 4 * 2 + (taps % 4).div_ceil(2)
}

/// Words of one widened patch of [`MAX_PATCH_TAPS`] taps.
pub(crate) const PATCH_WORDS: usize = widened_words(MAX_PATCH_TAPS);

/// Two widened patches, one after the other in memory (the DSP loop reads the second at a
/// fixed offset from the first).
#[repr(C)]
pub(crate) struct PatchPair {
    /// The patches.
    pub(crate) words: [[u32; PATCH_WORDS]; 2],
}

impl PatchPair {
    /// Two patches of zeros. (Spelled as two arrays, not `[[0; PATCH_WORDS]; 2]`: the
    /// compiler zeroes that with a loop into a temporary it then copies, 2,304 bytes more of
    /// the convolution's stack frame; each array here is zeroed where it lies.)
    pub(crate) const fn new() -> Self {
        Self {
            words: [[0; PATCH_WORDS], [0; PATCH_WORDS]],
        }
    }
}

/// The 2×2 dot products of `pair`'s two widened patches of `taps` taps with two filter rows of
/// `taps` bytes: [`Mac::dot_2x2`] over the full groups, the tail in plain Rust.
#[inline(always)]
pub(crate) fn dot_2x2<M: Mac>(pair: &PatchPair, taps: usize, w0: &[i8], w1: &[i8]) -> [i32; 4] {
    let full = taps / 4 * 4;
    let acc = M::dot_2x2(pair, full / 2, w0, w1);
    if taps == full {
        return acc;
    }
    let t = dot_tail(pair, taps, w0, w1);
    [0, 1, 2, 3].map(|i| acc[i].wrapping_add(t[i]))
}

/// The 2×2 dot products of the last `taps mod 4` taps (plain order, two per word), kept out of
/// line so that the blocks without a tail stay tight.
#[inline(never)]
fn dot_tail(pair: &PatchPair, taps: usize, w0: &[i8], w1: &[i8]) -> [i32; 4] {
    let full = taps / 4 * 4;
    let words = widened_words(taps).min(PATCH_WORDS);
    let from = (full / 2).min(words);
    let (t0, t1) = (&pair.words[0][from..words], &pair.words[1][from..words]);
    let (w0t, w1t) = (w0.get(full..).unwrap_or(&[]), w1.get(full..).unwrap_or(&[]));
    let tail = |p: &[u32], w: &[i8]| {
        p.iter()
            .flat_map(|&word| {
                let (lo, hi) = lanes(word);
                [lo, hi]
            })
            .zip(w)
            .fold(0_i32, |s, (x, &w)| s.wrapping_add(x * i32::from(w)))
    };
    [tail(t0, w0t), tail(t0, w1t), tail(t1, w0t), tail(t1, w1t)]
}

#[cfg(npu_arm_dsp)]
#[allow(unsafe_code)]
mod dsp;

#[cfg(npu_arm_mve)]
#[allow(unsafe_code)]
pub(super) mod mve;
