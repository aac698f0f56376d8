"""The columnar pre-filter (`row_filter`) keeps every row the full filter matches, and
the measurements it builds are `unpack_bucket`'s, byte for byte."""

from __future__ import annotations

import math
from fractions import Fraction

import bson
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.match import compile_filter
from storage.bsonutil import CODEC_OPTIONS, decode
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.row_filter import compile_row_filter, select_measurements
from storage.timeseries.unpack import BucketSpec, numeric_bucket, unpack_bucket

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_000_000

_INT = st.one_of(st.integers(-3, 3).map(Int64), st.just(Int64(2**53 + 1)),
                 st.just(Int64(-(2**62))))
_INT32 = st.one_of(st.integers(-3, 3), st.just(2**31 - 1))
_FLOAT = st.one_of(st.integers(-6, 6).map(lambda i: i / 2),
                   st.sampled_from([-0.0, math.nan, math.inf, -math.inf]))
_MIXED = st.one_of(_INT, _INT32, _FLOAT, st.just("s"), st.booleans())


@st.composite
def _measurements(draw: st.DrawFn) -> list[dict]:
    """One series whose fields keep their type (so buckets stay whole), some missing."""
    n = draw(st.integers(5, 60))
    fields = {"a": _INT, "b": _FLOAT, "i": _INT32}
    if draw(st.booleans()):
        fields["c"] = _MIXED
    if draw(st.booleans()):  # a column only the generic decoder reads
        fields["o"] = st.integers(0, 2**40).map(lambda i: ObjectId(i.to_bytes(12, "big")))
    meta = draw(st.sampled_from(["x", {"x": "x"}, {"x": "y"}]))
    out = []
    for _ in range(n):
        d: dict = {"t": DatetimeMS(T0 + 1000 * draw(st.integers(0, 50))), "m": meta}
        for name, values in fields.items():
            if draw(st.integers(0, 4)):  # present 4 times out of 5
                d[name] = draw(values)
        out.append(d)
    return out


_CONST = st.one_of(st.integers(-4, 4), st.integers(-4, 4).map(Int64),
                   st.integers(-8, 8).map(lambda i: i / 2),
                   st.sampled_from([-0.0, 1e300, 2**53 + 1, float(2**53), Int64(2**53 + 1),
                                    math.inf, math.nan, "s", True]))
_OP = st.sampled_from(["$gt", "$gte", "$lt", "$lte", "$eq", "$ne"])
_FIELD_FILTER = st.dictionaries(
    st.sampled_from(["a", "a", "b", "b", "i", "c", "t", "a.x"]),
    st.one_of(_CONST, st.dictionaries(_OP, _CONST, min_size=1, max_size=2)),
    min_size=1, max_size=2)
_DATE = st.integers(-1, 51).map(lambda i: DatetimeMS(T0 + 1000 * i))
# conditions on the time field (date comparisons the pre-filter evaluates, others it
# leaves to the full filter) and on the meta field (left to the caller)
_SERIES_FILTER = st.dictionaries(
    st.sampled_from(["t", "t", "m", "m.x"]),
    st.one_of(st.sampled_from(["x", "y"]), _DATE,
              st.dictionaries(_OP, _DATE, min_size=1, max_size=2),
              st.fixed_dictionaries({"$in": st.lists(_DATE, max_size=2)})),
    max_size=2)
_FILTER = st.builds(lambda f, s: {**s, **f}, _FIELD_FILTER, _SERIES_FILTER)
_SPEC = st.sampled_from([BucketSpec("t", "m"), BucketSpec("t", "m", frozenset({"t", "a"}), True),
                         BucketSpec("t", "m", frozenset({"b"}), False)])


def _buckets(measurements: list[dict]) -> list[dict]:
    cat = BucketCatalog(id_seed=2)
    store = FakeStore()
    store.insert(cat, "c", OPTS, [{"_id": i, **d} for i, d in enumerate(measurements)],
                 ordered=False)
    return store.buckets("c")


def _bytes(docs) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [bson.encode(d, codec_options=CODEC_OPTIONS) for d in docs]


@settings(max_examples=400, deadline=None)
@given(_measurements(), _FILTER, _SPEC)
def test_prefiltered_rows_match_as_the_whole_bucket_does(measurements, flt, spec) -> None:
    matcher = compile_filter(flt)
    rows = compile_row_filter(flt, "t", "m")
    # the fields the filter reads, as a read plan names them (top-level: "m", not "m.x")
    read = frozenset(k.split(".")[0] for k in flt)
    for bucket in _buckets(measurements):
        spec2 = BucketSpec(spec.time_field, spec.meta_field,
                           spec.fields | (read if spec.include else frozenset()),
                           spec.include)
        whole = [m for m in unpack_bucket(bucket, spec2) if matcher.matches(m)]
        selected = select_measurements(bucket, spec2, rows) if rows is not None else None
        if selected is None:
            continue
        got = list(selected)
        assert _bytes(m for m in got if matcher.matches(m)) == _bytes(whole)
        if rows.exact and (spec2.include or not spec2.fields & read):
            # the rows kept are those the filter selects, once its meta conditions hold
            meta = compile_filter({k: v for k, v in flt.items() if k.split(".")[0] == "m"})
            if meta.matches({"m": bucket["meta"]}):
                assert _bytes(got) == _bytes(whole)
            else:
                assert whole == []


def test_numeric_comparisons_compile_and_select_few_rows() -> None:
    ms = [{"t": DatetimeMS(T0 + 1000 * i), "m": "x", "a": Int64(i), "b": i / 2}
          for i in range(100)]
    [bucket] = _buckets(ms)
    spec = BucketSpec("t", "m", frozenset({"t", "a"}), True)
    rows = compile_row_filter({"a": {"$gt": 90.5}, "b": {"$lte": 48}}, "t", "m")
    assert rows is not None
    got = list(select_measurements(bucket, BucketSpec("t", "m", frozenset({"t", "a", "b"}),
                                                      True), rows))
    assert [m["a"] for m in got] == [91, 92, 93, 94, 95, 96]
    assert all(type(m["a"]) is Int64 and type(m["t"]) is DatetimeMS for m in got)
    assert list(select_measurements(bucket, spec, compile_row_filter({"a": 7}, "t", "m"))
                ) == [{"t": DatetimeMS(T0 + 7000), "a": 7}]


def test_other_filters_are_not_compiled() -> None:
    day = DatetimeMS(T0)
    for flt in ({"t": {"$gt": 1}}, {"m": 1}, {"a.x": 1}, {"a": {"$in": [1]}}, {"a": "s"},
                {"a": {"$gt": True}}, {"a": {"$gt": math.nan}}, {"$or": [{"a": 1}]},
                {"_id": 1}, {"a": {}}, {"t": {"$in": [day]}},
                # time and meta conditions are left out only of the top-level conjunction
                {"$or": [{"t": {"$gte": day}}, {"a": 1}], "a": 2},
                {"$nor": [{"m": "x"}], "a": 2}, {"$and": [{"t": day}, {"a": 1}]},
                {"a": 2, "$expr": {"$gt": ["$t", day]}}, {"a": {"$not": {"$gt": 1}}}):
        assert compile_row_filter(flt, "t", "m") is None, flt


def test_time_comparisons_with_dates_are_evaluated() -> None:
    ms = [{"t": DatetimeMS(T0 + 1000 * i), "m": "x", "a": Int64(i)} for i in range(20)]
    [bucket] = _buckets(ms)
    spec = BucketSpec("t", "m")
    for flt, want, exact in [
            ({"t": {"$gte": DatetimeMS(T0 + 5000), "$lt": DatetimeMS(T0 + 8000)}},
             [5, 6, 7], True),
            ({"t": DatetimeMS(T0 + 3000), "m": "x"}, [3], True),
            ({"t": {"$lte": DatetimeMS(T0 + 2000)}, "a": {"$gt": 0}}, [1, 2], True),
            ({"t": {"$gt": DatetimeMS(T0 + 17000)}, "m.h": {"$exists": True}}, [18, 19], True),
            # other time conditions are left to the full filter: a superset then
            ({"t": {"$ne": DatetimeMS(T0)}, "a": {"$lt": 2}}, [0, 1], False)]:
        rows = compile_row_filter(flt, "t", "m")
        assert rows is not None and rows.exact is exact, flt
        assert [m["a"] for m in select_measurements(bucket, spec, rows)] == want, flt


def test_decoded_stored_bucket_reads_the_same() -> None:
    [bucket] = _buckets([{"t": DatetimeMS(T0), "m": "x", "a": 1.5}])
    raw = bson.encode(bucket, codec_options=CODEC_OPTIONS)
    rows = compile_row_filter({"a": {"$gte": 1}}, "t", "m")
    assert list(select_measurements(decode(raw), BucketSpec("t", "m"), rows)) == \
        list(unpack_bucket(raw, BucketSpec("t", "m")))


def test_integer_columns_select_exactly_the_matching_rows() -> None:
    """Against int64 values, a double bound selects exactly the rows the comparison
    holds for (no row lost to rounding, none kept needlessly)."""
    values = [-3, -2, -1, 0, 1, 2, 3, 2**53 + 1, 2**53]
    ms = [{"t": DatetimeMS(T0 + 1000 * i), "m": "x", "a": Int64(v)}
          for i, v in enumerate(values)]
    [bucket] = _buckets(ms)
    for c in (-1.5, -0.5, 0.5, 1.5, 2.0, -0.0, 9007199254740992.0):
        for op in ("$gt", "$gte", "$lt", "$lte", "$eq"):
            rows = compile_row_filter({"a": {op: c}}, "t", "m")
            got = [m["a"] for m in select_measurements(bucket, BucketSpec("t", "m"), rows)]
            assert got == [v for v in values if _exact(v, op, c)], (op, c)


def _exact(v: int, op: str, c: float) -> bool:
    a, b = Fraction(v), Fraction(c)
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b, "$eq": a == b}[op]


def test_ints_beside_doubles_are_not_compared_as_doubles() -> None:
    """In a column of doubles and int64s, 2**53 + 1 is above 2.0**53 though its double is
    not: the pre-filter must not drop it."""
    ms = [{"t": DatetimeMS(T0), "m": "x", "a": 0.5},
          {"t": DatetimeMS(T0 + 1000), "m": "x", "a": Int64(2**53 + 1)}]
    [bucket] = _buckets(ms)
    flt = {"a": {"$gt": float(2**53)}}
    rows = compile_row_filter(flt, "t", "m")
    spec = BucketSpec("t", "m")
    selected = select_measurements(bucket, spec, rows)
    got = list(selected) if selected is not None else list(unpack_bucket(bucket, spec))
    matcher = compile_filter(flt)
    assert [m["a"] for m in got if matcher.matches(m)] == [2**53 + 1]
    # the same through positions alone (a filter field the unpacking does not keep)
    nb = numeric_bucket(bucket, spec, {"a"})
    positions = rows.positions(nb)
    assert positions is None or 1 in positions.tolist()


def test_series_conditions_are_left_to_the_full_filter() -> None:
    ms = [{"t": DatetimeMS(T0 + 1000 * i), "m": {"h": "x"}, "a": Int64(i),
           "o": ObjectId(i.to_bytes(12, "big")), "s": f"v{i}"} for i in range(50)]
    [bucket] = _buckets(ms)
    flt = {"m.h": "x", "t": {"$gte": DatetimeMS(T0 + 20_000)}, "a": {"$gt": 40}}
    rows = compile_row_filter(flt, "t", "m")
    assert rows is not None and rows.fields == {"a"}
    got = list(select_measurements(bucket, BucketSpec("t", "m"), rows))
    assert [m["a"] for m in got] == list(range(41, 50))
    assert got == [m for m in unpack_bucket(bucket, BucketSpec("t", "m")) if m["a"] > 40]
    assert type(got[0]["o"]) is ObjectId and got[0]["s"] == "v41"


def test_rows_with_no_field_kept_are_empty_measurements() -> None:
    ms = [{"t": DatetimeMS(T0 + 1000 * i), "m": "x", "a": Int64(i)} for i in range(10)]
    [bucket] = _buckets(ms)
    spec = BucketSpec("t", "m", frozenset(), True)  # e.g. a count reads no field
    rows = compile_row_filter({"a": {"$gte": 7}}, "t", "m")
    assert list(select_measurements(bucket, spec, rows)) == [{}, {}, {}]
