"""delete: remove documents matching each statement's filter (limit 0: all, 1: the first)."""

from __future__ import annotations

from typing import Any

from query.executor import delete_matching
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..namespaces import namespace_kind, raw_target
from ._args import check_fields, get_bool, get_list, namespace_arg, require
from ._write import after_direct_write, check_batch_size, parse_write_concern, write_reply

STATEMENT_FIELDS = {"q", "limit", "hint", "collation"}


def parse_statement(s: Any) -> tuple[dict[str, Any], bool, Any]:
    if not isinstance(s, dict):
        raise MongoError(ErrorCode.TypeMismatch, "delete statements must be objects")
    for key in s:
        if key not in STATEMENT_FIELDS:
            raise MongoError(ErrorCode.IDLUnknownField,
                             f"BSON field 'delete.deletes.{key}' is an unknown field.")
    if "q" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'delete.deletes.q' is missing but a required field")
    if "limit" not in s:
        raise MongoError(ErrorCode.IDLFailedToParse,
                         "BSON field 'delete.deletes.limit' is missing but a required field")
    q = s["q"]
    if not isinstance(q, dict):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'delete.deletes.q' is the wrong "
                         "type, expected type 'object'")
    limit = s["limit"]
    if limit not in (0, 1) or isinstance(limit, bool):
        raise MongoError(ErrorCode.FailedToParse,
                         f"The limit field in delete objects must be 0 or 1. Got {limit}")
    collation = s.get("collation")
    if collation and (not isinstance(collation, dict) or collation.get("locale") != "simple"):
        raise MongoError(ErrorCode.NotImplemented, "only the simple collation is supported")
    return q, bool(limit), s.get("hint")


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
    let = body.get("let")
    wc = parse_write_concern(body)
    db = req.db
    kind = await req.storage.run(namespace_kind, req.storage.catalog, db, name)
    if kind == "timeseries":
        from ..timeseries_service import delete_measurements

        return await delete_measurements(req, name, deletes, ordered=ordered, durable=wc.j)

    def write() -> dict[str, Any]:
        catalog = req.storage.catalog
        n = 0
        errors: list[tuple[int, MongoError]] = []
        for i, raw in enumerate(deletes):
            try:
                q, limit_one, hint = parse_statement(raw)
                coll = catalog.get_collection(db, name)
                with catalog.transaction(durable=wc.j):
                    deleted, _ = delete_matching(coll, q, limit_one=limit_one, hint=hint, let=let)
                n += deleted
                if deleted:
                    after_direct_write(req, db, name)
            except MongoError as exc:
                errors.append((i, exc))
                if ordered:
                    break
        return write_reply(n, errors)

    reply = await req.storage.run(write)
    req.server.opcounters["delete"] += max(0, len(deletes) - 1)
    return reply
