"""Data movement: PAD, PADV2, MIRROR_PAD, SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, PACK, UNPACK."""
import tensorflow as tf

from make import Case, In

IMG = In((1, 6, 5, 4))
HW = [[0, 0], [1, 2], [2, 0], [0, 0]]


def pad(paddings, **kw):
    return lambda x: tf.pad(x, paddings, **kw)


CASES = {
    # PAD of height and width (the NPU's), and of other axes (the CPU's).
    "pad_int8_hw": Case(pad(HW), [IMG]),
    "pad_int8_channels_batch": Case(pad([[1, 0], [0, 0], [0, 1], [2, 3]]), [IMG]),
    "pad_int8_rank2": Case(pad([[1, 2], [0, 3]]), [In((3, 4))]),
    "pad_int8_rank5": Case(pad([[0, 0], [1, 0], [0, 1], [1, 1], [0, 2]]), [In((1, 2, 3, 2, 3))]),
    # Inputs all positive: the zero point is far from 0.
    "pad_int8_offset_zero_point": Case(pad(HW), [In((1, 6, 5, 4), lo=0.5, hi=3.0)]),
    "pad_int16_hw": Case(pad(HW), [IMG], quant="16x8"),
    "pad_int16_channels": Case(pad([[0, 0], [0, 0], [0, 0], [1, 2]]), [IMG], quant="16x8"),
    # PADV2: a pad value other than 0.
    "padv2_int8_value": Case(pad(HW, constant_values=0.5), [IMG]),
    # MIRROR_PAD, both modes, the largest paddings TensorFlow allows.
    "mirror_pad_int8_reflect": Case(pad([[0, 0], [2, 5], [4, 1], [0, 0]], mode="REFLECT"), [IMG]),
    "mirror_pad_int8_symmetric": Case(pad([[0, 0], [6, 1], [0, 5], [1, 0]], mode="SYMMETRIC"), [IMG]),
    "mirror_pad_int8_rank2": Case(pad([[1, 1], [2, 2]], mode="REFLECT"), [In((3, 4))]),
    # SLICE.
    "slice_int8_box": Case(lambda x: tf.slice(x, [0, 1, 2, 1], [1, 3, -1, 2]), [IMG]),
    "slice_int8_rank2": Case(lambda x: tf.slice(x, [2, 0], [3, -1]), [In((7, 9))]),
    "slice_int16_box": Case(lambda x: tf.slice(x, [0, 2, 0, 0], [-1, 4, 3, 3]), [IMG], quant="16x8"),
    # STRIDED_SLICE: masks, negative indices and strides, shrink.
    "strided_slice_int8_unit": Case(lambda x: x[:, 1:4, :, 1:], [IMG]),
    "strided_slice_int8_steps": Case(lambda x: x[:, 1::2, ::3, :], [IMG]),
    "strided_slice_int8_neg_stride": Case(lambda x: x[:, ::-1, -1:0:-2, :], [IMG]),
    "strided_slice_int8_neg_index": Case(lambda x: x[:, -4:-1, -3:, -2:], [IMG]),
    "strided_slice_int8_shrink": Case(lambda x: x[:, 2, 1:, ::2], [IMG]),
    "strided_slice_int8_shrink_last": Case(lambda x: x[:, :, -1, 3], [IMG]),
    "strided_slice_int8_clamped": Case(lambda x: x[:, -100:100, 2:100:2, :], [IMG]),
    "strided_slice_int16_neg_stride": Case(lambda x: x[:, 4:0:-1, ::2, ::-1], [IMG], quant="16x8"),
    "strided_slice_int16_unit": Case(lambda x: x[:, :, 1:3, :], [IMG], quant="16x8"),
    # SPLIT and SPLIT_V: several outputs.
    "split_int8_width": Case(lambda x: tuple(tf.split(x, 3, axis=2)), [In((1, 4, 6, 3))]),
    "split_int8_neg_axis": Case(lambda x: tuple(tf.split(x, 2, axis=-1)), [IMG]),
    "split_int16_rows": Case(lambda x: tuple(tf.split(x, 2, axis=1)), [IMG], quant="16x8"),
    "split_v_int8_sizes": Case(lambda x: tuple(tf.split(x, [1, 3, 2], axis=1)), [IMG]),
    "split_v_int8_inferred": Case(lambda x: tuple(tf.split(x, [2, -1], axis=-1)), [IMG]),
    "split_v_int16_sizes": Case(lambda x: tuple(tf.split(x, [3, 1, 1], axis=2)), [IMG], quant="16x8"),
    # PACK and UNPACK.
    "pack_int8_axis1": Case(lambda a, b, c: tf.stack([a, b, c], axis=1),
                            [In((2, 3, 4)), In((2, 3, 4)), In((2, 3, 4))]),
    "pack_int8_axis0": Case(lambda a, b: tf.stack([a, b], axis=0), [In((3, 5)), In((3, 5))]),
    "pack_int8_last_axis": Case(lambda a, b: tf.stack([a, b], axis=-1), [In((3, 5)), In((3, 5))]),
    # One input stacked with itself: two int16 inputs get different scales, and the converter
    # then requantizes one.
    "pack_int16_axis1": Case(lambda a: tf.stack([a, a, a], axis=1), [In((2, 3, 4))], quant="16x8"),
    "unpack_int8_axis1": Case(lambda x: tuple(tf.unstack(x, axis=1)), [In((2, 3, 4))]),
    "unpack_int8_last_axis": Case(lambda x: tuple(tf.unstack(x, axis=-1)), [In((3, 2))]),
    "unpack_int16_axis0": Case(lambda x: tuple(tf.unstack(x, axis=0)), [In((2, 3, 4))], quant="16x8"),
}

CASES.update({
    # Masks the converter may keep: an ellipsis, a new axis (TFLM zeroes both masks and checks
    # the output shape; the converter usually rewrites them away).
    "strided_slice_int8_ellipsis": Case(lambda x: x[..., 1:3], [IMG]),
    "strided_slice_int8_new_axis": Case(lambda x: x[:, tf.newaxis, 1:5, 2], [In((2, 6, 5))]),
    "strided_slice_int8_rank1_reverse": Case(lambda x: x[::-1], [In((9,))]),
    "split_int8_outer_axis": Case(lambda x: tuple(tf.split(x, 2, axis=0)), [In((4, 3, 2))]),
    "unpack_int8_rank1": Case(lambda x: tuple(tf.unstack(x, axis=0)), [In((3,))]),
})
