"""The storage floor of time-series ingest: a run's bucket writes replayed on SQLite alone.

A run goes in process through the bucket catalog, `StoredBuckets` over a SQLite buckets
collection (default index) and the group commit, a flush every `--flush-every` batches
as the storage thread does (`bench/reopening.py` does the same). Every statement the
engine executes to write (records, index entries, each flush's BEGIN and COMMIT) is
recorded, then replayed on a copy of the database as it was before the run. The replay
is what writing those bucket documents and their index keys costs in this engine,
whatever computes them: a floor under any implementation that stores MongoDB's buckets
in SQLite per group commit.

Runs, as in `bench/ingest.py`: `tsbs` (100 hosts, time order), `highcard` (100,000 series
of 10 measurements: every batch writes 1000 buckets), `backfill` (the tsbs batches newest
first). Printed per run, in CPU microseconds per measurement (best of `--repeat`):
`bson.decode_all` of the batches (the per-measurement work of the ingest benchmark's
decode floor), the replay, and the whole path; the bucket writes per 1000 measurements;
and replay ÷ decode: above 1, writing the buckets alone takes longer than the decode
floor's whole work, and no such implementation reaches that floor on this run.

Usage: python bench/bucket_writes.py [--measurements 200000] [--runs tsbs,highcard,backfill]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _inprocess import create_buckets, ingest, open_catalog  # noqa: E402
from catalog import _batches, _decode  # noqa: E402

from server.collector import tune_collector  # noqa: E402
from storage.vocabulary.raw_documents import RawDocuments  # noqa: E402

_HOSTS = {"tsbs": 100, "highcard": 100_000, "backfill": 100}

# (sql, rows, True) as run by executemany, (sql, params, False) by execute
Statement = tuple[str, Any, bool]


@dataclass
class Run:
    path_us: float      # the whole path, CPU µs per measurement
    replay_us: float    # the write statements alone
    writes: int         # records written (inserted or updated)


def _recording(engine: Any, log: list[Statement]) -> None:
    """Record the statements `engine` executes (not its reads) into `log`, as it runs
    them: the group commit's (nothing else writes while a batch is ingested)."""
    execmany, execute = engine._execmany, engine._exec

    def recorded_many(sql: str, rows: Iterable[Any]) -> int:
        rows = list(rows)
        log.append((sql, rows, True))
        written: int = execmany(sql, rows)  # the engine checks the rows its updates changed
        return written

    def recorded(sql: str, params: Any = ()) -> None:
        log.append((sql, params, False))
        execute(sql, params)

    engine._execmany, engine._exec = recorded_many, recorded


def _run(batches: list[RawDocuments], n: int, flush_every: int) -> Run:
    base = tempfile.mkdtemp(prefix="bucketd-bucket-writes-")
    try:
        live, before = Path(base, "live"), Path(base, "before")
        cat = open_catalog(str(live))
        create_buckets(cat)
        cat.close()
        shutil.copytree(live, before)
        cat = open_catalog(str(live))
        log: list[Statement] = []
        _recording(cat.engine, log)
        cpu, _catalog = ingest(cat, batches, flush_every)
        cat.close()
        records = sum(len(rows) for sql, rows, many in log
                      if many and sql.startswith(('INSERT INTO "r_', 'UPDATE "r_')))
        return Run(cpu / n * 1e6, _replay(before, log) / n * 1e6, records)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _replay(before: Path, log: list[Statement]) -> float:
    """CPU seconds to execute `log` on the engine's database as it was before the run."""
    cat = open_catalog(str(before))
    conn: sqlite3.Connection = cat.engine._conn  # the engine's connection, its settings
    t0 = time.process_time()
    for sql, rows, many in log:
        if many:
            conn.executemany(sql, rows)
        else:
            conn.execute(sql, rows)
    cpu = time.process_time() - t0
    cat.close()
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measurements", type=int, default=200_000)
    ap.add_argument("--runs", default="tsbs,highcard,backfill")
    ap.add_argument("--flush-every", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    n = args.measurements
    tune_collector()  # as the server runs
    print(f"{n:,} measurements per run, batches of 1000, a flush every {args.flush_every}; "
          f"CPU µs per measurement, best of {args.repeat}")
    print(f"{'run':<9} {'decode_all':>10} {'replay':>8} {'whole path':>11} "
          f"{'writes/1000':>12} {'replay÷decode':>14}")
    for run in args.runs.split(","):
        batches = _batches(n, _HOSTS[run])
        if run == "backfill":
            batches.reverse()
        decode = min(_decode(batches) for _ in range(args.repeat)) / n * 1e6
        runs = [_run(batches, n, args.flush_every) for _ in range(args.repeat)]
        path = min(r.path_us for r in runs)
        replay = min(r.replay_us for r in runs)
        print(f"{run:<9} {decode:>10.2f} {replay:>8.2f} {path:>11.2f} "
              f"{runs[0].writes / n * 1000:>12.0f} {replay / decode:>14.2f}", flush=True)


if __name__ == "__main__":
    main()
