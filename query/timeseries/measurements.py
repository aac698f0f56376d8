"""Measurements of a time-series collection: the general path and the row pre-filter.

The candidate buckets of the bucket-level filter are unpacked, decoding only the
columns the read needs, and the whole filter is re-applied to each measurement (its
top-level conditions on the meta field once a bucket: they read only the bucket's meta
value, which every measurement of it carries). When the filter is made of numeric
comparisons of measurement fields and date comparisons of the time field
(`storage.timeseries.row_filter`), it is first evaluated on the bucket's numpy columns and
only the rows it keeps become documents; when it evaluates every condition but the meta
field's, they are not matched again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from query.match import compile_filter
from storage.collation import Collator
from storage.collection import Collection
from storage.timeseries import (
    BucketSpec,
    TimeseriesOptions,
    compile_control_filter,
    unpack_bucket,
)
from storage.timeseries.constants import DATA, META
from storage.timeseries.metadata import is_meta_path
from storage.timeseries.row_filter import compile_row_filter, select_measurements

from .scan import BucketScan, ReadStats

__all__ = ["unpacked_measurements"]


def unpacked_measurements(buckets: Collection, opts: TimeseriesOptions,
                          flt: dict[str, Any] | None, bflt: dict[str, Any] | None,
                          fields: frozenset[str] | None, *, row_filter_declines: int,
                          variables: dict[str, Any] | None = None,
                          collator: Collator | None = None,
                          stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Measurements matching `flt` (lazily), from the buckets matching `bflt`; the
    filter's `$expr` may read `variables` (the command's `let`).

    Only the fields needed are decoded when `fields` is given. The row pre-filter is
    tried until it declines `row_filter_declines` buckets in a row (0: never tried); it
    is not tried under a collation (`collator`, None: simple), which both filters use.
    `stats` counts the work for explain.
    """
    matcher = compile_filter(flt or {}, variables=variables, collator=collator)
    if collator is not None:
        row_filter_declines = 0
    if fields is not None:
        if matcher.has_expr:
            fields = None  # $expr may read any field
        else:
            fields = frozenset(fields | {f.split(".", 1)[0] for f in matcher.fields()})
    spec = BucketSpec(opts.time_field, opts.meta_field, fields or frozenset(),
                      include=fields is not None)
    scan = BucketScan(buckets, bflt, stats, collator,
                      compile_control_filter(flt, opts, simple_strings=collator is None))
    # the conditions on the meta field hold for all of a bucket's measurements or none:
    # tested once a bucket, the rest once a measurement
    mf = opts.meta_field or ""
    meta_part, rest = _split_meta(flt, opts.meta_field)
    meta_matcher = rest_matcher = None
    if meta_part:
        meta_matcher = compile_filter(meta_part, variables=variables, collator=collator)
        rest_matcher = compile_filter(rest, variables=variables, collator=collator)
    trivial = matcher.is_trivial
    rows = compile_row_filter(flt, opts.time_field, opts.meta_field) \
        if flt and row_filter_declines else None

    def gen() -> Iterator[dict[str, Any]]:
        row_filter, declined = rows, 0
        for _rid, bucket in scan.buckets():
            row_matcher, row_trivial = matcher, trivial
            meta_done = meta_matcher is None  # no meta condition left for the rows
            if meta_matcher is not None and rest_matcher is not None:
                data = bucket.get(DATA)
                if isinstance(data, Mapping) and mf not in data:  # no column hides the meta
                    if not meta_matcher.matches({mf: bucket[META]} if META in bucket else {}):
                        continue
                    row_matcher, row_trivial = rest_matcher, rest_matcher.is_trivial
                    meta_done = True
            selected = None
            if row_filter is not None:
                selected = select_measurements(bucket, spec, row_filter)
                if selected is not None and meta_done and row_filter.exact:
                    row_trivial = True  # its rows are exactly those the rest selects
                declined = 0 if selected is not None else declined + 1
                if declined == row_filter_declines:
                    row_filter = None  # buckets of this collection cannot take it: stop trying
            if stats is not None:
                stats.buckets_unpacked += 1
            for m in selected if selected is not None else unpack_bucket(bucket, spec):
                if row_trivial or row_matcher.matches(m):
                    if stats is not None:
                        stats.measurements += 1
                    yield m

    return gen()


def _split_meta(flt: dict[str, Any] | None, meta_field: str | None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the filter's top-level conditions on the meta field or its subfields, the others);
    the first is empty when it has none."""
    meta: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for k, v in (flt or {}).items():
        (meta if is_meta_path(k, meta_field) else rest)[k] = v
    return meta, rest
