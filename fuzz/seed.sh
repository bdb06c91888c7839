#!/usr/bin/env sh
# Builds the seed corpora: for the `model_reader` fuzz target from the reference models, for
# `client_api` a few fixed programs of client calls.
# The corpus directories are gitignored (they hold copies of the MLPerf models, which must not
# be committed). Usage: fuzz/seed.sh [models-dir]  (default: ../shared/models next to the
# workspace)
set -eu
here=$(cd "$(dirname "$0")" && pwd)

# client_api: its input is a program, one opcode byte then arguments per step (see the
# target's docs). Seeds: two hand-written programs (tensors made, added, read, synced;
# pinned tensors, a pool, a job plan, a fault) and pseudo-random programs long enough to
# reach the limits (a fixed linear congruential sequence, so the seeds are the same everywhere).
client="$here/corpus/client_api"
mkdir -p "$client"
bytes() { # decimal byte values -> raw bytes on stdout
    for b in "$@"; do printf "\\$(printf '%03o' "$b")"; done
}
bytes 0 2 3 5   0 2 9 3   2 2   5 2 0 2 1 0 1 0 1   9 2 0   21   9 2 0   11 0   21 \
    >"$client/add_read_sync"
bytes 15 4   15 4   16 0 7 1   5 1 0 2 1 1 1 0 1   2 8   14 2 2 2   18 3 0 1 2 1 0 1 2 \
    1 1 1 0 3   19 0 0   23 4 9   5 0 0 2 1 1 1 0 1   21   23 7   20 0   21 \
    >"$client/pinned_pool_plan_fault"
for seed in 1 2 3 4 5 6 7 8; do
    LC_ALL=C awk -v seed="$seed" 'BEGIN {
        x = seed * 7919 % 65537
        for (i = 0; i < 600; i++) {
            x = (x * 75 + 74) % 65537
            printf "%c", x % 256
        }
    }' >"$client/random_$seed"
done
echo "seeded $client"
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
