"""Two bucketd processes serving one PostgreSQL database: DDL done through one is seen by
the other's next command, unique indexes hold across them, concurrent inserts through
both count exactly, and a layout-1 schema is migrated at start. Runs when the tests run
on PostgreSQL (BUCKETD_TEST_ENGINE=postgresql, tests/engines.py)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import psycopg
import pymongo
import pytest
from pymongo import WriteConcern
from pymongo.errors import DuplicateKeyError, OperationFailure

from pytest_bucketd import BucketdProcess
from tests.engines import postgres_scratch, test_engine

from ..conftest import SERVER_CMD, engine_args, start_server

pytestmark = pytest.mark.skipif(test_engine() != "postgresql",
                                reason="BUCKETD_TEST_ENGINE=postgresql only")


def _second_server(tmp_path) -> BucketdProcess:
    """Another process on the database of `start_server(tmp_path)`."""
    proc = BucketdProcess(SERVER_CMD, dbpath=str(tmp_path / "b"),
                          extra_args=engine_args(str(tmp_path)))
    proc.start()
    return proc


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Iterator[tuple[pymongo.MongoClient, pymongo.MongoClient]]:
    tmp = tmp_path_factory.mktemp("pair")
    a = start_server(tmp)
    try:
        b = _second_server(tmp)
        try:
            with pymongo.MongoClient(a.uri) as ca, pymongo.MongoClient(b.uri) as cb:
                yield ca, cb
        finally:
            b.stop()
            b.cleanup()
    finally:
        a.stop()


def test_ddl_through_one_is_seen_by_the_other(pair) -> None:
    a, b = pair
    da, db = a.ddl, b.ddl
    da.create_collection("c")
    assert "c" in db.list_collection_names()
    db.c.insert_many([{"_id": i, "u": i} for i in range(5)])
    assert da.c.count_documents({}) == 5

    da.c.create_index("u", unique=True)
    with pytest.raises(DuplicateKeyError) as ei:
        db.c.insert_one({"u": 3})
    assert ei.value.code == 11000 and "index: u_1 dup key: { u: 3 }" in str(ei.value)
    assert "u_1" in db.c.index_information()
    da.c.drop_index("u_1")
    db.c.insert_one({"_id": 10, "u": 3})
    assert "u_1" not in db.c.index_information()

    da.command("collMod", "c", validator={"u": {"$type": "int"}})
    with pytest.raises(OperationFailure) as ei:
        db.c.insert_one({"u": "text"})
    assert ei.value.code == 121  # DocumentValidationFailure
    assert db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0][
        "options"]["validator"] == {"u": {"$type": "int"}}

    da.command("create", "v", viewOn="c", pipeline=[{"$match": {"u": {"$gte": 3}}}])
    assert sorted(d["_id"] for d in db.v.find()) == [3, 4, 10]

    da.c.rename("c2")
    assert db.c.count_documents({}) == 0 and db.c2.count_documents({}) == 6
    db.c2.insert_one({"_id": 11, "u": 5})
    assert da.c2.count_documents({}) == 7

    da.c2.drop()
    da.v.drop()
    assert "c2" not in db.list_collection_names() and "v" not in db.list_collection_names()
    assert db.c2.count_documents({}) == 0


def test_a_cursor_over_a_collection_dropped_elsewhere_is_killed(pair) -> None:
    a, b = pair
    a.gone.c.insert_many([{"_id": i} for i in range(500)])  # past the first chunk
    cursor = b.gone.c.find(batch_size=2)
    assert next(cursor)["_id"] == 0
    a.gone.c.drop()
    with pytest.raises(OperationFailure) as ei:
        list(cursor)
    assert ei.value.code == 175  # QueryPlanKilled, as after a drop on this process


def test_time_series_dropped_and_recreated_elsewhere(pair) -> None:
    """The other process's open buckets and statistics are forgotten when the collection
    is dropped and created again: nothing is written to the old buckets, nothing is
    lost."""
    a, b = pair
    t0 = datetime(2026, 1, 1)
    # j: true, so that the bucket writes are done when B answers (not grouped)
    bm = b.ts.get_collection("m", write_concern=WriteConcern(j=True))
    a.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "h"})
    bm.insert_many([{"t": t0 + timedelta(seconds=i), "h": 1, "v": i} for i in range(5)])
    assert a.ts.m.count_documents({}) == 5
    a.ts.m.drop()
    a.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "h"})
    bm.insert_many([{"t": t0 + timedelta(seconds=i), "h": 1, "v": i} for i in range(3)])
    assert a.ts.m.count_documents({}) == 3 == b.ts.m.count_documents({})
    assert a.ts["system.buckets.m"].count_documents({}) == 1
    # B's statistics of the dropped collection went with it, as after a drop there
    stats = b.ts.command("collStats", "m")["timeseries"]
    assert stats["numMeasurementsCommitted"] == 3 and stats["numBucketInserts"] == 1


def test_a_unique_index_holds_across_processes(pair) -> None:
    a, b = pair
    a.uniq.c.create_index("k", unique=True)
    keys = list(range(300))
    wins = [0, 0]
    dups = [0, 0]

    def insert(client: pymongo.MongoClient, n: int) -> None:
        order = keys[:]
        random.Random(n).shuffle(order)
        for k in order:
            try:
                client.uniq.c.insert_one({"k": k, "by": n})
                wins[n] += 1
            except DuplicateKeyError:
                dups[n] += 1

    threads = [threading.Thread(target=insert, args=(c, n)) for n, c in enumerate(pair)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(wins) == len(keys) and sum(dups) == len(keys)
    per_key = list(a.uniq.c.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}},
                                       {"$match": {"n": {"$ne": 1}}}]))
    assert per_key == []
    assert b.uniq.c.count_documents({}) == len(keys)


def test_sixteen_clients_through_both_count_exactly(pair) -> None:
    uris = [c.address for c in pair]
    per_client, batch = 400, 20
    errors: list[BaseException] = []

    def work(n: int) -> None:
        host, port = uris[n % 2]
        try:
            with pymongo.MongoClient(host, port) as c:
                for start in range(0, per_client, batch):
                    c.many.c.insert_many([{"w": n, "i": i, "pad": "x" * (i % 50)}
                                          for i in range(start, start + batch)])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    total = 16 * per_client
    for c in pair:
        assert c.many.c.count_documents({}) == total
        assert c.many.c.estimated_document_count() == total
        stats = c.many.command("collStats", "c")
        assert stats["count"] == total
    ids = pair[0].many.c.aggregate([{"$group": {"_id": None, "ids": {"$addToSet": "$_id"},
                                                "pairs": {"$addToSet": {"w": "$w",
                                                                        "i": "$i"}}}}])
    doc = next(ids)
    assert len(doc["ids"]) == total and len(doc["pairs"]) == total


def test_a_version_1_schema_is_migrated(tmp_path) -> None:
    """A schema as bucketd's layout 1 left it (made here by taking layout 2's additions
    away) opens: the data stays, new ids go past the old ones, figures are right."""
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.old.c.insert_many([{"_id": i} for i in range(100)])
            c.old.c.create_index("x")
    finally:
        proc.stop()
    uri = postgres_scratch().database(str(tmp_path))
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DROP TABLE bucketd.bucketd_catalog_version")
        for (sid,) in conn.execute(
                "SELECT id FROM bucketd.bucketd_stores WHERE kind = 'r'").fetchall():
            conn.execute(f"DROP SEQUENCE bucketd.r{sid}_ids")
            conn.execute(f"ALTER TABLE bucketd.r{sid} DROP COLUMN shard")
        conn.execute("UPDATE bucketd.bucketd_version SET version = 1")
    proc = start_server(tmp_path)
    try:
        other = _second_server(tmp_path)
        try:
            with pymongo.MongoClient(proc.uri) as c, pymongo.MongoClient(other.uri) as d:
                assert c.old.c.estimated_document_count() == 100
                c.old.c.insert_many([{"_id": i} for i in range(100, 150)])
                d.old.c.insert_many([{"_id": i} for i in range(150, 200)])
                assert d.old.c.count_documents({}) == 200
                assert c.old.c.estimated_document_count() == 200
                assert sorted(d["_id"] for d in c.old.c.find()) == list(range(200))
        finally:
            other.stop()
            other.cleanup()
    finally:
        proc.stop()
    with psycopg.connect(uri, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM bucketd.bucketd_version").fetchall() == [(2,)]
