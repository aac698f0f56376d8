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

import struct
from collections.abc import Iterable, Iterator
from typing import Any, Literal, cast

import bson
from bson.raw_bson import RawBSONDocument

from query.match import compile_filter
from storage import native
from storage.bsonutil import CODEC_OPTIONS, decode
from storage.collection import Collection
from storage.keystring import component_spans, encode_value
from storage.timeseries import BucketSpec, TimeseriesOptions, bucket_filter, unpack_bucket
from storage.timeseries.bucket_predicates import meta_only_filter
from storage.timeseries.metadata import is_meta_path

from .scan import BucketScan, ReadStats

__all__ = ["eligible", "lastpoint_measurements"]

_RAW = CODEC_OPTIONS.with_options(document_class=RawBSONDocument)
_BATCH = 256  # buckets per call into the native core
_DATE_TAG = encode_value(bson.DatetimeMS(0))[0]


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
    latest = None if bflt is not None else _latest_from_index(buckets, opts.time_field, stats)
    from_index = latest is not None
    if latest is None:
        latest = _latest_buckets(scan, opts.time_field)
    if latest is None:
        return None
    matcher = compile_filter(flt or {})
    spec = BucketSpec(opts.time_field, opts.meta_field,
                      frozenset(fields | {opts.time_field}) if fields is not None
                      else frozenset(), include=fields is not None)
    tf = opts.time_field

    def gen() -> Iterator[dict[str, Any]]:
        chosen = _fetch(buckets, latest, stats) if from_index else scan.buckets(only=latest)
        for rid, bucket in chosen:
            t = latest[rid]
            if stats is not None:
                stats.buckets_unpacked += 1
            picked = _at_time(bucket, spec, t) if type(bucket) is bytes else None
            at_t: Iterable[dict[str, Any]] = picked if picked is not None else (
                m for m in unpack_bucket(bucket, spec) if m.get(tf) == t)
            for m in at_t:
                if matcher.matches(m):
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


def _latest_from_index(buckets: Collection, time_field: str, stats: ReadStats | None
                       ) -> dict[int, Any] | None:
    """`_latest_buckets` without a filter, from the keys of the buckets' default index
    `{meta, control.min.<time>, control.max.<time>}` alone (no bucket is read): equal
    index keys of meta are BSON-equal metas, which every `$group` key puts in one group.
    None when no such index holds every bucket, or a control.max time is not a date."""
    ix = next((e for e in buckets.entry.indexes
               if e.spec.fields == ("meta", f"control.min.{time_field}",
                                    f"control.max.{time_field}")
               and e.spec.directions[1:] == (1, 1) and not e.multikey and not e.spec.sparse
               and e.spec.partial_filter is None and e.spec.collator is None), None)
    if ix is None:
        return None
    best: dict[bytes, tuple[int, list[int]]] = {}
    directions = ix.spec.directions
    verified: set[bytes] = set()
    for rid, key in buckets.index_entries(ix.spec.name, stats=stats.scan if stats else None):
        # two dates (9 bytes each) end the key; parsing the meta component once per
        # distinct meta proves the split (the encodings are prefix-free)
        if len(key) < 18 or key[-18] != _DATE_TAG or key[-9] != _DATE_TAG:
            return None
        meta = key[:-18]
        if meta not in verified:
            if component_spans(key, directions)[0] != meta:
                return None
            verified.add(meta)
        t = int.from_bytes(key[-8:], "big") - 2**63
        cur = best.get(meta)
        if cur is None or t > cur[0]:
            best[meta] = (t, [rid])
        elif t == cur[0]:
            cur[1].append(rid)
    return {rid: bson.DatetimeMS(t) for t, rids in best.values() for rid in rids}


def _fetch(buckets: Collection, latest: dict[int, Any], stats: ReadStats | None
           ) -> Iterator[tuple[int, bytes]]:
    """The stored buckets `latest` names, in record order (a collection scan's)."""
    rids = sorted(latest)
    for rid, raw in zip(rids, buckets.get_many(rids)):
        if raw is None:
            continue
        if stats is not None:
            stats.scan.docs_examined += 1
            stats.buckets_matched += 1
        yield rid, raw


def _at_time(raw: bytes, spec: BucketSpec, t: Any) -> list[dict[str, Any]] | None:
    """The measurements of a stored bucket at time `t`, as `unpack_bucket` gives them,
    from the native core's decoding (no other row becomes a Python object); None when
    the core declines the bucket (then `unpack_bucket` does it)."""
    if native.core is None:
        return None
    try:
        rows = native.core.rows_at_time(raw, spec.time_field, int(t))
        meta_doc = native.core.bucket_metas([raw])[0] if rows else None
    except native.Declined:
        return None
    out = []
    keep_meta = spec.keeps_meta and meta_doc is not None
    meta = decode(meta_doc)["m"] if meta_doc is not None and keep_meta else None
    for row in rows:
        m: dict[str, Any] = {}
        if spec.keeps_time:
            m[spec.time_field] = t
        if keep_meta:
            m[spec.meta_field] = meta  # type: ignore[index]
        for name, ty, value in row:
            if spec.keeps(name):
                m[name] = _element(ty, value)
        out.append(m)
    return out


def _element(ty: int, value: bytes) -> Any:
    """A BSON value given as its type and bytes, decoded as the storage decodes it."""
    return decode(struct.pack("<iB", 8 + len(value), ty) + b"v\x00" + value + b"\x00")["v"]


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
        if not is_meta_path(k, meta_field) or type(d) is not int or d not in (1, -1):
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



def _meta_only_expr(e: Any, meta_field: str) -> bool:
    """A group key made of `$<meta>` paths, plain objects of them, and constants."""
    if isinstance(e, str):
        return not e.startswith("$") or (not e.startswith("$$")
                                         and is_meta_path(e[1:], meta_field))
    if isinstance(e, dict):
        return all(not k.startswith("$") and _meta_only_expr(v, meta_field)
                   for k, v in e.items())
    return not isinstance(e, list)
