"""mongosh connects, runs the shell helpers users type first, and sees no failed commands."""

from __future__ import annotations

from .mongosh_util import run_mongosh

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
