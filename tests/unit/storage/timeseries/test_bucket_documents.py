"""Bucket documents checked field by field (and byte for byte where MongoDB's are known)."""

from __future__ import annotations

import base64
import struct
from typing import Any

import bson
import pytest
from bson import Int64, ObjectId
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import compress
from storage.bsonutil import CODEC_OPTIONS, decode, encode
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_document import decode_column
from storage.timeseries.bucket_id import oid_has_extended_range_time, oid_time_seconds
from storage.timeseries.options import parse_timeseries_options

from .helpers import FakeStore, date, ms


def _col(bucket: dict, name: str) -> dict[str, Any]:
    return decode_column(bytes(bucket["data"][name]))


def _column_equals_one_shot(bucket: dict, name: str) -> None:
    """Appending over several commits gives the bytes of compressing the rows at once."""
    rows = _col(bucket, name)
    count = bucket["control"]["count"]
    doc = bson.encode(rows, codec_options=CODEC_OPTIONS)
    assert bytes(bucket["data"][name]) == compress(doc, count)


def test_matches_mongodb_change_stream_vectors_byte_for_byte() -> None:
    # jstests/change_streams/timeseries.js (always-compressed buckets): inserting
    # {_id: 1, ts: new Date(1000), meta: {a: 1}} twice.
    opts = parse_timeseries_options({"timeField": "ts", "metaField": "meta"})
    cat = BucketCatalog(id_seed=0)
    store = FakeStore()
    r = cat.insert_batch("db.ts", opts, [{"_id": 1.0, "ts": DatetimeMS(1000), "meta": {"a": 1}}],
                         store)
    [w] = r.writes
    assert w.kind == "insert"
    doc = decode(w.document)
    assert doc["control"] == {"version": 2, "min": {"_id": 1.0, "ts": DatetimeMS(0)},
                              "max": {"_id": 1.0, "ts": DatetimeMS(1000)}, "count": 1}
    assert type(doc["control"]["count"]) is int
    assert doc["meta"] == {"a": 1}
    assert doc["data"]["ts"] == Binary(base64.b64decode("CQDoAwAAAAAAAAA="), 7)
    assert doc["data"]["_id"] == Binary(base64.b64decode("AQAAAAAAAADwPwA="), 7)
    assert list(doc) == ["_id", "control", "meta", "data"]
    assert list(doc["control"]) == ["version", "min", "max", "count"]
    store.apply(cat, r)

    r = cat.insert_batch("db.ts", opts, [{"_id": 1.0, "ts": DatetimeMS(1000), "meta": {"a": 1}}],
                         store)
    [w] = r.writes
    assert w.kind == "update" and w.previous_count == 1
    assert w.control_changes == {"count": 2}
    diffs = {c.name: (c.diff.offset, c.diff.data) for c in w.column_changes}
    assert diffs == {"ts": (10, base64.b64decode("gA4AAAAAAAAAAA==")),
                     "_id": (10, base64.b64decode("kA4AAAAAAAAAAA=="))}
    store.apply(cat, r)
    [bucket] = store.buckets("db.ts")
    assert bucket["control"]["count"] == 2
    assert _col(bucket, "ts") == {"0": DatetimeMS(1000), "1": DatetimeMS(1000)}


def test_one_meta_and_many() -> None:
    opts = parse_timeseries_options({"timeField": "t", "metaField": "m"})
    cat, store = BucketCatalog(), FakeStore()
    docs = []
    for i in range(30):
        docs.append({"_id": i, "t": date(ms("2024-01-01T00:00:00") + i * 1000),
                     "m": f"host{i % 3}", "v": i})
    r = store.insert(cat, "c", opts, docs)
    assert r.errors == [] and r.num_inserted == 30
    buckets = store.buckets("c")
    assert sorted(b["meta"] for b in buckets) == ["host0", "host1", "host2"]
    for b in buckets:
        host = int(b["meta"][-1])
        assert b["control"]["count"] == 10
        assert b["control"]["min"]["v"] == host and b["control"]["max"]["v"] == 27 + host
        assert list(_col(b, "v").values()) == list(range(host, 30, 3))
        assert "m" not in b["data"] and "m" not in b["control"]["min"]
        assert list(b["data"]) == ["t", "_id", "v"]
    assert cat.collection_stats("c")["numBucketsOpenedDueToMetadata"] == 3
    # One open bucket per meta value.
    assert len(cat.open_buckets("c")) == 3


@pytest.mark.parametrize(("spec", "rounding_s"), [
    ({"granularity": "seconds"}, 60),
    ({"granularity": "minutes"}, 3600),
    ({"granularity": "hours"}, 86400),
    ({"bucketMaxSpanSeconds": 900, "bucketRoundingSeconds": 900}, 900),
])
def test_granularity_rounds_control_min_and_id(spec: dict, rounding_s: int) -> None:
    opts = parse_timeseries_options({"timeField": "t", **spec})
    cat, store = BucketCatalog(), FakeStore()
    t0 = ms("2024-05-17T13:47:31.250")
    store.insert(cat, "c", opts, [{"_id": 1, "t": date(t0)}])
    [b] = store.buckets("c")
    rounded = t0 - t0 % (rounding_s * 1000)
    assert b["control"]["min"]["t"] == DatetimeMS(rounded)
    assert b["control"]["max"]["t"] == DatetimeMS(t0)
    assert oid_time_seconds(b["_id"]) == rounded // 1000
    assert b["_id"].generation_time.timestamp() == rounded // 1000


@pytest.mark.parametrize("batch", [True, False])
def test_bucket_fills_to_1000_then_rolls_over(batch: bool) -> None:
    opts = parse_timeseries_options({"timeField": "time"})
    cat, store = BucketCatalog(), FakeStore()
    base = ms("2024-01-01T01:00:00")
    docs = [{"_id": i, "time": date(base + i * 1000), "x": i} for i in range(1001)]
    if batch:
        store.insert(cat, "c", opts, docs)
    else:
        for chunk in range(0, 1001, 100):
            store.insert(cat, "c", opts, docs[chunk:chunk + 100])
    b0, b1 = sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["_id"])
    assert b0["control"]["count"] == 1000 and b1["control"]["count"] == 1
    assert (b0["control"]["min"]["x"], b0["control"]["max"]["x"]) == (0, 999)
    assert (b1["control"]["min"]["x"], b1["control"]["max"]["x"]) == (1000, 1000)
    assert "closed" not in b0["control"]
    assert cat.collection_stats("c")["numBucketsClosedDueToCount"] == 1
    _column_equals_one_shot(b0, "x")
    _column_equals_one_shot(b0, "time")


def test_span_overflow_opens_new_bucket() -> None:
    opts = parse_timeseries_options({"timeField": "t", "metaField": "m"})
    cat, store = BucketCatalog(), FakeStore()
    t0 = ms("2024-01-01T00:00:10")
    start = ms("2024-01-01T00:00:00")           # rounded to the minute
    store.insert(cat, "c", opts, [{"_id": 0, "t": date(t0), "m": 1}])
    store.insert(cat, "c", opts, [{"_id": 1, "t": date(start + 3_600_000 - 1), "m": 1}])
    assert len(store.buckets("c")) == 1
    store.insert(cat, "c", opts, [{"_id": 2, "t": date(start + 3_600_000), "m": 1}])
    buckets = sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["t"])
    assert [b["control"]["count"] for b in buckets] == [2, 1]
    assert buckets[1]["control"]["min"]["t"] == DatetimeMS(start + 3_600_000)
    stats = cat.collection_stats("c")
    assert stats["numBucketsClosedDueToTimeForward"] == 1


def test_out_of_order_in_one_batch_is_sorted_v2() -> None:
    # timeseries_out_of_order.js: one insertMany of [01:00:30, 01:00:00].
    opts = parse_timeseries_options({"timeField": "time"})
    cat, store = BucketCatalog(), FakeStore()
    t0, t1 = ms("2021-01-01T01:00:00"), ms("2021-01-01T01:00:30")
    store.insert(cat, "c", opts, [{"_id": 0, "time": date(t1)}, {"_id": 1, "time": date(t0)}])
    [b] = store.buckets("c")
    assert b["control"]["version"] == 2
    assert (b["control"]["min"]["time"], b["control"]["max"]["time"]) == (date(t0), date(t1))
    assert list(_col(b, "_id").values()) == [1, 0]


def test_out_of_order_across_inserts_promotes_to_v3() -> None:
    opts = parse_timeseries_options({"timeField": "time"})
    cat, store = BucketCatalog(), FakeStore()
    t0, t1 = ms("2021-01-01T01:00:00"), ms("2021-01-01T01:00:30")
    store.insert(cat, "c", opts, [{"_id": 0, "time": date(t1)}])
    r = store.insert(cat, "c", opts, [{"_id": 1, "time": date(t0)}])
    assert r.writes[0].control_changes == {"count": 2, "version": 3}
    [b] = store.buckets("c")
    assert b["control"]["version"] == 3
    assert (b["control"]["min"]["time"], b["control"]["max"]["time"]) == (date(t0), date(t1))
    assert list(_col(b, "_id").values()) == [0, 1]      # appended, not re-sorted
    assert cat.collection_stats("c")["numCompressedBucketsConvertedToUnsorted"] == 1
    _column_equals_one_shot(b, "time")


def test_earlier_than_bucket_min_archives_and_reopens() -> None:
    # timeseries_out_of_order.js third case, then back to the first bucket.
    opts = parse_timeseries_options({"timeField": "time"})
    cat, store = BucketCatalog(), FakeStore()
    t0, t2 = ms("2021-01-01T01:00:00"), ms("2021-01-01T02:00:00")
    store.insert(cat, "c", opts, [{"_id": 0, "time": date(t2)}])
    store.insert(cat, "c", opts, [{"_id": 1, "time": date(t0)}])
    buckets = sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["time"])
    assert [(b["control"]["min"]["time"], b["control"]["max"]["time"]) for b in buckets] == [
        (date(t0), date(t0)), (date(t2), date(t2))]
    stats = cat.collection_stats("c")
    assert stats["numBucketsArchivedDueToTimeBackward"] == 1
    assert len(cat.archived_buckets("c")) == 1
    # A later measurement in the archived bucket's range reopens it from the archive.
    store.insert(cat, "c", opts, [{"_id": 2, "time": date(t2 + 5000)}])
    buckets = sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["time"])
    assert [b["control"]["count"] for b in buckets] == [1, 2]
    stats = cat.collection_stats("c")
    assert stats["numBucketsReopened"] == 1 and stats["numBucketsFetched"] == 1
    assert stats["numBucketsClosedDueToReopening"] == 1


@pytest.mark.parametrize(("iso", "high_bit"), [
    ("1969-12-31T23:59:59", True),
    ("1960-06-01T12:00:00", True),
    ("1970-01-01T00:00:00", False),
    ("2038-01-19T03:14:07", False),
    ("2038-01-19T03:14:08", False),       # rounds down to 03:14:00, still in range
    ("2038-01-19T03:15:00", True),
    ("2100-01-01T00:00:00", True),
])
def test_extended_range_bucket_ids(iso: str, high_bit: bool) -> None:
    opts = parse_timeseries_options({"timeField": "t"})
    cat, store = BucketCatalog(), FakeStore()
    t = ms(iso) + 123
    store.insert(cat, "c", opts, [{"_id": 1, "t": date(t)}])
    [b] = store.buckets("c")
    rounded = t - t % 60_000
    assert b["control"]["min"]["t"] == DatetimeMS(rounded)
    seconds = rounded // 1000
    assert b["_id"].binary[:4] == struct.pack(">I", seconds & 0xFFFFFFFF)
    assert oid_has_extended_range_time(b["_id"]) is high_bit
    if not high_bit:
        assert oid_time_seconds(b["_id"]) == seconds


def test_object_meta_in_different_field_orders_share_a_bucket() -> None:
    opts = parse_timeseries_options({"timeField": "t", "metaField": "m"})
    cat, store = BucketCatalog(), FakeStore()
    metas = [{"c": 1, "b": {"f": True, "d": 0}}, {"b": {"d": 0, "f": True}, "c": 1},
             {"c": 1, "b": {"d": 0, "f": True}}]
    docs = [{"_id": i, "t": date(1000 * i), "m": m} for i, m in enumerate(metas)]
    store.insert(cat, "c", opts, docs)
    [b] = store.buckets("c")
    assert b["control"]["count"] == 3
    raw = next(iter(store.docs["c"].values()))
    stored_meta = bson.decode(raw)["meta"]
    assert list(stored_meta) == ["b", "c"] and list(stored_meta["b"]) == ["d", "f"]
    # Values that differ only in numeric type are different series.
    store.insert(cat, "c", opts, [{"_id": 9, "t": date(9000), "m": {"c": 1.0,
                                                                 "b": {"d": 0, "f": True}}}])
    assert len(store.buckets("c")) == 2


def test_missing_fields_become_skips() -> None:
    opts = parse_timeseries_options({"timeField": "t"})
    cat, store = BucketCatalog(), FakeStore()
    docs = [{"_id": 0, "t": date(0), "a": 1},
            {"_id": 1, "t": date(1000)},
            {"_id": 2, "t": date(2000), "b": "x"},
            {"_id": 3, "t": date(3000), "a": 4, "b": "y"}]
    store.insert(cat, "c", opts, docs[:2])
    store.insert(cat, "c", opts, docs[2:])
    [b] = store.buckets("c")
    assert _col(b, "a") == {"0": 1, "3": 4}
    assert _col(b, "b") == {"2": "x", "3": "y"}
    assert b["control"]["min"] == {"_id": 0, "t": DatetimeMS(0), "a": 1, "b": "x"}
    for name in ("a", "b", "t", "_id"):
        _column_equals_one_shot(b, name)
    assert sorted(store.measurements("c", opts), key=lambda d: d["_id"]) == [
        {"t": DatetimeMS(0), "_id": 0, "a": 1}, {"t": DatetimeMS(1000), "_id": 1},
        {"t": DatetimeMS(2000), "_id": 2, "b": "x"},
        {"t": DatetimeMS(3000), "_id": 3, "a": 4, "b": "y"}]


def test_mixed_field_types() -> None:
    opts = parse_timeseries_options({"timeField": "t"})
    cat, store = BucketCatalog(), FakeStore()
    docs = [{"_id": 0, "t": date(0), "v": 1},
            {"_id": 1, "t": date(1000), "v": 2.5},
            {"_id": 2, "t": date(2000), "v": Int64(-3)}]
    store.insert(cat, "c", opts, docs)
    [b] = store.buckets("c")
    vals = _col(b, "v")
    assert [type(v) for v in vals.values()] == [int, float, Int64]
    assert b["control"]["min"]["v"] == Int64(-3) and b["control"]["max"]["v"] == 2.5
    # A string where numbers were: schema change, new bucket.
    store.insert(cat, "c", opts, [{"_id": 3, "t": date(3000), "v": "s"}])
    buckets = sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["_id"])
    assert [b["control"]["count"] for b in buckets] == [3, 1]
    assert cat.collection_stats("c")["numBucketsClosedDueToSchemaChange"] == 1


def test_measurement_without_id_gets_one_and_bad_times_fail_per_index() -> None:
    opts = parse_timeseries_options({"timeField": "t"})
    cat, store = BucketCatalog(), FakeStore()
    docs: list[Any] = [{"t": date(0), "v": 1}, {"t": 5, "v": 2}, {"v": 3},
                       {"t": date(1000), "v": 4}]
    r = store.insert(cat, "c", opts, docs, ordered=False)
    assert [(i, e.code) for i, e in r.errors] == [(1, 2), (2, 2)]
    assert r.errors[0][1].errmsg == ("'t' must be present and contain a valid BSON UTC "
                                     "datetime value")
    assert r.num_inserted == 2
    ms_ = store.measurements("c", opts)
    assert sorted(m["v"] for m in ms_) == [1, 4]
    assert all(isinstance(m["_id"], ObjectId) for m in ms_)
    # Ordered: stop at the first error.
    r = store.insert(cat, "c", opts, [{"t": date(2000), "v": 5}, {"t": None},
                                      {"t": date(3000), "v": 6}])
    assert [(i, e.code) for i, e in r.errors] == [(1, 2)]
    assert sorted(m["v"] for m in store.measurements("c", opts)) == [1, 4, 5]


def test_raw_bson_measurements_are_accepted() -> None:
    opts = parse_timeseries_options({"timeField": "t", "metaField": "m"})
    cat, store = BucketCatalog(), FakeStore()
    raw = encode({"_id": 1, "t": DatetimeMS(5), "m": {"z": 1, "a": 2}, "v": Int64(7)})
    store.insert(cat, "c", opts, [raw])
    [m] = store.measurements("c", opts)
    assert m == {"t": DatetimeMS(5), "m": {"a": 2, "z": 1}, "_id": 1, "v": Int64(7)}
    assert list(m) == ["t", "m", "_id", "v"]


# jstests/core/timeseries/ddl/bucket_timestamp_rounding.js: (granularity, inserts before
# collMod, expected control.min of the first bucket, collMod target, inserts after,
# expected min of the second bucket, the insert that opens one more bucket, total).
ROUNDING_JSTEST = [
    ("seconds", ["2021-04-22T20:10:14.134", "2021-04-22T20:10:05", "2021-04-22T21:09:59.999"],
     "2021-04-22T20:10:00", None, [], None, "2021-04-22T21:10:00", 2),
    ("minutes", ["2021-04-22T20:10:14.134", "2021-04-22T20:05:00", "2021-04-23T19:59:59.999"],
     "2021-04-22T20:00:00", None, [], None, "2021-04-23T20:00:00", 2),
    ("hours", ["2021-04-22T20:10:14.134", "2021-04-22T10:00:00", "2021-05-21T23:59:59.999"],
     "2021-04-22T00:00:00", None, [], None, "2021-05-23T00:00:00", 2),
    ("seconds", ["2021-04-22T20:10:14.134", "2021-04-22T20:10:05", "2021-04-22T21:09:59.999"],
     "2021-04-22T20:10:00", "minutes",
     ["2021-04-24T20:10:14.134", "2021-04-24T20:05:00", "2021-04-25T19:59:59.999"],
     "2021-04-24T20:00:00", "2021-04-26T00:00:00", 3),
    ("minutes", ["2021-04-22T20:10:14.134", "2021-04-22T20:05:00", "2021-04-22T21:09:59.999"],
     "2021-04-22T20:00:00", "hours",
     ["2021-06-24T20:10:14.134", "2021-06-24T10:00:00", "2021-07-23T23:59:59.999"],
     "2021-06-24T00:00:00", "2021-07-25T00:00:00", 3),
]


@pytest.mark.parametrize(("gran", "first", "first_min", "target", "second", "second_min",
                          "overflow", "total"), ROUNDING_JSTEST)
def test_bucket_timestamp_rounding_jstest(gran: str, first: list, first_min: str,
                                          target: str | None, second: list,
                                          second_min: str | None, overflow: str,
                                          total: int) -> None:
    from storage.timeseries.options import coll_mod_timeseries

    opts = parse_timeseries_options({"timeField": "t", "granularity": gran})
    cat, store = BucketCatalog(), FakeStore()

    def ins(iso: str) -> None:
        store.insert(cat, "c", opts, [{"t": date(iso)}])   # one insert per document

    def by_min() -> list[dict]:
        return sorted(store.buckets("c"), key=lambda b: b["control"]["min"]["t"])

    for iso in first:
        ins(iso)
    [b] = by_min()
    assert b["control"]["min"]["t"] == date(first_min)
    assert oid_time_seconds(b["_id"]) * 1000 == ms(first_min)
    if target is not None:
        opts, changed = coll_mod_timeseries(opts, {"granularity": target})
        assert changed
        for iso in second:
            ins(iso)
        buckets = by_min()
        assert len(buckets) == 2
        assert buckets[1]["control"]["min"]["t"] == date(second_min)
        assert oid_time_seconds(buckets[1]["_id"]) * 1000 == ms(second_min)
    ins(overflow)
    assert len(store.buckets("c")) == total
