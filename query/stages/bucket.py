"""$bucket (explicit boundaries; $group by bucket + $sort on _id) and $bucketAuto (buckets of
about equal size over the sorted groupBy values, optional preferred-number granularity)."""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator
from typing import Any, Final

from query.accumulators import AccumulatorDef, compile_accumulator
from query.context import PipelineContext
from query.expressions.comparison import agg_key, agg_key_fn
from query.expressions.core import Scope, compile_node, const_value, is_const
from query.expressions.reducers import Tracker
from query.expressions.registry import Fn
from query.expressions.values import int_or_long, is_integral, num_kind, to_float, value_repr
from storage.bson_order import type_rank
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .base import Env, Stage, register_stage
from .group import GroupStage, group_key_fn, parse_accumulator_fields
from .sort import SortStage

__all__ = ["BucketAutoStage", "GRANULARITIES", "round_up", "round_down"]


def _group_by(spec: Any, scope: Scope, stage: str, code: int) -> Fn:
    if (type(spec) is str and spec.startswith("$")) or \
            (type(spec) is dict and spec and next(iter(spec)).startswith("$")):
        return compile_node(spec, scope)
    raise MongoError(code, f"The {stage} 'groupBy' field must be defined as a $-prefixed path or "
                     f"an expression{' object' if stage == '$bucketAuto' else ''}, but found: "
                     f"{value_repr(spec)}.")


def _c_bucket(spec: Any, ctx: PipelineContext) -> list[Stage]:
    if type(spec) is not dict:
        raise MongoError(40201, "Argument to $bucket stage must be an object, but found type: "
                         f"{type_name(spec)}.")
    scope = ctx.scope()
    group_by = boundaries = output = None
    default: Any = MISSING
    for k, v in spec.items():
        if k == "groupBy":
            group_by = _group_by(v, scope, "$bucket", 40202)
        elif k == "boundaries":
            if type(v) is not list:
                raise MongoError(40200, "The $bucket 'boundaries' field must be an array, but "
                                 f"found type: {type_name(v)}.")
            boundaries = v
        elif k == "default":
            fn = compile_node(v, scope)
            if not is_const(fn):
                raise MongoError(40195, "The $bucket 'default' field must be a constant "
                                 f"expression, but found: {value_repr(v)}.")
            default = const_value(fn)
        elif k == "output":
            if type(v) is not dict:
                raise MongoError(40196, "The $bucket 'output' field must be an object, but "
                                 f"found type: {type_name(v)}.")
            output = v
        else:
            raise MongoError(40197, f"Unrecognized option to $bucket: {k}.")
    if group_by is None or boundaries is None:
        raise MongoError(40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.")
    if len(boundaries) < 2:
        raise MongoError(40192, "The $bucket 'boundaries' field must have at least 2 values, "
                         f"but found {len(boundaries)} value(s).")
    agg_key = agg_key_fn(ctx.collator)
    keys = [agg_key(b) for b in boundaries]
    for i in range(1, len(boundaries)):
        a, b = boundaries[i - 1], boundaries[i]
        if type_rank(a) != type_rank(b):
            raise MongoError(40193, "All values in the the 'boundaries' option to $bucket must "
                             f"have the same type. Found conflicting types {type_name(a)} and "
                             f"{type_name(b)}.")
        if not keys[i - 1] < keys[i]:
            raise MongoError(40194, "The 'boundaries' option to $bucket must be sorted, but "
                             f"elements {i - 1} and {i} are not in ascending order "
                             f"({value_repr(a)} is not less than {value_repr(b)}).")
    if default is not MISSING and keys[0] <= agg_key(default) < keys[-1]:
        raise MongoError(40199, "The $bucket 'default' field must be less than the lowest "
                         "boundary or greater than or equal to the highest boundary.")
    gb = group_by
    last = len(boundaries) - 1

    def bucket_id(doc: Any, variables: dict) -> Any:
        v = gb(doc, variables)
        k = agg_key(v)
        i = bisect.bisect_right(keys, k) - 1
        if 0 <= i < last:
            return boundaries[i]
        if default is MISSING:
            raise MongoError(40066, "$switch could not find a matching branch for an input, "
                             "and no default was specified.")
        return default

    out_spec = output if output is not None else {"count": {"$sum": 1}}
    accs = parse_accumulator_fields(out_spec, scope, skip=())
    gb_spec = spec["groupBy"]
    branches = [{"case": {"$and": [{"$gte": [gb_spec, {"$const": lo}]},
                                   {"$lt": [gb_spec, {"$const": hi}]}]},
                 "then": {"$const": lo}}
                for lo, hi in itertools.pairwise(boundaries)]
    switch: dict[str, Any] = {"branches": branches}
    if default is not MISSING:
        switch["default"] = {"$const": default}
    group = GroupStage.__new__(GroupStage)
    # Explained as MongoDB desugars $bucket: a $group on a $switch over the boundaries.
    group.spec = {"_id": {"$switch": switch}, **out_spec}
    group.id_fn = bucket_id
    group.accs = accs
    group.key = group_key_fn(ctx.collator)
    return [group, SortStage({"_id": 1}, ctx)]


# ---------------------------------------------------------------- granularity

_SERIES: Final[dict[str, list[float]]] = {
    "R5": [1.0, 1.6, 2.5, 4.0, 6.3],
    "R10": [1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0],
    "R20": [1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.24, 2.5, 2.8, 3.15, 3.55, 4.0, 4.5, 5.0,
            5.6, 6.3, 7.1, 8.0, 9.0],
    "R40": [1.0, 1.06, 1.12, 1.18, 1.25, 1.32, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0, 2.12, 2.24,
            2.36, 2.5, 2.65, 2.8, 3.0, 3.15, 3.35, 3.55, 3.75, 4.0, 4.25, 4.5, 4.75, 5.0, 5.3,
            5.6, 6.0, 6.3, 6.7, 7.1, 7.5, 8.0, 8.5, 9.0, 9.5],
    "1-2-5": [1.0, 2.0, 5.0],
    "E6": [1.0, 1.5, 2.2, 3.3, 4.7, 6.8],
    "E12": [1.0, 1.2, 1.5, 1.8, 2.2, 2.7, 3.3, 3.9, 4.7, 5.6, 6.8, 8.2],
    "E24": [1.0, 1.1, 1.2, 1.3, 1.5, 1.6, 1.8, 2.0, 2.2, 2.4, 2.7, 3.0, 3.3, 3.6, 3.9, 4.3, 4.7,
            5.1, 5.6, 6.2, 6.8, 7.5, 8.2, 9.1],
}
_UNSUPPORTED_SERIES: Final = ("R80", "E48", "E96", "E192")
GRANULARITIES: Final = (*_SERIES, "POWERSOF2", *_UNSUPPORTED_SERIES)


def _check_roundable(v: Any) -> float:
    if num_kind(v) < 0:
        raise MongoError(40262, "A granularity rounder can only round numeric values, but found "
                         f"type: {type_name(v)}")
    x = to_float(v)
    if x != x:
        raise MongoError(40263, "A granularity rounder cannot round NaN")
    if x < 0:
        raise MongoError(40267, "A granularity rounder can only round non-negative numbers")
    return x


def _decade(x: float) -> tuple[float, float]:
    k = math.floor(math.log10(x))
    scale = 10.0**k
    m = x / scale
    if m >= 10.0:
        scale *= 10
        m /= 10
    elif m < 1.0:
        scale /= 10
        m *= 10
    return m, scale


def round_up(v: Any, granularity: str) -> Any:
    x = _check_roundable(v)
    if x == 0:
        return v
    if granularity == "POWERSOF2":
        p = 2.0 ** (math.floor(math.log2(x)) + 1)
        if is_integral(v) and p < 2**62:
            return int_or_long(int(p))
        return p
    series = _SERIES[granularity]
    m, scale = _decade(x)
    for s in series:
        if s > m + 1e-12:
            return float(_fix(s * scale))
    return float(_fix(10.0 * scale))


def round_down(v: Any, granularity: str) -> Any:
    x = _check_roundable(v)
    if x == 0:
        return v
    if granularity == "POWERSOF2":
        e = math.ceil(math.log2(x)) - 1
        p = 2.0**e
        if is_integral(v) and p >= 1:
            return int_or_long(int(p))
        return p
    series = _SERIES[granularity]
    m, scale = _decade(x)
    for s in reversed(series):
        if s < m - 1e-12:
            return float(_fix(s * scale))
    return float(_fix(series[-1] * scale / 10))


def _fix(x: float) -> float:
    return float(f"{x:.12g}")


class BucketAutoStage(Stage):
    name = "$bucketAuto"
    blocking = True

    def __init__(self, spec: dict, group_by: Fn, n: int, accs: list[tuple[str, AccumulatorDef]],
                 granularity: str | None) -> None:
        self.spec = spec
        self.group_by = group_by
        self.n = n
        self.accs = accs
        self.granularity = granularity

    def run(self, docs: Iterator[dict], env: Env) -> Iterator[dict]:
        variables = env.variables
        gb = self.group_by
        entries = []
        for d in docs:
            v = gb(d, variables)
            if v is MISSING:
                v = None
            if self.granularity is not None:
                _check_roundable(v)
            entries.append((agg_key(v), v, d))
        entries.sort(key=lambda e: e[0])
        total = len(entries)
        approx = max(1, round(total / self.n)) if self.n else 0
        gran = self.granularity
        buckets: list[list] = []   # [min, max, accs]
        i = 0
        tracker = Tracker()

        def new_bucket(entry: tuple) -> list:
            return [entry[1], entry[1], [d.new(None, tracker) for _, d in self.accs]]

        def add(bucket: list, entry: tuple) -> None:
            bucket[1] = entry[1]
            for (_, adef), acc in zip(self.accs, bucket[2]):
                acc.process(adef.argument(entry[2], variables))

        for b in range(self.n):
            if i >= total:
                break
            cur = new_bucket(entries[i])
            add(cur, entries[i])
            i += 1
            if b == self.n - 1:
                while i < total:
                    add(cur, entries[i])
                    i += 1
            else:
                for _ in range(approx - 1):
                    if i >= total:
                        break
                    add(cur, entries[i])
                    i += 1
                if gran is not None:
                    boundary = round_up(cur[1], gran)
                    bkey = agg_key(boundary)
                    while i < total and bkey > entries[i][0]:
                        add(cur, entries[i])
                        i += 1
                    if i < total:
                        cur[1] = boundary
                else:
                    last = agg_key(cur[1])
                    while i < total and entries[i][0] == last:
                        add(cur, entries[i])
                        i += 1
            if buckets:
                prev = buckets[-1]
                if gran is not None:
                    if to_float(prev[1]) == 0.0:
                        prev[1] = round_down(cur[0], gran)
                    cur[0] = prev[1]
                else:
                    prev[1] = cur[0]
            buckets.append(cur)
        if buckets and gran is not None:
            buckets[0][0] = round_down(buckets[0][0], gran)
            buckets[-1][1] = round_up(buckets[-1][1], gran)
        for lo, hi, accs in buckets:
            out: dict[str, Any] = {"_id": {"min": lo, "max": hi}}
            for (name, _), acc in zip(self.accs, accs):
                r = acc.result()
                out[name] = None if r is MISSING else r
            yield out


def _c_bucket_auto(spec: Any, ctx: PipelineContext) -> Stage:
    if type(spec) is not dict:
        raise MongoError(40240, "The argument to $bucketAuto must be an object, but found type: "
                         f"{type_name(spec)}")
    scope = ctx.scope()
    group_by = None
    n: int | None = None
    accs: list[tuple[str, AccumulatorDef]] = []
    granularity = None
    for k, v in spec.items():
        if k == "groupBy":
            group_by = _group_by(v, scope, "$bucketAuto", 40239)
        elif k == "buckets":
            if num_kind(v) < 0:
                raise MongoError(40241, "The $bucketAuto 'buckets' field must be a numeric "
                                 f"value, but found type: {type_name(v)}")
            if not is_integral(v):
                raise MongoError(40242, "The $bucketAuto 'buckets' field must be representable "
                                 f"as a 32-bit integer, but found {value_repr(to_float(v))}")
            n = int(to_float(v))
        elif k == "output":
            if type(v) is not dict:
                raise MongoError(40244, "The $bucketAuto 'output' field must be an object, but "
                                 f"found type: {type_name(v)}")
            accs = parse_accumulator_fields(v, scope, skip=())
        elif k == "granularity":
            if type(v) is not str:
                raise MongoError(40261, "The $bucketAuto 'granularity' field must be a string, "
                                 f"but found type: {type_name(v)}")
            if v not in GRANULARITIES:
                raise MongoError(40257, f"Unknown rounding granularity '{v}'")
            if v in _UNSUPPORTED_SERIES:
                raise MongoError(ErrorCode.NotImplemented, f"granularity '{v}' is not supported "
                                 "by bucketd")
            granularity = v
        else:
            raise MongoError(40245, f"Unrecognized option to $bucketAuto: {k}")
    if group_by is None or n is None:
        raise MongoError(40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified")
    if n <= 0:
        raise MongoError(40243, "The $bucketAuto 'buckets' field must be greater than 0, but "
                         f"found: {n}")
    if not accs:
        accs = [("count", compile_accumulator("$sum", 1, scope=scope))]
    return BucketAutoStage(spec, group_by, n, accs, granularity)


register_stage("$bucket", _c_bucket)
register_stage("$bucketAuto", _c_bucket_auto)
