"""One client connection: read frames, run commands one at a time, write replies.

The protocol package turns bytes into requests; this module owns the socket. A fatal
protocol error closes this connection only. Replies are compressed with the
compressor the request arrived with (if negotiated), carry a checksum when the request
did, and are withheld when the request set moreToCome. An awaitable hello sent with
exhaustAllowed streams replies (moreToCome) until the client goes away or the server
stops, as drivers' streaming monitors expect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

import bson

from protocol import (
    CompressorId,
    MessageDecoder,
    OpMsg,
    OpQuery,
    ProtocolError,
    compress_message,
    encode_op_msg,
    encode_op_reply,
)
from protocol.constants import CHECKSUM_PRESENT, MORE_TO_COME
from storage.bsonutil import CODEC_OPTIONS
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .commands import NEVER_COMPRESS
from .context import ConnectionState, ServerState
from .dispatch import command_document, execute
from .inbound import Inbound, IncomingLimitExceeded
from .log import LOG
from .tls import peer_subject
from .tls.listener import SNIFF_BYTES, TLS_VERSION_NAMES, looks_like_tls

__all__ = ["serve_connection"]

T = TypeVar("T")

WRITE_HIGH_WATER = 1024 * 1024


class _Writer:
    """Numbers replies and accounts for bytes written."""

    def __init__(self, server: ServerState, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.writer = writer
        self.next_id = 1

    def request_id(self) -> int:
        rid = self.next_id
        self.next_id = (self.next_id + 1) & 0x7FFFFFFF or 1
        return rid

    async def send(self, data: bytes) -> None:
        self.server.bytes_out += len(data)
        self.writer.write(data)
        if self.writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await self.writer.drain()


async def serve_connection(server: ServerState, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> None:
    peer = writer.get_extra_info("peername")
    sock = writer.get_extra_info("sockname")
    remote = _addr(peer)
    conn = server.new_connection(remote, _addr(sock))
    ctx = f"conn{conn.id}"
    if not LOG.quiet:  # --quiet / the quiet parameter: no connection lines, as mongod
        LOG.info("NETWORK", 22943, "listener", "Connection accepted", remote=remote,
                 isLoadBalanced=False, connectionId=conn.id,
                 connectionCount=len(server.connections))
    _note_tls(server, conn, writer)
    out = _Writer(server, writer)
    decoder = MessageDecoder(codec_options=CODEC_OPTIONS,
                             max_depth=server.params.get("maxBSONDepth"))
    inbound = Inbound(server, reader, decoder)
    first = not server.config.tls.enabled  # the TLS listener has looked at the first bytes
    try:
        while not server.shutting_down.is_set():
            data = await inbound.read()
            if not data:
                break
            if first:
                first = False
                if _tls_without_tls(data, ctx, remote, conn.id):
                    break
            if not await _drain_messages(server, conn, decoder, inbound, out):
                break
            await inbound.admit()
    except ProtocolError as exc:
        LOG.warning("NETWORK", 22988, ctx, "Error receiving request from client. Ending "
                    "connection from remote", error={"code": exc.code, "codeName": exc.code_name,
                                                     "errmsg": exc.message},
                    remote=remote, connectionId=conn.id)
    except IncomingLimitExceeded as exc:
        LOG.warning("NETWORK", 22988, ctx, "Error receiving request from client. Ending "
                    "connection from remote", error={"code": int(exc.code),
                                                     "codeName": exc.code.name,
                                                     "errmsg": exc.message},
                    remote=remote, connectionId=conn.id)
    except (ConnectionError, asyncio.IncompleteReadError, OSError):
        pass
    finally:
        inbound.release()
        server.connections.pop(conn.id, None)
        with contextlib.suppress(Exception):
            writer.close()
            await writer.wait_closed()
        if not LOG.quiet:
            LOG.info("NETWORK", 22944, ctx, "Connection ended", remote=remote,
                     connectionId=conn.id, connectionCount=len(server.connections))


def _note_tls(server: ServerState, conn: ConnectionState, writer: asyncio.StreamWriter) -> None:
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is not None:
        conn.tls = True
        conn.peer_subject = peer_subject(ssl_object.getpeercert())
        server.tls_versions[TLS_VERSION_NAMES.get(ssl_object.version() or "", "unknown")] += 1
        if conn.peer_subject is not None:
            cipher = ssl_object.cipher()
            LOG.info("NETWORK", 6723802, f"conn{conn.id}", "Accepted TLS connection from peer",
                     peerSubjectName=conn.peer_subject, cipher=cipher[0] if cipher else None)
    elif server.config.tls.mode == "preferTLS":
        LOG.info("NETWORK", 23838, f"conn{conn.id}", "SSL mode is set to 'preferred' and "
                 "connection to remote is not using SSL.", connectionId=conn.id,
                 remote=conn.remote)


def _tls_without_tls(data: bytes, ctx: str, remote: str, conn_id: int) -> bool:
    """A TLS ClientHello on a server without TLS: end the connection at once, as mongod
    does, instead of reading its bytes as a message length. Only a TLS record header
    (0x16 0x03) counts, so no plausible MongoDB message is mistaken for one."""
    if len(data) < SNIFF_BYTES or data[:2] != b"\x16\x03" or not looks_like_tls(data):
        return False
    LOG.warning("NETWORK", 22988, ctx, "Error receiving request from client. Ending connection "
                "from remote", error={"code": 141, "codeName": "SSLHandshakeFailed",
                                      "errmsg": "SSL handshake received but server is started "
                                                "without SSL support"},
                remote=remote, connectionId=conn_id)
    return True


async def _drain_messages(server: ServerState, conn: ConnectionState, decoder: MessageDecoder,
                          inbound: Inbound, out: _Writer) -> bool:
    """Handle every complete message buffered; False when the connection must close."""
    while True:
        try:
            msg = decoder.next_message()
        except ProtocolError as exc:
            if exc.fatal:
                raise
            await _reply_content_error(exc, out)
            continue
        if msg is None:
            return True
        server.num_requests += 1
        conn.requests += 1
        if msg.compressor_id is not None:
            server.count_compression(_compressor_name(msg.compressor_id), "decompressor",
                                     msg.wire_length, msg.length)
        if isinstance(msg, OpQuery):
            await _handle_op_query(server, conn, msg, out)
            open_ = True
        else:
            open_ = await _handle_op_msg(server, conn, msg, inbound, out)
        inbound.message_done()
        if not open_ or server.shutting_down.is_set():
            return False


async def _reply_content_error(exc: ProtocolError, out: _Writer) -> None:
    """The frame was sound but its content was not: answer ok: 0, keep the connection."""
    reply = {"ok": 0.0, "errmsg": exc.message, "code": exc.code, "codeName": exc.code_name}
    await out.send(encode_op_msg(reply, out.request_id(), exc.request_id, codec=CODEC_OPTIONS))


async def _handle_op_query(server: ServerState, conn: ConnectionState, msg: OpQuery,
                           out: _Writer) -> None:
    if not msg.full_collection_name.endswith(".$cmd"):
        body: dict[str, Any] = {"$err": "OP_QUERY is no longer supported", "code": 5739101,
                                "ok": 0.0}
    else:
        query = msg.query
        if "$query" in query and isinstance(query["$query"], dict):
            query = query["$query"]
        body, _ = await execute(server, conn, query, msg.database, via_op_query=True)
    data = encode_op_reply(body, out.request_id(), msg.request_id, codec=CODEC_OPTIONS)
    await out.send(_maybe_compress(server, conn, data, msg.compressor_id,
                                   next(iter(msg.query), "")))


async def _handle_op_msg(server: ServerState, conn: ConnectionState, msg: OpMsg,
                         inbound: Inbound, out: _Writer) -> bool:
    """Answer one OP_MSG; False when the client went away while it was answered."""
    db = msg.body.get("$db")
    try:
        body = command_document(server, msg.body, db, msg.sequences, msg.request_id)
    except ProtocolError as exc:  # a document of a sequence is not BSON (never fatal)
        await _reply_content_error(exc, out)
        return True
    name = next(iter(body), "")
    run = execute(server, conn, body, db, exhaust_allowed=msg.exhaust_allowed,
                  sequences=tuple(msg.sequences))
    if name in _AWAITABLE and "maxAwaitTimeMS" in body:
        ran = await _unless_client_leaves(run, inbound)
        if ran is None:
            return False
        reply, cmd = ran
    else:
        reply, cmd = await run
    if msg.more_to_come:
        return True  # fire-and-forget (w: 0): no reply
    flags = 0
    if msg.flag_bits & CHECKSUM_PRESENT:
        flags |= CHECKSUM_PRESENT
    streaming = (msg.exhaust_allowed and cmd is not None and cmd.name in ("hello", "isMaster",
                                                                           "ismaster")
                 and "topologyVersion" in body and "maxAwaitTimeMS" in body
                 and reply.get("ok") == 1.0)
    response_to = msg.request_id
    while True:
        rid = out.request_id()
        data = _encoded_reply(conn, name, reply, rid, response_to,
                              flags | (MORE_TO_COME if streaming else 0))
        await out.send(_maybe_compress(server, conn, data, msg.compressor_id, name))
        if not streaming:
            return True
        await out.writer.drain()
        # Exhaust: the next reply answers our own previous one, after the await period. As
        # mongod does, the next invocation carries the topologyVersion just sent, so it waits
        # for a change instead of answering at once (a client that knew another process).
        response_to = rid
        if "topologyVersion" in reply:
            body = {**body, "topologyVersion": reply["topologyVersion"]}
        if inbound.at_eof() or server.shutting_down.is_set():
            return True
        ran = await _unless_client_leaves(
            execute(server, conn, body, db, exhaust_allowed=True), inbound)
        if ran is None:
            return False
        reply = ran[0]
        if inbound.at_eof() or server.shutting_down.is_set() or reply.get("ok") != 1.0:
            return True


_AWAITABLE = frozenset({"hello", "isMaster", "ismaster"})


async def _unless_client_leaves(run: Awaitable[T], inbound: Inbound) -> T | None:
    """`await run`, but give up (None) if the client closes the connection meanwhile:
    an awaitable hello waits up to maxAwaitTimeMS, and a closed client's monitor must
    not keep its connection open that long. Bytes that arrive meanwhile (one read's
    worth; then the client is known to be there) are buffered for after it."""
    task = asyncio.ensure_future(run)
    watch = asyncio.ensure_future(inbound.read_unlimited())
    await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    if not watch.done():
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    elif not task.done() and (watch.cancelled() or watch.exception() is not None
                              or not watch.result()):
        task.cancel()  # end of stream or a broken one: the client is gone
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return await task


def _encoded_reply(conn: ConnectionState, name: str, reply: dict[str, Any], rid: int,
                   response_to: int, flags: int) -> bytes:
    """The reply as an OP_MSG; a reply BSON cannot hold (a bug: some value reached it
    unchecked) is logged and answered as InternalError, keeping the connection."""
    try:
        return encode_op_msg(reply, rid, response_to, flags, codec=CODEC_OPTIONS)
    except (bson.errors.InvalidDocument, OverflowError, ValueError, TypeError) as exc:
        LOG.error("COMMAND", 21962, f"conn{conn.id}", "Assertion while encoding a reply",
                  command=name, error=f"{type(exc).__name__}: {exc}")
        error = MongoError(ErrorCode.InternalError, f"cannot encode the reply: {exc}")
        return encode_op_msg(error.to_reply(), rid, response_to, flags & ~MORE_TO_COME,
                             codec=CODEC_OPTIONS)


def _compressor_name(compressor_id: int) -> str:
    try:
        return CompressorId(compressor_id).name.lower()
    except ValueError:
        return str(compressor_id)


def _maybe_compress(server: ServerState, conn: ConnectionState, data: bytes,
                    compressor_id: int | None, name: str) -> bytes:
    if compressor_id is None or compressor_id == CompressorId.NOOP or name in NEVER_COMPRESS:
        return data
    try:
        comp = CompressorId(compressor_id)
    except ValueError:
        return data
    if comp.name.lower() not in conn.compressors:
        return data
    packed = compress_message(data, comp)
    server.count_compression(comp.name.lower(), "compressor", len(data), len(packed))
    return packed


def _addr(info: Any) -> str:
    if isinstance(info, tuple) and len(info) >= 2:
        host, port = info[0], info[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(info)
