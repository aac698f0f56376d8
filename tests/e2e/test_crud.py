"""Ordinary collections through pymongo: a full CRUD round with every update operator,
cursors, indexes and their use, and the errors MongoDB gives for bad input.

Expected results follow MongoDB's manual (reference pages of each operator/command).
"""

from __future__ import annotations

import datetime

import bson
import pymongo
import pytest
from bson import Int64, ObjectId
from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure


@pytest.fixture
def coll(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    c = client.crud_e2e[request.node.name[:60].replace("[", "_").replace("]", "")]
    c.drop()
    yield c
    c.drop()


def test_insert_ids_and_order(coll) -> None:
    res = coll.insert_one({"b": 1, "_id": 5, "a": 2})
    assert res.inserted_id == 5
    raw = coll.find_one({"_id": 5})
    assert list(raw) == ["_id", "b", "a"]  # _id first, the rest in insertion order
    res = coll.insert_many([{"x": 1}, {"x": 2}])
    assert all(isinstance(i, ObjectId) for i in res.inserted_ids)
    assert coll.count_documents({}) == 3


def test_ordered_and_unordered_write_errors(coll) -> None:
    coll.insert_one({"_id": 1})
    with pytest.raises(BulkWriteError) as exc:
        coll.insert_many([{"_id": 0}, {"_id": 1}, {"_id": 2}], ordered=True)
    details = exc.value.details
    assert details["nInserted"] == 1
    (err,) = details["writeErrors"]
    assert err["index"] == 1 and err["code"] == 11000
    assert err["keyPattern"] == {"_id": 1} and err["keyValue"] == {"_id": 1}
    assert "E11000 duplicate key error collection: crud_e2e." in err["errmsg"]
    assert coll.count_documents({"_id": 2}) == 0  # ordered: stopped at the error
    with pytest.raises(BulkWriteError) as exc:
        coll.insert_many([{"_id": 1}, {"_id": 3}, {"_id": 0}, {"_id": 4}], ordered=False)
    assert [e["index"] for e in exc.value.details["writeErrors"]] == [0, 2]
    assert sorted(d["_id"] for d in coll.find()) == [0, 1, 3, 4]


def test_find_options(coll) -> None:
    coll.insert_many([{"_id": i, "g": i % 3, "v": i * 10, "tags": ["t", f"n{i}"]}
                      for i in range(250)])
    docs = list(coll.find({"g": 1}, {"v": 1}).sort("v", -1).skip(2).limit(3))
    assert docs == [{"_id": 241, "v": 2410}, {"_id": 238, "v": 2380}, {"_id": 235, "v": 2350}]
    assert len(list(coll.find().batch_size(7))) == 250  # many getMores
    assert coll.find_one({"tags": "n17"})["_id"] == 17
    assert [d["_id"] for d in coll.find({"_id": {"$in": [3, 1, 2]}}).sort("_id", 1)] == [1, 2, 3]
    assert list(coll.find({}, {"_id": 0, "g": 1}).limit(1)) == [{"g": 0}]
    assert coll.find({"v": {"$gte": 2000}}).explain()["queryPlanner"]["winningPlan"]["stage"] \
        == "COLLSCAN"
    coll.create_index("v")
    plan = coll.find({"v": {"$gte": 2000}}).explain()["queryPlanner"]["winningPlan"]
    assert plan["inputStage"]["stage"] == "IXSCAN"
    assert plan["inputStage"]["indexName"] == "v_1"
    assert len(list(coll.find({"v": {"$gte": 2000}}))) == 50
    assert coll.distinct("g") == [0, 1, 2]
    assert len(coll.distinct("tags")) == 251


def test_update_operators(coll) -> None:
    now_before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    coll.insert_one({"_id": 1, "n": 5, "m": 2, "lo": 10, "hi": 10, "old": "x", "gone": 1,
                     "arr": [1, 2, 3, 2], "set": ["a"], "pop": [1, 2, 3],
                     "items": [{"k": 1, "q": 1}, {"k": 2, "q": 2}]})
    coll.update_one({"_id": 1}, {
        "$inc": {"n": 2}, "$mul": {"m": 1.5}, "$min": {"lo": 3}, "$max": {"hi": 30},
        "$rename": {"old": "new"}, "$unset": {"gone": ""}, "$set": {"s.t": True},
        "$currentDate": {"when": True, "ts": {"$type": "timestamp"}},
        "$push": {"arr": {"$each": [9, 0], "$sort": 1, "$slice": -4}},
        "$addToSet": {"set": {"$each": ["a", "b"]}}, "$pop": {"pop": -1},
    })
    doc = coll.find_one({"_id": 1})
    assert doc["n"] == 7 and doc["m"] == 3.0 and doc["lo"] == 3 and doc["hi"] == 30
    assert doc["new"] == "x" and "old" not in doc and "gone" not in doc
    assert doc["s"] == {"t": True}
    assert doc["when"] >= now_before.replace(microsecond=0) - datetime.timedelta(seconds=1)
    assert isinstance(doc["ts"], bson.Timestamp)
    assert doc["arr"] == [2, 2, 3, 9] and doc["set"] == ["a", "b"] and doc["pop"] == [2, 3]
    coll.update_one({"_id": 1}, {"$pull": {"arr": 2}, "$pullAll": {"set": ["a"]}})
    doc = coll.find_one({"_id": 1})
    assert doc["arr"] == [3, 9] and doc["set"] == ["b"]
    coll.update_one({"_id": 1, "items.k": 2}, {"$set": {"items.$.q": 20}})
    coll.update_one({"_id": 1}, {"$inc": {"items.$[].q": 1}})
    coll.update_one({"_id": 1}, {"$set": {"items.$[e].tag": "big"}},
                    array_filters=[{"e.q": {"$gt": 5}}])
    assert coll.find_one({"_id": 1})["items"] == [{"k": 1, "q": 2},
                                                 {"k": 2, "q": 21, "tag": "big"}]
    coll.update_one({"_id": 2}, {"$set": {"a": 1}, "$setOnInsert": {"created": True}},
                    upsert=True)
    assert coll.find_one({"_id": 2}) == {"_id": 2, "a": 1, "created": True}
    coll.update_one({"_id": 2}, {"$set": {"a": 2}, "$setOnInsert": {"created": False}},
                    upsert=True)
    assert coll.find_one({"_id": 2}) == {"_id": 2, "a": 2, "created": True}
    res = coll.replace_one({"_id": 2}, {"z": 1})
    assert (res.matched_count, res.modified_count) == (1, 1)
    assert coll.find_one({"_id": 2}) == {"_id": 2, "z": 1}
    assert isinstance(coll.find_one({"_id": 1})["n"], int)
    coll.update_one({"_id": 1}, {"$inc": {"n": Int64(1)}})
    assert isinstance(coll.find_one({"_id": 1})["n"], Int64)


def test_update_many_sort_and_find_and_modify(coll) -> None:
    coll.insert_many([{"_id": i, "g": i % 2, "v": i} for i in range(10)])
    res = coll.update_many({"g": 0}, {"$set": {"even": True}})
    assert (res.matched_count, res.modified_count) == (5, 5)
    res = coll.update_many({"g": 0}, {"$set": {"even": True}})
    assert (res.matched_count, res.modified_count) == (5, 0)
    # MongoDB 8.0: updateOne with sort picks the first document in that order.
    coll.update_one({"g": 1}, {"$set": {"top": True}}, sort={"v": -1})
    assert coll.find_one({"top": True})["_id"] == 9
    before = coll.find_one_and_update({"g": 1}, {"$inc": {"v": 100}}, sort=[("v", 1)])
    assert before["_id"] == 1 and before["v"] == 1
    after = coll.find_one_and_update({"_id": 3}, {"$inc": {"v": 1}},
                                     return_document=ReturnDocument.AFTER, projection={"v": 1})
    assert after == {"_id": 3, "v": 4}
    replaced = coll.find_one_and_replace({"_id": 5}, {"r": 1}, return_document=True)
    assert replaced == {"_id": 5, "r": 1}
    deleted = coll.find_one_and_delete({"g": 0}, sort=[("v", -1)])
    assert deleted["_id"] == 8
    up = coll.find_one_and_update({"_id": 42}, {"$set": {"v": 1}}, upsert=True,
                                  return_document=True)
    assert up == {"_id": 42, "v": 1}
    assert coll.delete_many({"g": 1}).deleted_count == 4
    assert coll.delete_one({}).deleted_count == 1


def test_bulk_write_collection_and_client(client, coll) -> None:
    res = coll.bulk_write([pymongo.InsertOne({"_id": 1}), pymongo.UpdateOne(
        {"_id": 1}, {"$set": {"a": 1}}), pymongo.UpdateOne({"_id": 2}, {"$set": {"a": 2}},
                                                           upsert=True),
        pymongo.DeleteMany({"a": 2})])
    assert (res.inserted_count, res.modified_count, res.upserted_count, res.deleted_count) == \
        (1, 1, 1, 1)
    ns = f"{coll.database.name}.{coll.name}"
    cres = client.bulk_write([
        pymongo.InsertOne({"_id": 10}, namespace=ns),
        pymongo.UpdateOne({"_id": 10}, {"$set": {"b": 1}}, namespace=ns),
        pymongo.InsertOne({"_id": 1}, namespace=f"{coll.database.name}.other_bw"),
    ])
    assert cres.inserted_count == 2 and cres.modified_count == 1
    assert coll.find_one({"_id": 10}) == {"_id": 10, "b": 1}
    client[coll.database.name].other_bw.drop()


def test_indexes(coll) -> None:
    assert coll.create_index([("a", 1), ("b", -1)]) == "a_1_b_-1"
    coll.create_index("u", unique=True, sparse=True)
    coll.create_index("p", partialFilterExpression={"p": {"$gt": 5}}, name="p_partial")
    coll.create_index("t", expireAfterSeconds=3600)
    names = [ix["name"] for ix in coll.list_indexes()]
    assert names == ["_id_", "a_1_b_-1", "u_1", "p_partial", "t_1"]
    info = coll.index_information()
    assert info["u_1"]["unique"] is True and info["t_1"]["expireAfterSeconds"] == 3600
    coll.insert_many([{"u": 1}, {"x": 1}, {"x": 2}])  # sparse: missing u twice is fine
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"u": 1})
    assert coll.create_index([("a", 1), ("b", -1)]) == "a_1_b_-1"  # exists: no-op
    coll.drop_index("a_1_b_-1")
    coll.drop_index([("u", 1)])
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_", "p_partial", "t_1"]
    coll.drop_indexes()
    assert [ix["name"] for ix in coll.list_indexes()] == ["_id_"]


@pytest.mark.parametrize("spec,kwargs,code", [
    ({"a": 0}, {}, 67),                        # a zero key value
    ({"a": 1}, {"unique": "yes"}, 14),          # wrong option type
    ({"a": 1}, {"bogus": 1}, 197),              # unknown option
    ({"a": "text"}, {}, 238),                   # text indexes not built
])
def test_invalid_index_specs(coll, spec, kwargs, code) -> None:
    with pytest.raises(OperationFailure) as exc:
        coll.create_index(list(spec.items()), **kwargs)
    assert exc.value.code == code


def test_index_conflicts(coll) -> None:
    coll.create_index("a", name="first")
    with pytest.raises(OperationFailure) as exc:
        coll.create_index("a", name="second")
    assert exc.value.code == 85  # IndexOptionsConflict
    with pytest.raises(OperationFailure) as exc:
        coll.create_index("b", name="first")
    assert exc.value.code == 86  # IndexKeySpecsConflict


def test_bad_documents_and_updates(coll) -> None:
    big = {"_id": 1, "x": "a" * (16 * 1024 * 1024 - 20)}
    raw = bson.encode(big)
    assert len(raw) > 16 * 1024 * 1024 - 1024
    with pytest.raises((BulkWriteError, pymongo.errors.DocumentTooLarge, OperationFailure)):
        coll.insert_one({"_id": 1, "x": "a" * (16 * 1024 * 1024 + 1)})
    with pytest.raises(BulkWriteError) as exc:
        coll.insert_many([{"_id": {"$bad": 1}}], ordered=True)
    assert exc.value.details["writeErrors"][0]["code"] == 52
    coll.insert_one({"_id": 1, "a": 1})
    with pytest.raises(OperationFailure) as exc:
        coll.update_one({"_id": 1}, {"$frobnicate": {"a": 1}})
    assert exc.value.code == 9
    with pytest.raises(OperationFailure) as exc:
        coll.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert exc.value.code == 66
    with pytest.raises(OperationFailure) as exc:
        coll.update_one({"_id": 1}, {"$set": {"a": 1}, "$inc": {"a": 1}})
    assert exc.value.code == 40
    with pytest.raises(OperationFailure) as exc:
        coll.update_one({"_id": 1}, {"$inc": {"a": "x"}})
    assert exc.value.code == 14
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": 1}  # nothing was written
    with pytest.raises(OperationFailure) as exc:
        coll.find({"a": {"$nope": 1}}).to_list()
    assert exc.value.code == 2


def test_oversized_document_over_the_wire(server) -> None:
    """A 16 MiB + 1 document (pymongo refuses to send one, so raw OP_MSG)."""
    from protocol import encode_op_msg

    from .wire_client import raw_connection

    doc = {"_id": 1, "x": "a" * (16 * 1024 * 1024 + 1 - 30)}
    size = len(bson.encode(doc))
    doc["x"] += "a" * (16 * 1024 * 1024 + 1 - size)
    assert len(bson.encode(doc)) == 16 * 1024 * 1024 + 1
    raw = raw_connection(server, timeout=60)
    body = {"insert": "too_large", "documents": [doc], "$db": "crud_e2e"}
    raw.send(encode_op_msg(body, 1, 0))
    reply = raw.recv_reply_doc()
    assert reply["ok"] == 1.0 and reply["n"] == 0
    assert reply["writeErrors"][0]["code"] == 10334
    raw.close()


def test_cursors_get_more_and_kill(client, coll) -> None:
    coll.insert_many([{"_id": i} for i in range(30)])
    db = coll.database
    first = db.command({"find": coll.name, "batchSize": 10})
    cid = first["cursor"]["id"]
    assert cid != 0 and len(first["cursor"]["firstBatch"]) == 10
    more = db.command({"getMore": cid, "collection": coll.name, "batchSize": 15})
    assert [d["_id"] for d in more["cursor"]["nextBatch"]] == list(range(10, 25))
    killed = db.command({"killCursors": coll.name, "cursors": [cid, Int64(12345)]})
    assert killed["cursorsKilled"] == [cid] and killed["cursorsNotFound"] == [12345]
    with pytest.raises(OperationFailure) as exc:
        db.command({"getMore": cid, "collection": coll.name})
    assert exc.value.code == 43


def test_stats_validate_rename(client, coll) -> None:
    coll.insert_many([{"_id": i, "pad": "x" * 100} for i in range(100)])
    stats = coll.database.command("collStats", coll.name)
    assert stats["count"] == 100 and stats["size"] > 100 * 100 and stats["nindexes"] == 1
    dbs = coll.database.command("dbStats")
    assert dbs["objects"] >= 100 and dbs["collections"] >= 1
    val = coll.database.command("validate", coll.name)
    assert val["valid"] is True and val["nrecords"] == 100
    new_name = coll.name + "_renamed"
    client.admin.command("renameCollection", f"{coll.database.name}.{coll.name}",
                         to=f"{coll.database.name}.{new_name}")
    assert coll.database[new_name].count_documents({}) == 100
    assert coll.name not in coll.database.list_collection_names()
    coll.database[new_name].drop()


def test_create_is_idempotent_with_same_options(client) -> None:
    db = client.crud_e2e
    db.drop_collection("idem")
    db.create_collection("idem")
    db.command("create", "idem")  # same options: fine
    with pytest.raises(OperationFailure) as exc:
        db.command("create", "idem", validator={"a": {"$exists": True}})
    assert exc.value.code == 48
    db.drop_collection("idem")


def test_document_validator(client) -> None:
    db = client.crud_e2e
    db.drop_collection("validated")
    db.create_collection("validated", validator={"qty": {"$gte": 0}})
    db.validated.insert_one({"qty": 1})
    with pytest.raises(pymongo.errors.WriteError) as exc:
        db.validated.insert_one({"qty": -1})
    assert exc.value.code == 121
    db.drop_collection("validated")


def test_aggregate_basic(coll) -> None:
    coll.insert_many([{"g": i % 3, "v": i} for i in range(30)])
    out = list(coll.aggregate([{"$match": {"v": {"$gte": 3}}},
                               {"$group": {"_id": "$g", "total": {"$sum": "$v"}}},
                               {"$sort": {"_id": 1}}]))
    assert out == [{"_id": 0, "total": sum(v for v in range(3, 30) if v % 3 == 0)},
                   {"_id": 1, "total": sum(v for v in range(3, 30) if v % 3 == 1)},
                   {"_id": 2, "total": sum(v for v in range(3, 30) if v % 3 == 2)}]
    # Without a leading $match the pipeline reads the whole collection.
    assert list(coll.aggregate([{"$group": {"_id": None, "s": {"$sum": "$v"}}}])) == \
        [{"_id": None, "s": sum(range(30))}]
    with pytest.raises(OperationFailure) as exc:
        list(coll.aggregate([{"$bogus": {}}]))
    assert exc.value.code == 40324
