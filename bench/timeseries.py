"""Time-series ingest and query figures on a TSBS-shaped workload (devops cpu-only).

    python bench/timeseries.py [--measurements 1000000] [--kind int|double] [--clients 2]

Ingest, as TSBS loads: the data is generated first, then batches of 1000 of the one
time-ordered stream go round-robin to N client processes that `insert_many` them into a
time-series collection -> measurements/s, next to the same clients against a
canned-reply server (`_canned.py`: the floor of this machine, same run); then bytes on disk per measurement, against the same
data in an ordinary collection (same run, same machine); peak server RSS. Queries
(median of several runs): max of one field per minute for one host over 12 hours;
last point per host; hosts whose max exceeds 90 in an hour; mean of all fields per
host per hour over a day; a full scan with a filter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pymongo
from _common import bucketd, dir_bytes, peak_rss_mb
from tsbs import FIELDS, START, measurements

BATCH = 1000
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(uri: str, coll: str, kind: str, total: int, clients: int, me: int, split: str,
          ready: mp.Barrier, q: mp.Queue) -> None:
    # TSBS's loader: the data is generated beforehand and batches of the one time-ordered
    # stream go round-robin to the workers, so all clients insert at about the same times.
    # `split="time"` gives each client a contiguous part of the time range instead (a
    # backfill beside live writes: every batch reopens the other client's bucket).
    nbatches = -(-total // BATCH)
    mine = ((lambda b: b % clients == me) if split == "round-robin"
            else (lambda b: b * clients // nbatches == me))
    batches = [batch for b, batch in enumerate(_batches(total, kind)) if mine(b)]
    client: pymongo.MongoClient = pymongo.MongoClient(uri)
    c = client.bench[coll]
    client.admin.command("ping")
    ready.wait()
    n = 0
    for batch in batches:
        c.insert_many(batch, ordered=False)
        n += len(batch)
    client.close()
    q.put(n)


def _batches(total: int, kind: str) -> Iterator[list[dict]]:
    batch: list[dict] = []
    for doc in measurements(total, kind=kind):
        batch.append(doc)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def ingest(uri: str, coll: str, kind: str, total: int, clients: int,
           split: str = "round-robin") -> float:
    q: mp.Queue = mp.Queue()
    ready = mp.Barrier(clients + 1)
    procs = [mp.Process(target=_load, args=(uri, coll, kind, total, clients, i, split, ready, q))
             for i in range(clients)]
    for p in procs:
        p.start()
    ready.wait()  # every client has generated its batches and connected
    t0 = time.perf_counter()
    done = sum(q.get() for _ in procs)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join()
    return done / elapsed


@contextmanager
def canned_server() -> Iterator[str]:
    """The floor: the same clients against a server that acknowledges without work."""
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "_canned.py")],
                            stdout=subprocess.PIPE)
    try:
        yield f"mongodb://127.0.0.1:{int(proc.stdout.readline())}/?directConnection=true"
    finally:
        proc.kill()
        proc.wait()


def median_ms(fn, runs: int = 5) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def queries(db) -> dict[str, float]:
    c = db.cpu
    t12 = START + dt.timedelta(hours=12)
    t1 = START + dt.timedelta(hours=1)
    t24 = START + dt.timedelta(hours=24)
    f = FIELDS[0]
    return {
        "max per minute, 1 host, 12 h": median_ms(lambda: list(c.aggregate([
            {"$match": {"tags.hostname": "host_7", "time": {"$gte": START, "$lt": t12}}},
            {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}},
                        "max": {"$max": f"${f}"}}}, {"$sort": {"_id": 1}}]))),
        "last point per host": median_ms(lambda: list(c.aggregate([
            {"$sort": {"tags.hostname": 1, "time": -1}},
            {"$group": {"_id": "$tags.hostname", "last": {"$first": "$$ROOT"}}}]))),
        "hosts with max > 90 in an hour": median_ms(lambda: list(c.aggregate([
            {"$match": {"time": {"$gte": START, "$lt": t1}}},
            {"$group": {"_id": "$tags.hostname", "max": {"$max": f"${f}"}}},
            {"$match": {"max": {"$gt": 90}}}]))),
        "mean of all fields per host per hour, 1 day": median_ms(lambda: list(c.aggregate([
            {"$match": {"time": {"$gte": START, "$lt": t24}}},
            {"$group": {"_id": {"h": "$tags.hostname",
                                "t": {"$dateTrunc": {"date": "$time", "unit": "hour"}}},
                        **{k: {"$avg": f"${k}"} for k in FIELDS}}}])), runs=3),
        "full scan with a filter": median_ms(lambda: sum(
            1 for _ in c.find({f: {"$gt": 95}}, {"_id": 0, "time": 1})), runs=3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--measurements", type=int, default=1_000_000)
    ap.add_argument("--kind", choices=("int", "double"), default="int")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--split", choices=("round-robin", "time"), default="round-robin",
                    help="how batches go to clients (round-robin as TSBS, or time ranges)")
    ap.add_argument("--skip-plain", action="store_true",
                    help="do not load the ordinary-collection baseline")
    args = ap.parse_args()
    n = args.measurements
    with bucketd() as server:
        client: pymongo.MongoClient = pymongo.MongoClient(server.uri)
        db = client.bench
        db.create_collection("cpu", timeseries={"timeField": "time", "metaField": "tags",
                                                "granularity": "seconds"})
        with canned_server() as floor_uri:
            floor = ingest(floor_uri, "cpu", args.kind, n, args.clients, args.split)
        rate = ingest(server.uri, "cpu", args.kind, n, args.clients, args.split)
        ts_stats = db.command("collStats", "cpu")
        ts_disk = ts_stats["storageSize"] + ts_stats["totalIndexSize"]
        print(f"ingest ({args.kind}, {n:,} measurements, {args.clients} clients, "
              f"{args.split}): "
              f"{rate:,.0f} measurements/s; the same clients against a canned-reply server: "
              f"{floor:,.0f}/s (ratio {rate / floor:.2f})")
        print(f"buckets: {ts_stats['timeseries']['bucketCount']:,}, "
              f"{ts_disk / n:.1f} bytes/measurement on disk (data + indexes)")
        print(f"server peak RSS after ingest: {peak_rss_mb(server.proc.pid):.0f} MiB")
        for name, ms in queries(db).items():
            print(f"query  {name:<46} median {ms:9.1f} ms")
        if not args.skip_plain:
            plain_rate = ingest(server.uri, "plain", args.kind, n, args.clients, args.split)
            ps = db.command("collStats", "plain")
            plain_disk = ps["storageSize"] + ps["totalIndexSize"]
            print(f"ordinary collection: {plain_rate:,.0f} docs/s, "
                  f"{plain_disk / n:.1f} bytes/measurement -> time-series uses "
                  f"{ts_disk / plain_disk:.2%} of it")
        print(f"data directory: {dir_bytes(server.dbpath) / 2**20:.0f} MiB; "
              f"server peak RSS: {peak_rss_mb(server.proc.pid):.0f} MiB")
        client.close()


if __name__ == "__main__":
    main()
