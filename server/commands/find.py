"""find: query a collection (or a time-series collection) and open a cursor."""

from __future__ import annotations

from typing import Any

from query.executor import FindSpec, prepare_find, run_find
from query.explain import explain_find
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

from ..context import CommandRequest
from ..cursors import DEFAULT_FIRST_BATCH, Lookahead, first_batch_limit, take_batch
from ..namespaces import TimeseriesTarget, raw_target, resolve_namespace
from ..operations import CURRENT_OP
from ..parsing.collation import collation_arg
from ..timeseries.reads import find_measurements
from ..views.reads import (
    check_find_options,
    find_pipeline,
    find_through_view,
    reads_through_pipeline,
)
from . import aggregate
from ._args import (
    check_fields,
    command_variables,
    get_bool,
    get_doc,
    get_int,
    namespace_arg,
)

ALLOWED = ("filter", "projection", "sort", "hint", "skip", "limit", "batchSize", "singleBatch",
           "comment", "maxTimeMS", "readConcern", "max", "min", "returnKey", "showRecordId",
           "tailable", "oplogReplay", "noCursorTimeout", "awaitData", "allowPartialResults",
           "collation", "allowDiskUse", "let", "$_requestResumeToken", "$_resumeAfter",
           "includeQueryStatsMetrics", "rawData", "collectionUUID")


def parse_find(body: dict[str, Any], server_allow_disk: bool) -> tuple[FindSpec, int | None, bool]:
    check_fields(body, "find", ALLOWED)
    skip = get_int(body, "find", "skip", 0) or 0
    if skip < 0:
        raise MongoError(51024, f"BSON field 'skip' value must be >= 0, actual value '{skip}'")
    limit = get_int(body, "find", "limit", 0) or 0
    if limit < 0:
        raise MongoError(51024, f"BSON field 'limit' value must be >= 0, actual value '{limit}'")
    batch_size = get_int(body, "find", "batchSize")
    if batch_size is not None and batch_size < 0:
        raise MongoError(51024, f"BSON field 'batchSize' value must be >= 0, actual value "
                         f"'{batch_size}'")
    single_batch = get_bool(body, "find", "singleBatch")
    if body.get("tailable") or body.get("awaitData"):
        raise MongoError(ErrorCode.BadValue, "tailable cursor requested on non capped collection")
    collation = collation_arg(body, "find.collation")
    if body.get("min") or body.get("max"):
        raise MongoError(ErrorCode.NotImplemented, "find with min/max is not supported")
    allow_disk = body.get("allowDiskUse")
    spec = FindSpec(
        filter=get_doc(body, "find", "filter"),
        projection=get_doc(body, "find", "projection"),
        sort=get_doc(body, "find", "sort"),
        skip=skip, limit=limit, hint=body.get("hint"),
        let=command_variables(body, "find").values(),
        allow_disk_use=server_allow_disk if allow_disk is None else bool(allow_disk),
        collator=collation,
    )
    first = batch_size
    if limit and limit <= (batch_size if batch_size is not None else DEFAULT_FIRST_BATCH):
        # The whole result fits the first batch: MongoDB closes the cursor at once.
        first = limit
        single_batch = True
    return spec, first, single_batch


async def handle(req: CommandRequest) -> dict[str, Any]:
    body = req.body
    name = namespace_arg(body, "find")
    name = raw_target(req.storage.catalog, req.db, name, body)
    # The catalog's in-memory table is read-only here (see insert): a view's find is an
    # aggregation on the view, as mongod runs it.
    if reads_through_pipeline(req, req.db, name):
        return await _find_on_view(req, name)
    spec, first, single_batch = parse_find(body, req.server.params.get("allowDiskUseByDefault"))
    ns = f"{req.db}.{name}"
    db = req.db
    limit = first_batch_limit(first)

    op = CURRENT_OP.get()

    def open_query() -> Any:
        # One hop to the storage thread: resolve, plan, and take the first batch.
        resolved = resolve_namespace(req.storage.catalog, db, name)
        if resolved.timeseries is not None:
            return resolved.timeseries
        coll = _collection(req, db, name)
        prepared = prepare_find(coll, spec)
        if op is not None:  # currentOp and the profiler show the plan and its counters
            op.plan_summary = prepared.plan.summary()
            op.scan_stats = prepared.scan
        source = Lookahead(run_find(coll, prepared, raw_ok=True))
        return (source, *take_batch(source, limit))

    opened = await req.storage.run(open_query)
    if isinstance(opened, TimeseriesTarget):
        return await find_measurements(req, opened, spec, first, single_batch)
    source, batch, exhausted = opened
    cursor = req.cursors.adopt(ns, source, batch, exhausted, single_batch=single_batch,
                               run=req.storage.run, conn_id=req.conn.id)
    return {"cursor": cursor}


async def _find_on_view(req: CommandRequest, name: str) -> dict[str, Any]:
    body = req.body
    check_find_options(body)
    spec, _first, _single = parse_find(body, req.server.params.get("allowDiskUseByDefault"))
    stages = find_pipeline(spec.filter, spec.sort, spec.skip, spec.limit, spec.projection)
    cursor = await find_through_view(req, name, stages, get_int(body, "find", "batchSize"),
                                     let=get_doc(body, "find", "let"),
                                     allow_disk_use=spec.allow_disk_use,
                                     collation=spec.collator)
    return {"cursor": cursor}


async def explain(req: CommandRequest, body: dict[str, Any], verbosity: str) -> dict[str, Any]:
    name = namespace_arg(body, "find")
    if reads_through_pipeline(req, req.db, name) or _is_timeseries(req, name):
        # as mongod: the explain of the aggregation it runs
        check_find_options(body)
        spec, _first, _single = parse_find(body, True)
        stages = find_pipeline(spec.filter, spec.sort, spec.skip, spec.limit, spec.projection)
        agg = {"aggregate": name, "pipeline": stages, "cursor": {}}
        if "let" in body:  # as the client wrote it: the aggregation evaluates it
            agg["let"] = body["let"]
        out = await aggregate.explain(req, agg, verbosity)
        out["command"] = body
        return out
    spec, _first, _single = parse_find(body, True)
    db = req.db

    def run() -> dict[str, Any]:
        coll = _collection(req, db, name)
        return explain_find(coll, prepare_find(coll, spec), verbosity, f"{db}.{name}")

    out = await req.storage.run(run)
    out["command"] = body
    return out



def _is_timeseries(req: CommandRequest, name: str) -> bool:
    return resolve_namespace(req.storage.catalog, req.db, name).timeseries is not None


def _collection(req: CommandRequest, db: str, name: str) -> Any:
    entry = req.storage.catalog.entry(db, name)
    if entry is not None and entry.kind == "view":
        raise MongoError(ErrorCode.CommandNotSupportedOnView, f"{db}.{name} is a view")
    return req.storage.catalog.get_collection(db, name)
