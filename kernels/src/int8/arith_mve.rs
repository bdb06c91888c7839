//! Same-shape int8 ADD and MUL on Helium (`cfg(npu_arm_mve)`), four elements per pass.
//!
//! Both operators end in int32 rescalings, so the natural width is four int32 lanes: each pass
//! loads four bytes of each input widened to int32 (`VLDRB.S32`), does every step of
//! [`AddParams`]' or [`MulParams`]' arithmetic on the four lanes at once, and stores four bytes
//! (`VSTRB.32`). Each rescaling is the vector form the convolutions' requantization uses
//! (see `mac/mve.rs`): `VSHL` by the left shift, `VQRDMULH` (gemmlowp's saturating rounding
//! doubling high multiply), then `VRSHL` by the right shift after lowering negative values by
//! one (`VQADD` of `x & right >> 31`), which turns `VRSHL`'s round-half-up into
//! `RoundingDivideByPOT`'s round-half-away-from-zero. ADD's three rescalings have right shifts
//! only. A shift outside −31..=31 (or, for ADD, any left shift) is not this form: such
//! parameters, and the last `len mod 4` elements, take the portable per-element code.
//!
//! # Safety of the `asm!` blocks
//!
//! Each reads `4 · passes` bytes of each input and writes as many of the output, all in bounds
//! by the caller's length checks (argued at each block), and names every register it changes.

use core::arch::asm;

use super::mac::mve::rounding_divide_by_pot;
use super::{AddParams, MulParams, ADD_LEFT_SHIFT};

/// ADD's vector constants, one per 16-byte row (for `VLDRW`): the two shifted input offsets,
/// the activation minimum and maximum, the output offset.
#[repr(C, align(16))]
struct AddConstants([[i32; 4]; 5]);

/// Whether a `(multiplier, shift)` pair takes the vector rescaling.
#[inline(always)]
fn vector_shift(shift: i32) -> bool {
    (-31..=31).contains(&shift)
}

/// ADD over the first `4 · ⌊n / 4⌋` elements of equal-length `a`, `b` and `out`; returns how
/// many it did (0 when the parameters are outside the vector form).
pub(super) fn add(p: &AddParams, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
    let (m1, s1) = p.input1_multiplier();
    let (m2, s2) = p.input2_multiplier();
    let (mo, so) = p.output_multiplier();
    let n = a.len().min(b.len()).min(out.len());
    let passes = n / 4;
    if passes == 0 || ![s1, s2, so].iter().all(|&s| (-31..=0).contains(&s)) {
        return 0;
    }
    let (min, max) = p.activation_range();
    // The offsets, already shifted: (x + off) << 20 is (x << 20) + (off << 20), exactly (both
    // terms and the sum are below 2^28 in magnitude).
    let off1 = p.input1_offset() << ADD_LEFT_SHIFT;
    let off2 = p.input2_offset() << ADD_LEFT_SHIFT;
    // The loop's vector constants, loaded from memory: passed as registers they would leave
    // too few for the loop.
    let k = AddConstants([
        [off1; 4],
        [off2; 4],
        [min; 4],
        [max; 4],
        [p.output_offset(); 4],
    ]);
    // SAFETY: five 16-byte loads of `k` (80 bytes, 16-byte aligned); the loop runs `passes`
    // ≥ 1 times (`le` counts `lr` down), reading four bytes of `a` and of `b` and writing four
    // of `out` per pass: `4 · passes ≤ n` bytes of each, in bounds by the `min` above; `out`
    // is borrowed mutably here. The shifts are in −31..=0 (checked above), where this is
    // TFLM's arithmetic (module docs). Pointers are local copies; every vector register
    // written is a clobber.
    unsafe {
        asm!(
            "vldrw.u32  q3, [{k}]",
            "vldrw.u32  q4, [{k}, #16]",
            "vldrw.u32  q5, [{k}, #32]",
            "vldrw.u32  q6, [{k}, #48]",
            "vldrw.u32  q7, [{k}, #64]",
            "dls        lr, lr",
            "2:",
            "vldrb.s32  q0, [r1], #4",
            "vldrb.s32  q1, [r2], #4",
            "vshl.s32   q0, q0, #20",
            "vshl.s32   q1, q1, #20",
            "vadd.i32   q0, q0, q3",
            "vadd.i32   q1, q1, q4",
            "vqrdmulh.s32 q0, q0, {m1}",
            rounding_divide_by_pot!(scalar "q0", "q2", "{s1}"),
            "vqrdmulh.s32 q1, q1, {m2}",
            rounding_divide_by_pot!(scalar "q1", "q2", "{s2}"),
            "vadd.i32   q0, q0, q1",
            "vqrdmulh.s32 q0, q0, {mo}",
            rounding_divide_by_pot!(scalar "q0", "q2", "{so}"),
            "vadd.i32   q0, q0, q7",
            "vmax.s32   q0, q0, q5",
            "vmin.s32   q0, q0, q6",
            "vstrb.32   q0, [r0], #4",
            "le         lr, 2b",
            // `VLDRB` and `VSTRB` widening or narrowing with writeback need low registers.
            inout("r1") a.as_ptr() => _,
            inout("r2") b.as_ptr() => _,
            inout("r0") out.as_mut_ptr() => _,
            inout("lr") passes => _,
            k = in(reg) &k,
            m1 = in(reg) m1,
            s1 = in(reg) s1,
            m2 = in(reg) m2,
            s2 = in(reg) s2,
            mo = in(reg) mo,
            so = in(reg) so,
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q4") _, out("q5") _, out("q6") _, out("q7") _,
            options(nostack),
        );
    }
    4 * passes
}

/// MUL over the first `4 · ⌊n / 4⌋` elements of equal-length `a`, `b` and `out`; returns how
/// many it did (0 when the shift is outside the vector form).
pub(super) fn mul(p: &MulParams, a: &[i8], b: &[i8], out: &mut [i8]) -> usize {
    let (m, shift) = p.output_multiplier();
    let n = a.len().min(b.len()).min(out.len());
    let passes = n / 4;
    if passes == 0 || !vector_shift(shift) {
        return 0;
    }
    let (left, right) = (shift.max(0), shift.min(0));
    let (min, max) = p.activation_range();
    // SAFETY: as in `add`: `4 · passes ≤ n` bytes read of `a` and `b` and written of `out`,
    // in bounds by the `min` above. The shift is in −31..=31 (checked above), where this is
    // TFLM's arithmetic; the product of two factors in −255..=255 fits an int32 and its left
    // shift wraps as TFLM's `x · 2^left` does.
    unsafe {
        asm!(
            "vdup.32    q3, {off1}",
            "vdup.32    q4, {off2}",
            "vdup.32    q5, {min}",
            "vdup.32    q6, {max}",
            "vdup.32    q7, {right}",
            "dls        lr, {n}",
            "2:",
            "vldrb.s32  q0, [r1], #4",
            "vldrb.s32  q1, [r2], #4",
            "vadd.i32   q0, q0, q3",
            "vadd.i32   q1, q1, q4",
            "vmul.i32   q0, q0, q1",
            "vshl.s32   q0, {left}",
            "vqrdmulh.s32 q0, q0, {m}",
            rounding_divide_by_pot!(splat "q0", "q2", "q7", "{right}"),
            "vadd.i32   q0, q0, {oo}",
            "vmax.s32   q0, q0, q5",
            "vmin.s32   q0, q0, q6",
            "vstrb.32   q0, [r0], #4",
            "le         lr, 2b",
            // `VLDRB` and `VSTRB` widening or narrowing with writeback need low registers.
            inout("r1") a.as_ptr() => _,
            inout("r2") b.as_ptr() => _,
            inout("r0") out.as_mut_ptr() => _,
            n = in(reg) passes,
            off1 = in(reg) p.input1_offset(),
            off2 = in(reg) p.input2_offset(),
            min = in(reg) min,
            max = in(reg) max,
            oo = in(reg) p.output_offset(),
            m = in(reg) m,
            left = in(reg) left,
            right = in(reg) right,
            out("lr") _,
            out("q0") _, out("q1") _, out("q2") _, out("q3") _,
            out("q4") _, out("q5") _, out("q6") _, out("q7") _,
            options(nostack),
        );
    }
    4 * passes
}
