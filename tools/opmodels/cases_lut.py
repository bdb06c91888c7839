"""LOGISTIC, TANH, int16 SOFTMAX, and QUANTIZE / DEQUANTIZE with int16 (see make.py)."""
import tensorflow as tf

from make import Case, In

CASES = {
    # int8: TFLM's gemmlowp fixed point. Inputs within and far beyond the range the
    # rescaling saturates at (|x| > 15 in real units).
    "logistic_int8": Case(tf.math.sigmoid, [In((1, 6, 6, 8), lo=-8.0, hi=8.0)]),
    "logistic_int8_saturate": Case(tf.math.sigmoid, [In((3, 50), lo=-40.0, hi=25.0)]),
    "logistic_int8_rank1": Case(tf.math.sigmoid, [In((37,), lo=-3.0, hi=5.0)]),
    "tanh_int8": Case(tf.math.tanh, [In((1, 6, 6, 8), lo=-4.0, hi=4.0)]),
    "tanh_int8_saturate": Case(tf.math.tanh, [In((2, 3, 40), lo=-30.0, hi=30.0)]),
    # int16 (16x8): the interpolated sigmoid table.
    "logistic_int16": Case(tf.math.sigmoid, [In((1, 6, 6, 8), lo=-8.0, hi=8.0)], quant="16x8"),
    "logistic_int16_saturate": Case(tf.math.sigmoid, [In((3, 50), lo=-40.0, hi=25.0)],
                                    quant="16x8"),
    "logistic_int16_float_io": Case(tf.math.sigmoid, [In((4, 33), lo=-6.0, hi=6.0)],
                                    quant="16x8", float_io=True),
    "tanh_int16": Case(tf.math.tanh, [In((1, 6, 6, 8), lo=-4.0, hi=4.0)], quant="16x8"),
    "tanh_int16_saturate": Case(tf.math.tanh, [In((2, 3, 40), lo=-30.0, hi=30.0)],
                                quant="16x8"),
    "tanh_int16_float_io": Case(tf.math.tanh, [In((4, 33), lo=-2.0, hi=2.0)],
                                quant="16x8", float_io=True),
}
