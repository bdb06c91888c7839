//! Packed forms ([`crate::packed`]) of the shape, data-movement, 16x8 and stateful layers'
//! parameters: each made by its constructor reads back as itself from its words (through that
//! constructor again), and a word outside what a constructor makes is refused.

use crate::int16::FcParams as Fc16Params;
use crate::int8::{
    Activation, BatchMatmulParams, CellGate, ConcatParams, Conv2dParams, Conv2dShape,
    DepthwiseParams, DepthwiseShape, GatherParams, LstmParams, LstmQuant, LstmShape, Nhwc, Padding,
    Quant, ResizeBilinearParams, ResizeNearestParams, SpaceBatchParams, SvdfParams, SvdfShape,
    TransposeConvParams, TransposeParams, Window2d,
};
use crate::movement::{MirrorPadParams, PackParams, PadParams, SliceParams};
use crate::packed::testing::{
    assert_round_trip, assert_round_trip_with, with_word, with_word_with,
};
use crate::packed::Packed;

const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

const fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
    Nhwc {
        batches,
        height,
        width,
        channels,
    }
}

/// Whether word `at` of `v`'s words, replaced by each of `bad`, is refused.
fn refuses<T: Packed>(v: &T, at: usize, bad: &[i32]) -> bool {
    bad.iter().all(|&word| with_word(v, at, word).is_err())
}

#[test]
fn slices_round_trip_and_refuse_a_begin_outside_the_input() {
    let slices = [
        SliceParams::new(&[2, 3, 4], &[0, 1, 1], &[2, 2, 3], &[1, 1, 1]).unwrap(),
        SliceParams::new(&[5], &[4], &[3], &[-2]).unwrap(),
        SliceParams::new(&[1, 6, 1, 4], &[0, 1, 0, 3], &[1, 3, 1, 2], &[1, 2, 1, -1]).unwrap(),
        SliceParams::new(&[3, 2], &[0, 0], &[0, 2], &[1, 1]).unwrap(),
    ];
    for s in &slices {
        assert_round_trip(s);
    }
    // Words: [3, 2, 3, 4], begin [3, 0, 1, 1], counts [3, 2, 2, 3], strides [3, 1, 1, 1].
    let s = &slices[0];
    assert!(refuses(s, 6, &[2, 7]), "a begin past the input's extent");
    assert!(refuses(s, 15, &[0]), "a zero stride");
    assert!(refuses(s, 4, &[2, 7]), "a begin list of another rank");
    assert!(refuses(s, 0, &[7]), "a rank above 6");
}

#[test]
fn pack_pads_and_mirror_pads_round_trip_and_refuse_bad_words() {
    for p in [
        PackParams::new(&[2, 3], 1, 3).unwrap(),
        PackParams::new(&[2, 3, 4], 0, 2).unwrap(),
        PackParams::new(&[5], 1, 4).unwrap(),
    ] {
        assert_round_trip(&p);
        assert!(refuses(&p, 2, &[0]), "no inputs");
    }
    let pad = PadParams::new(&[1, 2, 3], &[0, 1, 2], &[1, 0, 1]).unwrap();
    assert_round_trip(&pad);
    assert_round_trip(&PadParams::new(&[4, 4], &[0, 0], &[0, 0]).unwrap());
    // Words: [3, 1, 2, 3], before [3, 0, 1, 2], after [3, 1, 0, 1].
    assert!(refuses(&pad, 9, &[-1]), "an output dimension beyond u32");
    assert!(refuses(&pad, 4, &[2]), "paddings of another rank");
    for reflect in [false, true] {
        let m = MirrorPadParams::new(&[3, 4], &[1, 2], &[2, 1], reflect).unwrap();
        assert_round_trip(&m);
        // Words: [2, 3, 4], before [2, 1, 2], after [2, 2, 1], reflect.
        assert!(refuses(&m, 4, &[4]), "a padding larger than the input");
        assert!(refuses(&m, 9, &[2]), "a mode other than 0 or 1");
    }
}

#[test]
fn concatenations_transposes_and_gathers_round_trip_through_their_constructors() {
    let c = ConcatParams::new(&[&[2, 3], &[2, 5], &[2, 1]], -1).unwrap();
    assert_round_trip(&c);
    assert_round_trip(&ConcatParams::new(&[&[1, 4, 4, 8], &[1, 4, 4, 8]], 3).unwrap());
    assert_round_trip(&ConcatParams::new(&[&[3, 2]], 0).unwrap());
    // Words: [2, 2, 9], axis, [3, 3, 5, 1].
    assert!(refuses(&c, 3, &[2, -1]), "an axis past the rank");
    assert!(refuses(&c, 4, &[0, 8]), "no inputs, or more than seven");
    for (shape, perm) in [
        (&[2, 3, 4][..], &[2, 0, 1][..]),
        (&[1, 4, 1, 8, 2, 2], &[0, 1, 3, 2, 4, 5]),
        (&[6], &[0]),
        (&[2, 0, 3], &[1, 2, 0]),
    ] {
        let t = TransposeParams::new(shape, perm).unwrap();
        assert_round_trip(&t);
    }
    let t = TransposeParams::new(&[2, 3, 4], &[2, 0, 1]).unwrap();
    // Words: [3, 2, 3, 4], perm [3, 2, 0, 1].
    assert!(refuses(&t, 7, &[0, 3, -1]), "a repeated or missing axis");
    for (input, indices, axis, batch_dims) in [
        (&[4, 5, 6][..], &[2, 3][..], 1, 0),
        (&[2, 5, 3], &[2, 4], 1, 1),
        (&[7, 2], &[3], -2, 0),
    ] {
        let g = GatherParams::new(input, indices, axis, batch_dims).unwrap();
        assert_round_trip(&g);
    }
    let g = GatherParams::new(&[4, 5, 6], &[2, 3], 1, 0).unwrap();
    assert!(
        refuses(&g, 4, &[-1]),
        "more index elements than any slice holds"
    );
}

#[test]
fn space_batch_moves_round_trip_in_their_direction() {
    let to = SpaceBatchParams::space_to_batch(nhwc(1, 4, 5, 2), [2, 2], [0, 0, 1, 0]).unwrap();
    let back = SpaceBatchParams::batch_to_space(nhwc(4, 2, 3, 1), [2, 2], [0, 1, 1, 0]).unwrap();
    let nhc = SpaceBatchParams::space_to_batch(nhwc(2, 5, 1, 3), [3, 1], [1, 0, 0, 0]).unwrap();
    for (p, to_batch) in [(to, true), (back, false), (nhc, true)] {
        let pack = |p: &SpaceBatchParams, w: &mut crate::packed::Words<'_>| p.pack(to_batch, w);
        let unpack = |r: &mut crate::packed::WordReader<'_>| SpaceBatchParams::unpack(to_batch, r);
        assert_round_trip_with(&p, pack, unpack);
        // Words: input [4], blocks [2], edges [4].
        for (at, word) in [(4, 0), (6, -1), (7, 7)] {
            assert!(
                with_word_with(&p, at, word, pack, unpack).is_err(),
                "word {at} as {word}"
            );
        }
    }
}

#[test]
fn resizes_round_trip_and_refuse_both_alignments() {
    for (align, half) in [(false, false), (true, false), (false, true)] {
        let n = ResizeNearestParams::new(nhwc(1, 3, 4, 2), 6, 8, align, half).unwrap();
        assert_round_trip(&n);
        let b = ResizeBilinearParams::new(nhwc(2, 3, 4, 1), 5, 7, align, half).unwrap();
        assert_round_trip(&b);
        // Words: input [4], height, width, align, half.
        assert!(refuses(&b, 7, &[2]), "a flag other than 0 or 1");
        assert!(
            refuses(&n, 1, &[0]),
            "an empty image resized to a non-empty one"
        );
    }
    let b = ResizeBilinearParams::new(nhwc(1, 3, 3, 1), 6, 6, false, true).unwrap();
    assert!(
        refuses(&b, 6, &[1]),
        "both align_corners and half_pixel_centers"
    );
}

fn window(filter: u32, stride: u32, dilation: u32, padding: Padding) -> Window2d {
    Window2d {
        filter_height: filter,
        filter_width: filter,
        stride_height: stride,
        stride_width: stride,
        dilation_height: dilation,
        dilation_width: dilation,
        padding,
    }
}

#[test]
fn sixteen_by_eight_convolutions_keep_their_range_inside_int16() {
    let (x, y) = (q(0.002, 0), q(0.004, 0));
    for act in [Activation::None, Activation::Relu6] {
        let shape = Conv2dShape {
            input: nhwc(1, 7, 7, 4),
            out_channels: 8,
            filter_depth: 4,
            window: window(3, 2, 1, Padding::Same),
        };
        let conv = Conv2dParams::new_int16(shape, x, y, act).unwrap();
        let unpack = |r: &mut crate::packed::WordReader<'_>| Conv2dParams::unpack_int16(shape, r);
        assert_eq!(
            assert_round_trip_with(&conv, Conv2dParams::pack_int16, unpack),
            2
        );
        let bad = |at, word| with_word_with(&conv, at, word, Conv2dParams::pack_int16, unpack);
        assert!(
            bad(0, -32769).is_err() && bad(1, 32768).is_err(),
            "outside int16"
        );
        if matches!(act, Activation::Relu6) {
            assert!(bad(0, 32767).is_err(), "a minimum above the maximum");
        }
        let shape = DepthwiseShape {
            input: nhwc(1, 6, 6, 3),
            depth_multiplier: 2,
            window: window(3, 1, 2, Padding::Valid),
        };
        let dw = DepthwiseParams::new_int16(shape, x, y, act).unwrap();
        let unpack =
            |r: &mut crate::packed::WordReader<'_>| DepthwiseParams::unpack_int16(shape, r);
        assert_round_trip_with(&dw, DepthwiseParams::pack_int16, unpack);
        let bad = with_word_with(&dw, 1, 40_000, DepthwiseParams::pack_int16, unpack);
        assert!(bad.is_err(), "a maximum outside int16");
    }
}

#[test]
fn sixteen_by_eight_fully_connected_round_trips_with_or_without_its_multiplier() {
    let (x, y) = (q(0.001, 0), q(0.003, 0));
    let per_tensor = Fc16Params::per_tensor(x, 0.02, y, Activation::Relu).unwrap();
    let per_channel = Fc16Params::per_channel(x, y, Activation::None).unwrap();
    for p in [per_tensor, per_channel] {
        let n = assert_round_trip_with(&p, Fc16Params::pack, Fc16Params::unpack);
        assert_eq!(n, if p.multiplier().is_some() { 7 } else { 5 });
        let bad = |at, word| with_word_with(&p, at, word, Fc16Params::pack, Fc16Params::unpack);
        assert!(bad(0, 32769).is_err(), "an input offset outside int16's");
        assert!(
            bad(1, -32769).is_err(),
            "an output zero point outside int16"
        );
        assert!(bad(4, 2).is_err(), "a flag other than 0 or 1");
    }
}

#[test]
fn batch_matmuls_and_transpose_convolutions_round_trip_and_refuse_bad_words() {
    let (l, r, o) = (q(0.05, -3), q(0.02, 0), q(0.1, 7));
    for (lhs, rhs, adj_x, adj_y) in [
        (&[2, 3, 4][..], &[4, 5][..], false, false),
        (&[1, 2, 4, 3], &[2, 1, 5, 4], true, true),
        (&[3, 4], &[2, 2, 1, 4, 6], false, false),
    ] {
        let p = BatchMatmulParams::new(lhs, rhs, adj_x, adj_y, l, r, o).unwrap();
        let n = assert_round_trip_with(&p, BatchMatmulParams::pack, BatchMatmulParams::unpack);
        let bad = |at, word| {
            with_word_with(
                &p,
                at,
                word,
                BatchMatmulParams::pack,
                BatchMatmulParams::unpack,
            )
        };
        // The last five words: offsets, then the rescaling.
        assert!(bad(n - 5, 129).is_err(), "an lhs offset outside int8's");
        assert!(
            bad(n - 3, 128).is_err(),
            "an output zero point outside int8"
        );
        assert!(
            bad(n - 2, 5).is_err(),
            "a multiplier QuantizeMultiplier never makes"
        );
        assert!(bad(n - 1, 32).is_err(), "a shift past 31");
        assert!(bad(0, 1).is_err(), "a rank below 2");
    }
    let t = TransposeConvParams::new(
        nhwc(2, 3, 3, 4),
        nhwc(2, 6, 6, 5),
        (3, 3),
        (2, 2),
        Padding::Same,
        q(0.1, 4),
        q(0.2, -8),
        Activation::Relu,
    )
    .unwrap();
    let (pack, unpack) = (TransposeConvParams::pack, TransposeConvParams::unpack);
    assert_round_trip_with(&t, pack, unpack);
    // Words: input [4], output [4], filter [2], stride [2], padding, offsets, range.
    for (at, word) in [(4, 1), (10, 0), (12, 2), (13, 129), (16, -128)] {
        assert!(
            with_word_with(&t, at, word, pack, unpack).is_err(),
            "word {at} as {word}"
        );
    }
}

#[test]
fn svdf_and_lstm_round_trip_for_each_state_type() {
    let shape = SvdfShape {
        batches: 2,
        input_size: 3,
        filters: 4,
        rank: 2,
        memory: 5,
    };
    let (x, y) = (q(0.05, 2), q(0.1, -4));
    let i8_state = SvdfParams::new::<i8>(shape, x, 0.01, q(0.02, 3), 0.03, y).unwrap();
    let i16_state = SvdfParams::new::<i16>(shape, x, 0.01, q(0.02, 300), 0.03, y).unwrap();
    let read8 = |r: &mut crate::packed::WordReader<'_>| SvdfParams::unpack::<i8>(r);
    let read16 = |r: &mut crate::packed::WordReader<'_>| SvdfParams::unpack::<i16>(r);
    assert_round_trip_with(&i8_state, SvdfParams::pack, read8);
    assert_round_trip_with(&i16_state, SvdfParams::pack, read16);
    // Words: shape [5], zero points [3], two rescalings.
    assert!(with_word_with(&i16_state, 6, 300, SvdfParams::pack, read8).is_err());
    assert!(
        with_word_with(&i8_state, 3, 3, SvdfParams::pack, read8).is_err(),
        "rank 3 of 4"
    );
    assert!(
        with_word_with(&i8_state, 4, 0, SvdfParams::pack, read8).is_err(),
        "no memory"
    );

    let shape = LstmShape {
        batches: 2,
        time_steps: 3,
        input_size: 4,
        units: 5,
        time_major: false,
    };
    let quant = |zero_point| LstmQuant {
        input: q(0.05, zero_point),
        input_weights: [0.01, 0.02, 0.03, 0.04],
        recurrent_weights: [0.04, 0.03, 0.02, 0.01],
        hidden: q(0.02, -zero_point),
        cell_scale: 1.0 / 2048.0,
    };
    type Read = fn(&mut crate::packed::WordReader<'_>) -> Result<LstmParams, crate::KernelError>;
    let (read8, read16): (Read, Read) = (LstmParams::unpack::<i8>, LstmParams::unpack::<i16>);
    for (clip, gate) in [(0.0, CellGate::Tanh), (3.0, CellGate::Sigmoid)] {
        let p8 = LstmParams::new::<i8>(shape, &quant(5), clip, gate).unwrap();
        let n = assert_round_trip_with(&p8, LstmParams::pack, read8);
        let p16 = LstmParams::new::<i16>(shape, &quant(0), clip, gate).unwrap();
        assert_round_trip_with(&p16, LstmParams::pack, read16);
        let bad = |p, at, word, read| with_word_with(p, at, word, LstmParams::pack, read).is_err();
        // Words: shape [5], zero points [2], 8 + 3 rescalings, clip [2], power, gate.
        assert!(bad(&p8, 5, 5, read16), "an int16 zero point other than 0");
        assert!(bad(&p16, 8, 8, read16), "an int16 gate shift of 8");
        assert!(bad(&p8, n - 3, -1, read8), "a negative clip");
        assert!(bad(&p8, n - 2, 200, read8), "a power of two no f32 has");
        assert!(bad(&p8, n - 1, 2, read8), "a gate other than 0 or 1");
    }
}
