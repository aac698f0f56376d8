"""Crash safety of the SQLite engine: a writer process killed with SIGKILL at a random
moment loses no acknowledged transaction, never half of one, and the store reopens
valid. (The server-level 20-run kill test lives with the end-to-end tests.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from storage import bsonutil
from storage.catalog import Catalog

ROOT = Path(__file__).resolve().parents[3]
BATCH = 10

WRITER = textwrap.dedent("""
    import sys
    from storage.catalog import Catalog

    path, durable = sys.argv[1], sys.argv[2] == "1"
    cat = Catalog.open(path)
    coll = cat.get_or_create_collection("crash", "c")
    coll.create_indexes([{"key": {"batch": 1, "pad": 1}, "name": "batch_pad"}])
    start = coll.count() // %(batch)d
    print("ready", flush=True)
    i = start
    while True:
        docs = [{"_id": i * %(batch)d + j, "batch": i, "pad": "x" * (j * 50)}
                for j in range(%(batch)d)]
        with cat.transaction(durable=durable):
            res = coll.insert_many(docs)
            assert not res.errors, res.errors
            if i %% 7 == 3:  # updates and deletes in the same transaction
                rid = coll.find_id(i * %(batch)d)[0]
                coll.update(rid, {"_id": i * %(batch)d, "batch": i, "pad": "updated"})
        print(i, flush=True)
        i += 1
""") % {"batch": BATCH}


def _run_and_kill(path: str, durable: bool, acks_wanted: int) -> list[int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, path, "1" if durable else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline().strip()
        assert first == "ready", (first, proc.stderr.read() if proc.stderr else "")
        while len(acked) < acks_wanted:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died: {proc.stderr.read() if proc.stderr else ''}")
            acked.append(int(line))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    return acked


@pytest.mark.parametrize("durable", [True, False], ids=["j-true", "j-false"])
def test_sigkill_loses_no_acknowledged_write(tmp_path, durable):
    path = str(tmp_path / "db")
    rnd = random.Random(1234 + durable)
    acked_all: list[int] = []
    for _ in range(3 if durable else 2):
        acked_all += _run_and_kill(path, durable, rnd.randint(5, 60))
        cat = Catalog.open(path)
        try:
            coll = cat.get_collection("crash", "c")
            docs = [bsonutil.decode(raw) for _, raw in coll.scan()]
            batches: dict[int, int] = {}
            for d in docs:
                batches[d["batch"]] = batches.get(d["batch"], 0) + 1
            assert set(acked_all) <= set(batches), "an acknowledged batch is missing"
            assert all(n == BATCH for n in batches.values()), "half a transaction survived"
            assert coll.count() == len(docs)
            result = coll.validate()
            assert result.valid, result.errors
            assert [ix["name"] for ix in coll.list_indexes()] == ["_id_", "batch_pad"]
        finally:
            cat.close()
