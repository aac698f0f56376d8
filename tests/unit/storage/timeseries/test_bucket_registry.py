"""The bucket registry: a bucket's states (open, idle, archived, warm, forgotten), the
one way an archived entry goes, and memory accounting; idle-bucket expiry."""

from __future__ import annotations

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.timeseries.bucket import Bucket
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.bucket_registry import (
    _ARCHIVED_OVERHEAD,
    _ARCHIVED_SERIES_OVERHEAD,
    BucketRegistry,
)
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.rollover import RolloverAction
from storage.timeseries.stats import CatalogStats

from .helpers import FakeStore

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_700_000_040_000  # a whole minute


def _ins(cat: BucketCatalog, store: FakeStore, docs: list[dict], coll: str = "c") -> None:
    store.insert(cat, coll, OPTS, docs)


def _counts(store: FakeStore, coll: str = "c") -> list[int]:
    return [b["control"]["count"] for b in
            sorted(store.buckets(coll), key=lambda b: b["control"]["min"]["t"])]


def _bucket(key: bytes, min_time_ms: int, coll: str = "c") -> Bucket:
    return Bucket(ObjectId(), coll, key, "meta", "t", min_time_ms)


def test_open_idle_archived_forgotten() -> None:
    registry = BucketRegistry(CatalogStats())
    b = _bucket(b"k", T0)
    registry.add_open(b)
    assert registry.use_bucket(("c", b"k")) is b and registry.memory > 0
    registry.mark_idle(b)
    assert list(registry.idle) == [b.bucket_id]
    registry.mark_not_idle(b)
    assert not registry.idle
    registry.retire(b, RolloverAction.kArchive)
    assert registry.open_by_id == {} and registry.num_active == 1
    assert registry.find_archived(("c", b"k"), T0 + 10, 60_000) == b.bucket_id
    assert registry.find_archived(("c", b"k"), T0 + 60_000, 60_000) is None
    assert registry.remove_archived(("c", b"k"), b.bucket_id)
    assert not registry.remove_archived(("c", b"k"), b.bucket_id)
    assert (registry.archived, registry.num_archived, registry.memory) == ({}, 0, 0)


def test_every_way_out_of_the_archive_keeps_the_accounting() -> None:
    registry = BucketRegistry(CatalogStats())
    buckets = [_bucket(key, T0 + i * 60_000, coll) for coll in ("c", "d")
               for key in (b"k1", b"k2") for i in range(3)]
    for b in buckets:
        registry.add_open(b)
        registry.archive(b)
    assert registry.num_archived == 12
    # per entry, and per series its map entry and key
    per_entry, per_series = _ARCHIVED_OVERHEAD, _ARCHIVED_SERIES_OVERHEAD + 2
    assert registry.memory == 12 * per_entry + 4 * per_series
    registry.forget_bucket("c", buckets[1].bucket_id)
    assert registry.num_archived == 11
    assert registry.memory == 11 * per_entry + 4 * per_series
    registry.clear("c")
    assert registry.num_archived == 6 and registry.memory == 6 * per_entry + 2 * per_series
    assert {kb[0] for kb in registry.archived} == {"d"}
    registry.expire_idle(0, 100)
    assert (registry.archived, registry.num_archived, registry.memory) == ({}, 0, 0)


def test_a_second_archive_of_one_start_time_closes() -> None:
    registry = BucketRegistry(CatalogStats())
    first, second = _bucket(b"k", T0), _bucket(b"k", T0)
    for b in (first, second):
        registry.add_open(b)
        registry.archive(b)
    assert registry.archived_buckets("c") == [(b"k", T0, first.bucket_id)]
    assert registry.open_by_id == {}


def test_idle_buckets_expire_under_memory_pressure() -> None:
    # > 100 means bytes: a 2 kB threshold for the catalog's memory (an open bucket of these
    # takes about 9 kB: bucket_registry.bucket_memory).
    params = TimeseriesParameters(timeseriesIdleBucketExpiryMemoryUsageThreshold=2_000)
    cat, store = BucketCatalog(params), FakeStore()
    for h in range(60):
        _ins(cat, store, [{"t": DatetimeMS(T0 + i), "m": h, "v": i} for i in range(3)])
    stats = cat.execution_stats("c")
    assert stats.numBucketsArchivedDueToMemoryThreshold > 0
    assert stats.numBucketsClosedDueToMemoryThreshold > 0
    assert cat.memory_usage < 15_000  # the open bucket alone is over the threshold
    # Series whose bucket was expired continue in it (reopened from storage).
    _ins(cat, store, [{"t": DatetimeMS(T0 + 10), "m": h, "v": 10} for h in range(60)])
    assert len(store.buckets("c")) == 60
    assert sorted(_counts(store)) == [4] * 60
    status = cat.server_status()
    assert status["numBuckets"] == status["numOpenBuckets"] + status["numArchivedBuckets"]
    assert status["numBucketsArchivedDueToMemoryThreshold"] > 0


def test_a_buckets_footprint_counts_its_control_as_getsizeof_does() -> None:
    import sys

    import pytest

    from storage import native
    from storage.bsonutil import encode
    from storage.timeseries.columns import Columns
    from storage.timeseries.native_columns import NativeColumns
    from storage.timeseries.native_control import NativeControl

    if native.core is None:
        pytest.skip("the native core is not built")
    control = NativeControl()
    columns = NativeColumns.new("t")
    assert columns is not None
    for n in range(40):  # the control's trees grow with each new field
        control.update_doc(encode({"t": DatetimeMS(n), f"f{n}": "x" * n, "o": {f"g{n}": n}}))
        got = columns.footprint(control)
        assert got == (*columns.footprint()[:3], sys.getsizeof(control))
        assert Columns("t").footprint(control)[3] == sys.getsizeof(control)
    assert columns.footprint()[3] == 0
