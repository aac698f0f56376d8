"""Reopening stored buckets: what the catalog asks its `BucketSource` for, and how a
stored bucket becomes an open one again (`rehydrate`).

When a measurement finds no usable open bucket, MongoDB looks for a stored bucket it can
extend (reopening.cpp / generateReopeningPipeline): first an archived bucket it still
remembers (fetched by `_id`), else a query on the buckets collection:

    {$and: [{$or: [{"control.closed": {$exists: false}}, {"control.closed": false}]},
            {$and: [{"control.min.<time>": {$lte: t}},
                    {"control.min.<time>": {$gt: t - bucketMaxSpanSeconds}}]},
            {meta: <normalized meta>}            (or {meta: {$exists: false}})
            {"data.<time>.<maxCount - 1>": {$exists: false}}]}
    then $bsonSize of the bucket < the (cache-derived) bucket max size, first match.

It runs only when the collection has an index starting with {meta, control.min.<time>}
(without metaField: control.min.<time>) that is not partial. `stored_buckets.StoredBuckets`
implements `BucketSource` over the storage engine and the pending writes: it scans the
reopening index with the query's bounds and keeps what `ReopeningQuery.matches` (the same
predicate, evaluated on a decoded bucket) keeps; `ReopeningQuery.filter` is the query as
MongoDB writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bson_order import values_equal
from storage.bsoncolumn import BSONColumnError
from storage.bsoncolumn.decoder import decode_elements
from storage.bsoncolumn.native import decode_column as native_decode_column
from storage.bsonutil import encode
from storage.errors import MongoError
from storage.vocabulary.bson_types import T_DATE
from storage.vocabulary.missing import MISSING

from . import native_control
from .bucket import Bucket, shared_names
from .bucket_document import compress_bucket, parse_bucket
from .columns import Columns
from .constants import (
    CONTROL,
    CONTROL_CLOSED,
    CONTROL_MIN,
    DATA,
    META,
    VERSION_COMPRESSED_SORTED,
    VERSION_COMPRESSED_UNSORTED,
    VERSION_UNCOMPRESSED,
)
from .metadata import normalize_meta, series_key
from .minmax import MinMax, Schema, SchemaChange
from .native_columns import NativeColumns
from .native_control import NativeControl

if TYPE_CHECKING:
    from .bucket_registry import WarmColumns
    from .bucket_state import NativeDocumentParts
    from .write_batch import BatchContext, BucketWrite


__all__ = ["BucketSource", "ReopenFailed", "ReopeningQuery", "StoredBucket", "rehydrate",
           "rehydrate_pending"]


@dataclass(frozen=True, slots=True)
class ReopeningQuery:
    """A query-based reopening request for one series and measurement time."""

    time_field: str
    meta: Any               # normalized meta value, or MISSING
    time_ms: int
    bucket_max_span_seconds: int
    max_count: int
    max_size: int
    # metadata.series_key of `meta`, when the caller has it (the source computes it else)
    series: bytes | None = None

    @property
    def min_time_gt_ms(self) -> int:
        return self.time_ms - self.bucket_max_span_seconds * 1000

    def filter(self) -> dict[str, Any]:
        """The $match MongoDB runs on the buckets collection (field paths of buckets)."""
        min_path = f"{CONTROL}.{CONTROL_MIN}.{self.time_field}"
        time_range = {"$and": [{min_path: {"$lte": DatetimeMS(self.time_ms)}},
                               {min_path: {"$gt": DatetimeMS(self.min_time_gt_ms)}}]}
        meta = {META: {"$exists": False}} if self.meta is MISSING else {META: self.meta}
        full = {f"{DATA}.{self.time_field}.{self.max_count - 1}": {"$exists": False}}
        closed = f"{CONTROL}.{CONTROL_CLOSED}"
        return {"$and": [{"$or": [{closed: {"$exists": False}}, {closed: False}]}, time_range,
                         meta, full]}

    def matches(self, bucket: Mapping[str, Any], bson_size: int | None = None, *,
                meta_checked: bool = False) -> bool:
        """The same predicate on a decoded bucket (plus the size limit when given);
        `meta_checked`: the caller knows the bucket is of the query's series."""
        control = bucket.get(CONTROL)
        if not isinstance(control, Mapping) or not _not_closed(control):
            return False
        mins = control.get(CONTROL_MIN)
        t = mins.get(self.time_field) if isinstance(mins, Mapping) else None
        if not isinstance(t, DatetimeMS) or not (self.min_time_gt_ms < int(t) <= self.time_ms):
            return False
        if meta_checked:
            pass
        elif self.meta is MISSING:
            if META in bucket:
                return False
        elif META not in bucket or not values_equal(bucket[META], self.meta):
            return False
        data = bucket.get(DATA)
        times = data.get(self.time_field) if isinstance(data, Mapping) else None
        if isinstance(times, Mapping) and str(self.max_count - 1) in times:
            return False
        if isinstance(times, list) and len(times) >= self.max_count:  # as the path's index
            return False
        return bson_size is None or bson_size < self.max_size


def _not_closed(control: Mapping[str, Any]) -> bool:
    """The query's {$or: [{control.closed: {$exists: false}}, {control.closed: false}]}:
    no `closed`, or one equal to false as the matcher compares (an array holding false
    too; a number is not a boolean)."""
    closed = control.get(CONTROL_CLOSED, MISSING)
    return closed is MISSING or closed is False or (
        type(closed) is list and any(x is False for x in closed))


# rehydrate's `normalized_meta` when the caller has not checked the series
UNCHECKED: Final = object()

StoredBucket = tuple[Mapping[str, Any], bytes]  # a bucket decoded, and its raw bytes


class BucketSource(Protocol):
    """What the catalog needs from storage to reopen buckets (all calls are synchronous).

    Both return a bucket document (decoded with CODEC_OPTIONS, raw BSON bytes, or both
    as a (decoded, raw) pair when the source has decoded it already), the catalog's
    pending write whose document storage will hold (`rehydrate_pending` reopens it from
    its native state, unbuilt), or None.
    Query-based reopening should return None when the collection has no index supporting
    it (see index_schema.supports_reopening_query), as MongoDB skips it then.
    """

    def fetch_bucket(self, coll: str, bucket_id: ObjectId
                     ) -> Mapping[str, Any] | bytes | BucketWrite | None:
        ...

    def find_reopening_candidate(self, coll: str, query: ReopeningQuery
                                 ) -> Mapping[str, Any] | bytes | StoredBucket | BucketWrite | None:
        ...


class ReopenFailed(Exception):
    """A stored bucket that cannot be reopened (the catalog counts a failed reopening)."""


def _native_control(min_doc: Mapping[str, Any], max_doc: Mapping[str, Any]
                    ) -> NativeControl | None:
    """A reopened bucket's control.min/max and schema in the native core (SchemaChange as
    the reference's); None where the core is not built or declines them."""
    try:
        return native_control.from_control(min_doc, max_doc)
    except (native_control.Declined, MongoError):
        return None


def rehydrate(ctx: BatchContext, key: bytes, doc: Mapping[str, Any], raw: bytes | None,
              take_warm: Callable[[ObjectId], WarmColumns | None], *,
              native: bool = False, normalized_meta: Any = UNCHECKED) -> Bucket:
    """rehydrateBucket: the in-memory state of a stored bucket of series `key` (a v1
    bucket is compressed, its v2 bytes recorded in `ctx.rewrites`); `raw` is `doc`
    encoded, when the caller has it. The column builders come from `take_warm` when it
    kept them for exactly the stored columns, else from the stored bytes: in the native
    core with `native` (a scanned measurement reopens it) where it takes them, as a new
    bucket for a scanned measurement is native. `normalized_meta`: the document's meta
    value normalized (MISSING without one), when the caller has checked that its series is
    `key`. Raises ReopenFailed when the bucket cannot be reopened."""
    opts = ctx.options
    oid = doc.get("_id")
    if not isinstance(oid, ObjectId):
        raise ReopenFailed("_id is missing or not an ObjectId")
    try:
        parsed = parse_bucket(doc)
    except MongoError as e:
        raise ReopenFailed(str(e)) from None
    if parsed.closed:
        raise ReopenFailed("closed")
    normalized = normalized_meta
    if normalized is UNCHECKED:
        meta = parsed.meta
        normalized = normalize_meta(meta) if meta is not MISSING else MISSING
        if series_key(normalized) != key:
            raise ReopenFailed("Bucket metadata does not match (hash collision)")
    min_time = parsed.min_doc.get(opts.time_field)
    if type(min_time) is not DatetimeMS:
        raise ReopenFailed("control.min time is not a date")
    if parsed.version == VERSION_UNCOMPRESSED:
        try:
            compressed = compress_bucket(doc, opts.time_field)
        except (MongoError, BSONColumnError, ValueError, TypeError):
            raise ReopenFailed("bucket could not be compressed") from None
        stored = raw if raw is not None else encode(doc)
        raw = encode(compressed)
        ctx.rewrites[oid] = (raw, int(compressed["control"]["count"]), stored)
        doc = compressed
        parsed = parse_bucket(compressed)
    elif raw is None:
        raw = encode(doc)
    time_col = parsed.data.get(opts.time_field)
    if not isinstance(time_col, bytes):
        raise ReopenFailed("missing a valid time column")
    warm = take_warm(oid)
    last_time_ms: int | None = None
    if warm is not None and warm.coll == ctx.coll and \
            warm.columns.column_bytes() == [(n, bytes(c)) for n, c in parsed.data.items()]:
        columns, count, last_time_ms = warm.columns, warm.columns.count, warm.last_time_ms
    else:
        columns = None
        try:
            times = native_decode_column(time_col) or decode_elements(time_col)
        except BSONColumnError:
            raise ReopenFailed("time column could not be decompressed") from None
        count = len(times)
        if times and times[-1] is not None and times[-1][0] == T_DATE:
            last_time_ms = int.from_bytes(times[-1][1], "little", signed=True)
    try:
        if columns is None:
            columns = (NativeColumns.from_data(list(parsed.data.items()), count)
                       if native else None) or Columns.from_data(parsed.data.items(), count)
        control = _native_control(parsed.min_doc, parsed.max_doc) if native else None
        if control is None:
            minmax = MinMax.from_control(parsed.min_doc, parsed.max_doc)
            schema = Schema.from_control(parsed.min_doc, parsed.max_doc)
    except (BSONColumnError, SchemaChange, TypeError, ValueError):
        raise ReopenFailed("summaries or columns unusable") from None
    b = Bucket(oid, ctx.coll, key, normalized, opts.time_field, int(min_time))
    if control is None:
        b.minmax = minmax
        b.schema = schema
    else:
        b.control = control
        b.meta_from_key()
    _reopened(b, columns, count, len(raw), parsed.data, parsed.version, last_time_ms)
    b.stored = ctx.rewrites[oid][2] if oid in ctx.rewrites else raw
    if oid not in ctx.rewrites:
        b.index_doc = {k: v for k, v in doc.items() if k != DATA}
    return b


def rehydrate_pending(ctx: BatchContext, key: bytes, write: BucketWrite,
                      state: NativeDocumentParts,
                      take_warm: Callable[[ObjectId], WarmColumns | None]) -> Bucket:
    """`rehydrate` of a bucket of series `key` whose stored document is a pending write of
    this catalog, from the native state that document is built from
    (`write.native_state`) instead of the document: the bucket `rehydrate` makes of it,
    without building or decoding it. Its control is rebuilt from its own control.min and
    control.max as the stored ones would be; its columns are the state's (the bucket's
    next write replaces this one, as for an open bucket). Raises ReopenFailed where
    `rehydrate` does."""
    assert write.min_time_ms is not None
    try:
        control = state.control.reopened()
    except SchemaChange:
        raise ReopenFailed("summaries or columns unusable") from None
    warm = take_warm(write.bucket_id)
    last_time_ms = warm.last_time_ms if warm is not None and warm.columns is state.columns \
        else write.last_time_ms
    b = Bucket(write.bucket_id, ctx.coll, key, MISSING, ctx.options.time_field,
               write.min_time_ms)
    b.control = control
    b.meta_from_key()
    _reopened(b, state.columns, state.rows, state.size, state.columns.names(), state.version,
              last_time_ms)
    b.index_doc = write.index_source
    if write.stored_keys is not None:
        b.stored_keys = write.stored_keys  # the same stored versions, written or to be
    return b


def _reopened(b: Bucket, columns: Columns | NativeColumns, count: int, size: int,
              names: Iterable[str], version: int, last_time_ms: int | None) -> None:
    """The state a reopened bucket takes from its stored document: its columns and
    count, the document's size, field names and version, and its last time."""
    b.columns = columns
    b.num_measurements = b.num_committed = count
    b.size = b.committed_size = b.uncompressed_size = size
    b.field_names = shared_names(names)
    b.sorted_by_time = version != VERSION_COMPRESSED_UNSORTED
    b.version = VERSION_COMPRESSED_SORTED if b.sorted_by_time else VERSION_COMPRESSED_UNSORTED
    b.reopened = True
    b.last_time_ms = last_time_ms
    b.memory_usage = 0
