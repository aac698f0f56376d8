"""The reopening cascade of round-robin ingest, in process and in a deterministic order.

Two clients sending the batches of one TSBS stream alternately reach the server in an
order that varies from run to run, and with it how often buckets are reopened: the
figures of `ingest.py --runs tsbs --deal fixed` move with that count. This runs the same order every
time: the even batches (stream A) and the odd ones (stream B), B `--lead` batches ahead,
through the bucket catalog, `StoredBuckets` over a real SQLite buckets collection, and the
group commit (a flush every `--flush-every` batches), as the storage thread does. The
baseline, run first, is the same batches in time order (lead 0).

Prints per run the CPU microseconds per measurement (best of `--repeat`), the buckets
inserted and reopened, and the cost of one reopening with what follows it: the extra CPU
over the baseline divided by the reopenings.

Usage: python bench/reopening.py [--measurements 200000] [--lead 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _inprocess import create_buckets, ingest, open_catalog  # noqa: E402
from catalog import _batches  # noqa: E402

from storage.vocabulary.raw_documents import RawDocuments  # noqa: E402


@dataclass
class Run:
    cpu_us: float       # CPU microseconds per measurement
    inserts: int        # buckets inserted
    reopened: int       # buckets reopened (from storage or pending writes)


def _order(batches: list[RawDocuments], lead: int) -> list[RawDocuments]:
    """Stream A (even batches) and stream B (odd), interleaved with B `lead` ahead."""
    a, b = batches[0::2], batches[1::2]
    if lead == 0:
        return batches
    order = list(b[:lead])
    for i, batch in enumerate(a):
        order.append(batch)
        if i + lead < len(b):
            order.append(b[i + lead])
    return order


def _run(order: list[RawDocuments], n: int, flush_every: int) -> Run:
    path = tempfile.mkdtemp(prefix="bucketd-reopening-")
    try:
        cat = open_catalog(path)
        create_buckets(cat)
        cpu, catalog = ingest(cat, order, flush_every)
        stats = catalog.execution_stats("db.c")
        cat.close()
        return Run(cpu / n * 1e6, stats.numBucketInserts, stats.numBucketsReopened)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measurements", type=int, default=200_000)
    ap.add_argument("--lead", type=int, default=3)
    ap.add_argument("--flush-every", type=int, default=12)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    batches = _batches(args.measurements, 100)
    runs = {}
    for lead in (0, args.lead):
        order = _order(batches, lead)
        best = min((_run(order, args.measurements, args.flush_every)
                    for _ in range(args.repeat)), key=lambda r: r.cpu_us)
        runs[lead] = best
        print(f"lead {lead}: {best.cpu_us:6.2f} µs/measurement  "
              f"{best.inserts:,} buckets inserted, {best.reopened:,} reopened", flush=True)
    base, led = runs[0], runs[args.lead]
    if led.reopened:
        per = (led.cpu_us - base.cpu_us) * args.measurements / led.reopened
        print(f"one reopening with what follows it: {per:,.0f} µs "
              f"(CPU per measurement {led.cpu_us / base.cpu_us:.2f} times the baseline's)")


if __name__ == "__main__":
    main()
