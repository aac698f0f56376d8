"""The bucket catalog's memory figure against the process's resident memory, in process.

N distinct meta values of one measurement each (TSBS tags with a distinct hostname,
10 int64 fields), sent as document sequences in batches of 1000 through `insert_batch` +
`commit` (the native path, as the server's), the writes dropped (no storage). Every
`--every` measurements it prints RSS growth since the start, the catalog's
`memoryUsage`, both per meta value, their ratio, and the open and archived buckets; once
with the default `timeseriesIdleBucketExpiryMemoryUsageThreshold` and once with the
threshold given by `--threshold-mb` (the catalog then keeps its figure below it, and RSS
should level off near it).

Usage: python bench/catalog_memory.py [--metas 200000] [--threshold-mb 50] [--every 50000]
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
from array import array
from pathlib import Path

import bson
from bson import Int64

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tsbs import FIELDS, START, host_tags  # noqa: E402

from storage.timeseries.bucket_catalog import BucketCatalog  # noqa: E402
from storage.timeseries.constants import TimeseriesParameters  # noqa: E402
from storage.timeseries.options import TimeseriesOptions  # noqa: E402
from storage.vocabulary.raw_documents import RawDocuments  # noqa: E402

OPTIONS = TimeseriesOptions("time", "tags", "seconds", 3600, None)


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def batch(start: int, n: int) -> RawDocuments:
    raws = []
    for h in range(start, start + n):
        doc = {"_id": bson.ObjectId(), "time": START, "tags": host_tags(h)}
        for k, name in enumerate(FIELDS):
            doc[name] = Int64((h * 7 + k) % 100)
        raws.append(bson.encode(doc))
    offsets = array("q")
    at = 0
    for r in raws:
        offsets.append(at)
        at += len(r)
    return RawDocuments(b"".join(raws), offsets)


def run(metas: int, threshold: int, every: int) -> None:
    cat = BucketCatalog(TimeseriesParameters(
        timeseriesIdleBucketExpiryMemoryUsageThreshold=threshold))
    label = "default" if threshold == 0 else f"{threshold / 2**20:.0f} MB"
    print(f"threshold {label} ({cat.params.memory_threshold_bytes() / 2**20:,.0f} MB)")
    print(f"{'metas':>8} {'RSS MB':>8} {'catalog MB':>11} {'RSS B/meta':>11} "
          f"{'cat B/meta':>11} {'cat/RSS':>8} {'open':>8} {'archived':>9}")
    gc.collect()
    base = rss_bytes()
    for start in range(0, metas, 1000):
        docs = batch(start, min(1000, metas - start))
        result = cat.insert_batch("db.c", OPTIONS, docs, None, ordered=False)
        cat.commit(result)
        del result, docs
        done = start + 1000
        if done % every == 0 or done >= metas:
            gc.collect()
            grown = rss_bytes() - base
            mem = cat.memory_usage
            print(f"{done:>8,} {grown / 2**20:>8,.0f} {mem / 2**20:>11,.1f} "
                  f"{grown / done:>11,.0f} {mem / done:>11,.0f} "
                  f"{mem / max(grown, 1):>8.2f} {len(cat.open_buckets()):>8,} "
                  f"{len(cat.archived_buckets()):>9,}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--metas", type=int, default=200_000)
    ap.add_argument("--threshold-mb", type=int, default=50)
    ap.add_argument("--every", type=int, default=50_000)
    ap.add_argument("--threshold", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threshold is not None:
        run(args.metas, args.threshold, args.every)
        return
    # each threshold in a process of its own, so RSS starts from the same place
    for threshold in (0, args.threshold_mb * 2**20):
        subprocess.run([sys.executable, __file__, "--metas", str(args.metas),
                        "--every", str(args.every), "--threshold", str(threshold)],
                       check=True)


if __name__ == "__main__":
    main()
