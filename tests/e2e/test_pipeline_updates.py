"""Pipeline-style updates (`u: [{$set: ...}, ...]`) through real clients: update,
findAndModify, collection-level and client-level bulkWrite, on ordinary and time-series
collections; upserts, `$$NOW`/`$$ROOT`/`$$CURRENT`/`$$REMOVE`, statement constants, and
the refusals with mongod's codes (nothing written).

Expected results follow MongoDB's manual ("Updates with Aggregation Pipeline") and
mongod's update driver (PipelineExecutor: a stage must be allowed within an update, the
result replaces the document and may not change `_id`).
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pymongo
import pytest
from bson import ObjectId
from pymongo import ReturnDocument, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from .mongosh_util import run_mongosh

T0 = datetime.datetime(2024, 5, 1)


@pytest.fixture
def coll(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    c = client.pipeline_updates[request.node.originalname[:60]]
    c.drop()
    c.insert_many([{"_id": i, "a": i, "b": {"c": i * 10}, "tags": ["x", str(i)]}
                   for i in range(4)])
    yield c
    c.drop()


@pytest.fixture
def ts(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    db = client.pipeline_updates
    name = "ts_" + request.node.originalname[:50]
    db.drop_collection(name)
    db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
    c = db[name]
    c.insert_many([{"t": T0 + datetime.timedelta(minutes=i), "m": {"s": i % 2}, "v": i}
                   for i in range(6)])
    yield c
    db.drop_collection(name)


def _all(c: Any) -> list[dict[str, Any]]:
    return list(c.find().sort("_id", 1))


def test_update_many_with_each_stage(coll) -> None:
    res = coll.update_many({"a": {"$gte": 2}}, [
        {"$set": {"total": {"$add": ["$a", "$b.c"]}, "b.d": "$a"}},
        {"$addFields": {"n": {"$size": "$tags"}}},
        {"$unset": ["tags", "b.c"]},
        {"$project": {"a": 0}},
    ])
    assert (res.matched_count, res.modified_count) == (2, 2)
    docs = _all(coll)
    assert docs[2] == {"_id": 2, "b": {"d": 2}, "total": 22, "n": 2}
    assert docs[3] == {"_id": 3, "b": {"d": 3}, "total": 33, "n": 2}
    assert docs[0] == {"_id": 0, "a": 0, "b": {"c": 0}, "tags": ["x", "0"]}  # not matched


def test_replace_root_and_with_keep_the_id(coll) -> None:
    coll.update_one({"_id": 1}, [{"$replaceRoot": {"newRoot": {"$mergeObjects": [
        "$b", {"from": "$$ROOT.a", "cur": "$$CURRENT.tags"}]}}}])
    assert coll.find_one({"_id": 1}) == {"_id": 1, "c": 10, "from": 1, "cur": ["x", "1"]}
    coll.update_one({"_id": 2}, [{"$replaceWith": {"only": "$a"}}])
    assert coll.find_one({"_id": 2}) == {"_id": 2, "only": 2}
    coll.update_one({"_id": 3}, [{"$set": {"a": "$$REMOVE", "b": "$$REMOVE"}}])
    assert coll.find_one({"_id": 3}) == {"_id": 3, "tags": ["x", "3"]}


def test_now_is_one_value_for_the_whole_command(coll) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    res = coll.update_many({}, [{"$set": {"at": "$$NOW", "again": "$$NOW"}}])
    assert res.modified_count == 4
    stamps = {(d["at"], d["again"]) for d in coll.find()}
    assert len(stamps) == 1
    (at, again), = stamps
    assert at == again
    assert at >= before.replace(microsecond=before.microsecond // 1000 * 1000)


def test_noop_pipeline_is_matched_not_modified(coll) -> None:
    res = coll.update_many({}, [{"$set": {"a": "$a"}}])
    assert (res.matched_count, res.modified_count) == (4, 0)
    # an empty pipeline (pymongo refuses to send one; the server takes it)
    reply = coll.database.command({"update": coll.name,
                                   "updates": [{"q": {"_id": 0}, "u": []}]})
    assert (reply["n"], reply["nModified"]) == (1, 0)


def test_upsert_seeds_from_the_filter_then_runs_the_pipeline(coll) -> None:
    res = coll.update_one({"name": "n", "k.j": 5, "a": {"$gt": 100}},
                          [{"$set": {"twice": {"$multiply": ["$k.j", 2]}}}], upsert=True)
    assert res.upserted_id is not None and isinstance(res.upserted_id, ObjectId)
    doc = coll.find_one({"_id": res.upserted_id})
    assert doc == {"_id": res.upserted_id, "name": "n", "k": {"j": 5}, "twice": 10}
    res = coll.update_one({"_id": 50}, [{"$set": {"x": {"$literal": "$notapath"}}}],
                          upsert=True)
    assert res.upserted_id == 50
    assert coll.find_one({"_id": 50}) == {"_id": 50, "x": "$notapath"}


def test_find_one_and_update_with_a_pipeline(coll) -> None:
    before = coll.find_one_and_update({"_id": 1}, [{"$set": {"a": {"$add": ["$a", 100]}}}])
    assert before["a"] == 1
    after = coll.find_one_and_update({"_id": 1}, [{"$set": {"a": {"$add": ["$a", 1]}}}],
                                     return_document=ReturnDocument.AFTER)
    assert after["a"] == 102
    up = coll.find_one_and_update({"_id": 77}, [{"$set": {"v": "$_id"}}], upsert=True,
                                  return_document=ReturnDocument.AFTER)
    assert up == {"_id": 77, "v": 77}
    with pytest.raises(OperationFailure) as exc:
        coll.find_one_and_update({"_id": 2}, [{"$sort": {"a": 1}}])
    assert exc.value.code == 72
    assert coll.find_one({"_id": 2})["a"] == 2


def test_collection_bulk_write_with_pipelines(coll) -> None:
    res = coll.bulk_write([
        UpdateOne({"_id": 0}, [{"$set": {"z": "zero"}}]),
        UpdateMany({"a": {"$gte": 2}}, [{"$set": {"big": True}}]),
        UpdateOne({"_id": 9}, [{"$set": {"new": "$_id"}}], upsert=True),
    ])
    assert (res.matched_count, res.modified_count, res.upserted_count) == (3, 3, 1)
    assert coll.find_one({"_id": 0})["z"] == "zero"
    assert coll.count_documents({"big": True}) == 2
    assert coll.find_one({"_id": 9}) == {"_id": 9, "new": 9}


def test_client_bulk_write_with_pipelines_and_constants(client, coll) -> None:
    ns = coll.full_name
    res = client.bulk_write([
        UpdateOne({"_id": 1}, [{"$set": {"via": "client"}}], namespace=ns),
        UpdateMany({"a": {"$lt": 1}}, [{"$set": {"low": "$$lim"}}], namespace=ns),
    ], let={"lim": 1})
    assert (res.matched_count, res.modified_count) == (2, 2)
    assert coll.find_one({"_id": 1})["via"] == "client"
    assert coll.find_one({"_id": 0})["low"] == 1
    reply = client.admin.command({
        "bulkWrite": 1, "nsInfo": [{"ns": ns}],
        "ops": [{"update": 0, "filter": {"_id": 2}, "updateMods": [{"$set": {"k": "$$k"}}],
                 "constants": {"k": "konst"}},
                {"update": 0, "filter": {"_id": 3}, "updateMods": [{"$match": {}}]}],
        "ordered": False})
    results = reply["cursor"]["firstBatch"]
    assert results[0]["ok"] == 1 and results[0]["nModified"] == 1
    assert results[1]["ok"] == 0 and results[1]["code"] == 72
    assert results[1]["errmsg"] == "$match is not allowed to be used within an update"
    assert reply["nErrors"] == 1
    assert coll.find_one({"_id": 2})["k"] == "konst"


def test_statement_constants(coll) -> None:
    db = coll.database
    reply = db.command({"update": coll.name, "updates": [
        {"q": {"_id": 0}, "u": [{"$set": {"c": "$$cst", "lit": "$$obj"}}],
         "c": {"cst": 5, "obj": {"$add": [1, 2]}}}]})
    assert reply["nModified"] == 1
    assert coll.find_one({"_id": 0}, {"c": 1, "lit": 1}) == {"_id": 0, "c": 5,
                                                             "lit": {"$add": [1, 2]}}


@pytest.mark.parametrize(("statement", "code", "errmsg"), [
    ({"q": {}, "u": [{"$match": {"a": 1}}], "multi": True}, 72,
     "$match is not allowed to be used within an update"),
    ({"q": {}, "u": [{"$set": {"x": 1}}, {"$group": {"_id": "$a"}}], "multi": True}, 72,
     "$group is not allowed to be used within an update"),
    ({"q": {}, "u": [{"$lookup": {"from": "o", "localField": "a", "foreignField": "a",
                                  "as": "j"}}]}, 72,
     "$lookup is not allowed to be used within an update"),
    ({"q": {}, "u": [{"$limit": 1}]}, 72, "$limit is not allowed to be used within an update"),
    ({"q": {}, "u": [{"$out": "other"}]}, 72, "$out is not allowed to be used within an update"),
    ({"q": {}, "u": [{"$bogus": 1}]}, 40324, "Unrecognized pipeline stage name: '$bogus'"),
    ({"q": {}, "u": [{"$set": {"x": "$$undefinedVar"}}]}, 17276,
     "Use of undefined variable: undefinedVar"),
    ({"q": {"_id": 1}, "u": [{"$set": {"tags.$[e]": 1}}], "arrayFilters": [{"e": "x"}]}, 9,
     "arrayFilters may not be specified for pipeline-style updates"),
    ({"q": {"_id": 1}, "u": {"$set": {"x": 1}}, "c": {"k": 1}}, 51198,
     "Constant values may only be specified for pipeline updates"),
    ({"q": {"_id": 1}, "u": [{"$set": {"x": "$$k"}}], "c": {"_k": 1}}, 16867,
     "'_k' starts with an invalid character for a user variable name"),
    ({"q": {"_id": 1}, "u": [{"$set": {"_id": 5}}]}, 66,
     "After applying the update, the (immutable) field '_id' was found to have been altered "
     "to _id: 5"),
    ({"q": {"_id": 1}, "u": [{"$replaceWith": "$a"}]}, 40228,
     "must evaluate to an object, but resulting value was: 1"),
])
def test_refused_pipelines_write_nothing(coll, statement: dict[str, Any], code: int,
                                         errmsg: str) -> None:
    before = _all(coll)
    reply = coll.database.command({"update": coll.name, "updates": [statement]})
    assert reply["n"] == 0 and reply["nModified"] == 0
    (err,) = reply["writeErrors"]
    assert err["code"] == code
    assert errmsg in err["errmsg"]
    assert _all(coll) == before


def test_pymongo_raises_write_errors(coll) -> None:
    with pytest.raises(WriteError) as exc:
        coll.update_one({"_id": 0}, [{"$sort": {"a": 1}}])
    assert exc.value.code == 72
    with pytest.raises(BulkWriteError) as bexc:
        coll.bulk_write([UpdateOne({"_id": 0}, [{"$set": {"ok": 1}}]),
                         UpdateOne({"_id": 1}, [{"$skip": 1}]),
                         UpdateOne({"_id": 2}, [{"$set": {"ok": 1}}])])
    assert bexc.value.details["writeErrors"][0]["index"] == 1
    assert coll.count_documents({"ok": 1}) == 1  # ordered: stopped at the error


# --- time series -----------------------------------------------------------------------

def _measurements(c: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in d.items() if k != "_id"} for d in c.find().sort("t", 1)]


def test_time_series_pipeline_update_many(ts) -> None:
    res = ts.update_many({"v": {"$gte": 3}},
                         [{"$set": {"w": {"$multiply": ["$v", 2]}, "m.tag": "hi"}},
                          {"$unset": "v"}])
    assert (res.matched_count, res.modified_count) == (3, 3)
    docs = _measurements(ts)
    assert docs[:3] == [{"t": T0 + datetime.timedelta(minutes=i), "m": {"s": i % 2}, "v": i}
                        for i in range(3)]
    assert docs[3:] == [{"t": T0 + datetime.timedelta(minutes=i), "m": {"s": i % 2, "tag": "hi"},
                         "w": i * 2} for i in range(3, 6)]
    assert ts.count_documents({"m.tag": "hi"}) == 3


def test_time_series_pipeline_update_one_and_upsert(ts) -> None:
    res = ts.update_one({"m.s": 1}, [{"$set": {"one": True}}])
    assert (res.matched_count, res.modified_count) == (1, 1)
    assert ts.count_documents({"one": True}) == 1
    res = ts.update_one({"m": {"s": 7}, "v": 70},
                        [{"$set": {"t": {"$dateAdd": {"startDate": T0, "unit": "day",
                                                      "amount": 1}}}}], upsert=True)
    assert res.upserted_id is not None
    (doc,) = ts.find({"m.s": 7}, {"_id": 0})
    assert doc == {"t": T0 + datetime.timedelta(days=1), "m": {"s": 7}, "v": 70}
    assert ts.count_documents({}) == 7


def test_time_series_pipeline_refusals_write_nothing(ts) -> None:
    before = _measurements(ts)
    db = ts.database
    reply = db.command({"update": ts.name, "updates": [
        {"q": {"v": 1}, "u": [{"$unset": "t"}]}]})
    assert reply["writeErrors"][0]["code"] == 2
    assert "'t' must be present and contain a valid BSON UTC datetime value" in \
        reply["writeErrors"][0]["errmsg"]
    reply = db.command({"update": ts.name, "updates": [
        {"q": {}, "u": [{"$match": {}}], "multi": True}]})
    assert reply["writeErrors"][0]["code"] == 72
    assert _measurements(ts) == before


# --- other clients ---------------------------------------------------------------------

def test_async_clients(uri: str, client) -> None:
    from motor.motor_asyncio import AsyncIOMotorClient
    from pymongo import AsyncMongoClient

    name = "async_pipeline"
    client.pipeline_updates.drop_collection(name)
    client.pipeline_updates[name].insert_many([{"_id": i, "v": i} for i in range(3)])

    async def run() -> None:
        for cls in (AsyncMongoClient, AsyncIOMotorClient):
            c: Any = cls(uri, serverSelectionTimeoutMS=10_000)
            try:
                coll = c.pipeline_updates[name]
                res = await coll.update_many({}, [{"$set": {"v": {"$add": ["$v", 1]},
                                                            "by": cls.__name__}}])
                assert res.modified_count == 3
                doc = await coll.find_one_and_update(
                    {"_id": 0}, [{"$set": {"last": "$by"}}],
                    return_document=ReturnDocument.AFTER)
                assert doc["last"] == cls.__name__
            finally:
                result = c.close()
                if asyncio.iscoroutine(result):
                    await result

    asyncio.run(run())
    assert [d["v"] for d in client.pipeline_updates[name].find().sort("_id", 1)] == [2, 3, 4]
    client.pipeline_updates.drop_collection(name)


MONGOSH_SCRIPT = """
const c = db.getSiblingDB('pipeline_updates').mongosh_pipeline;
c.drop();
c.insertMany([{_id: 1, price: 4, qty: 3}, {_id: 2, price: 5, qty: 2}]);
const r = c.updateMany({}, [{$set: {total: {$multiply: ['$price', '$qty']}}}, {$unset: 'qty'}]);
let refused = null;
try { c.updateOne({_id: 1}, [{$match: {}}]); } catch (e) { refused = e.code; }
print(EJSON.stringify({matched: r.matchedCount, modified: r.modifiedCount,
                       docs: c.find().sort({_id: 1}).toArray(), refused: refused},
                      {relaxed: true}));
c.drop();
"""


@pytest.mark.mongosh
def test_mongosh_pipeline_update(uri: str) -> None:
    result, _ = run_mongosh(uri, MONGOSH_SCRIPT)
    assert result == {"matched": 2, "modified": 2, "refused": 72,
                      "docs": [{"_id": 1, "price": 4, "total": 12},
                               {"_id": 2, "price": 5, "total": 10}]}
