"""The read planner of time-series collections: which path a read takes.

A read of a time-series view takes one of four paths, decided here and nowhere else:

- **last point**: `[$match <meta>]? $sort {meta..., time: -1} $group {$first...}` unpacks
  only the buckets holding each series' latest time (`lastpoint`);
- **columnar group**: `[$match]? $group ...` with simple keys and accumulators is folded
  by the native core from the stored buckets' bytes (`block_group`, block processing),
  else from numpy-decoded columns (`columnar_group`), falling back to the general path
  when the data turn out unsupported;
- **row pre-filter**: a filter of numeric comparisons of measurement fields picks rows
  on the bucket's columns before any document is built (`measurements`);
- **general**: unpack the needed columns of every candidate bucket and re-apply the
  filter (`measurements`).

Every path reads the buckets through the one `BucketScan`. `TimeseriesReadPaths` holds
the switches that turn a fast path off (tests compare the fast paths with the general
one); the server keeps one on its time-series service.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from query.context import PipelineContext
from storage.collation import Collator
from storage.collection import Collection
from storage.timeseries import TimeseriesOptions, bucket_filter

from .columnar_group import columnar_group
from .lastpoint import lastpoint_measurements
from .measurements import unpacked_measurements
from .scan import ReadStats

__all__ = ["TimeseriesRead", "TimeseriesReadPaths", "pipeline_read"]


@dataclass(frozen=True, slots=True)
class TimeseriesReadPaths:
    """Which fast paths a time-series read may take."""

    lastpoint: bool = True
    columnar_group: bool = True
    block_processing: bool = True  # the columnar $group folded by the native core
    row_filter: bool = True
    # Consecutive buckets the row pre-filter may decline before a scan stops trying it
    # (each decline decoded columns the full unpacking decodes again).
    row_filter_declines: int = 8


@dataclass(frozen=True, slots=True)
class TimeseriesRead:
    """One time-series collection as a read sees it."""

    buckets: Collection | None
    options: TimeseriesOptions
    # May time predicates bound bucket `_id`s? Asked only when a filter needs it.
    id_bounds_allowed: Callable[[], bool]
    paths: TimeseriesReadPaths = field(default_factory=TimeseriesReadPaths)
    stats: ReadStats | None = None  # explain's counters, when explain runs the read

    def bucket_filter(self, flt: dict[str, Any] | None) -> dict[str, Any] | None:
        """The bucket-level filter of a measurement filter (None: every bucket)."""
        if not flt or self.buckets is None:
            return None
        return bucket_filter(flt, self.options, id_bounds=self.id_bounds_allowed())

    def measurements(self, flt: dict[str, Any] | None,
                     fields: frozenset[str] | None = None,
                     variables: dict[str, Any] | None = None,
                     collator: Collator | None = None) -> Iterator[dict[str, Any]]:
        """The measurements matching `flt` (whose `$expr` may read `variables`) under
        `collator` (None: simple): the row pre-filter or the general path."""
        if self.buckets is None:
            return iter(())
        return unpacked_measurements(
            self.buckets, self.options, flt, self.bucket_filter(flt), fields,
            row_filter_declines=self.paths.row_filter_declines if self.paths.row_filter
            else 0, variables=variables, stats=self.stats, collator=collator)


def pipeline_read(read: TimeseriesRead, stages: list[Any], ctx: PipelineContext,
                  fields: set[str] | None, *,
                  whole: Callable[[Iterator[dict[str, Any]]], Iterator[Any]],
                  general: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """The results of `stages` on the collection: `whole(measurements)` runs the whole
    pipeline on a source, `general()` is the general path's result."""
    if ctx.collator is not None:  # the fast paths compare strings simply
        return general()
    stats = read.stats
    if read.paths.lastpoint:
        last = lastpoint_measurements(read.buckets, read.options, stages, fields, stats)
        if last is not None:
            if stats is not None:
                stats.path = "lastpoint"
            return whole(last)
    it = general()
    if read.paths.columnar_group:
        fast = columnar_group(read.buckets, read.options, read.bucket_filter, stages, ctx, it,
                              stats, block_processing=read.paths.block_processing)
        if fast is not None:
            return fast
    return it
