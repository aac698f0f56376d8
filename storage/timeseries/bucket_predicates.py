"""Measurement-level filters -> bucket-level filters that skip buckets without decoding.

`bucket_filter(filter, options)` returns a filter on bucket documents that every bucket
holding a matching measurement satisfies (it may let through buckets without one; the
exact filter is applied again after unpacking), or None when nothing can be said.

Translations (MongoDB's BucketSpec::createPredicatesOnBucketLevelField), with T a date
and S = bucketMaxSpanSeconds: every measurement time t of a bucket satisfies
control.min <= t <= control.max and t - control.min < S, hence

    t == T   ->  min <= T, min >= T - S, max >= T, max <= T + S
    t >  T   ->  max >  T, min >  T - S
    t >= T   ->  max >= T, min >= T - S
    t <  T   ->  min <  T, max <  T + S
    t <= T   ->  min <= T, max <= T + S
    t $in [T1, ...]  ->  $or of the equalities

With `id_bounds` (the caller knows every bucket `_id` carries its `control.min` second,
as in a collection without extended-range dates), each comparison with a date in
0..2**32-1 seconds also bounds `_id`, as MongoDB does, so an index scan of `_id` reads
only the buckets of the time range: for T, an ObjectId of T's second (rounded up when T
has milliseconds) for upper bounds, of T - S's second for lower ones, with the other 8
bytes all 0x00 or all 0xFF so that no bucket of that second is left out:

    t == T   ->  _id <= max(ceil T), _id >= min(T - S)
    t >  T   ->  _id >  max(T - S)              t <  T   ->  _id <  min(ceil T)
    t >= T   ->  _id >= min(T - S)              t <= T   ->  _id <= max(ceil T)

(for T < S, a lower bound is the least ObjectId of second 0).

Predicates on the metaField (or its subfields) are exact at bucket level once the path is
renamed to `meta` (normalization does not apply to queries in MongoDB either). `$and`
keeps the translatable conjuncts; `$or` and `$nor` translate only when every branch does
(`$nor` only for meta-only branches); anything else (other fields, `$expr`, `$not`, `$ne`,
non-date operands on the time field, ...) contributes no restriction.

`meta_only_filter` translates a filter that depends on the metaField alone (so it selects
whole buckets), else returns None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from .constants import CONTROL, CONTROL_MAX, CONTROL_MIN, META
from .options import TimeseriesOptions

__all__ = ["bucket_filter", "meta_only_filter", "ttl_expired_filter"]

_DATE_MIN: Final = -(2**63)
_DATE_MAX: Final = 2**63 - 1
_LOGICAL: Final = ("$and", "$or", "$nor")
_OID_MAX_MS: Final = (2**32 - 1) * 1000  # the last date an ObjectId's seconds can carry


def _clamp(ms: int) -> DatetimeMS:
    return DatetimeMS(max(_DATE_MIN, min(_DATE_MAX, ms)))


def _and(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The conjunction of `parts`, nested conjunctions flattened (the planner intersects
    the bounds of one field only among siblings)."""
    flat: list[dict[str, Any]] = []
    for p in parts:
        if len(p) == 1 and "$and" in p:
            flat.extend(p["$and"])
        else:
            flat.append(p)
    parts = flat
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return {"$and": parts}


def _is_operator_doc(v: Any) -> bool:
    return isinstance(v, Mapping) and bool(v) and next(iter(v)).startswith("$")


def _oid(seconds: int, fill: int) -> ObjectId:
    return ObjectId(seconds.to_bytes(4, "big") + bytes([fill]) * 8)


def _id_bounds(op: str, t: int, span_ms: int) -> list[dict[str, Any]]:
    """The `_id` predicates of a time comparison with date `t` (ms, 0.._OID_MAX_MS)."""
    up = -(-t // 1000)                      # T's second, rounded up
    low = (t - span_ms) // 1000 if t >= span_ms else None  # T - S's second
    lo_min = _oid(low, 0x00) if low is not None else _oid(0, 0x00)
    if op == "$eq":
        return [{"_id": {"$lte": _oid(up, 0xFF)}}, {"_id": {"$gte": lo_min}}]
    if op == "$gt":
        return [{"_id": {"$gt": _oid(low, 0xFF) if low is not None else _oid(0, 0x00)}}]
    if op == "$gte":
        return [{"_id": {"$gte": lo_min}}]
    if op == "$lt":
        return [{"_id": {"$lt": _oid(up, 0x00)}}]
    return [{"_id": {"$lte": _oid(up, 0xFF)}}]  # $lte


class _Translator:
    def __init__(self, options: TimeseriesOptions, id_bounds: bool = False) -> None:
        self.id_bounds = id_bounds
        self.time = options.time_field
        self.meta = options.meta_field
        self.span = options.bucket_max_span_seconds * 1000
        self.min_path = f"{CONTROL}.{CONTROL_MIN}.{self.time}"
        self.max_path = f"{CONTROL}.{CONTROL_MAX}.{self.time}"

    # -- meta -----------------------------------------------------------------------------

    def meta_path(self, path: str) -> str | None:
        m = self.meta
        if m is None:
            return None
        if path == m:
            return META
        if path.startswith(m + "."):
            return META + path[len(m):]
        return None

    def meta_only(self, expr: Mapping[str, Any]) -> dict[str, Any] | None:
        """Exact rename of a filter that only reads the metaField, else None."""
        out: dict[str, Any] = {}
        for key, cond in expr.items():
            if key in _LOGICAL:
                if not isinstance(cond, list) or not cond:
                    return None
                branches = []
                for c in cond:
                    if not isinstance(c, Mapping):
                        return None
                    t = self.meta_only(c)
                    if t is None:
                        return None
                    branches.append(t)
                out[key] = branches
            elif key == "$comment":
                continue
            elif key.startswith("$"):
                return None
            else:
                path = self.meta_path(key)
                if path is None:
                    return None
                out[path] = cond
        return out

    # -- loose translation -------------------------------------------------------------------

    def translate(self, expr: Mapping[str, Any]) -> dict[str, Any] | None:
        parts: list[dict[str, Any]] = []
        for key, cond in expr.items():
            t = self._clause(key, cond)
            if t is not None:
                parts.append(t)
        return _and(parts)

    def _clause(self, key: str, cond: Any) -> dict[str, Any] | None:
        if key == "$and":
            if not isinstance(cond, list):
                return None
            parts = [t for c in cond if isinstance(c, Mapping) and (t := self.translate(c))]
            return _and(parts)
        if key == "$or":
            if not isinstance(cond, list) or not cond:
                return None
            branches = []
            for c in cond:
                t = self.translate(c) if isinstance(c, Mapping) else None
                if t is None:
                    return None
                branches.append(t)
            return branches[0] if len(branches) == 1 else {"$or": branches}
        if key == "$nor":
            if not isinstance(cond, list) or not cond:
                return None
            branches = []
            for c in cond:
                t = self.meta_only(c) if isinstance(c, Mapping) else None
                if t is None:
                    return None
                branches.append(t)
            return {"$nor": branches}
        if key.startswith("$"):
            return None
        mp = self.meta_path(key)
        if mp is not None:
            return {mp: cond}
        if key == self.time:
            return self._time(cond)
        return None

    def _time(self, cond: Any) -> dict[str, Any] | None:
        if not _is_operator_doc(cond):
            return self._time_op("$eq", cond)
        parts = []
        for op, v in cond.items():
            t = self._time_op(op, v)
            if t is not None:
                parts.append(t)
        return _and(parts)

    def _time_op(self, op: str, v: Any) -> dict[str, Any] | None:
        if op == "$in":
            if not isinstance(v, list | tuple) or not v:
                return None
            branches = []
            for x in v:
                branch = self._time_op("$eq", x)
                if branch is None:
                    return None
                branches.append(branch)
            return branches[0] if len(branches) == 1 else {"$or": branches}
        if type(v) is not DatetimeMS:
            return None
        t = int(v)
        s = self.span
        lo, hi = self.min_path, self.max_path
        if op == "$eq":
            parts = [{lo: {"$lte": v}}, {lo: {"$gte": _clamp(t - s)}},
                     {hi: {"$gte": v}}, {hi: {"$lte": _clamp(t + s)}}]
        elif op == "$gt":
            parts = [{hi: {"$gt": v}}, {lo: {"$gt": _clamp(t - s)}}]
        elif op == "$gte":
            parts = [{hi: {"$gte": v}}, {lo: {"$gte": _clamp(t - s)}}]
        elif op == "$lt":
            parts = [{lo: {"$lt": v}}, {hi: {"$lt": _clamp(t + s)}}]
        elif op == "$lte":
            parts = [{lo: {"$lte": v}}, {hi: {"$lte": _clamp(t + s)}}]
        else:
            return None
        if self.id_bounds and 0 <= t <= _OID_MAX_MS:
            parts += _id_bounds(op, t, s)
        return {"$and": parts}


def bucket_filter(filter: Mapping[str, Any], options: TimeseriesOptions, *,
                  id_bounds: bool = False) -> dict[str, Any] | None:
    """A bucket-level filter implied by a measurement-level `filter` (None: no pruning);
    `id_bounds`: time comparisons also bound `_id` (see the module docstring)."""
    return _Translator(options, id_bounds).translate(filter)


def meta_only_filter(filter: Mapping[str, Any], options: TimeseriesOptions
                     ) -> dict[str, Any] | None:
    """The bucket filter equivalent to `filter` when it reads only the metaField, else None.

    An empty filter is not meta-only (it matches measurements, and there may be no
    metaField); callers decide what to do with it.
    """
    if not filter:
        return None
    return _Translator(options).meta_only(filter)


def ttl_expired_filter(options: TimeseriesOptions, expire_after_seconds: int, now_ms: int
                       ) -> dict[str, Any]:
    """Buckets the TTL monitor deletes: every measurement older than the limit, i.e.
    `control.max.<time>` before now - expireAfterSeconds ("once all documents in a bucket
    are expired"). Tell the catalog (`handle_direct_write`) about each deleted bucket."""
    return {f"{CONTROL}.{CONTROL_MAX}.{options.time_field}":
            {"$lt": _clamp(now_ms - expire_after_seconds * 1000)}}
