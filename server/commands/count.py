"""count: the number of documents matching a query (skip, limit, hint)."""

from __future__ import annotations

from typing import Any

from query.executor import count_documents

from ..context import CommandRequest
from ..namespaces import raw_target, resolve_namespace
from ..parsing.collation import collation_arg
from ..timeseries.reads import count_measurements
from ..views.reads import count_through_view, reads_through_pipeline
from ._args import check_fields, get_doc, get_int, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "count", ("query", "skip", "limit", "hint", "collation", "fields",
                                 "readConcern", "maxTimeMS", "comment", "encryptionInformation",
                                 "collectionUUID"))
    name = namespace_arg(body, "count")
    name = raw_target(req.storage.catalog, req.db, name, body)
    query = get_doc(body, "count", "query")
    collation = collation_arg(body, "count.collation")
    skip = max(0, get_int(body, "count", "skip", 0) or 0)
    limit = abs(get_int(body, "count", "limit", 0) or 0)
    db = req.db
    if reads_through_pipeline(req, db, name):
        return {"n": await count_through_view(req, name, query, skip, limit, collation)}
    ns = await req.storage.run(resolve_namespace, req.storage.catalog, db, name)
    if ns.timeseries is not None:
        n = await count_measurements(req, ns.timeseries, query, skip, limit, collation)
        return {"n": n}

    def run() -> int:
        coll = req.storage.catalog.get_collection(db, name)
        return count_documents(coll, query, skip=skip, limit=limit, hint=body.get("hint"),
                               collator=collation)

    return {"n": await req.storage.run(run)}
