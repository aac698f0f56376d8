"""The read planner and the one bucket scan over a buckets collection in memory: every
path gives the general path's answer, and the switches turn each fast path off."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from bson.datetime_ms import DatetimeMS

from query.context import PipelineContext
from query.match import compile_filter
from query.pipeline import compile_pipeline
from query.timeseries.read_plan import TimeseriesRead, TimeseriesReadPaths, pipeline_read
from query.timeseries.scan import BucketScan
from storage.bsonutil import decode
from storage.catalog import Catalog
from storage.timeseries import (
    BucketCatalog,
    TimeseriesParameters,
    default_index_spec,
    parse_timeseries_options,
)

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
T0 = 1_714_564_800_000
ALL = TimeseriesReadPaths()
OFF = TimeseriesReadPaths(lastpoint=False, columnar_group=False, row_filter=False)


@pytest.fixture(scope="module")
def buckets():
    cat = Catalog.open(engine="memory", compile_filter=lambda s: compile_filter(s).matches)
    with cat.transaction():
        cat.create_collection("db", "system.buckets.w", {})
        coll = cat.get_collection("db", "system.buckets.w")
        coll.create_indexes([default_index_spec(OPTS)])
        docs = [{"t": DatetimeMS(T0 + 1000 * i), "m": f"h{i % 4}", "v": i % 13,
                 "w": i / 4} for i in range(600)]
        result = BucketCatalog(TimeseriesParameters(timeseriesBucketMaxCount=50)).insert_batch(
            "db.w", OPTS, docs, None, ordered=True)
        assert not result.errors and all(w.kind == "insert" for w in result.writes)
        coll.insert_many([decode(w.document) for w in result.writes],
                         encoded=[w.document for w in result.writes])
    yield coll
    cat.close()


def _read(buckets: Any, paths: TimeseriesReadPaths = ALL) -> TimeseriesRead:
    return TimeseriesRead(buckets, OPTS, lambda: True, paths)


def test_the_scan_rechecks_the_bucket_filter_and_skips_unwanted_ids(buckets) -> None:
    every = list(BucketScan(buckets, None).buckets())
    assert len(every) == 12
    one = list(BucketScan(buckets, {"meta": "h1"}).buckets())
    assert {b["meta"] for _rid, b in one} == {"h1"} and len(one) == 3
    wanted = {every[0][0], every[5][0]}
    assert [rid for rid, _b in BucketScan(buckets, None).buckets(only=wanted)] == \
        [rid for rid, _b in every if rid in wanted]
    assert len(list(BucketScan(buckets, {"meta": "h1"}).raw())) <= 12


@pytest.mark.parametrize("flt", [None, {"v": {"$gt": 6}}, {"m": "h2", "w": {"$lt": 50}},
                                 {"t": {"$gte": DatetimeMS(T0 + 300_000)}}])
def test_measurements_are_the_same_with_and_without_the_row_filter(buckets, flt) -> None:
    fast = list(_read(buckets).measurements(flt))
    assert fast == list(_read(buckets, OFF).measurements(flt))
    assert len(fast) == sum(1 for m in _read(buckets, OFF).measurements(None)
                            if compile_filter(flt or {}).matches(m))


def _pipeline(read: TimeseriesRead, stages: list[Any]) -> list[Any]:
    ctx = PipelineContext(db="db", coll="w")
    whole = compile_pipeline(stages, ctx)
    return list(pipeline_read(read, stages, ctx, None, whole=whole.run,
                              general=lambda: whole.run(read.measurements(None))))


@pytest.mark.parametrize("stages", [
    [{"$sort": {"m": 1, "t": -1}}, {"$group": {"_id": "$m", "v": {"$first": "$v"}}}],
    [{"$match": {"m": "h3"}}, {"$group": {"_id": None, "s": {"$sum": "$w"},
                                          "n": {"$count": {}}}}],
    [{"$group": {"_id": "$m", "mn": {"$min": "$v"}}}, {"$sort": {"_id": 1}}],
])
def test_every_path_gives_the_general_answer(buckets, stages) -> None:
    general = _pipeline(_read(buckets, OFF), stages)
    assert general
    assert _pipeline(_read(buckets), stages) == general
    for one in ("lastpoint", "columnar_group"):
        assert _pipeline(_read(buckets, dataclasses.replace(OFF, **{one: True})),
                         stages) == general


def test_a_collection_without_buckets_reads_nothing() -> None:
    read = TimeseriesRead(None, OPTS, lambda: True)
    assert list(read.measurements({"v": 1})) == []
    assert read.bucket_filter({"v": 1}) is None
    assert _pipeline(read, [{"$group": {"_id": None, "n": {"$count": {}}}}]) == []
