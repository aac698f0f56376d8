"""collStats: size, count and index figures of a collection (time-series: bucket statistics)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ._args import check_fields, get_int, namespace_arg


def collection_stats(req: CommandRequest, db: str, name: str, scale: int) -> dict[str, Any]:
    """collStats figures (call on the storage thread); also used by $collStats."""
    catalog = req.storage.catalog
    entry = catalog.entry(db, name)
    if entry is None:
        raise MongoError(ErrorCode.NamespaceNotFound, f"Collection [{db}.{name}] not found.")
    ts_extra: dict[str, Any] | None = None
    target = name
    if entry.kind == "timeseries":
        target = f"system.buckets.{name}"
        from ..timeseries_service import timeseries_stats

        ts_extra = timeseries_stats(req, db, name)
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


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "collStats", ("scale", "verbose"))
    name = namespace_arg(body, "collStats")
    scale = get_int(body, "collStats", "scale", 1) or 1
    if scale < 1:
        raise MongoError(ErrorCode.BadValue, "scale has to be >= 1")
    return await req.storage.run(collection_stats, req, req.db, name, scale)
