"""The bucket registry: every bucket the catalog holds in memory, by state, and the
memory they take (MongoDB's bucket state registry, stripes' open/idle/archived maps and
memory accounting, without the stripes).

A bucket's life::

      allocate (a new bucket)          reopen (an archived one by _id, or a stored
              |                        one found by the reopening query: rehydrate)
              v                                  |
      +-----------------+  <---------------------+
      |      OPEN       |  open_by_id / open_by_key; takes measurements while its
      |                 |  rollover action is kNone
      +-----------------+
        |   ^       |
 commit |   | staged | rollover (rollover.rollover_action; at once when nothing is
 (kNone)|   | into   |   staged in it, else when its batch commits: `retire`)
        v   |        +--> kHardClose: closed
      +-----------------+ kSoftClose: closed, builders kept WARM (a query may reopen it)
      |      IDLE       | kArchive:   ARCHIVED, builders kept WARM
      | (open, LRU list)|
      +-----------------+
        | memory over the threshold (expire_idle)
        v
      +-----------------+
      |    ARCHIVED     |  id + min time per series, no bucket state; its column
      |                 |  builders may stay WARM (bounded by bytes)
      +-----------------+
        | memory still over the threshold (expire_idle), a direct write, clear, drop
        v
      forgotten: storage holds it, a reopening query may find it again

    An OPEN bucket is forgotten too by a failed batch that touched it (`drop`), a
    direct write of it, clear and drop; a too-large write drops it (`remove_open`).

Memory (`memory`, what timeseriesIdleBucketExpiryMemoryUsageThreshold bounds): an open
bucket counts what it holds, measured (`bucket_memory`): a fixed overhead, its series
key, its columns and their builders (native ones report their own size), a per-field
overhead and what its last write keeps; an archived entry its id, time and list slots,
and the first of a series also the series' map entry and key; warm builders what they
hold (they are also bounded by `_WARM_MAX_BYTES`, and are the first to go when memory
is over the threshold); and what the catalog caches besides (`set_cache_bytes`: the
preparer's series metas).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from bson import ObjectId

from .bucket import Bucket
from .columns import Columns
from .native_columns import NativeColumns
from .rollover import RolloverAction
from .stats import CatalogStats

__all__ = ["BucketRegistry", "WarmColumns"]

# What an open bucket holds besides its columns (`Columns.memory_size`), measured with
# tracemalloc plus the native builders' own sizes (tests/unit/storage/timeseries/
# test_memory_accounting.py holds the figure to what is measured): the Bucket with its
# sets, MinMax and Schema trees and last write's bookkeeping; per field its min/max and
# schema nodes and map entries; per compressed byte the committed document and the
# previous columns the last write keeps.
_BUCKET_OVERHEAD: Final = 5000
_FIELD_OVERHEAD: Final = 900
_RETAINED_PER_COMPRESSED_BYTE: Final = 1.5
# The same for a bucket with native control (`Bucket.control`, its heap counted by its
# own `__sizeof__`): no Python min/max and schema trees per field, the field names in
# sets shared by the buckets of one shape, the meta value kept as the series key only;
# little per compressed byte, the last write keeping the parts its document is built
# from, not its bytes; and what the group commit keeps of a bucket it wrote for the next
# update (`StoredKeys`: the index keys, the keystrings they are joined from, the record
# id and stored length; about 500 bytes, measured with the writes flushed to storage).
_NATIVE_BUCKET_OVERHEAD: Final = 2600
_NATIVE_FIELD_OVERHEAD: Final = 30
_NATIVE_RETAINED_PER_COMPRESSED_BYTE: Final = 0.25
# An archived entry: its ObjectId, min time and two list slots; the first of a series
# also the series' map entry, its (collection, key) tuple, two lists and the key's bytes
# object (plus the key's length). Measured with tracemalloc (test_memory_accounting).
_ARCHIVED_OVERHEAD: Final = 150
_ARCHIVED_SERIES_OVERHEAD: Final = 400
# Column builders of archived buckets kept warm, so reopening one does not rebuild them
# from the stored bytes; bounded by what they hold (Columns.memory_size).
_WARM_MAX_BYTES: Final = 64 * 1024 * 1024

def bucket_memory(b: Bucket) -> int:
    """The bytes open bucket `b` takes in memory (see the constants above)."""
    control = b.control
    memory, fields, compressed, control_size = b.columns.footprint(control)
    if control is None:
        base, per_field, retained = _BUCKET_OVERHEAD, _FIELD_OVERHEAD, _RETAINED_PER_COMPRESSED_BYTE
    else:
        base = _NATIVE_BUCKET_OVERHEAD + control_size
        per_field, retained = _NATIVE_FIELD_OVERHEAD, _NATIVE_RETAINED_PER_COMPRESSED_BYTE
    return base + len(b.key) + memory + per_field * fields + int(retained * compressed)


SeriesKey = tuple[str, bytes]  # (collection, series key of the meta value)


@dataclass(frozen=True, slots=True)
class WarmColumns:
    """The column state of an archived or soft-closed bucket, kept for its reopening."""

    coll: str
    columns: Columns | NativeColumns
    last_time_ms: int | None
    size: int  # Columns.memory_size when kept


class BucketRegistry:
    """Open, idle, archived and warm buckets of every collection, and their memory."""

    def __init__(self, stats: CatalogStats) -> None:
        self._stats = stats
        self.open_by_id: dict[ObjectId, Bucket] = {}
        self.open_by_key: dict[SeriesKey, list[Bucket]] = {}
        self.idle: OrderedDict[ObjectId, Bucket] = OrderedDict()
        # (coll, key) -> parallel sorted lists of min times and bucket ids
        self.archived: dict[SeriesKey, tuple[list[int], list[ObjectId]]] = {}
        self.num_archived = 0
        self.memory = 0
        self.warm: OrderedDict[ObjectId, WarmColumns] = OrderedDict()  # see _WARM_MAX_BYTES
        self._warm_bytes = 0
        self._cache_bytes = 0

    @property
    def num_active(self) -> int:
        """Open buckets and archived entries (what the cache-derived size divides by)."""
        return len(self.open_by_id) + self.num_archived

    # -- open buckets ---------------------------------------------------------------------

    def use_bucket(self, kb: SeriesKey) -> Bucket | None:
        """The series' open bucket that takes measurements (rollover action kNone)."""
        for b in self.open_by_key.get(kb, ()):
            if b.rollover_action == RolloverAction.kNone:
                return b
        return None

    def use_alternate(self, kb: SeriesKey, t: int, span_ms: int) -> Bucket | None:
        """A bucket of the series still pending a soft close or archive that covers `t`."""
        for b in self.open_by_key.get(kb, ()):
            if b.rollover_action in (RolloverAction.kNone, RolloverAction.kHardClose):
                continue
            if t - b.min_time_ms >= span_ms or t < b.min_time_ms:
                continue
            return b
        return None

    def add_open(self, b: Bucket) -> None:
        self.open_by_id[b.bucket_id] = b
        self.open_by_key.setdefault((b.coll, b.key), []).append(b)
        self._set_memory(b, bucket_memory(b))

    def account_commit(self, b: Bucket) -> None:
        """`b`'s memory after a commit (its committed fields' min/max included)."""
        usage = bucket_memory(b)
        self.memory += usage - b.memory_usage
        b.memory_usage = usage

    def remove_open(self, b: Bucket) -> None:
        if self.open_by_id.get(b.bucket_id) is not b:
            return
        del self.open_by_id[b.bucket_id]
        kb = (b.coll, b.key)
        lst = self.open_by_key.get(kb)
        if lst is not None:
            lst.remove(b)
            if not lst:
                del self.open_by_key[kb]
        self.idle.pop(b.bucket_id, None)
        self.memory -= b.memory_usage
        b.memory_usage = 0

    def _set_memory(self, b: Bucket, usage: int) -> None:
        self.memory += usage - b.memory_usage
        b.memory_usage = usage

    def mark_idle(self, b: Bucket) -> None:
        self.idle[b.bucket_id] = b
        self.idle.move_to_end(b.bucket_id)

    def mark_not_idle(self, b: Bucket) -> None:
        self.idle.pop(b.bucket_id, None)

    def drop(self, buckets: Iterable[Bucket]) -> None:
        """Forget buckets whose staged measurements will not be written (a failed batch)."""
        for b in list(buckets):
            b.staged, b.rows = [], None
            self.remove_open(b)

    # -- leaving the open state -------------------------------------------------------------

    def retire(self, b: Bucket, action: RolloverAction) -> None:
        """Perform a rollover action on an open bucket with nothing staged."""
        if action == RolloverAction.kArchive:
            self.archive(b)
        else:
            self.close(b)
            if action == RolloverAction.kSoftClose:
                self.keep_warm(b)  # a query may reopen it

    def close(self, b: Bucket) -> None:
        """Close an open bucket (its compression counted once it holds measurements)."""
        if b.num_committed:
            stats = self._stats.of(b.coll)
            self._stats.inc(stats, "numCompressedBuckets")
            self._stats.inc(stats, "numBytesCompressed", b.committed_document_size())
            self._stats.inc(stats, "numBytesUncompressed", b.uncompressed_size)
        self.remove_open(b)

    def archive(self, b: Bucket) -> None:
        kb = (b.coll, b.key)
        entry = self.archived.get(kb)
        if entry is None:
            entry = self.archived[kb] = ([], [])
            self.memory += _ARCHIVED_SERIES_OVERHEAD + len(b.key)
        times, ids = entry
        i = bisect.bisect_left(times, b.min_time_ms)
        if i < len(times) and times[i] == b.min_time_ms:
            # Same series and start time already archived: keep that one, close this one.
            self.close(b)
            return
        times.insert(i, b.min_time_ms)
        ids.insert(i, b.bucket_id)
        self.num_archived += 1
        self.memory += _ARCHIVED_OVERHEAD
        self.remove_open(b)
        self.keep_warm(b)

    def expire_idle(self, threshold: int, max_count: int) -> None:
        """expireIdleBuckets: archive idle buckets, then forget archived ones, while over
        the memory threshold (at most max_count + 1); warm builders, which MongoDB does
        not have, go first (not counted)."""
        while self.warm and self.memory > threshold:
            self.take_warm(next(iter(self.warm)))
        n = 0
        while self.idle and self.memory > threshold and n <= max_count:
            _oid, b = next(iter(self.idle.items()))
            self.idle.pop(b.bucket_id)
            self.archive(b)
            self._stats.inc(self._stats.of(b.coll), "numBucketsArchivedDueToMemoryThreshold")
            n += 1
        while self.archived and self.memory > threshold and n <= max_count:
            kb = next(iter(self.archived))
            self._forget_archived(kb, len(self.archived[kb][0]) - 1)
            self._stats.inc(self._stats.of(kb[0]), "numBucketsClosedDueToMemoryThreshold")
            n += 1

    # -- archived entries -------------------------------------------------------------------

    def find_archived(self, kb: SeriesKey, t: int, span_ms: int) -> ObjectId | None:
        """The archived bucket of the series whose time range covers `t`."""
        entry = self.archived.get(kb)
        if entry is None:
            return None
        times, ids = entry
        i = bisect.bisect_right(times, t) - 1
        if i < 0 or t - times[i] >= span_ms:
            return None
        return ids[i]

    def remove_archived(self, kb: SeriesKey, oid: ObjectId) -> bool:
        """Forget the archived entry `oid` of a series (False: there is none)."""
        entry = self.archived.get(kb)
        if entry is None:
            return False
        for i, x in enumerate(entry[1]):
            if x == oid:
                self._forget_archived(kb, i)
                return True
        return False

    def _forget_archived(self, kb: SeriesKey, i: int) -> None:
        """The one way an archived entry goes: the i-th of its series."""
        times, ids = self.archived[kb]
        del times[i]
        del ids[i]
        self.num_archived -= 1
        self.memory -= _ARCHIVED_OVERHEAD
        if not times:
            del self.archived[kb]
            self.memory -= _ARCHIVED_SERIES_OVERHEAD + len(kb[1])

    # -- warm column builders ---------------------------------------------------------------

    def keep_warm(self, b: Bucket) -> None:
        if not (b.all_committed and b.num_committed):
            return
        self.take_warm(b.bucket_id)
        w = self.warm[b.bucket_id] = WarmColumns(b.coll, b.columns, b.last_time_ms,
                                                 b.columns.memory_size)
        self._warm_bytes += w.size
        self.memory += w.size
        while self._warm_bytes > _WARM_MAX_BYTES:
            self.take_warm(next(iter(self.warm)))

    def take_warm(self, oid: ObjectId) -> WarmColumns | None:
        """Remove and return the warm columns of an archived bucket, if kept."""
        w = self.warm.pop(oid, None)
        if w is not None:
            self._warm_bytes -= w.size
            self.memory -= w.size
        return w

    # -- caches -----------------------------------------------------------------------------

    def set_cache_bytes(self, n: int) -> None:
        """What the catalog caches besides buckets takes now (counted in `memory`)."""
        self.memory += n - self._cache_bytes
        self._cache_bytes = n

    # -- per collection -----------------------------------------------------------------------

    def clear(self, coll: str) -> None:
        """Forget all open and archived buckets of `coll`."""
        for b in [b for b in self.open_by_id.values() if b.coll == coll]:
            self.remove_open(b)
        for kb in [kb for kb in self.archived if kb[0] == coll]:
            for i in reversed(range(len(self.archived[kb][0]))):
                self._forget_archived(kb, i)
        for oid in [oid for oid, w in self.warm.items() if w.coll == coll]:
            self.take_warm(oid)

    def forget_bucket(self, coll: str, bucket_id: ObjectId) -> None:
        """Drop any in-memory state of one bucket of `coll`."""
        b = self.open_by_id.get(bucket_id)
        if b is not None and b.coll == coll:
            self.remove_open(b)
        self.take_warm(bucket_id)
        for kb in [kb for kb in self.archived if kb[0] == coll]:
            self.remove_archived(kb, bucket_id)

    def open_buckets(self, coll: str | None = None) -> list[Bucket]:
        return [b for b in self.open_by_id.values() if coll is None or b.coll == coll]

    def archived_buckets(self, coll: str | None = None) -> list[tuple[bytes, int, ObjectId]]:
        return [(k[1], t, oid) for k, (times, ids) in self.archived.items()
                if coll is None or k[0] == coll for t, oid in zip(times, ids)]

