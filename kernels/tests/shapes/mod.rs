//! Builders of the spatial kernels' parameters, shared by the `spatial` and `im2col` tests.

use npu_kernels::int8::{channel_multipliers, ChannelMultiplier, Nhwc, Padding, Quant, Window2d};

pub const fn q(scale: f32, zero_point: i32) -> Quant {
    Quant { scale, zero_point }
}

pub const fn nhwc(batches: u32, height: u32, width: u32, channels: u32) -> Nhwc {
    Nhwc {
        batches,
        height,
        width,
        channels,
    }
}

pub fn window(k: (u32, u32), s: (u32, u32), d: (u32, u32), padding: Padding) -> Window2d {
    Window2d {
        filter_height: k.0,
        filter_width: k.1,
        stride_height: s.0,
        stride_width: s.1,
        dilation_height: d.0,
        dilation_width: d.1,
        padding,
    }
}

/// `n` multipliers of 1: each output is its accumulator (plus offsets, clamped).
pub fn unit_mults(n: usize) -> Vec<ChannelMultiplier> {
    let mut m = vec![ChannelMultiplier::default(); n];
    channel_multipliers(1.0, &[1.0], 1.0, &mut m).unwrap();
    m
}
