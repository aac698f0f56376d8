"""Aggregation throughput: documents per second through $match, $group by $dateTrunc minute
with $avg, $sort and $setWindowFields over generated time-series documents, and peak RSS.

    python bench/query.py [--n 1000000] [--only match,group,sort,window] [--profile]

Documents look like TSBS CPU measurements ({_id, t: date, host, usage_user, usage_system,
temp}); they are generated in memory before timing (generation is not timed). Prints one line
per workload; no assertions (speed is measured, not tested).
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bson import Int64
from bson.datetime_ms import DatetimeMS

from query.context import PipelineContext
from query.pipeline import compile_pipeline

START_MS = 1_700_000_000_000

WORKLOADS: dict[str, list[dict[str, Any]]] = {
    "match": [{"$match": {"usage_user": {"$gt": 50.0}, "host": {"$in": ["host_1", "host_7"]}}}],
    "group": [{"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute"}},
                          "avg_user": {"$avg": "$usage_user"},
                          "max_temp": {"$max": "$temp"}}}],
    "sort": [{"$sort": {"usage_user": -1}}],
    "window": [{"$setWindowFields": {
        "partitionBy": "$host", "sortBy": {"t": 1},
        "output": {"avg10": {"$avg": "$usage_user", "window": {"documents": [-9, 0]}},
                   "runningMax": {"$max": "$temp", "window": {"documents": ["unbounded",
                                                                            "current"]}}}}}],
}


def generate(n: int, hosts: int = 100) -> list[dict[str, Any]]:
    rnd = random.Random(42)
    docs = []
    for i in range(n):
        docs.append({
            "_id": i,
            "t": DatetimeMS(START_MS + (i // hosts) * 1000),
            "host": f"host_{i % hosts}",
            "usage_user": rnd.random() * 100.0,
            "usage_system": rnd.random() * 100.0,
            "temp": Int64(rnd.randrange(20, 90)),
        })
    return docs


def peak_rss_mb() -> float:
    # ru_maxrss is kilobytes on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_one(name: str, docs: list[dict[str, Any]], ctx: PipelineContext) -> tuple[float, int]:
    pipeline = compile_pipeline(WORKLOADS[name], ctx)
    gc.collect()
    t0 = time.perf_counter()
    n_out = 0
    for _ in pipeline.run(docs):
        n_out += 1
    return time.perf_counter() - t0, n_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--only", default="match,group,sort,window")
    ap.add_argument("--profile", action="store_true", help="profile with pyinstrument")
    ap.add_argument("--allow-disk-use", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    docs = generate(args.n)
    print(f"generated {args.n:,} documents in {time.perf_counter() - t0:.1f}s, "
          f"peak RSS {peak_rss_mb():.0f} MB")
    gc.freeze()
    ctx = PipelineContext(allow_disk_use=args.allow_disk_use,
                          memory_limit_bytes=1 << 40 if not args.allow_disk_use else 100 << 20)
    for name in args.only.split(","):
        if args.profile:
            from pyinstrument import Profiler
            prof = Profiler()
            prof.start()
        secs, n_out = run_one(name, docs, ctx)
        if args.profile:
            prof.stop()
            print(prof.output_text(unicode=False, color=False, show_all=False))
        print(f"{name:8s} {args.n / secs:>12,.0f} docs/s   {secs:7.2f}s   {n_out:>9,} out   "
              f"peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
