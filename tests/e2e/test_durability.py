"""Data survives a clean restart; acknowledged `j: true` writes survive kill -9."""

from __future__ import annotations

import random
import threading
import time

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

    def writer() -> None:
        c = pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=2000, socketTimeoutMS=2000,
                                retryWrites=False)
        coll = c.crash.get_collection("w", write_concern=WriteConcern(w=1, j=True))
        i = seed * 1_000_000
        try:
            while not stop.is_set():
                batch = [{"_id": i + k, "pad": "x" * rnd.randint(0, 200)} for k in range(5)]
                try:
                    coll.insert_many(batch)
                except pymongo.errors.PyMongoError:
                    return
                acked.extend(d["_id"] for d in batch)
                i += 5
        finally:
            c.close()

    t = threading.Thread(target=writer)
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
