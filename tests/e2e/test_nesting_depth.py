"""Nesting limits, both with mongod's Overflow (15). Every document a client sends may nest
objects at most maxBSONDepth (200) levels below its top, or the whole command is refused;
stored documents nest at most 180 levels (mongod's limit for user storage at the default
maxBSONDepth): deeper inserts and updates are refused per document, nothing stored."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import bson
import pymongo
import pytest
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from .wire_client import RawConnection, raw_connection


def _nested(levels: int, *, array: bool = False) -> dict[str, Any]:
    """A document `levels` deep, itself included."""
    inner: Any = 1
    for _ in range(levels - 1):
        inner = [inner] if array else {"a": inner}
    return {"a": inner}


@pytest.fixture
def coll(client: pymongo.MongoClient):
    c = client.depth_db.docs
    c.drop()
    yield c
    c.drop()


@pytest.mark.parametrize("array", [False, True])
def test_inserts_nest_at_most_180_levels(coll, array: bool) -> None:
    coll.insert_one({"_id": 1, **_nested(180, array=array)})
    assert coll.count_documents({}) == 1
    with pytest.raises(BulkWriteError) as exc:
        coll.insert_many([{"_id": 10}, {"_id": 20, **_nested(181, array=array)}])
    error = exc.value.details["writeErrors"][0]
    assert (error["index"], error["code"]) == (1, 15), error
    assert "180 levels of nesting" in error["errmsg"]
    # past maxBSONDepth the message itself is refused: nothing of the batch is written
    with pytest.raises(OperationFailure) as refused:
        coll.insert_many([{"_id": 11}, {"_id": 21, **_nested(500, array=array)}])
    assert refused.value.code == 15
    assert refused.value.details["errmsg"] == "BSONObj exceeded maximum nested object depth: 200"
    assert sorted(d["_id"] for d in coll.find()) == [1, 10]


def test_empty_objects_do_not_count(coll) -> None:
    doc = _nested(179)
    inner = doc
    while isinstance(inner.get("a"), dict):
        inner = inner["a"]
    inner["a"] = {"b": {}, "c": []}  # level 180 holds only empty values
    coll.insert_one(doc)
    assert coll.count_documents({}) == 1


def test_an_update_cannot_nest_deeper(coll) -> None:
    coll.insert_one({"_id": 1, "x": 1})
    with pytest.raises(WriteError) as exc:
        coll.update_one({"_id": 1}, {"$set": {"deep": _nested(180)}})
    assert exc.value.code == 15
    assert coll.find_one({"_id": 1}) == {"_id": 1, "x": 1}


def _raw_nested(levels: int) -> bytes:
    """BSON of {a: {a: ... {x: 1}}}, `levels` objects deep counting itself, built
    level by level (far deeper than an encoder's recursion allows)."""
    size = len(inner := bson.encode({"x": 1}))
    sizes = []
    for _ in range(levels - 1):
        size += 8  # int32 size, type byte, "a\0", trailing NUL
        sizes.append(size)
    head = b"".join(struct.pack("<i", n) + b"\x03a\x00" for n in reversed(sizes))
    return head + inner + b"\x00" * (levels - 1)


def _find_with_filter(raw: RawConnection, filter_bson: bytes) -> dict[str, Any]:
    """The reply to find with `filter_bson` as its filter, sent as an OP_MSG of its own."""
    head = bson.encode({"find": "docs", "$db": "depth_db"})
    body = head[:-1] + b"\x03filter\x00" + filter_bson + b"\x00"
    body = struct.pack("<i", len(body)) + body[4:]
    sections = struct.pack("<I", 0) + b"\x00" + body
    raw.send(struct.pack("<iiii", 16 + len(sections), 1, 0, 2013) + sections)
    reply = raw.recv_reply_doc()
    assert reply is not None, "the server closed the connection"
    return reply


@pytest.mark.parametrize("levels, refused", [(200, False), (201, True), (5_000, True),
                                             (100_000, True)])
def test_a_command_nests_at_most_max_bson_depth(server, coll, levels: int,
                                                refused: bool) -> None:
    # the command is level 1 and its filter level 2: a filter `levels` deep puts its
    # innermost object `levels` below the command's top
    coll.insert_one({"_id": 1})
    raw = raw_connection(server)
    try:
        reply = _find_with_filter(raw, _raw_nested(levels))
        if not refused:
            assert reply["ok"] == 1.0 and reply["cursor"]["firstBatch"] == [], reply
            return
        assert (reply["ok"], reply["code"], reply["errmsg"]) == (
            0.0, 15, "BSONObj exceeded maximum nested object depth: 200")
        # the connection stays usable
        assert _find_with_filter(raw, bson.encode({"_id": 1}))["cursor"]["firstBatch"] == [
            {"_id": 1}]
    finally:
        raw.close()


def test_a_time_series_measurement_as_deep_as_allowed_reads_back(client) -> None:
    db = client.depth_db
    db.drop_collection("deep_ts")
    ts = db.create_collection("deep_ts", timeseries={"timeField": "t"})
    now = datetime.datetime(2026, 1, 1)
    deepest = _nested(200)  # as m, its innermost object is 200 levels below the top
    ts.insert_many([{"t": now, "m": deepest}])
    with pytest.raises(OperationFailure) as exc:
        ts.insert_many([{"t": now, "m": 1}, {"t": now, "m": _nested(201)}])
    assert exc.value.code == 15
    got = list(ts.find({}, {"_id": 0, "t": 0}))
    assert got == [{"m": deepest}]
    db.drop_collection("deep_ts")


def _sum_expression(k: int) -> dict[str, Any]:
    """{$add: [{$add: [... {$add: [1, 1]} ...], 1]}, 1]}: k + 2 when evaluated; each
    level of it is an object and an array."""
    expr: dict[str, Any] = {"$add": [1, 1]}
    for _ in range(k):
        expr = {"$add": [expr, 1]}
    return expr


def test_an_expression_as_deep_as_a_command_may_nest_evaluates(coll) -> None:
    # the command (1), pipeline (2), stage (3), $project (4), then two levels per $add:
    # k = 97 puts the innermost array at level 200 + 1, the deepest a command may nest
    coll.insert_one({"_id": 1})
    pipeline = [{"$project": {"_id": 0, "x": _sum_expression(97)}}]
    assert list(coll.aggregate(pipeline)) == [{"x": 99}]
    with pytest.raises(OperationFailure) as exc:
        list(coll.aggregate([{"$project": {"_id": 0, "x": _sum_expression(98)}}]))
    assert exc.value.code == 15


@pytest.mark.parametrize("operator", ["$and", "$or", "$nor", "$elemMatch"])
def test_a_filter_as_deep_as_a_command_may_nest_runs(coll, operator: str) -> None:
    # the command (1), the filter (2), then two levels per step: k = 99 reaches 200 + 1
    coll.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    leaf: dict[str, Any] = {"x": 1}
    inner: dict[str, Any] = leaf
    for _ in range(99):
        inner = {"x": {"$elemMatch": inner}} if operator == "$elemMatch" else \
            {operator: [inner]}
    got = sorted(d["_id"] for d in coll.find(inner))
    expected = {"$and": [1], "$or": [1], "$nor": [2] if 99 % 2 else [1], "$elemMatch": []}
    assert got == expected[operator]
