"""dropIndexes: drop indexes by name, names, key pattern, or "*"."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..timeseries.indexes import drop_timeseries_indexes
from ._args import check_fields, namespace_arg, require


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    cmd = next(iter(body))
    check_fields(body, cmd, ("index", "isTimeseriesNamespace", "collectionUUID"))
    name = namespace_arg(body, cmd)
    target = require(body, cmd, "index")
    if not isinstance(target, str | list | dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{cmd}.index' is the wrong type, "
                         "expected types '[string, object, array]'")
    db = req.db

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        ns = resolve_namespace(catalog, db, name)
        if ns.entry is None:
            raise MongoError(ErrorCode.NamespaceNotFound, f"ns not found {db}.{name}")
        if ns.timeseries is not None:
            return drop_timeseries_indexes(req, ns.timeseries, target)
        coll = catalog.get_collection(db, name)
        if coll is None:
            raise MongoError(ErrorCode.CommandNotSupportedOnView,
                             f"Namespace {db}.{name} is a view, not a collection")
        return {"nIndexesWas": coll.drop_indexes(target)}

    return await req.storage.run(run)
