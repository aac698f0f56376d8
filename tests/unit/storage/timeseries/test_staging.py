"""Staging a series' run of measurements in bulk (`Stager.stage_run`) ends in
exactly the buckets, documents and statistics that staging them one by one gives."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from bson.datetime_ms import DatetimeMS
from bson.int64 import Int64
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.timeseries import native_scan
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.timeseries.constants import TimeseriesParameters
from storage.timeseries.measurements import BatchRows
from storage.timeseries.options import parse_timeseries_options

from .helpers import FakeStore, sequence

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m",
                                 "granularity": "seconds"})
T0 = 1_700_000_000_000

_VALUE = st.one_of(st.integers(0, 100).map(Int64), st.floats(0, 1, allow_nan=False),
                   st.just("x" * 40), st.integers(0, 9))
_MEASUREMENT = st.fixed_dictionaries(
    {"m": st.sampled_from(["a", "b", {"h": 1}]),
     "t": st.integers(0, 3 * 3600).map(lambda s: DatetimeMS(T0 + 1000 * s))},
    optional={"v": _VALUE, "w": _VALUE})


def _run(batches: list[list[dict]], bulk: bool, max_count: int, max_size: int,
         scanned: bool = False) -> tuple[list[dict], dict]:
    params = TimeseriesParameters(timeseriesBucketMaxCount=max_count,
                                  timeseriesBucketMaxSize=max_size)
    cat = BucketCatalog(params, id_seed=7)
    if not bulk:
        cat._stager.stage_run = lambda ctx, group, start, key=None: 0  # type: ignore[method-assign]
    store = FakeStore()
    for i, batch in enumerate(batches):
        docs = [{"_id": i * 1000 + j, **d} for j, d in enumerate(batch)]
        store.insert(cat, "c", OPTS, sequence(docs) if scanned else docs,  # type: ignore[arg-type]
                     ordered=False)
    return store.buckets("c"), asdict(cat.execution_stats("c"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_MEASUREMENT, min_size=1, max_size=40), min_size=1, max_size=6),
       st.sampled_from([5, 30, 1000]), st.sampled_from([600, 128000]), st.booleans())
def test_bulk_staging_equals_one_by_one(batches, max_count, max_size, scanned) -> None:
    if scanned and native_scan.AVAILABLE:
        # the native scan's rows against one by one on the decoded documents
        assert _run(batches, True, max_count, max_size, scanned=True) == \
            _run(batches, False, max_count, max_size)
    assert _run(batches, True, max_count, max_size) == _run(batches, False, max_count,
                                                            max_size)


@pytest.mark.skipif(not native_scan.AVAILABLE, reason="the native core is not built")
def test_a_scanned_run_staged_in_bulk_makes_no_measurements(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = BatchRows.measurement
    monkeypatch.setattr(BatchRows, "measurement",
                        lambda self, row: made.append(row) or real(self, row))
    cat = BucketCatalog(id_seed=1)
    store = FakeStore()
    for b in range(3):
        made.clear()
        store.insert(cat, "c", OPTS, sequence(  # type: ignore[arg-type]
            [{"_id": b * 10 + i, "m": "a", "v": Int64(i),
              "t": DatetimeMS(T0 + 1000 * (b * 10 + i))} for i in range(10)]))
        # none but the first batch's first row, staged alone into the new bucket (the
        # series' key is read without one)
        assert set(made) == ({0} if b == 0 else set())
    [bucket] = store.buckets("c")
    assert bucket["control"]["count"] == 30


def test_bulk_staging_takes_the_common_case() -> None:
    """A steady series (known fields, small values) is staged in bulk after its first
    measurement: each later batch in one run, without a measurement staged alone."""
    calls: list[tuple[int, int]] = []
    cat = BucketCatalog(id_seed=1)
    real_run, real_stage = cat._stager.stage_run, cat._stager.stage
    staged_alone: list[int] = []

    def counting(ctx, group, start, key=None):  # type: ignore[no-untyped-def]
        k = real_run(ctx, group, start, key)
        calls.append((start, k))
        return k

    def stage(ctx, m):  # type: ignore[no-untyped-def]
        staged_alone.append(m.index)
        real_stage(ctx, m)

    cat._stager.stage_run = counting  # type: ignore[method-assign]
    cat._stager.stage = stage  # type: ignore[method-assign]
    store = FakeStore()
    for b in range(3):
        store.insert(cat, "c", OPTS, [{"_id": b * 10 + i, "m": "a", "v": Int64(i),
                                       "t": DatetimeMS(T0 + 1000 * (b * 10 + i))}
                                      for i in range(10)])
    # the first batch: no open bucket for a run, its first measurement opens one, the
    # other 9 in bulk; then each batch whole
    assert calls == [(0, 0), (1, 9), (0, 10), (0, 10)]
    assert staged_alone == [0]
    [bucket] = store.buckets("c")
    assert bucket["control"]["count"] == 30


def test_a_run_from_the_first_row_leaves_the_rest_to_stage() -> None:
    """A batch whose first measurement goes back before its open bucket, or forward past
    its span, is not a run of that bucket: staged one by one, it reopens or rolls over as
    MongoDB does."""
    cat = BucketCatalog(id_seed=1)
    store = FakeStore()
    ts = [T0 + 1000 * 100, T0 + 1000 * 50, T0 + 1000 * 5000]  # forward, back, past the span
    for b, t in enumerate(ts):
        store.insert(cat, "c", OPTS, [{"_id": b * 10 + i, "m": "a", "v": Int64(i),
                                       "t": DatetimeMS(t + 1000 * i)} for i in range(3)])
    stats = cat.execution_stats("c")
    assert stats.numBucketsArchivedDueToTimeBackward == 1
    assert stats.numBucketsClosedDueToTimeForward == 1
    assert sorted(b["control"]["count"] for b in store.buckets("c")) == [3, 3, 3]
