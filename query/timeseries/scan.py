"""The bucket scan: the candidate buckets of a bucket-level filter, in index order.

Every time-series read walks the buckets the same way: the query planner picks an access
path for the bucket filter over the buckets collection's indexes, the candidates come
back as bytes, and the filter is re-checked on each decoded bucket (an index range only
approximates it). `BucketScan` does that once for every read path.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any

from query.executor import FindSpec, PreparedFind, candidates, prepare_find
from storage.bsonutil import decode
from storage.collation import Collator, has_string
from storage.collection import Collection

__all__ = ["BucketScan"]


class BucketScan:
    """The buckets of `buckets` that can match `bucket_filter` (None: all of them)."""

    def __init__(self, buckets: Collection | None, bucket_filter: dict[str, Any] | None,
                 collator: Collator | None = None) -> None:
        self.collection = buckets
        self.filter = bucket_filter
        # Bucket filters hold no $expr: without a string in them a collation changes nothing,
        # and the buckets collection's (simple) indexes stay usable.
        if not has_string(bucket_filter):
            collator = None
        self.prepared: PreparedFind = prepare_find(buckets, FindSpec(filter=bucket_filter,
                                                                     collator=collator))

    def raw(self) -> Iterator[tuple[int, bytes]]:
        """(record id, bucket bytes) of every candidate, not yet re-checked."""
        return candidates(self.collection, self.prepared.plan)

    def matches(self, bucket: dict[str, Any]) -> bool:
        """The bucket filter on a bucket (or on the part of it the filter reads)."""
        return self.filter is None or self.prepared.matcher.matches(bucket)

    def buckets(self, only: Container[int] | None = None
                ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(record id, decoded bucket) of the buckets passing the filter; with `only`,
        just those record ids (the others are not decoded)."""
        check = self.filter is not None
        matches = self.prepared.matcher.matches
        for rid, raw in candidates(self.collection, self.prepared.plan):
            if only is not None and rid not in only:
                continue
            bucket = decode(raw)
            if check and not matches(bucket):
                continue
            yield rid, bucket
