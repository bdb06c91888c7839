"""SVDF cases: TensorFlow's converter never emits SVDF (no TensorFlow op lowers to it), so
each model is written directly with the TFLite schema's object API: one SVDF operator with
seeded random int8 feature weights, int8 or int16 time weights, an int32 bias and a variable
activation state. Each runs several inputs in sequence on one interpreter, so the outputs
follow the state TFLM carries from one invoke to the next."""
import flatbuffers
import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from make import Case, In, seed

T = schema.TensorType


def tensor(shape, dtype, scale, zero_point, buffer=0, name="", variable=False):
    t = schema.TensorT()
    t.shape = list(shape)
    t.type = dtype
    t.buffer = buffer
    t.name = name
    t.isVariable = variable
    q = schema.QuantizationParametersT()
    q.scale = [float(scale)]
    q.zeroPoint = [int(zero_point)]
    t.quantization = q
    return t


def buffer(data=None):
    b = schema.BufferT()
    if data is not None:
        b.data = list(np.frombuffer(np.ascontiguousarray(data).tobytes(), dtype=np.uint8))
    return b


def svdf_model(name, batches, input_size, filters, rank, memory, state16=False,
               input_scale=1 / 128, input_zp=0, feature_scale=0.01, state_scale=None,
               state_zp=0, time_scale=0.01, output_scale=None, output_zp=0, between=False):
    """The `.tflite` bytes of one int8 SVDF operator (state and time weights int16 when
    `state16`); with `between`, an int8 QUANTIZE (a requantization) before it and one after,
    so that the arena has other activations to lay out around the state."""
    rng = np.random.default_rng(seed(name, "weights"))
    units = filters // rank
    if state_scale is None:
        # About the range of the feature dot products.
        real = input_size ** 0.5 * 127 * feature_scale * 0.6
        state_scale = real / (32767 if state16 else 127)
    if output_scale is None:
        output_scale = memory ** 0.5 * rank ** 0.5 * 0.4 * 127 * time_scale * state_scale * (
            32767 if state16 else 127) / 127
    sdt, snp = (T.INT16, np.int16) if state16 else (T.INT8, np.int8)
    feature = rng.integers(-127, 128, size=(filters, input_size)).astype(np.int8)
    lim = 127
    time = rng.integers(-lim, lim + 1, size=(filters, memory)).astype(snp)
    bias_scale = np.float32(state_scale) * np.float32(time_scale)
    bias = rng.integers(-2000, 2001, size=(units,)).astype(np.int32)
    buffers = [buffer(), buffer(feature), buffer(time), buffer(bias)]
    tensors = [
        tensor((batches, input_size), T.INT8, input_scale, input_zp, name="input"),
        tensor((filters, input_size), T.INT8, feature_scale, 0, 1, "weights_feature"),
        tensor((filters, memory), sdt, time_scale, 0, 2, "weights_time"),
        tensor((units,), T.INT32, bias_scale, 0, 3, "bias"),
        tensor((batches, filters * memory), sdt, state_scale, state_zp, name="state",
               variable=True),
        tensor((batches, units), T.INT8, output_scale, output_zp, name="output"),
    ]
    op = schema.OperatorT()
    op.opcodeIndex = 0
    op.inputs = [0, 1, 2, 3, 4]
    op.outputs = [5]
    ops = [op]
    model_in, model_out = 0, 5
    if between:
        # model input (6) -> QUANTIZE -> SVDF input (0); SVDF output (5) -> QUANTIZE -> 7.
        tensors.append(tensor((batches, input_size), T.INT8, input_scale * 1.5, 3, name="x"))
        tensors.append(tensor((batches, units), T.INT8, output_scale * 0.75, -4, name="y"))
        pre, post = schema.OperatorT(), schema.OperatorT()
        pre.opcodeIndex = post.opcodeIndex = 1
        pre.inputs, pre.outputs = [6], [0]
        post.inputs, post.outputs = [5], [7]
        ops = [pre, op, post]
        model_in, model_out = 6, 7
    op.builtinOptionsType = schema.BuiltinOptions.SVDFOptions
    opts = schema.SVDFOptionsT()
    opts.rank = rank
    op.builtinOptions = opts
    sub = schema.SubGraphT()
    sub.tensors = tensors
    sub.inputs = [model_in]
    sub.outputs = [model_out]
    sub.operators = ops
    sub.name = "main"
    code = schema.OperatorCodeT()
    code.builtinCode = schema.BuiltinOperator.SVDF
    code.deprecatedBuiltinCode = schema.BuiltinOperator.SVDF
    code.version = 1
    model = schema.ModelT()
    model.version = 3
    quantize = schema.OperatorCodeT()
    quantize.builtinCode = schema.BuiltinOperator.QUANTIZE
    quantize.deprecatedBuiltinCode = schema.BuiltinOperator.QUANTIZE
    quantize.version = 1
    model.operatorCodes = [code, quantize] if between else [code]
    model.subgraphs = [sub]
    model.buffers = buffers
    model.description = "svdf"
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def case(name, batches, input_size, runs=6, **kw):
    return Case(None, [In((batches, input_size))], runs=runs,
                build=lambda: svdf_model(name, batches, input_size, **kw))


CASES = {
    # Rank 1, one batch, int8 state.
    "svdf_int8_rank1": case("svdf_int8_rank1", 1, 8, filters=4, rank=1, memory=5),
    # Rank 2, two batches, a state zero point other than 0 and an input zero point.
    "svdf_int8_rank2": case("svdf_int8_rank2", 2, 6, filters=8, rank=2, memory=4,
                            state_zp=5, input_zp=-3, output_zp=7),
    # int16 state and time weights (TFLM's EvalInt16SvdfReference).
    "svdf_int8_state16": case("svdf_int8_state16", 1, 8, filters=6, rank=2, memory=6,
                              state16=True),
    # Between two requantizations: the state keeps its own block of the arena.
    "svdf_int8_between_ops": case("svdf_int8_between_ops", 1, 16, filters=8, rank=2,
                                  memory=8, between=True),
    # Feature and output scales small enough that the state and the output saturate.
    "svdf_int8_saturate": case("svdf_int8_saturate", 2, 5, filters=3, rank=1, memory=3,
                               state_scale=0.002, state_zp=-100, output_scale=0.001),
}
