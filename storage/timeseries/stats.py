"""Bucket catalog execution statistics, with MongoDB's names (execution_stats.cpp).

One `ExecutionStats` per collection (shown by collStats under
`storageStats.timeseries`) and one global (shown by serverStatus.bucketCatalog), both
held by the catalog's `CatalogStats`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from bson import Int64

__all__ = ["CatalogStats", "ExecutionStats"]


@dataclass(slots=True)
class ExecutionStats:
    numBucketInserts: int = 0
    numBucketUpdates: int = 0
    numBucketsOpenedDueToMetadata: int = 0
    numBucketsClosedDueToCount: int = 0
    numBucketsClosedDueToSchemaChange: int = 0
    numBucketsClosedDueToSize: int = 0
    numBucketsClosedDueToTimeForward: int = 0
    numBucketsClosedDueToTimeBackward: int = 0
    numBucketsClosedDueToMemoryThreshold: int = 0
    numCommits: int = 0
    numWaits: int = 0
    numMeasurementsCommitted: int = 0
    numBucketsClosedDueToReopening: int = 0
    numBucketsArchivedDueToMemoryThreshold: int = 0
    numBucketsArchivedDueToTimeBackward: int = 0
    numBucketsReopened: int = 0
    numBucketsKeptOpenDueToLargeMeasurements: int = 0
    numBucketsClosedDueToCachePressure: int = 0
    numBucketsFrozen: int = 0
    numCompressedBucketsConvertedToUnsorted: int = 0
    numBucketsFetched: int = 0
    numBucketsQueried: int = 0
    numBucketFetchesFailed: int = 0
    numBucketQueriesFailed: int = 0
    numBucketReopeningsFailed: int = 0
    numDuplicateBucketsReopened: int = 0
    numBytesUncompressed: int = 0
    numBytesCompressed: int = 0
    numCompressedBuckets: int = 0
    numUncompressedBuckets: int = 0
    numFailedDecompressBuckets: int = 0

    def inc(self, name: str, n: int = 1) -> None:
        setattr(self, name, getattr(self, name) + n)

    def add(self, other: ExecutionStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_document(self) -> dict[str, Any]:
        """The stats in MongoDB's order (appendExecutionStatsToBuilder), as int64."""
        d: dict[str, Any] = {}
        order = ["numBucketInserts", "numBucketUpdates", "numBucketsOpenedDueToMetadata",
                 "numBucketsClosedDueToCount", "numBucketsClosedDueToSchemaChange",
                 "numBucketsClosedDueToSize", "numBucketsClosedDueToTimeForward",
                 "numBucketsClosedDueToTimeBackward", "numBucketsClosedDueToMemoryThreshold",
                 "numCommits", "numWaits", "numMeasurementsCommitted"]
        for name in order:
            d[name] = Int64(getattr(self, name))
        if self.numCommits:
            d["avgNumMeasurementsPerCommit"] = Int64(
                self.numMeasurementsCommitted // self.numCommits)
        for name in ["numBucketsClosedDueToReopening", "numBucketsArchivedDueToMemoryThreshold",
                     "numBucketsArchivedDueToTimeBackward", "numBucketsReopened",
                     "numBucketsKeptOpenDueToLargeMeasurements",
                     "numBucketsClosedDueToCachePressure", "numBucketsFrozen",
                     "numCompressedBucketsConvertedToUnsorted", "numBucketsFetched",
                     "numBucketsQueried", "numBucketFetchesFailed", "numBucketQueriesFailed",
                     "numBucketReopeningsFailed", "numDuplicateBucketsReopened"]:
            d[name] = Int64(getattr(self, name))
        return d

    def compression_document(self) -> dict[str, Any]:
        """The compression counters collStats appends after the execution stats."""
        return {name: Int64(getattr(self, name)) for name in
                ("numBytesUncompressed", "numBytesCompressed", "numCompressedBuckets",
                 "numUncompressedBuckets", "numFailedDecompressBuckets")}


class CatalogStats(dict[str, ExecutionStats]):
    """The catalog's statistics: each collection's (by namespace, created when first
    counted) and their sum over the server (`total`)."""

    __slots__ = ("total",)

    def __init__(self) -> None:
        super().__init__()
        self.total = ExecutionStats()

    def of(self, coll: str) -> ExecutionStats:
        """The statistics of `coll` (created when first asked for)."""
        s = self.get(coll)
        if s is None:
            s = self[coll] = ExecutionStats()
        return s

    def inc(self, stats: ExecutionStats, name: str, n: int = 1) -> None:
        """Count `n` in one collection's `stats` and in the total."""
        stats.inc(name, n)
        self.total.inc(name, n)
