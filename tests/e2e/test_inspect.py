"""`bucketd inspect` over a dump of bucketd's own buckets and over the BSONColumn vectors."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import bson
import pymongo
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
