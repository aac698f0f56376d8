"""tools/postgres/partition.sql on a live bucketd schema: the bucket tables become hash
partitioned by their shard column, and bucketd goes on reading and writing them.

Runs with ``BUCKETD_TEST_ENGINE=postgresql`` (and psql on the machine); skipped otherwise.
The script is applied while the server runs; the server's reads and writes then go through
the partitioned tables, and again after a restart.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pymongo
import pytest

from ..conftest import ROOT, start_server
from ..engines import postgres_scratch, test_engine

pytestmark = pytest.mark.skipif(test_engine() != "postgresql",
                                reason="needs BUCKETD_TEST_ENGINE=postgresql")

SCRIPT = ROOT / "tools" / "postgres" / "partition.sql"
PARTITIONS = 4
HOSTS = 30
PER_HOST = 100
T0 = dt.datetime(2024, 6, 1)


def _psql() -> str:
    found = shutil.which("psql") or next(
        (str(p) for p in sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))), None)
    if found is None:
        pytest.skip("psql is not installed")
    return found


def _sql(uri: str, query: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        return conn.execute(query).fetchall()


def _sharded_tables(uri: str) -> list[tuple[str, str]]:
    """(name, relkind) of bucketd's record tables that have a shard column."""
    return [(r[0], r[1]) for r in _sql(uri, """
        SELECT c.relname, c.relkind::text FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'shard'
         WHERE n.nspname = 'bucketd' AND c.relname ~ '^r[0-9]+$' AND NOT c.relispartition
         ORDER BY 1""")]


def _docs(hosts: range, start: int = 0) -> list[dict]:
    return [{"t": T0 + dt.timedelta(seconds=10 * i), "host": f"h{h}", "v": i}
            for h in hosts for i in range(start, start + PER_HOST)]


def _check_reads(db: pymongo.database.Database, hosts: int, per_host: int) -> None:
    assert db.m.count_documents({}) == hosts * per_host
    per = {d["_id"]: d["n"] for d in db.m.aggregate([
        {"$group": {"_id": "$host", "n": {"$sum": 1}}}])}
    assert per == {f"h{h}": per_host for h in range(hosts)}
    got = [d["v"] for d in db.m.find({"host": "h7"}, {"_id": 0, "v": 1}).sort("t", 1)]
    assert got == list(range(per_host))
    last = {d["_id"]: d["t"] for d in db.m.aggregate([
        {"$sort": {"host": 1, "t": -1}}, {"$group": {"_id": "$host", "t": {"$first": "$t"}}}])}
    assert set(last.values()) == {T0 + dt.timedelta(seconds=10 * (per_host - 1))}
    assert db.plain.count_documents({}) == 10


def test_partitioned_bucket_tables_keep_bucketd_working(tmp_path: Path) -> None:
    psql = _psql()
    uri = postgres_scratch().database(str(tmp_path))
    server = start_server(tmp_path)
    try:
        with pymongo.MongoClient(server.uri) as c:
            db = c.part
            db.create_collection("m", timeseries={"timeField": "t", "metaField": "host"})
            db.m.insert_many(_docs(range(HOSTS)))
            db.plain.insert_many([{"_id": i} for i in range(10)])
            before = _sharded_tables(uri)
            if not before:
                pytest.skip("this layout has no shard column on bucket tables")
            assert all(kind == "r" for _, kind in before)
            # the buckets' table has shards other than 0; the other record tables do not
            bucket_tables = {name for name, _ in before
                             if _sql(uri, f"SELECT count(*) FROM bucketd.{name} "
                                          "WHERE shard <> 0")[0][0] > 0}
            assert len(bucket_tables) == 1

            # the script, on the live schema, while this server keeps running
            out = subprocess.run([psql, uri, "-X", "-v", "ON_ERROR_STOP=1", "-v",
                                  f"partitions={PARTITIONS}", "-f", str(SCRIPT)],
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            after = dict(_sharded_tables(uri))
            assert after == {name: "p" if name in bucket_tables else "r" for name, _ in before}
            # the buckets' table: 30 meta values land in several partitions
            buckets = db["system.buckets.m"].count_documents({})
            (name,) = bucket_tables
            spread = _sql(uri, f"SELECT tableoid::regclass::text, count(*) FROM bucketd.{name} "
                               "GROUP BY 1")
            assert len(spread) > 1
            assert sum(n for _, n in spread) == buckets

            _check_reads(db, HOSTS, PER_HOST)
            # writes: to open buckets, to new meta values, updates and deletes
            db.m.insert_many(_docs(range(HOSTS + 5), start=PER_HOST)
                             + _docs(range(HOSTS, HOSTS + 5)))
            _check_reads(db, HOSTS + 5, 2 * PER_HOST)
            db.m.update_many({"host": "h3"}, {"$set": {"host": "h3x"}})
            assert db.m.count_documents({"host": "h3x"}) == 2 * PER_HOST
            db.m.update_many({"host": "h3x"}, {"$set": {"host": "h3"}})
            db.m.delete_many({"host": f"h{HOSTS + 4}"})
            assert db.m.count_documents({}) == (HOSTS + 4) * 2 * PER_HOST
            # a second run leaves partitioned tables alone
            again = subprocess.run([psql, uri, "-X", "-v", "ON_ERROR_STOP=1", "-f", str(SCRIPT)],
                                   capture_output=True, text=True, timeout=120)
            assert again.returncode == 0, again.stderr
            assert "0 table(s)" in again.stderr
    finally:
        server.stop()
    server = start_server(tmp_path)
    try:
        with pymongo.MongoClient(server.uri) as c:
            _check_reads(c.part, HOSTS + 4, 2 * PER_HOST)
            assert c.part.command("dbStats")["ok"] == 1
    finally:
        server.stop()
