#!/usr/bin/env python3
"""Single-operator test models, with TensorFlow Lite Micro's outputs for them.

Each case is a small TensorFlow function converted with TensorFlow's own converter
(full-integer int8, or 16x8: int16 activations with int8 weights), then run by TFLM's
reference kernels (the `tflite-micro` PyPI package) on fixed-seed inputs. For every case it
writes `tests/models/ops/<case>/`:

- `model.tflite`;
- `input_<run>_<i>.bin`: raw bytes of model input `i` for run `run`;
- `expected_<run>_<o>.bin`: the raw bytes TFLM wrote to model output `o`;
- `case.json`: runs, input and output counts, dtypes and the model's operators.

Runs are made in order on one TFLM interpreter, never reset between them, so a stateful
operator's (LSTM, SVDF) outputs are TFLM's sequence. `tests/operators.rs` runs every case
and compares byte for byte.

Cases live in `cases_<family>.py` beside this file, each a dict `CASES` of name -> `Case`.

Usage: python3 tools/opmodels/make.py [CASE_OR_PREFIX ...]
Needs: pip install tensorflow-cpu tf-keras tflite-micro numpy
"""
import glob
import importlib
import json
import os
import shutil
import sys
import zlib
from dataclasses import dataclass, field

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Keras 2 (the tf-keras package) for keras=True cases: the converter fuses its LSTM layer into
# one UNIDIRECTIONAL_SEQUENCE_LSTM, where Keras 3's becomes a WHILE loop.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tflite_micro import runtime as tflm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "tests", "models", "ops")
ARENA = 4 * 1024 * 1024


@dataclass
class In:
    """One model input: its shape, and what values feed it.

    kind "float": float32 values in [lo, hi], quantized by the converter (the model's input is
    then int8 or int16, or float32 when the case keeps float I/O); "int32" / "int64": integer
    indices or axes in [lo, hi] (left as they are by the converter). run: (lo, hi) of the
    values the runs feed, when they differ from the calibration's (to make outputs saturate)."""
    shape: tuple
    kind: str = "float"
    lo: float = -1.0
    hi: float = 1.0
    run: tuple = None


@dataclass
class Case:
    """A single-operator model.

    fn: a function of tf tensors (one per input) returning a tensor or a tuple of them.
    quant: "int8" (full-integer int8), "16x8" (int16 activations, int8 weights).
    float_io: keep float32 model inputs and outputs (QUANTIZE / DEQUANTIZE at the edges).
    runs: inputs run in sequence on one interpreter.
    keras: build a Keras model instead (fn takes keras inputs), for layers the converter only
    fuses from Keras (LSTM -> UNIDIRECTIONAL_SEQUENCE_LSTM).
    build: a function returning the `.tflite` bytes itself, for operators TensorFlow's
    converter never emits (SVDF); fn, quant and the conversion options are then unused.
    edit: a function of the converted model's bytes returning the model to use, for an
    operator the converter only makes between others (cut out of the converted model).
    dynamic_batch: trace with an unknown batch size (the model keeps the inputs' shapes, with
    -1 in its shape signatures), so that the converter cannot fold SHAPE into a constant.
    """
    fn: object
    inputs: list
    quant: str = "int8"
    float_io: bool = False
    runs: int = 3
    keras: bool = False
    batch_size: int = None
    extra: dict = field(default_factory=dict)
    build: object = None
    edit: object = None
    dynamic_batch: bool = False


def seed(*parts):
    return zlib.crc32(":".join(str(p) for p in parts).encode())


def float_sample(spec, rng):
    if spec.kind == "float":
        return rng.uniform(spec.lo, spec.hi, size=spec.shape).astype(np.float32)
    dt = np.int32 if spec.kind == "int32" else np.int64
    return rng.integers(int(spec.lo), int(spec.hi) + 1, size=spec.shape).astype(dt)


def tf_dtype(spec):
    return {"float": tf.float32, "int32": tf.int32, "int64": tf.int64}[spec.kind]


def convert(name, case):
    if case.keras:
        ins = [tf.keras.Input(shape=s.shape[1:], batch_size=case.batch_size or s.shape[0],
                              dtype=tf_dtype(s)) for s in case.inputs]
        outs = case.fn(*ins)
        model = tf.keras.Model(ins, outs)
        converter = tf.lite.TFLiteConverter.from_keras_model(model)
    else:
        sig = [tf.TensorSpec((None,) + tuple(s.shape[1:]) if case.dynamic_batch else s.shape,
                             tf_dtype(s)) for s in case.inputs]
        func = tf.function(case.fn, input_signature=sig)
        converter = tf.lite.TFLiteConverter.from_concrete_functions(
            [func.get_concrete_function()], func)
    rng = np.random.default_rng(seed(name, "representative"))

    def representative():
        for _ in range(64):
            yield [float_sample(s, rng) for s in case.inputs]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    if case.quant == "int8":
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = tf.int8
    elif case.quant == "16x8":
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        io = tf.int16
    else:
        raise ValueError(case.quant)
    if not case.float_io:
        converter.inference_input_type = io
        converter.inference_output_type = io
    converter._experimental_disable_per_channel_quantization_for_dense_layers = False
    for k, v in case.extra.items():
        setattr(converter, k, v)
    model = converter.convert()
    return case.edit(model) if case.edit else model


def quantize_input(x, detail):
    """The model input's bytes for float values `x`, as TFLite's quantization gives them."""
    dt = detail["dtype"]
    if np.issubdtype(dt, np.floating) or not np.issubdtype(x.dtype, np.floating):
        return x.astype(dt)
    qp = detail["quantization_parameters"]
    scale, zp = float(qp["scales"][0]), int(qp["zero_points"][0])
    info = np.iinfo(dt)
    return np.clip(np.round(x / scale) + zp, info.min, info.max).astype(dt)


def ops_of(model):
    """The model's operators by name, and its output count."""
    from tensorflow.lite.python import schema_py_generated as schema
    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(model, 0))
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    sub = m.subgraphs[0]
    return [names[codes[op.opcodeIndex]] for op in sub.operators], len(sub.outputs)


def make(name, case):
    model = case.build() if case.build else convert(name, case)
    interp = tflm.Interpreter.from_bytes(model, arena_size=ARENA)
    in_details = interp.get_input_details
    out_details = interp.get_output_details
    n_in = len(case.inputs)
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "model.tflite"), "wb") as f:
        f.write(model)
    dtypes_in, dtypes_out = [], []
    operators, n_out = ops_of(model)
    for run in range(case.runs):
        rng = np.random.default_rng(seed(name, run))
        for i, spec in enumerate(case.inputs):
            det = in_details(i)
            run_spec = spec if spec.run is None else In(spec.shape, spec.kind, *spec.run)
            x = quantize_input(float_sample(run_spec, rng), det)
            interp.set_input(x, i)
            x.tofile(os.path.join(d, f"input_{run}_{i}.bin"))
            if run == 0:
                dtypes_in.append(np.dtype(det["dtype"]).name)
        interp.invoke()
        for o in range(n_out):
            y = interp.get_output(o)
            if run == 0:
                dtypes_out.append(y.dtype.name)
            np.ascontiguousarray(y).tofile(os.path.join(d, f"expected_{run}_{o}.bin"))
    meta = {
        "runs": case.runs,
        "inputs": n_in,
        "outputs": n_out,
        "input_dtypes": dtypes_in,
        "output_dtypes": dtypes_out,
        "quant": case.quant,
        "operators": operators,
    }
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return meta


def all_cases():
    sys.path.insert(0, HERE)
    cases = {}
    for path in sorted(glob.glob(os.path.join(HERE, "cases_*.py"))):
        mod = importlib.import_module(os.path.basename(path)[:-3])
        for k, v in mod.CASES.items():
            assert k not in cases, f"case {k} defined twice"
            cases[k] = v
    return cases


def main(args):
    cases = all_cases()
    chosen = [k for k in cases if not args or any(k == a or k.startswith(a) for a in args)]
    if not chosen:
        sys.exit(f"no case matches {args}; cases: {', '.join(cases)}")
    for k in chosen:
        meta = make(k, cases[k])
        print(f"{k}: {' '.join(meta['operators'])} "
              f"in {meta['input_dtypes']} out {meta['output_dtypes']}")


if __name__ == "__main__":
    main(sys.argv[1:])
