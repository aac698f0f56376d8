"""Stored documents nest at most 180 levels (mongod's limit for user storage at the default
maxBSONDepth): deeper inserts and updates are refused with Overflow (15), nothing stored."""

from __future__ import annotations

from typing import Any

import pymongo
import pytest
from pymongo.errors import BulkWriteError, WriteError


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
    for k, levels in enumerate((181, 500)):
        with pytest.raises(BulkWriteError) as exc:
            coll.insert_many([{"_id": 10 + k}, {"_id": 20 + k, **_nested(levels, array=array)}])
        error = exc.value.details["writeErrors"][0]
        assert (error["index"], error["code"]) == (1, 15), error
        assert "180 levels of nesting" in error["errmsg"]
    assert sorted(d["_id"] for d in coll.find()) == [1, 10, 11]


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
