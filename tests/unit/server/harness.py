"""In-process harness for the server's dispatch, connection and cursor tests.

No sockets and no pymongo: a real `ServerState` (with a real `StorageService` on a
temporary dbpath when a test needs storage), an `asyncio.StreamReader` fed with raw
wire bytes, and a fake writer that records what the server writes (uvicorn's
MockTransport idea). The wire builders and the reply parser here are written from the
wire-protocol specification, independently of `protocol.wire`, so a test of the server
does not trust the encoder it is checking.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bson
import crc32c

from server.config import Config
from server.context import ServerState
from server.cursors import CursorManager
from server.log import LOG

OP_REPLY = 1
OP_QUERY = 2004
OP_COMPRESSED = 2012
OP_MSG = 2013
CHECKSUM_PRESENT = 1 << 0
MORE_TO_COME = 1 << 1
EXHAUST_ALLOWED = 1 << 16
ZLIB = 2


# -- state --------------------------------------------------------------------------------------
def bare_state() -> ServerState:
    """A server state with cursors but no storage (enough for hello, ping, ...)."""
    state = ServerState(Config(dbpath="/nonexistent-bucketd-unit"))
    state.cursors = CursorManager()
    return state


@contextlib.asynccontextmanager
async def storage_state(dbpath: Path) -> AsyncIterator[ServerState]:
    """A server state with a real storage service on `dbpath`, closed afterwards."""
    from server.storage_service import StorageService

    state = ServerState(Config(dbpath=str(dbpath)))
    state.cursors = CursorManager()
    state.storage = await StorageService.open(str(dbpath), state)
    try:
        yield state
    finally:
        state.cursors.close_all()
        await state.storage.close()


# -- log ----------------------------------------------------------------------------------------
class LogWatch:
    """The structured log lines written since it was made, decoded."""

    def __init__(self) -> None:
        self._start = LOG.total_lines

    def lines(self) -> list[dict[str, Any]]:
        n = LOG.total_lines - self._start
        assert n <= (LOG.recent.maxlen or 0), "too many log lines to inspect"
        recent = list(LOG.recent)[len(LOG.recent) - n:] if n else []
        from bson import json_util

        return [json_util.loads(line) for line in recent]

    def ids(self) -> list[int]:
        return [line["id"] for line in self.lines()]

    def by_id(self, log_id: int) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["id"] == log_id]


# -- requests -----------------------------------------------------------------------------------
def _header(length: int, request_id: int, response_to: int, op_code: int) -> bytes:
    return struct.pack("<iiii", length, request_id, response_to, op_code)


def op_msg(body: dict[str, Any] | bytes, request_id: int = 1, flags: int = 0) -> bytes:
    """An OP_MSG with one kind-0 section; a CRC-32C checksum when its flag is set."""
    doc = body if isinstance(body, bytes) else bson.encode(body)
    length = 16 + 4 + 1 + len(doc) + (4 if flags & CHECKSUM_PRESENT else 0)
    msg = _header(length, request_id, 0, OP_MSG) + struct.pack("<I", flags) + b"\x00" + doc
    if flags & CHECKSUM_PRESENT:
        msg += struct.pack("<I", crc32c.crc32c(msg))
    return msg


def op_query(query: dict[str, Any], request_id: int = 1, ns: str = "admin.$cmd") -> bytes:
    rest = (struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<ii", 0, -1)
            + bson.encode(query))
    return _header(16 + len(rest), request_id, 0, OP_QUERY) + rest


def zlib_compressed(message: bytes) -> bytes:
    """`message` wrapped in OP_COMPRESSED (zlib), keeping its ids."""
    length, request_id, response_to, op_code = struct.unpack_from("<iiii", message)
    payload = zlib.compress(message[16:])
    rest = struct.pack("<iiB", op_code, length - 16, ZLIB) + payload
    return _header(16 + len(rest), request_id, response_to, OP_COMPRESSED) + rest


# -- replies ------------------------------------------------------------------------------------
@dataclass
class Reply:
    op_code: int  # of the message inside OP_COMPRESSED when compressed
    request_id: int
    response_to: int
    flags: int  # OP_MSG flagBits, or OP_REPLY responseFlags
    doc: dict[str, Any]
    wire_length: int
    compressor_id: int | None = None
    checksum_ok: bool | None = None  # None: no checksum present
    number_returned: int | None = None  # OP_REPLY only


def parse_replies(data: bytes) -> list[Reply]:
    """Cut what the server wrote into replies; fails on trailing partial bytes."""
    out: list[Reply] = []
    pos = 0
    while pos < len(data):
        assert len(data) - pos >= 16, "a partial header was written"
        length, request_id, response_to, op_code = struct.unpack_from("<iiii", data, pos)
        assert pos + length <= len(data), "a partial message was written"
        frame = data[pos:pos + length]
        pos += length
        compressor: int | None = None
        if op_code == OP_COMPRESSED:
            op_code, size, compressor = struct.unpack_from("<iiB", frame, 16)
            assert compressor == ZLIB, f"unexpected compressor {compressor}"
            inner = zlib.decompress(frame[25:])
            assert len(inner) == size
            frame = _header(16 + size, request_id, response_to, op_code) + inner
        if op_code == OP_MSG:
            flags = struct.unpack_from("<I", frame, 16)[0]
            end = len(frame)
            checksum_ok = None
            if flags & CHECKSUM_PRESENT:
                end -= 4
                checksum_ok = struct.unpack_from("<I", frame, end)[0] == crc32c.crc32c(
                    frame[:end])
            assert frame[20] == 0, "reply body is not a kind-0 section"
            doc_len = struct.unpack_from("<i", frame, 21)[0]
            assert 21 + doc_len == end, "reply carries more than one section"
            doc = bson.decode(frame[21:end])
            out.append(Reply(op_code, request_id, response_to, flags, doc, length, compressor,
                             checksum_ok))
        elif op_code == OP_REPLY:
            flags, cursor_id, _start, n = struct.unpack_from("<iqii", frame, 16)
            assert cursor_id == 0
            docs = bson.decode_all(frame[36:])
            assert len(docs) == n == 1
            out.append(Reply(op_code, request_id, response_to, flags, docs[0], length,
                             compressor, None, n))
        else:
            raise AssertionError(f"server wrote opCode {op_code}")
    return out


# -- a connection without a socket --------------------------------------------------------------
class FakeTransport:
    def __init__(self) -> None:
        self.buffer_size = 0
        self.closing = False

    def get_write_buffer_size(self) -> int:
        return self.buffer_size

    def is_closing(self) -> bool:
        return self.closing


class FakeWriter:
    """Stands in for `asyncio.StreamWriter`: records writes, drains, close."""

    def __init__(self, peer: tuple[str, int] = ("127.0.0.1", 50123),
                 sock: tuple[str, int] = ("127.0.0.1", 27017)) -> None:
        self.transport = FakeTransport()
        self.data = bytearray()
        self.writes = 0
        self.drains = 0
        self.closed = False
        self.on_write: Callable[[FakeWriter], None] | None = None
        self._extra = {"peername": peer, "sockname": sock}
        self._changed = asyncio.Event()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def write(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("write after close")
        self.data += data
        self.writes += 1
        self._changed.set()
        if self.on_write is not None:
            self.on_write(self)

    async def drain(self) -> None:
        self.drains += 1

    def close(self) -> None:
        self.closed = True
        self.transport.closing = True

    async def wait_closed(self) -> None:
        return None

    def replies(self) -> list[Reply]:
        return parse_replies(bytes(self.data))

    async def wait_for_replies(self, n: int, timeout: float = 5.0) -> list[Reply]:
        async def wait() -> list[Reply]:
            while True:
                got = self.replies()
                if len(got) >= n:
                    return got
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(wait(), timeout)


def reader_with(*frames: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for frame in frames:
        reader.feed_data(frame)
    if eof:
        reader.feed_eof()
    return reader
