//! Broadcasting int8 ADD, SUB and MUL, and the elementwise loop they share with [`add`],
//! [`sub`] and [`mul`].
//!
//! # Shapes
//!
//! [`BroadcastShape`] follows numpy's and TFLite's rules, up to rank 6: the shapes are aligned
//! on their last dimension and the shorter ones padded with leading 1s; along each dimension the
//! two inputs must have equal sizes, or one of them size 1 (it is then repeated). The output
//! shape must be exactly the result.
//!
//! The constructor reduces the shapes to a short loop nest, as TFLM's `BroadcastBinaryOpSimple`
//! (`kernels/internal/reference/broadcast_loop.h`) does: dimensions of output size 1 are
//! dropped, and neighbouring dimensions along which the same inputs are repeated are fused into
//! one. `[1, 16, 32] − [1, 16, 1]` becomes 16 rows of 32 with `b` repeated along the rows;
//! `[1, 2, 16, 16] · []` becomes one run of 512 with `b` repeated; equal shapes become one flat
//! run (the fast path, [`BroadcastShape::is_elementwise`]).
//!
//! # Arithmetic
//!
//! Broadcasting changes only which elements are paired, never the arithmetic: TFLM's int8 ADD,
//! SUB and MUL call the same per-element function with and without broadcasting
//! (`reference_integer_ops::AddFunc` from `BroadcastAdd6DSlow` and `Add`;
//! `reference_ops::BroadcastQuantSubSlow` and `SubElementwise`, which are the same expression;
//! `BroadcastMul6DSlow` and `MulElementwise`, likewise), so `add_broadcast` over equal shapes
//! is byte-for-byte [`add`]. The per-element work is split into the part that depends on one
//! input only (for ADD and SUB: zero-point offset, `<< 20`, rescale to the common scale; for
//! MUL: the offset) and the part that combines the two. When an input is repeated along the
//! innermost run, its part is computed once per run instead of once per element; and from
//! 1024 outputs on, ADD and SUB compute it once per call for each of the 256 int8 values, in
//! two tables on the stack (2 KiB), so that each output costs one rescaling instead of three
//! (about 3× faster than the per-element formula on a host). These are exact transformations:
//! the parts are pure functions of the input value.
//!
//! [`add`]: super::add
//! [`sub`]: super::sub()
//! [`mul`]: super::mul

use super::{requantized_to_i8, AddParams, MulParams, NoSimd, SimdRun, SubParams, ADD_LEFT_SHIFT};
use crate::fixed_point::{
    multiply_by_quantized_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul,
};
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Most dimensions a broadcast shape may have (TFLM's `kMaxMulBroadcastDim`, and the rank of
/// its `BroadcastAdd6DSlow`).
pub const MAX_BROADCAST_RANK: usize = 6;

/// Two input shapes broadcast to an output shape, resolved into a loop nest (see the
/// [module docs](self)).
///
/// Stored as at most six fused output extents (outermost first) and, per extent, whether each
/// input is repeated along it: 28 bytes, small enough to travel by value in a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BroadcastShape {
    /// Output extents of the fused loops, outermost first; `rank` of them are used.
    dims: [u32; MAX_BROADCAST_RANK],
    /// Bit `i` set: `a` is repeated along loop `i` (its stride there is 0).
    a_repeated: u8,
    /// Bit `i` set: `b` is repeated along loop `i`.
    b_repeated: u8,
    /// Loops in use, 0 (a single element) to 6.
    rank: u8,
}

impl BroadcastShape {
    /// Resolves `a` and `b` broadcast to `out` (dimensions outermost first; an empty slice is
    /// a scalar).
    ///
    /// Errors:
    /// - [`KernelError::Unsupported`] `"rank above 6"` when a shape has more than
    ///   [`MAX_BROADCAST_RANK`] dimensions, `"shapes do not broadcast"` when a dimension
    ///   differs between `a` and `b` with neither size 1, `"output is not the broadcast shape"`
    ///   when `out` differs from the broadcast shape (in a size or in rank);
    /// - [`KernelError::ShapeOverflow`] when an element count does not fit a `u32` or a slice.
    pub fn new(a: &[u32], b: &[u32], out: &[u32]) -> Result<Self, KernelError> {
        if a.len() > MAX_BROADCAST_RANK
            || b.len() > MAX_BROADCAST_RANK
            || out.len() > MAX_BROADCAST_RANK
        {
            return Err(KernelError::Unsupported {
                what: "rank above 6",
            });
        }
        let rank = a.len().max(b.len());
        if out.len() != rank {
            return Err(KernelError::Unsupported {
                what: "output is not the broadcast shape",
            });
        }
        // Size of dimension `i` (of `rank`, outermost first) of a shape padded with leading 1s.
        let padded =
            |shape: &[u32], i: usize| (i + shape.len()).checked_sub(rank).map_or(1, |j| shape[j]);
        let mut shape = Self {
            dims: [0; MAX_BROADCAST_RANK],
            a_repeated: 0,
            b_repeated: 0,
            rank: 0,
        };
        // Running element counts, to refuse shapes whose buffers cannot exist.
        let (mut a_len, mut b_len, mut out_len) = (1_u32, 1_u32, 1_u32);
        let mut last_kind = None;
        for (i, &dout) in out.iter().enumerate() {
            let (da, db) = (padded(a, i), padded(b, i));
            let broadcast = if da == db || db == 1 {
                da
            } else if da == 1 {
                db
            } else {
                return Err(KernelError::Unsupported {
                    what: "shapes do not broadcast",
                });
            };
            if dout != broadcast {
                return Err(KernelError::Unsupported {
                    what: "output is not the broadcast shape",
                });
            }
            let count = |n: u32, d: u32| n.checked_mul(d).ok_or(KernelError::ShapeOverflow);
            a_len = count(a_len, da)?;
            b_len = count(b_len, db)?;
            out_len = count(out_len, dout)?;
            if dout == 1 {
                continue; // a loop of one iteration: nothing to index
            }
            // An input of size 1 here (while the output is not) is repeated along this loop.
            let kind = (da == 1, db == 1);
            let r = usize::from(shape.rank);
            if last_kind == Some(kind) {
                // Same inputs repeated as along the previous (outer) loop: the two loops are
                // one loop over their product, with the inner loop's strides.
                shape.dims[r - 1] = count(shape.dims[r - 1], dout)?;
            } else {
                shape.dims[r] = dout;
                shape.a_repeated |= u8::from(kind.0) << r;
                shape.b_repeated |= u8::from(kind.1) << r;
                shape.rank += 1;
                last_kind = Some(kind);
            }
        }
        for n in [a_len, b_len, out_len] {
            let n = usize::try_from(n).map_err(|_| KernelError::ShapeOverflow)?;
            if n > isize::MAX as usize {
                return Err(KernelError::ShapeOverflow);
            }
        }
        Ok(shape)
    }

    /// Element counts `(a, b, out)` the buffers must have.
    #[must_use]
    pub fn lens(&self) -> (usize, usize, usize) {
        let (mut a, mut b, mut out) = (1_usize, 1_usize, 1_usize);
        for (i, &d) in self.loops().iter().enumerate() {
            // Products of subsets of the dimensions, all checked to fit in `new`.
            let d = d as usize;
            out *= d;
            if !self.a_repeats(i) {
                a *= d;
            }
            if !self.b_repeats(i) {
                b *= d;
            }
        }
        (a, b, out)
    }

    /// Whether no input is repeated: `a`, `b` and the output have the same element count and
    /// are combined element by element (the fast path).
    #[must_use]
    pub const fn is_elementwise(&self) -> bool {
        self.a_repeated == 0 && self.b_repeated == 0
    }

    /// Extents of the fused loops, outermost first (empty for a single element).
    #[must_use]
    pub fn loops(&self) -> &[u32] {
        &self.dims[..usize::from(self.rank)]
    }

    /// Bit masks over [`loops`](Self::loops): bit `i` set when `a` (first) or `b` (second)
    /// is repeated along loop `i`, that is has size 1 there.
    #[must_use]
    pub const fn repeats(&self) -> (u8, u8) {
        (self.a_repeated, self.b_repeated)
    }

    fn a_repeats(&self, i: usize) -> bool {
        self.a_repeated >> i & 1 != 0
    }

    fn b_repeats(&self, i: usize) -> bool {
        self.b_repeated >> i & 1 != 0
    }

    /// Innermost runs of the loop nest: output elements over the innermost extent (1 for equal
    /// shapes, 0 for an empty output). Each costs a step of the nest and, where a SIMD loop
    /// takes the run, that loop's set-up.
    #[must_use]
    pub fn runs(&self) -> u64 {
        let rank = usize::from(self.rank);
        if rank <= 1 {
            return u64::from(self.lens().2 != 0);
        }
        self.dims[..rank - 1]
            .iter()
            .fold(1_u64, |n, &d| n.saturating_mul(u64::from(d)))
    }

    /// Whether both inputs advance along the innermost loop, so that each innermost run pairs
    /// two contiguous runs (a SIMD loop's operands).
    fn inner_contiguous(&self) -> bool {
        let inner = usize::from(self.rank).saturating_sub(1);
        !self.a_repeats(inner) && !self.b_repeats(inner)
    }
}

/// Packed as the three shapes of its loop nest (the rank, then the output's extents, `a`'s and
/// `b`'s, 1 where one is repeated), read back through [`BroadcastShape::new`]: the loop nest
/// is resolved again, and is the one written (its loops cannot fuse further).
impl Packed for BroadcastShape {
    fn pack(&self, w: &mut Words<'_>) {
        let loops = self.loops();
        w.put(loops.len() as u32);
        for repeated in [None, Some(self.a_repeated), Some(self.b_repeated)] {
            for (i, &d) in loops.iter().enumerate() {
                w.put(if repeated.is_some_and(|r| r >> i & 1 != 0) {
                    1
                } else {
                    d
                });
            }
        }
    }
    fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let rank = r.take()? as usize;
        if rank > MAX_BROADCAST_RANK {
            return Err(KernelError::Unsupported {
                what: "rank above 6",
            });
        }
        let mut dims = [[0u32; MAX_BROADCAST_RANK]; 3];
        for shape in &mut dims {
            for d in &mut shape[..rank] {
                *d = r.take()?;
            }
        }
        let [out, a, b] = dims;
        Self::new(&a[..rank], &b[..rank], &out[..rank])
    }
}

/// A binary operator split as described in the [module docs](self): `combine(prep_a(a),
/// prep_b(b))` is the operator's result for the pair `(a, b)`. The int8 operators here; the
/// int16 ones (TFLM's 16x8 ADD and MUL, [`crate::int16`]) run through the same loop nest.
pub(crate) trait BinaryOp {
    /// The element type of both inputs and the output.
    type Elem: Copy;
    /// Whether `prep_a` and `prep_b` cost enough (a rescaling each, for ADD and SUB) that
    /// long inputs are better served by tabulating them over the 256 int8 values first.
    const TABULATE: bool = false;
    /// The work that depends on the first input only.
    fn prep_a(&self, a: Self::Elem) -> i32;
    /// The work that depends on the second input only.
    fn prep_b(&self, b: Self::Elem) -> i32;
    /// The rest: combine the prepared inputs, rescale, offset and clamp.
    fn combine(&self, a: i32, b: i32) -> Self::Elem;
}

/// TFLM's `MultiplyByQuantizedMultiplierSmallerThanOneExp`: the shift is a right shift (`≤ 0`).
#[inline]
pub(crate) fn rescale_smaller_than_one(x: i32, multiplier: i32, shift: i32) -> i32 {
    rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), -shift)
}

impl BinaryOp for AddParams {
    type Elem = i8;
    const TABULATE: bool = true;

    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        // The offset input is in [−255, 255], so the shifted one is below 2^28 in magnitude and
        // the rescaled one (multiplier ≤ 0.5) below 2^27.
        let shifted = (i32::from(a) + self.input1_offset) << ADD_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, self.input1_multiplier, self.input1_shift)
    }

    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        let shifted = (i32::from(b) + self.input2_offset) << ADD_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, self.input2_multiplier, self.input2_shift)
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        // |a + b| < 2^28: no overflow.
        let sum = rescale_smaller_than_one(a + b, self.output_multiplier, self.output_shift);
        requantized_to_i8(
            sum,
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

impl BinaryOp for SubParams {
    type Elem = i8;
    const TABULATE: bool = true;

    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        let (multiplier, shift) = self.input1_multiplier();
        let shifted = (i32::from(a) + self.input1_offset()) << ADD_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, multiplier, shift)
    }

    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        let (multiplier, shift) = self.input2_multiplier();
        let shifted = (i32::from(b) + self.input2_offset()) << ADD_LEFT_SHIFT;
        rescale_smaller_than_one(shifted, multiplier, shift)
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        // TFLM subtracts the two rescaled inputs; it does not negate input 2's multiplier
        // (which would round −x·m differently from −(x·m): the doubling high multiply rounds
        // ties upward). |a − b| < 2^28: no overflow.
        let (multiplier, shift) = self.output_multiplier();
        let (min, max) = self.activation_range();
        let difference = rescale_smaller_than_one(a - b, multiplier, shift);
        requantized_to_i8(difference, self.output_offset(), min, max)
    }
}

impl BinaryOp for MulParams {
    type Elem = i8;

    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        i32::from(a) + self.input1_offset
    }

    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        i32::from(b) + self.input2_offset
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        // Each factor is in [−255, 255], so the product fits easily.
        let scaled =
            multiply_by_quantized_multiplier(a * b, self.output_multiplier, self.output_shift);
        requantized_to_i8(
            scaled,
            self.output_offset,
            self.activation_min,
            self.activation_max,
        )
    }
}

/// Outputs from which tabulating an operator's `prep_a` and `prep_b` pays for itself: building
/// the tables costs 512 preparations, and each output then saves two.
const TABULATE_FROM: usize = 1024;

/// `k` with `prep_a` and `prep_b` read from tables of their values for all 256 int8 inputs
/// (2 KiB on the stack). Exact: the tables hold the very values `k` computes.
struct Tabulated<'k, K> {
    k: &'k K,
    a: [i32; 256],
    b: [i32; 256],
}

impl<'k, K: BinaryOp<Elem = i8>> Tabulated<'k, K> {
    #[inline(always)]
    fn new(k: &'k K) -> Self {
        let (mut a, mut b) = ([0; 256], [0; 256]);
        for x in i8::MIN..=i8::MAX {
            let i = usize::from(x as u8);
            a[i] = k.prep_a(x);
            b[i] = k.prep_b(x);
        }
        Self { k, a, b }
    }
}

impl<K: BinaryOp<Elem = i8>> BinaryOp for Tabulated<'_, K> {
    type Elem = i8;

    #[inline]
    fn prep_a(&self, a: i8) -> i32 {
        self.a[usize::from(a as u8)]
    }

    #[inline]
    fn prep_b(&self, b: i8) -> i32 {
        self.b[usize::from(b as u8)]
    }

    #[inline]
    fn combine(&self, a: i32, b: i32) -> i8 {
        self.k.combine(a, b)
    }
}

/// `out[i] = op(a[i], b[i])` over the shortest of the three slices (callers check lengths);
/// built with AVX2 enabled when the CPU has it, as [`broadcast`] is.
pub(crate) fn elementwise<K: BinaryOp<Elem = i8>>(k: &K, a: &[i8], b: &[i8], out: &mut [i8]) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if super::x86::has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
        #[allow(unsafe_code)]
        unsafe {
            elementwise_avx2(k, a, b, out);
        }
        return;
    }
    elementwise_any(k, a, b, out);
}

/// [`elementwise_any`] compiled with AVX2 enabled (see [`broadcast_run_avx2`]).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
fn elementwise_avx2<K: BinaryOp<Elem = i8>>(k: &K, a: &[i8], b: &[i8], out: &mut [i8]) {
    elementwise_any(k, a, b, out);
}

/// [`elementwise`]'s loop, for every target.
#[inline(always)]
fn elementwise_any<K: BinaryOp<Elem = i8>>(k: &K, a: &[i8], b: &[i8], out: &mut [i8]) {
    if K::TABULATE && out.len() >= TABULATE_FROM {
        elementwise_run(&Tabulated::new(k), a, b, out);
    } else {
        elementwise_run(k, a, b, out);
    }
}

#[inline(always)]
fn elementwise_run<K: BinaryOp>(k: &K, a: &[K::Elem], b: &[K::Elem], out: &mut [K::Elem]) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = k.combine(k.prep_a(x), k.prep_b(y));
    }
}

/// Checks the buffer lengths against `s`, then runs `k` over the loop nest.
pub(crate) fn broadcast<K: BinaryOp<Elem = i8>>(
    k: &K,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    broadcast_with(k, s, a, b, out, None::<NoSimd>)
}

/// [`broadcast`], each run whose inputs are both contiguous starting on `simd` when there is
/// one.
fn broadcast_with<K: BinaryOp<Elem = i8>>(
    k: &K,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
    simd: Option<impl SimdRun>,
) -> Result<(), KernelError> {
    let (a_len, b_len, out_len) = s.lens();
    check_len("a", a_len, a.len())?;
    check_len("b", b_len, b.len())?;
    check_len("output", out_len, out.len())?;
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if super::x86::has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
        #[allow(unsafe_code)]
        unsafe {
            broadcast_run_avx2(k, s, a, b, out);
        }
        return Ok(());
    }
    broadcast_run(k, s, a, b, out, simd);
    Ok(())
}

/// [`broadcast`] once the lengths are checked.
#[inline(always)]
fn broadcast_run<K: BinaryOp<Elem = i8>>(
    k: &K,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
    simd: Option<impl SimdRun>,
) {
    // The SIMD loop takes every contiguous run but its last `len mod 4` outputs: tables for
    // those would not pay.
    let simd_runs = simd.is_some() && s.inner_contiguous();
    let mut simd = simd;
    let mut prefix = |a: &[i8], b: &[i8], out: &mut [i8]| simd.as_mut().map_or(0, |f| f(a, b, out));
    if s.is_elementwise() {
        let done = prefix(a, b, out);
        elementwise_any(k, &a[done..], &b[done..], &mut out[done..]);
    } else if K::TABULATE && out.len() >= TABULATE_FROM && !simd_runs {
        // Tabulate once for the whole nest rather than per run.
        broadcast_nest(&Tabulated::new(k), s, a, b, out, prefix);
    } else {
        broadcast_nest(k, s, a, b, out, prefix);
    }
}

/// [`broadcast_run`] compiled with AVX2 enabled (on x86-64 hosts whose CPU has it): the same
/// source, hence the same arithmetic element by element, but the requantizations' 32×32-bit
/// products vectorise (`VPMULDQ`), which the x86-64 baseline (SSE2) lacks.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
fn broadcast_run_avx2<K: BinaryOp<Elem = i8>>(
    k: &K,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) {
    broadcast_run(k, s, a, b, out, None::<NoSimd>);
}

/// Checks the buffer lengths against `s`, then runs `k` over the loop nest, never tabulated:
/// for operators on elements wider than int8.
pub(crate) fn broadcast_untabulated<K: BinaryOp>(
    k: &K,
    s: &BroadcastShape,
    a: &[K::Elem],
    b: &[K::Elem],
    out: &mut [K::Elem],
) -> Result<(), KernelError> {
    let (a_len, b_len, out_len) = s.lens();
    check_len("a", a_len, a.len())?;
    check_len("b", b_len, b.len())?;
    check_len("output", out_len, out.len())?;
    if s.is_elementwise() {
        elementwise_run(k, a, b, out);
    } else {
        broadcast_nest(k, s, a, b, out, |_, _, _| 0);
    }
    Ok(())
}

/// The loop nest of [`broadcast`], lengths already checked and at least one input repeated;
/// `simd` computes a prefix of each run whose inputs are both contiguous (returning its
/// length, 0 for none).
#[inline(always)]
fn broadcast_nest<K: BinaryOp>(
    k: &K,
    s: &BroadcastShape,
    a: &[K::Elem],
    b: &[K::Elem],
    out: &mut [K::Elem],
    mut simd: impl FnMut(&[K::Elem], &[K::Elem], &mut [K::Elem]) -> usize,
) {
    if out.is_empty() {
        return; // some extent is 0
    }
    // Not elementwise, so at least one loop; all extents are at least 2.
    let rank = usize::from(s.rank);
    let inner = s.dims[rank - 1] as usize;
    // Element strides of each input along each loop (0 where it is repeated).
    let mut a_stride = [0_usize; MAX_BROADCAST_RANK];
    let mut b_stride = [0_usize; MAX_BROADCAST_RANK];
    let (mut a_step, mut b_step) = (1_usize, 1_usize);
    for i in (0..rank).rev() {
        let d = s.dims[i] as usize;
        if !s.a_repeats(i) {
            a_stride[i] = a_step;
            a_step *= d;
        }
        if !s.b_repeats(i) {
            b_stride[i] = b_step;
            b_step *= d;
        }
    }
    let (a_inner, b_inner) = (s.a_repeats(rank - 1), s.b_repeats(rank - 1));

    // An odometer over the outer loops; each step writes one innermost run of `inner` outputs.
    let mut index = [0_u32; MAX_BROADCAST_RANK];
    let (mut a_at, mut b_at) = (0_usize, 0_usize);
    for run in out.chunks_exact_mut(inner) {
        match (a_inner, b_inner) {
            (false, false) => {
                let (x, y) = (&a[a_at..a_at + inner], &b[b_at..b_at + inner]);
                let done = simd(x, y, run).min(inner);
                elementwise_run(k, &x[done..], &y[done..], &mut run[done..]);
            }
            (true, false) => {
                // `a` is one value for the whole run: prepare it once.
                let x = k.prep_a(a[a_at]);
                for (o, &y) in run.iter_mut().zip(&b[b_at..b_at + inner]) {
                    *o = k.combine(x, k.prep_b(y));
                }
            }
            (false, true) => {
                let y = k.prep_b(b[b_at]);
                for (o, &x) in run.iter_mut().zip(&a[a_at..a_at + inner]) {
                    *o = k.combine(k.prep_a(x), y);
                }
            }
            // Both repeated means both have size 1 where the output does not: `new` refuses
            // that, but a constant run is still the right answer for it.
            (true, true) => run.fill(k.combine(k.prep_a(a[a_at]), k.prep_b(b[b_at]))),
        }
        // Advance the outer loops, innermost first, carrying like an odometer.
        let mut d = rank - 1;
        while d > 0 {
            d -= 1;
            index[d] += 1;
            a_at += a_stride[d];
            b_at += b_stride[d];
            if index[d] < s.dims[d] {
                break;
            }
            index[d] = 0;
            a_at -= a_stride[d] * s.dims[d] as usize;
            b_at -= b_stride[d] * s.dims[d] as usize;
        }
    }
}

/// int8 ADD with broadcasting: `out = a + b` over the shapes of `s`, with TFLM's arithmetic
/// (see [`AddParams`]; identical to [`add`](super::add) when the shapes are equal).
///
/// `a`, `b` and `out` must have the lengths [`BroadcastShape::lens`] gives
/// ([`KernelError::LengthMismatch`] otherwise, before anything is written).
pub fn add_broadcast(
    p: &AddParams,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    // Same shapes: the vector loop on x86-64 hosts (a length mismatch is reported below).
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if s.is_elementwise()
        && s.lens() == (a.len(), b.len(), out.len())
        && super::x86::add::add(p, a, b, out)
    {
        return Ok(());
    }
    broadcast_with(p, s, a, b, out, super::add_simd(p))
}

/// int8 SUB with broadcasting: `out = a − b` over the shapes of `s`, with TFLM's arithmetic
/// (see [`SubParams`]). Lengths as for [`add_broadcast`].
pub fn sub_broadcast(
    p: &SubParams,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    broadcast(p, s, a, b, out)
}

/// int8 MUL with broadcasting: `out = a · b` over the shapes of `s`, with TFLM's arithmetic
/// (see [`MulParams`]). Lengths as for [`add_broadcast`].
pub fn mul_broadcast(
    p: &MulParams,
    s: &BroadcastShape,
    a: &[i8],
    b: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    broadcast_with(p, s, a, b, out, super::mul_simd(p))
}

#[cfg(all(test, feature = "std", target_arch = "x86_64"))]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::int8::{Activation, MulParams, Quant, SubParams};

    /// The AVX2 build of the loops against the portable one, byte for byte, for SUB and MUL
    /// on random shapes (elementwise, broadcast either way, below and above the tabulation
    /// threshold), quantizations and activations.
    #[test]
    fn avx2_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut rng = crate::xorshift::XorShift(0x85eb_ca6b_u32);
        let mut next = move |n: u32| {
            let state = rng.next();
            state % n
        };
        let mut ran = 0;
        for case in 0..300 {
            let out: Vec<u32> = (0..1 + next(4)).map(|_| 1 + next(40)).collect();
            // Each input keeps a dimension or repeats it (size 1), per dimension.
            let mut pick = |keep: u32| -> Vec<u32> {
                out.iter()
                    .map(|&d| if next(3) < keep { d } else { 1 })
                    .collect()
            };
            let (sa, sb) = match case % 3 {
                0 => (out.clone(), out.clone()),
                1 => (out.clone(), pick(1)),
                _ => (pick(2), pick(1)),
            };
            let Ok(shape) = BroadcastShape::new(&sa, &sb, &out) else {
                continue;
            };
            let (na, nb, no) = shape.lens();
            let a: Vec<i8> = (0..na).map(|_| next(256) as u8 as i8).collect();
            let b: Vec<i8> = (0..nb).map(|_| next(256) as u8 as i8).collect();
            let mut quant = || Quant {
                scale: 0.001 + next(1000) as f32 / 997.0,
                zero_point: next(256) as i32 - 128,
            };
            let (qa, qb, qo) = (quant(), quant(), quant());
            let act = [Activation::None, Activation::Relu, Activation::Relu6][case % 3];
            let mut fast = std::vec![0_i8; no];
            let mut slow = fast.clone();
            if case % 2 == 0 {
                let Ok(p) = SubParams::new(qa, qb, qo, act) else {
                    continue;
                };
                // SAFETY: the CPU has AVX2 (checked above).
                #[allow(unsafe_code)]
                unsafe {
                    broadcast_run_avx2(&p, &shape, &a, &b, &mut fast);
                }
                broadcast_run(&p, &shape, &a, &b, &mut slow, None::<NoSimd>);
                if shape.is_elementwise() {
                    let mut direct = std::vec![0_i8; no];
                    // SAFETY: the CPU has AVX2 (checked above).
                    #[allow(unsafe_code)]
                    unsafe {
                        elementwise_avx2(&p, &a, &b, &mut direct);
                    }
                    assert_eq!(direct, slow, "case {case}: elementwise");
                }
            } else {
                let Ok(p) = MulParams::new(qa, qb, qo, act) else {
                    continue;
                };
                // SAFETY: the CPU has AVX2 (checked above).
                #[allow(unsafe_code)]
                unsafe {
                    broadcast_run_avx2(&p, &shape, &a, &b, &mut fast);
                }
                broadcast_run(&p, &shape, &a, &b, &mut slow, None::<NoSimd>);
            }
            assert_eq!(fast, slow, "case {case}: {sa:?} {sb:?} -> {out:?}");
            ran += 1;
        }
        assert!(ran > 200, "only {ran} cases ran");
    }
}
