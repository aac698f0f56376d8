"""Why and how an open bucket stops taking measurements (MongoDB's rollover.h and
determineRolloverReason / getCacheDerivedBucketMaxSize).

`determine_rollover` says why a measurement cannot go into the open bucket of its series
(a `RolloverReason`, checked in MongoDB's order); the one table below maps each reason to
what happens to that bucket (`rollover_action`) and to the statistic that counts it
(`rollover_counter`):

| reason          | action     | the old bucket afterwards                               |
|-----------------|------------|---------------------------------------------------------|
| kNone           | kNone      | stays open                                              |
| kTimeForward    | kSoftClose | closed in memory, may be reopened by a later query      |
| kTimeBackward   | kArchive   | kept as an archived entry (id + min time) for reopening |
| kCount          | kHardClose | closed                                                  |
| kSchemaChange   | kHardClose | closed                                                  |
| kCachePressure  | kHardClose | closed                                                  |
| kSize           | kHardClose | closed                                                  |

A bucket that still has uncommitted measurements keeps its action pending until the
batch that wrote them is committed (`BucketCatalog.commit`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

from storage.vocabulary.bson_types import INT32_MAX

from .bucket_state import schema_compatible
from .constants import LARGE_MEASUREMENTS_MAX_BUCKET_SIZE, TimeseriesParameters

if TYPE_CHECKING:
    from .bucket import Bucket
    from .measurements import Measurement

__all__ = ["RolloverAction", "RolloverReason", "cache_derived_max_size", "determine_rollover",
           "rollover_action", "rollover_counter"]



class RolloverAction(enum.IntEnum):
    kNone = 0
    kArchive = 1
    kSoftClose = 2
    kHardClose = 3


class RolloverReason(enum.IntEnum):
    kNone = 0
    kTimeForward = 1
    kTimeBackward = 2
    kCount = 3
    kSchemaChange = 4
    kCachePressure = 5
    kSize = 6


# reason -> (action, the ExecutionStats counter of buckets rolled over for it)
_TABLE: Final[dict[RolloverReason, tuple[RolloverAction, str]]] = {
    RolloverReason.kNone: (RolloverAction.kNone, ""),
    RolloverReason.kTimeForward: (RolloverAction.kSoftClose, "numBucketsClosedDueToTimeForward"),
    RolloverReason.kTimeBackward: (RolloverAction.kArchive,
                                   "numBucketsArchivedDueToTimeBackward"),
    RolloverReason.kCount: (RolloverAction.kHardClose, "numBucketsClosedDueToCount"),
    RolloverReason.kSchemaChange: (RolloverAction.kHardClose,
                                   "numBucketsClosedDueToSchemaChange"),
    RolloverReason.kCachePressure: (RolloverAction.kHardClose,
                                    "numBucketsClosedDueToCachePressure"),
    RolloverReason.kSize: (RolloverAction.kHardClose, "numBucketsClosedDueToSize"),
}


def rollover_action(reason: RolloverReason) -> RolloverAction:
    """getRolloverAction."""
    return _TABLE[reason][0]


def rollover_counter(reason: RolloverReason) -> str:
    """The statistic counting buckets rolled over for `reason` ("" for kNone)."""
    return _TABLE[reason][1]


def cache_derived_max_size(params: TimeseriesParameters, num_active_buckets: int
                           ) -> tuple[int, int]:
    """getCacheDerivedBucketMaxSize: (effective max size, cache-derived size)."""
    if num_active_buckets == 0:
        return params.timeseriesBucketMaxSize, INT32_MAX
    derived = max(min(params.cache_size_bytes() // (2 * num_active_buckets), INT32_MAX),
                  params.timeseriesBucketMinSize)
    return min(params.timeseriesBucketMaxSize, derived), derived


def determine_rollover(bucket: Bucket, m: Measurement, new_size: int, span_ms: int,
                       meta_field: str | None, params: TimeseriesParameters,
                       max_sizes: tuple[int, int]) -> RolloverReason:
    """determineRolloverReason: why `bucket` (not new) cannot take `m`, or kNone.

    `new_size` is the bucket's size with `m` (`bucket.size` plus `size_change`'s total),
    `max_sizes` what `cache_derived_max_size` gives now. A bucket over the effective size that holds
    fewer than timeseriesBucketMinCount measurements stays open up to 12 MiB (or the
    cache-derived size): the caller counts it as kept open for large measurements.

    No statistics, no catalog state: the one thing the decision leaves behind is the
    bucket's knowledge of `m`'s schema (`Schema.compatible` checks and learns in one
    traversal, and a signature seen is remembered), and only when the answer is kNone,
    that is when `m` goes into this bucket; on kSchemaChange the bucket is closed.
    """
    t = m.time_ms
    if t - bucket.min_time_ms >= span_ms:
        return RolloverReason.kTimeForward
    if t < bucket.min_time_ms:
        return RolloverReason.kTimeBackward
    if bucket.num_measurements >= params.timeseriesBucketMaxCount:
        return RolloverReason.kCount
    effective, cache_derived = max_sizes
    if new_size > effective:
        if bucket.num_measurements < params.timeseriesBucketMinCount:
            absolute = min(LARGE_MEASUREMENTS_MAX_BUCKET_SIZE, cache_derived)
            if new_size > absolute:
                return (RolloverReason.kCachePressure
                        if absolute != LARGE_MEASUREMENTS_MAX_BUCKET_SIZE
                        else RolloverReason.kSize)
        elif effective == params.timeseriesBucketMaxSize:
            return RolloverReason.kSize
        else:
            return RolloverReason.kCachePressure
    sig = m.signature
    if sig is None or sig not in bucket.schema_signatures:
        if not schema_compatible(bucket, m, meta_field):
            return RolloverReason.kSchemaChange
        if sig is not None:
            bucket.schema_signatures.add(sig)
    return RolloverReason.kNone
