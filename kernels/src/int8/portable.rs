//! The portable kernels, whatever the target: the reference that the SIMD paths are tested
//! against.
//!
//! [`conv2d`](super::conv2d), [`depthwise_conv2d`](super::depthwise_conv2d),
//! [`average_pool2d`](super::average_pool2d), [`max_pool2d`](super::max_pool2d),
//! [`fully_connected`](super::fully_connected),
//! [`fully_connected_per_channel`](super::fully_connected_per_channel), [`add`](super::add)
//! and [`mul`](super::mul) run their inner loops on the target's SIMD instructions where the
//! build has them (the Arm DSP extension: `SXTB16`, `SMLAD` and friends; Helium: `VMLADAVA`,
//! `VQRDMULH` and friends); these functions run the same kernels on the plain-Rust operations
//! on every target, so that a firmware can compare the two byte for byte on its own core.
//! Elsewhere the two are the same code.

use super::conv::{conv2d_with, depthwise_conv2d_with};
use super::fc_per_channel::fully_connected_per_channel_with;
use super::fully_connected_with;
use super::mac::Portable;
use super::pool::{average_pool2d_with, max_pool2d_with};
use super::{
    broadcast, AddParams, ChannelMultiplier, Conv2dParams, DepthwiseParams, FcParams,
    FcPerChannelParams, FcShape, MulParams, PoolParams,
};
use crate::{check_len, KernelError};

/// [`conv2d`](super::conv2d) on the portable path: same operands, errors and bytes.
pub fn conv2d(
    p: &Conv2dParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    conv2d_with::<Portable>(p, multipliers, input, filter, bias, output)
}

/// [`depthwise_conv2d`](super::depthwise_conv2d) on the portable path: same operands, errors
/// and bytes.
pub fn depthwise_conv2d(
    p: &DepthwiseParams,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    filter: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    depthwise_conv2d_with::<Portable>(p, multipliers, input, filter, bias, output)
}

/// [`average_pool2d`](super::average_pool2d) on the portable path: same operands, errors and
/// bytes.
pub fn average_pool2d(p: &PoolParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    average_pool2d_with::<Portable>(p, input, output)
}

/// [`max_pool2d`](super::max_pool2d) on the portable path: same operands, errors and bytes.
pub fn max_pool2d(p: &PoolParams, input: &[i8], output: &mut [i8]) -> Result<(), KernelError> {
    max_pool2d_with::<Portable>(p, input, output)
}

/// [`fully_connected`](super::fully_connected) on the portable path: same operands, errors and
/// bytes.
pub fn fully_connected(
    p: &FcParams,
    shape: FcShape,
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    fully_connected_with::<Portable>(p, shape, input, weights, bias, output)
}

/// [`fully_connected_per_channel`](super::fully_connected_per_channel) on the portable path:
/// same operands, errors and bytes.
pub fn fully_connected_per_channel(
    p: &FcPerChannelParams,
    shape: FcShape,
    multipliers: &[ChannelMultiplier],
    input: &[i8],
    weights: &[i8],
    bias: Option<&[i32]>,
    output: &mut [i8],
) -> Result<(), KernelError> {
    fully_connected_per_channel_with::<Portable>(
        p,
        shape,
        multipliers,
        input,
        weights,
        bias,
        output,
    )
}

/// [`add`](super::add) on the portable path: same operands, errors and bytes.
pub fn add(p: &AddParams, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    broadcast::elementwise(p, a, b, out);
    Ok(())
}

/// [`mul`](super::mul) on the portable path: same operands, errors and bytes.
pub fn mul(p: &MulParams, a: &[i8], b: &[i8], out: &mut [i8]) -> Result<(), KernelError> {
    check_len("b", a.len(), b.len())?;
    check_len("output", a.len(), out.len())?;
    broadcast::elementwise(p, a, b, out);
    Ok(())
}
