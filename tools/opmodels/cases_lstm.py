"""UNIDIRECTIONAL_SEQUENCE_LSTM cases: Keras (tf-keras) LSTM layers, which TensorFlow's
converter fuses into one UNIDIRECTIONAL_SEQUENCE_LSTM whose hidden and cell states are
variable tensors. Each runs several inputs in sequence on one interpreter, so the outputs
follow the states TFLM carries from one invoke to the next."""
import tensorflow as tf

from make import Case, In


def lstm(units, **kw):
    return lambda x: tf.keras.layers.LSTM(units, return_sequences=True, **kw)(x)


CASES = {
    # One sequence of 4 steps, 3 features, 8 units.
    "lstm_int8_seq": Case(lstm(8), [In((1, 4, 3))], keras=True, batch_size=1, runs=5),
    # Two sequences at once, inputs that reach the quantization's ends.
    "lstm_int8_batch2": Case(lstm(6), [In((2, 5, 4), lo=-3.0, hi=3.0)], keras=True,
                             batch_size=2, runs=5),
    # Time-major input and output ([time][batch][features]).
    "lstm_int8_time_major": Case(lstm(5, time_major=True), [In((3, 2, 4))], keras=True,
                                 batch_size=3, runs=4),
}
