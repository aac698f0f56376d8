"""Collection statistics (collStats, $collStats): sizes, counts and index figures of a
collection, and of a time-series collection its buckets' and bucket catalog's figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from .namespaces import resolve_namespace
from .timeseries.service import timeseries_service

if TYPE_CHECKING:
    from .context import CommandRequest

__all__ = ["collection_stats"]


def collection_stats(req: CommandRequest, db: str, name: str, scale: int) -> dict[str, Any]:
    """collStats figures (call on the storage thread); also used by $collStats."""
    catalog = req.storage.catalog
    ns = resolve_namespace(catalog, db, name)
    if ns.entry is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"Collection [{db}.{name}] not found.")
    ts_extra: dict[str, Any] | None = None
    target = name
    if ns.timeseries is not None:
        target = ns.timeseries.buckets_name
        ts_extra = timeseries_service(req).collection_stats(ns.timeseries)
    coll = catalog.get_collection(db, target)
    if coll is None:
        raise MongoError(ErrorCode.CommandNotSupportedOnView, f"Namespace {db}.{name} is a view, "
                         "not a collection")
    st = coll.stats()
    out: dict[str, Any] = {
        "ns": f"{db}.{name}",
        "size": st.size // scale,
        "count": st.count,
        "numOrphanDocs": 0,
        "storageSize": st.storage_size // scale,
        "freeStorageSize": 0,
        "capped": False,
        "nindexes": st.nindexes,
        "indexBuilds": [],
        "totalIndexSize": st.total_index_size // scale,
        "totalSize": (st.storage_size + st.total_index_size) // scale,
        "indexSizes": {k: v // scale for k, v in st.index_sizes.items()},
        "scaleFactor": scale,
    }
    if st.count:
        out = {"ns": out["ns"], "size": out["size"], "count": st.count,
               "avgObjSize": st.avg_obj_size, **{k: v for k, v in out.items()
                                                 if k not in ("ns", "size", "count")}}
    if ts_extra is not None:
        out["timeseries"] = ts_extra
        if ts_extra.get("bucketCount"):
            out["count"] = ts_extra.get("bucketCount")
    return out
