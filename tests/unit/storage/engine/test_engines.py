"""The engine contract (storage.engine.base), run on every engine (on PostgreSQL with
BUCKETD_TEST_ENGINE=postgresql, see tests/engines.py)."""

from __future__ import annotations

import pytest

from storage.engine import KeyRange, open_engine
from storage.engine.base import DuplicateKeyInIndex, StorageEngine
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from tests.engines import close_test_engine, open_test_engine, unit_engines


@pytest.fixture(params=unit_engines())
def engine(request, tmp_path):
    eng = open_test_engine(request.param, str(tmp_path / "db"))
    yield eng
    close_test_engine(eng)


def k(i: int) -> bytes:
    return i.to_bytes(2, "big")


# --- record stores -----------------------------------------------------------------------


def test_record_store_crud_and_order(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("c1")
        rids = rs.insert([b"a", b"bb", b"ccc"])
    assert rids == sorted(rids) and len(set(rids)) == 3
    assert [rs.get(r) for r in rids] == [b"a", b"bb", b"ccc"]
    assert rs.count() == 3 and rs.data_size() == 6
    with engine.transaction():
        rs.update(rids[1], b"BBBB")
        rs.delete(rids[0])
        more = rs.insert([b"d"])
    assert more[0] > rids[2]
    assert list(rs.scan()) == [(rids[1], b"BBBB"), (rids[2], b"ccc"), (more[0], b"d")]
    assert list(rs.scan(reverse=True)) == [(more[0], b"d"), (rids[2], b"ccc"), (rids[1], b"BBBB")]
    assert list(rs.scan(start=rids[2])) == [(rids[2], b"ccc"), (more[0], b"d")]
    assert list(rs.scan(start=rids[2], reverse=True)) == [(rids[2], b"ccc"), (rids[1], b"BBBB")]
    assert rs.get(rids[0]) is None
    assert rs.get_many([rids[2], rids[0], more[0]]) == [b"ccc", None, b"d"]
    assert rs.count() == 3 and rs.data_size() == 4 + 3 + 1
    with engine.transaction(), pytest.raises(KeyError):
        rs.update(rids[0], b"x")
    with engine.transaction(), pytest.raises(KeyError):
        rs.delete(rids[0])


def test_record_scan_sees_writes_between_items(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("c")
        rids = rs.insert([k(i) for i in range(300)])
    seen = []
    it = rs.scan()
    for rid, _data in it:
        seen.append(rid)
        if len(seen) == 10:
            with engine.transaction():
                rs.delete(rids[11])
                rs.delete(rids[5])
    # A row deleted behind the scan may or may not be seen (it may sit in a fetched
    # chunk); everything else is seen exactly once, in order.
    assert seen == sorted(set(seen))
    assert set(rids) - {rids[11]} <= set(seen)
    assert rids[5] in seen


def test_large_scan_chunks(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("big")
        rs.insert([b"x" * 100] * 5000)
    assert sum(1 for _ in rs.scan()) == 5000
    assert sum(1 for _ in rs.scan(reverse=True)) == 5000


def test_truncate(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("t")
        ix = engine.create_index_store("t_ix", unique=False)
        rids = rs.insert([b"1", b"2"])
        ix.insert([(b"a", rids[0])])
    with engine.transaction():
        rs.truncate()
        ix.truncate()
    assert rs.count() == 0 and list(rs.scan()) == [] and ix.count() == 0


# --- index stores -------------------------------------------------------------------------


def test_unique_index_store(engine: StorageEngine):
    with engine.transaction():
        ix = engine.create_index_store("u", unique=True)
        ix.insert([(k(1), 10), (k(2), 20), (k(3), 30)])
        ix.insert([(k(2), 20)])  # exact re-insert is a no-op
    with pytest.raises(DuplicateKeyInIndex) as ei, engine.transaction():
        ix.insert([(k(4), 40), (k(2), 21)])
    assert ei.value.key == k(2) and ei.value.existing == 20
    assert ix.count() == 3  # the failed scope left nothing
    with pytest.raises(DuplicateKeyInIndex), engine.transaction():
        ix.insert([(k(5), 50), (k(5), 51)])
    assert ix.lookup([k(1), k(5), k(3)]) == {k(1): [10], k(3): [30]}
    with engine.transaction():
        ix.delete([(k(1), 10), (k(2), 99)])  # wrong rid: not removed
    assert [e for e in ix.scan()] == [(k(2), 20), (k(3), 30)]


def test_non_unique_index_store(engine: StorageEngine):
    with engine.transaction():
        ix = engine.create_index_store("n", unique=False)
        ix.insert([(k(2), 5), (k(1), 7), (k(2), 3), (k(2), 5)])
    assert list(ix.scan()) == [(k(1), 7), (k(2), 3), (k(2), 5)]
    assert list(ix.scan(reverse=True)) == [(k(2), 5), (k(2), 3), (k(1), 7)]
    assert ix.lookup([k(2)]) == {k(2): [3, 5]}
    with engine.transaction():
        ix.delete([(k(2), 3)])
    assert list(ix.scan()) == [(k(1), 7), (k(2), 5)]


RANGE_CASES = [
    (KeyRange(), list(range(10))),
    (KeyRange(k(3), True, k(6), True), [3, 4, 5, 6]),
    (KeyRange(k(3), False, k(6), True), [4, 5, 6]),
    (KeyRange(k(3), True, k(6), False), [3, 4, 5]),
    (KeyRange(k(3), False, k(6), False), [4, 5]),
    (KeyRange(None, True, k(2), False), [0, 1]),
    (KeyRange(k(8), False, None, True), [9]),
    (KeyRange(k(5), True, k(5), True), [5]),
    (KeyRange(k(5), False, k(5), True), []),
    (KeyRange(b"\x00", True, b"\x00\x05\x01", True), [0, 1, 2, 3, 4, 5]),  # non-key bounds
]


@pytest.mark.parametrize("unique", [True, False])
@pytest.mark.parametrize(("rng", "expected"), RANGE_CASES)
def test_index_range_scans(engine: StorageEngine, unique, rng, expected):
    with engine.transaction():
        ix = engine.create_index_store("r", unique=unique)
        ix.insert([(k(i), 100 + i) for i in range(10)])
        if not unique:
            ix.insert([(k(i), 200 + i) for i in range(10)])
    fwd = list(ix.scan(rng))
    keys = sorted({int.from_bytes(key, "big") for key, _ in fwd})
    assert keys == expected
    assert list(ix.scan(rng, reverse=True)) == fwd[::-1]
    assert fwd == sorted(fwd)


def test_index_scan_resumes_across_chunks_and_writes(engine: StorageEngine):
    with engine.transaction():
        ix = engine.create_index_store("big", unique=False)
        ix.insert([(k(i % 50), i) for i in range(3000)])
    got = list(ix.scan())
    assert got == sorted(got) and len(got) == 3000
    seen = 0
    for key, rid in ix.scan(KeyRange(k(10), True, k(20), False)):
        seen += 1
        if seen == 1:
            with engine.transaction():
                ix.delete([(key, rid)])
                ix.insert([(k(30), 99999)])
    assert seen == 600


def test_keys_order_as_unsigned_bytes(engine: StorageEngine):
    """Index order is plain byte order: unsigned, a prefix before its extensions (no
    collation, no signed chars)."""
    keys = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"\x01", b"\x7f", b"\x80", b"\x80\x00",
            b"\xfe\xff", b"\xff", b"\xff\x00", b"a", b"B"]
    with engine.transaction():
        ix = engine.create_index_store("o", unique=True)
        ix.insert([(key, i) for i, key in enumerate(keys)])
    assert [key for key, _ in ix.scan()] == sorted(keys)
    assert [key for key, _ in ix.scan(KeyRange(b"\x00", False, b"\x80", True))] == [
        b"\x00\x00", b"\x00\xff", b"\x01", b"B", b"a", b"\x7f", b"\x80"]


# --- transactions --------------------------------------------------------------------------


def test_abort_leaves_nothing(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("keep")
        rs.insert([b"0"])
    with pytest.raises(RuntimeError), engine.transaction():
        rs.insert([b"1", b"2"])
        engine.create_record_store("gone")
        ix = engine.create_index_store("gone_ix", unique=True)
        ix.insert([(b"k", 1)])
        raise RuntimeError("boom")
    assert rs.count() == 1 and [d for _, d in rs.scan()] == [b"0"]
    assert rs.data_size() == 1
    assert engine.list_idents() == ["keep"]
    with pytest.raises(KeyError):
        engine.record_store("gone")


def test_savepoint_rolls_back_inner_only(engine: StorageEngine):
    events = []
    with engine.transaction():
        rs = engine.create_record_store("sp")
        rs.insert([b"outer"])
        engine.on_commit(lambda: events.append("commit-outer"))
        with pytest.raises(ValueError), engine.transaction():
            rs.insert([b"inner"])
            engine.on_rollback(lambda: events.append("rollback-inner"))
            engine.on_commit(lambda: events.append("commit-inner"))
            raise ValueError
        with engine.transaction():
            rs.insert([b"inner2"])
    assert [d for _, d in rs.scan()] == [b"outer", b"inner2"]
    assert events == ["rollback-inner", "commit-outer"]


def test_rollback_restores_dropped_stores(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("d")
        rs.insert([b"x"])
        engine.create_index_store("d_ix", unique=False).insert([(b"k", 1)])
    with pytest.raises(RuntimeError), engine.transaction():
        engine.drop_record_store("d")
        engine.drop_index_store("d_ix")
        raise RuntimeError
    assert [d for _, d in engine.record_store("d").scan()] == [b"x"]
    assert list(engine.index_store("d_ix").scan()) == [(b"k", 1)]
    with engine.transaction():
        engine.drop_record_store("d")
        engine.drop_index_store("d_ix")
    assert engine.list_idents() == []


def test_writes_need_a_transaction(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("w")
    with pytest.raises(RuntimeError):
        rs.insert([b"x"])
    with pytest.raises(RuntimeError):
        engine.create_record_store("w2")


def test_bad_ident(engine: StorageEngine):
    with engine.transaction(), pytest.raises(ValueError):
        engine.create_record_store('bad"name')


# --- sqlite specifics ---------------------------------------------------------------------------


def test_sqlite_reopen_keeps_everything(tmp_path):
    path = str(tmp_path / "db")
    eng = open_engine("sqlite", path)
    with eng.transaction():
        rs = eng.create_record_store("c")
        rids = rs.insert([b"hello", b"world"])
        ix = eng.create_index_store("c_u", unique=True)
        ix.insert([(b"a", rids[0])])
        eng.create_index_store("c_n", unique=False).insert([(b"a", rids[0]), (b"a", rids[1])])
    with eng.transaction():
        rs.delete(rids[0])
    eng.close()
    eng = open_engine("sqlite", path)
    try:
        rs = eng.record_store("c")
        assert rs.count() == 1 and rs.data_size() == 5
        assert list(rs.scan()) == [(rids[1], b"world")]
        assert eng.index_store("c_u").unique and not eng.index_store("c_n").unique
        assert list(eng.index_store("c_n").scan()) == [(b"a", rids[0]), (b"a", rids[1])]
        with eng.transaction():
            assert rs.insert([b"x"])[0] > rids[1]
    finally:
        eng.close()


def test_sqlite_dbpath_is_locked(tmp_path):
    path = str(tmp_path / "db")
    eng = open_engine("sqlite", path)
    try:
        with pytest.raises(MongoError) as ei:
            open_engine("sqlite", path)
        assert ei.value.code == ErrorCode.DBPathInUse
    finally:
        eng.close()
    open_engine("sqlite", path).close()  # released on close


def test_sqlite_durable_commit_and_flush(tmp_path):
    eng = open_engine("sqlite", str(tmp_path / "db"), group_commit_ms=0)
    try:
        with eng.transaction(durable=True):
            eng.create_record_store("j").insert([b"x"])
        with eng.transaction():
            eng.record_store("j").insert([b"y"])
        eng.flush()
        eng.checkpoint()
        stats = eng.stats()
        assert stats["durable"] is True and stats["fileSize"] > 0
        assert eng.record_store("j").storage_size() > 0
    finally:
        eng.close()


def test_unknown_engine():
    with pytest.raises(ValueError):
        open_engine("rocks")


def test_sqlite_checkpoint_returns_space_of_dropped_stores(tmp_path):
    import os

    path = str(tmp_path / "db")
    eng = open_engine("sqlite", path)
    try:
        with eng.transaction():
            eng.create_record_store("big").insert([b"x" * 1000] * 3000)
        eng.checkpoint()
        full = os.path.getsize(os.path.join(path, "bucketd.sqlite"))
        with eng.transaction():
            eng.drop_record_store("big")
        eng.checkpoint()
        assert os.path.getsize(os.path.join(path, "bucketd.sqlite")) < full // 10
    finally:
        eng.close()


@pytest.mark.parametrize("unique", [True, False])
def test_combined_index_and_record_reads(engine: StorageEngine, unique):
    with engine.transaction():
        rs = engine.create_record_store("jr")
        ix = engine.create_index_store("jr_ix", unique=unique)
        rids = rs.insert([f"doc{i}".encode() for i in range(300)])
        ix.insert([(k(i if unique else i // 3), rid) for i, rid in enumerate(rids)])
    key = k(7)
    want = [(r, rs.get(r)) for r in ix.lookup([key])[key]]
    assert engine.fetch_by_key(ix, rs, key) == want
    assert engine.fetch_by_key(ix, rs, k(9999)) == []
    rng = KeyRange(k(10), False, k(60), True)
    for reverse in (False, True):
        joined = list(engine.scan_with_records(ix, rs, rng, reverse=reverse))
        assert [(key, rid) for key, rid, _ in joined] == list(ix.scan(rng, reverse=reverse))
        assert all(rs.get(rid) == data for _, rid, data in joined)


def test_scan_of_a_dropped_store_fails_cleanly(engine: StorageEngine):
    with engine.transaction():
        rs = engine.create_record_store("gone")
        ix = engine.create_index_store("gone_ix", unique=False)
        rids = rs.insert([b"x"] * 1000)
        ix.insert([(b"k", r) for r in rids])
    scans = [rs.scan(), ix.scan()]
    for it in scans:
        next(it)
    with engine.transaction():
        engine.drop_record_store("gone")
        engine.drop_index_store("gone_ix")
    for it in scans:
        with pytest.raises(MongoError) as ei:
            for _ in it:
                pass
        assert ei.value.code == ErrorCode.QueryPlanKilled
