"""TTL of time-series collections: whole buckets whose newest measurement is too old."""

from __future__ import annotations

from query.executor import FindSpec, matching, prepare_find
from storage.timeseries import ttl_expired_filter

from ..namespaces import resolve_namespace
from .service import TimeseriesService

__all__ = ["expire_buckets"]


def expire_buckets(service: TimeseriesService, db: str, name: str, now_ms: int,
                   expire: int) -> int:
    """Delete the expired buckets of `db.name` (storage thread); returns how many."""
    storage_catalog = service.storage_catalog
    target = resolve_namespace(storage_catalog, db, name).timeseries
    if target is None:
        return 0
    buckets = target.buckets(storage_catalog)
    if buckets is None:
        return 0
    flt = ttl_expired_filter(target.options, int(expire), now_ms)
    rows = list(matching(buckets, prepare_find(buckets, FindSpec(filter=flt))))
    if not rows:
        return 0
    with storage_catalog.transaction():
        for rid, _raw, doc in rows:
            buckets.delete(rid, old_doc=doc)
    for _rid, _raw, doc in rows:
        service.catalog.handle_direct_write(target.ns, doc["_id"])
    return len(rows)
