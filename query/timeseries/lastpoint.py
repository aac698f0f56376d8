"""Last point per series on a time-series view, without unpacking every bucket.

A pipeline shaped `[{$match: <meta only>}?, {$sort: {<meta paths>..., <time>: -1}},
{$group: {_id: <meta paths or constants>, f: {$first: ...}, ...}}, ...]` (TSBS's
"last point per host", and MongoDB's own lastpoint rewrite) only ever reads, per group,
the measurements at the group's latest time. Every bucket's `control.max.<time>` is
that bucket's latest time, so one pass over the buckets' control and meta finds, per
series, the buckets holding the series' latest time; only those are unpacked, only the
measurements at that time are kept, and they go through the whole original pipeline
in the original order, which makes the result the one the full scan gives.

`lastpoint_measurements` returns None whenever the shape does not fit; the read planner
then takes another path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, cast

import bson
from bson.raw_bson import RawBSONDocument

from query.match import compile_filter
from storage import native
from storage.bsonutil import CODEC_OPTIONS, decode
from storage.collection import Collection
from storage.timeseries import BucketSpec, TimeseriesOptions, bucket_filter, unpack_bucket
from storage.timeseries.bucket_predicates import meta_only_filter

from .scan import BucketScan, ReadStats

__all__ = ["eligible", "lastpoint_measurements"]

_RAW = CODEC_OPTIONS.with_options(document_class=RawBSONDocument)
_BATCH = 256  # buckets per call into the native core


def lastpoint_measurements(buckets: Collection | None, opts: TimeseriesOptions,
                           stages: list[Any], fields: set[str] | None,
                           stats: ReadStats | None = None
                           ) -> Iterator[dict[str, Any]] | None:
    """The measurements the pipeline can need (see the module docstring), or None."""
    fits = eligible(stages, opts)
    if fits is None:
        return None
    flt, bflt = fits
    if buckets is None:
        return iter(())
    scan = BucketScan(buckets, bflt, stats)
    latest = _latest_buckets(scan, opts.time_field)
    if latest is None:
        return None
    matcher = compile_filter(flt or {})
    spec = BucketSpec(opts.time_field, opts.meta_field,
                      frozenset(fields | {opts.time_field}) if fields is not None
                      else frozenset(), include=fields is not None)
    tf = opts.time_field

    def gen() -> Iterator[dict[str, Any]]:
        for rid, bucket in scan.buckets(only=latest):
            t = latest[rid]
            if stats is not None:
                stats.buckets_unpacked += 1
            for m in unpack_bucket(bucket, spec):
                if m.get(tf) == t and matcher.matches(m):
                    if stats is not None:
                        stats.measurements += 1
                    yield m

    return gen()


def _latest_buckets(scan: BucketScan, time_field: str) -> dict[int, Any] | None:
    """{record id: its control.max time} of the buckets holding each series' latest
    time; None if a bucket's control.max time is not a date."""
    if native.core is not None:
        return _latest_native(scan, time_field)
    best: dict[bytes, tuple[Any, list[int]]] = {}
    for rid, raw in scan.raw():
        doc = bson.decode(raw, _RAW)
        meta = doc.get("meta")
        if scan.filter is not None:
            plain = decode(meta.raw) if isinstance(meta, RawBSONDocument) else meta
            if not scan.matches({"meta": plain} if "meta" in doc else {}):
                continue
        control = doc.get("control")
        cmax = control.get("max") if isinstance(control, RawBSONDocument) else None
        t = cmax.get(time_field) if isinstance(cmax, RawBSONDocument) else None
        if not isinstance(t, bson.DatetimeMS):
            return None
        key = cast(bytes, meta.raw) if isinstance(meta, RawBSONDocument) else \
            bson.encode({"": meta} if "meta" in doc else {})
        cur = best.get(key)
        if cur is None or t > cur[0]:
            best[key] = (t, [rid])
        elif t == cur[0]:
            cur[1].append(rid)
    return {rid: t for t, rids in best.values() for rid in rids}


def _heads(scan: BucketScan, time_field: str
           ) -> Iterator[tuple[int, bytes | None, int | None]]:
    """(record id, `{"m": meta}` or None, control.max time in ms or None) of each
    candidate, read by the native core without decoding the buckets' data."""
    assert native.core is not None
    heads = native.core.bucket_heads
    rids: list[int] = []
    raws: list[bytes] = []
    for rid, raw in scan.raw():
        rids.append(rid)
        raws.append(raw)
        if len(raws) == _BATCH:
            for r, (m, t) in zip(rids, heads(raws, time_field)):
                yield r, m, t
            rids, raws = [], []
    if raws:
        for r, (m, t) in zip(rids, heads(raws, time_field)):
            yield r, m, t


def _latest_native(scan: BucketScan, time_field: str) -> dict[int, Any] | None:
    best: dict[bytes | None, tuple[int, list[int]]] = {}
    passes: dict[bytes | None, bool] = {}
    try:
        for rid, meta, t in _heads(scan, time_field):
            if scan.filter is not None:
                ok = passes.get(meta)
                if ok is None:
                    ok = passes[meta] = scan.matches(
                        {"meta": decode(meta)["m"]} if meta is not None else {})
                if not ok:
                    continue
            if t is None:
                return None
            cur = best.get(meta)
            if cur is None or t > cur[0]:
                best[meta] = (t, [rid])
            elif t == cur[0]:
                cur[1].append(rid)
    except native.Declined:
        return None
    return {rid: bson.DatetimeMS(t) for t, rids in best.values() for rid in rids}


def eligible(stages: list[Any], opts: TimeseriesOptions
             ) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
    """(measurement filter, bucket filter) when `stages` has the last-point shape on a
    collection with these options, else None."""
    if opts.meta_field is None:
        return None
    flt = _shape(stages, opts.time_field, opts.meta_field)
    if flt is False:
        return None
    bflt = None
    if flt:
        bflt = meta_only_filter(flt, opts)
        if bflt is None or bflt != bucket_filter(flt, opts):
            return None
    return flt or None, bflt


def _shape(stages: list[Any], time_field: str, meta_field: str
           ) -> dict[str, Any] | Literal[False] | None:
    """The leading meta-only $match filter ({} or None when absent) if `stages` has the
    last-point shape, else False."""
    i = 0
    flt: dict[str, Any] | None = None
    if stages and _only(stages[0]) == "$match":
        flt = stages[0]["$match"]
        if not isinstance(flt, dict):
            return False
        i = 1
    if len(stages) < i + 2 or _only(stages[i]) != "$sort" or _only(stages[i + 1]) != "$group":
        return False
    sort, group = stages[i]["$sort"], stages[i + 1]["$group"]
    if not isinstance(sort, dict) or len(sort) < 2 or not isinstance(group, dict):
        return False
    keys = list(sort.items())
    if keys[-1] != (time_field, -1) or type(keys[-1][1]) is not int:
        return False
    for k, d in keys[:-1]:
        if not _is_meta_path(k, meta_field) or type(d) is not int or d not in (1, -1):
            return False
    if "_id" not in group or not _meta_only_expr(group["_id"], meta_field):
        return False
    for k, acc in group.items():
        if k == "_id":
            continue
        if not isinstance(acc, dict) or list(acc) != ["$first"]:
            return False
    return flt


def _only(stage: Any) -> str | None:
    return next(iter(stage)) if isinstance(stage, dict) and len(stage) == 1 else None


def _is_meta_path(path: str, meta_field: str) -> bool:
    return path == meta_field or path.startswith(meta_field + ".")


def _meta_only_expr(e: Any, meta_field: str) -> bool:
    """A group key made of `$<meta>` paths, plain objects of them, and constants."""
    if isinstance(e, str):
        return not e.startswith("$") or (not e.startswith("$$")
                                         and _is_meta_path(e[1:], meta_field))
    if isinstance(e, dict):
        return all(not k.startswith("$") and _meta_only_expr(v, meta_field)
                   for k, v in e.items())
    return not isinstance(e, list)
