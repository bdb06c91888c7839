"""Elementwise operators: NEG, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, RELU, RELU6, LEAKY_RELU,
PRELU, HARD_SWISH, ABS, and the broadcasting forms of ADD, SUB and MUL at ranks 1 to 6."""
import numpy as np
import tensorflow as tf

from make import Case, In

R = np.random.default_rng(17)


def const(shape, lo=-1.0, hi=1.0):
    return tf.constant(R.uniform(lo, hi, size=shape).astype(np.float32))


def prelu_layer(alpha_shape, shared_axes=None):
    def fn(x):
        init = tf.keras.initializers.RandomUniform(-0.5, 0.8, seed=3)
        return tf.keras.layers.PReLU(alpha_initializer=init, shared_axes=shared_axes)(x)
    return fn


CASES = {
    # TFLM has NEG on float32 only; Keras' LayerNormalization has it between a DEQUANTIZE and
    # a QUANTIZE, which is what the converter makes of a lone tf.negative too.
    "neg_float32": Case(lambda x: tf.negative(x), [In((1, 8, 1))]),
    # Where models have NEG and SQUARED_DIFFERENCE: Keras' LayerNormalization, whole (MEAN,
    # DEQUANTIZE, NEG, QUANTIZE, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, MUL, ADD).
    "neg_float32_layer_norm": Case(
        lambda x: tf.keras.layers.LayerNormalization()(x), [In((1, 8, 16), lo=-2.0, hi=3.0)],
        keras=True),
    "squared_difference_int8": Case(
        lambda a, b: tf.math.squared_difference(a, b), [In((2, 5, 7)), In((2, 5, 7), lo=-2.0)]),
    "squared_difference_int8_broadcast": Case(
        lambda a, b: tf.math.squared_difference(a, b), [In((1, 8, 16)), In((1, 8, 1), lo=-0.3)]),
    "squared_difference_int8_broadcast_both": Case(
        lambda a, b: tf.math.squared_difference(a, b), [In((3, 1, 6)), In((1, 4, 1), hi=3.0)]),
    "maximum_int8": Case(lambda a, b: tf.maximum(a, b), [In((4, 9)), In((4, 9))]),
    "maximum_int8_broadcast": Case(lambda a, b: tf.maximum(a, b), [In((2, 3, 4, 5)), In((3, 1, 5))]),
    "maximum_int8_const": Case(lambda a: tf.maximum(a, const((1, 1, 6))), [In((1, 5, 6))]),
    "minimum_int8": Case(lambda a, b: tf.minimum(a, b), [In((30,)), In((30,))]),
    "minimum_int8_broadcast_rank5": Case(
        lambda a, b: tf.minimum(a, b), [In((2, 1, 3, 1, 4)), In((1, 2, 1, 5, 4))]),
    "minimum_int8_scalar": Case(lambda a: tf.minimum(a, 0.25), [In((3, 7))]),
    "relu_int8": Case(lambda x: tf.nn.relu(x), [In((1, 6, 6, 3), lo=-2.0, hi=1.0)]),
    "relu6_int8": Case(lambda x: tf.nn.relu6(x), [In((1, 5, 5, 4), lo=-4.0, hi=9.0)]),
    "relu6_int8_small_range": Case(lambda x: tf.nn.relu6(x), [In((64,), lo=-1.0, hi=2.0)]),
    "leaky_relu_int8": Case(lambda x: tf.nn.leaky_relu(x, alpha=0.2), [In((1, 7, 7, 3), lo=-3.0)]),
    "leaky_relu_int8_negative_alpha": Case(
        lambda x: tf.nn.leaky_relu(x, alpha=-0.4), [In((50,), lo=-2.0, hi=1.0)]),
    "leaky_relu_int8_alpha_above_one": Case(
        lambda x: tf.nn.leaky_relu(x, alpha=1.7), [In((2, 20), lo=-1.0, hi=2.0)]),
    "prelu_int8_channel_alpha": Case(
        prelu_layer(None, shared_axes=[1, 2]), [In((1, 6, 6, 5), lo=-2.0)], keras=True),
    "prelu_int8_full_alpha": Case(prelu_layer(None), [In((1, 4, 3, 2), lo=-2.0)], keras=True),
    "hard_swish_int8": Case(
        lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, [In((1, 8, 8, 4), lo=-5.0, hi=5.0)]),
    # Narrow, unit and wide input ranges: the relu-ish rescaling shifts right, not at all,
    # then left.
    "hard_swish_int8_narrow": Case(
        lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, [In((40,), lo=-0.1, hi=0.1)]),
    "hard_swish_int8_unit": Case(
        lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, [In((1, 3, 3, 3), lo=-1.0, hi=1.0)]),
    "hard_swish_int8_wide": Case(
        lambda x: x * tf.nn.relu6(x + 3.0) / 6.0, [In((2, 30), lo=-20.0, hi=20.0)]),
    "abs_int8": Case(lambda x: tf.abs(x), [In((3, 11), lo=-2.0, hi=1.0)]),
    # Broadcasting ADD, SUB and MUL at every rank TFLM's reference kernels take (up to 6).
    "add_int8_broadcast_rank1": Case(lambda a, b: a + b, [In((12,)), In((1,))]),
    "add_int8_broadcast_rank3": Case(lambda a, b: a + b, [In((4, 1, 6)), In((5, 1))]),
    "add_int8_broadcast_rank5": Case(lambda a, b: a + b, [In((2, 3, 1, 4, 5)), In((1, 3, 2, 1, 5))]),
    "add_int8_broadcast_rank6": Case(
        lambda a, b: a + b, [In((2, 1, 3, 2, 1, 4)), In((1, 2, 1, 2, 3, 1))]),
    "add_int8_relu6_broadcast_rank4": Case(
        lambda a, b: tf.nn.relu6(a + b), [In((1, 4, 4, 8), hi=5.0), In((1, 1, 1, 8), hi=3.0)]),
    "sub_int8_broadcast_rank2": Case(lambda a, b: a - b, [In((6, 1)), In((1, 7))]),
    "sub_int8_broadcast_rank5": Case(lambda a, b: a - b, [In((3, 1, 2, 4, 1)), In((2, 1, 4, 5))]),
    "sub_int8_broadcast_rank6": Case(
        lambda a, b: a - b, [In((1, 2, 2, 1, 3, 4)), In((2, 1, 2, 3, 1, 4))]),
    "mul_int8_broadcast_rank3": Case(lambda a, b: a * b, [In((3, 4, 5)), In((3, 1, 5))]),
    "mul_int8_broadcast_rank5": Case(lambda a, b: a * b, [In((2, 2, 3, 1, 4)), In((2, 1, 1, 3, 4))]),
    "mul_int8_broadcast_rank6": Case(
        lambda a, b: a * b, [In((2, 1, 2, 3, 1, 2)), In((1, 3, 2, 1, 4, 2))]),
}
