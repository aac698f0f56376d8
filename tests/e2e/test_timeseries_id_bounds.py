"""Time predicates bound bucket `_id`s, as MongoDB does, so a time range reads only its
buckets through the `_id_` index; not when the collection may hold extended-range dates
(their bucket ids do not order by time) or after a write that bypassed the catalog.
Through pymongo, results must equal an ordinary collection's holding the same documents."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import bson
import pymongo
import pytest

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
H = dt.timedelta(hours=1)

FILTERS: list[dict[str, Any]] = [
    {"t": {"$gte": T0 + 2 * H, "$lt": T0 + 3 * H}},
    {"t": {"$gt": T0 + 2.5 * H}},
    {"t": {"$lte": T0 + H + dt.timedelta(milliseconds=500)}},
    {"t": T0 + 4 * H},
    {"t": {"$in": [T0 + H, T0 + 5 * H]}},
    {"m": "h1", "t": {"$gte": T0 + 4 * H, "$lte": T0 + 5 * H}},
    {"$or": [{"t": {"$lt": T0 + H}}, {"t": {"$gt": T0 + 5 * H}}]},
    {"t": {"$lt": dt.datetime(1960, 1, 1)}},
]


def _docs(n: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [{"_id": i, "t": T0 + dt.timedelta(seconds=rnd.randint(0, 6 * 3600),
                                              milliseconds=rnd.choice([0, 500])),
             "m": f"h{i % 3}", "v": rnd.randint(0, 100)} for i in range(n)]


@pytest.fixture(scope="module")
def db(uri: str):
    client: pymongo.MongoClient = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10_000)
    name = "ts_id_bounds"
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)
    client.close()


def _load(db: Any, name: str, docs: list[dict[str, Any]]) -> None:
    db.create_collection(name, timeseries={"timeField": "t", "metaField": "m"})
    db[name].insert_many(docs[: len(docs) // 2])
    db[name].insert_many(docs[len(docs) // 2:])
    db[f"{name}_plain"].insert_many(docs)


def _explain(db: Any, name: str, flt: dict[str, Any]) -> dict[str, Any]:
    ex = db.command("explain", {"aggregate": name, "pipeline": [{"$match": flt}],
                                "cursor": {}})
    return ex["stages"][0]["$cursor"]["queryPlanner"]


def _has_id_bounds(query: Any) -> bool:
    if isinstance(query, dict):
        return "_id" in query or any(_has_id_bounds(v) for v in query.values())
    if isinstance(query, list):
        return any(_has_id_bounds(v) for v in query)
    return False


def _index_scanned(stage: dict[str, Any]) -> str | None:
    while stage.get("stage") != "IXSCAN":
        if "inputStage" not in stage:
            return None
        stage = stage["inputStage"]
    return stage["indexName"]


def _same_results(db: Any, name: str) -> None:
    for flt in FILTERS:
        got = sorted(bson.encode(d) for d in db[name].find(flt, {"_id": 1, "v": 1}))
        want = sorted(bson.encode(d) for d in db[f"{name}_plain"].find(flt, {"_id": 1, "v": 1}))
        assert got == want, flt
        assert db[name].count_documents(flt) == len(want)


def test_a_time_range_reads_its_buckets_by_id(db: Any) -> None:
    _load(db, "ts", _docs(3000, 1))
    _same_results(db, "ts")
    plan = _explain(db, "ts", FILTERS[0])
    assert _has_id_bounds(plan["parsedQuery"])
    assert _index_scanned(plan["winningPlan"]) == "_id_"
    assert not _has_id_bounds(_explain(db, "ts", {"m": "h1"})["parsedQuery"])


# 1965 sets the top bit of its bucket id (MongoDB's heuristic sees it); 2300 wraps to an id
# of 2027, so only the flag set when its bucket was inserted turns the bounds off
@pytest.mark.parametrize("when", [dt.datetime(1965, 3, 1), dt.datetime(2300, 1, 1)])
def test_extended_range_dates_turn_the_bounds_off(db: Any, when: dt.datetime) -> None:
    name = f"ts_ext_{when.year}"
    _load(db, name, [*_docs(600, 2), {"_id": 10_000, "t": when, "m": "h0", "v": 7}])
    assert not _has_id_bounds(_explain(db, name, FILTERS[0])["parsedQuery"])
    _same_results(db, name)
    assert db[name].count_documents({"t": {"$gt": dt.datetime(2100, 1, 1)}}) == \
        (1 if when.year == 2300 else 0)


def _copy_under_foreign_id(db: Any, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A copy of one bucket under an `_id` that does not carry its time (bounds on `_id`
    would miss it), and a filter that all its measurements match."""
    bucket = db[f"system.buckets.{name}"].find_one(sort=[("_id", -1)])
    flt = {"t": {"$gte": bucket["control"]["min"]["t"], "$lte": bucket["control"]["max"]["t"]}}
    assert _has_id_bounds(_explain(db, name, flt)["parsedQuery"])
    bucket["_id"] = bson.ObjectId(b"\x00" * 12)
    return bucket, flt


def _direct_insert(db: Any, name: str, bucket: dict[str, Any], how: str) -> None:
    coll = db[f"system.buckets.{name}"]
    if how == "insert":
        coll.insert_one(bucket, bypass_document_validation=True)
    elif how == "findAndModify":
        coll.find_one_and_replace({"_id": bucket["_id"]}, bucket, upsert=True,
                                  bypassDocumentValidation=True)
    else:
        db.client.bulk_write([pymongo.InsertOne(bucket, namespace=coll.full_name)],
                             bypass_document_validation=True)


@pytest.mark.parametrize("how", ["insert", "findAndModify", "bulkWrite"])
def test_a_direct_bucket_write_turns_the_bounds_off(db: Any, how: str) -> None:
    name = f"ts_direct_{how}"
    _load(db, name, _docs(600, 3))
    bucket, flt = _copy_under_foreign_id(db, name)
    _direct_insert(db, name, bucket, how)
    assert not _has_id_bounds(_explain(db, name, flt)["parsedQuery"])
    assert db[name].count_documents(flt) == \
        db[f"{name}_plain"].count_documents(flt) + bucket["control"]["count"]
