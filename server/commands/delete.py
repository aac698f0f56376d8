"""delete: remove documents matching each statement's filter (limit 0: all, 1: the first)."""

from __future__ import annotations

from typing import Any

from query.executor import delete_matching

from ..context import CommandRequest
from ..namespaces import raw_target, resolve_namespace
from ..parsing.write_statements import parse_delete_statement
from ..timeseries.writes import delete_measurements
from ..views.writes import refused_writes
from ..write_batches import WriteTally, run_statements, write_reply
from ._args import check_fields, command_variables, get_bool, get_list, namespace_arg, require
from ._write import after_direct_write, check_batch_size, parse_write_concern


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "delete", ("deletes", "ordered", "let", "collectionUUID", "stmtIds",
                                  "isTimeseriesNamespace"))
    name = namespace_arg(body, "delete")
    name = raw_target(req.storage.catalog, req.db, name, body)
    deletes = get_list(body, "delete", "deletes")
    if deletes is None:
        require(body, "delete", "deletes")
        deletes = []
    check_batch_size(len(deletes), "delete")
    ordered = get_bool(body, "delete", "ordered", True)
    variables = command_variables(body, "delete")
    wc = parse_write_concern(body)
    db = req.db
    ns = await req.storage.run(resolve_namespace, req.storage.catalog, db, name)
    if ns.kind == "view":
        return refused_writes(db, name, len(deletes), ordered=ordered)
    if ns.timeseries is not None:
        return await delete_measurements(req, ns.timeseries, deletes, ordered=ordered,
                                         durable=wc.j, variables=variables)

    catalog = req.storage.catalog

    def apply(_i: int, raw: Any, tally: WriteTally) -> None:
        q, limit_one, hint, collation = parse_delete_statement(raw)
        coll = catalog.get_collection(db, name)
        with catalog.transaction(durable=wc.j):
            deleted, _ = delete_matching(coll, q, limit_one=limit_one, hint=hint,
                                         let=variables.values(), collator=collation)
        tally.n += deleted
        if deleted:
            after_direct_write(req, db, name)

    def write() -> dict[str, Any]:
        tally = run_statements(deletes, ordered=ordered, apply=apply)
        return write_reply(tally.n, tally.errors)

    reply = await req.storage.run(write)
    req.server.opcounters["delete"] += max(0, len(deletes) - 1)
    return reply
