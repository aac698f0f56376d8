"""Data survives a clean restart; acknowledged `j: true` writes survive kill -9."""

from __future__ import annotations

import datetime
import itertools
import random
import threading
import time
from collections.abc import Iterator

import pymongo
import pytest
from pymongo.write_concern import WriteConcern

from ..conftest import start_server

pytestmark = pytest.mark.slow


def test_restart_keeps_everything(tmp_path) -> None:
    proc = start_server(tmp_path)
    with pymongo.MongoClient(proc.uri) as c:
        db = c.persist
        db.create_collection("plain")
        db.create_collection("checked", validator={"a": {"$type": "number"}})
        db.plain.insert_many([{"_id": i, "a": i} for i in range(100)])
        db.plain.create_index([("a", -1)], name="a_desc")
        db.plain.create_index("t", expireAfterSeconds=60)
        c.other.things.insert_one({"x": 1})
    assert proc.stop() == 0
    assert '"Storage closed cleanly"' in proc.log_text()
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            assert set(c.list_database_names()) >= {"persist", "other"}
            db = c.persist
            assert sorted(db.list_collection_names()) == ["checked", "plain"]
            opts = db.checked.options()
            assert opts["validator"] == {"a": {"$type": "number"}}
            assert db.plain.count_documents({}) == 100
            assert [ix["name"] for ix in db.plain.list_indexes()] == ["_id_", "a_desc", "t_1"]
            assert db.plain.index_information()["t_1"]["expireAfterSeconds"] == 60
            plan = db.plain.find({"a": 5}).explain()["queryPlanner"]["winningPlan"]
            assert plan["inputStage"]["indexName"] == "a_desc"
            assert db.plain.find_one({"a": 5})["_id"] == 5
    finally:
        proc.stop()


def _crash_once(tmp_path, seed: int) -> None:
    rnd = random.Random(seed)
    proc = start_server(tmp_path)
    acked: list[int] = []
    stop = threading.Event()

    def batches() -> Iterator[list[dict]]:
        for i in itertools.count(seed * 1_000_000, 5):
            yield [{"_id": i + k, "pad": "x" * rnd.randint(0, 200)} for k in range(5)]

    t = threading.Thread(target=_journaled_writes,
                         args=(proc.uri, "w", batches(), "_id", True, acked, stop))
    t.start()
    time.sleep(rnd.uniform(0.05, 0.6))
    proc.kill()
    stop.set()
    t.join(10)
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            coll = c.crash.w
            present = {d["_id"] for d in coll.find({}, {"_id": 1})}
            missing = [i for i in acked if i not in present]
            assert not missing, f"{len(missing)} acknowledged documents lost"
            assert c.crash.command("validate", "w")["valid"] is True
    finally:
        proc.stop()


def test_kill_minus_nine_loses_no_acknowledged_write(tmp_path) -> None:
    for seed in range(20):
        _crash_once(tmp_path, seed + 1)


def _measurements(start: int, n: int) -> list[dict]:
    t0 = datetime.datetime(2024, 1, 1)
    return [{"t": t0 + datetime.timedelta(seconds=start + i), "m": (start + i) % 7,
             "v": start + i} for i in range(n)]


def test_time_series_inserts_survive_kill_minus_nine(tmp_path) -> None:
    """Bucket writes are group-committed (storage.timeseries.pending_writes): `j: true` writes them
    before the reply, and `j: false` ones are written within the commit interval even
    when no other command comes, as mongod's journal flush does."""
    proc = start_server(tmp_path, "--setParameter", "journalCommitInterval=50")
    try:
        # closing a client after a kill -9 must not wait long to end its sessions
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=500) as c:
            c.ts.create_collection("j", timeseries={"timeField": "t", "metaField": "m"})
            c.ts.create_collection("w", timeseries={"timeField": "t", "metaField": "m"})
            journaled = c.ts.get_collection("j", write_concern=WriteConcern(w=1, j=True))
            for b in range(5):
                journaled.insert_many(_measurements(b * 100, 100))
            proc.kill()  # no command after the last reply: nothing else flushed them
        proc = start_server(tmp_path, "--setParameter", "journalCommitInterval=50")
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=500) as c:
            assert sorted(d["v"] for d in c.ts.j.find()) == list(range(500))
            for b in range(5):
                c.ts.w.insert_many(_measurements(b * 100, 100))
            time.sleep(0.5)   # ten commit intervals, without a command
            proc.kill()
        proc = start_server(tmp_path)
        with pymongo.MongoClient(proc.uri) as c:
            assert sorted(d["v"] for d in c.ts.w.find()) == list(range(500))
            assert c.ts.w.count_documents({"m": 3}) == len([v for v in range(500) if v % 7 == 3])
            for b in range(5):
                c.ts.w.insert_many(_measurements(1000 + b * 100, 100))
        assert proc.stop() == 0  # a clean stop writes what is pending
        proc = start_server(tmp_path)
        with pymongo.MongoClient(proc.uri) as c:
            assert c.ts.w.count_documents({}) == 1000
            assert c.ts.command("validate", "system.buckets.w")["valid"] is True
    finally:
        proc.stop()


def _journaled_writes(uri: str, name: str, batches: Iterator[list[dict]], key: str,
                      ordered: bool, acked: list[int], stop: threading.Event) -> None:
    """`insert_many` of each batch into crash.<name> with `j: true` until stopped or the
    server dies; `acked` gets the `key` of each acknowledged document."""
    c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=2000, socketTimeoutMS=2000,
                            retryWrites=False)
    coll = c.crash.get_collection(name, write_concern=WriteConcern(w=1, j=True))
    try:
        for batch in batches:
            if stop.is_set():
                return
            try:
                coll.insert_many(batch, ordered=ordered)
            except pymongo.errors.PyMongoError:
                return
            acked.extend(d[key] for d in batch)
    finally:
        c.close()


def _measurement_batches(seed: int) -> Iterator[list[dict]]:
    """Batches of 50 measurements at out-of-order times, half under ten shared meta
    values, half each under its own; `i` numbers them."""
    rnd = random.Random(seed)
    t0 = datetime.datetime(2024, 1, 1)
    for i in itertools.count(seed * 1_000_000, 50):
        yield [{"t": t0 + datetime.timedelta(seconds=rnd.randint(0, 7200)),
                "m": {"host": (i + k) % 10 if k % 2 else f"own-{i + k}", "dc": "x"},
                "i": i + k, "v": rnd.random(), "s": "x" * rnd.randint(0, 40)}
               for k in range(50)]


def test_native_time_series_ingest_survives_kill_minus_nine(tmp_path) -> None:
    """20 crashes in the middle of `j: true` time-series inserts (out-of-order times,
    shared and own meta values): after each, every acknowledged measurement is there
    exactly once and the buckets collection validates."""
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.crash.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
        all_acked: list[int] = []
        for seed in range(1, 21):
            acked: list[int] = []
            stop = threading.Event()
            t = threading.Thread(target=_journaled_writes, args=(
                proc.uri, "ts", _measurement_batches(seed), "i", bool(seed % 2), acked, stop))
            t.start()
            time.sleep(random.Random(seed).uniform(0.1, 0.6))
            proc.kill()
            stop.set()
            t.join(10)
            all_acked.extend(acked)
            proc = start_server(tmp_path)
            with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=5000) as c:
                seen = [d["i"] for d in c.crash.ts.find({}, {"_id": 0, "i": 1})]
                present = set(seen)
                assert len(present) == len(seen), "a measurement is there twice"
                missing = [i for i in all_acked if i not in present]
                assert not missing, f"cycle {seed}: {len(missing)} acknowledged lost"
                counts = sum(b["control"]["count"]
                             for b in c.crash["system.buckets.ts"].find({}, {"control": 1}))
                assert counts == len(seen)
        assert all_acked, "no insert was acknowledged before a crash"
        with pymongo.MongoClient(proc.uri) as c:
            assert c.crash.command("validate", "system.buckets.ts")["valid"] is True
    finally:
        proc.stop()
