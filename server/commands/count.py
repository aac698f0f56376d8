"""count: the number of documents matching a query (skip, limit, hint)."""

from __future__ import annotations

from typing import Any

from query.executor import count_documents

from ..context import CommandRequest
from ..namespaces import namespace_kind
from ._args import check_fields, get_doc, get_int, namespace_arg


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "count", ("query", "skip", "limit", "hint", "collation", "fields",
                                 "readConcern", "maxTimeMS", "comment", "encryptionInformation"))
    name = namespace_arg(body, "count")
    query = get_doc(body, "count", "query")
    skip = max(0, get_int(body, "count", "skip", 0) or 0)
    limit = abs(get_int(body, "count", "limit", 0) or 0)
    db = req.db
    kind = await req.storage.run(namespace_kind, req.storage.catalog, db, name)
    if kind == "timeseries":
        from ..timeseries_service import count_measurements

        n = await count_measurements(req, name, query, skip, limit)
        return {"n": n}

    def run() -> int:
        coll = req.storage.catalog.get_collection(db, name)
        return count_documents(coll, query, skip=skip, limit=limit, hint=body.get("hint"))

    return {"n": await req.storage.run(run)}
