#!/usr/bin/env bash
# Run the native core's fuzz targets (native/fuzz: cargo-fuzz, libFuzzer, nightly) for a
# number of executions each:
#
#     tools/fuzz_native.sh [RUNS] [TARGET...]     # RUNS: 1000000; TARGETs: all of them
#     MAX_LEN=4096 TIMEOUT=10 tools/fuzz_native.sh 200000 measurement_scan
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Each target's
# corpus is native/fuzz/corpus/<target> (git-ignored; measurement_scan's is seeded on
# first use with a few batches the Python bson encoder writes), a crash or a timeout is
# written to native/fuzz/artifacts/<target>/ and stops the run with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000000}
shift $(( $# > 0 ? 1 : 0 ))
MAX_LEN=${MAX_LEN:-4096}
TIMEOUT=${TIMEOUT:-10}
PYTHON=${PYTHON:-.venv/bin/python}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd native && cargo +nightly fuzz list)
fi

seed_measurement_scan() {  # $1: corpus directory
    [ -x "$PYTHON" ] || PYTHON=python3
    "$PYTHON" - "$1" <<'PY' || echo "(no seeds: the Python bson package is not there)"
import os, struct, sys
import bson
from bson import Code, Int64, ObjectId, Regex
from bson.datetime_ms import DatetimeMS
out = sys.argv[1]
docs = [
    {"t": DatetimeMS(1), "m": {"b": "x", "a": [1, {"d": 2.5, "c": None}]}, "v": Int64(7)},
    {"_id": ObjectId(b"\x01" * 12), "t": DatetimeMS(-5), "m": "s", "f": True, "s": "é"},
    {"t": 5, "m": [3, {"z": 1, "y": 2}], "r": Regex("a", "i"), "c": Code("x", {"q": 1})},
    {"x": {"y": {"z": []}}, "m": {"k": b"\x00\x01"}},
]
raws = [bson.encode(d) for d in docs]
seeds = {
    "by_length": bytes([0x04]) + b"".join(raws),
    "ordered": bytes([0x05]) + b"".join(raws),
    "no_meta": bytes([0x00]) + raws[0] + raws[1],
    "limits": bytes([0x1C]) + b"".join(raws),
}
cuts, at = [], 0
for r in raws:
    cuts.append(at)
    at += len(r)
seeds["by_offsets"] = bytes([0x06, len(cuts)]) + b"".join(struct.pack("<H", c) for c in cuts) \
    + b"".join(raws)
for name, data in seeds.items():
    with open(os.path.join(out, "seed_" + name), "wb") as f:
        f.write(data)
PY
}

for t in "${targets[@]}"; do
    corpus=native/fuzz/corpus/$t
    mkdir -p "$corpus"
    if [ -z "$(ls -A "$corpus")" ] && [ "$(type -t "seed_$t")" = function ]; then
        "seed_$t" "$corpus"
    fi
    echo "+ fuzz $t: $RUNS runs, max_len $MAX_LEN"
    (cd native && cargo +nightly fuzz run "$t" -- -runs="$RUNS" -max_len="$MAX_LEN" \
        -timeout="$TIMEOUT" -print_final_stats=1)
done
