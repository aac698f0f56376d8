"""What only the PostgreSQL engine has: its schema layout, version and migration, several
engines (processes) on one schema, reopening the same schema, durable commits. Runs when BUCKETD_TEST_POSTGRES_URI names a server
(tests/engines.py); the contract itself is test_engines.py's."""

from __future__ import annotations

import os

import pytest

from storage.engine import open_engine
from storage.engine.postgresql import SCHEMA_VERSION, PostgresEngine
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from tests.engines import postgres_scratch, postgres_uri_env

pytestmark = pytest.mark.skipif(not os.environ.get(postgres_uri_env),
                                reason=f"needs {postgres_uri_env} (a PostgreSQL server)")


@pytest.fixture
def place():
    """(uri, schema) of a fresh schema; dropped afterwards."""
    scratch = postgres_scratch()
    schema = scratch.new_schema()
    yield scratch.database(), schema
    scratch.drop_schema(schema)


def sql(uri: str, query: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def test_reopen_keeps_everything(place):
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    with eng.transaction():
        rs = eng.create_record_store("c")
        rids = rs.insert([b"hello", b"world"])
        eng.create_index_store("c_u", unique=True).insert([(b"a", rids[0])])
        eng.create_index_store("c_n", unique=False).insert([(b"a", rids[0]), (b"a", rids[1])])
    with eng.transaction():
        rs.delete(rids[0])
    eng.close()
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        rs = eng.record_store("c")
        assert rs.count() == 1 and rs.data_size() == 5
        assert list(rs.scan()) == [(rids[1], b"world")]
        assert eng.index_store("c_u").unique and not eng.index_store("c_n").unique
        assert list(eng.index_store("c_n").scan()) == [(b"a", rids[0]), (b"a", rids[1])]
        with eng.transaction():
            assert rs.insert([b"x"])[0] > rids[1]
        assert eng.list_idents() == ["c", "c_n", "c_u"]
    finally:
        eng.close()


def test_tables_are_named_by_generated_ids(place):
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        with eng.transaction():
            eng.create_record_store("coll-1.x")
            eng.create_index_store("coll-1.x_ix", unique=False)
    finally:
        eng.close()
    tables = {r[0] for r in sql(uri, "SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                (schema,))}
    stores = dict(sql(uri, f'SELECT ident, id FROM "{schema}".bucketd_stores'))
    assert set(stores) == {"coll-1.x", "coll-1.x_ix"}
    assert tables == {"bucketd_version", "bucketd_stores", "bucketd_catalog_version",
                      f"r{stores['coll-1.x']}", f"i{stores['coll-1.x_ix']}"}
    assert sql(uri, f'SELECT version FROM "{schema}".bucketd_version') == [(SCHEMA_VERSION,)]
    # bytea keys take no collation: nothing in the layout depends on the database locale
    assert sql(uri, "SELECT collation_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND column_name = 'k'", (schema,)) == [(None,)]


def test_two_engines_share_a_schema(place):
    """Two processes' engines: ids never collide, figures add up, and each sees the
    other's stores after a reload; the catalog version moves with every store change."""
    uri, schema = place
    a = open_engine("postgresql", uri=uri, schema=schema)
    b = PostgresEngine(uri, schema=schema)
    try:
        v0 = a.catalog_version()
        with a.transaction():
            a.create_record_store("c")
        assert a.catalog_version() == v0 + 1 == b.catalog_version()
        with pytest.raises(KeyError):
            b.record_store("c")
        b.reload_stores()
        ra, rb = a.record_store("c"), b.record_store("c")
        ids: list[int] = []
        for _ in range(3):  # interleaved batches, each past one reserved block
            with a.transaction():
                ids += ra.insert([b"a" * 10] * 300)
            with b.transaction():
                ids += rb.insert([b"b" * 5] * 300)
        assert len(set(ids)) == len(ids) == 1800
        assert ra.count() == rb.count() == 1800
        assert ra.data_size() == rb.data_size() == 900 * 15
        with b.transaction():  # a transaction's own changes count before its commit
            rb.delete(ids[0])
            assert rb.count() == 1799 and ra.count() == 1800
        with pytest.raises(RuntimeError), a.transaction():
            ra.insert([b"x"])
            raise RuntimeError
        assert ra.count() == rb.count() == 1799
        assert ra.data_size() == 900 * 15 - 10
        assert sorted(i for i, _ in rb.scan()) == sorted(ids[1:])
    finally:
        a.close()
        b.close()


def test_a_stale_process_may_not_change_the_catalog(place):
    uri, schema = place
    a = open_engine("postgresql", uri=uri, schema=schema)
    b = PostgresEngine(uri, schema=schema)
    try:
        a.catalog_seen = a.catalog_version()
        b.catalog_seen = b.catalog_version()
        with a.transaction():
            a.create_index_store("x", unique=False)
        assert a.catalog_seen == a.catalog_version()  # its own change: nothing to reload
        with pytest.raises(MongoError) as ei, b.transaction():
            b.create_index_store("y", unique=False)
        assert ei.value.code == ErrorCode.WriteConflict
        b.reload_stores()
        b.catalog_seen = b.catalog_version()
        with b.transaction():
            b.create_index_store("y", unique=False)
        assert b.list_idents() == ["x", "y"]
    finally:
        a.close()
        b.close()


def test_shards_are_stored_when_given(place):
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        with eng.transaction():
            rs = eng.create_record_store("c")
            rs.insert([b"x", b"y"], shards=[7, -3])
            rs.insert([b"z"])
        sid = sql(uri, f'SELECT id FROM "{schema}".bucketd_stores WHERE ident = %s', ("c",))
        shards = sql(uri, f'SELECT data, shard FROM "{schema}".r{sid[0][0]} ORDER BY id')
        assert shards == [(b"x", 7), (b"y", -3), (b"z", 0)]
    finally:
        eng.close()


def test_deadlocks_are_write_conflicts(place):
    from psycopg import errors as pg_errors

    from storage.engine.postgresql import _storage_error

    for cls in (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
        assert _storage_error(cls("x")).code == ErrorCode.WriteConflict


def test_version_1_is_migrated(place):
    """A schema bucketd 1 left (figures in bucketd_stores, no sequences) opens as
    version 2: ids go on past the highest one, figures and data stay."""
    uri, schema = place
    s = f'"{schema}"'
    sql(uri, f"CREATE SCHEMA {s}")
    sql(uri, f"CREATE TABLE {s}.bucketd_version(version integer NOT NULL)")
    sql(uri, f"INSERT INTO {s}.bucketd_version VALUES (1)")
    sql(uri, f"CREATE TABLE {s}.bucketd_stores(id bigint GENERATED ALWAYS AS IDENTITY "
             "PRIMARY KEY, ident text NOT NULL UNIQUE, kind \"char\" NOT NULL, "
             "count bigint NOT NULL DEFAULT 0, size bigint NOT NULL DEFAULT 0)")
    sql(uri, f"INSERT INTO {s}.bucketd_stores(ident, kind, count, size) VALUES "
             "('c', 'r', 2, 6), ('e', 'r', 0, 0), ('c_u', 'u', 0, 0)")
    sql(uri, f"CREATE TABLE {s}.r1(id bigint PRIMARY KEY, data bytea NOT NULL)")
    sql(uri, f"CREATE TABLE {s}.r2(id bigint PRIMARY KEY, data bytea NOT NULL)")
    sql(uri, f"CREATE TABLE {s}.i3(k bytea PRIMARY KEY, rid bigint NOT NULL)")
    sql(uri, f"INSERT INTO {s}.r1 VALUES (1, 'abc'), (41, 'def')")
    sql(uri, f"INSERT INTO {s}.i3 VALUES ('k', 41)")
    import psycopg

    with psycopg.connect(uri, autocommit=True) as old:  # a layout-1 bucketd still running
        old.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (0x6275636B, schema))
        with pytest.raises(MongoError) as ei:
            open_engine("postgresql", uri=uri, schema=schema)
        assert ei.value.code == ErrorCode.DBPathInUse
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        assert sql(uri, f"SELECT version FROM {s}.bucketd_version") == [(SCHEMA_VERSION,)]
        rs = eng.record_store("c")
        assert rs.count() == 2 and rs.data_size() == 6
        with eng.transaction():
            new = rs.insert([b"ghi"])
            first = eng.record_store("e").insert([b"x"])
        assert new[0] > 41 and first == [1]
        assert [r for r, _ in rs.scan()] == [1, 41, new[0]]
        assert rs.count() == 3 and eng.index_store("c_u").lookup([b"k"]) == {b"k": [41]}
        assert eng.catalog_version() is not None
    finally:
        eng.close()
    eng = open_engine("postgresql", uri=uri, schema=schema)  # and opens again as it is
    eng.close()


def test_a_newer_layout_is_refused(place):
    uri, schema = place
    open_engine("postgresql", uri=uri, schema=schema).close()
    sql(uri, f'UPDATE "{schema}".bucketd_version SET version = %s', (SCHEMA_VERSION + 1,))
    with pytest.raises(MongoError) as ei:
        open_engine("postgresql", uri=uri, schema=schema)
    assert ei.value.code == ErrorCode.UnsupportedFormat


def test_durable_commit_flush_and_figures(place):
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        with eng.transaction(durable=True):
            eng.create_record_store("j").insert([b"x"])
        with eng.transaction():
            eng.record_store("j").insert([b"y" * 10_000])
        eng.flush()
        assert eng.record_store("j").storage_size() > 0
        assert eng.size_bytes() > 0  # type: ignore[attr-defined]
        stats = eng.stats()
        assert stats["name"] == "postgresql" and stats["durable"] is True
        assert stats["schema"] == schema
    finally:
        eng.close()
    # committed asynchronously and flushed: another connection sees both
    assert sql(uri, f'SELECT count(*) FROM "{schema}".bucketd_stores') == [(1,)]


def test_an_unreachable_server_is_a_clear_error():
    with pytest.raises(MongoError) as ei:
        PostgresEngine("postgresql://nobody:secret@127.0.0.1:1/none", connect_timeout_s=1)
    assert ei.value.code == ErrorCode.HostUnreachable
    assert "secret" not in ei.value.errmsg and "127.0.0.1:1" in ei.value.errmsg


def test_bad_schema_name():
    with pytest.raises(ValueError):
        PostgresEngine("postgresql://x@127.0.0.1:1/x", schema='a"; DROP')


def test_a_failed_statement_rolls_back_its_scope_only(place):
    """Writes queue in the transaction's pipeline: an error one of them meets surfaces at
    the next read, and rolling back the scope leaves the engine usable and the outer
    transaction's writes in place."""
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    try:
        with eng.transaction():
            rs = eng.create_record_store("f")
            rs.insert([b"outer"])
            with pytest.raises(MongoError) as ei, eng.transaction():
                rs.insert([b"inner"])
                eng._exec("SELECT 1 / 0")  # type: ignore[attr-defined]  # a queued failure
                rs.get(1)  # the next read meets it
            assert ei.value.code == ErrorCode.InternalError
            rs.insert([b"after"])
        assert [d for _, d in rs.scan()] == [b"outer", b"after"]
        assert rs.count() == 2
        with pytest.raises(MongoError), eng.transaction():
            eng._exec("SELECT 1 / 0")  # type: ignore[attr-defined]  # surfaces at COMMIT
        with eng.transaction():
            rs.insert([b"next"])
        assert rs.count() == 3 and len(list(rs.scan())) == 3
    finally:
        eng.close()


def test_only_durable_commits_wait_for_the_disk(place, monkeypatch):
    """Sessions commit with synchronous_commit off (the WAL writer is the group commit);
    a durable commit (j: true) turns it on for its own transaction, and so does every
    commit with group_commit_ms=0."""
    uri, schema = place
    eng = open_engine("postgresql", uri=uri, schema=schema)
    sent: list[str] = []
    try:
        real = eng._exec  # type: ignore[attr-defined]

        def spy(query, *args, **kwargs):
            sent.append(query)
            return real(query, *args, **kwargs)

        monkeypatch.setattr(eng, "_exec", spy)
        assert eng._q1("SHOW synchronous_commit") == ("off",)  # type: ignore[attr-defined]
        with eng.transaction():
            rs = eng.create_record_store("d")
        assert "SET LOCAL synchronous_commit TO on" not in sent
        with eng.transaction(), eng.transaction(durable=True):  # asked by an inner scope
            rs.insert([b"x"])
        assert sent[-2:] == ["SET LOCAL synchronous_commit TO on", "COMMIT"]
    finally:
        eng.close()
    eng = open_engine("postgresql", uri=uri, schema=schema, group_commit_ms=0)
    try:
        assert eng._q1("SHOW synchronous_commit") == ("on",)  # type: ignore[attr-defined]
    finally:
        eng.close()
