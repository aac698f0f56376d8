"""The bucket catalog's memory figure is what its open buckets really hold.

`timeseriesIdleBucketExpiryMemoryUsageThreshold` bounds the catalog's own figure, so the
figure must follow the real footprint: the Python objects of each bucket (measured with
tracemalloc) plus the heap of its native column builders (their `__sizeof__`, which
tracemalloc does not see). Held within a band for buckets of one and of many
measurements, few and many fields, numeric and string values, native and Python paths.
"""

from __future__ import annotations

import gc
import random
import sys
import tracemalloc
from typing import Any

import pytest
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from query.match import compile_filter
from storage.bsoncolumn import BSONColumnBuilder
from storage.catalog import Catalog
from storage.timeseries import default_index_spec
from storage.timeseries.absent_series import absent_series
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.native_columns import NativeColumns
from storage.timeseries.native_scan import AVAILABLE as NATIVE
from storage.timeseries.options import TimeseriesOptions
from storage.timeseries.pending_writes import DeferredBucketWrites
from storage.timeseries.rollover import RolloverAction

from .helpers import sequence

OPTIONS = TimeseriesOptions("t", "m", "seconds", 3600, None)


def _measurements(buckets: int, per_bucket: int, fields: int, strings: bool) -> list[dict]:
    rnd = random.Random(7)
    docs = []
    for j in range(per_bucket):
        for i in range(buckets):
            d = {"_id": ObjectId(), "t": DatetimeMS(1_700_000_000_000 + j * 1000),
                 "m": {"host": f"h{i}", "dc": "x"}}
            for f in range(fields):
                d[f"f{f}"] = f"s{rnd.randrange(100)}" if strings else Int64(rnd.randrange(100))
            docs.append(d)
    return docs


def _storage(path: str) -> Catalog:
    """A storage catalog with the buckets collection (and its memo of absent series, a
    fixed cost of the collection, made before anything is measured)."""
    cat = Catalog.open(path, compile_filter=lambda spec: compile_filter(spec).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.c",
                              {"timeseries": {"timeField": "t", "metaField": "m"}})
        cat.get_collection("db", "system.buckets.c").create_indexes(
            [default_index_spec(OPTIONS)])
    absent_series(cat.get_collection("db", "system.buckets.c"))
    return cat


def _native_heap(cat: BucketCatalog) -> int:
    total = 0
    for b in cat.open_buckets():
        if isinstance(b.columns, NativeColumns):
            total += sys.getsizeof(b.columns.native)
        else:
            total += sum(sys.getsizeof(st) for st in b.columns._state.values()
                         if st is not None and type(st) is not BSONColumnBuilder)
        if b.control is not None:
            total += sys.getsizeof(b.control)
    return total


@pytest.mark.parametrize("raw", [False, pytest.param(True, marks=pytest.mark.skipif(
    not NATIVE, reason="native core not built"))], ids=["decoded", "native"])
@pytest.mark.parametrize(("buckets", "per_bucket", "fields", "strings"), [
    (1000, 1, 1, False), (1000, 1, 12, False), (100, 100, 12, False),
    (10, 1000, 12, False), (1000, 1, 12, True), (100, 100, 12, True),
])
def test_counted_memory_follows_the_measured_footprint(buckets: int, per_bucket: int,
                                                       fields: int, strings: bool,
                                                       raw: bool, tmp_path) -> None:
    """Decoded batches keep reference buckets; document sequences native ones. Each
    batch is written by the group commit, as the server writes it, and what that keeps
    of each bucket for its next update counts too."""
    docs = _measurements(buckets, per_bucket, fields, strings)
    batches = [docs[i:i + 1000] for i in range(0, len(docs), 1000)]
    inputs = [sequence(b) for b in batches] if raw else batches
    storage = _storage(str(tmp_path))
    deferred = DeferredBucketWrites()
    cat = BucketCatalog()
    gc.collect()
    tracemalloc.start()
    try:
        for batch in inputs:
            result = cat.insert_batch("db.c", OPTIONS, batch, None, ordered=False)
            deferred.add("db", "system.buckets.c", result.writes)
            cat.commit(result)
            deferred.flush(storage)
        del result
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    storage.close()
    assert len(cat.open_buckets()) == buckets
    assert all((b.control is not None) == raw for b in cat.open_buckets())
    measured = traced + _native_heap(cat)
    ratio = cat.memory_usage / measured
    assert 0.75 <= ratio <= 1.35, (cat.memory_usage, measured)


def _tag_batches(metas: int) -> list[Any]:
    """Document sequences of `metas` distinct TSBS-like tag objects, one measurement each."""
    out = []
    for start in range(0, metas, 1000):
        out.append(sequence([
            {"_id": ObjectId(), "t": DatetimeMS(1_700_000_000_000),
             "m": {"hostname": f"host_{h}", "region": f"region_{h % 3}", "rack": str(h % 10),
                   "os": "Ubuntu16.10", "service": str(h % 20), "team": "SF"},
             **{f"f{f}": Int64((h + f) % 100) for f in range(10)}}
            for h in range(start, min(metas, start + 1000))]))
    return out


def _warm_heap(cat: BucketCatalog) -> int:
    return sum(sys.getsizeof(w.columns.native) for w in cat._registry.warm.values()
               if isinstance(w.columns, NativeColumns))


@pytest.mark.skipif(not NATIVE, reason="native core not built")
def test_archived_entries_warm_builders_and_meta_caches_are_counted() -> None:
    """Every bucket archived: what stays (the archived entries, the warm builders, the
    preparer's meta caches) is what the catalog counts."""
    inputs = _tag_batches(5000)
    cat = BucketCatalog()
    gc.collect()
    tracemalloc.start()
    try:
        for batch in inputs:
            result = cat.insert_batch("db.c", OPTIONS, batch, None, ordered=False)
            cat.commit(result)
        del result, batch
        for b in cat.open_buckets():
            cat._registry.retire(b, RolloverAction.kArchive)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert not cat.open_buckets() and len(cat.archived_buckets()) == 5000
    assert cat._registry.warm and cat._measurements.cache_bytes
    measured = traced + _warm_heap(cat)
    ratio = cat.memory_usage / measured
    assert 0.75 <= ratio <= 1.35, (cat.memory_usage, measured)


@pytest.mark.skipif(not NATIVE, reason="native core not built")
def test_the_threshold_bounds_the_measured_footprint() -> None:
    """20,000 distinct meta values under a 4 MB threshold: the catalog's figure stays
    near the threshold, and so does what it really holds."""
    threshold = 4 << 20
    inputs = _tag_batches(20_000)
    cat = BucketCatalog(TimeseriesParameters(
        timeseriesIdleBucketExpiryMemoryUsageThreshold=threshold))
    gc.collect()
    tracemalloc.start()
    try:
        for batch in inputs:
            result = cat.insert_batch("db.c", OPTIONS, batch, None, ordered=False)
            cat.commit(result)
            del result
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    measured = traced + _native_heap(cat) + _warm_heap(cat)
    stats = cat.execution_stats("db.c")
    assert stats.numBucketsArchivedDueToMemoryThreshold > 0
    # a batch of 1000 new buckets is over the threshold until the next allocations
    # expire its idle ones: the bound is the threshold plus a batch's buckets
    assert cat.memory_usage <= threshold + 1000 * 20_000
    assert measured <= 1.35 * (threshold + 1000 * 20_000), measured
    ratio = cat.memory_usage / measured
    assert 0.75 <= ratio <= 1.35, (cat.memory_usage, measured)
