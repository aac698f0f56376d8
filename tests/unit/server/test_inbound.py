"""Limits on partly received messages (`server.inbound`) and the server-wide memory for
them (`server.message_memory`), over in-memory streams.

Checked: a connection idle between messages is never dropped; a stalled partial
message and one trickled slower than the minimum rate are dropped with mongod's
"Error receiving request" line (NetworkTimeout); a message sent slowly but above the
minimum rate is answered even though it takes longer than the timeout; a message whose
announced length does not fit in the memory left waits, small requests are granted
around it, it proceeds once memory is given back, and is closed (ExceededMemoryLimit)
when the wait runs out; memory is given back when a connection ends mid-message."""

from __future__ import annotations

import asyncio

import bson
import pytest

from server.connection import serve_connection
from server.context import ServerState
from server.message_memory import MessageMemory

from .harness import FakeWriter, LogWatch, bare_state, op_msg, reader_with

BOUND = 10.0  # a hang guard only; no assertion is about durations
MB = 1_000_000


@pytest.fixture
def state() -> ServerState:
    s = bare_state()
    s.params.set_runtime({"incomingMessageTimeoutSecs": 1})
    return s


def ping(request_id: int = 1, pad: int = 0) -> bytes:
    body: dict = {"ping": 1, "$db": "admin"}
    if pad:
        body["comment"] = "x" * pad
    return op_msg(body, request_id)


def header_of(length: int) -> bytes:
    """The first bytes of a message announcing `length` bytes."""
    return length.to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes(4) \
        + (2013).to_bytes(4, "little")


def dropped_for(log: LogWatch, code_name: str) -> bool:
    return any(line["attr"]["error"]["codeName"] == code_name for line in log.by_id(22988))


async def test_an_idle_connection_between_messages_stays(state: ServerState) -> None:
    reader = reader_with(ping(1), eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    await writer.wait_for_replies(1)
    await asyncio.sleep(1.5)  # longer than incomingMessageTimeoutSecs, with nothing buffered
    assert not task.done()
    reader.feed_data(ping(2))
    replies = await writer.wait_for_replies(2)
    assert [r.response_to for r in replies] == [1, 2]
    reader.feed_eof()
    await asyncio.wait_for(task, BOUND)


async def test_a_stalled_partial_message_is_dropped(state: ServerState) -> None:
    log = LogWatch()
    frame = ping(pad=10_000)
    reader = reader_with(frame[:len(frame) // 2], eof=False)
    writer = FakeWriter()
    await asyncio.wait_for(serve_connection(state, reader, writer), BOUND)
    assert writer.closed and writer.data == b"" and state.connections == {}
    assert dropped_for(log, "NetworkTimeout")


async def test_a_trickled_message_is_dropped(state: ServerState) -> None:
    """100 bytes every 50 ms is 2 KB/s, under the 4 KiB/s minimum: it falls behind."""
    log = LogWatch()
    frame = ping(pad=100_000)
    reader = reader_with(eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    sent = 0
    while not task.done() and sent < len(frame):
        reader.feed_data(frame[sent:sent + 100])
        sent += 100
        await asyncio.sleep(0.05)
    await asyncio.wait_for(task, BOUND)
    assert sent < len(frame) and writer.data == b""
    assert dropped_for(log, "NetworkTimeout")


async def test_a_slow_message_above_the_minimum_rate_is_answered(state: ServerState) -> None:
    """A client on a slow link: 2 s for its message, twice the timeout, at a rate the
    minimum allows."""
    state.params.set_runtime({"incomingMessageMinBytesPerSec": 1000})
    frame = ping(7, pad=6_000)
    reader = reader_with(eof=False)
    writer = FakeWriter()
    task = asyncio.create_task(serve_connection(state, reader, writer))
    for i in range(0, len(frame), 200):  # 200 bytes per 0.066 s: 3000 B/s
        reader.feed_data(frame[i:i + 200])
        await asyncio.sleep(0.066)
    [reply] = await writer.wait_for_replies(1)
    assert reply.response_to == 7 and reply.doc["ok"] == 1.0
    reader.feed_eof()
    await asyncio.wait_for(task, BOUND)


async def test_memory_wait_then_proceed_then_time_out(state: ServerState) -> None:
    """With the cap at one maximum-size message: a second large message waits while a
    small one is served; it proceeds when the first connection goes; a third that
    finds no memory within the wait is closed."""
    log = LogWatch()
    state.params.set_runtime({"incomingMessageMemoryLimitBytes": 48 * MB,
                              "incomingMessageTimeoutSecs": 60,
                              "incomingMessageMemoryWaitSecs": 1})
    memory = state.message_memory
    first = reader_with(header_of(40 * MB) + bytes(1000), eof=False)
    t1 = asyncio.create_task(serve_connection(state, first, FakeWriter()))
    await asyncio.sleep(0.05)
    assert memory.in_use == 40 * MB
    state.params.set_runtime({"incomingMessageMemoryWaitSecs": 30})
    second = reader_with(header_of(30 * MB) + bytes(1000), eof=False)
    t2 = asyncio.create_task(serve_connection(state, second, FakeWriter()))
    await asyncio.sleep(0.05)
    assert memory.waiting == 1 and memory.in_use == 40 * MB
    # a small message split across reads still gets its memory: first fit
    frame = ping(3, pad=100_000)
    small = reader_with(frame[:50_000], eof=False)
    small_writer = FakeWriter()
    t3 = asyncio.create_task(serve_connection(state, small, small_writer))
    await asyncio.sleep(0.05)
    small.feed_data(frame[50_000:])
    [reply] = await small_writer.wait_for_replies(1)
    assert reply.doc["ok"] == 1.0 and memory.waiting == 1
    first.feed_eof()  # the first client goes away mid-message: its memory is given back
    await asyncio.wait_for(t1, BOUND)
    await asyncio.sleep(0.05)
    assert memory.waiting == 0 and memory.in_use == 30 * MB and not t2.done()
    state.params.set_runtime({"incomingMessageMemoryWaitSecs": 1})
    third = reader_with(header_of(30 * MB) + bytes(10), eof=False)
    third_writer = FakeWriter()
    await asyncio.wait_for(serve_connection(state, third, third_writer), BOUND)
    assert third_writer.closed and dropped_for(log, "ExceededMemoryLimit")
    assert memory.timeouts == 1 and memory.in_use == 30 * MB
    second.feed_eof()
    small.feed_eof()
    await asyncio.wait_for(asyncio.gather(t2, t3), BOUND)
    assert memory.in_use == 0


async def test_message_memory_first_fit_and_hand_on() -> None:
    limit = 100 * MB
    memory = MessageMemory(lambda: limit)
    assert await memory.acquire(60 * MB, 1)
    big = asyncio.create_task(memory.acquire(60 * MB, 5))
    await asyncio.sleep(0)
    assert memory.waiting == 1
    assert await memory.acquire(30 * MB, 1)  # fits beside the first: granted at once
    memory.release(60 * MB)
    assert await asyncio.wait_for(big, BOUND) and memory.in_use == 90 * MB
    assert not await memory.acquire(20 * MB, 0.05)
    assert memory.timeouts == 1 and memory.waiting == 0 and memory.in_use == 90 * MB
    memory.release(60 * MB)
    memory.release(30 * MB)
    assert memory.in_use == 0


def test_the_cap_is_never_below_one_largest_message() -> None:
    assert MessageMemory(lambda: 1000).limit == 48_000_000
    automatic = MessageMemory(lambda: 0).limit
    assert 96_000_000 <= automatic <= 1 << 30


def test_serverstatus_fields_are_bson() -> None:
    state = bare_state()
    bson.encode(state.message_memory.status())
