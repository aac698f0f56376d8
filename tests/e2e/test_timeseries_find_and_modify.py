"""findAndModify on a time-series collection through pymongo: update (operators, pipeline),
replace, remove, upsert, fields, new, filters on any field; and MongoDB 8.0's refusals
(a sort: InvalidOptions; a measurement left without a valid time: BadValue), which write
nothing.

Expectations follow jstests/core/timeseries/query/timeseries_find_and_modify_{update,
remove}.js. After each write the stored measurements are read back through the view and
the buckets collection must validate, with every bucket's count matching its time column.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pymongo
import pytest
from pymongo import ReturnDocument
from pymongo.errors import OperationFailure

T0 = dt.datetime(2024, 6, 1, 8, 0)
INVALID_OPTIONS = 72
BAD_VALUE = 2


@pytest.fixture
def db(client: pymongo.MongoClient, request: pytest.FixtureRequest) -> Any:
    name = "tsfam_" + request.node.name[:40]
    client.drop_database(name)
    d = client[name]
    d.create_collection("m", timeseries={"timeField": "t", "metaField": "k"})
    # two series (k "a" and "b"), v = _id
    d.m.insert_many([{"_id": i, "t": T0 + dt.timedelta(minutes=i), "k": "ab"[i % 2], "v": i}
                     for i in range(6)])
    yield d
    client.drop_database(name)


def stored(db: Any) -> list[dict[str, Any]]:
    """The measurements as read back through the view, by _id (ObjectIds last)."""
    docs = list(db.m.find())
    return sorted(docs, key=lambda d: (not isinstance(d["_id"], int), str(d["_id"])))


def check_buckets(db: Any) -> None:
    """The buckets collection validates and its counts add up to what the view reads."""
    assert db.command("validate", "system.buckets.m")["valid"] is True
    buckets = list(db["system.buckets.m"].find())
    assert sum(b["control"]["count"] for b in buckets) == db.m.count_documents({})


def measurement(i: int, **changes: Any) -> dict[str, Any]:
    doc = {"_id": i, "t": T0 + dt.timedelta(minutes=i), "k": "ab"[i % 2], "v": i}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def untouched(*except_ids: int) -> list[dict[str, Any]]:
    return [measurement(i) for i in range(6) if i not in except_ids]


def test_update_with_operators_returns_the_measurement_before(db) -> None:
    before = db.m.find_one_and_update({"v": {"$gt": 2}, "k": "b"}, {"$inc": {"v": 100}})
    assert before in (measurement(3), measurement(5))
    changed = before["_id"]
    assert stored(db) == sorted([*untouched(changed), measurement(changed, v=changed + 100)],
                                key=lambda d: str(d["_id"]))
    check_buckets(db)


def test_update_returns_the_new_measurement_projected(db) -> None:
    after = db.m.find_one_and_update({"v": 4}, {"$set": {"w": "x"}, "$unset": {"v": ""}},
                                     projection={"_id": 0, "w": 1, "k": 1},
                                     return_document=ReturnDocument.AFTER)
    assert after == {"k": "a", "w": "x"}
    assert stored(db) == [*untouched(4)[:4], measurement(4, v=None, w="x"), measurement(5)]
    check_buckets(db)


def test_metafield_update_moves_the_measurement_to_another_series(db) -> None:
    reply = db.command({"findAndModify": "m", "query": {"_id": 2},
                        "update": {"$set": {"k": "c"}}, "new": True})
    assert reply["lastErrorObject"] == {"n": 1, "updatedExisting": True}
    assert reply["value"] == measurement(2, k="c")
    assert db.m.count_documents({"k": "c"}) == 1
    assert sorted(b["meta"] for b in db["system.buckets.m"].find()) == ["a", "b", "c"]
    assert stored(db) == [*untouched(2, 3, 4, 5), measurement(2, k="c"), *untouched(0, 1, 2)]
    check_buckets(db)


def test_pipeline_update(db) -> None:
    after = db.m.find_one_and_update(
        {"v": 5}, [{"$set": {"double": {"$multiply": ["$v", 2]}, "t": {"$dateAdd": {
            "startDate": "$t", "unit": "hour", "amount": 1}}}}],
        return_document=ReturnDocument.AFTER)
    assert after == measurement(5, double=10, t=T0 + dt.timedelta(minutes=5, hours=1))
    assert stored(db) == [*untouched(5), after]
    check_buckets(db)


def test_replace_may_change_the_id(db) -> None:
    before = db.m.find_one_and_replace({"_id": 1}, {"_id": 100, "t": T0, "k": "z", "r": 1})
    assert before == measurement(1)
    after = db.m.find_one_and_replace({"_id": 3}, {"t": T0, "r": 3},
                                      return_document=ReturnDocument.AFTER)
    assert after == {"_id": 3, "t": T0, "r": 3}  # the _id is kept when the replacement has none
    docs = {d["_id"]: d for d in stored(db)}
    assert docs[100] == {"_id": 100, "t": T0, "k": "z", "r": 1}
    assert docs[3] == {"_id": 3, "t": T0, "r": 3}
    assert 1 not in docs and len(docs) == 6
    check_buckets(db)


def test_remove_returns_the_removed_measurement_projected(db) -> None:
    removed = db.m.find_one_and_delete({"v": {"$gte": 4}, "k": "a"},
                                       projection={"v": 1, "_id": 0})
    assert removed == {"v": 4}
    assert stored(db) == untouched(4)
    reply = db.command({"findAndModify": "m", "query": {"v": 99}, "remove": True})
    assert reply["lastErrorObject"] == {"n": 0} and reply["value"] is None
    # the last measurement of a bucket: the bucket goes
    for i in (1, 3, 5):
        assert db.m.find_one_and_delete({"_id": i}) == measurement(i)
    assert db["system.buckets.m"].count_documents({"meta": "b"}) == 0
    assert stored(db) == [measurement(0), measurement(2)]
    check_buckets(db)


def test_upsert(db) -> None:
    reply = db.command({"findAndModify": "m", "query": {"k": "new", "v": 50},
                        "update": {"$set": {"t": T0}}, "upsert": True})
    assert reply["value"] is None
    last = reply["lastErrorObject"]
    assert last["n"] == 1 and last["updatedExisting"] is False
    upserted = last["upserted"]
    assert db.m.find_one({"k": "new"}) == {"_id": upserted, "k": "new", "v": 50, "t": T0}
    after = db.m.find_one_and_replace({"_id": 77}, {"t": T0, "k": "r"}, upsert=True,
                                      return_document=ReturnDocument.AFTER)
    assert after == {"_id": 77, "t": T0, "k": "r"}
    # an upsert that matches updates instead
    reply = db.command({"findAndModify": "m", "query": {"_id": 77},
                        "update": {"$set": {"x": 1}}, "upsert": True, "new": True})
    assert reply["lastErrorObject"] == {"n": 1, "updatedExisting": True}
    assert reply["value"] == {"_id": 77, "t": T0, "k": "r", "x": 1}
    assert len(stored(db)) == 8
    check_buckets(db)


def test_no_match_returns_null(db) -> None:
    reply = db.command({"findAndModify": "m", "query": {"k": "none"},
                        "update": {"$set": {"x": 1}}})
    assert reply["lastErrorObject"] == {"n": 0, "updatedExisting": False}
    assert reply["value"] is None
    assert stored(db) == untouched()


def test_noop_update_reports_the_match(db) -> None:
    reply = db.command({"findAndModify": "m", "query": {"_id": 0},
                        "update": {"$unset": {"absent": ""}}, "new": True})
    assert reply["lastErrorObject"] == {"n": 1, "updatedExisting": True}
    assert reply["value"] == measurement(0)
    assert stored(db) == untouched()


@pytest.mark.parametrize("cmd", [
    {"query": {"v": {"$gt": 0}}, "remove": True, "sort": {"v": 1}},
    {"query": {}, "update": {"$set": {"x": 1}}, "sort": {"_id": -1}},
    {"query": {"k": "q"}, "update": {"$set": {"t": T0}}, "upsert": True, "sort": {"t": 1}},
], ids=["remove", "update", "upsert"])
def test_a_sort_is_refused(db, cmd) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command({"findAndModify": "m", **cmd})
    assert exc.value.code == INVALID_OPTIONS
    assert "sort on a time-series collection" in str(exc.value)
    with pytest.raises(OperationFailure) as exc:
        db.command({"explain": {"findAndModify": "m", **cmd}, "verbosity": "executionStats"})
    assert exc.value.code == INVALID_OPTIONS
    assert stored(db) == untouched()


def test_an_empty_sort_is_no_sort(db) -> None:
    reply = db.command({"findAndModify": "m", "query": {"_id": 2}, "remove": True,
                        "sort": {}})
    assert reply["value"] == measurement(2)
    assert stored(db) == untouched(2)


@pytest.mark.parametrize("cmd", [
    {"query": {"_id": 1}, "update": {"$unset": {"t": ""}}},
    {"query": {"_id": 1}, "update": [{"$set": {"t": "noon"}}]},
    {"query": {"_id": 1}, "update": {"k": "b", "v": 1}},                 # replacement, no t
    {"query": {"k": "zz"}, "update": {"$set": {"v": 1}}, "upsert": True},  # upsert, no t
    {"query": {"k": "zz"}, "update": {"t": "x"}, "upsert": True},
], ids=["unset", "pipeline-string", "replacement", "upsert", "upsert-string"])
def test_a_measurement_without_a_valid_time_is_refused(db, cmd) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command({"findAndModify": "m", **cmd})
    assert exc.value.code == BAD_VALUE
    assert "'t' must be present and contain a valid BSON UTC datetime value" in str(exc.value)
    assert stored(db) == untouched()
    check_buckets(db)


def test_parse_errors_come_before_time_series(db) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command({"findAndModify": "m", "query": {}, "remove": True, "new": True})
    assert exc.value.code == 9  # FailedToParse
    with pytest.raises(OperationFailure) as exc:
        db.command({"findAndModify": "m", "query": {}, "remove": True, "upsert": True})
    assert exc.value.code == 9
    with pytest.raises(OperationFailure) as exc:
        db.command({"findAndModify": "m", "query": {}, "remove": True,
                    "arrayFilters": [{"x": 1}]})
    assert exc.value.code == 9 and "arrayFilters" in str(exc.value)
    assert stored(db) == untouched()


def test_let_and_expr_filters(db) -> None:
    reply = db.command({"findAndModify": "m",
                        "query": {"$expr": {"$eq": ["$v", "$$target"]}},
                        "update": [{"$set": {"seen": "$$target"}}], "new": True,
                        "let": {"target": 3}})
    assert reply["value"] == measurement(3, seen=3)
    assert stored(db) == [measurement(i, seen=3 if i == 3 else None) for i in range(6)]
    check_buckets(db)


def test_hints_name_the_view_indexes(db) -> None:
    db.m.create_index([("k", 1), ("t", 1)])
    for hint in ({"k": 1, "t": 1}, "k_1_t_1", {"$natural": -1}):
        reply = db.command({"findAndModify": "m", "query": {"v": 1}, "hint": hint,
                            "update": {"$inc": {"n": 1}}, "new": True})
        assert reply["value"]["n"] >= 1
    assert db.m.find_one({"_id": 1}) == measurement(1, n=3)
    for hint in ("t_1", {"v": 1}, {"k": "text"}):
        with pytest.raises(OperationFailure) as exc:
            db.command({"findAndModify": "m", "query": {"v": 2}, "remove": True, "hint": hint})
        assert exc.value.code == BAD_VALUE
        assert "hint provided does not correspond to an existing index" in str(exc.value)
    assert stored(db) == [measurement(0), measurement(1, n=3), *untouched(0, 1)]
    check_buckets(db)


def test_positional_update_of_an_array_measurement(db) -> None:
    db.m.insert_one({"_id": 10, "t": T0, "k": "a", "f": [1, 5, 9]})
    after = db.m.find_one_and_update({"f": {"$gt": 4}}, {"$set": {"f.$": 50}},
                                     return_document=ReturnDocument.AFTER)
    assert after == {"_id": 10, "t": T0, "k": "a", "f": [1, 50, 9]}
    res = db.m.update_many({"f": {"$gte": 9}}, {"$inc": {"f.$": 1}})
    assert (res.matched_count, res.modified_count) == (1, 1)
    assert db.m.find_one({"_id": 10})["f"] == [1, 51, 9]  # the first element matched: 50
    with pytest.raises(OperationFailure) as exc:  # no array matched by the filter
        db.command({"findAndModify": "m", "query": {"_id": 10},
                    "update": {"$set": {"f.$": 0}}})
    assert exc.value.code == BAD_VALUE
    assert "positional operator did not find the match" in str(exc.value)
    assert db.m.find_one({"_id": 10})["f"] == [1, 51, 9]
    assert [d for d in stored(db) if d["_id"] != 10] == untouched()
    check_buckets(db)
