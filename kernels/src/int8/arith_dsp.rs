//! Same-shape int8 ADD and MUL on the Arm DSP extension (`cfg(npu_arm_dsp)` without Helium),
//! in blocks of [`BLOCK`] elements through a small buffer of int32s: the whole of a
//! same-shape call but its last `len mod 4` elements, and each row of a broadcast whose two
//! inputs advance along it (a per-channel vector added to or multiplying an image), which
//! share one buffer and one [`AddPlan`] or [`MulPlan`] per call.
//!
//! # Why a buffer
//!
//! ADD rescales each input and then the sum, each with its own multiplier, shift and offset;
//! MUL widens two offset inputs and rescales their product. Done element by element in one
//! loop, the constants of every stage (ADD: eleven, plus the pointers, the clamp and the
//! temporaries) need more registers than an `asm!` block can have on a Cortex-M. Each stage
//! is instead its own loop over a block, with only its own constants in registers, passing
//! int32s through a [`Block`] on the stack: ADD rescales `a` into it, adds the rescaled `b`
//! (doubled, see below), and requantizes the block into the output; MUL writes the doubled
//! products with `SXTAB16` (both inputs' bytes 0 and 2, or 1 and 3, widened with the offset
//! added in one instruction), `SADD16` and `SMULBB`/`SMULTT`, and requantizes them the same
//! way. The requantization ([`OutputRescale`]) is shared.
//!
//! # The arithmetic (TFLM's, exactly)
//!
//! Every rescaling here is `MultiplyByQuantizedMultiplier` with a right shift `r`:
//! `RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, m), r)`. For `|x| < 2^30` and
//! `m ≥ 0` the doubling high multiply is `⌊(2x · m + 2^31) / 2^32⌋` (gemmlowp's nudge and
//! truncating division give this floor for both signs, and it cannot saturate), which is
//! `SMMULR(2x, m)`: the operands are kept doubled for that reason. `SMMLAR` adds a third
//! register to that result in the same instruction. `RoundingDivideByPOT` by `r ≥ 1` rounds
//! half away from zero: `⌊(y + 2^(r−1) − [y < 0]) / 2^r⌋`, an `ASR` after adding
//! `2^(r−1)` (with `SMMLAR`) and the sign of `x` (`ADD …, ASR #31`): `y` has the sign of `x`
//! or is 0, and where `y = 0 > x` both forms give 0. The output offset joins `2^(r−1)` as
//! `offset · 2^r` (exact: a multiple of `2^r` passes through the floor), so one `ASR` gives
//! the offset output; `SSAT` takes it to int8, and four outputs in a word are clamped to the
//! activation range by `SSUB8`/`SEL` (a byte-wise maximum, then minimum: TFLM's order).
//!
//! For ADD's inputs `x = (v + offset) · 2^20`, so `2x` is `(v << 21) + (offset << 21)`, one
//! `ADD` with a shifted operand. The larger-scale input has the multiplier `2^30` with shift 0
//! (its real multiplier is exactly one half): its rescaling is exactly `x / 2`, a shift, and
//! it takes a loop without the multiply.
//!
//! Parameters outside these forms (right shifts above 31 for ADD's inputs or 23 for the
//! output — where `offset · 2^r` could overflow —, MUL's left shifts and shift 0, offsets or
//! activation bounds outside int8), and the last `len mod 4` elements, are left to the
//! portable code.
//!
//! # Safety of the `asm!` blocks
//!
//! Each loop runs `len / 4 ≥ 1` times over equal lengths (checked where it is called),
//! reading and writing four elements of each slice per pass, all in bounds; word accesses
//! need no alignment on these cores. Pointers are local copies and every register written is
//! an output. `SADD16` and `SSUB8` set the `GE` flags and `SSAT` may set `Q`, which no Rust
//! code reads.

use core::arch::asm;

use super::{AddParams, MulParams};

/// One element of [`InputRescale::store`]'s `Half` loop: load (`$load`), shift, store.
macro_rules! half_store {
    ($load:literal, $store:literal) => {
        concat!(
            "ldrsb  {x}, ",
            $load,
            "\n",
            "add    {x}, {o}, {x}, lsl #19\n",
            "str    {x}, ",
            $store,
            "\n",
        )
    };
}

/// One element of the `Shift` loops: `{t}` is the rescaled byte at `$load` (`{x}` its doubled
/// offset value).
macro_rules! shift_rescale {
    ($load:literal) => {
        concat!(
            "ldrsb  {x}, ",
            $load,
            "\n",
            "add    {x}, {o}, {x}, lsl #21\n",
            "smmlar {t}, {x}, {m}, {h}\n",
            "add    {t}, {t}, {x}, asr #31\n",
            "asr    {t}, {t}, {r}\n",
        )
    };
}

/// One element of [`InputRescale::store`]'s `Shift` loop.
macro_rules! shift_store {
    ($load:literal, $store:literal) => {
        concat!(shift_rescale!($load), "str    {t}, ", $store, "\n")
    };
}

/// One element of [`InputRescale::add_doubled`]'s `Half` loop: twice the rescaled byte is
/// `(v << 20) + (offset << 20)`, plus twice the buffer's word.
macro_rules! half_add {
    ($load:literal, $word:literal, $store:literal) => {
        concat!(
            "ldrsb  {x}, ",
            $load,
            "\n",
            "add    {x}, {o}, {x}, lsl #20\n",
            "ldr    {t}, ",
            $word,
            "\n",
            "add    {t}, {x}, {t}, lsl #1\n",
            "str    {t}, ",
            $store,
            "\n",
        )
    };
}

/// One element of [`InputRescale::add_doubled`]'s `Shift` loop.
macro_rules! shift_add {
    ($load:literal, $word:literal, $store:literal) => {
        concat!(
            shift_rescale!($load),
            "ldr    {x}, ",
            $word,
            "\n",
            "add    {t}, {t}, {x}\n",
            "lsl    {t}, {t}, #1\n",
            "str    {t}, ",
            $store,
            "\n",
        )
    };
}

/// One output of [`OutputRescale::requantize`]: the word at `$load` requantized and saturated
/// to int8 into `$to`.
macro_rules! requantize_one {
    ($load:literal, $to:literal) => {
        concat!(
            "ldr    {x}, ",
            $load,
            "\n",
            "smmlar {t}, {x}, {m}, {k}\n",
            "add    {t}, {t}, {x}, asr #31\n",
            "asr    {t}, {t}, {r}\n",
            "ssat   ",
            $to,
            ", #8, {t}\n",
        )
    };
}

/// Elements per block (a multiple of 4): the buffer is `4 · BLOCK` bytes of stack, and each
/// block costs the three loops' set-up once.
pub(super) const BLOCK: usize = 64;

/// The int32s passed between the loops of one block (its contents between calls do not
/// matter: each block's first loop writes what the next ones read).
pub(super) struct Block([i32; BLOCK]);

impl Block {
    /// A zeroed buffer.
    pub(super) const fn new() -> Self {
        Self([0; BLOCK])
    }
}

/// The rescaling of one ADD input to the common scale (`(v + offset) · 2^20` rescaled; see
/// the [module docs](self)).
#[derive(Clone, Copy)]
enum InputRescale {
    /// Multiplier `2^30`, shift 0: `(v + offset) · 2^19`; holds `offset << 19`.
    Half(i32),
    /// Right shift `r` in `1..=31`: `offset << 21`, the multiplier, `2^(r−1)` and `r`.
    Shift {
        offset: i32,
        m: i32,
        half: i32,
        r: i32,
    },
}

impl InputRescale {
    /// The rescaling for `offset` (in `−255..=255`: a zero point negated) and
    /// `(multiplier, shift)`, if it takes one of the forms above.
    fn new(offset: i32, (m, shift): (i32, i32)) -> Option<Self> {
        if !(-255..=255).contains(&offset) || m < 0 {
            return None;
        }
        if shift == 0 && m == 1 << 30 {
            return Some(Self::Half(offset << 19));
        }
        if !(-31..=-1).contains(&shift) {
            return None;
        }
        let r = -shift;
        Some(Self::Shift {
            offset: offset << 21,
            m,
            half: 1 << (r - 1),
            r,
        })
    }

    /// `buf[i] = rescaled(x[i])` over the whole quads of the shorter of the two.
    fn store(&self, x: &[i8], buf: &mut [i32]) {
        let quads = x.len().min(buf.len()) / 4;
        if quads == 0 {
            return;
        }
        let (px, pb) = (x.as_ptr(), buf.as_mut_ptr());
        // SAFETY: see the module docs; `quads ≥ 1` passes, each reading four bytes of `x`
        // and writing four words of `buf`, `4 · quads` of each in bounds by the `min` above.
        // The arithmetic is the module docs' (|2x| < 2^29).
        unsafe {
            match *self {
                Self::Half(offset) => asm!(
                    "2:",
                    half_store!("[{px}], #4", "[{pb}], #16"),
                    half_store!("[{px}, #-3]", "[{pb}, #-12]"),
                    half_store!("[{px}, #-2]", "[{pb}, #-8]"),
                    half_store!("[{px}, #-1]", "[{pb}, #-4]"),
                    "cmp    {px}, {end}",
                    "bne    2b",
                    px = inout(reg) px => _,
                    pb = inout(reg) pb => _,
                    end = in(reg) px.add(4 * quads),
                    o = in(reg) offset,
                    x = out(reg) _,
                    options(nostack),
                ),
                Self::Shift { offset, m, half, r } => asm!(
                    "2:",
                    shift_store!("[{px}], #4", "[{pb}], #16"),
                    shift_store!("[{px}, #-3]", "[{pb}, #-12]"),
                    shift_store!("[{px}, #-2]", "[{pb}, #-8]"),
                    shift_store!("[{px}, #-1]", "[{pb}, #-4]"),
                    "cmp    {px}, {end}",
                    "bne    2b",
                    px = inout(reg) px => _,
                    pb = inout(reg) pb => _,
                    end = in(reg) px.add(4 * quads),
                    o = in(reg) offset,
                    m = in(reg) m,
                    h = in(reg) half,
                    r = in(reg) r,
                    x = out(reg) _,
                    t = out(reg) _,
                    options(nostack),
                ),
            }
        }
    }

    /// `buf[i] = 2 · (buf[i] + rescaled(x[i]))` over the whole quads of the shorter of the
    /// two: the doubled sum [`OutputRescale`] takes.
    fn add_doubled(&self, x: &[i8], buf: &mut [i32]) {
        let quads = x.len().min(buf.len()) / 4;
        if quads == 0 {
            return;
        }
        let (px, pb) = (x.as_ptr(), buf.as_mut_ptr());
        // SAFETY: as in `store`, each pass also reading the four words it writes. Both
        // rescaled inputs are below 2^27 in magnitude, so the doubled sum is below 2^29.
        unsafe {
            match *self {
                Self::Half(offset) => asm!(
                    "2:",
                    half_add!("[{px}], #4", "[{pb}]", "[{pb}], #16"),
                    half_add!("[{px}, #-3]", "[{pb}, #-12]", "[{pb}, #-12]"),
                    half_add!("[{px}, #-2]", "[{pb}, #-8]", "[{pb}, #-8]"),
                    half_add!("[{px}, #-1]", "[{pb}, #-4]", "[{pb}, #-4]"),
                    "cmp    {px}, {end}",
                    "bne    2b",
                    px = inout(reg) px => _,
                    pb = inout(reg) pb => _,
                    end = in(reg) px.add(4 * quads),
                    // Doubled: `(v + offset) · 2^20` is twice the rescaled input.
                    o = in(reg) offset << 1,
                    x = out(reg) _,
                    t = out(reg) _,
                    options(nostack),
                ),
                Self::Shift { offset, m, half, r } => asm!(
                    "2:",
                    shift_add!("[{px}], #4", "[{pb}]", "[{pb}], #16"),
                    shift_add!("[{px}, #-3]", "[{pb}, #-12]", "[{pb}, #-12]"),
                    shift_add!("[{px}, #-2]", "[{pb}, #-8]", "[{pb}, #-8]"),
                    shift_add!("[{px}, #-1]", "[{pb}, #-4]", "[{pb}, #-4]"),
                    "cmp    {px}, {end}",
                    "bne    2b",
                    px = inout(reg) px => _,
                    pb = inout(reg) pb => _,
                    end = in(reg) px.add(4 * quads),
                    o = in(reg) offset,
                    m = in(reg) m,
                    h = in(reg) half,
                    r = in(reg) r,
                    x = out(reg) _,
                    t = out(reg) _,
                    options(nostack),
                ),
            }
        }
    }
}

/// The requantization of doubled int32s to int8: TFLM's `MultiplyByQuantizedMultiplier` by
/// `m` with a right shift `r` in `1..=23`, the output offset, the activation clamp (see the
/// [module docs](self)).
#[derive(Clone, Copy)]
struct OutputRescale {
    m: i32,
    /// `2^(r−1) + offset · 2^r`.
    k: i32,
    r: i32,
    /// The activation minimum in each byte.
    min: u32,
    /// The activation maximum in each byte.
    max: u32,
}

impl OutputRescale {
    /// The requantization by `(multiplier, shift)` plus `offset` (an int8 zero point),
    /// clamped to `(min, max)` (within int8), if it takes the form above.
    fn new((m, shift): (i32, i32), offset: i32, (min, max): (i32, i32)) -> Option<OutputRescale> {
        let int8 = i32::from(i8::MIN)..=i32::from(i8::MAX);
        if m < 0
            || !(-23..=-1).contains(&shift)
            || !int8.contains(&offset)
            || !int8.contains(&min)
            || !int8.contains(&max)
        {
            return None;
        }
        let r = -shift;
        // |offset| ≤ 128 and r ≤ 23: below 2^30 in magnitude, leaving room for the product.
        let k = (1 << (r - 1)) + offset * (1 << r);
        let bytes = |v: i32| u32::from(v as u8) * 0x0101_0101;
        Some(OutputRescale {
            m,
            k,
            r,
            min: bytes(min),
            max: bytes(max),
        })
    }

    /// `out[i]` from the doubled value `buf[i]` (`|buf[i]| < 2^30`) over the whole quads of
    /// the shorter of the two.
    fn requantize(&self, buf: &[i32], out: &mut [i8]) {
        let quads = buf.len().min(out.len()) / 4;
        if quads == 0 {
            return;
        }
        let pb = buf.as_ptr();
        // SAFETY: see the module docs; `quads ≥ 1` passes, each reading four words of `buf`
        // and writing one word (four bytes) of `out`, `4 · quads` elements of each in bounds
        // by the `min` above; `out` is borrowed mutably here. With |2x| < 2^30 and
        // |k| < 2^30 the sum `k + y − 1` stays in range.
        unsafe {
            asm!(
                "2:",
                requantize_one!("[{pb}], #16", "{w}"),
                requantize_one!("[{pb}, #-12]", "{t}"),
                "bfi    {w}, {t}, #8, #8",
                requantize_one!("[{pb}, #-8]", "{t}"),
                "bfi    {w}, {t}, #16, #8",
                requantize_one!("[{pb}, #-4]", "{t}"),
                "bfi    {w}, {t}, #24, #8",
                // Byte-wise max(w, min), then min(w, max).
                "ssub8  {t}, {w}, {lo}",
                "sel    {w}, {w}, {lo}",
                "ssub8  {t}, {w}, {hi}",
                "sel    {w}, {hi}, {w}",
                "str    {w}, [{po}], #4",
                "cmp    {pb}, {end}",
                "bne    2b",
                pb = inout(reg) pb => _,
                po = inout(reg) out.as_mut_ptr() => _,
                end = in(reg) pb.add(4 * quads),
                m = in(reg) self.m,
                k = in(reg) self.k,
                r = in(reg) self.r,
                lo = in(reg) self.min,
                hi = in(reg) self.max,
                x = out(reg) _,
                t = out(reg) _,
                w = out(reg) _,
                options(nostack),
            );
        }
    }
}

/// Both input offsets in the two 16-bit lanes of a word each (for `SXTAB16`).
fn lane_pair(offset: i32) -> u32 {
    super::mac::pack(offset, offset)
}

/// `buf[i] = 2 · (a[i] + off_a) · (b[i] + off_b)` over the whole quads of the shortest of the
/// three, `o_a` and `o_b` the offsets (in `−255..=255`) in both lanes.
fn doubled_products(a: &[i8], b: &[i8], (o_a, o_b): (u32, u32), buf: &mut [i32]) {
    let quads = a.len().min(b.len()).min(buf.len()) / 4;
    if quads == 0 {
        return;
    }
    let pa = a.as_ptr();
    // SAFETY: see the module docs; `quads ≥ 1` passes, each reading one word of `a` and of
    // `b` and writing four words of `buf`, in bounds by the `min` above. Each lane holds
    // `v + offset` in −255..=255 (exact in 16 bits), doubled −510..=510, and the product fits
    // an int32.
    unsafe {
        asm!(
            "2:",
            "ldr     {wa}, [{pa}], #4",
            "ldr     {wb}, [{pb}], #4",
            // Bytes 0 and 2.
            "sxtab16 {xa}, {oa}, {wa}",
            "sxtab16 {xb}, {ob}, {wb}",
            "sadd16  {xa}, {xa}, {xa}",
            "smulbb  {t}, {xa}, {xb}",
            "str     {t}, [{pp}], #16",
            "smultt  {t}, {xa}, {xb}",
            "str     {t}, [{pp}, #-8]",
            // Bytes 1 and 3.
            "sxtab16 {xa}, {oa}, {wa}, ror #8",
            "sxtab16 {xb}, {ob}, {wb}, ror #8",
            "sadd16  {xa}, {xa}, {xa}",
            "smulbb  {t}, {xa}, {xb}",
            "str     {t}, [{pp}, #-12]",
            "smultt  {t}, {xa}, {xb}",
            "str     {t}, [{pp}, #-4]",
            "cmp     {pa}, {end}",
            "bne     2b",
            pa = inout(reg) pa => _,
            pb = inout(reg) b.as_ptr() => _,
            pp = inout(reg) buf.as_mut_ptr() => _,
            end = in(reg) pa.add(4 * quads),
            oa = in(reg) o_a,
            ob = in(reg) o_b,
            wa = out(reg) _,
            wb = out(reg) _,
            xa = out(reg) _,
            xb = out(reg) _,
            t = out(reg) _,
            options(nostack),
        );
    }
}

/// ADD's three rescalings in this module's forms.
#[derive(Clone, Copy)]
pub(super) struct AddPlan {
    a: InputRescale,
    b: InputRescale,
    out: OutputRescale,
}

impl AddPlan {
    /// The plan for `p`, if every rescaling takes this module's forms.
    pub(super) fn new(p: &AddParams) -> Option<Self> {
        Some(Self {
            a: InputRescale::new(p.input1_offset(), p.input1_multiplier())?,
            b: InputRescale::new(p.input2_offset(), p.input2_multiplier())?,
            out: OutputRescale::new(
                p.output_multiplier(),
                p.output_offset(),
                p.activation_range(),
            )?,
        })
    }

    /// ADD over the first `4 · ⌊n / 4⌋` elements of `a`, `b` and `out` (`n` the shortest
    /// length); returns how many it did.
    pub(super) fn run(&self, block: &mut Block, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
        let n = a.len().min(b.len()).min(out.len()) / 4 * 4;
        let blocks = a[..n]
            .chunks(BLOCK)
            .zip(b[..n].chunks(BLOCK))
            .zip(out[..n].chunks_mut(BLOCK));
        for ((a, b), out) in blocks {
            let buf = &mut block.0[..a.len()];
            self.a.store(a, buf);
            self.b.add_doubled(b, buf);
            self.out.requantize(buf, out);
        }
        n
    }
}

/// MUL's offsets and requantization in this module's forms.
#[derive(Clone, Copy)]
pub(super) struct MulPlan {
    offsets: (u32, u32),
    out: OutputRescale,
}

impl MulPlan {
    /// The plan for `p`, if its requantization takes this module's form (a right shift).
    pub(super) fn new(p: &MulParams) -> Option<Self> {
        let (o_a, o_b) = (p.input1_offset(), p.input2_offset());
        if !(-255..=255).contains(&o_a) || !(-255..=255).contains(&o_b) {
            return None;
        }
        Some(Self {
            offsets: (lane_pair(o_a), lane_pair(o_b)),
            out: OutputRescale::new(
                p.output_multiplier(),
                p.output_offset(),
                p.activation_range(),
            )?,
        })
    }

    /// MUL over the first `4 · ⌊n / 4⌋` elements of `a`, `b` and `out` (`n` the shortest
    /// length); returns how many it did.
    pub(super) fn run(&self, block: &mut Block, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
        let n = a.len().min(b.len()).min(out.len()) / 4 * 4;
        let blocks = a[..n]
            .chunks(BLOCK)
            .zip(b[..n].chunks(BLOCK))
            .zip(out[..n].chunks_mut(BLOCK));
        for ((a, b), out) in blocks {
            let buf = &mut block.0[..a.len()];
            doubled_products(a, b, self.offsets, buf);
            self.out.requantize(buf, out);
        }
        n
    }
}
