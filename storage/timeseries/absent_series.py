"""Which series a buckets collection holds no bucket of, or none starting in a time range,
known without a query.

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

The same writes also tell when the buckets were started. The series keys hash into
slots, and each slot keeps the least and the greatest `control.min.<time>` of the
buckets written of its series (every series in the slot together; a bucket whose start
is not known widens its slot to every time for good). No stored bucket of a series
starts in a range its slot's bounds miss, so the reopening query for it need not run:
a writer that backfills, going back in time batch after batch, asks exactly that for
every series in every batch.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from storage.collection import Collection

__all__ = ["AbsentSeries", "absent_series", "note_written"]

_BITS: Final = 1 << 23       # 1 MiB of filter: about 3 in 10,000 false "may hold" at 200,000 series
_MASK: Final = _BITS - 1
_SLOTS: Final = 1 << 16      # 1 MiB of start bounds
_SLOT_MASK: Final = _SLOTS - 1
_LEAST: Final = -(1 << 63)
_GREATEST: Final = (1 << 63) - 1


class AbsentSeries:
    """The series a buckets collection holds no bucket of, and when the buckets of the
    others start, while its stamp holds."""

    __slots__ = ("_filter", "_first_start", "_last_start", "stamp")

    def __init__(self, stamp: int) -> None:
        self.stamp: int | None = stamp  # None: dead
        self._filter = bytearray(_BITS >> 3)
        # per slot, the bounds of the starts written (an empty range while none is)
        self._first_start = array("q", [_GREATEST]) * _SLOTS
        self._last_start = array("q", [_LEAST]) * _SLOTS

    def holds_none_of(self, coll: Collection, series: bytes) -> bool:
        """True when storage certainly holds no bucket of `series` (series_key)."""
        if not self._alive(coll):
            return False
        f = self._filter
        return any(not f[bit >> 3] & (1 << (bit & 7)) for bit in _bits(series))

    def holds_none_starting(self, coll: Collection, series: bytes, after_ms: int,
                            until_ms: int) -> bool:
        """True when storage certainly holds no bucket of `series` whose
        `control.min.<time>` is in (after_ms, until_ms]."""
        if not self._alive(coll):
            return False
        slot = hash(series) & _SLOT_MASK
        return self._last_start[slot] <= after_ms or self._first_start[slot] > until_ms

    def add(self, series: bytes, start_ms: int | None) -> None:
        """A bucket of `series` starting at `start_ms` (None: not known) is written."""
        f = self._filter
        for bit in _bits(series):
            f[bit >> 3] |= 1 << (bit & 7)
        slot = hash(series) & _SLOT_MASK
        first, last = (_LEAST, _GREATEST) if start_ms is None else (start_ms, start_ms)
        if first < self._first_start[slot]:
            self._first_start[slot] = first
        if last > self._last_start[slot]:
            self._last_start[slot] = last

    def _alive(self, coll: Collection) -> bool:
        if self.stamp != coll.write_stamp:
            self.stamp = None
        return self.stamp is not None


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


def note_written(coll: Collection, stamp_before: int,
                 buckets: Iterable[tuple[bytes | None, int | None]]) -> None:
    """The bucket catalog wrote `buckets` to `coll`, each as its series (None: not known)
    and its `control.min.<time>` (None: not known); `coll` had `stamp_before` when the
    write began: the memo follows, or dies if another write came between."""
    memo = _MEMOS.get(coll)
    if memo is None or memo.stamp is None:
        return
    if memo.stamp != stamp_before:
        memo.stamp = None
        return
    for series, start_ms in buckets:
        if series is None:
            memo.stamp = None
            return
        memo.add(series, start_ms)
    memo.stamp = coll.write_stamp
