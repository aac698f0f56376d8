"""The `collectionUUID` argument as mongod checks it (jstests/core/collection_uuid_*.js):
CollectionUUIDMismatch (361) with `db`, `collectionUUID`, `expectedCollection` and
`actualCollection`, and nothing written or created; through pymongo, mongosh and the
Node.js driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from bson import Binary
from pymongo.errors import OperationFailure

from ..conftest import ROOT
from .mongosh_util import run_mongosh


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    client.drop_database("uuid_e2e")
    client.drop_database("uuid_e2e_other")
    d = client.uuid_e2e
    d.coll.insert_one({"_id": 0, "x": 1})
    d.coll2.insert_one({"_id": 0})
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    yield d
    client.drop_database("uuid_e2e")
    client.drop_database("uuid_e2e_other")


def _uuid(db: Any, name: str) -> Binary:
    info = next(db.list_collections(filter={"name": name}))
    return info["info"]["uuid"]


COMMANDS: list[dict[str, Any]] = [
    {"find": "", "filter": {}},
    {"aggregate": "", "pipeline": [], "cursor": {}},
    {"count": ""},
    {"distinct": "", "key": "x"},
    {"insert": "", "documents": [{"inserted": True}]},
    {"update": "", "updates": [{"q": {"_id": 0}, "u": {"$set": {"updated": True}}}]},
    {"update": "", "updates": [{"q": {"_id": 9}, "u": {"$set": {"u": 1}}, "upsert": True}]},
    {"delete": "", "deletes": [{"q": {"_id": 0}, "limit": 1}]},
    {"findAndModify": "", "query": {"_id": 0}, "update": {"$set": {"y": 1}}},
    {"createIndexes": "", "indexes": [{"key": {"y": 1}, "name": "y_1"}]},
    {"collMod": ""},
    {"drop": ""},
]


def _cmd(template: dict[str, Any], name: str, collection_uuid: Any) -> dict[str, Any]:
    first = next(iter(template))
    return {first: name, **{k: v for k, v in template.items() if k != first},
            "collectionUUID": collection_uuid}


def _mismatch(db: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(OperationFailure) as exc:
        db.command(cmd)
    assert exc.value.code == 361, exc.value.details
    details = exc.value.details
    assert details["codeName"] == "CollectionUUIDMismatch"
    assert details["errmsg"] == "Collection UUID does not match that specified"
    return details


@pytest.mark.parametrize("template", COMMANDS, ids=lambda t: next(iter(t)))
def test_the_right_uuid_runs_and_a_wrong_one_is_refused(db, template) -> None:
    good = _uuid(db, "coll")
    snapshot = sorted(db.coll.find(), key=lambda d: d["_id"])

    missing = Binary.from_uuid(uuid.uuid4())
    details = _mismatch(db, _cmd(template, "coll", missing))
    assert (details["db"], details["collectionUUID"], details["expectedCollection"],
            details["actualCollection"]) == ("uuid_e2e", missing, "coll", None)

    # the UUID of another collection: named as actualCollection
    details = _mismatch(db, _cmd(template, "coll2", good))
    assert (details["expectedCollection"], details["actualCollection"]) == ("coll2", "coll")

    # a namespace that does not exist is not created
    details = _mismatch(db, _cmd(template, "nowhere", good))
    assert details["actualCollection"] == "coll"
    assert "nowhere" not in db.list_collection_names()

    # only collections of the same database are named
    other = db.client.uuid_e2e_other
    details = _mismatch(other, _cmd(template, "coll3", good))
    assert (details["db"], details["actualCollection"]) == ("uuid_e2e_other", None)

    # nothing was written by the refusals
    assert sorted(db.coll.find(), key=lambda d: d["_id"]) == snapshot
    assert [ix["name"] for ix in db.coll.list_indexes()] == ["_id_"]

    db.command(_cmd(template, "coll", good))


def test_time_series_is_checked_against_its_buckets_collection(db) -> None:
    buckets_uuid = _uuid(db, "system.buckets.ts")
    db.command({"find": "ts", "filter": {}, "collectionUUID": buckets_uuid})
    details = _mismatch(db, {"insert": "ts", "documents": [{"t": 1}],
                             "collectionUUID": _uuid(db, "coll")})
    assert (details["expectedCollection"], details["actualCollection"]) == ("ts", "coll")


@pytest.mark.parametrize("value, message", [
    ("abc", "BSON field 'find.collectionUUID' is the wrong type 'string', expected type "
            "'binData'"),
    (Binary(b"0" * 16, 0), "BSON field 'find.collectionUUID' is the wrong binData type "
                           "'general', expected type 'UUID'"),
])
def test_a_collection_uuid_that_is_not_a_uuid(db, value, message) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command({"find": "coll", "collectionUUID": value})
    assert (exc.value.code, exc.value.details["errmsg"]) == (14, message)


def test_rename_checks_the_source(db, client) -> None:
    with pytest.raises(OperationFailure) as exc:
        client.admin.command({"renameCollection": "uuid_e2e.coll", "to": "uuid_e2e.moved",
                              "collectionUUID": _uuid(db, "coll2")})
    assert exc.value.code == 361
    assert exc.value.details["actualCollection"] == "coll2"
    assert "moved" not in db.list_collection_names()


@pytest.mark.mongosh
def test_mongosh(db, uri) -> None:
    script = """
const d = db.getSiblingDB('uuid_e2e');
const u = d.getCollectionInfos({name: 'coll2'})[0].info.uuid;
let r = {};
try { d.runCommand({insert: 'coll', documents: [{z: 1}], collectionUUID: u}); }
catch (e) { r = e.errorResponse; }
print(EJSON.stringify({code: r.code, actual: r.actualCollection,
                       n: d.coll.countDocuments({z: 1})}));
"""
    out, _ = run_mongosh(uri, script)
    assert out == {"code": 361, "actual": "coll2", "n": 0}


def _node_modules() -> str | None:
    d = ROOT / ".ci" / "node" / "node_modules"
    return str(d) if (d / "mongodb" / "package.json").exists() else None


@pytest.mark.mongosh
def test_nodejs_driver(db, uri) -> None:
    modules = _node_modules()
    if modules is None or shutil.which("node") is None:
        pytest.skip("the Node.js driver is not installed")
    script = """
const { MongoClient } = require('mongodb');
(async () => {
  const c = new MongoClient(process.env.URI, {serverSelectionTimeoutMS: 10000});
  const d = c.db('uuid_e2e');
  const [info] = await d.listCollections({name: 'coll'}).toArray();
  try {
    await d.command({find: 'coll2', filter: {}, collectionUUID: info.info.uuid});
    console.log(JSON.stringify({code: 0}));
  } catch (e) {
    console.log(JSON.stringify({code: e.code, expected: e.errorResponse.expectedCollection,
                                actual: e.errorResponse.actualCollection}));
  }
  await c.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
    res = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODE_PATH": modules, "URI": uri})
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1]) == {
        "code": 361, "expected": "coll2", "actual": "coll"}
