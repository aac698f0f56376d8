"""Group commit of bucket writes (`storage.timeseries.pending_writes.DeferredBucketWrites`) against a
real storage catalog and bucket catalog: what a flush writes equals writing every batch
as it came, and a failed flush loses only what was pending and says so."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bsonutil import decode
from storage.catalog import Catalog
from storage.collection import Collection
from storage.errors import MongoError
from storage.indexes import IndexSpec, KeyGenerator
from storage.timeseries import (
    default_index_spec,
    native_scan,
    parse_timeseries_options,
    pending_writes,
)
from storage.timeseries.absent_series import absent_series
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.index_schema import index_keys_meta_whole
from storage.timeseries.metadata import series_key
from storage.timeseries.pending_writes import (
    DeferredBucketWrites,
    LostWrites,
    write_buckets,
)
from storage.vocabulary.error_codes import ErrorCode

from . import strategies as gen
from .helpers import sequence

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_000_000


def _open(path: str) -> Catalog:
    from query.match import compile_filter

    cat = Catalog.open(path, compile_filter=lambda spec: compile_filter(spec).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c",
                              {"timeseries": {"timeField": "t", "metaField": "m"}})
        cat.get_collection("db", "system.buckets.c").create_indexes([default_index_spec(OPTS)])
    return cat


def _batches() -> list[list[dict]]:
    # 4 series, 6 batches; the second half reaches back in time (archive + reopen)
    out = []
    for b in range(6):
        base = b * 10 if b < 3 else (b - 3) * 10 + 5
        out.append([{"_id": b * 100 + i, "m": i % 4, "v": Int64(b * 100 + i),
                     "t": DatetimeMS(T0 + 1000 * (base + i // 4))} for i in range(12)])
    return out


def _stored(cat: Catalog) -> list[dict]:
    coll = cat.get_collection("db", "system.buckets.c")
    return sorted((decode(raw) for _rid, raw in coll.scan()), key=lambda d: d["_id"].binary)


def _run(path: str, group: bool) -> list[dict]:
    cat = _open(path)
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    for i, docs in enumerate(_batches()):
        result = buckets.insert_batch("db.c", OPTS, docs, None)
        if group:
            deferred.add("db", "system.buckets.c", result.writes)
            if i == 1:
                deferred.flush(cat)  # later updates of these buckets merge over stored ones
        else:
            with cat.transaction():
                write_buckets(cat.get_collection("db", "system.buckets.c"), result.writes)
        buckets.commit(result)
    deferred.flush(cat)
    assert not deferred
    out = _stored(cat)
    check = cat.get_collection("db", "system.buckets.c").validate()
    assert check.valid, check.errors
    cat.close()
    return out


def test_one_flush_writes_what_every_batch_would_have(tmp_path) -> None:
    grouped = _run(str(tmp_path / "a"), True)
    assert grouped == _run(str(tmp_path / "b"), False)
    assert sum(b["control"]["count"] for b in grouped) == 72


def test_merged_writes_keep_the_first_kind_and_stored_view() -> None:
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    first = buckets.insert_batch("db.c", OPTS, _batches()[0], None)
    deferred.add("db", "system.buckets.c", first.writes)
    buckets.commit(first)
    second = buckets.insert_batch("db.c", OPTS, _batches()[1], None)
    assert {w.kind for w in second.writes} == {"update"}
    deferred.add("db", "system.buckets.c", second.writes)
    buckets.commit(second)
    pending = deferred._pending[("db", "system.buckets.c")]
    assert len(pending) == 4
    assert {w.kind for w in pending.values()} == {"insert"}   # never stored yet
    assert all(decode(w.document)["control"]["count"] == 6 for w in pending.values())
    # what reopening by _id reads: the latest pending write
    for w in second.writes:
        assert deferred.write("db", "system.buckets.c", w.bucket_id) is w
    assert deferred.write("db", "system.buckets.other", second.writes[0].bucket_id) is None


def test_a_failed_flush_reports_and_forgets(tmp_path) -> None:
    cat = _open(str(tmp_path / "db"))
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    result = buckets.insert_batch("db.c", OPTS, _batches()[0], None)
    deferred.add("db", "system.buckets.c", result.writes)
    buckets.commit(result)
    # the same bucket ids inserted behind the group commit's back: the flush collides
    with cat.transaction():
        write_buckets(cat.get_collection("db", "system.buckets.c"), result.writes)
    failed: list[tuple[str, str]] = []
    with pytest.raises(MongoError) as info:
        deferred.flush(cat, on_failure=lambda db, name: failed.append((db, name)))
    assert info.value.code == 11000
    assert failed == [("db", "system.buckets.c")]
    assert not deferred and not deferred.due(0)
    assert len(_stored(cat)) == 4   # the transaction left what was there
    cat.close()


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
@pytest.mark.parametrize("failure", ["a bucket disappeared", "after the writes"])
def test_a_failed_flush_forgets_the_keys_it_kept(tmp_path, monkeypatch, failure: str) -> None:
    """The keys an update of a failed flush was written with are not kept for the next
    update: the transaction undid the update. A bucket gone from storage fails the
    flush before any update is written; a failure after the writes (at the commit, say)
    makes every bucket the flush updated forget its keys."""
    cat = _open(str(tmp_path / "db"))
    coll = cat.get_collection("db", "system.buckets.c")
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    for batch in _batches()[:2]:
        result = buckets.insert_batch("db.c", OPTS, sequence(batch), None)
        deferred.add("db", "system.buckets.c", result.writes)
        buckets.commit(result)
        deferred.flush(cat)
    kept = [w.stored_keys for w in result.writes if w.kind == "update"]
    assert len(kept) >= 2 and all(k is not None and k.keys is not None for k in kept)
    later = [{**d, "_id": d["_id"] + 1000} for d in _batches()[2]]
    result = buckets.insert_batch("db.c", OPTS, sequence(later), None)
    deferred.add("db", "system.buckets.c", result.writes)
    buckets.commit(result)
    if failure == "a bucket disappeared":
        # the last bucket written disappears behind the group commit's back
        with cat.transaction():
            rid, _raw = coll.find_id(result.writes[-1].bucket_id)
            coll.delete(rid)
    else:
        def fail(*_args: object) -> None:
            raise MongoError(ErrorCode.WriteConflict, "the commit failed")

        monkeypatch.setattr(pending_writes, "note_written", fail)
    with pytest.raises(MongoError):
        deferred.flush(cat)
    # what a bucket keeps is the keys of the version storage still holds, or nothing
    kept = [w.stored_keys for w in result.writes]
    assert all(k is not None and (k.view is None or k.view is w.previous_index_source)
               for k, w in zip(kept, result.writes))
    if failure == "after the writes":
        assert all(k is not None and k.view is None for k in kept)
    cat.close()


def test_a_failed_flush_tells_the_owner_what_was_lost(tmp_path) -> None:
    cat = _open(str(tmp_path / "db"))
    buckets = BucketCatalog(id_seed=5)
    lost: list[LostWrites] = []
    deferred = DeferredBucketWrites(on_lost=lost.append)
    result = buckets.insert_batch("db.c", OPTS, _batches()[0], None)
    deferred.add("db", "system.buckets.c", result.writes)
    buckets.commit(result)
    with cat.transaction():
        write_buckets(cat.get_collection("db", "system.buckets.c"), result.writes)
    with pytest.raises(MongoError) as info:
        deferred.flush(cat)
    [what] = lost
    assert what.error is info.value
    assert what.namespaces == (("db", "system.buckets.c"),)
    assert what.buckets == len(result.writes) == 4
    cat.close()


def _keyed_per_flush(path: str, monkeypatch: pytest.MonkeyPatch, batch: Callable[[int], list[dict]],
                     index_at: int, index: dict, deferred: DeferredBucketWrites
                     ) -> tuple[list[dict], list[int]]:
    """Six batches (`batch(b)`), each flushed, `index` created before flush `index_at`:
    the stored buckets (validated) and how many documents each flush keyed."""
    computed: list[int] = []
    real = Collection._keys
    monkeypatch.setattr(Collection, "_keys", staticmethod(
        lambda rt, doc: computed.append(1) or real(rt, doc)))
    cat = _open(path)
    coll = cat.get_collection("db", "system.buckets.c")
    buckets = BucketCatalog(id_seed=5)
    per_flush = []
    for b in range(6):
        result = buckets.insert_batch("db.c", OPTS, sequence(batch(b)), None)
        deferred.add("db", "system.buckets.c", result.writes)
        buckets.commit(result)
        if b == index_at:
            with cat.transaction():
                coll.create_indexes([index])
        computed.clear()
        deferred.flush(cat)
        per_flush.append(len(computed))
    check = coll.validate()
    assert check.valid, check.errors
    out = _stored(cat)
    cat.close()
    monkeypatch.setattr(Collection, "_keys", real)
    return out, per_flush


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
def test_an_update_takes_the_keys_its_version_was_written_with(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket updated flush after flush: each update takes the index keys of the version
    it replaces from the insert or update that wrote it, computing only the new version's;
    an index created between two flushes is keyed from the stored version instead. The
    indexes hold exactly what their documents give (validate), as when every key is
    computed."""
    def batch(b: int) -> list[dict]:
        return [{"_id": b * 100 + i, "m": i % 2, "v": Int64(i),
                 "t": DatetimeMS(T0 + 1000 * (b * 10 + i))} for i in range(4)]

    def run(path: str, remember: bool) -> tuple[list[dict], list[int]]:
        return _keyed_per_flush(path, monkeypatch, batch, 4,
                                {"key": {"control.max.t": 1}, "name": "max_t"},
                                DeferredBucketWrites(remember_keys=remember))

    stored, remembered = run(str(tmp_path / "a"), True)
    reference, recomputed = run(str(tmp_path / "b"), False)
    assert stored == reference
    # two buckets, inserted, then updated (2 indexes, then 3): with the keys remembered,
    # an update computes only the new version's keys
    assert recomputed == [0, 8, 8, 8, 12, 12]
    assert remembered == [0, 4, 4, 4, 12, 6]


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
def test_native_writes_are_keyed_without_key_documents(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets of document metas written flush after flush, inserted and updated, with
    an index on the time bounds descending created part-way: their keys come from their
    id, meta keystring and time bounds (`bucket_keys`), no key document is keyed but the
    versions stored before the index came, and storage ends as when every key is made
    from a document (the same documents; validate finds every index entry right)."""
    def batch(b: int) -> list[dict]:
        return [{"_id": ObjectId(bytes(8) + (b * 100 + i).to_bytes(4, "big")),
                 "m": {"b": "x", "a": i % 3}, "v": Int64(i),
                 "t": DatetimeMS(T0 + 1000 * (b * 10 + i))} for i in range(6)]

    def run(path: str) -> tuple[list[dict], list[int]]:
        return _keyed_per_flush(path, monkeypatch, batch, 3,
                                {"key": {"control.max.t": -1, "control.min.t": -1},
                                 "name": "bounds"}, DeferredBucketWrites())

    stored, keyed = run(str(tmp_path / "a"))
    monkeypatch.setattr(pending_writes._KeyedBy, "keys", lambda self, w: None)
    reference, reference_keyed = run(str(tmp_path / "b"))
    assert stored == reference
    assert sum(d["control"]["count"] for d in stored) == 36
    # three buckets updated in 2 indexes (_id, the default one), then 3: from documents,
    # each update's new version is keyed (and, once the index is new, the version it
    # replaces, whose keys were kept for two indexes); from the native state, only that
    assert reference_keyed == [0, 6, 6, 18, 9, 9]
    assert keyed == [0, 0, 0, 9, 0, 0]


# indexes of a buckets collection keying only _id, the meta and the time bounds: the
# default one, one on a field of the meta, one on the time alone (descending)
_BOUNDS_INDEXES = [
    {"meta": 1, "control.min.t": 1, "control.max.t": 1},
    {"meta.a": 1, "control.min.t": 1, "control.max.t": 1},
    {"control.max.t": -1, "control.min.t": -1},
]


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metas=st.lists(gen.VALUE, min_size=1, max_size=3),
       times=st.lists(st.lists(gen.DATE, min_size=1, max_size=4), min_size=1, max_size=3),
       collation=st.sampled_from([None, {"locale": "en", "strength": 2}]),
       data=st.data())
def test_a_native_writes_keys_from_its_state_are_its_documents_keys(
        metas, times, collation, data) -> None:
    """`BucketWrite.key_document` (the id, meta and time bounds, read off the native
    state) gives every index that keys nothing else the keys the write's document has
    there, for any meta value, dates of any range, with or without a collation; and so
    does its document with the meta as its keystring alone (`meta_whole`) for the
    indexes that key the meta whole without a collation."""
    generators = []
    for key in _BOUNDS_INDEXES:
        doc: dict = {"v": 2, "name": "i", "key": key}
        if collation is not None:
            doc["collation"] = collation
        spec = IndexSpec.from_document(doc)
        generators.append((KeyGenerator(spec), index_keys_meta_whole(spec)))
    catalog = BucketCatalog(id_seed=3)
    synthesized = 0
    for batch in times:
        # (with an _id, as drivers send them: the native scan takes the batch)
        docs = [{"_id": ObjectId(), "t": t, "v": 1} | ({"m": data.draw(gen.shuffled(data.draw(
                    st.sampled_from(metas))))} if data.draw(st.integers(0, 4)) else {})
                for t in batch]
        result = catalog.insert_batch("db.c", OPTS, sequence(docs), None, ordered=False)
        for w in result.writes:
            keyed = w.key_document("t")
            if keyed is None:
                continue
            synthesized += 1
            stored = decode(w.document)
            for g, whole in generators:
                theirs = g.keys(stored)
                for mine in [g.keys(keyed)] + (
                        [g.keys(w.key_document("t", meta_whole=True))] if whole else []):
                    assert [k for k, _ in mine.entries] == [k for k, _ in theirs.entries]
                    assert mine.multikey_paths == theirs.multikey_paths
        catalog.commit(result)
    # every batch has measurements with a date: some bucket was written natively
    assert synthesized


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
def test_an_update_takes_the_record_and_length_its_version_was_written_with(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flush after flush, the updates of buckets the group commit wrote find their records
    and the stored lengths from those writes, with no lookup in the `_id` index, and the
    collection's data size stays the sum of its records' lengths. A bucket gone from
    storage behind the catalog's back still fails the flush that updates it."""
    looked_up: list[object] = []
    real = Collection.record_ids
    monkeypatch.setattr(Collection, "record_ids",
                        lambda self, values: looked_up.extend(values) or real(self, values))
    cat = _open(str(tmp_path / "db"))
    coll = cat.get_collection("db", "system.buckets.c")
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    for b in range(5):
        docs = [{"_id": b * 100 + i, "m": i % 3, "v": Int64(b * 7 + i),
                 "t": DatetimeMS(T0 + 1000 * (b * 10 + i))} for i in range(6)]
        result = buckets.insert_batch("db.c", OPTS, sequence(docs), None)
        deferred.add("db", "system.buckets.c", result.writes)
        buckets.commit(result)
        if b == 4:
            # the last bucket written disappears behind the group commit's back
            with cat.transaction():
                rid, _raw = coll.find_id(result.writes[-1].bucket_id)
                coll.delete(rid)
            with pytest.raises(MongoError) as failed:
                deferred.flush(cat)
            assert failed.value.code == ErrorCode.WriteConflict
            assert "disappeared" in str(failed.value)
            break
        deferred.flush(cat)
        assert [w.kind for w in result.writes] == ["insert" if b == 0 else "update"] * 3
        assert coll.data_size() == sum(len(raw) for _rid, raw in coll.scan())
    assert looked_up == []
    cat.close()


def test_the_memo_of_absent_series_knows_every_stored_bucket(tmp_path) -> None:
    """Group commits of inserts, updates, archives and reopenings (the memo learns from
    the inserts alone): for every bucket storage holds, the memo of absent series never
    says that storage holds none of its series, or none starting when it starts."""
    cat = _open(str(tmp_path / "db"))
    coll = cat.get_collection("db", "system.buckets.c")
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    assert absent_series(coll) is not None  # born over the empty collection
    kinds = set()
    # and a batch from days before the others: new buckets of the same series
    before = [{"_id": 10_000 + i, "m": i % 4, "v": Int64(i),
               "t": DatetimeMS(T0 - 3 * 86_400_000 + 1000 * i)} for i in range(8)]
    for docs in [*_batches(), before]:
        result = buckets.insert_batch("db.c", OPTS, docs, None)
        kinds.update(w.kind for w in result.writes)
        deferred.add("db", "system.buckets.c", result.writes)
        buckets.commit(result)
        deferred.flush(cat)
    assert kinds == {"insert", "update"}
    memo = absent_series(coll)
    assert memo is not None
    stored = _stored(cat)
    assert len(stored) == 8
    for b in stored:
        series = series_key(b["meta"])
        start = b["control"]["min"]["t"]
        start_ms = int(start.timestamp() * 1000) if hasattr(start, "timestamp") else int(start)
        assert not memo.holds_none_of(coll, series)
        assert not memo.holds_none_starting(coll, series, start_ms - 1, start_ms)
    cat.close()


def test_an_update_storage_did_not_make_fails_the_flush_as_a_write_conflict(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When SQLite's updates change fewer records than the group commit wrote, with none
    of them missing (it cannot tell which bucket), the flush still fails with
    WriteConflict, and storage keeps what it held before."""
    cat = _open(str(tmp_path / "db"))
    coll = cat.get_collection("db", "system.buckets.c")
    buckets = BucketCatalog(id_seed=5)
    deferred = DeferredBucketWrites()
    engine = cat.engine
    real = engine._execmany
    for b in range(2):
        docs = [{"_id": b * 100 + i, "m": i % 3, "v": Int64(i),
                 "t": DatetimeMS(T0 + 1000 * (b * 10 + i))} for i in range(6)]
        result = buckets.insert_batch("db.c", OPTS, docs, None)
        deferred.add("db", "system.buckets.c", result.writes)
        buckets.commit(result)
        if b == 0:
            deferred.flush(cat)
            before = sorted(raw for _rid, raw in coll.scan())
    assert [w.kind for w in result.writes] == ["update"] * 3
    # the records' updates report one record fewer than they changed
    monkeypatch.setattr(engine, "_execmany",
                        lambda sql, rows: real(sql, rows) - (" SET data = ?" in sql))
    with pytest.raises(MongoError) as failed:
        deferred.flush(cat)
    assert failed.value.code == ErrorCode.WriteConflict
    assert "a bucket disappeared" in str(failed.value)
    monkeypatch.undo()
    assert sorted(raw for _rid, raw in coll.scan()) == before
    cat.close()
