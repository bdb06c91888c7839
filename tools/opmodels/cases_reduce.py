"""Reductions: MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN, L2_NORMALIZATION, LOG_SOFTMAX, and
TRANSPOSE_CONV (int8)."""
import numpy as np
import tensorflow as tf

from make import Case, In


def reduce(op, axes, keepdims):
    return lambda x: op(x, axis=axes, keepdims=keepdims)


def transpose_conv(in_shape, out_hw, kernel, out_channels, strides, padding, bias=False,
                   relu=False):
    """conv2d_transpose with fixed-seed weights (per-channel scales differ: each output
    channel's weights are scaled apart); a bias and a ReLU the converter fuses."""
    rng = np.random.default_rng(sum(in_shape) * 31 + out_channels)
    w = rng.uniform(-1, 1, size=kernel + (out_channels, in_shape[3]))
    w *= np.linspace(0.2, 1.0, out_channels)[None, None, :, None]
    w = tf.constant(w.astype(np.float32))
    b = tf.constant(rng.uniform(-0.5, 0.5, size=out_channels).astype(np.float32))
    out_shape = (in_shape[0],) + out_hw + (out_channels,)

    def fn(x):
        y = tf.nn.conv2d_transpose(x, w, out_shape, strides, padding)
        if bias:
            y = tf.nn.bias_add(y, b)
        return tf.nn.relu(y) if relu else y
    return Case(fn, [In(in_shape)])


CASES = {
    # MEAN: global average pooling as converters emit it, and every other axis pattern.
    "mean_int8_hw_keepdims": Case(reduce(tf.reduce_mean, [1, 2], True), [In((1, 6, 6, 8))]),
    "mean_int8_hw": Case(reduce(tf.reduce_mean, [1, 2], False), [In((2, 5, 4, 3))]),
    "mean_int8_last_neg": Case(reduce(tf.reduce_mean, [-1], False), [In((2, 5, 12))]),
    "mean_int8_outer_inner": Case(reduce(tf.reduce_mean, [0, 2], True), [In((3, 4, 5))]),
    "mean_int8_all": Case(reduce(tf.reduce_mean, [0, 1], False), [In((4, 6), lo=-3, hi=1)]),
    "mean_int8_channels_4d": Case(reduce(tf.reduce_mean, [3], True), [In((1, 3, 4, 40))]),
    "mean_int8_rank5": Case(reduce(tf.reduce_mean, [1, -2], False), [In((2, 3, 2, 5, 4))]),

    # SUM: the same sums, rescaled without the division.
    "sum_int8_last": Case(reduce(tf.reduce_sum, [-1], False), [In((3, 4, 10))]),
    "sum_int8_hw_keepdims": Case(reduce(tf.reduce_sum, [1, 2], True), [In((1, 4, 5, 6))]),
    "sum_int8_outer": Case(reduce(tf.reduce_sum, [0], False), [In((7, 3, 4), lo=0, hi=2)]),
    "sum_int8_all": Case(reduce(tf.reduce_sum, [0, 1, 2], False), [In((2, 3, 4))]),
    # Runs fed larger values than the calibration saw: sums beyond the output range clip.
    "sum_int8_saturate": Case(reduce(tf.reduce_sum, [1], False),
                              [In((8, 10), run=(0.0, 0.2), lo=-0.2, hi=0.2)]),
    # REDUCE_MAX: equal quantization in and out.
    "reduce_max_int8_last": Case(reduce(tf.reduce_max, [-1], False), [In((3, 4, 10))]),
    "reduce_max_int8_hw_keepdims": Case(reduce(tf.reduce_max, [1, 2], True), [In((1, 4, 5, 40))]),
    "reduce_max_int8_mixed": Case(reduce(tf.reduce_max, [0, -2], False), [In((3, 4, 5, 2))]),

    "reduce_min_int8_inner": Case(reduce(tf.reduce_min, [-1], True), [In((2, 3, 12))]),
    "reduce_min_int8_outer": Case(reduce(tf.reduce_min, [0, 1], False), [In((4, 3, 5))]),
    # ARG_MAX / ARG_MIN: int32 indices (TFLM writes no other type).
    "arg_max_int8_last": Case(lambda x: tf.math.argmax(x, axis=-1, output_type=tf.int32),
                              [In((2, 10))]),
    "arg_max_int8_middle": Case(lambda x: tf.math.argmax(x, axis=1, output_type=tf.int32),
                                [In((2, 5, 3))]),
    # 300 values on 256 levels: equal maxima, of which the first index wins.
    "arg_max_int8_ties": Case(lambda x: tf.math.argmax(x, axis=-1, output_type=tf.int32),
                              [In((2, 300))]),
    "arg_min_int8_last": Case(lambda x: tf.math.argmin(x, axis=-1, output_type=tf.int32),
                              [In((3, 7))]),
    "arg_min_int8_outer": Case(lambda x: tf.math.argmin(x, axis=0, output_type=tf.int32),
                               [In((4, 3, 2))]),

    # TRANSPOSE_CONV: the converter's filter is OHWI with one scale per output channel.
    "transpose_conv_int8_same_s2_bias": transpose_conv((1, 4, 4, 3), (8, 8), (3, 3), 5, 2,
                                                       "SAME", bias=True),
    "transpose_conv_int8_valid_s2": transpose_conv((1, 3, 3, 2), (7, 7), (3, 3), 4, 2,
                                                   "VALID"),
    "transpose_conv_int8_same_s1_relu": transpose_conv((1, 5, 5, 4), (5, 5), (3, 3), 3, 1,
                                                       "SAME", bias=True, relu=True),
    "transpose_conv_int8_batch2_asym": transpose_conv((2, 3, 2, 2), (3, 5), (2, 3), 3, (1, 2),
                                                      "SAME", bias=True),
    "transpose_conv_int8_valid_k4_s2": transpose_conv((1, 2, 3, 3), (6, 8), (4, 4), 2, 2,
                                                      "VALID", bias=True),

    # L2_NORMALIZATION along the innermost axis; its output is fixed at scale 1/128.
    "l2_normalization_int8_rows": Case(lambda x: tf.math.l2_normalize(x, axis=-1),
                                       [In((3, 8))]),
    "l2_normalization_int8_4d": Case(lambda x: tf.math.l2_normalize(x, axis=-1),
                                     [In((1, 3, 4, 6), lo=-0.5, hi=2.0)]),

    # LOG_SOFTMAX: output fixed at scale 16/256, zero point 127; wide inputs reach -128.
    "log_softmax_int8_rows": Case(tf.nn.log_softmax, [In((3, 10), lo=-4, hi=4)]),
    "log_softmax_int8_wide": Case(tf.nn.log_softmax, [In((2, 4, 16), lo=-12, hi=12)]),
    "log_softmax_int8_narrow": Case(tf.nn.log_softmax, [In((1, 40), lo=-0.3, hi=0.3)]),
}
