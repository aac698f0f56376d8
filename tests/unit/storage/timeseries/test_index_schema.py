"""Index key translation tables (user form <-> buckets form) and createIndexes refusals."""

from __future__ import annotations

from typing import Any

import pytest

from storage.errors import MongoError
from storage.timeseries.index_schema import (
    bucket_index_key,
    bucket_index_spec,
    default_index_spec,
    drop_index_key,
    supports_reopening_query,
    timeseries_index_key,
    timeseries_index_spec,
)
from storage.timeseries.options import parse_timeseries_options

OPTS = parse_timeseries_options({"timeField": "tm", "metaField": "mm"})

KEYS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"tm": 1}, {"control.min.tm": 1, "control.max.tm": 1}),
    ({"tm": -1}, {"control.max.tm": -1, "control.min.tm": -1}),
    ({"mm": 1}, {"meta": 1}),
    ({"mm": "hashed"}, {"meta": "hashed"}),
    ({"mm.tag1": 1, "tm": 1}, {"meta.tag1": 1, "control.min.tm": 1, "control.max.tm": 1}),
    ({"mm": 1, "tm": -1}, {"meta": 1, "control.max.tm": -1, "control.min.tm": -1}),
    ({"a": 1}, {"control.min.a": 1, "control.max.a": 1}),
    ({"a": -1}, {"control.max.a": -1, "control.min.a": -1}),
    ({"a.b": 1, "mm": -1}, {"control.min.a.b": 1, "control.max.a.b": 1, "meta": -1}),
    ({"loc": "2dsphere"}, {"data.loc": "2dsphere_bucket"}),
    ({"mm.loc": "2dsphere"}, {"meta.loc": "2dsphere"}),
]


@pytest.mark.parametrize(("user", "buckets"), KEYS)
def test_key_translation_both_ways(user: dict, buckets: dict) -> None:
    got = bucket_index_key(OPTS, user)
    assert got == buckets and list(got) == list(buckets)
    back = timeseries_index_key(OPTS, buckets)
    assert back == user and list(back) == list(user)


@pytest.mark.parametrize("key", [
    {"tm": "hashed"}, {"a": "text"}, {"a": "hashed"}, {}, {"$hint": 1}, {"a": True}])
def test_key_translation_refusals(key: dict) -> None:
    with pytest.raises(MongoError) as e:
        bucket_index_key(OPTS, key)
    assert e.value.code == 2


@pytest.mark.parametrize("bucket_key", [
    {"control.min.a": 1},                                   # incomplete pair
    {"control.min.a": 1, "control.max.b": 1},               # different fields
    {"control.min.a": 1, "control.max.a": -1},              # mixed directions
    {"control.max.a": 1, "control.min.a": 1},               # wrong order for ascending
    {"data.a": 1},
    {"_id": 1},
    {"control.min.tm": "hashed"},
])
def test_unmappable_bucket_keys(bucket_key: dict) -> None:
    assert timeseries_index_key(OPTS, bucket_key) is None


def test_no_meta_field_keys_are_measurements() -> None:
    opts = parse_timeseries_options({"timeField": "t"})
    assert bucket_index_key(opts, {"meta": 1}) == {"control.min.meta": 1,
                                                   "control.max.meta": 1}
    assert timeseries_index_key(opts, {"meta": 1}) is None


@pytest.mark.parametrize(("spec", "code"), [
    ({"key": {"a": 1}, "name": "a", "unique": True}, 72),
    ({"key": {"a": "text"}, "name": "a"}, 72),
    ({"key": {"tm": "hashed"}, "name": "x"}, 67),
    ({"key": {"a": 1}, "name": "a", "sparse": True}, 72),
    ({"key": {"tm": 1}, "name": "t", "expireAfterSeconds": 10}, 72),
    ({"key": {"tm": 1}, "name": "t", "partialFilterExpression": {"mm": 1},
      "collation": {"locale": "fr"}}, 85),
    ({"key": {"tm": 1, "mm": 1}, "name": "t", "expireAfterSeconds": 10,
      "partialFilterExpression": {"mm": 1}}, 67),
    ({"key": {"a": 1}, "name": "t", "expireAfterSeconds": 10,
      "partialFilterExpression": {"mm": 1}}, 72),
    ({"key": {"a": 1}, "name": "t", "partialFilterExpression": {"a": {"$gt": 1}}}, 238),
])
def test_create_index_refusals(spec: dict, code: int) -> None:
    with pytest.raises(MongoError) as e:
        bucket_index_spec(OPTS, spec)
    assert e.value.code == code


def test_create_index_specs_and_list_indexes_round_trip() -> None:
    spec = {"key": {"mm.a": 1, "tm": -1}, "name": "x", "hidden": False}
    b = bucket_index_spec(OPTS, spec)
    assert b == {"key": {"meta.a": 1, "control.max.tm": -1, "control.min.tm": -1},
                 "name": "x", "hidden": False}
    assert timeseries_index_spec(OPTS, {"v": 2, **b}) == {"v": 2, **spec}
    # Sparse on time and meta is allowed; unique: false is a no-op.
    assert bucket_index_spec(OPTS, {"key": {"tm": 1}, "name": "s", "sparse": True,
                                    "unique": False})["sparse"] is True
    # A partial filter on the metaField is rewritten and the original spec kept.
    partial = {"key": {"tm": 1}, "name": "p", "partialFilterExpression": {"mm.k": {"$gt": 1}}}
    b = bucket_index_spec(OPTS, partial)
    assert b["partialFilterExpression"] == {"meta.k": {"$gt": 1}}
    assert b["originalSpec"] == partial
    assert timeseries_index_spec(OPTS, b) == partial
    # TTL: time field only, with a metaField partial filter.
    ttl = {"key": {"tm": 1}, "name": "ttl", "expireAfterSeconds": 60,
           "partialFilterExpression": {"mm": "x"}}
    b = bucket_index_spec(OPTS, ttl)
    assert b["key"] == {"control.min.tm": 1} and b["expireAfterSeconds"] == 60
    assert timeseries_index_spec(OPTS, b) == ttl
    # Unmappable bucket indexes are hidden from the view's listIndexes.
    assert timeseries_index_spec(OPTS, {"key": {"_id": 1}, "name": "_id_"}) is None


def test_default_index_and_reopening_support() -> None:
    d = default_index_spec(OPTS)
    assert d == {"v": 2, "key": {"meta": 1, "control.min.tm": 1, "control.max.tm": 1},
                 "name": "mm_1_tm_1"}
    assert timeseries_index_spec(OPTS, d) == {"v": 2, "key": {"mm": 1, "tm": 1},
                                              "name": "mm_1_tm_1"}
    assert default_index_spec(parse_timeseries_options({"timeField": "t"})) is None
    assert supports_reopening_query(OPTS, d["key"])
    assert not supports_reopening_query(OPTS, d["key"], partial=True)
    assert not supports_reopening_query(OPTS, {"control.min.tm": 1, "meta": 1})
    assert supports_reopening_query(parse_timeseries_options({"timeField": "t"}),
                                    {"control.min.t": 1, "control.max.t": 1})


def test_drop_index_by_key() -> None:
    assert drop_index_key(OPTS, {"tm": 1}) == {"control.min.tm": 1, "control.max.tm": 1}
    with pytest.raises(MongoError) as e:
        drop_index_key(OPTS, {"tm": "hashed"})
    assert e.value.code == 27
