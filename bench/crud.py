"""Ordinary-collection throughput through pymongo: inserts, point finds, a filtered scan.

    python bench/crud.py [--docs 1000000]

Prints inserts/s (insert_many batches of 1000 small documents), point finds/s by
`_id` and by a secondary index (with p50/p99 latency), the time of a filtered scan of
the whole collection, and the server's peak RSS. Figures depend on the machine: compare
runs on the same machine.
"""

from __future__ import annotations

import argparse
import random
import time

import pymongo
from _common import bucketd, peak_rss_mb, percentiles


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=5000)
    args = ap.parse_args()
    with bucketd() as server:
        client: pymongo.MongoClient = pymongo.MongoClient(server.uri)
        coll = client.bench.crud
        rnd = random.Random(1)
        n = args.docs
        t0 = time.perf_counter()
        for start in range(0, n, 1000):
            coll.insert_many([{"_id": i, "k": rnd.randrange(n), "g": i % 100, "s": f"v{i}"}
                              for i in range(start, min(n, start + 1000))], ordered=False)
        insert_s = time.perf_counter() - t0
        print(f"insert_many(1000) x {n // 1000}: {n / insert_s:,.0f} docs/s")

        coll.create_index("k")
        for label, field in (("_id", "_id"), ("secondary index k", "k")):
            lat = []
            for _ in range(args.lookups):
                key = rnd.randrange(n)
                t = time.perf_counter()
                coll.find_one({field: key})
                lat.append(time.perf_counter() - t)
            p = percentiles(lat)
            print(f"point find by {label}: {len(lat) / sum(lat):,.0f} finds/s "
                  f"(p50 {p[50] * 1e6:.0f} us, p99 {p[99] * 1e6:.0f} us)")

        t = time.perf_counter()
        matched = sum(1 for _ in coll.find({"g": 7, "s": {"$gte": "v5"}}, {"_id": 1}))
        scan_s = time.perf_counter() - t
        print(f"filtered collection scan of {n:,} docs: {scan_s:.2f} s "
              f"({n / scan_s:,.0f} docs/s examined, {matched} matched)")
        print(f"server peak RSS: {peak_rss_mb(server.proc.pid):.0f} MiB")
        client.close()


if __name__ == "__main__":
    main()
