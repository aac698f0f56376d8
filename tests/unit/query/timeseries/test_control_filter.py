"""Skipping buckets by control.min/max: never a bucket holding a match (hypothesis, over
values of every kind the rule must be careful with), and the buckets it may skip are
skipped."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest
from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from query.match import compile_filter
from query.timeseries.measurements import unpacked_measurements
from query.timeseries.scan import ReadStats
from storage.bsonutil import decode
from storage.catalog import Catalog
from storage.timeseries import (
    BucketCatalog,
    BucketSpec,
    TimeseriesParameters,
    compile_control_filter,
    default_index_spec,
    parse_timeseries_options,
    unpack_bucket,
)

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_714_564_800_000

SCALARS = st.one_of(
    st.integers(-5, 5), st.integers(-(2**40), 2**40).map(Int64),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from([Decimal128("1.5"), Decimal128("-0"), Decimal128("NaN")]),
    st.text("abAB", max_size=2), st.booleans(), st.none(),
    st.integers(0, 5).map(lambda d: DatetimeMS(T0 + d * 1000)),
)
VALUES = st.one_of(SCALARS, st.lists(st.integers(-5, 5), max_size=3),
                   st.fixed_dictionaries({"x": st.integers(-5, 5)}))
CONSTANTS = st.one_of(SCALARS, st.lists(st.integers(-5, 5), max_size=2))


def _buckets(values: list[Any]) -> Any:
    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.w", {})
        coll = cat.get_collection("db", "system.buckets.w")
        coll.create_indexes([default_index_spec(OPTS)])
        docs = []
        for i, v in enumerate(values):
            doc: dict[str, Any] = {"t": DatetimeMS(T0 + 1000 * i), "m": "s"}
            if v is not _MISSING:
                doc["v"] = v
            docs.append(doc)
        result = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=3)).insert_batch(
            "db.w", OPTS, docs, None, ordered=True)
        assert not result.errors
        coll.insert_many([decode(w.document) for w in result.writes],
                         encoded=[w.document for w in result.writes])
    return cat, coll


_MISSING = object()


def _filters(c: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"v": {op: c}} for op in ("$gt", "$gte", "$lt", "$lte", "$eq")]
    out.append({"v": c})
    out.append({"v": {"$in": [c, 3]}})
    out.append({"$and": [{"v": {"$gte": c}}, {"v": {"$lte": c}}]})
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(st.one_of(VALUES, st.just(_MISSING)), min_size=1, max_size=12),
       constant=CONSTANTS)
def test_no_bucket_holding_a_match_is_skipped(values: list[Any], constant: Any) -> None:
    cat, coll = _buckets(values)
    try:
        spec = BucketSpec(OPTS.time_field, OPTS.meta_field)
        every = [m for _rid, raw in coll.scan() for m in unpack_bucket(decode(raw), spec)]
        for flt in _filters(constant):
            matcher = compile_filter(flt)
            want = [m for m in every if matcher.matches(m)]
            got = list(unpacked_measurements(coll, OPTS, flt, None, None,
                                             row_filter_declines=0))
            assert sorted(map(repr, got)) == sorted(map(repr, want)), flt
    finally:
        cat.close()


def test_selective_comparisons_skip_buckets() -> None:
    cat, coll = _buckets(list(range(30)))   # ten buckets of three, v ascending
    try:
        for flt, kept in (({"v": {"$gte": 27}}, 1), ({"v": {"$lt": 3}}, 1),
                          ({"v": 14}, 1), ({"v": {"$in": [1, 29]}}, 2),
                          ({"v": "14"}, 0), ({"w": 1}, 0), ({"v": {"$ne": 3}}, 10)):
            stats = ReadStats()
            list(unpacked_measurements(coll, OPTS, flt, None, None, row_filter_declines=0,
                                       stats=stats))
            assert (stats.buckets_matched, stats.buckets_skipped) == (kept, 10 - kept), flt
    finally:
        cat.close()


@pytest.mark.parametrize(("control", "flt", "may"), [
    ({"min": {"v": 1}, "max": {"v": 9}}, {"v": {"$gt": 9}}, False),
    ({"min": {"v": 1}, "max": {"v": 9}}, {"v": {"$gte": 9}}, True),
    ({"min": {"v": 1}, "max": {"v": 9}}, {"v": "a"}, False),         # type bracketing
    ({"min": {"v": 1}, "max": {"v": "z"}}, {"v": {"$gt": 100}}, True),   # mixed types
    ({"min": {"v": [1]}, "max": {"v": [9]}}, {"v": {"$lt": 0}}, True),   # arrays
    ({"min": {"v": {"x": 1}}, "max": {"v": {"x": 2}}}, {"v": 5}, True),  # objects
    ({"min": {}, "max": {}}, {"v": {"$lt": 0}}, False),                # nobody has v
    ({"min": {"v": 1}, "max": {"v": 9}}, {"v": None}, True),           # null: no check
    ({"min": {"v": math.nan}, "max": {"v": 2.0}}, {"v": {"$lte": math.nan}}, True),
    ({"min": {"v": DatetimeMS(dt.datetime(2024, 1, 2))},
      "max": {"v": DatetimeMS(dt.datetime(2024, 1, 3))}},
     {"v": {"$lt": DatetimeMS(dt.datetime(2024, 1, 1))}}, False),
    ({}, {"v": 1}, True),
])
def test_may_match(control: dict[str, Any], flt: dict[str, Any], may: bool) -> None:
    check = compile_control_filter(flt, OPTS)
    assert (check is None and may) or (check is not None and check.may_match(control) is may)


def test_time_meta_regex_and_collated_strings_make_no_check() -> None:
    assert compile_control_filter({"t": 1, "m": 2, "v": {"$regex": "a"}}, OPTS) is None
    assert compile_control_filter({"v": "a"}, OPTS, simple_strings=False) is None
    assert compile_control_filter({"v.x": 1, "$or": [{"v": 1}]}, OPTS) is None
