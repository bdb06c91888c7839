"""Activations and elementwise unary operators."""
import tensorflow as tf
from make import Case, In

CASES = {
    "logistic_int8": Case(lambda x: tf.math.sigmoid(x * 4.0), [In((1, 4, 4, 8), lo=-1, hi=1)]),
}
