"""listCollections: namespaces of a database as MongoDB describes them (the virtual
`system.views` included), through a cursor."""

from __future__ import annotations

from typing import Any

from query.match import compile_filter

from ..auth.authorize import collection_filter
from ..context import CommandRequest
from ..namespaces import describe_namespace
from ..views.definitions import describe_system_views, system_views_exists
from ._args import check_fields, get_bool, get_doc, get_int


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "listCollections", ("filter", "nameOnly", "authorizedCollections",
                                           "cursor", "includePendingDrops"))
    name_only = get_bool(body, "listCollections", "nameOnly")
    flt = get_doc(body, "listCollections", "filter")
    cursor_opts = get_doc(body, "listCollections", "cursor") or {}
    batch_size = get_int(cursor_opts, "listCollections", "batchSize")
    matcher = None
    if flt:
        matcher = compile_filter(flt)
    db = req.db
    visible = collection_filter(req.server.config.auth, req.conn.user, db,
                                get_bool(body, "listCollections", "authorizedCollections"))

    def collect() -> list[dict[str, Any]]:
        out = []
        catalog = req.storage.catalog
        described = [describe_namespace(e) for e in catalog.list_collections(db)]
        if system_views_exists(catalog, db):  # mongod's system.views, read from the catalog
            described.append(describe_system_views(db))
            described.sort(key=lambda d: d["name"])
        for doc in described:
            if visible is not None and not visible(doc["name"]):
                continue
            if matcher is not None and not matcher.matches(doc):
                continue
            out.append({"name": doc["name"], "type": doc["type"]} if name_only else doc)
        return out

    docs = await req.storage.run(collect)
    cursor = await req.cursors.first_batch(f"{db}.$cmd.listCollections", iter(docs),
                                           batch_size=batch_size,
                                           conn_id=req.conn.id)
    return {"cursor": cursor}
