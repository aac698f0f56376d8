"""A canned-reply server: the floor any server could reach with the same clients.

Answers the driver handshake with a MongoDB 8.0 hello and every other command with
`{n: 1000, ok: 1}` without decoding it, so a benchmark run against it measures only
what the clients themselves cost on this machine (encoding, sending, waiting).

    python bench/_canned.py      # prints the port, then serves until killed
"""

from __future__ import annotations

import asyncio
import datetime as dt
import struct

import bson

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
            reply = hello if first.lower() in (b"hello", b"ismaster") else _ACK
            writer.write(struct.pack("<iiiii", 20 + len(reply), 1, rid, OP_MSG, 0) + reply)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _main() -> None:
    srv = await asyncio.start_server(_handle, "127.0.0.1", 0)
    print(srv.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
