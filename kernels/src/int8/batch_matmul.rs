//! int8 BATCH_MATMUL: a matrix product per batch, with TFLite's batch broadcasting.
//!
//! Arithmetic (TFLM `micro/kernels/batch_matmul.cc` and `batch_matmul_common.cc`, kernel
//! `kernels/internal/reference/batch_matmul.h` `BatchMatMul<int8_t, int32_t>`, multiplier from
//! `kernels/kernel_util.cc` `GetQuantizedConvolutionMultipler` without a bias):
//!
//! ```text
//! (m, shift) = QuantizeMultiplier((double)(lhs_scale · rhs_scale) / (double)out_scale)
//!                                  (the product of the scales in float, then double)
//! acc[a][c]  = Σ_k (L[a][k] − lhs_zp) · (R[k][c] − rhs_zp)          (int32, wrapping)
//! out[a][c]  = clamp(MultiplyByQuantizedMultiplier(acc, m, shift) + out_zp, −128, 127)
//! ```
//!
//! - `L` is the LHS matrix, `[A][K]`, or stored `[K][A]` with `adj_x`; `R` the RHS matrix,
//!   `[K][C]`, or stored `[C][K]` with `adj_y`. Both zero points may be non-zero (TFLM's
//!   `input_offset` and `weights_offset`). There is no fused activation: the clamp is the
//!   int8 range.
//! - Operands have rank 2 to 5. The shorter shape is padded with leading 1s; each batch
//!   dimension (all but the last two) must be equal in both or 1 in one of them, which is
//!   then broadcast. The output is `[batch…][A][C]`, of the larger rank.
//!
//! TFLM transposes the RHS (unless `adj_y`) and, with `adj_x`, the LHS into scratch buffers
//! first, then runs its reference loops over the transposed copies (and may fold batch
//! dimensions together). None of that changes a single product or the modular int32 sum, so
//! this kernel reads the operands where they are instead, in the order that suits their
//! layout:
//!
//! - RHS `[K][C]` (no `adj_y`): for each output row, a tile of up to 32 int32
//!   accumulators is updated from contiguous RHS rows;
//! - RHS `[C][K]` and LHS `[A][K]`: contiguous dot products;
//! - RHS `[C][K]` and LHS `[K][A]`: a tile of output column entries updated from contiguous
//!   LHS rows.

use super::dims::{count, us, Dims, MAX_DIMS};
use super::{check_quant, general_multiplier, requantized_to_i8, Quant};
use crate::fixed_point::multiply_by_quantized_multiplier;
use crate::packed::{Packed, WordReader, Words};
use crate::{check_len, KernelError};

/// Accumulators kept on the stack by the tiled loops (128 bytes).
const TILE: usize = 32;

/// Precomputed parameters of int8 BATCH_MATMUL (TFLM's `OpDataBatchMatmul`): shapes,
/// broadcasting and requantization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BatchMatmulParams {
    /// The three batch dimensions of each operand, padded with leading 1s.
    lhs_batch: [u32; 3],
    rhs_batch: [u32; 3],
    /// Output rows (A), reduction depth (K) and output columns (C).
    rows: u32,
    depth: u32,
    cols: u32,
    lhs_len: u32,
    rhs_len: u32,
    out_len: u32,
    out_rank: u8,
    adj_x: bool,
    adj_y: bool,
    lhs_offset: i32,
    rhs_offset: i32,
    output_offset: i32,
    output_multiplier: i32,
    output_shift: i32,
}

impl BatchMatmulParams {
    /// Resolves the shapes (dimensions outermost first) and the requantization, as TFLM's
    /// `BatchMatMulPrepare` does. `adj_x` / `adj_y`: the last two dimensions of the LHS / RHS
    /// are stored swapped (TFLite's `adj_x`, `adj_y` options).
    ///
    /// Errors: [`KernelError::Unsupported`] for a rank outside 2 to 5, batch dimensions that
    /// do not broadcast, or LHS and RHS reduction depths that differ;
    /// [`KernelError::ShapeOverflow`] for more than `u32::MAX` elements in an operand or the
    /// output; [`KernelError::InvalidQuantization`] for bad scales or zero points, a product
    /// of scales that overflows `f32`, or a multiplier of `2^31` or more.
    pub fn new(
        lhs: &[u32],
        rhs: &[u32],
        adj_x: bool,
        adj_y: bool,
        lhs_q: Quant,
        rhs_q: Quant,
        out_q: Quant,
    ) -> Result<Self, KernelError> {
        Self::resolve(lhs, rhs, adj_x, adj_y, || {
            check_quant(lhs_q, "lhs scale", "lhs zero point")?;
            check_quant(rhs_q, "rhs scale", "rhs zero point")?;
            check_quant(out_q, "output scale", "output zero point")?;
            let product = lhs_q.scale * rhs_q.scale;
            if !product.is_finite() {
                return Err(KernelError::InvalidQuantization {
                    what: "lhs scale * rhs scale",
                });
            }
            let real = f64::from(product) / f64::from(out_q.scale);
            Ok(MatmulQuant {
                lhs_offset: -lhs_q.zero_point,
                rhs_offset: -rhs_q.zero_point,
                output_offset: out_q.zero_point,
                output: general_multiplier(real, "output scale")?,
            })
        })
    }

    /// Writes the parameters ([`packed`](crate::packed)): the operands' dimensions (at the
    /// output's rank), the adjoint flags, the offsets and the output rescaling.
    pub fn pack(&self, w: &mut Words<'_>) {
        let (l, r) = self.operand_shapes();
        let from = 5 - usize::from(self.out_rank).min(5);
        w.put_list(&l[from..]);
        w.put_list(&r[from..]);
        self.adj_x.pack(w);
        self.adj_y.pack(w);
        w.put_i32(self.lhs_offset);
        w.put_i32(self.rhs_offset);
        w.put_i32(self.output_offset);
        w.put_multiplier((self.output_multiplier, self.output_shift));
    }

    /// Reads what [`pack`](Self::pack) wrote: the shapes resolved as [`new`](Self::new)
    /// resolves them, int8 offsets, and a rescaling as `QuantizeMultiplier` makes one.
    ///
    /// Errors as [`new`](Self::new).
    pub fn unpack(r: &mut WordReader<'_>) -> Result<Self, KernelError> {
        let (lhs, nl) = r.take_list::<5>()?;
        let (rhs, nr) = r.take_list::<5>()?;
        let (adj_x, adj_y) = (bool::unpack(r)?, bool::unpack(r)?);
        let quant = MatmulQuant {
            lhs_offset: r.take_input_offset("lhs zero point")?,
            rhs_offset: r.take_input_offset("rhs zero point")?,
            output_offset: r.take_zero_point("output zero point")?,
            output: r.take_multiplier(31, "output scale")?,
        };
        Self::resolve(&lhs[..nl], &rhs[..nr], adj_x, adj_y, || Ok(quant))
    }

    /// The operands' dimensions padded to rank 5, as [`new`](Self::new) read them.
    fn operand_shapes(&self) -> ([u32; 5], [u32; 5]) {
        let (a, k, c) = (self.rows, self.depth, self.cols);
        let (l34, r34) = (
            if self.adj_x { [k, a] } else { [a, k] },
            if self.adj_y { [c, k] } else { [k, c] },
        );
        let [l0, l1, l2] = self.lhs_batch;
        let [r0, r1, r2] = self.rhs_batch;
        ([l0, l1, l2, l34[0], l34[1]], [r0, r1, r2, r34[0], r34[1]])
    }

    /// The geometry of `lhs` and `rhs`, then the quantization `quant` gives (its errors come
    /// after the geometry's).
    fn resolve(
        lhs: &[u32],
        rhs: &[u32],
        adj_x: bool,
        adj_y: bool,
        quant: impl FnOnce() -> Result<MatmulQuant, KernelError>,
    ) -> Result<Self, KernelError> {
        let (l, r) = (extend(lhs)?, extend(rhs)?);
        let mut out_batch = [0_u32; 3];
        for ((o, &a), &b) in out_batch.iter_mut().zip(&l[..3]).zip(&r[..3]) {
            *o = broadcast(a, b).ok_or(KernelError::Unsupported {
                what: "batch matmul batch dimensions do not broadcast",
            })?;
        }
        let (rows, lhs_depth) = if adj_x { (l[4], l[3]) } else { (l[3], l[4]) };
        let (rhs_depth, cols) = if adj_y { (r[4], r[3]) } else { (r[3], r[4]) };
        if lhs_depth != rhs_depth {
            return Err(KernelError::Unsupported {
                what: "batch matmul lhs and rhs depths differ",
            });
        }
        let lhs_len = count(&l)?;
        let rhs_len = count(&r)?;
        let out_len = count(&[out_batch[0], out_batch[1], out_batch[2], rows, cols])?;
        let q = quant()?;
        let (output_multiplier, output_shift) = q.output;

        Ok(Self {
            lhs_batch: [l[0], l[1], l[2]],
            rhs_batch: [r[0], r[1], r[2]],
            rows,
            depth: lhs_depth,
            cols,
            lhs_len,
            rhs_len,
            out_len,
            // Both ranks are in 2..=5.
            out_rank: lhs.len().max(rhs.len()) as u8,
            adj_x,
            adj_y,
            lhs_offset: q.lhs_offset,
            rhs_offset: q.rhs_offset,
            output_offset: q.output_offset,
            output_multiplier,
            output_shift,
        })
    }

    /// The output's dimensions: the broadcast batch dimensions, then `[A][C]`.
    #[must_use]
    pub fn output_shape(&self) -> Dims {
        let rank = usize::from(self.out_rank);
        let mut d = [0_u32; MAX_DIMS];
        for ((o, &a), &b) in d.iter_mut().zip(&self.lhs_batch).zip(&self.rhs_batch) {
            // Checked in `new`.
            *o = broadcast(a, b).unwrap_or(0);
        }
        d[3] = self.rows;
        d[4] = self.cols;
        // Rank 2..=5: drop the padding.
        Dims::new(&d[5 - rank..5]).unwrap_or_default()
    }

    /// Element counts `(lhs, rhs, output)` the buffers must have.
    #[must_use]
    pub const fn lens(&self) -> (usize, usize, usize) {
        (us(self.lhs_len), us(self.rhs_len), us(self.out_len))
    }

    /// `(multiplier, shift)` of the accumulator's rescaling to the output scale.
    #[must_use]
    pub const fn output_multiplier(&self) -> (i32, i32) {
        (self.output_multiplier, self.output_shift)
    }

    #[inline]
    fn requantize(&self, acc: i32) -> i8 {
        let scaled =
            multiply_by_quantized_multiplier(acc, self.output_multiplier, self.output_shift);
        requantized_to_i8(
            scaled,
            self.output_offset,
            i32::from(i8::MIN),
            i32::from(i8::MAX),
        )
    }
}

/// The quantization of a BATCH_MATMUL, resolved: offsets and the output rescaling.
struct MatmulQuant {
    lhs_offset: i32,
    rhs_offset: i32,
    output_offset: i32,
    output: (i32, i32),
}

/// A batch dimension of the output: TFLite's `broadcast_dim` (equal sizes, or one of them 1,
/// which stretches to the other, so 1 against 0 gives 0); `None` when they do not broadcast.
fn broadcast(a: u32, b: u32) -> Option<u32> {
    match (a, b) {
        _ if a == b => Some(a),
        (1, _) => Some(b),
        (_, 1) => Some(a),
        _ => None,
    }
}

/// A shape of rank 2 to 5, padded with leading 1s to rank 5.
fn extend(shape: &[u32]) -> Result<[u32; 5], KernelError> {
    if !(2..=5).contains(&shape.len()) {
        return Err(KernelError::Unsupported {
            what: "batch matmul rank outside 2 to 5",
        });
    }
    let mut e = [1_u32; 5];
    e[5 - shape.len()..].copy_from_slice(shape);
    Ok(e)
}

/// Strides of the three batch dimensions of an operand of `matrix` elements per batch, `0`
/// along broadcast dimensions (size 1), so that every output batch finds its operand matrix.
fn batch_strides(batch: [u32; 3], matrix: usize) -> [usize; 3] {
    let s2 = matrix;
    let s1 = s2 * us(batch[2]);
    let s0 = s1 * us(batch[1]);
    let keep = |d: u32, s: usize| if d == 1 { 0 } else { s };
    [keep(batch[0], s0), keep(batch[1], s1), keep(batch[2], s2)]
}

/// One batch's matrices and the constants of the product.
struct Matmul<'a> {
    p: &'a BatchMatmulParams,
    rows: usize,
    depth: usize,
    cols: usize,
}

impl Matmul<'_> {
    /// `out` (`[A][C]`) from `lhs` (`[A][K]`, or `[K][A]` with `adj_x`) and `rhs` (`[K][C]`,
    /// or `[C][K]` with `adj_y`), each exactly one matrix long.
    fn run(&self, lhs: &[i8], rhs: &[i8], out: &mut [i8]) {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        if super::x86::has_avx2() {
            // SAFETY: the CPU has AVX2 (checked just above), the only feature the function
            // enables.
            #[allow(unsafe_code)]
            unsafe {
                self.run_avx2(lhs, rhs, out);
            }
            return;
        }
        self.run_portable(lhs, rhs, out);
    }

    /// [`Matmul::run`]'s loops compiled with AVX2 enabled: the same source, so the same
    /// products and wrapping sums, but the tiles' 32-bit multiply-adds become eight-lane
    /// `VPMULLD`s rather than SSE2's emulation of them.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2")]
    fn run_avx2(&self, lhs: &[i8], rhs: &[i8], out: &mut [i8]) {
        self.run_portable(lhs, rhs, out);
    }

    /// The loops of [`Matmul::run`], for every target.
    #[inline(always)]
    fn run_portable(&self, lhs: &[i8], rhs: &[i8], out: &mut [i8]) {
        let (lo, ro) = (self.p.lhs_offset, self.p.rhs_offset);
        let (rows, depth, cols) = (self.rows, self.depth, self.cols);
        if depth == 0 {
            // Empty sums (and empty operands, which the loops below would not index).
            out.fill(self.p.requantize(0));
            return;
        }
        if !self.p.adj_y {
            // R[k][c] = rhs[k·C + c]: accumulate whole RHS row segments per LHS element.
            // L[a][k] = lhs[a·K + k], or lhs[k·A + a] with adj_x.
            let (row_step, k_step) = if self.p.adj_x { (1, rows) } else { (depth, 1) };
            for (a, out_row) in out.chunks_exact_mut(cols).enumerate() {
                let mut c0 = 0;
                for out_tile in out_row.chunks_mut(TILE) {
                    let mut acc = [0_i32; TILE];
                    let acc = &mut acc[..out_tile.len()];
                    let l_col = lhs[a * row_step..].iter().step_by(k_step);
                    for (&l, r_row) in l_col.zip(rhs.chunks_exact(cols)) {
                        let l = i32::from(l) + lo;
                        for (s, &r) in acc.iter_mut().zip(&r_row[c0..]) {
                            *s = s.wrapping_add(l * (i32::from(r) + ro));
                        }
                    }
                    for (o, &s) in out_tile.iter_mut().zip(acc.iter()) {
                        *o = self.p.requantize(s);
                    }
                    c0 += out_tile.len();
                }
            }
        } else if !self.p.adj_x {
            // L[a][·] and R[·][c] = rhs[c·K ..] are both contiguous: dot products.
            for (l_row, out_row) in lhs.chunks_exact(depth).zip(out.chunks_exact_mut(cols)) {
                for (o, r_col) in out_row.iter_mut().zip(rhs.chunks_exact(depth)) {
                    let acc = l_row.iter().zip(r_col).fold(0_i32, |s, (&l, &r)| {
                        s.wrapping_add((i32::from(l) + lo) * (i32::from(r) + ro))
                    });
                    *o = self.p.requantize(acc);
                }
            }
        } else {
            // L[a][k] = lhs[k·A + a] (rows of L's transpose are contiguous) and
            // R[k][c] = rhs[c·K + k]: for each output column, a tile of rows at a time.
            for (c, r_col) in rhs.chunks_exact(depth).enumerate() {
                let mut a0 = 0;
                while a0 < rows {
                    let n = (rows - a0).min(TILE);
                    let mut acc = [0_i32; TILE];
                    let acc = &mut acc[..n];
                    for (&r, l_row) in r_col.iter().zip(lhs.chunks_exact(rows)) {
                        let r = i32::from(r) + ro;
                        for (s, &l) in acc.iter_mut().zip(&l_row[a0..]) {
                            *s = s.wrapping_add((i32::from(l) + lo) * r);
                        }
                    }
                    for (i, &s) in acc.iter().enumerate() {
                        out[(a0 + i) * cols + c] = self.p.requantize(s);
                    }
                    a0 += n;
                }
            }
        }
    }
}

/// int8 BATCH_MATMUL (see the [module docs](self)).
///
/// `lhs`, `rhs` and `out` are row-major tensors of the shapes given to
/// [`BatchMatmulParams::new`] and its [`output_shape`](BatchMatmulParams::output_shape);
/// their lengths must be [`lens`](BatchMatmulParams::lens) ([`KernelError::LengthMismatch`],
/// before anything is written). Accumulation wraps on `int32` overflow like TFLM's.
pub fn batch_matmul(
    p: &BatchMatmulParams,
    lhs: &[i8],
    rhs: &[i8],
    out: &mut [i8],
) -> Result<(), KernelError> {
    let (lhs_len, rhs_len, out_len) = p.lens();
    check_len("lhs", lhs_len, lhs.len())?;
    check_len("rhs", rhs_len, rhs.len())?;
    check_len("output", out_len, out.len())?;
    if out_len == 0 {
        return Ok(());
    }
    // Non-empty output: every output dimension, hence every operand batch dimension, A and C
    // are at least 1; K may be 0 (then every accumulator is 0).
    let m = Matmul {
        p,
        rows: us(p.rows),
        depth: us(p.depth),
        cols: us(p.cols),
    };
    let (lhs_matrix, rhs_matrix) = (m.rows * m.depth, m.depth * m.cols);
    let ls = batch_strides(p.lhs_batch, lhs_matrix);
    let rs = batch_strides(p.rhs_batch, rhs_matrix);
    let batches = [
        us(p.lhs_batch[0].max(p.rhs_batch[0])),
        us(p.lhs_batch[1].max(p.rhs_batch[1])),
        us(p.lhs_batch[2].max(p.rhs_batch[2])),
    ];
    let mut out_mats = out.chunks_exact_mut(m.rows * m.cols);
    for b0 in 0..batches[0] {
        for b1 in 0..batches[1] {
            for b2 in 0..batches[2] {
                let l = b0 * ls[0] + b1 * ls[1] + b2 * ls[2];
                let r = b0 * rs[0] + b1 * rs[1] + b2 * rs[2];
                // The output has exactly one matrix per batch index.
                let Some(o) = out_mats.next() else {
                    return Ok(());
                };
                m.run(&lhs[l..l + lhs_matrix], &rhs[r..r + rhs_matrix], o);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;

    const fn q(scale: f32, zero_point: i32) -> Quant {
        Quant { scale, zero_point }
    }

    /// Deterministic int8 data covering the whole range.
    fn data(n: usize, seed: usize) -> Vec<i8> {
        (0..n)
            .map(|i| ((i * 73 + seed * 151 + (i * i) % 17) % 256) as u8 as i8)
            .collect()
    }

    /// Straight from the definition: broadcast batch indices, logical `L[a][k]` and
    /// `R[k][c]` through the stored layouts.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        lhs_shape: &[u32],
        rhs_shape: &[u32],
        adj_x: bool,
        adj_y: bool,
        lq: Quant,
        rq: Quant,
        oq: Quant,
        lhs: &[i8],
        rhs: &[i8],
    ) -> Vec<i8> {
        let ext = |s: &[u32]| {
            let mut e = std::vec![1_usize; 5 - s.len()];
            e.extend(s.iter().map(|&d| d as usize));
            e
        };
        let (l, r) = (ext(lhs_shape), ext(rhs_shape));
        let (a_n, k_n) = if adj_x { (l[4], l[3]) } else { (l[3], l[4]) };
        let c_n = if adj_y { r[3] } else { r[4] };
        let ob: Vec<usize> = (0..3).map(|i| l[i].max(r[i])).collect();
        let real = f64::from(lq.scale * rq.scale) / f64::from(oq.scale);
        let (m, s) = crate::fixed_point::quantize_multiplier(real);
        let mut out = Vec::new();
        for b0 in 0..ob[0] {
            for b1 in 0..ob[1] {
                for b2 in 0..ob[2] {
                    let pick = |d: &[usize]| {
                        let i = [b0 % d[0], b1 % d[1], b2 % d[2]];
                        ((i[0] * d[1] + i[1]) * d[2] + i[2]) * d[3] * d[4]
                    };
                    let (lb, rb) = (pick(&l), pick(&r));
                    for a in 0..a_n {
                        for c in 0..c_n {
                            let mut acc = 0_i64;
                            for k in 0..k_n {
                                let lv = if adj_x {
                                    lhs[lb + k * a_n + a]
                                } else {
                                    lhs[lb + a * k_n + k]
                                };
                                let rv = if adj_y {
                                    rhs[rb + c * k_n + k]
                                } else {
                                    rhs[rb + k * c_n + c]
                                };
                                acc += (i64::from(lv) - i64::from(lq.zero_point))
                                    * (i64::from(rv) - i64::from(rq.zero_point));
                            }
                            let v =
                                multiply_by_quantized_multiplier(acc as i32, m, s) + oq.zero_point;
                            out.push(v.clamp(-128, 127) as i8);
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn hand_computed() {
        // Scales 0.5 · 0.5 / 0.25 = 1 (exact); zero points 1, −2 and 3.
        let p = BatchMatmulParams::new(
            &[2, 3],
            &[3, 2],
            false,
            false,
            q(0.5, 1),
            q(0.5, -2),
            q(0.25, 3),
        )
        .unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 2]);
        assert_eq!(p.lens(), (6, 6, 4));
        // Centred L = [[0, 1, 2], [3, 4, 5]], R = [[0, 1], [2, 3], [4, 5]].
        let lhs = [1, 2, 3, 4, 5, 6];
        let rhs = [-2, -1, 0, 1, 2, 3];
        let mut out = [0_i8; 4];
        batch_matmul(&p, &lhs, &rhs, &mut out).unwrap();
        assert_eq!(out, [10 + 3, 13 + 3, 28 + 3, 40 + 3]);

        // The same product with both operands stored transposed.
        let p = BatchMatmulParams::new(
            &[3, 2],
            &[2, 3],
            true,
            true,
            q(0.5, 1),
            q(0.5, -2),
            q(0.25, 3),
        )
        .unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 2]);
        batch_matmul(&p, &[1, 4, 2, 5, 3, 6], &[-2, 0, 2, -1, 1, 3], &mut out).unwrap();
        assert_eq!(out, [13, 16, 31, 43]);
    }

    #[test]
    fn rounding_ties_and_saturation() {
        // Multiplier 0.5 (2^30, shift 0): the doubling high multiply rounds halves up, so
        // 3 · 0.5 → 2 and −3 · 0.5 → −1 (not −2).
        let p = BatchMatmulParams::new(
            &[2, 1],
            &[1, 1],
            false,
            false,
            q(1.0, 0),
            q(0.5, 0),
            q(1.0, 0),
        )
        .unwrap();
        assert_eq!(p.output_multiplier(), (1 << 30, 0));
        let mut out = [0_i8; 2];
        batch_matmul(&p, &[3, -3], &[1], &mut out).unwrap();
        assert_eq!(out, [2, -1]);
        // Multiplier 0.25 (2^30, shift −1): then a rounding shift, ties away from zero:
        // 6 · 0.25 → 2, −6 · 0.25 → −2.
        let p = BatchMatmulParams::new(
            &[2, 1],
            &[1, 1],
            false,
            false,
            q(0.5, 0),
            q(0.5, 0),
            q(1.0, 0),
        )
        .unwrap();
        batch_matmul(&p, &[6, -6], &[1], &mut out).unwrap();
        assert_eq!(out, [2, -2]);
        // Saturation at both ends of int8, with the output zero point added first.
        let p = BatchMatmulParams::new(
            &[2, 2],
            &[2, 1],
            false,
            false,
            q(1.0, -128),
            q(1.0, 0),
            q(1.0, 10),
        )
        .unwrap();
        batch_matmul(&p, &[-118, -128, 127, 127], &[1, -1], &mut out).unwrap();
        // Row 0: 10 · 1 + 0 · (−1) = 10 → 20; row 1: 255 − 255 = 0 → 10.
        assert_eq!(out, [20, 10]);
        batch_matmul(&p, &[127, -128, 127, 127], &[100, -1], &mut out).unwrap();
        // Row 0: 255 · 100 → 127; row 1: 255 · 99 → 127.
        assert_eq!(out, [127, 127]);
        batch_matmul(&p, &[127, 127, 127, -128], &[-100, -100], &mut out).unwrap();
        assert_eq!(out, [-128, -128]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn layouts_tiles_and_broadcasting_match_naive() {
        let (lq, rq, oq) = (q(0.02, -5), q(0.03, 7), q(0.4, 2));
        let cases: [(&[u32], &[u32]); 7] = [
            (&[1, 2, 16, 16], &[1, 2, 16, 16]), // tiny_transformer's attention
            (&[3, 5], &[5, 70]),                // several column tiles
            (&[70, 4], &[4, 3]),                // several row tiles (with adj_x)
            (&[2, 1, 3, 4], &[3, 4, 2]),        // broadcast both ways, ranks 4 and 3
            (&[4, 1, 1, 2, 3, 4][1..], &[2, 4, 2]), // rank 5 against rank 3
            (&[2, 3, 0], &[0, 4]),              // empty reduction
            (&[1, 1], &[1, 1]),
        ];
        for (ls, rs) in cases {
            for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
                let swap = |s: &[u32], adj: bool| {
                    let mut v = s.to_vec();
                    let n = v.len();
                    if adj {
                        v.swap(n - 1, n - 2);
                    }
                    v
                };
                let (lsh, rsh) = (swap(ls, adj_x), swap(rs, adj_y));
                let p = BatchMatmulParams::new(&lsh, &rsh, adj_x, adj_y, lq, rq, oq).unwrap();
                let (ln, rn, on) = p.lens();
                let (lhs, rhs) = (data(ln, 1), data(rn, 2));
                let mut out = std::vec![0_i8; on];
                batch_matmul(&p, &lhs, &rhs, &mut out).unwrap();
                let expected = naive(&lsh, &rsh, adj_x, adj_y, lq, rq, oq, &lhs, &rhs);
                assert_eq!(out, expected, "{lsh:?} {rsh:?} {adj_x} {adj_y}");
            }
        }
        let p =
            BatchMatmulParams::new(&[2, 1, 3, 4], &[3, 4, 2], false, false, lq, rq, oq).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 3, 3, 2]);
        let p = BatchMatmulParams::new(&[2, 3, 0], &[0, 4], false, false, lq, rq, oq).unwrap();
        assert_eq!(p.output_shape().as_slice(), &[2, 3, 4]);
        // Zero output zero point and zero accumulators: all outputs are the zero point.
        let mut out = [0_i8; 24];
        batch_matmul(&p, &[], &[], &mut out).unwrap();
        assert_eq!(out, [2; 24]);
    }

    #[test]
    fn empty_dimensions_never_panic() {
        let (a, b) = (q(0.5, 3), q(0.25, -1));
        let shapes: [(&[u32], &[u32]); 7] = [
            (&[0, 3], &[3, 4]),
            (&[2, 3], &[3, 0]),
            (&[2, 0], &[0, 4]),
            (&[0, 2, 3], &[1, 3, 4]),
            (&[1, 2, 3], &[0, 3, 4]),
            (&[3, 0, 1, 2, 3], &[1, 2, 3, 4]),
            (&[1, 1, 1, 1, 1], &[1, 1]),
        ];
        for (ls, rs) in shapes {
            for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
                let Ok(p) = BatchMatmulParams::new(ls, rs, adj_x, adj_y, a, a, b) else {
                    continue;
                };
                let (ln, rn, on) = p.lens();
                let mut out = std::vec![9_i8; on];
                batch_matmul(&p, &data(ln, 3), &data(rn, 4), &mut out).unwrap();
                let n: u32 = p.output_shape().as_slice().iter().product();
                assert_eq!(n as usize, on, "{ls:?} {rs:?}");
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    #[cfg_attr(
        miri,
        ignore = "over 30 s each under miri, which interprets every step (sweeps of many cases)"
    )]
    fn long_reduction_wraps_like_int32() {
        // 70,000 products of 255 · 255 overflow int32 (4.55e9); the sum wraps.
        let k = 70_000_u32;
        let p = BatchMatmulParams::new(
            &[1, k],
            &[k, 1],
            false,
            false,
            q(1.0, -128),
            q(1.0, -128),
            q(1.0, 0),
        )
        .unwrap();
        let ones = std::vec![127_i8; k as usize];
        let mut out = [0_i8; 1];
        batch_matmul(&p, &ones, &ones, &mut out).unwrap();
        let wrapped = (i64::from(k) * 255 * 255) as i32; // 255·255·70000 mod 2^32
        assert_eq!(i32::from(out[0]), wrapped.clamp(-128, 127));
    }

    #[test]
    fn errors() {
        let (a, b) = (q(1.0, 0), q(1.0, 0));
        let unsupported = |what| Err(KernelError::Unsupported { what });
        assert_eq!(
            BatchMatmulParams::new(&[3], &[3, 1], false, false, a, a, b),
            unsupported("batch matmul rank outside 2 to 5")
        );
        assert_eq!(
            BatchMatmulParams::new(&[1, 1, 1, 1, 1, 1], &[1, 1], false, false, a, a, b),
            unsupported("batch matmul rank outside 2 to 5")
        );
        assert_eq!(
            BatchMatmulParams::new(&[2, 3, 4], &[3, 4, 5], false, false, a, a, b),
            unsupported("batch matmul batch dimensions do not broadcast")
        );
        assert_eq!(
            BatchMatmulParams::new(&[3, 4], &[3, 5], false, false, a, a, b),
            unsupported("batch matmul lhs and rhs depths differ")
        );
        assert!(BatchMatmulParams::new(&[3, 4], &[3, 5], true, false, a, a, b).is_ok());
        assert_eq!(
            BatchMatmulParams::new(&[65_536, 65_536], &[65_536, 1], false, false, a, a, b),
            Err(KernelError::ShapeOverflow)
        );
        assert_eq!(
            BatchMatmulParams::new(&[65_536, 1], &[1, 65_536], false, false, a, a, b),
            Err(KernelError::ShapeOverflow)
        );
        assert_eq!(
            BatchMatmulParams::new(&[1, 1], &[1, 1], false, false, a, q(1.0, -129), b),
            Err(KernelError::InvalidQuantization {
                what: "rhs zero point"
            })
        );
        assert_eq!(
            BatchMatmulParams::new(&[1, 1], &[1, 1], false, false, q(1e30, 0), q(1e30, 0), b),
            Err(KernelError::InvalidQuantization {
                what: "lhs scale * rhs scale"
            })
        );
        assert_eq!(
            BatchMatmulParams::new(&[1, 1], &[1, 1], false, false, a, a, q(1e-10, 0)),
            Err(KernelError::InvalidQuantization {
                what: "output scale"
            })
        );

        let p = BatchMatmulParams::new(&[2, 3], &[3, 2], false, false, a, a, b).unwrap();
        let mut out = [5_i8; 4];
        let err = |operand, expected, actual| {
            Err(KernelError::LengthMismatch {
                operand,
                expected,
                actual,
            })
        };
        assert_eq!(
            batch_matmul(&p, &[0; 5], &[0; 6], &mut out),
            err("lhs", 6, 5)
        );
        assert_eq!(
            batch_matmul(&p, &[0; 6], &[0; 7], &mut out),
            err("rhs", 6, 7)
        );
        assert_eq!(
            batch_matmul(&p, &[0; 6], &[0; 6], &mut out[..3]),
            err("output", 4, 3)
        );
        assert_eq!(out, [5; 4]);
    }

    /// The AVX2 build of the loops against the portable one, byte for byte, on random
    /// matrices of every layout (both `adj` flags), sizes around the 32-accumulator tiles and
    /// the vector widths, and zero points at the int8 extremes.
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    #[test]
    fn avx2_equals_portable() {
        if !crate::int8::x86::avx2_for_tests() {
            return;
        }
        let mut rng = crate::xorshift::XorShift(0x9e37_79b9_u32);
        let mut next = move |n: u32| {
            let state = rng.next();
            state % n
        };
        for case in 0..300 {
            let (a, k, c) = (1 + next(40), next(40), 1 + next(70));
            let (adj_x, adj_y) = (case % 2 == 1, case % 4 >= 2);
            let zp = |v: u32| [-128, 127, 0, v as i32 - 128][case % 4];
            let (lq, rq) = (q(0.05, zp(next(256))), q(0.02, zp(next(256))));
            let oq = q(0.01 + next(100) as f32 / 100.0, next(256) as i32 - 128);
            let lhs_shape = if adj_x { [k, a] } else { [a, k] };
            let rhs_shape = if adj_y { [c, k] } else { [k, c] };
            let p =
                BatchMatmulParams::new(&lhs_shape, &rhs_shape, adj_x, adj_y, lq, rq, oq).unwrap();
            let m = Matmul {
                p: &p,
                rows: a as usize,
                depth: k as usize,
                cols: c as usize,
            };
            let lhs = data((a * k) as usize, case);
            let rhs = data((k * c) as usize, case + 7);
            let mut fast = std::vec![0_i8; (a * c) as usize];
            let mut slow = fast.clone();
            // SAFETY: the CPU has AVX2 (checked above).
            #[allow(unsafe_code)]
            unsafe {
                m.run_avx2(&lhs, &rhs, &mut fast);
            }
            m.run_portable(&lhs, &rhs, &mut slow);
            assert_eq!(fast, slow, "case {case}: {a}×{k}×{c}, adj {adj_x} {adj_y}");
        }
    }
}
