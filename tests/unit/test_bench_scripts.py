"""The in-process benchmark scripts still run against the code they measure.

`bench/` drives internals (the bucket catalog, the group commit, the engine's statements)
that change under it, and no figure it prints is checked anywhere else: a script broken
by a refactor is found only when someone next measures. Each runs here on a few thousand
measurements, and what its output must say whatever the machine's speed is checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from storage import native

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                          text=True, timeout=120, cwd=BENCH.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.split()}


def test_bucket_writes_replays_each_runs_writes() -> None:
    rows = _rows(_run("bucket_writes.py", "--measurements", "3000", "--repeat", "1",
                      "--flush-every", "1"))
    # flushed after every batch: each highcard batch writes 1000 new series' buckets, each
    # backfill batch a new bucket for each of the 100 hosts, and each tsbs batch inserts
    # or updates (the group commit's update of many records) each host's one bucket
    writes = {run: int(rows[run][3]) for run in ("tsbs", "highcard", "backfill")}
    assert writes == {"tsbs": 100, "highcard": 1000, "backfill": 100}
    for run in writes:
        decode, replay, whole = map(float, rows[run][:3])
        assert 0 < replay < whole and decode > 0


@pytest.mark.skipif(native.core is None, reason="the native core is not built")
def test_catalog_and_reopening_ingest_a_few_batches() -> None:
    out = _run("catalog.py", "--measurements", "3000", "--repeat", "1")
    assert re.search(r"catalog \(native\)\s+[\d.]+ µs/measurement", out), out
    out = _run("reopening.py", "--measurements", "5000", "--repeat", "1")
    # a lead of 0 keeps each host in its one bucket; a lead makes the cascade open more
    inserted = {int(m[1]): int(m[2]) for m in
                re.finditer(r"lead (\d+):.*?(\d+) buckets inserted", out)}
    assert inserted[0] == 100 and inserted[3] > 100, out


def test_catalog_memory_prints_a_row_per_step_for_each_threshold() -> None:
    out = _run("catalog_memory.py", "--metas", "3000", "--every", "1000", "--threshold-mb", "1")
    metas = [int(m[1].replace(",", "")) for m in
             re.finditer(r"^\s+([\d,]+)\s+\d+\s", out, re.MULTILINE)]
    assert metas == [1000, 2000, 3000] * 2, out  # the default threshold, then 1 MB
