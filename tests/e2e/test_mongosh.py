"""mongosh connects, runs the shell helpers users type first, and sees no failed commands."""

from __future__ import annotations

import pytest

from .mongosh_util import run_mongosh

pytestmark = pytest.mark.mongosh

SCRIPT = r"""
const out = {};
out.ping = db.adminCommand({ping: 1}).ok;
out.version = db.version();
out.hello = db.adminCommand({hello: 1}).isWritablePrimary;
const t = db.getSiblingDB('shell_e2e');
t.dropDatabase();
t.createCollection('alpha');
t.createCollection('beta');
out.collections = t.getCollectionNames();
out.dbs = db.adminCommand({listDatabases: 1}).databases.map(d => d.name);
out.dropped = t.alpha.drop();
out.after = t.getCollectionNames();
out.showCollections = t.runCommand({listCollections: 1, nameOnly: true}).cursor.firstBatch.map(c => c.name);
out.dropDb = t.dropDatabase().ok;
print(EJSON.stringify(out));
"""


def test_mongosh_shell_basics(uri: str) -> None:
    result, output = run_mongosh(uri, SCRIPT)
    assert result["ping"] == 1
    assert result["version"].startswith("8.0.")
    assert result["hello"] is True
    assert sorted(result["collections"]) == ["alpha", "beta"]
    assert "shell_e2e" in result["dbs"]
    assert result["dropped"] is True
    assert result["after"] == ["beta"]
    assert result["showCollections"] == ["beta"]
    assert result["dropDb"] == 1
    assert "MongoServerError" not in output and "Warning" not in output


CRUD_SCRIPT = r"""
const t = db.getSiblingDB('shell_crud');
t.dropDatabase();
const c = t.items;
const out = {};
out.inserted = Object.keys(c.insertMany([{_id: 1, n: 1, tags: ['a']}, {_id: 2, n: 2},
                                          {_id: 3, n: 3}]).insertedIds).length;
c.updateOne({_id: 1}, {$inc: {n: 10}, $push: {tags: 'b'}, $set: {'x.y': true}});
c.updateMany({n: {$lt: 5}}, {$set: {small: true}});
c.replaceOne({_id: 3}, {n: 30});
out.upsert = c.updateOne({_id: 4}, {$setOnInsert: {n: 4}}, {upsert: true}).insertedId;
out.found = c.find({}, {_id: 1, n: 1}).sort({n: -1}).toArray();
out.one = c.findOne({_id: 1});
out.count = c.countDocuments({small: true});
out.distinct = c.distinct('n');
out.fam = c.findOneAndUpdate({_id: 2}, {$set: {n: 20}}, {returnDocument: 'after'});
out.deleted = c.deleteMany({n: {$gte: 20}}).deletedCount;
out.index = c.createIndex({n: 1});
out.indexes = c.getIndexes().map(i => i.name);
out.agg = c.aggregate([{$group: {_id: null, total: {$sum: '$n'}}}]).toArray();
out.explain = c.find({n: 4}).explain().queryPlanner.winningPlan.inputStage.stage;
print(EJSON.stringify(out, {relaxed: true}));
"""


def test_mongosh_crud_round(uri: str, client) -> None:
    result, _output = run_mongosh(uri, CRUD_SCRIPT)
    assert result["inserted"] == 3
    assert result["upsert"] == 4
    assert result["found"] == [{"_id": 3, "n": 30}, {"_id": 1, "n": 11}, {"_id": 4, "n": 4},
                               {"_id": 2, "n": 2}]
    assert result["one"] == {"_id": 1, "n": 11, "tags": ["a", "b"], "x": {"y": True}}
    assert result["count"] == 1  # only _id 2 is still below 5 after the first update
    assert result["distinct"] == [2, 4, 11, 30]
    assert result["fam"] == {"_id": 2, "n": 20, "small": True}
    assert result["deleted"] == 2
    assert result["index"] == "n_1" and result["indexes"] == ["_id_", "n_1"]
    assert result["agg"] == [{"_id": None, "total": 15}]
    assert result["explain"] == "IXSCAN"
    # The same data through pymongo.
    docs = list(client.shell_crud.items.find().sort("_id", 1))
    assert [d["_id"] for d in docs] == [1, 4]


def test_mongosh_interactive_helpers(uri: str) -> None:
    """`use`, `show dbs`, `show collections` as a user types them (stdin, not --eval)."""
    import subprocess

    from ..conftest import mongosh_path

    script = ("use shell_interactive\n"
              "db.createCollection('zeta')\n"
              "show collections\n"
              "show dbs\n"
              "db.dropDatabase()\n")
    res = subprocess.run([mongosh_path(), uri, "--quiet"], input=script, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "switched to db shell_interactive" in res.stdout
    assert "zeta" in res.stdout
    assert "shell_interactive" in res.stdout.split("show dbs")[-1] or \
        "shell_interactive" in res.stdout
    assert "MongoServerError" not in res.stdout + res.stderr
