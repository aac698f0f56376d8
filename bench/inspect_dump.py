"""Benchmark `bucketd inspect` on a mongodump-style .bson file of a buckets collection.

Makes the dump once (a bucketd from this checkout, `--hosts` series of TSBS-cpu-like
measurements a minute apart for `--hours` hours: an hour's bucket per series and hour,
60 measurements of 10 int64 fields and a double each), then runs the inspection in this
process with the report written to a sink, and prints buckets per CPU second (best of
`--repeat`; wall time on a shared machine says more about the neighbours) for the text
report, `--json` and `--values`.

Usage: python bench/inspect_dump.py [--hosts 500] [--hours 8] [--repeat 3] [--dump PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import random
import tempfile
import time

import bson
import pymongo
from _common import bucketd  # puts the checkout on sys.path
from bson.raw_bson import RawBSONDocument

from server import inspect_cli

FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
          "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]


def make_dump(path: str, hosts: int, hours: int) -> int:
    """Write the buckets of a fresh time-series collection to `path`; the bucket count."""
    rnd = random.Random(7)
    t0 = dt.datetime(2016, 1, 1)
    with bucketd() as server, pymongo.MongoClient(server.uri) as client:
        db = client.bench_inspect
        db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags"})
        for minute in range(hours * 60):
            t = t0 + dt.timedelta(minutes=minute)
            db.cpu.insert_many([
                {"time": t, "tags": {"hostname": f"host_{h}", "region": f"r{h % 7}"},
                 **{f: rnd.randrange(100) for f in FIELDS}, "load": rnd.random()}
                for h in range(hosts)], ordered=False)
        raw = db.get_collection("system.buckets.cpu").with_options(
            codec_options=bson.CodecOptions(document_class=RawBSONDocument))
        n = 0
        with open(path, "wb") as f:
            for doc in raw.find():
                f.write(doc.raw)
                n += 1
    return n


def run(path: str, *flags: str) -> float:
    """Seconds for one inspection of `path` (report to a sink)."""
    sink = io.StringIO()
    started = time.process_time()
    with contextlib.redirect_stdout(sink):
        code = inspect_cli.main([path, *flags])
    elapsed = time.process_time() - started
    assert code == 0, code
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--hours", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dump", default=os.path.join(tempfile.gettempdir(),
                                                   "bucketd-bench-inspect.bson"),
                    help="the dump to use (made when missing)")
    args = ap.parse_args()
    if not os.path.exists(args.dump):
        n = make_dump(args.dump, args.hosts, args.hours)
        print(f"made {args.dump}: {n} buckets")
    with open(args.dump, "rb") as f:
        n = sum(1 for _ in inspect_cli.iter_bson_file(f))
    size_mb = os.path.getsize(args.dump) / 1e6
    print(f"dump: {n} buckets, {size_mb:.1f} MB")
    for label, flags in (("text", ()), ("json", ("--json",)), ("values", ("--values",))):
        best = min(run(args.dump, *flags) for _ in range(args.repeat))
        print(f"{label:>6}: {n / best:10.0f} buckets/s  ({best:.2f} s)")


if __name__ == "__main__":
    main()
