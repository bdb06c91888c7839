"""Data movement: RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR, GATHER, SHAPE, EXPAND_DIMS,
SQUEEZE, DEPTH_TO_SPACE, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, CAST."""
import numpy as np
import tensorflow as tf

from make import Case, In


def nearest(size, align=False, half=False):
    return lambda x: tf.raw_ops.ResizeNearestNeighbor(
        images=x, size=size, align_corners=align, half_pixel_centers=half)


def bilinear(size, align=False, half=False):
    return lambda x: tf.raw_ops.ResizeBilinear(
        images=x, size=size, align_corners=align, half_pixel_centers=half)


def table(shape, seed=0):
    """A constant float tensor the converter quantizes (GATHER's embedding table)."""
    return tf.constant(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32))


def reshape_as_squeeze(dims):
    """The single RESHAPE the converter makes of a SQUEEZE, turned back into SQUEEZE with
    `dims` (its shape input dropped)."""
    import flatbuffers
    from tensorflow.lite.python import schema_py_generated as schema

    def edit(model):
        m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
        (op,) = m.subgraphs[0].operators
        code = m.operatorCodes[op.opcodeIndex]
        assert code.builtinCode == schema.BuiltinOperator.RESHAPE
        code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.SQUEEZE
        code.version = 1
        op.inputs = op.inputs[:1]
        op.builtinOptionsType = schema.BuiltinOptions.SqueezeOptions
        op.builtinOptions = schema.SqueezeOptionsT()
        op.builtinOptions.squeezeDims = list(dims)
        b = flatbuffers.Builder(1024)
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    return edit


CASES = {
    # RESIZE_NEAREST_NEIGHBOR: TFLM's float index arithmetic in every sampling mode.
    "resize_nearest_int8_2x": Case(nearest([8, 10]), [In((1, 4, 5, 3))]),
    "resize_nearest_int8_align_corners": Case(nearest([7, 9], align=True), [In((2, 4, 5, 3))]),
    "resize_nearest_int8_half_pixel": Case(nearest([7, 3], half=True), [In((1, 5, 4, 2))]),
    "resize_nearest_int8_down": Case(nearest([3, 2]), [In((1, 7, 5, 4))]),
    "resize_nearest_int8_align_half_odd": Case(nearest([11, 13], align=True), [In((1, 3, 4, 1))]),
    "resize_nearest_int8_align_to_one_row": Case(nearest([1, 6], align=True), [In((1, 4, 3, 2))]),
    # Sizes Vela runs on the NPU (the others above run on the CPU fallback).
    "resize_nearest_int8_align_corners_2x": Case(nearest([5, 7], align=True), [In((1, 3, 4, 2))]),
    "resize_nearest_int16_2x": Case(nearest([6, 8], half=True), [In((1, 3, 4, 5))], quant="16x8"),

    # RESIZE_BILINEAR (int8): TFLM's integer interpolation.
    "resize_bilinear_int8_2x": Case(bilinear([8, 10]), [In((1, 4, 5, 3))]),
    "resize_bilinear_int8_align_corners": Case(bilinear([7, 9], align=True), [In((2, 4, 5, 3))]),
    "resize_bilinear_int8_half_pixel": Case(bilinear([7, 3], half=True), [In((1, 5, 4, 2))]),
    "resize_bilinear_int8_down": Case(bilinear([3, 2]), [In((1, 7, 5, 4))]),
    "resize_bilinear_int8_half_pixel_2x": Case(bilinear([16, 16], half=True), [In((1, 8, 8, 4))]),
    "resize_bilinear_int8_half_pixel_9x": Case(bilinear([18, 9], half=True), [In((1, 2, 1, 3))]),
    "resize_bilinear_int8_align_to_one_row": Case(bilinear([1, 7], align=True),
                                                  [In((2, 3, 4, 1))]),

    # GATHER: a constant table by int32 indices given as a model input (embedding lookup),
    # indices constant, negative axis, batch_dims.
    "gather_int8_embedding": Case(lambda i: tf.gather(table((10, 6)), i),
                                  [In((2, 3), kind="int32", lo=0, hi=9)]),
    "gather_int8_const_indices": Case(lambda x: tf.gather(x, [3, 0, 0, 2], axis=1),
                                      [In((2, 4, 3))]),
    "gather_int8_neg_axis": Case(lambda x, i: tf.gather(x, i, axis=-1),
                                 [In((3, 2, 5)), In((4,), kind="int32", lo=0, hi=4)]),
    "gather_int8_batch_dims": Case(lambda x, i: tf.gather(x, i, axis=2, batch_dims=1),
                                   [In((2, 3, 5, 2)), In((2, 4), kind="int32", lo=0, hi=4)]),

    # SHAPE: an int32 model output (traced with an unknown batch so it is not folded).
    "shape_int8_rank3": Case(lambda x: tf.shape(x, out_type=tf.int32), [In((1, 4, 3))],
                             dynamic_batch=True),

    # EXPAND_DIMS and SQUEEZE: aliases of their input (with an unknown batch, so that the
    # converter does not turn them into RESHAPE).
    "expand_dims_int8_neg_axis": Case(lambda x: tf.expand_dims(x, -2), [In((1, 3, 4))],
                                      dynamic_batch=True),
    "expand_dims_int16_front": Case(lambda x: tf.expand_dims(x, 1), [In((1, 3, 4))],
                                    quant="16x8", dynamic_batch=True),
    # The converter always makes RESHAPE of SQUEEZE: the model is turned back into SQUEEZE.
    "squeeze_int8_axes": Case(lambda x: tf.squeeze(x, [2, -1]), [In((2, 3, 1, 1))],
                              edit=reshape_as_squeeze([2, -1])),
    "squeeze_int8_all": Case(lambda x: tf.squeeze(x), [In((1, 3, 1, 2))],
                             edit=reshape_as_squeeze([])),

    # DEPTH_TO_SPACE and SPACE_TO_DEPTH.
    "depth_to_space_int8_2": Case(lambda x: tf.nn.depth_to_space(x, 2), [In((2, 3, 2, 12))]),
    "space_to_depth_int8_3": Case(lambda x: tf.nn.space_to_depth(x, 3), [In((1, 6, 3, 2))]),

    # SPACE_TO_BATCH_ND without padding: TFLM pads with a value it never sets (whatever its
    # arena held), so padded positions cannot be compared; the kernel pads with the zero
    # point, as TensorFlow Lite does. BATCH_TO_SPACE_ND with crops. NHWC and NHC.
    "space_to_batch_nd_int8": Case(
        lambda x: tf.space_to_batch_nd(x, [2, 3], [[0, 0], [0, 0]]), [In((2, 4, 6, 2))]),
    "space_to_batch_nd_int8_nhc": Case(
        lambda x: tf.space_to_batch_nd(x, [2], [[0, 0]]), [In((1, 4, 3))]),
    "batch_to_space_nd_int8_crop": Case(
        lambda x: tf.batch_to_space(x, [2, 2], [[1, 0], [0, 1]]), [In((8, 2, 3, 2))]),
    "batch_to_space_nd_int8_nhc": Case(
        lambda x: tf.batch_to_space(x, [3], [[1, 1]]), [In((3, 4, 2))]),

    # CAST: int32 indices to narrower integers (wrapping) and to float.
    "cast_int32_to_int8_wrap": Case(lambda i: tf.cast(i, tf.int8),
                                    [In((2, 7), kind="int32", lo=-300, hi=300)]),
    "cast_int32_to_int16": Case(lambda i: tf.cast(i, tf.int16),
                                [In((9,), kind="int32", lo=-70000, hi=70000)]),
    "cast_int32_to_float32": Case(lambda i: tf.cast(i, tf.float32),
                                  [In((2, 5), kind="int32", lo=-20000000, hi=20000000)],
                                  float_io=True),
    # int32 to uint32 and back: the same bits (an alias).
    "cast_int32_to_uint32": Case(lambda i: tf.cast(i, tf.uint32),
                                 [In((6,), kind="int32", lo=-1000, hi=1000)]),
    # float32 to integers: truncation toward zero; beyond the range, saturation (undefined in
    # C++, what the reference TFLM build does).
    "cast_float32_to_int32": Case(lambda x: tf.cast(x, tf.int32),
                                  [In((3, 4), lo=-1000.0, hi=1000.0)], float_io=True),
    "cast_float32_to_int8_saturate": Case(lambda x: tf.cast(x, tf.int8),
                                          [In((3, 4), lo=-300.0, hi=300.0)], float_io=True),
    "cast_float32_to_int16_saturate": Case(lambda x: tf.cast(x, tf.int16),
                                           [In((10,), lo=-40000.0, hi=40000.0)], float_io=True),
}
