#!/usr/bin/env python3
"""Runs .tflite models end to end through `npu-sim run` and TensorFlow Lite Micro, on the
same fixed-seed inputs, and compares the outputs byte for byte: how a model nobody on this
project made is checked.

For each model: `npu-sim inspect` (every operator and where it runs), then, if TFLM runs it,
three inputs (uniform over each input's integer range; float inputs in [-1, 1]) through both.
Prints one line per model: RUN bit-exact / DIFFERS / REFUSED (with npu-sim's reason) /
TFLM-REFUSES, and a summary. Exit 1 if any model differs.

Usage: python3 tools/public_models.py [--npu-sim PATH] MODEL.tflite|DIR ...
Needs: pip install tflite-micro numpy; npu-sim built (cargo build --release -p npu-sim).
"""
import argparse
import glob
import multiprocessing
import os
import subprocess
import sys
import tempfile
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
from tflite_micro import runtime as tflm  # noqa: E402

ARENA = 16 * 1024 * 1024


def sample(detail, rng):
    dt = np.dtype(detail["dtype"])
    shape = tuple(int(d) for d in detail["shape"])
    if np.issubdtype(dt, np.floating):
        return rng.uniform(-1, 1, size=shape).astype(dt)
    if dt == np.bool_:
        return rng.integers(0, 2, size=shape).astype(dt)
    info = np.iinfo(dt)
    lo, hi = max(info.min, -32768), min(info.max, 32767)
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(dt)


def tflm_outputs(model, xs):
    it = tflm.Interpreter.from_bytes(model, arena_size=ARENA)
    outs = []
    for inputs in xs:
        # Each `npu-sim run` is a first invoke: start TFLM's from the initial state too
        # (variable tensors of LSTM and SVDF models carry over otherwise).
        it.reset()
        for i, x in enumerate(inputs):
            it.set_input(x, i)
        it.invoke()
        n = len(outs_details(it))
        outs.append([np.ascontiguousarray(it.get_output(o)).tobytes() for o in range(n)])
    return outs


def outs_details(it):
    details = []
    while True:
        try:
            details.append(it.get_output_details(len(details)))
        except Exception:  # noqa: BLE001 - the binding raises on the first index past the end
            return details


def ins_details(it):
    details = []
    while True:
        try:
            details.append(it.get_input_details(len(details)))
        except Exception:  # noqa: BLE001
            return details


def tflm_reference(model, name, runs, queue):
    """In a child process (TFLM aborts on some models): inputs and TFLM's outputs."""
    try:
        it = tflm.Interpreter.from_bytes(model, arena_size=ARENA)
        details = ins_details(it)
        xs = []
        for run in range(runs):
            rng = np.random.default_rng(zlib.crc32(f"{name}:{run}".encode()))
            xs.append([sample(d, rng) for d in details])
        queue.put((xs, tflm_outputs(model, xs)))
    except Exception as e:  # noqa: BLE001
        queue.put(str(e).splitlines()[0])


def check(path, npu_sim, runs=3):
    name = os.path.basename(path)
    model = open(path, "rb").read()
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(
        target=tflm_reference, args=(model, name, runs, queue))
    child.start()
    # Read before joining: a child blocks on exit until its queued result is taken.
    tflm_result = None
    while tflm_result is None:
        try:
            tflm_result = queue.get(timeout=1)
        except Exception:  # noqa: BLE001 - nothing yet: done if the child died (TFLM aborts)
            if not child.is_alive():
                break
    child.join()
    if tflm_result is None:
        tflm_result = f"TFLM exited with {child.exitcode}"
    ins = subprocess.run([npu_sim, "inspect", path], capture_output=True, text=True)
    if isinstance(tflm_result, str):
        ours = "refused too" if ins.returncode != 0 else "npu-sim inspects it"
        return "TFLM-REFUSES", f"{tflm_result} ({ours})"
    xs, want = tflm_result
    if ins.returncode != 0:
        unsupported = [line.strip() for line in ins.stdout.splitlines() if "UNSUPPORTED" in line]
        reason = "; ".join(unsupported[:6]) or ins.stderr.strip()
        return "REFUSED", f"{reason}"
    with tempfile.TemporaryDirectory() as tmp:
        for run, inputs in enumerate(xs):
            args = [npu_sim, "run", path]
            for i, x in enumerate(inputs):
                f = os.path.join(tmp, f"in_{run}_{i}.bin")
                x.tofile(f)
                args += ["--input", f]
            outs = [os.path.join(tmp, f"out_{run}_{o}.bin") for o in range(len(want[run]))]
            for f in outs:
                args += ["--output", f]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                return "REFUSED", (r.stderr.strip() or r.stdout.strip()).splitlines()[-1]
            for o, f in enumerate(outs):
                got = open(f, "rb").read()
                if got != want[run][o]:
                    at = next((k for k, (a, b) in enumerate(zip(got, want[run][o])) if a != b),
                              min(len(got), len(want[run][o])))
                    return "DIFFERS", f"run {run} output {o} from byte {at}"
    return "RUN", f"bit-exact on {runs} inputs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--npu-sim", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "target/release/npu-sim"))
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    paths = []
    for m in a.models:
        paths += sorted(glob.glob(os.path.join(m, "*.tflite"))) if os.path.isdir(m) else [m]
    tally = {}
    for p in paths:
        status, detail = check(p, a.npu_sim)
        tally[status] = tally.get(status, 0) + 1
        print(f"{status:<12} {os.path.basename(p)}: {detail}", flush=True)
    print("summary: " + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    sys.exit(1 if tally.get("DIFFERS") else 0)


if __name__ == "__main__":
    main()
