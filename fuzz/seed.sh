#!/usr/bin/env sh
# Builds the seed corpus for the `model_reader` fuzz target from the reference models.
# The corpus directory is gitignored (it holds copies of the MLPerf models, which must not be
# committed). Usage: fuzz/seed.sh [models-dir]  (default: ../shared/models next to the workspace)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
models=${1:-"$here/../../shared/models"}
corpus="$here/corpus/model_reader"
mkdir -p "$corpus"
found=0
for f in "$models"/*/model.tflite "$here"/../examples/models/*/model.tflite; do
    [ -f "$f" ] || continue
    name=$(basename "$(dirname "$f")")
    cp "$f" "$corpus/$name.tflite"
    found=$((found + 1))
done
if [ "$found" -eq 0 ]; then
    echo "no models found under $models" >&2
    exit 1
fi
# Small hand-made valid models from the test suite.
(cd "$here/.." && NPU_FUZZ_SEED_DIR="$corpus" cargo test -q --test model_reader handmade_fuzz_seeds >/dev/null)
echo "seeded $corpus with $found models and the hand-made ones"
