"""Issue-15 surfaces through the asynchronous Python clients (motor and pymongo's
AsyncMongoClient) and the Node.js driver: collations, `$jsonSchema`, time-series
findAndModify and client bulkWrite, clustered collections, `$` field names, explain
counters, currentOp and killOp of a running aggregate. Every expectation is computed from
the data the test wrote."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo import AsyncMongoClient, InsertOne, UpdateOne
from pymongo.errors import OperationFailure, WriteError

from .node_driver import run_node
from .test_operations import slow_pipeline

DB = "async_breadth"
T0 = dt.datetime(2024, 8, 1)
# the slow pipeline reads N * N documents: several seconds here, killed long before it
# ends (1000 took 0.7 s, and under load a run ended before the killOp reached it)
N = 4000


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    client.drop_database(DB)
    d = client[DB]
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    d.ts.insert_many([{"t": T0 + dt.timedelta(minutes=i), "m": f"s{i % 2}", "v": i}
                      for i in range(20)])
    d.words.insert_many([{"_id": i, "w": w} for i, w in enumerate(["b", "A", "a", "B"])])
    yield d
    client.drop_database(DB)


async def test_motor_collation_schema_and_clustered(db: Any, uri: str) -> None:
    client: AsyncIOMotorClient = AsyncIOMotorClient(uri)
    try:
        d = client[DB]
        words = [x["w"] async for x in d.words.find(
            {}, collation={"locale": "en", "strength": 1}).sort("w", 1)]
        assert sorted(w.lower() for w in words) == [w.lower() for w in words]
        assert await d.words.count_documents({"w": "a"},
                                             collation={"locale": "en", "strength": 2}) == 2
        await d.create_collection("people", validator={"$jsonSchema": {
            "bsonType": "object", "required": ["name"]}})
        with pytest.raises(WriteError) as bad:
            await d.people.insert_one({"_id": 1, "age": 3})
        assert bad.value.code == 121
        info = bad.value.details["errInfo"]
        assert info["failingDocumentId"] == 1
        assert info["details"]["schemaRulesNotSatisfied"][0]["missingProperties"] == ["name"]
        assert await d.people.count_documents({}) == 0
        await d.create_collection("clu", clusteredIndex={"key": {"_id": 1}, "unique": True})
        indexes = [ix async for ix in d.clu.list_indexes()]
        assert [(ix["name"], ix.get("clustered")) for ix in indexes] == [("_id_", True)]
    finally:
        client.close()


async def test_async_pymongo_time_series_writes_and_explain(db: Any, uri: str) -> None:
    client: AsyncMongoClient = AsyncMongoClient(uri)
    try:
        ts = client[DB].ts
        before = await ts.find_one_and_update({"m": "s1", "v": 5}, {"$set": {"v": 500}})
        assert before is not None and before["v"] == 5
        result = await client.bulk_write([
            InsertOne({"t": T0, "m": "s9", "v": -1}, namespace=f"{DB}.ts"),
            UpdateOne({"m": "s0", "v": 0}, {"$inc": {"v": 1000}}, namespace=f"{DB}.ts"),
        ])
        assert (result.inserted_count, result.matched_count, result.modified_count) == (1, 1, 1)
        assert sorted([d["v"] async for d in ts.find({"v": {"$gte": 500}})]) == [500, 1000]
        await client[DB].dollars.insert_one({"_id": 1, "$price": 3, "a.b": 4})
        assert await client[DB].dollars.find_one() == {"_id": 1, "$price": 3, "a.b": 4}
        plan = await ts.find({"m": "s0"}).explain()
        unpack = plan["stages"][1]
        assert unpack["nReturned"] == await ts.count_documents({"m": "s0"})
    finally:
        await client.close()


async def test_motor_current_op_and_kill_op_of_a_running_aggregate(
        db: Any, uri: str) -> None:
    db.big.insert_many([{"_id": i, "k": (i * 7) % N} for i in range(N)])
    slow: AsyncIOMotorClient = AsyncIOMotorClient(uri, appname="async-breadth-slow")
    admin: AsyncIOMotorClient = AsyncIOMotorClient(uri)
    try:
        await admin.admin.command("ping")  # logged in before the slow operation runs
        running = asyncio.ensure_future(slow[DB].command(
            "aggregate", "big", pipeline=slow_pipeline(), cursor={}))
        op: dict[str, Any] | None = None
        for _ in range(200):
            ops = (await admin.admin.command({"currentOp": 1, "appName": "async-breadth-slow",
                                              "ns": f"{DB}.big"}))["inprog"]
            if ops:
                op = ops[0]
                break
            await asyncio.sleep(0.05)
        assert op is not None and op["ns"] == f"{DB}.big"
        assert op["command"]["aggregate"] == "big"
        await admin.admin.command("killOp", op=op["opid"])
        with pytest.raises(OperationFailure) as killed:
            await running
        assert killed.value.code == 11601
    finally:
        slow.close()
        admin.close()


@pytest.mark.mongosh
def test_node_driver_clustered_fields_and_kill_op(db: Any, uri: str) -> None:
    db.big.insert_many([{"_id": i, "k": (i * 7) % N} for i in range(N)])
    out = run_node(uri, f"""
const d = client.db({DB!r});
await d.createCollection('clu', {{clusteredIndex: {{key: {{_id: 1}}, unique: true}}}});
const indexes = await d.collection('clu').listIndexes().toArray();
await d.collection('fields').insertOne({{_id: 1, $x: 1, 'a.b': 2}});
const stored = await d.collection('fields').findOne({{}});
const other = new (require('mongodb').MongoClient)({uri!r}, {{appName: 'node-slow'}});
const running = other.db({DB!r}).collection('big')
  .aggregate({slow_pipeline()!r}).toArray().then(() => 'finished', e => e.code);
let opid = null;
for (let i = 0; i < 200 && opid === null; i++) {{
  const ops = (await client.db('admin').command(
    {{currentOp: 1, appName: 'node-slow', ns: '{DB}.big'}})).inprog;
  if (ops.length) opid = ops[0].opid; else await new Promise(r => setTimeout(r, 50));
}}
await client.db('admin').command({{killOp: 1, op: opid}});
const killed = await running;
await other.close();
return {{indexes: indexes.map(ix => [ix.name, ix.clustered]), stored, killed}};
""".replace("True", "true"))
    assert out == {"indexes": [["_id_", True]], "stored": {"_id": 1, "$x": 1, "a.b": 2},
                   "killed": 11601}
