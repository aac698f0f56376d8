"""explain of update, delete and findAndModify: the plan of the first statement, and
with an execution verbosity what it would do. Nothing is written.

On an ordinary collection the find's plan sits under an `UPDATE` or `DELETE` stage
(`query.explain.explain_modify`). On a time-series collection, as mongod 8.0: a
`TS_MODIFY` stage over the buckets collection's plan, with the bucket-level filter
(`bucketFilter`) and the measurement filter re-applied to each unpacked measurement
(`residualFilter`), and the buckets unpacked and measurements matched when run.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from query.executor import FindSpec, UpdateStatement, compile_statement_update, prepare_find
from query.explain import EXEC_VERBOSITIES, Layer, explain_modify, find_stages, nest, query_planner
from query.sort import compile_sort
from query.timeseries.scan import ReadStats
from query.update import Update
from query.variables import CommandVariables

from .namespaces import TimeseriesTarget, resolve_namespace
from .parsing.write_statements import parse_delete_statement, parse_update_statement
from .timeseries.service import timeseries_service

if TYPE_CHECKING:
    from .context import CommandRequest

__all__ = ["explain_write"]


@dataclasses.dataclass(frozen=True, slots=True)
class _Write:
    """The first statement of the command, as a selection and an optional update."""

    q: dict[str, Any]
    update: Update | None
    multi: bool
    sort: dict[str, Any] | None
    upsert: bool
    let: dict[str, Any] | None


def _parse(command: str, body: dict[str, Any], variables: CommandVariables) -> _Write:
    if command == "update":
        stmt = parse_update_statement((body.get("updates") or [{}])[0], variables=variables)
        return _Write(stmt.q, compile_statement_update(stmt), stmt.multi, stmt.sort,
                      stmt.upsert, variables.values())
    if command == "delete":
        q, limit_one, _hint = parse_delete_statement((body.get("deletes") or [{}])[0])
        return _Write(q, None, not limit_one, None, False, variables.values())
    # findAndModify
    q = body.get("query") or {}
    sort = body.get("sort") or None
    if body.get("remove"):
        return _Write(q, None, False, sort, False, variables.values())
    stmt = UpdateStatement(q=q, u=body.get("update") or {}, upsert=bool(body.get("upsert")),
                           array_filters=body.get("arrayFilters"), sort=sort,
                           variables=variables)
    return _Write(q, compile_statement_update(stmt), False, sort, stmt.upsert,
                  variables.values())


def explain_write(req: CommandRequest, command: str, body: dict[str, Any],
                  variables: CommandVariables, verbosity: str) -> dict[str, Any]:
    """The explain of an update, delete or findAndModify command with its `let`
    `variables` (storage thread)."""
    name = body[command]
    write = _parse(command, body, variables)
    catalog = req.storage.catalog
    ts = resolve_namespace(catalog, req.db, name).timeseries
    if ts is not None:
        return _timeseries(req, ts, write, verbosity)
    coll = catalog.get_collection(req.db, name)
    prepared = prepare_find(coll, FindSpec(filter=write.q, let=write.let))
    return explain_modify(coll, prepared, verbosity, f"{req.db}.{name}", update=write.update,
                          multi=write.multi, sort=write.sort, upsert=write.upsert)


def _timeseries(req: CommandRequest, target: TimeseriesTarget, write: _Write,
                verbosity: str) -> dict[str, Any]:
    stats = ReadStats()
    read = dataclasses.replace(timeseries_service(req).reader(target), stats=stats)
    bflt = read.bucket_filter(write.q) or {}
    prepared = prepare_find(read.buckets, FindSpec(filter=bflt))
    run = verbosity in EXEC_VERBOSITIES
    matched = modified = 0
    millis = 0
    if run:
        started = time.perf_counter()
        chosen = []
        for m in read.measurements(write.q, None, write.let):
            chosen.append(m)
            if not write.multi and not write.sort:
                break
        if write.sort and not write.multi:
            chosen = sorted(chosen, key=compile_sort(write.sort))[:1]
        matched = len(chosen)
        if write.update is not None:
            modified = sum(1 for m in chosen if write.update.apply(m)[1])
        millis = int((time.perf_counter() - started) * 1000)
        prepared.scan = stats.scan
        prepared.counts.matched = prepared.counts.returned = stats.buckets_matched
    op = ("update" if write.update is not None else "delete") + \
        ("Many" if write.multi else "One")

    def stages(with_run: bool) -> list[Layer]:
        layers = find_stages(prepared, with_run)
        node: dict[str, Any] = {"stage": "TS_MODIFY", "opType": op, "bucketFilter": bflt,
                                "residualFilter": write.q}
        if with_run:
            node["nBucketsUnpacked"] = stats.buckets_unpacked
            node["nMeasurementsMatched"] = matched
            if write.update is not None:
                node["nMeasurementsUpdated"] = modified
                node["nMeasurementsUpserted"] = int(write.upsert and matched == 0)
            else:
                node["nMeasurementsDeleted"] = matched
        layers.append(Layer(node, 0, stats.buckets_matched))
        return layers

    out: dict[str, Any] = {
        "explainVersion": "1",
        "queryPlanner": query_planner(target.buckets_ns, bflt, nest(stages(False), None)),
    }
    if run:
        out["executionStats"] = {
            "executionSuccess": True, "nReturned": 0, "executionTimeMillis": millis,
            "totalKeysExamined": stats.scan.keys_examined,
            "totalDocsExamined": stats.scan.docs_examined,
            "executionStages": nest(stages(True), millis),
        }
    return out
