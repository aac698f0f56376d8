"""Floor servers: what any server could reach with the same clients on this machine.

The canned floor answers the driver handshake with a MongoDB 8.0 hello and every other
command with `{n: 1000, ok: 1}` without decoding it, so a run against it measures only
what the clients themselves cost (encoding, sending, waiting). The decode floor
(`--decode`, on uvloop like bucketd) also decodes each OP_MSG with pymongo's `bson` —
the body and every document sequence, into dicts, as a server written in Python that
looks at the documents must at least — and acknowledges `n` documents.

    python bench/_canned.py [--decode]   # prints the port, then serves until killed
"""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
import sys

import bson

DECODE = "--decode" in sys.argv

OP_MSG = 2013
_ACK = b"\x00" + bson.encode({"n": 1000, "ok": 1.0})


def _hello() -> bytes:
    return b"\x00" + bson.encode({
        "isWritablePrimary": True, "helloOk": True, "maxBsonObjectSize": 16 * 1024 * 1024,
        "maxMessageSizeBytes": 48_000_000, "maxWriteBatchSize": 100_000,
        "localTime": dt.datetime.now(dt.UTC), "logicalSessionTimeoutMinutes": 30,
        "connectionId": 1, "minWireVersion": 0, "maxWireVersion": 25, "readOnly": False,
        "ok": 1.0})


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    hello = _hello()
    try:
        while True:
            head = await reader.readexactly(16)
            length, rid, _to, op = struct.unpack("<iiii", head)
            body = await reader.readexactly(length - 16)
            # OP_MSG: flags, kind 0, then the body document; the command name is its first key.
            first = body[5 + 4 + 1:body.index(b"\x00", 10)] if op == OP_MSG else b""
            if first.lower() in (b"hello", b"ismaster"):
                reply = hello
            elif DECODE and op == OP_MSG:
                reply = b"\x00" + bson.encode({"n": _decode_op_msg(body), "ok": 1.0})
            else:
                reply = _ACK
            writer.write(struct.pack("<iiiii", 20 + len(reply), 1, rid, OP_MSG, 0) + reply)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _decode_op_msg(body: bytes) -> int:
    """Decode every section of an OP_MSG (after the header); the number of documents in
    its sequences (or in a `documents` array of the body)."""
    pos, end, n = 4, len(body), 0
    decoded: dict = {}
    while pos < end:
        kind = body[pos]
        pos += 1
        size = struct.unpack_from("<i", body, pos)[0]
        if kind == 0:
            decoded = bson.decode(body[pos:pos + size])
            n = max(n, len(decoded.get("documents", ())))
        else:
            nul = body.index(b"\x00", pos + 4)
            n += len(bson.decode_all(body[nul + 1:pos + size]))
        pos += size
    return n


async def _main() -> None:
    srv = await asyncio.start_server(_handle, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        import uvloop
    except ImportError:  # the floor without it is a little lower
        asyncio.run(_main())
    else:
        uvloop.run(_main())
