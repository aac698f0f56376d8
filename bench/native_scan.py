"""Benchmark the native measurement scan against the Python preparation of a batch.

TSBS-cpu-like measurements: a `time` date, 10 int64 fields (usage_user, ...) and 10
string tags as an object meta (`tags`, fields in TSBS's order, so the scan normalizes
them), `--hosts` hosts, `--batch` measurements per batch (TSBS's 1000). Prints
measurements per second (CPU time, best of `--repeat`) and the CPU nanoseconds per
measurement of:

- python (dicts): `MeasurementPreparer.prepare_all` on the decoded documents (what the
  catalog does today once the wire layer has decoded the batch), warm (shapes and meta
  cache learned), plus `insert_batch`'s grouping and time sort;
- python (bytes): the same from the wire bytes, `bson.decode_all` included;
- native scan: `native_scan.scan` of the wire bytes (validation, time, normalized meta,
  series, sizes, grouping), plus the numpy arrays and groups read back.

Usage: python bench/native_scan.py [--batch 1000] [--hosts 100] [--repeat 7]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bson  # noqa: E402
from bson import Int64  # noqa: E402
from bson.datetime_ms import DatetimeMS  # noqa: E402

from storage.bsonutil import CODEC_OPTIONS  # noqa: E402
from storage.timeseries import native_scan  # noqa: E402
from storage.timeseries.measurements import Measurement, MeasurementPreparer, time_of  # noqa: E402
from storage.timeseries.options import parse_timeseries_options  # noqa: E402

FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
          "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]
TAGS = ["hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
        "service_version", "service_environment"]
OPTIONS = parse_timeseries_options({"timeField": "time", "metaField": "tags"})
T0 = 1_451_606_400_000  # TSBS's 2016-01-01


def batch(n: int, hosts: int, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    tags = [{k: f"{k}_{h % (7 + i)}" if k != "hostname" else f"host_{h}"
             for i, k in enumerate(TAGS)} for h in range(hosts)]
    out = []
    for i in range(n):
        h = i % hosts
        # an _id as drivers add one
        doc = {"_id": bson.ObjectId(), "time": DatetimeMS(T0 + 10_000 * (i // hosts)),
               "tags": tags[h]}
        doc.update({f: Int64(rnd.randrange(100)) for f in FIELDS})
        out.append(doc)
    return out


def group(prepared: list[Measurement]) -> list[list[Measurement]]:
    groups: dict[bytes, list[Measurement]] = {}
    for m in prepared:
        groups.setdefault(m.key, []).append(m)
    for g in groups.values():
        g.sort(key=time_of)
    return list(groups.values())


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--loops", type=int, default=20, help="batches per timed run")
    args = ap.parse_args()
    docs = batch(args.batch, args.hosts)
    buf = b"".join(bson.encode(d, codec_options=CODEC_OPTIONS) for d in docs)
    docs = bson.decode_all(buf, CODEC_OPTIONS)  # as the wire layer hands them over
    prep = MeasurementPreparer()
    prep.prepare_all(docs, OPTIONS, True)  # warm: shapes and meta cache

    def python_dicts() -> None:
        for _ in range(args.loops):
            prepared, _errors = prep.prepare_all(docs, OPTIONS, True)
            group(prepared)

    def python_bytes() -> None:
        for _ in range(args.loops):
            prepared, _errors = prep.prepare_all(bson.decode_all(buf, CODEC_OPTIONS),
                                                 OPTIONS, True)
            group(prepared)

    def native() -> None:
        for _ in range(args.loops):
            b = native_scan.scan(buf, OPTIONS, True)
            assert b is not None
            native_scan.arrays(b)
            native_scan.groups(b)

    def native_only() -> None:
        for _ in range(args.loops):
            native_scan.scan(buf, OPTIONS, True)

    rows = [("python (dicts)", python_dicts), ("python (bytes)", python_bytes)]
    if native_scan.AVAILABLE:
        rows += [("native scan", native_only), ("native scan + arrays/groups", native)]
    else:
        print("(native core not built: python only)")
    n = args.batch * args.loops
    print(f"{args.batch} measurements per batch, {args.hosts} series, "
          f"{len(buf) // args.batch} bytes each; best of {args.repeat}, CPU time")
    print(f"{'path':<30}{'measurements/s':>16}{'ns/measurement':>16}")
    base = None
    for name, fn in rows:
        t = best(fn, args.repeat)
        rate = n / t
        base = base or rate
        print(f"{name:<30}{rate:>16,.0f}{1e9 * t / n:>16,.0f}   x{rate / base:.1f}")


if __name__ == "__main__":
    main()
