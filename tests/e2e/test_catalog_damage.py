"""A catalog entry that cannot be read (damaged on disk, or written by a bug) does not
stop the server: it says which entry and why at start-up, serves every other namespace,
keeps that entry's data, and `--repair` removes the entry and its data."""

from __future__ import annotations

import datetime
import sqlite3
import subprocess
from pathlib import Path

import bson
import pymongo
import pytest
from bson import Code

from tests.engines import test_engine

from ..conftest import SERVER_CMD, start_server

# the damage is done to the SQLite file itself
pytestmark = pytest.mark.skipif(test_engine() != "sqlite", reason="damages the SQLite file")

ROOT_DB = "damage_db"


def _damage(dbfile: Path, name: str, change: dict) -> list[str]:
    """Rewrite the catalog record of `name` with `change` applied; returns the idents
    it names (its record store and indexes)."""
    with sqlite3.connect(dbfile) as conn:
        for rid, data in conn.execute('SELECT id, data FROM "r__catalog"').fetchall():
            doc = bson.decode(data)
            if doc["name"] == name:
                idents = [doc["ident"], *(ix["ident"] for ix in doc["indexes"])]
                conn.execute('UPDATE "r__catalog" SET data = ? WHERE id = ?',
                             (bson.encode({**doc, **change}), rid))
                return idents
    raise AssertionError(f"no catalog record for {name}")


def _tables(dbfile: Path) -> set[str]:
    with sqlite3.connect(dbfile) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def test_an_unreadable_entry_is_reported_kept_and_repaired(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as client:
            db = client[ROOT_DB]
            db.good.insert_many([{"_id": i} for i in range(5)])
            db.bad.insert_many([{"_id": i} for i in range(3)])
            db.create_collection("ts", timeseries={"timeField": "t"})
            db.ts.insert_one({"t": datetime.datetime(2026, 1, 1), "v": 1})
    finally:
        proc.stop()
    dbfile = next(p for p in tmp_path.iterdir() if p.suffix in (".db", ".sqlite"))
    idents = _damage(dbfile, "bad", {"db": Code("evil")})  # what the $db finding stored
    proc.start()
    try:
        with pymongo.MongoClient(proc.uri) as client:
            db = client[ROOT_DB]
            assert sorted(d["_id"] for d in db.good.find()) == list(range(5))
            assert db.ts.count_documents({}) == 1
            assert "bad" not in db.list_collection_names()
            assert ROOT_DB in client.list_database_names()
        log = proc.log_text()
        assert "Skipping a catalog entry that cannot be read" in log
        assert "namespace is not two strings" in log
    finally:
        proc.stop()
    assert all(f"r_{i}" in _tables(dbfile) or f"iu_{i}" in _tables(dbfile)
               or f"in_{i}" in _tables(dbfile) for i in idents)  # its data was kept
    repair = subprocess.run([*SERVER_CMD, "--dbpath", str(tmp_path), "--port", "0",
                             "--repair"], capture_output=True, text=True, timeout=120)
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "Repair removed a catalog entry" in repair.stdout
    tables = _tables(dbfile)
    assert not any(t in tables for i in idents for t in (f"r_{i}", f"iu_{i}", f"in_{i}"))
    after = start_server(tmp_path)
    try:
        with pymongo.MongoClient(after.uri) as client:
            assert client[ROOT_DB].good.count_documents({}) == 5
        assert "Skipping a catalog entry" not in after.log_text()
    finally:
        after.stop()
