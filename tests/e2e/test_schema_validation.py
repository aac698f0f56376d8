"""Schema validation through real clients: `validator` with `$jsonSchema` and query
operators on create and collMod, `validationLevel` (strict, moderate, off),
`validationAction` (error, warn: mongod's log line 20294), DocumentValidationFailure (121)
with MongoDB's `errInfo`, `bypassDocumentValidation` on every write command, `$jsonSchema`
in find and aggregate, invalid validators refused with mongod's codes, and the
time-series buckets collection's own validator.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pymongo
import pytest
from bson import ObjectId
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from .mongosh_util import run_mongosh
from .node_driver import run_node

SCHEMA: dict[str, Any] = {
    "bsonType": "object",
    "title": "Student Object Validation",
    "required": ["name", "year"],
    "properties": {
        "name": {"bsonType": "string", "description": "'name' must be a string"},
        "year": {"bsonType": "int", "minimum": 2017, "maximum": 3017},
        "gpa": {"bsonType": ["double"]},
    },
}


@pytest.fixture
def db(client: pymongo.MongoClient, request: pytest.FixtureRequest):
    d = client["schema_validation_" + request.node.originalname[:40]]
    client.drop_database(d.name)
    yield d
    client.drop_database(d.name)


def _students(db: Any, **options: Any) -> Any:
    return db.create_collection("students", validator={"$jsonSchema": SCHEMA}, **options)


def _err_info(exc: pytest.ExceptionInfo[Any]) -> dict[str, Any]:
    details = exc.value.details
    if "writeErrors" in details:
        details = details["writeErrors"][0]
    assert details["code"] == 121, details
    assert details["errmsg"] == "Document failed validation"
    return dict(details["errInfo"])


def test_insert_accepted_and_refused_with_err_info(db) -> None:
    c = _students(db)
    c.insert_one({"_id": 1, "name": "Alice", "year": 2019, "gpa": 3.5})
    with pytest.raises(WriteError) as exc:
        c.insert_one({"_id": 2, "name": 7, "year": 2016})
    assert _err_info(exc) == {
        "failingDocumentId": 2,
        "details": {
            "operatorName": "$jsonSchema",
            "title": "Student Object Validation",
            "schemaRulesNotSatisfied": [{
                "operatorName": "properties",
                "propertiesNotSatisfied": [
                    {"propertyName": "name", "description": "'name' must be a string",
                     "details": [{"operatorName": "bsonType",
                                  "specifiedAs": {"bsonType": "string"},
                                  "reason": "type did not match", "consideredValue": 7,
                                  "consideredType": "int"}]},
                    {"propertyName": "year",
                     "details": [{"operatorName": "minimum", "specifiedAs": {"minimum": 2017},
                                  "reason": "comparison failed", "consideredValue": 2016}]},
                ]}]}}
    with pytest.raises(WriteError) as exc:
        c.insert_one({"_id": 3, "gpa": 3})
    info = _err_info(exc)
    rules = info["details"]["schemaRulesNotSatisfied"]
    assert rules == [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "gpa", "details": [{
                "operatorName": "bsonType", "specifiedAs": {"bsonType": ["double"]},
                "reason": "type did not match", "consideredValue": 3, "consideredType": "int"}]}]},
        {"operatorName": "required", "specifiedAs": {"required": ["name", "year"]},
         "missingProperties": ["name", "year"]}]
    with pytest.raises(BulkWriteError) as bulk:
        c.insert_many([{"_id": 4, "name": "x", "year": 2020}, {"_id": 5}, {"_id": 6}],
                      ordered=False)
    assert [e["index"] for e in bulk.value.details["writeErrors"]] == [1, 2]
    assert sorted(d["_id"] for d in c.find()) == [1, 4]


def test_update_accepted_and_refused(db) -> None:
    c = _students(db)
    c.insert_one({"_id": 1, "name": "Alice", "year": 2019})
    assert c.update_one({"_id": 1}, {"$set": {"year": 2020}}).modified_count == 1
    with pytest.raises(WriteError) as exc:
        c.update_one({"_id": 1}, {"$unset": {"name": ""}})
    assert _err_info(exc)["details"]["schemaRulesNotSatisfied"] == [
        {"operatorName": "required", "specifiedAs": {"required": ["name", "year"]},
         "missingProperties": ["name"]}]
    with pytest.raises(WriteError):
        c.replace_one({"_id": 1}, {"name": "Alice"})
    with pytest.raises(WriteError):  # an upsert's insert is validated too
        c.update_one({"_id": 9}, {"$set": {"year": 1}}, upsert=True)
    assert list(c.find()) == [{"_id": 1, "name": "Alice", "year": 2020}]


def test_query_operator_validator(db) -> None:
    c = db.create_collection("orders", validator={
        "qty": {"$gt": 0}, "$or": [{"status": {"$in": ["A", "B"]}}, {"rush": True}]})
    c.insert_one({"_id": 1, "qty": 2, "status": "A"})
    with pytest.raises(WriteError) as exc:
        c.insert_one({"_id": 2, "qty": [0, -1], "status": "C"})
    assert _err_info(exc) == {"failingDocumentId": 2, "details": {
        "operatorName": "$and",
        "clausesNotSatisfied": [
            {"index": 0, "details": {"operatorName": "$gt", "specifiedAs": {"qty": {"$gt": 0}},
                                     "reason": "comparison failed",
                                     "consideredValues": [0, -1]}},
            {"index": 1, "details": {"operatorName": "$or", "clausesNotSatisfied": [
                {"index": 0, "details": {
                    "operatorName": "$in", "specifiedAs": {"status": {"$in": ["A", "B"]}},
                    "reason": "no matching value found in array", "consideredValue": "C"}},
                {"index": 1, "details": {"operatorName": "$eq", "specifiedAs": {"rush": True},
                                         "reason": "field was missing"}}]}}]}}


def test_validation_level_moderate_and_off(db) -> None:
    c = _students(db, validationLevel="moderate")
    c.insert_one({"_id": "bad", "name": 1, "year": 2020}, bypass_document_validation=True)
    c.insert_one({"_id": "good", "name": "Bob", "year": 2020})
    # a document that already fails may be updated to anything
    assert c.update_one({"_id": "bad"}, {"$set": {"year": 1}}).modified_count == 1
    # one that passes must still pass afterwards, and inserts are always validated
    with pytest.raises(WriteError):
        c.update_one({"_id": "good"}, {"$set": {"year": 1}})
    with pytest.raises(WriteError):
        c.insert_one({"_id": "new"})
    db.command("collMod", "students", validationLevel="off")
    c.insert_one({"_id": "new"})
    db.command("collMod", "students", validationLevel="strict")
    with pytest.raises(WriteError):
        c.update_one({"_id": "bad"}, {"$set": {"year": 2}})


def test_validation_action_warn_logs_and_writes(db) -> None:
    c = _students(db, validationAction="warn")
    c.insert_one({"_id": "warned", "year": 1})
    assert c.find_one({"_id": "warned"}) == {"_id": "warned", "year": 1}
    lines = [json.loads(x) for x in db.client.admin.command("getLog", "global")["log"]]
    warned = [x for x in lines if x.get("id") == 20294]
    assert warned, lines[-5:]
    last = warned[-1]
    assert last["s"] == "W" and last["msg"] == "Document would fail validation"
    assert last["attr"]["namespace"] == f"{db.name}.students"
    assert last["attr"]["errInfo"]["details"]["operatorName"] == "$jsonSchema"


def test_a_closed_schema_without_id_is_warned_about(db) -> None:
    db.create_collection("closed", validator={"$jsonSchema": {
        "required": ["a"], "properties": {"a": {}}, "additionalProperties": False}})
    lines = [json.loads(x) for x in db.client.admin.command("getLog", "global")["log"]]
    assert any(x.get("id") == 3216000 for x in lines)
    with pytest.raises(WriteError):
        db.closed.insert_one({"a": 1})


def test_a_validator_that_fails_to_evaluate(db) -> None:
    c = db.create_collection("div", validator={"$expr": {"$divide": [10, "$d"]}})
    with pytest.raises(WriteError) as exc:
        c.insert_one({"_id": 1, "d": 0})
    details = _err_info(exc)["details"]
    assert details["operatorName"] == "$expr"
    assert details["reason"] == "failed to evaluate aggregation expression"
    assert details["details"]["code"] == 2
    c.insert_one({"_id": 2, "d": 5})
    db.command("collMod", "div", validationAction="warn")
    c.insert_one({"_id": 3, "d": 0})
    assert c.count_documents({}) == 2


def test_coll_mod_and_list_collections(db) -> None:
    c = db.create_collection("c")
    c.insert_one({"_id": 1})
    db.command("collMod", "c", validator={"$jsonSchema": {"required": ["a"]}},
               validationLevel="moderate", validationAction="error")
    opts = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0]
    assert opts["options"] == {"validator": {"$jsonSchema": {"required": ["a"]}},
                               "validationLevel": "moderate", "validationAction": "error"}
    with pytest.raises(WriteError):
        c.insert_one({"_id": 2})
    c.insert_one({"_id": 2, "a": 1})
    db.command("collMod", "c", validator={})
    opts = db.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"][0]
    assert opts["options"] == {"validationLevel": "moderate", "validationAction": "error"}
    c.insert_one({"_id": 3})
    _students(db, validationLevel="strict", validationAction="warn")
    opts = db.command("listCollections", filter={"name": "students"})["cursor"]["firstBatch"]
    assert opts[0]["options"] == {"validator": {"$jsonSchema": SCHEMA},
                                  "validationLevel": "strict", "validationAction": "warn"}


BAD_VALIDATORS = [
    ({"$jsonSchema": {"$ref": "#/x"}}, 9, "$jsonSchema keyword '$ref' is not currently supported"),
    ({"$jsonSchema": {"format": "email"}}, 9,
     "$jsonSchema keyword 'format' is not currently supported"),
    ({"$jsonSchema": {"default": 1}}, 9, "$jsonSchema keyword 'default' is not currently supported"),
    ({"$jsonSchema": {"foo": 1}}, 9, "Unknown $jsonSchema keyword: foo"),
    ({"$jsonSchema": 1}, 14, "$jsonSchema must be an object"),
    ({"$jsonSchema": {"required": []}}, 9, "$jsonSchema keyword 'required' cannot be an empty array"),
    ({"$jsonSchema": {"bsonType": "integer"}}, 9,
     "$jsonSchema type 'integer' is not currently supported."),
    ({"$jsonSchema": {"bsonType": "bogus"}}, 2, "Unknown type name alias: bogus"),
    ({"$jsonSchema": {"type": "string", "bsonType": "string"}}, 9,
     "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'"),
    ({"$jsonSchema": {"properties": {"a": {"minimum": "x"}}}}, 14,
     "$jsonSchema keyword 'minimum' must be a number"),
    ({"$jsonSchema": {"anyOf": []}}, 2, "$jsonSchema keyword 'anyOf' must be a non-empty array"),
    ({"$jsonSchema": {"maxLength": -1}}, 9, "Expected a positive number in: maxLength: -1"),
    ({"a": {"$bogus": 1}}, 2, "unknown operator: $bogus"),
    ({"$where": "this.a == 1"}, 2, "$where is not allowed in this context"),
    ({"$text": {"$search": "bob"}}, 2, "$text is not allowed in this context"),
    ({"p": {"$near": [0, 0]}}, 2, "$geoNear, $near, and $nearSphere are not allowed in this "
                                  "context"),
    ({"$jsonSchema": {"properties": {"a": {"encrypt": {}}}}, "$where": "x"}, 2,
     "$where is not allowed in this context"),
]


@pytest.mark.parametrize(("validator", "code", "message"), BAD_VALIDATORS)
def test_invalid_validator_refused_and_nothing_created(db, validator: Any, code: int,
                                                       message: str) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.create_collection("bad", validator=validator)
    assert exc.value.code == code
    assert exc.value.details["errmsg"] == \
        f"Parsing of collection validator failed :: caused by :: {message}"
    assert "bad" not in db.list_collection_names()
    db.create_collection("ok")
    with pytest.raises(OperationFailure) as exc:
        db.command("collMod", "ok", validator=validator)
    assert exc.value.code == code
    assert "validator" not in db.command("listCollections", filter={"name": "ok"})[
        "cursor"]["firstBatch"][0]["options"]


@pytest.mark.parametrize(("body", "code", "message"), [
    ({"validationLevel": "bogus"}, 2,
     "Enumeration value 'bogus' for field '{cmd}.validationLevel' is not a valid value."),
    ({"validationAction": "explode"}, 2,
     "Enumeration value 'explode' for field '{cmd}.validationAction' is not a valid value."),
    ({"validator": 5}, 14, "BSON field '{cmd}.validator' is the wrong type, expected object"),
])
def test_invalid_level_action_or_validator_type(db, body: dict[str, Any], code: int,
                                                message: str) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command({"create": "bad", **body})
    assert (exc.value.code, exc.value.details["errmsg"]) == (code, message.format(cmd="create"))
    assert "bad" not in db.list_collection_names()
    db.create_collection("ok")
    with pytest.raises(OperationFailure) as exc:
        db.command({"collMod": "ok", **body})
    assert (exc.value.code, exc.value.details["errmsg"]) == (code, message.format(cmd="collMod"))


def test_encryption_keywords_only_with_strict_error(db) -> None:
    validator = {"$jsonSchema": {"properties": {"ssn": {"encrypt": {"bsonType": "string"}}}}}
    for options in ({"validationAction": "warn"}, {"validationLevel": "moderate"}):
        with pytest.raises(OperationFailure) as exc:
            db.create_collection("enc", validator=validator, **options)
        assert exc.value.code == 224
    c = db.create_collection("enc", validator=validator)
    with pytest.raises(WriteError) as err:
        c.insert_one({"_id": 1, "ssn": "123-45-6789"})
    assert _err_info(err)["details"]["schemaRulesNotSatisfied"][0]["propertiesNotSatisfied"] == [
        {"propertyName": "ssn", "details": [{"operatorName": "encrypt",
                                             "reason": "value was not encrypted"}]}]
    with pytest.raises(OperationFailure) as exc:
        db.command("collMod", "enc", validationAction="warn")
    assert exc.value.code == 224


def test_validators_refused_on_system_and_internal_collections(client, db) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.create_collection("system.js", validator={"a": 1})
    assert exc.value.code == 72
    with pytest.raises(OperationFailure) as exc:
        client.config.create_collection("sv", validator={"a": 1})
    assert exc.value.code == 72
    assert exc.value.details["errmsg"] == ("Document validators are not allowed on collection "
                                           "config.sv in the config internal database")


def _refusing(db: Any) -> Any:
    c = db.create_collection("strict", validator={"$jsonSchema": {"required": ["ok"]}})
    c.insert_one({"_id": 0, "ok": 1})
    return c


def test_bypass_on_insert_update_find_and_modify(db) -> None:
    c = _refusing(db)
    for bypass in (False, True):
        ops = [
            lambda b: c.insert_one({"_id": f"i{b}"}, bypass_document_validation=b),
            lambda b: c.update_one({"_id": 0}, {"$unset": {"ok": ""}, "$set": {"u": b}},
                                   bypass_document_validation=b),
            lambda b: c.find_one_and_update({"_id": f"f{b}"}, {"$set": {"x": 1}}, upsert=True,
                                            bypassDocumentValidation=b),
            lambda b: c.bulk_write([pymongo.InsertOne({"_id": f"b{b}"})],
                                   bypass_document_validation=b),
            lambda b: c.update_one({"_id": 0}, [{"$unset": "ok"}], bypass_document_validation=b),
            lambda b: c.find_one_and_update({"_id": 0}, [{"$unset": "ok"}],
                                            bypassDocumentValidation=b),
        ]
        for op in ops:
            if bypass:
                op(True)
            else:
                with pytest.raises(OperationFailure) as exc:
                    op(False)
                details = exc.value.details
                assert 121 in (exc.value.code, *(e["code"] for e in details.get("writeErrors", []))), details
                c.update_one({"_id": 0}, {"$set": {"ok": 1}})
    assert sorted(map(str, (d["_id"] for d in c.find()))) == ["0", "bTrue", "fTrue", "iTrue"]


def test_bypass_on_client_bulk_write(client, db) -> None:
    c = _refusing(db)
    models = [pymongo.InsertOne({"_id": 1}, namespace=c.full_name),
              pymongo.UpdateOne({"_id": 0}, {"$unset": {"ok": ""}}, namespace=c.full_name)]
    with pytest.raises(pymongo.errors.ClientBulkWriteException) as exc:
        client.bulk_write(models, ordered=False)
    assert [e["code"] for e in exc.value.write_errors] == [121, 121]
    assert c.count_documents({}) == 1
    result = client.bulk_write(models, bypass_document_validation=True)
    assert (result.inserted_count, result.modified_count) == (1, 1)


def test_bypass_on_aggregate_out_and_merge(db) -> None:
    c = _refusing(db)
    db.src.insert_many([{"_id": 1}, {"_id": 2}])
    for stage in ({"$merge": {"into": "strict"}}, {"$out": "strict"}):
        with pytest.raises(OperationFailure) as exc:
            list(db.src.aggregate([stage]))
        assert exc.value.code == 121
        assert c.find_one({"_id": 1}) is None
        list(db.src.aggregate([stage], bypassDocumentValidation=True))
        assert c.find_one({"_id": 1}) == {"_id": 1}
        c.delete_many({"_id": {"$ne": 0}})


def test_json_schema_in_find_and_aggregate(db) -> None:
    db.people.insert_many([
        {"_id": 1, "name": "a", "age": 30, "tags": ["x", "y"]},
        {"_id": 2, "name": "b", "age": "old"},
        {"_id": 3, "age": 15, "tags": ["x", "x"]},
        {"_id": 4, "name": "d", "extra": True}])
    schema = {"required": ["name"], "properties": {
        "age": {"bsonType": "number", "minimum": 18},
        "tags": {"bsonType": "array", "uniqueItems": True, "items": {"enum": ["x", "y"]}}}}
    found = [d["_id"] for d in db.people.find({"$jsonSchema": schema})]
    assert found == [1, 4]
    closed = {"additionalProperties": False, "properties": {
        "_id": {}, "name": {}, "age": {}, "tags": {}}}
    got = [d["_id"] for d in db.people.aggregate(
        [{"$match": {"$jsonSchema": closed}}, {"$sort": {"_id": 1}}])]
    assert got == [1, 2, 3]
    assert [d["_id"] for d in db.people.find({"$nor": [{"$jsonSchema": schema}]})] == [2, 3]
    with pytest.raises(OperationFailure) as exc:
        db.people.find_one({"$jsonSchema": {"properties": {"a": {"encrypt": {}}}}})
    assert exc.value.code == 224


def test_json_schema_find_on_time_series(db) -> None:
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    t0 = datetime.datetime(2026, 1, 1)
    db.ts.insert_many([{"t": t0, "m": 1, "v": 5}, {"t": t0, "m": 1, "v": "x"},
                       {"t": t0, "m": 2}])
    got = db.ts.find({"$jsonSchema": {"required": ["v"], "properties": {
        "v": {"bsonType": "int"}}}}, {"_id": 0, "v": 1})
    assert list(got) == [{"v": 5}]


def test_buckets_collection_validates_direct_writes(db) -> None:
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "s"})
    db.m.insert_many([{"t": datetime.datetime(2026, 1, 1, 0, i), "s": 1, "v": i}
                      for i in range(3)])
    raw = db["system.buckets.m"]
    validator = db.command("listCollections", filter={"name": "system.buckets.m"})[
        "cursor"]["firstBatch"][0]["options"]["validator"]
    assert validator["$jsonSchema"]["required"] == ["_id", "control", "data"]
    # bucketd's own buckets pass MongoDB's bucket schema
    assert db.command("count", "system.buckets.m", query=validator)["n"] == 1
    bucket = raw.find_one()
    assert raw.update_one({"_id": bucket["_id"]}, {"$set": {"meta": 2}}).modified_count == 1
    with pytest.raises(WriteError) as exc:
        raw.insert_one({"_id": ObjectId(), "control": {"version": 1}, "data": {}})
    info = _err_info(exc)
    assert info["details"]["operatorName"] == "$jsonSchema"
    assert raw.count_documents({}) == 1
    with pytest.raises(WriteError):
        raw.update_one({"_id": bucket["_id"]}, {"$set": {"extra": 1}})


MONGOSH_SCRIPT = """
const d = db.getSiblingDB('schema_validation_mongosh');
d.dropDatabase();
d.createCollection('s', {validator: {$jsonSchema: {required: ['name'],
  properties: {name: {bsonType: 'string', minLength: 2}}}}});
d.s.insertOne({name: 'Al'});
let refused = null;
try { d.s.insertOne({_id: 7, name: 'A'}); } catch (e) {
  refused = {code: e.code, errInfo: e.errInfo};
}
const found = d.s.find({$jsonSchema: {properties: {name: {maxLength: 2}}}}, {_id: 0}).toArray();
print(EJSON.stringify({refused: refused, found: found,
  level: d.getCollectionInfos({name: 's'})[0].options.validationLevel || null},
  {relaxed: true}));
d.dropDatabase();
"""


@pytest.mark.mongosh
def test_mongosh_schema_validation(uri: str) -> None:
    result, _ = run_mongosh(uri, MONGOSH_SCRIPT)
    assert result == {
        "refused": {"code": 121, "errInfo": {"failingDocumentId": 7, "details": {
            "operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [{
                "operatorName": "properties", "propertiesNotSatisfied": [{
                    "propertyName": "name", "details": [{
                        "operatorName": "minLength", "specifiedAs": {"minLength": 2},
                        "reason": "specified string length was not satisfied",
                        "consideredValue": "A"}]}]}]}}},
        "found": [{"name": "Al"}], "level": None}


NODE_BODY = """
  const d = client.db('schema_validation_node');
  await d.dropDatabase();
  const s = await d.createCollection('s', { validator: { $jsonSchema: {
    required: ['n'], properties: { n: { bsonType: 'int', maximum: 5 } } } } });
  let refused = null;
  try { await s.insertOne({ _id: 1, n: 9 }); } catch (e) {
    refused = { code: e.code, errInfo: e.errInfo };
  }
  const bypassed = await s.insertOne({ _id: 2 }, { bypassDocumentValidation: true });
  await d.command({ collMod: 's', validationAction: 'warn' });
  const warned = await s.insertOne({ _id: 3, n: 'x' });
  const info = (await d.listCollections({ name: 's' }).toArray())[0].options;
  const out = { refused, bypassed: bypassed.insertedId, warned: warned.insertedId,
                action: info.validationAction, count: await s.countDocuments() };
  await d.dropDatabase();
  return out;
"""


@pytest.mark.mongosh
def test_node_driver(uri: str) -> None:
    assert run_node(uri, NODE_BODY) == {
        "refused": {"code": 121, "errInfo": {"failingDocumentId": 1, "details": {
            "operatorName": "$jsonSchema", "schemaRulesNotSatisfied": [{
                "operatorName": "properties", "propertiesNotSatisfied": [{
                    "propertyName": "n", "details": [{
                        "operatorName": "maximum", "specifiedAs": {"maximum": 5},
                        "reason": "comparison failed", "consideredValue": 9}]}]}]}}},
        "bypassed": 2, "warned": 3, "action": "warn", "count": 2}
