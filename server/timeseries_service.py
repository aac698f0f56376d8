"""Time-series collections in the server: create, insert, read, write, indexes, stats, TTL.

The glue between the commands and `storage.timeseries` (options, bucket catalog,
bucket documents, unpacking, bucket-level predicates, index translation) and `query`
(matching, sorting, projection, updates). Everything that touches storage runs on the
storage thread inside one `StorageService.run` call per command, so the bucket
catalog sees one operation at a time: two connections can never open two buckets for
one meta value.

Namespaces: the view `db.coll` is a catalog entry of kind "timeseries" whose options
hold `timeseries` (and `expireAfterSeconds`); its buckets live in the ordinary
collection `db.system.buckets.coll`. The bucket catalog keys collections by the view's
namespace string.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from query.executor import FindSpec, UpdateStatement
from query.match import compile_filter
from query.paths import MISSING
from query.projection import compile_projection
from query.sort import compile_sort
from query.update import compile_update
from storage.bsonutil import decode
from storage.errors import ErrorCode, MongoError
from storage.keystring import T_OID
from storage.timeseries import (
    BucketCatalog,
    BucketSpec,
    TimeseriesOptions,
    TimeseriesParameters,
    bucket_filter,
    bucket_index_spec,
    buckets_collection_options,
    coll_mod_timeseries,
    default_index_spec,
    drop_index_key,
    meta_only_filter,
    options_equal,
    parse_coll_mod_expire_after_seconds,
    parse_expire_after_seconds,
    parse_timeseries_options,
    rebuild_bucket,
    timeseries_index_spec,
    ttl_expired_filter,
    unpack_bucket,
)
from storage.timeseries.bucket_id import date_outside_standard_range
from storage.timeseries.pending_writes import DeferredBucketWrites, LostWrites, write_buckets
from storage.timeseries.row_filter import compile_row_filter, select_measurements
from storage.timeseries.stored_buckets import StoredBuckets

from .cursors import first_batch_limit, take_batch
from .log import LOG

if TYPE_CHECKING:
    from .context import CommandRequest, ServerState

__all__ = ["TimeseriesService", "BUCKETS_PREFIX"]

BUCKETS_PREFIX = "system.buckets."


def buckets_name(name: str) -> str:
    return BUCKETS_PREFIX + name


# --- the service the storage layer holds ------------------------------------------------------

class TimeseriesService:
    """Owns the bucket catalog; lives on `StorageService.timeseries`."""

    def __init__(self, state: ServerState) -> None:
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
        ))
        self.state = state
        self.deferred = DeferredBucketWrites(on_lost=_log_lost_writes)
        self._timer_armed = False
        # buckets collection uuid -> it may hold dates outside the standard range
        self._extended: dict[bytes, bool] = {}

    # -- group commit of bucket writes (storage.timeseries.pending_writes) --------------------

    def flush_deferred(self, *, durable: bool = False) -> None:
        """Write every acknowledged bucket write still pending (storage thread)."""
        if self.deferred:
            self.deferred.flush(_storage_catalog(self.state), durable=durable,
                                on_failure=self._forget_buckets_of)

    def _forget_buckets_of(self, db: str, buckets: str) -> None:
        self.catalog.clear(f"{db}.{buckets[len(BUCKETS_PREFIX):]}")

    def _commit_interval_ms(self) -> int:
        return int(self.state.params.get("journalCommitInterval"))

    def arm_flush_timer(self, storage: Any) -> None:
        """Event loop: flush one commit interval from now if writes are pending."""
        if self._timer_armed or not self.deferred:
            return
        self._timer_armed = True
        loop = asyncio.get_running_loop()
        loop.call_later(self._commit_interval_ms() / 1000.0, self._timer_fired, storage)

    def _timer_fired(self, storage: Any) -> None:
        self._timer_armed = False
        if self.deferred:
            task = asyncio.ensure_future(storage.run(lambda: None))  # run() flushes first
            task.add_done_callback(_ignore_result)

    def sync_parameters(self) -> None:
        self.catalog.params.timeseriesIdleBucketExpiryMemoryUsageThreshold = \
            self.state.params.get("timeseriesIdleBucketExpiryMemoryUsageThreshold")

    def forget_namespace(self, db: str, name: str) -> None:
        """Collection `name` is dropped."""
        if name.startswith(BUCKETS_PREFIX):
            self.catalog.clear(f"{db}.{name[len(BUCKETS_PREFIX):]}")
        else:
            self.catalog.drop_collection(f"{db}.{name}")

    def bucket_write_bypassed(self, db: str, buckets: str) -> None:
        """A write command wrote buckets collection `buckets` directly: the catalog forgets
        its open and archived buckets (statistics stay), and its bucket ids may no longer
        carry their times."""
        coll = _storage_catalog(self.state).get_collection(db, buckets)
        if coll is not None:
            self._extended[coll.uuid] = True
        self.catalog.clear(f"{db}.{buckets[len(BUCKETS_PREFIX):]}")

    # -- extended-range dates: may time predicates bound bucket _ids? ------------------------

    def id_bounds_allowed(self, buckets: Any) -> bool:
        """False when the collection may hold dates outside the standard range (MongoDB's
        requiresTimeseriesExtendedRangeSupport), whose bucket ids do not order by time:
        set when such a bucket is inserted, or when a write bypassed the catalog; else,
        the first time, MongoDB's heuristic (the greatest `_id` has its top bit set)."""
        v = self._extended.get(buckets.uuid)
        if v is None:
            v = self._extended[buckets.uuid] = _may_hold_extended_range(buckets)
        return not v

    def note_bucket_inserts(self, buckets: Any, time_field: str, writes: list[Any]) -> None:
        """Bucket writes about to be stored: a new bucket whose `control.min` time is
        outside the standard range marks the collection."""
        for w in writes:
            if w.kind == "insert" and w.index_doc is not None and date_outside_standard_range(
                    int(w.index_doc["control"]["min"][time_field])):
                self._extended[buckets.uuid] = True
                return

    def server_status(self) -> dict[str, Any] | None:
        return self.catalog.server_status() or None

    def metric_families(self) -> Iterator[Any]:
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
        return [self.catalog.collection_stats(k) for k in list(self.catalog._stats)]

    def expire_buckets(self, db: str, name: str, now_ms: int, expire: int) -> int:
        """TTL: delete whole buckets whose newest measurement is older than the limit."""
        storage_catalog = _storage_catalog(self.state)
        entry = storage_catalog.entry(db, name)
        buckets = storage_catalog.get_collection(db, buckets_name(name))
        if entry is None or buckets is None:
            return 0
        opts = _options(entry)
        flt = ttl_expired_filter(opts, int(expire), now_ms)
        from query.executor import matching, prepare_find

        rows = list(matching(buckets, prepare_find(buckets, FindSpec(filter=flt))))
        if not rows:
            return 0
        with storage_catalog.transaction():
            for rid, _raw, doc in rows:
                buckets.delete(rid, old_doc=doc)
        for _rid, _raw, doc in rows:
            self.catalog.handle_direct_write(f"{db}.{name}", doc["_id"])
        return len(rows)


def _may_hold_extended_range(buckets: Any) -> bool:
    """collectionMayRequireExtendedRangeSupport: dates from 1902 to 1969 or 2038 to 2106
    set the top bit of their bucket ids, so the greatest `_id` has it when any is there
    (and an `_id` that is not an ObjectId proves nothing: assume the worst)."""
    first = next(buckets.index_entries("_id_"), None)
    if first is None:
        return False
    last = next(buckets.index_entries("_id_", reverse=True))
    if first[1][0] != T_OID or last[1][0] != T_OID:
        return True
    return bool(last[1][1] & 0x80)


def _storage_catalog(state: ServerState) -> Any:
    assert state.storage is not None
    return state.storage.catalog


def _options(entry: Any) -> TimeseriesOptions:
    return TimeseriesOptions.from_document(entry.options["timeseries"])


def _service(req: CommandRequest) -> TimeseriesService:
    storage = req.storage
    if storage.timeseries is None:
        storage.timeseries = TimeseriesService(req.server)
    return storage.timeseries


def _view_entry(req: CommandRequest, name: str) -> Any:
    entry = req.storage.catalog.entry(req.db, name)
    if entry is None or entry.kind != "timeseries":
        raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {req.db}.{name}")
    return entry


def _ignore_result(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # logged where it happened


def _log_lost_writes(lost: LostWrites) -> None:
    LOG.error("STORAGE", 22435, "timeseries",
              "Writing acknowledged time-series buckets failed; they are lost",
              error=f"{type(lost.error).__name__}: {lost.error}",
              namespaces=[f"{db}.{name}" for db, name in lost.namespaces],
              buckets=lost.buckets)


# --- create / drop / collMod ------------------------------------------------------------------

async def create_timeseries(req: CommandRequest, name: str) -> None:
    body = req.body
    db = req.db
    ns = f"{db}.{name}"
    opts = parse_timeseries_options(body["timeseries"], ns=ns)
    expire = None
    if "expireAfterSeconds" in body:
        expire = parse_expire_after_seconds(body["expireAfterSeconds"])
    for unsupported in ("validator", "viewOn", "pipeline", "capped"):
        if unsupported in body:
            raise MongoError(ErrorCode.InvalidOptions,
                             f"Time-series collections do not support '{unsupported}'")
    view_options: dict[str, Any] = {"timeseries": opts.to_document()}
    if expire is not None:
        view_options["expireAfterSeconds"] = expire

    def run() -> None:
        catalog = req.storage.catalog
        existing = catalog.entry(db, name)
        if existing is not None:
            if existing.kind == "timeseries" and options_equal(_options(existing), opts) and \
                    existing.options.get("expireAfterSeconds") == expire:
                return
            raise MongoError(ErrorCode.NamespaceExists, f"Collection {ns} already exists.")
        if catalog.entry(db, buckets_name(name)) is not None:
            raise MongoError(ErrorCode.NamespaceExists,
                             f"Collection {db}.{buckets_name(name)} already exists.")
        with catalog.transaction():
            catalog.create_collection(db, buckets_name(name),
                                      buckets_collection_options(opts, expire))
            catalog.create_collection(db, name, view_options, kind="timeseries",
                                      info={"bucketsNs": f"{db}.{buckets_name(name)}"})
            default = default_index_spec(opts)
            if default is not None:
                catalog.get_collection(db, buckets_name(name)).create_indexes([default])
        _service(req).catalog.drop_collection(ns)

    await req.storage.run(run)


def coll_mod_timeseries_view(req: CommandRequest, name: str, body: dict[str, Any]
                             ) -> dict[str, Any]:
    """collMod on a time-series collection (storage thread)."""
    catalog = req.storage.catalog
    entry = _view_entry(req, name)
    opts = _options(entry)
    new_options = dict(entry.options)
    changed = False
    if "timeseries" in body:
        new_opts, changed = coll_mod_timeseries(opts, body["timeseries"])
        new_options["timeseries"] = new_opts.to_document()
    if "expireAfterSeconds" in body:
        expire = parse_coll_mod_expire_after_seconds(body["expireAfterSeconds"])
        if expire is None:
            new_options.pop("expireAfterSeconds", None)
        else:
            new_options["expireAfterSeconds"] = expire
    with catalog.transaction():
        catalog.set_options(req.db, name, options=new_options)
        bopts = buckets_collection_options(
            TimeseriesOptions.from_document(new_options["timeseries"]),
            new_options.get("expireAfterSeconds"))
        catalog.set_options(req.db, buckets_name(name), options=bopts)
    if changed:
        _service(req).catalog.clear(f"{req.db}.{name}")
    return {}


# --- insert -----------------------------------------------------------------------------------

async def insert_measurements(req: CommandRequest, name: str, docs: list[Any], *,
                              ordered: bool, durable: bool) -> dict[str, Any]:
    db = req.db
    ns = f"{db}.{name}"

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        entry = _view_entry(req, name)
        opts = _options(entry)
        buckets = catalog.get_or_create_collection(db, buckets_name(name))
        service = _service(req)
        service.sync_parameters()
        source = StoredBuckets(buckets, opts, service.deferred, service.flush_deferred)
        result = service.catalog.insert_batch(ns, opts, docs, source, ordered=ordered)
        service.note_bucket_inserts(buckets, opts.time_field, result.writes)
        service.deferred.add(db, buckets_name(name), result.writes)
        service.catalog.commit(result)
        if durable or service.deferred.due(service._commit_interval_ms()):
            service.flush_deferred(durable=durable)
        reply: dict[str, Any] = {"n": result.num_inserted}
        if result.errors:
            reply["writeErrors"] = [e.to_write_error(i) for i, e in result.errors]
        return reply

    reply = await req.storage.run(run, keep_deferred=True)
    _service(req).arm_flush_timer(req.storage)
    req.server.opcounters["insert"] += max(0, len(docs) - 1)
    return reply


# --- reads ------------------------------------------------------------------------------------

# Consecutive buckets the columnar pre-filter may decline before a scan stops trying it
# (each decline decoded columns the full unpacking decodes again).
_ROW_FILTER_DECLINES = 8


def unpacked_source(req: CommandRequest, db: str, name: str, flt: dict[str, Any] | None,
                    fields: frozenset[str] | None = None) -> Iterator[dict[str, Any]]:
    """Measurements of `db.name` matching `flt` (storage thread, lazily).

    Buckets that cannot hold a match are skipped by a bucket-level filter on
    control.min/max and meta; only the fields needed are decoded when `fields` is given.
    """
    catalog = req.storage.catalog
    entry = catalog.entry(db, name)
    buckets = catalog.get_collection(db, buckets_name(name))
    if entry is None or buckets is None:
        return iter(())
    opts = _options(entry)
    matcher = compile_filter(flt or {})
    if fields is not None:
        if matcher.has_expr:
            fields = None  # $expr may read any field
        else:
            fields = frozenset(fields | {f.split(".", 1)[0] for f in matcher.fields()})
    spec = BucketSpec(opts.time_field, opts.meta_field, fields or frozenset(),
                      include=fields is not None)
    bflt = bucket_filter(flt, opts, id_bounds=_service(req).id_bounds_allowed(buckets)) \
        if flt else None
    from query.executor import candidates, prepare_find

    prepared = prepare_find(buckets, FindSpec(filter=bflt))
    trivial = matcher.is_trivial
    rows = compile_row_filter(flt, opts.time_field, opts.meta_field) if flt else None

    def gen() -> Iterator[dict[str, Any]]:
        row_filter, declined = rows, 0
        for _rid, raw in candidates(buckets, prepared.plan):
            bucket = decode(raw)
            if bflt is not None and not prepared.matcher.matches(bucket):
                continue
            selected = None
            if row_filter is not None:
                selected = select_measurements(bucket, spec, row_filter)
                declined = 0 if selected is not None else declined + 1
                if declined == _ROW_FILTER_DECLINES:
                    row_filter = None  # buckets of this collection cannot take it: stop trying
            for m in selected if selected is not None else unpack_bucket(bucket, spec):
                if trivial or matcher.matches(m):
                    yield m

    return gen()


async def find_measurements(req: CommandRequest, name: str, spec: FindSpec,
                            first: int | None, single_batch: bool) -> dict[str, Any]:
    db = req.db
    ns = f"{db}.{name}"
    projection = compile_projection(spec.projection) if spec.projection else None
    sort = compile_sort(spec.sort) if spec.sort else None
    fields = None
    if projection is not None and projection.is_inclusion and _simple_projection(
            spec.projection):
        proj_fields = {k for k in spec.projection if k != "_id"}
        if spec.projection.get("_id", 1):
            proj_fields.add("_id")
        sort_fields = set(spec.sort or {})
        fields = frozenset(n.split(".", 1)[0] for n in proj_fields | sort_fields)

    def run() -> Any:
        source: Iterator[Any] = unpacked_source(req, db, name, spec.filter, fields)
        if sort is not None:
            keep = spec.skip + spec.limit if spec.limit else None
            if keep is not None:
                import heapq

                source = iter(heapq.nsmallest(keep, source, key=sort))
            else:
                source = iter(sorted(source, key=sort))
        if spec.skip:
            source = itertools.islice(source, spec.skip, None)
        if spec.limit:
            source = itertools.islice(source, spec.limit)
        if projection is not None:
            source = (projection.apply(d) for d in source)
        return (source, *take_batch(source, first_batch_limit(first)))

    source, batch, exhausted = await req.storage.run(run)
    cursor = req.cursors.adopt(ns, source, batch, exhausted, single_batch=single_batch,
                               run=req.storage.run, conn_id=req.conn.id)
    return {"cursor": cursor}


def _simple_projection(p: Mapping[str, Any]) -> bool:
    return all(isinstance(v, bool | int | float) for v in p.values())


async def count_measurements(req: CommandRequest, name: str, query: dict[str, Any] | None,
                             skip: int, limit: int) -> int:
    def run() -> int:
        n = sum(1 for _ in unpacked_source(req, req.db, name, query,
                                           frozenset() if not query else None))
        n = max(0, n - skip)
        return min(n, limit) if limit else n

    return await req.storage.run(run)


async def distinct_measurements(req: CommandRequest, name: str, key: str,
                                query: dict[str, Any] | None) -> list[Any]:
    from query.executor import _distinct_leaf_values
    from storage.bson_order import sort_key

    def run() -> list[Any]:
        seen: dict[Any, Any] = {}
        parts = key.split(".")
        for m in unpacked_source(req, req.db, name, query, frozenset({parts[0]})):
            for v in _distinct_leaf_values(m, parts):
                k = sort_key(v)
                if k not in seen:
                    seen[k] = v
        return [seen[k] for k in sorted(seen)]

    return await req.storage.run(run)


def explain_unpack(req: CommandRequest, name: str, pipeline: list[Any],
                   stages: list[dict[str, Any]]) -> dict[str, Any]:
    entry = _view_entry(req, name)
    opts = _options(entry)
    from .aggregation import split_leading_match

    flt, _ = split_leading_match(pipeline)
    buckets = req.storage.catalog.get_collection(req.db, buckets_name(name))
    bflt = bucket_filter(flt, opts, id_bounds=buckets is not None and _service(
        req).id_bounds_allowed(buckets)) if flt else None
    unpack: dict[str, Any] = {"$_internalUnpackBucket": {
        "exclude": [], "timeField": opts.time_field,
        **({"metaField": opts.meta_field} if opts.meta_field else {}),
        "bucketMaxSpanSeconds": opts.bucket_max_span_seconds}}
    from query.executor import prepare_find

    plan = prepare_find(buckets, FindSpec(filter=bflt)).plan if buckets is not None else None
    cursor = {"$cursor": {"queryPlanner": {
        "namespace": f"{req.db}.{buckets_name(name)}",
        "parsedQuery": bflt or {},
        "winningPlan": plan.explain() if plan is not None else {"stage": "EOF"}}}}
    return {"explainVersion": "1", "stages": [cursor, unpack, *stages]}


# --- updates and deletes ----------------------------------------------------------------------

def _rewrite_buckets(req: CommandRequest, name: str, flt: dict[str, Any], *, limit_one: bool,
                     transform: Any) -> tuple[int, list[dict[str, Any]]]:
    """Walk candidate buckets; `transform(measurement) -> (keep: dict | None, out: dict|None)`.

    Measurements the filter selects are passed to `transform`; what it keeps stays in
    the bucket, what it returns as `out` is collected (re-inserted by updates). Buckets
    left empty are deleted; changed ones rebuilt. Returns (matched, outputs).
    """
    db = req.db
    catalog = req.storage.catalog
    entry = _view_entry(req, name)
    opts = _options(entry)
    buckets = catalog.get_collection(db, buckets_name(name))
    if buckets is None:
        return 0, []
    service = _service(req)
    matcher = compile_filter(flt)
    bflt = bucket_filter(flt, opts) if flt else None
    from query.executor import matching, prepare_find

    rows = list(matching(buckets, prepare_find(buckets, FindSpec(filter=bflt))))
    spec = BucketSpec(opts.time_field, opts.meta_field)
    matched = 0
    outputs: list[dict[str, Any]] = []
    for rid, _raw, bucket in rows:
        if limit_one and matched:
            break
        kept: list[dict[str, Any]] = []
        changed = False
        for m in unpack_bucket(bucket, spec):
            if (not limit_one or not matched) and matcher.matches(m):
                matched += 1
                keep, out = transform(m)
                if out is not None:
                    outputs.append(out)
                if keep is not None:
                    kept.append(keep)
                changed = True
            else:
                kept.append(m)
        if not changed:
            continue
        if not kept:
            buckets.delete(rid, old_doc=bucket)
        else:
            min_ms = int(bucket["control"]["min"][opts.time_field])
            data = rebuild_bucket(bucket["_id"], kept, opts, min_time_ms=min_ms)
            buckets.update(rid, decode(data), encoded=data, old_doc=bucket)
        service.catalog.handle_direct_write(f"{db}.{name}", bucket["_id"])
    return matched, outputs


def _insert_side(req: CommandRequest, name: str, docs: list[dict[str, Any]]) -> None:
    """Insert measurements through a side bucket catalog (MongoDB does the same for
    updated measurements), inside the caller's transaction."""
    if not docs:
        return
    entry = _view_entry(req, name)
    opts = _options(entry)
    buckets = req.storage.catalog.get_collection(req.db, buckets_name(name))
    service = _service(req)
    side = BucketCatalog(service.catalog.params)
    ns = f"{req.db}.{name}"
    result = side.insert_batch(ns, opts, docs, None, ordered=True)
    if result.errors:
        side.abort(result)
        raise result.errors[0][1]
    service.note_bucket_inserts(buckets, opts.time_field, result.writes)
    write_buckets(buckets, result.writes)
    side.commit(result)
    service.catalog.merge_stats(ns, side._coll_stats(ns))


async def delete_measurements(req: CommandRequest, name: str, deletes: list[Any], *,
                              ordered: bool, durable: bool) -> dict[str, Any]:
    from .commands.delete import parse_statement

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        n = 0
        errors: list[tuple[int, MongoError]] = []
        for i, raw in enumerate(deletes):
            try:
                q, limit_one, _hint = parse_statement(raw)
                with catalog.transaction(durable=durable):
                    n += _delete_one_statement(req, name, q, limit_one)
            except MongoError as exc:
                errors.append((i, exc))
                if ordered:
                    break
        reply: dict[str, Any] = {"n": n}
        if errors:
            reply["writeErrors"] = [e.to_write_error(i) for i, e in errors]
        return reply

    return await req.storage.run(run)


def _delete_one_statement(req: CommandRequest, name: str, q: dict[str, Any],
                          limit_one: bool) -> int:
    entry = _view_entry(req, name)
    opts = _options(entry)
    meta_flt = meta_only_filter(q, opts) if not limit_one else None
    if meta_flt is not None:
        # A predicate only on the metaField deletes whole buckets.
        catalog = req.storage.catalog
        buckets = catalog.get_collection(req.db, buckets_name(name))
        if buckets is None:
            return 0
        from query.executor import matching, prepare_find

        rows = list(matching(buckets, prepare_find(buckets, FindSpec(filter=meta_flt))))
        n = 0
        for rid, _raw, bucket in rows:
            n += int(bucket["control"].get("count") or sum(
                1 for _ in unpack_bucket(bucket, BucketSpec(opts.time_field))))
            buckets.delete(rid, old_doc=bucket)
            _service(req).catalog.handle_direct_write(f"{req.db}.{name}", bucket["_id"])
        return n
    matched, _ = _rewrite_buckets(req, name, q, limit_one=limit_one,
                                  transform=lambda m: (None, None))
    return matched


async def update_measurements(req: CommandRequest, name: str, updates: list[Any], *,
                              ordered: bool, durable: bool) -> dict[str, Any]:
    from .commands.update import parse_statement

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        n = modified = 0
        upserted: list[dict[str, Any]] = []
        errors: list[tuple[int, MongoError]] = []
        for i, raw in enumerate(updates):
            try:
                stmt = parse_statement(raw)
                with catalog.transaction(durable=durable):
                    out_n, out_mod, up = _update_one_statement(req, name, stmt)
                n += out_n
                modified += out_mod
                if up is not MISSING:
                    n += 1
                    upserted.append({"index": i, "_id": up})
            except MongoError as exc:
                errors.append((i, exc))
                if ordered:
                    break
        reply: dict[str, Any] = {"n": n, "nModified": modified}
        if upserted:
            reply["upserted"] = upserted
        if errors:
            reply["writeErrors"] = [e.to_write_error(i) for i, e in errors]
        return reply

    return await req.storage.run(run)


def _update_one_statement(req: CommandRequest, name: str, stmt: UpdateStatement
                          ) -> tuple[int, int, Any]:
    if isinstance(stmt.u, list):
        raise MongoError(ErrorCode.NotImplemented,
                         "pipeline-style updates are not supported by bucketd yet")
    entry = _view_entry(req, name)
    opts = _options(entry)
    update = compile_update(stmt.u, array_filters=stmt.array_filters, is_upsert=stmt.upsert)
    if update.is_replacement and stmt.multi:
        raise MongoError(ErrorCode.FailedToParse,
                         "multi update is not supported for replacement-style update")
    modified = 0

    def transform(m: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        nonlocal modified
        new, changed = update.apply(m)
        if not changed:
            return m, None
        modified += 1
        return None, new  # updated measurements move to new buckets

    matched, outputs = _rewrite_buckets(req, name, stmt.q, limit_one=not stmt.multi,
                                        transform=transform)
    upserted: Any = MISSING
    if matched == 0 and stmt.upsert:
        doc = update.upsert_document(stmt.q)
        outputs = [doc]
        upserted = doc.get("_id", MISSING)
    for doc in outputs:
        if opts.time_field not in doc:
            raise MongoError(ErrorCode.BadValue,
                             f"'{opts.time_field}' must be present and contain a valid BSON "
                             "UTC datetime value")
    _insert_side(req, name, outputs)
    return matched, modified, upserted


# --- indexes ----------------------------------------------------------------------------------

async def create_timeseries_indexes(req: CommandRequest, name: str, specs: list[Any]
                                    ) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        entry = _view_entry(req, name)
        opts = _options(entry)
        translated = [bucket_index_spec(opts, s) for s in specs]
        buckets = catalog.get_or_create_collection(req.db, buckets_name(name))
        result = buckets.create_indexes(translated)
        reply: dict[str, Any] = {"createdCollectionAutomatically": False,
                                 "numIndexesBefore": result.num_indexes_before,
                                 "numIndexesAfter": result.num_indexes_after}
        if result.all_existed:
            reply["note"] = "all indexes already exist"
        return reply

    return await req.storage.run(run)


def list_timeseries_indexes(req: CommandRequest, entry: Any) -> list[dict[str, Any]]:
    opts = _options(entry)
    buckets = req.storage.catalog.get_collection(req.db, buckets_name(entry.name))
    if buckets is None:
        return []
    out = []
    for spec in buckets.list_indexes():
        if spec.get("name") == "_id_":
            continue  # the buckets collection is clustered by _id in MongoDB: no _id index
        user = timeseries_index_spec(opts, spec)
        if user is not None:
            out.append(user)
    return out


def translate_index_target(req: CommandRequest, entry: Any, target: dict[str, Any]
                           ) -> dict[str, Any]:
    """collMod's `index` on a time-series collection, with its key pattern in bucket form."""
    if "keyPattern" in target and isinstance(target["keyPattern"], dict):
        opts = _options(entry)
        return {**target, "keyPattern": drop_index_key(opts, target["keyPattern"])}
    return target


def drop_timeseries_indexes(req: CommandRequest, entry: Any, target: Any) -> dict[str, Any]:
    opts = _options(entry)
    buckets = req.storage.catalog.get_collection(req.db, buckets_name(entry.name))
    if buckets is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"ns not found {req.db}.{entry.name}")
    if isinstance(target, dict):
        target = drop_index_key(opts, target)
    return {"nIndexesWas": buckets.drop_indexes(target)}


# --- statistics -------------------------------------------------------------------------------

def timeseries_stats(req: CommandRequest, db: str, name: str) -> dict[str, Any]:
    buckets = req.storage.catalog.get_collection(db, buckets_name(name))
    count = buckets.count() if buckets is not None else 0
    size = buckets.data_size() if buckets is not None else 0
    service = _service(req)
    return {"bucketsNs": f"{db}.{buckets_name(name)}", "bucketCount": count,
            "avgBucketSize": size // count if count else 0,
            **service.catalog.collection_stats(f"{db}.{name}")}
