//! Packed forms ([`crate::packed`]) of the elementwise, activation, quantization and reduction
//! parameters: each made by its constructor reads back as itself from its words, and a word
//! outside the range its constructor gives is refused.

use super::*;
use crate::packed::testing::{
    assert_round_trip, assert_round_trip_with, with_word, with_word_with,
};

const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

/// Quantizations of real layers and of edge cases: unequal and equal scales, zero points at
/// both ends of int8.
const QUANTS: [Quant; 4] = [q(0.05, -3), q(0.0039, -128), q(0.2, 127), q(1.0 / 256.0, 0)];

/// Whether word `at` of `v`'s words, replaced by each of `bad`, is refused.
fn refuses<T: crate::packed::Packed>(v: &T, at: usize, bad: &[i32]) -> bool {
    bad.iter().all(|&word| with_word(v, at, word).is_err())
}

#[test]
fn add_sub_and_mul_round_trip_and_refuse_out_of_range_words() {
    for (&a, &b) in QUANTS.iter().zip(QUANTS.iter().rev()) {
        for act in [Activation::None, Activation::Relu6] {
            let out = q(0.1, 5);
            let add = AddParams::new(a, b, out, act).unwrap();
            assert_eq!(assert_round_trip(&add), 11);
            // An offset beyond int8's, a rescaling that shifts left, an inverted range.
            assert!(refuses(&add, 0, &[129, -128]));
            assert!(refuses(&add, 4, &[1, -32]));
            assert!(refuses(&add, 3, &[5, -(1 << 30)]));
            assert!(refuses(&add, 10, &[-129, 128]));
            let sub = SubParams::new(a, b, out, act).unwrap();
            assert_eq!(assert_round_trip(&sub), 11);
            assert!(refuses(&sub, 2, &[128, -129]));
            assert!(refuses(&sub, 8, &[1]));
            let mul = MulParams::new(a, b, out, act).unwrap();
            assert_eq!(assert_round_trip(&mul), 7);
            assert!(refuses(&mul, 1, &[129]));
            assert!(refuses(&mul, 4, &[32, -32]));
            assert!(refuses(&mul, 5, &[-129]));
        }
    }
}

#[test]
fn broadcast_shapes_round_trip_through_their_constructor() {
    let shapes: [(&[u32], &[u32], &[u32]); 5] = [
        (&[1, 16, 32], &[1, 16, 1], &[1, 16, 32]),
        (
            &[2, 3, 4, 5, 6, 7],
            &[2, 1, 4, 1, 6, 1],
            &[2, 3, 4, 5, 6, 7],
        ),
        (&[1, 2, 16, 16], &[], &[1, 2, 16, 16]),
        (&[8], &[8], &[8]),
        (&[], &[], &[]),
    ];
    for (a, b, out) in shapes {
        let s = BroadcastShape::new(a, b, out).unwrap();
        assert_round_trip(&s);
    }
    let s = BroadcastShape::new(&[4, 1, 3], &[1, 5, 3], &[4, 5, 3]).unwrap();
    // Rank 7; an `a` extent that neither matches the output nor is 1.
    assert!(refuses(&s, 0, &[7, -1]));
    let rank = s.loops().len();
    assert!(refuses(&s, 1 + rank, &[2]));
}

#[test]
fn relu_family_round_trips_and_refuses_out_of_range_words() {
    for (&x, &y) in QUANTS.iter().zip(QUANTS.iter().rev()) {
        let relu = ReluParams::new(x, y).unwrap();
        assert_eq!(assert_round_trip(&relu), 4);
        assert!(refuses(&relu, 0, &[-128, 129]));
        assert!(refuses(&relu, 3, &[32, -32]));
        let relu6 = Relu6Params::new(x).unwrap();
        assert_eq!(assert_round_trip(&relu6), 2);
        assert!(refuses(&relu6, 1, &[128, -129]));
        for alpha in [0.2, -0.5, 0.0, 3.0] {
            let leaky = LeakyReluParams::new(x, y, alpha).unwrap();
            assert_eq!(assert_round_trip(&leaky), 7);
            assert!(refuses(&leaky, 6, &[2, -1]));
            assert!(refuses(&leaky, 4, &[i32::MIN, 7]));
        }
    }
}

#[test]
fn unary_activations_round_trip_and_refuse_out_of_range_words() {
    for (&x, &y) in QUANTS.iter().zip(QUANTS.iter().rev()) {
        let abs = AbsParams::new(x, y).unwrap();
        assert_eq!(assert_round_trip(&abs), 5);
        assert!(refuses(&abs, 2, &[2]));
        let swish = HardSwishParams::new(x, q(0.1, -10)).unwrap();
        assert_eq!(assert_round_trip(&swish), 6);
        assert!(refuses(&swish, 3, &[1]));
        assert!(refuses(&swish, 2, &[100, 1 << 15, -1]));
        assert!(refuses(&swish, 5, &[32, -32]));
        let rsqrt = RsqrtParams::new(x, y).unwrap();
        assert_eq!(assert_round_trip(&rsqrt), 4);
        assert!(refuses(&rsqrt, 1, &[128]));
    }
    // Equal scales: no rescaling, and no multiplier may be smuggled in.
    let abs = AbsParams::new(q(0.1, 3), q(0.1, -2)).unwrap();
    assert!(refuses(&abs, 3, &[1 << 30]));
}

#[test]
fn binary_elementwise_round_trip_and_refuse_out_of_range_words() {
    for (&a, &b) in QUANTS.iter().zip(QUANTS.iter().rev()) {
        let sq = SquaredDifferenceParams::new(a, b, q(0.3, 1)).unwrap();
        assert_eq!(assert_round_trip(&sq), 9);
        assert!(refuses(&sq, 0, &[-128]));
        assert!(refuses(&sq, 6, &[1]));
        let prelu = PreluParams::new(a, b, q(0.3, 1)).unwrap();
        assert_eq!(assert_round_trip(&prelu), 7);
        assert!(refuses(&prelu, 1, &[-128, 129]));
        assert!(refuses(&prelu, 6, &[32]));
    }
}

#[test]
fn quantization_round_trips_per_type_and_refuses_zero_points_outside_it() {
    use IntType::{I16, I32, I8};
    let pack = RequantizeParams::pack;
    for (i, o, iq, oq) in [
        (I8, I8, q(0.05, -3), q(0.1, 120)),
        (I16, I8, q(0.001, 0), q(0.05, -128)),
        (I8, I32, q(0.05, 7), q(0.01, 100_000)),
        (I32, I16, q(0.5, -70_000), q(0.2, 0)),
    ] {
        let p = RequantizeParams::with_ranges(iq, i, oq, o).unwrap();
        let unpack = |r: &mut WordReader<'_>| RequantizeParams::unpack(r, i, o);
        assert_eq!(assert_round_trip_with(&p, pack, unpack), 4);
        assert!(with_word_with(&p, 3, 32, pack, unpack).is_err());
    }
    let p = RequantizeParams::new(q(0.05, -3), q(0.1, 120)).unwrap();
    let i8s = |r: &mut WordReader<'_>| RequantizeParams::unpack(r, I8, I8);
    assert!(with_word_with(&p, 1, 128, pack, i8s).is_err());
    let i16s = |r: &mut WordReader<'_>| RequantizeParams::unpack(r, I8, I16);
    assert!(with_word_with(&p, 1, 128, pack, i16s).is_ok());

    for (t, quant) in [(I8, q(0.05, -128)), (I16, q(1.0 / 32768.0, 300))] {
        let unpack = |r: &mut WordReader<'_>| Quant::unpack(r, t);
        assert_eq!(assert_round_trip_with(&quant, Quant::pack, unpack), 2);
        for bad_scale in [f32::NAN, 0.0, -1.0, f32::INFINITY] {
            let bits = bad_scale.to_bits() as i32;
            assert!(with_word_with(&quant, 0, bits, Quant::pack, unpack).is_err());
        }
    }
    let i8q = |r: &mut WordReader<'_>| Quant::unpack(r, I8);
    assert!(with_word_with(&q(0.1, 0), 1, 300, Quant::pack, i8q).is_err());
}

#[test]
fn logistic_and_tanh_round_trip_and_refuse_out_of_range_words() {
    for &x in &QUANTS {
        let logistic = LogisticParams::new(x, q(1.0 / 256.0, -128)).unwrap();
        assert_eq!(assert_round_trip(&logistic), 3);
        assert!(refuses(&logistic, 1, &[0, 1 << 29]));
        assert!(refuses(&logistic, 2, &[-1, 156]));
        let tanh = TanhParams::new(x).unwrap();
        assert_eq!(assert_round_trip(&tanh), 3);
        assert!(refuses(&tanh, 0, &[128]));
    }
    let out16 = q(1.0 / 32768.0, 0);
    for scale in [1.0 / 4096.0, 1.0 / 2048.0, 0.001, 2.5] {
        let logistic = Logistic16Params::new(q(scale, 0), out16).unwrap();
        assert_eq!(assert_round_trip(&logistic), 2);
        assert!(refuses(&logistic, 0, &[32768, -1]));
        assert!(refuses(&logistic, 1, &[32, -1]));
        let tanh = Tanh16Params::new(q(scale, 0), out16).unwrap();
        assert_eq!(assert_round_trip(&tanh), 2);
    }
}

#[test]
fn softmaxes_round_trip_and_refuse_out_of_range_words() {
    for &x in &QUANTS {
        let log = LogSoftmaxParams::new(x, q(16.0 / 256.0, 127)).unwrap();
        assert_eq!(assert_round_trip(&log), 4);
        assert!(refuses(&log, 0, &[(1 << 30) - 1]));
        assert!(refuses(&log, 1, &[0, 32]));
        assert!(refuses(&log, 3, &[1]));
    }
    for beta in [1.0, 0.5, 3.0] {
        let p = Softmax16Params::new(q(0.01, 0), beta, q(1.0 / 32768.0, 0)).unwrap();
        assert_eq!(assert_round_trip(&p), 2);
        assert!(refuses(&p, 1, &[32]));
    }
}

#[test]
fn reductions_round_trip_through_their_constructors() {
    let cases: [(&[u32], &[i32]); 6] = [
        (&[1, 7, 7, 32], &[1, 2]),
        (&[1, 16, 32], &[-1]),
        (&[2, 3, 4, 5, 6], &[0, 2, 4]),
        (&[3, 1, 4], &[1]),
        (&[5], &[0]),
        (&[2, 0, 3], &[2]),
    ];
    for (dims, axes) in cases {
        let shape = ReduceShape::new(dims, axes).unwrap();
        assert_round_trip(&shape);
        for mean in [true, false] {
            let (iq, oq) = (q(0.05, -7), q(0.02, 3));
            let p = if mean {
                MeanParams::for_axes(dims, axes, iq, oq)
            } else {
                MeanParams::for_sum(dims, axes, iq, oq)
            }
            .unwrap();
            let unpack = |r: &mut WordReader<'_>| MeanParams::unpack(r, mean);
            assert_round_trip_with(&p, MeanParams::pack, unpack);
        }
    }
    let shape = ReduceShape::new(&[4, 3], &[1]).unwrap();
    // Rank 7; a reduced extent beyond the rank.
    assert!(refuses(&shape, 0, &[7]));
    assert!(refuses(&shape, 3, &[4]));
    let mean = MeanParams::for_axes(&[4, 3], &[1], q(0.05, 1), q(0.05, 1)).unwrap();
    let unpack = |r: &mut WordReader<'_>| MeanParams::unpack(r, true);
    // After the shape's four words: the zero points, the rescaling.
    assert!(with_word_with(&mean, 4, 128, MeanParams::pack, unpack).is_err());
    assert!(with_word_with(&mean, 7, 32, MeanParams::pack, unpack).is_err());
    assert!(with_word_with(&mean, 6, -1, MeanParams::pack, unpack).is_err());
}

#[test]
fn arg_min_max_round_trips_and_refuses_an_empty_axis_with_outputs() {
    for max in [true, false] {
        let p = ArgMinMaxParams::new(&[2, 3, 10], -1, max).unwrap();
        let unpack = |r: &mut WordReader<'_>| ArgMinMaxParams::unpack(r, max);
        assert_eq!(assert_round_trip_with(&p, ArgMinMaxParams::pack, unpack), 3);
        assert!(with_word_with(&p, 1, 0, ArgMinMaxParams::pack, unpack).is_err());
        assert!(with_word_with(&p, 0, -1, ArgMinMaxParams::pack, unpack).is_err());
    }
}

#[test]
fn sixteen_bit_add_and_mul_round_trip_with_int16_bounds() {
    use crate::int16::{AddParamsI16, MulParamsI16};
    let (a, b) = (q(0.001, 300), q(0.0005, -2000));
    for act in [Activation::None, Activation::Relu6] {
        let add = AddParamsI16::new(a, b, q(0.002, 1000), act).unwrap();
        assert_eq!(assert_round_trip(&add), 11);
        // Offsets of int16 zero points are fine, beyond them not; the range is int16's.
        assert!(with_word(&add, 0, 20_000).is_ok());
        assert!(refuses(&add, 0, &[32_769]));
        assert!(refuses(&add, 10, &[32_768]));
        let sym = |s| q(s, 0);
        let mul = MulParamsI16::new(sym(0.001), sym(0.002), sym(0.0001), act).unwrap();
        assert_eq!(assert_round_trip(&mul), 7);
        // 16x8 MUL takes zero points of 0 only.
        assert!(refuses(&mul, 0, &[1, -1]));
        assert!(refuses(&mul, 2, &[1]));
        assert!(refuses(&mul, 6, &[32_768]));
    }
    // int8's ADD keeps int8's bounds.
    let add = AddParams::new(QUANTS[0], QUANTS[1], q(0.1, 5), Activation::None).unwrap();
    assert!(refuses(&add, 0, &[20_000]));
}
