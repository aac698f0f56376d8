"""Views as MongoDB 8.0 has them, through pymongo, AsyncMongoClient, motor and mongosh.

The expected codes and messages are mongod's (src/mongo/db/views/, the create and collMod
commands, query_request_conversion); each refusal is checked to have written nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
from bson import Int64
from motor.motor_asyncio import AsyncIOMotorClient
from pymongo import AsyncMongoClient
from pymongo.errors import OperationFailure, WriteError

from ..conftest import start_server
from .mongosh_util import run_mongosh

T0 = dt.datetime(2024, 3, 1)


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    """`src` (ten documents, g = _id % 3), `other`, the view `v1` (g == 1) and `v4`
    (a view of v1)."""
    client.drop_database("views_e2e")
    d = client.views_e2e
    d.src.insert_many([{"_id": i, "g": i % 3, "v": i * 10, "tags": [i, i + 1]}
                       for i in range(10)])
    d.other.insert_many([{"_id": i, "g": i} for i in range(3)])
    d.command("create", "v1", viewOn="src", pipeline=[{"$match": {"g": 1}}])
    d.create_collection("v4", viewOn="v1", pipeline=[{"$project": {"v": 1, "g": 1}}])
    yield d
    client.drop_database("views_e2e")


def _error(db: Any, cmd: dict[str, Any], *, dbname: str | None = None) -> tuple[int, str]:
    target = db.client[dbname] if dbname else db
    with pytest.raises(OperationFailure) as info:
        target.command(cmd)
    return info.value.code, info.value.details["errmsg"]  # type: ignore[index]


def _state(db: Any) -> tuple[list[Any], int, int]:
    """Everything a refused command must leave alone (the views' definitions included:
    listCollections shows them, and needs no privilege on system.views)."""
    return (sorted(db.list_collections(), key=lambda c: c["name"]),
            db.src.count_documents({}), db.other.count_documents({}))


def _with_auth(server: Any) -> bool:
    return getattr(server, "credentials", None) is not None


@pytest.fixture
def system_views_readable(server: Any) -> None:
    """Reading system.views needs a privilege no built-in role grants (mongod's
    builtin_roles.yml), so on the compose scenario's --auth server even root is refused."""
    if _with_auth(server):
        pytest.skip("no built-in role may find on system.views")


# --- creating and listing ---------------------------------------------------------------------

def test_list_collections_and_system_views_show_the_views(db: Any, system_views_readable: None) -> None:
    infos = {c["name"]: c for c in db.list_collections()}
    assert infos["v1"] == {"name": "v1", "type": "view",
                           "options": {"viewOn": "src", "pipeline": [{"$match": {"g": 1}}]},
                           "info": {"readOnly": True}}
    assert infos["v4"]["options"] == {"viewOn": "v1", "pipeline": [{"$project": {"v": 1, "g": 1}}]}
    assert infos["system.views"]["type"] == "collection"
    assert infos["system.views"]["info"]["readOnly"] is False
    assert "uuid" in infos["system.views"]["info"]
    again = {c["name"]: c for c in db.list_collections()}
    assert again["system.views"]["info"]["uuid"] == infos["system.views"]["info"]["uuid"]
    assert list(db.list_collections(filter={"type": "view"}, nameOnly=True)) == [
        {"name": "v1", "type": "view"}, {"name": "v4", "type": "view"}]
    assert list(db["system.views"].find().sort("_id", 1)) == [
        {"_id": "views_e2e.v1", "viewOn": "src", "pipeline": [{"$match": {"g": 1}}]},
        {"_id": "views_e2e.v4", "viewOn": "v1", "pipeline": [{"$project": {"v": 1, "g": 1}}]}]
    assert db["system.views"].count_documents({"viewOn": "v1"}) == 1
    assert list(db["system.views"].aggregate([{"$match": {"viewOn": "src"}},
                                               {"$project": {"_id": 1}}])) == [
        {"_id": "views_e2e.v1"}]
    # a database without views has no system.views
    other = db.client.views_e2e_none
    other.c.insert_one({})
    try:
        assert "system.views" not in other.list_collection_names()
        assert list(other["system.views"].find()) == []
    finally:
        db.client.drop_database("views_e2e_none")


def test_create_again_identical_succeeds_different_fails(db: Any) -> None:
    db.command("create", "v1", viewOn="src", pipeline=[{"$match": {"g": 1}}])
    before = _state(db)
    assert _error(db, {"create": "v1", "viewOn": "other", "pipeline": []}) == (
        48, "namespace views_e2e.v1 already exists, but is a view on views_e2e.src rather "
            "than views_e2e.other")
    assert _error(db, {"create": "v1", "viewOn": "src", "pipeline": []}) == (
        48, "namespace views_e2e.v1 already exists, but with pipeline [ { $match: { g: 1 } } ] "
            "rather than []")
    code, msg = _error(db, {"create": "src", "viewOn": "other", "pipeline": []})
    assert code == 48 and msg.startswith(
        "namespace views_e2e.src already exists, but with different options: { uuid: UUID(")
    assert _state(db) == before


def test_view_on_a_missing_collection_is_allowed_and_empty(db: Any) -> None:
    db.create_collection("later", viewOn="nosuch", pipeline=[])
    assert list(db.later.find()) == []
    assert db.later.count_documents({}) == 0
    db.nosuch.insert_one({"_id": 1, "x": 1})
    assert list(db.later.find()) == [{"_id": 1, "x": 1}]


def test_views_survive_a_restart(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "data")
    try:
        with pymongo.MongoClient(proc.uri) as c:
            c.d.src.insert_many([{"_id": i, "even": i % 2 == 0} for i in range(6)])
            c.d.create_collection("evens", viewOn="src", pipeline=[{"$match": {"even": True}}])
    finally:
        proc.stop()
    proc = start_server(tmp_path / "data")
    try:
        with pymongo.MongoClient(proc.uri) as c:
            assert [d["_id"] for d in c.d.evens.find()] == [0, 2, 4]
            info = next(c.d.list_collections(filter={"name": "evens"}))
            assert info["type"] == "view"
            assert info["options"] == {"viewOn": "src", "pipeline": [{"$match": {"even": True}}]}
    finally:
        proc.stop()
        proc.cleanup()


# --- reading through a view ------------------------------------------------------------------

def test_find_through_a_view(db: Any) -> None:
    assert [d["_id"] for d in db.v1.find()] == [1, 4, 7]
    assert list(db.v1.find({"v": {"$gt": 10}}, {"_id": 0, "v": 1}).sort("v", -1)) == [
        {"v": 70}, {"v": 40}]
    assert list(db.v4.find({}, {"v": 1}).sort("v", -1).skip(1).limit(5)) == [
        {"_id": 4, "v": 40}, {"_id": 1, "v": 10}]
    assert db.v4.find_one({"_id": 4}) == {"_id": 4, "g": 1, "v": 40}
    assert db.v1.find_one({"_id": 0}) is None


def test_find_on_a_view_pages_with_get_more_on_the_views_namespace(db: Any) -> None:
    first = db.command({"find": "v1", "batchSize": 1, "sort": {"_id": 1}})
    assert first["cursor"]["ns"] == "views_e2e.v1"
    assert [d["_id"] for d in first["cursor"]["firstBatch"]] == [1]
    cursor_id = first["cursor"]["id"]
    assert cursor_id != 0
    more = db.command({"getMore": cursor_id, "collection": "v1", "batchSize": 1})
    assert more["cursor"]["ns"] == "views_e2e.v1"
    assert [d["_id"] for d in more["cursor"]["nextBatch"]] == [4]
    rest = db.command({"getMore": cursor_id, "collection": "v1"})
    assert [d["_id"] for d in rest["cursor"]["nextBatch"]] == [7]
    assert rest["cursor"]["id"] == 0
    # pymongo's own iteration does the same
    assert [d["_id"] for d in db.v4.find(batch_size=2).sort("_id", 1)] == [1, 4, 7]


def test_aggregate_count_distinct_through_views(db: Any) -> None:
    assert list(db.v4.aggregate([{"$group": {"_id": None, "s": {"$sum": "$v"}}}])) == [
        {"_id": None, "s": 120}]
    agg = db.command({"aggregate": "v1", "pipeline": [], "cursor": {"batchSize": 2}})
    assert agg["cursor"]["ns"] == "views_e2e.v1"
    assert len(agg["cursor"]["firstBatch"]) == 2
    assert db.v1.count_documents({}) == 3
    assert db.command({"count": "v1"})["n"] == 3
    assert db.command({"count": "v1", "query": {"v": {"$gt": 10}}})["n"] == 2
    assert db.command({"count": "v4", "skip": 1, "limit": 1})["n"] == 1
    assert db.v1.estimated_document_count() == 3
    assert db.v1.distinct("v") == [10, 40, 70]
    assert db.v1.distinct("tags") == [1, 2, 4, 5, 7, 8]
    assert db.v1.distinct("v", {"v": {"$gt": 10}}) == [40, 70]
    assert db.v4.distinct("g") == [1]
    assert db.v4.distinct("tags") == []  # v4 projects tags away


def test_lookup_and_union_with_read_a_view(db: Any) -> None:
    got = list(db.other.aggregate([
        {"$lookup": {"from": "v1", "localField": "g", "foreignField": "g", "as": "m"}},
        {"$project": {"n": {"$size": "$m"}}}, {"$sort": {"_id": 1}}]))
    assert got == [{"_id": 0, "n": 0}, {"_id": 1, "n": 3}, {"_id": 2, "n": 0}]
    got = list(db.other.aggregate([
        {"$lookup": {"from": "v4", "pipeline": [{"$match": {"v": {"$gte": 40}}}], "as": "m"}},
        {"$project": {"n": {"$size": "$m"}}}, {"$sort": {"_id": 1}}]))
    assert got == [{"_id": 0, "n": 2}, {"_id": 1, "n": 2}, {"_id": 2, "n": 2}]
    assert list(db.other.aggregate([{"$unionWith": "v1"}, {"$count": "n"}])) == [{"n": 6}]
    assert list(db.v1.aggregate([{"$unionWith": {"coll": "v4", "pipeline": [
        {"$match": {"_id": 7}}]}}, {"$count": "n"}])) == [{"n": 4}]


def test_now_in_a_view_is_the_requests_time(db: Any) -> None:
    db.create_collection("stamped", viewOn="src", pipeline=[
        {"$match": {"_id": 0}}, {"$addFields": {"at": "$$NOW"}}])
    for _ in range(2):
        before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        before = before.replace(microsecond=before.microsecond // 1000 * 1000)
        at = db.stamped.find_one()["at"]
        after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        assert before <= at <= after
    found = db.stamped.find_one({"$expr": {"$eq": ["$at", "$$NOW"]}})
    assert found is not None and found["_id"] == 0


def test_explain_of_a_find_on_a_view_names_the_source(db: Any) -> None:
    out = db.command({"explain": {"find": "v1", "filter": {"v": 40}}})
    assert out["stages"][0]["$cursor"]["queryPlanner"]["namespace"] == "views_e2e.src"
    assert out["command"]["find"] == "v1"


def test_view_over_a_time_series_collection(db: Any, system_views_readable: None) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "k"})
    db.m.insert_many([{"t": T0 + dt.timedelta(minutes=i), "k": i % 4, "v": i}
                      for i in range(40)])
    db.create_collection("hot", viewOn="m", pipeline=[
        {"$match": {"v": {"$gte": 30}}}, {"$project": {"_id": 0, "k": 1, "v": 1}}])
    assert list(db.hot.find({"k": 1}).sort("v", 1)) == [{"k": 1, "v": 33}, {"k": 1, "v": 37}]
    assert db.hot.count_documents({}) == 10
    assert db.hot.distinct("k") == [0, 1, 2, 3]
    assert list(db.hot.aggregate([{"$group": {"_id": "$k", "n": {"$sum": 1}}},
                                  {"$sort": {"_id": 1}}])) == [
        {"_id": 0, "n": 2}, {"_id": 1, "n": 2}, {"_id": 2, "n": 3}, {"_id": 3, "n": 3}]
    # a view of that view, and the time-series collection itself unchanged
    db.create_collection("hot1", viewOn="hot", pipeline=[{"$match": {"k": 1}}])
    assert [d["v"] for d in db.hot1.find().sort("v", -1)] == [37, 33]
    assert db.m.count_documents({}) == 40
    assert next(db.list_collections(filter={"name": "m"}))["type"] == "timeseries"
    ts_view = db["system.views"].find_one({"_id": "views_e2e.m"})
    assert ts_view["viewOn"] == "system.buckets.m"
    assert list(ts_view["pipeline"][0]) == ["$_internalUnpackBucket"]
    reply = db.command({"insert": "hot", "documents": [{"t": T0, "v": 1}]})
    assert [e["code"] for e in reply["writeErrors"]] == [166]
    assert db.m.count_documents({}) == 40


# --- writes and DDL refused --------------------------------------------------------------------

REFUSED = "Namespace views_e2e.v1 is a view, not a collection"


@pytest.mark.parametrize(("cmd", "reported"), [
    ({"insert": "v1", "documents": [{"_id": 100}, {"_id": 101}]}, 1),
    ({"insert": "v1", "documents": [{"_id": 100}, {"_id": 101}], "ordered": False}, 2),
    ({"update": "v1", "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "upsert": True}]}, 1),
    ({"delete": "v1", "ordered": False,
      "deletes": [{"q": {}, "limit": 1}, {"q": {}, "limit": 0}]}, 2),
])
def test_writes_to_a_view_are_write_errors(db: Any, cmd: dict[str, Any], reported: int) -> None:
    before = _state(db)
    reply = db.command(cmd)
    assert reply["n"] == 0
    assert [(e["index"], e["code"], e["errmsg"]) for e in reply["writeErrors"]] == [
        (i, 166, REFUSED) for i in range(reported)]
    assert _state(db) == before


def test_driver_writes_to_a_view_raise(db: Any) -> None:
    before = _state(db)
    with pytest.raises(WriteError) as info:
        db.v1.insert_one({"_id": 100})
    assert info.value.code == 166
    with pytest.raises(WriteError):
        db.v1.update_one({"_id": 1}, {"$set": {"x": 1}})
    with pytest.raises(WriteError):
        db.v1.delete_many({})
    with pytest.raises(OperationFailure) as op:
        db.v1.find_one_and_update({"_id": 1}, {"$set": {"x": 1}})
    assert op.value.code == 166
    assert _state(db) == before


@pytest.mark.parametrize(("cmd", "code", "msg"), [
    ({"findAndModify": "v1", "query": {}, "remove": True}, 166, REFUSED),
    ({"findAndModify": "v1", "query": {}, "update": {"$set": {"a": 1}}, "upsert": True},
     166, REFUSED),
    ({"createIndexes": "v1", "indexes": [{"key": {"v": 1}, "name": "v_1"}]}, 166, REFUSED),
    ({"listIndexes": "v1"}, 166, REFUSED),
    ({"dropIndexes": "v1", "index": "*"}, 166, REFUSED),
    ({"collStats": "v1"}, 166, REFUSED),
    ({"validate": "v1"}, 166, "Cannot validate a view"),
    ({"find": "v1", "tailable": True}, 168, "Tailable cursors are not supported in aggregation."),
    ({"find": "v1", "min": {"v": 1}}, 168, "Option min not supported in aggregation."),
    ({"find": "v1", "showRecordId": True}, 168,
     "Option showRecordId not supported in aggregation."),
    ({"find": "v1", "sort": {"$natural": 1}}, 168,
     "Sort option $natural not supported in aggregation."),
    ({"find": "v1", "singleBatch": True}, 168, "Option singleBatch not supported in aggregation."),
    ({"find": "v1", "collation": {"locale": "fr"}}, 167,
     "Cannot override a view's default collation"),
])
def test_commands_refused_on_a_view(db: Any, cmd: dict[str, Any], code: int, msg: str) -> None:
    before = _state(db)
    assert _error(db, cmd) == (code, msg)
    assert _state(db) == before


def test_bulk_write_to_a_view_is_refused(db: Any) -> None:
    before = _state(db)
    reply = db.client.admin.command({"bulkWrite": 1, "ops": [
        {"insert": 0, "document": {"_id": 100}}], "nsInfo": [{"ns": "views_e2e.v1"}]})
    result = reply["cursor"]["firstBatch"][0]
    assert (result["ok"], result["code"], result["errmsg"]) == (0.0, 166, REFUSED)
    assert _state(db) == before


def test_rename_of_or_onto_a_view_is_refused(db: Any) -> None:
    before = _state(db)
    assert _error(db, {"renameCollection": "views_e2e.v1", "to": "views_e2e.v1b"},
                  dbname="admin") == (166, "cannot rename view: views_e2e.v1")
    assert _error(db, {"renameCollection": "views_e2e.other", "to": "views_e2e.v1",
                       "dropTarget": True}, dbname="admin") == (
        48, "a view already exists with that name: views_e2e.v1")
    assert _state(db) == before


def test_out_and_merge_into_a_view_are_refused(db: Any) -> None:
    before = _state(db)
    for stage in ({"$out": "v1"}, {"$merge": {"into": "v1"}}):
        with pytest.raises(OperationFailure) as info:
            db.other.aggregate([stage])
        assert info.value.code == 166
    assert _state(db) == before


# --- collMod and drop ----------------------------------------------------------------------------

def test_coll_mod_redefines_a_view(db: Any, system_views_readable: None) -> None:
    assert db.command({"collMod": "v1", "pipeline": [{"$match": {"g": 2}}]})["ok"] == 1
    assert [d["_id"] for d in db.v1.find()] == [2, 5, 8]
    assert next(db.list_collections(filter={"name": "v1"}))["options"] == {
        "viewOn": "src", "pipeline": [{"$match": {"g": 2}}]}
    db.command({"collMod": "v1", "viewOn": "other"})
    assert [d["_id"] for d in db.v1.find()] == [2]
    db.command({"collMod": "v1", "viewOn": "src", "pipeline": [{"$match": {"g": 0}}]})
    assert [d["_id"] for d in db.v1.find()] == [0, 3, 6, 9]
    assert db["system.views"].find_one({"_id": "views_e2e.v1"}) == {
        "_id": "views_e2e.v1", "viewOn": "src", "pipeline": [{"$match": {"g": 0}}]}
    # v4 reads through the new definition
    assert [d["_id"] for d in db.v4.find()] == [0, 3, 6, 9]


@pytest.mark.parametrize(("cmd", "code", "msg"), [
    ({"collMod": "src", "viewOn": "other", "pipeline": []}, 72,
     "option only supported on a view: pipeline"),
    ({"collMod": "src", "viewOn": "other"}, 72, "option only supported on a view: viewOn"),
    ({"collMod": "v1", "validator": {"a": 1}}, 72, "option not supported on a view: validator"),
    ({"collMod": "v1", "validationLevel": "off"}, 72,
     "option not supported on a view: validationLevel"),
    ({"collMod": "v1", "index": {"name": "x", "hidden": True}}, 72,
     "option not supported on a view: index"),
    ({"collMod": "v1", "viewOn": "v4", "pipeline": []}, 5,
     "View cycle detected: views_e2e.v1 => views_e2e.v1 => views_e2e.v4 => views_e2e.v1"),
    ({"collMod": "v1", "pipeline": [{"$lookup": {"from": "v4", "pipeline": [], "as": "x"}}]}, 5,
     "View cycle detected: views_e2e.v1 => views_e2e.v1 => views_e2e.v4 => views_e2e.v1"),
    ({"collMod": "v1", "viewOn": "src", "pipeline": [{"$nope": 1}]}, 40324,
     "Unrecognized pipeline stage name: '$nope'"),
    ({"collMod": "v1", "viewOn": "src", "pipeline": [{"$out": "x"}]}, 167,
     "Invalid pipeline for view views_e2e.v1 :: caused by :: The aggregation stage $out in "
     "location 0 of the pipeline cannot be used in the view definition of views_e2e.v1 "
     "because it writes to disk"),
    ({"collMod": "v1", "viewOn": "src", "pipeline": {"a": 1}}, 14,
     "BSON field 'collMod.pipeline' is the wrong type 'object', expected type 'array'"),
    ({"collMod": "v1", "viewOn": "", "pipeline": []}, 2, "'viewOn' cannot be empty"),
])
def test_coll_mod_of_a_view_bad_input(db: Any, server: Any, cmd: dict[str, Any], code: int,
                                      msg: str) -> None:
    if _with_auth(server) and ("viewOn" in cmd) != ("pipeline" in cmd):
        code, msg = 72, ("Must specify both 'viewOn' and 'pipeline' when modifying a view and "
                         "auth is enabled")  # mongod checks this first, with auth on
    before = _state(db)
    assert _error(db, cmd) == (code, msg)
    assert _state(db) == before
    assert [d["_id"] for d in db.v1.find()] == [1, 4, 7]


def test_drop_a_view(db: Any, system_views_readable: None) -> None:
    assert db.command({"drop": "v4"}) == {"ns": "views_e2e.v4", "ok": 1.0}
    assert "v4" not in db.list_collection_names()
    assert db["system.views"].find_one({"_id": "views_e2e.v4"}) is None
    assert db.src.count_documents({}) == 10
    assert [d["_id"] for d in db.v1.find()] == [1, 4, 7]
    db.v1.drop()
    assert set(db.list_collection_names()) == {"src", "other"}  # system.views goes with them


# --- bad definitions -------------------------------------------------------------------------------

@pytest.mark.parametrize(("cmd", "code", "msg"), [
    ({"create": "bad", "pipeline": []}, 72, "'pipeline' requires 'viewOn' to also be specified"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$nope": 1}]}, 40324,
     "Unrecognized pipeline stage name: '$nope'"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$match": {}, "$limit": 1}]}, 40323,
     "A pipeline stage specification object must contain exactly one field."),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$merge": {"into": "x"}}]}, 167,
     "Invalid pipeline for view views_e2e.bad :: caused by :: The aggregation stage $merge in "
     "location 0 of the pipeline cannot be used in the view definition of views_e2e.bad "
     "because it writes to disk"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$match": {}}, {"$out": "x"}]}, 167,
     "Invalid pipeline for view views_e2e.bad :: caused by :: The aggregation stage $out in "
     "location 1 of the pipeline cannot be used in the view definition of views_e2e.bad "
     "because it writes to disk"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$changeStream": {}}]}, 167,
     "Invalid pipeline for view views_e2e.bad :: caused by :: $changeStream cannot be used in "
     "a view definition"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$limit": -1}]}, 5107201,
     "Invalid pipeline for view views_e2e.bad :: caused by :: invalid argument to $limit "
     "stage: Expected a non-negative number in: $limit: -1"),
    ({"create": "bad", "viewOn": "src", "pipeline": {"$match": {}}}, 14,
     "BSON field 'create.pipeline' is the wrong type 'object', expected type 'array'"),
    ({"create": "bad", "viewOn": "src", "pipeline": [1]}, 14,
     "BSON field 'create.pipeline.0' is the wrong type 'int', expected type 'object'"),
    ({"create": "bad", "viewOn": 5, "pipeline": []}, 14,
     "BSON field 'create.viewOn' is the wrong type 'int', expected type 'string'"),
    ({"create": "bad", "viewOn": "", "pipeline": []}, 2, "'viewOn' cannot be empty"),
    ({"create": "bad", "viewOn": "bad", "pipeline": []}, 5,
     "View cycle detected: views_e2e.bad => views_e2e.bad => views_e2e.bad"),
    ({"create": "bad", "viewOn": "src", "pipeline": [{"$unionWith": "bad"}]}, 5,
     "View cycle detected: views_e2e.bad => views_e2e.bad => views_e2e.bad"),
    ({"create": "bad", "viewOn": "a$b", "pipeline": []}, 73, "invalid name for 'viewOn': a$b"),
    ({"create": "bad", "viewOn": "system.buckets.m", "pipeline": []}, 73,
     "Invalid view: cannot define a view over a system.buckets namespace except by creating "
     "a time-series collection"),
    ({"create": "system.bad", "viewOn": "src", "pipeline": []}, 73,
     "View name cannot start with 'system.', which is reserved for system namespaces"),
    ({"create": "bad", "viewOn": "src", "pipeline": [], "collation": {"locale": "fr!"}}, 2,
     "Field 'locale' is invalid in: { locale: \"fr!\" }"),
    ({"create": "bad", "viewOn": "src", "pipeline": [], "validator": {"a": 1}}, 72,
     "option not supported on a view: validator"),
])
def test_create_view_bad_input(db: Any, server: Any, cmd: dict[str, Any], code: int,
                               msg: str) -> None:
    before = _state(db)
    if _with_auth(server) and cmd["create"].startswith("system."):
        # no built-in role may create a system collection: refused before it is parsed
        assert _error(db, cmd)[0] == 13
    else:
        assert _error(db, cmd) == (code, msg)
    assert _state(db) == before


def test_simple_collation_is_accepted_and_not_stored(db: Any) -> None:
    db.command({"create": "simple", "viewOn": "src", "pipeline": [],
                "collation": {"locale": "simple"}})
    assert next(db.list_collections(filter={"name": "simple"}))["options"] == {
        "viewOn": "src", "pipeline": []}


def test_a_cycle_between_views_is_refused(db: Any) -> None:
    db.create_collection("a", viewOn="b", pipeline=[])  # b does not exist yet: allowed
    before = _state(db)
    assert _error(db, {"create": "b", "viewOn": "a", "pipeline": []}) == (
        5, "View cycle detected: views_e2e.b => views_e2e.b => views_e2e.a => views_e2e.b")
    assert _state(db) == before


def test_view_depth_limit(db: Any) -> None:
    db.create_collection("d1", viewOn="src", pipeline=[{"$match": {"g": 1}}])
    for i in range(2, 20):
        db.create_collection(f"d{i}", viewOn=f"d{i - 1}", pipeline=[])
    assert [d["_id"] for d in db.d19.find()] == [1, 4, 7]
    db.create_collection("d20", viewOn="d19", pipeline=[])  # 20 views: the limit
    before = _state(db)
    assert _error(db, {"create": "d21", "viewOn": "d20", "pipeline": []}) == (
        165, "View depth limit exceeded; maximum depth is 20")
    # lengthening the chain from below counts the views above too
    assert _error(db, {"collMod": "d1", "viewOn": "v4", "pipeline": []}) == (
        165, "View depth limit exceeded; maximum depth is 20")
    assert _state(db) == before


# --- other clients ------------------------------------------------------------------------------

async def test_async_pymongo_and_motor_read_through_views(uri: str, db: Any) -> None:
    ac: AsyncMongoClient = AsyncMongoClient(uri)
    mc: AsyncIOMotorClient = AsyncIOMotorClient(uri)
    try:
        adb = ac.views_e2e
        await adb.create_collection("big", viewOn="src", pipeline=[{"$match": {"v": {"$gte": 50}}}])
        assert [d["_id"] async for d in adb.big.find().sort("_id", 1).batch_size(2)] == [
            5, 6, 7, 8, 9]
        assert await adb.big.count_documents({"g": 2}) == 2
        mdb = mc.views_e2e
        assert await mdb.v1.distinct("g") == [1]
        got = await mdb.big.aggregate([{"$group": {"_id": None, "s": {"$sum": "$v"}}}]).to_list(None)
        assert got == [{"_id": None, "s": 350}]
        infos = await (await adb.list_collections(filter={"name": "big"})).to_list(None)
        assert infos[0]["type"] == "view"
        with pytest.raises(WriteError):
            await mdb.big.insert_one({"v": 100})
        assert await mdb.src.count_documents({}) == 10
    finally:
        await ac.close()
        mc.close()


@pytest.mark.mongosh
def test_mongosh_create_view_and_read_through_it(uri: str, client: pymongo.MongoClient) -> None:
    script = r"""
const t = db.getSiblingDB('views_shell'); t.dropDatabase();
t.src.insertMany([{_id: 1, g: 1, v: 10}, {_id: 2, g: 2, v: 20}, {_id: 3, g: 1, v: 30}]);
const out = {};
out.created = t.createView('ones', 'src', [{$match: {g: 1}}, {$project: {g: 0}}]).ok;
out.found = t.ones.find({}, {v: 1}).sort({v: -1}).toArray();
out.count = t.ones.countDocuments();
out.distinct = t.ones.distinct('v');
out.info = t.getCollectionInfos({name: 'ones'})[0];
out.names = t.getCollectionNames();
out.views = t.system.views.find().toArray();
try { t.ones.insertOne({_id: 9}); out.insert = 'ok'; } catch (e) { out.insert = e.code; }
try { t.ones.createIndex({v: 1}); out.index = 'ok'; } catch (e) { out.index = e.code; }
try { t.createView('loop', 'loop', []); out.loop = 'ok'; } catch (e) { out.loop = e.code; }
out.dropped = t.ones.drop();
out.after = t.getCollectionNames();
print(EJSON.stringify(out, {relaxed: true}));
"""
    try:
        result, _output = run_mongosh(uri, script)
        assert result["created"] == 1
        assert result["found"] == [{"_id": 3, "v": 30}, {"_id": 1, "v": 10}]
        assert result["count"] == 2
        assert result["distinct"] == [10, 30]
        assert result["info"] == {"name": "ones", "type": "view", "options": {
            "viewOn": "src", "pipeline": [{"$match": {"g": 1}}, {"$project": {"g": 0}}]},
            "info": {"readOnly": True}}
        assert "ones" in result["names"]
        assert result["views"] == [{"_id": "views_shell.ones", "viewOn": "src", "pipeline": [
            {"$match": {"g": 1}}, {"$project": {"g": 0}}]}]
        assert result["insert"] == 166
        assert result["index"] == 166
        assert result["loop"] == 5
        assert result["dropped"] is True
        assert "ones" not in result["after"]
        assert client.views_shell.src.count_documents({}) == 3
    finally:
        client.drop_database("views_shell")


def test_int64_limit_and_skip_reach_the_view_pipeline(db: Any) -> None:
    got = db.command({"find": "v1", "skip": Int64(1), "limit": Int64(1), "sort": {"_id": 1}})
    assert [d["_id"] for d in got["cursor"]["firstBatch"]] == [4]
    assert got["cursor"]["id"] == 0
