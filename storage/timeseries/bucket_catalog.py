"""The bucket catalog: which bucket each measurement goes into, and what to write.

Theory of operation (single storage thread; MongoDB's BucketCatalog without stripes,
eras and waiters, which only exist there to coordinate threads). The words
*committed*, *acknowledged* and *written* are the three moments of README.md.

1. `insert_batch(coll, options, measurements, source)` prepares each measurement
   (`measurements`: a BSON date in the time field, else BadValue for that index; the
   meta value normalized), groups the batch by series, sorts each group by time
   (stable), stages each measurement into a bucket (`staging`: the open bucket, an
   alternate, a reopened one, or a new one after a rollover decided by `rollover`), and
   prepares each touched bucket's write (`write_batch`). The result lists the writes
   (new bucket documents to insert, new documents/diffs for existing ones) and
   per-index errors.

2. The caller takes all the writes as one unit (performs them in ONE storage
   transaction, or keeps them in the group commit's `pending_writes` to be written
   before anything reads the buckets collection), then calls `commit(result)`: the
   batch is committed in the catalog (counts, sizes, stats, deferred closes, idle
   list). Or it calls `abort(result)`, which drops every bucket the batch touched from
   memory; they are reopened from storage when needed, so a failed transaction leaves
   no trace.

The buckets held in memory, their states and memory are the `bucket_registry`'s.
Other entry points: `clear(coll)` / `drop_collection(coll)` for drop and collMod,
`handle_direct_write(coll, bucket_id)` after a write that bypassed the catalog
(rawData, updates, deletes, TTL), `collection_stats(coll)` for collStats and
`server_status()` for serverStatus.bucketCatalog. Memory pressure
(timeseriesIdleBucketExpiryMemoryUsageThreshold) archives idle buckets, then forgets
archived ones, before a bucket is allocated or reopened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import bson
from bson import ObjectId

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.raw_documents import RawDocuments

from .bucket import NO_NAMES, Bucket, shared_names
from .bucket_id import BucketIdGenerator
from .bucket_registry import BucketRegistry
from .constants import TimeseriesParameters
from .measurements import MeasurementPreparer
from .native_scan import Prescan
from .options import TimeseriesOptions
from .reopening import BucketSource
from .rollover import RolloverAction
from .staging import Stager
from .stats import CatalogStats, ExecutionStats
from .write_batch import BatchContext, BatchResult, prepare_writes

__all__ = ["BucketCatalog"]


class BucketCatalog:
    """Open and archived buckets of every time-series collection (one per server)."""

    def __init__(self, params: TimeseriesParameters | None = None, *,
                 id_seed: int | None = None, id_tag: int | None = None,
                 check_versions: bool = False) -> None:
        """`check_versions`: other processes share the storage, so each update carries
        the stored document it replaces (`BucketWrite.expected`) and the caller writes
        before committing (aborting and retrying the batch on a WriteConflict); `id_tag`
        marks this process's bucket ids (`bucket_id.tag_of`)."""
        self.params = params or TimeseriesParameters()
        self.check_versions = check_versions
        self.id_tag = id_tag
        self._stats = CatalogStats()
        self._registry = BucketRegistry(self._stats)
        self._measurements = MeasurementPreparer()
        self._stager = Stager(self.params, self._registry, self._stats,
                              BucketIdGenerator(id_seed, tag=id_tag))
        self._pending: BatchResult | None = None

    # -- public: insert protocol -------------------------------------------------------------

    def insert_batch(self, coll: str, options: TimeseriesOptions,
                     measurements: Sequence[Mapping[str, Any] | bytes] | RawDocuments,
                     source: BucketSource | None = None, *, ordered: bool = True,
                     prescanned: Prescan | None = None) -> BatchResult:
        """Stage a batch of measurements and return the bucket writes to perform.

        The measurements are documents or BSON bytes (any other value is refused at its
        index with TypeMismatch, as mongod does), or a `RawDocuments` (a document sequence
        as it came off the wire, which the preparer reads itself).

        With `ordered`, staging stops at the first invalid measurement (MongoDB's ordered
        insert); otherwise every valid measurement is staged. `prescanned`: the native
        scan of a `RawDocuments`, done already (`native_scan.prescan`). Exactly one of `commit` or
        `abort` must follow before the next call.
        """
        if self._pending is not None and not self._pending._finished:
            raise MongoError(ErrorCode.InternalError,
                             "bucket catalog: previous batch neither committed nor aborted")
        self._stager.begin_batch()
        threshold = self.params.memory_threshold_bytes()
        if self._registry.memory > threshold:
            self._measurements.clear_caches()  # what expiry cannot reach goes first
        rows, groups, errors = self._measurements.prepare_rows(measurements, options, ordered,
                                                               prescanned)
        ctx = BatchContext(coll, options, source, self._stats.of(coll), threshold, rows,
                           check_versions=self.check_versions)
        self._registry.set_cache_bytes(self._measurements.cache_bytes)
        result = BatchResult(coll, [], errors, 0)
        try:
            stage, stage_run, measurement, key = (self._stager.stage, self._stager.stage_run,
                                                  rows.measurement, rows.key)
            for group in groups:
                # one series, by time: a run its open bucket takes with nothing else
                # happening staged in bulk, then each measurement staged, and the run
                # after it
                i, n = stage_run(ctx, group, 0, key(group[0])), len(group)
                while i < n:
                    stage(ctx, measurement(group[i]))
                    i += 1
                    if i < n:
                        i += stage_run(ctx, group, i)
            result.writes, too_large = prepare_writes(ctx, self._registry, self._stats)
        except BaseException:
            self._registry.drop(ctx.touched)
            raise
        for idx in too_large:
            result.errors.append((idx, MongoError(
                ErrorCode.BSONObjectTooLarge,
                "Measurement is too large to fit in a time-series bucket")))
        result.errors.sort(key=lambda e: e[0])
        result.num_inserted = sum(map(len, groups)) - len(too_large)
        result._touched = ctx.touched
        self._pending = result
        return result

    def commit(self, result: BatchResult) -> None:
        """Commit the batch in the catalog (finish in MongoDB): its writes are the
        caller's now (written, or pending in the group commit), so its measurements
        count as in their buckets; the deferred closes and archives happen, the other
        buckets become idle. Nothing here says the writes are written yet."""
        self._check_pending(result)
        registry, stats = self._registry, self._stats
        # counted for the batch, added to the collection's statistics once
        commits = inserts = due_to_meta = committed = 0
        for w in result.writes:
            b = registry.open_by_id.get(w.bucket_id)
            if b is not None and self.check_versions:
                b.stored = w.document
            if b is None or not w.measurement_indexes:
                continue
            n = len(w.measurement_indexes)
            commits += 1
            inserts += w.previous_count == 0
            due_to_meta += b.opened_due_to_metadata
            committed += n
            b.num_committed += n
            b.size += w._compressed_delta - w._estimate
            if w._new_fields:
                b.field_names = shared_names(b.field_names.union(w._new_fields))
            b.uncommitted_field_names = NO_NAMES
            b.staged, b.rows = [], None
            b.staged_estimate = 0
            b.opened_due_to_metadata = False
            b.last_time_ms = w._last_time_ms
            size = w.known_size
            b.committed_size, b.committed_write = size, (w if size is None else None)
            b.index_doc = w.index_source
            registry.account_commit(b)
        if commits:
            s = stats.of(result.coll)
            for name, n in (("numCommits", commits), ("numBucketInserts", inserts),
                            ("numBucketUpdates", commits - inserts),
                            ("numBucketsOpenedDueToMetadata", due_to_meta),
                            ("numMeasurementsCommitted", committed)):
                if n:
                    stats.inc(s, name, n)
        for b in result._touched:
            if registry.open_by_id.get(b.bucket_id) is not b:
                continue
            b.staged, b.rows = [], None
            if b.rollover_action == RolloverAction.kNone:
                registry.mark_idle(b)
            else:
                registry.retire(b, b.rollover_action)
        result._finished = True
        self._pending = None

    def abort(self, result: BatchResult) -> None:
        """The writes of `result` will not be written: forget every bucket the batch
        touched."""
        self._check_pending(result)
        self._registry.drop(result._touched)
        result._finished = True
        self._pending = None

    # -- public: maintenance ------------------------------------------------------------------

    def clear(self, coll: str) -> None:
        """Forget all open and archived buckets of `coll` (stats are kept)."""
        self._registry.clear(coll)

    def drop_collection(self, coll: str) -> None:
        """`drop`: forget the collection's buckets and statistics."""
        self.clear(coll)
        self._stats.pop(coll, None)

    def reseed_bucket_ids(self) -> None:
        """A new bucket's _id was taken in storage (by another process): draw the
        counter of bucket ids afresh, as MongoDB does after a duplicate key."""
        self._stager.reseed_ids()

    def handle_direct_write(self, coll: str, bucket_id: ObjectId) -> None:
        """A bucket was inserted, modified or deleted without the catalog (rawData, user
        updates/deletes, TTL): drop any in-memory state for it."""
        self._registry.forget_bucket(coll, bucket_id)

    # -- public: statistics -------------------------------------------------------------------

    def collections_with_stats(self) -> list[str]:
        """The collections whose statistics the catalog holds."""
        return list(self._stats)

    def collection_stats(self, coll: str) -> dict[str, Any]:
        """collStats' storageStats.timeseries counters (execution and compression stats)."""
        stats = self._stats.get(coll) or ExecutionStats()
        doc = stats.to_document()
        doc.update(stats.compression_document())
        return doc

    def merge_stats(self, coll: str, other: ExecutionStats) -> None:
        """Fold a side catalog's statistics for `coll` into this catalog (updates)."""
        self._coll_stats(coll).add(other)
        self._stats.total.add(other)

    def execution_stats(self, coll: str) -> ExecutionStats:
        return self._stats.get(coll) or ExecutionStats()

    def server_status(self) -> dict[str, Any]:
        """serverStatus.bucketCatalog (empty until a time-series collection was written)."""
        if not self._stats:
            return {}
        registry = self._registry
        num_open_keys = sum(1 for lst in registry.open_by_key.values() if lst)
        doc: dict[str, Any] = {
            "numBuckets": bson.Int64(self.num_active_buckets),
            "numOpenBuckets": bson.Int64(num_open_keys),
            "numIdleBuckets": bson.Int64(len(registry.idle)),
            "numArchivedBuckets": bson.Int64(self.num_active_buckets - num_open_keys),
            "memoryUsage": bson.Int64(registry.memory),
        }
        doc.update(self._stats.total.to_document())
        doc["stateManagement"] = {"bucketsManaged": bson.Int64(len(registry.open_by_id)),
                                  "currentEra": bson.Int64(0),
                                  "erasWithRemainingBuckets": bson.Int64(0),
                                  "trackedClearOperations": bson.Int64(0)}
        return doc

    @property
    def num_active_buckets(self) -> int:
        return self._registry.num_active

    @property
    def memory_usage(self) -> int:
        return self._registry.memory

    def open_buckets(self, coll: str | None = None) -> list[Bucket]:
        """Open buckets (for tests and diagnostics)."""
        return self._registry.open_buckets(coll)

    def archived_buckets(self, coll: str | None = None) -> list[tuple[bytes, int, ObjectId]]:
        return self._registry.archived_buckets(coll)

    # -- helpers --------------------------------------------------------------------------------

    def _coll_stats(self, coll: str) -> ExecutionStats:
        return self._stats.of(coll)

    def _check_pending(self, result: BatchResult) -> None:
        if result._finished:
            raise MongoError(ErrorCode.InternalError, "bucket catalog: batch already finished")
        if self._pending is not result:
            raise MongoError(ErrorCode.InternalError, "bucket catalog: not the pending batch")
