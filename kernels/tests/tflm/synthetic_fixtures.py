#!/usr/bin/env python3
"""Writes fixtures from single-operator models built here, run in TFLM, for a local check of
the elementwise kernels beyond the layers the reference models contain.

Builds small TFLite models (one ADD, SUB, MUL, RSQRT, MEAN, QUANTIZE or DEQUANTIZE each) with
pseudo-random quantization, fused activations, broadcast shapes up to rank 6, MEAN axes
(negative and duplicated ones included), inputs covering every int8 value, and float inputs
that fall exactly on rounding ties; runs each in TFLM (the `tflite-micro` PyPI package,
reference kernels) and writes the operator's parameters, inputs and TFLM's output in the
format of extract_fixtures.py to `$OUT_DIR/elementwise/synthetic_<n>_<op>.bin`:

  OUT_DIR=/tmp/synth python3 synthetic_fixtures.py [count] [seed]
  NPU_KERNELS_TFLM_FIXTURES=/tmp/synth cargo test -p npu-kernels --test tflm_elementwise

OUT_DIR is required and must be outside the repository: these fixtures are not committed.
"""
import os
import struct
import sys

import flatbuffers
import numpy as np
from tflite_micro import runtime as tflm
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

HERE = os.path.dirname(os.path.abspath(__file__))
OP = fb.BuiltinOperator
TT = fb.TensorType


def record(name, arr, kind):
    dtype = {0: "<i1", 1: "<i4", 2: "<f4"}[kind]
    a = np.ascontiguousarray(np.asarray(arr).reshape(-1).astype(dtype))
    n = name.encode()
    return struct.pack("<B", len(n)) + n + struct.pack("<BI", kind, a.size) + a.tobytes()


def tensor(model, sg, shape, ttype, scale=None, zp=None, data=None):
    """Appends a tensor (and its buffer) to the subgraph; returns its index."""
    buf = fb.BufferT()
    if data is not None:
        buf.data = list(np.ascontiguousarray(data).tobytes())
    model.buffers.append(buf)
    t = fb.TensorT()
    t.shape = list(shape)
    t.type = ttype
    t.buffer = len(model.buffers) - 1
    t.name = f"t{len(sg.tensors)}".encode()
    if scale is not None:
        q = fb.QuantizationParametersT()
        q.scale = [float(scale)]
        q.zeroPoint = [int(zp)]
        t.quantization = q
    sg.tensors.append(t)
    return len(sg.tensors) - 1


def build(opcode, options_type, options, tensors_in, tensors_out, specs):
    """A one-operator model. specs: list of tensor() argument tuples; tensors_in/out index it."""
    model = fb.ModelT()
    model.version = 3
    model.buffers = [fb.BufferT()]  # buffer 0: the empty sentinel
    code = fb.OperatorCodeT()
    code.builtinCode = opcode
    code.deprecatedBuiltinCode = min(opcode, 127)
    code.version = 1
    model.operatorCodes = [code]
    sg = fb.SubGraphT()
    sg.tensors = []
    ids = [tensor(model, sg, *s) for s in specs]
    op = fb.OperatorT()
    op.opcodeIndex = 0
    op.inputs = [ids[i] for i in tensors_in]
    op.outputs = [ids[i] for i in tensors_out]
    if options is not None:
        op.builtinOptionsType = options_type
        op.builtinOptions = options
    sg.operators = [op]
    consts = {i for i, s in enumerate(specs) if len(s) > 4 and s[4] is not None}
    sg.inputs = [ids[i] for i in tensors_in if i not in consts]
    sg.outputs = [ids[i] for i in tensors_out]
    model.subgraphs = [sg]
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def invoke(model_bytes, inputs):
    it = tflm.Interpreter.from_bytes(model_bytes, arena_size=1 << 20)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    return it.get_output(0)


def broadcast_shapes(rng):
    """Pairs of shapes that broadcast, up to rank 6 (scalars, repeats on either side)."""
    fixed = [
        ([2, 3, 4], [2, 3, 4]),
        ([1, 16, 32], [1, 16, 1]),
        ([1, 16, 1], []),
        ([], [5, 7]),
        ([4], [2, 3, 4]),
        ([2, 1, 4, 1, 3], [1, 5, 1, 2, 1]),
        ([1, 2, 1, 4, 1, 3], [2, 1, 3, 1, 5, 1]),
        ([1, 32, 32, 2], [1, 32, 32, 2]),  # long enough for the tabulated ADD / SUB
        ([64, 64], [64, 1]),
    ]  # (TFLM refuses tensors with a dimension of 0 as dynamic)
    if rng.random() < 0.4:
        return fixed[rng.integers(len(fixed))]
    rank = int(rng.integers(0, 7))
    out = [int(d) for d in rng.integers(1, 5, size=rank)]
    a = [d if rng.random() < 0.6 else 1 for d in out]
    b = [d if rng.random() < 0.6 else 1 for d in out]
    a = a[int(rng.integers(0, rank + 1)):] if rng.random() < 0.3 else a
    return a, b


def quant(rng, lo=1e-3, hi=0.5):
    return float(np.float32(np.exp(rng.uniform(np.log(lo), np.log(hi))))), int(
        rng.integers(-128, 128))


def int8s(rng, n):
    # Every int8 value appears when there is room; then random ones.
    base = np.arange(-128, 128, dtype=np.int8)
    if n <= 256:
        return rng.permutation(base)[:n]
    return np.concatenate([base, rng.integers(-128, 128, size=n - 256, dtype=np.int8)])


def binary_case(rng, name):
    a_shape, b_shape = broadcast_shapes(rng)
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    (sa, za), (sb, zb) = quant(rng), quant(rng)
    if name == "mul":
        so, zo = quant(rng, sa * sb / 4, sa * sb * 200)
    else:
        so, zo = quant(rng, max(sa, sb) / 8, max(sa, sb) * 8)
    act = int(rng.choice([0, 0, 1, 2, 3]))
    opcode, otype, opts = {
        "add": (OP.ADD, fb.BuiltinOptions.AddOptions, fb.AddOptionsT()),
        "sub": (OP.SUB, fb.BuiltinOptions.SubOptions, fb.SubOptionsT()),
        "mul": (OP.MUL, fb.BuiltinOptions.MulOptions, fb.MulOptionsT()),
    }[name]
    opts.fusedActivationFunction = act
    specs = [(a_shape, TT.INT8, sa, za), (b_shape, TT.INT8, sb, zb),
             (out_shape, TT.INT8, so, zo)]
    m = build(opcode, otype, opts, [0, 1], [2], specs)
    a = int8s(rng, int(np.prod(a_shape))).reshape(a_shape)
    b = int8s(rng, int(np.prod(b_shape))).reshape(b_shape)
    out = invoke(m, [a, b])
    return [
        record("input_shape", a_shape, 1), record("output_shape", out_shape, 1),
        record("input_scale", [sa], 2), record("input_zero_point", [za], 1),
        record("output_scale", [so], 2), record("output_zero_point", [zo], 1),
        record("input", a, 0), record("expected", out, 0),
        record("options", [act], 1), record("input2_shape", b_shape, 1),
        record("input2", b, 0), record("input2_scale", [sb], 2),
        record("input2_zero_point", [zb], 1),
    ]


def rsqrt_case(rng):
    si, zi = quant(rng, 1e-4, 4.0)
    so, zo = quant(rng, 1e-3, 2.0)
    if rng.random() < 0.5:
        zi = -128
    x = np.arange(zi, 128, dtype=np.int8)  # every valid input (>= the zero point)
    specs = [([x.size], TT.INT8, si, zi), ([x.size], TT.INT8, so, zo)]
    out = invoke(build(OP.RSQRT, None, None, [0], [1], specs), [x])
    return [
        record("input_shape", [x.size], 1), record("output_shape", [x.size], 1),
        record("input_scale", [si], 2), record("input_zero_point", [zi], 1),
        record("output_scale", [so], 2), record("output_zero_point", [zo], 1),
        record("input", x, 0), record("expected", out, 0),
    ]


def mean_case(rng):
    rank = int(rng.integers(1, 7))
    shape = [int(d) for d in rng.integers(1, 6, size=rank)]
    naxes = int(rng.integers(1, rank + 2))
    axes = [int(a) for a in rng.integers(-rank, rank, size=naxes)]  # negatives, duplicates
    keep = bool(rng.random() < 0.5)
    resolved = {a % rank for a in axes}
    out_shape = [1 if i in resolved else d for i, d in enumerate(shape) if keep or i not in resolved]
    si, zi = quant(rng)
    so, zo = (si, zi) if rng.random() < 0.3 else quant(rng, si / 4, si * 4)
    opts = fb.ReducerOptionsT()
    opts.keepDims = keep
    specs = [(shape, TT.INT8, si, zi), ([len(axes)], TT.INT32, None, None, np.array(axes, np.int32)),
             (out_shape, TT.INT8, so, zo)]
    m = build(OP.MEAN, fb.BuiltinOptions.ReducerOptions, opts, [0, 1], [2], specs)
    x = int8s(rng, int(np.prod(shape))).reshape(shape)
    if rng.random() < 0.3:
        x = np.full(shape, rng.choice([-128, 127]), np.int8)  # saturating sums
    out = invoke(m, [x])
    return [
        record("input_shape", shape, 1), record("output_shape", out_shape, 1),
        record("input_scale", [si], 2), record("input_zero_point", [zi], 1),
        record("output_scale", [so], 2), record("output_zero_point", [zo], 1),
        record("input", x, 0), record("expected", out, 0),
        record("axes", axes, 1), record("options", [int(keep)], 1),
    ]


def quantize_case(rng):
    so, zo = quant(rng, 1e-3, 2.0)
    if rng.random() < 0.5:
        # float → int8: exact multiples of half a step (ties, both signs), values around
        # them, and values beyond the int8 range (but within int32 after division).
        k = np.arange(-600, 601, dtype=np.float32)
        x = np.concatenate([k * np.float32(so) / 2, np.nextafter(k * np.float32(so) / 2, 1e9),
                            rng.normal(0, 100 * so, 200).astype(np.float32)]).astype(np.float32)
        ti, si, zi = TT.FLOAT32, None, None
    else:
        x = np.arange(-128, 128, dtype=np.int8)  # int8 → int8 requantization
        ti, (si, zi) = TT.INT8, quant(rng, 1e-3, 2.0)
    specs = [([x.size], ti, si, zi), ([x.size], TT.INT8, so, zo)]
    out = invoke(build(OP.QUANTIZE, None, None, [0], [1], specs), [x])
    recs = [
        record("input_shape", [x.size], 1), record("output_shape", [x.size], 1),
        record("output_scale", [so], 2), record("output_zero_point", [zo], 1),
        record("input", x, 2 if ti == TT.FLOAT32 else 0), record("expected", out, 0),
    ]
    if ti == TT.INT8:
        recs += [record("input_scale", [si], 2), record("input_zero_point", [zi], 1)]
    return recs


def dequantize_case(rng):
    si, zi = quant(rng, 1e-6, 10.0)
    x = np.arange(-128, 128, dtype=np.int8)
    specs = [([x.size], TT.INT8, si, zi), ([x.size], TT.FLOAT32)]
    out = invoke(build(OP.DEQUANTIZE, None, None, [0], [1], specs), [x])
    return [
        record("input_shape", [x.size], 1), record("output_shape", [x.size], 1),
        record("input_scale", [si], 2), record("input_zero_point", [zi], 1),
        record("input", x, 0), record("expected_f32", out, 2),
    ]


def main(count, seed):
    out_dir = os.environ.get("OUT_DIR")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    assert out_dir and not os.path.abspath(out_dir).startswith(repo), \
        "set OUT_DIR to a directory outside the repository"
    dest = os.path.join(out_dir, "elementwise")
    os.makedirs(dest, exist_ok=True)
    rng = np.random.default_rng(seed)
    kinds = ["add", "sub", "mul", "rsqrt", "mean", "quantize", "dequantize"]
    for n in range(count):
        kind = kinds[n % len(kinds)]
        if kind in ("add", "sub", "mul"):
            recs = binary_case(rng, kind)
        else:
            recs = globals()[kind + "_case"](rng)
        with open(os.path.join(dest, f"synthetic_{n:04d}_{kind}.bin"), "wb") as f:
            f.write(b"".join(recs))
    print(f"{count} fixtures in {dest}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 700,
         int(sys.argv[2]) if len(sys.argv) > 2 else 1)
