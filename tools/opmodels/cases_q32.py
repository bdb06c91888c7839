"""QUANTIZE with int32 on one side (int8 / int16 to int32 and back), and SOFTMAX of int8 input
and int16 output (see make.py).

The converter makes none of these alone: the QUANTIZE is cut out of a converted model
(cases_lut's `lone_quantize`) and its tensors retyped; the SOFTMAX is an int8 one with its
output retyped to TFLM's int16 softmax output (zero point -32768, scale 1/65536)."""
import flatbuffers
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

from cases_lut import lone_quantize, requantize_before_concat, softmax_beta
from make import Case, In

INT8, INT16, INT32 = schema.TensorType.INT8, schema.TensorType.INT16, schema.TensorType.INT32


def retyped(which, tensor_type, scale, zero_point, then=None):
    """An `edit` retyping the model's lone operator's input (`which` "input") or output
    ("output") to `tensor_type` with the given quantization, after the edit `then`."""
    def edit(model):
        if then is not None:
            model = then(model)
        m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
        sub = m.subgraphs[0]
        op = sub.operators[-1] if which == "output" else sub.operators[0]
        t = sub.tensors[(op.outputs if which == "output" else op.inputs)[0]]
        t.type = tensor_type
        t.quantization.scale = [scale]
        t.quantization.zeroPoint = [zero_point]
        b = flatbuffers.Builder(0)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    return edit


def from_int32(scale, zero_point, out_type, out_scale, out_zero_point):
    """A lone QUANTIZE from int32 (`scale`, `zero_point`) to `out_type`."""
    return retyped("input", INT32, scale, zero_point,
                   then=lone_quantize(out_type, out_scale, out_zero_point))


def softmax_to_int16(then=None):
    """The int8 SOFTMAX's output retyped to TFLM's int16 softmax output."""
    return retyped("output", INT16, 1.0 / 65536, -32768, then=then)


CASES = {
    # int16 (the LOGISTIC output's range, scale 2^-15) and int8 to int32: a finer scale and a
    # zero point of int32's range.
    "quantize_int16_to_int32": Case(requantize_before_concat, [In((4, 40))], quant="16x8",
                                    edit=lone_quantize(INT32, 1.0 / 1048576, 123456)),
    "quantize_int16_to_int32_coarser": Case(requantize_before_concat, [In((4, 40))],
                                            quant="16x8",
                                            edit=lone_quantize(INT32, 1.0 / 1000, -5)),
    "quantize_int8_to_int32": Case(requantize_before_concat, [In((4, 40), lo=0.0, hi=1.0)],
                                   edit=lone_quantize(INT32, 1.0 / 100000, -70000)),
    # int32 to int16 and int8: inputs (scale 1e-5, so up to 10^5 in magnitude) that clip.
    "quantize_int32_to_int16": Case(requantize_before_concat, [In((4, 40))], quant="16x8",
                                    edit=from_int32(1e-5, 0, INT16, 1.0 / 30000, 0)),
    "quantize_int32_to_int16_saturate": Case(requantize_before_concat, [In((4, 40))],
                                             quant="16x8",
                                             edit=from_int32(1e-5, 2000, INT16, 1e-5, 7)),
    "quantize_int32_to_int16_same_scale": Case(requantize_before_concat, [In((4, 40))],
                                               quant="16x8",
                                               edit=from_int32(1e-5, -3, INT16, 1e-5, -3)),
    "quantize_int32_to_int8": Case(requantize_before_concat, [In((4, 40), lo=0.0, hi=1.0)],
                                   edit=from_int32(1e-4, 100, INT8, 1.0 / 200, -9)),
    # int8 SOFTMAX to int16: rows of every rank, inputs far apart (below diff_min), a row
    # long enough that its sum of exponentials passes 512 (where the int8 output aborts), and
    # beta.
    "softmax_int8_to_int16": Case(tf.nn.softmax, [In((1, 10), lo=-4.0, hi=4.0)],
                                  edit=softmax_to_int16()),
    "softmax_int8_to_int16_rows": Case(tf.nn.softmax, [In((2, 3, 16), lo=-2.0, hi=3.0)],
                                       edit=softmax_to_int16()),
    "softmax_int8_to_int16_wide": Case(tf.nn.softmax, [In((4, 24), lo=-60.0, hi=60.0)],
                                       edit=softmax_to_int16()),
    "softmax_int8_to_int16_long_row": Case(tf.nn.softmax, [In((1, 700), lo=-0.1, hi=0.1)],
                                           edit=softmax_to_int16()),
    "softmax_int8_to_int16_beta": Case(tf.nn.softmax, [In((3, 12), lo=-3.0, hi=3.0)],
                                       edit=softmax_to_int16(softmax_beta(1.7))),
}
