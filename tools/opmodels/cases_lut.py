"""LOGISTIC, TANH, int16 SOFTMAX, and QUANTIZE / DEQUANTIZE with int16 (see make.py)."""
import flatbuffers
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from make import Case, In


def lone_quantize(out_type=None, scale=None, zero_point=None):
    """An `edit` keeping only the model's QUANTIZE, as the whole model, its output retyped to
    `out_type` (a schema TensorType) with the given quantization if one is given.

    The converter makes QUANTIZE between int16 tensors, or from int16 to int8 and back, only
    between other operators (a requantization before a CONCATENATION) or not at all; the
    operator is the converter's, the cut and the retyping are ours."""
    def edit(model):
        m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
        sub = m.subgraphs[0]
        codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
        op = next(o for o in sub.operators
                  if codes[o.opcodeIndex] == schema.BuiltinOperator.QUANTIZE)
        keep = list(op.inputs) + list(op.outputs)
        remap = {old: new for new, old in enumerate(keep)}
        sub.tensors = [sub.tensors[i] for i in keep]
        op.inputs = [remap[i] for i in op.inputs]
        op.outputs = [remap[i] for i in op.outputs]
        sub.operators = [op]
        sub.inputs, sub.outputs = list(op.inputs), list(op.outputs)
        m.signatureDefs = []
        if out_type is not None:
            out = sub.tensors[op.outputs[0]]
            out.type = out_type
            out.quantization.scale = [scale]
            out.quantization.zeroPoint = [zero_point]
        b = flatbuffers.Builder(0)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    return edit


def softmax_beta(beta):
    """An `edit` setting the SOFTMAX's beta (the converter keeps a scaled input as a MUL)."""
    def edit(model):
        m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
        for op in m.subgraphs[0].operators:
            if isinstance(op.builtinOptions, schema.SoftmaxOptionsT):
                op.builtinOptions.beta = beta
        b = flatbuffers.Builder(0)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    return edit


def requantize_before_concat(x):
    """A LOGISTIC's output (scale 2^-15) joined with its input: the converter requantizes it."""
    return tf.concat([tf.math.sigmoid(x), x], -1)


INT8, INT16 = schema.TensorType.INT8, schema.TensorType.INT16

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
    # QUANTIZE between int16 scales, int16 to int8 and int8 to int16; f32 to int16 and
    # DEQUANTIZE int16 to f32 are the *_int16_float_io cases' edges.
    # int16 SOFTMAX (16x8): exp and 1/(1+x) tables. Rows of every rank; wide inputs whose
    # differences fall below the exp table's -10; a long row; beta from a scaled input.
    "softmax_int16": Case(tf.nn.softmax, [In((1, 10), lo=-4.0, hi=4.0)], quant="16x8"),
    "softmax_int16_rows": Case(tf.nn.softmax, [In((2, 3, 16), lo=-2.0, hi=3.0)],
                               quant="16x8"),
    "softmax_int16_wide": Case(tf.nn.softmax, [In((4, 24), lo=-30.0, hi=30.0)], quant="16x8"),
    "softmax_int16_long_row": Case(tf.nn.softmax, [In((1, 300), lo=-1.0, hi=1.0)],
                                   quant="16x8"),
    "softmax_int16_beta": Case(tf.nn.softmax, [In((3, 12), lo=-3.0, hi=3.0)], quant="16x8",
                               edit=softmax_beta(1.7)),
    "softmax_int16_float_io": Case(tf.nn.softmax, [In((2, 20), lo=-5.0, hi=5.0)],
                                   quant="16x8", float_io=True),
    # Inputs span the LOGISTIC output's range the QUANTIZE reads (scale 2^-15, or 1/256 with
    # zero point -128 in int8).
    "quantize_int16_to_int16": Case(requantize_before_concat, [In((4, 40))], quant="16x8",
                                    edit=lone_quantize(INT16, 1.0 / 12000, 0)),
    "quantize_int16_to_int16_saturate": Case(requantize_before_concat, [In((4, 40))],
                                             quant="16x8",
                                             edit=lone_quantize(INT16, 1.0 / 65536, 0)),
    "quantize_int16_to_int8": Case(requantize_before_concat, [In((4, 40))], quant="16x8",
                                   edit=lone_quantize(INT8, 1.0 / 200, -7)),
    "quantize_int8_to_int16": Case(requantize_before_concat, [In((4, 40), lo=0.0, hi=1.0)],
                                   edit=lone_quantize(INT16, 1.0 / 3000, 0)),
}
