"""16x8 cases (int16 activations, int8 weights): FULLY_CONNECTED, CONV_2D and
DEPTHWISE_CONV_2D with the converter's int64 bias (and an int32 one where TFLM takes it), ADD
and MUL with and without broadcasting."""
import numpy as np
import tensorflow as tf

from make import Case, In

_rng = np.random.default_rng(1616)


def _w(*shape, scale=0.3):
    return (_rng.normal(size=shape) * scale).astype(np.float32)


FC_W = _w(24, 10)
FC_B = _w(10, scale=0.5)
FC_W_WIDE = _w(40, 6, scale=0.1)
CONV_F = _w(3, 3, 4, 6)
CONV_B = _w(6, scale=0.5)
CONV_F5 = _w(5, 5, 3, 4, scale=0.2)
DW_F = _w(3, 3, 4, 1)
DW_F2 = _w(3, 3, 3, 2)
DW_B = _w(6, scale=0.5)
MUL_C = _w(1, 1, 5, scale=1.0)
NET_F = _w(3, 3, 2, 4)
NET_DW = _w(3, 3, 4, 1)
NET_W = _w(4 * 4 * 4, 5, scale=0.2)
NET_B = _w(5, scale=0.5)


def _network(x):
    """CONV_2D, DEPTHWISE_CONV_2D, a residual ADD, a RESHAPE and FULLY_CONNECTED, all 16x8."""
    y = tf.nn.relu(tf.nn.conv2d(x, NET_F, 2, "SAME"))
    z = tf.nn.depthwise_conv2d(y, NET_DW, [1, 1, 1, 1], "SAME")
    return tf.matmul(tf.reshape(y + z, (1, -1)), NET_W) + NET_B

BIAS32 = {"_experimental_full_integer_quantization_bias_type": tf.int32}
PER_TENSOR = {"_experimental_disable_per_channel_quantization_for_dense_layers": True}

CASES = {
    # FULLY_CONNECTED: per-channel weights (the converter's default here), int64 bias.
    "fully_connected_int16_per_channel": Case(
        lambda x: tf.matmul(x, FC_W) + FC_B, [In((3, 24))], quant="16x8"),
    "fully_connected_int16_relu": Case(
        lambda x: tf.nn.relu(tf.matmul(x, FC_W) + FC_B), [In((2, 24))], quant="16x8"),
    # Per-tensor weights: TFLM's per-tensor multiplier (float product of the scales).
    "fully_connected_int16_per_tensor": Case(
        lambda x: tf.matmul(x, FC_W) + FC_B, [In((2, 24))], quant="16x8", extra=PER_TENSOR),
    # An int32 bias: TFLM's 32-bit accumulator and double-rounding multiply.
    "fully_connected_int16_bias_int32": Case(
        lambda x: tf.matmul(x, FC_W) + FC_B, [In((2, 24))], quant="16x8", extra=BIAS32),
    # No bias, a rank-3 input (rows are every outer dimension), long dot products.
    "fully_connected_int16_no_bias": Case(
        lambda x: tf.matmul(x, FC_W_WIDE), [In((2, 3, 40), lo=-4, hi=4)], quant="16x8"),
    # CONV_2D.
    "conv_2d_int16_same": Case(
        lambda x: tf.nn.conv2d(x, CONV_F, 1, "SAME") + CONV_B, [In((1, 7, 6, 4))],
        quant="16x8"),
    "conv_2d_int16_valid_stride2_relu6": Case(
        lambda x: tf.nn.relu6(tf.nn.conv2d(x, CONV_F5, 2, "VALID") * 4.0),
        [In((2, 11, 9, 3), lo=-2, hi=2)], quant="16x8"),
    "conv_2d_int16_dilated": Case(
        lambda x: tf.nn.conv2d(x, CONV_F, 1, "SAME", dilations=2) + CONV_B,
        [In((1, 8, 8, 4))], quant="16x8"),
    "conv_2d_int16_bias_int32": Case(
        lambda x: tf.nn.conv2d(x, CONV_F, 1, "SAME") + CONV_B, [In((1, 5, 5, 4))],
        quant="16x8", extra=BIAS32),
    # DEPTHWISE_CONV_2D (always an int64 bias in TFLM).
    "depthwise_conv_2d_int16_same": Case(
        lambda x: tf.nn.depthwise_conv2d(x, DW_F, [1, 1, 1, 1], "SAME") + DW_B[:4],
        [In((1, 6, 7, 4))], quant="16x8"),
    "depthwise_conv_2d_int16_multiplier2_stride2": Case(
        lambda x: tf.nn.relu(tf.nn.depthwise_conv2d(x, DW_F2, [1, 2, 2, 1], "VALID") + DW_B),
        [In((1, 9, 8, 3))], quant="16x8"),
    # ADD: general rescaling (left shift 15), different input scales, broadcasting.
    "add_int16_same_shape": Case(
        lambda a, b: a + b, [In((1, 5, 4, 3)), In((1, 5, 4, 3), lo=-3, hi=3)], quant="16x8"),
    "add_int16_broadcast": Case(
        lambda a, b: tf.nn.relu(a + b), [In((2, 3, 4, 5)), In((3, 1, 5), lo=-2, hi=2)],
        quant="16x8"),
    "add_int16_broadcast_scalar": Case(
        lambda a, b: a + b, [In((4, 6), lo=-5, hi=5), In((1,), lo=-1, hi=1)], quant="16x8"),
    # Fused activations clamp within int16.
    "add_int16_relu6": Case(
        lambda a, b: tf.nn.relu6(a + b), [In((2, 8, 5), lo=-6, hi=6), In((2, 8, 5), lo=-4, hi=4)],
        quant="16x8"),
    # MUL: zero points 0, broadcasting, a constant operand.
    "mul_int16_same_shape": Case(
        lambda a, b: a * b, [In((2, 4, 4, 3)), In((2, 4, 4, 3), lo=-3, hi=3)], quant="16x8"),
    "mul_int16_broadcast": Case(
        lambda a, b: a * b, [In((2, 3, 4, 5), lo=-2, hi=2), In((4, 1))], quant="16x8"),
    "mul_int16_const": Case(
        lambda a: a * MUL_C, [In((1, 3, 4, 5), lo=-4, hi=4)], quant="16x8"),
    "mul_int16_relu_n1_to_1": Case(
        lambda a, b: tf.clip_by_value(a * b, -1.0, 1.0), [In((3, 7), lo=-2, hi=2), In((3, 7))],
        quant="16x8"),
    # A small network: the 16x8 operators feeding each other through the arena.
    "conv_2d_int16_network": Case(_network, [In((1, 8, 8, 2))], quant="16x8"),
}
