"""Many concurrent connections; --maxConns refuses the connection over the limit."""

from __future__ import annotations

import asyncio
import struct

import bson
import pymongo

from protocol import encode_op_msg

from ..conftest import start_server
from .wire_client import RawConnection


async def _pinger(host: str, port: int, n: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    ok = 0
    try:
        for i in range(n):
            writer.write(encode_op_msg({"ping": 1, "$db": "admin"}, i + 1, 0))
            head = await reader.readexactly(16)
            length = struct.unpack_from("<i", head)[0]
            rest = await reader.readexactly(length - 16)
            assert struct.unpack_from("<i", head, 8)[0] == i + 1  # responseTo
            if bson.decode(rest[5:]) == {"ok": 1.0}:
                ok += 1
    finally:
        writer.close()
        await writer.wait_closed()
    return ok


def test_200_connections_times_100_pings(server) -> None:
    async def main() -> list[int]:
        return await asyncio.gather(*(_pinger(server.host, server.port, 100) for _ in range(200)))

    results = asyncio.run(main())
    assert results == [100] * 200


def test_max_conns_refuses_the_51st(tmp_path) -> None:
    proc = start_server(tmp_path, "--maxConns", "50")
    conns: list[RawConnection] = []
    try:
        for i in range(50):
            c = RawConnection(proc.port)
            c.send(encode_op_msg({"ping": 1, "$db": "admin"}, i + 1, 0))
            assert c.recv_reply_doc() == {"ok": 1.0}
            conns.append(c)
        extra = RawConnection(proc.port)
        extra.send(encode_op_msg({"ping": 1, "$db": "admin"}, 99, 0))
        assert extra.recv_message() is None  # refused: closed without an answer
        extra.close()
        conns.pop().close()  # one leaves; a new one is accepted again
        for _ in range(50):
            again = RawConnection(proc.port)
            again.send(encode_op_msg({"ping": 1, "$db": "admin"}, 100, 0))
            reply = again.recv_reply_doc()
            if reply is not None:
                break
            again.close()
        assert reply == {"ok": 1.0}
        again.close()
        for c in conns:
            c.close()
        conns.clear()
        with pymongo.MongoClient(f"mongodb://127.0.0.1:{proc.port}", maxPoolSize=1) as c:
            status = c.admin.command("serverStatus")
        assert status["connections"]["rejected"] >= 1
    finally:
        for c in conns:
            c.close()
        proc.stop()
