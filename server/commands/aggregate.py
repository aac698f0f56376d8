"""aggregate: run a pipeline over a collection (or `aggregate: 1` over the database)."""

from __future__ import annotations

from typing import Any, Final

from storage.collation import OperationCollation
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..aggregate_explain import explain_pipeline
from ..aggregation import build_context, run_pipeline
from ..context import CommandRequest
from ..namespaces import raw_target
from ..parsing.collation import collation_arg
from ._args import check_fields, get_bool, get_doc, get_int, get_list, require

ALLOWED = ("pipeline", "cursor", "explain", "allowDiskUse", "let", "hint", "collation",
           "maxTimeMS", "bypassDocumentValidation", "readConcern", "writeConcern", "comment",
           "fromMongos", "needsMerge", "exchange", "isMapReduceCommand", "collectionUUID",
           "$_requestReshardingResumeToken", "rawData", "includeQueryStatsMetrics")


def _target(body: dict[str, Any]) -> str | None:
    v = body["aggregate"]
    if v == 1 and not isinstance(v, bool):
        return None
    if type(v) is not str:
        raise MongoError(ErrorCode.FailedToParse,
                         "Invalid {aggregate: ...} value; must be a string or the number 1")
    if not v:
        raise MongoError(ErrorCode.InvalidNamespace, "Invalid namespace specified ''")
    return v


def _parse(req: CommandRequest
           ) -> tuple[str | None, list[Any], int | None, bool, OperationCollation]:
    body = req.body
    check_fields(body, "aggregate", ALLOWED)
    coll = _target(body)
    if coll is not None:
        coll = raw_target(req.storage.catalog, req.db, coll, body)
    pipeline = get_list(body, "aggregate", "pipeline")
    if pipeline is None:
        require(body, "aggregate", "pipeline")
        pipeline = []
    explain = get_bool(body, "aggregate", "explain")
    cursor = get_doc(body, "aggregate", "cursor")
    if cursor is None and not explain:
        raise MongoError(ErrorCode.FailedToParse, "The 'cursor' option is required, except for "
                         "aggregate with the explain argument")
    batch_size = get_int(cursor or {}, "aggregate", "batchSize")
    if batch_size is not None and batch_size < 0:
        raise MongoError(ErrorCode.BadValue, "Cursor batchSize must not be negative")
    collation = collation_arg(body, "aggregate.collation")
    allow = body.get("allowDiskUse")
    allow_disk = bool(req.server.params.get("allowDiskUseByDefault")) if allow is None \
        else bool(allow)
    return coll, pipeline, batch_size, allow_disk, collation


# Sources the server answers from memory: a pipeline that starts with one and reads no
# collection runs on the event loop, so $currentOp sees (and never waits behind) a long
# operation on the storage thread.
_SERVER_SOURCES: Final = frozenset({"$currentOp", "$listLocalSessions"})
_READS_STORAGE: Final = frozenset({"$lookup", "$unionWith", "$graphLookup", "$facet", "$out",
                                   "$merge"})


def _served_in_memory(coll: str | None, pipeline: list[Any]) -> bool:
    names = [next(iter(s), "") if isinstance(s, dict) and s else "" for s in pipeline]
    return coll is None and bool(names) and names[0] in _SERVER_SOURCES and \
        not _READS_STORAGE.intersection(names)


async def handle(req: CommandRequest) -> dict[str, Any]:
    coll, pipeline, batch_size, allow_disk, collation = _parse(req)
    if req.body.get("explain"):
        return await explain(req, req.body, "queryPlanner")
    bypass = get_bool(req.body, "aggregate", "bypassDocumentValidation", False)
    ctx = build_context(req, coll, allow_disk_use=allow_disk, bypass_validation=bypass)
    let = req.body.get("let")
    if _served_in_memory(coll, pipeline):
        _compiled, docs = run_pipeline(req, coll, pipeline, ctx, let)
        return {"cursor": await req.cursors.first_batch(f"{req.db}.$cmd.aggregate", docs,
                                                        batch_size=batch_size,
                                                        conn_id=req.conn.id)}
    writes = any(isinstance(s, dict) and ("$out" in s or "$merge" in s) for s in pipeline)

    def start() -> Any:
        _pipeline, it = run_pipeline(req, coll, pipeline, ctx, let, collation)
        if writes:
            # $out/$merge run to completion now: the write is part of this command.
            return iter(list(it))
        return it

    source = await req.storage.run(start)
    ns = f"{req.db}.{coll}" if coll is not None else f"{req.db}.$cmd.aggregate"
    cursor = await req.cursors.first_batch(ns, source, batch_size=batch_size,
                                           run=req.storage.run, conn_id=req.conn.id)
    return {"cursor": cursor}


async def explain(req: CommandRequest, body: dict[str, Any], verbosity: str) -> dict[str, Any]:
    saved = req.body
    req.body = {k: v for k, v in body.items() if k != "explain"}
    req.body.setdefault("cursor", {})
    try:
        coll, pipeline, _bs, allow_disk, collation = _parse(req)
    finally:
        req.body = saved
    ctx = build_context(req, coll, allow_disk_use=allow_disk)

    def run() -> dict[str, Any]:
        out = explain_pipeline(req, coll, pipeline, ctx, body.get("let"), verbosity,
                               collation)
        out["command"] = body
        return out

    return await req.storage.run(run)
