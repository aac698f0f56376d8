"""Staging: which bucket each measurement of a batch goes into (MongoDB's tryInsert,
insertWithReopeningContext, insertIntoBucket, rollover and allocateBucket).

A measurement goes into the open bucket of its series unless `rollover.determine_rollover`
gives a reason. On time forward or backward it first tries an *alternate* bucket of the
series that is still pending a close and covers its time, then *reopening*: an archived
bucket covering the time (fetched by `_id`), or, for time backward and when the series
has no open bucket, a stored bucket found by a `ReopeningQuery`. Otherwise the bucket
rolls over (its action from `rollover.rollover_action`: at once when it has nothing
staged, else when the batch commits) and a new bucket takes the measurement.

A series' run of measurements that its bucket takes with nothing else happening (no
rollover, known fields, small values) is staged in bulk (`stage_run`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from bson import ObjectId

from storage.bsonutil import decode
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

from .bucket import Bucket, SizeChange, num_digits, size_change
from .bucket_id import BucketIdGenerator
from .bucket_registry import BucketRegistry
from .bucket_state import make_native, schema_learn, set_time_bound
from .constants import META, TimeseriesParameters
from .measurements import Measurement
from .metadata import normalize_meta, series_key
from .options import round_timestamp_ms
from .reopening import ReopenFailed, ReopeningQuery, StoredBucket, rehydrate, rehydrate_pending
from .rollover import (
    RolloverAction,
    RolloverReason,
    cache_derived_max_size,
    determine_rollover,
    rollover_action,
    rollover_counter,
)
from .stats import CatalogStats
from .write_batch import BatchContext, BucketWrite

__all__ = ["Stager"]

_DATE_MIN: Final = -(2**63)
# A bucket over the effective size that still gets one of these (the checks after the
# size rule's) was let stay open by timeseriesBucketMinCount: kept open for large ones.
_KEPT_OPEN: Final = (RolloverReason.kNone, RolloverReason.kSchemaChange)


class Stager:
    """Stages measurements into the buckets of the registry (one per catalog)."""

    def __init__(self, params: TimeseriesParameters, registry: BucketRegistry,
                 stats: CatalogStats, ids: BucketIdGenerator) -> None:
        self.params = params
        self._registry = registry
        self._stats = stats
        self._ids = ids
        # (active buckets, cache_derived_max_size then) within the batch in progress
        self._sizes: tuple[int, tuple[int, int]] = (-1, (0, 0))

    def begin_batch(self) -> None:
        """A batch starts: the parameters may have changed since the last one."""
        self._sizes = (-1, (0, 0))

    def _max_sizes(self) -> tuple[int, int]:
        """`cache_derived_max_size` now: the parameters hold still within a batch, the
        number of active buckets moves only as buckets open and close."""
        n = self._registry.num_active
        if self._sizes[0] != n:
            self._sizes = (n, cache_derived_max_size(self.params, n))
        return self._sizes[1]

    def stage(self, ctx: BatchContext, m: Measurement) -> None:
        """tryInsert / insertWithReopeningContext: put `m` into a bucket of its series."""
        kb = (ctx.coll, m.key)
        registry = self._registry
        bucket = registry.use_bucket(kb)
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
        alternate = registry.use_alternate(kb, m.time_ms, ctx.options.max_span_ms)
        if alternate is not None and self._insert_into(
                ctx, alternate, m, allow_create=False, due_to_meta=False) is None:
            return
        reopened = self._try_reopen(ctx, m,
                                    allow_query=reason == RolloverReason.kTimeBackward)
        if reopened is not None:
            self._insert_into(ctx, reopened, m, allow_create=True, due_to_meta=False)
            return
        bucket = registry.use_bucket(kb)
        if bucket is None:
            bucket = self._allocate(ctx, m)
            self._insert_into(ctx, bucket, m, allow_create=True, due_to_meta=True)
        else:
            self._insert_into(ctx, bucket, m, allow_create=True, due_to_meta=False)

    def stage_run(self, ctx: BatchContext, group: list[int], start: int,
                  key: bytes | None = None) -> int:
        """Stage the rows group[start:] (one series, sorted by time) in bulk into the
        bucket that took group[start - 1], as far as `stage` would put each one there
        with nothing else happening (no rollover, no size, field or schema change, no
        counter moved); returns how many were staged. The rest go through `stage` one by
        one. Read from the batch's per-row lists: no Measurement is made for them.

        With `start` 0 (`key`: the series key), the run starts the series' rows of the
        batch: it goes into the series' open bucket if `stage` would put its first row
        there as it is (the bucket holding measurements already, the time not before
        its own), so a series whose batch fits its bucket takes no `stage` at all."""
        rows = ctx.rows
        registry = self._registry
        if start:
            prev = group[start - 1]
            b = registry.use_bucket((ctx.coll, rows.key(prev)))
            if b is None or b.size == 0 or not b.staged or b.staged[-1] != prev:
                return 0
        else:
            assert key is not None
            b = registry.use_bucket((ctx.coll, key))
            if b is None or b.size == 0 or b.staged or rows.times[group[0]] < b.min_time_ms:
                return 0
        p = self.params
        room = p.timeseriesBucketMaxCount - b.num_measurements
        if room <= 0 or b.size > self._max_sizes()[0]:
            return 0
        end_time = b.min_time_ms + ctx.options.max_span_ms
        digits = num_digits(b.num_measurements + room)
        large = p.timeseriesLargeMeasurementThreshold
        # the last signature found known: a batch's shapes share theirs, and a scanned
        # shape's is the same object from batch to batch (the bucket keeps the last one
        # it knew: a bucket's schema and fields only grow)
        known: object = MISSING if b.run_signature is None else b.run_signature
        times, max_lens, signatures, names = (rows.times, rows.max_value_lens,
                                              rows.signatures, rows.names)
        k = 0
        for r in group[start:start + room]:
            if times[r] >= end_time or max_lens[r] + digits + 2 > large:
                break
            sig = signatures[r]
            if sig is not known:
                # fields committed or staged already: a measurement of these changes no
                # size (`size_change`), as the new bucket's first measurement's fields
                # are staged
                if sig is None or sig not in b.schema_signatures or not (
                        b.field_names.issuperset(names[r])
                        or (b.field_names | b.uncommitted_field_names).issuperset(names[r])):
                    break
                known = b.run_signature = sig
            k += 1
        if k:
            if not start:  # what `stage` does for the first measurement a bucket takes
                self._touch(ctx, b)
            b.staged.extend(group[start:start + k])
            b.num_measurements += k
        return k

    def _touch(self, ctx: BatchContext, b: Bucket) -> None:
        """`b` takes measurements of this batch: it is among its touched buckets, its rows
        are the batch's, it is not idle."""
        if id(b) not in ctx.touched_ids:
            ctx.touched_ids.add(id(b))
            ctx.touched.append(b)
        b.rows = ctx.rows
        self._registry.mark_not_idle(b)

    def _insert_into(self, ctx: BatchContext, bucket: Bucket, m: Measurement, *,
                     allow_create: bool, due_to_meta: bool) -> RolloverReason | None:
        """insertIntoBucket: stage `m` in `bucket` or (allowed) in the bucket replacing it.

        Returns the rollover reason instead when the bucket would be soft-closed or
        archived and `allow_create` is False.
        """
        newly_opened = bucket.size == 0
        p = self.params
        sizes: SizeChange | None = None
        if not newly_opened:
            sizes = size_change(bucket, m, p.timeseriesLargeMeasurementThreshold)
            new_size = bucket.size + sizes.total
            max_sizes = self._max_sizes()
            reason = determine_rollover(bucket, m, new_size, ctx.options.max_span_ms,
                                        ctx.options.meta_field, p, max_sizes)
            if (new_size > max_sizes[0] and reason in _KEPT_OPEN
                    and not bucket.kept_open_large):
                # over the size limit but under timeseriesBucketMinCount: stays open
                bucket.kept_open_large = True
                self._stats.inc(ctx.stats, "numBucketsKeptOpenDueToLargeMeasurements")
            if reason != RolloverReason.kNone:
                action = rollover_action(reason)
                if not allow_create and action in (RolloverAction.kSoftClose,
                                                   RolloverAction.kArchive):
                    return reason
                self._stats.inc(ctx.stats, rollover_counter(reason))
                due_to_meta = False
                bucket = self._rollover(ctx, bucket, action, m)
                newly_opened = True
        if newly_opened:
            sizes = size_change(bucket, m, p.timeseriesLargeMeasurementThreshold)
            schema_learn(bucket, m, ctx.options.meta_field)
            if m.signature is not None:
                bucket.schema_signatures.add(m.signature)
            if due_to_meta:
                bucket.opened_due_to_metadata = True
        assert sizes is not None
        self._touch(ctx, bucket)
        bucket.staged.append(m.index)
        if sizes.new_fields:
            uncommitted = bucket.uncommitted_field_names
            if isinstance(uncommitted, set):
                uncommitted.update(sizes.new_fields)
            else:
                bucket.uncommitted_field_names = set(sizes.new_fields)
        bucket.num_measurements += 1
        bucket.staged_estimate += sizes.estimate
        bucket.size += sizes.total
        return None

    def _rollover(self, ctx: BatchContext, bucket: Bucket, action: RolloverAction,
                  m: Measurement) -> Bucket:
        if bucket.all_committed:
            self._registry.retire(bucket, action)
        else:
            bucket.rollover_action = action
        return self._allocate(ctx, m)

    def reseed_ids(self) -> None:
        self._ids.reset()

    def _allocate(self, ctx: BatchContext, m: Measurement) -> Bucket:
        registry = self._registry
        registry.expire_idle(ctx.threshold,
                             self.params.timeseriesIdleBucketExpiryMaxCountPerAttempt)
        rounded = max(round_timestamp_ms(m.time_ms, ctx.options.rounding_seconds), _DATE_MIN)
        for _ in range(max(1, self.params.timeseriesInsertMaxRetriesOnDuplicates)):
            oid = self._ids.next(rounded)
            if oid not in registry.open_by_id:
                break
            self._ids.reset()
        else:
            raise MongoError(6130900, "Unable to insert documents due to internal OID "
                             "generation collision. Increase the value of server parameter "
                             "'timeseriesInsertMaxRetriesOnDuplicates' and try again")
        b = Bucket(oid, ctx.coll, m.key, m.meta, ctx.options.time_field, rounded)
        if m.raw is not None:
            make_native(b)
        set_time_bound(b, ctx.options.time_field, rounded)
        registry.add_open(b)
        return b

    def _try_reopen(self, ctx: BatchContext, m: Measurement, *, allow_query: bool
                    ) -> Bucket | None:
        """The archived or (`allow_query`) stored bucket that can take `m`, open again,
        or None."""
        kb = (ctx.coll, m.key)
        opts = ctx.options
        registry, stats = self._registry, self._stats
        archived = registry.find_archived(kb, m.time_ms, opts.max_span_ms)
        doc: Mapping[str, Any] | bytes | StoredBucket | BucketWrite | None = None
        if archived is not None:
            if ctx.source is not None:
                doc = ctx.source.fetch_bucket(ctx.coll, archived)
            stats.inc(ctx.stats, "numBucketsFetched" if doc is not None
                      else "numBucketFetchesFailed")
            if doc is None:
                registry.remove_archived(kb, archived)
                return None
        elif allow_query and ctx.source is not None:
            effective, _ = self._max_sizes()
            query = ReopeningQuery(opts.time_field, m.meta, m.time_ms,
                                   opts.bucket_max_span_seconds,
                                   self.params.timeseriesBucketMaxCount, effective, m.key)
            doc = ctx.source.find_reopening_candidate(ctx.coll, query)
            stats.inc(ctx.stats, "numBucketsQueried" if doc is not None
                      else "numBucketQueriesFailed")
            if doc is None:
                return None
        else:
            return None
        rehydrated: Callable[[], Bucket]
        pending = doc if isinstance(doc, BucketWrite) else None
        state = pending.native_state if pending is not None else None
        if pending is not None and state is not None and pending.series == m.key \
                and m.raw is not None and not ctx.check_versions:
            # pending, unbuilt: reopened from the native state its document is built from
            oid: Any = pending.bucket_id
            rehydrated = partial(rehydrate_pending, ctx, m.key, pending, state,
                                 registry.take_warm)
        else:
            if isinstance(doc, BucketWrite):  # pending: its document is what storage will hold
                doc = doc.document
            raw: bytes | None = None
            if isinstance(doc, tuple):  # StoredBucket: decoded and raw
                doc, raw = doc
            elif isinstance(doc, bytes | bytearray | memoryview):
                raw = bytes(doc)
                doc = decode(raw)
            oid = doc.get("_id")
            meta = doc.get(META, MISSING)
            normalized = normalize_meta(meta) if meta is not MISSING else MISSING
            if series_key(normalized) != m.key:
                # Equal under query semantics (1 == 1.0) but another series: MongoDB's
                # "hash collision" check refuses it.
                stats.inc(ctx.stats, "numBucketReopeningsFailed")
                if archived is not None:
                    registry.remove_archived(kb, archived)
                return None
            rehydrated = partial(rehydrate, ctx, m.key, doc, raw, registry.take_warm,
                                 native=m.raw is not None, normalized_meta=normalized)
        existing = registry.open_by_id.get(oid) if isinstance(oid, ObjectId) else None
        if existing is not None:
            if existing.coll != ctx.coll:
                stats.inc(ctx.stats, "numBucketReopeningsFailed")
                return None
            stats.inc(ctx.stats, "numDuplicateBucketsReopened")
            registry.mark_not_idle(existing)
            return existing
        try:
            bucket = rehydrated()
        except ReopenFailed:
            stats.inc(ctx.stats, "numBucketReopeningsFailed")
            if archived is not None:
                registry.remove_archived(kb, archived)
            return None
        return self._reopened(ctx, bucket)

    def _reopened(self, ctx: BatchContext, bucket: Bucket) -> Bucket:
        """A bucket rehydrated: it replaces its series' open bucket (closed due to
        reopening)."""
        registry, stats = self._registry, self._stats
        kb = (ctx.coll, bucket.key)
        registry.expire_idle(ctx.threshold,
                             self.params.timeseriesIdleBucketExpiryMaxCountPerAttempt)
        registry.remove_archived(kb, bucket.bucket_id)
        for other in list(registry.open_by_key.get(kb, ())):
            if other.rollover_action == RolloverAction.kNone:
                stats.inc(ctx.stats, "numBucketsClosedDueToReopening")
                if other.all_committed:
                    registry.retire(other, RolloverAction.kSoftClose)  # as at commit
                else:
                    other.rollover_action = RolloverAction.kSoftClose
                break
        registry.add_open(bucket)
        stats.inc(ctx.stats, "numBucketsReopened")
        return bucket

