"""The bucket scan: the candidate buckets of a bucket-level filter, in index order.

Every time-series read walks the buckets the same way: the query planner picks an access
path for the bucket filter over the buckets collection's indexes, the candidates come
back as bytes, and the filter is re-checked on each decoded bucket (an index range only
approximates it). `BucketScan` does that once for every read path.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from typing import Any

from query.executor import FindSpec, PreparedFind, candidates, prepare_find
from storage.bsonutil import decode
from storage.collation import Collator, has_string
from storage.collection import Collection
from storage.collection_results import ScanStats
from storage.timeseries import ControlFilter, raw_control

__all__ = ["BucketScan", "ReadStats"]


@dataclass
class ReadStats:
    """What a time-series read did, for explain: the buckets collection's keys and
    documents examined, the buckets that passed the bucket filter, the buckets unpacked
    and the measurements that passed the measurement filter, and the path it took."""

    scan: ScanStats = field(default_factory=ScanStats)
    buckets_matched: int = 0
    buckets_skipped: int = 0  # skipped by control min/max, before decoding
    buckets_unpacked: int = 0
    buckets_scanned: int = 0  # by block processing: the candidates it read
    columns_decoded: int = 0  # by block processing
    measurements: int = 0
    path: str = "general"


class BucketScan:
    """The buckets of `buckets` that can match `bucket_filter` (None: all of them)."""

    def __init__(self, buckets: Collection | None, bucket_filter: dict[str, Any] | None,
                 stats: ReadStats | None = None, collator: Collator | None = None,
                 control: ControlFilter | None = None) -> None:
        self.collection = buckets
        self.filter = bucket_filter
        self.control = control  # skips buckets by control.min/max before decoding them
        # Bucket filters hold no $expr: without a string in them a collation changes nothing,
        # and the buckets collection's (simple) indexes stay usable.
        if not has_string(bucket_filter):
            collator = None
        self.prepared: PreparedFind = prepare_find(buckets, FindSpec(filter=bucket_filter,
                                                                     collator=collator))
        self.stats = stats

    def raw(self) -> Iterator[tuple[int, bytes]]:
        """(record id, bucket bytes) of every candidate, not yet re-checked."""
        return candidates(self.collection, self.prepared.plan,
                          self.stats.scan if self.stats is not None else None)

    def matches(self, bucket: dict[str, Any]) -> bool:
        """The bucket filter on a bucket (or on the part of it the filter reads)."""
        return self.filter is None or self.prepared.matcher.matches(bucket)

    def buckets(self, only: Container[int] | None = None
                ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(record id, decoded bucket) of the buckets passing the filter; with `only`,
        just those record ids (the others are not decoded)."""
        check = self.filter is not None
        matches = self.prepared.matcher.matches
        control = self.control
        stats = self.stats
        for rid, raw in self.raw():
            if only is not None and rid not in only:
                continue
            if control is not None and not control.may_match(raw_control(raw)):
                if stats is not None:
                    stats.buckets_skipped += 1
                continue
            bucket = decode(raw)
            if check and not matches(bucket):
                continue
            if stats is not None:
                stats.buckets_matched += 1
            yield rid, bucket
