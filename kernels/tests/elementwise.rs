//! Hand-computed tests of the broadcasting ADD / SUB / MUL, RSQRT, QUANTIZE, DEQUANTIZE and
//! general-axes MEAN kernels.
//!
//! Every expected byte below was derived by hand (the derivation is in the comments) and then
//! confirmed against TFLM (the `tflite-micro` PyPI package) on single-operator models built by
//! `tests/tflm/synthetic_fixtures.py`'s helpers. Scales are mostly powers of two so that the
//! rescalings are exact and each rounding step can be followed.

use npu_kernels::fixed_point::multiply_by_quantized_multiplier;
use npu_kernels::int8::{
    add, add_broadcast, dequantize, mean, mean_hw, mul, mul_broadcast, quantize_f32, requantize,
    rsqrt, sub, sub_broadcast, Activation, AddParams, BroadcastShape, MeanParams, MulParams, Nhwc,
    Quant, RequantizeParams, RsqrtParams, SubParams,
};
use npu_kernels::KernelError;

const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

const UNIT: Quant = q(1.0, 0);

fn unsupported(what: &'static str) -> KernelError {
    KernelError::Unsupported { what }
}

fn mismatch(operand: &'static str, expected: usize, actual: usize) -> KernelError {
    KernelError::LengthMismatch {
        operand,
        expected,
        actual,
    }
}

/// xorshift64*: deterministic pseudo-random bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.next() as u8 as i8).collect()
    }

    fn below(&mut self, n: u32) -> u32 {
        self.next() % n
    }
}

// ---------------------------------------------------------------------------------------------
// BroadcastShape

#[test]
fn broadcast_shape_fuses_loops() {
    // Layer norm's SUB: 16 rows of 32, b repeated along each row.
    let s = BroadcastShape::new(&[1, 16, 32], &[1, 16, 1], &[1, 16, 32]).unwrap();
    assert_eq!(s.loops(), &[16, 32]);
    assert_eq!(s.lens(), (512, 16, 512));
    assert!(!s.is_elementwise());
    // Equal shapes: one flat run, the fast path.
    let s = BroadcastShape::new(&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]).unwrap();
    assert_eq!(s.loops(), &[24]);
    assert!(s.is_elementwise());
    // A scalar (rank 0) against a matrix, and the reverse: one run with one input repeated.
    let s = BroadcastShape::new(&[], &[5, 7], &[5, 7]).unwrap();
    assert_eq!((s.loops(), s.lens()), (&[35][..], (1, 35, 35)));
    let s = BroadcastShape::new(&[1, 2, 16, 16], &[], &[1, 2, 16, 16]).unwrap();
    assert_eq!((s.loops(), s.lens()), (&[512][..], (512, 1, 512)));
    // Alternating repeats cannot fuse: five loops.
    let s = BroadcastShape::new(&[2, 1, 4, 1, 3], &[1, 5, 1, 2, 1], &[2, 5, 4, 2, 3]).unwrap();
    assert_eq!(s.loops(), &[2, 5, 4, 2, 3]);
    assert_eq!(s.lens(), (24, 10, 240));
    // Size-1 dimensions vanish; neighbours with the same repeat pattern fuse.
    let s = BroadcastShape::new(&[3, 1, 4, 5], &[1, 1, 4, 5], &[3, 1, 4, 5]).unwrap();
    assert_eq!(s.loops(), &[3, 20]);
    // All ones: a single element, no loop.
    let s = BroadcastShape::new(&[1, 1], &[1], &[1, 1]).unwrap();
    assert_eq!((s.loops(), s.lens()), (&[][..], (1, 1, 1)));
    assert!(s.is_elementwise());
    // Rank 6.
    let s = BroadcastShape::new(
        &[1, 2, 1, 4, 1, 3],
        &[2, 1, 3, 1, 5, 1],
        &[2, 2, 3, 4, 5, 3],
    )
    .unwrap();
    assert_eq!(s.lens(), (24, 30, 720));
    // Empty output: a dimension of 0 against 1.
    let s = BroadcastShape::new(&[1, 3], &[0, 1], &[0, 3]).unwrap();
    assert_eq!(s.lens(), (3, 0, 0));
}

#[test]
fn broadcast_shape_errors() {
    assert_eq!(
        BroadcastShape::new(&[1; 7], &[1], &[1; 7]),
        Err(unsupported("rank above 6"))
    );
    assert_eq!(
        BroadcastShape::new(&[3], &[4], &[4]),
        Err(unsupported("shapes do not broadcast"))
    );
    assert_eq!(
        BroadcastShape::new(&[0], &[2], &[2]),
        Err(unsupported("shapes do not broadcast"))
    );
    // The output must be exactly the broadcast shape: not a different size, not a different
    // rank (even with leading 1s), not an input's shape.
    let not_out = unsupported("output is not the broadcast shape");
    assert_eq!(BroadcastShape::new(&[3, 1], &[1, 4], &[3, 1]), Err(not_out));
    assert_eq!(BroadcastShape::new(&[3], &[3], &[1, 3]), Err(not_out));
    assert_eq!(BroadcastShape::new(&[1, 3], &[3], &[3]), Err(not_out));
    // 2^32 elements do not fit a u32.
    assert_eq!(
        BroadcastShape::new(&[65_536, 65_536], &[1], &[65_536, 65_536]),
        Err(KernelError::ShapeOverflow)
    );
}

/// Broadcast `a` and `b` by explicit index arithmetic, combining pairs with `f` (a length-1
/// call of the non-broadcasting kernel): an independent check of the loop nest.
fn naive_broadcast(
    a_shape: &[u32],
    b_shape: &[u32],
    out_shape: &[u32],
    a: &[i8],
    b: &[i8],
    f: impl Fn(i8, i8) -> i8,
) -> Vec<i8> {
    let rank = out_shape.len();
    let pad = |s: &[u32]| {
        let mut v = vec![1_u32; rank - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (ap, bp) = (pad(a_shape), pad(b_shape));
    let total: u32 = out_shape.iter().product();
    (0..total)
        .map(|flat| {
            let (mut rem, mut ia, mut ib, mut sa, mut sb) = (flat, 0, 0, 1, 1);
            for d in (0..rank).rev() {
                let i = rem % out_shape[d];
                rem /= out_shape[d];
                ia += if ap[d] == 1 { 0 } else { i * sa };
                ib += if bp[d] == 1 { 0 } else { i * sb };
                sa *= ap[d];
                sb *= bp[d];
            }
            f(a[ia as usize], b[ib as usize])
        })
        .collect()
}

#[test]
fn broadcast_kernels_pair_the_right_elements() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let cases: [(&[u32], &[u32]); 9] = [
        (&[2, 3, 4], &[2, 3, 4]),
        (&[1, 16, 32], &[1, 16, 1]),
        (&[1, 16, 1], &[]),
        (&[], &[5, 7]),
        (&[4], &[2, 3, 4]),
        (&[2, 3, 1], &[3, 4]),
        (&[2, 1, 4, 1, 3], &[1, 5, 1, 2, 1]),
        (&[1, 2, 1, 4, 1, 3], &[2, 1, 3, 1, 5, 1]),
        (&[3, 1, 1, 2], &[1, 4, 5, 1]),
    ];
    let add_p = AddParams::new(q(0.05, -3), q(0.02, 7), q(0.06, 2), Activation::None).unwrap();
    let sub_p = SubParams::new(q(0.05, -3), q(0.02, 7), q(0.06, 2), Activation::Relu).unwrap();
    let mul_p = MulParams::new(q(0.05, -3), q(0.02, 7), q(0.004, 2), Activation::None).unwrap();
    for (a_shape, b_shape) in cases {
        let rank = a_shape.len().max(b_shape.len());
        let out_shape: Vec<u32> = (0..rank)
            .map(|i| {
                let dim = |s: &[u32]| (i + s.len()).checked_sub(rank).map_or(1, |j| s[j]);
                dim(a_shape).max(dim(b_shape))
            })
            .collect();
        let s = BroadcastShape::new(a_shape, b_shape, &out_shape).unwrap();
        let (na, nb, no) = s.lens();
        let (a, b) = (rng.i8s(na), rng.i8s(nb));
        let mut out = vec![0; no];

        add_broadcast(&add_p, &s, &a, &b, &mut out).unwrap();
        let add_one = |x: i8, y: i8| {
            let mut o = [0];
            add(&add_p, &[x], &[y], &mut o).unwrap();
            o[0]
        };
        assert_eq!(
            out,
            naive_broadcast(a_shape, b_shape, &out_shape, &a, &b, add_one)
        );

        sub_broadcast(&sub_p, &s, &a, &b, &mut out).unwrap();
        let sub_one = |x: i8, y: i8| {
            let mut o = [0];
            sub(&sub_p, &[x], &[y], &mut o).unwrap();
            o[0]
        };
        assert_eq!(
            out,
            naive_broadcast(a_shape, b_shape, &out_shape, &a, &b, sub_one)
        );

        mul_broadcast(&mul_p, &s, &a, &b, &mut out).unwrap();
        let mul_one = |x: i8, y: i8| {
            let mut o = [0];
            mul(&mul_p, &[x], &[y], &mut o).unwrap();
            o[0]
        };
        assert_eq!(
            out,
            naive_broadcast(a_shape, b_shape, &out_shape, &a, &b, mul_one)
        );
    }
}

#[test]
fn broadcast_over_equal_shapes_is_the_elementwise_kernel() {
    let mut rng = Rng(42);
    let (a, b) = (rng.i8s(1000), rng.i8s(1000));
    let s = BroadcastShape::new(&[10, 100], &[10, 100], &[10, 100]).unwrap();
    let (mut x, mut y) = (vec![0; 1000], vec![0; 1000]);
    let p = AddParams::new(q(0.0078, 0), q(0.0122, 3), q(0.0122, 3), Activation::None).unwrap();
    add(&p, &a, &b, &mut x).unwrap();
    add_broadcast(&p, &s, &a, &b, &mut y).unwrap();
    assert_eq!(x, y);
    let p = SubParams::new(q(0.0122, 3), q(0.0027, -21), q(0.0118, 1), Activation::None).unwrap();
    sub(&p, &a, &b, &mut x).unwrap();
    sub_broadcast(&p, &s, &a, &b, &mut y).unwrap();
    assert_eq!(x, y);
    let p = MulParams::new(
        q(0.0118, 1),
        q(0.0118, 1),
        q(0.0091, -128),
        Activation::None,
    )
    .unwrap();
    mul(&p, &a, &b, &mut x).unwrap();
    mul_broadcast(&p, &s, &a, &b, &mut y).unwrap();
    assert_eq!(x, y);
}

#[test]
fn long_inputs_give_the_same_bytes_as_short_ones() {
    // From 1024 outputs on, ADD and SUB read their per-input rescalings from tables built per
    // call; the bytes must be those of short calls, which compute them directly.
    let mut rng = Rng(5);
    let (a, b) = (rng.i8s(4096), rng.i8s(64));
    let add_p =
        AddParams::new(q(0.0122, 3), q(0.0027, -21), q(0.0118, 1), Activation::Relu).unwrap();
    let sub_p =
        SubParams::new(q(0.0122, 3), q(0.0027, -21), q(0.0118, 1), Activation::None).unwrap();
    let long = BroadcastShape::new(&[64, 64], &[64, 1], &[64, 64]).unwrap();
    let row = BroadcastShape::new(&[64], &[1], &[64]).unwrap();
    let (mut x, mut y) = (vec![0; 4096], vec![0; 4096]);
    add_broadcast(&add_p, &long, &a, &b, &mut x).unwrap();
    for ((ar, &br), yr) in a.chunks(64).zip(&b).zip(y.chunks_mut(64)) {
        add_broadcast(&add_p, &row, ar, &[br], yr).unwrap();
    }
    assert_eq!(x, y);
    sub_broadcast(&sub_p, &long, &a, &b, &mut x).unwrap();
    for ((ar, &br), yr) in a.chunks(64).zip(&b).zip(y.chunks_mut(64)) {
        sub_broadcast(&sub_p, &row, ar, &[br], yr).unwrap();
    }
    assert_eq!(x, y);
    // Equal shapes.
    let b = rng.i8s(4096);
    add(&add_p, &a, &b, &mut x).unwrap();
    for ((ar, br), yr) in a.chunks(100).zip(b.chunks(100)).zip(y.chunks_mut(100)) {
        add(&add_p, ar, br, yr).unwrap();
    }
    assert_eq!(x, y);
    sub(&sub_p, &a, &b, &mut x).unwrap();
    for ((ar, br), yr) in a.chunks(100).zip(b.chunks(100)).zip(y.chunks_mut(100)) {
        sub(&sub_p, ar, br, yr).unwrap();
    }
    assert_eq!(x, y);
}

#[test]
fn broadcast_length_errors_write_nothing() {
    let s = BroadcastShape::new(&[2, 3], &[1, 3], &[2, 3]).unwrap();
    let p = AddParams::new(UNIT, UNIT, UNIT, Activation::None).unwrap();
    let mut out = [9; 6];
    assert_eq!(
        add_broadcast(&p, &s, &[0; 5], &[0; 3], &mut out),
        Err(mismatch("a", 6, 5))
    );
    assert_eq!(
        add_broadcast(&p, &s, &[0; 6], &[0; 6], &mut out),
        Err(mismatch("b", 3, 6))
    );
    assert_eq!(
        add_broadcast(&p, &s, &[0; 6], &[0; 3], &mut out[..5]),
        Err(mismatch("output", 6, 5))
    );
    assert_eq!(out, [9; 6]);
    // An empty output is fine (and the non-empty input is still checked).
    let s = BroadcastShape::new(&[1, 3], &[0, 1], &[0, 3]).unwrap();
    add_broadcast(&p, &s, &[1, 2, 3], &[], &mut []).unwrap();
    assert_eq!(
        add_broadcast(&p, &s, &[1, 2], &[], &mut []),
        Err(mismatch("a", 3, 2))
    );
}

// ---------------------------------------------------------------------------------------------
// ADD, SUB and MUL with broadcasting: arithmetic

#[test]
fn add_with_a_scalar() {
    // Unit scales: a' = x · 2^19 (multiplier 0.5), sum · 2^−19 exactly: integer addition, then
    // saturation: 120 + 10 = 130 → 127.
    let p = AddParams::new(UNIT, UNIT, UNIT, Activation::None).unwrap();
    let s = BroadcastShape::new(&[3], &[], &[3]).unwrap();
    let mut out = [0; 3];
    add_broadcast(&p, &s, &[1, 2, 120], &[10], &mut out).unwrap();
    assert_eq!(out, [11, 12, 127]);
    // And with the scalar first.
    let s = BroadcastShape::new(&[], &[3], &[3]).unwrap();
    add_broadcast(&p, &s, &[-100], &[1, -28, -29], &mut out).unwrap();
    assert_eq!(out, [-99, -128, -128]);
}

#[test]
fn add_broadcast_relu6() {
    // Scales 0.5 everywhere, output zero point −10: RELU6 clamps to [−10 + 0, −10 + 12] =
    // [−10, 2]. Reals: (x + 1) · 0.5 → q = x + 1 − 10.
    let p = AddParams::new(q(0.5, 0), q(0.5, 0), q(0.5, -10), Activation::Relu6).unwrap();
    assert_eq!(p.activation_range(), (-10, 2));
    let s = BroadcastShape::new(&[5], &[1], &[5]).unwrap();
    let mut out = [0; 5];
    add_broadcast(&p, &s, &[0, 2, 4, -9, 40], &[1], &mut out).unwrap();
    // 1 − 10 = −9; 3 − 10 = −7; 5 − 10 = −5; −8 − 10 → −10; 41 − 10 = 31 → 2.
    assert_eq!(out, [-9, -7, -5, -10, 2]);
}

#[test]
fn sub_exact_saturating_and_relu() {
    // Unit scales: integer subtraction.
    let p = SubParams::new(UNIT, UNIT, UNIT, Activation::None).unwrap();
    let s = BroadcastShape::new(&[2], &[1], &[2]).unwrap();
    let mut out = [0; 2];
    sub_broadcast(&p, &s, &[5, -3], &[2], &mut out).unwrap();
    assert_eq!(out, [3, -5]);
    sub(&p, &[-128, 127], &[127, -128], &mut out).unwrap();
    assert_eq!(out, [-128, 127]);
    // RELU clamps at the output zero point.
    let p = SubParams::new(UNIT, UNIT, UNIT, Activation::Relu).unwrap();
    sub_broadcast(&p, &s, &[5, -3], &[2], &mut out).unwrap();
    assert_eq!(out, [3, 0]);
}

#[test]
fn sub_rounds_the_difference_half_away_from_zero() {
    // Output scale 2: the output multiplier is 2 / (2^20 · 2) = 2^−20 = 0.5 · 2^−19, so
    // out = RoundingDivideByPOT((x − y) · 2^18, 19) = (x − y) / 2, ties away from zero.
    let p = SubParams::new(UNIT, UNIT, q(2.0, 0), Activation::None).unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, -19));
    let mut out = [0; 4];
    sub(&p, &[3, 0, 1, 0], &[0, 3, 0, 1], &mut out).unwrap();
    // 1.5 → 2, −1.5 → −2, 0.5 → 1, −0.5 → −1.
    assert_eq!(out, [2, -2, 1, -1]);
}

#[test]
fn sub_subtracts_after_rescaling_each_input() {
    // a scale 2^−19, b scale 1: a's multiplier is 2^−19 / 2 = 0.5 · 2^−19, so a' = x exactly
    // (x · 2^20 · 0.5 = x · 2^19, then / 2^19); b' = y · 2^19. Output scale 2^−18: multiplier
    // 2 / (2^20 · 2^−18) = 0.5 with shift 0, so out = SaturatingRoundingDoublingHighMul(a' − b',
    // 2^30) = (a' − b') / 2 with ties towards +∞.
    let p = SubParams::new(
        q(2f32.powi(-19), 0),
        UNIT,
        q(2f32.powi(-18), 0),
        Activation::None,
    )
    .unwrap();
    assert_eq!(p.output_multiplier(), (1 << 30, 0));
    let s = BroadcastShape::new(&[4], &[1], &[4]).unwrap();
    let mut out = [0; 4];
    sub_broadcast(&p, &s, &[3, -3, 1, -1], &[0], &mut out).unwrap();
    // 1.5 → 2, −1.5 → −1, 0.5 → 1, −0.5 → 0.
    assert_eq!(out, [2, -1, 1, 0]);
    // The same with the roles swapped: the subtracted input's rounding is that of a positive
    // product (TFLM does not negate its multiplier), and the difference rounds up:
    // −1.5 → −1, 1.5 → 2, −0.5 → 0, 0.5 → 1.
    let p = SubParams::new(
        UNIT,
        q(2f32.powi(-19), 0),
        q(2f32.powi(-18), 0),
        Activation::None,
    )
    .unwrap();
    let s = BroadcastShape::new(&[1], &[4], &[4]).unwrap();
    sub_broadcast(&p, &s, &[0], &[3, -3, 1, -1], &mut out).unwrap();
    assert_eq!(out, [-1, 2, 0, 1]);
}

#[test]
fn sub_multipliers_are_computed_in_float() {
    // TFLM's SUB divides the float scales in float (ADD in double). For scales 0.3 and 0.7,
    // 0.3 / 1.4 is 0.21428571… in double, giving the Q0.31 mantissa 1840700374 (· 2^−2), but
    // 0.3f / 1.4f rounds to the float 0.2142857313…, whose mantissa is 1840700416.
    let (a, b, o) = (q(0.3, 0), q(0.7, 0), q(0.5, 0));
    let sub_p = SubParams::new(a, b, o, Activation::None).unwrap();
    let add_p = AddParams::new(a, b, o, Activation::None).unwrap();
    assert_eq!(sub_p.input1_multiplier(), (1_840_700_416, -2));
    assert_eq!(add_p.input1_multiplier(), (1_840_700_374, -2));
    assert_eq!(sub_p.input2_multiplier(), (1 << 30, 0));
    assert_eq!(sub_p.output_multiplier(), add_p.output_multiplier());
}

#[test]
fn sub_rejects_bad_quantization() {
    let bad = |what| Err(KernelError::InvalidQuantization { what });
    assert_eq!(
        SubParams::new(q(0.0, 0), UNIT, UNIT, Activation::None),
        bad("a scale")
    );
    assert_eq!(
        SubParams::new(UNIT, q(f32::NAN, 0), UNIT, Activation::None),
        bad("b scale")
    );
    assert_eq!(
        SubParams::new(UNIT, UNIT, q(1.0, 128), Activation::None),
        bad("output zero point")
    );
    // 2 / (2^20 · 1e-7) ≈ 19: the output multiplier is not below one.
    assert_eq!(
        SubParams::new(UNIT, UNIT, q(1e-7, 0), Activation::None),
        bad("output scale")
    );
    // 2^20 · 1e38 overflows float: 2 / inf = 0, not a positive multiplier.
    assert_eq!(
        SubParams::new(UNIT, UNIT, q(1e38, 0), Activation::None),
        bad("output scale")
    );
    assert_eq!(
        sub(
            &SubParams::new(UNIT, UNIT, UNIT, Activation::None).unwrap(),
            &[0; 2],
            &[0; 3],
            &mut [0; 2]
        ),
        Err(mismatch("b", 2, 3))
    );
}

#[test]
fn mul_broadcast_outer_product_ties_and_saturation() {
    // Unit scales: the multiplier is 1 = 0.5 · 2^1, exact.
    let p = MulParams::new(UNIT, UNIT, UNIT, Activation::None).unwrap();
    let s = BroadcastShape::new(&[1, 3], &[2, 1], &[2, 3]).unwrap();
    let mut out = [0; 6];
    mul_broadcast(&p, &s, &[1, 2, 3], &[1, -2], &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, -2, -4, -6]);
    let mut out = [0; 2];
    mul(&p, &[100, -100], &[100, 100], &mut out).unwrap();
    assert_eq!(out, [127, -128]);
    // Output scale 2: multiplier 0.5 with shift 0, one doubling high multiply: ties up.
    let p = MulParams::new(UNIT, UNIT, q(2.0, 0), Activation::None).unwrap();
    let s = BroadcastShape::new(&[4], &[], &[4]).unwrap();
    let mut out = [0; 4];
    mul_broadcast(&p, &s, &[3, -3, 1, -1], &[1], &mut out).unwrap();
    // 1.5 → 2, −1.5 → −1, 0.5 → 1, −0.5 → 0.
    assert_eq!(out, [2, -1, 1, 0]);
}

// ---------------------------------------------------------------------------------------------
// RSQRT

#[test]
fn rsqrt_hand_computed() {
    // Input scale 1, output scale 1/64: the output multiplier is 1 / (1 · 1/64) = 64
    // = 0.5 · 2^7. For v = x − (−128): d = 2^20 / sqrt(v) (±1), then
    // out = d · 64 / 2^20 − 128 = 64 / sqrt(v) − 128.
    let p = RsqrtParams::new(q(1.0, -128), q(1.0 / 64.0, -128)).unwrap();
    assert_eq!(p.multiplier(), (1 << 30, 7));
    let mut out = [0; 6];
    rsqrt(&p, &[-128, -127, -124, -112, -119, 127], &mut out).unwrap();
    // v = 0 → 127 (TFLM's stand-in for infinity); v = 1 → 64 → −64; v = 4 → 32 → −96;
    // v = 16 → 16 → −112; v = 9 → 21.33 → −107; v = 255 → 4.008 → −124.
    assert_eq!(out, [127, -64, -96, -112, -107, -124]);
}

#[test]
fn rsqrt_refuses_negative_inputs_before_writing() {
    let p = RsqrtParams::new(q(0.01, -100), q(0.01, 0)).unwrap();
    let mut out = [7; 3];
    assert_eq!(
        rsqrt(&p, &[0, -100, -101], &mut out),
        Err(unsupported("rsqrt of a negative value"))
    );
    assert_eq!(out, [7; 3]);
    assert_eq!(rsqrt(&p, &[0, 1], &mut out), Err(mismatch("output", 2, 3)));
    // The zero point itself is allowed (v = 0 → 127).
    rsqrt(&p, &[-100], &mut out[..1]).unwrap();
    assert_eq!(out[0], 127);
}

#[test]
fn rsqrt_rejects_bad_quantization() {
    let bad = |what| Err(KernelError::InvalidQuantization { what });
    assert_eq!(RsqrtParams::new(q(-1.0, 0), UNIT), bad("input scale"));
    assert_eq!(
        RsqrtParams::new(UNIT, q(1.0, -129)),
        bad("output zero point")
    );
    // sqrtf(1e-38) · 1e-38 underflows to 0: TFLM would divide by zero.
    assert_eq!(
        RsqrtParams::new(q(1e-38, 0), q(1e-38, 0)),
        bad("output scale")
    );
    // 1 / (sqrt(1e-20) · 1e-20) = 1e30: at least 2^31.
    assert_eq!(
        RsqrtParams::new(q(1e-20, 0), q(1e-20, 0)),
        bad("output scale")
    );
}

#[test]
fn rsqrt_table_path_matches_direct_path() {
    // Inputs longer than 256 are mapped through a 256-entry table; it must give the same
    // bytes as the per-element computation (which the TFLM fixtures check).
    let p = RsqrtParams::new(q(0.0021, -128), q(0.0091, -128)).unwrap();
    let input: Vec<i8> = (0..1000).map(|i| (i * 37 % 256) as u8 as i8).collect();
    let mut long = vec![0; 1000];
    rsqrt(&p, &input, &mut long).unwrap();
    for (chunk, expected) in input.chunks(100).zip(long.chunks(100)) {
        let mut short = vec![0; chunk.len()];
        rsqrt(&p, chunk, &mut short).unwrap();
        assert_eq!(short, expected);
    }
}

// ---------------------------------------------------------------------------------------------
// QUANTIZE and DEQUANTIZE

#[test]
fn quantize_f32_rounds_ties_away_from_zero() {
    // Scale 0.5, zero point 3: x / 0.5 is exact; ±0.5 and ±1.5 are ties.
    let mut out = [0; 8];
    quantize_f32(
        q(0.5, 3),
        &[0.25, -0.25, 0.75, -0.75, 100.0, -100.0, 0.0, 1.25],
        &mut out,
    )
    .unwrap();
    // 0.5 → 1 → 4; −0.5 → −1 → 2; 1.5 → 2 → 5; −1.5 → −2 → 1; 200 + 3 → 127;
    // −200 + 3 → −128; 0 → 3; 2.5 → 3 → 6.
    assert_eq!(out, [4, 2, 5, 1, 127, -128, 3, 6]);
}

#[test]
fn quantize_f32_divides_in_float() {
    // 0.25f / 0.1f: in double 0.25 / 0.100000001490116 = 2.4999999627 would round to 2, but
    // the float quotient rounds to exactly 2.5, which rounds away from zero to 3 (TFLM: 3).
    let mut out = [0; 4];
    quantize_f32(q(0.1, 0), &[0.25, -0.25, 0.35, 0.15], &mut out).unwrap();
    // 0.35f / 0.1f = 3.5 in float → 4; 0.15f / 0.1f = 1.5 → 2.
    assert_eq!(out, [3, -3, 4, 2]);
}

#[test]
fn quantize_f32_out_of_range_values() {
    // As on Arm: NaN converts to 0; ±inf saturate to the int32 limits, and the zero point is
    // added with wrap-around (i32::MAX + 3 wraps negative → −128).
    let mut out = [0; 4];
    quantize_f32(
        q(1.0, 3),
        &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e9],
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [3, -128, -128, -128]);
    quantize_f32(q(1.0, 0), &[f32::INFINITY, 3e9], &mut out[..2]).unwrap();
    assert_eq!(out[..2], [127, 127]);
}

#[test]
fn quantize_f32_and_dequantize_errors() {
    let mut out = [5_i8; 2];
    assert_eq!(
        quantize_f32(q(0.0, 0), &[1.0, 2.0], &mut out),
        Err(KernelError::InvalidQuantization { what: "scale" })
    );
    assert_eq!(
        quantize_f32(q(1.0, 200), &[1.0, 2.0], &mut out),
        Err(KernelError::InvalidQuantization { what: "zero point" })
    );
    assert_eq!(
        quantize_f32(UNIT, &[1.0], &mut out),
        Err(mismatch("output", 1, 2))
    );
    assert_eq!(out, [5; 2]);
    let mut f = [0.5_f32; 2];
    assert_eq!(
        dequantize(q(f32::INFINITY, 0), &[1, 2], &mut f),
        Err(KernelError::InvalidQuantization { what: "scale" })
    );
    assert_eq!(
        dequantize(UNIT, &[1, 2, 3], &mut f),
        Err(mismatch("output", 3, 2))
    );
    assert_eq!(f, [0.5; 2]);
}

#[test]
fn dequantize_hand_computed() {
    let mut out = [0.0_f32; 4];
    dequantize(q(0.25, -2), &[5, -128, -2, 127], &mut out).unwrap();
    assert_eq!(out, [1.75, -31.5, 0.0, 32.25]);
    // 0.1f = 0.100000001490116…: · 10 = 1.00000001490116 (exact in double) rounds to 1.0f;
    // · 1 is 0.1f itself; · −131 = −13.1000001952 rounds to the float −13.100000381…, the
    // float nearest to −13.1.
    let mut out = [0.0_f32; 3];
    dequantize(q(0.1, 3), &[13, 4, -128], &mut out).unwrap();
    assert_eq!(out, [1.0, 0.1, -13.1]);
    assert_eq!(out[2].to_bits(), 0xc151_999a);
}

#[test]
fn requantize_hand_computed() {
    // Input scale 0.5 → output scale 0.25: multiplier 2 = 0.5 · 2^2, exact: out = 2x − 10.
    let p = RequantizeParams::new(q(0.5, 0), q(0.25, -10)).unwrap();
    assert_eq!(p.multiplier(), (1 << 30, 2));
    let mut out = [0; 4];
    requantize(&p, &[60, 70, -128, 0], &mut out).unwrap();
    assert_eq!(out, [110, 127, -128, -10]);
    // Scale 1 → 4: multiplier 0.25 = 0.5 · 2^−1, applied in two roundings: a doubling high
    // multiply by 0.5 (ties up), then a rounding halving (ties away from zero).
    let p = RequantizeParams::new(UNIT, q(4.0, 0)).unwrap();
    assert_eq!(p.multiplier(), (1 << 30, -1));
    let mut out = [0; 11];
    requantize(&p, &[5, -5, -7, 6, -6, 1, -1, 2, -2, 3, -3], &mut out).unwrap();
    // 5: 2.5 → 3 → 1.5 → 2 (exact 1.25);  −5: −2.5 → −2 → −1;  −7: −3.5 → −3 → −2;
    // 6: 3 → 1.5 → 2;  −6: −3 → −2;  1: 0.5 → 1 → 0.5 → 1 (exact 0.25);  −1: −0.5 → 0;
    // 2: 1 → 1;  −2: −1 → −1;  3: 1.5 → 2 → 1;  −3: −1.5 → −1 → −1.
    assert_eq!(out, [2, -1, -2, 2, -2, 1, 0, 1, -1, 1, -1]);
    assert_eq!(
        requantize(&p, &[1], &mut out),
        Err(mismatch("output", 1, 11))
    );
    assert_eq!(
        RequantizeParams::new(q(1e10, 0), q(1e-10, 0)),
        Err(KernelError::InvalidQuantization {
            what: "output scale"
        })
    );
}

// ---------------------------------------------------------------------------------------------
// MEAN over any axes

#[test]
fn mean_innermost_axis_has_no_integer_division_shortcut() {
    // [2, 3] over axis 1 with equal input and output quantization. n = 3: k = 1, the
    // multiplier (2^30, 1) becomes (floor(2^31 / 3), 0) = (715827882, 0).
    let p = MeanParams::for_axes(&[2, 3], &[1], UNIT, UNIT).unwrap();
    assert_eq!(p.multiplier(), (715_827_882, 0));
    let mut out = [0; 2];
    mean(&p, &[0, 1, 1, -1, -1, 0], &mut out).unwrap();
    // Sums 2 and −2: 2 · 715827882 / 2^31 = 0.667 → 1, −0.667 → −1. (TFLM's old
    // equal-quantization path, `sum / n` in integers, would give 0 and 0.)
    assert_eq!(out, [1, -1]);
}

#[test]
fn mean_outer_axis_rounds_ties_up() {
    // [2, 3] over axis 0: n = 2, multiplier (2^30, 0): sum / 2 with ties towards +∞.
    let p = MeanParams::for_axes(&[2, 3], &[0], UNIT, UNIT).unwrap();
    let mut out = [0; 3];
    mean(&p, &[1, 2, -3, 0, 1, 0], &mut out).unwrap();
    // 0.5 → 1, 1.5 → 2, −1.5 → −1.
    assert_eq!(out, [1, 2, -1]);
    // Negative and duplicated axes resolve to the same reduction.
    let q2 = MeanParams::for_axes(&[2, 3], &[-2, 0, 0], UNIT, UNIT).unwrap();
    assert_eq!(q2, p);
}

#[test]
fn mean_new_is_for_axes_1_2() {
    let nhwc = Nhwc {
        batches: 2,
        height: 3,
        width: 4,
        channels: 5,
    };
    let (qi, qo) = (q(0.024, -128), q(0.0147, -128));
    let p = MeanParams::new(nhwc, qi, qo).unwrap();
    assert_eq!(
        p,
        MeanParams::for_axes(&[2, 3, 4, 5], &[1, 2], qi, qo).unwrap()
    );
    assert_eq!(
        p,
        MeanParams::for_axes(&[2, 3, 4, 5], &[2, -3], qi, qo).unwrap()
    );
    assert_eq!(p.lens(), (120, 10));
    let input = Rng(7).i8s(120);
    let (mut a, mut b) = ([0; 10], [0; 10]);
    mean_hw(&p, &input, &mut a).unwrap();
    mean(&p, &input, &mut b).unwrap();
    assert_eq!(a, b);
}

#[test]
fn mean_errors_and_degenerate_shapes() {
    assert_eq!(
        MeanParams::for_axes(&[1; 7], &[0], UNIT, UNIT),
        Err(unsupported("rank above 6"))
    );
    for axis in [3, -4, i32::MIN, i32::MAX] {
        assert_eq!(
            MeanParams::for_axes(&[1, 16, 32], &[axis], UNIT, UNIT),
            Err(unsupported("axis out of range"))
        );
    }
    assert_eq!(
        MeanParams::for_axes(&[65_536, 65_536], &[0], UNIT, UNIT),
        Err(KernelError::ShapeOverflow)
    );
    // A scalar ignores its axes (TFLM resolves none): the mean of one value, requantized.
    let p = MeanParams::for_axes(&[], &[5], UNIT, q(0.5, 1)).unwrap();
    let mut out = [0];
    mean(&p, &[10], &mut out).unwrap();
    assert_eq!(out, [21]);
    // No axes: every element is its own mean.
    let p = MeanParams::for_axes(&[2, 2], &[], UNIT, UNIT).unwrap();
    let mut out = [0; 4];
    mean(&p, &[1, -2, 3, -128], &mut out).unwrap();
    assert_eq!(out, [1, -2, 3, -128]);
    // An empty reduction writes zeros; an empty output writes nothing.
    let p = MeanParams::for_axes(&[2, 0, 3], &[1], UNIT, q(1.0, 5)).unwrap();
    let mut out = [9; 6];
    mean(&p, &[], &mut out).unwrap();
    assert_eq!(out, [0; 6]);
    let p = MeanParams::for_axes(&[0, 4], &[1], UNIT, UNIT).unwrap();
    mean(&p, &[], &mut []).unwrap();
    assert_eq!(mean(&p, &[], &mut out[..1]), Err(mismatch("output", 0, 1)));
    // Saturation: the mean of 127s at a quarter of the scale is 508 → 127.
    let p = MeanParams::for_axes(&[4, 4], &[0, 1], UNIT, q(0.25, 0)).unwrap();
    let mut out = [0];
    mean(&p, &[127; 16], &mut out).unwrap();
    assert_eq!(out, [127]);
}

/// The mean by brute-force index arithmetic, rescaled with the parameters' multiplier.
fn naive_mean(shape: &[u32], axes: &[usize], p: &MeanParams, zp: i32, input: &[i8]) -> Vec<i8> {
    let rank = shape.len();
    let kept: Vec<usize> = (0..rank).filter(|d| !axes.contains(d)).collect();
    let out_len: u32 = kept.iter().map(|&d| shape[d]).product();
    let n: i32 = axes.iter().map(|&d| shape[d] as i32).product();
    let mut sums = vec![0_i32; out_len as usize];
    for (flat, &x) in input.iter().enumerate() {
        let mut rem = flat as u32;
        let mut index = vec![0; rank];
        for d in (0..rank).rev() {
            index[d] = rem % shape[d];
            rem /= shape[d];
        }
        let o = kept.iter().fold(0, |acc, &d| acc * shape[d] + index[d]);
        sums[o as usize] += i32::from(x);
    }
    let (m, s) = p.multiplier();
    sums.iter()
        .map(|&sum| multiply_by_quantized_multiplier(sum - zp * n, m, s).clamp(-128, 127) as i8)
        .collect()
}

#[test]
fn mean_reduces_the_right_elements() {
    let mut rng = Rng(99);
    let zp = -7;
    for _ in 0..300 {
        let rank = 1 + rng.below(6) as usize;
        let shape: Vec<u32> = (0..rank).map(|_| 1 + rng.below(5)).collect();
        let mut axes: Vec<usize> = (0..rank).filter(|_| rng.below(2) == 1).collect();
        if axes.is_empty() {
            axes.push(rng.below(rank as u32) as usize);
        }
        let axes_i32: Vec<i32> = axes.iter().map(|&a| a as i32).collect();
        let p = MeanParams::for_axes(&shape, &axes_i32, q(0.02, zp), q(0.03, 0)).unwrap();
        let (n_in, n_out) = p.lens();
        let input = rng.i8s(n_in);
        let mut out = vec![0; n_out];
        mean(&p, &input, &mut out).unwrap();
        assert_eq!(
            out,
            naive_mean(&shape, &axes, &p, zp, &input),
            "{shape:?} {axes:?}"
        );
    }
    // Wide rows (more than one 32-lane block) and a kept axis between reduced ones.
    for (shape, axes) in [
        (&[3, 5, 70][..], &[1][..]),
        (&[2, 3, 4, 5, 6, 2][..], &[0, 2, 4][..]),
    ] {
        let axes_i32: Vec<i32> = axes.iter().map(|&a| a as i32).collect();
        let p = MeanParams::for_axes(shape, &axes_i32, q(0.02, zp), q(0.01, 0)).unwrap();
        let (n_in, n_out) = p.lens();
        let input = rng.i8s(n_in);
        let mut out = vec![0; n_out];
        mean(&p, &input, &mut out).unwrap();
        assert_eq!(out, naive_mean(shape, axes, &p, zp, &input), "{shape:?}");
    }
}
