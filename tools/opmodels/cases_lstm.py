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


def as_16x8(name, case):
    """The int8 model of `case`, turned into a 16x8 one: TensorFlow's converter does not
    quantize UNIDIRECTIONAL_SEQUENCE_LSTM to 16x8, so the input, hidden state and output become
    int16 (symmetric, the int8 range's scale over 256), and the biases int64 at the new input
    scale; the int8 weights and the int16 cell state stay as the converter made them."""
    import flatbuffers
    import numpy as np
    from tensorflow.lite.python import schema_py_generated as schema
    from make import convert

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(convert(name, case), 0))
    sub = m.subgraphs[0]
    op = sub.operators[0]
    T = schema.TensorType
    ins = [int(i) for i in op.inputs]
    rescaled = {}
    for k in (0, 18):
        t = sub.tensors[ins[k]]
        q = t.quantization
        lo = (-128 - int(q.zeroPoint[0])) * float(q.scale[0])
        hi = (127 - int(q.zeroPoint[0])) * float(q.scale[0])
        scale = max(abs(lo), abs(hi)) / 32767
        rescaled[k] = (float(q.scale[0]), scale)
        q.scale, q.zeroPoint = [scale], [0]
        t.type = T.INT16
    out = sub.tensors[int(op.outputs[0])]
    out.type = T.INT16
    out.quantization = sub.tensors[ins[18]].quantization
    # Each bias as int64 at input scale × weight scale; tensors may share a buffer, so each
    # gets a buffer of its own.
    for g in range(4):
        b = sub.tensors[ins[12 + g]]
        w = sub.tensors[ins[1 + g]]
        old = np.frombuffer(bytes(bytearray(m.buffers[b.buffer].data)), dtype=np.int32)
        old_scale = float(b.quantization.scale[0])
        new_scale = float(np.float32(rescaled[0][1]) * np.float32(w.quantization.scale[0]))
        new = np.round(old.astype(np.float64) * old_scale / new_scale).astype(np.int64)
        buf = schema.BufferT()
        buf.data = list(np.frombuffer(new.tobytes(), dtype=np.uint8))
        m.buffers.append(buf)
        b.buffer = len(m.buffers) - 1
        b.type = T.INT64
        b.quantization.scale = [new_scale]
    sub.inputs = [ins[0]]
    builder = flatbuffers.Builder(4096)
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def case_16x8(name, units, shape, **kw):
    base = Case(lstm(units), [In(shape)], keras=True, batch_size=shape[0])
    return Case(None, [In(shape)], quant="16x8", keras=True, runs=5,
                build=lambda: as_16x8(name, base), **kw)


CASES["lstm_int16_seq"] = case_16x8("lstm_int16_seq", 8, (1, 4, 3))
CASES["lstm_int16_batch2"] = case_16x8("lstm_int16_batch2", 6, (2, 5, 4))


def with_cell_clip(name, case, clip):
    """The int8 model of `case` with the options' cell clip set to `clip` (Keras' converter
    writes 10, which the int16 cell state's range never reaches)."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema
    from make import convert

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(convert(name, case), 0))
    m.subgraphs[0].operators[0].builtinOptions.cellClip = clip
    builder = flatbuffers.Builder(4096)
    builder.Finish(m.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def case_clip(name, units, shape, clip):
    base = Case(lstm(units), [In(shape, lo=-4.0, hi=4.0)], keras=True, batch_size=shape[0])
    return Case(None, [In(shape, lo=-4.0, hi=4.0)], keras=True, runs=5,
                build=lambda: with_cell_clip(name, base, clip))


# A cell clip well inside the cell state's range: the clamp to ±clip/scale runs.
CASES["lstm_int8_cell_clip"] = case_clip("lstm_int8_cell_clip", 6, (1, 6, 4), 0.3)
