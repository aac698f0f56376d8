"""Clustered collections through real clients: `create` with `clusteredIndex` checked as
mongod checks it (nothing created on a refusal), listCollections and listIndexes in
mongod's shape, duplicate `_id`s, `_id` ranges as CLUSTERED_IXSCAN in explain, the
clustered index neither droppable nor re-creatable under another key, TTL by a date
`_id`, and time-series buckets collections (clustered by `_id` in MongoDB) showing no
`_id` index.

mongod's rules: create_collection.cpp validateClusteredIndexSpec /
validateCollectionOptions, the strict ClusteredIndexSpec IDL (v, key, name, unique),
clustered_collection_util.cpp (default name `_id_`, listIndexes adds the collection's
expireAfterSeconds and `clustered: true`), jstests/core/clustered/.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pymongo
import pytest
from bson import Int64
from pymongo.errors import DuplicateKeyError, OperationFailure

from .mongosh_util import run_mongosh

CLUSTERED = {"key": {"_id": 1}, "unique": True}
CANONICAL = {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": True}


@pytest.fixture
def db(client: pymongo.MongoClient) -> Any:
    client.drop_database("clustered_e2e")
    yield client.clustered_e2e
    client.drop_database("clustered_e2e")


def _info(db: Any, name: str) -> dict[str, Any]:
    return next(db.list_collections(filter={"name": name}))


def test_create_shows_the_clustered_index_as_mongod(db: Any) -> None:
    db.command("create", "c", clusteredIndex=CLUSTERED)
    info = _info(db, "c")
    assert info["options"] == {"clusteredIndex": CANONICAL}
    assert list(info["options"]["clusteredIndex"]) == ["v", "key", "name", "unique"]
    assert "idIndex" not in info  # no separate _id index
    assert list(db.c.list_indexes()) == [{**CANONICAL, "clustered": True}]
    # the same create again is a no-op; other options are a conflict
    db.command("create", "c", clusteredIndex=CLUSTERED)
    with pytest.raises(OperationFailure) as exc:
        db.command("create", "c", clusteredIndex={**CLUSTERED, "name": "other"})
    assert exc.value.code == 48

    db.command("create", "named", clusteredIndex={"key": {"_id": 1}, "unique": True,
                                                  "name": "by_id", "v": 2},
               expireAfterSeconds=3600)
    assert _info(db, "named")["options"] == {
        "clusteredIndex": {**CANONICAL, "name": "by_id"}, "expireAfterSeconds": 3600}
    assert isinstance(_info(db, "named")["options"]["expireAfterSeconds"], Int64)
    assert list(db.named.list_indexes()) == [
        {**CANONICAL, "name": "by_id", "expireAfterSeconds": 3600, "clustered": True}]

    # clusteredIndex: false is an ordinary collection
    db.command("create", "plain", clusteredIndex=False)
    assert _info(db, "plain")["options"] == {}
    assert [ix["name"] for ix in db.plain.list_indexes()] == ["_id_"]


REFUSED = [
    ({"clusteredIndex": {"key": {"_id": 1}}}, 40414, "'create.clusteredIndex.unique' is missing"),
    ({"clusteredIndex": {"unique": True}}, 40414, "'create.clusteredIndex.key' is missing"),
    ({"clusteredIndex": {"key": {"_id": 1}, "unique": False}}, 5979700, "requires unique: true"),
    ({"clusteredIndex": {"key": {"a": 1}, "unique": True}}, 197, "only supported for key: {_id: 1}"),
    ({"clusteredIndex": {"key": {"_id": -1}, "unique": True}}, 197, "key: {_id: 1}"),
    ({"clusteredIndex": {"key": {"_id": 1, "a": 1}, "unique": True}}, 197, "key: {_id: 1}"),
    ({"clusteredIndex": {"key": {"_id": 1}, "unique": True, "sparse": True}}, 40415,
     "'create.clusteredIndex.sparse' is an unknown field"),
    ({"clusteredIndex": {"key": {"_id": 1}, "unique": True, "v": 1}}, 5979704,
     "cannot create a clusteredIndex with v=1"),
    ({"clusteredIndex": {"key": {"_id": 1}, "unique": True, "name": 5}}, 14, "expected type"),
    ({"clusteredIndex": "yes"}, 14, "expected types '[bool, object]'"),
    ({"clusteredIndex": True}, 5979703, "legacy format"),
    ({"clusteredIndex": False, "expireAfterSeconds": 5}, 72, "expireAfterSeconds"),
    ({"expireAfterSeconds": 5}, 72, "expireAfterSeconds"),
    ({"clusteredIndex": CLUSTERED, "expireAfterSeconds": -10}, 72, "cannot be less than 0"),
    ({"clusteredIndex": CLUSTERED, "expireAfterSeconds": "x"}, 14, "expireAfterSeconds"),
    ({"clusteredIndex": CLUSTERED, "viewOn": "src"}, 6026500, "not supported with views"),
    ({"clusteredIndex": CLUSTERED, "autoIndexId": False}, 6026501, "autoIndexId"),
    ({"clusteredIndex": CLUSTERED, "idIndex": {"key": {"_id": 1}, "name": "_id_", "v": 2}}, 72,
     "'idIndex' option"),
]


@pytest.mark.parametrize(("options", "code", "fragment"), REFUSED)
def test_create_refusals(db: Any, options: dict[str, Any], code: int, fragment: str) -> None:
    with pytest.raises(OperationFailure) as exc:
        db.command("create", "bad", **options)
    assert exc.value.code == code, exc.value.details
    assert fragment in exc.value.details["errmsg"]
    assert "bad" not in db.list_collection_names()


def test_documents_and_duplicate_ids(db: Any) -> None:
    db.command("create", "c", clusteredIndex=CLUSTERED)
    db.c.insert_many([{"_id": 2, "a": "b"}, {"_id": "x"}, {"a": 1}])
    with pytest.raises(DuplicateKeyError) as exc:
        db.c.insert_one({"_id": 2.0, "a": "dup"})  # numbers compare as values
    assert exc.value.details["keyValue"] == {"_id": 2.0}
    db.c.update_one({"_id": "x"}, {"$set": {"v": 1}})
    docs = list(db.c.find({}, {"_id": 0}))
    assert {"a": "b"} in docs and {"v": 1} in docs and {"a": 1} in docs and len(docs) == 3
    assert db.c.find_one({"_id": 2}) == {"_id": 2, "a": "b"}


def _winning(db: Any, flt: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out = db.command("explain", {"find": "c", "filter": flt, **extra})
    return dict(out["queryPlanner"]["winningPlan"])


def test_id_ranges_are_clustered_scans(db: Any) -> None:
    db.command("create", "c", clusteredIndex={**CLUSTERED, "name": "ck"})
    db.c.insert_many([{"_id": i, "a": -i} for i in range(100)])
    assert _winning(db, {"_id": 5}) == {"stage": "CLUSTERED_IXSCAN", "filter": {"_id": 5},
                                        "direction": "forward", "minRecord": 5, "maxRecord": 5}
    lt = _winning(db, {"_id": {"$lt": 10}})
    assert lt["stage"] == "CLUSTERED_IXSCAN" and lt["maxRecord"] == 10 and "minRecord" not in lt
    gt = _winning(db, {"_id": {"$gte": 89}})
    assert gt["stage"] == "CLUSTERED_IXSCAN" and gt["minRecord"] == 89 and "maxRecord" not in gt
    both = _winning(db, {"_id": {"$gt": 20, "$lte": 40}})
    assert (both["minRecord"], both["maxRecord"]) == (20, 40)
    other = _winning(db, {"a": {"$gt": -10}})
    assert other["stage"] == "COLLSCAN" and "minRecord" not in other
    assert [d["_id"] for d in db.c.find({"_id": {"$gt": 20, "$lte": 25}})] == [21, 22, 23, 24, 25]
    # the clustered index answers to its own name and key pattern in a hint
    assert [d["_id"] for d in db.c.find({"_id": {"$lt": 3}}).hint("ck")] == [0, 1, 2]
    assert _winning(db, {"_id": {"$lt": 3}}, hint={"_id": 1})["stage"] == "CLUSTERED_IXSCAN"
    stats = db.command("explain", {"find": "c", "filter": {"_id": {"$gte": 95}}},
                       verbosity="executionStats")["executionStats"]
    assert stats["nReturned"] == 5 and stats["totalDocsExamined"] <= 6


def test_secondary_and_clustered_index_ddl(db: Any) -> None:
    db.command("create", "c", clusteredIndex={**CLUSTERED, "name": "ck"})
    clustered = {**CANONICAL, "name": "ck", "clustered": True}
    # on the cluster key, createIndexes is a no-op (with or without `clustered`)
    db.command("createIndexes", "c", indexes=[{"key": {"_id": 1}, "name": "_id_"}])
    db.command("createIndexes", "c", indexes=[clustered])
    with pytest.raises(OperationFailure) as exc:
        db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1",
                                                   "clustered": True, "unique": True}])
    assert exc.value.code == 6243700
    # the cluster key is no index in mongod's index catalog: counts leave it out
    reply = db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}])
    assert (reply["numIndexesBefore"], reply["numIndexesAfter"]) == (0, 1)
    assert list(db.c.list_indexes()) == [clustered, {"v": 2, "key": {"a": 1}, "name": "a_1"}]
    db.c.insert_one({"_id": 1, "a": 1})
    stats = db.command("collStats", "c")
    assert stats["nindexes"] == 1 and list(stats["indexSizes"]) == ["a_1"]
    checked = db.command("validate", "c")
    assert checked["valid"] and checked["keysPerIndex"] == {"a_1": 1}
    for target in ("ck", {"_id": 1}, ["ck"]):
        with pytest.raises(OperationFailure) as exc:
            db.command("dropIndexes", "c", index=target)
        assert exc.value.code == 5979800, target
    with pytest.raises(OperationFailure) as exc:
        db.command("dropIndexes", "c", index="_id_")  # not its name here
    assert exc.value.code == 27
    assert db.command("dropIndexes", "c", index="*")["nIndexesWas"] == 1
    assert list(db.c.list_indexes()) == [clustered]
    for spec, code in (({"key": {"_id": 1}, "name": "x", "clustered": False}, 6492800),
                       ({"key": {"_id": 1}, "name": "x", "clustered": True}, 67)):
        with pytest.raises(OperationFailure) as exc:
            db.command("createIndexes", "c", indexes=[spec])
        assert exc.value.code == code, spec
    assert list(db.c.list_indexes()) == [clustered]
    # an ordinary collection has no clustered index to name
    db.command("create", "plain")
    with pytest.raises(OperationFailure) as exc:
        db.command("createIndexes", "plain", indexes=[{"key": {"_id": 1}, "name": "_id_",
                                                       "clustered": True, "unique": True}])
    assert exc.value.code == 6243700


def test_coll_mod_expire_after_seconds(db: Any) -> None:
    db.command("create", "c", clusteredIndex=CLUSTERED)
    db.command("collMod", "c", expireAfterSeconds=60)
    assert _info(db, "c")["options"]["expireAfterSeconds"] == 60
    assert next(db.c.list_indexes())["expireAfterSeconds"] == 60
    db.command("collMod", "c", expireAfterSeconds="off")
    assert _info(db, "c")["options"] == {"clusteredIndex": CANONICAL}
    db.command("create", "plain")
    with pytest.raises(OperationFailure) as exc:
        db.command("collMod", "plain", expireAfterSeconds=60)
    assert exc.value.code == 72


def test_ttl_deletes_by_date_id_and_survives_restart(tmp_path) -> None:
    from ..conftest import start_server

    proc = start_server(tmp_path, "--setParameter", "ttlMonitorSleepSecs=1")
    try:
        with pymongo.MongoClient(proc.uri) as c:
            db = c.clustered_ttl
            db.command("create", "c", clusteredIndex=CLUSTERED, expireAfterSeconds=3600)
            now = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
            old = now - dt.timedelta(days=2)
            db.c.insert_many([{"_id": old, "v": "old"}, {"_id": now, "v": "new"},
                              {"_id": 1, "v": "number"}, {"_id": "s", "v": "string"}])
            deadline = time.time() + 20
            while time.time() < deadline and db.c.count_documents({}) != 3:
                time.sleep(0.3)
            assert sorted(d["v"] for d in db.c.find()) == ["new", "number", "string"]
    finally:
        proc.stop()
    proc = start_server(tmp_path)  # the clustered index survives a restart
    try:
        with pymongo.MongoClient(proc.uri) as c:
            assert list(c.clustered_ttl.c.list_indexes()) == [
                {**CANONICAL, "expireAfterSeconds": 3600, "clustered": True}]
            plan = c.clustered_ttl.command("explain", {"find": "c", "filter": {"_id": 1}})
            assert plan["queryPlanner"]["winningPlan"]["stage"] == "CLUSTERED_IXSCAN"
    finally:
        proc.stop()


def test_timeseries_buckets_are_clustered(db: Any) -> None:
    db.create_collection("ts", timeseries={"timeField": "t", "metaField": "m"})
    reply = db.command("createIndexes", "ts", indexes=[{"key": {"m": 1}, "name": "m_1"}])
    assert (reply["numIndexesBefore"], reply["numIndexesAfter"]) == (1, 2)  # m_1_t_1 first
    info = _info(db, "system.buckets.ts")
    assert info["options"]["clusteredIndex"] is True
    assert "idIndex" not in info
    names = [ix["name"] for ix in db["system.buckets.ts"].list_indexes()]
    assert "_id_" not in names and "m_1" in names
    assert "_id_" not in [ix["name"] for ix in db.ts.list_indexes()]


@pytest.mark.mongosh
def test_mongosh_clustered_collection(uri: str, client: pymongo.MongoClient) -> None:
    script = r"""
const t = db.getSiblingDB('clustered_shell'); t.dropDatabase();
const out = {};
out.created = t.createCollection('c', {clusteredIndex: {key: {_id: 1}, unique: true,
                                                        name: 'ck'}}).ok;
t.c.insertMany([{_id: 1, v: 'a'}, {_id: 2, v: 'b'}, {_id: 3, v: 'c'}]);
out.indexes = t.c.getIndexes();
out.options = t.getCollectionInfos({name: 'c'})[0].options;
out.plan = t.c.find({_id: {$gte: 2}}).explain().queryPlanner.winningPlan;
out.found = t.c.find({_id: {$gte: 2}}).toArray();
try { t.c.dropIndex('ck'); out.drop = 'ok'; } catch (e) { out.drop = e.code; }
try { t.createCollection('d', {clusteredIndex: {key: {_id: 1}, unique: false}}); out.bad = 'ok'; }
catch (e) { out.bad = e.code; }
print(EJSON.stringify(out, {relaxed: true}));
"""
    try:
        result, _output = run_mongosh(uri, script)
        assert result["created"] == 1
        assert result["indexes"] == [{"v": 2, "key": {"_id": 1}, "name": "ck", "unique": True,
                                      "clustered": True}]
        assert result["options"] == {"clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "ck",
                                                        "unique": True}}
        assert result["plan"]["stage"] == "CLUSTERED_IXSCAN"
        assert result["plan"]["minRecord"] == 2
        assert result["found"] == [{"_id": 2, "v": "b"}, {"_id": 3, "v": "c"}]
        assert result["drop"] == 5979800
        assert result["bad"] == 5979700
        assert client.clustered_shell.list_collection_names() == ["c"]
    finally:
        client.drop_database("clustered_shell")
