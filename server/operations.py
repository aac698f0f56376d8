"""The operations in progress: one `Operation` per running command, with its opid.

`dispatch.execute` registers every command here while it runs (`OperationTable.begin`/
`end`) and makes it the task's `CURRENT_OP`, so anything below (the storage service,
the cursor manager) knows whom it works for without being told. currentOp and
`$currentOp` read the table; killOp marks an operation killed, and the storage thread
stops it at its next safe point (`storage.interrupt`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

if TYPE_CHECKING:
    from .context import ConnectionState

__all__ = ["CURRENT_OP", "Operation", "OperationTable", "logical_op", "interrupted"]

# The logical operation mongod reports for a command (the rest are "command").
_LOGICAL: Final = {"find": "query", "getMore": "getmore", "insert": "insert",
                   "update": "update", "delete": "remove"}

# Commands whose first value names a collection of `$db` (ns "<db>.<coll>").
_ON_COLLECTION: Final = frozenset({
    "find", "aggregate", "count", "distinct", "insert", "update", "delete", "findAndModify",
    "findandmodify", "listIndexes", "collStats", "createIndexes", "dropIndexes",
    "deleteIndexes", "drop", "create", "collMod", "validate"})

_OPID_LIMIT: Final = 2**31


def logical_op(name: str) -> str:
    return _LOGICAL.get(name, "command")


def interrupted() -> MongoError:
    return MongoError(ErrorCode.Interrupted, "operation was interrupted")


def _namespace(name: str, body: dict[str, Any], db: str) -> str:
    if name == "getMore":
        coll = body.get("collection")
        return f"{db}.{coll}" if type(coll) is str and coll else f"{db}.$cmd"
    if name == "aggregate" and body.get(name) == 1:
        return f"{db}.$cmd.aggregate"
    target = body.get(name)
    if name in _ON_COLLECTION and type(target) is str and target:
        return f"{db}.{target}"
    return f"{db}.$cmd"


@dataclass(slots=True, eq=False)
class Operation:
    """A command in progress on one connection."""

    opid: int
    conn: ConnectionState
    name: str
    body: dict[str, Any]
    db: str
    started: float = field(default_factory=time.perf_counter)
    # set by killOp: the error the operation fails with at its next safe point
    killed: MongoError | None = None
    # the cursor a getMore is reading (set by the cursor manager)
    cursor: Any = None
    # a find's plan and what it examined (a ScanStats), for currentOp and the profiler
    plan_summary: str | None = None
    scan_stats: Any = None
    # the fields that came as OP_MSG document sequences: not part of the command mongod
    # reports (its body section)
    sequences: tuple[str, ...] = ()

    @property
    def command(self) -> dict[str, Any]:
        """The command as mongod reports it: the message's body, without its sequences."""
        if not self.sequences:
            return self.body
        return {k: v for k, v in self.body.items() if k not in self.sequences}

    @property
    def ns(self) -> str:
        return _namespace(self.name, self.body, self.db)

    @property
    def op(self) -> str:
        return logical_op(self.name)

    def micros_running(self) -> int:
        return int((time.perf_counter() - self.started) * 1_000_000)


class OperationTable:
    """Every operation in progress, by opid (mongod's are 32-bit, increasing)."""

    def __init__(self) -> None:
        self._ops: dict[int, Operation] = {}
        self._next = 1

    def begin(self, conn: ConnectionState, name: str, body: dict[str, Any], db: str,
              sequences: tuple[str, ...] = ()) -> Operation:
        opid = self._next
        self._next = opid + 1 if opid + 1 < _OPID_LIMIT else 1
        op = Operation(opid, conn, name, body, db, sequences=sequences)
        self._ops[opid] = op
        return op

    def end(self, op: Operation) -> None:
        self._ops.pop(op.opid, None)

    def get(self, opid: int) -> Operation | None:
        return self._ops.get(opid)

    def kill(self, opid: int) -> bool:
        """Mark `opid` killed (it stops at its next safe point); False if not running."""
        op = self._ops.get(opid)
        if op is None:
            return False
        if op.killed is None:
            op.killed = interrupted()
        return True

    def __iter__(self) -> Iterator[Operation]:
        return iter(list(self._ops.values()))  # a snapshot: others may begin or end

    def __len__(self) -> int:
        return len(self._ops)


CURRENT_OP: ContextVar[Operation | None] = ContextVar("bucketd_current_op", default=None)
