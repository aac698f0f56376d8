"""The `let` option and `$$`-variables through real clients: find, aggregate, update,
delete, findAndModify, collection- and client-level bulkWrite, on ordinary and
time-series collections; `$$NOW` one value per command; bad `let` documents refused
with mongod's codes before anything is written.

mongod's rules (variables.cpp, variable_validation.cpp): a `let` name starts with a
lowercase ASCII letter or a non-ASCII character (16867), then letters, digits or `_`
(16868), and is not empty (16866); setting a system variable is refused (4738901); a
`let` expression may not read a document field (4890500); `let` must be an object (14).
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pymongo
import pytest
from pymongo import DeleteMany, ReturnDocument, UpdateMany, UpdateOne
from pymongo.errors import OperationFailure

T0 = datetime.datetime(2024, 5, 1)


@pytest.fixture
def coll(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    c = client.let_e2e[request.node.originalname[:60]]
    c.drop()
    c.insert_many([{"_id": i, "v": i, "g": "even" if i % 2 == 0 else "odd"} for i in range(6)])
    yield c
    c.drop()


@pytest.fixture
def ts(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    db = client.let_e2e
    name = "ts_" + request.node.originalname[:50]
    db.drop_collection(name)
    db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
    c = db[name]
    c.insert_many([{"t": T0 + datetime.timedelta(minutes=i), "m": "s", "v": i}
                   for i in range(6)])
    yield c
    db.drop_collection(name)


EXPR_GE = {"$expr": {"$gte": ["$v", "$$lim"]}}


def test_find_and_aggregate(coll) -> None:
    assert [d["_id"] for d in coll.find(EXPR_GE, let={"lim": 4}).sort("_id", 1)] == [4, 5]
    # later variables read earlier ones; expressions are evaluated once
    found = coll.find({"$expr": {"$eq": ["$v", "$$b"]}},
                      let={"a": {"$add": [1, 1]}, "b": {"$multiply": ["$$a", 2]}})
    assert [d["_id"] for d in found] == [4]
    out = list(coll.aggregate([{"$match": EXPR_GE},
                               {"$project": {"_id": 1, "scaled": {"$multiply": ["$v", "$$k"]},
                                             "label": "$$label"}}],
                              let={"lim": 3, "k": 10, "label": "hi"}))
    assert out == [{"_id": i, "scaled": i * 10, "label": "hi"} for i in (3, 4, 5)]
    grouped = list(coll.aggregate([{"$group": {"_id": "$g", "n": {"$sum": "$$one"}}},
                                   {"$sort": {"_id": 1}}], let={"one": 1}))
    assert grouped == [{"_id": "even", "n": 3}, {"_id": "odd", "n": 3}]


def test_update_delete_and_find_and_modify(coll) -> None:
    res = coll.update_many(EXPR_GE, [{"$set": {"tag": "$$tag"}}], let={"lim": 4, "tag": "big"})
    assert (res.matched_count, res.modified_count) == (2, 2)
    assert sorted(d["_id"] for d in coll.find({"tag": "big"})) == [4, 5]
    # operator updates take `let` in the filter too
    res = coll.update_many({"$expr": {"$lt": ["$v", "$$lim"]}}, {"$set": {"small": True}},
                           let={"lim": 2})
    assert res.modified_count == 2
    doc = coll.find_one_and_update({"$expr": {"$eq": ["$v", "$$which"]}},
                                   [{"$set": {"chosen": "$$which"}}], let={"which": 3},
                                   return_document=ReturnDocument.AFTER)
    assert doc["_id"] == 3 and doc["chosen"] == 3
    gone = coll.find_one_and_delete({"$expr": {"$eq": ["$v", "$$which"]}}, let={"which": 2})
    assert gone["_id"] == 2
    res = coll.delete_many({"$expr": {"$in": ["$v", "$$ids"]}}, let={"ids": [0, 1]})
    assert res.deleted_count == 2
    assert sorted(d["_id"] for d in coll.find()) == [3, 4, 5]


def test_statement_constants_and_let_together(coll) -> None:
    reply = coll.database.command({
        "update": coll.name, "let": {"lim": 5},
        "updates": [{"q": {"$expr": {"$eq": ["$v", "$$lim"]}},
                     "u": [{"$set": {"both": {"$concat": ["$$pre", "-", {"$toString": "$$lim"}]}}}],
                     "c": {"pre": "c"}}]})
    assert reply["nModified"] == 1
    assert coll.find_one({"_id": 5})["both"] == "c-5"


def test_bulk_writes(client, coll) -> None:
    res = coll.bulk_write([UpdateMany(EXPR_GE, [{"$set": {"hit": "$$lim"}}]),
                           DeleteMany({"$expr": {"$eq": ["$v", "$$zero"]}})],
                          let={"lim": 5, "zero": 0})
    assert (res.modified_count, res.deleted_count) == (1, 1)
    assert coll.find_one({"_id": 5})["hit"] == 5
    res = client.bulk_write([UpdateOne({"$expr": {"$eq": ["$v", "$$x"]}},
                                       [{"$set": {"client": "$$x"}}], namespace=coll.full_name)],
                            let={"x": 1})
    assert res.modified_count == 1
    assert coll.find_one({"_id": 1})["client"] == 1


def test_find_and_explain_through_a_view(coll) -> None:
    db = coll.database
    db.drop_collection("let_view")
    db.command("create", "let_view", viewOn=coll.name, pipeline=[{"$match": {"g": "even"}}])
    try:
        view = db.let_view
        assert [d["_id"] for d in view.find(EXPR_GE, let={"lim": 2}).sort("_id", 1)] == [2, 4]
        plan = db.command("explain", {"find": "let_view", "filter": EXPR_GE,
                                      "let": {"lim": 2}})
        assert plan["command"]["let"] == {"lim": 2}
        with pytest.raises(OperationFailure) as bad:
            view.find(EXPR_GE, let={"NOW": 1}).to_list()
        assert bad.value.code == 4738901
    finally:
        db.drop_collection("let_view")


def test_now_is_one_value_across_a_command(coll) -> None:
    coll.update_many({}, [{"$set": {"at": "$$NOW"}}])
    (at,) = {d["at"] for d in coll.find()}
    # a let variable bound to $$NOW equals $$NOW in the filter of the same command
    found = coll.find({"$expr": {"$eq": ["$$when", "$$NOW"]}}, let={"when": "$$NOW"})
    assert len(list(found)) == 6
    assert coll.count_documents({"at": at}) == 6


def test_time_series(ts) -> None:
    assert [d["v"] for d in ts.find(EXPR_GE, let={"lim": 4}).sort("t", 1)] == [4, 5]
    agg = list(ts.aggregate([{"$match": EXPR_GE},
                             {"$group": {"_id": None, "s": {"$sum": "$v"}, "k": {"$first": "$$k"}}}],
                            let={"lim": 3, "k": "x"}))
    assert agg == [{"_id": None, "s": 12, "k": "x"}]
    res = ts.update_many(EXPR_GE, [{"$set": {"w": {"$add": ["$v", "$$plus"]}}}],
                         let={"lim": 4, "plus": 100})
    assert res.modified_count == 2
    assert sorted(d["w"] for d in ts.find({"w": {"$exists": True}})) == [104, 105]
    res = ts.delete_many({"$expr": {"$lt": ["$v", "$$lim"]}}, let={"lim": 2})
    assert res.deleted_count == 2
    assert ts.count_documents({}) == 4


BAD_LETS: list[tuple[Any, int, str]] = [
    ({"Upper": 1}, 16867, "'Upper' starts with an invalid character for a user variable name"),
    ({"_x": 1}, 16867, "'_x' starts with an invalid character for a user variable name"),
    ({"": 1}, 16866, "empty variable names are not allowed"),
    ({"a-b": 1}, 16868, "'a-b' contains an invalid character for a variable name: '-'"),
    ({"NOW": 1}, 4738901, "Attempt to set internal constant: NOW"),
    ({"x": "$v"}, 4890500, "Command let Expression tried to access a field"),
    ({"x": "$$undefined"}, 17276, "Use of undefined variable: undefined"),
]


@pytest.mark.parametrize(("let", "code", "errmsg"), BAD_LETS)
def test_bad_let_on_every_command_writes_nothing(client, coll, let: Any, code: int,
                                                 errmsg: str) -> None:
    db = coll.database
    before = list(coll.find().sort("_id", 1))
    commands = [
        {"find": coll.name, "filter": {}},
        {"aggregate": coll.name, "pipeline": [], "cursor": {}},
        {"update": coll.name, "updates": [{"q": {}, "u": {"$set": {"x": 1}}, "multi": True}]},
        {"delete": coll.name, "deletes": [{"q": {}, "limit": 0}]},
        {"findAndModify": coll.name, "query": {}, "update": {"$set": {"x": 1}}},
        {"findAndModify": coll.name, "query": {}, "remove": True},
    ]
    for cmd in commands:
        with pytest.raises(OperationFailure) as exc:
            db.command({**cmd, "let": let})
        assert exc.value.code == code, cmd
        assert errmsg in exc.value.details["errmsg"], cmd
    with pytest.raises(OperationFailure) as exc:
        client.admin.command({"bulkWrite": 1, "nsInfo": [{"ns": coll.full_name}],
                              "ops": [{"delete": 0, "filter": {}, "multi": True}], "let": let})
    assert exc.value.code == code
    assert list(coll.find().sort("_id", 1)) == before


@pytest.mark.parametrize("command", ["find", "aggregate", "update", "delete", "findAndModify"])
def test_let_must_be_an_object(coll, command: str) -> None:
    body: dict[str, Any] = {
        "find": {"find": coll.name},
        "aggregate": {"aggregate": coll.name, "pipeline": [], "cursor": {}},
        "update": {"update": coll.name, "updates": [{"q": {}, "u": {"$set": {"x": 1}}}]},
        "delete": {"delete": coll.name, "deletes": [{"q": {}, "limit": 0}]},
        "findAndModify": {"findAndModify": coll.name, "remove": True},
    }[command]
    with pytest.raises(OperationFailure) as exc:
        coll.database.command({**body, "let": 5})
    assert exc.value.code == 14
    assert exc.value.details["errmsg"] == (
        f"BSON field '{command}.let' is the wrong type 'int', expected type 'object'")
    assert coll.count_documents({}) == 6


def test_async_clients(uri: str, client) -> None:
    from motor.motor_asyncio import AsyncIOMotorClient
    from pymongo import AsyncMongoClient

    name = "async_let"
    client.let_e2e.drop_collection(name)
    client.let_e2e[name].insert_many([{"_id": i, "v": i} for i in range(5)])

    async def run() -> list[list[int]]:
        seen = []
        for cls in (AsyncMongoClient, AsyncIOMotorClient):
            c: Any = cls(uri, serverSelectionTimeoutMS=10_000)
            try:
                coll = c.let_e2e[name]
                docs = await coll.find(EXPR_GE, let={"lim": 3}).sort("_id", 1).to_list(None)
                seen.append([d["_id"] for d in docs])
                res = await coll.update_many(EXPR_GE, [{"$set": {"by": "$$who"}}],
                                             let={"lim": 4, "who": cls.__name__})
                assert res.modified_count == 1
                with pytest.raises(OperationFailure) as exc:
                    await coll.find({}, let={"Bad": 1}).to_list(None)
                assert exc.value.code == 16867
            finally:
                result = c.close()
                if asyncio.iscoroutine(result):
                    await result
        return seen

    assert asyncio.run(run()) == [[3, 4], [3, 4]]
    assert client.let_e2e[name].find_one({"_id": 4})["by"] == "AsyncIOMotorClient"
    client.let_e2e.drop_collection(name)
