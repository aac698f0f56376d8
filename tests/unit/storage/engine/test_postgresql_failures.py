"""The PostgreSQL engine when its connection dies: the statement that finds out and the
rest of its transaction raise StorageUnavailable (HostUnreachable, retryable), the
transaction's in-process state rolls back, the next operation reconnects, and a COMMIT
whose answer was lost is settled by asking the database. Needs BUCKETD_TEST_POSTGRES_URI."""

from __future__ import annotations

import os
import time

import pytest

from storage.engine import StorageUnavailable, open_engine
from storage.engine.postgresql import PostgresEngine
from storage.vocabulary.error_codes import ErrorCode
from tests.engines import postgres_scratch, postgres_uri_env

pytestmark = pytest.mark.skipif(not os.environ.get(postgres_uri_env),
                                reason=f"needs {postgres_uri_env} (a PostgreSQL server)")


@pytest.fixture
def engine():
    scratch = postgres_scratch()
    schema = scratch.new_schema()
    eng = open_engine("postgresql", uri=scratch.database(), schema=schema)
    events: list[tuple[str, str]] = []
    eng.on_connection_event = lambda kind, detail: events.append((kind, detail))  # type: ignore[attr-defined]
    eng.events = events  # type: ignore[attr-defined]
    yield eng
    eng.close()
    scratch.drop_schema(schema)


def die(eng: PostgresEngine) -> None:
    """Kill the session and let the engine meet it, as a statement in flight would."""
    import psycopg

    kill(eng)
    try:
        eng._conn.execute("SELECT 1")
    except psycopg.Error as e:
        raise eng._failed(e, None) from e


def kill(eng: PostgresEngine) -> None:
    """pg_terminate_backend of the engine's session, from another connection; returns
    once the session is gone."""
    import psycopg

    pid = eng._conn.info.backend_pid
    with psycopg.connect(postgres_scratch().database(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))


def test_killed_between_operations_the_next_one_works(engine):
    with engine.transaction():
        rs = engine.create_record_store("c")
        rs.insert([b"a"])
    kill(engine)
    assert [d for _, d in rs.scan()] == [b"a"]  # a read outside a transaction
    kill(engine)
    with engine.transaction():  # a write transaction
        rs.insert([b"b"])
    assert rs.count() == 2 and [d for _, d in rs.scan()] == [b"a", b"b"]
    kinds = [k for k, _ in engine.events]
    assert kinds == ["lost", "restored", "lost", "restored"]


def test_killed_during_a_transaction_it_rolls_back_and_is_retryable(engine):
    with engine.transaction():
        rs = engine.create_record_store("c")
        rs.insert([b"a"])
    with pytest.raises(StorageUnavailable) as ei, engine.transaction():
        rs.insert([b"b"])
        ix = engine.create_index_store("c_x", unique=True)
        kill(engine)
        ix.insert([(b"k", 1)])  # meets the dead connection (a unique insert reads)
    assert ei.value.code == ErrorCode.HostUnreachable and not ei.value.in_doubt
    # the in-process state of the dead transaction is rolled back
    assert rs.count() == 1 and rs.data_size() == 1
    assert "c_x" not in engine.list_idents()
    # every later statement of a transaction whose connection broke fails at once,
    # even one caught and swallowed by a savepoint; COMMIT is never sent
    with pytest.raises(StorageUnavailable), engine.transaction():
        rs.insert([b"c"])
        rs.get(1)
        kill(engine)
        with pytest.raises(StorageUnavailable), engine.transaction():
            rs.get(1)
        rs.insert([b"d"])
    assert rs.count() == 1
    with engine.transaction():
        rs.insert([b"e"])
    assert [d for _, d in rs.scan()] == [b"a", b"e"]


def test_commit_whose_answer_is_lost_is_settled(engine, monkeypatch):
    """The connection dies right after COMMIT went out: the engine asks a new connection
    whether the transaction committed (pg_xact_status) and answers as it did."""
    with engine.transaction():
        rs = engine.create_record_store("c")
    real_end = engine._end_pipeline

    def end_then_die() -> None:
        real_end()  # the COMMIT is answered...
        die(engine)  # ...but the answer "never arrives"

    monkeypatch.setattr(engine, "_end_pipeline", end_then_die)
    with engine.transaction(durable=True):
        rs.insert([b"x"])
        rs.get(1)  # the xid's answer arrives with this read
    monkeypatch.undo()
    assert rs.count() == 1  # it committed: a normal commit for the caller
    assert [d for _, d in rs.scan()] == [b"x"]


def test_commit_that_did_not_happen_is_retryable(engine, monkeypatch):
    with engine.transaction():
        rs = engine.create_record_store("c")

    real_exec = engine._exec

    def exec_(query, params=None, **kw):
        if query == "COMMIT":
            die(engine)
        return real_exec(query, params, **kw)

    monkeypatch.setattr(engine, "_exec", exec_)
    with pytest.raises(StorageUnavailable) as ei, engine.transaction():
        rs.insert([b"x"])
        rs.get(1)
    monkeypatch.undo()
    assert not ei.value.in_doubt
    assert rs.count() == 0 and list(rs.scan()) == []


def test_unreachable_database_fails_fast_after_the_bounded_wait(engine, monkeypatch):
    with engine.transaction():
        rs = engine.create_record_store("c")
    engine.reconnect_wait_s = 0.5
    monkeypatch.setattr(engine, "uri", "postgresql://bucketd@127.0.0.1:1/none")
    kill(engine)
    started = time.monotonic()
    with pytest.raises(StorageUnavailable):
        list(rs.scan())
    assert time.monotonic() - started < 3.0  # the bounded wait
    started = time.monotonic()
    for _ in range(5):  # past it: at once
        with pytest.raises(StorageUnavailable), engine.transaction():
            rs.insert([b"x"])
    assert time.monotonic() - started < 1.0
    monkeypatch.undo()
    time.sleep(1.1)  # the pause between attempts
    with engine.transaction():
        rs.insert([b"y"])
    assert rs.count() == 1
    assert [k for k, _ in engine.events] == ["lost", "restored"]
