"""The wire listener when TLS is on: accept, tell TLS from plaintext, hand over streams.

mongod serves TLS and plaintext on the one port by looking at the first message header: a
client's first message answers nothing, so its `responseTo` (bytes 8 to 11) is 0 or -1;
anything else is taken for a TLS ClientHello (whose bytes there are the end of the
handshake length and the protocol version, never 0 or -1). This listener peeks at those
bytes without consuming them, then wraps the socket with the event loop's own transport,
TLS or not (`loop.connect_accepted_socket`, which uvloop implements too), and passes the
streams on. With requireTLS a plaintext connection is closed; a connection that does not
finish its handshake within `HANDSHAKE_TIMEOUT` of being accepted is closed; a failed
handshake ends only its own connection, logged as mongod logs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable

from ..log import LOG
from .context import HANDSHAKE_TIMEOUT

__all__ = ["SNIFF_BYTES", "TLS_VERSION_NAMES", "TlsListener", "looks_like_tls",
           "start_tls_server"]

SNIFF_BYTES = 12  # through responseTo
# `SSLObject.version()` → the key serverStatus.transportSecurity counts it under
TLS_VERSION_NAMES = {"TLSv1": "1.0", "TLSv1.1": "1.1", "TLSv1.2": "1.2", "TLSv1.3": "1.3"}
_PARTIAL_RETRY = 0.005  # seconds between peeks while fewer than SNIFF_BYTES have arrived

OnConnection = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def looks_like_tls(head: bytes) -> bool:
    """mongod's test on the first bytes of a connection (at least SNIFF_BYTES of them)."""
    return int.from_bytes(head[8:12], "little", signed=True) not in (0, -1)


def _addr(addr: object) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host, port = addr[0], addr[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(addr)


def _handshake_error(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"SSL peer certificate validation failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError) and exc.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return "no SSL certificate provided by peer; connection rejected"
    if isinstance(exc, TimeoutError):
        return f"SSL handshake did not complete within {HANDSHAKE_TIMEOUT:g} seconds"
    return str(exc) or type(exc).__name__


class TlsListener:
    """The listening sockets of one address; `start()` accepts until `close()`. Shaped like
    the `asyncio.Server` of the plaintext path (`sockets`, `close`, `wait_closed`)."""

    def __init__(self, sockets: list[socket.socket], context: ssl.SSLContext, mode: str,
                 on_connection: OnConnection, *, limit: int,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT) -> None:
        self.sockets = sockets
        self._context = context
        self._require = mode == "requireTLS"
        self._on_connection = on_connection
        self._limit = limit
        self._timeout = handshake_timeout
        self._accepting: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Task[None]] = set()  # accepted, not yet handed over

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        for sock in self.sockets:
            sock.setblocking(False)
            self._accepting.append(loop.create_task(self._accept_loop(sock)))

    def close(self) -> None:
        for task in (*self._accepting, *self._pending):
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        tasks = [*self._accepting, *self._pending]
        if tasks:
            await asyncio.wait(tasks)

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        local = _addr(sock.getsockname())
        while True:
            try:
                conn, addr = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors, an aborted connection, ...
                LOG.info("NETWORK", 23018, "listener",
                         "Error accepting new connection on local endpoint",
                         localEndpoint=local, error=str(exc))
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._serve(conn, _addr(addr)))
            self._pending.add(task)

    async def _serve(self, sock: socket.socket, remote: str) -> None:
        task = asyncio.current_task()
        try:
            streams = await self._open(sock, remote)
        finally:
            if task is not None:
                self._pending.discard(task)
        if streams is not None:
            await self._on_connection(*streams)

    async def _open(self, sock: socket.socket, remote: str
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        loop = asyncio.get_running_loop()
        handed_over = False  # from then on the loop's transport owns (and closes) the socket
        try:
            async with asyncio.timeout(self._timeout):
                head = await _peek(sock)
                if head is None:
                    sock.close()  # gone before sending anything
                    return None
                use_tls = looks_like_tls(head)
                if not use_tls and self._require:
                    _refuse(remote, "The server is configured to only allow SSL connections")
                    _close_read(sock)
                    return None
                reader = asyncio.StreamReader(limit=self._limit, loop=loop)
                protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
                handed_over = True
                if use_tls:
                    transport, _ = await loop.connect_accepted_socket(
                        lambda: protocol, sock, ssl=self._context,
                        ssl_handshake_timeout=self._timeout)
                else:
                    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock)
        except asyncio.CancelledError:
            if not handed_over:
                _close_read(sock)
            raise
        except (TimeoutError, ssl.SSLError, OSError) as exc:
            _refuse(remote, _handshake_error(exc))
            if not handed_over:
                _close_read(sock)
            return None
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


async def _peek(sock: socket.socket) -> bytes | None:
    """The first SNIFF_BYTES of the connection, left unread; None if it closes first."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            head = sock.recv(SNIFF_BYTES, socket.MSG_PEEK)
        except BlockingIOError:
            await _readable(loop, sock)
            continue
        if not head:
            return None
        if len(head) >= SNIFF_BYTES:
            return head
        await asyncio.sleep(_PARTIAL_RETRY)  # readable already: wait for the rest to arrive


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(fd)


def _close_read(sock: socket.socket) -> None:
    """Close after reading what has arrived, so the peer sees an orderly end (a close with
    unread bytes would reset the connection instead)."""
    with contextlib.suppress(OSError):
        for _ in range(16):
            if not sock.recv(65536):
                break
    sock.close()


def _refuse(remote: str, errmsg: str) -> None:
    LOG.warning("NETWORK", 22988, "listener", "Error receiving request from client. Ending "
                "connection from remote",
                error={"code": 141, "codeName": "SSLHandshakeFailed", "errmsg": errmsg},
                remote=remote)


async def start_tls_server(on_connection: OnConnection, host: str, port: int, *,
                           family: socket.AddressFamily, context: ssl.SSLContext, mode: str,
                           limit: int, backlog: int = 1024) -> TlsListener:
    """Listen on every address `host` resolves to, as `asyncio.start_server` does."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for af, kind, proto, _, sockaddr in dict.fromkeys(infos):
            sock = socket.socket(af, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if af == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(sockaddr)
            sock.listen(backlog)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    listener = TlsListener(sockets, context, mode, on_connection, limit=limit)
    listener.start()
    return listener
