"""The statement loop of a write command's batch and its reply (insert, update, delete).

Each statement runs on its own; one that fails with a `MongoError` becomes a write error
at its index, and an ordered batch stops there (MongoDB's semantics for `ordered`). The
counts a statement adds are added only once it has succeeded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage import interrupt
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["WriteTally", "run_statements", "write_reply"]


@dataclass(slots=True)
class WriteTally:
    """What the statements of one batch did so far."""

    n: int = 0
    modified: int = 0
    upserted: list[dict[str, Any]] = field(default_factory=list)
    errors: list[tuple[int, MongoError]] = field(default_factory=list)

    def add_upserted(self, index: int, _id: Any) -> None:
        self.n += 1
        self.upserted.append({"index": index, "_id": _id})

    def update_reply(self) -> dict[str, Any]:
        """The reply of an update batch: n, nModified, upserted (if any), writeErrors."""
        extra: dict[str, Any] = {"nModified": self.modified}
        if self.upserted:
            extra["upserted"] = self.upserted
        return write_reply(self.n, self.errors, **extra)


def run_statements(statements: list[Any], *, ordered: bool,
                   apply: Callable[[int, Any, WriteTally], None]) -> WriteTally:
    """Run `apply(index, statement, tally)` for each statement, collecting write errors.
    A killed operation (killOp) stops between statements or within one's scan, and
    fails the whole command, as mongod's interruptions do."""
    tally = WriteTally()
    for i, statement in enumerate(statements):
        try:
            interrupt.check()
            apply(i, statement, tally)
        except MongoError as exc:
            if exc.code == ErrorCode.Interrupted:
                raise
            tally.errors.append((i, exc))
            if ordered:
                break
    return tally


def write_reply(n: int, errors: list[tuple[int, MongoError]], **extra: Any) -> dict[str, Any]:
    """`{n, **extra, writeErrors?}` with the write errors in statement order."""
    reply: dict[str, Any] = {"n": n, **extra}
    if errors:
        reply["writeErrors"] = [e.to_write_error(i) for i, e in sorted(errors,
                                                                       key=lambda x: x[0])]
    return reply
