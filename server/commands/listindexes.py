"""listIndexes: a collection's index specs through a cursor (time-series in the user's form)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..timeseries.indexes import list_timeseries_indexes
from ._args import check_fields, get_doc, get_int, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "listIndexes", ("cursor", "includeBuildUUIDs", "includeIndexBuildInfo",
                                       "isTimeseriesNamespace"))
    name = namespace_arg(body, "listIndexes")
    cursor_opts = get_doc(body, "listIndexes", "cursor") or {}
    batch_size = get_int(cursor_opts, "listIndexes", "batchSize")
    db = req.db

    def run() -> list[dict[str, Any]]:
        catalog = req.storage.catalog
        ns = resolve_namespace(catalog, db, name)
        if ns.entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound, f"ns does not exist: {db}.{name}")
        if ns.timeseries is not None:
            return list_timeseries_indexes(req, ns.timeseries)
        coll = catalog.get_collection(db, name)
        if coll is None:
            raise MongoError(ErrorCode.CommandNotSupportedOnView,
                             f"Namespace {db}.{name} is a view, not a collection")
        return coll.list_indexes()

    specs = await req.storage.run(run)
    cursor = await req.cursors.first_batch(f"{db}.$cmd.listIndexes.{name}", iter(specs),
                                           batch_size=batch_size, conn_id=req.conn.id)
    return {"cursor": cursor}
