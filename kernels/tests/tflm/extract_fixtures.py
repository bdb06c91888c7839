#!/usr/bin/env python3
"""Extracts per-layer fixtures from TFLM for the npu-kernels layer tests.

For each CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, MAX_POOL_2D, SOFTMAX and MEAN (over
H and W) operator (and, into `fixtures/tensor_ops/` for tests/tflm_tensor_ops.rs, each
FULLY_CONNECTED, BATCH_MATMUL, TRANSPOSE, RESHAPE and CONCATENATION) of the
given models, runs the model in TFLM (the `tflite-micro` PyPI package, reference kernels) on
`input_0.bin` with all tensors preserved, and writes the operator's options, quantization,
input, weights, bias and TFLM's output to `fixtures/<model>_<op index>_<op>.bin`.

Only non-MLPerf models may be used (their data may be committed): convnet, kws_dscnn,
inception, tiny_transformer.

Record format (little-endian), repeated until the end of the file:
  u8 name_len, name (ASCII), u8 kind (0 = i8, 1 = i32, 2 = f32), u32 count, count elements.

Usage: python3 extract_fixtures.py [/work/shared/models] [model ...]

With the environment variable OUT_DIR set to a directory outside the repository, any model
(MLPerf ones included) may be extracted there for a local check:
  OUT_DIR=/tmp/fx python3 extract_fixtures.py /work/shared/models mlperf_vww
  NPU_KERNELS_TFLM_FIXTURES=/tmp/fx cargo test -p npu-kernels --test tflm_layers
  NPU_KERNELS_TFLM_FIXTURES=/tmp/fx cargo test -p npu-kernels --test tflm_tensor_ops
  NPU_KERNELS_TFLM_FIXTURES=/tmp/fx cargo test -p npu-kernels --test tflm_elementwise

ADD, SUB, MUL, RSQRT and MEAN (any axes) go to `fixtures/elementwise/` for
tests/tflm_elementwise.rs, with their own layer selection (ELEMENTWISE_KEEP); the spatial
MEANs also still go to `fixtures/` as before.
"""
import os
import struct
import sys

import numpy as np
from tflite_micro import runtime as tflm
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as fb

ALLOWED = ["convnet", "kws_dscnn", "inception", "tiny_transformer"]
OPS = {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "SOFTMAX", "MEAN"}
# Matrix and tensor operators, checked by tests/tflm_tensor_ops.rs: written to the
# `tensor_ops/` subdirectory of the output directory, with their own layer selection.
TENSOR_OPS = {"FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE", "RESHAPE", "CONCATENATION"}
TENSOR_KEEP = {
    "convnet": None,
    "kws_dscnn": None,
    "inception": {7, 17},  # one of the two (identical-geometry) concatenations, and the FC
    "tiny_transformer": None,
}
# Elementwise operators and MEAN, checked by tests/tflm_elementwise.rs: written to the
# `elementwise/` subdirectory. tiny_transformer's selection covers ADD without broadcast and with
# a scalar, SUB with a [1,16,1] operand, MUL of a tensor by itself, by [1,16,1] and by a scalar,
# MEAN over the last axis (keep_dims) and over axis 1 (no keep_dims), and RSQRT. The spatial
# MEANs of convnet and inception are already in `fixtures/`.
ELEMENTWISE_OPS = {"ADD", "SUB", "MUL", "RSQRT", "MEAN"}
ELEMENTWISE_KEEP = {
    "convnet": set(),
    "kws_dscnn": set(),
    "inception": set(),
    "tiny_transformer": {7, 16, 17, 18, 19, 20, 21, 22, 23, 34},
}
NAMES = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
HERE = os.path.dirname(os.path.abspath(__file__))
# The layers committed under fixtures/ (a small set covering every kernel and geometry: SAME
# with asymmetric padding and stride 2, VALID, 5x5 and 3x3 windows, one-pixel pooling output).
# ALL_LAYERS=1 extracts every supported layer.
KEEP = {
    "convnet": None,  # all of them
    "kws_dscnn": {0, 1, 9, 11},
    "inception": {4, 5, 16},
    "tiny_transformer": None,
}


def record(name, arr, kind):
    dtype = {0: "<i1", 1: "<i4", 2: "<f4"}[kind]
    a = np.ascontiguousarray(np.asarray(arr).reshape(-1).astype(dtype))
    n = name.encode()
    return struct.pack("<B", len(n)) + n + struct.pack("<BI", kind, a.size) + a.tobytes()


def tensor_op_records(opname, o, ins, sg, data, quant):
    """Records specific to a TENSOR_OPS operator (after the common ones)."""
    recs = []
    if opname == "FULLY_CONNECTED":
        recs.append(record("options", [o.fusedActivationFunction, int(o.keepNumDims)], 1))
        recs.append(record("filter_shape", sg.tensors[ins[1]].shape, 1))
        recs.append(record("filter", data(ins[1]), 0))
        recs.append(record("filter_scale", quant(ins[1])[0], 2))
        if len(ins) > 2 and ins[2] >= 0:
            recs.append(record("bias", data(ins[2]), 1))
    elif opname == "BATCH_MATMUL":
        recs.append(record("options", [int(o.adjX), int(o.adjY)], 1))
        recs.append(record("rhs_shape", sg.tensors[ins[1]].shape, 1))
        recs.append(record("rhs", data(ins[1]), 0))
        s, z = quant(ins[1])
        recs.append(record("rhs_scale", s, 2))
        recs.append(record("rhs_zero_point", z, 1))
    elif opname == "TRANSPOSE":
        recs.append(record("perm", data(ins[1]), 1))
    elif opname == "CONCATENATION":
        recs.append(record("options", [o.axis, o.fusedActivationFunction, len(ins)], 1))
        for k, ti in enumerate(ins[1:], start=1):
            recs.append(record(f"input{k}_shape", sg.tensors[ti].shape, 1))
            recs.append(record(f"input{k}", data(ti), 0))
            s, z = quant(ti)
            recs.append(record(f"input{k}_scale", s, 2))
            recs.append(record(f"input{k}_zero_point", z, 1))
    return recs


def elementwise_records(opname, o, ins, outs, sg, data, quant):
    """All records of an ELEMENTWISE_OPS operator."""
    def shape(ti):
        s = sg.tensors[ti].shape
        return [] if s is None else list(s)  # a scalar has no dimensions

    recs = [record("input_shape", shape(ins[0]), 1), record("output_shape", shape(outs[0]), 1)]
    for tag, ti in (("input", ins[0]), ("output", outs[0])):
        s, z = quant(ti)
        recs += [record(tag + "_scale", s, 2), record(tag + "_zero_point", z, 1)]
    recs += [record("input", data(ins[0]), 0), record("expected", data(outs[0]), 0)]
    if opname in ("ADD", "SUB", "MUL"):
        recs.append(record("options", [o.fusedActivationFunction], 1))
        recs.append(record("input2_shape", shape(ins[1]), 1))
        recs.append(record("input2", data(ins[1]), 0))
        s, z = quant(ins[1])
        recs += [record("input2_scale", s, 2), record("input2_zero_point", z, 1)]
    elif opname == "MEAN":
        recs.append(record("axes", data(ins[1]), 1))
        recs.append(record("options", [int(o.keepDims)], 1))
    return recs


def main(root, models):
    out_dir = os.environ.get("OUT_DIR") or os.path.join(HERE, "fixtures")
    in_repo = os.path.abspath(out_dir).startswith(os.path.dirname(os.path.dirname(HERE)))
    os.makedirs(out_dir, exist_ok=True)
    for name in models:
        assert name in ALLOWED or not in_repo, f"{name}: only non-MLPerf models go in the repo"
        d = os.path.join(root, name)
        path = os.path.join(d, "model.tflite")
        buf = open(path, "rb").read()
        model = fb.ModelT.InitFromObj(fb.Model.GetRootAsModel(buf, 0))
        sg = model.subgraphs[0]
        it = tflm.Interpreter.from_file(
            path, arena_size=8 << 20,
            intrepreter_config=tflm.InterpreterConfig.kPreserveAllTensors)
        shape = it.get_input_details(0)["shape"]
        x = np.fromfile(os.path.join(d, "input_0.bin"), dtype=np.int8).reshape(shape)
        it.set_input(x, 0)
        it.invoke()

        def data(ti):
            t = sg.tensors[ti]
            b = model.buffers[t.buffer]
            if b.data is not None and len(b.data) > 0:
                dt = {fb.TensorType.INT8: np.int8, fb.TensorType.INT32: np.int32}[t.type]
                return np.frombuffer(bytes(bytearray(b.data)), dtype=dt)
            return np.array(it.GetTensor(ti, 0)["tensor_data"]).reshape(-1)

        def quant(ti):
            q = sg.tensors[ti].quantization
            return np.array(q.scale, np.float32), np.array(q.zeroPoint, np.int32)

        for idx, op in enumerate(sg.operators):
            oc = model.operatorCodes[op.opcodeIndex]
            opname = NAMES[max(oc.builtinCode, oc.deprecatedBuiltinCode)]
            if opname in ELEMENTWISE_OPS:
                keep = ELEMENTWISE_KEEP.get(name)
                if os.environ.get("ALL_LAYERS") or keep is None or idx in keep:
                    recs = elementwise_records(opname, op.builtinOptions, list(op.inputs),
                                               list(op.outputs), sg, data, quant)
                    dest = os.path.join(out_dir, "elementwise")
                    os.makedirs(dest, exist_ok=True)
                    fname = f"{name}_{idx:02d}_{opname.lower()}.bin"
                    with open(os.path.join(dest, fname), "wb") as f:
                        f.write(b"".join(recs))
                    print("elementwise/" + fname, sum(len(r) for r in recs))
                if opname != "MEAN":
                    continue  # MEAN also goes on to the spatial-mean fixtures below
            if opname not in OPS and opname not in TENSOR_OPS:
                continue
            keep = (TENSOR_KEEP if opname in TENSOR_OPS else KEEP).get(name)
            if not os.environ.get("ALL_LAYERS") and name in KEEP and keep is not None \
                    and idx not in keep:
                continue
            o = op.builtinOptions
            ins, outs = list(op.inputs), list(op.outputs)
            recs = []
            t_in, t_out = ins[0], outs[0]
            recs.append(record("input_shape", sg.tensors[t_in].shape, 1))
            recs.append(record("output_shape", sg.tensors[t_out].shape, 1))
            for tag, ti in (("input", t_in), ("output", t_out)):
                s, z = quant(ti)
                recs.append(record(tag + "_scale", s, 2))
                recs.append(record(tag + "_zero_point", z, 1))
            recs.append(record("input", data(t_in), 0))
            recs.append(record("expected", data(t_out), 0))
            if opname in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                opts = [o.padding, o.strideH, o.strideW, o.dilationHFactor, o.dilationWFactor,
                        o.fusedActivationFunction,
                        o.depthMultiplier if opname == "DEPTHWISE_CONV_2D" else 0]
                recs.append(record("options", opts, 1))
                recs.append(record("filter_shape", sg.tensors[ins[1]].shape, 1))
                recs.append(record("filter", data(ins[1]), 0))
                s, z = quant(ins[1])
                recs.append(record("filter_scale", s, 2))
                if len(ins) > 2 and ins[2] >= 0:
                    recs.append(record("bias", data(ins[2]), 1))
            elif opname in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
                opts = [o.padding, o.strideH, o.strideW, o.filterHeight, o.filterWidth,
                        o.fusedActivationFunction]
                recs.append(record("options", opts, 1))
            elif opname == "MEAN":
                axes = sorted(int(a) for a in data(ins[1]))
                if axes != [1, 2] or len(sg.tensors[t_in].shape) != 4:
                    continue  # only the spatial mean is implemented
            elif opname == "SOFTMAX":
                recs.append(record("beta", [o.beta], 2))
            if opname in TENSOR_OPS:
                recs += tensor_op_records(opname, o, ins, sg, data, quant)
            dest = os.path.join(out_dir, "tensor_ops") if opname in TENSOR_OPS else out_dir
            os.makedirs(dest, exist_ok=True)
            fname = f"{name}_{idx:02d}_{opname.lower()}.bin"
            with open(os.path.join(dest, fname), "wb") as f:
                f.write(b"".join(recs))
            print(fname, sum(len(r) for r in recs))


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/models"
    main(root, sys.argv[2:] or ALLOWED)
