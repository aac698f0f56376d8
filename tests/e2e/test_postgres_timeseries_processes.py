"""Two bucketd processes ingesting time series into one PostgreSQL database: every
measurement stored exactly once, with clients on shared and on their own meta values,
also while one process is killed with kill -9 again and again (no acknowledged `j: true`
measurement lost). See storage/timeseries/shared_insert.py."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymongo
import pytest
from pymongo.errors import PyMongoError
from pymongo.write_concern import WriteConcern

from pytest_bucketd import BucketdProcess

from ..conftest import SERVER_CMD
from ..engines import postgres_scratch, test_engine

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(test_engine() != "postgresql",
                                 reason="needs BUCKETD_TEST_ENGINE=postgresql")]

T0 = datetime.datetime(2024, 1, 1)
CLIENTS = 16
PER_CLIENT = 2_000
BATCH = 100


def _server(tmp_path: Path, name: str, database: str) -> BucketdProcess:
    """A bucketd process of its own (its own data directory for logs and the like) on
    the shared PostgreSQL database."""
    proc = BucketdProcess(SERVER_CMD, dbpath=str(tmp_path / name),
                          extra_args=["--storageEngine", "postgresql",
                                      "--postgresUri", database])
    (tmp_path / name).mkdir(exist_ok=True)
    proc.start()
    return proc


def _batches(client: int, n: int = PER_CLIENT) -> Iterator[list[dict]]:
    """Client `client`'s measurements: keys client * 10**6 + i, half on meta values all
    clients share, half on its own."""
    for start in range(0, n, BATCH):
        yield [{"t": T0 + datetime.timedelta(milliseconds=start + i),
                "m": {"host": f"shared-{i % 4}"} if (start // BATCH) % 2 else
                     {"host": f"own-{client}"},
                "k": client * 10**6 + start + i, "v": float(i)}
               for i in range(BATCH)]


def _check_exactly_once(uri: str, expected: set[int] | None, at_least: set[int]) -> None:
    with pymongo.MongoClient(uri) as c:
        keys = [d["k"] for d in c.ts.m.find({}, {"k": 1, "_id": 0})]
        assert len(keys) == len(set(keys)), "a measurement is stored twice"
        missing = at_least - set(keys)
        assert not missing, f"{len(missing)} acknowledged measurements lost"
        if expected is not None:
            assert set(keys) == expected
            assert c.ts.m.count_documents({}) == len(expected)
        assert c.ts.command("validate", "system.buckets.m")["valid"] is True


def test_two_processes_store_every_measurement_once(tmp_path: Path) -> None:
    database = postgres_scratch().database(str(tmp_path))
    a = _server(tmp_path, "a", database)
    b = _server(tmp_path, "b", database)
    try:
        with pymongo.MongoClient(a.uri) as c:
            c.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "m"})
        errors: list[BaseException] = []

        def ingest(client: int) -> None:
            uri = (a if client % 2 else b).uri
            try:
                with pymongo.MongoClient(uri) as c:
                    for docs in _batches(client):
                        c.ts.m.insert_many(docs, ordered=client % 4 < 2)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=ingest, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        everything = {d["k"] for i in range(CLIENTS) for docs in _batches(i) for d in docs}
        _check_exactly_once(a.uri, everything, everything)
        _check_exactly_once(b.uri, everything, everything)
        with pymongo.MongoClient(b.uri) as c:
            # both processes opened buckets for the shared meta values
            per_meta = {d["_id"]: d["n"] for d in c.ts["system.buckets.m"].aggregate(
                [{"$group": {"_id": "$meta.host", "n": {"$sum": 1}}}])}
            assert all(per_meta[f"shared-{i}"] >= 2 for i in range(4)), per_meta
    finally:
        a.stop()
        b.stop()


def test_kill_minus_nine_of_one_process_loses_no_acknowledged_measurement(
        tmp_path: Path) -> None:
    database = postgres_scratch().database(str(tmp_path))
    a = _server(tmp_path, "a", database)
    b = _server(tmp_path, "b", database)
    acked: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()
    try:
        with pymongo.MongoClient(a.uri) as c:
            c.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "m"})

        def ingest(client: int, target: BucketdProcess) -> None:
            batches = _batches(client, n=10**6)
            while not stop.is_set():
                uri = target.uri if target.port else None
                if uri is None:
                    time.sleep(0.05)
                    continue
                try:
                    with pymongo.MongoClient(uri, retryWrites=False,
                                             serverSelectionTimeoutMS=2000) as c:
                        coll = c.ts.get_collection("m", write_concern=WriteConcern(j=True))
                        for docs in batches:
                            if stop.is_set():
                                return
                            coll.insert_many(docs)
                            with lock:
                                acked.update(d["k"] for d in docs)
                except PyMongoError:
                    time.sleep(0.05)  # the batch in flight is not acknowledged: skipped

        threads = [threading.Thread(target=ingest, args=(i, a if i % 2 else b))
                   for i in range(4)]
        for t in threads:
            t.start()
        for _cycle in range(20):
            time.sleep(0.4)
            b.kill()
            b = _server(tmp_path, "b", database)
            threads.append(threading.Thread(target=ingest, args=(100 + _cycle, b)))
            threads[-1].start()
        stop.set()
        for t in threads:
            t.join(30)
        assert len(acked) > 1000
        _check_exactly_once(a.uri, None, acked)
    finally:
        stop.set()
        a.stop()
        b.stop()


def test_concurrent_updates_through_two_processes_lose_none(tmp_path: Path) -> None:
    """$inc of one document from clients of both processes: each update reads, changes
    and writes the document; one that met another process's change retries it (as
    mongod retries a write conflict), so no increment is lost. Time-series updates of
    one bucket from both processes likewise."""
    database = postgres_scratch().database(str(tmp_path))
    a = _server(tmp_path, "a", database)
    b = _server(tmp_path, "b", database)
    try:
        with pymongo.MongoClient(a.uri) as c:
            c.db.counters.insert_one({"_id": 1, "n": 0, "each": {}})
            c.ts.create_collection("u", timeseries={"timeField": "t", "metaField": "m"})
            c.ts.u.insert_many([{"t": T0 + datetime.timedelta(seconds=i), "m": "x", "n": 0}
                                for i in range(8)])
        errors: list[BaseException] = []

        def bump(client: int) -> None:
            try:
                with pymongo.MongoClient((a if client % 2 else b).uri) as c:
                    for _ in range(100):
                        c.db.counters.update_one({"_id": 1},
                                                 {"$inc": {"n": 1, f"each.c{client}": 1}})
                    for _ in range(10):
                        c.ts.u.update_many({"m": "x"}, {"$inc": {"n": 1}})
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=bump, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        with pymongo.MongoClient(b.uri) as c:
            doc = c.db.counters.find_one({"_id": 1})
            assert doc["n"] == 800
            assert doc["each"] == {f"c{i}": 100 for i in range(8)}
            assert sorted(d["n"] for d in c.ts.u.find()) == [80] * 8
    finally:
        a.stop()
        b.stop()
