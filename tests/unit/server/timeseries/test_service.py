"""The time-series service driven directly, without sockets: an in-memory storage behind
the storage thread, the commands' entry points called with resolved targets."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from bson.datetime_ms import DatetimeMS

from query.match import compile_filter
from query.timeseries.read_plan import TimeseriesReadPaths
from server.aggregation import build_context, run_pipeline
from server.collection_stats import collection_stats
from server.timeseries.ddl import create_timeseries
from server.timeseries.expiry import expire_buckets
from server.timeseries.reads import count_measurements, distinct_measurements, measurement_source
from server.timeseries.writes import (
    delete_measurements,
    insert_measurements,
    update_measurements,
)
from server.ttl import ttl_pass
from storage import native

from .harness import Harness, open_harness

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
OFF = TimeseriesReadPaths(lastpoint=False, columnar_group=False, row_filter=False)


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = await open_harness()
    yield harness
    await harness.close()


def _docs(n: int, hosts: int = 3) -> list[dict[str, Any]]:
    return [{"t": DatetimeMS(T0 + dt.timedelta(seconds=i)), "m": f"h{i % hosts}", "v": i % 17,
             "w": float(i)} for i in range(n)]


async def _insert(h: Harness, name: str, docs: list[dict[str, Any]], *,
                  durable: bool = False) -> dict[str, Any]:
    target = await h.target(name)
    return await insert_measurements(h.request("insert"), target, docs, ordered=True,
                                     durable=durable)


async def test_an_insert_is_acknowledged_before_its_buckets_are_written(h) -> None:
    target = await h.create("w", metaField="m")
    reply = await _insert(h, "w", _docs(10))
    assert reply == {"n": 10}
    assert h.service.deferred  # pending: the group commit has not written them yet
    buckets = await h.buckets(target)  # any other operation writes them first
    assert not h.service.deferred
    assert sum(int(b["control"]["count"]) for b in buckets) == 10
    assert {b["meta"] for b in buckets} == {"h0", "h1", "h2"}


async def test_a_durable_insert_writes_before_the_reply(h) -> None:
    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(5), durable=True)
    assert not h.service.deferred


async def test_the_insert_path_runs_without_the_before_operation_hook(h) -> None:
    calls: list[int] = []
    h.storage.add_before_operation(lambda: calls.append(1))
    target = await h.create("w", metaField="m")
    n = len(calls)
    await insert_measurements(h.request("insert"), target, _docs(3), ordered=True,
                              durable=False)
    assert len(calls) == n  # keep_deferred: the insert adds to the pending writes
    await h.storage.run(lambda: None)
    assert len(calls) == n + 1


async def _measurements(h: Harness, name: str, flt: dict[str, Any] | None,
                        paths: TimeseriesReadPaths) -> list[dict[str, Any]]:
    target = await h.target(name)
    h.service.read_paths = paths
    return await h.storage.run(lambda: list(measurement_source(h.request(), target, flt)))


@pytest.mark.parametrize("flt", [None, {"v": {"$gt": 8}}, {"m": "h1"},
                                 {"t": {"$gte": DatetimeMS(T0 + dt.timedelta(seconds=30))}},
                                 {"w": {"$lt": 7.5}, "v": {"$gte": 2}}])
async def test_reads_give_the_same_measurements_on_every_path(h, flt) -> None:
    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(200))
    fast = await _measurements(h, "w", flt, TimeseriesReadPaths())
    general = await _measurements(h, "w", flt, OFF)
    assert fast == general
    every = await _measurements(h, "w", None, OFF)
    assert len(fast) == len([m for m in every if flt is None or _matches(flt, m)])


def _matches(flt: dict[str, Any], m: dict[str, Any]) -> bool:
    return compile_filter(flt).matches(m)


async def test_count_and_distinct(h) -> None:
    target = await h.create("w", metaField="m")
    await _insert(h, "w", _docs(50))
    req = h.request()
    assert await count_measurements(req, target, None, 0, 0) == 50
    assert await count_measurements(req, target, {"m": "h0"}, 2, 5) == 5
    assert await distinct_measurements(req, target, "m", None) == ["h0", "h1", "h2"]


async def _aggregate(h: Harness, name: str, stages: list[Any],
                     paths: TimeseriesReadPaths) -> list[Any]:
    h.service.read_paths = paths
    req = h.request("aggregate")
    ctx = build_context(req, name, allow_disk_use=True)

    def run() -> list[Any]:
        _pipeline, it = run_pipeline(req, name, stages, ctx, None)
        out: Iterator[Any] = it
        return list(out)

    return await h.storage.run(run)


@pytest.mark.parametrize("stages", [
    [{"$sort": {"m": 1, "t": -1}}, {"$group": {"_id": "$m", "last": {"$first": "$v"}}}],
    [{"$match": {"m": "h2"}}, {"$group": {"_id": None, "s": {"$sum": "$v"},
                                          "mx": {"$max": "$w"}}}],
    [{"$group": {"_id": {"$dateTrunc": {"date": "$t", "unit": "minute"}},
                 "n": {"$count": {}}}}, {"$sort": {"_id": 1}}],
])
async def test_pipelines_give_the_same_answer_on_every_path(h, stages) -> None:
    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(300))
    fast = await _aggregate(h, "w", stages, TimeseriesReadPaths())
    assert fast == await _aggregate(h, "w", stages, OFF)
    for one in ("lastpoint", "columnar_group", "row_filter"):
        paths = dataclasses.replace(OFF, **{one: True})
        assert await _aggregate(h, "w", stages, paths) == fast


async def test_deletes_and_updates_rewrite_the_buckets(h) -> None:
    target = await h.create("w", metaField="m")
    await _insert(h, "w", _docs(30))
    req = h.request("delete")
    reply = await delete_measurements(req, target, [{"q": {"m": "h0"}, "limit": 0}],
                                      ordered=True, durable=False)
    assert reply == {"n": 10}
    reply = await delete_measurements(req, target, [{"q": {"v": 1}, "limit": 1}],
                                      ordered=True, durable=False)
    assert reply == {"n": 1}
    reply = await update_measurements(req, target, [{"q": {"m": "h2"}, "u": {"$set": {"x": 1}},
                                                     "multi": True}],
                                      ordered=True, durable=False)
    assert (reply["n"], reply["nModified"]) == (10, 10)
    assert await count_measurements(req, target, None, 0, 0) == 19
    assert await count_measurements(req, target, {"x": 1}, 0, 0) == 10
    bad = await delete_measurements(req, target, [{"q": {}, "limit": 5}], ordered=True,
                                    durable=False)
    assert bad["n"] == 0 and bad["writeErrors"][0]["index"] == 0


async def test_expired_buckets_go_whole(h) -> None:
    req = h.request("create", timeseries={"timeField": "t", "metaField": "m"},
                    expireAfterSeconds=3600)
    await create_timeseries(req, "w")
    target = await h.target("w")
    await _insert(h, "w", _docs(20))
    now = int(DatetimeMS(T0)) + 3600_000 + 60_000
    assert await h.storage.run(expire_buckets, h.service, "db", "w", now, 3600) == 3
    assert await h.buckets(target) == []
    await _insert(h, "w", _docs(20))
    assert await h.storage.run(ttl_pass, h.storage, h.service, now) == 3


async def test_collection_stats_include_the_bucket_catalog(h) -> None:
    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(40))
    stats = await h.storage.run(collection_stats, h.request("collStats"), "db", "w", 1)
    ts = stats["timeseries"]
    assert ts["bucketsNs"] == "db.system.buckets.w"
    assert ts["bucketCount"] == 3 == stats["count"]
    assert ts["numMeasurementsCommitted"] == 40


async def test_dropping_forgets_the_open_buckets(h) -> None:
    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(6))
    assert h.service.server_status()["numOpenBuckets"] == 3
    h.service.forget_namespace("db", "w")
    assert not h.service.server_status() or \
        h.service.server_status().get("numOpenBuckets", 0) == 0


async def test_the_read_paths_switch_the_fast_paths(h, monkeypatch) -> None:
    import query.timeseries.read_plan as read_plan
    from query.timeseries.columnar_group import STATS

    await h.create("w", metaField="m")
    await _insert(h, "w", _docs(60))
    taken: list[str] = []
    real = read_plan.lastpoint_measurements

    def spy(*args: Any) -> Any:
        out = real(*args)
        if out is not None:
            taken.append("lastpoint")
        return out

    monkeypatch.setattr(read_plan, "lastpoint_measurements", spy)
    last = [{"$sort": {"m": 1, "t": -1}}, {"$group": {"_id": "$m", "v": {"$first": "$v"}}}]
    await _aggregate(h, "w", last, TimeseriesReadPaths())
    await _aggregate(h, "w", last, OFF)
    assert taken == ["lastpoint"]
    used, block = STATS["used"], STATS["block"]
    group = [{"$group": {"_id": "$m", "s": {"$sum": "$v"}}}]
    await _aggregate(h, "w", group, TimeseriesReadPaths())
    # block processing where the native core is built, else the numpy fold
    assert STATS["used"] + STATS["block"] == used + block + 1
    assert STATS["block"] == block + native.AVAILABLE
    await _aggregate(h, "w", group, TimeseriesReadPaths(block_processing=False))
    assert STATS["used"] == used + 1 + (not native.AVAILABLE)
    await _aggregate(h, "w", group, OFF)
    assert STATS["used"] + STATS["block"] == used + block + 2
