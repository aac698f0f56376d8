"""TSBS ingest and the five TSBS queries on SQLite and on PostgreSQL, in one run.

    python bench/postgres.py --postgres-uri postgresql://user@host:port/db \\
        [--measurements 200000] [--clients 2] [--configs sqlite,pg1,pg2]

Three configurations, each on fresh data: `sqlite` (one bucketd, the default engine),
`pg1` (one bucketd with --storageEngine postgresql) and `pg2` (two bucketd processes on
one database, the clients split between them). The URI's user must be allowed to create
databases: each PostgreSQL configuration works in a database of its own, dropped after.

Ingest is bench/ingest.py's `tsbs` run: the same pre-encoded batches of 1000 (TSBS devops
cpu-only, 100 hosts) taken in turn by `--clients` client processes (each sends the next
batch not yet taken, as ingest.py's `--deal shared`), into a time-series
collection (timeField `time`, metaField `tags`). Printed: measurements/s, the bucketd
processes' CPU per measurement, and for a PostgreSQL server on this machine (its
data_directory readable) the CPU of its processes per measurement; then the medians of
bench/timeseries.py's five TSBS queries, asked through the first bucketd; with ratios to
SQLite (ingest: rate ÷ SQLite's; queries: time ÷ SQLite's).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pymongo
from _common import bucketd
from ingest import batches_of, cpu_seconds, load
from timeseries import queries

CONFIGS = {"sqlite": "SQLite, 1 bucketd", "pg1": "PostgreSQL, 1 bucketd",
           "pg2": "PostgreSQL, 2 bucketd"}


@contextlib.contextmanager
def scratch_database(base_uri: str) -> Iterator[str]:
    """A fresh database on the server of `base_uri` (its URI), dropped afterwards."""
    name = f"bucketd_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base_uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(base_uri)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(base_uri, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_pids(uri: str) -> list[int]:
    """The processes of the PostgreSQL server at `uri` when it runs on this machine and
    its data directory is readable (postmaster and children), else none."""
    try:
        with psycopg.connect(uri) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        with open(os.path.join(row[0], "postmaster.pid"), encoding="ascii") as f:
            postmaster = int(f.readline())
    except (psycopg.Error, OSError, ValueError, TypeError):
        return []
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), \
                    open(f"/proc/{entry}/stat", encoding="ascii") as f:
                if int(f.read().rpartition(")")[2].split()[1]) == postmaster:
                    pids.append(int(entry))
    return pids


def _alive_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def settled_count(uri: str, total: int) -> int:
    """The measurements the server at `uri` counts, once the other process's last
    acknowledged inserts have reached PostgreSQL (its next group commit, within 100 ms)."""
    deadline = time.monotonic() + 5.0
    with pymongo.MongoClient(uri) as c:
        while True:
            n = c.bench.cpu.count_documents({})
            if n == total or time.monotonic() > deadline:
                return n
            time.sleep(0.1)


def run_config(config: str, batches: list[list[bytes]], clients: int,
               pg_uri: str | None) -> dict[str, object]:
    total = sum(map(len, batches))
    with contextlib.ExitStack() as stack:
        if config == "sqlite":
            servers = [stack.enter_context(bucketd())]
            pg_pids: list[int] = []
        else:
            assert pg_uri is not None
            uri = stack.enter_context(scratch_database(pg_uri))
            args = ("--storageEngine", "postgresql", "--postgresUri", uri)
            servers = [stack.enter_context(bucketd(*args))
                       for _ in range(2 if config == "pg2" else 1)]
            pg_pids = postgres_pids(pg_uri)
        client: pymongo.MongoClient = stack.enter_context(pymongo.MongoClient(servers[0].uri))
        client.bench.create_collection("cpu", timeseries={
            "timeField": "time", "metaField": "tags", "granularity": "seconds"})
        pg_cpu0 = _alive_cpu(pg_pids)
        rate, cpu_us = load([s.uri for s in servers], [s.proc.pid for s in servers],
                            batches, clients)
        pg_cpu = (_alive_cpu(pg_pids) - pg_cpu0) / total * 1e6 if pg_pids else None
        counts = [settled_count(s.uri, total) for s in servers]
        return {"rate": rate, "cpu_us": cpu_us, "pg_cpu_us": pg_cpu, "counts": counts,
                "queries": queries(client.bench)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measurements", type=int, default=200_000)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--configs", default="sqlite,pg1,pg2")
    ap.add_argument("--postgres-uri", default=os.environ.get("BUCKETD_BENCH_POSTGRES_URI"),
                    help="a PostgreSQL user that may create databases "
                         "(default: $BUCKETD_BENCH_POSTGRES_URI)")
    args = ap.parse_args()
    configs = args.configs.split(",")
    if any(c not in CONFIGS for c in configs):
        ap.error(f"--configs: choose among {', '.join(CONFIGS)}")
    if any(c != "sqlite" for c in configs) and not args.postgres_uri:
        ap.error("the PostgreSQL configurations need --postgres-uri")

    batches = batches_of("tsbs", args.measurements)
    print(f"TSBS devops cpu-only: {args.measurements:,} measurements, {args.clients} client "
          f"processes, pre-encoded batches of 1000; {os.cpu_count()} CPUs on this machine")
    results = {}
    for config in configs:
        results[config] = run_config(config, batches, args.clients, args.postgres_uri)
        r = results[config]
        print(f"  {CONFIGS[config]:<24} done: {r['rate']:,.0f} measurements/s", flush=True)
        if r["counts"] != [sum(map(len, batches))] * len(r["counts"]):
            print(f"  WRONG COUNT: the servers count {r['counts']} of "
                  f"{sum(map(len, batches)):,} measurements sent", flush=True)

    base = results.get("sqlite")
    print(f"\n{'ingest':<24} {'meas/s':>10} {'÷SQLite':>8} {'bucketd µs/m':>13} "
          f"{'postgres µs/m':>14}")
    for config, r in results.items():
        ratio = f"{r['rate'] / base['rate']:.2f}" if base else "-"
        pg = f"{r['pg_cpu_us']:.1f}" if r["pg_cpu_us"] is not None else "-"
        print(f"{CONFIGS[config]:<24} {r['rate']:>10,.0f} {ratio:>8} {r['cpu_us']:>13.1f} "
              f"{pg:>14}")
    print("\nquery medians, ms (÷SQLite)")
    names = list(next(iter(results.values()))["queries"])
    header = "".join(f" {CONFIGS[c]:>24}" for c in results)
    print(f"{'':<46}{header}")
    for name in names:
        cells = []
        for r in results.values():
            ms = r["queries"][name]
            ratio = f" ({ms / base['queries'][name]:.2f})" if base else ""
            cells.append(f" {f'{ms:.1f}{ratio}':>24}")
        print(f"{name:<46}{''.join(cells)}")


if __name__ == "__main__":
    main()
