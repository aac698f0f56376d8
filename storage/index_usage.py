"""How often each index has served a query since the server started (or it was built).

mongod's `$indexStats` `accesses: {ops, since}`: a query, update, delete or aggregation
whose plan reads an index counts one use of it (`record`), once per plan run; writes
keeping an index up to date do not count. Kept in memory, as mongod's: a restart starts
every count again at 0.
"""

from __future__ import annotations

import datetime

__all__ = ["IndexUsage"]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class IndexUsage:
    def __init__(self) -> None:
        self._started = _now()
        self._ops: dict[str, int] = {}  # index ident -> uses
        self._since: dict[str, datetime.datetime] = {}  # built after the start: when

    def record(self, ident: str) -> None:
        self._ops[ident] = self._ops.get(ident, 0) + 1

    def built(self, ident: str) -> None:
        """A new index: its count starts now."""
        self._ops.pop(ident, None)
        self._since[ident] = _now()

    def accesses(self, ident: str) -> tuple[int, datetime.datetime]:
        return self._ops.get(ident, 0), self._since.get(ident, self._started)
