"""Measurements sent as a document sequence (what pymongo's insert_many sends) against
the same measurements sent in the command body: the same replies and the same buckets;
a malformed document in a sequence gets InvalidBSON on plain and time-series namespaces
alike, writes nothing, and leaves the connection usable."""

from __future__ import annotations

import datetime as dt
import struct

import bson
import pymongo
import pytest
from bson.codec_options import CodecOptions, DatetimeConversion

from protocol import encode_op_msg

from .wire_client import raw_connection

T0 = dt.datetime(2024, 6, 1)
MS_CODEC: CodecOptions = CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS)


@pytest.fixture
def db(client: pymongo.MongoClient):
    client.drop_database("raw_measurements")
    yield client.raw_measurements
    client.drop_database("raw_measurements")


def measurements(n: int) -> list[dict]:
    return [{"_id": i, "t": T0 + dt.timedelta(seconds=i), "tags": {"host": f"h{i % 4}"},
             "cpu": i % 100, "load": i / 7, "name": f"n{i % 3}"} for i in range(n)]


def buckets(db, name: str) -> list[dict]:
    coll = db.get_collection(f"system.buckets.{name}", codec_options=MS_CODEC)
    return [{k: v for k, v in b.items() if k != "_id"}
            for b in coll.find().sort([("control.min.t", 1), ("meta", 1)])]


def test_insert_many_and_body_documents_make_the_same_buckets(db) -> None:
    for name in ("seq", "body"):
        db.create_collection(name, timeseries={"timeField": "t", "metaField": "tags"})
    docs = measurements(5000)
    res = db.seq.insert_many(docs)  # kind-1 `documents`
    assert res.inserted_ids == list(range(5000))
    reply = db.command({"insert": "body", "documents": docs})  # kind-0 array
    assert reply["n"] == 5000
    got = buckets(db, "seq")
    assert len(got) >= 8 and got == buckets(db, "body")
    assert db.seq.count_documents({}) == 5000
    assert db.seq.find_one({"_id": 4321}, {"_id": 1, "cpu": 1}) == {"_id": 4321, "cpu": 21}


@pytest.mark.parametrize("ordered", [True, False])
def test_write_errors_through_the_driver_match_the_body_form(db, ordered: bool) -> None:
    for name in ("seq", "body"):
        db.create_collection(name, timeseries={"timeField": "t"})
    docs = measurements(10)
    docs[3] = {"_id": 3, "cpu": 1}  # no time field
    with pytest.raises(pymongo.errors.BulkWriteError) as exc:
        db.seq.insert_many(docs, ordered=ordered)
    seq_errors = [(e["index"], e["code"]) for e in exc.value.details["writeErrors"]]
    reply = db.command({"insert": "body", "documents": docs, "ordered": ordered})
    assert seq_errors == [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(3, 2)]
    assert exc.value.details["nInserted"] == reply["n"] == (3 if ordered else 9)
    assert buckets(db, "seq") == buckets(db, "body")


def _insert_frame(coll: str, docs: list[bytes], request_id: int) -> bytes:
    body = bson.encode({"insert": coll, "$db": "raw_measurements"})
    payload = b"documents\x00" + b"".join(docs)
    sections = b"\x00" + body + b"\x01" + struct.pack("<i", 4 + len(payload)) + payload
    return struct.pack("<iiii", 16 + 4 + len(sections), request_id, 0, 2013) + \
        b"\x00" * 4 + sections


@pytest.mark.parametrize("kind", ["plain", "timeseries"])
def test_malformed_document_in_a_sequence(server, db, kind: str) -> None:
    if kind == "timeseries":
        db.create_collection("c", timeseries={"timeField": "t"})
    good = [bson.encode(d) for d in measurements(3)]
    bad = bytearray(good[1])
    bad[4] = 0x66  # the first element's type byte: no such type
    with pytest.raises(bson.errors.InvalidBSON) as want:
        bson.decode(bytes(bad))
    raw = raw_connection(server)
    try:
        raw.send(_insert_frame("c", [good[0], bytes(bad), good[2]], 51))
        assert raw.recv_reply_doc() == {"ok": 0.0, "code": 22, "codeName": "InvalidBSON",
                                        "errmsg": f"invalid BSON in message: {want.value}"}
        raw.send(encode_op_msg({"ping": 1, "$db": "admin"}, 52, 0))
        assert raw.recv_reply_doc() == {"ok": 1.0}  # the connection is still usable
        raw.send(_insert_frame("c", good, 53))
        assert raw.recv_reply_doc() == {"n": 3, "ok": 1.0}
    finally:
        raw.close()
    assert db.c.count_documents({}) == 3  # the bad batch wrote nothing, the good one all
