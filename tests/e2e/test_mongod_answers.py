"""Small answers that must be mongod's: time-series field names, hiding the _id index,
renaming time-series collections, and transactions on a standalone (IllegalOperation 20,
through pymongo's and the Node.js driver's withTransaction). Each refusal writes nothing."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from pymongo.errors import OperationFailure

from ..conftest import ROOT


@pytest.fixture
def db(client: pymongo.MongoClient) -> Iterator[Any]:
    client.drop_database("answers_e2e")
    d = client.answers_e2e
    d.plain.insert_one({"_id": 1})
    d.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    yield d
    client.drop_database("answers_e2e")


def _fails(db: Any, cmd: dict[str, Any], code: int, errmsg: str | None = None) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command(cmd)
    assert exc.value.code == code, exc.value.details
    if errmsg is not None:
        assert exc.value.details["errmsg"] == errmsg


DOLLAR = "The 'timeField' or 'metaField' cannot start with '$'"


@pytest.mark.parametrize("options, code, errmsg", [
    ({"timeField": "$t"}, 2, DOLLAR),
    ({"timeField": "t", "metaField": "$m"}, 2, DOLLAR),
    ({"timeField": "t", "metaField": "$m.x"}, 72,
     "answers_e2e.bad: 'metaField' must be a top-level field and not contain a '.'"),
    ({"timeField": "t\x00x"}, 2,
     "The 'timeField' or the 'metaField' cannot contain embedded null bytes"),
    ({"timeField": "t", "metaField": "_id"}, 72, "'metaField' cannot be \"_id\""),
])
def test_time_series_field_names(db, options, code, errmsg) -> None:
    _fails(db, {"create": "bad", "timeseries": options}, code, errmsg)
    assert "bad" not in db.list_collection_names()


def test_hiding_the_id_index(db) -> None:
    for index in ({"name": "_id_", "hidden": True}, {"keyPattern": {"_id": 1}, "hidden": True}):
        _fails(db, {"collMod": "plain", "index": index}, 2, "can't hide _id index")
    _fails(db, {"createIndexes": "plain", "indexes": [
        {"key": {"_id": 1}, "name": "_id_", "hidden": True}]}, 197)
    # a buckets collection is clustered by _id: it has no _id index to hide
    db.ts.insert_one({"t": datetime.datetime(2024, 1, 1), "m": 1})
    _fails(db, {"collMod": "ts", "index": {"name": "_id_", "hidden": True}}, 27,
           "cannot find index _id_ for ns answers_e2e.system.buckets.ts")
    _fails(db, {"collMod": "system.buckets.ts", "index": {"name": "_id_", "hidden": True}}, 27,
           "cannot find index _id_ for ns answers_e2e.system.buckets.ts")
    assert all("hidden" not in ix for ix in db.plain.list_indexes())


def test_renaming_time_series_collections(db, client) -> None:
    admin = client.admin
    _fails(admin, {"renameCollection": "answers_e2e.ts", "to": "answers_e2e.ts2"}, 20)
    _fails(admin, {"renameCollection": "answers_e2e.system.buckets.ts",
                   "to": "answers_e2e.other"}, 20)
    _fails(admin, {"renameCollection": "answers_e2e.plain",
                   "to": "answers_e2e.system.buckets.x"}, 20)
    # onto a time-series collection (a view in mongod), even with dropTarget
    _fails(admin, {"renameCollection": "answers_e2e.plain", "to": "answers_e2e.ts",
                   "dropTarget": True}, 48)
    names = set(db.list_collection_names())
    assert {"ts", "plain", "system.buckets.ts"} <= names and "ts2" not in names
    assert db.plain.count_documents({}) == 1


STANDALONE = "Transaction numbers are only allowed on a replica set member or mongos"


def test_pymongo_with_transaction_is_refused_as_on_a_standalone(db, client) -> None:
    with client.start_session() as session, pytest.raises(OperationFailure) as exc:
        session.with_transaction(
            lambda s: db.plain.insert_one({"_id": 2}, session=s))
    assert (exc.value.code, exc.value.details["codeName"], exc.value.details["errmsg"]) == (
        20, "IllegalOperation", STANDALONE)
    assert db.plain.count_documents({}) == 1


@pytest.mark.mongosh
def test_node_with_transaction_is_refused_as_on_a_standalone(db, uri) -> None:
    modules = ROOT / ".ci" / "node" / "node_modules"
    if not (modules / "mongodb" / "package.json").exists() or shutil.which("node") is None:
        pytest.skip("the Node.js driver is not installed")
    script = """
const { MongoClient } = require('mongodb');
(async () => {
  const c = new MongoClient(process.env.URI, {serverSelectionTimeoutMS: 10000});
  const coll = c.db('answers_e2e').collection('plain');
  const session = c.startSession();
  let out = {};
  try {
    await session.withTransaction(async () => { await coll.insertOne({_id: 3}, {session}); });
  } catch (e) {
    const o = e.originalError || e;  // driver 7 wraps the server's error, 6 throws it
    out = {message: e.message, code: o.code, codeName: o.codeName, errmsg: o.errmsg};
  }
  await session.endSession();
  out.n = await coll.countDocuments({});
  console.log(JSON.stringify(out));
  await c.close();
})().catch((e) => { console.error(e); process.exit(1); });
"""
    res = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODE_PATH": str(modules), "URI": uri})
    assert res.returncode == 0, res.stdout + res.stderr
    # mongod's standalone answer to a txnNumber (20); driver 7 words it as its own message
    # and keeps the server's error as originalError (execute_operation's MMAPv1 check)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out.pop("message") in (STANDALONE, "This MongoDB deployment does not support "
                                  "retryable writes. Please add retryWrites=false to your "
                                  "connection string.")
    assert out == {"code": 20, "codeName": "IllegalOperation", "errmsg": STANDALONE, "n": 1}
