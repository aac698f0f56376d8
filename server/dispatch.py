"""Run one command: find its handler, check the generic fields, turn errors into replies.

This is the one place where `MongoError` becomes `{ok: 0, errmsg, code, codeName}` and
where any other exception becomes `InternalError` (logged with its traceback).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from protocol import merge_sequences
from storage.bsonutil import CODEC_OPTIONS
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import RawDocuments

from .auth.authorize import authorize
from .auth.cursor_access import claim as claim_cursor
from .auth.gate import check_authenticated
from .commands import COMMANDS, Command, insert
from .commands._collection_uuid import check_collection_uuid
from .context import CommandRequest, ConnectionState, ServerState
from .generic_args import GENERIC_ARGUMENTS
from .log import LOG
from .operations import CURRENT_OP, Operation
from .profiler import PROFILE, profile_document, write_profile_document

__all__ = ["command_document", "execute", "GENERIC_ARGUMENTS", "OP_QUERY_COMMANDS"]


# OP_QUERY survives only for the handshake (MongoDB 6.0+ removed the rest).
OP_QUERY_COMMANDS: Final = frozenset({"hello", "isMaster", "ismaster"})


# The commands that may take document sequences raw: (server, body, db) -> the names of
# the sequences its handler takes as `RawDocuments` this time (every other is decoded).
RAW_SEQUENCES: Final[Mapping[str, Callable[[ServerState, dict[str, Any], Any],
                                           Collection[str]]]] = {
    "insert": insert.raw_sequences,
}


def command_document(server: ServerState, body: dict[str, Any], db: Any,
                     sequences: Mapping[str, RawDocuments], request_id: int = 0
                     ) -> dict[str, Any]:
    """An OP_MSG's command document: its body with its document sequences merged in,
    decoded, except those its command takes raw (`RAW_SEQUENCES`: an insert into a
    time-series collection hands its `documents` to the bucket catalog undecoded).
    Raises a non-fatal `ProtocolError` (InvalidBSON) for a document that is not BSON."""
    if not sequences:
        return body
    wants = RAW_SEQUENCES.get(next(iter(body), ""))
    keep = wants(server, body, db) if wants is not None else ()
    return merge_sequences(body, sequences, CODEC_OPTIONS, keep=keep, request_id=request_id,
                           max_depth=server.params.get("maxBSONDepth"))


def _check_generic(body: dict[str, Any]) -> None:
    api = body.get("apiVersion")
    if api is not None and api != "1":
        raise MongoError(ErrorCode.APIVersionError, 'API version must be "1"')
    if "txnNumber" in body or body.get("startTransaction") or "autocommit" in body:
        raise MongoError(ErrorCode.IllegalOperation,
                         "Transaction numbers are only allowed on a replica set member or mongos")


def _lookup(name: str) -> Command:
    cmd = COMMANDS.get(name)
    if cmd is None:
        raise MongoError(ErrorCode.CommandNotFound, f"no such command: '{name}'")
    return cmd


#: commands that never read the catalog: no look at other processes' DDL before them
#: (the drivers' monitoring sends `hello` often)
_READS_NO_CATALOG: Final = frozenset({
    "hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "whatsmyuri",
    "endSessions", "killCursors", "logout",
})


async def execute(server: ServerState, conn: ConnectionState, body: dict[str, Any],
                  db: str | None, *, via_op_query: bool = False,
                  exhaust_allowed: bool = False, sequences: tuple[str, ...] = ()
                  ) -> tuple[dict[str, Any], Command | None]:
    """Run `body` and return (reply document with `ok`, the command that ran or None).
    `sequences` names its fields that arrived as document sequences."""
    started = time.perf_counter()
    name = next(iter(body), "")
    cmd: Command | None = None
    op: Operation | None = None
    try:
        if via_op_query and name not in OP_QUERY_COMMANDS:
            raise MongoError(ErrorCode.UnsupportedOpQueryCommand,
                             f"Unsupported OP_QUERY command: {name}. The client driver may "
                             "require an upgrade. For more details see "
                             "https://dochub.mongodb.org/core/legacy-opcode-removal")
        cmd = _lookup(name)
        if db is None:
            raise MongoError(40571, "OP_MSG requests require a $db argument")
        if type(db) is not str or not db or "." in db or "\x00" in db or " " in db:
            raise MongoError(ErrorCode.InvalidNamespace, f"Invalid database name: '{db}'")
        if server.storage is not None and server.storage.shared and \
                name not in _READS_NO_CATALOG:
            await server.storage.sync_catalog()  # other processes' DDL, before it is read
        if server.config.auth:
            await check_authenticated(server, conn, cmd, db)
        if cmd.admin_only and db != "admin":
            raise MongoError(ErrorCode.Unauthorized,
                             f"{cmd.name} may only be run against the admin database.")
        required = None
        if server.config.auth and conn.user is not None:
            required = authorize(conn.user, cmd.name, body, db)
        _check_generic(body)
        if server.storage is not None:  # read-only use of the catalog's in-memory table
            check_collection_uuid(server.storage.catalog, name, body, db)
        server.opcounters[cmd.opcounter] += 1
        server.command_counts[cmd.name] += 1
        if "lsid" in body:
            server.sessions.touch(body["lsid"], _user_name(conn))
        req = CommandRequest(server, conn, name, body, db, exhaust_allowed, via_op_query)
        op = server.operations.begin(conn, name, body, db, sequences)
        token = CURRENT_OP.set(op)
        try:
            result = await cmd.handler(req)
        finally:
            CURRENT_OP.reset(token)
            server.operations.end(op)
        if required is not None and conn.user is not None and server.cursors is not None:
            claim_cursor(server.cursors, conn.user, required, result)
        reply = {**result, "ok": 1.0}
    except MongoError as exc:
        if cmd is not None:
            server.command_failures[cmd.name] += 1
        else:
            server.opcounters["command"] += 1
        reply = exc.to_reply()
    except Exception as exc:  # a bug: answer InternalError, keep serving
        server.command_failures[name] += 1
        LOG.error("COMMAND", 21962, f"conn{conn.id}", "Assertion while executing command",
                  command=name, db=db, error=f"{type(exc).__name__}: {exc}",
                  trace=traceback.format_exc(limit=12))
        reply = MongoError(ErrorCode.InternalError, f"{type(exc).__name__}: {exc}").to_reply()
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    if LOG.verbosity > 0:
        LOG.debug("COMMAND", 21965, f"conn{conn.id}", "Ran command", db=db, command=name, body=_redacted(body),
                  ok=reply.get("ok"), code=reply.get("code"), durationMillis=elapsed_ms)
    if server.metrics is not None:
        server.metrics.observe_command(cmd.name if cmd else "unknown", elapsed_ms / 1000.0,
                                       reply.get("ok") == 1.0)
    slowms = server.params.get("slowOpThresholdMs")
    if op is not None and server.profile.levels and server.profile.wants(op, elapsed_ms, slowms):
        await _profile(server, op, reply, elapsed_ms)
    if elapsed_ms >= slowms and name not in ("hello", "isMaster", "ismaster"):
        LOG.info("COMMAND", 51803, f"conn{conn.id}", "Slow query", type="command",
                 ns=f"{db}.$cmd", command=_redacted(body), durationMillis=int(elapsed_ms),
                 ok=int(reply.get("ok", 0)))
    return reply, cmd


def _user_name(conn: ConnectionState) -> str | None:
    user = conn.user
    return None if user is None else f"{user.name.user}@{user.name.db}"


async def _profile(server: ServerState, op: Operation, reply: dict[str, Any],
                   millis: float) -> None:
    """Write `op`'s profile document (after it ran, before its reply, as mongod); a
    failure to write it is logged, never the command's."""
    doc = profile_document(op, reply, millis)
    if server.storage is None or not server.profile.keeps(op.db, doc):
        return
    try:
        await server.storage.run(write_profile_document, server.storage.catalog, op.db, doc)
    except Exception as exc:  # the operation itself succeeded or failed on its own
        LOG.warning("COMMAND", 21969, f"conn{op.conn.id}", "Failed to write profile entry",
                    ns=f"{op.db}.{PROFILE}", error=f"{type(exc).__name__}: {exc}")


# Never logged (mongod's sensitive fields): passwords and SASL payloads.
_SENSITIVE: Final = frozenset({"pwd", "payload", "speculativeAuthenticate"})


def _redacted(body: dict[str, Any]) -> dict[str, Any]:
    """The command for the slow-query log: secrets hidden, a document sequence kept raw
    only counted; the rest is logged as it is and cut at `maxLogSizeKB` as mongod cuts it
    (log_format)."""
    return {k: "###" if k in _SENSITIVE else
            f"<{len(v)} items>" if isinstance(v, RawDocuments) else v
            for k, v in body.items()}
