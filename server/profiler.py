"""The database profiler: per-database levels and the documents of `<db>.system.profile`.

Level 0 profiles nothing, 1 the operations slower than `slowms` (the server's
`slowOpThresholdMs`, which also drives the "Slow query" log line), 2 every operation;
`sampleRate` (and an optional `filter` on the profile document) picks among them, as in
mongod. A profiled command gets one document, written after it ran and before its reply,
into `<db>.system.profile`, which is bounded like mongod's 1 MiB capped collection (the
oldest documents go first).
"""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from bson import Int64

from query.match import compile_filter
from storage.bsonutil import encode

if TYPE_CHECKING:
    from storage.catalog import Catalog

    from .context import ConnectionState
    from .operations import Operation

__all__ = ["ProfileSettings", "profile_document", "write_profile_document", "PROFILE"]

PROFILE: Final = "system.profile"
PROFILE_MAX_BYTES: Final = 1024 * 1024
# never profiled (mongod leaves the handshake and authentication out)
_NOT_PROFILED: Final = frozenset({"hello", "isMaster", "ismaster", "saslStart",
                                  "saslContinue", "authenticate", "logout"})


@dataclass
class _Filter:
    spec: dict[str, Any]
    matcher: Any


@dataclass
class ProfileSettings:
    levels: dict[str, int] = field(default_factory=dict)  # db -> 1 or 2 (absent: 0)
    filters: dict[str, _Filter] = field(default_factory=dict)
    sample_rate: float = 1.0

    def level(self, db: str) -> int:
        return self.levels.get(db, 0)

    def set_level(self, db: str, level: int) -> None:
        if level == 0:
            self.levels.pop(db, None)
        else:
            self.levels[db] = level

    def filter_of(self, db: str) -> dict[str, Any] | None:
        f = self.filters.get(db)
        return f.spec if f is not None else None

    def set_filter(self, db: str, spec: dict[str, Any] | None) -> None:
        if spec is None:
            self.filters.pop(db, None)
        else:
            self.filters[db] = _Filter(spec, compile_filter(spec))

    def wants(self, op: Operation, millis: float, slowms: int) -> bool:
        """Whether `op`, which took `millis`, is profiled (before its document is made)."""
        level = self.levels.get(op.db, 0)
        if level == 0 or op.name in _NOT_PROFILED:
            return False
        if op.db not in self.filters and level == 1 and millis < slowms:
            return False
        return self.sample_rate >= 1.0 or random.random() < self.sample_rate

    def keeps(self, db: str, doc: dict[str, Any]) -> bool:
        f = self.filters.get(db)
        return f is None or bool(f.matcher.matches(doc))


def _batch_size(reply: dict[str, Any]) -> int | None:
    cursor = reply.get("cursor")
    if isinstance(cursor, dict):
        batch = cursor.get("firstBatch", cursor.get("nextBatch"))
        if isinstance(batch, list):
            return len(batch)
    return None


def _client_host(conn: ConnectionState) -> str:
    remote = conn.remote
    host, sep, _port = remote.rpartition(":")
    return (host.strip("[]") if sep else remote) or remote


def profile_document(op: Operation, reply: dict[str, Any], millis: float) -> dict[str, Any]:
    """mongod's profile entry for `op` (the counters bucketd keeps; no plan statistics)."""
    doc: dict[str, Any] = {"op": op.op, "ns": op.ns, "command": op.command}
    cursor = reply.get("cursor")
    if isinstance(cursor, dict) and cursor.get("id"):
        doc["cursorid"] = Int64(cursor["id"])
    if op.scan_stats is not None:
        doc["keysExamined"] = op.scan_stats.keys_examined
        doc["docsExamined"] = op.scan_stats.docs_examined
    n = reply.get("n")
    if op.name == "insert" and isinstance(n, int):
        doc["ninserted"] = n
    elif op.name == "update" and isinstance(n, int):
        doc["nMatched"] = n
        doc["nModified"] = reply.get("nModified", 0)
    elif op.name == "delete" and isinstance(n, int):
        doc["ndeleted"] = n
    if reply.get("ok") != 1.0:
        doc["ok"] = 0
        doc["errMsg"] = reply.get("errmsg", "")
        doc["errName"] = reply.get("codeName", "")
        doc["errCode"] = reply.get("code", 0)
    returned = _batch_size(reply)
    doc["nreturned"] = returned or 0
    doc["responseLength"] = len(encode(reply))
    if op.plan_summary is not None:
        doc["planSummary"] = op.plan_summary
    doc["protocol"] = "op_msg"
    doc["millis"] = int(millis)
    doc["ts"] = datetime.datetime.now(datetime.UTC)
    doc["client"] = _client_host(op.conn)
    app = (op.conn.client_metadata or {}).get("application")
    if isinstance(app, dict) and isinstance(app.get("name"), str):
        doc["appName"] = app["name"]
    user = op.conn.user
    doc["allUsers"] = [] if user is None else [{"user": user.name.user, "db": user.name.db}]
    doc["user"] = "" if user is None else f"{user.name.user}@{user.name.db}"
    return doc


def write_profile_document(catalog: Catalog, db: str, doc: dict[str, Any]) -> None:
    """Append `doc` to `<db>.system.profile` (made on first use, without an `_id` index,
    as mongod's), dropping the oldest documents beyond `PROFILE_MAX_BYTES`."""
    with catalog.transaction():
        if catalog.entry(db, PROFILE) is None:
            catalog.create_collection(db, PROFILE, id_index=False)
        coll = catalog.get_collection(db, PROFILE)
        assert coll is not None
        coll.insert_many([doc], encoded=[encode(doc)])
        excess = coll.data_size() - PROFILE_MAX_BYTES
        oldest = []
        for rid, data in coll.scan() if excess > 0 else ():
            oldest.append(rid)
            excess -= len(data)
            if excess <= 0:
                break
        for rid in oldest:
            coll.delete(rid)
