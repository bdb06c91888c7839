//! [`Mac`] with the Arm DSP extension (`cfg(npu_arm_dsp)`: Armv7E-M, Armv8-M Mainline with
//! DSP).
//!
//! The fully connected rows ([`Mac::dot_rows2`]) are one assembly loop: each input word is
//! widened once (`SXTB16`, the offset added with `SADD16`) and serves two weight rows. The
//! pools take sixteen channels per window pixel as four words: the average pool's sums
//! ([`Mac::window_sum16`]) in sixteen 16-bit lanes (`SXTAB16` adds two sign-extended bytes to
//! two lanes at once), the max pool's maxima ([`Mac::window_max16`]) four byte lanes per
//! `SSUB8` and `SEL`.
//!
//! Each instruction is one `asm!` statement in a small always-inlined function, so that the
//! compiler still allocates registers and schedules the loops; `core::arch::arm`'s DSP
//! intrinsics would do the same but are unstable.
//!
//! # Safety of the `asm!` blocks
//!
//! Every block but the loops (each argued where it is) is a single data-processing instruction
//! that reads its register operands and writes its one output register: no memory access
//! (`nomem`), no stack use (`nostack`), no control flow, and a result that depends only on the
//! inputs (`pure`). The instructions exist
//! on every core this module is compiled for (the build script enables it only for Armv7E-M
//! and for Armv8-M Mainline cores with the DSP extension). `SMLAD`, `SMLABB`, `SMLATT` may set
//! the sticky `Q` flag and `SADD16` and `SSUB8` set the `GE` flags, which no Rust code reads;
//! those blocks do not claim `preserves_flags`.

use core::arch::asm;

use core::mem::size_of;

use super::{ChannelMultiplier, Mac, PatchPair, Portable, TapList, PATCH_WORDS};

/// Bytes from a word of the first patch of a [`PatchPair`] to the same word of the second.
const PAIR_STRIDE: usize = size_of::<[u32; PATCH_WORDS]>();

/// [`Mac`] on the DSP extension: `SXTB16`, `SADD16`, `SMLAD`, `SMLABB`/`SMLATT`.
pub(crate) struct Dsp;

/// `SXTB16`: bytes 0 and 2 of `x`, sign-extended to the two 16-bit lanes.
#[inline(always)]
fn sxtb16(x: u32) -> u32 {
    let r: u32;
    // SAFETY: one register-to-register instruction (see the module docs).
    unsafe {
        asm!("sxtb16 {r}, {x}", r = lateout(reg) r, x = in(reg) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    r
}

/// `SXTB16` with `ROR #8`: bytes 1 and 3 of `x`, sign-extended to the two lanes.
#[inline(always)]
fn sxtb16_ror8(x: u32) -> u32 {
    let r: u32;
    // SAFETY: one register-to-register instruction (see the module docs).
    unsafe {
        asm!("sxtb16 {r}, {x}, ror #8", r = lateout(reg) r, x = in(reg) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    r
}

/// `SADD16`: lane-wise 16-bit addition, wrapping.
#[inline(always)]
fn sadd16(a: u32, b: u32) -> u32 {
    let r: u32;
    // SAFETY: one register-to-register instruction (see the module docs).
    unsafe {
        asm!("sadd16 {r}, {a}, {b}", r = lateout(reg) r, a = in(reg) a, b = in(reg) b,
             options(pure, nomem, nostack));
    }
    r
}

/// The offset in both 16-bit lanes (truncated: offsets are int8 zero points negated).
#[inline(always)]
fn offset_pair(offset: i32) -> u32 {
    super::pack(offset, offset)
}

impl Mac for Dsp {
    type QuadOutput = super::QuadOutput;

    #[inline(always)]
    fn quad_output(
        requant: (i32, i32, i32),
        stride: usize,
        multipliers: &[ChannelMultiplier],
    ) -> Self::QuadOutput {
        Portable::quad_output(requant, stride, multipliers)
    }

    #[inline(always)]
    fn requantize4(
        acc: [i32; 4],
        base: i32,
        m: ChannelMultiplier,
        q: &Self::QuadOutput,
        out: &mut [i8],
    ) {
        super::requantize4_scalar::<Self>(acc, base, m, q, out);
    }

    #[inline(always)]
    fn requantize(acc: i32, m: ChannelMultiplier, offset: i32, min: i32, max: i32) -> i8 {
        let (mult, shift) = (m.multiplier(), m.shift());
        // The branch-free form below covers right shifts (every shift a sane scale gives);
        // left shifts, and the one multiplier whose doubling high product saturates, take the
        // portable form.
        if !(-31..=0).contains(&shift) || mult == i32::MIN {
            return Portable::requantize(acc, m, offset, min, max);
        }
        let right = shift.unsigned_abs();
        let mask = ((1_u32 << right) - 1) as i32;
        let r: i32;
        // SAFETY: register-only arithmetic (no memory, no stack); `it` blocks are single
        // instructions. It computes `fixed_point::multiply_by_quantized_multiplier` for a shift
        // in −31..=0 and a multiplier other than i32::MIN: `(acc · m + 2³⁰) >> 31` from the
        // 64-bit `SMLAL` sum (exact, no saturation possible without i32::MIN), then the
        // rounding right shift (`+1` when the discarded bits exceed half, or reach it for a
        // negative value), then the offset and the clamp with `max`/`min` semantics.
        unsafe {
            asm!(
                "mov    {lo}, #0x40000000",
                "mov    {hi}, #0",
                "smlal  {lo}, {hi}, {acc}, {m}",
                "lsr    {lo}, {lo}, #31",
                "orr    {lo}, {lo}, {hi}, lsl #1",
                "and    {hi}, {lo}, {mask}",
                "asr    {t}, {mask}, #1",
                "add    {t}, {t}, {lo}, lsr #31",
                "asr    {lo}, {lo}, {right}",
                "cmp    {hi}, {t}",
                "it     gt",
                "addgt  {lo}, {lo}, #1",
                "add    {lo}, {lo}, {off}",
                "cmp    {lo}, {min}",
                "it     lt",
                "movlt  {lo}, {min}",
                "cmp    {lo}, {max}",
                "it     gt",
                "movgt  {lo}, {max}",
                lo = out(reg) r,
                hi = out(reg) _,
                t = out(reg) _,
                acc = in(reg) acc,
                m = in(reg) mult,
                mask = in(reg) mask,
                right = in(reg) right,
                off = in(reg) offset,
                min = in(reg) min,
                max = in(reg) max,
                options(pure, nomem, nostack),
            );
        }
        r as i8
    }

    #[inline(always)]
    fn requantize_run(
        acc: &[i32],
        multipliers: &[ChannelMultiplier],
        right_shifts: bool,
        out: &mut [i8],
        (offset, min, max): (i32, i32, i32),
    ) {
        let n = acc.len().min(multipliers.len()).min(out.len());
        if !right_shifts || n == 0 {
            for ((o, &a), &m) in out.iter_mut().zip(acc).zip(multipliers) {
                *o = Self::requantize(a, m, offset, min, max);
            }
            return;
        }
        // SAFETY: the loop runs `n` ≥ 1 times (checked above), reading one word of `acc` and
        // one (multiplier, shift) pair of `multipliers` (`ChannelMultiplier` is `repr(C)`,
        // two `i32`s, 4-byte aligned as `ldrd` needs) and writing one byte of `out` per pass:
        // `n` of each, in bounds by the `min`s above; `out` is borrowed mutably here. Every
        // multiplier shifts right and is not i32::MIN (`right_shifts`, the caller's
        // `right_shifts_only`), so this is `requantize`'s branch-free arithmetic (see its
        // argument) with the mask `(1 << right) − 1` made per channel. Pointers are local
        // copies.
        unsafe {
            asm!(
                "2:",
                "ldr    {a}, [{pa}], #4",
                "ldrd   {m}, {sh}, [{pm}], #8",
                "mov    {lo}, #0x40000000",
                "mov    {hi}, #0",
                "smlal  {lo}, {hi}, {a}, {m}",
                "lsr    {lo}, {lo}, #31",
                "orr    {lo}, {lo}, {hi}, lsl #1",
                "rsb    {sh}, {sh}, #0",
                "mov    {m}, #1",
                "lsl    {m}, {m}, {sh}",
                "sub    {m}, {m}, #1",
                "and    {hi}, {lo}, {m}",
                "asr    {m}, {m}, #1",
                "add    {m}, {m}, {lo}, lsr #31",
                "asr    {lo}, {lo}, {sh}",
                "cmp    {hi}, {m}",
                "it     gt",
                "addgt  {lo}, {lo}, #1",
                "add    {lo}, {lo}, {off}",
                "cmp    {lo}, {min}",
                "it     lt",
                "movlt  {lo}, {min}",
                "cmp    {lo}, {max}",
                "it     gt",
                "movgt  {lo}, {max}",
                "strb   {lo}, [{po}], #1",
                "cmp    {pa}, {end}",
                "bne    2b",
                pa = inout(reg) acc.as_ptr() => _,
                pm = inout(reg) multipliers.as_ptr() => _,
                po = inout(reg) out.as_mut_ptr() => _,
                end = in(reg) acc.as_ptr().add(n),
                off = in(reg) offset,
                min = in(reg) min,
                max = in(reg) max,
                a = out(reg) _,
                m = out(reg) _,
                sh = out(reg) _,
                lo = out(reg) _,
                hi = out(reg) _,
                options(nostack),
            );
        }
    }

    const WINDOW_SUM16: bool = true;

    /// Per pixel and eight channels two word loads and four `SXTAB16`s into 16-bit lanes (a
    /// window of more than 256 pixels could overflow them, and takes the portable sums).
    #[inline(always)]
    fn window_sum16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> [i32; 16] {
        let window = ((rows, row_step), (cols, col_step));
        if rows.saturating_mul(cols) > 256
            || !super::window_inside(image.len(), start, window.0, window.1)
        {
            return Portable::window_sum16(image, start, window.0, window.1);
        }
        let mut sums = [0_i32; 16];
        for (half, eight) in sums.chunks_exact_mut(8).enumerate() {
            // Lane pairs: `acc[2k]` holds channels 4k and 4k + 2, `acc[2k + 1]` 4k + 1 and
            // 4k + 3 (of this half).
            let mut acc = [0_u32; 4];
            for r in 0..rows {
                let at = start + 8 * half + r * row_step;
                // SAFETY: the loop runs `cols` ≥ 1 times (checked above), reading the eight
                // bytes at `image + at + c · col_step` for each pixel `c`: inside `image`, since
                // every pixel's sixteen bytes are (`window_inside` above; the steps are
                // non-negative), so the pointer `image + at` is in bounds too. Word loads need
                // no alignment on these cores. The pointer and count are local copies, the
                // accumulators the only results.
                unsafe {
                    asm!(
                        "2:",
                        "ldr     {w}, [{p}]",
                        "sxtab16 {a0}, {a0}, {w}",
                        "sxtab16 {a1}, {a1}, {w}, ror #8",
                        "ldr     {w}, [{p}, #4]",
                        "sxtab16 {a2}, {a2}, {w}",
                        "sxtab16 {a3}, {a3}, {w}, ror #8",
                        "add     {p}, {step}",
                        "subs    {n}, #1",
                        "bne     2b",
                        p = inout(reg) image.as_ptr().add(at) => _,
                        n = inout(reg) cols => _,
                        step = in(reg) col_step,
                        w = out(reg) _,
                        a0 = inout(reg) acc[0],
                        a1 = inout(reg) acc[1],
                        a2 = inout(reg) acc[2],
                        a3 = inout(reg) acc[3],
                        options(pure, readonly, nostack),
                    );
                }
            }
            for (k, four) in eight.chunks_exact_mut(4).enumerate() {
                let (even, odd) = (super::lanes(acc[2 * k]), super::lanes(acc[2 * k + 1]));
                four.copy_from_slice(&[even.0, odd.0, even.1, odd.1]);
            }
        }
        sums
    }

    const WINDOW_MAX16: bool = true;

    /// Per pixel four word loads and four lane-wise maxima (`SSUB8` sets a `GE` flag per byte
    /// lane where the running maximum is at least the pixel's, `SEL` keeps those lanes and
    /// takes the pixel's elsewhere).
    #[inline(always)]
    fn window_max16(
        image: &[i8],
        start: usize,
        (rows, row_step): (usize, usize),
        (cols, col_step): (usize, usize),
    ) -> Option<[i8; 16]> {
        if !super::window_inside(image.len(), start, (rows, row_step), (cols, col_step)) {
            return None;
        }
        // Four bytes of int8's minimum (TFLM's starting value) per word.
        let mut max = [0x8080_8080_u32; 4];
        for r in 0..rows {
            // SAFETY: the loop runs `cols` ≥ 1 times (checked above), reading the sixteen
            // bytes at `image + start + r · row_step + c · col_step` for each pixel `c`: inside
            // `image` (`window_inside` above; the steps are non-negative), so the pointer is in
            // bounds too. Word loads need no alignment on these cores. The pointer and count
            // are local copies, the maxima the only results.
            unsafe {
                asm!(
                    "2:",
                    "ldr     {w}, [{p}]",
                    "ssub8   {t}, {m0}, {w}",
                    "sel     {m0}, {m0}, {w}",
                    "ldr     {w}, [{p}, #4]",
                    "ssub8   {t}, {m1}, {w}",
                    "sel     {m1}, {m1}, {w}",
                    "ldr     {w}, [{p}, #8]",
                    "ssub8   {t}, {m2}, {w}",
                    "sel     {m2}, {m2}, {w}",
                    "ldr     {w}, [{p}, #12]",
                    "ssub8   {t}, {m3}, {w}",
                    "sel     {m3}, {m3}, {w}",
                    "add     {p}, {step}",
                    "subs    {n}, #1",
                    "bne     2b",
                    p = inout(reg) image.as_ptr().add(start + r * row_step) => _,
                    n = inout(reg) cols => _,
                    step = in(reg) col_step,
                    w = out(reg) _,
                    t = out(reg) _,
                    m0 = inout(reg) max[0],
                    m1 = inout(reg) max[1],
                    m2 = inout(reg) max[2],
                    m3 = inout(reg) max[3],
                    options(pure, readonly, nostack),
                );
            }
        }
        let mut bytes = [0_i8; 16];
        for (b, m) in bytes.chunks_exact_mut(4).zip(max) {
            for (b, v) in b.iter_mut().zip(m.to_le_bytes()) {
                *b = v as i8;
            }
        }
        Some(bytes)
    }

    #[inline(always)]
    fn dot_rows2(x: &[i8], offset: i32, w0: &[i8], w1: &[i8]) -> [i32; 2] {
        let n = x.len().min(w0.len()).min(w1.len());
        let groups = n / 4;
        let (mut a0, mut a1) = (0_i32, 0_i32);
        if groups > 0 {
            // SAFETY: the loop runs `groups` ≥ 1 times (checked above), each pass reading one
            // word at each of `x`, `w0` and `w1` and advancing them by 4: `4 · groups ≤ n`
            // bytes of each, in bounds (`n` is the shortest length). Word loads need no
            // alignment on these cores. The input's two widened words (`x + offset`, exact in
            // 16 bits: `−255..=255`) serve both rows. Pointers are local copies; the
            // accumulators are the only results.
            unsafe {
                asm!(
                    "2:",
                    "ldr    {xw}, [{x}], #4",
                    "sxtb16 {xe}, {xw}",
                    "sadd16 {xe}, {xe}, {off}",
                    "sxtb16 {xw}, {xw}, ror #8",
                    "sadd16 {xw}, {xw}, {off}",
                    "ldr    {w}, [{w0}], #4",
                    "sxtb16 {t}, {w}",
                    "smlad  {a0}, {xe}, {t}, {a0}",
                    "sxtb16 {t}, {w}, ror #8",
                    "smlad  {a0}, {xw}, {t}, {a0}",
                    "ldr    {w}, [{w1}], #4",
                    "sxtb16 {t}, {w}",
                    "smlad  {a1}, {xe}, {t}, {a1}",
                    "sxtb16 {t}, {w}, ror #8",
                    "smlad  {a1}, {xw}, {t}, {a1}",
                    "cmp    {x}, {end}",
                    "bne    2b",
                    x = inout(reg) x.as_ptr() => _,
                    w0 = inout(reg) w0.as_ptr() => _,
                    w1 = inout(reg) w1.as_ptr() => _,
                    end = in(reg) x.as_ptr().add(4 * groups),
                    off = in(reg) offset_pair(offset),
                    a0 = inout(reg) a0,
                    a1 = inout(reg) a1,
                    xw = out(reg) _,
                    xe = out(reg) _,
                    w = out(reg) _,
                    t = out(reg) _,
                    options(pure, readonly, nostack),
                );
            }
        }
        let tail = 4 * groups..n;
        let [t0, t1] = Portable::dot_rows2(&x[tail.clone()], offset, &w0[tail.clone()], &w1[tail]);
        [a0.wrapping_add(t0), a1.wrapping_add(t1)]
    }

    #[inline(always)]
    fn widen4(x: u32, offset: i32) -> (u32, u32) {
        let o = offset_pair(offset);
        (sadd16(sxtb16(x), o), sadd16(sxtb16_ror8(x), o))
    }

    #[inline(always)]
    fn dot_2x2(pair: &PatchPair, words: usize, w0: &[i8], w1: &[i8]) -> [i32; 4] {
        // Whole groups that every operand holds: two words of each patch, four filter bytes.
        let groups = (words.min(PATCH_WORDS) / 2)
            .min(w0.len() / 4)
            .min(w1.len() / 4);
        let (mut a00, mut a01, mut a10, mut a11) = (0_i32, 0_i32, 0_i32, 0_i32);
        if groups == 0 {
            return [0; 4];
        }
        let p = pair.words[0].as_ptr();
        // SAFETY: the loop runs `groups` ≥ 1 times (checked above). Each pass reads two words
        // at `p` and two at `p + PAIR_STRIDE` (the same words of the second patch: `PatchPair`
        // is `repr(C)`, its two arrays adjacent), then advances `p` by 8 bytes, and one word
        // at each of `w0` and `w1`, advancing them by 4: `2 · groups ≤ PATCH_WORDS` words of each
        // patch and `4 · groups` bytes of each filter row, all in bounds by the `min`s above.
        // Word loads need no alignment on these cores (the filter rows are byte arrays). The
        // pointers are local copies; the accumulators are the only results.
        unsafe {
            let end = p.add(2 * groups);
            asm!(
                "2:",
                "ldr    {wa}, [{w0}], #4",
                "ldr    {wb}, [{w1}], #4",
                "ldr    {x0}, [{p}]",
                "ldr    {x1}, [{p}, #{stride}]",
                "sxtb16 {t}, {wa}",
                "smlad  {a00}, {x0}, {t}, {a00}",
                "smlad  {a10}, {x1}, {t}, {a10}",
                "sxtb16 {t}, {wb}",
                "smlad  {a01}, {x0}, {t}, {a01}",
                "smlad  {a11}, {x1}, {t}, {a11}",
                "ldr    {x1}, [{p}, #{stride4}]",
                "ldr    {x0}, [{p}, #4]",
                "adds   {p}, {p}, #8",
                "sxtb16 {t}, {wa}, ror #8",
                "smlad  {a00}, {x0}, {t}, {a00}",
                "smlad  {a10}, {x1}, {t}, {a10}",
                "sxtb16 {t}, {wb}, ror #8",
                "smlad  {a01}, {x0}, {t}, {a01}",
                "smlad  {a11}, {x1}, {t}, {a11}",
                "cmp    {p}, {end}",
                "bne    2b",
                p = inout(reg) p => _,
                w0 = inout(reg) w0.as_ptr() => _,
                w1 = inout(reg) w1.as_ptr() => _,
                end = in(reg) end,
                a00 = inout(reg) a00,
                a01 = inout(reg) a01,
                a10 = inout(reg) a10,
                a11 = inout(reg) a11,
                wa = out(reg) _,
                wb = out(reg) _,
                x0 = out(reg) _,
                x1 = out(reg) _,
                t = out(reg) _,
                stride = const PAIR_STRIDE,
                stride4 = const PAIR_STRIDE + 4,
                options(pure, readonly, nostack),
            );
        }
        [a00, a01, a10, a11]
    }

    #[inline(always)]
    fn mac4(acc: [i32; 4], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) -> [i32; 4] {
        let taps = list.taps();
        if taps.is_empty() || !list.fits(x.len(), w.len(), c0) {
            return acc;
        }
        // SAFETY: `taps` is not empty and every tap's four bytes from channel `c0` lie inside
        // `x` and `w` (both checked above).
        unsafe {
            taps4(
                acc,
                taps,
                x.as_ptr().add(c0),
                w.as_ptr().add(c0),
                offset_pair(offset),
            )
        }
    }

    #[inline(always)]
    fn mac4_run(acc: &mut [i32], list: &TapList, x: &[i8], w: &[i8], c0: usize, offset: i32) {
        let taps = list.taps();
        let quads = acc.len() / 4;
        if taps.is_empty() || quads == 0 {
            return;
        }
        // Every tap's bytes of the last quad inside `x` and `w` puts those of every quad
        // before it there too: one check for the run.
        let last = c0.checked_add(4 * (quads - 1));
        if !last.is_some_and(|last| list.fits(x.len(), w.len(), last)) {
            for (k, a) in acc.chunks_exact_mut(4).enumerate() {
                let sums = Self::mac4([a[0], a[1], a[2], a[3]], list, x, w, c0 + 4 * k, offset);
                a.copy_from_slice(&sums);
            }
            return;
        }
        let o = offset_pair(offset);
        for (k, a) in acc.chunks_exact_mut(4).enumerate() {
            let c = c0 + 4 * k;
            // SAFETY: `taps` is not empty (checked above) and `c ≤ last`, for which every
            // tap's four bytes lie inside `x` and `w` (checked above), so they do for `c`.
            let sums = unsafe {
                taps4(
                    [a[0], a[1], a[2], a[3]],
                    taps,
                    x.as_ptr().add(c),
                    w.as_ptr().add(c),
                    o,
                )
            };
            a.copy_from_slice(&sums);
        }
    }
}

/// The depthwise sums of four channels over `taps`: `acc[i] += w[i] · (x[i] + o)` (each lane
/// of `o` the offset) for the four bytes at `xb + x offset` and `wb + filter offset` of each
/// tap, wrapping.
///
/// # Safety
///
/// `taps` is not empty, and for every tap the four bytes at `xb + x offset` and at
/// `wb + filter offset` are readable.
#[inline(always)]
unsafe fn taps4(
    acc: [i32; 4],
    taps: &[[u32; 2]],
    xb: *const i8,
    wb: *const i8,
    o: u32,
) -> [i32; 4] {
    let [mut a0, mut a1, mut a2, mut a3] = acc;
    // SAFETY: the loop runs `taps.len()` ≥ 1 times (the caller's promise), reading each
    // `[x offset, filter offset]` pair of `taps` once with `ldrd` (the pairs are 4-byte
    // aligned `u32`s, as `ldrd` needs) and the word at `xb + x offset` and, twice, at
    // `wb + filter offset`: readable for every tap (the caller's promise). Word loads need
    // no alignment on these cores. Pointers and the count are local copies; the four
    // accumulators are the only results.
    unsafe {
        asm!(
            "2:",
            "ldrd   {x}, {wo}, [{l}], #8",
            "ldr    {x}, [{xb}, {x}]",
            "ldr    {w}, [{wb}, {wo}]",
            "sxtb16 {xe}, {x}",
            "sadd16 {xe}, {xe}, {o}",
            "sxtb16 {w}, {w}",
            "smlabb {a0}, {xe}, {w}, {a0}",
            "smlatt {a2}, {xe}, {w}, {a2}",
            "sxtb16 {xe}, {x}, ror #8",
            "sadd16 {xe}, {xe}, {o}",
            // Loading the weights again is cheaper than the register holding them.
            "ldr    {w}, [{wb}, {wo}]",
            "sxtb16 {w}, {w}, ror #8",
            "smlabb {a1}, {xe}, {w}, {a1}",
            "smlatt {a3}, {xe}, {w}, {a3}",
            "subs   {n}, {n}, #1",
            "bne    2b",
            l = inout(reg) taps.as_ptr() => _,
            xb = in(reg) xb,
            wb = in(reg) wb,
            n = inout(reg) taps.len() => _,
            o = in(reg) o,
            a0 = inout(reg) a0,
            a1 = inout(reg) a1,
            a2 = inout(reg) a2,
            a3 = inout(reg) a3,
            x = out(reg) _,
            w = out(reg) _,
            wo = out(reg) _,
            xe = out(reg) _,
            options(pure, readonly, nostack),
        );
    }
    [a0, a1, a2, a3]
}
