"""The TLS listener in-process, on asyncio's loop and on uvloop's: TLS and plaintext on one
port, requireTLS, and the handshake timeout (short here) for stalled connections."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from server.log import LOG
from server.tls import build_server_context
from server.tls.listener import start_tls_server
from server.tls.options import TlsConfig
from tests.e2e.tls_certs import Certs, make_certs

LOOPS = ["asyncio", "uvloop"]
GENEROUS = 30.0  # an upper bound that only guards against a hang, never a timing claim


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("tls-listener"))


def _run(loop_name: str, main: Callable[[], Awaitable[None]]) -> None:
    if loop_name == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        uvloop.run(main())
    else:
        asyncio.run(main())


class Harness:
    """A listener whose handler records each connection and answers b"pong" to b"ping"."""

    def __init__(self, certs: Certs, mode: str, timeout: float = 0.3) -> None:
        cfg = TlsConfig(mode=mode, certificate_key_file=str(certs.server), ca_file=str(certs.ca),
                        allow_connections_without_certificates=True)
        self.context = build_server_context(cfg)
        self.mode = mode
        self.timeout = timeout
        self.seen: list[dict[str, Any]] = []

    async def handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        self.seen.append({"tls": ssl_object is not None,
                          "cert": ssl_object.getpeercert() if ssl_object else None})
        if await reader.readexactly(4) == b"ping":
            writer.write(b"pong")
            await writer.drain()
        writer.close()

    async def start(self) -> int:
        self.listener = await start_tls_server(self.handler, "127.0.0.1", 0,
                                               family=socket.AF_INET, context=self.context,
                                               mode=self.mode, limit=1 << 20)
        self.listener._timeout = self.timeout
        return self.listener.sockets[0].getsockname()[1]


def _refusals(since: int) -> list[str]:
    lines = [json.loads(line) for line in list(LOG.recent)[since:]]
    return [line["attr"]["error"]["errmsg"] for line in lines if line["id"] == 22988]


def _client_context(certs: Certs) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.client))
    return ctx


@pytest.mark.parametrize("loop_name", LOOPS)
def test_tls_and_plaintext_on_one_port(certs: Certs, loop_name: str) -> None:
    async def main() -> None:
        h = Harness(certs, "preferTLS")
        port = await h.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       ssl=_client_context(certs),
                                                       server_hostname="localhost")
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.read(4), GENEROUS) == b"pong"
        writer.close()
        # plaintext: a message header whose responseTo is 0
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping" + bytes(8))
        assert await asyncio.wait_for(reader.read(4), GENEROUS) == b"pong"
        writer.close()
        h.listener.close()
        await h.listener.wait_closed()
        assert [s["tls"] for s in h.seen] == [True, False]
        subject = h.seen[0]["cert"]["subject"]
        assert (("commonName", "client one"),) in subject

    _run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_require_tls_closes_plaintext(certs: Certs, loop_name: str) -> None:
    async def main() -> None:
        h = Harness(certs, "requireTLS")
        port = await h.start()
        since = len(LOG.recent)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping" + bytes(12))
        assert await asyncio.wait_for(reader.read(), GENEROUS) == b""  # closed, no answer
        writer.close()
        h.listener.close()
        assert h.seen == []
        assert _refusals(since) == ["The server is configured to only allow SSL connections"]

    _run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
@pytest.mark.parametrize("first_bytes", [
    b"\x16\x03\x01",  # fewer bytes than it takes to decide
    bytes.fromhex("160301020001") + bytes.fromhex("0001fc0303") + b"\x01" * 20,  # a stalled hello
])
def test_stalled_handshake_is_dropped(certs: Certs, loop_name: str, first_bytes: bytes) -> None:
    async def main() -> None:
        h = Harness(certs, "allowTLS")
        port = await h.start()
        since = len(LOG.recent)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(first_bytes)
        with contextlib.suppress(ConnectionResetError):  # aborted mid-handshake: closed too
            assert await asyncio.wait_for(reader.read(), GENEROUS) == b""
        writer.close()
        # the server still serves others
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping" + bytes(8))
        assert await asyncio.wait_for(reader.read(4), GENEROUS) == b"pong"
        writer.close()
        h.listener.close()
        assert [s["tls"] for s in h.seen] == [False]
        refusals = _refusals(since)
        assert len(refusals) == 1, refusals

    _run(loop_name, main)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_close_cancels_pending_handshakes(certs: Certs, loop_name: str) -> None:
    async def main() -> None:
        h = Harness(certs, "requireTLS", timeout=GENEROUS)
        port = await h.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"\x16")
        while not h.listener._pending:
            await asyncio.sleep(0.01)
        h.listener.close()
        await asyncio.wait_for(h.listener.wait_closed(), GENEROUS)
        assert not h.listener._pending
        assert await asyncio.wait_for(reader.read(), GENEROUS) == b""
        writer.close()

    _run(loop_name, main)
