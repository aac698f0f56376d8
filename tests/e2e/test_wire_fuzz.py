"""A short run of the wire fuzzer (tools/fuzz_wire.py) on a server of its own: every
command with every BSON type in each argument, then mutated, random, compressed and SASL
frames. No InternalError, no hang, the server alive and the seeded collections unchanged.
The long run (10^6 frames) is `python tools/fuzz_wire.py --frames 1000000`."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path

import pymongo

from ..conftest import ROOT, start_server

_spec = importlib.util.spec_from_file_location("fuzz_wire", ROOT / "tools" / "fuzz_wire.py")
assert _spec is not None and _spec.loader is not None
fuzz_wire = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_wire"] = fuzz_wire  # its dataclasses look their module up
_spec.loader.exec_module(fuzz_wire)


def test_fuzzed_frames_do_no_harm(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        with pymongo.MongoClient(proc.uri) as client:
            fuzz_wire._seed(client)
            before = fuzz_wire._digest(client)
            assert client[fuzz_wire.KEEP_DB].ts.count_documents({}) == 1000
            report = asyncio.run(fuzz_wire.fuzz("127.0.0.1", proc.port, frames=8_000, seed=7,
                                                connections=4, timeout=30.0))
            assert report.kinds["systematic"] > 2_000
            assert (report.internal_errors, report.hangs) == (0, 0), report.samples
            assert proc.proc is not None and proc.proc.poll() is None
            assert fuzz_wire._digest(client) == before
            assert client.admin.command("ping")["ok"] == 1.0
    finally:
        proc.stop()
    assert "Traceback" not in proc.log_text()
