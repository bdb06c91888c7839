//! [`Mac`] with Helium, the M-profile Vector Extension (`cfg(npu_arm_mve)`: Armv8.1-M cores
//! such as the Cortex-M55 and M85).
//!
//! Helium has eight 128-bit vector registers (`q0`–`q7`) of sixteen int8, eight int16 or four
//! int32 lanes, and tail predication: a loop started with `DLSTP.8 lr, n` runs `⌈n / 16⌉`
//! times and the lanes past `n` are off in its last pass (loads leave them zero and read no
//! memory there, reductions skip them). The kernels:
//!
//! - [`quad_channels`](Mac::quad_channels) (the `quads` convolution path;
//!   [`dot_4x1`](Mac::dot_4x1) and [`requantize4`](Mac::requantize4) for single calls): one
//!   assembly loop takes a block of four pixels through every output channel. Per sixteen taps: one filter load, its sum (`VADDVA.S8`)
//!   and four input loads with four `VMLADAVA.S8` (sixteen multiply-accumulates into a scalar
//!   each), 64 MACs in eleven instructions; then the bias and `input_offset · Σw`, the
//!   requantization of the four pixels together and one scatter store (`VSTRB.32` at
//!   `0, s, 2s, 3s`). The four scalar sums reach a vector register through memory: the
//!   two-lane `VMOV q[2], q[0], r, r` put them in the wrong lanes (QEMU 7.2).
//! - [`depthwise_quads`](Mac::depthwise_quads) (depth multiplier 1): one assembly loop per
//!   pixel over blocks of sixteen channels, the input widened to int16 with the offset added
//!   (`x + input_offset` fits: `−255..=255`), the products of even and odd lanes
//!   (`VMULLB`/`VMULLT.S16`, exact in 32 bits) added into four int32 accumulator vectors,
//!   which `VLD2`/`VST2` de- and re-interleave into channel order, then requantized;
//!   [`mac4_run`](Mac::mac4_run) is the same tap loop for a caller's accumulators.
//! - [`window_sum16`](Mac::window_sum16) (average pool): sixteen channels summed per window
//!   pixel in four int32 vectors; [`window_max16`](Mac::window_max16) (max pool): one
//!   `VMAX.S8` per window pixel, from int8's minimum (TFLM's starting value).
//! - [`dot_rows2`](Mac::dot_rows2) (fully connected): per sixteen input bytes one input load
//!   and, for each of the two weight rows, one load, a `VMLADAVA.S8` and its sum (`VADDVA.S8`);
//!   the input offset enters through the sums afterwards.
//! - The requantization ([`requantize_run`](Mac::requantize_run) and the loops above), four
//!   outputs at a time, bit-exact with TFLM's `MultiplyByQuantizedMultiplier`: `VSHL` by the
//!   left shift (wrapping, as TFLM's `x · 2^left`), `VQRDMULH` (exactly gemmlowp's
//!   `SaturatingRoundingDoublingHighMul`: `(2ab + 2³¹) >> 32` rounds halves up, as gemmlowp's
//!   nudge and truncating division do, and saturates the one overflow), then the rounding
//!   right shift: `VRSHL` rounds halves up, gemmlowp's `RoundingDivideByPOT` away from zero,
//!   so negative values are first lowered by one (`VQADD` of `x & −right >> 31`, which is −1
//!   exactly for negative `x` and a non-zero shift, as CMSIS-NN's `arm_requantize_mve`
//!   does). Shifts of −31..=31 (every shift TFLM produces) take this form; a layer with any
//!   other shift takes the scalar one.
//!
//! What Helium does not speed up (the 2×2 convolution blocks, scalar requantization) is the
//! DSP extension's ([`Dsp`]), which every Helium core has.
//!
//! # Safety of the `asm!` blocks
//!
//! Each block reads only memory its function's checks (argued at each block) put in bounds,
//! writes only the output it is given, and names every register it changes: the vector
//! registers as `out("qN") _` clobbers, `lr` (the loop counter) likewise, pointers and counts
//! as `inout(..) => _`. The instructions exist on every core this module is compiled for (the
//! build script enables it only for cores with MVE, whose inline assembly does not assemble
//! otherwise). `VQRDMULH`/`VQADD` may set the sticky saturation flag `FPSCR.QC`, which no Rust
//! code reads.

use core::arch::asm;

/// The assembly lines of gemmlowp's `RoundingDivideByPOT` on the four lanes of `$x` (module
/// docs: `VRSHL` rounds halves up, so a negative lane shifted right is lowered by one first),
/// `$t` clobbered. Three forms, by where the shift is:
///
/// - `vector`: a vector of per-lane shifts, `min(shift, 0)` (whose sign bits say which lanes
///   shift right);
/// - `scalar`: one shift in a general register, splatted into `$t` for its sign;
/// - `splat`: one shift in a general register, already splatted into `$sign` outside a loop.
macro_rules! rounding_divide_by_pot {
    (vector $x:literal, $t:literal, $shift:literal) => {
        concat!(
            "vand       ", $t, ", ", $x, ", ", $shift, "\n",
            rounding_divide_by_pot!(@lower $x, $t),
            "vrshl.s32  ", $x, ", ", $x, ", ", $shift,
        )
    };
    (scalar $x:literal, $t:literal, $shift:literal) => {
        concat!(
            "vdup.32    ", $t, ", ", $shift, "\n",
            rounding_divide_by_pot!(splat $x, $t, $t, $shift),
        )
    };
    (splat $x:literal, $t:literal, $sign:literal, $shift:literal) => {
        concat!(
            "vand       ", $t, ", ", $sign, ", ", $x, "\n",
            rounding_divide_by_pot!(@lower $x, $t),
            "vrshl.s32  ", $x, ", ", $shift,
        )
    };
    // `$x += ($t >> 31)`: −1 exactly for the lanes whose sign `$t` kept.
    (@lower $x:literal, $t:literal) => {
        concat!(
            "vshr.s32   ", $t, ", ", $t, ", #31\n",
            "vqadd.s32  ", $x, ", ", $x, ", ", $t, "\n",
        )
    };
}
pub(crate) use rounding_divide_by_pot;

use super::dsp::Dsp;
use super::{
    depthwise_blocks, quad_channels_each, window_inside, ChannelMultiplier, DepthwiseChannels, Mac,
    PatchPair, TapList,
};

/// [`Mac`] on Helium, the rest on the DSP extension.
pub(crate) struct Mve;

/// Channels of one [`taps16`] pass.
const LANES: usize = 16;

/// What [`Mve::requantize4`] needs of a layer, laid out for vector loads (`VLDRW`).
#[repr(C, align(16))]
pub(crate) struct QuadOutput {
    /// The output offset in each lane.
    offset: [i32; 4],
    /// The activation minimum in each lane.
    min: [i32; 4],
    /// The activation maximum in each lane.
    max: [i32; 4],
    /// Byte offsets of the four pixels' outputs: `0, s, 2s, 3s` (a scatter store's).
    scatter: [u32; 4],
    /// Outputs must reach past this index (`3s`); `usize::MAX` when `3s` overflows `u32`.
    last: usize,
    /// Whether every multiplier of the layer has a shift the vector requantization covers.
    vector: bool,
}

/// One [`Mve::quad_channels`] call's operands, read by its assembly loop at fixed offsets.
#[repr(C)]
struct QuadBlock {
    /// The four pixels' windows.
    x: [*const i8; 4],
    /// Taps per window (and filter row).
    taps: usize,
    /// What to add to the filter pointer after a row's loop (which advanced it by the taps
    /// rounded up to sixteen) to reach the next row: minus the rounding.
    w_back: isize,
    /// The next channel's bias (or a zero, with `bias_step` 0).
    bias: *const i32,
    /// Bytes from one channel's bias to the next: 4, or 0 without a bias.
    bias_step: usize,
    /// The input offset.
    input_offset: i32,
    /// The next channel's multiplier.
    m: *const ChannelMultiplier,
    /// The next channel's output byte of the first pixel.
    out: *mut i8,
    /// Channels left.
    channels: usize,
    /// The four accumulators of the current channel, on their way to a vector register.
    acc: [i32; 4],
}

/// The bias of a convolution without one.
static ZERO_BIAS: i32 = 0;

/// The bias of sixteen depthwise channels without one.
static ZERO_BIAS16: [i32; LANES] = [0; LANES];

/// One [`Mve::depthwise_quads`] call's operands, read by its assembly loop at fixed offsets.
#[repr(C)]
struct DepthwisePixel {
    /// The `[x offset, filter offset]` pairs of the taps.
    list: *const [u32; 2],
    /// How many taps.
    taps: usize,
    /// The next sixteen channels' bias (or zeros, with `bias_step` 0).
    bias: *const i32,
    /// Bytes from one block's bias to the next: 64, or 0 without a bias.
    bias_step: usize,
    /// The next block's first multiplier.
    m: *const ChannelMultiplier,
    /// The next block's first output byte.
    out: *mut i8,
    /// Blocks of sixteen channels left.
    blocks: usize,
    /// The output offset.
    out_offset: i32,
    /// The activation minimum.
    min: i32,
    /// The activation maximum.
    max: i32,
    /// The sixteen accumulators of a block, in channel order, between the taps and the
    /// requantization.
    acc: [i32; LANES],
}

/// Whether the vector requantization covers `m`: shifts in −31..=31.
#[inline(always)]
fn vector_shift(m: ChannelMultiplier) -> bool {
    (-31..=31).contains(&m.shift())
}

impl Mac for Mve {
    type QuadOutput = QuadOutput;
    const QUAD_CONV: bool = true;

    #[inline(always)]
    fn widen4(x: u32, offset: i32) -> (u32, u32) {
        Dsp::widen4(x, offset)
    }

    #[inline(always)]
    fn dot_2x2(pair: &PatchPair, words: usize, w0: &[i8], w1: &[i8]) -> [i32; 4] {
        Dsp::dot_2x2(pair, words, w0, w1)
    }

    #[inline(always)]
    fn mac4(acc: [i32; 4], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) -> [i32; 4] {
        Dsp::mac4(acc, list, x, w, c0, offset)
    }

    #[inline(always)]
    fn requantize(acc: i32, m: ChannelMultiplier, offset: i32, min: i32, max: i32) -> i8 {
        Dsp::requantize(acc, m, offset, min, max)
    }

    #[inline(always)]
    fn fast_requantize(multipliers: &[ChannelMultiplier]) -> bool {
        multipliers.iter().all(|&m| vector_shift(m))
    }

    fn mac4_run(acc: &mut [i32], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) {
        let taps = list.taps();
        let blocks = acc.len() / LANES;
        // Every tap's bytes of the last block inside `x` and `w` puts those of every block
        // before it there too: one check for the run (`fits` checks four bytes from its
        // channel, so the last block's last quad).
        let last = c0
            .checked_add(LANES * blocks)
            .and_then(|end| end.checked_sub(4));
        let fits = last.is_some_and(|last| list.fits(x.len(), w.len(), last));
        let done = if taps.is_empty() || blocks == 0 || !fits {
            0
        } else {
            for (k, a) in acc.chunks_exact_mut(LANES).enumerate() {
                let c = c0 + LANES * k;
                // SAFETY: `taps` is not empty; `c + 16 ≤ last + 4` with every tap's bytes up
                // to `last + 4` inside `x` and `w` (checked above), so the sixteen bytes from
                // `c` of every tap are; `a` is sixteen accumulators.
                unsafe { taps16(a, taps, x.as_ptr().add(c), w.as_ptr().add(c), offset) };
            }
            LANES * blocks
        };
        // The quads after the last whole block (or all of them), on the DSP extension.
        for (k, a) in acc[done..].chunks_exact_mut(4).enumerate() {
            let c = c0 + done + 4 * k;
            let sums = Dsp::mac4([a[0], a[1], a[2], a[3]], list, x, w, c, offset);
            a.copy_from_slice(&sums);
        }
    }

    fn depthwise_quads(ch: &DepthwiseChannels<'_>, out: &mut [i8]) {
        let taps = ch.list.taps();
        let n = out
            .len()
            .min(ch.multipliers.len())
            .min(ch.bias.map_or(usize::MAX, <[i32]>::len));
        let blocks = n / LANES;
        // Every tap's bytes of the last block inside the input and the filter puts those of
        // every block before it there too (`fits` checks four bytes from its channel).
        let fits = (LANES * blocks)
            .checked_sub(4)
            .is_some_and(|last| ch.list.fits(ch.input.len(), ch.filter.len(), last));
        if taps.is_empty() || blocks == 0 || !fits || !ch.fast {
            depthwise_blocks::<Self>(ch, 0, out);
            return;
        }
        let (offset, min, max) = ch.requant;
        let mut pixel = DepthwisePixel {
            list: taps.as_ptr(),
            taps: taps.len(),
            bias: ch.bias.map_or(ZERO_BIAS16.as_ptr(), <[i32]>::as_ptr),
            bias_step: if ch.bias.is_some() { 4 * LANES } else { 0 },
            m: ch.multipliers.as_ptr(),
            out: out.as_mut_ptr(),
            blocks,
            out_offset: offset,
            min,
            max,
            acc: [0; LANES],
        };
        // SAFETY: the outer loop runs `blocks` ≥ 1 times (checked above), block `k` covering
        // channels `16k..16k + 16`, all below `n` (`16 · blocks ≤ n`). Block `k` reads its
        // sixteen biases (in `bias`, `n ≤ bias.len()`, or the sixteen `ZERO_BIAS16` words with
        // step 0), then for each of the `taps.len()` ≥ 1 taps (checked above) its `[x offset,
        // filter offset]` pair (`ldrd`, 4-byte aligned `u32`s) and the sixteen bytes at
        // `input + x offset + 16k` and `filter + filter offset + 16k` (`r3`, `r4` move by
        // sixteen per block): inside both for every block (`fits` above, for the last
        // block's last quad); then its sixteen (multiplier, shift) pairs (`n ≤
        // multipliers.len()`; `ChannelMultiplier` is `repr(C)`, two `i32`s, 4-byte aligned as
        // `VLD2` needs) and writes its sixteen bytes of `out` (`n ≤ out.len()`, borrowed
        // mutably here). It reads and writes `pixel` (a local, `repr(C)`, at its
        // `offset_of!` offsets; `acc` 4-byte aligned as `VST2`/`VLDRW` need). Every shift is
        // in −31..=31 (`ch.fast`, the caller's `fast_requantize`), where the requantization
        // is TFLM's (module docs). All registers it changes are named.
        unsafe {
            asm!(
                "vmov.i32   q7, #0",
                "3:",
                // The bias starts the sums, de-interleaved: q0/q1 the even/odd channels of
                // the first eight, q2/q3 of the next.
                "ldr        r0, [r12, #{bias}]",
                "ldr        r1, [r12, #{bias_step}]",
                "add        r2, r0, #32",
                "vld20.32   {{q0, q1}}, [r0]",
                "vld21.32   {{q0, q1}}, [r0]",
                "vld20.32   {{q2, q3}}, [r2]",
                "vld21.32   {{q2, q3}}, [r2]",
                "add        r0, r1",
                "str        r0, [r12, #{bias}]",
                // The taps (as `taps16`).
                "ldr        r0, [r12, #{list}]",
                "ldr        r1, [r12, #{taps}]",
                "dls        lr, r1",
                "2:",
                "ldrd       r1, r2, [r0], #8",
                "add        r1, r3",
                "add        r2, r4",
                "vldrb.s16  q4, [r1]",
                "vldrb.s16  q5, [r2]",
                "vadd.i16   q4, q4, r5",
                "vmullb.s16 q6, q4, q5",
                "vadd.i32   q0, q0, q6",
                "vmullt.s16 q6, q4, q5",
                "vadd.i32   q1, q1, q6",
                "vldrb.s16  q4, [r1, #8]",
                "vldrb.s16  q5, [r2, #8]",
                "vadd.i16   q4, q4, r5",
                "vmullb.s16 q6, q4, q5",
                "vadd.i32   q2, q2, q6",
                "vmullt.s16 q6, q4, q5",
                "vadd.i32   q3, q3, q6",
                "le         lr, 2b",
                "adds       r3, #16",
                "adds       r4, #16",
                // Back in channel order, then requantized four at a time.
                "add        r0, r12, #{acc}",
                "vst20.32   {{q0, q1}}, [r0]",
                "vst21.32   {{q0, q1}}, [r0]!",
                "vst20.32   {{q2, q3}}, [r0]",
                "vst21.32   {{q2, q3}}, [r0]",
                "add        r9, r12, #{acc}",
                "ldr        r8, [r12, #{m}]",
                "ldr        r1, [r12, #{out_offset}]",
                "ldr        r0, [r12, #{min}]",
                "vdup.32    q2, r0",
                "ldr        r0, [r12, #{max}]",
                "vdup.32    q3, r0",
                // (`VSTRB` with writeback needs a low register.)
                "ldr        r0, [r12, #{out}]",
                ".rept 4",
                "vld20.32   {{q4, q5}}, [r8]",
                "vld21.32   {{q4, q5}}, [r8]!",
                "vldrw.u32  q0, [r9], #16",
                "vmax.s32   q6, q5, q7",
                "vshl.s32   q0, q0, q6",
                "vqrdmulh.s32 q0, q0, q4",
                "vmin.s32   q6, q5, q7",
                rounding_divide_by_pot!(vector "q0", "q1", "q6"),
                "vadd.i32   q0, q0, r1",
                "vmax.s32   q0, q0, q2",
                "vmin.s32   q0, q0, q3",
                "vstrb.32   q0, [r0], #4",
                ".endr",
                "str        r8, [r12, #{m}]",
                "str        r0, [r12, #{out}]",
                "ldr        r0, [r12, #{blocks}]",
                "subs       r0, #1",
                "str        r0, [r12, #{blocks}]",
                "bne        3b",
                inout("r12") &mut pixel => _,
                inout("r3") ch.input.as_ptr() => _,
                inout("r4") ch.filter.as_ptr() => _,
                in("r5") ch.input_offset,
                list = const core::mem::offset_of!(DepthwisePixel, list),
                taps = const core::mem::offset_of!(DepthwisePixel, taps),
                bias = const core::mem::offset_of!(DepthwisePixel, bias),
                bias_step = const core::mem::offset_of!(DepthwisePixel, bias_step),
                m = const core::mem::offset_of!(DepthwisePixel, m),
                out = const core::mem::offset_of!(DepthwisePixel, out),
                blocks = const core::mem::offset_of!(DepthwisePixel, blocks),
                out_offset = const core::mem::offset_of!(DepthwisePixel, out_offset),
                min = const core::mem::offset_of!(DepthwisePixel, min),
                max = const core::mem::offset_of!(DepthwisePixel, max),
                acc = const core::mem::offset_of!(DepthwisePixel, acc),
                out("r0") _, out("r1") _, out("r2") _, out("r8") _, out("r9") _,
                out("lr") _,
                out("q0") _, out("q1") _, out("q2") _, out("q3") _,
                out("q4") _, out("q5") _, out("q6") _, out("q7") _,
                options(nostack),
            );
        }
        // The quads after the last whole block.
        depthwise_blocks::<Self>(ch, LANES * blocks, out);
    }

    const WINDOW_MAX16: bool = true;

    /// One `VLDRB.8` and one `VMAX.S8` per pixel.
    fn window_max16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> Option<[i8; 16]> {
        if !window_inside(image.len(), start, (rows, row_step), (cols, col_step)) {
            return None;
        }
        let mut max = [0_i8; 16];
        // SAFETY: the outer loop runs `rows` ≥ 1 times and the inner `cols` ≥ 1 times (checked
        // above; `le` counts `lr` down), reading the sixteen bytes at `image + start + r ·
        // row_step + c · col_step` for each pixel, inside `image` (`window_inside` above, for the
        // furthest pixel: the steps are non-negative; so `start + 16 ≤ len` and the pointer
        // `image + start` is in bounds). It writes the sixteen bytes of `max` (a
        // local). Pointers and counts are local copies; all registers it changes are named.
        unsafe {
            asm!(
                "vmov.i8    q0, #0x80",
                "3:",
                "mov        r0, {row}",
                "dls        lr, {cols}",
                "2:",
                "vldrb.u8   q1, [r0]",
                "vmax.s8    q0, q0, q1",
                "add        r0, {col_step}",
                "le         lr, 2b",
                "add        {row}, {row_step}",
                "subs       {rows}, #1",
                "bne        3b",
                "vstrb.8    q0, [{max}]",
                row = inout(reg) image.as_ptr().add(start) => _,
                rows = inout(reg) rows => _,
                cols = in(reg) cols,
                row_step = in(reg) row_step,
                col_step = in(reg) col_step,
                max = in(reg) max.as_mut_ptr(),
                out("r0") _,
                out("lr") _,
                out("q0") _, out("q1") _,
                options(nostack),
            );
        }
        Some(max)
    }

    const WINDOW_SUM16: bool = true;

    fn window_sum16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> [i32; 16] {
        let mut acc = [0_i32; 16];
        if !window_inside(image.len(), start, (rows, row_step), (cols, col_step)) {
            return acc;
        }
        // SAFETY: the outer loop runs `rows` ≥ 1 times and the inner `cols` ≥ 1 times
        // (checked above; `le` counts `lr` down), reading the sixteen bytes at `image + start
        // + r · row_step + c · col_step` for each pixel, inside `image` (`window_inside` above,
        // for the furthest pixel: the steps are non-negative). It writes the sixteen `i32`s of
        // `acc` (a local, 4-byte aligned as `VSTRW` needs). Pointers and counts are local
        // copies; all registers it changes are named.
        unsafe {
            asm!(
                "vmov.i32   q0, #0",
                "vmov.i32   q1, #0",
                "vmov.i32   q2, #0",
                "vmov.i32   q3, #0",
                "3:",
                "mov        r0, {row}",
                "dls        lr, {cols}",
                "2:",
                "vldrb.s32  q4, [r0]",
                "vadd.i32   q0, q0, q4",
                "vldrb.s32  q4, [r0, #4]",
                "vadd.i32   q1, q1, q4",
                "vldrb.s32  q4, [r0, #8]",
                "vadd.i32   q2, q2, q4",
                "vldrb.s32  q4, [r0, #12]",
                "vadd.i32   q3, q3, q4",
                "add        r0, {col_step}",
                "le         lr, 2b",
                "add        {row}, {row_step}",
                "subs       {rows}, #1",
                "bne        3b",
                "vstrw.32   q0, [{acc}]",
                "vstrw.32   q1, [{acc}, #16]",
                "vstrw.32   q2, [{acc}, #32]",
                "vstrw.32   q3, [{acc}, #48]",
                // The widening loads need a low register.
                out("r0") _,
                row = inout(reg) image.as_ptr().add(start) => _,
                rows = inout(reg) rows => _,
                cols = in(reg) cols,
                row_step = in(reg) row_step,
                col_step = in(reg) col_step,
                acc = in(reg) acc.as_mut_ptr(),
                out("lr") _,
                out("q0") _, out("q1") _, out("q2") _, out("q3") _, out("q4") _,
                options(nostack),
            );
        }
        acc
    }

    fn requantize_run(
        acc: &[i32],
        multipliers: &[ChannelMultiplier],
        fast: bool,
        out: &mut [i8],
        (offset, min, max): (i32, i32, i32),
    ) {
        let n = acc.len().min(multipliers.len()).min(out.len());
        let quads = if fast { n / 4 } else { 0 };
        if quads > 0 {
            // SAFETY: the loop runs `quads` ≥ 1 times (`le` counts `lr` down from `quads`),
            // reading four words of `acc`, four (multiplier, shift) pairs of `multipliers`
            // (`ChannelMultiplier` is `repr(C)`, two `i32`s, 4-byte aligned as `VLD2` needs;
            // `acc` is an `i32` slice, as `VLDRW` needs) and writing four bytes of `out` per
            // pass: `4 · quads ≤ n` of each, in bounds by the `min`s above; `out` is borrowed
            // mutably here. Every shift is in −31..=31 (`fast`, the caller's
            // `fast_requantize`), the range in which this is TFLM's arithmetic (module docs).
            // Pointers and the count are local copies.
            unsafe {
                asm!(
                    "vmov.i32   q7, #0",
                    "vdup.32    q5, {min}",
                    "vdup.32    q6, {max}",
                    "dls        lr, {n}",
                    "2:",
                    "vld20.32   {{q0, q1}}, [{pm}]",
                    "vld21.32   {{q0, q1}}, [{pm}]!",
                    "vldrw.u32  q2, [{pa}], #16",
                    "vmax.s32   q3, q1, q7",
                    "vshl.s32   q2, q2, q3",
                    "vqrdmulh.s32 q2, q2, q0",
                    "vmin.s32   q3, q1, q7",
                    rounding_divide_by_pot!(vector "q2", "q4", "q3"),
                    "vadd.i32   q2, q2, {off}",
                    "vmax.s32   q2, q2, q5",
                    "vmin.s32   q2, q2, q6",
                    "vstrb.32   q2, [r0], #4",
                    "le         lr, 2b",
                    pa = inout(reg) acc.as_ptr() => _,
                    pm = inout(reg) multipliers.as_ptr() => _,
                    // `VSTRB` with writeback needs a low register.
                    inout("r0") out.as_mut_ptr() => _,
                    n = in(reg) quads,
                    off = in(reg) offset,
                    min = in(reg) min,
                    max = in(reg) max,
                    out("lr") _,
                    out("q0") _, out("q1") _, out("q2") _, out("q3") _,
                    out("q4") _, out("q5") _, out("q6") _, out("q7") _,
                    options(nostack),
                );
            }
        }
        let done = 4 * quads;
        let rest = acc.iter().zip(multipliers).zip(out.iter_mut()).skip(done);
        for ((&a, &m), o) in rest {
            *o = Dsp::requantize(a, m, offset, min, max);
        }
    }

    #[inline(always)]
    fn dot_rows2(x: &[i8], offset: i32, w0: &[i8], w1: &[i8]) -> [i32; 2] {
        let n = x.len().min(w0.len()).min(w1.len());
        let (mut d0, mut d1, mut s0, mut s1) = (0_i32, 0_i32, 0_i32, 0_i32);
        if n == 0 {
            return [0; 2];
        }
        // SAFETY: the tail-predicated loop runs over `n` ≥ 1 lanes (checked above): its passes
        // load sixteen bytes from each of the three pointers and advance them by sixteen, the
        // lanes past `n` predicated off in the last pass (not read). So it reads the first `n`
        // bytes of `x`, `w0` and `w1`, all in bounds (`n` is the shortest length). The
        // accumulators are bound to even registers, as `VMLADAVA`/`VADDVA` need. Pointers are
        // local copies; the sums are the only results.
        unsafe {
            asm!(
                "dlstp.8    lr, {n}",
                "2:",
                "vldrb.u8   q0, [{x}], #16",
                "vldrb.u8   q1, [{w0}], #16",
                "vmladava.s8 r0, q0, q1",
                "vaddva.s8  r2, q1",
                "vldrb.u8   q1, [{w1}], #16",
                "vmladava.s8 r4, q0, q1",
                "vaddva.s8  r8, q1",
                "letp       lr, 2b",
                n = in(reg) n,
                x = inout(reg) x.as_ptr() => _,
                w0 = inout(reg) w0.as_ptr() => _,
                w1 = inout(reg) w1.as_ptr() => _,
                inout("r0") d0,
                inout("r2") s0,
                inout("r4") d1,
                inout("r8") s1,
                out("lr") _,
                out("q0") _, out("q1") _,
                options(readonly, nostack),
            );
        }
        // Σ w·(x + o) = Σ w·x + o·Σ w, modulo 2³².
        [
            d0.wrapping_add(offset.wrapping_mul(s0)),
            d1.wrapping_add(offset.wrapping_mul(s1)),
        ]
    }

    #[inline(always)]
    fn dot_4x1(x: [&[i8]; 4], w: &[i8]) -> ([i32; 4], i32) {
        let n = x.iter().fold(w.len(), |n, row| n.min(row.len()));
        let (mut a0, mut a1, mut a2, mut a3, mut s) = (0_i32, 0_i32, 0_i32, 0_i32, 0_i32);
        if n == 0 {
            return ([0; 4], 0);
        }
        // SAFETY: the tail-predicated loop runs over `n` ≥ 1 lanes (checked above): its passes
        // load sixteen bytes from each of the five pointers and advance them by sixteen, the
        // lanes past `n` predicated off in the last pass (not read). So it reads the first `n`
        // bytes of `w` and of each row, all in bounds (`n` is the shortest length). The
        // accumulators are bound to even registers, as `VMLADAVA`/`VADDVA` need. Pointers are
        // local copies; the sums are the only results.
        unsafe {
            asm!(
                "dlstp.8    lr, {n}",
                "2:",
                "vldrb.u8   q0, [{w}], #16",
                "vaddva.s8  r10, q0",
                "vldrb.u8   q1, [{x0}], #16",
                "vmladava.s8 r0, q0, q1",
                "vldrb.u8   q1, [{x1}], #16",
                "vmladava.s8 r2, q0, q1",
                "vldrb.u8   q1, [{x2}], #16",
                "vmladava.s8 r4, q0, q1",
                "vldrb.u8   q1, [{x3}], #16",
                "vmladava.s8 r8, q0, q1",
                "letp       lr, 2b",
                n = in(reg) n,
                w = inout(reg) w.as_ptr() => _,
                x0 = inout(reg) x[0].as_ptr() => _,
                x1 = inout(reg) x[1].as_ptr() => _,
                x2 = inout(reg) x[2].as_ptr() => _,
                x3 = inout(reg) x[3].as_ptr() => _,
                inout("r0") a0,
                inout("r2") a1,
                inout("r4") a2,
                inout("r8") a3,
                inout("r10") s,
                out("lr") _,
                out("q0") _, out("q1") _,
                options(readonly, nostack),
            );
        }
        ([a0, a1, a2, a3], s)
    }

    #[inline(always)]
    fn quad_output(
        (offset, min, max): (i32, i32, i32),
        stride: usize,
        multipliers: &[ChannelMultiplier],
    ) -> QuadOutput {
        let s = u32::try_from(stride).unwrap_or(u32::MAX);
        let last = stride.checked_mul(3).filter(|&l| l <= u32::MAX as usize);
        QuadOutput {
            offset: [offset; 4],
            min: [min; 4],
            max: [max; 4],
            scatter: [0, s, s.wrapping_mul(2), s.wrapping_mul(3)],
            last: last.unwrap_or(usize::MAX),
            vector: Self::fast_requantize(multipliers),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn quad_channels(
        windows: [&[i8]; 4],
        filter: &[i8],
        taps: usize,
        multipliers: &[ChannelMultiplier],
        bias: Option<&[i32]>,
        input_offset: i32,
        q: &QuadOutput,
        out: &mut [i8],
    ) {
        let channels = match taps {
            0 => 0,
            t => (filter.len() / t)
                .min(multipliers.len())
                .min(bias.map_or(usize::MAX, <[i32]>::len)),
        };
        // The last channel's last pixel's byte is `channels − 1 + 3s`.
        let fits = channels
            .checked_sub(1)
            .and_then(|c| c.checked_add(q.last))
            .is_some_and(|end| end < out.len());
        let windows_fit = windows.iter().all(|x| x.len() >= taps);
        if channels == 0 || !fits || !windows_fit || !q.vector {
            // The generic loop (which checks as it goes).
            let rows = (windows, filter, taps);
            quad_channels_each::<Self>(rows, multipliers, bias, input_offset, q, out);
            return;
        }
        let mut block = QuadBlock {
            x: windows.map(<[i8]>::as_ptr),
            taps,
            w_back: taps as isize - (taps.div_ceil(16) * 16) as isize,
            bias: bias.map_or(&ZERO_BIAS, <[i32]>::as_ptr),
            bias_step: if bias.is_some() { 4 } else { 0 },
            input_offset,
            m: multipliers.as_ptr(),
            out: out.as_mut_ptr(),
            channels,
            acc: [0; 4],
        };
        // SAFETY: the outer loop runs `channels` ≥ 1 times (checked above). `r11` walks the
        // filter rows, `r12` points at `block`. Pass `c` reads
        // the first `taps` ≥ 1 bytes (`taps` is not 0, as `channels` is not) of each window
        // (the tail-predicated inner loop reads only its `taps` lanes; every window holds
        // `taps` bytes, checked above) and of filter row `c` (`r11` starts at `filter` and
        // moves by `taps` per row: rows `0..channels` lie in `filter`, `channels · taps ≤
        // filter.len()`); the bias `c` (in `bias`, `channels ≤ bias.len()`, or the one
        // `ZERO_BIAS` word with step 0) and the multiplier `c` (`ChannelMultiplier` is
        // `repr(C)`, two `i32`s, read with `ldrd`; `channels ≤ multipliers.len()`); the four
        // 16-byte vectors of `q` (`repr(C, align(16))`, at offsets 0, 16, 32 and 48); and
        // writes the bytes `c + k · s` (k < 4) of `out`, the last `channels − 1 + 3s <
        // out.len()` (checked above), `out` borrowed mutably here. It reads and writes
        // `block` (a local, `repr(C)`, at the `offset_of!` offsets). Every multiplier's shift
        // is in −31..=31 (`q.vector`), where the requantization is TFLM's (module docs). All
        // registers it changes are named.
        unsafe {
            asm!(
                "vldrw.u32  q4, [r1]",
                "vldrw.u32  q5, [r1, #16]",
                "vldrw.u32  q6, [r1, #32]",
                "vldrw.u32  q7, [r1, #48]",
                "3:",
                "ldr        r1, [r12, #{taps}]",
                "dlstp.8    lr, r1",
                "ldm        r12, {{r1, r3, r5, r9}}",
                "movs       r0, #0",
                "movs       r2, #0",
                "movs       r4, #0",
                "mov.w      r8, #0",
                "mov.w      r10, #0",
                "2:",
                "vldrb.u8   q0, [r11], #16",
                "vaddva.s8  r10, q0",
                "vldrb.u8   q1, [r1], #16",
                "vmladava.s8 r0, q0, q1",
                "vldrb.u8   q1, [r3], #16",
                "vmladava.s8 r2, q0, q1",
                "vldrb.u8   q1, [r5], #16",
                "vmladava.s8 r4, q0, q1",
                "vldrb.u8   q1, [r9], #16",
                "vmladava.s8 r8, q0, q1",
                "letp       lr, 2b",
                // The accumulators plus bias + input_offset · Σw.
                "ldr        r1, [r12, #{bias}]",
                "ldr        r3, [r12, #{bias_step}]",
                "ldr        r5, [r1]",
                "add        r1, r3",
                "str        r1, [r12, #{bias}]",
                "ldr        r3, [r12, #{input_offset}]",
                "mla        r10, r3, r10, r5",
                "strd       r0, r2, [r12, #{acc}]",
                "strd       r4, r8, [r12, #{acc} + 8]",
                "vldrw.u32  q0, [r12, #{acc}]",
                "vadd.i32   q0, q0, r10",
                // The requantization (module docs), the shift split into left and right.
                "ldr        r1, [r12, #{m}]",
                "ldrd       r3, r5, [r1], #8",
                "str        r1, [r12, #{m}]",
                "bic        r9, r5, r5, asr #31",
                "and        r5, r5, r5, asr #31",
                "vshl.s32   q0, r9",
                "vqrdmulh.s32 q0, q0, r3",
                rounding_divide_by_pot!(scalar "q0", "q1", "r5"),
                "vadd.i32   q0, q0, q4",
                "vmax.s32   q0, q0, q5",
                "vmin.s32   q0, q0, q6",
                "ldr        r1, [r12, #{out}]",
                "vstrb.32   q0, [r1, q7]",
                "adds       r1, #1",
                "str        r1, [r12, #{out}]",
                // The next filter row and channel.
                "ldr        r1, [r12, #{w_back}]",
                "add        r11, r1",
                "ldr        r1, [r12, #{channels}]",
                "subs       r1, #1",
                "str        r1, [r12, #{channels}]",
                "bne        3b",
                inout("r1") q => _,
                inout("r11") filter.as_ptr() => _,
                inout("r12") &mut block => _,
                taps = const core::mem::offset_of!(QuadBlock, taps),
                w_back = const core::mem::offset_of!(QuadBlock, w_back),
                bias = const core::mem::offset_of!(QuadBlock, bias),
                bias_step = const core::mem::offset_of!(QuadBlock, bias_step),
                input_offset = const core::mem::offset_of!(QuadBlock, input_offset),
                m = const core::mem::offset_of!(QuadBlock, m),
                out = const core::mem::offset_of!(QuadBlock, out),
                channels = const core::mem::offset_of!(QuadBlock, channels),
                acc = const core::mem::offset_of!(QuadBlock, acc),
                out("r0") _, out("r2") _, out("r3") _, out("r4") _,
                out("r5") _, out("r8") _, out("r9") _, out("r10") _, out("lr") _,
                out("q0") _, out("q1") _, out("q4") _, out("q5") _, out("q6") _,
                out("q7") _,
                options(nostack),
            );
        }
    }

    #[inline(always)]
    fn requantize4(acc: [i32; 4], base: i32, m: ChannelMultiplier, q: &QuadOutput, out: &mut [i8]) {
        if q.last >= out.len() {
            return;
        }
        if !vector_shift(m) {
            let stride = q.scatter[1] as usize;
            let (offset, min, max) = (q.offset[0], q.min[0], q.max[0]);
            for (k, a) in acc.into_iter().enumerate() {
                out[k * stride] = Dsp::requantize(a.wrapping_add(base), m, offset, min, max);
            }
            return;
        }
        let shift = m.shift();
        let (left, right) = (shift.max(0), shift.min(0));
        // SAFETY: register arithmetic on `q0`/`q1`, a 16-byte load of `acc` (four `i32`s,
        // 4-byte aligned as `VLDRW` needs), four 16-byte loads from `q` (a
        // `repr(C, align(16))` struct of four-lane arrays, read at their offsets 0, 16, 32
        // and 48), and one scatter store of four bytes at `out + 0, s, 2s, 3s`, the highest
        // `3s = q.last < out.len()` (checked above; `last` is `3s` exactly, or `usize::MAX`,
        // which no slice length exceeds). The shift is in −31..=31 (checked above), the range
        // in which this is TFLM's arithmetic (module docs).
        unsafe {
            asm!(
                "vldrw.u32  q0, [{a}]",
                "vadd.i32   q0, q0, {base}",
                "vshl.s32   q0, {left}",
                "vqrdmulh.s32 q0, q0, {m}",
                rounding_divide_by_pot!(scalar "q0", "q1", "{right}"),
                "vldrw.u32  q1, [{q}]",
                "vadd.i32   q0, q0, q1",
                "vldrw.u32  q1, [{q}, #16]",
                "vmax.s32   q0, q0, q1",
                "vldrw.u32  q1, [{q}, #32]",
                "vmin.s32   q0, q0, q1",
                "vldrw.u32  q1, [{q}, #48]",
                "vstrb.32   q0, [{out}, q1]",
                a = in(reg) acc.as_ptr(),
                base = in(reg) base,
                left = in(reg) left,
                right = in(reg) right,
                m = in(reg) m.multiplier(),
                q = in(reg) q,
                out = in(reg) out.as_mut_ptr(),
                out("q0") _, out("q1") _,
                options(nostack),
            );
        }
    }
}

/// The depthwise sums of sixteen channels over `taps`: `acc[i] += w[i] · (x[i] + offset)` for
/// the sixteen bytes at `xb + x offset` and `wb + filter offset` of each tap, wrapping.
///
/// # Safety
///
/// `taps` is not empty, and for every tap the sixteen bytes at `xb + x offset` and at
/// `wb + filter offset` are readable.
#[inline(always)]
unsafe fn taps16(acc: &mut [i32], taps: &[[u32; 2]], xb: *const i8, wb: *const i8, offset: i32) {
    let Ok(acc) = <&mut [i32; LANES]>::try_from(acc) else {
        return;
    };
    // SAFETY: the loop runs `taps.len()` ≥ 1 times (the caller's promise; `le` counts `lr`
    // down), reading each `[x offset, filter offset]` pair of `taps` once with `ldrd` (4-byte
    // aligned `u32`s) and sixteen bytes at `xb + x offset` and `wb + filter offset`
    // (readable: the caller's promise). `acc` is sixteen `i32`s (4-byte aligned, as
    // `VLD2`/`VST2` need), read before the loop and written after it, borrowed mutably here.
    // Pointers and the count are local copies.
    unsafe {
        asm!(
            "vld20.32   {{q0, q1}}, [{a}]",
            "vld21.32   {{q0, q1}}, [{a}]",
            "vld20.32   {{q2, q3}}, [{a2}]",
            "vld21.32   {{q2, q3}}, [{a2}]",
            "dls        lr, {n}",
            "2:",
            "ldrd       r1, r2, [{l}], #8",
            "add        r1, r1, {xb}",
            "add        r2, r2, {wb}",
            "vldrb.s16  q4, [r1]",
            "vldrb.s16  q5, [r2]",
            "vadd.i16   q4, q4, {off}",
            "vmullb.s16 q6, q4, q5",
            "vadd.i32   q0, q0, q6",
            "vmullt.s16 q6, q4, q5",
            "vadd.i32   q1, q1, q6",
            "vldrb.s16  q4, [r1, #8]",
            "vldrb.s16  q5, [r2, #8]",
            "vadd.i16   q4, q4, {off}",
            "vmullb.s16 q6, q4, q5",
            "vadd.i32   q2, q2, q6",
            "vmullt.s16 q6, q4, q5",
            "vadd.i32   q3, q3, q6",
            "le         lr, 2b",
            "vst20.32   {{q0, q1}}, [{a}]",
            "vst21.32   {{q0, q1}}, [{a}]",
            "vst20.32   {{q2, q3}}, [{a2}]",
            "vst21.32   {{q2, q3}}, [{a2}]",
            a = in(reg) acc.as_mut_ptr(),
            a2 = in(reg) acc.as_mut_ptr().add(8),
            l = inout(reg) taps.as_ptr() => _,
            n = in(reg) taps.len(),
            xb = in(reg) xb,
            wb = in(reg) wb,
            off = in(reg) offset,
            // The widening loads need low registers.
            out("r1") _,
            out("r2") _,
            out("lr") _,
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q4") _, out("q5") _, out("q6") _,
            options(nostack),
        );
    }
}
