"""Issue-15 surfaces through MongoDB's Node.js driver: views over time series, pipeline
updates and `let` on time series, and explain counters (each compared with what pymongo
reads back from the same server)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest

from .node_driver import run_node

T0 = dt.datetime(2024, 7, 1)


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    client.drop_database("node_e2e")
    d = client.node_e2e
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    d.ts.insert_many([{"t": T0 + dt.timedelta(minutes=i), "m": f"s{i % 3}", "v": i}
                      for i in range(30)])
    yield d
    client.drop_database("node_e2e")


@pytest.mark.mongosh
def test_view_over_time_series(db: Any, uri: str) -> None:
    out = run_node(uri, """
const d = client.db('node_e2e');
await d.createCollection('hot', {viewOn: 'ts', pipeline: [{$match: {v: {$gte: 20}}}]});
const docs = await d.collection('hot').find({m: 's1'}, {projection: {_id: 0, v: 1}})
  .sort({v: 1}).toArray();
const n = await d.collection('hot').countDocuments();
let refused = null;
try { await d.collection('hot').insertOne({t: new Date(), v: 1}); }
catch (e) { refused = e.code; }
return {docs, n, refused};
""")
    expected = [{"v": d["v"]} for d in db.ts.find({"m": "s1", "v": {"$gte": 20}}).sort("v", 1)]
    assert out == {"docs": expected, "n": 10, "refused": 166}


@pytest.mark.mongosh
def test_pipeline_update_and_let_on_time_series(db: Any, uri: str) -> None:
    out = run_node(uri, """
const c = client.db('node_e2e').collection('ts');
const r = await c.updateMany({m: 's2'}, [{$set: {v2: {$multiply: ['$v', '$$k']}}}],
                             {let: {k: 10}});
const found = (await c.find({$expr: {$eq: ['$v2', {$multiply: ['$v', '$$k']}]}},
                            {let: {k: 10}}).toArray()).length;
return {matched: r.matchedCount, modified: r.modifiedCount, found};
""")
    assert out == {"matched": 10, "modified": 10, "found": 10}
    assert sorted(d["v2"] for d in db.ts.find({"m": "s2"})) == \
        sorted(d["v"] * 10 for d in db.ts.find({"m": "s2"}))
