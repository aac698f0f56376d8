"""The TTL monitor: every `ttlMonitorSleepSecs`, delete expired documents.

Ordinary collections: documents whose TTL-indexed field holds a date (the earliest,
for an array) older than `expireAfterSeconds`. Clustered collections with
`expireAfterSeconds`: documents whose `_id` is a date older than the limit (mongod's
TTL by cluster key; other `_id` types never expire). Time-series collections with
`expireAfterSeconds`: whole buckets whose newest measurement is older than the limit.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from bson.datetime_ms import DatetimeMS

from query.executor import delete_matching
from storage.clustered import clustered_index_name
from storage.indexes import ID_INDEX_NAME

from .log import LOG
from .timeseries.expiry import expire_buckets

if TYPE_CHECKING:
    from .context import ServerState
    from .storage_service import StorageService
    from .timeseries.service import TimeseriesService

__all__ = ["ttl_monitor", "ttl_pass"]


def ttl_pass(storage: StorageService, timeseries: TimeseriesService | None,
             now_ms: int | None = None) -> int:
    """One pass over every collection (on the storage thread); returns documents deleted."""
    catalog = storage.catalog
    now = int(time.time() * 1000) if now_ms is None else now_ms
    deleted = 0
    for db in catalog.list_databases():
        for entry in catalog.list_collections(db):
            if entry.kind == "timeseries":
                expire = entry.options.get("expireAfterSeconds")
                if expire is not None and timeseries is not None:
                    deleted += expire_buckets(timeseries, db, entry.name, now, expire)
                continue
            if entry.kind != "collection":
                continue
            expiring: list[tuple[str, str, Any]] = []  # (field, index, expireAfterSeconds)
            if clustered_index_name(entry.options) is not None and \
                    entry.options.get("expireAfterSeconds") is not None:
                expiring.append(("_id", ID_INDEX_NAME, entry.options["expireAfterSeconds"]))
            for ix in entry.indexes:
                doc: dict[str, Any] = ix.spec.document
                expire = doc.get("expireAfterSeconds")
                if expire is not None and len(doc["key"]) == 1:
                    expiring.append((next(iter(doc["key"])), ix.name, expire))
            for field, index_name, expire in expiring:
                cutoff = DatetimeMS(now - int(float(expire) * 1000))
                coll = catalog.get_collection(db, entry.name)
                with catalog.transaction():
                    n, _ = delete_matching(coll, {field: {"$lt": cutoff}}, limit_one=False,
                                           hint=index_name)
                deleted += n
    return deleted


async def ttl_monitor(state: ServerState, storage: StorageService) -> None:
    """Run a TTL pass every `ttlMonitorSleepSecs` until cancelled (the server's lifecycle
    starts and stops it)."""
    while True:
        await asyncio.sleep(max(1, int(state.params.get("ttlMonitorSleepSecs"))))
        if not state.params.get("ttlMonitorEnabled"):
            continue
        try:
            n = await storage.run(ttl_pass, storage, state.timeseries)
        except Exception as exc:  # the monitor must survive anything
            LOG.error("INDEX", 22542, "TTLMonitor", "Error during TTL pass",
                      error=f"{type(exc).__name__}: {exc}")
            continue
        if n:
            LOG.info("INDEX", 5479200, "TTLMonitor", "Deleted expired documents", numDeleted=n)
