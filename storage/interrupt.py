"""Interrupting long storage reads: the operation the storage thread is working for.

The server marks an operation killed (killOp) from another thread; the storage thread
notices it at safe points — where a scan fetches its next chunk of records or index
entries (the engines call `check()`), never inside a write — and the operation fails
with the error its killer chose (Interrupted, 11601). The check is one global read and
one attribute read per chunk, so a scan pays nothing measurable for it.

`run_for(op, fn, *args)` is how the storage thread runs work on an operation's behalf;
storage knows nothing of what an operation is beyond the `Interruptible` shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from storage.errors import MongoError

__all__ = ["Interruptible", "check", "run_for"]

T = TypeVar("T")


class Interruptible(Protocol):
    """An operation storage may be asked to stop: `killed` holds the error to raise."""

    killed: MongoError | None


# The operation the storage thread is running work for (None: nobody's, e.g. start-up).
_current: Interruptible | None = None


def check() -> None:
    """Raise the current operation's kill error if it has been killed."""
    op = _current
    if op is not None and op.killed is not None:
        raise _fresh(op.killed)


def run_for(op: Interruptible | None, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on behalf of `op` (call on the storage thread): `check()` sees it."""
    global _current
    previous = _current
    _current = op
    try:
        if op is not None and op.killed is not None:
            raise _fresh(op.killed)  # killed while it waited for the storage thread
        return fn(*args)
    finally:
        _current = previous


def _fresh(error: MongoError) -> MongoError:
    return MongoError(error.code, error.errmsg)
