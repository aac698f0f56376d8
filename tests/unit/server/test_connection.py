"""`server.connection.serve_connection` over in-memory streams: an `asyncio.StreamReader`
fed with wire bytes built in `harness` (independently of `protocol.wire`) and a fake
writer that records what the server writes. No socket, no driver.

Checked: the OP_MSG round trip (ids, flags, bytes accounted), frames split across reads,
the OP_QUERY handshake and its OP_REPLY, OP_COMPRESSED both ways with the compression
counters, checksums, a malformed frame closing only its own connection (with its log
line) while a sound frame with bad content is answered and the connection kept,
moreToCome giving no reply, and the exhaust stream of an awaitable hello."""

from __future__ import annotations

import asyncio
import itertools
import struct
from pathlib import Path

import bson
import pytest
from bson import Int64, ObjectId

from server.connection import serve_connection
from server.context import ServerState

from .harness import (
    CHECKSUM_PRESENT,
    EXHAUST_ALLOWED,
    MORE_TO_COME,
    OP_COMPRESSED,
    OP_MSG,
    OP_REPLY,
    ZLIB,
    FakeWriter,
    LogWatch,
    bare_state,
    op_msg,
    op_query,
    reader_with,
    storage_state,
    zlib_compressed,
)

TIMEOUT = 5.0


@pytest.fixture
def state() -> ServerState:
    return bare_state()


async def serve(state: ServerState, *frames: bytes,
                writer: FakeWriter | None = None) -> FakeWriter:
    """Feed `frames`, then EOF; serve until the connection ends."""
    writer = writer or FakeWriter()
    await asyncio.wait_for(serve_connection(state, reader_with(*frames), writer), TIMEOUT)
    return writer


def ping(request_id: int = 1, flags: int = 0, db: str = "admin") -> bytes:
    return op_msg({"ping": 1, "$db": db}, request_id, flags)


# -- OP_MSG ------------------------------------------------------------------------------------
async def test_a_command_round_trip(state: ServerState) -> None:
    log = LogWatch()
    frame = ping(request_id=41)
    writer = await serve(state, frame)
    [reply] = writer.replies()
    assert reply.op_code == OP_MSG
    assert (reply.request_id, reply.response_to) == (1, 41)
    assert reply.flags == 0 and reply.checksum_ok is None
    assert reply.doc == {"ok": 1.0}
    assert state.num_requests == 1
    assert state.bytes_in == len(frame)
    assert state.bytes_out == len(writer.data) == reply.wire_length
    assert writer.closed
    assert state.connections == {}  # the connection left the table
    assert state.total_connections_created == 1
    [accepted] = log.by_id(22943)
    assert accepted["attr"]["remote"] == "127.0.0.1:50123"
    assert accepted["attr"]["connectionCount"] == 1
    [ended] = log.by_id(22944)
    assert ended["ctx"] == f"conn{accepted['attr']['connectionId']}"
    assert ended["attr"]["connectionCount"] == 0


async def test_replies_are_numbered_and_answer_their_requests(state: ServerState) -> None:
    writer = await serve(state, ping(request_id=10), ping(request_id=20),
                         op_msg({"frobnicate": 1, "$db": "test"}, 30))
    replies = writer.replies()
    assert [(r.request_id, r.response_to) for r in replies] == [(1, 10), (2, 20), (3, 30)]
    assert replies[2].doc["code"] == 59 and replies[2].doc["ok"] == 0.0
    assert state.num_requests == 3


async def test_frames_split_across_reads(state: ServerState) -> None:
    reader = reader_with(eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    frame = ping(request_id=7) + ping(request_id=8)
    cut = len(frame) // 2 + 3  # inside the second frame
    reader.feed_data(frame[:5])
    for _ in range(5):
        await asyncio.sleep(0)
    assert writer.data == b""  # a header alone is not a message
    reader.feed_data(frame[5:cut])
    [first] = await writer.wait_for_replies(1)
    assert first.response_to == 7
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(writer.replies()) == 1
    reader.feed_data(frame[cut:])
    second = (await writer.wait_for_replies(2))[1]
    assert second.response_to == 8
    reader.feed_eof()
    await asyncio.wait_for(task, TIMEOUT)
    assert writer.closed


async def test_the_peer_address_is_the_connection_remote(state: ServerState) -> None:
    writer = FakeWriter(peer=("::1", 50999, 0, 0))  # type: ignore[arg-type]
    await serve(state, op_msg({"whatsmyuri": 1, "$db": "admin"}), writer=writer)
    assert writer.replies()[0].doc == {"you": "[::1]:50999", "ok": 1.0}


async def test_a_full_write_buffer_is_drained(state: ServerState) -> None:
    writer = FakeWriter()
    await serve(state, ping(), writer=writer)
    assert writer.drains == 0
    busy = FakeWriter()
    busy.transport.buffer_size = 2 * 1024 * 1024  # the peer is not reading
    await serve(state, ping(), writer=busy)
    assert busy.drains == 1


async def test_checksum_requested_checksum_replied(state: ServerState) -> None:
    writer = await serve(state, ping(request_id=3, flags=CHECKSUM_PRESENT))
    [reply] = writer.replies()
    assert reply.flags & CHECKSUM_PRESENT
    assert reply.checksum_ok is True
    assert reply.doc == {"ok": 1.0}


async def test_a_server_shutting_down_reads_nothing(state: ServerState) -> None:
    state.shutting_down.set()
    writer = await serve(state, ping())
    assert writer.data == b"" and writer.closed
    assert state.num_requests == 0


# -- OP_QUERY handshake ------------------------------------------------------------------------
async def test_op_query_handshake_answers_op_reply(state: ServerState) -> None:
    writer = await serve(state, op_query({"isMaster": 1, "helloOk": True,
                                          "client": {"application": {"name": "unit"}},
                                          "compression": ["zlib"]}, request_id=99))
    [reply] = writer.replies()
    assert reply.op_code == OP_REPLY
    assert reply.response_to == 99 and reply.number_returned == 1
    assert reply.flags == 0
    doc = reply.doc
    assert doc["ok"] == 1.0 and doc["ismaster"] is True and doc["helloOk"] is True
    assert doc["compression"] == ["zlib"]
    assert doc["maxWireVersion"] >= 17 and doc["maxBsonObjectSize"] == 16 * 1024 * 1024


async def test_op_query_with_a_query_wrapper(state: ServerState) -> None:
    writer = await serve(state, op_query({"$query": {"hello": 1},
                                          "$readPreference": {"mode": "primary"}}))
    assert writer.replies()[0].doc["isWritablePrimary"] is True


async def test_op_query_for_anything_but_the_handshake(state: ServerState) -> None:
    writer = await serve(state, op_query({"ping": 1}, request_id=5),
                         op_query({"find": "c"}, request_id=6, ns="test.c"),
                         ping(request_id=7))
    refused, legacy, after = writer.replies()
    assert refused.op_code == OP_REPLY and refused.response_to == 5
    assert (refused.doc["ok"], refused.doc["code"]) == (0.0, 352)
    assert refused.doc["codeName"] == "UnsupportedOpQueryCommand"
    assert legacy.op_code == OP_REPLY and legacy.response_to == 6
    assert legacy.doc == {"$err": "OP_QUERY is no longer supported", "code": 5739101,
                          "ok": 0.0}
    assert after.doc == {"ok": 1.0}  # the connection stays usable


# -- OP_COMPRESSED -----------------------------------------------------------------------------
def hello_zlib(request_id: int = 1) -> bytes:
    return op_msg({"hello": 1, "compression": ["zlib"], "$db": "admin"}, request_id)


async def test_compressed_request_gets_a_compressed_reply(state: ServerState) -> None:
    request = zlib_compressed(ping(request_id=2))
    writer = await serve(state, hello_zlib(1), request)
    hello, reply = writer.replies()
    assert hello.doc["compression"] == ["zlib"] and hello.compressor_id is None
    assert reply.compressor_id == ZLIB
    assert struct.unpack_from("<i", writer.data, hello.wire_length + 12)[0] == OP_COMPRESSED
    assert reply.op_code == OP_MSG and reply.response_to == 2
    assert reply.doc == {"ok": 1.0}
    counters = state.compression["zlib"]
    assert counters["decompressor"] == {"bytesIn": len(request), "bytesOut": len(ping(2))}
    reply_plain = len(op_msg({"ok": 1.0}))
    assert counters["compressor"] == {"bytesIn": reply_plain, "bytesOut": reply.wire_length}


async def test_hello_replies_are_never_compressed(state: ServerState) -> None:
    writer = await serve(state, hello_zlib(1), zlib_compressed(hello_zlib(2)))
    _first, second = writer.replies()
    assert second.compressor_id is None and second.doc["ok"] == 1.0
    zlib = state.compression["zlib"]
    assert zlib["decompressor"]["bytesIn"] > 0  # the request was compressed
    assert zlib["compressor"] == {"bytesIn": 0, "bytesOut": 0}  # no reply was


async def test_a_compressor_not_negotiated_is_not_used_for_the_reply(
        state: ServerState) -> None:
    writer = await serve(state, zlib_compressed(ping(request_id=4)))
    [reply] = writer.replies()
    assert reply.compressor_id is None  # the request could be read, the reply is plain
    assert reply.doc == {"ok": 1.0} and reply.response_to == 4


# -- malformed input ---------------------------------------------------------------------------
def _warning(log: LogWatch) -> dict:
    [line] = log.by_id(22988)
    assert line["s"] == "W"
    return line["attr"]


@pytest.mark.parametrize(("frame", "code", "code_name"), [
    (struct.pack("<iiii", 8, 1, 0, OP_MSG), 17, "ProtocolError"),  # shorter than a header
    (struct.pack("<iiii", 48_000_001, 1, 0, OP_MSG), 17, "ProtocolError"),  # too long
    (op_msg({"ping": 1, "$db": "admin"}, 1, flags=1 << 3), 223, "IllegalOpMsgFlag"),
    (struct.pack("<iiii", 20, 1, 0, 2001) + b"\0\0\0\0", 17, "ProtocolError"),  # OP_UPDATE
    (ping(flags=CHECKSUM_PRESENT)[:-4] + bytes(4), 288, "ChecksumMismatch"),
])
async def test_a_malformed_frame_ends_the_connection(state: ServerState, frame: bytes,
                                                     code: int, code_name: str) -> None:
    log = LogWatch()
    writer = await serve(state, ping(request_id=1), frame, ping(request_id=3))
    replies = writer.replies()
    assert [r.response_to for r in replies] == [1]  # nothing after the bad frame
    assert writer.closed and state.connections == {}
    attr = _warning(log)
    assert attr["error"]["code"] == code and attr["error"]["codeName"] == code_name
    assert attr["remote"] == "127.0.0.1:50123"
    assert 22944 in log.ids()


async def test_a_bad_frame_closes_only_its_own_connection(state: ServerState) -> None:
    good_reader = reader_with(eof=False)
    good = FakeWriter(peer=("127.0.0.1", 1111))
    good_task = asyncio.create_task(serve_connection(state, good_reader, good))
    good_reader.feed_data(ping(request_id=1))
    await good.wait_for_replies(1)
    bad = await serve(state, struct.pack("<iiii", 3, 1, 0, OP_MSG))
    assert bad.closed and bad.data == b""
    assert not good.closed and len(state.connections) == 1
    good_reader.feed_data(ping(request_id=2))
    replies = await good.wait_for_replies(2)
    assert replies[1].response_to == 2 and replies[1].doc == {"ok": 1.0}
    good_reader.feed_eof()
    await asyncio.wait_for(good_task, TIMEOUT)


async def test_bad_content_in_a_sound_frame_is_answered_and_the_connection_kept(
        state: ServerState) -> None:
    log = LogWatch()
    bad_bson = op_msg(struct.pack("<i", 3) + b"\0", request_id=50)  # size 3: not BSON
    no_body = struct.pack("<iiiiI", 20, 51, 0, OP_MSG, 0)  # flags, no section
    writer = await serve(state, bad_bson, no_body, ping(request_id=52))
    invalid, bodyless, after = writer.replies()
    assert invalid.response_to == 50
    assert (invalid.doc["ok"], invalid.doc["code"], invalid.doc["codeName"]) == (
        0.0, 22, "InvalidBSON")
    assert bodyless.response_to == 51 and bodyless.doc["code"] == 40587
    assert after.response_to == 52 and after.doc == {"ok": 1.0}
    assert 22988 not in log.ids()
    assert state.num_requests == 1  # only the sound request ran


async def test_invalid_bson_inside_the_document(state: ServerState) -> None:
    doc = bytearray(bson.encode({"ping": 1, "$db": "admin"}))
    doc[4] = 0x7F  # an element type that does not exist
    writer = await serve(state, op_msg(bytes(doc), request_id=60), ping(request_id=61))
    invalid, after = writer.replies()
    assert invalid.doc["code"] == 22 and invalid.response_to == 60
    assert after.doc == {"ok": 1.0}


# -- moreToCome --------------------------------------------------------------------------------
async def test_more_to_come_runs_the_command_without_a_reply(state: ServerState) -> None:
    writer = await serve(state, ping(request_id=5, flags=MORE_TO_COME), ping(request_id=6))
    [reply] = writer.replies()
    assert reply.response_to == 6
    assert state.command_counts["ping"] == 2
    assert state.num_requests == 2


async def test_an_unacknowledged_insert_is_written(tmp_path: Path) -> None:
    async with storage_state(tmp_path / "db") as state:
        insert = op_msg({"insert": "c", "documents": [{"_id": 1}, {"_id": 2}],
                         "writeConcern": {"w": 0}, "$db": "test"}, 1, MORE_TO_COME)
        find = op_msg({"find": "c", "sort": {"_id": 1}, "$db": "test"}, 2)
        writer = await serve(state, insert, find)
        [reply] = writer.replies()
        assert reply.response_to == 2
        assert reply.doc["cursor"]["firstBatch"] == [{"_id": 1}, {"_id": 2}]
        assert state.opcounters["insert"] == 2


# -- exhaust -----------------------------------------------------------------------------------
def awaitable_hello(state: ServerState, max_await_ms: int, request_id: int = 9,
                    process_id: ObjectId | None = None, flags: int = EXHAUST_ALLOWED) -> bytes:
    return op_msg({"hello": 1, "$db": "admin", "maxAwaitTimeMS": max_await_ms,
                   "topologyVersion": {"processId": process_id or state.process_id,
                                       "counter": Int64(0)}}, request_id, flags)


async def test_exhaust_hello_streams_until_the_client_goes_away(state: ServerState) -> None:
    reader = reader_with(awaitable_hello(state, 10), eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    replies = await writer.wait_for_replies(3)
    assert replies[0].response_to == 9
    for prev, nxt in itertools.pairwise(replies):
        assert nxt.response_to == prev.request_id  # each answers the previous reply
    assert all(r.flags & MORE_TO_COME for r in replies)
    assert all(r.doc["ok"] == 1.0 and r.doc["isWritablePrimary"] for r in replies)
    assert all(r.doc["topologyVersion"]["processId"] == state.process_id for r in replies)
    reader.feed_eof()
    await asyncio.wait_for(task, TIMEOUT)
    assert writer.closed and state.connections == {}
    assert state.num_requests == 1  # one request, many replies
    # the hello running when the client left is not answered
    assert len(writer.replies()) <= state.command_counts["hello"] <= len(writer.replies()) + 1


async def test_shutdown_ends_an_exhaust_stream(state: ServerState) -> None:
    reader = reader_with(awaitable_hello(state, 60_000), eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    await asyncio.sleep(0.05)
    assert writer.data == b""  # the hello is waiting for a topology change
    state.shutting_down.set()
    await asyncio.wait_for(task, TIMEOUT)
    [reply] = writer.replies()
    assert reply.doc["ok"] == 1.0 and reply.response_to == 9
    assert writer.closed


@pytest.mark.parametrize("body", [
    {"hello": 1, "$db": "admin"},  # not awaitable
    {"ping": 1, "$db": "admin"},
    {"hello": 1, "$db": "admin", "maxAwaitTimeMS": 10},  # awaitable needs both: an error
])
async def test_exhaust_allowed_without_an_awaitable_hello_is_one_reply(
        state: ServerState, body: dict) -> None:
    writer = await serve(state, op_msg(body, 4, EXHAUST_ALLOWED))
    [reply] = writer.replies()
    assert reply.flags & MORE_TO_COME == 0 and reply.response_to == 4


async def test_awaitable_hello_without_exhaust_is_one_reply(state: ServerState) -> None:
    reader = reader_with(awaitable_hello(state, 10, flags=0), eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    [reply] = await writer.wait_for_replies(1)
    assert reply.flags == 0 and reply.doc["ok"] == 1.0
    await asyncio.sleep(0.05)
    assert len(writer.replies()) == 1
    reader.feed_eof()
    await asyncio.wait_for(task, TIMEOUT)


async def test_a_client_leaving_ends_its_awaitable_hello_at_once(state: ServerState) -> None:
    """A closed client's streaming monitor: its connection ends when the client goes,
    not when maxAwaitTimeMS runs out."""
    reader = reader_with(awaitable_hello(state, 600_000), eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    await asyncio.sleep(0.05)
    assert not task.done() and writer.data == b""  # waiting for a topology change
    reader.feed_eof()
    await asyncio.wait_for(task, TIMEOUT)
    assert writer.closed and state.connections == {} and writer.data == b""


async def test_exhaust_with_another_process_topology_waits_after_the_first_reply(
        state: ServerState) -> None:
    reader = reader_with(awaitable_hello(state, 30, process_id=ObjectId()), eof=False)
    writer = FakeWriter()

    def hang_up_at_300(w: FakeWriter) -> None:
        if w.writes >= 300:
            w.close()  # the peer goes away: the next write fails

    writer.on_write = hang_up_at_300
    task = asyncio.create_task(serve_connection(state, reader, writer))
    await asyncio.sleep(0.1)
    written = len(writer.replies())
    reader.feed_eof()
    await asyncio.wait_for(task, TIMEOUT)
    assert 1 <= written <= 6  # one at once, then one per maxAwaitTimeMS
