"""Dotted and `$`-prefixed field names stored and returned as MongoDB 5.0+ does, through
real clients.

mongod's rules (the manual's "Field Names with Periods and Dollar Signs",
jstests/core/field_name_validation.js, storage_validation.cpp): an insert (and an
upsert's new document) may store `$`-prefixed and dotted names at any level, but not
`$` fields inside `_id` (52); a replacement of an existing document may not hold
top-level `$` fields (52; a malformed DBRef is 55), while a replacement whose first
field is `$`-prefixed is an operator update (9); an update operator may not write a
top-level `$` field of an existing document (52), and its paths always split on dots,
so it cannot address a dotted name; pipeline updates may write anything, and
`$getField` / `$setField` / `$unsetField` / `$literal` read and write such fields.
"""

from __future__ import annotations

from typing import Any

import bson
import pymongo
import pytest
from bson import SON
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo.errors import BulkWriteError, OperationFailure

from .mongosh_util import run_mongosh

DOC = {"_id": 1, "$price": 5, "a.b": 1, "n": {"$x": 2, "c.d": 3}}


@pytest.fixture
def coll(client: pymongo.MongoClient, request: pytest.FixtureRequest) -> Any:
    c = client.field_names_e2e[request.node.originalname[:60]]
    c.drop()
    yield c
    c.drop()


def _update(coll: Any, q: dict[str, Any], u: Any, **kw: Any) -> dict[str, Any]:
    """One update statement, its reply as the server gave it."""
    return dict(coll.database.command("update", coll.name,
                                      updates=[{"q": q, "u": u, **kw}]))


def _write_error(reply: dict[str, Any]) -> tuple[int, str]:
    err = reply["writeErrors"][0]
    return err["code"], err["errmsg"]


def test_insert_stores_dotted_and_dollar_names(coll: Any) -> None:
    coll.insert_one(DOC)
    coll.insert_many([{"_id": 2, "$ref": "x", "$id": 1, "$db": "d"}, {"_id": 3, "$inc": True}])
    assert coll.find_one({"_id": 1}) == DOC
    assert list(coll.find_one({"_id": 1})) == ["_id", "$price", "a.b", "n"]
    assert coll.find_one({"_id": 3}) == {"_id": 3, "$inc": True}
    # a dotted query path is a path, never the dotted name; a nested $ name is a path step
    assert coll.count_documents({"a.b": 1}) == 0
    assert coll.count_documents({"n.$x": 2}) == 1
    assert coll.count_documents({"$expr": {"$eq": [{"$getField": "a.b"}, 1]}}) == 1


def _stored(coll: Any, _id: Any) -> bytes:
    """The document's bytes as the server returns them (no client-side DBRef decoding)."""
    raw = coll.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    found = raw.find_one({"_id": _id})
    assert found is not None
    return bytes(found.raw)


def test_dbref_shaped_documents_keep_their_fields_in_order(coll: Any) -> None:
    """`$ref`/`$id` are ordinary `$` names to MongoDB: such an embedded document keeps
    its field order, and it can be a replacement or an operand like any document."""
    shaped = SON([("x", 1), ("$ref", "c"), ("$id", 2), ("y", 3)])
    coll.insert_one({"_id": 1, "a": shaped, "l": [shaped]})
    assert _stored(coll, 1) == bson.encode(SON([("_id", 1), ("a", shaped), ("l", [shaped])]))
    assert coll.count_documents({"a": shaped}) == 1
    assert coll.count_documents({"a": SON([("$ref", "c"), ("$id", 2), ("x", 1), ("y", 3)])}) == 0
    _update(coll, {"_id": 1}, {"$set": {"b": shaped}})
    assert _stored(coll, 1) == bson.encode(SON([("_id", 1), ("a", shaped), ("l", [shaped]),
                                                ("b", shaped)]))


def test_insert_refuses_dollar_fields_in_id(coll: Any) -> None:
    for bad in ({"_id": {"$b": 1}}, {"_id": {"a": 1, "$b": 1}}):
        with pytest.raises(BulkWriteError) as exc:
            coll.insert_many([bad])
        assert exc.value.details["writeErrors"][0]["code"] == 52
    coll.insert_one({"_id": {"a.b": 1}, "x": {"_id": {"$b": 1}}})  # dots, and a nested _id
    assert list(coll.find()) == [{"_id": {"a.b": 1}, "x": {"_id": {"$b": 1}}}]


def test_replacements(coll: Any) -> None:
    coll.insert_one(DOC)
    code, msg = _write_error(_update(coll, {"_id": 1}, {"$c": 1}))
    assert code == 9 and "Unknown modifier: $c" in msg
    code, msg = _write_error(_update(coll, {"_id": 1}, SON([("a", 1), ("$c", 1)])))
    assert code == 52
    assert msg == ("The dollar ($) prefixed field '$c' in '$c' is not allowed in the context of "
                   "an update's replacement document. Consider using an aggregation pipeline "
                   "with $replaceWith.")
    code, _msg = _write_error(_update(coll, {"_id": 1}, SON([("a", 1), ("$ref", 1)])))
    assert code == 55  # not a DBRef: $ref must be a string followed by $id
    assert coll.find_one({"_id": 1}) == DOC  # nothing was written
    reply = _update(coll, {"_id": 1}, {"x": {"$c": 1, "y": {"$d": 4}}, "p.q": 1})
    assert reply["nModified"] == 1
    assert coll.find_one({"_id": 1}) == {"_id": 1, "x": {"$c": 1, "y": {"$d": 4}}, "p.q": 1}
    reply = _update(coll, {"_id": 1}, SON([("a", 1), ("$ref", "c"), ("$id", 7)]))
    assert reply["nModified"] == 1  # a well-formed DBRef may be written
    assert _stored(coll, 1) == bson.encode(SON([("_id", 1), ("a", 1), ("$ref", "c"),
                                                ("$id", 7)]))
    # a replacement that upserts is an insert: top-level $ fields are stored
    reply = _update(coll, {"_id": 2}, SON([("a", 1), ("$c", 1)]), upsert=True)
    assert reply["upserted"][0]["_id"] == 2
    assert coll.find_one({"_id": 2}) == {"_id": 2, "a": 1, "$c": 1}
    code, _msg = _write_error(_update(coll, {"_id": 3}, {"_id": {"$bad": 1}}, upsert=True))
    assert code == 52
    assert coll.count_documents({}) == 2
    with pytest.raises(OperationFailure) as exc:
        coll.database.command("findAndModify", coll.name, query={"_id": 2},
                              update=SON([("_id", 2), ("$invalid", 1)]))
    assert exc.value.code == 52
    assert coll.find_one({"_id": 2}) == {"_id": 2, "a": 1, "$c": 1}


def test_update_operators(coll: Any) -> None:
    coll.insert_one(DOC)
    for u in ({"$set": {"$price": 6}}, {"$inc": {"$price": 1}}, {"$set": {"$new": 1}},
              {"$set": {"$new.x": 1}}):
        code, msg = _write_error(_update(coll, {"_id": 1}, u))
        assert code == 52, u
        assert "prefixed field '$" in msg
    assert coll.find_one({"_id": 1}) == DOC
    # paths split on dots: `a.b` is the path a -> b, never the dotted name
    _update(coll, {"_id": 1}, {"$set": {"a.b": 2, "n.$x": 9, "other": 1}})
    assert coll.find_one({"_id": 1}) == {**DOC, "a": {"b": 2}, "n": {"$x": 9, "c.d": 3},
                                         "other": 1}
    _update(coll, {"_id": 1}, {"$unset": {"$price": 1}})
    assert "$price" not in coll.find_one({"_id": 1})
    # an upsert's new document is an insert; the same update on a match is refused
    reply = _update(coll, {"_id": 5}, {"$set": {"$hotel": 1}}, upsert=True)
    assert reply["upserted"][0]["_id"] == 5
    assert coll.find_one({"_id": 5}) == {"_id": 5, "$hotel": 1}
    code, _msg = _write_error(_update(coll, {"_id": 5}, {"$set": {"$hotel": 2}}, upsert=True))
    assert code == 52
    assert coll.find_one({"_id": 5}) == {"_id": 5, "$hotel": 1}


def test_pipelines_read_and_write_such_fields(coll: Any) -> None:
    coll.insert_one(DOC)
    got = list(coll.aggregate([{"$project": {
        "price": {"$getField": {"$literal": "$price"}},
        "ab": {"$getField": "a.b"},
        "cd": {"$getField": {"field": "c.d", "input": "$n"}},
        "nx": {"$getField": {"field": {"$literal": "$x"}, "input": "$n"}}}}]))
    assert got == [{"_id": 1, "price": 5, "ab": 1, "cd": 3, "nx": 2}]
    # pipeline updates may write top-level $ and dotted names
    _update(coll, {"_id": 1}, [{"$replaceWith": {"$setField": {
        "field": {"$literal": "$price"}, "input": "$$ROOT", "value": 7}}}])
    _update(coll, {"_id": 1}, [{"$replaceWith": {"$setField": {
        "field": "a.b", "input": "$$ROOT", "value": {"$add": [{"$getField": "a.b"}, 1]}}}}])
    _update(coll, {"_id": 1}, [{"$replaceWith": {"$unsetField": {
        "field": "c.d", "input": "$$ROOT"}}}])
    assert coll.find_one({"_id": 1}) == {"_id": 1, "$price": 7, "a.b": 2,
                                         "n": {"$x": 2, "c.d": 3}}
    _update(coll, {"_id": 2}, [{"$replaceWith": {"$literal": {"$a": 1, "x.y": 2}}}], upsert=True)
    assert coll.find_one({"_id": 2}) == {"_id": 2, "$a": 1, "x.y": 2}
    # without $literal a $-prefixed or dotted name is no field name in an expression
    with pytest.raises(OperationFailure) as exc:
        coll.database.command("aggregate", coll.name, pipeline=[
            {"$project": {"$new": 1}}], cursor={})
    assert exc.value.code == 16410


@pytest.mark.mongosh
def test_mongosh_dollar_and_dotted_fields(uri: str, client: pymongo.MongoClient) -> None:
    script = r"""
const c = db.getSiblingDB('field_names_shell').inv; c.drop();
const out = {};
c.insertOne({_id: 1, part: 'AB305', '$bin': 200, 'size.cm': 3, pricing: {'$discount': 60}});
out.doc = c.findOne({_id: 1});
out.bin = c.aggregate([{$project: {_id: 0, bin: {$getField: {$literal: '$bin'}},
                                   cm: {$getField: 'size.cm'}}}]).toArray();
out.byNested = c.countDocuments({'pricing.$discount': 60});
c.updateOne({_id: 1}, [{$replaceWith: {$setField: {field: {$literal: '$bin'},
                                                    input: '$$ROOT', value: 150}}}]);
out.after = c.findOne({_id: 1});
try { c.updateOne({_id: 1}, {$set: {'$bin': 1}}); out.set = 'ok'; } catch (e) { out.set = e.code; }
print(EJSON.stringify(out, {relaxed: true}));
"""
    try:
        result, _output = run_mongosh(uri, script)
        assert result["doc"] == {"_id": 1, "part": "AB305", "$bin": 200, "size.cm": 3,
                                 "pricing": {"$discount": 60}}
        assert result["bin"] == [{"bin": 200, "cm": 3}]
        assert result["byNested"] == 1
        assert result["after"]["$bin"] == 150
        assert result["set"] == 52
        assert client.field_names_shell.inv.find_one({"_id": 1})["$bin"] == 150
    finally:
        client.drop_database("field_names_shell")
