"""distinct: the distinct values of a field among matching documents (arrays unwound)."""

from __future__ import annotations

from typing import Any

from query.executor import distinct_values
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import raw_target, resolve_namespace
from ..parsing.collation import collation_arg
from ..timeseries.reads import distinct_measurements
from ..views.reads import distinct_through_view, reads_through_pipeline
from ._args import check_fields, get_doc, namespace_arg, require


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "distinct", ("key", "query", "hint", "collation", "readConcern",
                                    "maxTimeMS", "comment", "collectionUUID"))
    name = namespace_arg(body, "distinct")
    name = raw_target(req.storage.catalog, req.db, name, body)
    key = require(body, "distinct", "key")
    if type(key) is not str:
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'distinct.key' is the wrong type "
                         f"'{type(key).__name__}', expected type 'string'")
    if not key:
        raise MongoError(ErrorCode.BadValue, "FieldPath cannot be constructed with empty string")
    query = get_doc(body, "distinct", "query")
    collation = collation_arg(body, "distinct.collation")
    db = req.db
    if reads_through_pipeline(req, db, name):
        return {"values": await distinct_through_view(req, name, key, query, collation)}
    ns = await req.storage.run(resolve_namespace, req.storage.catalog, db, name)
    if ns.timeseries is not None:
        return {"values": await distinct_measurements(req, ns.timeseries, key, query,
                                                      collation)}

    def run() -> list[Any]:
        coll = req.storage.catalog.get_collection(db, name)
        return distinct_values(coll, key, query, hint=body.get("hint"), collator=collation)

    return {"values": await req.storage.run(run)}
