"""findAndModify: update, replace or remove one document and return it (before or after)."""

from __future__ import annotations

from typing import Any

from query.executor import UpdateStatement, apply_update_statement, delete_matching
from query.projection import compile_projection
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from ..context import CommandRequest
from ..namespaces import resolve_namespace
from ..parsing.collation import collation_arg
from ..timeseries.find_and_modify import MeasurementModify, find_and_modify_measurement
from ..views.definitions import not_a_collection
from ._args import check_fields, command_variables, get_bool, get_doc, namespace_arg
from ._write import after_direct_write, make_validator, parse_write_concern

ALLOWED = ("query", "sort", "remove", "update", "new", "fields", "upsert", "arrayFilters",
           "bypassDocumentValidation", "collation", "hint", "let", "maxTimeMS", "comment",
           "stmtId", "collectionUUID")


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    cmd = next(iter(body))
    check_fields(body, cmd, ALLOWED)
    name = namespace_arg(body, cmd)
    query = get_doc(body, cmd, "query") or {}
    sort = get_doc(body, cmd, "sort")
    remove = get_bool(body, cmd, "remove")
    update = body.get("update")
    return_new = get_bool(body, cmd, "new")
    upsert = get_bool(body, cmd, "upsert")
    fields = get_doc(body, cmd, "fields")
    bypass = get_bool(body, cmd, "bypassDocumentValidation")
    variables = command_variables(body, cmd)
    wc = parse_write_concern(body)
    if remove and update is not None:
        raise MongoError(ErrorCode.FailedToParse, "Cannot specify both an update and remove=true")
    if not remove and update is None:
        raise MongoError(ErrorCode.FailedToParse, "Either an update or remove=true must be "
                         "specified")
    if remove and (upsert or return_new):
        raise MongoError(ErrorCode.FailedToParse,
                         "Cannot specify both upsert=true and remove=true" if upsert else
                         "Cannot specify both new=true and remove=true; 'remove' always returns "
                         "the deleted document")
    if remove and body.get("arrayFilters") is not None:
        raise MongoError(ErrorCode.FailedToParse, "Cannot specify arrayFilters and remove=true")
    if update is not None and not isinstance(update, dict | list):
        raise MongoError(ErrorCode.FailedToParse, "Update argument must be either an object or "
                         "an array")
    projection = compile_projection(fields) if fields else None
    collation = collation_arg(body, "findAndModify.collation")
    db = req.db

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        ns = resolve_namespace(catalog, db, name)
        if ns.kind == "view":
            raise not_a_collection(db, name)
        last: dict[str, Any]
        value: dict[str, Any] | None
        with catalog.transaction(durable=wc.j):
            if ns.timeseries is not None:
                last, value = find_and_modify_measurement(req, ns.timeseries, MeasurementModify(
                    query=query, update=None if remove else update, sort=sort, upsert=upsert,
                    return_new=return_new, array_filters=body.get("arrayFilters"),
                    hint=body.get("hint"), variables=variables, collation=collation))
            elif remove:
                coll = catalog.get_collection(db, name)
                n, doc = delete_matching(coll, query, limit_one=True, sort=sort,
                                         hint=body.get("hint"), let=variables.values(),
                                         want_doc=True, collator=collation)
                value = doc
                last = {"n": n}
            else:
                coll = catalog.get_collection(db, name)
                validator = None if bypass or coll is None else make_validator(
                    coll.options, f"{db}.{name}")
                stmt = UpdateStatement(q=query, u=update, upsert=upsert,
                                       array_filters=body.get("arrayFilters"),
                                       hint=body.get("hint"), sort=sort, variables=variables,
                                       collator=collation)

                def get_coll() -> Any:
                    return catalog.get_or_create_collection(db, name) if upsert else \
                        catalog.get_collection(db, name)

                out = apply_update_statement(get_coll, stmt, validator=validator,
                                             want_docs=True)
                value = out.new_doc if return_new else out.old_doc
                last = {"n": out.n or (1 if out.upserted_id is not MISSING else 0),
                        "updatedExisting": out.n > 0}
                if out.upserted_id is not MISSING:
                    last["upserted"] = out.upserted_id
        after_direct_write(req, db, name)
        if value is not None and projection is not None:
            value = projection.apply(value)
        return {"lastErrorObject": last, "value": value}

    return await req.storage.run(run)
