"""createIndexes: build indexes (on a time-series collection, translated to its buckets)."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..timeseries.indexes import create_timeseries_indexes
from ._args import check_fields, get_list, namespace_arg, require


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "createIndexes", ("indexes", "commitQuorum", "ignoreUnknownIndexOptions",
                                         "isTimeseriesNamespace", "returnOnStart", "collectionUUID"))
    name = namespace_arg(body, "createIndexes")
    specs = get_list(body, "createIndexes", "indexes")
    if specs is None:
        require(body, "createIndexes", "indexes")
        specs = []
    if not specs:
        raise MongoError(ErrorCode.BadValue, "Must specify at least one index to create")
    for spec in specs:
        if not isinstance(spec, dict):
            raise MongoError(ErrorCode.TypeMismatch, "The field 'indexes' must be an array of "
                             "objects")
    db = req.db
    ns = await req.storage.run(resolve_namespace, req.storage.catalog, db, name)
    if ns.timeseries is not None:
        return await create_timeseries_indexes(req, ns.timeseries, specs)

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        with catalog.transaction():
            created_coll = catalog.entry(db, name) is None
            coll = catalog.get_or_create_collection(db, name)
            result = coll.create_indexes(specs)
        reply: dict[str, Any] = {"numIndexesBefore": result.num_indexes_before,
                                 "numIndexesAfter": result.num_indexes_after}
        if created_coll:
            reply = {"createdCollectionAutomatically": True, **reply}
        else:
            reply = {"createdCollectionAutomatically": False, **reply}
        if result.all_existed:
            reply["note"] = "all indexes already exist"
        return reply

    return await req.storage.run(run)
