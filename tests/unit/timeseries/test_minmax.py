"""control.min/max and schema tracking, against jstests/core/timeseries/write/timeseries_min_max.js."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64, MaxKey, MinKey
from bson.datetime_ms import DatetimeMS

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
