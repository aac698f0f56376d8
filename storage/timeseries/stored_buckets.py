"""The stored buckets of one time-series collection as the bucket catalog reads them when
it reopens a bucket: `StoredBuckets`, the storage implementation of `BucketSource`.

Acknowledged inserts whose bucket documents are still pending (`pending_writes`) count
as stored. A bucket fetched by `_id` comes from its pending write when it has one. A
reopening query returns what it would return after a flush, without flushing: the first
match in index order among the stored buckets that have no pending document and the
pending documents of the queried series. A writer that backfills older times beside a
live one reopens a bucket by query on nearly every batch, and flushing for each would
undo the group commit.

The stored buckets are found by a direct scan of the reopening index with the query's
bounds: the meta value and the range of `control.min.<time>`, one key range built from
the meta value's keystring (of its collation keys, under a collated index) and the two
dates (what the bounds planner would give). A
series the collection holds no bucket of and has no pending write of (`absent_series`)
is answered without a scan, and so are the stored buckets of a series none of whose
buckets starts in the query's time range (`absent_series` again). An array meta value is
equal to arrays and to arrays holding it, and has one index key per element, so its scan
takes every meta key within the time range; a bucket's keys all share its
`control.min.<time>`, so the buckets `ReopeningQuery.matches` keeps come in the order
MongoDB's planned query (meta unbounded, the time bounded) gives them.

Looking pending documents up by series key finds every one the query matches only when
meta values that compare equal are the same series. The reopening query keeps buckets
whose meta equals the query's as BSON values compare, so the query meta must hold no
numbers (1, 1.0 and Int64(1) are equal but are three series); a pending write whose
series is not known (a v1 bucket rewritten) is not looked up either. Otherwise, and when
a bucket has several keys in the index, the pending writes are flushed first (by the
`flush` the owner of the pending writes gives) and storage answers alone.

Candidates of the series rank as their keys in the reopening index do; where the index
keys nothing after the meta but the time bounds (the default index), by the bounds in
milliseconds, without encoding a key.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bson import Binary, ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS

from storage.bounds import Interval
from storage.bsonutil import decode
from storage.collation import Collator, has_string
from storage.engine.base import KeyRange
from storage.indexes import IndexSpec, KeyGenerator
from storage.keystring import encode_value, invert, prefix_successor
from storage.vocabulary.missing import MISSING

from .absent_series import absent_series
from .constants import CONTROL, CONTROL_MAX, CONTROL_MIN, META
from .index_schema import (
    index_keys_time_bounds,
    index_reads_data,
    supports_reopening_query,
    time_bound_paths,
)
from .metadata import document_meta_keystring, series_key
from .options import TimeseriesOptions
from .reopening import ReopeningQuery, StoredBucket

if TYPE_CHECKING:
    from storage.collection import Collection

    from .pending_writes import DeferredBucketWrites
    from .write_batch import BucketWrite

__all__ = ["StoredBuckets"]

# types whose BSON equality is identity (no numbers: they compare across types by value)
_IDENTITY_TYPES: Final = frozenset((str, bool, type(None), DatetimeMS, datetime.datetime,
                                    ObjectId, bytes, Binary, Timestamp))


class StoredBuckets:
    """The stored buckets of one time-series collection, acknowledged inserts included
    (a `BucketSource`). `flush` writes the pending writes (the owner's group commit)."""

    def __init__(self, buckets: Collection, options: TimeseriesOptions,
                 pending: DeferredBucketWrites, flush: Callable[[], None], *,
                 reopenable: Callable[[ObjectId], bool] | None = None) -> None:
        """`reopenable(bucket_id)`: whether query-based reopening may take a stored
        bucket (when other processes share the storage, not the open buckets of
        another; see `shared_insert`)."""
        self.buckets = buckets
        self.options = options
        self.pending = pending
        self.flush = flush
        self.reopenable = reopenable
        self._reopen_index: str | bool | None = False
        self._index_facts: dict[str, _IndexFacts] = {}  # by index ident
        # series key -> whether its meta is an identity meta (`_identity_meta`)
        self._identity_of: dict[bytes, bool] = {}

    def fetch_bucket(self, coll: str, bucket_id: ObjectId) -> bytes | BucketWrite | None:
        entry = self.buckets.entry
        pending = self.pending.write(entry.db, entry.name, bucket_id)
        if pending is not None:
            return pending
        found = self.buckets.find_id(bucket_id)
        return None if found is None else found[1]

    def find_reopening_candidate(self, coll: str, query: ReopeningQuery
                                 ) -> StoredBucket | BucketWrite | None:
        index = self._index()
        if index is None:
            return None
        entry = self.buckets.entry
        # under a collation, strings equal to the query's are not only its series'
        identity = self._identity(query) and not (
            self._facts(index).collator is not None and has_string(query.meta))
        key = (series_key(query.meta) if query.series is None else query.series) \
            if identity else b""
        pending = self.pending.series_writes(entry.db, entry.name, key) if identity else None
        if pending is not None:
            none_stored = False
            if type(query.meta) is not list and self.reopenable is None:
                absent = absent_series(self.buckets)
                if absent is not None:
                    if not pending[1] and absent.holds_none_of(self.buckets, key):
                        return None  # storage holds no bucket of the series, none is pending
                    none_stored = absent.holds_none_starting(
                        self.buckets, key, query.min_time_gt_ms, query.time_ms)
            found = self._first_match(index, query, *pending, none_stored=none_stored)
            if found is not _UNORDERED:
                return found  # type: ignore[return-value]
        self.flush()
        return self._first_match(index, query, {}, [])  # type: ignore[return-value]

    def _identity(self, query: ReopeningQuery) -> bool:
        """`_identity_meta` of the query's meta, remembered by series key (bounded)."""
        if query.series is None:
            return _identity_meta(query.meta)
        known = self._identity_of.get(query.series)
        if known is None:
            if len(self._identity_of) >= _IDENTITY_MEMO_MAX:
                self._identity_of.clear()
            known = self._identity_of[query.series] = _identity_meta(query.meta)
        return known

    def _first_match(self, index: str, query: ReopeningQuery,
                     pending: dict[ObjectId, BucketWrite], series: list[BucketWrite], *,
                     none_stored: bool = False) -> StoredBucket | BucketWrite | object | None:
        """The first bucket in `index` order that the query matches, among the stored
        buckets without a pending write (none looked for when `none_stored`: storage
        holds none of the series in the query's time range) and the pending writes
        `series`: a stored one as (decoded, raw), a pending one as its write (_UNORDERED
        when a match has several keys in the index, so the order is not one key's)."""
        best: _Candidate | None = None
        reopenable = self.reopenable
        matches, stored, meta_checked = (_always, iter(()), False) if none_stored \
            else self._stored_candidates(index, query)
        for rid, raw in stored:
            # a raw look first: what it rules out needs no decoding
            oid = _leading_oid(raw)
            if oid is not None and (oid in pending or len(raw) >= query.max_size or (
                    reopenable is not None and not reopenable(oid))):
                continue  # pending: its pending version is looked at below
            doc = decode(raw)
            if doc.get("_id") in pending:
                continue
            if reopenable is not None and not (isinstance(doc.get("_id"), ObjectId)
                                               and reopenable(doc["_id"])):
                continue
            if matches(doc) and query.matches(doc, len(raw), meta_checked=meta_checked):
                if not series:
                    return doc, raw
                best = (doc, raw, (0, rid))
                break
        ranked: list[_Candidate] = []
        if best is not None:
            ranked.append(best)
        lo, hi = query.min_time_gt_ms, query.time_ms
        for i, w in enumerate(series):
            if w.min_time_ms is not None and not lo < w.min_time_ms <= hi:
                continue  # its control.min.<time>, known without decoding, is out of range
            # A pending write is a compressed bucket of the query's series (`series` are
            # its writes): its view without `data` decides as its document would (only a
            # v1 bucket's data can fail the filter) with the document's size, known
            # without building it, and the meta needs no comparing. A view the native
            # core built (never control.closed) is not even decoded: with no filter
            # besides the query's, its start (checked above) and size decide. Only the
            # chosen one's document is built and decoded.
            size = w.known_size
            view: Mapping[str, Any] | None = None
            if matches is _always and w.min_time_ms is not None and size is not None \
                    and w.native_state is not None:
                if size >= query.max_size:
                    continue
            else:
                view = w.index_doc
                if view is None or not matches(view):
                    continue
                if not query.matches(view, len(w.document) if size is None else size,
                                     meta_checked=True):
                    continue
            # an insert is flushed after every stored record, in this order; an update
            # stays where its record is (looked up only if its key ties)
            ranked.append((view, w, (1, i) if w.kind == "insert" else w.bucket_id))
        if not ranked:
            return None
        if len(ranked) == 1:
            return _chosen(*ranked[0][:2])
        facts = self._facts(index)
        if facts.bounds_rank is not None and type(query.meta) is not list:
            by_bounds = self._first_by_bounds(ranked, facts.bounds_rank, query.time_field)
            if by_bounds is not None:
                return by_bounds
        keyed: list[tuple[Any, _Candidate]] = []
        for seen, source, order in ranked:
            if not isinstance(source, bytes):
                # its key needs `data` when the index reads it, which its view lacks; an
                # index of the id, meta and time bounds alone reads none of it
                seen = None if facts.reads_data else (
                    facts.keys_time_bounds and source.key_document(query.time_field)
                ) or source.index_doc
                if seen is None:
                    seen = decode(source.document)
            assert seen is not None
            key = self._rank_key(index, seen, query)
            if key is None:
                return _UNORDERED
            keyed.append((key, (seen, source, order)))
        return self._least(keyed)

    def _first_by_bounds(self, ranked: list[_Candidate], rank: tuple[tuple[int, int], ...],
                         time_field: str) -> StoredBucket | BucketWrite | None:
        """`_first_match`'s choice among `ranked` in an index whose fields after the meta
        are control.min/max.<time> (`_IndexFacts.bounds_rank`): with every candidate's
        bounds dates, whose keys order as their milliseconds do, the least by those; None
        when a bound is not a date (then the keys decide)."""
        keyed: list[tuple[Any, _Candidate]] = []
        for candidate in ranked:
            bounds = _time_bounds(candidate[0], candidate[1], time_field)
            if bounds is None:
                return None
            keyed.append((tuple(bounds[which] * direction for which, direction in rank),
                          candidate))
        return self._least(keyed)

    def _least(self, keyed: list[tuple[Any, _Candidate]]) -> StoredBucket | BucketWrite:
        """The candidate of the least key (equal keys go in record order)."""
        least = min(k for k, _c in keyed)
        tied = [c for k, c in keyed if k == least]
        if len(tied) > 1:
            tied.sort(key=lambda c: self._record_order(c[2]))
        return _chosen(*tied[0][:2])

    def _record_order(self, order: tuple[int, int] | ObjectId) -> tuple[int, int]:
        """Where a candidate stands among equal keys: a pending update is where its
        stored record is."""
        if isinstance(order, ObjectId):
            found = self.buckets.find_id(order)
            return (0, found[0] if found is not None else 0)
        return order

    def _rank_key(self, index: str, doc: Mapping[str, Any], query: ReopeningQuery
                  ) -> bytes | None:
        """What orders candidates of the query's series in `index` as their keys there do
        (None where `index_key` gives None: several keys, or none). Every candidate has
        the series' meta value, whose keys are equal: when the index leads with the meta
        field, is neither sparse nor partial and the meta is no array, the key of the
        fields after it orders them alike without encoding the meta."""
        gen = None if type(query.meta) is list else self._facts(index).rank_generator
        if gen is None:
            return self.buckets.index_key(index, doc)
        keys = gen.keys(doc)
        return keys.entries[0][0] if len(keys.entries) == 1 else None

    def _facts(self, index: str) -> _IndexFacts:
        """What the query reads of `index`, worked out once per index (by its ident, so
        an index made again is looked at again)."""
        ix = self.buckets.entry.index(index)
        assert ix is not None  # `_index` found it in this entry
        facts = self._index_facts.get(ix.ident)
        if facts is None:
            facts = self._index_facts[ix.ident] = _IndexFacts.of(ix.spec,
                                                                 self.options.time_field)
        return facts

    def _stored_candidates(self, index: str, query: ReopeningQuery
                           ) -> tuple[Callable[[Any], bool], Iterator[tuple[int, bytes]], bool]:
        """The stored buckets the query can match, in index order, what besides
        `query.matches` they must pass, and whether their meta values are known equal to
        the query's. The index bounds are the query's: the meta value (every meta key for
        an array, see the module docstring) and the range of `control.min.<time>`; for a
        meta value that is not an array, one key range built directly
        (`_reopening_range`): no key there is an array's, so every bucket found has a meta
        equal to the query's as the query compares it (under the index's collation), but
        for a null key, which a bucket without a meta field has too."""
        facts = self._facts(index)
        spec = facts.spec
        fields = spec.fields
        collator = facts.collator
        value = None if query.meta is MISSING else query.meta
        if collator is not None:
            value = collator.translate(value)  # as the index keys strings
        if type(query.meta) is not list:
            kept = document_meta_keystring(query.series) if (
                collator is None and type(query.meta) is dict and query.series is not None
            ) else None
            rng = _reopening_range(value, query, fields, spec.directions, meta_keystring=kept)
            if rng is not None:
                found = self.buckets.index_scan_range(index, rng)
                if found is not None:
                    # (null keys are also those of buckets without a meta field)
                    return _always, found, value is not None
        min_path = time_bound_paths(query.time_field)[0]
        meta = Interval.all() if type(query.meta) is list else Interval.point(value)
        bounds = []
        for name in fields:
            if name == META:
                bounds.append([meta])
            elif name == min_path:
                bounds.append([Interval(DatetimeMS(query.min_time_gt_ms), False,
                                        DatetimeMS(query.time_ms), True)])
            else:
                bounds.append([Interval.all()])
        return _always, self.buckets.index_scan(index, bounds), False

    def _index(self) -> str | None:
        """The index MongoDB's reopening query needs (None: none, so no query)."""
        if self._reopen_index is False:
            self._reopen_index = None
            for ix in self.buckets.entry.indexes:
                doc = ix.spec.document
                if supports_reopening_query(self.options, doc["key"],
                                            bool(doc.get("partialFilterExpression"))):
                    self._reopen_index = ix.name
                    break
        return self._reopen_index  # type: ignore[return-value]


_UNORDERED: Final = object()
# series keys `StoredBuckets._identity` remembers (about 1 MB of TSBS-like keys)
_IDENTITY_MEMO_MAX: Final = 4096


@dataclass(frozen=True, slots=True)
class _IndexFacts:
    """What the reopening query reads of its index: its spec and collation, whether it
    reads `data` (a bucket's view without it lacks it), and its key generator without
    the leading meta field (see `StoredBuckets._rank_key`; None when it does not lead
    with the meta field alone, or is sparse or partial)."""

    spec: IndexSpec
    collator: Collator | None
    reads_data: bool
    rank_generator: KeyGenerator | None
    # the index keys only `_id`, the meta and the time bounds (`index_keys_time_bounds`)
    keys_time_bounds: bool
    # with `rank_generator`, when the fields after the meta are control.min/max.<time>
    # only: for each, (0 for min or 1 for max, its direction)
    bounds_rank: tuple[tuple[int, int], ...] | None

    @classmethod
    def of(cls, spec: IndexSpec, time_field: str) -> _IndexFacts:
        gen = None
        if len(spec.fields) > 1 and spec.fields[0] == META and not spec.sparse \
                and spec.partial_filter is None:
            doc: dict[str, Any] = {"v": 2, "name": spec.name,
                                   "key": {f: spec.key[f] for f in spec.fields[1:]}}
            if "collation" in spec.document:
                doc["collation"] = spec.document["collation"]
            gen = KeyGenerator(IndexSpec.from_document(doc))
        bounds = time_bound_paths(time_field)
        rank = None
        if gen is not None and all(f in bounds for f in spec.fields[1:]):
            rank = tuple((bounds.index(f), d) for f, d in zip(spec.fields[1:],
                                                             spec.directions[1:]))
        return cls(spec, spec.collator, index_reads_data(spec), gen,
                   index_keys_time_bounds(spec, time_field), rank)


def _leading_oid(raw: bytes) -> ObjectId | None:
    """The `_id` of a bucket document whose first field is an ObjectId `_id` (as the
    catalog writes them), read from the bytes; None otherwise."""
    if len(raw) >= 21 and raw[4:9] == b"\x07_id\x00":
        return ObjectId(raw[9:21])
    return None


def _always(doc: Any) -> bool:
    return True


# a reopening candidate: the bucket decoded (or a pending write's index view, None until
# it is decoded to rank it), its raw bytes (or that write) and where it stands in its
# index key's order
_Candidate = tuple["Mapping[str, Any] | None", "bytes | BucketWrite",
                   "tuple[int, int] | ObjectId"]


def _chosen(doc: Mapping[str, Any] | None, source: bytes | BucketWrite
            ) -> StoredBucket | BucketWrite:
    """A chosen candidate: a stored one as (decoded, raw), a pending one as its write (its
    index view stood for its document)."""
    if isinstance(source, bytes):
        assert doc is not None
        return doc, source
    return source


def _time_bounds(seen: Mapping[str, Any] | None, source: bytes | BucketWrite,
                 time_field: str) -> tuple[int, int] | None:
    """A candidate's control.min/max.<time> in milliseconds, None unless both are dates:
    a pending one's from its native state (or its view), a stored one's decoded."""
    if not isinstance(source, bytes):
        state = source.native_state
        if state is not None:
            return state.control.date_bounds(time_field)
        seen = source.index_doc
    control = seen.get(CONTROL) if seen is not None else None
    if not isinstance(control, Mapping):
        return None
    mins, maxes = control.get(CONTROL_MIN), control.get(CONTROL_MAX)
    if not (isinstance(mins, Mapping) and isinstance(maxes, Mapping)):
        return None
    lo, hi = mins.get(time_field), maxes.get(time_field)
    if type(lo) is not DatetimeMS or type(hi) is not DatetimeMS:
        return None
    return int(lo), int(hi)


def _reopening_range(meta: Any, query: ReopeningQuery, fields: Sequence[str],
                     directions: Sequence[int], *, meta_keystring: bytes | None = None
                     ) -> KeyRange | None:
    """The one key range of the reopening index that `plan_ranges` gives for the query's
    bounds (a point meta value, then `control.min.<time>` in (t - span, t], every later
    field unbounded), built from the keystring of `meta` (the query's meta value as the
    index keys it; `meta_keystring`: that keystring, when the caller has it) and the two
    dates; None when the index is not {meta, control.min.<time>, ...} (without
    metaField: {control.min.<time>, ...})."""
    prefix = b""
    i = 0
    if fields and fields[0] == META:
        enc = encode_value(meta) if meta_keystring is None else meta_keystring
        prefix = enc if directions[0] >= 0 else invert(enc)
        i = 1
    if len(fields) <= i or fields[i] != time_bound_paths(query.time_field)[0]:
        return None
    lo = encode_value(DatetimeMS(query.min_time_gt_ms))  # exclusive
    hi = encode_value(DatetimeMS(query.time_ms))         # inclusive
    if lo >= hi:
        return None  # an empty range: left to the planner
    if directions[i] >= 0:
        start, end = prefix_successor(prefix + lo), prefix_successor(prefix + hi)
        if start is None:
            return None
        return KeyRange(start, True, end, False)
    return KeyRange(prefix + invert(hi), True, prefix + invert(lo), False)


def _identity_meta(meta: Any) -> bool:
    """True when the meta values equal to `meta` are those of its series (no numbers)."""
    t = type(meta)
    if t is dict:
        return all(_identity_meta(x) for x in meta.values())
    if t is list:
        return all(_identity_meta(x) for x in meta)
    return meta is MISSING or t in _IDENTITY_TYPES
