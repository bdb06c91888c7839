#!/usr/bin/env python3
"""Whole models of the kinds people run on microcontrollers, built with Keras (random
weights, fixed seeds) and converted with TensorFlow's converter to full-integer int8 (and one
16x8): the operator mixes of public model zoos (MobileNet v2 / v3, U-Net, LSTM and GRU
keyword spotters, a Conv1D audio net, a transformer block with an embedding), to check with
`tools/public_models.py` that they run end to end byte for byte as TFLM runs them.

Usage: python3 tools/zoo_models.py OUTDIR [NAME ...]
Needs: pip install tensorflow-cpu numpy
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers


def mobilenet_v2():
    return tf.keras.applications.MobileNetV2(
        input_shape=(96, 96, 3), alpha=0.35, weights=None, classes=10,
        classifier_activation=None)


def mobilenet_v3_small():
    return tf.keras.applications.MobileNetV3Small(
        input_shape=(96, 96, 3), alpha=0.75, weights=None, classes=10,
        include_preprocessing=False, classifier_activation=None)


def unet():
    x = inp = L.Input((32, 32, 3), batch_size=1)
    skips = []
    for f in (8, 16):
        x = L.Conv2D(f, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = L.MaxPooling2D()(x)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = L.Conv2DTranspose(16, 3, strides=2, padding="same")(x)
    x = L.Concatenate()([x, skips[1]])
    x = L.Conv2D(16, 3, padding="same", activation="relu")(x)
    x = L.UpSampling2D(interpolation="bilinear")(x)
    x = L.Concatenate()([x, skips[0]])
    x = L.ZeroPadding2D(1)(x)
    x = L.Conv2D(2, 3, activation="sigmoid")(x)
    return tf.keras.Model(inp, x)


def lstm_kws():
    inp = L.Input((20, 10), batch_size=1)
    x = L.LSTM(16)(inp)
    x = L.Dense(4, activation="softmax")(x)
    return tf.keras.Model(inp, x)


def gru_kws():
    inp = L.Input((8, 10), batch_size=1)
    x = L.GRU(12, unroll=True)(inp)
    x = L.Dense(4, activation="softmax")(x)
    return tf.keras.Model(inp, x)


def conv1d_audio():
    inp = L.Input((64, 8), batch_size=1)
    x = L.Conv1D(16, 5, padding="same", activation="relu")(inp)
    x = L.MaxPooling1D(2)(x)
    x = L.Conv1D(16, 3, activation="tanh")(x)
    x = L.GlobalAveragePooling1D()(x)
    x = L.Dense(6)(x)
    x = L.LeakyReLU(0.1)(x)
    return tf.keras.Model(inp, x)


def layer_norm_mlp():
    inp = L.Input((16,))
    x = L.Dense(32)(inp)
    x = L.LayerNormalization()(x)
    x = L.Activation("swish")(x)
    x = L.Dense(8)(x)
    return tf.keras.Model(inp, x)


def attention():
    inp = L.Input((12,), dtype="int32")
    x = L.Embedding(50, 16)(inp)
    a = L.MultiHeadAttention(2, 8)(x, x)
    x = L.LayerNormalization()(x + a)
    x = L.GlobalAveragePooling1D()(x)
    x = L.Dense(3, activation="softmax")(x)
    return tf.keras.Model(inp, x)


def conv_16x8():
    inp = L.Input((16, 16, 2), batch_size=1)
    x = L.Conv2D(8, 3, activation="relu")(inp)
    x = L.DepthwiseConv2D(3, padding="same")(x)
    x = L.Add()([x, L.Conv2D(8, 1)(x)])
    x = L.Flatten()(x)
    x = L.Dense(5, activation="softmax")(x)
    return tf.keras.Model(inp, x)


MODELS = {
    "zoo_mobilenet_v2": (mobilenet_v2, "int8"),
    "zoo_mobilenet_v3_small": (mobilenet_v3_small, "int8"),
    "zoo_unet": (unet, "int8"),
    "zoo_lstm_kws": (lstm_kws, "int8"),
    "zoo_gru_kws": (gru_kws, "int8"),
    "zoo_conv1d_audio": (conv1d_audio, "int8"),
    "zoo_layer_norm_mlp": (layer_norm_mlp, "int8"),
    "zoo_attention": (attention, "int8"),
    "zoo_conv_16x8": (conv_16x8, "16x8"),
}


def convert(model, quant, seed):
    rng = np.random.default_rng(seed)

    def representative():
        for _ in range(32):
            yield [(rng.integers(0, 50, size=(1,) + tuple(i.shape[1:])).astype(np.int32)
                    if i.dtype == tf.int32 else
                    rng.uniform(-1, 1, size=(1,) + tuple(i.shape[1:])).astype(np.float32))
                   for i in model.inputs]

    c = tf.lite.TFLiteConverter.from_keras_model(model)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = representative
    if quant == "int8":
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = tf.int8
    else:
        c.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        io = tf.int16
    c.inference_input_type = io
    c.inference_output_type = io
    return c.convert()


def main(out, names):
    os.makedirs(out, exist_ok=True)
    for i, (name, (build, quant)) in enumerate(MODELS.items()):
        if names and name not in names:
            continue
        tf.keras.utils.set_random_seed(1000 + i)
        try:
            data = convert(build(), quant, 2000 + i)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            print(f"{name}: conversion failed: {str(e).splitlines()[0]}")
            continue
        with open(os.path.join(out, name + ".tflite"), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
