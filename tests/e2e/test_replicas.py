"""Two bucketd processes on one PostgreSQL database: what one writes the other reads.

Against the compose scenario's replicas (``BUCKETD_URI`` and ``BUCKETD_URI_2``, see
docker/docker-compose.postgres.yml) or, with ``BUCKETD_TEST_ENGINE=postgresql``, two
servers this module starts on one database of the test run; skipped otherwise. DDL done
through one is seen through the other, a unique index holds across them, and time-series
ingest through both at once loses and duplicates nothing: with a meta value per writer,
and (expected to fail until bucket writes are coordinated between processes) with meta
values every writer shares.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

import pymongo
import pytest
from pymongo.errors import DuplicateKeyError, PyMongoError

from pytest_bucketd import BucketdProcess

from ..conftest import SERVER_CMD
from ..engines import postgres_scratch, test_engine

WRITERS = 8  # half through each process, shared and own meta values through both
PER_WRITER = int(os.environ.get("BUCKETD_REPLICA_PER_WRITER", "2000"))
BATCH = 100
SHARED_METAS = 2  # few, so their buckets fill and roll over in both processes
T0 = dt.datetime(2024, 5, 1)


def _wait_for(uri: str, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with pymongo.MongoClient(uri, serverSelectionTimeoutMS=1000) as c:
                c.admin.command("ping")
            return
        except PyMongoError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture(scope="module")
def replicas() -> Iterator[tuple[str, str]]:
    first, second = os.environ.get("BUCKETD_URI"), os.environ.get("BUCKETD_URI_2")
    if first and second:
        _wait_for(second)
        yield first, second
        return
    if first or test_engine() != "postgresql":
        pytest.skip("needs two servers on one PostgreSQL database: BUCKETD_URI and "
                    "BUCKETD_URI_2, or BUCKETD_TEST_ENGINE=postgresql")
    database = postgres_scratch().database("replicas")
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        procs = [BucketdProcess(SERVER_CMD, dbpath=d, extra_args=[
            "--storageEngine", "postgresql", "--postgresUri", database]) for d in (d1, d2)]
        try:
            for p in procs:
                p.start()
            yield procs[0].uri, procs[1].uri
        finally:
            for p in procs:
                p.stop()


@pytest.fixture
def clients(replicas: tuple[str, str]) -> Iterator[tuple[pymongo.MongoClient, pymongo.MongoClient]]:
    a: pymongo.MongoClient = pymongo.MongoClient(replicas[0], serverSelectionTimeoutMS=10_000)
    b: pymongo.MongoClient = pymongo.MongoClient(replicas[1], serverSelectionTimeoutMS=10_000)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _db_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_ddl_and_documents_written_through_one_are_read_through_the_other(
        clients: tuple[pymongo.MongoClient, pymongo.MongoClient]) -> None:
    one, two = clients
    name = _db_name("replica_ddl")
    try:
        one[name].create_collection("things")
        one[name].things.create_index("sku", unique=True)
        one[name].things.insert_many([{"sku": i, "v": i * i} for i in range(50)])
        assert "things" in two[name].list_collection_names()
        assert two[name].things.count_documents({}) == 50
        assert two[name].things.find_one({"sku": 7}, {"_id": 0}) == {"sku": 7, "v": 49}
        index_names = {ix["name"] for ix in two[name].things.list_indexes()}
        assert index_names == {"_id_", "sku_1"}
        # the unique index holds across processes, and what was refused was not written
        with pytest.raises(DuplicateKeyError):
            two[name].things.insert_one({"sku": 7, "v": -1})
        assert one[name].things.count_documents({"sku": 7}) == 1
        # an update through two is read through one
        two[name].things.update_one({"sku": 3}, {"$set": {"v": "changed"}})
        assert one[name].things.find_one({"sku": 3})["v"] == "changed"
        # a view defined through one is queried through two
        one[name].command("create", "big", viewOn="things", pipeline=[
            {"$match": {"v": {"$gte": 2000}}}])
        assert two[name].big.count_documents({}) == len([i for i in range(50)
                                                          if i != 3 and i * i >= 2000])
        # a drop through two is seen through one
        two[name].drop_collection("things")
        assert "things" not in one[name].list_collection_names()
        assert one[name].things.count_documents({}) == 0
    finally:
        one.drop_database(name)


def _writer(uri: str, db: str, w: int, shared: bool, errors: list[BaseException]) -> None:
    try:
        with pymongo.MongoClient(uri) as c:
            coll = c[db].m
            batch = []
            for i in range(PER_WRITER):
                # shared: a few meta values every writer writes, through both processes;
                # otherwise one meta value per writer
                host = f"shared_{i % SHARED_METAS}" if shared else f"own_{w}"
                batch.append({"t": T0 + dt.timedelta(seconds=i), "host": host,
                              "w": w, "i": i})
                if len(batch) == BATCH:
                    coll.insert_many(batch, ordered=False)
                    batch = []
            if batch:
                coll.insert_many(batch, ordered=False)
    except BaseException as e:  # reported by the test's thread
        errors.append(e)


def _ingest_through_both(replicas: tuple[str, str],
                         clients: tuple[pymongo.MongoClient, pymongo.MongoClient],
                         shared: bool) -> None:
    """WRITERS writers, alternately through each process, at once; then every
    measurement is read back exactly once through each."""
    one = clients[0]
    name = _db_name("replica_ts")
    one[name].create_collection("m", timeseries={"timeField": "t", "metaField": "host"})
    try:
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_writer,
                                    args=(replicas[w % 2], name, w, shared, errors))
                   for w in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        total = WRITERS * PER_WRITER
        expected = {w: PER_WRITER for w in range(WRITERS)}
        for c in clients:
            coll = c[name].m
            # on PostgreSQL a time-series insert is written before it is acknowledged
            per_writer = {d["_id"]: d["n"] for d in coll.aggregate([
                {"$group": {"_id": "$w", "n": {"$sum": 1}}}])}
            assert per_writer == expected
            assert coll.count_documents({}) == total
            dups = list(coll.aggregate([
                {"$group": {"_id": {"w": "$w", "i": "$i"}, "n": {"$sum": 1}}},
                {"$match": {"n": {"$gt": 1}}}, {"$limit": 5}]))
            assert dups == []
            # every bucket's count adds up to the measurements
            buckets = list(c[name]["system.buckets.m"].aggregate([
                {"$group": {"_id": None, "n": {"$sum": "$control.count"}}}]))
            if buckets and buckets[0]["n"] is not None:
                assert buckets[0]["n"] == total
    finally:
        one.drop_database(name)


def test_time_series_ingest_through_both_own_meta_values(
        replicas: tuple[str, str],
        clients: tuple[pymongo.MongoClient, pymongo.MongoClient]) -> None:
    _ingest_through_both(replicas, clients, shared=False)


def test_time_series_ingest_through_both_shared_meta_values(
        replicas: tuple[str, str],
        clients: tuple[pymongo.MongoClient, pymongo.MongoClient]) -> None:
    _ingest_through_both(replicas, clients, shared=True)
