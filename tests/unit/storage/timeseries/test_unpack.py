"""Unpacking v1/v2/v3 buckets into measurements, with include/exclude field sets."""

from __future__ import annotations

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import decode, encode
from storage.errors import MongoError
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_document import compress_bucket, decompress_bucket
from storage.timeseries.bucket_rewrite import rebuild_bucket
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.unpack import BucketSpec, count_measurements, unpack_bucket

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "time", "metaField": "tags"})
OID = ObjectId(b"\x00\x00\x00\x3c" + b"\x01" * 8)

V1 = {"_id": OID,
      "control": {"version": 1, "min": {"_id": 1, "time": DatetimeMS(60_000), "a": 1},
                  "max": {"_id": 3, "time": DatetimeMS(62_000), "a": 5}},
      "meta": {"host": "h1"},
      "data": {"_id": {"0": 1, "1": 2, "2": 3},
               "time": {"0": DatetimeMS(61_000), "1": DatetimeMS(60_000),
                        "2": DatetimeMS(62_000)},
               "a": {"0": 5, "2": 1},
               "b": {"1": "x"}}}

EXPECTED_V1 = [
    {"time": DatetimeMS(61_000), "tags": {"host": "h1"}, "_id": 1, "a": 5},
    {"time": DatetimeMS(60_000), "tags": {"host": "h1"}, "_id": 2, "b": "x"},
    {"time": DatetimeMS(62_000), "tags": {"host": "h1"}, "_id": 3, "a": 1},
]


def _spec(**kw: object) -> BucketSpec:
    return BucketSpec("time", "tags", **kw)  # type: ignore[arg-type]


def test_unpack_v1_in_stored_order_with_mongodb_field_order() -> None:
    out = list(unpack_bucket(V1, _spec()))
    assert out == EXPECTED_V1
    assert [list(d) for d in out] == [list(d) for d in EXPECTED_V1]


def test_unpack_v2_is_time_sorted_and_equals_v1_content() -> None:
    v2 = compress_bucket(V1, "time")
    assert v2["control"]["version"] == 2 and v2["control"]["count"] == 3
    out = list(unpack_bucket(encode(v2), _spec()))
    assert out == sorted(EXPECTED_V1, key=lambda d: int(d["time"]))
    assert count_measurements(v2, "time") == 3
    assert count_measurements(V1, "time") == 3
    back = decompress_bucket(v2)
    assert back["control"]["version"] == 1
    assert back["data"]["a"] == {"1": 5, "2": 1}   # rows now in time order


def test_unpack_v3_keeps_stored_order() -> None:
    cat, store = BucketCatalog(), FakeStore()
    store.insert(cat, "c", OPTS, [{"time": DatetimeMS(5000), "_id": 0, "tags": 1}])
    store.insert(cat, "c", OPTS, [{"time": DatetimeMS(1000), "_id": 1, "tags": 1}])
    [raw] = store.docs["c"].values()
    assert decode(raw)["control"]["version"] == 3
    assert [d["_id"] for d in unpack_bucket(raw, _spec())] == [0, 1]


@pytest.mark.parametrize(("fields", "include", "expected_keys"), [
    ({"a"}, True, [["a"], [], ["a"]]),
    ({"time", "a"}, True, [["time", "a"], ["time"], ["time", "a"]]),
    ({"tags", "b"}, True, [["tags"], ["tags", "b"], ["tags"]]),
    ({"a", "b"}, False, [["time", "tags", "_id"]] * 3),
    ({"time", "tags"}, False, [["_id", "a"], ["_id", "b"], ["_id", "a"]]),
    (set(), False, [list(d) for d in EXPECTED_V1]),
])
def test_include_exclude(fields: set, include: bool, expected_keys: list) -> None:
    out = list(unpack_bucket(V1, _spec(fields=frozenset(fields), include=include)))
    assert [list(d) for d in out] == expected_keys


def test_no_meta_field() -> None:
    doc = {k: v for k, v in V1.items() if k != "meta"}
    out = list(unpack_bucket(doc, BucketSpec("time")))
    assert out[0] == {"time": DatetimeMS(61_000), "_id": 1, "a": 5}
    with pytest.raises(MongoError) as e:
        list(unpack_bucket(V1, BucketSpec("time")))
    assert e.value.code == 5369601


@pytest.mark.parametrize(("bucket", "code"), [
    ({}, 5346510),
    ({"control": {"version": 1}, "data": {"a": {}}}, 5346700),
    ({"data": {"time": {}}}, 5857902),
    ({"control": {}, "data": {"time": {}}}, 5857903),
    ({"control": {"version": 7}, "data": {"time": {}}}, 5857900),
    ({"control": {"version": 2}, "data": {"time": b"\x01"}}, 2),
])
def test_malformed_buckets(bucket: dict, code: int) -> None:
    with pytest.raises(MongoError) as e:
        list(unpack_bucket(bucket, _spec()))
    assert e.value.code == code


def test_empty_data_region_has_no_measurements() -> None:
    assert list(unpack_bucket({"control": {"version": 2}, "data": {}}, _spec())) == []


def test_rebuild_bucket_keeps_min_time_and_id() -> None:
    ms_ = [EXPECTED_V1[0], EXPECTED_V1[2]]
    raw = rebuild_bucket(OID, ms_, OPTS, min_time_ms=60_000)
    doc = decode(raw)
    assert doc["_id"] == OID
    assert doc["control"]["min"] == {"time": DatetimeMS(60_000), "_id": 1, "a": 1}
    assert doc["control"]["max"] == {"time": DatetimeMS(62_000), "_id": 3, "a": 5}
    assert doc["control"]["count"] == 2 and doc["meta"] == {"host": "h1"}
    assert list(unpack_bucket(raw, _spec())) == ms_


def test_numeric_columns_match_generic_decoding() -> None:
    from storage.timeseries.unpack import numeric_columns

    cat, store = BucketCatalog(), FakeStore()
    docs = [{"time": DatetimeMS(1000 * i), "_id": i, "tags": "h",
             **({"a": i * 1.25} if i % 3 else {}), "s": "x"} for i in range(50)]
    store.insert(cat, "c", OPTS, docs[:20])
    store.insert(cat, "c", OPTS, docs[20:])
    [raw] = store.docs["c"].values()
    cols = numeric_columns(raw, ["time", "a", "_id", "s", "nope"])
    assert cols["s"] is None and cols["nope"] is None
    t, a, i = cols["time"], cols["a"], cols["_id"]
    assert t is not None and t.kind == "date" and list(t.values) == [1000 * k for k in range(50)]
    assert a is not None and list(a.present) == [bool(k % 3) for k in range(50)]
    assert [float(v) for v, p in zip(a.values, a.present) if p] == [
        k * 1.25 for k in range(50) if k % 3]
    assert i is not None and list(i.values) == list(range(50))
    assert numeric_columns(V1, ["a"]) == {"a": None}


def test_native_uniform_columns_unpack_like_the_element_decoder() -> None:
    import math
    import random
    import struct

    import bson
    import pytest

    from storage.bsoncolumn import BSONColumnBuilder, native
    from storage.timeseries.bucket_document import decode_column
    from storage.timeseries.unpack import _uniform_column

    if not native.AVAILABLE:
        pytest.skip("the native decoder was not built")
    rnd = random.Random(5)
    packs = {0x12: "<q", 0x10: "<i", 0x01: "<d", 0x09: "<q"}
    cases = {
        0x12: [[0], [2**63 - 1, -(2**63)], [rnd.randrange(-100, 100) for _ in range(1500)]],
        0x10: [[2**31 - 1, -(2**31), 0], [rnd.randrange(0, 9) for _ in range(300)]],
        0x01: [[0.0, -0.0, math.inf, -math.inf, math.nan],
               [round(rnd.uniform(0, 100), 2) for _ in range(700)]],
        0x09: [[-(10**12), 0, 2**41], [1_700_000_000_000 + 10_000 * i for i in range(1000)]],
    }
    for t, seqs in cases.items():
        for seq in seqs:
            b = BSONColumnBuilder()
            for v in seq:
                b.append_element(t, struct.pack(packs[t], v))
            col = b.finalize()
            got = _uniform_column(col)
            assert got is not None, (t, seq[:3])
            assert bson.encode(got) == bson.encode(decode_column(col))
    mixed = BSONColumnBuilder()
    mixed.append_element(0x12, struct.pack("<q", 1))
    mixed.skip()
    assert _uniform_column(mixed.finalize()) is None
