"""Each RolloverReason: the pure decision, its action and its statistics, and the
catalog following the one table of rollover.py."""

from __future__ import annotations

import random

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.timeseries import rollover
from storage.timeseries.bucket import Bucket, size_change
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.constants import LARGE_MEASUREMENTS_MAX_BUCKET_SIZE, TimeseriesParameters
from storage.timeseries.measurements import Measurement, MeasurementPreparer
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.rollover import (
    RolloverAction,
    RolloverReason,
    cache_derived_max_size,
    determine_rollover,
    rollover_action,
)

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_040_000  # a whole minute


def _ins(cat: BucketCatalog, store: FakeStore, docs: list[dict], coll: str = "c") -> None:
    store.insert(cat, coll, OPTS, docs)


def _counts(store: FakeStore, coll: str = "c") -> list[int]:
    return [b["control"]["count"] for b in
            sorted(store.buckets(coll), key=lambda b: b["control"]["min"]["t"])]


@pytest.mark.parametrize(("reason", "action"), [
    (RolloverReason.kNone, RolloverAction.kNone),
    (RolloverReason.kTimeForward, RolloverAction.kSoftClose),
    (RolloverReason.kTimeBackward, RolloverAction.kArchive),
    (RolloverReason.kCount, RolloverAction.kHardClose),
    (RolloverReason.kSchemaChange, RolloverAction.kHardClose),
    (RolloverReason.kCachePressure, RolloverAction.kHardClose),
    (RolloverReason.kSize, RolloverAction.kHardClose),
])
def test_reason_to_action(reason: RolloverReason, action: RolloverAction) -> None:
    assert rollover_action(reason) is action


def test_none_keeps_the_bucket() -> None:
    cat, store = BucketCatalog(), FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0), "m": 1, "v": 1}])
    _ins(cat, store, [{"t": DatetimeMS(T0 + 1), "m": 1, "v": 2}])
    assert _counts(store) == [2]
    stats = cat.execution_stats("c")
    assert (stats.numBucketInserts, stats.numBucketUpdates, stats.numCommits) == (1, 1, 2)


def test_time_forward_soft_closes_and_the_bucket_can_be_queried_back() -> None:
    cat, store = BucketCatalog(), FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0), "m": 1}])
    _ins(cat, store, [{"t": DatetimeMS(T0 + 3_600_000), "m": 1}])
    assert _counts(store) == [1, 1]
    stats = cat.execution_stats("c")
    assert stats.numBucketsClosedDueToTimeForward == 1
    assert cat.archived_buckets("c") == []      # soft close: not archived
    # Back into the first bucket's range: the open bucket is archived (time backward)
    # and the first bucket is found by the reopening query.
    _ins(cat, store, [{"t": DatetimeMS(T0 + 10), "m": 1}])
    assert _counts(store) == [2, 1]
    stats = cat.execution_stats("c")
    assert stats.numBucketsQueried == 1 and stats.numBucketsReopened == 1
    assert stats.numBucketsClosedDueToReopening == 1


def test_time_backward_archives() -> None:
    cat, store = BucketCatalog(), FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0 + 120_000), "m": 1}])
    _ins(cat, store, [{"t": DatetimeMS(T0), "m": 1}])
    assert _counts(store) == [1, 1]
    assert cat.execution_stats("c").numBucketsArchivedDueToTimeBackward == 1
    [(_key, min_time, oid)] = cat.archived_buckets("c")
    assert min_time == T0 + 120_000
    assert oid in store.docs["c"]


def test_count_hard_closes() -> None:
    cat = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=5))
    store = FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0 + i), "m": 1} for i in range(12)])
    assert _counts(store) == [5, 5, 2]
    assert cat.execution_stats("c").numBucketsClosedDueToCount == 2
    assert len(cat.open_buckets("c")) == 1


def test_schema_change_hard_closes() -> None:
    cat, store = BucketCatalog(), FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0), "m": 1, "v": {"a": 1}},
                      {"t": DatetimeMS(T0 + 1), "m": 1, "v": {"a": 2, "b": 3}},
                      {"t": DatetimeMS(T0 + 2), "m": 1, "v": [1]}])
    assert _counts(store) == [2, 1]
    assert cat.execution_stats("c").numBucketsClosedDueToSchemaChange == 1


def test_size_with_min_count_and_large_measurements() -> None:
    params = TimeseriesParameters(timeseriesBucketMaxSize=2000, timeseriesBucketMinCount=10)
    cat, store = BucketCatalog(params), FakeStore()
    # 300-character strings are above timeseriesLargeMeasurementThreshold (32): their
    # uncompressed size counts towards the bucket size while staging. The 5th one is past
    # 2000 bytes, but buckets take timeseriesBucketMinCount measurements before closing.
    _ins(cat, store, [{"t": DatetimeMS(T0 + i), "m": 1, "s": f"{i:0300d}"} for i in range(25)])
    counts = _counts(store)
    assert sum(counts) == 25 and counts[0] == 10
    stats = cat.execution_stats("c")
    assert stats.numBucketsClosedDueToSize == len(counts) - 1
    assert stats.numBucketsKeptOpenDueToLargeMeasurements == len(counts)


def test_small_measurements_fill_by_count_not_by_estimate() -> None:
    # Elements up to 32 bytes do not count until committed (compressed sizes are known
    # only then), so one batch can fill a bucket to the count limit.
    params = TimeseriesParameters(timeseriesBucketMaxSize=2000)
    cat, store = BucketCatalog(params), FakeStore()
    rng = random.Random(1)
    _ins(cat, store, [{"t": DatetimeMS(T0 + i), "m": 1, "v": rng.random()} for i in range(300)])
    assert _counts(store) == [300]
    # After the commit the compressed size is known and the next insert rolls over.
    _ins(cat, store, [{"t": DatetimeMS(T0 + 400), "m": 1, "v": 400}])
    assert _counts(store) == [300, 1]
    assert cat.execution_stats("c").numBucketsClosedDueToSize == 1


def test_size_absolute_limit_below_min_count() -> None:
    cat, store = BucketCatalog(), FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0), "m": 1, "s": "x" * 40}])
    [b] = cat.open_buckets("c")
    b.size = LARGE_MEASUREMENTS_MAX_BUCKET_SIZE - 10   # as if it held huge measurements
    _ins(cat, store, [{"t": DatetimeMS(T0 + 1), "m": 1, "s": "y" * 40}])
    assert _counts(store) == [1, 1]
    stats = cat.execution_stats("c")
    assert stats.numBucketsClosedDueToSize == 1
    assert stats.numBucketsKeptOpenDueToLargeMeasurements == 0


def test_cache_pressure() -> None:
    # A small storage cache and many active buckets lower the effective size limit to
    # timeseriesBucketMinSize (5120 bytes).
    params = TimeseriesParameters(storage_cache_size_bytes=64 * 1024)
    cat, store = BucketCatalog(params), FakeStore()
    for rnd in range(4):
        _ins(cat, store, [{"t": DatetimeMS(T0 + rnd * 100 + i), "m": h, "s": f"{h}-{i:060d}"}
                          for h in range(20) for i in range(40)])
    stats = cat.execution_stats("c")
    assert stats.numBucketsClosedDueToCachePressure > 0
    assert stats.numBucketsClosedDueToSize == 0
    assert sum(_counts(store)) == 4 * 20 * 40


# -- the pure decision, one reason at a time ----------------------------------------------


def _measurement(minutes_ms: int, **fields: object) -> Measurement:
    doc = {"_id": 0, "t": DatetimeMS(T0 + minutes_ms), "m": 1, "v": 1, **fields}
    [m], errors = MeasurementPreparer().prepare_all([doc], OPTS, True)
    assert not errors
    return m


def _open_bucket(n: int = 1, size: int = 200, **fields: object) -> Bucket:
    b = Bucket(ObjectId(), "c", b"k", 1, "t", T0)
    b.schema.update({"t": DatetimeMS(T0), "m": 1, "v": 1, **fields}, "m")
    b.num_measurements = n
    b.size = size
    return b


def _decide(b: Bucket, m: Measurement, params: TimeseriesParameters | None = None,
            active: int = 1) -> RolloverReason:
    params = params or TimeseriesParameters()
    new_size = b.size + size_change(b, m, params.timeseriesLargeMeasurementThreshold).total
    return determine_rollover(b, m, new_size, OPTS.max_span_ms, OPTS.meta_field, params,
                              cache_derived_max_size(params, active))


def test_decision_none() -> None:
    assert _decide(_open_bucket(), _measurement(1)) is RolloverReason.kNone


def test_decision_time_forward_and_backward() -> None:
    assert _decide(_open_bucket(), _measurement(OPTS.max_span_ms)) \
        is RolloverReason.kTimeForward
    assert _decide(_open_bucket(), _measurement(OPTS.max_span_ms - 1)) is RolloverReason.kNone
    assert _decide(_open_bucket(), _measurement(-1)) is RolloverReason.kTimeBackward


def test_decision_count() -> None:
    params = TimeseriesParameters(timeseriesBucketMaxCount=5)
    assert _decide(_open_bucket(n=5), _measurement(1), params) is RolloverReason.kCount
    assert _decide(_open_bucket(n=4), _measurement(1), params) is RolloverReason.kNone


def test_decision_schema_change() -> None:
    b = _open_bucket(v={"a": 1})
    assert _decide(b, _measurement(1, v=[1])) is RolloverReason.kSchemaChange


def test_decision_size() -> None:
    params = TimeseriesParameters(timeseriesBucketMaxSize=1000, timeseriesBucketMinCount=10)
    assert _decide(_open_bucket(n=10, size=1000), _measurement(1), params) \
        is RolloverReason.kSize
    # under timeseriesBucketMinCount: open up to 12 MiB, then kSize
    assert _decide(_open_bucket(n=9, size=1000), _measurement(1), params) \
        is RolloverReason.kNone
    assert _decide(_open_bucket(n=9, size=LARGE_MEASUREMENTS_MAX_BUCKET_SIZE),
                   _measurement(1), params) is RolloverReason.kSize


def test_decision_cache_pressure() -> None:
    # 64 KiB of cache over 8 active buckets: 4 KiB, raised to timeseriesBucketMinSize
    params = TimeseriesParameters(storage_cache_size_bytes=64 * 1024,
                                  timeseriesBucketMinCount=10)
    effective, derived = cache_derived_max_size(params, 8)
    assert effective == derived == params.timeseriesBucketMinSize
    assert _decide(_open_bucket(n=10, size=effective), _measurement(1), params, 8) \
        is RolloverReason.kCachePressure
    # under timeseriesBucketMinCount the cache-derived size is the absolute limit too
    assert _decide(_open_bucket(n=9, size=effective), _measurement(1), params, 8) \
        is RolloverReason.kCachePressure


def test_decision_counts_nothing_and_leaves_a_rolled_over_bucket_alone() -> None:
    b = _open_bucket()
    before = (b.size, b.num_measurements, set(b.schema_signatures), b.kept_open_large,
              b.rollover_action, b.staged)
    for m in (_measurement(OPTS.max_span_ms), _measurement(-1)):
        assert _decide(b, m) is not RolloverReason.kNone
    assert (b.size, b.num_measurements, set(b.schema_signatures), b.kept_open_large,
            b.rollover_action, b.staged) == before


# -- the catalog follows the table --------------------------------------------------------


@pytest.mark.parametrize("action", [RolloverAction.kArchive, RolloverAction.kSoftClose,
                                    RolloverAction.kHardClose])
def test_the_catalog_takes_the_action_and_counter_from_the_table(monkeypatch, action) -> None:
    monkeypatch.setitem(rollover._TABLE, RolloverReason.kCount,
                        (action, "numBucketsClosedDueToSize"))
    cat = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=5))
    store = FakeStore()
    _ins(cat, store, [{"t": DatetimeMS(T0 + i), "m": 1} for i in range(5)])
    _ins(cat, store, [{"t": DatetimeMS(T0 + 5), "m": 1}])
    assert _counts(store) == [5, 1]
    stats = cat.execution_stats("c")
    assert (stats.numBucketsClosedDueToCount, stats.numBucketsClosedDueToSize) == (0, 1)
    [first] = [oid for oid in store.docs["c"] if oid not in
               {b.bucket_id for b in cat.open_buckets("c")}]
    archived = [oid for _k, _t, oid in cat.archived_buckets("c")]
    warm = first in cat._registry.warm
    assert (archived == [first], warm) == {
        RolloverAction.kArchive: (True, True),
        RolloverAction.kSoftClose: (False, True),
        RolloverAction.kHardClose: (False, False)}[action]
