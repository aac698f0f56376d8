"""What currentOp and `$currentOp` report: operations, idle connections, idle cursors.

The documents are mongod's (`type: "op"` with the client's fields, then the operation's;
`type: "idleCursor"` for an open cursor nobody is reading), built on the event loop from
the operation table, the connections and the cursors, so a report never waits behind a
long operation on the storage thread.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bson import Binary, Int64, json_util

from storage.bsonutil import CODEC_OPTIONS, encode
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import RawDocuments

from .local_sessions import user_digest

if TYPE_CHECKING:
    from .context import ConnectionState, ServerState
    from .cursors import Cursor
    from .operations import Operation

__all__ = ["CurrentOpOptions", "parse_stage_spec", "report"]

# currentOp (the command) cuts each operation's command to this many bytes, as mongod.
TRUNCATE_BYTES: Final = 1000


@dataclass(frozen=True, slots=True)
class CurrentOpOptions:
    all_users: bool = False
    idle_connections: bool = False
    idle_cursors: bool = False
    idle_sessions: bool = True
    local_ops: bool = False
    truncate_ops: bool = False


_FLAGS: Final = {"allUsers": "all_users", "idleConnections": "idle_connections",
                 "idleCursors": "idle_cursors", "idleSessions": "idle_sessions",
                 "localOps": "local_ops", "truncateOps": "truncate_ops", "backtrace": None}


def parse_stage_spec(spec: Any) -> CurrentOpOptions:
    """A `$currentOp` stage's options, with mongod's errors."""
    if not isinstance(spec, dict):
        raise MongoError(ErrorCode.TypeMismatch, "$currentOp options must be specified in an "
                         f"object, but found: {type_name(spec)}")
    values: dict[str, bool] = {}
    for name, value in spec.items():
        if name not in _FLAGS:
            raise MongoError(ErrorCode.FailedToParse,
                             f"Unrecognized option '{name}' in $currentOp stage.")
        if type(value) is not bool:
            raise MongoError(ErrorCode.FailedToParse,
                             f"The '{name}' parameter of the $currentOp stage must be a boolean "
                             f"value, but found: {type_name(value)}")
        attr = _FLAGS[name]
        if attr is not None:
            values[attr] = value
    return CurrentOpOptions(**values)


def _now_string() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="milliseconds")


def _wall(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def _host(server: ServerState, conn: ConnectionState | None) -> str:
    port = conn.local.rpartition(":")[2] if conn is not None else str(server.config.port)
    return f"{server.host}:{port}"


def _client_fields(server: ServerState, conn: ConnectionState, active: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "op", "host": _host(server, conn), "desc": f"conn{conn.id}",
                           "connectionId": conn.id, "client": conn.remote}
    meta = conn.client_metadata
    if meta is not None:
        app = meta.get("application")
        if isinstance(app, dict) and isinstance(app.get("name"), str) and app["name"]:
            doc["appName"] = app["name"]
        doc["clientMetadata"] = meta
    doc["active"] = active
    doc["currentOpTime"] = _now_string()
    if conn.user is not None:
        doc["effectiveUsers"] = [conn.user.name.document()]
    doc["isFromUserConnection"] = True
    doc["threaded"] = True
    return doc


def _plain(value: Any) -> Any:
    """The command as a document: a raw document sequence decoded."""
    if isinstance(value, RawDocuments):
        return value.decode(CODEC_OPTIONS)
    return value


def _command(body: dict[str, Any], truncate: bool) -> dict[str, Any]:
    command = {k: _plain(v) for k, v in body.items()}
    if not truncate:
        return command
    size = len(encode(command))
    if size <= TRUNCATE_BYTES:
        return command
    cut: dict[str, Any] = {"$truncated": json_util.dumps(command)[:TRUNCATE_BYTES]}
    if "comment" in command:
        cut["comment"] = command["comment"]
    return cut


def _lsid(body: dict[str, Any], conn: ConnectionState) -> dict[str, Any] | None:
    lsid = body.get("lsid")
    if not isinstance(lsid, dict) or "id" not in lsid:
        return None
    user = conn.user
    name = None if user is None else f"{user.name.user}@{user.name.db}"
    return {"id": lsid["id"], "uid": lsid.get("uid", Binary(user_digest(name)))}


def _cursor_fields(cursor: Cursor, truncate: bool, using: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "cursorId": Int64(cursor.id), "createdDate": _wall(cursor.created_wall),
        "lastAccessDate": _wall(cursor.last_used_wall), "nDocsReturned": Int64(cursor.returned),
        "nBatchesReturned": Int64(cursor.batches), "noCursorTimeout": False,
        "tailable": False, "awaitData": False}
    if cursor.originating_command is not None:
        doc["originatingCommand"] = _command(cursor.originating_command, truncate)
    if using is not None:
        doc["operationUsingCursorId"] = Int64(using)
    return doc


def _operation(server: ServerState, op: Operation, truncate: bool) -> dict[str, Any]:
    doc = _client_fields(server, op.conn, True)
    doc["opid"] = op.opid
    if op.killed is not None:
        doc["killPending"] = True
    lsid = _lsid(op.body, op.conn)
    if lsid is not None:
        doc["lsid"] = lsid
    micros = op.micros_running()
    doc["secs_running"] = Int64(micros // 1_000_000)
    doc["microsecs_running"] = Int64(micros)
    doc["op"] = op.op
    doc["ns"] = op.ns
    doc["redacted"] = False
    doc["command"] = _command(op.command, truncate)
    if op.plan_summary is not None:
        doc["planSummary"] = op.plan_summary
    if op.cursor is not None:
        doc["cursor"] = _cursor_fields(op.cursor, truncate, op.opid)
    doc.update(numYields=0, locks={}, waitingForLock=False, lockStats={},
               waitingForFlowControl=False, flowControlStats={})
    return doc


def _idle_cursor(server: ServerState, cursor: Cursor, truncate: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": "idleCursor", "host": _host(server, None), "ns": cursor.ns}
    origin = cursor.originating_command or {}
    lsid = origin.get("lsid")
    if isinstance(lsid, dict):
        doc["lsid"] = lsid
    doc["cursor"] = _cursor_fields(cursor, truncate, None)
    return doc


def report(server: ServerState, requester: ConnectionState, options: CurrentOpOptions
           ) -> list[dict[str, Any]]:
    """The `$currentOp` documents `requester` may see with `options`."""
    mine = requester.user.name if requester.user is not None else None
    everyone = options.all_users or not server.config.auth

    def visible(conn: ConnectionState) -> bool:
        return everyone or (conn.user is not None and conn.user.name == mine)

    out: list[dict[str, Any]] = []
    busy: set[int] = set()
    for op in server.operations:
        busy.add(op.conn.id)
        if visible(op.conn):
            out.append(_operation(server, op, options.truncate_ops))
    if options.idle_connections:
        for conn in list(server.connections.values()):
            if conn.id not in busy and visible(conn):
                out.append(_client_fields(server, conn, False))
    if options.idle_cursors and server.cursors is not None:
        for cursor in server.cursors:
            if not cursor.in_use and (everyone or cursor.owner == mine):
                out.append(_idle_cursor(server, cursor, options.truncate_ops))
    return out
