"""Reopening stored buckets, storage failures, direct writes and clearing."""

from __future__ import annotations

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import decode
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_document import decode_column
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.reopening import ReopeningQuery
from storage.vocabulary.missing import MISSING

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_040_000


def _docs(meta: object, start: int, n: int, base_id: int = 0) -> list[dict]:
    return [{"_id": base_id + i, "t": DatetimeMS(T0 + start + i * 1000), "m": meta, "v": i}
            for i in range(n)]


def _ids(store: FakeStore) -> list[int]:
    return sorted(m["_id"] for m in store.measurements("c", OPTS))


def test_restart_reopens_by_query_and_appends_without_recompressing() -> None:
    store = FakeStore()
    store.insert(BucketCatalog(), "c", OPTS, _docs("a", 0, 5))
    [before] = store.buckets("c")
    cat = BucketCatalog()                     # a server restart: empty catalog
    store.insert(cat, "c", OPTS, _docs("a", 5000, 5, base_id=5))
    [after] = store.buckets("c")
    assert after["_id"] == before["_id"] and after["control"]["count"] == 10
    q = store.queries[-1]
    assert q.meta == "a" and q.time_ms == T0 + 5000
    assert q.filter()["$and"][2] == {"meta": "a"}
    stats = cat.execution_stats("c")
    assert (stats.numBucketsQueried, stats.numBucketsReopened,
            stats.numBucketsOpenedDueToMetadata) == (1, 1, 0)
    # The old column bytes are a prefix of the new ones up to the old final 0x00 byte.
    old_v, new_v = bytes(before["data"]["v"]), bytes(after["data"]["v"])
    assert new_v.startswith(old_v[:-1]) or len(old_v) < 20
    assert list(decode_column(new_v).values()) == list(range(5)) * 2
    assert _ids(store) == list(range(10))


def test_query_finds_nothing_for_other_meta_or_time() -> None:
    store = FakeStore()
    store.insert(BucketCatalog(), "c", OPTS, _docs("a", 0, 1))
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("b", 0, 1, base_id=1))
    store.insert(cat, "c", OPTS, _docs("a", 7_200_000, 1, base_id=2))
    assert len(store.buckets("c")) == 3
    assert cat.execution_stats("c").numBucketQueriesFailed == 2


def test_reopened_full_bucket_rolls_over_by_count() -> None:
    params = TimeseriesParameters(timeseriesBucketMaxCount=4)
    store = FakeStore()
    store.insert(BucketCatalog(params), "c", OPTS, _docs("a", 0, 4))
    cat = BucketCatalog(params)
    store.insert(cat, "c", OPTS, _docs("a", 10_000, 1, base_id=4))
    assert sorted(b["control"]["count"] for b in store.buckets("c")) == [1, 4]
    stats = cat.execution_stats("c")
    assert stats.numBucketsReopened == 1 and stats.numBucketsClosedDueToCount == 1


@pytest.mark.parametrize(("closed", "buckets"), [(True, 2), (False, 1), (1, 2)])
def test_closed_buckets_are_not_reopened(closed: object, buckets: int) -> None:
    """control.closed true keeps a bucket from the reopening query, and so does any value
    but false: MongoDB's query takes a bucket without the flag or with `closed: false`
    (as MongoDB 7.0 writes it into its buckets)."""
    store = FakeStore()
    store.insert(BucketCatalog(), "c", OPTS, _docs("a", 0, 1))
    [b] = store.buckets("c")
    b["control"]["closed"] = closed
    store.put_raw("c", b)
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("a", 1000, 1, base_id=1))
    assert len(store.buckets("c")) == buckets


def test_v1_bucket_is_compressed_then_extended() -> None:
    # A bucket as MongoDB 7.0 stored it: uncompressed, rows out of time order.
    oid = ObjectId(b"\x65\x53\xf1\x00" + b"\x00" * 8)
    t = [T0 + 2000, T0, T0 + 1000]
    v1 = {"_id": oid,
          "control": {"version": 1, "min": {"_id": 0, "t": DatetimeMS(T0), "v": 1},
                      "max": {"_id": 2, "t": DatetimeMS(T0 + 2000), "v": 3}},
          "meta": "a",
          "data": {"_id": {"0": 0, "1": 1, "2": 2},
                   "t": {"0": DatetimeMS(t[0]), "1": DatetimeMS(t[1]), "2": DatetimeMS(t[2])},
                   "v": {"0": 3, "2": 1}}}
    store = FakeStore()
    store.put_raw("c", v1)
    cat = BucketCatalog()
    r = cat.insert_batch("c", OPTS, [{"_id": 3, "t": DatetimeMS(T0 + 3000), "m": "a",
                                      "v": 4}], store)
    [w] = r.writes
    assert w.kind == "update" and w.bucket_id == oid and w.previous_count == 3
    store.apply(cat, r)
    [b] = store.buckets("c")
    assert b["control"]["version"] == 2 and b["control"]["count"] == 4
    assert list(decode_column(bytes(b["data"]["t"])).values()) == [
        DatetimeMS(T0), DatetimeMS(T0 + 1000), DatetimeMS(T0 + 2000), DatetimeMS(T0 + 3000)]
    assert decode_column(bytes(b["data"]["v"])) == {"1": 1, "2": 3, "3": 4}
    assert next(iter(b["data"])) == "t"
    assert b["control"]["max"]["v"] == 4 and b["control"]["min"]["v"] == 1


def test_failed_transaction_leaves_no_trace() -> None:
    store = FakeStore()
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("a", 0, 3))
    store.fail_next = True
    store.insert(cat, "c", OPTS, _docs("a", 3000, 3, base_id=3) + _docs("b", 0, 2, 10))
    assert cat.open_buckets("c") == []          # every touched bucket was dropped
    assert _ids(store) == [0, 1, 2]
    store.insert(cat, "c", OPTS, _docs("a", 3000, 3, base_id=3) + _docs("b", 0, 2, 10))
    assert _ids(store) == [0, 1, 2, 3, 4, 5, 10, 11]
    assert sorted(b["control"]["count"] for b in store.buckets("c")) == [2, 6]


def test_unfinished_batch_is_refused() -> None:
    cat = BucketCatalog()
    r = cat.insert_batch("c", OPTS, _docs("a", 0, 1))
    try:
        cat.insert_batch("c", OPTS, _docs("a", 0, 1))
    except Exception as e:
        assert getattr(e, "code", None) == 1
    else:
        raise AssertionError("second batch accepted")
    cat.abort(r)
    cat.insert_batch("c", OPTS, _docs("a", 0, 1))


def test_direct_write_drops_the_bucket_state() -> None:
    store = FakeStore()
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("a", 0, 2))
    [oid] = list(store.docs["c"])
    del store.docs["c"][oid]                  # e.g. a rawData delete
    cat.handle_direct_write("c", oid)
    assert cat.open_buckets("c") == []
    store.insert(cat, "c", OPTS, _docs("a", 2000, 1, base_id=2))   # no update of a ghost
    [b] = store.buckets("c")
    assert b["control"]["count"] == 1 and b["_id"] != oid


def test_direct_write_on_archived_bucket() -> None:
    store = FakeStore()
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("a", 120_000, 1))
    store.insert(cat, "c", OPTS, _docs("a", 0, 1, base_id=1))      # archives the first
    [(_k, _t, oid)] = cat.archived_buckets("c")
    cat.handle_direct_write("c", oid)
    assert cat.archived_buckets("c") == []


def test_clear_and_drop() -> None:
    store = FakeStore()
    cat = BucketCatalog()
    store.insert(cat, "c", OPTS, _docs("a", 0, 2))
    store.insert(cat, "d", OPTS, _docs("a", 0, 2))
    cat.clear("c")
    assert cat.open_buckets("c") == [] and len(cat.open_buckets("d")) == 1
    assert cat.execution_stats("c").numCommits == 1
    cat.drop_collection("d")
    assert cat.open_buckets("d") == [] and cat.execution_stats("d").numCommits == 0


def test_reopening_query_matches() -> None:
    q = ReopeningQuery("t", {"a": 1}, 10_000, 60, 1000, 128000)
    good = {"control": {"version": 2, "min": {"t": DatetimeMS(0)}}, "meta": {"a": 1},
            "data": {}}
    assert q.matches(good)
    assert q.matches(good, 100) and not q.matches(good, 128000)
    assert not q.matches({**good, "meta": {"a": 2}})
    assert not q.matches({**good, "control": {"min": {"t": DatetimeMS(-60_000)}}})
    assert not q.matches({**good, "control": {"min": {"t": DatetimeMS(10_001)}}})
    # MongoDB's {$or: [{control.closed: {$exists: false}}, {control.closed: false}]}
    at_zero = {"min": {"t": DatetimeMS(0)}}
    assert q.matches({**good, "control": {**at_zero, "closed": False}})
    assert q.matches({**good, "control": {**at_zero, "closed": [True, False]}})
    assert not q.matches({**good, "control": {**at_zero, "closed": True}})
    assert not q.matches({**good, "control": {**at_zero, "closed": 0}})
    assert not q.matches({**good, "control": {**at_zero, "closed": [True]}})
    full = {**good, "data": {"t": {str(i): DatetimeMS(i) for i in range(1000)}}}
    assert not q.matches(full)
    q2 = ReopeningQuery("t", MISSING, 10_000, 60, 1000, 128000)
    assert q2.filter()["$and"][2] == {"meta": {"$exists": False}}
    assert not q2.matches(good)
    assert q2.matches({k: v for k, v in good.items() if k != "meta"})


def test_server_status_and_coll_stats_shapes() -> None:
    cat = BucketCatalog()
    assert cat.server_status() == {}
    store = FakeStore()
    store.insert(cat, "c", OPTS, _docs("a", 0, 4) + _docs("b", 0, 2, 10))
    status = cat.server_status()
    assert status["numBuckets"] == 2 and status["numOpenBuckets"] == 2
    assert status["numIdleBuckets"] == 2 and status["numArchivedBuckets"] == 0
    assert status["memoryUsage"] > 0
    stats = cat.collection_stats("c")
    assert stats["numMeasurementsCommitted"] == 6 and stats["avgNumMeasurementsPerCommit"] == 3
    for name in ("numBytesUncompressed", "numBytesCompressed", "numCompressedBuckets"):
        assert name in stats
    raw = decode(next(iter(store.docs["c"].values())))
    assert raw["control"]["version"] == 2


def _flip_flop(catalog: BucketCatalog, store: FakeStore, rounds: int) -> None:
    """Two writers far apart in time for the same series: every batch rolls the open
    bucket back (archive) or forward (soft close) and reopens the other one."""
    hour = 3600 * 1000
    for r in range(rounds):
        early = [{"_id": 2 * r * 10 + i, "t": DatetimeMS(T0 + r * 10_000 + i * 1000),
                  "m": "a", "v": float(r * 10 + i) / 3, "w": i} for i in range(10)]
        late = [{"_id": (2 * r + 1) * 10 + i, "t": DatetimeMS(T0 + 2 * hour + r * 10_000
                                                             + i * 1000),
                 "m": "a", "v": r, "w": "x" * i} for i in range(10)]
        store.insert(catalog, "c", OPTS, early)
        store.insert(catalog, "c", OPTS, late)


def test_reopening_an_archived_bucket_reuses_its_warm_builders(monkeypatch) -> None:
    from storage.timeseries import columns

    rebuilt: list[int] = []
    real = columns.Columns.from_data
    monkeypatch.setattr(columns.Columns, "from_data",
                        lambda data, count: rebuilt.append(count) or real(data, count))
    warm_store, warm = FakeStore(), BucketCatalog()
    _flip_flop(warm, warm_store, 6)
    reopened = warm.execution_stats("c").numBucketsReopened
    assert reopened >= 5
    assert rebuilt == []
    # The same inserts where every reopening must rebuild the builders from the bytes.
    cold_store, cold = FakeStore(), BucketCatalog()
    cold._registry.keep_warm = lambda b: None  # type: ignore[method-assign]
    _flip_flop(cold, cold_store, 6)
    assert len(rebuilt) == reopened
    strip = [{k: v for k, v in b.items() if k != "_id"} for b in cold_store.buckets("c")]
    assert [{k: v for k, v in b.items() if k != "_id"} for b in warm_store.buckets("c")] \
        == strip
    assert sorted(m["_id"] for m in warm_store.measurements("c", OPTS)) == list(range(120))


def test_warm_builders_are_not_used_for_a_bucket_changed_behind_the_catalog() -> None:
    from storage.bsonutil import encode
    from storage.timeseries.bucket_document import compress_bucket, decompress_bucket

    store, cat = FakeStore(), BucketCatalog()
    _flip_flop(cat, store, 2)     # ends with the early bucket soft-closed, kept warm
    [early] = [oid for oid in store.docs["c"] if oid in cat._registry.warm
               and decode(store.docs["c"][oid])["control"]["count"] == 20]
    # Rewrite that bucket without field "w", as a rawData update would, but without
    # telling the catalog: the byte check must refuse the warm builders.
    flat = decompress_bucket(decode(store.docs["c"][early]))
    del flat["data"]["w"]
    flat["control"]["min"].pop("w")
    flat["control"]["max"].pop("w")
    store.docs["c"][early] = encode(compress_bucket(flat, "t"))
    store.insert(cat, "c", OPTS, [{"_id": 999, "t": DatetimeMS(T0 + 20_500), "m": "a",
                                   "v": 1.0}])
    reopened = decode(store.docs["c"][early])
    assert reopened["control"]["count"] == 21
    assert list(reopened["data"]) == ["t", "_id", "v"]
    assert sorted(m["_id"] for m in store.measurements("c", OPTS)) == [*range(40), 999]
