"""The engine the server runs on (`--storageEngine`), as buildInfo and serverStatus report
it; an unknown one stops the start; on PostgreSQL, no namespace reaches SQL text and a
restart keeps the data. Runs on the engine of BUCKETD_TEST_ENGINE."""

from __future__ import annotations

import pymongo
import pytest

from pytest_bucketd import BucketdProcess
from tests.engines import postgres_scratch, test_engine

from ..conftest import SERVER_CMD, start_server

on_postgres = pytest.mark.skipif(test_engine() != "postgresql",
                                 reason="BUCKETD_TEST_ENGINE=postgresql only")


def test_build_info_and_server_status_name_the_engine(client: pymongo.MongoClient) -> None:
    assert client.admin.command("buildInfo")["storageEngines"] == [test_engine()]
    status = client.admin.command("serverStatus")["storageEngine"]
    assert status["name"] == test_engine() and status["persistent"] is True


def test_unknown_engine_stops_the_start(tmp_path) -> None:
    proc = BucketdProcess(SERVER_CMD, dbpath=str(tmp_path), extra_args=["--storageEngine",
                                                                      "rocks"])
    with pytest.raises(RuntimeError):
        proc.start(timeout=20)
    assert proc.proc is not None and proc.proc.wait(10) != 0
    assert "Cannot start server with an unknown storage engine: rocks" in proc.log_text()


@on_postgres
def test_any_namespace_is_stored_and_no_name_becomes_sql(tmp_path) -> None:
    import psycopg

    proc = start_server(tmp_path)
    odd = 'we"ird\'; DROP TABLE bucketd_stores; --'
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.get_database("odd-db")[odd].insert_many([{"_id": i, "a": i % 3} for i in range(50)])
            c.get_database("odd-db")[odd].create_index("a", unique=False, name=odd)
            c.ts.create_collection(odd, timeseries={"timeField": "t", "metaField": "m"})
            assert c.get_database("odd-db")[odd].count_documents({"a": 1}) == 17
            assert odd in c.ts.list_collection_names()
    finally:
        proc.stop()
    with psycopg.connect(postgres_scratch().database(str(tmp_path))) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'bucketd'").fetchall()]
    assert "bucketd_stores" in tables and "bucketd_version" in tables
    assert all(t in ("bucketd_stores", "bucketd_version", "bucketd_catalog_version") or (t[0] in "ri" and t[1:].isdigit())
               for t in tables), tables


@on_postgres
def test_restart_keeps_data(tmp_path) -> None:
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.keep.docs.insert_many([{"_id": i, "u": i} for i in range(10)])
            c.keep.docs.create_index("u", unique=True)
    finally:
        proc.stop()
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as c:
            assert c.keep.docs.count_documents({}) == 10
            with pytest.raises(pymongo.errors.DuplicateKeyError):
                c.keep.docs.insert_one({"u": 3})
    finally:
        proc.stop()
