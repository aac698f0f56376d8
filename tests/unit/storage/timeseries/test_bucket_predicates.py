"""Bucket-level filters: translation tables and the property that no matching bucket is
ever skipped. A tiny test-only matcher evaluates filters on measurements and buckets."""

from __future__ import annotations

from typing import Any

import pytest
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bson_order import sort_key, type_rank, values_equal
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_predicates import (
    bucket_filter,
    meta_only_filter,
    ttl_expired_filter,
)
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.unpack import BucketSpec, unpack_bucket

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
S = 3_600_000

# -- a tiny matcher (test only): enough of MongoDB's semantics for these filters ---------------

_MISSING = object()


def _values(doc: Any, path: list[str]) -> list[Any]:
    if not path:
        return [doc]
    if isinstance(doc, dict):
        if path[0] not in doc:
            return [_MISSING]
        return _values(doc[path[0]], path[1:])
    if isinstance(doc, list):
        out = []
        for x in doc:
            if isinstance(x, dict):
                out.extend(_values(x, path))
        return out or [_MISSING]
    return [_MISSING]


def _cmp_op(op: str, v: Any, arg: Any) -> bool:
    if op == "$eq":
        if arg is None:
            return v is _MISSING or v is None
        if v is _MISSING:
            return False
        if isinstance(v, list) and any(values_equal(x, arg) for x in v):
            return True
        return values_equal(v, arg)
    if v is _MISSING:
        return False
    cands = v if isinstance(v, list) else [v]
    for x in cands:
        if type_rank(x) != type_rank(arg):
            continue
        kx, ka = sort_key(x), sort_key(arg)
        if (op == "$gt" and kx > ka) or (op == "$gte" and kx >= ka) or (
                op == "$lt" and kx < ka) or (op == "$lte" and kx <= ka):
            return True
    return False


def _field_match(values: list[Any], cond: Any) -> bool:
    if isinstance(cond, dict) and cond and next(iter(cond)).startswith("$"):
        for op, arg in cond.items():
            if op == "$exists":
                ok = any(v is not _MISSING for v in values) == bool(arg)
            elif op == "$in":
                ok = any(_cmp_op("$eq", v, a) for v in values for a in arg)
            elif op == "$ne":
                ok = not any(_cmp_op("$eq", v, arg) for v in values)
            else:
                ok = any(_cmp_op(op, v, arg) for v in values)
            if not ok:
                return False
        return True
    return any(_cmp_op("$eq", v, cond) for v in values)


def matches(doc: dict, flt: dict) -> bool:
    for key, cond in flt.items():
        if key == "$and":
            ok = all(matches(doc, c) for c in cond)
        elif key == "$or":
            ok = any(matches(doc, c) for c in cond)
        elif key == "$nor":
            ok = not any(matches(doc, c) for c in cond)
        else:
            ok = _field_match(_values(doc, key.split(".")), cond)
        if not ok:
            return False
    return True


# -- translation tables ----------------------------------------------------------------------

D = DatetimeMS(10 * S)


@pytest.mark.parametrize(("flt", "expected"), [
    ({"t": {"$gt": D}}, {"$and": [{"control.max.t": {"$gt": D}},
                                  {"control.min.t": {"$gt": DatetimeMS(9 * S)}}]}),
    ({"t": {"$gte": D}}, {"$and": [{"control.max.t": {"$gte": D}},
                                   {"control.min.t": {"$gte": DatetimeMS(9 * S)}}]}),
    ({"t": {"$lt": D}}, {"$and": [{"control.min.t": {"$lt": D}},
                                  {"control.max.t": {"$lt": DatetimeMS(11 * S)}}]}),
    ({"t": {"$lte": D}}, {"$and": [{"control.min.t": {"$lte": D}},
                                   {"control.max.t": {"$lte": DatetimeMS(11 * S)}}]}),
    ({"t": D}, {"$and": [{"control.min.t": {"$lte": D}},
                         {"control.min.t": {"$gte": DatetimeMS(9 * S)}},
                         {"control.max.t": {"$gte": D}},
                         {"control.max.t": {"$lte": DatetimeMS(11 * S)}}]}),
    ({"m": "a"}, {"meta": "a"}),
    ({"m.x.y": {"$gt": 3}}, {"meta.x.y": {"$gt": 3}}),
    ({"m": {"$exists": False}}, {"meta": {"$exists": False}}),
    ({"v": 5}, None),
    ({"t": 5}, None),                           # never true; MongoDB leaves it alone too
    ({"t": {"$ne": D}}, None),
    ({"$expr": {"$gt": ["$v", 1]}}, None),
    ({"m": "a", "v": 3}, {"meta": "a"}),
    ({"$or": [{"m": "a"}, {"v": 3}]}, None),
    ({"$or": [{"m": "a"}, {"m": "b"}]}, {"$or": [{"meta": "a"}, {"meta": "b"}]}),
    ({"$nor": [{"m": "a"}]}, {"$nor": [{"meta": "a"}]}),
    ({"$nor": [{"t": D}]}, None),
    ({"$and": [{"m": "a"}, {"v": 1}, {"m.k": 2}]}, {"$and": [{"meta": "a"}, {"meta.k": 2}]}),
])
def test_translation_table(flt: dict, expected: dict | None) -> None:
    assert bucket_filter(flt, OPTS) == expected


def test_in_on_time_is_an_or_of_equalities() -> None:
    out = bucket_filter({"t": {"$in": [D, DatetimeMS(0)]}}, OPTS)
    assert out is not None and len(out["$or"]) == 2
    assert bucket_filter({"t": {"$in": [D, "x"]}}, OPTS) is None


def test_meta_only_filter() -> None:
    assert meta_only_filter({"m.a": 1, "$or": [{"m": 2}, {"m": {"$gt": 5}}]}, OPTS) == {
        "meta.a": 1, "$or": [{"meta": 2}, {"meta": {"$gt": 5}}]}
    assert meta_only_filter({"m": 1, "v": 2}, OPTS) is None
    assert meta_only_filter({}, OPTS) is None
    no_meta = parse_timeseries_options({"timeField": "t"})
    assert meta_only_filter({"m": 1}, no_meta) is None


def test_pruning_skips_far_buckets() -> None:
    cat, store = BucketCatalog(), FakeStore()
    docs = [{"t": DatetimeMS(h * S + 1), "m": "a", "v": h} for h in range(10)]
    store.insert(cat, "c", OPTS, docs)
    buckets = store.buckets("c")
    assert len(buckets) == 10
    flt = bucket_filter({"t": {"$gte": DatetimeMS(4 * S), "$lt": DatetimeMS(6 * S)}}, OPTS)
    kept = [b for b in buckets if matches(b, flt)]
    assert sorted(b["control"]["min"]["v"] for b in kept) == [4, 5]


def test_id_bounds_alone_prune_by_time() -> None:
    """The `_id` predicates of a time range select the buckets whose ids carry a min time
    in [T1 - S, T2): here those of hours 3 to 5."""
    cat, store = BucketCatalog(), FakeStore()
    store.insert(cat, "c", OPTS, [{"t": DatetimeMS(h * S + 1), "m": "a", "v": h}
                                  for h in range(10)])
    flt = bucket_filter({"t": {"$gte": DatetimeMS(4 * S), "$lt": DatetimeMS(6 * S)}}, OPTS,
                        id_bounds=True)
    ids_only = {"$and": [p for p in _leaves(flt) if "_id" in p]}
    assert len(ids_only["$and"]) == 2
    kept = [b for b in store.buckets("c") if matches(b, ids_only)]
    assert sorted(b["control"]["min"]["v"] for b in kept) == [3, 4, 5]
    assert bucket_filter({"t": {"$gte": DatetimeMS(4 * S)}}, OPTS) == \
        {"$and": [p for p in _leaves(bucket_filter({"t": {"$gte": DatetimeMS(4 * S)}}, OPTS,
                                                   id_bounds=True)) if "_id" not in p]}


def test_id_bounds_keep_every_bucket_on_second_boundaries() -> None:
    """Every comparison, with dates on, just before and just after bucket start times:
    a bucket holding a match passes its `_id` bounds."""
    cat, store = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=2)), FakeStore()
    marks = [60_000 * m + d for m in range(0, 200, 7) for d in (0, 1, 999, 1000)]
    store.insert(cat, "c", OPTS, [{"_id": i, "t": DatetimeMS(t), "m": "a", "v": i}
                                  for i, t in enumerate(marks)])
    spec = BucketSpec("t", "m")
    unpacked = [(b, list(unpack_bucket(b, spec))) for b in store.buckets("c")]
    checked = 0
    for t in sorted({x + d for x in marks for d in (-1, 0, 1)} | {0, S - 1, S, S + 1}):
        for op in ("$eq", "$gt", "$gte", "$lt", "$lte"):
            flt = {"t": {op: DatetimeMS(max(t, 0))}}
            bounded = bucket_filter(flt, OPTS, id_bounds=True)
            for b, measurements in unpacked:
                if any(matches(m, flt) for m in measurements):
                    checked += 1
                    assert matches(b, bounded), (flt, b["_id"], b["control"])
    assert checked > 1000


def _leaves(flt: dict) -> list[dict]:
    out = []
    for p in flt["$and"]:
        out.extend(_leaves(p) if "$and" in p else [p])
    return out


# -- property: a bucket holding a match always passes ----------------------------------------

metas = st.one_of(st.none(), st.sampled_from(["a", "b", 1, 2.5]),
                  st.fixed_dictionaries({"x": st.integers(0, 3), "y": st.sampled_from("pq")}),
                  st.just(_MISSING))
# anywhere, or on (and just after) a few bucket start times, half an hour apart, so that
# filter bounds often fall on the second of a bucket's min time
_starts = st.integers(0, 12).map(lambda k: 1_800_000 * k)
times = st.one_of(st.integers(0, 6 * S), _starts, _starts.map(lambda t: t + 500),
                  _starts.map(lambda t: t - 500 if t else t)).map(DatetimeMS)
measurement = st.tuples(times, metas, st.integers(-5, 5))

time_leaf = st.tuples(st.sampled_from(["$eq", "$gt", "$gte", "$lt", "$lte", "$ne"]), times).map(
    lambda p: {"t": {p[0]: p[1]}})
time_in = st.lists(times, min_size=1, max_size=3).map(lambda ts: {"t": {"$in": ts}})
time_range = st.tuples(times, times).map(lambda p: {"t": {"$gte": p[0], "$lt": p[1]}})
meta_leaf = st.one_of(
    metas.filter(lambda m: m is not _MISSING).map(lambda m: {"m": m}),
    st.integers(0, 3).map(lambda x: {"m.x": x}),
    st.tuples(st.sampled_from(["$gt", "$lte"]), st.sampled_from(["a", 1, 2])).map(
        lambda p: {"m": {p[0]: p[1]}}),
    st.booleans().map(lambda b: {"m": {"$exists": b}}),
)
other_leaf = st.integers(-5, 5).map(lambda v: {"v": {"$gt": v}})
leaf = st.one_of(time_leaf, time_in, time_range, meta_leaf, other_leaf)
filters = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3).map(lambda cs: {"$and": cs}),
        st.lists(children, min_size=1, max_size=3).map(lambda cs: {"$or": cs}),
        st.lists(children, min_size=1, max_size=2).map(lambda cs: {"$nor": cs}),
        st.tuples(meta_leaf, time_leaf).map(lambda p: {**p[0], **p[1]}),
    ),
    max_leaves=6,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(measurement, min_size=1, max_size=40), st.lists(filters, min_size=1,
                                                                  max_size=5))
def test_no_bucket_with_a_match_is_skipped(ms: list, flts: list) -> None:
    cat = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=7))
    store = FakeStore()
    docs = []
    for i, (t, m, v) in enumerate(ms):
        d: dict[str, Any] = {"_id": i, "t": t, "v": v}
        if m is not _MISSING:
            d["m"] = m
        docs.append(d)
    for start in range(0, len(docs), 9):        # several batches: open, archived, reopened
        store.insert(cat, "c", OPTS, docs[start:start + 9])
    spec = BucketSpec("t", "m")
    buckets = store.buckets("c")
    unpacked = [(b, list(unpack_bucket(b, spec))) for b in buckets]
    assert sum(len(u) for _b, u in unpacked) == len(docs)
    for flt in flts:
        bf = bucket_filter(flt, OPTS)
        if bf is None:
            continue
        # the catalog's bucket ids carry their min times (no extended-range dates here)
        bounded = bucket_filter(flt, OPTS, id_bounds=True)
        for b, measurements in unpacked:
            if any(matches(m, flt) for m in measurements):
                assert matches(b, bf), (flt, bf, b["control"], measurements)
                assert matches(b, bounded), (flt, bounded, b["_id"], b["control"])
        exact = meta_only_filter(flt, OPTS)
        if exact is not None:
            for b, measurements in unpacked:
                assert all(matches(m, flt) == matches(b, exact) for m in measurements)


def test_ttl_expires_buckets_whose_newest_measurement_is_old() -> None:
    flt = ttl_expired_filter(OPTS, 60, 10 * S)
    assert flt == {"control.max.t": {"$lt": DatetimeMS(10 * S - 60_000)}}
    old = {"control": {"min": {"t": DatetimeMS(0)}, "max": {"t": DatetimeMS(10 * S - 60_001)}}}
    new = {"control": {"min": {"t": DatetimeMS(0)}, "max": {"t": DatetimeMS(10 * S - 60_000)}}}
    assert matches(old, flt) and not matches(new, flt)
