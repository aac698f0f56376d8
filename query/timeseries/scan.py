"""The bucket scan: the candidate buckets of a bucket-level filter, in index order.

Every time-series read walks the buckets the same way: the query planner picks an access
path for the bucket filter over the buckets collection's indexes, the candidates come
back as bytes, and the filter is re-checked on each decoded bucket (an index range only
approximates it). `BucketScan` does that once for every read path.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from query.executor import FindSpec, PreparedFind, candidates, prepare_find
from query.match import compile_filter
from storage import native
from storage.bsonutil import decode
from storage.collation import Collator, has_string
from storage.collection import Collection
from storage.collection_results import ScanStats
from storage.timeseries import ControlFilter, raw_control
from storage.timeseries.constants import CONTROL, META

__all__ = ["BucketScan", "MetaGate", "ReadStats", "stored_control"]


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


_BUCKET_HEAD: Final = frozenset({"_id", "control", "meta"})


def _reads_no_data(flt: Any) -> bool:
    """Whether a bucket filter reads only `_id`, `control` and `meta` (None reads none)."""
    if flt is None:
        return True
    if type(flt) is not dict:
        return False
    for k, v in flt.items():
        if k in ("$and", "$or", "$nor"):
            if type(v) is not list or not all(_reads_no_data(c) for c in v):
                return False
        elif k.startswith("$") or k.split(".", 1)[0] not in _BUCKET_HEAD:
            return False
    return True


def _meta_conjuncts(flt: Any, out: list[dict[str, Any]]) -> None:
    if type(flt) is not dict:
        return
    for k, v in flt.items():
        if k == "$and" and type(v) is list:
            for c in v:
                _meta_conjuncts(c, out)
        elif k == META or k.startswith(META + "."):
            out.append({k: v})


class MetaGate:
    """The conjuncts of a bucket filter on `meta` alone, tested once per distinct meta
    value (read natively, without decoding the bucket): a bucket they reject cannot pass
    the filter."""

    def __init__(self, flt: dict[str, Any] | None) -> None:
        conjuncts: list[dict[str, Any]] = []
        _meta_conjuncts(flt, conjuncts)
        self.matcher = compile_filter({"$and": conjuncts}) if conjuncts else None
        self.seen: dict[bytes | None, bool] = {}

    @property
    def active(self) -> bool:
        return self.matcher is not None and native.core is not None

    def passes(self, raw: bytes) -> bool:
        assert self.matcher is not None and native.core is not None
        try:
            m = native.core.bucket_metas([raw])[0]
        except native.Declined:
            return True  # malformed: the full path reports it
        ok = self.seen.get(m)
        if ok is None:
            ok = self.seen[m] = self.matcher.matches(
                {META: decode(m)["m"]} if m is not None else {})
        return ok


def stored_control(raw: bytes) -> Mapping[str, Any]:
    """`raw_control`, read by the native core where it is built (no top-level element of
    the bucket but `data` becomes a Python object either way; this one never touches it)."""
    if native.core is None:
        return raw_control(raw)
    head = native.core.bucket_head(raw)
    if head is None:
        return raw_control(raw)
    c = decode(head).get(CONTROL)
    return c if isinstance(c, Mapping) else {}


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
        self.collator = collator
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
        # the bucket filter and the control checks read no `data`: they run on the rest of
        # the bucket, and only a bucket passing them is decoded whole
        head = native.core.bucket_head if native.core is not None and (
            control is not None or check) and _reads_no_data(self.filter) else None
        # (the gate compares strings simply)
        gate = MetaGate(self.filter) if head is not None and self.collator is None else None
        if gate is not None and not gate.active:
            gate = None
        for rid, raw in self.raw():
            if only is not None and rid not in only:
                continue
            if gate is not None and not gate.passes(raw):
                continue
            part = head(raw) if head is not None else None
            if part is not None:
                h = decode(part)
                c = h.get(CONTROL)
                if control is not None and not control.may_match(
                        c if isinstance(c, Mapping) else {}):
                    if stats is not None:
                        stats.buckets_skipped += 1
                    continue
                if check and not matches(h):
                    continue
                if stats is not None:
                    stats.buckets_matched += 1
                yield rid, decode(raw)
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
