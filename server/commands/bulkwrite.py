"""bulkWrite (MongoDB 8.0): inserts, updates and deletes across namespaces in one command,
time-series ones through their measurements (inserts staged in the bucket catalog).

Replies with a cursor of per-operation results (`errorsOnly` keeps just the failures)
and the totals nInserted/nMatched/nModified/nUpserted/nDeleted/nErrors.
"""

from __future__ import annotations

from typing import Any

from bson import Int64

from query.executor import (
    UpdateStatement,
    apply_update_statement,
    check_size,
    delete_matching,
    prepare_document_for_insert,
)
from query.variables import CommandVariables
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from ..context import CommandRequest
from ..namespaces import TimeseriesTarget, resolve_namespace
from ..parsing.collation import collation_arg
from ..timeseries.service import timeseries_service
from ..timeseries.writes import delete_statement, stage_measurements, update_statement
from ..views.definitions import not_a_collection
from ._args import check_fields, command_variables, get_bool, get_list, require
from ._write import after_direct_write, check_batch_size, make_validator, parse_write_concern


def _namespaces(ns_info: list[Any]) -> list[tuple[str, str]]:
    out = []
    for item in ns_info:
        if not isinstance(item, dict) or type(item.get("ns")) is not str:
            raise MongoError(ErrorCode.TypeMismatch, "BSON field 'bulkWrite.nsInfo' must hold "
                             "objects with an 'ns' string")
        db, dot, coll = item["ns"].partition(".")
        if not dot or not db or not coll:
            raise MongoError(ErrorCode.InvalidNamespace, f"Invalid namespace: {item['ns']}")
        out.append((db, coll))
    return out


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    check_fields(body, "bulkWrite", ("ops", "nsInfo", "ordered", "bypassDocumentValidation",
                                     "errorsOnly", "let", "cursor"))
    ops = get_list(body, "bulkWrite", "ops")
    if ops is None:
        require(body, "bulkWrite", "ops")
        ops = []
    ns_info = get_list(body, "bulkWrite", "nsInfo") or []
    check_batch_size(len(ops), "bulkWrite")
    namespaces = _namespaces(ns_info)
    ordered = get_bool(body, "bulkWrite", "ordered", True)
    errors_only = get_bool(body, "bulkWrite", "errorsOnly")
    bypass = get_bool(body, "bulkWrite", "bypassDocumentValidation")
    variables = command_variables(body, "bulkWrite")
    wc = parse_write_concern(body)

    def run() -> dict[str, Any]:
        catalog = req.storage.catalog
        results: list[dict[str, Any]] = []
        totals = {"nErrors": 0, "nInserted": 0, "nMatched": 0, "nModified": 0, "nUpserted": 0,
                  "nDeleted": 0}
        staged = False  # measurements this command staged, not yet written
        for idx, op in enumerate(ops):
            try:
                if not isinstance(op, dict) or not op:
                    raise MongoError(ErrorCode.FailedToParse, "bulkWrite op must be an object")
                kind = next(iter(op))
                ns_index = op[kind]
                if not isinstance(ns_index, int) or not 0 <= ns_index < len(namespaces):
                    raise MongoError(ErrorCode.BadValue, f"BulkWrite ops entry {idx} has an "
                                     "invalid nsInfo index")
                db, name = namespaces[ns_index]
                ns = resolve_namespace(catalog, db, name)
                if ns.kind == "view":
                    raise not_a_collection(db, name)
                if ns.timeseries is not None and kind == "insert":
                    res = _insert_measurement(req, ns.timeseries, op)
                    staged = True
                else:
                    if staged:  # what follows reads the buckets as stored
                        timeseries_service(req).flush_deferred()
                        staged = False
                    with catalog.transaction(durable=wc.j):
                        if ns.timeseries is not None:
                            res = _one_timeseries(req, ns.timeseries, kind, op, variables)
                        else:
                            res = _one(catalog, kind, op, db, name, bypass, variables)
                    after_direct_write(req, db, name)
                for k in ("nInserted", "nMatched", "nModified", "nUpserted", "nDeleted"):
                    totals[k] += res.pop("_" + k, 0)
                if not errors_only:
                    results.append({"ok": 1.0, "idx": idx, **res})
            except MongoError as exc:
                totals["nErrors"] += 1
                results.append({"ok": 0.0, "idx": idx, "code": exc.code, "errmsg": exc.errmsg,
                                **exc.extra})
                if ordered:
                    break
        if staged and wc.j:
            timeseries_service(req).flush_deferred(durable=True)
        return {"cursor": {"id": Int64(0), "firstBatch": results,
                           "ns": "admin.$cmd.bulkWrite"}, **totals}

    reply = await req.storage.run(run)
    if req.server.timeseries is not None:
        req.server.timeseries.arm_flush_timer()
    return reply


def _insert_document(op: dict[str, Any]) -> dict[str, Any]:
    doc = op.get("document")
    if not isinstance(doc, dict):
        raise MongoError(ErrorCode.TypeMismatch, "insert 'document' must be an object")
    return doc


def _update_statement(op: dict[str, Any], variables: CommandVariables) -> UpdateStatement:
    if "filter" not in op or "updateMods" not in op:
        raise MongoError(ErrorCode.IDLFailedToParse, "update ops need filter and updateMods")
    return UpdateStatement(q=op["filter"], u=op["updateMods"], multi=bool(op.get("multi")),
                           upsert=bool(op.get("upsert")), array_filters=op.get("arrayFilters"),
                           hint=op.get("hint"), sort=op.get("sort"), constants=_constants(op),
                           variables=variables,
                           collator=collation_arg(op, "bulkWrite.ops.collation"))


def _update_result(matched: int, modified: int, upserted: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"n": matched, "nModified": modified, "_nMatched": matched,
                           "_nModified": modified}
    if upserted is not MISSING:
        res["n"] = 1
        res["upserted"] = {"_id": upserted}
        res["_nUpserted"] = 1
    return res


def _delete_filter(op: dict[str, Any]) -> Any:
    if "filter" not in op:
        raise MongoError(ErrorCode.IDLFailedToParse, "delete ops need a filter")
    return op["filter"]


def _insert_measurement(req: CommandRequest, target: TimeseriesTarget,
                        op: dict[str, Any]) -> dict[str, Any]:
    """A time-series insert op: staged in the bucket catalog like an insert command's."""
    n, errors = stage_measurements(req, target, [_insert_document(op)], ordered=True,
                                   durable=False)
    if errors:
        raise errors[0][1]
    return {"n": n, "_nInserted": n}


def _one_timeseries(req: CommandRequest, target: TimeseriesTarget, kind: str,
                    op: dict[str, Any], variables: CommandVariables) -> dict[str, Any]:
    """An update or delete op on a time-series collection, through its measurements."""
    if kind == "update":
        out = update_statement(req, target, _update_statement(op, variables))
        return _update_result(out.matched, out.modified, out.upserted)
    if kind == "delete":
        out = delete_statement(req, target, _delete_filter(op), not op.get("multi"),
                               variables.values(), op.get("hint"),
                               collation_arg(op, "bulkWrite.ops.collation"))
        return {"n": out.matched, "_nDeleted": out.matched}
    raise MongoError(ErrorCode.FailedToParse, f"Unrecognized bulkWrite op type: {kind}")


def _one(catalog: Any, kind: str, op: dict[str, Any], db: str, name: str, bypass: bool,
         variables: CommandVariables) -> dict[str, Any]:
    if kind == "insert":
        doc = prepare_document_for_insert(_insert_document(op))
        coll = catalog.get_or_create_collection(db, name)
        validator = None if bypass else make_validator(coll.options, f"{db}.{name}")
        if validator is not None:
            validator(doc)
        result = coll.insert_many([doc], encoded=[check_size(doc)])
        if result.errors:
            raise result.errors[0][1]
        return {"n": 1, "_nInserted": 1}
    if kind == "update":
        stmt = _update_statement(op, variables)
        coll = catalog.get_collection(db, name)
        validator = None if bypass or coll is None else make_validator(coll.options,
                                                                       f"{db}.{name}")

        def get_coll() -> Any:
            return catalog.get_or_create_collection(db, name) if stmt.upsert else \
                catalog.get_collection(db, name)

        out = apply_update_statement(get_coll, stmt, validator=validator)
        return _update_result(out.n, out.n_modified, out.upserted_id)
    if kind == "delete":
        coll = catalog.get_collection(db, name)
        n, _ = delete_matching(coll, _delete_filter(op), limit_one=not op.get("multi"),
                               hint=op.get("hint"), let=variables.values(),
                               collator=collation_arg(op, "bulkWrite.ops.collation"))
        return {"n": n, "_nDeleted": n}
    raise MongoError(ErrorCode.FailedToParse, f"Unrecognized bulkWrite op type: {kind}")


def _constants(op: dict[str, Any]) -> dict[str, Any] | None:
    constants = op.get("constants")
    if constants is not None and not isinstance(constants, dict):
        raise MongoError(ErrorCode.TypeMismatch, "BSON field 'bulkWrite.ops.constants' is the "
                         f"wrong type '{type_name(constants)}', expected type 'object'")
    return constants
