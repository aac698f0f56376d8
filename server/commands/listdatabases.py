"""listDatabases: databases with their size (filter and nameOnly as MongoDB)."""

from __future__ import annotations

from typing import Any

from bson import Int64

from query.match import compile_filter

from ..auth.authorize import database_filter
from ..context import CommandRequest
from ._args import check_fields, get_bool, get_doc


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "listDatabases", ("filter", "nameOnly", "authorizedDatabases"))
    name_only = get_bool(body, "listDatabases", "nameOnly")
    flt = get_doc(body, "listDatabases", "filter")
    matcher = None
    if flt:
        matcher = compile_filter(flt)
    authorized = body.get("authorizedDatabases")
    visible = database_filter(req.server.config.auth, req.conn.user,
                              get_bool(body, "listDatabases", "authorizedDatabases")
                              if authorized is not None else None)

    def collect() -> list[dict[str, Any]]:
        catalog = req.storage.catalog
        out = []
        for name in catalog.list_databases():
            if visible is not None and not visible(name):
                continue
            if name_only:
                doc: dict[str, Any] = {"name": name}
            else:
                stats = catalog.database_stats(name)
                size = stats.storage_size + stats.index_size
                doc = {"name": name, "sizeOnDisk": Int64(size),
                       "empty": stats.collections + stats.views == 0}  # as mongod: no collection
            if matcher is None or matcher.matches(doc):
                out.append(doc)
        return out

    dbs = await req.storage.run(collect)
    if name_only:
        return {"databases": dbs}
    total = sum(int(d["sizeOnDisk"]) for d in dbs)
    return {"databases": dbs, "totalSize": Int64(total), "totalSizeMb": Int64(total >> 20)}
