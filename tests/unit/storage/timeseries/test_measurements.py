"""Measurements of a known shape skip per-field preparation (`Shape`, `Columns.append_values`)
and end in exactly the bucket bytes and statistics the general path gives."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import asdict

from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.timeseries import TimeseriesParameters, bucket, measurements
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.options import parse_timeseries_options

from .helpers import FakeStore
from .strategies import measurement as measurement_of

T0 = 1_700_000_000_000
OPTS = {
    "m": parse_timeseries_options({"timeField": "t", "metaField": "m"}),
    # same field names, another role: the shapes of one must not serve the other
    "nometa": parse_timeseries_options({"timeField": "t"}),
    "mtime": parse_timeseries_options({"timeField": "x", "metaField": "m"}),
}

_OIDS = [ObjectId(bytes([i]) * 12) for i in range(4)]
_VALUE = st.one_of(
    st.integers(-100, 100).map(Int64),
    st.sampled_from([0.5, -0.0, 0.0, 1.25, math.inf, math.nan, 1e300]),
    st.floats(allow_nan=True),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([2**31, -(2**31) - 1, 2**62]),          # Python ints beyond int32
    st.booleans(), st.none(), st.sampled_from(_OIDS),
    st.integers(0, 10**6).map(lambda s: DatetimeMS(T0 + s)),
    st.sampled_from(["s", "x" * 40]),                         # not fixed-width
)
_TIME = st.one_of(st.integers(0, 4 * 3600).map(lambda s: DatetimeMS(T0 + 1000 * s)),
                  st.just(dt.datetime(2023, 11, 14, 22, 20)))  # converted: general path
_MEASUREMENT = st.fixed_dictionaries(
    {"t": _TIME, "m": st.sampled_from(["a", "b", {"h": 1}, Int64(3)]),
     "x": st.integers(0, 3).map(lambda s: DatetimeMS(T0 + 1000 * s))},
    optional={"v": _VALUE, "w": _VALUE, "n": st.sampled_from([1, 2])})


def _bson_only(d: dict, time_field: str) -> dict:
    """A datetime is converted for the time field only (the server decodes dates as
    DatetimeMS); elsewhere give the DatetimeMS a decoded document would hold."""
    return {k: DatetimeMS(v) if isinstance(v, dt.datetime) and k != time_field else v
            for k, v in d.items()}


# small buckets, so the sizes the catalog tracks decide rollovers
SMALL = TimeseriesParameters(timeseriesBucketMaxSize=300, timeseriesBucketMinCount=2,
                             timeseriesLargeMeasurementThreshold=12)


def _run(batches: list[list[dict]], shaped: bool, coll: str,
         params: TimeseriesParameters | None = None) -> tuple[dict, dict]:
    cat = BucketCatalog(params, id_seed=3)
    if not shaped:
        cat._measurements.shapes = None
    store = FakeStore()
    for i, batch in enumerate(batches):
        docs = [{"_id": i * 1000 + j, **d} for j, d in enumerate(batch)]
        for name in (coll, "m"):  # one catalog, two collections' roles for the fields
            store.insert(cat, name, OPTS[name], [_bson_only(d, OPTS[name].time_field)
                                                 for d in docs], ordered=False)
    return store.docs, asdict(cat.execution_stats(coll))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(_MEASUREMENT, min_size=1, max_size=30), min_size=1, max_size=5),
       st.sampled_from(sorted(OPTS)), st.booleans(), st.sampled_from([None, SMALL]))
def test_shaped_preparation_equals_the_general_path(batches, coll, packed, params) -> None:
    """Also without the native value packing (`_gather` then lists every field)."""
    saved = measurements._PACK_VALUES
    try:
        if not packed:
            measurements._PACK_VALUES = None
        shaped = _run(batches, True, coll, params)
    finally:
        measurements._PACK_VALUES = saved
    assert shaped == _run(batches, False, coll, params)


def test_steady_measurements_take_the_shaped_path() -> None:
    """After the first measurement of a shape, the next ones carry no raw elements until
    something needs them."""
    cat = BucketCatalog(id_seed=1)
    store = FakeStore()
    docs = [{"_id": i, "m": "a", "v": Int64(i), "f": i / 4, "i": i,
             "t": DatetimeMS(T0 + 1000 * i)} for i in range(5)]
    prepared, _ = cat._measurements.prepare_all(docs, OPTS["m"], True)
    assert prepared[0].shape is not None and prepared[0].elems is not None
    assert all(p.shape is prepared[0].shape and p.elems is None for p in prepared[1:])
    assert [p.value_bytes for p in prepared] == [len(b"".join(e[2] for e in prepared[0].elems))
                                                 ] * 5
    store.insert(cat, "m", OPTS["m"], docs)
    [bucket] = store.buckets("m")
    assert bucket["control"]["count"] == 5
    assert bucket["control"]["max"]["v"] == 4


def test_measurements_with_variable_width_fields_take_the_general_path() -> None:
    cat = BucketCatalog(id_seed=1)
    docs = [{"_id": i, "m": "a", "s": "x" * i, "t": DatetimeMS(T0 + 1000 * i)}
            for i in range(3)]
    prepared, _ = cat._measurements.prepare_all(docs, OPTS["m"], True)
    assert all(p.shape is None and p.elems is not None for p in prepared)
    # int32 _id, the date, then the string (length prefix, bytes, NUL)
    assert [p.value_bytes for p in prepared] == [4 + 8 + (4 + i + 1) for i in range(3)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"t": st.integers(0, 10**6).map(lambda s: DatetimeMS(T0 + s)), "m": st.just("a")},
    optional={"v": _VALUE, "w": _VALUE, "n": st.integers(-(2**40), 2**40)}),
    min_size=2, max_size=20))
def test_value_sizes_from_the_shape_are_the_elements_sizes(docs) -> None:
    """What `size_change` reads of a shaped measurement without building its elements."""
    cat = BucketCatalog(id_seed=1)
    for i, d in enumerate(docs):
        [m], _ = cat._measurements.prepare_all([{"_id": i, **d}], OPTS["m"], True)
        got = bucket._value_lens(m)
        assert got == [(name, len(v)) for name, _t, v in measurements.elements(m)]


@settings(max_examples=150, deadline=None)
@given(st.lists(measurement_of(["a", {"x": 1, "y": "b"}]), min_size=1, max_size=8),
       st.booleans())
def test_a_new_buckets_first_size_is_the_fields_sizes(docs, scanned) -> None:
    """`size_change` of a new bucket's first measurement from the names and the values'
    total equals the field-by-field sum (scanned and decoded measurements)."""
    from storage.timeseries.bucket import Bucket, size_change
    from storage.timeseries.native_scan import AVAILABLE

    from .helpers import sequence

    cat = BucketCatalog(id_seed=1)
    batch = sequence(docs) if scanned and AVAILABLE else docs
    prepared, _ = cat._measurements.prepare_all(batch, OPTS["m"], False)
    for m in prepared:
        fresh = Bucket(ObjectId(), "c", m.key, m.meta, "t", 0)
        slow = Bucket(ObjectId(), "c", m.key, m.meta, "t", 0)
        slow.uncommitted_field_names = {"\x00 not a field"}  # no shortcut
        got, want = size_change(fresh, m, 32), size_change(slow, m, 32)
        assert (got.verified, got.estimate, got.new_fields) == \
            (want.verified, want.estimate, want.new_fields)


@settings(max_examples=150, deadline=None)
@given(st.lists(measurement_of(["a", {"x": 1, "y": "b"}]), min_size=1, max_size=8),
       st.booleans(), st.data())
def test_sizes_with_fields_committed_or_staged_are_the_fields_sizes(docs, scanned, data
                                                                     ) -> None:
    """`size_change` of a measurement whose fields the bucket has committed, staged or
    not seen: new fields are those not committed; each one neither committed nor staged
    adds 12 + its name + twice its element (small values: no estimate)."""
    from storage.timeseries.bucket import Bucket, size_change
    from storage.timeseries.native_scan import AVAILABLE

    from .helpers import sequence

    cat = BucketCatalog(id_seed=1)
    batch = sequence(docs) if scanned and AVAILABLE else docs
    prepared, _ = cat._measurements.prepare_all(batch, OPTS["m"], False)
    for m in prepared:
        b = Bucket(ObjectId(), "c", m.key, m.meta, "t", 0)
        b.size, b.num_measurements = 100, 1
        committed, staged = set(), set()
        for name in m.names:
            where = data.draw(st.sampled_from(["committed", "staged", "neither"]))
            if where == "committed":
                committed.add(name)
            elif where == "staged":
                staged.add(name)
        b.field_names, b.uncommitted_field_names = frozenset(committed), staged
        if not b.field_names and not b.uncommitted_field_names:
            continue  # the first measurement's case, tested above
        got = size_change(b, m, 10**6)
        new = [n for n in m.names if n not in b.field_names]
        verified = sum(12 + len(n.encode()) + 2 * (2 + len(n.encode()) + size)
                       for n, size in bucket._value_lens(m)
                       if n not in b.field_names and n not in b.uncommitted_field_names)
        assert (got.new_fields, got.verified, got.estimate) == (new, verified, 0)
