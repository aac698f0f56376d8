"""Reopening stored buckets: the query the catalog asks its caller to run.

When a measurement finds no usable open bucket, MongoDB looks for a stored bucket it can
extend (reopening.cpp / generateReopeningPipeline): first an archived bucket it still
remembers (fetched by `_id`), else a query on the buckets collection:

    {$and: [{"control.closed": {$exists: false}},
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bson_order import values_equal

from .constants import CONTROL, CONTROL_CLOSED, CONTROL_MIN, DATA, META
from .metadata import MISSING

__all__ = ["BucketSource", "ReopeningQuery", "StoredBucket"]


@dataclass(frozen=True, slots=True)
class ReopeningQuery:
    """A query-based reopening request for one series and measurement time."""

    time_field: str
    meta: Any               # normalized meta value, or MISSING
    time_ms: int
    bucket_max_span_seconds: int
    max_count: int
    max_size: int

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
        return {"$and": [{f"{CONTROL}.{CONTROL_CLOSED}": {"$exists": False}}, time_range,
                         meta, full]}

    def matches(self, bucket: Mapping[str, Any], bson_size: int | None = None) -> bool:
        """The same predicate on a decoded bucket (plus the size limit when given)."""
        control = bucket.get(CONTROL)
        if not isinstance(control, Mapping) or CONTROL_CLOSED in control:
            return False
        mins = control.get(CONTROL_MIN)
        t = mins.get(self.time_field) if isinstance(mins, Mapping) else None
        if not isinstance(t, DatetimeMS) or not (self.min_time_gt_ms < int(t) <= self.time_ms):
            return False
        if self.meta is MISSING:
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


StoredBucket = tuple[Mapping[str, Any], bytes]  # a bucket decoded, and its raw bytes


class BucketSource(Protocol):
    """What the catalog needs from storage to reopen buckets (all calls are synchronous).

    Both return a bucket document (decoded with CODEC_OPTIONS, raw BSON bytes, or both
    as a (decoded, raw) pair when the source has decoded it already), or None.
    Query-based reopening should return None when the collection has no index supporting
    it (see index_schema.supports_reopening_query), as MongoDB skips it then.
    """

    def fetch_bucket(self, coll: str, bucket_id: ObjectId) -> Mapping[str, Any] | bytes | None:
        ...

    def find_reopening_candidate(self, coll: str, query: ReopeningQuery
                                 ) -> Mapping[str, Any] | bytes | StoredBucket | None:
        ...
