"""Document sequences (OP_MSG kind 1) through `serve_connection`, in process: decoded
for every command but an insert into a time-series collection, whose `documents` reach
the bucket catalog as `RawDocuments`; either way the replies, the buckets and the
errors (a malformed document: InvalidBSON, connection kept) are those of the same
command sent with its documents in the body."""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import bson
import pytest
from bson.datetime_ms import DatetimeMS

from server.connection import serve_connection
from server.context import ServerState
from storage.timeseries.bucket_catalog import BucketCatalog
from storage.vocabulary.raw_documents import RawDocuments

from .harness import OP_MSG, FakeWriter, LogWatch, Reply, op_msg, reader_with, storage_state

T0 = dt.datetime(2024, 5, 1, 12, 0, 0)
TIMEOUT = 20.0


def op_msg_seq(body: dict[str, Any], name: str, docs: list[bytes] | bytes,
               request_id: int = 1) -> bytes:
    """An OP_MSG: `body` (kind 0) and one kind-1 section `name` of raw documents."""
    data = docs if isinstance(docs, bytes) else b"".join(docs)
    payload = name.encode() + b"\x00" + data
    sections = (b"\x00" + bson.encode(body) + b"\x01" + struct.pack("<i", 4 + len(payload))
                + payload)
    return struct.pack("<iiii", 16 + 4 + len(sections), request_id, 0, OP_MSG) + \
        b"\x00" * 4 + sections


def bad_document() -> bytes:
    doc = bytearray(bson.encode({"t": DatetimeMS(T0), "x": 1}))
    doc[4] = 0x77  # the first element's type byte: no such type
    return bytes(doc)


def measurements(n: int, *, start: int = 0) -> list[dict[str, Any]]:
    return [{"_id": start + i, "t": DatetimeMS(T0 + dt.timedelta(seconds=start + i)),
             "m": {"host": f"h{i % 3}"}, "v": i % 17, "w": float(i)} for i in range(n)]


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[ServerState]:
    async with storage_state(tmp_path / "db") as st:
        yield st


async def serve(state: ServerState, *frames: bytes) -> list[Reply]:
    writer = FakeWriter()
    await asyncio.wait_for(serve_connection(state, reader_with(*frames), writer), TIMEOUT)
    return writer.replies()


async def command(state: ServerState, body: dict[str, Any]) -> dict[str, Any]:
    [reply] = await serve(state, op_msg(body))
    return reply.doc


async def create_ts(state: ServerState, name: str) -> None:
    reply = await command(state, {"create": name, "timeseries": {"timeField": "t",
                                                                 "metaField": "m"},
                                  "$db": "test"})
    assert reply["ok"] == 1.0, reply


async def buckets(state: ServerState, name: str) -> list[dict[str, Any]]:
    reply = await command(state, {"find": f"system.buckets.{name}", "$db": "test",
                                  "sort": {"control.min.t": 1, "meta": 1}})
    assert reply["ok"] == 1.0, reply
    return [{k: v for k, v in b.items() if k != "_id"} for b in reply["cursor"]["firstBatch"]]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The type of the measurements each `BucketCatalog.insert_batch` call receives."""
    got: list[type] = []
    real = BucketCatalog.insert_batch

    def spy(self: BucketCatalog, coll: str, options: Any, ms: Any, *a: Any, **kw: Any) -> Any:
        got.append(type(ms))
        return real(self, coll, options, ms, *a, **kw)

    monkeypatch.setattr(BucketCatalog, "insert_batch", spy)
    return got


def insert_body(name: str, **extra: Any) -> dict[str, Any]:
    return {"insert": name, "$db": "test", **extra}


async def test_a_timeseries_insert_reaches_the_catalog_raw(state, seen) -> None:
    await create_ts(state, "raw")
    await create_ts(state, "dec")
    docs = measurements(3500)  # over 1000 a host: two buckets each
    [r1] = await serve(state, op_msg_seq(insert_body("raw"), "documents",
                                         [bson.encode(d) for d in docs]))
    assert seen == [RawDocuments]
    [r2] = await serve(state, op_msg({**insert_body("dec"), "documents": docs}))
    assert seen == [RawDocuments, list]
    assert r1.doc == r2.doc == {"n": 3500, "ok": 1.0}
    got = await buckets(state, "raw")
    assert len(got) == 6
    assert got == await buckets(state, "dec")
    assert state.opcounters["insert"] == 7000


async def test_a_plain_insert_and_other_sequences_are_decoded(state, seen) -> None:
    docs = [{"_id": i, "x": i} for i in range(5)]
    [r] = await serve(state, op_msg_seq(insert_body("plain"), "documents",
                                        [bson.encode(d) for d in docs]))
    assert r.doc == {"n": 5, "ok": 1.0} and seen == []
    upd = [bson.encode({"q": {"_id": 1}, "u": {"$set": {"x": 10}}})]
    [r] = await serve(state, op_msg_seq({"update": "plain", "$db": "test"}, "updates", upd))
    assert r.doc["nModified"] == 1
    dels = [bson.encode({"q": {"_id": 2}, "limit": 1})]
    [r] = await serve(state, op_msg_seq({"delete": "plain", "$db": "test"}, "deletes", dels))
    assert r.doc["n"] == 1
    reply = await command(state, {"find": "plain", "$db": "test", "sort": {"_id": 1}})
    assert [d["x"] for d in reply["cursor"]["firstBatch"]] == [0, 10, 3, 4]


async def test_raw_data_insert_into_buckets_is_decoded(state, seen) -> None:
    await create_ts(state, "rd")
    [r] = await serve(state, op_msg_seq(insert_body("rd", rawData=True), "documents",
                                        [bson.encode({"x": 1})]))
    assert seen == []  # writes the buckets collection itself, not through the catalog
    assert r.doc.get("ok") in (0.0, 1.0)


@pytest.mark.parametrize("ordered", [True, False])
async def test_write_errors_and_indexes_are_those_of_the_body_form(state, ordered) -> None:
    docs: list[dict[str, Any]] = measurements(6)
    docs[2] = {"_id": 102, "m": {"host": "h"}, "v": 1}  # no time field
    docs[4] = {"_id": 104, "t": "not a date", "v": 1}
    replies = []
    for name, frame in (("raw", op_msg_seq(insert_body("raw", ordered=ordered), "documents",
                                           [bson.encode(d) for d in docs])),
                        ("dec", op_msg({**insert_body("dec", ordered=ordered),
                                        "documents": docs}))):
        await create_ts(state, name)
        [r] = await serve(state, frame)
        replies.append(r.doc)
    assert replies[0] == replies[1]
    assert [e["index"] for e in replies[0]["writeErrors"]] == ([2] if ordered else [2, 4])
    assert replies[0]["n"] == (2 if ordered else 4)
    assert await buckets(state, "raw") == await buckets(state, "dec")


async def test_ids_are_given_and_kept_as_in_the_body_form(state) -> None:
    await create_ts(state, "ids")
    docs = [{"t": DatetimeMS(T0), "v": 1}, {"_id": "mine", "t": DatetimeMS(T0), "v": 2}]
    [r] = await serve(state, op_msg_seq(insert_body("ids"), "documents",
                                        [bson.encode(d) for d in docs]))
    assert r.doc == {"n": 2, "ok": 1.0}
    reply = await command(state, {"find": "ids", "$db": "test", "sort": {"v": 1}})
    got = reply["cursor"]["firstBatch"]
    assert isinstance(got[0]["_id"], bson.ObjectId) and got[1]["_id"] == "mine"


async def test_batch_size_limits_hold_for_a_raw_sequence(state) -> None:
    await create_ts(state, "big")
    one = bson.encode({"t": DatetimeMS(T0)})
    [r] = await serve(state, op_msg_seq(insert_body("big"), "documents", one * 100_001))
    assert r.doc["ok"] == 0.0 and r.doc["codeName"] == "InvalidLength"
    assert "Got 100001 operations" in r.doc["errmsg"]
    [r] = await serve(state, op_msg_seq(insert_body("big"), "documents", b""))
    assert r.doc["ok"] == 0.0 and r.doc["codeName"] == "InvalidLength"


@pytest.mark.parametrize("kind", ["plain", "timeseries"])
async def test_a_malformed_document_is_invalid_bson_and_the_connection_kept(
        state, seen, kind: str) -> None:
    if kind == "timeseries":
        await create_ts(state, "c")
    good = [bson.encode(d) for d in measurements(3)]
    with pytest.raises(bson.errors.InvalidBSON) as want:
        bson.decode(bad_document())
    frames = (op_msg_seq(insert_body("c"), "documents", [good[0], bad_document(), good[1]],
                         request_id=41),
              op_msg({"ping": 1, "$db": "admin"}, 42),
              op_msg({"count": "c", "$db": "test"}, 43))
    writer = FakeWriter()
    await asyncio.wait_for(serve_connection(state, reader_with(*frames), writer), TIMEOUT)
    err, pong, count = writer.replies()
    assert err.response_to == 41
    assert err.doc == {"ok": 0.0, "errmsg": f"invalid BSON in message: {want.value}",
                       "code": 22, "codeName": "InvalidBSON"}
    assert pong.response_to == 42 and pong.doc == {"ok": 1.0}
    assert count.doc["n"] == 0  # nothing of the batch was written
    assert seen == ([RawDocuments] if kind == "timeseries" else [])  # where it was found
    # and the next good batch goes in whole
    [r] = await serve(state, op_msg_seq(insert_body("c"), "documents", good))
    assert r.doc == {"n": 3, "ok": 1.0}


async def test_the_slow_query_log_counts_a_raw_sequence(state) -> None:
    await create_ts(state, "slow")
    state.params.set_runtime({"slowOpThresholdMs": -1})
    watch = LogWatch()
    docs = [bson.encode(d) for d in measurements(2)]
    [r] = await serve(state, op_msg_seq(insert_body("slow"), "documents", docs))
    assert r.doc["n"] == 2
    [line] = [ln for ln in watch.by_id(51803) if "insert" in ln["attr"]["command"]]
    assert line["attr"]["command"]["documents"] == "<2 items>"


@pytest.mark.parametrize("compressed", [False, True])
async def test_the_frame_pymongo_sends_for_insert_many_reaches_the_catalog_raw(
        state, seen, compressed: bool) -> None:
    from pymongo.compression_support import ZlibContext
    from pymongo.message import _op_msg

    await create_ts(state, "pm")
    docs = measurements(1500)
    # pymongo's own encoder: `documents` goes into a kind-1 section, as insert_many sends
    _rid, frame, _size, _max = _op_msg(0, {"insert": "pm", "ordered": True,
                                           "documents": docs}, "test", None,
                                       bson.DEFAULT_CODEC_OPTIONS,
                                       ZlibContext(-1) if compressed else None)
    [r] = await serve(state, frame)
    assert r.doc == {"n": 1500, "ok": 1.0}
    assert seen == [RawDocuments]
    await create_ts(state, "pm_body")
    await command(state, {**insert_body("pm_body"), "documents": docs})
    assert await buckets(state, "pm") == await buckets(state, "pm_body")
