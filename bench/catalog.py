"""The bucket catalog alone, in process: TSBS batches through `insert_batch` + `commit`.

No server, no wire, no storage: what the storage thread spends per measurement in the
catalog (scan, staging, column appends, min/max, bucket documents), against pymongo's
`bson.decode_all` of the same batches measured in the same run (the per-measurement work
of the ingest benchmark's decode floor). Prints CPU microseconds per measurement (best
of `--repeat`) and the ratio; `--path python` runs the catalog without the native core's
scan, for comparison.

Usage: python bench/catalog.py [--measurements 200000] [--hosts 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from array import array
from pathlib import Path

import bson

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tsbs import measurements  # noqa: E402

from server.collector import tune_collector  # noqa: E402
from storage.timeseries.bucket_catalog import BucketCatalog  # noqa: E402
from storage.timeseries.options import parse_timeseries_options  # noqa: E402
from storage.vocabulary.raw_documents import RawDocuments  # noqa: E402

BATCH = 1000


def _batches(n: int, hosts: int) -> list[RawDocuments]:
    out: list[RawDocuments] = []
    raws: list[bytes] = []
    for doc in measurements(n, hosts=hosts):
        raws.append(bson.encode({"_id": bson.ObjectId(), **doc}))
        if len(raws) == BATCH or len(out) * BATCH + len(raws) == n:
            starts, at = array("q"), 0
            for r in raws:
                starts.append(at)
                at += len(r)
            out.append(RawDocuments(b"".join(raws), starts))
            raws = []
    return out


def _catalog(batches: list[RawDocuments], native: bool) -> float:
    opts = parse_timeseries_options({"timeField": "time", "metaField": "tags"})
    cat = BucketCatalog()
    cat._measurements.scan = native and cat._measurements.scan
    t0 = time.process_time()
    for b in batches:
        r = cat.insert_batch("bench.cpu", opts, b, None, ordered=False)
        for w in r.writes:
            w.document  # noqa: B018 - what the group commit writes
        cat.commit(r)
    return time.process_time() - t0


def _decode(batches: list[RawDocuments]) -> float:
    t0 = time.process_time()
    for b in batches:
        bson.decode_all(b.buffer)
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measurements", type=int, default=200_000)
    ap.add_argument("--hosts", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--path", choices=("native", "python"), default="native")
    args = ap.parse_args()
    batches = _batches(args.measurements, args.hosts)
    n = args.measurements
    tune_collector()  # as the server runs
    catalog, decode = [], []
    for _ in range(args.repeat):
        decode.append(_decode(batches))
        catalog.append(_catalog(batches, args.path == "native"))
    c, d = min(catalog) / n * 1e6, min(decode) / n * 1e6
    print(f"{n:,} measurements, {args.hosts} hosts, batches of {BATCH}, best of {args.repeat}")
    print(f"decode_all (floor)  {d:6.2f} µs/measurement")
    print(f"catalog ({args.path:6})    {c:6.2f} µs/measurement   {d / c:.2f}x the floor's pace")


if __name__ == "__main__":
    main()
