"""control.min/max and schema tracking, against jstests/core/timeseries/write/timeseries_min_max.js."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64, MaxKey, MinKey
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bson_order import compare
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.minmax import MinMax, Schema
from storage.timeseries.options import parse_timeseries_options

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "time", "metaField": "meta"})

# (inserted doc, expected min, expected max) per step; None marks a fresh collection.
# Straight from timeseries_min_max.js (control.min/max without _id and time).
MIN_MAX_JSTEST: list[tuple[dict, dict, dict] | None] = [
    ({"a": {}}, {"a": {}}, {"a": {}}),
    ({"a": {"x": {}}}, {"a": {"x": {}}}, {"a": {"x": {}}}),
    ({"a": {"x": {"y": 1}}}, {"a": {"x": {"y": 1}}}, {"a": {"x": {"y": 1}}}),
    ({"a": {"x": {}}}, {"a": {"x": {"y": 1}}}, {"a": {"x": {"y": 1}}}),
    None,
    ({"meta": 1}, {}, {}),
    None,
    ({"a": {"x": 1, "y": 2}, "b": [1, 2]}, {"a": {"x": 1, "y": 2}, "b": [1, 2]},
     {"a": {"x": 1, "y": 2}, "b": [1, 2]}),
    ({"a": {"x": 2, "y": 1}, "b": [2, 1]}, {"a": {"x": 1, "y": 1}, "b": [1, 1]},
     {"a": {"x": 2, "y": 2}, "b": [2, 2]}),
    ({"a": {"x": {"z": [3, 4]}}, "b": [{"x": 3, "y": 4}]},
     {"a": {"x": {"z": [3, 4]}}, "b": [{"x": 3, "y": 4}]},
     {"a": {"x": {"z": [3, 4]}}, "b": [{"x": 3, "y": 4}]}),
    ({"a": {"x": {"z": [4, 3]}}, "b": [{"x": 4, "y": 3}, 3, 1]},
     {"a": {"x": {"z": [3, 3]}}, "b": [{"x": 3, "y": 3}, 3, 1]},
     {"a": {"x": {"z": [4, 4]}}, "b": [{"x": 4, "y": 4}, 3, 1]}),
    None,
    ({"a": 1}, {"a": 1}, {"a": 1}),
    ({"a": {"b": 1}}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ({"a": []}, {"a": []}, {"a": []}),
    ({"a": [5]}, {"a": [5]}, {"a": [5]}),
    None,
    ({"a": []}, {"a": []}, {"a": []}),
    ({"a": {"b": 1}}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ({"a": [5]}, {"a": [5]}, {"a": [5]}),
    None,
    ({"a": 1, "c": 1}, {"a": 1, "c": 1}, {"a": 1, "c": 1}),
    ({"b": 2}, {"a": 1, "b": 2, "c": 1}, {"a": 1, "b": 2, "c": 1}),
    ({"c": 3, "d": 3}, {"a": 1, "b": 2, "c": 1, "d": 3}, {"a": 1, "b": 2, "c": 3, "d": 3}),
    None,
    ({"a": 1.5}, {"a": 1.5}, {"a": 1.5}),
    ({"a": Int64(2)}, {"a": 1.5}, {"a": Int64(2)}),
    ({"a": 1}, {"a": 1}, {"a": Int64(2)}),
    ({"a": Decimal128("2.5")}, {"a": 1}, {"a": Decimal128("2.5")}),
    ({"a": 0.5}, {"a": 0.5}, {"a": Decimal128("2.5")}),
]


def _same(a: Any, b: Any) -> bool:
    """Equal with types (Int64 vs int vs float) and unordered object fields, like docEq."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and compare(a, b) == 0


def test_min_max_matches_mongodb_jstest() -> None:
    catalog = BucketCatalog(id_seed=1)
    store = FakeStore()
    coll = 0
    t = 1_700_000_000_000
    for step in MIN_MAX_JSTEST:
        if step is None:
            coll += 1
            continue
        doc, exp_min, exp_max = step
        t += 1000
        doc = {"_id": t, **doc, "time": DatetimeMS(t)}
        store.insert(catalog, coll, OPTS, [doc])
        [bucket] = [b for b in store.buckets(coll)
                    if b["control"]["min"]["_id"] <= t <= b["control"]["max"]["_id"]]
        got_min = {k: v for k, v in bucket["control"]["min"].items() if k not in ("_id", "time")}
        got_max = {k: v for k, v in bucket["control"]["max"].items() if k not in ("_id", "time")}
        assert _same(got_min, exp_min), (doc, got_min, exp_min)
        assert _same(got_max, exp_max), (doc, got_max, exp_max)


def test_field_order_follows_mongodb_lock_step_insertion() -> None:
    mm = MinMax()
    mm.update({"time": DatetimeMS(0)})
    mm.update({"_id": 1, "a": 1, "c": 1, "time": DatetimeMS(5)})
    assert list(mm.min()) == ["_id", "a", "c", "time"]
    mm.update({"_id": 2, "b": 2, "time": DatetimeMS(6)})
    assert list(mm.min()) == ["_id", "b", "a", "c", "time"]
    mm.update({"c": 3, "d": 3})
    assert list(mm.min()) == ["_id", "b", "a", "c", "d", "time"]
    mm2 = MinMax()
    mm2.update({"t": DatetimeMS(0)})
    mm2.update({"t": DatetimeMS(1), "m": {"x": 1}, "v": 1}, "m")
    assert mm2.min() == {"t": DatetimeMS(0), "v": 1}
    assert list(mm2.max()) == ["t", "v"]


@pytest.mark.parametrize(("values", "lo", "hi"), [
    ([3, 1.5, Int64(7)], 1.5, Int64(7)),
    (["b", "a", "c"], "a", "c"),
    ([DatetimeMS(5), DatetimeMS(-5)], DatetimeMS(-5), DatetimeMS(5)),
    ([float("nan"), 1.0], float("nan"), 1.0),
    ([None, 5, "x"], None, "x"),
    ([MinKey(), 5, MaxKey()], MinKey(), MaxKey()),
    ([True, False], False, True),
    ([1, 1.0], 1, 1),                      # equal values: the first one stays
    ([5, {"a": 1}], 5, {"a": 1}),          # number < object
    ([{"a": 1}, [2]], {"a": 1}, [2]),      # object < array
    ([[2], 5], 5, [2]),
])
def test_scalar_and_cross_type_min_max(values: list, lo: Any, hi: Any) -> None:
    mm = MinMax()
    for v in values:
        mm.update({"x": v})
    got_lo, got_hi = mm.min()["x"], mm.max()["x"]
    assert type(got_lo) is type(lo) and compare(got_lo, lo) == 0
    assert type(got_hi) is type(hi) and compare(got_hi, hi) == 0


def test_from_control_round_trips() -> None:
    mm = MinMax()
    for d in ({"a": 1, "b": {"c": [1, 2]}}, {"a": 3, "b": {"c": [0, 5]}}):
        mm.update(d)
    again = MinMax.from_control(mm.min(), mm.max())
    assert again.min() == mm.min() and again.max() == mm.max()
    again.update({"a": 0})
    assert again.min()["a"] == 0 and mm.min()["a"] == 1


@pytest.mark.parametrize(("first", "second", "compatible"), [
    ({"a": 1}, {"a": 2.5}, True),            # numbers are one canonical type
    ({"a": 1}, {"a": Decimal128("1")}, True),
    ({"a": "x"}, {"a": "y"}, True),
    ({"a": 1}, {"a": "x"}, False),
    ({"a": 1}, {"a": None}, False),
    ({"a": 1}, {"a": {"b": 1}}, False),
    ({"a": {"b": 1}}, {"a": [1]}, False),
    ({"a": {"b": 1}}, {"a": {"b": 2, "c": "new"}}, True),
    ({"a": {"b": 1}}, {"a": {"b": "x"}}, False),
    ({"a": [1, "x"]}, {"a": [2, "y", 3]}, True),
    ({"a": [1, "x"]}, {"a": ["y"]}, False),
    ({"a": 1}, {"b": "x"}, True),            # other fields are independent
    ({"a": DatetimeMS(1)}, {"a": 1}, False),
])
def test_schema_compatibility(first: dict, second: dict, compatible: bool) -> None:
    s = Schema()
    s.update(first)
    assert s.compatible(second) is compatible


def test_schema_from_mixed_control_is_rejected() -> None:
    from storage.timeseries.minmax import SchemaChange

    with pytest.raises(SchemaChange):
        Schema.from_control({"a": 1}, {"a": "x"})


_scalars = st.one_of(
    st.integers(-3, 3), st.floats(allow_infinity=False), st.sampled_from([Int64(2), Int64(-9)]),
    st.sampled_from(["a", "b", ""]), st.booleans(), st.none(),
    st.integers(-5, 5).map(DatetimeMS), st.sampled_from([MinKey(), MaxKey()]),
    st.sampled_from([Decimal128("1.5"), Decimal128("NaN")]))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from("xyz"), inner, max_size=3)), max_leaves=5)
_docs = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "m", "t"]), _values,
                                 max_size=5), min_size=1, max_size=8)


def _identical(a: Any, b: Any) -> bool:
    """Same values, same types and the same field order."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return type(a) is type(b) and compare(a, b) == 0


@settings(max_examples=150, deadline=None)
@given(_docs, st.lists(st.sampled_from([0, 1]), min_size=1, max_size=3))
def test_update_many_equals_one_by_one(docs: list[dict], splits: list[int]) -> None:
    one, bulk = MinMax(), MinMax()
    one.update({"t": DatetimeMS(0)})
    bulk.update({"t": DatetimeMS(0)})
    for d in docs:
        one.update(d, "m")
    # The bulk path in one or more slices (commits of several batches).
    cut = len(docs) // 2 if len(splits) > 1 else len(docs)
    bulk.update_many(docs[:cut], "m")
    if cut < len(docs):
        bulk.update_many(docs[cut:], "m")
    assert _identical(one.min(), bulk.min())
    assert _identical(one.max(), bulk.max())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "m"]), unique=True),
       st.lists(st.lists(_values, min_size=4, max_size=4), min_size=1, max_size=8),
       st.dictionaries(st.sampled_from(["b", "z"]), _scalars, max_size=2))
def test_update_many_with_uniform_names_equals_one_by_one(
        fields: list[str], rows: list[list[Any]], earlier: dict) -> None:
    # every doc has the same fields in the same order; "m" (the meta) is skipped
    docs = [dict(zip(fields, r)) for r in rows]
    names = tuple(f for f in fields if f != "m")
    one, bulk = MinMax(), MinMax()
    for mm in (one, bulk):
        mm.update({"t": DatetimeMS(0), **earlier})
    for d in docs:
        one.update(d, "m")
    bulk.update_many(docs, "m", names)
    assert _identical(one.min(), bulk.min())
    assert _identical(one.max(), bulk.max())
