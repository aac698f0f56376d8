"""Which series a buckets collection holds no bucket of, known without a query.

A reopening query for a series whose buckets storage has never held answers "none"
whatever the time. In a collection that held no bucket when this process first looked,
and that only the bucket catalog's own writes (`pending_writes.write_buckets`) have
changed since, storage holds buckets only of the series those writes carried: every
other series is absent, and the query for it need not run. High-cardinality ingest asks
exactly that question for every new series.

The knowledge lasts while nothing else writes the collection: `Collection.write_stamp`
changes with every write through the collection; `note_written` moves the memo's stamp
along with the catalog's own writes, so any other write (a user's update or delete of
measurements, a raw write to the buckets collection, TTL) leaves the stamps apart and
the memo is dead for good (it answers "unknown" from then on, and a query runs as
before). The written series are a Bloom filter over the series keys: a series it may
hold is queried, never wrongly skipped. Writes of other processes are invisible to the
stamp, so with a shared engine the caller does not ask (see `stored_buckets`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from storage.collection import Collection

__all__ = ["AbsentSeries", "absent_series", "note_written"]

_BITS: Final = 1 << 23       # 1 MiB of filter: about 3 in 10,000 false "may hold" at 200,000 series
_MASK: Final = _BITS - 1


class AbsentSeries:
    """The series a buckets collection holds no bucket of, while its stamp holds."""

    __slots__ = ("_filter", "stamp")

    def __init__(self, stamp: int) -> None:
        self.stamp: int | None = stamp  # None: dead
        self._filter = bytearray(_BITS >> 3)

    def holds_none_of(self, coll: Collection, series: bytes) -> bool:
        """True when storage certainly holds no bucket of `series` (series_key)."""
        if self.stamp != coll.write_stamp:
            self.stamp = None
            return False
        f = self._filter
        return any(not f[bit >> 3] & (1 << (bit & 7)) for bit in _bits(series))

    def add(self, series: bytes) -> None:
        f = self._filter
        for bit in _bits(series):
            f[bit >> 3] |= 1 << (bit & 7)


def _bits(series: bytes) -> tuple[int, int, int]:
    h = hash(series)
    return h & _MASK, (h >> 23) & _MASK, ((h >> 46) ^ (h * 0x9E3779B1)) & _MASK


_MEMOS: weakref.WeakKeyDictionary[Collection, AbsentSeries | None] = weakref.WeakKeyDictionary()


def absent_series(coll: Collection) -> AbsentSeries | None:
    """The memo of `coll`, made the first time it is asked for when the collection is
    empty then; None when it is not known (the collection held buckets, or was written
    by something else since)."""
    if coll in _MEMOS:
        memo = _MEMOS[coll]
        return memo if memo is not None and memo.stamp is not None else None
    stamp = coll.write_stamp
    memo = AbsentSeries(stamp) if coll.count() == 0 else None
    _MEMOS[coll] = memo
    return memo


def note_written(coll: Collection, stamp_before: int, series: Iterable[bytes | None]) -> None:
    """The bucket catalog wrote buckets of `series` (None: not known) to `coll`, which
    had `stamp_before` when the write began: the memo follows, or dies if another write
    came between."""
    memo = _MEMOS.get(coll)
    if memo is None or memo.stamp is None:
        return
    if memo.stamp != stamp_before:
        memo.stamp = None
        return
    for s in series:
        if s is None:
            memo.stamp = None
            return
        memo.add(s)
    memo.stamp = coll.write_stamp
