"""update: apply update statements (operators, replacement, upsert, multi, arrayFilters, sort)."""

from __future__ import annotations

from typing import Any

from query.executor import UpdateStatement, apply_update_statement
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from ..context import CommandRequest
from ..namespaces import namespace_kind, raw_target
from ._args import check_fields, get_bool, get_list, namespace_arg, require
from ._write import (
    after_direct_write,
    check_batch_size,
    make_validator,
    parse_write_concern,
    write_reply,
)

STATEMENT_FIELDS = {"q", "u", "upsert", "multi", "arrayFilters", "hint", "collation", "sort",
                    "c", "upsertSupplied"}


def parse_statement(s: Any, command: str = "update") -> UpdateStatement:
    if not isinstance(s, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.updates' element must "
                         "be an object")
    for key in s:
        if key not in STATEMENT_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field '{command}.updates.{key}' is an unknown field.")
    if "q" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.updates.q' is missing but a required field")
    if "u" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         f"BSON field '{command}.updates.u' is missing but a required field")
    q, u = s["q"], s["u"]
    if not isinstance(q, dict):
        raise MongoError(ErrorCode.TypeMismatch, f"BSON field '{command}.updates.q' is the wrong "
                         "type, expected type 'object'")
    if not isinstance(u, dict | list):
        raise MongoError(ErrorCode.FailedToParse, "Update argument must be either an object or "
                         "an array")
    collation = s.get("collation")
    if collation and (not isinstance(collation, dict) or collation.get("locale") != "simple"):
        raise MongoError(ErrorCode.NotImplemented, "only the simple collation is supported")
    multi = bool(s.get("multi", False))
    sort = s.get("sort")
    if sort is not None and multi:
        raise MongoError(ErrorCode.FailedToParse,
                         "Cannot specify sort with multi=true")
    return UpdateStatement(q=q, u=u, multi=multi, upsert=bool(s.get("upsert", False)),
                           array_filters=s.get("arrayFilters"), hint=s.get("hint"), sort=sort,
                           let=s.get("c"))


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
    let = body.get("let")
    wc = parse_write_concern(body)
    db = req.db
    kind = await req.storage.run(namespace_kind, req.storage.catalog, db, name)
    if kind == "timeseries":
        from ..timeseries_service import update_measurements

        return await update_measurements(req, name, updates, ordered=ordered, durable=wc.j)
    return await run_updates(req, db, name, updates, ordered=ordered, bypass=bypass, let=let,
                             durable=wc.j)


async def run_updates(req: CommandRequest, db: str, name: str, updates: list[Any], *,
                      ordered: bool, bypass: bool, let: Any, durable: bool) -> dict[str, Any]:
    def write() -> dict[str, Any]:
        catalog = req.storage.catalog
        n = modified = 0
        upserted: list[dict[str, Any]] = []
        errors: list[tuple[int, MongoError]] = []
        for i, raw in enumerate(updates):
            try:
                stmt = parse_statement(raw)
                if let is not None:
                    stmt.let = {**let, **(stmt.let or {})}

                def get_coll(upsert: bool = stmt.upsert) -> Any:
                    if upsert:
                        return catalog.get_or_create_collection(db, name)
                    return catalog.get_collection(db, name)

                coll = catalog.get_collection(db, name)
                validator = None if bypass or coll is None else make_validator(
                    coll.options, f"{db}.{name}")
                with catalog.transaction(durable=durable):
                    out = apply_update_statement(get_coll, stmt, validator=validator)
                n += out.n
                modified += out.n_modified
                if out.upserted_id is not MISSING:
                    n += 1
                    upserted.append({"index": i, "_id": out.upserted_id})
            except MongoError as exc:
                errors.append((i, exc))
                if ordered:
                    break
        after_direct_write(req, db, name)
        extra: dict[str, Any] = {"nModified": modified}
        if upserted:
            extra["upserted"] = upserted
        return write_reply(n, errors, **extra)

    reply = await req.storage.run(write)
    req.server.opcounters["update"] += max(0, len(updates) - 1)
    return reply
