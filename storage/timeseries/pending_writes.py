"""The pending-write store of the group commit: bucket writes committed in the bucket
catalog but not yet written to storage, and how they are written.

An insert into a time-series collection is acknowledged once the bucket catalog has
committed it (see README.md, "Acknowledged, committed, written"); the bucket documents
it changed are written to the buckets collection later, all pending ones in one storage
transaction (`DeferredBucketWrites.flush`). A bucket updated by ten batches in a row is
then written once, not ten times, and its index entries are maintained once.

The window is MongoDB's journal commit interval (`journalCommitInterval`, 100 ms by
default): with `j: false`, mongod acknowledges writes that reach its journal only at the
next journal flush, so a crash loses up to that interval of acknowledged writes. The
server flushes the pending writes:

- before any other storage operation runs, so every read, every other write and every
  command sees every acknowledged insert;
- before the bucket catalog queries stored buckets (reopening) when the query cannot be
  answered from storage and the pending documents together (`stored_buckets`);
  fetching one bucket by `_id` reads its pending document instead;
- at the end of an insert with `j: true` (durably), or when the window has passed, or
  when the pending documents exceed `_MAX_PENDING_BYTES` (`due`);
- by a timer one window after the first pending write, and at shutdown.

A flush that fails (disk full, an I/O error) cannot be reported to the clients whose
writes were acknowledged: the owner is told what was lost (`on_lost`, the server logs
it), `on_failure` is called for each collection concerned so the bucket catalog forgets
their open buckets and reopens them from what storage holds, and the error is raised.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bson import ObjectId

from storage import bsonutil
from storage.bsonutil import decode
from storage.collection_results import IndexKeys, Replacement
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .absent_series import note_written
from .bucket_keys import KeyPlans, key_plans
from .index_schema import index_keys_meta_whole, index_keys_time_bounds, index_reads_data

if TYPE_CHECKING:
    from storage.catalog import Catalog, CollectionEntry
    from storage.collection import Collection
    from storage.engine.base import RecordId

    from .bucket import StoredKeys
    from .write_batch import BucketWrite

__all__ = ["DeferredBucketWrites", "LostWrites", "write_buckets"]

_MAX_PENDING_BYTES: Final = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LostWrites:
    """What a failed flush lost: bucket writes committed (and acknowledged) that will
    never be written."""

    error: BaseException
    namespaces: tuple[tuple[str, str], ...]  # (db, buckets collection)
    buckets: int                             # how many bucket documents


class DeferredBucketWrites:
    """Bucket writes committed in the catalog but not yet written, per buckets collection."""

    def __init__(self, on_lost: Callable[[LostWrites], None] | None = None, *,
                 remember_keys: bool = True) -> None:
        # (db, buckets collection) -> bucket _id -> its latest BucketWrite
        self._pending: dict[tuple[str, str], dict[ObjectId, BucketWrite]] = {}
        # (db, buckets collection) -> series key -> ids of its buckets written, in the
        # order of `_pending`; None once a write's series is not known
        self._series: dict[tuple[str, str], dict[bytes, list[ObjectId]] | None] = {}
        self._since: float | None = None
        self._bytes = 0
        self._on_lost = on_lost
        # each write's keys are kept for the bucket's next update (see `write_buckets`)
        self._remember_keys = remember_keys

    def __bool__(self) -> bool:
        return bool(self._pending)

    def add(self, db: str, buckets_name: str, writes: Sequence[BucketWrite]) -> None:
        """Take a committed batch's writes; a bucket written again replaces its pending
        document (an insert stays an insert; an update keeps the index view of the
        stored version it replaces)."""
        if not writes:
            return
        k = (db, buckets_name)
        by_id = self._pending.setdefault(k, {})
        series = self._series.setdefault(k, {})
        if self._since is None:
            self._since = time.monotonic()
        for w in writes:
            old = by_id.get(w.bucket_id)
            if old is not None:
                w.kind = old.kind
                w.take_previous_index(old)
                self._bytes -= old.size_hint
            by_id[w.bucket_id] = w
            self._bytes += w.size_hint
            if series is None:
                continue
            if w.series is None:
                series = self._series[k] = None
            elif old is None:
                series.setdefault(w.series, []).append(w.bucket_id)

    def write(self, db: str, buckets_name: str, bucket_id: ObjectId) -> BucketWrite | None:
        """The pending write of a bucket (its document is what storage will hold after
        the next flush), or None when none is pending."""
        return self._pending.get((db, buckets_name), {}).get(bucket_id)

    def series_writes(self, db: str, buckets_name: str, series: bytes
                      ) -> tuple[dict[ObjectId, BucketWrite], list[BucketWrite]] | None:
        """The pending writes of a buckets collection by bucket id, and those of the
        buckets of one series (in the order a flush writes them); None when some pending
        write's series is not known."""
        k = (db, buckets_name)
        series_of = self._series.get(k, {})
        if series_of is None:
            return None
        by_id = self._pending.get(k, {})
        return by_id, [by_id[oid] for oid in series_of.get(series, ())]

    def due(self, interval_ms: int) -> bool:
        """True when the oldest pending write has waited `interval_ms`, or too much is
        pending."""
        return self._since is not None and (
            self._bytes > _MAX_PENDING_BYTES
            or (time.monotonic() - self._since) * 1000 >= interval_ms)

    def flush(self, catalog: Catalog, *, durable: bool = False,
              on_failure: Callable[[str, str], None] | None = None) -> None:
        """Write everything pending in one transaction (storage thread). On failure,
        `on_lost` (of the constructor) is told what was lost, `on_failure(db,
        buckets_name)` is called for each collection concerned, and the error is raised."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        self._series = {}
        self._since = None
        self._bytes = 0
        remembered: list[StoredKeys] | None = [] if self._remember_keys else None
        try:
            with catalog.transaction(durable=durable):
                for (db, name), by_id in pending.items():
                    buckets = catalog.get_collection(db, name)
                    if buckets is not None:  # dropped meanwhile: nothing to write
                        write_buckets(buckets, list(by_id.values()), remembered)
        except BaseException as exc:
            for kept in remembered or ():
                kept.forget()  # storage does not hold what they were written for
            for db, name in pending:
                if on_failure is not None:
                    on_failure(db, name)
            if self._on_lost is not None:
                self._on_lost(LostWrites(exc, tuple(pending),
                                         sum(len(by_id) for by_id in pending.values())))
            raise
        for by_id in pending.values():
            for w in by_id.values():
                w.release_document()


def write_buckets(buckets: Collection, writes: Sequence[BucketWrite],
                  remembered: list[StoredKeys] | None = None) -> None:
    """Perform bucket writes on the buckets collection (inside the caller's transaction,
    which is undone whole if any of them fails).

    With `remembered` (the group commit's, storage not shared), the index keys of each
    version written are kept with its bucket (`Bucket.stored_keys`, listed in
    `remembered`) with the data-less view it was written as: the bucket's next update
    names that view as the version it replaces (`BucketWrite.previous_index_source`) and
    takes those keys instead of computing them again.

    When no index of the collection reads `data`, index maintenance uses the catalog's
    data-less view of each bucket instead of decoding bucket documents; when every index
    keys only the id, a whole meta and the time bounds, a native bucket's keys are joined
    from those (`bucket_keys`), with no view keyed. The collection's
    memo of absent series (`absent_series`) learns the series inserted and when their
    buckets start."""
    stamp = buckets.write_stamp
    keyed = _KeyedBy.of(buckets)
    inserts = [w for w in writes if w.kind == "insert"]
    if inserts:
        # (the views as kept: reading `index_doc` keeps the decoded one instead)
        views = [w.index_source for w in inserts]
        known = [keyed.keys(w) for w in inserts]
        # (a write whose keys are known is not keyed again: it goes in as its bytes)
        docs = [{} if k is not None else _keyed_version(w, keyed)
                for w, k in zip(inserts, known)]
        res = buckets.insert_many(docs, encoded=[w.document for w in inserts],
                                  shards=[meta_shard(d) for d in docs]
                                  if buckets.places_by_shard else None,
                                  return_keys=remembered is not None, known_keys=known)
        if res.errors:
            raise res.errors[0][1]
        if remembered is not None and res.keys is not None:
            for w, view, keys, rid in zip(inserts, views, res.keys, res.record_ids):
                if keys is not None and rid is not None:
                    _remember(remembered, w, view, keys, rid)
    updates = [w for w in writes if w.kind == "update"]
    if any(w.expected is not None for w in updates):
        _update_checked(buckets, updates, keyed, remembered)
    elif updates:
        _update_together(buckets, updates, keyed, remembered)
    # (an update's bucket was inserted while the memo lived: its series and start are in)
    note_written(buckets, stamp, [(w.series, w.min_time_ms) for w in inserts])


def _update_together(buckets: Collection, updates: list[BucketWrite], keyed: _KeyedBy,
                     remembered: list[StoredKeys] | None) -> None:
    """The updates of `write_buckets` when no other process writes the buckets: their
    records found and written together (`Collection.update_many`). A record the group
    commit wrote the replaced version to is known with its length (`_kept`); the others
    are looked up."""
    kept = [_kept(w, remembered) for w in updates]
    unknown = [w.bucket_id for w, k in zip(updates, kept) if k is None]
    found = iter(buckets.record_ids(unknown) if unknown else ())
    # the views as kept, before keying reads them (see the inserts)
    views = [w.index_source for w in updates]
    replacements = []
    rids = []
    for w, k in zip(updates, kept):
        rid, size = (k.rid, k.size) if k is not None else (next(found), None)
        if rid is None:
            raise _disappeared(w.bucket_id)
        rids.append(rid)
        keys = keyed.keys(w)
        if keys is not None:
            old, old_keys = _previous_version(w, keyed, k)
            replacements.append(Replacement(rid, {}, w.document, old, old_keys, new_keys=keys,
                                            old_size=size))
            continue
        new, old, old_keys = _versions(w, keyed, k)
        # (without `old` and `old_keys` the stored version is read)
        replacements.append(Replacement(rid, new, w.document, old, old_keys, old_size=size))
    # the caller's transaction is undone whole on any failure: no savepoint of their own
    try:
        all_keys = buckets.update_many(replacements, savepoint=False)
    except KeyError as missing:
        # (the engine names the record gone, when it can tell which)
        gone = [w.bucket_id for w, rid in zip(updates, rids) if rid == missing.args[0]]
        raise _disappeared(gone[0] if gone else None) from None
    if remembered is not None:
        for w, view, keys, rid in zip(updates, views, all_keys, rids):
            _remember(remembered, w, view, keys, rid)


def _disappeared(bucket_id: ObjectId | None) -> MongoError:
    what = "a bucket" if bucket_id is None else f"bucket {bucket_id}"
    return MongoError(ErrorCode.WriteConflict, f"{what} disappeared during the write")


def _update_checked(buckets: Collection, updates: list[BucketWrite], keyed: _KeyedBy,
                    remembered: list[StoredKeys] | None) -> None:
    """The updates of `write_buckets` when other processes write the buckets too: one by
    one, each checked against the stored version it replaces (`BucketWrite.expected`)."""
    for w in updates:
        found = buckets.find_id(w.bucket_id)
        if found is None:
            raise _disappeared(w.bucket_id)
        view = w.index_source
        new, old, old_keys = _versions(w, keyed, _kept(w, remembered))
        if old_keys is None and old is None:
            old = decode(found[1])
        # another process changed the bucket since: the engine raises WriteConflict
        keys = buckets.update(found[0], new, encoded=w.document, old_doc=old,
                              expected=w.expected, old_keys=old_keys, savepoint=False)
        if remembered is not None:
            _remember(remembered, w, view, keys, found[0])


def _versions(w: BucketWrite, keyed: _KeyedBy, kept: StoredKeys | None
              ) -> tuple[Mapping[str, Any], Mapping[str, Any] | None, IndexKeys | None]:
    """What an update of `w` is keyed by: its new version (the data-less view when no
    index reads `data`), and the version it replaces as its kept keys (`kept`: those of
    exactly that version) or its data-less view; None for both: the stored version must
    be read."""
    return _keyed_version(w, keyed), *_previous_version(w, keyed, kept)


def _keyed_version(w: BucketWrite, keyed: _KeyedBy) -> Mapping[str, Any]:
    """What `w`'s version is keyed from: its data-less view when no index reads `data`
    (`_key_view`), else its document decoded."""
    view = _key_view(w, keyed)
    return view if view is not None else decode(w.document)


def _previous_version(w: BucketWrite, keyed: _KeyedBy, kept: StoredKeys | None
                      ) -> tuple[Mapping[str, Any] | None, IndexKeys | None]:
    """What an update of `w` replaces, as `_versions` tells it."""
    old_keys = kept.keys if kept is not None else None
    old = w.previous_index_doc if keyed.light and old_keys is None else None
    return old, old_keys


def _kept(w: BucketWrite, remembered: list[StoredKeys] | None) -> StoredKeys | None:
    """What the group commit kept of the version `w` replaces (its keys, record and
    length), when it wrote exactly that version (None otherwise)."""
    kept = w.stored_keys
    prev = w.previous_index_source
    return kept if remembered is not None and kept is not None and kept.view is prev \
        and type(prev) is bytes else None


def _remember(remembered: list[StoredKeys], w: BucketWrite, view: object,
              keys: IndexKeys, rid: RecordId) -> None:
    """Keep the keys, record and length of `w`'s version as written, for its bucket's
    next update."""
    kept = w.stored_keys
    if kept is not None and type(view) is bytes:
        kept.view, kept.keys, kept.rid, kept.size = view, keys, rid, len(w.document)
        remembered.append(kept)


@dataclass(frozen=True, slots=True)
class _KeyedBy:
    """How the buckets collection's indexes key a bucket: `light` when none reads `data`
    (the data-less views give the keys), `bounds_field` the time field when they key
    only its id, meta and time bounds (`_bounds_keyed`), `meta_whole` when they key the
    meta, if at all, whole and without a collation (`_meta_whole`)."""

    light: bool
    bounds_field: str | None
    meta_whole: bool
    # with `meta_whole`, when every index has a `bucket_keys` plan: those, and the
    # indexes' idents
    plans: KeyPlans | None = None
    idents: tuple[str, ...] = ()

    @staticmethod
    def of(buckets: Collection) -> _KeyedBy:
        light = _indexes_read_no_data(buckets.entry)
        bounds_field = _bounds_keyed(buckets) if light else None
        meta_whole = bounds_field is not None and _meta_whole(buckets)
        indexes = buckets.entry.indexes
        plans = key_plans([ix.spec for ix in indexes], bounds_field) \
            if meta_whole and bounds_field is not None else None
        return _KeyedBy(light, bounds_field, meta_whole, plans,
                        tuple(ix.ident for ix in indexes))

    def keys(self, w: BucketWrite) -> IndexKeys | None:
        """`w`'s keys made from its native state (`bucket_keys`), when that can be."""
        if self.plans is None:
            return None
        assert self.bounds_field is not None
        keys = w.index_keys(self.bounds_field, self.plans)
        return None if keys is None else IndexKeys(self.idents, keys)


def _key_view(w: BucketWrite, keyed: _KeyedBy) -> Mapping[str, Any] | None:
    """What the indexes read of `w`'s document when none reads `data` (else None): made
    from its native state when every index keys only its id, meta and time bounds, else
    its view without `data`."""
    if not keyed.light:
        return None
    if keyed.bounds_field is not None:
        doc = w.key_document(keyed.bounds_field, meta_whole=keyed.meta_whole)
        if doc is not None:
            return doc
    return w.index_doc


def _meta_whole(buckets: Collection) -> bool:
    """Whether every index of the buckets collection keys the meta, if at all, whole and
    without a collation, and no engine places the buckets by their meta value: a key
    document's meta can then be its keystring alone (`BucketWrite.key_document`)."""
    return not buckets.places_by_shard and all(
        index_keys_meta_whole(ix.spec) for ix in buckets.entry.indexes)


def _bounds_keyed(buckets: Collection) -> str | None:
    """The time field when every index of the buckets collection keys only `_id`, the
    meta and the time bounds (`index_keys_time_bounds`), else None."""
    ts = buckets.options.get("timeseries")
    time_field = ts.get("timeField") if isinstance(ts, Mapping) else None
    if not isinstance(time_field, str) or not all(
            index_keys_time_bounds(ix.spec, time_field) for ix in buckets.entry.indexes):
        return None
    return time_field


def meta_shard(bucket: Mapping[str, Any]) -> int:
    """A stable signed 64-bit hash of a bucket's meta value (its BSON bytes): the value
    a distributing engine places the bucket by, so one series' buckets stay together.
    0 without a meta value."""
    if "meta" not in bucket:
        return 0
    raw = bsonutil.encode({"": bucket["meta"]})
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _indexes_read_no_data(entry: CollectionEntry) -> bool:
    """True when no index of the buckets collection (keys or partial filter) reads
    `data`."""
    return not any(index_reads_data(ix.spec) for ix in entry.indexes)
