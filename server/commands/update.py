"""update: apply update statements (operators, replacement, upsert, multi, arrayFilters, sort)."""

from __future__ import annotations

from typing import Any

from query.executor import apply_update_statement
from query.variables import CommandVariables
from storage.vocabulary.missing import MISSING

from ..context import CommandRequest
from ..namespaces import raw_target, resolve_namespace
from ..parsing.write_statements import parse_update_statement
from ..timeseries.writes import update_measurements
from ..views.writes import refused_writes
from ..write_batches import WriteTally, run_statements
from ._args import check_fields, command_variables, get_bool, get_list, namespace_arg, require
from ._write import (
    after_direct_write,
    check_batch_size,
    make_validator,
    parse_write_concern,
)


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "update", ("updates", "ordered", "bypassDocumentValidation", "let",
                                  "collectionUUID", "stmtIds", "isTimeseriesNamespace"))
    name = namespace_arg(body, "update")
    name = raw_target(req.storage.catalog, req.db, name, body)
    updates = get_list(body, "update", "updates")
    if updates is None:
        require(body, "update", "updates")
        updates = []
    check_batch_size(len(updates), "update")
    ordered = get_bool(body, "update", "ordered", True)
    bypass = get_bool(body, "update", "bypassDocumentValidation", False)
    variables = command_variables(body, "update")
    wc = parse_write_concern(body)
    db = req.db
    ns = await req.storage.run(resolve_namespace, req.storage.catalog, db, name)
    if ns.kind == "view":
        return refused_writes(db, name, len(updates), ordered=ordered, update=True)
    if ns.timeseries is not None:
        return await update_measurements(req, ns.timeseries, updates, ordered=ordered,
                                         durable=wc.j, variables=variables)
    return await run_updates(req, db, name, updates, ordered=ordered, bypass=bypass,
                             variables=variables, durable=wc.j)


async def run_updates(req: CommandRequest, db: str, name: str, updates: list[Any], *,
                      ordered: bool, bypass: bool, variables: CommandVariables,
                      durable: bool) -> dict[str, Any]:
    catalog = req.storage.catalog

    def apply(i: int, raw: Any, tally: WriteTally) -> None:
        stmt = parse_update_statement(raw, variables=variables)

        def get_coll(upsert: bool = stmt.upsert) -> Any:
            if upsert:
                return catalog.get_or_create_collection(db, name)
            return catalog.get_collection(db, name)

        coll = catalog.get_collection(db, name)
        validator = None if bypass or coll is None else make_validator(
            coll.options, f"{db}.{name}")
        with catalog.transaction(durable=durable):
            out = apply_update_statement(get_coll, stmt, validator=validator)
        tally.n += out.n
        tally.modified += out.n_modified
        if out.upserted_id is not MISSING:
            tally.add_upserted(i, out.upserted_id)

    def write() -> dict[str, Any]:
        try:
            tally = run_statements(updates, ordered=ordered, apply=apply)
        finally:  # also when killOp stopped it after some statements
            after_direct_write(req, db, name)
        return tally.update_reply()

    reply = await req.storage.run(write)
    req.server.opcounters["update"] += max(0, len(updates) - 1)
    return reply
