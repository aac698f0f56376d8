"""The server says at start-up which path the per-measurement work takes.

Against a server of this checkout the path is the one this interpreter imports (the same
install); the compose runner sets BUCKETD_EXPECT_NATIVE=1, so an image whose Rust build
silently failed fails there.
"""

from __future__ import annotations

import json
import os

import pymongo

from storage import native


def _native_core_line(client: pymongo.MongoClient) -> dict:
    lines = client.admin.command({"getLog": "global"})["log"]
    entries = [json.loads(line) for line in lines if '"Native core"' in line]
    assert len(entries) == 1, entries
    return entries[0]


def test_startup_log_names_the_path(client: pymongo.MongoClient) -> None:
    entry = _native_core_line(client)
    assert entry["c"] == "CONTROL" and entry["id"] == 9000002
    attr = entry["attr"]
    if os.environ.get("BUCKETD_EXPECT_NATIVE") == "1":
        assert attr["path"] == "native", attr
    elif not os.environ.get("BUCKETD_URI"):  # a server started from this checkout
        assert attr == native.describe()
    assert attr["path"] in ("native", "python")
    if attr["path"] == "native":
        assert attr["version"]
