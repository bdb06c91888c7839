//! CONV_2D and DEPTHWISE_CONV_2D on x86-64 with AVX2, for the host (`std` feature: the CPU is
//! asked at run time whether it has AVX2, and the portable kernels run when it does not).
//!
//! # Why
//!
//! On the host the simulator runs every operator on these kernels, and the portable path,
//! written for a Cortex-M's registers, leaves most of an x86-64 core idle: the compiler cannot
//! see that a 2×2 block of dot products is a matrix product. AVX2's `VPMADDWD` multiplies
//! sixteen pairs of 16-bit lanes and adds adjacent products into eight 32-bit lanes: sixteen
//! multiply-accumulates per instruction, exact for int8 operands widened to 16 bits.
//!
//! # Design
//!
//! - **Convolution** (one group, a window of at most [`MAX_PATCH_TAPS`]) is a matrix product
//!   *outer* in the channels: the filter rows of eight output channels are repacked so that one
//!   vector holds, for one pair of taps, the two weights of each of the eight channels
//!   (`[w(c, 2t), w(c, 2t + 1)]` as 16-bit lanes, channel `c` in 32-bit lane `c`). A pixel's
//!   patch is widened once with the input offset added, two taps per 32-bit word; broadcasting
//!   a word and `VPMADDWD` with the packed vector adds both taps' products to all eight
//!   channels' accumulators at once. Eight pixels share each packed vector (eight accumulators
//!   in registers), and the accumulators come out one channel per lane, ready for a vector
//!   requantization and an eight-byte store: no horizontal sums. The packed filter of a group
//!   of channel blocks lives in a fixed stack buffer ([`PACKED_VECTORS`]); the patches are
//!   widened again for each group.
//! - **Depthwise** (depth multiplier 1) takes sixteen channels at a time through every pixel:
//!   the chunk's filter bytes of each tap are widened once, and a pixel's taps go two by two
//!   (along a window row) through `VPMADDWD`, their 16-bit lanes interleaved so that each
//!   32-bit lane gets one channel's two products (`|w| ≤ 128` and `|x + offset| ≤ 255`: exact).
//! - **Requantization** runs on eight lanes ([`requant`](crate::int8::x86::requant)):
//!   TFLM's `MultiplyByQuantizedMultiplier` with a per-lane shift, the offset and the clamp.
//!
//! # Exactness
//!
//! Every product is the portable kernel's `w · (x + input_offset)`, padded taps are gathered as
//! the zero point (widened to exactly 0), and the sums wrap modulo 2³² (`VPADDD`), where their
//! order does not matter. The requantization is the portable one lane by lane; it covers the
//! multipliers converters emit (shift in −31..=31, multiplier other than `i32::MIN`, whose
//! doubling high product never saturates), and a layer with any other multiplier, an input
//! offset outside −128..=128 or an activation range outside int8 runs the portable kernel. The
//! tests compare both paths byte for byte on random shapes.

use core::arch::x86_64::{
    __m128i, __m256i, _mm256_add_epi16, _mm256_add_epi32, _mm256_cvtepi8_epi16, _mm256_madd_epi16,
    _mm256_permute2x128_si256, _mm256_set1_epi16, _mm256_set1_epi32, _mm256_setzero_si256,
    _mm256_unpackhi_epi16, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64, _mm256_unpacklo_epi16,
    _mm256_unpacklo_epi32, _mm256_unpacklo_epi64,
};

use super::blocked::MAX_PATCH_TAPS;
use super::{ChannelMultiplier, Conv2dParams, ConvQuant, DepthwiseParams};
use crate::int8::x86::has_avx2;
use crate::int8::x86::requant::{lane_fits, requantize, store, Clamp, Lanes, Multipliers};

/// 32-bit words of a widened patch: two taps per word.
const PATCH_PAIRS: usize = MAX_PATCH_TAPS.div_ceil(2);

/// Pixels accumulated together (one accumulator register each).
const PIXELS: usize = 8;

/// Vectors of packed filter (32 bytes each, 16 KiB) on the stack: a group of channel blocks
/// whose packed rows fit is run over every pixel before the next group is packed.
const PACKED_VECTORS: usize = 512;

/// Most channel blocks of eight in a group (the multipliers and biases of each are kept).
const MAX_GROUP_BLOCKS: usize = 32;

/// Words per patch of a small layer's [`Product`] (up to 64 taps).
const SMALL_PAIRS: usize = 32;

/// Packed vectors of a small layer's [`Product`] (4 KiB): all its channel blocks in one group.
const SMALL_VECTORS: usize = 128;

/// Channel blocks of a small layer's [`Product`] (up to 128 channels).
const SMALL_GROUP_BLOCKS: usize = 16;

/// Most taps of a depthwise window on this path (a 7×7 window has 49): each tap's widened
/// filter bytes of a sixteen-channel chunk are kept in a vector.
const MAX_WINDOW_TAPS: usize = 64;

/// Whether the vector requantization equals the portable one for every channel of
/// `multipliers` and the layer's quantization: see the module docs.
fn vector_quant_fits(multipliers: &[ChannelMultiplier], q: &ConvQuant) -> bool {
    multipliers.iter().all(|&m| lane_fits(m))
        && (-128..=128).contains(&q.input_offset)
        && q.activation_min >= i32::from(i8::MIN)
        && q.activation_max <= i32::from(i8::MAX)
}

/// CONV_2D on AVX2 when the CPU has it and the layer fits (see the module docs): `true` when
/// it ran. The operands were checked by the caller.
pub(super) fn conv2d(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> bool {
    let taps = p.rows.filter * p.cols.filter * p.filter_depth;
    let fits = p.in_channels == p.filter_depth
        && taps <= MAX_PATCH_TAPS
        && vector_quant_fits(multipliers, &p.quant);
    if !fits || !has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        conv2d_avx2(p, multipliers, input, filter, bias, output);
    }
    true
}

/// DEPTHWISE_CONV_2D on AVX2 when the CPU has it and the layer fits (depth multiplier 1, at
/// most [`MAX_WINDOW_TAPS`] taps, see the module docs): `true` when it ran. The
/// operands were checked by the caller.
pub(super) fn depthwise_conv2d(
    p: &DepthwiseParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> bool {
    let fits = p.depth_multiplier == 1
        && p.rows.filter * p.cols.filter <= MAX_WINDOW_TAPS
        && vector_quant_fits(multipliers, &p.quant);
    if !fits || !has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        depthwise_avx2(p, multipliers, input, filter, bias, output);
    }
    true
}

/// Widens output pixel `(oy, ox)`'s input window from one image (`in_image`, NHWC) with
/// `offset` added into `out` (16-bit lanes, taps in filter order `(ky, kx, c)`): the gather of
/// `im2col`'s `gather_patch` and the widening of [`widen`] in one pass, taps in the padding 0 (the
/// zero point's widened value). `out` has at least the window's taps.
#[inline(always)]
fn widen_window(
    p: &Conv2dParams,
    in_image: &[i8],
    (oy, ox): (usize, usize),
    offset: i32,
    out: &mut [i16],
) {
    let (rows, cols) = (p.rows, p.cols);
    let ch = p.in_channels;
    let in_row_len = cols.in_size * ch;
    let filter_row_len = cols.filter * ch;
    let (ky0, ky1, iy0) = rows.taps(oy);
    // When no tap is inside, `taps` may report a first tap past the filter's end.
    let (kx0, kx1, ix0) = cols.taps(ox);
    let (kx0, kx1) = (kx0.min(cols.filter), kx1.min(cols.filter));
    let off = offset as i16;
    let lane = |x: i8| i16::from(x) + off;
    for (ky, out_row) in out
        .chunks_exact_mut(filter_row_len)
        .take(rows.filter)
        .enumerate()
    {
        if !(ky0..ky1).contains(&ky) {
            out_row.fill(0);
            continue;
        }
        let iy = iy0 + (ky - ky0) * rows.dilation;
        let in_row = &in_image[iy * in_row_len..][..in_row_len];
        let (before, rest) = out_row.split_at_mut(kx0 * ch);
        let (inside, after) = rest.split_at_mut((kx1 - kx0) * ch);
        before.fill(0);
        after.fill(0);
        if cols.dilation == 1 {
            // Undilated taps are adjacent pixels: one run.
            let n = inside.len();
            for (o, &x) in inside.iter_mut().zip(&in_row[ix0 * ch..][..n]) {
                *o = lane(x);
            }
        } else {
            for (i, tap) in inside.chunks_exact_mut(ch).enumerate() {
                let ix = ix0 + i * cols.dilation;
                for (o, &x) in tap.iter_mut().zip(&in_row[ix * ch..][..ch]) {
                    *o = lane(x);
                }
            }
        }
    }
}

/// Widens `taps` with `offset` added, two per word (low lane first; a last odd tap pairs with
/// 0), into `out`.
#[inline(always)]
fn widen(taps: &[i8], offset: i32, out: &mut [i32]) {
    // Lanes in memory order: the low lane of a word is its first tap. A plain map over the
    // lanes, which the compiler vectorises.
    let lanes: &mut [i16] = bytemuck::cast_slice_mut(out);
    let off = offset as i16;
    for (o, &x) in lanes.iter_mut().zip(taps) {
        *o = i16::from(x) + off;
    }
    if let Some(last) = lanes.get_mut(taps.len()).filter(|_| taps.len() % 2 == 1) {
        *last = 0;
    }
}

/// Packs the filter rows of channels `c0..c0 + 8` (`taps` bytes each; missing channels are
/// zeros) into `out`, one vector per pair of taps: see the module docs. Sixteen taps of the
/// eight rows at a time are widened and transposed (eight pairs by eight channels) in
/// registers; the last pairs one by one.
#[target_feature(enable = "avx2")]
fn pack_block(filter: &[i8], taps: usize, c0: usize, out: &mut [__m256i]) {
    let pairs = taps.div_ceil(2);
    let out = &mut out[..pairs];
    // Missing channels are empty rows (every read of them is a zero).
    let mut rows: [&[i8]; 8] = [&[]; 8];
    for (k, row) in rows.iter_mut().enumerate() {
        if let Some(r) = filter.get((c0 + k) * taps..(c0 + k + 1) * taps) {
            *row = r;
        }
    }
    let groups = taps / 16;
    for (g, o) in out.chunks_exact_mut(8).take(groups).enumerate() {
        let mut r = [_mm256_setzero_si256(); 8];
        for (v, row) in r.iter_mut().zip(&rows) {
            if let Some(b) = row.get(16 * g..16 * g + 16) {
                let b: &[u8] = bytemuck::cast_slice(b);
                *v = _mm256_cvtepi8_epi16(bytemuck::pod_read_unaligned::<__m128i>(b));
            }
        }
        o.copy_from_slice(&transpose8(r));
    }
    let words: &mut [i32] = bytemuck::cast_slice_mut(&mut out[8 * groups..]);
    words.fill(0);
    for (k, row) in rows.iter().enumerate() {
        let Some(row) = row.get(16 * groups..) else {
            continue;
        };
        let mut chunks = row.chunks_exact(2);
        for (t, w) in chunks.by_ref().enumerate() {
            words[t * 8 + k] = (i32::from(w[0]) & 0xFFFF) | (i32::from(w[1]) << 16);
        }
        if let [last] = chunks.remainder() {
            if let Some(word) = words.last_chunk_mut::<8>() {
                word[k] = i32::from(*last) & 0xFFFF;
            }
        }
    }
}

/// The 8×8 transpose of 32-bit lanes: lane `t` of row `k` becomes lane `k` of row `t`.
#[target_feature(enable = "avx2")]
fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
    let [r0, r1, r2, r3, r4, r5, r6, r7] = r;
    // Within each 128-bit half: interleave words, then double words.
    let (t0, t1) = (_mm256_unpacklo_epi32(r0, r1), _mm256_unpackhi_epi32(r0, r1));
    let (t2, t3) = (_mm256_unpacklo_epi32(r2, r3), _mm256_unpackhi_epi32(r2, r3));
    let (t4, t5) = (_mm256_unpacklo_epi32(r4, r5), _mm256_unpackhi_epi32(r4, r5));
    let (t6, t7) = (_mm256_unpacklo_epi32(r6, r7), _mm256_unpackhi_epi32(r6, r7));
    let (u0, u1) = (_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2));
    let (u2, u3) = (_mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3));
    let (u4, u5) = (_mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6));
    let (u6, u7) = (_mm256_unpacklo_epi64(t5, t7), _mm256_unpackhi_epi64(t5, t7));
    // Then the halves: rows 0..4 and 4..8 of the result.
    [
        _mm256_permute2x128_si256(u0, u4, 0x20),
        _mm256_permute2x128_si256(u1, u5, 0x20),
        _mm256_permute2x128_si256(u2, u6, 0x20),
        _mm256_permute2x128_si256(u3, u7, 0x20),
        _mm256_permute2x128_si256(u0, u4, 0x31),
        _mm256_permute2x128_si256(u1, u5, 0x31),
        _mm256_permute2x128_si256(u2, u6, 0x31),
        _mm256_permute2x128_si256(u3, u7, 0x31),
    ]
}

/// The accumulators of `N` pixels (the first `N` widened patches of `patches`) for the eight
/// channels of `packed` (one vector per pair of taps), each started at `bias`.
#[target_feature(enable = "avx2")]
fn dot<const N: usize, const P: usize>(
    patches: &[[i32; P]; PIXELS],
    packed: &[__m256i],
    bias: __m256i,
) -> [__m256i; N] {
    let packed = &packed[..packed.len().min(P)];
    let mut acc = [bias; N];
    for (t, &w) in packed.iter().enumerate() {
        for (a, patch) in acc.iter_mut().zip(patches) {
            let x = _mm256_set1_epi32(patch[t]);
            *a = _mm256_add_epi32(*a, _mm256_madd_epi16(x, w));
        }
    }
    acc
}

/// The convolution: see the module docs. Operands checked by [`conv2d`]'s caller.
#[target_feature(enable = "avx2")]
fn conv2d_avx2(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) {
    let (rows, cols) = (p.rows, p.cols);
    let ch = p.in_channels;
    let taps = rows.filter * cols.filter * ch;
    let image_len = rows.in_size * cols.in_size * ch;
    let per_image = rows.out_size * cols.out_size;
    let offset = p.quant.input_offset;
    let in_place = rows.filter == 1 && cols.filter == 1;
    if per_image == 0 {
        return;
    }
    let product = Product {
        taps,
        rows: p.batches * per_image,
        channels: p.out_channels,
        multiplier: &|c| multipliers.get(c).copied(),
        bias,
        clamp: Clamp::new(
            p.quant.output_offset,
            p.quant.activation_min,
            p.quant.activation_max,
        ),
    };
    // The position of the last pixel widened: pixels come in order (from 0 again for each
    // group of channels), so the next one is found without dividing.
    let mut at: Option<(usize, (usize, usize, usize))> = None;
    let mut widen_pixel = |px: usize, patch: &mut [i32]| {
        let (b, oy, ox) = match at {
            Some((last, (b, oy, ox))) if last + 1 == px => {
                if ox + 1 < cols.out_size {
                    (b, oy, ox + 1)
                } else if oy + 1 < rows.out_size {
                    (b, oy + 1, 0)
                } else {
                    (b + 1, 0, 0)
                }
            }
            _ => {
                let (b, r) = (px / per_image, px % per_image);
                (b, r / cols.out_size, r % cols.out_size)
            }
        };
        at = Some((px, (b, oy, ox)));
        let in_image = &input[b * image_len..][..image_len];
        if in_place {
            // A 1×1 window is always inside the image (its padding is 0).
            let (_, _, iy) = rows.taps(oy);
            let (_, _, ix) = cols.taps(ox);
            widen(
                &in_image[(iy * cols.in_size + ix) * ch..][..ch],
                offset,
                patch,
            );
        } else {
            // Lanes in memory order: the low lane of a word is its first tap.
            let lanes: &mut [i16] = bytemuck::cast_slice_mut(patch);
            widen_window(p, in_image, (oy, ox), offset, lanes);
            if let Some(last) = lanes.get_mut(taps).filter(|_| taps % 2 == 1) {
                *last = 0;
            }
        }
    };
    product.run(filter, &mut widen_pixel, output);
}

/// A matrix product with requantized int8 results: `rows` rows of `taps` inputs (widened by
/// the caller) times `channels` filter rows of `taps` bytes, into `rows × channels` bytes.
pub(crate) struct Product<'a> {
    /// Inputs per row (at most [`MAX_PATCH_TAPS`]).
    pub(crate) taps: usize,
    /// Rows (pixels, or a fully connected layer's batches).
    pub(crate) rows: usize,
    /// Output channels.
    pub(crate) channels: usize,
    /// Each channel's multiplier ([`lane_fits`] for every channel: the caller checks).
    pub(crate) multiplier: &'a dyn Fn(usize) -> Option<ChannelMultiplier>,
    /// Each channel's bias, if any.
    pub(crate) bias: Option<&'a [i32]>,
    /// Output offset and activation range.
    pub(crate) clamp: Clamp,
}

impl Product<'_> {
    /// Runs the product: `widen_row(r, patch)` writes row `r`'s taps with the input offset
    /// added, two per word (the words [`widen`] makes), into the `taps.div_ceil(2)` words of
    /// `patch`; `filter` has the channels' rows one after the other.
    #[target_feature(enable = "avx2")]
    fn run(&self, filter: &[i8], widen_row: impl FnMut(usize, &mut [i32]), output: &mut [i8]) {
        let (pairs, blocks) = (self.taps.div_ceil(2), self.channels.div_ceil(8));
        // A small layer packs into small buffers: the stack buffers are zeroed on every call,
        // and the full ones are tens of kilobytes.
        if pairs <= SMALL_PAIRS && blocks <= SMALL_GROUP_BLOCKS && blocks * pairs <= SMALL_VECTORS {
            self.run_in::<SMALL_PAIRS, SMALL_VECTORS, SMALL_GROUP_BLOCKS>(
                filter, widen_row, output,
            );
        } else {
            self.run_in::<PATCH_PAIRS, PACKED_VECTORS, MAX_GROUP_BLOCKS>(filter, widen_row, output);
        }
    }

    /// [`Product::run`] with buffers of `P` words per patch, `V` packed vectors and `G`
    /// channel blocks per group.
    #[target_feature(enable = "avx2")]
    fn run_in<const P: usize, const V: usize, const G: usize>(
        &self,
        filter: &[i8],
        mut widen_row: impl FnMut(usize, &mut [i32]),
        output: &mut [i8],
    ) {
        let (taps, oc, rows) = (self.taps, self.channels, self.rows);
        let pairs = taps.div_ceil(2);
        if taps == 0 || pairs > P || oc == 0 || output.len() < rows * oc {
            return;
        }
        let blocks = oc.div_ceil(8);
        let group = (V / pairs).clamp(1, G);

        let mut packed = [_mm256_setzero_si256(); V];
        let mut lanes = [Lanes::new(&|_| None, None, 0); G];
        let mut patches = [[0_i32; P]; PIXELS];

        for b0 in (0..blocks).step_by(group) {
            let nb = group.min(blocks - b0);
            for (k, l) in lanes[..nb].iter_mut().enumerate() {
                let c0 = (b0 + k) * 8;
                pack_block(filter, taps, c0, &mut packed[k * pairs..]);
                *l = Lanes::new(self.multiplier, self.bias, c0);
            }
            let mut n = 0;
            while n < rows {
                let count = PIXELS.min(rows - n);
                for (r, patch) in (n..n + count).zip(patches.iter_mut()) {
                    widen_row(r, &mut patch[..pairs]);
                }
                for (k, l) in lanes[..nb].iter().enumerate() {
                    let c0 = (b0 + k) * 8;
                    let width = 8.min(oc - c0);
                    let w = &packed[k * pairs..][..pairs];
                    let mut put = |i: usize, acc: __m256i| {
                        let at = (n + i) * oc + c0;
                        store(requantize(acc, l, &self.clamp), &mut output[at..at + width]);
                    };
                    // Full blocks of rows, then fours, then the last few one at a time.
                    if count == PIXELS {
                        for (i, acc) in dot::<PIXELS, P>(&patches, w, l.bias)
                            .into_iter()
                            .enumerate()
                        {
                            put(i, acc);
                        }
                    } else {
                        let mut i = 0;
                        while i + 4 <= count {
                            for (j, a) in dot4(&patches, i, w, l.bias).into_iter().enumerate() {
                                put(i + j, a);
                            }
                            i += 4;
                        }
                        while i < count {
                            put(i, dot1(&patches[i], w, l.bias));
                            i += 1;
                        }
                    }
                }
                n += count;
            }
        }
    }
}

/// Rows from which a fully connected layer runs as a [`Product`]: the packing is paid once
/// per call and every packed vector then serves all rows; fewer rows are faster streamed
/// through the weights one by one (`int8::x86::dot::requantized_row`).
const FC_MIN_ROWS: usize = 4;

/// A fully connected layer for [`fully_connected`].
pub(crate) struct FcLayer<'a> {
    /// Input rows (batches), inputs per row, output channels.
    pub(crate) shape: (usize, usize, usize),
    /// Each channel's multiplier.
    pub(crate) multipliers: Multipliers<'a>,
    /// Each channel's bias, if any.
    pub(crate) bias: Option<&'a [i32]>,
    /// The input offset (the input zero point negated).
    pub(crate) input_offset: i32,
    /// Output offset and activation range.
    pub(crate) output: (i32, i32, i32),
}

/// A fully connected layer as a [`Product`] (each input row a 1×1 window), on AVX2 when the
/// CPU has it and the layer fits (at least [`FC_MIN_ROWS`] rows, at most [`MAX_PATCH_TAPS`]
/// inputs, multipliers, offsets and range as for the convolution), or with fewer rows each
/// streamed through the weights (any depth): `true` when it ran.
/// Operands checked by the caller (`input` rows × inputs, `weights` channels × inputs,
/// `output` rows × channels).
pub(crate) fn fully_connected(
    layer: &FcLayer<'_>,
    input: &[i8],
    weights: &[i8],
    output: &mut [i8],
) -> bool {
    let (rows, depth, channels) = layer.shape;
    let (_, min, max) = layer.output;
    if rows < FC_MIN_ROWS && depth > 0 && input.len() >= rows * depth {
        // Few rows: each streamed through the weights, with the output bytes requantized in
        // vectors (false for the first row means false for all: nothing was written).
        return input
            .chunks_exact(depth)
            .take(rows)
            .zip(output.chunks_exact_mut(channels.max(1)))
            .all(|(x, out)| {
                crate::int8::x86::dot::requantized_row(
                    x,
                    layer.input_offset,
                    weights,
                    &layer.multipliers,
                    layer.bias,
                    layer.output,
                    out,
                )
            });
    }
    let fits = rows >= FC_MIN_ROWS
        && (1..=MAX_PATCH_TAPS).contains(&depth)
        && layer.multipliers.fit(channels)
        && (-128..=128).contains(&layer.input_offset)
        && min >= i32::from(i8::MIN)
        && max <= i32::from(i8::MAX)
        && input.len() >= rows * depth
        && weights.len() >= channels * depth;
    if !fits || !has_avx2() {
        return false;
    }
    // SAFETY: the CPU has AVX2 (checked just above), the only feature the function enables.
    #[allow(unsafe_code)]
    unsafe {
        fully_connected_avx2(layer, input, weights, output);
    }
    true
}

/// [`fully_connected`] once the layer is known to fit.
#[target_feature(enable = "avx2")]
fn fully_connected_avx2(layer: &FcLayer<'_>, input: &[i8], weights: &[i8], output: &mut [i8]) {
    let (rows, depth, channels) = layer.shape;
    let (offset, min, max) = layer.output;
    let product = Product {
        taps: depth,
        rows,
        channels,
        multiplier: &|c| layer.multipliers.get(c).filter(|_| c < channels),
        bias: layer.bias,
        clamp: Clamp::new(offset, min, max),
    };
    let widen_row = |r: usize, patch: &mut [i32]| {
        widen(&input[r * depth..][..depth], layer.input_offset, patch);
    };
    product.run(weights, widen_row, output);
}

/// [`dot`] of the four patches from `first`.
#[target_feature(enable = "avx2")]
fn dot4<const P: usize>(
    patches: &[[i32; P]; PIXELS],
    first: usize,
    packed: &[__m256i],
    bias: __m256i,
) -> [__m256i; 4] {
    let packed = &packed[..packed.len().min(P)];
    let (p0, p1, p2, p3) = match &patches[first.min(PIXELS - 4)..] {
        [a, b, c, d, ..] => (a, b, c, d),
        _ => return [bias; 4],
    };
    let mut acc = [bias; 4];
    for (t, &w) in packed.iter().enumerate() {
        for (a, patch) in acc.iter_mut().zip([p0, p1, p2, p3]) {
            let x = _mm256_set1_epi32(patch[t]);
            *a = _mm256_add_epi32(*a, _mm256_madd_epi16(x, w));
        }
    }
    acc
}

/// [`dot`] of one patch.
#[target_feature(enable = "avx2")]
fn dot1<const P: usize>(patch: &[i32; P], packed: &[__m256i], bias: __m256i) -> __m256i {
    let mut acc = bias;
    for (&x, &w) in patch.iter().zip(packed) {
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_set1_epi32(x), w));
    }
    acc
}

/// Sixteen bytes of `bytes` from `at` (fewer when it ends first: zeros after them).
#[target_feature(enable = "avx2")]
fn load16(bytes: &[i8], at: usize) -> __m128i {
    let bytes: &[u8] = bytemuck::cast_slice(bytes);
    match bytes.get(at..at + 16) {
        Some(b) => bytemuck::pod_read_unaligned(b),
        None => {
            let mut tail = [0_u8; 16];
            let rest = bytes.get(at..).unwrap_or(&[]);
            tail[..rest.len().min(16)].copy_from_slice(&rest[..rest.len().min(16)]);
            bytemuck::cast(tail)
        }
    }
}

/// The depthwise convolution: see the module docs. Operands checked by
/// [`depthwise_conv2d`]'s caller; depth multiplier 1, at most [`MAX_WINDOW_TAPS`] taps.
#[target_feature(enable = "avx2")]
fn depthwise_avx2(
    p: &DepthwiseParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) {
    let (rows, cols) = (p.rows, p.cols);
    let c = p.in_channels;
    let in_row_len = cols.in_size * c;
    let in_image_len = rows.in_size * in_row_len;
    let out_image_len = rows.out_size * cols.out_size * c;
    let window = rows.filter * cols.filter;
    if c == 0 || window > MAX_WINDOW_TAPS || in_image_len == 0 || out_image_len == 0 {
        return;
    }
    let clamp = Clamp::new(
        p.quant.output_offset,
        p.quant.activation_min,
        p.quant.activation_max,
    );
    let offset = _mm256_set1_epi16(p.quant.input_offset as i16);
    let multiplier = |ch: usize| multipliers.get(ch).copied();
    let zero = _mm256_setzero_si256();
    let mut taps = [zero; MAX_WINDOW_TAPS];

    for c0 in (0..c).step_by(16) {
        let (l0, l1) = (
            Lanes::new(&multiplier, bias, c0),
            Lanes::new(&multiplier, bias, c0 + 8),
        );
        // The chunk's sixteen filter bytes of every tap, widened once for all pixels.
        for (t, w) in taps[..window].iter_mut().enumerate() {
            *w = _mm256_cvtepi8_epi16(load16(filter, t * c + c0));
        }
        for (in_image, out_image) in input
            .chunks_exact(in_image_len)
            .zip(output.chunks_exact_mut(out_image_len))
        {
            for (oy, out_row) in out_image.chunks_exact_mut(cols.out_size * c).enumerate() {
                let (ky0, ky1, iy0) = rows.taps(oy);
                for (ox, out_px) in out_row.chunks_exact_mut(c).enumerate() {
                    let (kx0, kx1, ix0) = cols.taps(ox);
                    // Two taps per `VPMADDWD`: their lanes interleaved, channels 0..4 and
                    // 8..12 in `lo`, 4..8 and 12..16 in `hi` (the unpacks work per 128 bits).
                    let (mut lo, mut hi) = (zero, zero);
                    let x_at = |j: usize, i: usize| {
                        let (iy, ix) = (iy0 + j * rows.dilation, ix0 + i * cols.dilation);
                        let x =
                            _mm256_cvtepi8_epi16(load16(in_image, iy * in_row_len + ix * c + c0));
                        _mm256_add_epi16(x, offset)
                    };
                    for (j, ky) in (ky0..ky1).enumerate() {
                        let row_taps = &taps[ky * cols.filter..][..cols.filter];
                        let mut kx = kx0;
                        while kx < kx1 {
                            let i = kx - kx0;
                            let (xa, wa) = (x_at(j, i), row_taps[kx]);
                            let (xb, wb) = if kx + 1 < kx1 {
                                (x_at(j, i + 1), row_taps[kx + 1])
                            } else {
                                (zero, zero)
                            };
                            lo = _mm256_add_epi32(
                                lo,
                                _mm256_madd_epi16(
                                    _mm256_unpacklo_epi16(xa, xb),
                                    _mm256_unpacklo_epi16(wa, wb),
                                ),
                            );
                            hi = _mm256_add_epi32(
                                hi,
                                _mm256_madd_epi16(
                                    _mm256_unpackhi_epi16(xa, xb),
                                    _mm256_unpackhi_epi16(wa, wb),
                                ),
                            );
                            kx += 2;
                        }
                    }
                    let first = _mm256_permute2x128_si256(lo, hi, 0x20);
                    let second = _mm256_permute2x128_si256(lo, hi, 0x31);
                    let end = (c0 + 8).min(c);
                    let acc = _mm256_add_epi32(first, l0.bias);
                    store(requantize(acc, &l0, &clamp), &mut out_px[c0..end]);
                    if c0 + 8 < c {
                        let end = (c0 + 16).min(c);
                        let acc = _mm256_add_epi32(second, l1.bias);
                        store(requantize(acc, &l1, &clamp), &mut out_px[c0 + 8..end]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::int8::{portable, Activation, Conv2dShape, DepthwiseShape, Nhwc, Padding, Quant};
    use crate::int8::{DepthwiseParams, Window2d};
    use crate::xorshift::XorShift;

    /// The tests' generator, with the draws these tests make.
    struct Rng(XorShift);

    impl Rng {
        fn next(&mut self) -> u32 {
            self.0.next()
        }

        fn range(&mut self, lo: u32, hi: u32) -> u32 {
            lo + self.next() % (hi - lo + 1)
        }

        fn bytes(&mut self, n: usize) -> Vec<i8> {
            (0..n).map(|_| self.next() as u8 as i8).collect()
        }
    }

    fn window(r: &mut Rng, max_filter: u32) -> Window2d {
        Window2d {
            filter_height: r.range(1, max_filter),
            filter_width: r.range(1, max_filter),
            stride_height: r.range(1, 3),
            stride_width: r.range(1, 3),
            dilation_height: r.range(1, 2),
            dilation_width: r.range(1, 2),
            padding: if r.range(0, 1) == 0 {
                Padding::Same
            } else {
                Padding::Valid
            },
        }
    }

    /// Quantization of a random layer: zero points over all of int8, scales whose
    /// multipliers shift right and (sometimes) left, and the three activations.
    fn quant(r: &mut Rng) -> (Quant, Quant, Activation) {
        let zp = |v: u32| v as i32 - 128;
        let qi = Quant {
            scale: 0.02 + r.range(0, 100) as f32 / 1000.0,
            zero_point: zp(r.range(0, 255)),
        };
        let qo = Quant {
            scale: 0.02 + r.range(0, 100) as f32 / 1000.0,
            zero_point: zp(r.range(0, 255)),
        };
        let act = [Activation::None, Activation::Relu, Activation::Relu6][r.range(0, 2) as usize];
        (qi, qo, act)
    }

    fn multipliers(r: &mut Rng, n: usize) -> Vec<ChannelMultiplier> {
        (0..n)
            .map(|_| {
                // Mostly right shifts, as converters give; some left shifts and the extremes.
                let shift = match r.range(0, 9) {
                    0 => r.range(1, 3) as i32,
                    1 => -31,
                    _ => -(r.range(0, 12) as i32),
                };
                ChannelMultiplier::from_raw((1 << 30) + r.range(0, (1 << 30) - 1) as i32, shift)
            })
            .collect()
    }

    /// The AVX2 convolution against the portable kernel on random shapes: pixel counts and
    /// channel counts that are not multiples of the blocks, odd tap counts, windows past the
    /// packing buffer's group size, padding, strides, dilations, with and without bias.
    #[test]
    fn conv2d_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut r = Rng(XorShift(0x9e37_79b9));
        let mut ran = 0;
        for case in 0..300 {
            let depth = match case % 4 {
                0 => r.range(1, 5),
                1 => r.range(6, 40),
                2 => r.range(40, 130),
                _ => r.range(1, 300),
            };
            let shape = Conv2dShape {
                input: Nhwc {
                    batches: r.range(1, 2),
                    height: r.range(1, 9),
                    width: r.range(1, 9),
                    channels: depth,
                },
                out_channels: r.range(1, 40),
                filter_depth: depth,
                window: window(&mut r, 3),
            };
            let (qi, qo, act) = quant(&mut r);
            let Ok(p) = Conv2dParams::new(shape, qi, qo, act) else {
                continue;
            };
            let (il, fl, ol) = p.lens();
            let oc = shape.out_channels as usize;
            let m = multipliers(&mut r, oc);
            let bias: Vec<i32> = (0..oc).map(|_| r.next() as i32 >> 8).collect();
            let b = (case % 3 != 0).then_some(&bias[..]);
            let (input, filter) = (r.bytes(il), r.bytes(fl));
            let (mut fast, mut reference) = (vec![0_i8; ol], vec![0_i8; ol]);
            if ol == 0 || !conv2d(&p, &m, &input, &filter, b, &mut fast) {
                continue;
            }
            portable::conv2d(&p, &m, &input, &filter, b, &mut reference).unwrap();
            assert_eq!(fast, reference, "case {case}: {shape:?}");
            ran += 1;
        }
        assert!(ran > 150, "only {ran} cases ran");
    }

    /// The fully connected product against the scalar arithmetic (TFLM's order) on random
    /// shapes: row counts around the eight-row blocks, depths past the packing group and odd,
    /// per-channel and constant multipliers, with and without bias.
    #[test]
    fn fully_connected_equals_scalar() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut r = Rng(XorShift(0x6a09_e667));
        for case in 0..200 {
            let rows = r.range(4, 21) as usize;
            let depth = r.range(1, MAX_PATCH_TAPS as u32) as usize;
            fully_connected_case(&mut r, case, rows, depth);
        }
    }

    /// Fewer rows than [`FC_MIN_ROWS`], streamed row by row through the weights: channel
    /// counts around the eight-channel blocks, depths around the sixteen-byte chunks and
    /// beyond [`MAX_PATCH_TAPS`].
    #[test]
    fn few_rows_fully_connected_equals_scalar() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut r = Rng(XorShift(0x3c6e_f372));
        for case in 0..300 {
            let rows = r.range(1, FC_MIN_ROWS as u32 - 1) as usize;
            let depth = if case % 7 == 0 {
                r.range(MAX_PATCH_TAPS as u32 + 1, 2 * MAX_PATCH_TAPS as u32)
            } else {
                r.range(1, 100)
            } as usize;
            fully_connected_case(&mut r, case, rows, depth);
        }
    }

    /// One random fully connected layer of `rows` × `depth` inputs run by [`fully_connected`]
    /// and by the scalar arithmetic, compared byte for byte.
    fn fully_connected_case(r: &mut Rng, case: usize, rows: usize, depth: usize) {
        let channels = r.range(1, 40) as usize;
        let mut m = multipliers(r, channels);
        if case.is_multiple_of(2) {
            let first = m[0];
            m.fill(first);
        }
        let bias: Vec<i32> = (0..channels).map(|_| r.next() as i32 >> 8).collect();
        let b = (!case.is_multiple_of(3)).then_some(&bias[..]);
        let input_offset = r.range(0, 256) as i32 - 128;
        let lo = r.range(0, 127) as i32 - 128;
        let output = (
            r.range(0, 255) as i32 - 128,
            lo,
            lo + r.range(0, 127) as i32,
        );
        let (input, weights) = (r.bytes(rows * depth), r.bytes(channels * depth));
        let layer = FcLayer {
            shape: (rows, depth, channels),
            // Constant multipliers as one for the layer, half the time.
            multipliers: if case.is_multiple_of(4) {
                Multipliers::Layer(m[0])
            } else {
                Multipliers::Channels(&m)
            },
            bias: b,
            input_offset,
            output,
        };
        let mut fast = vec![0_i8; rows * channels];
        assert!(fully_connected(&layer, &input, &weights, &mut fast));
        let expected: Vec<i8> = (0..rows * channels)
            .map(|i| {
                let (row, c) = (i / channels, i % channels);
                let x = &input[row * depth..][..depth];
                let w = &weights[c * depth..][..depth];
                let acc = x.iter().zip(w).fold(0_i32, |a, (&x, &w)| {
                    a.wrapping_add(i32::from(w) * (i32::from(x) + input_offset))
                });
                let acc = acc.wrapping_add(b.map_or(0, |b| b[c]));
                let scaled = crate::fixed_point::multiply_by_quantized_multiplier(
                    acc,
                    m[c].multiplier(),
                    m[c].shift(),
                );
                scaled.wrapping_add(output.0).max(output.1).min(output.2) as i8
            })
            .collect();
        assert_eq!(fast, expected, "case {case}: {rows}×{depth}×{channels}");
    }

    /// The AVX2 depthwise convolution against the portable kernel on random shapes: channel
    /// counts around the sixteen-channel blocks, windows with padding, strides and dilations.
    #[test]
    fn depthwise_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut r = Rng(XorShift(0x2545_f491));
        let mut ran = 0;
        for case in 0..300 {
            let shape = DepthwiseShape {
                input: Nhwc {
                    batches: r.range(1, 2),
                    height: r.range(1, 9),
                    width: r.range(1, 9),
                    channels: if case % 2 == 0 {
                        r.range(1, 40)
                    } else {
                        r.range(1, 200)
                    },
                },
                depth_multiplier: 1,
                window: window(&mut r, 4),
            };
            let (qi, qo, act) = quant(&mut r);
            let Ok(p) = DepthwiseParams::new(shape, qi, qo, act) else {
                continue;
            };
            let (il, fl, ol) = p.lens();
            let c = shape.input.channels as usize;
            let m = multipliers(&mut r, c);
            let bias: Vec<i32> = (0..c).map(|_| r.next() as i32 >> 8).collect();
            let b = (case % 3 != 0).then_some(&bias[..]);
            let (input, filter) = (r.bytes(il), r.bytes(fl));
            let (mut fast, mut reference) = (vec![0_i8; ol], vec![0_i8; ol]);
            if ol == 0 || !depthwise_conv2d(&p, &m, &input, &filter, b, &mut fast) {
                continue;
            }
            portable::depthwise_conv2d(&p, &m, &input, &filter, b, &mut reference).unwrap();
            assert_eq!(fast, reference, "case {case}: {shape:?}");
            ran += 1;
        }
        assert!(ran > 150, "only {ran} cases ran");
    }
}
