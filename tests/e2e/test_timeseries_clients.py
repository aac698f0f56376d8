"""Time-series through every client: AsyncMongoClient, motor, mongosh; and many writers at once.

The concurrency test: N async clients insert measurements at the same time, the even ones
over 100 shared meta values, the odd ones each under a meta value of its own; every
measurement must come back exactly once, bucket counts add up, and the bucket catalog
never holds more open buckets than there are meta values (one per meta value). Scale with
BUCKETD_TS_CLIENTS / BUCKETD_TS_PER_CLIENT (the native-ingest issue's full size is
16 x 20,000; the default keeps the suite fast).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections import defaultdict

import pytest
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo import AsyncMongoClient

from .mongosh_util import run_mongosh

T0 = dt.datetime(2024, 3, 1)
CLIENTS = int(os.environ.get("BUCKETD_TS_CLIENTS", "16"))
PER_CLIENT = int(os.environ.get("BUCKETD_TS_PER_CLIENT", "2500"))
METAS = 100


async def test_async_pymongo_and_motor_timeseries(uri: str) -> None:
    ac: AsyncMongoClient = AsyncMongoClient(uri)
    mc: AsyncIOMotorClient = AsyncIOMotorClient(uri)
    try:
        await ac.drop_database("ts_async")
        db = ac.ts_async
        await db.create_collection("m", timeseries={"timeField": "t", "metaField": "k"})
        await db.m.insert_many([{"t": T0 + dt.timedelta(seconds=i), "k": i % 4, "v": i}
                                for i in range(200)])
        assert await db.m.count_documents({"k": 1}) == 50
        mdb = mc.ts_async
        got = await mdb.m.find({"k": 2, "v": {"$lt": 20}}, {"_id": 0, "v": 1}).sort(
            "t", 1).to_list(None)
        assert got == [{"v": v} for v in range(2, 20, 4)]
        agg = await mdb.m.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}},
                                     {"$sort": {"_id": 1}}]).to_list(None)
        assert agg == [{"_id": k, "n": 50} for k in range(4)]
        res = await mdb.m.delete_many({"k": 3})
        assert res.deleted_count == 50
        raw = await mdb["system.buckets.m"].count_documents({})
        assert raw == 3
    finally:
        await ac.drop_database("ts_async")
        await ac.close()
        mc.close()


@pytest.mark.mongosh
def test_mongosh_timeseries(uri: str) -> None:
    script = r"""
const t = db.getSiblingDB('ts_shell'); t.dropDatabase();
t.createCollection('w', {timeseries: {timeField: 'ts', metaField: 'sensor', granularity: 'minutes'}});
t.w.insertMany([{ts: new Date('2024-01-01T00:00:00Z'), sensor: {id: 1}, temp: 20.5},
                {ts: new Date('2024-01-01T00:10:00Z'), sensor: {id: 1}, temp: 21.5},
                {ts: new Date('2024-01-01T00:20:00Z'), sensor: {id: 2}, temp: 19}]);
const out = {};
out.count = t.w.countDocuments();
out.avg = t.w.aggregate([{$match: {'sensor.id': 1}}, {$group: {_id: null, a: {$avg: '$temp'}}}]).toArray()[0].a;
out.buckets = t.getCollection('system.buckets.w').countDocuments();
out.type = t.getCollectionInfos({name: 'w'})[0].type;
out.granularity = t.getCollectionInfos({name: 'w'})[0].options.timeseries.granularity;
print(EJSON.stringify(out, {relaxed: true}));
t.dropDatabase();
"""
    result, _ = run_mongosh(uri, script)
    assert result == {"count": 3, "avg": 21.0, "buckets": 2, "type": "timeseries",
                      "granularity": "minutes"}


async def test_concurrent_writers_lose_nothing(uri: str) -> None:
    setup: AsyncMongoClient = AsyncMongoClient(uri)
    await setup.drop_database("ts_conc")
    db = setup.ts_conc
    await db.create_collection("m", timeseries={"timeField": "t", "metaField": "meta"})
    # other tests' collections on a shared server may hold open buckets of their own
    before = (await setup.admin.command("serverStatus")).get(
        "bucketCatalog", {}).get("numOpenBuckets", 0)

    async def writer(w: int) -> None:
        client: AsyncMongoClient = AsyncMongoClient(uri)
        coll = client.ts_conc.m
        try:
            for start in range(0, PER_CLIENT, 1000):
                batch = [{"t": T0 + dt.timedelta(seconds=w * PER_CLIENT + i),
                          "meta": {"id": i % METAS if w % 2 == 0 else f"own-{w}"},
                          "w": w, "i": i}
                         for i in range(start, min(PER_CLIENT, start + 1000))]
                await coll.insert_many(batch, ordered=False)
        finally:
            await client.close()

    await asyncio.gather(*(writer(w) for w in range(CLIENTS)))
    seen: dict[tuple[int, int], int] = defaultdict(int)
    async for d in db.m.find({}, {"_id": 0, "w": 1, "i": 1}):
        seen[(d["w"], d["i"])] += 1
    assert len(seen) == CLIENTS * PER_CLIENT
    assert set(seen.values()) == {1}  # every measurement exactly once
    # One open bucket per meta value: the catalog's open buckets never outnumber them.
    status = (await setup.admin.command("serverStatus"))["bucketCatalog"]
    own = [f"own-{w}" for w in range(1, CLIENTS, 2)]
    assert 1 <= status["numOpenBuckets"] - before <= METAS + len(own)
    metas = await db["system.buckets.m"].distinct("meta.id")
    assert sorted(m for m in metas if isinstance(m, int)) == list(range(METAS))
    assert sorted(m for m in metas if isinstance(m, str)) == sorted(own)
    counts = [b["control"]["count"] async for b in db["system.buckets.m"].find(
        {}, {"control.count": 1})]
    assert sum(counts) == CLIENTS * PER_CLIENT and max(counts) <= 1000
    await setup.drop_database("ts_conc")
    await setup.close()
