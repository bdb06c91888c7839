use super::*;
use crate::int8::{channel_multipliers, Nhwc, Padding, Window2d};

const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

fn shape(batches: u32, in_features: u32, out_features: u32) -> FcShape {
    FcShape {
        batches,
        in_features,
        out_features,
    }
}

#[test]
fn i64_multiplier_rounds_once() {
    // 2^30 with shift 0 is one half: the reduced multiplier is 2^14, the shift 15.
    let m = 1 << 30;
    assert_eq!(multiply_by_quantized_multiplier_i64(5, m, 0), 3); // 2.5 rounds up
    assert_eq!(multiply_by_quantized_multiplier_i64(-5, m, 0), -2); // −2.5 rounds up too
    assert_eq!(
        multiply_by_quantized_multiplier_i64(1 << 35, m, -4),
        1 << 30
    );
    // 2^35 has no low 32 bits set: TFLM's truncating cast gives 0.
    assert_eq!(multiply_by_quantized_multiplier_i64(1 << 40, m, -4), 0);
    // Beyond 32 bits the result is truncated as TFLM's cast does; shifts outside TFLM's
    // range give some value without panicking.
    let _ = multiply_by_quantized_multiplier_i64(i64::MAX, i32::MAX, 40);
    let _ = multiply_by_quantized_multiplier_i64(i64::MIN, i32::MIN, -100);
}

#[test]
fn fully_connected_hand_computed() {
    // Input scale 0.5, weights 0.25, output 1: multiplier 0.125.
    let p = FcParams::per_tensor(q(0.5, 0), 0.25, q(1.0, 0), Activation::None).unwrap();
    let input = [1000_i16, -2000, 30000, 4];
    let weights = [1_i8, 2, 0, 0, 0, 0, 1, 0];
    let bias = [4_i64, -4];
    let mut out = [0_i16; 2];
    fully_connected(
        &p,
        shape(1, 4, 2),
        &[],
        &input,
        &weights,
        Some(Bias::new(&bias)),
        &mut out,
    )
    .unwrap();
    // (1000 − 4000 + 4) · 0.125 = −374.5 → −374 (rounds half up); 30000 · 0.125 − 0.5 = 3749.5
    // → 3750.
    assert_eq!(out, [-374, 3750]);
    // With an int32 accumulator (and per-channel multipliers) TFLM rounds twice: −374.5 is
    // first −1498 exactly (the doubling high multiply by one half), then −1498 / 4 rounds away
    // from zero.
    let pc = FcParams::per_channel(q(0.5, 0), q(1.0, 0), Activation::None).unwrap();
    let mut m = [ChannelMultiplier::default(); 2];
    channel_multipliers(0.5, &[0.25], 1.0, &mut m).unwrap();
    let bias32 = [4_i32, -4];
    let mut out32 = [0_i16; 2];
    fully_connected(
        &pc,
        shape(1, 4, 2),
        &m,
        &input,
        &weights,
        Some(Bias::new(&bias32)),
        &mut out32,
    )
    .unwrap();
    assert_eq!(out32, [-375, 3750]);
}

#[test]
fn fully_connected_saturates_and_refuses_lengths() {
    let p = FcParams::per_tensor(q(1.0, 0), 1.0, q(1.0, 0), Activation::Relu).unwrap();
    assert_eq!(p.activation_range(), (0, i32::from(i16::MAX)));
    let mut out = [7_i16; 2];
    let input = [32767_i16, 32767];
    fully_connected::<i64>(
        &p,
        shape(1, 2, 2),
        &[],
        &input,
        &[127, 127, -128, -128],
        None,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [32767, 0]);
    let err = fully_connected::<i64>(&p, shape(1, 2, 2), &[], &input, &[0; 3], None, &mut out);
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "weights",
            ..
        })
    ));
    let pc = FcParams::per_channel(q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let err = fully_connected::<i32>(&pc, shape(1, 2, 2), &[], &input, &[0; 4], None, &mut out);
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "multipliers",
            ..
        })
    ));
    let err = fully_connected(
        &p,
        shape(1, 2, 2),
        &[],
        &input,
        &[0; 4],
        Some(Bias::new(&[0_i64])),
        &mut out,
    );
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "bias bytes",
            ..
        })
    ));
    // No input features: the requantized bias.
    fully_connected(
        &p,
        shape(1, 0, 2),
        &[],
        &[],
        &[],
        Some(Bias::new(&[5_i64, -5])),
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [5, 0]);
    assert_eq!(
        FcParams::per_channel(q(1.0, 40000), q(1.0, 0), Activation::None),
        Err(KernelError::InvalidQuantization {
            what: "input zero point"
        })
    );
}

fn window(k: u32, padding: Padding) -> Window2d {
    Window2d {
        filter_height: k,
        filter_width: k,
        stride_height: 1,
        stride_width: 1,
        dilation_height: 1,
        dilation_width: 1,
        padding,
    }
}

#[test]
fn conv_ignores_zero_points_and_clamps() {
    let s = Conv2dShape {
        input: Nhwc {
            batches: 1,
            height: 2,
            width: 2,
            channels: 1,
        },
        out_channels: 1,
        filter_depth: 1,
        window: window(2, Padding::Valid),
    };
    // Zero points are ignored by TFLM's 16x8 kernel.
    let p = Conv2dParams::new_int16(s, q(1.0, 100), q(1.0, 100), Activation::None).unwrap();
    let m = [ChannelMultiplier::new(1.0, 1.0, 1.0).unwrap()];
    let mut out = [0_i16];
    conv2d(
        &p,
        &m,
        &[1, 2, 3, 4],
        &[1, 1, 1, 1],
        Some(Bias::new(&[10_i64])),
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [20]);
    conv2d(&p, &m, &[30000; 4], &[127; 4], None::<Bias<i64>>, &mut out).unwrap();
    assert_eq!(out, [32767]);
    // The int32 accumulator wraps like TFLM's (the sum, then the rescaling's left shift by
    // one: 2^31 + 9 doubled is 18 modulo 2^32, times one half is 9).
    conv2d(
        &p,
        &m,
        &[1, 2, 3, 4],
        &[1, 1, 1, 1],
        Some(Bias::new(&[i32::MAX])),
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [9]);
    let err = conv2d(&p, &m, &[0; 3], &[0; 4], None::<Bias<i64>>, &mut out);
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "input",
            ..
        })
    ));
    let err = conv2d(&p, &[], &[0; 4], &[0; 4], None::<Bias<i64>>, &mut out);
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "multipliers",
            ..
        })
    ));
}

#[test]
fn depthwise_matches_a_direct_sum() {
    let s = DepthwiseShape {
        input: Nhwc {
            batches: 1,
            height: 3,
            width: 3,
            channels: 2,
        },
        depth_multiplier: 2,
        window: window(3, Padding::Same),
    };
    let p = DepthwiseParams::new_int16(s, q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let m = [ChannelMultiplier::new(1.0, 1.0, 1.0).unwrap(); 4];
    let input: [i16; 18] = core::array::from_fn(|i| i as i16 * 100 - 900);
    let filter: [i8; 36] = core::array::from_fn(|i| (i % 7) as i8 - 3);
    let bias = [1_i64, 2, 3, 4];
    let mut out = [0_i16; 36];
    depthwise_conv2d(&p, &m, &input, &filter, Some(Bias::new(&bias)), &mut out).unwrap();
    // Output pixel (1, 1) sees the whole image.
    for c in 0..4 {
        let mut acc = bias[c];
        for tap in 0..9 {
            acc += i64::from(filter[tap * 4 + c]) * i64::from(input[tap * 2 + c / 2]);
        }
        assert_eq!(i64::from(out[4 * 4 + c]), acc.clamp(-32768, 32767));
    }
    // The bias read from bytes at an odd address gives the same outputs.
    let mut bytes = [0_u8; 33];
    bytes[1..].copy_from_slice(bytemuck::cast_slice(&bias));
    let mut again = [0_i16; 36];
    let unaligned = Bias::<i64>::from_le_bytes(&bytes[1..]);
    depthwise_conv2d(&p, &m, &input, &filter, Some(unaligned), &mut again).unwrap();
    assert_eq!(again, out);
    let err = depthwise_conv2d(
        &p,
        &m,
        &input,
        &filter,
        Some(Bias::new(&bias[..3])),
        &mut out,
    );
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch {
            operand: "bias bytes",
            ..
        })
    ));
}

#[test]
fn add_and_mul_broadcast() {
    let p = AddParamsI16::new(q(1.0, 0), q(1.0, 0), q(1.0, 0), Activation::None).unwrap();
    let s = BroadcastShape::new(&[2, 2], &[2], &[2, 2]).unwrap();
    let mut out = [0_i16; 4];
    add(&p, &s, &[1, 2, 30000, -30000], &[10, 20000], &mut out).unwrap();
    assert_eq!(out, [11, 20002, 30010, -10000]);
    add(&p, &s, &[30000, 2, 3, 4], &[30000, -1], &mut out).unwrap();
    assert_eq!(out, [32767, 1, 30003, 3]);
    let p = MulParamsI16::new(q(0.5, 0), q(0.5, 0), q(0.25, 0), Activation::None).unwrap();
    mul(&p, &s, &[1, 2, 300, -300], &[10, 200], &mut out).unwrap();
    assert_eq!(out, [10, 400, 3000, -32768]);
    let err = mul(&p, &s, &[0; 3], &[0; 2], &mut out);
    assert!(matches!(
        err,
        Err(KernelError::LengthMismatch { operand: "a", .. })
    ));
    assert_eq!(
        MulParamsI16::new(q(1.0, 1), q(1.0, 0), q(1.0, 0), Activation::None),
        Err(KernelError::InvalidQuantization {
            what: "a zero point"
        })
    );
}
