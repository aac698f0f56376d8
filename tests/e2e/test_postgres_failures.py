"""bucketd on PostgreSQL when the database goes away: a session killed with
pg_terminate_backend, PostgreSQL restarted in the middle of time-series ingest, and
PostgreSQL down for longer than the engine's bounded wait. The command in flight gets
HostUnreachable (6), a code drivers retry; the server stays up, reconnects, and loses no
acknowledged write.

Runs with BUCKETD_TEST_ENGINE=postgresql on a cluster this machine can restart (the one
`.ci/postgres.sh` starts: its data directory and pg_ctl are local); skipped otherwise.
"""

from __future__ import annotations

import datetime
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymongo
import pytest
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError
from pymongo.write_concern import WriteConcern

from ..conftest import start_server
from ..engines import postgres_scratch, postgres_uri_env, test_engine

pytestmark = pytest.mark.skipif(
    test_engine() != "postgresql" or not os.environ.get(postgres_uri_env),
    reason=f"needs BUCKETD_TEST_ENGINE=postgresql and {postgres_uri_env}")

T0 = datetime.datetime(2026, 1, 1)


class Cluster:
    """The test PostgreSQL cluster, driven with pg_ctl (as its owner when we are root)."""

    def __init__(self, uri: str) -> None:
        with psycopg.connect(uri, autocommit=True) as conn:
            self.data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))
            row = conn.execute("SELECT setting FROM pg_config WHERE name = 'BINDIR'").fetchone()
        self.pg_ctl = str(Path(row[0]) / "pg_ctl")
        opts = (self.data / "postmaster.opts").read_text().strip()
        self.options = shlex.join(shlex.split(opts)[1:])  # what it was started with
        self.log = str(self.data.parent / "postgres.log")

    def _pg_ctl(self, *args: str) -> None:
        cmd = [self.pg_ctl, "-D", str(self.data), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)

    def restart(self) -> None:
        self._pg_ctl("-m", "fast", "-w", "-l", self.log, "restart")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        self._pg_ctl("-w", "-l", self.log, "-o", self.options, "start")


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    try:
        found = Cluster(os.environ[postgres_uri_env])
    except (psycopg.Error, OSError) as e:
        pytest.skip(f"the PostgreSQL cluster cannot be restarted from here: {e}")
    if not os.access(found.pg_ctl, os.X_OK) or not found.data.is_dir():
        pytest.skip("the PostgreSQL cluster is not local")
    return found


@pytest.fixture
def bucketd(tmp_path) -> Iterator[Any]:
    proc = start_server(tmp_path)
    try:
        yield proc
    finally:
        proc.stop()
        proc.cleanup()


def database_of(proc: Any) -> str:
    """The scratch database URI the server at `proc` runs on."""
    return postgres_scratch().database(str(proc.dbpath))


def bucketd_sessions(db_uri: str) -> list[int]:
    with psycopg.connect(db_uri, autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name = 'bucketd' AND pid <> pg_backend_pid()"
                            ).fetchall()
    return [r[0] for r in rows]


def terminate(db_uri: str) -> int:
    """pg_terminate_backend of every bucketd session on the database; how many."""
    pids = bucketd_sessions(db_uri)
    with psycopg.connect(db_uri, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    return len(pids)


def client(proc: Any, **kw: Any) -> pymongo.MongoClient:
    return pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000, **kw)


# --- a session killed -------------------------------------------------------------------------

def test_killed_between_commands_the_next_command_works(bucketd) -> None:
    db_uri = database_of(bucketd)
    with client(bucketd, retryReads=False, retryWrites=False) as c:
        coll = c.t.plain
        coll.insert_many([{"_id": i} for i in range(10)])
        assert terminate(db_uri) >= 1
        assert coll.count_documents({}) == 10  # a read
        assert terminate(db_uri) >= 1
        coll.insert_one({"_id": 10})  # a write
        assert sorted(d["_id"] for d in coll.find()) == list(range(11))
    assert "connection to PostgreSQL was lost" in bucketd.log_text()
    assert "reconnected to PostgreSQL" in bucketd.log_text()


class Blocked:
    """Holds an ACCESS EXCLUSIVE lock on every table of bucketd's schema but the layout
    and catalog versions, so the next statement of a command (past the catalog-version
    check each command makes first) waits in PostgreSQL: a command in flight, killed
    there."""

    def __init__(self, db_uri: str) -> None:
        self.db_uri = db_uri
        self.conn = psycopg.connect(db_uri)
        tables = self.conn.execute(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
            "WHERE schemaname = 'bucketd' AND tablename NOT IN "
            "('bucketd_version', 'bucketd_catalog_version')").fetchall()
        self.conn.execute(f"LOCK TABLE {', '.join(t[0] for t in tables)} IN ACCESS EXCLUSIVE MODE")

    def kill_waiting(self, times: int = 1, timeout: float = 10.0) -> None:
        """Each time a bucketd session waits for the lock, terminate it; `times` times,
        then release."""
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.db_uri, autocommit=True) as admin:
            while times and time.monotonic() < deadline:
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND "
                    "application_name = 'bucketd' AND wait_event_type = 'Lock'").fetchone()
                if row:
                    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (row[0],))
                    times -= 1
                time.sleep(0.02)
            assert not times, "bucketd never waited for the lock"
        self.conn.rollback()
        self.conn.close()


def in_flight(fn: Any, db_uri: str, times: int = 1) -> Any:
    """Run `fn()` while bucketd's session is killed in the middle of it (`times` times:
    a read outside a transaction is asked once more on a new connection by the engine);
    its result or the exception it raised."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as e:
            out.append(e)

    blocked = Blocked(db_uri)
    t = threading.Thread(target=run)
    t.start()
    blocked.kill_waiting(times)
    t.join(30)
    assert out, "the command did not finish"
    return out[0]


def test_killed_during_a_command_it_gets_a_retryable_error(bucketd) -> None:
    db_uri = database_of(bucketd)
    with client(bucketd, retryReads=False, retryWrites=False) as raw:
        raw.t.c.insert_many([{"_id": i, "x": i} for i in range(100)])
        # the raw reply of a read in flight: HostUnreachable, no labels (a standalone,
        # a command without txnNumber: mongod would attach none either)
        count = {"count": "c", "query": {"x": {"$gte": 0}}}
        assert in_flight(lambda: raw.t.command(count), db_uri)["n"] == 100  # asked again
        res = in_flight(lambda: raw.t.command(count), db_uri, times=2)
        assert isinstance(res, OperationFailure), res
        assert res.code == 6 and res.details["codeName"] == "HostUnreachable"
        assert "errorLabels" not in res.details
        assert raw.t.command(count)["n"] == 100  # the next command works
        # a write in flight: nothing of it committed
        res = in_flight(lambda: raw.t.c.insert_one({"_id": 1000}), db_uri)
        assert isinstance(res, PyMongoError) and getattr(res, "code", None) == 6, res
        assert raw.t.c.count_documents({"_id": 1000}) == 0
    with client(bucketd, retryReads=True) as c:
        # pymongo retries a read that got HostUnreachable, transparently
        assert in_flight(lambda: c.t.c.count_documents({}), db_uri, times=2) == 100
        assert in_flight(lambda: sorted(d["_id"] for d in c.t.c.find({"x": {"$lt": 3}})),
                         db_uri, times=2) == [0, 1, 2]
        # writes: drivers retry them only on a replica set or mongos, never on a
        # standalone (which bucketd is), so the error reaches the application even with
        # retryWrites; nothing was written, so writing again is safe
        res = in_flight(lambda: c.t.c.insert_one({"_id": 2000}), db_uri)
        assert getattr(res, "code", None) == 6, res
        c.t.c.insert_one({"_id": 2000})
        assert c.t.c.count_documents({}) == 101
        assert c.admin.command("serverStatus")["ok"] == 1.0


# --- PostgreSQL restarted, PostgreSQL away --------------------------------------------------

class Ingest:
    """Clients inserting measurements with unique _ids until stopped; what each insert
    acknowledged (its reply, or a write concern error: applied) and what failed."""

    def __init__(self, uri: str, clients: int, batch: int = 20) -> None:
        self.uri = uri
        self.stop = threading.Event()
        self.acked: set[str] = set()
        self.failed: set[str] = set()
        self.wc_errors = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i, batch), daemon=True)
                         for i in range(clients)]

    def _run(self, k: int, batch: int) -> None:
        wc = WriteConcern(j=True) if k % 2 == 0 else WriteConcern()
        with pymongo.MongoClient(self.uri, serverSelectionTimeoutMS=30_000) as c:
            coll = c.ts.get_collection("m", write_concern=wc)
            n = 0
            while not self.stop.is_set():
                docs = [{"_id": f"{k}-{n + i}", "t": T0 + datetime.timedelta(seconds=n + i),
                         "meta": {"client": k, "shared": (n + i) % 3}, "v": n + i}
                        for i in range(batch)]
                n += batch
                ids = {d["_id"] for d in docs}
                try:
                    coll.insert_many(docs, ordered=True)
                    ok = True
                except BulkWriteError as e:  # a write concern error: applied, not journaled
                    ok = bool(e.details.get("writeConcernErrors")) and \
                        not e.details.get("writeErrors")
                    with self._lock:
                        self.wc_errors += ok
                        if not ok:
                            self.errors.append(str(e.details)[:300])
                except PyMongoError as e:
                    ok = False
                    with self._lock:
                        self.errors.append(f"{getattr(e, 'code', None)} {type(e).__name__}: "
                                           f"{e}"[:300])
                with self._lock:
                    (self.acked if ok else self.failed).update(ids)
                time.sleep(0.005)

    def __enter__(self) -> Ingest:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(60)

    def wait_for(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count and time.monotonic() < deadline:
            time.sleep(0.05)

    def check(self, c: pymongo.MongoClient) -> None:
        """Every acknowledged measurement is stored exactly once, with its value; every
        insert that failed failed with the retryable error."""
        assert all(e.startswith("6 ") for e in self.errors), self.errors[:5]
        got = list(c.ts.m.find({}, {"_id": 1, "v": 1, "meta": 1}))
        ids = [d["_id"] for d in got]
        assert len(ids) == len(set(ids)), "a measurement is stored twice"
        stored = set(ids)
        missing = self.acked - stored
        assert not missing, f"{len(missing)} acknowledged measurements lost"
        assert stored <= self.acked | self.failed
        for d in got:
            k, i = map(int, d["_id"].split("-"))
            assert d["v"] == i and d["meta"] == {"client": k, "shared": i % 3}


def test_restart_during_ingest_loses_no_acknowledged_write(bucketd, cluster) -> None:
    with client(bucketd) as c:
        c.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "meta"})
        with Ingest(bucketd.uri, clients=6) as ingest:
            for _ in range(2):
                ingest.wait_for(len(ingest.acked) + 600)
                before = len(ingest.acked)
                cluster.restart()
                ingest.wait_for(before + 1200)
                assert len(ingest.acked) >= before + 1200, ingest.errors[:5]
        assert bucketd.proc.poll() is None  # the server is up
        assert c.admin.command("serverStatus")["ok"] == 1.0
        ingest.check(c)
        assert c.ts.m.count_documents({}) >= len(ingest.acked)
    # a restart within the bounded wait is waited for: no write concern error
    assert ingest.wc_errors == 0
    log = bucketd.log_text()
    assert "connection to PostgreSQL was lost" in log and "reconnected to PostgreSQL" in log
    print(f"acknowledged {len(ingest.acked)}, failed {len(ingest.failed)}: {ingest.errors[:3]}")


def test_database_away_longer_than_the_bounded_wait(bucketd, cluster) -> None:
    with client(bucketd, retryReads=False, retryWrites=False) as c:
        c.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "meta"})
        c.t.plain.insert_one({"_id": 1})
        with Ingest(bucketd.uri, clients=4) as ingest:
            ingest.wait_for(400)
            cluster.stop()
            try:
                time.sleep(7)  # past the engine's 5 s bounded wait
                # commands now fail quickly with the retryable error
                for _ in range(3):
                    started = time.monotonic()
                    with pytest.raises(OperationFailure) as ei:
                        c.t.command("count", "plain", query={"_id": {"$gte": 0}})
                    assert ei.value.code == 6
                    assert time.monotonic() - started < 3.0
                assert c.admin.command("ping")["ok"] == 1.0  # the server is up
            finally:
                cluster.start()
            # it resumes within a pause between two connection attempts
            started = time.monotonic()
            while True:
                try:
                    assert c.t.command("count", "plain", query={"_id": {"$gte": 0}})["n"] == 1
                    break
                except OperationFailure as e:
                    assert e.code == 6 and time.monotonic() - started < 5.0
                    time.sleep(0.1)
            resumed = len(ingest.acked)
            ingest.wait_for(resumed + 400)
            assert len(ingest.acked) >= resumed + 400, ingest.errors[:5]
        assert bucketd.proc.poll() is None
        assert c.admin.command("serverStatus")["ok"] == 1.0
        ingest.check(c)
        print(f"acknowledged {len(ingest.acked)}, failed {len(ingest.failed)}, "
              f"write concern errors {ingest.wc_errors}: {ingest.errors[:3]}")


def test_journaled_insert_while_the_database_is_away(bucketd, cluster) -> None:
    """A `j: true` insert while the database is away: on PostgreSQL a time-series insert
    writes its buckets before the catalog commits them (storage/timeseries/shared_insert),
    so it fails whole with the retryable HostUnreachable once the bounded wait is over,
    nothing of it applied; sent again after the database is back, it is stored once."""
    with client(bucketd, retryWrites=False) as c:
        c.ts.create_collection("m", timeseries={"timeField": "t", "metaField": "meta"})
        m = c.ts.get_collection("m", write_concern=WriteConcern(j=True))
        m.insert_one({"_id": 1, "t": T0, "meta": 1, "v": 1})  # its bucket is open
        doc = {"_id": 2, "t": T0 + datetime.timedelta(seconds=1), "meta": 1, "v": 2}
        cluster.stop()
        try:
            started = time.monotonic()
            with pytest.raises(OperationFailure) as ei:
                c.ts.command({"insert": "m", "documents": [doc], "writeConcern": {"j": True}})
            waited = time.monotonic() - started
            assert ei.value.code == 6
        finally:
            cluster.start()
        assert waited < 15.0  # at most the bounded wait (5 s), then the answer
        deadline = time.monotonic() + 10
        while True:
            try:
                m.insert_one(doc)
                break
            except OperationFailure as e:
                assert e.code == 6 and time.monotonic() < deadline
                time.sleep(0.2)
        got = sorted((d["_id"], d["v"]) for d in c.ts.m.find())
        assert got == [(1, 1), (2, 2)]
