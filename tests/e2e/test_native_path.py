"""The server says which path the per-measurement work takes: in its start-up log and in
buildInfo's `bucketd.nativeCore`.

Against a server of this checkout the path is the one this interpreter imports (the same
install); the compose runner sets BUCKETD_EXPECT_NATIVE=1, so an image whose Rust build
silently failed fails there.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import pymongo
import pytest

from server.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD
from storage import native

from ..conftest import start_server


def _check_path(attr: dict[str, Any]) -> None:
    if os.environ.get("BUCKETD_EXPECT_NATIVE") == "1":
        assert attr["path"] == "native", attr
    elif not os.environ.get("BUCKETD_URI"):  # a server started from this checkout
        assert attr == native.describe()
    assert attr["path"] in ("native", "python")
    if attr["path"] == "native":
        assert attr["version"]


def test_build_info_names_the_path(client: pymongo.MongoClient) -> None:
    _check_path(client.admin.command("buildInfo")["bucketd"]["nativeCore"])


@pytest.mark.skipif(bool(os.environ.get("BUCKETD_URI")),
                    reason="needs a server of its own: getLog keeps only the last lines")
def test_startup_log_names_the_path(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri, serverSelectionTimeoutMS=10_000) as client:
            lines = client.admin.command({"getLog": "global"})["log"]
    finally:
        proc.stop()
    entries = [json.loads(line) for line in lines if '"Native core"' in line]
    assert len(entries) == 1, entries
    assert entries[0]["c"] == "CONTROL" and entries[0]["id"] == 9000002
    _check_path(entries[0]["attr"])
    # the allocator's settings are logged beside it (see server/allocator.py)
    tuned = [json.loads(line) for line in lines if '"Allocator"' in line]
    assert len(tuned) == 1 and tuned[0]["id"] == 9000003, tuned
    if platform.libc_ver()[0] == "glibc":
        assert tuned[0]["attr"] == {"trimThreshold": TRIM_THRESHOLD,
                                    "mmapThreshold": MMAP_THRESHOLD}
