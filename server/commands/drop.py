"""drop: remove a collection (for a time-series collection, its view and buckets)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import buckets_name
from ..profiler import PROFILE
from ._args import check_fields, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    check_fields(req.body, "drop", ("collectionUUID",))
    name = namespace_arg(req.body, "drop")
    db = req.db
    if name == PROFILE:
        if req.server.profile.level(db) != 0:
            raise MongoError(ErrorCode.IllegalOperation,
                             "turn off profiling before dropping system.profile collection")
    elif name.startswith("system.") and not name.startswith("system.buckets."):
        raise MongoError(ErrorCode.IllegalOperation, f"can't drop system collection {db}.{name}")

    def drop() -> int | None:
        catalog = req.storage.catalog
        entry = catalog.entry(db, name)
        if entry is None:
            return 0
        if entry.kind == "view":
            catalog.drop_collection(db, name)
            return None
        with catalog.transaction():
            catalog.drop_collection(db, name)
            if entry.kind == "timeseries":
                catalog.drop_collection(db, buckets_name(name))
            if req.server.timeseries is not None:
                req.server.timeseries.forget_namespace(db, name)
        return len(entry.indexes) or 1

    nindexes = await req.storage.run(drop)
    req.cursors.close_for_namespace(f"{db}.{name}")
    if nindexes is None:  # a view: mongod reports no index count
        return {"ns": f"{db}.{name}"}
    # MongoDB 7.0+ answers ok for a missing collection; nIndexesWas/ns only when it existed.
    return {"nIndexesWas": nindexes, "ns": f"{db}.{name}"} if nindexes else {}
