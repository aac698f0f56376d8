"""Bulk writes on time-series collections through pymongo: `Collection.bulk_write` (insert,
update and delete commands, mixed batches) and `MongoClient.bulk_write` (the bulkWrite
command, across time-series and ordinary namespaces), ordered and unordered, with the
per-operation results and errors MongoDB 8.0 reports. After each batch the measurements
are read back through the view and the buckets collection must validate.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pymongo
import pytest
from pymongo import DeleteMany, DeleteOne, InsertOne, ReplaceOne, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, ClientBulkWriteException
from pymongo.write_concern import WriteConcern

T0 = dt.datetime(2024, 7, 1)
BAD_VALUE = 2
INVALID_OPTIONS = 72
NO_TIME = "'t' must be present and contain a valid BSON UTC datetime value"


@pytest.fixture
def db(client: pymongo.MongoClient, request: pytest.FixtureRequest) -> Any:
    name = "tsbw_" + request.node.name[:40].replace("[", "_").replace("]", "")
    client.drop_database(name)
    d = client[name]
    d.create_collection("m", timeseries={"timeField": "t", "metaField": "k"})
    yield d
    client.drop_database(name)


def at(i: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=i)


def doc(i: int, **extra: Any) -> dict[str, Any]:
    return {"_id": i, "t": at(i), "k": i % 2, "v": i, **extra}


def by_id(db: Any) -> dict[Any, dict[str, Any]]:
    return {d["_id"]: d for d in db.m.find()}


def check_buckets(db: Any) -> None:
    assert db.command("validate", "system.buckets.m")["valid"] is True
    buckets = list(db["system.buckets.m"].find())
    assert sum(b["control"]["count"] for b in buckets) == db.m.count_documents({})


# --- Collection.bulk_write: the insert, update and delete commands ---------------------------

def test_collection_bulk_write_mixed_ordered(db) -> None:
    res = db.m.bulk_write([
        *[InsertOne(doc(i)) for i in range(4)],
        UpdateOne({"v": 1}, {"$set": {"w": 1}}),
        UpdateMany({"k": 0}, {"$inc": {"v": 10}}),
        ReplaceOne({"_id": 3}, {"t": at(30), "k": 3, "r": True}),
        DeleteOne({"v": 10}),
        UpdateOne({"k": 9}, {"$set": {"t": at(90)}}, upsert=True),
        InsertOne(doc(5)),
        DeleteMany({"k": 1}),
    ])
    assert (res.inserted_count, res.matched_count, res.modified_count, res.deleted_count,
            res.upserted_count) == (5, 4, 4, 3, 1)
    upserted = res.upserted_ids[8]
    assert by_id(db) == {2: doc(2, v=12), 3: {"_id": 3, "t": at(30), "k": 3, "r": True},
                         upserted: {"_id": upserted, "k": 9, "t": at(90)}}
    check_buckets(db)


def test_collection_bulk_write_unordered_reports_each_error(db) -> None:
    db.m.insert_many([doc(i) for i in range(3)])
    with pytest.raises(BulkWriteError) as exc:
        db.m.bulk_write([
            InsertOne({"_id": 10, "v": 10}),                       # no time field
            UpdateOne({"_id": 1}, {"$set": {"w": 1}}),
            UpdateOne({"_id": 2}, {"$unset": {"t": ""}}),          # would lose its time
            UpdateOne({"_id": 0}, {"$set": {"w": 2}}, sort={"v": 1}),
            InsertOne(doc(11)),
        ], ordered=False)
    details = exc.value.details
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [
        (0, BAD_VALUE), (2, BAD_VALUE), (3, INVALID_OPTIONS)]
    assert NO_TIME in details["writeErrors"][0]["errmsg"]
    assert (details["nInserted"], details["nMatched"], details["nModified"]) == (1, 1, 1)
    assert by_id(db) == {0: doc(0), 1: doc(1, w=1), 2: doc(2), 11: doc(11)}
    check_buckets(db)


def test_collection_bulk_write_ordered_stops_at_the_first_error(db) -> None:
    with pytest.raises(BulkWriteError) as exc:
        db.m.bulk_write([InsertOne(doc(0)), InsertOne({"_id": 1, "t": "late"}),
                         InsertOne(doc(2))])
    details = exc.value.details
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(1, BAD_VALUE)]
    assert details["nInserted"] == 1
    assert by_id(db) == {0: doc(0)}
    check_buckets(db)


# --- MongoClient.bulk_write: the bulkWrite command ---------------------------------------------

def test_client_bulk_write_across_namespaces_with_verbose_results(client, db) -> None:
    ns, plain = f"{db.name}.m", f"{db.name}.plain"
    res = client.bulk_write([
        InsertOne(doc(0), namespace=ns),
        InsertOne(doc(1), namespace=ns),
        UpdateOne({"_id": 1}, {"$set": {"w": 1}}, namespace=ns),   # sees the insert before it
        InsertOne({"_id": "p"}, namespace=plain),
        ReplaceOne({"_id": 0}, {"t": at(50), "k": 5}, namespace=ns),
        UpdateMany({"k": {"$in": [1, 5]}}, {"$inc": {"n": 1}}, namespace=ns),
        UpdateOne({"k": 7}, {"$set": {"t": at(70)}}, upsert=True, namespace=ns),
        DeleteOne({"_id": 1}, namespace=ns),
        DeleteMany({"k": 99}, namespace=ns),
    ], verbose_results=True)
    assert (res.inserted_count, res.matched_count, res.modified_count, res.upserted_count,
            res.deleted_count) == (3, 4, 4, 1, 1)
    assert sorted(res.insert_results) == [0, 1, 3]
    updates = {i: (r.matched_count, r.modified_count) for i, r in res.update_results.items()}
    assert updates == {2: (1, 1), 4: (1, 1), 5: (2, 2), 6: (1, 0)}  # an upsert: n is 1
    upserted = res.update_results[6].upserted_id
    assert upserted is not None
    assert {i: r.deleted_count for i, r in res.delete_results.items()} == {7: 1, 8: 0}
    assert by_id(db) == {0: {"_id": 0, "t": at(50), "k": 5, "n": 1},
                         upserted: {"_id": upserted, "k": 7, "t": at(70)}}
    assert list(db.plain.find()) == [{"_id": "p"}]
    check_buckets(db)


def test_client_bulk_write_unordered_errors(client, db) -> None:
    ns = f"{db.name}.m"
    db.m.insert_many([doc(i) for i in range(2)])
    with pytest.raises(ClientBulkWriteException) as exc:
        client.bulk_write([
            InsertOne({"_id": 5}, namespace=ns),
            UpdateOne({"_id": 0}, {"$set": {"w": 1}}, sort={"t": 1}, namespace=ns),
            UpdateOne({"_id": 0}, [{"$unset": "t"}], namespace=ns),
            InsertOne(doc(6), namespace=ns),
            DeleteOne({"_id": 1}, namespace=ns),
            DeleteMany({}, hint="no_such_index", namespace=ns),
        ], ordered=False, verbose_results=True)
    errors = {e["idx"]: e["code"] for e in exc.value.write_errors}
    assert errors == {0: BAD_VALUE, 1: INVALID_OPTIONS, 2: BAD_VALUE, 5: BAD_VALUE}
    partial = exc.value.partial_result
    assert (partial.inserted_count, partial.deleted_count) == (1, 1)
    assert by_id(db) == {0: doc(0), 6: doc(6)}
    check_buckets(db)


def test_client_bulk_write_ordered_stops_and_journals(client, db) -> None:
    ns = f"{db.name}.m"
    with pytest.raises(ClientBulkWriteException) as exc:
        client.bulk_write([InsertOne(doc(0), namespace=ns), InsertOne(doc(1), namespace=ns),
                           InsertOne({"_id": 2, "k": 0}, namespace=ns),
                           InsertOne(doc(3), namespace=ns)],
                          write_concern=WriteConcern(j=True))
    assert [(e["idx"], e["code"]) for e in exc.value.write_errors] == [(2, BAD_VALUE)]
    assert exc.value.partial_result.inserted_count == 2
    assert by_id(db) == {0: doc(0), 1: doc(1)}
    # j: true wrote the staged measurements before the reply
    assert sum(b["control"]["count"] for b in db["system.buckets.m"].find()) == 2
    check_buckets(db)
