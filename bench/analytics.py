"""The five TSBS analytics queries in bucketd and in DuckDB, on the same data, in one run.

    python bench/analytics.py [--measurements 1000000] [--kind int double] [--runs 5]

For each kind (int64 or double metrics, `tsbs.measurements`), the data is loaded into a
bucketd time-series collection (with an index on `tags.hostname` and time, which the
one-host queries use) and into an in-memory DuckDB table (2 threads); each
query runs `--runs` times on both (after one warm-up run), and the medians and their
ratio are printed. The results are checked equal row by row (doubles to 1e-9 relative:
DuckDB sums in another order). Needs the `bench` extra (`pip install -e .[bench]`).

The queries (TSBS devops cpu-only, one random-looking window each):
- single-groupby-1-1-12: max of one field per minute, one host, 12 h;
- lastpoint: the latest measurement per host;
- high-cpu-1: the measurements of one host with usage_user > 90, 12 h;
- double-groupby-1: mean of one field per host per hour, 12 h;
- cpu-max-all-1: max of every field per hour, one host, 8 h.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pymongo
from _common import bucketd, peak_rss_mb
from tsbs import FIELDS, START, measurements

BATCH = 1000
HOST = "host_7"
F = FIELDS[0]
T0 = START + dt.timedelta(hours=5, seconds=30)  # windows not aligned to their bins
T12 = T0 + dt.timedelta(hours=12)
T8 = T0 + dt.timedelta(hours=8)


def load(coll: Any, kind: str, n: int) -> dict[str, np.ndarray]:
    """Insert the measurements into `coll`; the same rows as numpy columns for DuckDB."""
    cols: dict[str, list[Any]] = {"time": [], "hostname": [], **{f: [] for f in FIELDS}}
    batch: list[dict[str, Any]] = []
    for doc in measurements(n, kind=kind):
        cols["time"].append(doc["time"])
        cols["hostname"].append(doc["tags"]["hostname"])
        for f in FIELDS:
            cols[f].append(doc[f])
        batch.append(doc)
        if len(batch) == BATCH:
            coll.insert_many(batch, ordered=False)
            batch = []
    if batch:
        coll.insert_many(batch, ordered=False)
    out = {"time": np.array(cols["time"], dtype="datetime64[ms]"),
           "hostname": np.array(cols["hostname"], dtype=object)}
    for f in FIELDS:
        out[f] = np.array([int(v) for v in cols[f]] if kind == "int" else cols[f],
                          dtype=np.int64 if kind == "int" else np.float64)
    return out


def mongo_queries(c: Any) -> dict[str, Callable[[], list[tuple[Any, ...]]]]:
    def rows(pipeline: list[dict[str, Any]], key: Callable[[dict[str, Any]], tuple[Any, ...]]
             ) -> Callable[[], list[tuple[Any, ...]]]:
        return lambda: [key(d) for d in c.aggregate(pipeline)]

    return {
        "single-groupby-1-1-12": rows([
            {"$match": {"tags.hostname": HOST, "time": {"$gte": T0, "$lt": T12}}},
            {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "minute"}},
                        "max": {"$max": f"${F}"}}},
            {"$sort": {"_id": 1}}], lambda d: (d["_id"], d["max"])),
        "lastpoint": rows([
            {"$sort": {"tags.hostname": 1, "time": -1}},
            {"$group": {"_id": "$tags.hostname", "last": {"$first": "$$ROOT"}}},
            {"$sort": {"_id": 1}}],
            lambda d: (d["_id"], d["last"]["time"], *(d["last"][f] for f in FIELDS))),
        "high-cpu-1": rows([
            {"$match": {"tags.hostname": HOST, "time": {"$gte": T0, "$lt": T12},
                        F: {"$gt": 90}}},
            {"$sort": {"time": 1}}],
            lambda d: (d["time"], *(d[f] for f in FIELDS))),
        "double-groupby-1": rows([
            {"$match": {"time": {"$gte": T0, "$lt": T12}}},
            {"$group": {"_id": {"h": "$tags.hostname",
                                "t": {"$dateTrunc": {"date": "$time", "unit": "hour"}}},
                        "mean": {"$avg": f"${F}"}}},
            {"$sort": {"_id.h": 1, "_id.t": 1}}],
            lambda d: (d["_id"]["h"], d["_id"]["t"], d["mean"])),
        "cpu-max-all-1": rows([
            {"$match": {"tags.hostname": HOST, "time": {"$gte": T0, "$lt": T8}}},
            {"$group": {"_id": {"$dateTrunc": {"date": "$time", "unit": "hour"}},
                        **{f: {"$max": f"${f}"} for f in FIELDS}}},
            {"$sort": {"_id": 1}}], lambda d: (d["_id"], *(d[f] for f in FIELDS))),
    }


def duck_queries(con: Any) -> dict[str, Callable[[], list[tuple[Any, ...]]]]:
    def rows(sql: str, *params: Any) -> Callable[[], list[tuple[Any, ...]]]:
        return lambda: con.execute(sql, list(params)).fetchall()

    all_f = ", ".join(FIELDS)
    return {
        "single-groupby-1-1-12": rows(
            f"SELECT date_trunc('minute', time) AS m, max({F}) FROM cpu WHERE hostname = ? "
            "AND time >= ? AND time < ? GROUP BY m ORDER BY m", HOST, T0, T12),
        "lastpoint": rows(
            f"SELECT c.hostname, c.time, {', '.join('c.' + f for f in FIELDS)} FROM cpu c "
            "JOIN (SELECT hostname, max(time) AS mt FROM cpu GROUP BY hostname) m "
            "ON c.hostname = m.hostname AND c.time = m.mt ORDER BY c.hostname"),
        "high-cpu-1": rows(
            f"SELECT time, {all_f} FROM cpu WHERE hostname = ? AND time >= ? AND time < ? "
            f"AND {F} > 90 ORDER BY time", HOST, T0, T12),
        "double-groupby-1": rows(
            f"SELECT hostname, date_trunc('hour', time) AS h, avg({F}) FROM cpu "
            "WHERE time >= ? AND time < ? GROUP BY hostname, h ORDER BY hostname, h", T0, T12),
        "cpu-max-all-1": rows(
            "SELECT date_trunc('hour', time) AS h, " + ", ".join(f"max({f})" for f in FIELDS)
            + " FROM cpu WHERE hostname = ? AND time >= ? AND time < ? GROUP BY h ORDER BY h",
            HOST, T0, T8),
    }


def _norm(v: Any) -> Any:
    if isinstance(v, dt.datetime):
        return v.replace(tzinfo=None)
    if isinstance(v, (int, float)):
        return float(v)
    return v


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        for x, y in zip(map(_norm, ra), map(_norm, rb), strict=True):
            if type(x) is float and type(y) is float:
                if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                    return False
            elif x != y:
                return False
    return True


def median_ms(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--measurements", type=int, default=1_000_000)
    ap.add_argument("--kind", nargs="+", choices=("int", "double"), default=["int", "double"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", nargs="*", help="run only these queries")
    args = ap.parse_args()
    n = args.measurements
    with bucketd() as server:
        client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(server.uri)
        db = client.bench
        for kind in args.kind:
            coll = db[f"cpu_{kind}"]
            db.create_collection(coll.name, timeseries={
                "timeField": "time", "metaField": "tags", "granularity": "seconds"})
            t = time.perf_counter()
            cols = load(coll, kind, n)
            # what a user of one-host queries creates: they then read only that host's buckets
            coll.create_index([("tags.hostname", 1), ("time", 1)])
            print(f"{kind}: {n:,} measurements loaded in {time.perf_counter() - t:.1f} s")
            con = duckdb.connect(config={"threads": 2})
            con.register("src", cols)
            con.execute("CREATE TABLE cpu AS SELECT * FROM src")
            mq, dq = mongo_queries(coll), duck_queries(con)
            print(f"{'query':<24}{'rows':>7}{'DuckDB ms':>11}{'bucketd ms':>12}"
                  f"{'ratio':>8}  equal")
            for name in mq:
                if args.only and name not in args.only:
                    continue
                got, want = mq[name](), dq[name]()
                ok = same(got, want)
                d_ms = median_ms(dq[name], args.runs)
                b_ms = median_ms(mq[name], args.runs)
                print(f"{name:<24}{len(want):>7,}{d_ms:>11.1f}{b_ms:>12.1f}"
                      f"{b_ms / d_ms:>7.1f}x  {'yes' if ok else 'NO'}")
            con.close()
        print(f"server peak RSS: {peak_rss_mb(server.proc.pid):.0f} MiB")
        client.close()


if __name__ == "__main__":
    main()
