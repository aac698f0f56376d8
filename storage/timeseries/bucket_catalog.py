"""The bucket catalog: which bucket each measurement goes into, and what to write.

Theory of operation (single storage thread; MongoDB's BucketCatalog without stripes,
eras and waiters, which only exist there to coordinate threads):

1. `insert_batch(coll, options, measurements, source)` validates each measurement (a
   BSON date in the time field, else BadValue for that index), normalizes its meta value,
   groups the batch by series and sorts each group by time (stable), then *stages* each
   measurement (tryInsert / insertWithReopeningContext):

   - the series' open bucket (at most one whose rollover action is kNone) takes it unless
     `determine_rollover` objects: time forward beyond bucketMaxSpanSeconds (soft close),
     time backward before the bucket's min time (archive), count (hard close), size with
     timeseriesBucketMinCount / timeseriesLargeMeasurementThreshold / cache pressure
     (hard close), schema change (hard close);
   - on time forward/backward it first tries an *alternate* bucket of the series that is
     still pending a close and covers the time, then *reopening*: an archived bucket of
     the series covering the time (fetched by `_id`), or, for time backward and when
     there is no open bucket, a stored bucket found by `ReopeningQuery`;
   - else the bucket rolls over: closed or archived now if it has nothing staged, else
     when the batch commits; a new bucket (id from the rounded time) takes the
     measurement.

   Then each touched bucket is *prepared*: min/max folded in, rows appended to the column
   builders (v2 becomes v3 when the batch starts before the bucket's last time), and the
   full bucket document built. The result lists the writes (new bucket documents to
   insert, new documents/diffs for existing ones) and per-index errors.

2. The caller performs all writes in ONE storage transaction, then calls
   `commit(result)` (counts, sizes, stats, deferred closes, idle list) or
   `abort(result)`, which drops every bucket the batch touched from memory; they are
   reopened from storage when needed, so a failed transaction leaves no trace.

Other entry points: `clear(coll)` / `drop_collection(coll)` for drop and collMod,
`handle_direct_write(coll, bucket_id)` after a write that bypassed the catalog
(rawData, updates, deletes, TTL), `collection_stats(coll)` for collStats and
`server_status()` for serverStatus.bucketCatalog. Memory pressure
(timeseriesIdleBucketExpiryMemoryUsageThreshold) archives idle buckets, then forgets
archived ones, before a bucket is allocated or reopened.
"""

from __future__ import annotations

import bisect
import datetime as _dt
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import bson
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import BSONColumnError, native
from storage.bsoncolumn.decoder import decode_elements
from storage.bsonutil import CODEC_OPTIONS, decode, encode
from storage.errors import MongoError
from storage.vocabulary.bson_types import BsonType
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .bucket import (
    Bucket,
    Measurement,
    Shape,
    SizeChange,
    _num_digits,
    elements,
    size_change,
)
from .bucket_document import BucketDocumentParts, compress_bucket, parse_bucket
from .bucket_id import BucketIdGenerator
from .columns import ColumnChange, Columns
from .constants import (
    DATA,
    LARGE_MEASUREMENTS_MAX_BUCKET_SIZE,
    MAX_BUCKET_DOCUMENT_SIZE,
    META,
    VERSION_COMPRESSED_SORTED,
    VERSION_COMPRESSED_UNSORTED,
    VERSION_UNCOMPRESSED,
    TimeseriesParameters,
)
from .elements import _D, _PACK, _Q, int_value_size, to_element
from .metadata import normalize_meta, series_key
from .minmax import MinMax, Schema, SchemaChange
from .options import TimeseriesOptions, round_timestamp_ms
from .reopening import BucketSource, ReopeningQuery
from .rollover import RolloverAction, RolloverReason
from .stats import ExecutionStats

# BSON type bytes as plain ints: compared per value.
_DATE: Final = int(BsonType.DATE)
_DOUBLE: Final = int(BsonType.DOUBLE)
_INT32: Final = int(BsonType.INT32)
_INT64: Final = int(BsonType.INT64)
_OBJECT_ID: Final = int(BsonType.OBJECT_ID)

__all__ = ["BatchResult", "BucketCatalog", "BucketWrite"]

_INT32_MAX: Final = 2**31 - 1
# Python types a Shape takes as fixed-width values (Python int is sized by value).
_SHAPE_TYPES: Final = frozenset((Int64, float, DatetimeMS, ObjectId, bool, type(None)))
_SHAPES_MAX: Final = 4096
_LAZY_DOCUMENT_MAX_COLUMNS: Final = 8 * 1024 * 1024
_NOT_FIXED: Final = Shape((), (), (), (), 0, 0, ())  # a signature seen, not fixed-width
_DATE_MIN: Final = -(2**63)
_BUCKET_OVERHEAD: Final = 512     # rough bytes of bookkeeping per open bucket
_ARCHIVED_OVERHEAD: Final = 96    # per archived entry
_META_CACHE_MAX: Final = 65536
# Column builders of archived buckets kept warm, so reopening one does not rebuild them
# from the stored bytes; bounded by what they hold (Columns.memory_size).
_WARM_MAX_BYTES: Final = 64 * 1024 * 1024


@dataclass(slots=True)
class BucketWrite:
    """One bucket document to write.

    `kind` is "insert" for a new bucket, "update" to replace an existing one with
    `document`. For updates, `column_changes` and `control_changes` describe the same
    change as MongoDB's DocDiff (binary column diffs `{o: offset, d: bytes}`, new columns,
    `control.count`/`control.version`); engines may store `document` whole instead.
    """

    kind: Literal["insert", "update"]
    bucket_id: ObjectId
    _document: bytes | None  # None until `document` builds it from `_parts`
    previous_count: int
    measurement_indexes: list[int]
    column_changes: list[ColumnChange] = field(default_factory=list)
    control_changes: dict[str, Any] = field(default_factory=dict)
    # `document` decoded without `data` (all an index on a buckets collection reads),
    # and the same of the stored version it replaces (None: decode the stored bytes)
    index_doc: dict[str, Any] | None = None
    previous_index_doc: dict[str, Any] | None = None
    # set by the catalog for its own bookkeeping at commit
    _compressed_delta: int = 0
    _new_fields: list[str] = field(default_factory=list)
    _estimate: int = 0
    _last_time_ms: int | None = None
    # what the document is built from, kept instead of the bytes until they are asked for
    # (a group commit writes only the last of several writes of one bucket)
    _parts: BucketDocumentParts | None = None
    # the bucket's series key (metadata.series_key of its meta); None when not known
    series: bytes | None = None

    @property
    def document(self) -> bytes:
        """The bucket document to store (built on first use)."""
        if self._document is None:
            assert self._parts is not None
            self._document = self._parts.build()
            self._parts = None
        return self._document

    @property
    def size_hint(self) -> int:
        """The document's size, or an estimate (columns plus 1 KiB) while it is unbuilt."""
        if self._document is not None:
            return len(self._document)
        assert self._parts is not None
        return 1024 + sum(len(c) for _n, c in self._parts.columns)


@dataclass(slots=True)
class BatchResult:
    """What `insert_batch` asks the caller to write, and the measurements it refused."""

    coll: Any
    writes: list[BucketWrite]
    errors: list[tuple[int, MongoError]]
    num_inserted: int
    _touched: list[Bucket] = field(default_factory=list)
    _finished: bool = False


class _Ctx:
    """State of one insert_batch call."""

    __slots__ = ("coll", "options", "rewrites", "source", "stats", "threshold", "touched",
                 "touched_ids")

    def __init__(self, coll: Any, options: TimeseriesOptions, source: BucketSource | None,
                 stats: ExecutionStats, threshold: int) -> None:
        self.coll = coll
        self.options = options
        self.source = source
        self.stats = stats
        self.threshold = threshold
        self.touched: list[Bucket] = []
        self.touched_ids: set[int] = set()
        self.rewrites: dict[ObjectId, tuple[bytes, int]] = {}


@dataclass(slots=True)
class _Warm:
    """The column state of an archived or soft-closed bucket, kept for its reopening."""

    coll: Any
    columns: Columns
    last_time_ms: int | None
    size: int  # Columns.memory_size when kept


class _ReopenFailed(Exception):
    pass


class BucketCatalog:
    """Open and archived buckets of every time-series collection (one per server)."""

    def __init__(self, params: TimeseriesParameters | None = None, *,
                 id_seed: int | None = None) -> None:
        self.params = params or TimeseriesParameters()
        self._ids = BucketIdGenerator(id_seed)
        self._open_by_id: dict[ObjectId, Bucket] = {}
        self._open_by_key: dict[tuple[Any, bytes], list[Bucket]] = {}
        self._idle: OrderedDict[ObjectId, Bucket] = OrderedDict()
        # (coll, key) -> parallel sorted lists of min times and bucket ids
        self._archived: dict[tuple[Any, bytes], tuple[list[int], list[ObjectId]]] = {}
        self._num_archived = 0
        self._stats: dict[Any, ExecutionStats] = {}
        self._global = ExecutionStats()
        self._memory = 0
        self._pending: BatchResult | None = None
        self._meta_cache: dict[Any, tuple[bytes, Any, int]] = {}
        # (time field, meta field) -> measurement signature -> its Shape; None turns the
        # shaped path off (tests compare both paths)
        self._shapes: dict[tuple[str, str | None], dict[tuple, Shape]] | None = {}
        self._warm: OrderedDict[ObjectId, _Warm] = OrderedDict()  # see _WARM_MAX_BYTES
        self._warm_bytes = 0

    # -- public: insert protocol -------------------------------------------------------------

    def insert_batch(self, coll: Any, options: TimeseriesOptions,
                     measurements: Sequence[Mapping[str, Any] | bytes],
                     source: BucketSource | None = None, *, ordered: bool = True
                     ) -> BatchResult:
        """Stage a batch of measurements and return the bucket writes to perform.

        With `ordered`, staging stops at the first invalid measurement (MongoDB's ordered
        insert); otherwise every valid measurement is staged. Exactly one of `commit` or
        `abort` must follow before the next call.
        """
        if self._pending is not None and not self._pending._finished:
            raise MongoError(ErrorCode.InternalError,
                             "bucket catalog: previous batch neither committed nor aborted")
        stats = self._coll_stats(coll)
        ctx = _Ctx(coll, options, source, stats, self.params.memory_threshold_bytes())
        prepared, errors = self._prepare_all(measurements, options, ordered)
        groups: dict[bytes, list[Measurement]] = {}
        for pm in prepared:
            g = groups.get(pm.key)
            if g is None:
                groups[pm.key] = [pm]
            else:
                g.append(pm)
        result = BatchResult(coll, [], errors, 0)
        try:
            for group in groups.values():
                group.sort(key=_time_of)
                i, n = 0, len(group)
                while i < n:
                    self._stage(ctx, group[i])
                    i += 1
                    if i < n:
                        i += self._stage_run(ctx, group, i)
            result.writes, too_large = self._prepare_writes(ctx)
        except BaseException:
            self._drop_buckets(ctx.touched)
            raise
        for idx in too_large:
            result.errors.append((idx, MongoError(
                ErrorCode.BSONObjectTooLarge,
                "Measurement is too large to fit in a time-series bucket")))
        result.errors.sort(key=lambda e: e[0])
        result.num_inserted = len(prepared) - len(too_large)
        result._touched = ctx.touched
        self._pending = result
        return result

    def commit(self, result: BatchResult) -> None:
        """The writes of `result` are durable: account for them (finish in MongoDB)."""
        self._check_pending(result)
        for w in result.writes:
            b = self._open_by_id.get(w.bucket_id)
            if b is None or not w.measurement_indexes:
                continue
            stats = self._coll_stats(b.coll)
            n = len(w.measurement_indexes)
            self._inc(stats, "numCommits")
            self._inc(stats, "numBucketInserts" if w.previous_count == 0 else "numBucketUpdates")
            if b.opened_due_to_metadata:
                self._inc(stats, "numBucketsOpenedDueToMetadata")
            self._inc(stats, "numMeasurementsCommitted", n)
            b.num_committed += n
            b.size += w._compressed_delta - w._estimate
            b.field_names.update(w._new_fields)
            b.uncommitted_field_names.clear()
            b.staged = []
            b.staged_estimate = 0
            b.opened_due_to_metadata = False
            b.last_time_ms = w._last_time_ms
            b.committed_write = w
            b.index_doc = w.index_doc
            self._set_memory(b, _BUCKET_OVERHEAD + len(b.key) + b.columns.compressed_size
                             + 2 * 48 * len(b.field_names))
        for b in result._touched:
            if self._open_by_id.get(b.bucket_id) is not b:
                continue
            b.staged = []
            action = b.rollover_action
            if action in (RolloverAction.kHardClose, RolloverAction.kSoftClose):
                self._close_open_bucket(b)
                if action == RolloverAction.kSoftClose:
                    self._keep_warm(b)
            elif action == RolloverAction.kArchive:
                self._archive_bucket(b)
            else:
                self._mark_idle(b)
        result._finished = True
        self._pending = None

    def abort(self, result: BatchResult) -> None:
        """The writes of `result` failed: forget every bucket the batch touched."""
        self._check_pending(result)
        self._drop_buckets(result._touched)
        result._finished = True
        self._pending = None

    # -- public: maintenance ------------------------------------------------------------------

    def clear(self, coll: Any) -> None:
        """Forget all open and archived buckets of `coll` (stats are kept)."""
        for b in [b for b in self._open_by_id.values() if b.coll == coll]:
            self._remove_open(b)
        for k in [k for k in self._archived if k[0] == coll]:
            times, _ids = self._archived.pop(k)
            self._num_archived -= len(times)
            self._memory -= _ARCHIVED_OVERHEAD * len(times)
        for oid in [oid for oid, w in self._warm.items() if w.coll == coll]:
            self._take_warm(oid)

    def drop_collection(self, coll: Any) -> None:
        """`drop`: forget the collection's buckets and statistics."""
        self.clear(coll)
        self._stats.pop(coll, None)

    def handle_direct_write(self, coll: Any, bucket_id: ObjectId) -> None:
        """A bucket was inserted, modified or deleted without the catalog (rawData, user
        updates/deletes, TTL): drop any in-memory state for it."""
        b = self._open_by_id.get(bucket_id)
        if b is not None and b.coll == coll:
            self._remove_open(b)
        self._take_warm(bucket_id)
        for k, (times, ids) in list(self._archived.items()):
            if k[0] != coll:
                continue
            for i, oid in enumerate(ids):
                if oid == bucket_id:
                    del times[i]
                    del ids[i]
                    self._num_archived -= 1
                    self._memory -= _ARCHIVED_OVERHEAD
                    if not times:
                        del self._archived[k]
                    break

    # -- public: statistics -------------------------------------------------------------------

    def collection_stats(self, coll: Any) -> dict[str, Any]:
        """collStats' storageStats.timeseries counters (execution and compression stats)."""
        stats = self._stats.get(coll) or ExecutionStats()
        doc = stats.to_document()
        doc.update(stats.compression_document())
        return doc

    def merge_stats(self, coll: Any, other: ExecutionStats) -> None:
        """Fold a side catalog's statistics for `coll` into this catalog (updates)."""
        self._coll_stats(coll).add(other)
        self._global.add(other)

    def execution_stats(self, coll: Any) -> ExecutionStats:
        return self._stats.get(coll) or ExecutionStats()

    def server_status(self) -> dict[str, Any]:
        """serverStatus.bucketCatalog (empty until a time-series collection was written)."""
        if not self._stats:
            return {}
        num_open_keys = sum(1 for lst in self._open_by_key.values() if lst)
        doc: dict[str, Any] = {
            "numBuckets": bson.Int64(self.num_active_buckets),
            "numOpenBuckets": bson.Int64(num_open_keys),
            "numIdleBuckets": bson.Int64(len(self._idle)),
            "numArchivedBuckets": bson.Int64(self.num_active_buckets - num_open_keys),
            "memoryUsage": bson.Int64(self._memory),
        }
        doc.update(self._global.to_document())
        doc["stateManagement"] = {"bucketsManaged": bson.Int64(len(self._open_by_id)),
                                  "currentEra": bson.Int64(0),
                                  "erasWithRemainingBuckets": bson.Int64(0),
                                  "trackedClearOperations": bson.Int64(0)}
        return doc

    @property
    def num_active_buckets(self) -> int:
        return len(self._open_by_id) + self._num_archived

    @property
    def memory_usage(self) -> int:
        return self._memory

    def open_buckets(self, coll: Any | None = None) -> list[Bucket]:
        """Open buckets (for tests and diagnostics)."""
        return [b for b in self._open_by_id.values() if coll is None or b.coll == coll]

    def archived_buckets(self, coll: Any | None = None) -> list[tuple[bytes, int, ObjectId]]:
        return [(k[1], t, oid) for k, (times, ids) in self._archived.items()
                if coll is None or k[0] == coll for t, oid in zip(times, ids)]

    # -- measurement preparation --------------------------------------------------------------

    def _prepare_all(self, measurements: Sequence[Mapping[str, Any] | bytes],
                     options: TimeseriesOptions, ordered: bool
                     ) -> tuple[list[Measurement], list[tuple[int, MongoError]]]:
        """The batch's measurements prepared, and those refused (with `ordered`, the first
        refusal ends the batch)."""
        prepared: list[Measurement] = []
        errors: list[tuple[int, MongoError]] = []
        shapes = self._shapes.setdefault((options.time_field, options.meta_field), {}) \
            if self._shapes is not None else None
        append = prepared.append
        shaped = self._prepare_shaped
        for i, m in enumerate(measurements):
            try:
                doc = m if type(m) is dict and "_id" in m else _as_document(m)
                shape = None if shapes is None else \
                    shapes.get((tuple(doc), tuple(map(type, doc.values()))))
                if shape is not None and shape is not _NOT_FIXED:
                    fast = shaped(i, doc, shape, options)
                    if fast is not None:
                        append(fast)
                        continue
                append(self._prepare_general(i, doc, options,
                                             shapes is not None and shape is not _NOT_FIXED))
            except MongoError as e:
                errors.append((i, e))
                if ordered:
                    break
        return prepared, errors

    def _prepare_shaped(self, index: int, doc: dict[str, Any], shape: Shape,
                        options: TimeseriesOptions) -> Measurement | None:
        """A measurement of a known shape: no per-field work beyond sizing Python ints
        (None when one is beyond int64, which the general path reports)."""
        value_bytes = shape.fixed_bytes
        for f in shape.int_fields:
            size = int_value_size(doc[f])
            if size is None:
                return None
            value_bytes += size
        mf = options.meta_field
        key, meta, meta_size = (b"", MISSING, 0) if mf is None or mf not in doc \
            else self._series_of(doc[mf])
        return Measurement(index, int(doc[options.time_field]), doc, None, key, meta,
                           meta_size, shape.names, shape.max_value_len, shape.signature,
                           value_bytes, shape)

    def _prepare_general(self, index: int, doc: dict[str, Any],
                         options: TimeseriesOptions, learn: bool) -> Measurement:
        tf = options.time_field
        t = doc.get(tf)
        time_is_date = type(t) is DatetimeMS
        if not time_is_date:
            if isinstance(t, _dt.datetime):
                t = DatetimeMS(t)
                doc = dict(doc)
                doc[tf] = t
            else:
                raise MongoError(ErrorCode.BadValue,
                                 f"'{tf}' must be present and contain a valid BSON UTC "
                                 "datetime value")
        mf = options.meta_field
        elems: list[tuple[str, int, bytes]] = []
        append = elems.append
        max_len = 0
        value_bytes = 0
        meta_v: Any = MISSING
        pack = _PACK
        qpack, dpack = _Q.pack, _D.pack
        for name, v in doc.items():
            if name == mf:
                meta_v = v
                continue
            tv = type(v)
            if tv is Int64:
                append((name, _INT64, qpack(v)))
                value_bytes += 8
            elif tv is float:
                append((name, _DOUBLE, dpack(v)))
                value_bytes += 8
            elif tv is DatetimeMS:
                append((name, _DATE, qpack(int(v))))
                value_bytes += 8
            elif tv is ObjectId:
                append((name, _OBJECT_ID, v.binary))
                value_bytes += 12
                if max_len < 12:
                    max_len = 12
            else:
                f = pack.get(tv)
                t_, b_ = f(v) if f is not None else to_element(v)
                append((name, t_, b_))
                n = len(b_)
                value_bytes += n
                if n > max_len:
                    max_len = n
        if max_len < 8 and elems:
            max_len = 8
        types = tuple(map(type, doc.values()))
        nested = types.count(dict) + types.count(list)
        if meta_v is not MISSING and type(meta_v) in (dict, list):
            nested -= 1
        sig = (tuple(doc), types) if nested == 0 else None
        key, meta, meta_size = (b"", MISSING, 0) if meta_v is MISSING \
            else self._series_of(meta_v)
        names = tuple([e[0] for e in elems])
        shape = None
        if sig is not None and time_is_date and learn:
            shape = self._learn_shape(options, sig, names, elems, max_len)
        return Measurement(index, int(t), doc, elems, key, meta, meta_size, names, max_len,
                           sig, value_bytes, shape)

    def _learn_shape(self, options: TimeseriesOptions, sig: tuple, names: tuple[str, ...],
                     elems: list[tuple[str, int, bytes]], max_len: int) -> Shape | None:
        """Remember `sig` as a shape when all its fields (meta aside) are fixed-width."""
        assert self._shapes is not None
        shapes = self._shapes.setdefault((options.time_field, options.meta_field), {})
        if len(shapes) >= _SHAPES_MAX:
            shapes.clear()
        keys, types = sig
        by_name = dict(zip(keys, types))
        type_bytes: list[int | None] = []
        py_types: list[type] = []
        lens: list[int | None] = []
        fixed = 0
        ints = []
        for name, t, v in elems:
            tv = by_name[name]
            py_types.append(tv)
            if tv is int:
                type_bytes.append(None)
                lens.append(None)
                ints.append(name)
            elif tv in _SHAPE_TYPES:
                type_bytes.append(t)
                lens.append(len(v))
                fixed += len(v)
            else:
                shapes[sig] = _NOT_FIXED
                return None
        shape = shapes[sig] = Shape(names, tuple(type_bytes), tuple(py_types), sig, max_len,
                                    fixed, tuple(ints), tuple(lens))
        return shape

    def _series_of(self, meta_v: Any) -> tuple[bytes, Any, int]:
        """(series key, normalized meta, meta element size) of a meta value (cached)."""
        ck = _meta_cache_key(meta_v)
        cached = self._meta_cache.get(ck) if ck is not None else None
        if cached is None:
            meta = normalize_meta(meta_v)
            cached = (series_key(meta), meta, 1 + len(to_element(meta_v)[1]))
            if ck is not None:
                if len(self._meta_cache) >= _META_CACHE_MAX:
                    self._meta_cache.clear()
                self._meta_cache[ck] = cached
        return cached

    # -- staging (tryInsert / insertWithReopeningContext / insertIntoBucket) ---------------------

    def _stage(self, ctx: _Ctx, m: Measurement) -> None:
        kb = (ctx.coll, m.key)
        bucket = self._use_bucket(kb)
        if bucket is None:
            reopened = self._try_reopen(ctx, m, allow_query=True)
            if reopened is not None:
                self._insert_into(ctx, reopened, m, allow_create=True, due_to_meta=False)
                return
            new = self._allocate(ctx, m)
            self._insert_into(ctx, new, m, allow_create=True, due_to_meta=True)
            return
        reason = self._insert_into(ctx, bucket, m, allow_create=False, due_to_meta=False)
        if reason is None:
            return
        alternate = self._use_alternate(ctx, kb, m.time_ms)
        if alternate is not None and self._insert_into(
                ctx, alternate, m, allow_create=False, due_to_meta=False) is None:
            return
        reopened = self._try_reopen(ctx, m,
                                    allow_query=reason == RolloverReason.kTimeBackward)
        if reopened is not None:
            self._insert_into(ctx, reopened, m, allow_create=True, due_to_meta=False)
            return
        bucket = self._use_bucket(kb)
        if bucket is None:
            bucket = self._allocate(ctx, m)
            self._insert_into(ctx, bucket, m, allow_create=True, due_to_meta=True)
        else:
            self._insert_into(ctx, bucket, m, allow_create=True, due_to_meta=False)

    def _stage_run(self, ctx: _Ctx, group: list[Measurement], start: int) -> int:
        """Stage group[start:] (one series, sorted by time) in bulk into the bucket that
        took group[start - 1], as far as `_stage` would put each one there with nothing
        else happening (no rollover, no size or schema change, no counter moved); returns
        how many were staged. The rest go through `_stage` one by one."""
        prev = group[start - 1]
        b = self._use_bucket((ctx.coll, prev.key))
        if b is None or b.size == 0 or not b.staged or b.staged[-1] is not prev:
            return 0
        p = self.params
        room = p.timeseriesBucketMaxCount - b.num_measurements
        effective, _ = self._cache_derived_max_size()
        if room <= 0 or b.size > effective:
            return 0
        end_time = b.min_time_ms + ctx.options.max_span_ms
        digits = _num_digits(b.num_measurements + room)
        large = p.timeseriesLargeMeasurementThreshold
        committed, sigs = b.field_names, b.schema_signatures
        k = 0
        for m in group[start:start + room]:
            if (m.time_ms >= end_time or m.signature is None or m.signature not in sigs
                    or m.max_value_len + digits + 2 > large
                    or not committed.issuperset(m.names)):
                break
            k += 1
        if k:
            b.staged.extend(group[start:start + k])
            b.num_measurements += k
        return k

    def _insert_into(self, ctx: _Ctx, bucket: Bucket, m: Measurement, *, allow_create: bool,
                     due_to_meta: bool) -> RolloverReason | None:
        """insertIntoBucket: stage `m` in `bucket` or (allowed) in the bucket replacing it.

        Returns the rollover reason instead when the bucket would be soft-closed or
        archived and `allow_create` is False.
        """
        newly_opened = bucket.size == 0
        sizes: SizeChange | None = None
        if not newly_opened:
            action, reason, sizes = self._determine_rollover(ctx, bucket, m, allow_create)
            if not allow_create and action in (RolloverAction.kSoftClose,
                                               RolloverAction.kArchive):
                return reason
            if action != RolloverAction.kNone:
                due_to_meta = False
                bucket = self._rollover(ctx, bucket, action, m)
                newly_opened = True
        if newly_opened:
            sizes = size_change(bucket, m, self.params.timeseriesLargeMeasurementThreshold)
            bucket.schema.update(m.doc, ctx.options.meta_field)
            if m.signature is not None:
                bucket.schema_signatures.add(m.signature)
            if due_to_meta:
                bucket.opened_due_to_metadata = True
        assert sizes is not None
        if id(bucket) not in ctx.touched_ids:
            ctx.touched_ids.add(id(bucket))
            ctx.touched.append(bucket)
        bucket.staged.append(m)
        bucket.uncommitted_field_names.update(sizes.new_fields)
        bucket.num_measurements += 1
        bucket.staged_estimate += sizes.estimate
        bucket.size += sizes.total
        self._mark_not_idle(bucket)
        return None

    def _determine_rollover(self, ctx: _Ctx, bucket: Bucket, m: Measurement,
                            allow_create: bool
                            ) -> tuple[RolloverAction, RolloverReason, SizeChange | None]:
        opts = ctx.options
        p = self.params
        if m.time_ms - bucket.min_time_ms >= opts.max_span_ms:
            if allow_create:
                self._inc(ctx.stats, "numBucketsClosedDueToTimeForward")
            return RolloverAction.kSoftClose, RolloverReason.kTimeForward, None
        if m.time_ms < bucket.min_time_ms:
            if allow_create:
                self._inc(ctx.stats, "numBucketsArchivedDueToTimeBackward")
            return RolloverAction.kArchive, RolloverReason.kTimeBackward, None
        if bucket.num_measurements >= p.timeseriesBucketMaxCount:
            self._inc(ctx.stats, "numBucketsClosedDueToCount")
            return RolloverAction.kHardClose, RolloverReason.kCount, None
        effective, cache_derived = self._cache_derived_max_size()
        absolute = min(LARGE_MEASUREMENTS_MAX_BUCKET_SIZE, cache_derived)
        sizes = size_change(bucket, m, p.timeseriesLargeMeasurementThreshold)
        if bucket.size + sizes.total > effective:
            if bucket.num_measurements < p.timeseriesBucketMinCount:
                if bucket.size + sizes.total > absolute:
                    if absolute != LARGE_MEASUREMENTS_MAX_BUCKET_SIZE:
                        self._inc(ctx.stats, "numBucketsClosedDueToCachePressure")
                        return (RolloverAction.kHardClose, RolloverReason.kCachePressure,
                                None)
                    self._inc(ctx.stats, "numBucketsClosedDueToSize")
                    return RolloverAction.kHardClose, RolloverReason.kSize, None
                if not bucket.kept_open_large:
                    bucket.kept_open_large = True
                    self._inc(ctx.stats, "numBucketsKeptOpenDueToLargeMeasurements")
            else:
                if effective == p.timeseriesBucketMaxSize:
                    self._inc(ctx.stats, "numBucketsClosedDueToSize")
                    return RolloverAction.kHardClose, RolloverReason.kSize, None
                self._inc(ctx.stats, "numBucketsClosedDueToCachePressure")
                return RolloverAction.kHardClose, RolloverReason.kCachePressure, None
        sig = m.signature
        if sig is None or sig not in bucket.schema_signatures:
            if not bucket.schema.compatible(m.doc, opts.meta_field):
                self._inc(ctx.stats, "numBucketsClosedDueToSchemaChange")
                return RolloverAction.kHardClose, RolloverReason.kSchemaChange, None
            if sig is not None:
                bucket.schema_signatures.add(sig)
        return RolloverAction.kNone, RolloverReason.kNone, sizes

    def _cache_derived_max_size(self) -> tuple[int, int]:
        """getCacheDerivedBucketMaxSize: (effective max size, cache-derived size)."""
        p = self.params
        n = self.num_active_buckets
        if n == 0:
            return p.timeseriesBucketMaxSize, _INT32_MAX
        derived = max(min(p.cache_size_bytes() // (2 * n), _INT32_MAX),
                      p.timeseriesBucketMinSize)
        return min(p.timeseriesBucketMaxSize, derived), derived

    def _rollover(self, ctx: _Ctx, bucket: Bucket, action: RolloverAction,
                  m: Measurement) -> Bucket:
        if bucket.all_committed:
            if action == RolloverAction.kArchive:
                self._archive_bucket(bucket)
            else:
                self._close_open_bucket(bucket)
                if action == RolloverAction.kSoftClose:
                    self._keep_warm(bucket)  # a query may reopen it
        else:
            bucket.rollover_action = action
        return self._allocate(ctx, m)

    def _use_bucket(self, kb: tuple[Any, bytes]) -> Bucket | None:
        for b in self._open_by_key.get(kb, ()):
            if b.rollover_action == RolloverAction.kNone:
                return b
        return None

    def _use_alternate(self, ctx: _Ctx, kb: tuple[Any, bytes], t: int) -> Bucket | None:
        span = ctx.options.max_span_ms
        for b in self._open_by_key.get(kb, ()):
            if b.rollover_action in (RolloverAction.kNone, RolloverAction.kHardClose):
                continue
            if t - b.min_time_ms >= span or t < b.min_time_ms:
                continue
            return b
        return None

    def _allocate(self, ctx: _Ctx, m: Measurement) -> Bucket:
        self._expire_idle(ctx)
        rounded = max(round_timestamp_ms(m.time_ms, ctx.options.rounding_seconds), _DATE_MIN)
        for _ in range(max(1, self.params.timeseriesInsertMaxRetriesOnDuplicates)):
            oid = self._ids.next(rounded)
            if oid not in self._open_by_id:
                break
            self._ids.reset()
        else:
            raise MongoError(6130900, "Unable to insert documents due to internal OID "
                             "generation collision. Increase the value of server parameter "
                             "'timeseriesInsertMaxRetriesOnDuplicates' and try again")
        b = Bucket(oid, ctx.coll, m.key, m.meta, ctx.options.time_field, rounded)
        b.minmax.update({ctx.options.time_field: DatetimeMS(rounded)})
        self._add_open(b)
        return b

    # -- reopening ------------------------------------------------------------------------------

    def _find_archived(self, kb: tuple[Any, bytes], t: int, span_ms: int) -> ObjectId | None:
        entry = self._archived.get(kb)
        if entry is None:
            return None
        times, ids = entry
        i = bisect.bisect_right(times, t) - 1
        if i < 0 or t - times[i] >= span_ms:
            return None
        return ids[i]

    def _remove_archived(self, kb: tuple[Any, bytes], oid: ObjectId) -> bool:
        entry = self._archived.get(kb)
        if entry is None:
            return False
        times, ids = entry
        for i, x in enumerate(ids):
            if x == oid:
                del times[i]
                del ids[i]
                self._num_archived -= 1
                self._memory -= _ARCHIVED_OVERHEAD
                if not times:
                    del self._archived[kb]
                return True
        return False

    def _try_reopen(self, ctx: _Ctx, m: Measurement, *, allow_query: bool) -> Bucket | None:
        kb = (ctx.coll, m.key)
        opts = ctx.options
        archived = self._find_archived(kb, m.time_ms, opts.max_span_ms)
        doc: Any = None
        if archived is not None:
            if ctx.source is not None:
                doc = ctx.source.fetch_bucket(ctx.coll, archived)
            self._inc(ctx.stats, "numBucketsFetched" if doc is not None
                      else "numBucketFetchesFailed")
            if doc is None:
                self._remove_archived(kb, archived)
                return None
        elif allow_query and ctx.source is not None:
            effective, _ = self._cache_derived_max_size()
            query = ReopeningQuery(opts.time_field, m.meta, m.time_ms,
                                   opts.bucket_max_span_seconds,
                                   self.params.timeseriesBucketMaxCount, effective)
            doc = ctx.source.find_reopening_candidate(ctx.coll, query)
            self._inc(ctx.stats, "numBucketsQueried" if doc is not None
                      else "numBucketQueriesFailed")
            if doc is None:
                return None
        else:
            return None
        raw: bytes | None = None
        if isinstance(doc, tuple):  # StoredBucket: decoded and raw
            doc, raw = doc
        elif isinstance(doc, bytes | bytearray | memoryview):
            raw = bytes(doc)
            doc = decode(raw)
        oid = doc.get("_id")
        meta = doc.get(META, MISSING)
        if series_key(normalize_meta(meta) if meta is not MISSING else MISSING) != m.key:
            # Equal under query semantics (1 == 1.0) but another series: MongoDB's
            # "hash collision" check refuses it.
            self._inc(ctx.stats, "numBucketReopeningsFailed")
            if archived is not None:
                self._remove_archived(kb, archived)
            return None
        existing = self._open_by_id.get(oid) if isinstance(oid, ObjectId) else None
        if existing is not None:
            if existing.coll != ctx.coll:
                self._inc(ctx.stats, "numBucketReopeningsFailed")
                return None
            self._inc(ctx.stats, "numDuplicateBucketsReopened")
            self._mark_not_idle(existing)
            return existing
        try:
            bucket = self._rehydrate(ctx, m, doc, raw)
        except _ReopenFailed:
            self._inc(ctx.stats, "numBucketReopeningsFailed")
            if archived is not None:
                self._remove_archived(kb, archived)
            return None
        self._expire_idle(ctx)
        self._remove_archived(kb, bucket.bucket_id)
        for other in list(self._open_by_key.get(kb, ())):
            if other.rollover_action == RolloverAction.kNone:
                self._inc(ctx.stats, "numBucketsClosedDueToReopening")
                if other.all_committed:
                    self._close_open_bucket(other)
                    self._keep_warm(other)  # a query may reopen it, as at commit
                else:
                    other.rollover_action = RolloverAction.kSoftClose
                break
        self._add_open(bucket)
        self._inc(ctx.stats, "numBucketsReopened")
        return bucket

    def _rehydrate(self, ctx: _Ctx, m: Measurement, doc: Mapping[str, Any],
                   raw: bytes | None = None) -> Bucket:
        """rehydrateBucket: in-memory state of a stored bucket (v1 buckets get compressed);
        `raw` is `doc` encoded, when the caller has it."""
        opts = ctx.options
        oid = doc.get("_id")
        if not isinstance(oid, ObjectId):
            raise _ReopenFailed("_id is missing or not an ObjectId")
        try:
            parsed = parse_bucket(doc)
        except MongoError as e:
            raise _ReopenFailed(str(e)) from None
        if parsed.closed:
            raise _ReopenFailed("closed")
        meta = parsed.meta
        if opts.meta_field is None:
            meta = MISSING if meta is MISSING else meta
        key = series_key(normalize_meta(meta) if meta is not MISSING else MISSING)
        if key != m.key:
            raise _ReopenFailed("Bucket metadata does not match (hash collision)")
        min_time = parsed.min_doc.get(opts.time_field)
        if type(min_time) is not DatetimeMS:
            raise _ReopenFailed("control.min time is not a date")
        if parsed.version == VERSION_UNCOMPRESSED:
            try:
                compressed = compress_bucket(doc, opts.time_field)
            except (MongoError, BSONColumnError, ValueError, TypeError):
                raise _ReopenFailed("bucket could not be compressed") from None
            raw = encode(compressed)
            ctx.rewrites[oid] = (raw, int(compressed["control"]["count"]))
            doc = compressed
            parsed = parse_bucket(compressed)
        elif raw is None:
            raw = encode(doc)
        time_col = parsed.data.get(opts.time_field)
        if not isinstance(time_col, bytes):
            raise _ReopenFailed("missing a valid time column")
        warm = self._take_warm(oid)
        last_time_ms: int | None = None
        if warm is not None and warm.coll == ctx.coll and \
                warm.columns.column_bytes() == [(n, bytes(c)) for n, c in parsed.data.items()]:
            columns, count, last_time_ms = warm.columns, warm.columns.count, warm.last_time_ms
        else:
            columns = None
            try:
                times = decode_elements(time_col)
            except BSONColumnError:
                raise _ReopenFailed("time column could not be decompressed") from None
            count = len(times)
            if times and times[-1] is not None and times[-1][0] == _DATE:
                last_time_ms = int.from_bytes(times[-1][1], "little", signed=True)
        try:
            if columns is None:
                columns = Columns.from_data(parsed.data.items(), count)
            minmax = MinMax.from_control(parsed.min_doc, parsed.max_doc)
            schema = Schema.from_control(parsed.min_doc, parsed.max_doc)
        except (BSONColumnError, SchemaChange, TypeError, ValueError):
            raise _ReopenFailed("summaries or columns unusable") from None
        b = Bucket(oid, ctx.coll, key, normalize_meta(meta) if meta is not MISSING else MISSING,
                   opts.time_field, int(min_time))
        b.columns = columns
        b.minmax = minmax
        b.schema = schema
        b.num_measurements = b.num_committed = count
        b.size = len(raw)
        b.field_names = set(parsed.data)
        b.sorted_by_time = parsed.version != VERSION_COMPRESSED_UNSORTED
        b.version = VERSION_COMPRESSED_SORTED if b.sorted_by_time else VERSION_COMPRESSED_UNSORTED
        b.reopened = True
        b.committed_write = BucketWrite("update", oid, raw, count, [])
        if oid not in ctx.rewrites:
            b.index_doc = {k: v for k, v in doc.items() if k != DATA}
        b.uncompressed_size = len(raw)
        b.last_time_ms = last_time_ms
        b.memory_usage = 0
        return b

    # -- commit preparation ---------------------------------------------------------------------

    def _prepare_writes(self, ctx: _Ctx) -> tuple[list[BucketWrite], list[int]]:
        writes: list[BucketWrite] = []
        too_large: list[int] = []
        touched_ids = set()
        for b in list(ctx.touched):
            touched_ids.add(b.bucket_id)
            w = self._prepare_bucket(ctx, b)
            if w._parts is None and len(w.document) > MAX_BUCKET_DOCUMENT_SIZE:
                too_large.extend(w.measurement_indexes)
                ctx.touched.remove(b)
                self._remove_open(b)
                continue
            writes.append(w)
        for oid, (raw, count) in ctx.rewrites.items():
            if oid not in touched_ids:
                # A v1 bucket reopened (and compressed) but then not used.
                writes.append(BucketWrite("update", oid, raw, count, []))
        return writes, too_large

    def _prepare_bucket(self, ctx: _Ctx, b: Bucket) -> BucketWrite:
        ms = b.staged
        ms.sort(key=_time_of)
        prev = b.num_committed
        changed_to_unsorted = False
        if (prev and b.sorted_by_time and b.last_time_ms is not None
                and ms[0].time_ms < b.last_time_ms):
            b.sorted_by_time = False
            b.version = VERSION_COMPRESSED_UNSORTED
            changed_to_unsorted = True
            self._inc(ctx.stats, "numCompressedBucketsConvertedToUnsorted")
        shape = ms[0].shape
        mf = ctx.options.meta_field
        lazy = False
        if shape is not None and all([m.shape is shape for m in ms]):
            # fixed-width fields: control.min/max stay small, so a bucket whose columns
            # are far below the limit cannot be too large and its document can wait
            lazy = b.columns.compressed_size < _LAZY_DOCUMENT_MAX_COLUMNS
            docs = [m.doc for m in ms]
            columns, values, extremes = _gather(shape, docs)
            b.minmax.update_many(docs, mf, shape.names, values, extremes)
            changes, delta = b.columns.append_values(columns, shape.type_bytes, len(docs))
        else:
            names: tuple[str, ...] | None = ms[0].names
            if not all(m.names == names for m in ms):
                names = None
            b.minmax.update_many([m.doc for m in ms], mf, names)
            changes, delta = b.columns.append([elements(m) for m in ms], names)
        new_fields = [f for f in b.columns.names() if f not in b.field_names]
        count = prev + len(ms)
        min_doc, max_doc = b.minmax.min(), b.minmax.max()
        parts = BucketDocumentParts(b.bucket_id, b.version, min_doc, max_doc, count, b.meta,
                                    b.columns.column_bytes())
        index_doc: dict[str, Any] = {"_id": b.bucket_id, "control": {
            "version": b.version, "min": min_doc, "max": max_doc, "count": count}}
        if b.meta is not MISSING:
            index_doc["meta"] = b.meta
        grown = 0
        for row, m in enumerate(ms, prev):
            grown += (2 + len(str(row))) * len(m.names) + m.value_bytes
        b.uncompressed_size += grown
        control: dict[str, Any] = {"count": count}
        if changed_to_unsorted:
            control["version"] = VERSION_COMPRESSED_UNSORTED
        rewritten = b.bucket_id in ctx.rewrites
        return BucketWrite(
            kind="update" if prev or rewritten else "insert",
            bucket_id=b.bucket_id, _document=None if lazy else parts.build(),
            previous_count=prev,
            measurement_indexes=[m.index for m in ms],
            column_changes=[] if rewritten else changes,
            control_changes=control, index_doc=index_doc,
            previous_index_doc=None if rewritten or not prev else b.index_doc,
            _compressed_delta=delta, _new_fields=new_fields,
            _estimate=b.staged_estimate, _last_time_ms=ms[-1].time_ms,
            _parts=parts if lazy else None, series=b.key)

    # -- bucket lifecycle -------------------------------------------------------------------------

    def _add_open(self, b: Bucket) -> None:
        self._open_by_id[b.bucket_id] = b
        self._open_by_key.setdefault((b.coll, b.key), []).append(b)
        self._set_memory(b, _BUCKET_OVERHEAD + len(b.key) + b.columns.compressed_size)

    def _remove_open(self, b: Bucket) -> None:
        if self._open_by_id.get(b.bucket_id) is not b:
            return
        del self._open_by_id[b.bucket_id]
        kb = (b.coll, b.key)
        lst = self._open_by_key.get(kb)
        if lst is not None:
            lst.remove(b)
            if not lst:
                del self._open_by_key[kb]
        self._idle.pop(b.bucket_id, None)
        self._memory -= b.memory_usage
        b.memory_usage = 0

    def _set_memory(self, b: Bucket, usage: int) -> None:
        self._memory += usage - b.memory_usage
        b.memory_usage = usage

    def _close_open_bucket(self, b: Bucket) -> None:
        if b.num_committed:
            stats = self._coll_stats(b.coll)
            self._inc(stats, "numCompressedBuckets")
            self._inc(stats, "numBytesCompressed", len(b.committed_write.document))
            self._inc(stats, "numBytesUncompressed", b.uncompressed_size)
        self._remove_open(b)

    def _archive_bucket(self, b: Bucket) -> None:
        kb = (b.coll, b.key)
        times, ids = self._archived.setdefault(kb, ([], []))
        i = bisect.bisect_left(times, b.min_time_ms)
        if i < len(times) and times[i] == b.min_time_ms:
            # Same series and start time already archived: keep that one, close this one.
            self._close_open_bucket(b)
            return
        times.insert(i, b.min_time_ms)
        ids.insert(i, b.bucket_id)
        self._num_archived += 1
        self._memory += _ARCHIVED_OVERHEAD
        self._remove_open(b)
        self._keep_warm(b)

    def _keep_warm(self, b: Bucket) -> None:
        if not (b.all_committed and b.num_committed):
            return
        self._take_warm(b.bucket_id)
        w = self._warm[b.bucket_id] = _Warm(b.coll, b.columns, b.last_time_ms,
                                            b.columns.memory_size)
        self._warm_bytes += w.size
        while self._warm_bytes > _WARM_MAX_BYTES:
            self._take_warm(next(iter(self._warm)))

    def _take_warm(self, oid: ObjectId) -> _Warm | None:
        """Remove and return the warm columns of an archived bucket, if kept."""
        w = self._warm.pop(oid, None)
        if w is not None:
            self._warm_bytes -= w.size
        return w

    def _mark_idle(self, b: Bucket) -> None:
        self._idle[b.bucket_id] = b
        self._idle.move_to_end(b.bucket_id)

    def _mark_not_idle(self, b: Bucket) -> None:
        self._idle.pop(b.bucket_id, None)

    def _expire_idle(self, ctx: _Ctx) -> None:
        """expireIdleBuckets: archive idle buckets, then forget archived ones, while over
        the memory threshold (at most timeseriesIdleBucketExpiryMaxCountPerAttempt + 1)."""
        limit = self.params.timeseriesIdleBucketExpiryMaxCountPerAttempt
        n = 0
        while self._idle and self._memory > ctx.threshold and n <= limit:
            _oid, b = next(iter(self._idle.items()))
            self._idle.pop(b.bucket_id)
            self._archive_bucket(b)
            self._inc(self._coll_stats(b.coll), "numBucketsArchivedDueToMemoryThreshold")
            n += 1
        while self._archived and self._memory > ctx.threshold and n <= limit:
            kb = next(iter(self._archived))
            times, ids = self._archived[kb]
            times.pop()
            ids.pop()
            self._num_archived -= 1
            self._memory -= _ARCHIVED_OVERHEAD
            if not times:
                del self._archived[kb]
            self._inc(self._coll_stats(kb[0]), "numBucketsClosedDueToMemoryThreshold")
            n += 1

    def _drop_buckets(self, buckets: Iterable[Bucket]) -> None:
        for b in list(buckets):
            b.staged = []
            self._remove_open(b)

    # -- helpers --------------------------------------------------------------------------------

    def _coll_stats(self, coll: Any) -> ExecutionStats:
        s = self._stats.get(coll)
        if s is None:
            s = self._stats[coll] = ExecutionStats()
        return s

    def _inc(self, stats: ExecutionStats, name: str, n: int = 1) -> None:
        stats.inc(name, n)
        self._global.inc(name, n)

    def _check_pending(self, result: BatchResult) -> None:
        if result._finished:
            raise MongoError(ErrorCode.InternalError, "bucket catalog: batch already finished")
        if self._pending is not result:
            raise MongoError(ErrorCode.InternalError, "bucket catalog: not the pending batch")


def _as_document(m: Mapping[str, Any] | bytes) -> dict[str, Any]:
    """A measurement as a dict with an `_id` (decoded from BSON or copied, and given a new
    ObjectId when it has none)."""
    doc = decode(bytes(m)) if isinstance(m, bytes | bytearray | memoryview) else dict(m)
    return doc if "_id" in doc else {"_id": ObjectId(), **doc}


def _time_of(m: Measurement) -> int:
    return m.time_ms


_PACK_VALUES: Final = native.pack_values
_NATIVE_TYPES: Final = native.SUPPORTED_TYPES


def _gather(shape: Shape, docs: list[dict[str, Any]]
            ) -> tuple[dict[str, bytes | list[Any]], dict[str, list[Any]],
                       dict[str, tuple[Any, Any]]]:
    """Each field of same-shape measurements, for the columns and for min/max: the
    values packed by the native extension with their first minimum and maximum, or (a
    bool or null field, a Python int beyond int32, a NaN, no extension) as a list."""
    columns: dict[str, bytes | list[Any]] = {}
    values: dict[str, list[Any]] = {}
    extremes: dict[str, tuple[Any, Any]] = {}
    pack = _PACK_VALUES
    for name, t, pt in zip(shape.names, shape.type_bytes, shape.py_types):
        got = None
        if pack is not None and (t is None or t in _NATIVE_TYPES):
            got = pack(docs, name, _INT32 if t is None else t, pt)
        if got is None:
            columns[name] = values[name] = [d[name] for d in docs]
            continue
        columns[name], lo, hi = got
        if lo < 0:
            values[name] = [d[name] for d in docs]
        else:
            extremes[name] = (docs[lo][name], docs[hi][name])
    return columns, values, extremes


_SCALAR_META: Final = frozenset((str, int, float, Int64, bool, type(None), DatetimeMS, ObjectId))


def _meta_cache_key(v: Any) -> Any:
    """A hashable key that tells apart every meta value the cache may see (types included,
    so 1 and 1.0 differ), or None to skip the cache (nested values)."""
    tv = type(v)
    if tv in _SCALAR_META:
        return (tv, _D.pack(v)) if tv is float else (tv, v)   # -0.0 is not 0.0 here
    if tv is dict:
        types = tuple(map(type, v.values()))
        if float in types:
            items = []
            for k, x in v.items():
                tx = type(x)
                if tx not in _SCALAR_META:
                    return None
                items.append((k, tx, _D.pack(x) if tx is float else x))
            return (dict, tuple(items))
        if not _SCALAR_META.issuperset(types):
            return None
        return (dict, tuple(v.items()), types)
    return None


# keep a reference to CODEC_OPTIONS users (decode of stored buckets) explicit
_ = CODEC_OPTIONS
