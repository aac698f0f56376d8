"""Reads of measurements: find, count, distinct, explain, and the pipeline's source.

Each read turns the command's `TimeseriesTarget` into a `TimeseriesRead` (the buckets
collection, options, `_id`-bounds decision and the service's read-path switches) and
leaves the choice of path to the read planner (`query.timeseries.read_plan`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from query.context import PipelineContext
from query.executor import FindSpec, distinct_of
from query.projection import compile_projection
from query.sort import compile_sort
from query.timeseries.read_plan import pipeline_read
from storage.collation import (
    COLLECTION_DEFAULT,
    Collator,
    OperationCollation,
)

from ..cursors import Lookahead, first_batch_limit, take_batch
from ..parsing.collation import timeseries_collator
from .service import timeseries_service

if TYPE_CHECKING:
    from ..context import CommandRequest
    from ..namespaces import TimeseriesTarget

__all__ = ["count_measurements", "distinct_measurements",
           "find_measurements", "measurement_source", "timeseries_pipeline"]


def measurement_source(req: CommandRequest, target: TimeseriesTarget,
                       flt: dict[str, Any] | None, fields: frozenset[str] | None = None,
                       variables: dict[str, Any] | None = None,
                       collator: Collator | None = None) -> Iterator[dict[str, Any]]:
    """Measurements of `target` matching `flt` under `collator` (storage thread, lazily);
    only `fields` are decoded when given; `variables` are the command's `let` values."""
    return timeseries_service(req).reader(target).measurements(flt, fields, variables,
                                                               collator)


def timeseries_pipeline(req: CommandRequest, target: TimeseriesTarget, stages: list[Any],
                        ctx: PipelineContext, fields: set[str] | None, *,
                        whole: Callable[[Iterator[dict[str, Any]]], Iterator[Any]],
                        general: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """The results of a pipeline on `target` by the path the read planner picks."""
    read = timeseries_service(req).reader(target)
    return pipeline_read(read, stages, ctx, fields, whole=whole, general=general)


async def find_measurements(req: CommandRequest, target: TimeseriesTarget, spec: FindSpec,
                            first: int | None, single_batch: bool) -> dict[str, Any]:
    projection = compile_projection(spec.projection) if spec.projection else None
    collator = timeseries_collator(spec.collator, target.entry.options)
    sort = compile_sort(spec.sort, collator) if spec.sort else None
    fields = None
    if projection is not None and projection.is_inclusion and spec.projection and \
            _simple_projection(spec.projection):
        proj_fields = {k for k in spec.projection if k != "_id"}
        if spec.projection.get("_id", 1):
            proj_fields.add("_id")
        sort_fields = set(spec.sort or {})
        fields = frozenset(n.split(".", 1)[0] for n in proj_fields | sort_fields)

    def run() -> tuple[Iterator[Any], list[Any], bool]:
        source: Iterator[Any] = measurement_source(req, target, spec.filter, fields,
                                                   spec.let, collator)
        if sort is not None:
            keep = spec.skip + spec.limit if spec.limit else None
            if keep is not None:
                source = iter(heapq.nsmallest(keep, source, key=sort))
            else:
                source = iter(sorted(source, key=sort))
        if spec.skip:
            source = itertools.islice(source, spec.skip, None)
        if spec.limit:
            source = itertools.islice(source, spec.limit)
        if projection is not None:
            source = (projection.apply(d) for d in source)
        source = Lookahead(source)
        return (source, *take_batch(source, first_batch_limit(first)))

    source, batch, exhausted = await req.storage.run(run)
    cursor = req.cursors.adopt(target.ns, source, batch, exhausted, single_batch=single_batch,
                               run=req.storage.run, conn_id=req.conn.id)
    return {"cursor": cursor}


def _simple_projection(p: Mapping[str, Any]) -> bool:
    return all(isinstance(v, bool | int | float) for v in p.values())


async def count_measurements(req: CommandRequest, target: TimeseriesTarget,
                             query: dict[str, Any] | None, skip: int, limit: int,
                             collation: OperationCollation = COLLECTION_DEFAULT) -> int:
    collator = timeseries_collator(collation, target.entry.options)

    def run() -> int:
        n = sum(1 for _ in measurement_source(req, target, query,
                                              frozenset() if not query else None,
                                              collator=collator))
        n = max(0, n - skip)
        return min(n, limit) if limit else n

    return await req.storage.run(run)


async def distinct_measurements(req: CommandRequest, target: TimeseriesTarget, key: str,
                                query: dict[str, Any] | None,
                                collation: OperationCollation = COLLECTION_DEFAULT
                                ) -> list[Any]:
    collator = timeseries_collator(collation, target.entry.options)

    def run() -> list[Any]:
        return distinct_of(measurement_source(req, target, query,
                                              frozenset({key.split(".")[0]}),
                                              collator=collator), key, collator)

    return await req.storage.run(run)
