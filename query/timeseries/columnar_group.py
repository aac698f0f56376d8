"""Columnar `$group` over time-series buckets: the fast path of `[$match?] $group ...rest`.

A pipeline on a time-series view normally unpacks every measurement into a dict and folds
it through the generic `$group`. When the `$group` only needs what the bucket columns hold
as numbers, this module computes it from the columns decoded to numpy arrays instead, then
runs `...rest` with the generic pipeline on the grouped documents.

The result is exactly the generic one — same documents, same BSON types, same group order
(first seen, in bucket scan order then row order) — because the per-group values are fed
into the generic accumulator objects themselves: each chunk of rows contributes, per group,
its first/last value, its extreme value (the first row holding it) or its integer sum and
the sequentially compensated double sum, which is what the generic accumulator would have
reached folding the rows one by one.

Block processing (`block_group`: the same plan folded by the native core from the stored
bytes) is tried first; this numpy fold answers when it declines or the core is not built.

Supported (anything else falls back to the generic path, silently):
- a leading `$match` made of `$and`-ed conditions on the meta field (any predicate, tested
  once per bucket) and `$eq/$gt/$gte/$lt/$lte` on the time field against dates; plus, for
  block processing only, `$eq/$gt/$gte/$lt/$lte` of top-level fields against numbers,
  `$in` of numbers, and `$or`s of such comparisons;
- `_id`: constants, meta field paths, `{$dateTrunc: {date: "$<time>", unit, binSize?}}`
  with unit millisecond..day (UTC), `{$dateToString: {date: "$<time>", format?}}` whose
  strings name UTC bins one to one (`%Y`, `%m`, `%d`, then optionally `%H`, `%M`, `%S`,
  `%L`, in order), and objects of these (one bin size);
- `$sum`/`$avg` of a top-level field or a numeric constant, `$min`/`$max`/`$first`/`$last`
  and `$stdDevPop`/`$stdDevSamp` of a top-level field, `$count`; for block processing only,
  `$top`/`$bottom`/`$topN`/`$bottomN` sorted by one top-level field with top-level fields
  (one, or an array of them) as output and a constant `n`; fields whose values are int32,
  int64, double, bool, date or null/missing (columns other than that make the whole query
  fall back).

The read planner (`read_plan`) decides when this path is tried; `STATS` counts uses and
declines.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
from bson import Int64
from bson.datetime_ms import DatetimeMS

from query.accumulators import Accumulator, AvgAcc, SumAcc, approx_size
from query.context import PipelineContext
from query.expressions.reducers import SumState
from query.expressions.values import K_DOUBLE, K_LONG
from query.match import Matcher, compile_filter
from query.pipeline import compile_pipeline
from query.stages.group import GroupStage, group_key
from storage.bsoncolumn.blocks import NumericColumn
from storage.bsonutil import encode
from storage.collection import Collection
from storage.errors import MongoError
from storage.timeseries import (
    BucketSpec,
    ControlFilter,
    TimeseriesOptions,
    compile_control_filter,
    unpack_columns,
)
from storage.timeseries.constants import CONTROL, CONTROL_COUNT, CONTROL_MAX, CONTROL_MIN, META
from storage.timeseries.metadata import is_meta_path
from storage.timeseries.unpack import numeric_bucket
from storage.vocabulary.bson_types import T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64
from storage.vocabulary.missing import MISSING
from storage.vocabulary.time_units import UNIT_MS

from .block_group import Decline as _Decline
from .block_group import block_group
from .group_order import fused_sort
from .scan import BucketScan, ReadStats

__all__ = ["STATS", "GroupPlan", "columnar_group", "group_buckets", "plan_group"]

STATS: Counter[str] = Counter()

# BSON type bytes as NumericColumn.types holds them; 0 = missing (or null: every supported
# accumulator treats null as missing).

_REF_UTC_MS: Final = 946_684_800_000  # $dateTrunc's reference point, 2000-01-01T00:00:00Z
_EXACT: Final = 1 << 53      # integers a double holds exactly
_SAFE_TIME: Final = 1 << 60  # times whose bin arithmetic cannot overflow int64
_DAY_RANGE: Final = (-62_135_596_800_000, 253_402_300_799_999)  # years 1..9999
_CHUNK_ROWS: Final = 1 << 19
_GROUP_OVERHEAD: Final = 96 + 16  # the generic $group's charge per group, and a margin
_ACC_OVERHEAD: Final = 48
_VECTOR_STEP_COST: Final = 40  # a vectorized summation step costs ~ this many scalar adds
_TIME_OPS: Final = frozenset({"$eq", "$gt", "$gte", "$lt", "$lte"})


# ---------------------------------------------------------------- the plan

@dataclass(frozen=True, slots=True)
class _Best:
    """What a `$top`/`$bottom`(`N`) keeps: the rows first (or last) by one field (the
    accumulator's `field`) in a direction, then by arrival; `n` of them (None: one,
    unwrapped); each as its `outputs` fields' values, in an array when `listed`."""

    descending: bool
    n: int | None
    outputs: tuple[str, ...]
    listed: bool


@dataclass(frozen=True, slots=True)
class _Acc:
    name: str
    op: str                 # $sum $avg $min $max $first $last $count $stdDev* $top* $bottom*
    field: str | None       # top-level measurement field (the sort field of a $top/$bottom),
                            # or None for a constant / $count
    const: Any = MISSING    # the constant of $sum/$avg
    best: _Best | None = None  # block processing only: the numpy fold declines it


@dataclass(slots=True)
class GroupPlan:
    """What a supported `[$match?] $group ...rest` asks of the buckets."""

    time_field: str
    meta_field: str | None
    flt: dict[str, Any] | None        # the leading $match (the bucket filter comes from it)
    time_preds: list[tuple[str, int]]  # (op, ms) on the time field
    meta_matcher: Matcher | None      # the meta conditions, tested on {metaField: meta}
    group: GroupStage
    id_uses_meta: bool
    bin_ms: int | None                # $dateTrunc bin size in the _id (ms), if any
    accs: list[_Acc]
    rest: list[Any]
    fields: list[str] = field(default_factory=list)  # data columns to decode
    # numeric comparisons of measurement fields (block processing only: the numpy fold
    # declines them): (field, op, number)
    row_preds: list[tuple[str, str, Any]] = field(default_factory=list)
    # `$or`s of them (`$in`s too): per `$or`, its branches, each a conjunction of
    # (field, op, number)
    row_ors: list[list[list[tuple[str, str, Any]]]] = field(default_factory=list)


def plan_group(stages: list[Any], opts: TimeseriesOptions, ctx: PipelineContext
               ) -> GroupPlan | None:
    """The plan for `stages`, or None when the fast path does not apply."""
    try:
        return _plan(stages, opts, ctx)
    except _Decline:
        return None


def _plan(stages: list[Any], opts: TimeseriesOptions, ctx: PipelineContext) -> GroupPlan:
    i = 0
    flt: dict[str, Any] | None = None
    if stages and _single(stages[0]) == "$match":
        flt = stages[0]["$match"]
        if type(flt) is not dict:
            raise _Decline
        i = 1
    if len(stages) <= i or _single(stages[i]) != "$group":
        raise _Decline
    spec = stages[i]["$group"]
    if type(spec) is not dict:
        raise _Decline
    tf, mf = opts.time_field, opts.meta_field
    time_preds: list[tuple[str, int]] = []
    meta_conds: list[dict[str, Any]] = []
    row_preds: list[tuple[str, str, Any]] = []
    row_ors: list[list[list[tuple[str, str, Any]]]] = []
    if flt:
        _split_filter(flt, tf, mf, time_preds, meta_conds, row_preds, row_ors)
    meta_matcher = compile_filter({"$and": meta_conds}) if meta_conds else None
    group = GroupStage(spec, ctx)
    uses_meta, bins = _id_shape(spec["_id"], tf, mf)
    accs = [_acc(name, d.op, d.spec, tf, mf) for name, d in group.accs]
    fields = sorted({a.field for a in accs if a.field is not None and a.field != tf}
                    | {f for a in accs if a.best is not None for f in a.best.outputs if f != tf}
                    | {f for f, _, _ in row_preds}
                    | {f for branches in row_ors for b in branches for f, _, _ in b})
    return GroupPlan(tf, mf, flt, time_preds, meta_matcher, group, uses_meta,
                     bins, accs, stages[i + 1:], fields, row_preds, row_ors)


def _single(stage: Any) -> str | None:
    return next(iter(stage)) if type(stage) is dict and len(stage) == 1 else None


def _date_ms(v: Any) -> int:
    if type(v) is DatetimeMS:
        return int(v)
    if isinstance(v, dt.datetime):
        return int(DatetimeMS(v))
    raise _Decline


def _number(v: Any) -> bool:
    """A constant a numeric row comparison takes (NaN compares specially: declined)."""
    t = type(v)
    return (t is int and -(2**63) <= v < 2**63) or t is Int64 or (
        t is float and not math.isnan(v))


def _split_filter(flt: dict[str, Any], tf: str, mf: str | None,
                  time_preds: list[tuple[str, int]], meta_conds: list[dict[str, Any]],
                  row_preds: list[tuple[str, str, Any]],
                  row_ors: list[list[list[tuple[str, str, Any]]]]) -> None:
    for k, v in flt.items():
        if k == "$and" and type(v) is list and v and all(type(c) is dict for c in v):
            for c in v:
                _split_filter(c, tf, mf, time_preds, meta_conds, row_preds, row_ors)
        elif k == "$or" and type(v) is list and v and all(type(c) is dict and c for c in v):
            row_ors.append([_row_branch(c, tf, mf) for c in v])
        elif is_meta_path(k, mf):
            meta_conds.append({k: v})
        elif k == tf:
            if type(v) is dict and v and all(op in _TIME_OPS for op in v):
                time_preds.extend((op, _date_ms(x)) for op, x in v.items())
            else:
                time_preds.append(("$eq", _date_ms(v)))
        else:
            _field_conditions(_plain_field(k, mf), v, row_preds, row_ors)


def _field_conditions(k: str, v: Any, row_preds: list[tuple[str, str, Any]],
                      row_ors: list[list[list[tuple[str, str, Any]]]]) -> None:
    """The numeric comparisons of measurement field `k` that `v` makes, its `$in`s as
    `$or`s of equalities (anything else declines)."""
    if type(v) is dict and v and all(
            (op in _TIME_OPS and _number(x))
            or (op == "$in" and type(x) is list and all(_number(e) for e in x))
            for op, x in v.items()):
        for op, x in v.items():
            if op == "$in":  # a number equal to one of them
                row_ors.append([[(k, "$eq", e)] for e in x])
            else:
                row_preds.append((k, op, x))
    elif _number(v):
        row_preds.append((k, "$eq", v))
    else:
        raise _Decline


def _row_branch(flt: dict[str, Any], tf: str, mf: str | None
                ) -> list[tuple[str, str, Any]]:
    """A branch of an `$or`: numeric comparisons of measurement fields only (a condition
    on the meta or the time field, or any other, declines)."""
    preds: list[tuple[str, str, Any]] = []
    ors: list[list[list[tuple[str, str, Any]]]] = []
    for k, v in flt.items():
        if k == tf:
            raise _Decline
        _field_conditions(_plain_field(k, mf), v, preds, ors)
    if ors:
        raise _Decline  # an $in in a branch: an $or inside an $or
    return preds


def _id_shape(spec: Any, tf: str, mf: str | None) -> tuple[bool, int | None]:
    """(references the meta field, bin size in ms or None) of a supported _id: its
    `$dateTrunc`s and `$dateToString`s of the time make one bin size."""
    uses_meta = False
    sizes: set[int] = set()

    def walk(e: Any) -> None:
        nonlocal uses_meta
        t = type(e)
        if t is str:
            if e.startswith("$$"):
                raise _Decline
            if e.startswith("$"):
                path = e[1:]
                if not is_meta_path(path, mf):
                    raise _Decline
                uses_meta = True
        elif t is dict:
            if e and next(iter(e)).startswith("$"):
                if len(e) != 1:
                    raise _Decline
                if "$dateTrunc" in e:
                    sizes.add(_trunc_size(e["$dateTrunc"], tf))
                elif "$dateToString" in e:
                    sizes.add(_format_size(e["$dateToString"], tf))
                else:
                    raise _Decline
            else:
                for v in e.values():
                    walk(v)
        elif t not in (type(None), bool, int, float, Int64, DatetimeMS):  # lists too
            raise _Decline

    walk(spec)
    if len(sizes) > 1:
        raise _Decline
    return uses_meta, (sizes.pop() if sizes else None)


def _trunc_size(arg: Any, tf: str) -> int:
    if type(arg) is not dict or set(arg) - {"date", "unit", "binSize"}:
        raise _Decline  # timezone, startOfWeek
    # a week bin starts on startOfWeek, not at a multiple of seven days from the epoch
    if arg.get("date") != "$" + tf or arg.get("unit") not in UNIT_MS or arg["unit"] == "week":
        raise _Decline
    bs = arg.get("binSize", 1)
    if type(bs) not in (int, Int64) or int(bs) <= 0:
        raise _Decline
    size = int(bs) * UNIT_MS[arg["unit"]]
    if size >= _SAFE_TIME:
        raise _Decline
    return size


# $dateToString's specifiers in the order that makes its strings name UTC bins one to one
_BIN_SPECIFIERS: Final = ("Y", "m", "d", "H", "M", "S", "L")
_SPECIFIER_MS: Final = {"d": 86_400_000, "H": 3_600_000, "M": 60_000, "S": 1_000, "L": 1}
_DEFAULT_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%LZ"


def _format_size(arg: Any, tf: str) -> int:
    """The bin of a `$dateToString` of the time whose strings name its bins one to one:
    UTC, and a format whose specifiers are `%Y %m %d` then optionally `%H`, `%M`, `%S`,
    `%L`, in that order, between literal text (rows share a string exactly when they
    share the bin of the last specifier)."""
    if type(arg) is not dict or set(arg) - {"date", "format", "timezone"}:
        raise _Decline  # onNull: the time is never null
    if arg.get("date") != "$" + tf or arg.get("timezone", "UTC") != "UTC":
        raise _Decline
    fmt = arg.get("format", _DEFAULT_FORMAT)
    if type(fmt) is not str:
        raise _Decline
    seen: list[str] = []
    i = 0
    while i < len(fmt):
        if fmt[i] == "%":
            if i + 1 >= len(fmt):
                raise _Decline
            seen.append(fmt[i + 1])
            i += 2
        else:
            i += 1
    if len(seen) < 3 or tuple(seen) != _BIN_SPECIFIERS[:len(seen)]:
        raise _Decline
    return _SPECIFIER_MS[seen[-1]]


_BEST_OPS: Final = ("$top", "$bottom", "$topN", "$bottomN")
_MAX_BEST_N: Final = 1_000  # kept rows a group: the fold does not count them as memory


def _plain_field(path: Any, mf: str | None) -> str:
    """A top-level measurement field (the time field included) named by `path`."""
    if type(path) is not str or not path or path.startswith("$") or "." in path or path == mf:
        raise _Decline
    return path


def _best(name: str, op: str, arg: Any, mf: str | None) -> _Acc:
    with_n = op.endswith("N")
    if type(arg) is not dict or set(arg) != ({"n", "sortBy", "output"} if with_n
                                             else {"sortBy", "output"}):
        raise _Decline  # the generic accumulator reports a malformed one
    sort_by = arg["sortBy"]
    if type(sort_by) is not dict or len(sort_by) != 1:
        raise _Decline
    ((key, d),) = sort_by.items()
    if type(d) is not int or d not in (1, -1):
        raise _Decline
    out = arg["output"]
    listed = type(out) is list
    paths = out if listed else [out]
    if not paths or not all(type(p) is str and p.startswith("$") for p in paths):
        raise _Decline
    n = None
    if with_n:
        n = arg["n"]
        if type(n) not in (int, Int64) or not 1 <= int(n) <= _MAX_BEST_N:
            raise _Decline
        n = int(n)
    outputs = tuple(_plain_field(p[1:], mf) for p in paths)
    return _Acc(name, op, _plain_field(key, mf), best=_Best(d == -1, n, outputs, listed))


def _acc(name: str, op: str, arg: Any, tf: str, mf: str | None) -> _Acc:
    if op == "$count":
        return _Acc(name, op, None)
    if op in _BEST_OPS:
        return _best(name, op, arg, mf)
    if op not in ("$sum", "$avg", "$min", "$max", "$first", "$last", "$stdDevPop",
                  "$stdDevSamp"):
        raise _Decline
    if type(arg) is list:
        if len(arg) != 1:
            raise _Decline
        arg = arg[0]
    if type(arg) is str and arg.startswith("$"):
        return _Acc(name, op, _plain_field(arg[1:], mf))
    if op in ("$sum", "$avg") and type(arg) in (int, Int64, float, bool, type(None), str):
        if type(arg) is int and not -(2**31) <= arg < 2**31:
            raise _Decline
        return _Acc(name, op, None, arg)
    raise _Decline


# ---------------------------------------------------------------- rows of the buckets

@dataclass(slots=True)
class _Column:
    """One field over some rows: BSON type per row (0 = missing/null), the value as int64
    (int32/int64/bool/date rows) and as float64 (every numeric row)."""

    types: np.ndarray
    ivals: np.ndarray
    fvals: np.ndarray


def _from_numeric(nc: NumericColumn | None, n: int) -> _Column:
    if nc is None:
        return _Column(np.zeros(n, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.float64))
    types = nc.types.astype(np.uint8, copy=False)
    if nc.kind == "double":
        f = nc.values.astype(np.float64, copy=False)
        ints = (types == T_INT32) | (types == T_INT64)
        i = np.zeros(n, np.int64)
        if ints.any():
            iv = f[ints]
            if (np.abs(iv) > _EXACT).any():
                raise _Decline  # the decoder widened an int64 beyond what a double holds
            i[ints] = iv.astype(np.int64)
        return _Column(types, i, f)
    if nc.kind in ("int", "date", "bool"):
        i = nc.values.astype(np.int64, copy=False)
        return _Column(types, i, i.astype(np.float64))
    if nc.present.any():
        raise _Decline  # timestamps
    return _from_numeric(None, n)


def _from_python(values: list[Any]) -> _Column:
    n = len(values)
    types = np.zeros(n, np.uint8)
    ivals = np.zeros(n, np.int64)
    fvals = np.zeros(n, np.float64)
    for r, v in enumerate(values):
        t = type(v)
        if v is None or v is MISSING:
            continue
        if t is float:
            types[r], fvals[r] = T_DOUBLE, v
            continue
        if t is int:
            if not -(2**31) <= v < 2**31:
                raise _Decline
            types[r] = T_INT32
        elif t is Int64:
            types[r] = T_INT64
        elif t is bool:
            types[r] = T_BOOL
        elif t is DatetimeMS:
            types[r] = T_DATE
            v = int(v)
        else:
            raise _Decline
        ivals[r] = int(v)
        fvals[r] = float(v)
    return _Column(types, ivals, fvals)


def _bucket_rows(bucket: Mapping[str, Any], spec: BucketSpec, fields: list[str],
                 some_time: int | None) -> tuple[np.ndarray, dict[str, _Column], Any, bool]:
    """Times and columns of the bucket's rows. With `some_time`, the caller needs no row's
    own time: every row is then given that time (the column is not decoded)."""
    nb = numeric_bucket(bucket, spec, fields, with_time=some_time is None)
    if nb is not None:
        times = nb.time
        if times is None:
            times = np.full(int(bucket[CONTROL][CONTROL_COUNT]), some_time, np.int64)
        n = len(times)
        return times, {f: _from_numeric(nb.columns[f], n) for f in fields}, nb.meta, \
            nb.has_meta
    # v1 buckets, and columns holding nulls: through the generic unpacking
    keep = BucketSpec(spec.time_field, spec.meta_field,
                      frozenset({spec.time_field, *fields}), include=True)
    rows, cols, meta, has_meta = unpack_columns(bucket, keep)
    tv = cols.get(spec.time_field, {})
    row_times = [tv[r] for r in rows]
    if not all(type(t) is DatetimeMS for t in row_times):
        raise _Decline
    out = {}
    for f in fields:
        vals = cols.get(f, {})
        out[f] = _from_python([vals.get(r, MISSING) for r in rows])
    return np.array([int(t) for t in row_times], np.int64), out, meta, has_meta


def _uniform_time(plan: GroupPlan, bucket: Mapping[str, Any]) -> int | None:
    """A time standing for every row of the bucket when its control.min/max show that
    all rows pass the time conditions and share one `$dateTrunc` bin; else None."""
    control = bucket.get(CONTROL)
    try:
        lo = control[CONTROL_MIN][plan.time_field]  # type: ignore[index]
        hi = control[CONTROL_MAX][plan.time_field]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    if type(lo) is not DatetimeMS or type(hi) is not DatetimeMS:
        return None
    lo_ms, hi_ms = int(lo), int(hi)  # lo is rounded down: at most the earliest time
    for op, ms in plan.time_preds:
        if not {"$eq": lo_ms == hi_ms == ms, "$gt": lo_ms > ms, "$gte": lo_ms >= ms,
                "$lt": hi_ms < ms, "$lte": hi_ms <= ms}[op]:
            return None
    size = plan.bin_ms
    if size is not None and (lo_ms - _REF_UTC_MS) // size != (hi_ms - _REF_UTC_MS) // size:
        return None
    return lo_ms


def _time_mask(t: np.ndarray, preds: list[tuple[str, int]]) -> np.ndarray | None:
    mask = None
    for op, ms in preds:
        m = {"$eq": t == ms, "$gt": t > ms, "$gte": t >= ms, "$lt": t < ms,
             "$lte": t <= ms}[op]
        mask = m if mask is None else mask & m
    return mask


# ---------------------------------------------------------------- grouping

class _Groups:
    """Groups in first-seen order: their `_id`, accumulators, and memory estimate."""

    def __init__(self, plan: GroupPlan, variables: dict[str, Any], memory_limit: int) -> None:
        self.plan = plan
        self.variables = variables
        self.index: dict[Any, int] = {}
        self.ids: list[Any] = []
        self.accs: list[list[Accumulator]] = []
        self.defs = [d for _, d in plan.group.accs]
        self.budget = memory_limit // 2  # near the limit the generic $group errors or spills
        self.used = 0
        self.overhead = _GROUP_OVERHEAD + _ACC_OVERHEAD * len(self.defs)

    def group_of(self, doc: dict[str, Any]) -> int:
        gid = self.plan.group.id_fn(doc, self.variables)
        t = type(gid)
        hk = gid if t is str or t is int else group_key(gid)
        g = self.index.get(hk)
        if g is None:
            if gid is MISSING:
                gid = None
            g = len(self.ids)
            self.index[hk] = g
            self.ids.append(gid)
            self.accs.append([d.new(gid) for d in self.defs])
            self.used += approx_size(gid) + self.overhead
            if self.used > self.budget:
                raise _Decline
        return g

    def reserve_many(self, size: int, n: int) -> None:
        """Count `n` groups block processing makes (their `_id`s sized `size` together)
        against the memory limit."""
        self.used += size + n * self.overhead
        if self.used > self.budget:
            raise _Decline

    def results(self) -> list[dict[str, Any]]:
        names = [a.name for a in self.plan.accs]
        out = []
        for gid, accs in zip(self.ids, self.accs):
            doc = {"_id": gid}
            for name, acc in zip(names, accs):
                doc[name] = acc.result()
            out.append(doc)
        return out


@dataclass(slots=True)
class _Chunk:
    """Rows of consecutive buckets, in scan order."""

    times: list[np.ndarray] = field(default_factory=list)
    metas: list[int] = field(default_factory=list)       # meta index per bucket part
    cols: list[dict[str, _Column]] = field(default_factory=list)
    rows: int = 0


def group_buckets(plan: GroupPlan, buckets: Iterable[Mapping[str, Any]], *,
                  variables: dict[str, Any], memory_limit: int) -> list[dict[str, Any]] | None:
    """The `$group` output documents over `buckets` (in scan order), or None to decline."""
    try:
        return _group_buckets(plan, buckets, variables, memory_limit)
    except _Decline:
        return None


def _group_buckets(plan: GroupPlan, buckets: Iterable[Mapping[str, Any]],
                   variables: dict[str, Any], memory_limit: int) -> list[dict[str, Any]]:
    if plan.row_preds or plan.row_ors or any(a.best is not None for a in plan.accs):
        raise _Decline
    spec = BucketSpec(plan.time_field, plan.meta_field)
    groups = _Groups(plan, variables, memory_limit)
    metas: list[tuple[Any, bool]] = []
    meta_index: dict[Any, int] = {}
    chunk = _Chunk()
    time_acc = plan.time_field in {a.field for a in plan.accs}
    for bucket in buckets:
        if plan.meta_matcher is not None and not plan.meta_matcher.matches(
                {plan.meta_field: bucket[META]} if META in bucket else {}):  # type: ignore[dict-item]
            continue
        some_time = None if time_acc else _uniform_time(plan, bucket)
        try:
            times, cols, meta, has_meta = _bucket_rows(bucket, spec, plan.fields, some_time)
        except MongoError:
            raise _Decline from None  # the generic path reports it
        if not len(times):
            continue
        mask = None if some_time is not None else _time_mask(times, plan.time_preds)
        if mask is not None:
            if not mask.any():
                continue
            if not mask.all():
                times = times[mask]
                cols = {f: _Column(c.types[mask], c.ivals[mask], c.fvals[mask])
                        for f, c in cols.items()}
        mi = 0
        if plan.id_uses_meta:
            key = encode({"m": meta}) if has_meta else None
            mi = meta_index.get(key, -1)
            if mi < 0:
                mi = meta_index[key] = len(metas)
                metas.append((meta, has_meta))
        chunk.times.append(times)
        chunk.metas.append(mi)
        chunk.cols.append(cols)
        chunk.rows += len(times)
        if chunk.rows >= _CHUNK_ROWS:
            _fold(plan, groups, metas, chunk)
            chunk = _Chunk()
    if chunk.rows:
        _fold(plan, groups, metas, chunk)
    return groups.results()


def _fold(plan: GroupPlan, groups: _Groups, metas: list[tuple[Any, bool]],
          chunk: _Chunk) -> None:
    """Feed one chunk of rows into the groups' accumulators."""
    t = np.concatenate(chunk.times)
    n = len(t)
    lens = np.fromiter((len(x) for x in chunk.times), np.int64, len(chunk.times))
    g = _row_groups(plan, groups, metas, t, np.repeat(np.array(chunk.metas, np.int64), lens))
    # rows sorted by group, keeping scan order within a group
    order = np.argsort(g, kind="stable")
    gs = g[order]
    starts = np.flatnonzero(np.concatenate(([True], gs[1:] != gs[:-1])))
    counts = np.diff(np.append(starts, n))
    present = gs[starts].tolist()
    cols: dict[str, _Column] = {}
    for f in plan.fields:
        parts = [c[f] for c in chunk.cols]
        cols[f] = _Column(np.concatenate([p.types for p in parts])[order],
                          np.concatenate([p.ivals for p in parts])[order],
                          np.concatenate([p.fvals for p in parts])[order])
    if plan.time_field in {a.field for a in plan.accs}:
        ts = t[order]
        cols[plan.time_field] = _Column(np.full(n, T_DATE, np.uint8), ts, ts.astype(np.float64))
    accs = groups.accs
    for k, a in enumerate(plan.accs):
        targets = [accs[gi][k] for gi in present]
        if a.op == "$count":
            for acc, c in zip(targets, counts.tolist()):
                acc.n += c
            continue
        if a.field is None:
            col = _constant_column(a.const, n)
        else:
            col = cols[a.field]
        if a.op in ("$sum", "$avg"):
            _fold_sum(targets, col, starts, counts)
        elif a.op in ("$stdDevPop", "$stdDevSamp"):
            # Welford's updates depend on their order: each group's rows one by one
            for acc, s, c in zip(targets, starts.tolist(), counts.tolist()):
                for r in range(s, s + c):
                    acc.process(_value(col, r))
        elif a.op in ("$first", "$last"):
            rows = starts if a.op == "$first" else starts + counts - 1
            for acc, r in zip(targets, rows.tolist()):
                acc.process(_value(col, r))
        else:
            for acc, r in zip(targets, _extreme_rows(col, starts, counts, a.op == "$max")):
                acc.process(MISSING if r < 0 else _value(col, r))


def _row_groups(plan: GroupPlan, groups: _Groups, metas: list[tuple[Any, bool]],
                t: np.ndarray, mi: np.ndarray) -> np.ndarray:
    """The group number of each row; new groups are made in first-seen row order."""
    n = len(t)
    size = plan.bin_ms
    if size is not None:
        lo, hi = int(t.min()), int(t.max())
        if lo < -_SAFE_TIME or hi > _SAFE_TIME or (size % 86_400_000 == 0 and (
                lo < _DAY_RANGE[0] or hi > _DAY_RANGE[1])):
            raise _Decline
        bins = (t - _REF_UTC_MS) // size
        bmin = int(bins.min())
        span = int(bins.max()) - bmin + 1
        if (int(mi.max()) + 1) * span >= _SAFE_TIME:
            raise _Decline
        key = mi * span + (bins - bmin)
    else:
        key, span, bmin = mi, 1, 0
    if plan.id_uses_meta or size is not None:
        uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    else:
        uniq, first, inv = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(n, np.int64)
    tf, mf = plan.time_field, plan.meta_field
    combo_group = np.empty(len(uniq), np.int64)
    for c in np.argsort(first, kind="stable").tolist():
        k = int(uniq[c])
        doc: dict[str, Any] = {}
        if size is not None:
            doc[tf] = DatetimeMS(_REF_UTC_MS + (k % span + bmin) * size)
        if plan.id_uses_meta:
            meta, has_meta = metas[k // span]
            if has_meta:
                doc[mf] = meta  # type: ignore[index]
        try:
            combo_group[c] = groups.group_of(doc)
        except MongoError:
            raise _Decline from None
    return combo_group[inv.reshape(-1)]


def _constant_column(c: Any, n: int) -> _Column:
    t = type(c)
    code = {float: T_DOUBLE, int: T_INT32, Int64: T_INT64}.get(t, 0)
    types = np.full(n, code, np.uint8)
    if code == T_DOUBLE:
        return _Column(types, np.zeros(n, np.int64), np.full(n, c, np.float64))
    if code:
        return _Column(types, np.full(n, int(c), np.int64), np.full(n, float(c), np.float64))
    return _Column(types, np.zeros(n, np.int64), np.zeros(n, np.float64))


def _value(col: _Column, r: int) -> Any:
    """Row `r` as the Python value the generic unpacking gives (MISSING if absent)."""
    t = int(col.types[r])
    if t == T_DOUBLE:
        return float(col.fvals[r])
    if t == T_INT32:
        return int(col.ivals[r])
    if t == T_INT64:
        return Int64(int(col.ivals[r]))
    if t == T_BOOL:
        return bool(col.ivals[r])
    if t == T_DATE:
        return DatetimeMS(int(col.ivals[r]))
    return MISSING


# ---------------------------------------------------------------- $sum / $avg

def _fold_sum(targets: list[SumAcc | AvgAcc], col: _Column, starts: np.ndarray,
              counts: np.ndarray) -> None:
    types = col.types
    is_int = (types == T_INT32) | (types == T_INT64)
    is_dbl = types == T_DOUBLE
    n_int = np.add.reduceat(is_int.astype(np.int64), starts)
    n_long = np.add.reduceat((types == T_INT64).astype(np.int64), starts)
    ivals = np.where(is_int, col.ivals, 0)
    bound = max(abs(int(ivals.max())), abs(int(ivals.min())))
    if bound * len(ivals) < 2**62:
        isums = np.add.reduceat(ivals, starts).tolist()
    else:
        bounds = np.append(starts, len(ivals)).tolist()
        iv = ivals.tolist()
        isums = [sum(iv[a:b]) for a, b in itertools.pairwise(bounds)]
    for acc, ni, nl, s in zip(targets, n_int.tolist(), n_long.tolist(), isums):
        st = acc.s
        if ni:
            st.ival += s
            st.count += ni
            if nl and st.kind < K_LONG:
                st.kind = K_LONG
    if not is_dbl.any():
        return
    # doubles: MongoDB's compensated summation, row by row in each group
    gidx = np.repeat(np.arange(len(starts)), counts)[is_dbl]
    vals = col.fvals[is_dbl]
    d_starts = np.flatnonzero(np.concatenate(([True], gidx[1:] != gidx[:-1])))
    d_groups = gidx[d_starts]
    d_counts = np.diff(np.append(d_starts, len(vals)))
    states = [targets[i].s for i in d_groups.tolist()]
    for st in states:
        if st.kind < K_DOUBLE:
            st.kind = K_DOUBLE
    if int(d_counts.max()) * _VECTOR_STEP_COST > len(vals):
        # few long groups: the scalar loop is cheaper
        bounds = np.append(d_starts, len(vals)).tolist()
        fv = vals.tolist()
        for st, (a, b) in zip(states, itertools.pairwise(bounds)):
            _add_doubles(st, fv[a:b])
        return
    s = np.array([st.fsum for st in states], np.float64)
    c = np.array([st.fcomp for st in states], np.float64)
    _compensated(vals, d_starts, d_counts, s, c)
    for st, fs, fc, k in zip(states, s.tolist(), c.tolist(), d_counts.tolist()):
        st.fsum, st.fcomp = fs, fc
        st.count += k


def _add_doubles(st: SumState, values: list[float]) -> None:
    """SumState.add for doubles, inlined."""
    s, comp = st.fsum, st.fcomp
    isfinite = math.isfinite
    for v in values:
        x = s + v
        if isfinite(x):
            if abs(s) >= abs(v):
                comp += (s - x) + v
            else:
                comp += (v - x) + s
        s = x
    st.fsum, st.fcomp = s, comp
    st.count += len(values)


def _compensated(vals: np.ndarray, starts: np.ndarray, counts: np.ndarray, s: np.ndarray,
                 c: np.ndarray) -> None:
    """`_add_doubles` for many groups at once: step k adds every group's k-th value."""
    by_len = np.argsort(-counts, kind="stable")
    sorted_counts = counts[by_len]
    base = starts[by_len]
    neg = -sorted_counts
    ss, cc = s[by_len], c[by_len]
    with np.errstate(all="ignore"):
        for k in range(int(sorted_counts[0])):
            m = int(np.searchsorted(neg, -k, side="left"))  # the groups longer than k
            v = vals[base[:m] + k]
            s0 = ss[:m]
            x = s0 + v
            term = np.where(np.abs(s0) >= np.abs(v), (s0 - x) + v, (v - x) + s0)
            cc[:m] = np.where(np.isfinite(x), cc[:m] + term, cc[:m])
            ss[:m] = x
    s[by_len] = ss
    c[by_len] = cc


# ---------------------------------------------------------------- $min / $max

def _extreme_rows(col: _Column, starts: np.ndarray, counts: np.ndarray, largest: bool
                  ) -> list[int]:
    """Per group, the first row holding its largest (smallest) value in BSON order, or -1
    when the group has no value: what MinMaxAcc keeps folding the rows in order."""
    types = col.types
    # numbers < bool < date; 0 = missing
    cls = np.select([(types == T_DOUBLE) | (types == T_INT32) | (types == T_INT64),
                     types == T_BOOL, types == T_DATE], [1, 2, 3], 0).astype(np.int8)
    if largest:
        best = np.maximum.reduceat(cls, starts)
    else:
        best = np.minimum.reduceat(np.where(cls == 0, 9, cls).astype(np.int8), starts)
        best = np.where(best == 9, 0, best)
    cand = (cls == np.repeat(best, counts)) & (cls != 0)
    n = len(types)
    pos = np.arange(n)
    if (types == T_DOUBLE).any():
        if (np.abs(col.ivals[cand & (types != T_DOUBLE)]) > _EXACT).any():
            raise _Decline  # such an int and a double do not compare exactly as doubles
        v = col.fvals
        nan = cand & np.isnan(v)
    else:
        v = col.ivals
        nan = None
    good = cand if nan is None else cand & ~nan
    if v.dtype == np.float64:
        lo_hi = -np.inf if largest else np.inf
    else:
        lo_hi = np.iinfo(np.int64).min if largest else np.iinfo(np.int64).max
    masked = np.where(good, v, lo_hi)
    ext = (np.maximum if largest else np.minimum).reduceat(masked, starts)
    win = good & (v == np.repeat(ext, counts))
    first_win = np.minimum.reduceat(np.where(win, pos, n), starts)
    first_cand = np.minimum.reduceat(np.where(cand, pos, n), starts)
    if nan is not None:
        first_nan = np.minimum.reduceat(np.where(nan, pos, n), starts)
        # NaN sorts below every number: it is the minimum, and the maximum only of NaNs
        first_win = np.where(first_nan < n, first_nan, first_win) if not largest else \
            np.where(first_win < n, first_win, first_nan)
    out = np.where(first_win < n, first_win, np.where(first_cand < n, first_cand, -1))
    return out.tolist()


# ---------------------------------------------------------------- the path

def columnar_group(buckets: Collection | None, opts: TimeseriesOptions,
                   bucket_filter: Callable[[dict[str, Any] | None], dict[str, Any] | None],
                   stages: list[Any], ctx: PipelineContext, generic: Iterator[Any],
                   stats: ReadStats | None = None, *, block_processing: bool = True
                   ) -> Iterator[Any] | None:
    """An iterator over the results of `stages` on a time-series collection through the
    columnar `$group`, or None when the pipeline's shape is not supported. It computes on
    first use and runs `generic` instead if the data turn out unsupported."""
    plan = plan_group(stages, opts, ctx)
    if plan is None:
        return None
    return _run(buckets, bucket_filter, plan, ctx, generic, stats,
                compile_control_filter(plan.flt, opts), block_processing)


def _run(buckets: Collection | None,
         bucket_filter: Callable[[dict[str, Any] | None], dict[str, Any] | None],
         plan: GroupPlan, ctx: PipelineContext, generic: Iterator[Any],
         stats: ReadStats | None, control: ControlFilter | None,
         block_processing: bool) -> Iterator[Any]:
    variables = compile_pipeline([], ctx).base_variables()
    docs = None
    if block_processing and buckets is not None:
        sort = fused_sort(plan.group.spec["_id"], plan.rest, ctx.collator)
        docs = block_group(buckets, bucket_filter(plan.flt), control, plan,
                           _Groups(plan, variables, ctx.memory_limit_bytes), variables, stats,
                           sort)
        if docs is not None:
            STATS["block"] += 1
            rest = plan.rest[1:] if sort is not None else plan.rest  # the $sort is done
            yield from compile_pipeline(rest, ctx).run(docs)
            return
    scanned: Iterable[Mapping[str, Any]] = () if buckets is None else (
        b for _rid, b in BucketScan(buckets, bucket_filter(plan.flt), stats,
                                    control=control).buckets())
    docs = group_buckets(plan, scanned, variables=variables,
                         memory_limit=ctx.memory_limit_bytes)
    if docs is None:
        STATS["declined"] += 1
        yield from generic
        return
    STATS["used"] += 1
    if stats is not None:
        stats.path = "columnarGroup"
        stats.buckets_unpacked = stats.buckets_matched
    yield from compile_pipeline(plan.rest, ctx).run(docs)
