"""Times LiteRT (the ai-edge-litert package) on a model, for `npu-sim bench models`.

Usage: python3 litert_time.py MODEL REPEAT INPUT...

LiteRT runs as its users run it on a host: the default (AUTO) op resolver, whose XNNPACK
delegate takes the operators it supports, and one thread (the runtime under test uses one).
Each input is set once and invoked once untimed (XNNPACK packs weights at the first invoke),
then REPEAT times timed, each time setting the input, invoking and reading the output, as the
runtime's timed invoke writes, runs and reads. Prints one JSON list: per input, the median
microseconds and the output bytes in hex (so the caller can say whether they match TFLM's).
"""

import json
import statistics
import sys
import time

try:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
except ImportError as e:
    sys.exit(f"LiteRT is not installed ({e}): pip install ai-edge-litert")


def main():
    model, repeat, inputs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    it = Interpreter(
        model_path=model,
        num_threads=1,
        experimental_op_resolver_type=OpResolverType.AUTO,
    )
    it.allocate_tensors()
    (inp,) = it.get_input_details()
    out = it.get_output_details()[0]
    runs = []
    for path in inputs:
        x = np.fromfile(path, dtype=inp["dtype"]).reshape(inp["shape"])
        it.set_tensor(inp["index"], x)
        it.invoke()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            it.set_tensor(inp["index"], x)
            it.invoke()
            y = it.get_tensor(out["index"])
            times.append(time.perf_counter() - t0)
        runs.append({"us": statistics.median(times) * 1e6, "output": y.tobytes().hex()})
    print(json.dumps(runs))


main()
