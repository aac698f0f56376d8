"""`bucketd inspect` over a dump of bucketd's own buckets and over the BSONColumn vectors."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import pty
import socket
import subprocess
import sys
import time
from pathlib import Path

import bson
import pymongo
import pytest
from bson.binary import Binary
from bson.raw_bson import RawBSONDocument

from storage.bsonutil import CODEC_OPTIONS

VECTORS = Path(__file__).resolve().parents[1] / "data" / "bsoncolumn.json"


def _inspect(*args: str) -> list[dict]:
    res = subprocess.run([sys.executable, "-m", "server", "inspect", *args, "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def test_inspect_dump_of_own_buckets(client: pymongo.MongoClient, uri: str, tmp_path) -> None:
    db = client.inspect_e2e
    db.drop_collection("m")
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "host"})
    t0 = dt.datetime(2024, 2, 1)
    db.m.insert_many([{"t": t0 + dt.timedelta(seconds=i), "host": f"h{i % 2}", "v": i,
                       "f": i * 0.25} for i in range(300)])
    raw_coll = db.get_collection("system.buckets.m").with_options(
        codec_options=bson.CodecOptions(document_class=RawBSONDocument))
    dump = tmp_path / "system.buckets.m.bson"
    buckets = list(raw_coll.find())
    dump.write_bytes(b"".join(b.raw for b in buckets))
    reports = _inspect(str(dump))
    assert len(reports) == len(buckets) == 2
    for raw, rep in zip(buckets, reports):
        doc = bson.decode(raw.raw, CODEC_OPTIONS)
        assert rep["count"] == doc["control"]["count"] == 150
        assert rep["version"] == doc["control"]["version"]
        assert rep["meta"] == doc["meta"]
        for f in rep["fields"]:
            assert f["encodedBytes"] == len(doc["data"][f["name"]])
            assert f["plainBytes"] > f["encodedBytes"]  # columns compress these series
            assert abs(f["ratio"] - f["plainBytes"] / f["encodedBytes"]) < 0.01
    live = _inspect("--uri", uri, "--db", "inspect_e2e", "-c", "m")  # credentials and all
    assert [r["count"] for r in live] == [r["count"] for r in reports]
    db.drop_collection("m")


def test_inspect_decodes_the_vectors(tmp_path) -> None:
    vectors = json.loads(VECTORS.read_text())["valid"]
    docs = []
    for i, v in enumerate(vectors):
        column = base64.b64decode(v["column_b64"])
        docs.append(bson.encode({"_id": i, "control": {"version": 2, "count": v["count"]},
                                 "data": {"x": Binary(column, 7)}}))
    dump = tmp_path / "vectors.bson"
    dump.write_bytes(b"".join(docs))
    reports = _inspect(str(dump), "--values")
    assert len(reports) == len(vectors)
    for v, rep in zip(vectors, reports):
        expected = bson.decode(base64.b64decode(v["values_bson_b64"]), CODEC_OPTIONS)
        (field,) = rep["fields"]
        assert "error" not in field, (v["name"], field.get("error"))
        assert field["count"] == len(expected)
        assert field["encodedBytes"] == len(base64.b64decode(v["column_b64"]))
        assert field["plainBytes"] == len(bson.encode(expected))


def test_progress_bar_only_on_a_terminal(tmp_path) -> None:
    import os
    import pty

    docs = [bson.encode({"_id": i, "control": {"version": 1, "min": {}, "max": {}},
                         "data": {"x": {"0": i}}}) for i in range(500)]
    dump = tmp_path / "many.bson"
    dump.write_bytes(b"".join(docs))
    piped = subprocess.run([sys.executable, "-m", "server", "inspect", str(dump), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "%" not in piped.stderr
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "server", "inspect", str(dump), "--json"],
                              stdout=subprocess.DEVNULL, stderr=slave, timeout=120)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0
    assert b"100%" in out and b"500 buckets" in out


# -- the CLI's contract: where the bar goes, the URI's database, errors, the summary ------

def _run(*args: str, env: dict[str, str] | None = None, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "server", "inspect", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _many_buckets(tmp_path: Path, n: int = 500) -> Path:
    docs = [bson.encode({"_id": i, "control": {"version": 1, "min": {}, "max": {}},
                         "data": {"x": {"0": i}}}) for i in range(n)]
    dump = tmp_path / "many.bson"
    dump.write_bytes(b"".join(docs))
    return dump


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk


def test_no_bar_when_the_report_shares_the_terminal(tmp_path) -> None:
    dump = _many_buckets(tmp_path)
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "server", "inspect", str(dump)],
                                stdout=slave, stderr=slave)
        os.close(slave)
        slave = -1
        out = _read_all(master)  # as it comes: the terminal's buffer is small
        code = proc.wait(120)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert code == 0
    assert b"\r[" not in out and b"%" not in out
    assert out.count(b"bucket ") == 500


def test_the_bar_never_reaches_a_piped_report(tmp_path) -> None:
    dump = _many_buckets(tmp_path)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "server", "inspect", str(dump), "--json"],
                              stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        slave = -1
        err = _read_all(master)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0 and b"100%" in err
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 500 and all(json.loads(line)["_id"] >= 0 for line in lines)


def test_summary_line(tmp_path) -> None:
    dump = _many_buckets(tmp_path, 3)
    text = _run(str(dump))
    assert text.returncode == 0
    size = dump.stat().st_size
    assert text.stdout.splitlines()[-1].startswith(
        f"summary: 3 buckets, 3 measurements, {size} bytes of buckets; columns ")
    assert text.stdout.splitlines()[-1].endswith("ratio 1.00x")
    js = _run(str(dump), "--json")
    assert len(js.stdout.splitlines()) == 3
    assert js.stderr.startswith("summary: 3 buckets, 3 measurements")


def _ts_with_buckets(client: pymongo.MongoClient, db_name: str) -> None:
    db = client[db_name]
    db.drop_collection("m")
    db.create_collection("m", timeseries={"timeField": "t", "metaField": "h"})
    t0 = dt.datetime(2024, 2, 1)
    db.m.insert_many([{"t": t0 + dt.timedelta(seconds=i), "h": i % 3, "v": i}
                      for i in range(30)])
    db.drop_collection("plain")
    db.plain.insert_one({"x": 1})


def _uri_with_db(uri: str, db: str) -> str:
    """`uri` naming database `db`; credentials keep authenticating where they did (a URI's
    database is also its default authSource)."""
    base, _, query = uri.partition("?")
    parsed = pymongo.uri_parser.parse_uri(uri)
    if parsed["username"] and "authsource=" not in query.lower():
        query = "&".join(q for q in (query, f"authSource={parsed['database'] or 'admin'}") if q)
    return base.rstrip("/") + "/" + db + ("?" + query if query else "")


def test_the_uri_database_is_used(client: pymongo.MongoClient, uri: str) -> None:
    _ts_with_buckets(client, "inspect_uri_db")
    reports = _inspect("--uri", _uri_with_db(uri, "inspect_uri_db"), "-c", "m")
    assert len(reports) == 3 and sum(r["count"] for r in reports) == 30
    # --db still wins over the URI's
    res = _run("--uri", _uri_with_db(uri, "inspect_uri_db"), "--db", "nowhere_db", "-c", "m")
    assert res.returncode == 1


@pytest.mark.parametrize("collection, message", [
    ("missing", "bucketd inspect: error: collection inspect_errors.missing does not exist"),
    ("plain", "bucketd inspect: error: inspect_errors.plain is a collection, not a "
              "time-series collection"),
])
def test_a_collection_that_cannot_be_inspected(client: pymongo.MongoClient, uri: str,
                                               collection: str, message: str) -> None:
    _ts_with_buckets(client, "inspect_errors")
    res = _run("--uri", uri, "--db", "inspect_errors", "-c", collection)
    assert res.returncode == 1
    assert res.stdout == "" and res.stderr.splitlines() == [message]


def test_an_unreachable_server_is_one_line_within_the_selection_timeout() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    for query, limit in (("", 20.0), ("?serverSelectionTimeoutMS=500", 10.0)):
        started = time.monotonic()
        res = _run("--uri", f"mongodb://127.0.0.1:{port}/{query}", "-c", "m", timeout=60)
        assert time.monotonic() - started < limit
        assert res.returncode == 1 and res.stdout == ""
        lines = res.stderr.splitlines()
        assert len(lines) == 1, res.stderr
        assert lines[0] == (f"bucketd inspect: error: cannot reach the server at "
                            f"127.0.0.1:{port}: [Errno 111] Connection refused")


def test_bucketd_help_lists_inspect() -> None:
    res = subprocess.run([sys.executable, "-m", "server", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and "bucketd inspect" in res.stdout


def test_native_and_python_decoders_report_the_same(tmp_path) -> None:
    """The native decoder's sizes (no values decoded) equal the Python reference's."""
    vectors = json.loads(VECTORS.read_text())["valid"]
    docs = [bson.encode({"_id": i, "control": {"version": 2, "count": v["count"]},
                         "data": {"x": Binary(base64.b64decode(v["column_b64"]), 7)}})
            for i, v in enumerate(vectors)]
    dump = tmp_path / "vectors.bson"
    dump.write_bytes(b"".join(docs))
    native = _run(str(dump), "--json")
    python = _run(str(dump), "--json", env={"BUCKETD_NATIVE": "0"})
    assert native.returncode == python.returncode == 0
    assert native.stdout == python.stdout and native.stderr == python.stderr
