"""The time-series service: the bucket catalog, the pending bucket writes, statistics.

Everything that touches storage runs on the storage thread inside one `StorageService.run`
call per command, so the bucket catalog sees one operation at a time: two connections can
never open two buckets for one meta value. Acknowledged inserts wait in `deferred` until
the group commit writes them: before any other storage operation (the hook registered
with `StorageService`), at the end of a `j: true` insert, and when the commit interval's
timer (the one asyncio part, `arm_flush_timer`) fires.

When other processes write the same storage (`StorageEngine.multi_process`: PostgreSQL),
there is no group commit across inserts: each insert writes its buckets before the
catalog commits them, every update checking that its bucket is as this catalog left it,
and a query reopens only buckets of this process or of processes no longer alive, so
processes do not append to each other's buckets (`storage.timeseries.shared_insert`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from query.timeseries.read_plan import TimeseriesRead, TimeseriesReadPaths
from storage.catalog import Catalog, CatalogChange
from storage.collection import Collection
from storage.keystring import KS_OID
from storage.timeseries import BucketCatalog, BucketWrite, TimeseriesParameters
from storage.timeseries.bucket_id import date_outside_standard_range
from storage.timeseries.pending_writes import DeferredBucketWrites, LostWrites

from ..log import LOG
from ..namespaces import BUCKETS_PREFIX, TimeseriesTarget, view_name_of

if TYPE_CHECKING:
    from ..context import CommandRequest, ServerState
    from ..storage_service import StorageService

__all__ = ["TimeseriesService", "timeseries_service"]


class TimeseriesService:
    """Owns the bucket catalog and the pending bucket writes; lives on
    `ServerState.timeseries`."""

    def __init__(self, state: ServerState, storage: StorageService) -> None:
        p = state.params
        self.catalog = BucketCatalog(TimeseriesParameters(
            timeseriesBucketMaxCount=p.get("timeseriesBucketMaxCount"),
            timeseriesBucketMaxSize=p.get("timeseriesBucketMaxSize"),
            timeseriesBucketMinCount=p.get("timeseriesBucketMinCount"),
            timeseriesBucketMinSize=p.get("timeseriesBucketMinSize"),
            timeseriesLargeMeasurementThreshold=p.get("timeseriesLargeMeasurementThreshold"),
            timeseriesIdleBucketExpiryMemoryUsageThreshold=p.get(
                "timeseriesIdleBucketExpiryMemoryUsageThreshold"),
            timeseriesIdleBucketExpiryMaxCountPerAttempt=p.get(
                "timeseriesIdleBucketExpiryMaxCountPerAttempt"),
        ), check_versions=storage.catalog.engine.multi_process,
            id_tag=storage.catalog.engine.instance_tag)
        self.state = state
        self.storage = storage
        self.deferred = DeferredBucketWrites(on_lost=_log_lost_writes)
        self.read_paths = TimeseriesReadPaths()
        self._timer_armed = False
        # buckets collection uuid -> it may hold dates outside the standard range
        self._extended: dict[bytes, bool] = {}
        storage.add_before_operation(self.flush_deferred)
        storage.catalog.add_refresh_listener(self.catalog_refreshed)

    @property
    def storage_catalog(self) -> Catalog:
        return self.storage.catalog

    # -- group commit of bucket writes (storage.timeseries.pending_writes) --------------------

    def flush_deferred(self, *, durable: bool = False) -> None:
        """Write every acknowledged bucket write still pending (storage thread)."""
        if self.deferred:
            self.deferred.flush(self.storage.catalog, durable=durable,
                                on_failure=self._forget_buckets_of)

    def _forget_buckets_of(self, db: str, buckets: str) -> None:
        self.catalog.clear(f"{db}.{view_name_of(buckets)}")

    def commit_interval_ms(self) -> int:
        return int(self.state.params.get("journalCommitInterval"))

    def arm_flush_timer(self) -> None:
        """Event loop: flush one commit interval from now if writes are pending."""
        if self._timer_armed or not self.deferred:
            return
        self._timer_armed = True
        loop = asyncio.get_running_loop()
        loop.call_later(self.commit_interval_ms() / 1000.0, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer_armed = False
        if self.deferred:
            # run() flushes first
            task = asyncio.ensure_future(self.storage.run(lambda: None))
            task.add_done_callback(_ignore_result)

    def sync_parameters(self) -> None:
        self.catalog.params.timeseriesIdleBucketExpiryMemoryUsageThreshold = \
            self.state.params.get("timeseriesIdleBucketExpiryMemoryUsageThreshold")

    # -- what other commands tell the catalog ------------------------------------------------

    def forget_namespace(self, db: str, name: str) -> None:
        """Collection `name` is dropped."""
        if name.startswith(BUCKETS_PREFIX):
            self.catalog.clear(f"{db}.{view_name_of(name)}")
        else:
            self.catalog.drop_collection(f"{db}.{name}")

    def catalog_refreshed(self, change: CatalogChange) -> None:
        """Another process created, dropped, renamed or modified namespaces (storage
        thread, before the next operation and before pending writes are flushed): the
        open buckets of each such time-series collection are forgotten (all of a dropped
        one's state), since they may name buckets that are gone or were made under other
        options. The hook for whatever else keeps state per collection."""
        for uuid in change.dropped:
            self._extended.pop(uuid, None)
        for ns in change.dropped_namespaces:
            self.forget_namespace(*ns.split(".", 1))
        for ns in change.namespaces - change.dropped_namespaces:
            db, name = ns.split(".", 1)
            if name.startswith(BUCKETS_PREFIX):
                self.catalog.clear(f"{db}.{view_name_of(name)}")

    def bucket_write_bypassed(self, db: str, buckets: str) -> None:
        """A write command wrote buckets collection `buckets` directly: the catalog forgets
        its open and archived buckets (statistics stay), and its bucket ids may no longer
        carry their times."""
        coll = self.storage.catalog.get_collection(db, buckets)
        if coll is not None:
            self._extended[coll.uuid] = True
        self.catalog.clear(f"{db}.{view_name_of(buckets)}")

    # -- extended-range dates: may time predicates bound bucket _ids? ------------------------

    def id_bounds_allowed(self, buckets: Collection) -> bool:
        """False when the collection may hold dates outside the standard range (MongoDB's
        requiresTimeseriesExtendedRangeSupport), whose bucket ids do not order by time:
        set when such a bucket is inserted, or when a write bypassed the catalog; else,
        the first time, MongoDB's heuristic (the greatest `_id` has its top bit set)."""
        v = self._extended.get(buckets.uuid)
        if v is None:
            v = self._extended[buckets.uuid] = may_hold_extended_range(buckets)
        return not v

    def note_bucket_inserts(self, buckets: Collection, writes: list[BucketWrite]) -> None:
        """Bucket writes about to be stored: a new bucket whose `control.min` time is
        outside the standard range marks the collection."""
        for w in writes:
            if w.kind == "insert":
                assert w.min_time_ms is not None  # the catalog sets it on every new bucket
                if date_outside_standard_range(w.min_time_ms):
                    self._extended[buckets.uuid] = True
                    return

    def reader(self, target: TimeseriesTarget) -> TimeseriesRead:
        """How a read of `target` sees the collection (storage thread)."""
        buckets = target.buckets(self.storage.catalog)
        return TimeseriesRead(
            buckets, target.options,
            (lambda: self.id_bounds_allowed(buckets)) if buckets is not None else _no_bounds,
            self.read_paths)

    # -- statistics --------------------------------------------------------------------------

    def collection_stats(self, target: TimeseriesTarget) -> dict[str, Any]:
        """collStats' `timeseries` document (storage thread)."""
        buckets = target.buckets(self.storage.catalog)
        count = buckets.count() if buckets is not None else 0
        size = buckets.data_size() if buckets is not None else 0
        return {"bucketsNs": target.buckets_ns, "bucketCount": count,
                "avgBucketSize": size // count if count else 0,
                **self.catalog.collection_stats(target.ns)}

    def server_status(self) -> dict[str, Any] | None:
        return self.catalog.server_status() or None

    def metric_families(self) -> Iterator[Metric]:
        status = self.catalog.server_status() or {}
        for key, metric in (("numOpenBuckets", "bucketd_bucket_catalog_open_buckets"),
                            ("numIdleBuckets", "bucketd_bucket_catalog_idle_buckets"),
                            ("numArchivedBuckets", "bucketd_bucket_catalog_archived_buckets"),
                            ("memoryUsage", "bucketd_bucket_catalog_memory_bytes")):
            if key in status:
                yield GaugeMetricFamily(metric, f"bucketCatalog.{key}", value=int(status[key]))
        totals: dict[str, int] = {}
        for stats in self.catalog_stats_all():
            for k in ("numBytesUncompressed", "numBytesCompressed", "numMeasurementsCommitted"):
                totals[k] = totals.get(k, 0) + int(stats.get(k, 0))
        yield CounterMetricFamily("bucketd_timeseries_uncompressed_bytes",
                                  "Bytes of measurements before compression",
                                  value=totals.get("numBytesUncompressed", 0))
        yield CounterMetricFamily("bucketd_timeseries_compressed_bytes",
                                  "Bytes of the same measurements in BSONColumns",
                                  value=totals.get("numBytesCompressed", 0))
        yield CounterMetricFamily("bucketd_timeseries_measurements_committed",
                                  "Measurements committed to buckets",
                                  value=totals.get("numMeasurementsCommitted", 0))

    def catalog_stats_all(self) -> list[dict[str, Any]]:
        return [self.catalog.collection_stats(k) for k in self.catalog.collections_with_stats()]


def timeseries_service(req: CommandRequest) -> TimeseriesService:
    """The server's time-series service (made on first use when the lifecycle did not)."""
    state = req.server
    if state.timeseries is None:
        state.timeseries = TimeseriesService(state, req.storage)
    return state.timeseries


def may_hold_extended_range(buckets: Collection) -> bool:
    """collectionMayRequireExtendedRangeSupport: dates from 1902 to 1969 or 2038 to 2106
    set the top bit of their bucket ids, so the greatest `_id` has it when any is there
    (and an `_id` that is not an ObjectId proves nothing: assume the worst)."""
    first = next(buckets.index_entries("_id_"), None)
    if first is None:
        return False
    last = next(buckets.index_entries("_id_", reverse=True))
    if first[1][0] != KS_OID or last[1][0] != KS_OID:
        return True
    return bool(last[1][1] & 0x80)


def _no_bounds() -> bool:
    return False


def _ignore_result(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # logged where it happened


def _log_lost_writes(lost: LostWrites) -> None:
    LOG.error("STORAGE", 22435, "timeseries",
              "Writing acknowledged time-series buckets failed; they are lost",
              error=f"{type(lost.error).__name__}: {lost.error}",
              namespaces=[f"{db}.{name}" for db, name in lost.namespaces],
              buckets=lost.buckets)
