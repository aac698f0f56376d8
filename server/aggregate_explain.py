"""explain of an aggregation: the stages as mongod shows them and, with an execution
verbosity, the counters of running the pipeline as it runs for the command.

The explained pipeline is the one that runs: a view's pipeline first, over the namespace
underneath; its leading `$match` pushed into the `$cursor` stage (the query planner's
plan on the collection, or on a time-series collection the bucket-level filter's plan
on the buckets collection followed by `$_internalUnpackBucket` with the measurement
filter as its `eventFilter`). With `executionStats` the pipeline runs to the end; the
`$cursor` stage reports the keys and documents examined, every stage its `nReturned`.
A time-series read answered by a fused path (last point, columnar `$group`) says so in
`$_internalUnpackBucket.bucketdPath`; the stages the path folded report no count.
`bucketdBucketsSkipped` counts the buckets skipped by their control.min/max. A `$group`
folded by the native core's block processing (`bucketdPath: "blockGroup"`) names that
stage, `block_group`, in `bucketdBlockProcessing` with its counters.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from query.context import PipelineContext
from query.dependencies import pipeline_fields
from query.executor import FindSpec, PreparedFind, prepare_find, run_find
from query.explain import EXEC_VERBOSITIES, find_stages, keys_examined, nest, query_planner
from query.pipeline import compile_pipeline, resolve_let_variables
from query.stages.base import Env
from query.timeseries.read_plan import pipeline_read
from query.timeseries.scan import ReadStats
from storage.collation import COLLECTION_DEFAULT, OperationCollation
from storage.timeseries import bucket_filter

from .aggregation import _uses_variables, pipeline_collator
from .namespaces import TimeseriesTarget, resolve_namespace
from .parsing.pipeline import split_leading_match
from .timeseries.service import timeseries_service
from .views.definitions import resolve_view

if TYPE_CHECKING:
    from .context import CommandRequest

__all__ = ["explain_pipeline"]


class _Counted:
    """An iterator that counts what passes through it."""

    def __init__(self, it: Iterator[Any]) -> None:
        self._it = it
        self.n = 0

    def __iter__(self) -> _Counted:
        return self

    def __next__(self) -> Any:
        item = next(self._it)
        self.n += 1
        return item


def explain_pipeline(req: CommandRequest, coll: str | None, pipeline: list[Any],
                     ctx: PipelineContext, let: dict[str, Any] | None, verbosity: str,
                     collation: OperationCollation = COLLECTION_DEFAULT) -> dict[str, Any]:
    """The `stages` explain of `pipeline` on `coll` under `collation` (storage thread)."""
    ctx.variables = resolve_let_variables(let, ctx)
    run = verbosity in EXEC_VERBOSITIES
    source, full = coll, list(pipeline)
    view = resolve_view(req.storage.catalog, req.db, coll) if coll is not None else None
    ctx.collator = pipeline_collator(req, coll, view, collation)
    if view is not None:  # explained as mongod runs it: on the namespace underneath
        source, full = view.source, [*view.pipeline, *pipeline]
    compiled = compile_pipeline(full, ctx)
    if source is None or compiled.starts_with_source:
        return _without_cursor(compiled, ctx, run)
    flt, rest = split_leading_match(full, ctx.variables)
    if flt is not None and _uses_variables(flt):
        flt, rest = None, full
    ts = resolve_namespace(req.storage.catalog, req.db, source).timeseries
    if ts is not None:
        return _timeseries(req, ts, full, flt, rest, ctx, run)
    return _collection(req, f"{req.db}.{source}",
                       req.storage.catalog.get_collection(req.db, source), flt, rest, ctx, run)


def _without_cursor(compiled: Any, ctx: PipelineContext, run: bool) -> dict[str, Any]:
    stages = compiled.explain()
    if run:
        rest, millis = _run_counted(compiled.stages, iter(()), ctx)
        stages = _with_counts(stages, rest, millis)
    return {"explainVersion": "1", "stages": stages}


def _counted_chain(stages: list[Any], source: Iterator[Any], ctx: PipelineContext
                   ) -> tuple[Iterator[Any], list[_Counted]]:
    """`stages` over `source`, lazily, each stage's output counted."""
    env = Env(ctx, compile_pipeline([], ctx).base_variables())
    counted: list[_Counted] = []
    it: Iterator[Any] = source
    for st in stages:
        c = _Counted(st.run(it, env))
        counted.append(c)
        it = c
    return it, counted


def _drain(it: Iterator[Any], started: float) -> int:
    """Run `it` to the end; the milliseconds since `started`."""
    for _ in it:
        pass
    return int((time.perf_counter() - started) * 1000)


def _run_counted(stages: list[Any], source: Iterator[Any], ctx: PipelineContext
                 ) -> tuple[list[_Counted], int]:
    """Run `stages` over `source` to the end; each stage's output counted."""
    started = time.perf_counter()
    it, counted = _counted_chain(stages, source, ctx)
    return counted, _drain(it, started)


def _with_counts(explained: list[dict[str, Any]], counted: list[_Counted] | None,
                 millis: int) -> list[dict[str, Any]]:
    out = []
    for i, st in enumerate(explained):
        st = dict(st)
        if counted is not None:
            st["nReturned"] = counted[i].n
        st["executionTimeMillisEstimate"] = millis
        out.append(st)
    return out


def _cursor_stage(ns: str, prepared: PreparedFind, run: bool, millis: int,
                  n_returned: int) -> dict[str, Any]:
    winning = nest(find_stages(prepared, False), None)
    cursor: dict[str, Any] = {"queryPlanner": query_planner(ns, prepared.spec.filter, winning)}
    if run:
        stages = find_stages(prepared, True)
        cursor["executionStats"] = {
            "executionSuccess": True, "nReturned": n_returned, "executionTimeMillis": millis,
            "totalKeysExamined": keys_examined(prepared),
            "totalDocsExamined": prepared.scan.docs_examined,
            "executionStages": nest(stages, millis),
        }
    stage: dict[str, Any] = {"$cursor": cursor}
    if run:
        stage.update({"nReturned": n_returned, "executionTimeMillisEstimate": millis})
    return stage


def _collection(req: CommandRequest, ns: str, coll: Any, flt: dict[str, Any] | None,
                rest: list[Any], ctx: PipelineContext, run: bool) -> dict[str, Any]:
    prepared = prepare_find(coll, FindSpec(filter=flt, let=ctx.variables or None,
                                           collator=ctx.collator))
    compiled = compile_pipeline(rest, ctx)
    counted: list[_Counted] | None = None
    millis = 0
    if run:
        counted, millis = _run_counted(compiled.stages, run_find(coll, prepared), ctx)
    cursor = _cursor_stage(ns, prepared, run, millis, prepared.counts.returned)
    rest_explained = compiled.explain()
    if run:
        rest_explained = _with_counts(rest_explained, counted, millis)
    return {"explainVersion": "1", "stages": [cursor, *rest_explained]}


def _timeseries(req: CommandRequest, target: TimeseriesTarget, full: list[Any],
                flt: dict[str, Any] | None, rest: list[Any], ctx: PipelineContext,
                run: bool) -> dict[str, Any]:
    stats = ReadStats()
    read = dataclasses.replace(timeseries_service(req).reader(target), stats=stats)
    opts = target.options
    # shown even before the buckets collection exists (with no _id bounds then)
    bflt = bucket_filter(flt, opts, id_bounds=read.buckets is not None
                         and read.id_bounds_allowed()) if flt else None
    prepared = prepare_find(read.buckets, FindSpec(filter=bflt))
    compiled_rest = compile_pipeline(rest, ctx)
    counted: list[_Counted] | None = None
    millis = 0
    if run:
        fields = pipeline_fields(full)
        wanted = frozenset(fields) if fields is not None else None
        general_counted: list[_Counted] = []

        def general() -> Iterator[Any]:
            nonlocal general_counted
            source = read.measurements(flt, wanted, ctx.variables or None, ctx.collator)
            it, general_counted = _counted_chain(compiled_rest.stages, source, ctx)
            return it

        started = time.perf_counter()
        millis = _drain(pipeline_read(read, full, ctx, fields,
                                      whole=compile_pipeline(full, ctx).run,
                                      general=general), started)
        counted = general_counted if stats.path == "general" else None
    unpack: dict[str, Any] = {
        "exclude": [], "timeField": opts.time_field,
        **({"metaField": opts.meta_field} if opts.meta_field else {}),
        "bucketMaxSpanSeconds": opts.bucket_max_span_seconds,
        "assumeNoMixedSchemaData": True,
    }
    if flt:
        unpack["eventFilter"] = flt
    if run:
        unpack["bucketdPath"] = stats.path
    unpack_stage: dict[str, Any] = {"$_internalUnpackBucket": unpack}
    if run:
        unpack_stage.update({"nReturned": stats.measurements, "nBucketsUnpacked":
                             stats.buckets_unpacked,
                             "bucketdBucketsSkipped": stats.buckets_skipped,
                             "executionTimeMillisEstimate": millis})
        if stats.path == "blockGroup":
            unpack_stage["bucketdBlockProcessing"] = {
                "stage": "block_group",
                "bucketsScanned": stats.buckets_scanned,
                "bucketsSkippedByControl": stats.buckets_skipped,
                "columnsDecoded": stats.columns_decoded,
                "rowsPassingFilter": stats.measurements,
            }
    # the read's bucket scan is the cursor's: the buckets the bucket filter passed are
    # the documents it returned
    prepared.scan = stats.scan
    prepared.counts.matched = prepared.counts.returned = stats.buckets_matched
    cursor = _cursor_stage(target.buckets_ns, prepared, run, millis, stats.buckets_matched)
    rest_explained = compiled_rest.explain()
    if run:
        rest_explained = _with_counts(rest_explained, counted, millis)
    return {"explainVersion": "1", "stages": [cursor, unpack_stage, *rest_explained]}
