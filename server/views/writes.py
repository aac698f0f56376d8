"""Writes to a view are refused as mongod refuses them: each statement a write error
CommandNotSupportedOnView (166), an ordered batch stopping at the first."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError

from ..write_batches import write_reply
from .definitions import not_a_collection

__all__ = ["refused_writes"]


def refused_writes(db: str, name: str, count: int, *, ordered: bool,
                   update: bool = False) -> dict[str, Any]:
    """The reply of an insert, update (`update=True`: with nModified) or delete batch of
    `count` statements sent to the view `db.name`."""
    reported = min(count, 1) if ordered else count
    errors: list[tuple[int, MongoError]] = [(i, not_a_collection(db, name))
                                            for i in range(reported)]
    extra: dict[str, Any] = {"nModified": 0} if update else {}
    return write_reply(0, errors, **extra)
