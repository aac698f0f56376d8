"""Group accumulators: $sum $avg $min $max $first $last $push $addToSet $count $mergeObjects
$stdDevPop $stdDevSamp $top $bottom $topN $bottomN $firstN $lastN $maxN $minN $median
$percentile.

`compile_accumulator(op, arg)` turns one ``{$op: arg}`` of a `$group` (or `$bucket`,
`$bucketAuto`) into an `AccumulatorDef`; ``definition.argument(doc, vars)`` computes what a
document contributes and ``definition.new(group_id, tracker)`` makes the per-group state with
``process(value)`` and ``result()``. Accumulators whose state grows with the input ($push,
$addToSet, the N-accumulators, percentiles) add the approximate size of what they keep to
``tracker.used`` so `$group` can enforce its memory limit.

The same accumulators back the expression forms ``{$sum: [...]}`` etc. (`evaluate_over`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from bson import Decimal128, Int64

from query.expressions.comparison import agg_key
from query.expressions.core import (
    Fn,
    Scope,
    compile_node,
    const_fn,
    operator,
)
from query.expressions.values import (
    DEC_CTX,
    K_DECIMAL,
    K_DOUBLE,
    K_INT,
    K_LONG,
    as_int,
    int_or_long,
    is_integral64,
    make_decimal,
    num_kind,
    to_float,
    value_repr,
)
from storage.errors import MongoError
from storage.vocabulary.bson_types import INT64_MAX, INT64_MIN, type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = [
    "Accumulator", "AccumulatorDef", "Tracker", "ACCUMULATORS", "compile_accumulator",
    "approx_size", "SumState", "percentile_rank", "parse_percentile_spec",
]


class Tracker:
    """Approximate bytes held by growing accumulators (shared by one $group)."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0


def approx_size(v: Any) -> int:
    """A cheap estimate of a value's BSON size."""
    t = type(v)
    if t is str:
        return len(v) + 5
    if t is dict:
        return 5 + sum(len(k) + 2 + approx_size(x) for k, x in v.items())
    if t is list:
        return 5 + sum(4 + approx_size(x) for x in v)
    if t is bytes:
        return len(v) + 5
    if t is Decimal128:
        return 16
    return 8


class Accumulator:
    __slots__ = ()

    def process(self, value: Any) -> None:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError


# ---------------------------------------------------------------- numeric summation

class SumState:
    """MongoDB's summation: narrowest result type, exact integers, compensated doubles."""

    __slots__ = ("count", "dec", "fcomp", "fsum", "ival", "kind")

    def __init__(self) -> None:
        self.kind = K_INT
        self.ival = 0
        self.fsum = 0.0
        self.fcomp = 0.0
        self.dec: Decimal | None = None
        self.count = 0

    def add(self, v: Any) -> bool:
        """Add a value; False (and nothing done) if it is not a number."""
        t = type(v)
        if t is float:
            if self.kind < K_DOUBLE:
                self.kind = K_DOUBLE
            s = self.fsum
            x = s + v
            if math.isfinite(x):
                if abs(s) >= abs(v):
                    self.fcomp += (s - x) + v
                else:
                    self.fcomp += (v - x) + s
            self.fsum = x
        elif t is int:
            self.ival += v
            if self.kind == K_INT and not -(2**31) <= v < 2**31:
                self.kind = K_LONG
        elif t is Int64:
            self.ival += int(v)
            if self.kind < K_LONG:
                self.kind = K_LONG
        elif t is Decimal128:
            self.kind = K_DECIMAL
            d = v.to_decimal()
            self.dec = d if self.dec is None else DEC_CTX.add(self.dec, d)
        else:
            return False
        self.count += 1
        return True

    def remove(self, v: Any) -> None:
        """Subtract a value previously added (sliding windows)."""
        t = type(v)
        if t is float:
            s = self.fsum
            x = s - v
            if math.isfinite(x):
                if abs(s) >= abs(v):
                    self.fcomp += (s - x) - v
                else:
                    self.fcomp += (-v - x) + s
            self.fsum = x
        elif t is int or t is Int64:
            self.ival -= int(v)
        elif t is Decimal128:
            self.dec = DEC_CTX.subtract(self.dec or Decimal(0), v.to_decimal())
        else:
            return
        self.count -= 1

    def double_total(self) -> float:
        if math.isfinite(self.fsum):
            return float(self.ival) + (self.fsum + self.fcomp)
        return self.fsum + float(self.ival)

    def total(self) -> Any:
        k = self.kind
        if k == K_DECIMAL:
            d = self.dec or Decimal(0)
            d = DEC_CTX.add(d, Decimal(self.ival))
            if self.fsum != 0.0 or self.fcomp != 0.0:
                d = DEC_CTX.add(d, DEC_CTX.create_decimal(self.fsum + self.fcomp))
            return make_decimal(d)
        if k == K_DOUBLE:
            return self.double_total()
        if INT64_MIN <= self.ival <= INT64_MAX:
            return Int64(self.ival) if k == K_LONG else int_or_long(self.ival)
        return float(self.ival)

    def average(self) -> Any:
        if self.count == 0:
            return None
        if self.kind == K_DECIMAL:
            total = self.total().to_decimal()
            return make_decimal(DEC_CTX.divide(total, Decimal(self.count)))
        return self.double_total() / self.count


class SumAcc(Accumulator):
    __slots__ = ("s",)

    def __init__(self) -> None:
        self.s = SumState()

    def process(self, value: Any) -> None:
        self.s.add(value)

    def result(self) -> Any:
        return self.s.total()


class AvgAcc(SumAcc):
    __slots__ = ()

    def result(self) -> Any:
        return self.s.average()


class CountAcc(Accumulator):
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def process(self, value: Any) -> None:
        self.n += 1

    def result(self) -> Any:
        return int_or_long(self.n)


class MinMaxAcc(Accumulator):
    __slots__ = ("best", "sign")

    def __init__(self, sign: int) -> None:
        self.sign = sign
        self.best: Any = MISSING

    def process(self, value: Any) -> None:
        if value is None or value is MISSING:
            return
        best = self.best
        if best is MISSING:
            self.best = value
            return
        t = type(value)
        if t is type(best) and (t is float or t is int or t is str or t is Int64) and \
                value == value and best == best:
            # Same simple type (no NaN): compare the values themselves.
            if (value < best) if self.sign < 0 else (value > best):
                self.best = value
            return
        k, kb = agg_key(value), agg_key(best)
        if (k < kb) if self.sign < 0 else (k > kb):
            self.best = value

    def result(self) -> Any:
        return None if self.best is MISSING else self.best


class FirstAcc(Accumulator):
    __slots__ = ("seen", "v")

    def __init__(self) -> None:
        self.v: Any = None
        self.seen = False

    def process(self, value: Any) -> None:
        if not self.seen:
            self.seen = True
            self.v = None if value is MISSING else value

    def result(self) -> Any:
        return self.v


class LastAcc(Accumulator):
    __slots__ = ("v",)

    def __init__(self) -> None:
        self.v: Any = None

    def process(self, value: Any) -> None:
        self.v = None if value is MISSING else value

    def result(self) -> Any:
        return self.v


class PushAcc(Accumulator):
    __slots__ = ("items", "tracker")

    def __init__(self, tracker: Tracker) -> None:
        self.items: list = []
        self.tracker = tracker

    def process(self, value: Any) -> None:
        if value is not MISSING:
            self.items.append(value)
            self.tracker.used += approx_size(value)

    def result(self) -> Any:
        return self.items


class AddToSetAcc(Accumulator):
    __slots__ = ("items", "tracker")

    def __init__(self, tracker: Tracker) -> None:
        self.items: dict = {}
        self.tracker = tracker

    def process(self, value: Any) -> None:
        if value is MISSING:
            return
        k = agg_key(value)
        if k not in self.items:
            self.items[k] = value
            self.tracker.used += approx_size(value)

    def result(self) -> Any:
        return list(self.items.values())


class MergeObjectsAcc(Accumulator):
    __slots__ = ("out", "tracker")

    def __init__(self, tracker: Tracker) -> None:
        self.out: dict = {}
        self.tracker = tracker

    def process(self, value: Any) -> None:
        if value is None or value is MISSING:
            return
        if type(value) is not dict:
            raise MongoError(40400, f"$mergeObjects requires object inputs, but input "
                             f"{value_repr(value)} is of type {type_name(value)}")
        self.out.update(value)
        self.tracker.used += approx_size(value)

    def result(self) -> Any:
        return self.out


class StdDevAcc(Accumulator):
    """Welford's online variance over numeric inputs."""

    __slots__ = ("m2", "mean", "n", "sample")

    def __init__(self, sample: bool) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sample = sample

    def process(self, value: Any) -> None:
        if num_kind(value) < 0:
            return
        x = to_float(value)
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def result(self) -> Any:
        if self.sample:
            if self.n < 2:
                return None
            return math.sqrt(self.m2 / (self.n - 1))
        if self.n == 0:
            return None
        return math.sqrt(self.m2 / self.n)


class FirstNAcc(Accumulator):
    __slots__ = ("items", "n", "tracker")

    def __init__(self, n: int, tracker: Tracker) -> None:
        self.n = n
        self.items: list = []
        self.tracker = tracker

    def process(self, value: Any) -> None:
        if len(self.items) < self.n:
            v = None if value is MISSING else value
            self.items.append(v)
            self.tracker.used += approx_size(v)

    def result(self) -> Any:
        return self.items


class LastNAcc(Accumulator):
    __slots__ = ("items", "n", "tracker")

    def __init__(self, n: int, tracker: Tracker) -> None:
        from collections import deque
        self.n = n
        self.items: Any = deque(maxlen=n)
        self.tracker = tracker

    def process(self, value: Any) -> None:
        v = None if value is MISSING else value
        if len(self.items) < self.n:
            self.tracker.used += approx_size(v)
        self.items.append(v)

    def result(self) -> Any:
        return list(self.items)


class _Inv:
    """Inverts the order of a sort key, to build a max-heap on heapq."""

    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __lt__(self, other: _Inv) -> bool:
        return other.k < self.k


class BestNAcc(Accumulator):
    """Keeps the n first (or last) items in (key, arrival) order: $minN $maxN $topN $bottomN
    $top $bottom. Items arrive as (key, output)."""

    __slots__ = ("descending", "heap", "largest", "n", "seq", "single", "tracker")

    def __init__(self, n: int, largest: bool, tracker: Tracker, single: bool = False,
                 descending: bool = False) -> None:
        self.n = n
        self.largest = largest
        self.heap: list = []
        self.seq = 0
        self.tracker = tracker
        self.single = single
        self.descending = descending

    def offer(self, key: Any, out: Any) -> None:
        self.seq += 1
        kk = (key, self.seq)
        heap = self.heap
        if len(heap) < self.n:
            heapq.heappush(heap, (kk, out) if self.largest else (_Inv(kk), out))
            self.tracker.used += approx_size(out)
        elif self.largest:
            if kk > heap[0][0]:
                heapq.heapreplace(heap, (kk, out))
        elif kk < heap[0][0].k:
            heapq.heapreplace(heap, (_Inv(kk), out))

    def process(self, value: Any) -> None:
        self.offer(value[0], value[1])

    def result(self) -> Any:
        if self.largest:
            items = sorted(self.heap, key=lambda e: e[0])
        else:
            items = sorted(self.heap, key=lambda e: e[0].k)
        outs = [e[1] for e in items]
        if self.descending:
            outs.reverse()
        if self.single:
            return outs[0] if outs else None
        return outs


class PercentileAcc(Accumulator):
    __slots__ = ("method", "ps", "single", "tracker", "values")

    def __init__(self, ps: list[float], method: str, single: bool, tracker: Tracker) -> None:
        self.values: list[float] = []
        self.ps = ps
        self.method = method
        self.single = single
        self.tracker = tracker

    def process(self, value: Any) -> None:
        if num_kind(value) >= 0:
            self.values.append(to_float(value))
            self.tracker.used += 8

    def result(self) -> Any:
        vals = sorted(x for x in self.values if x == x)
        out = [percentile_of_sorted(vals, p, self.method) for p in self.ps]
        return out[0] if self.single else out


def percentile_rank(n: int, p: float) -> int:
    """MongoDB's discrete rank: n-1 for p >= 1, else max(0, ceil(n*p) - 1)."""
    if p >= 1.0:
        return n - 1
    return max(0, math.ceil(n * p) - 1)


def percentile_of_sorted(vals: list[float], p: float, method: str) -> float | None:
    if not vals:
        return None
    n = len(vals)
    if method == "continuous":
        rank = p * (n - 1)
        lo, hi = math.floor(rank), math.ceil(rank)
        if lo == hi:
            return vals[lo]
        return (hi - rank) * vals[lo] + (rank - lo) * vals[hi]
    return vals[percentile_rank(n, p)]


# ---------------------------------------------------------------- definitions

class AccumulatorDef:
    """One compiled ``{$op: arg}``: how a document contributes and how to make group state."""

    __slots__ = ("argument", "factory", "op", "spec")

    def __init__(self, op: str, argument: Fn, factory: Callable[[Any, Tracker], Accumulator],
                 spec: Any) -> None:
        self.op = op
        self.argument = argument
        self.factory = factory
        self.spec = spec

    def new(self, group_id: Any = None, tracker: Tracker | None = None) -> Accumulator:
        return self.factory(group_id, tracker or Tracker())


Builder = Callable[[str, Any, Scope], AccumulatorDef]
ACCUMULATORS: dict[str, Builder] = {}


def _accumulator(*names: str) -> Callable[[Builder], Builder]:
    def deco(b: Builder) -> Builder:
        for n in names:
            ACCUMULATORS[n] = b
        return b
    return deco


def compile_accumulator(op: str, arg: Any, *, variables_in_scope: Any = (),
                        scope: Scope | None = None) -> AccumulatorDef:
    """Compile ``{op: arg}`` from a $group field (15952 for unknown operators)."""
    b = ACCUMULATORS.get(op)
    if b is None:
        raise MongoError(15952, f"unknown group operator '{op}'")
    return b(op, arg, scope or Scope(variables_in_scope))


def _unary_arg(op: str, arg: Any, scope: Scope) -> Fn:
    if type(arg) is list:
        if len(arg) != 1:
            raise MongoError(40237, f"The {op} accumulator is a unary operator")
        arg = arg[0]
    return compile_node(arg, scope)


def _simple(factory: Callable[[], Accumulator]) -> Builder:
    def b(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
        return AccumulatorDef(op, _unary_arg(op, arg, scope), lambda gid, tr: factory(), arg)
    return b


ACCUMULATORS["$sum"] = _simple(SumAcc)
ACCUMULATORS["$avg"] = _simple(AvgAcc)
ACCUMULATORS["$min"] = _simple(lambda: MinMaxAcc(-1))
ACCUMULATORS["$max"] = _simple(lambda: MinMaxAcc(1))
ACCUMULATORS["$first"] = _simple(FirstAcc)
ACCUMULATORS["$last"] = _simple(LastAcc)
ACCUMULATORS["$stdDevPop"] = _simple(lambda: StdDevAcc(False))
ACCUMULATORS["$stdDevSamp"] = _simple(lambda: StdDevAcc(True))


def _tracked(cls: type) -> Builder:
    def b(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
        return AccumulatorDef(op, _unary_arg(op, arg, scope), lambda gid, tr: cls(tr), arg)
    return b


ACCUMULATORS["$push"] = _tracked(PushAcc)
ACCUMULATORS["$addToSet"] = _tracked(AddToSetAcc)
ACCUMULATORS["$mergeObjects"] = _tracked(MergeObjectsAcc)


@_accumulator("$count")
def _b_count(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    if type(arg) is not dict or arg:
        raise MongoError(ErrorCode.TypeMismatch, "$count takes no arguments, i.e. $count:{}")
    return AccumulatorDef(op, const_fn(1), lambda gid, tr: CountAcc(), arg)


def _n_spec(op: str, arg: Any, fields: tuple[str, ...], required: tuple[str, ...]) -> dict:
    if type(arg) is not dict:
        raise MongoError(5787801, f"specification must be an object; found {op}: "
                         f"{value_repr(arg)}")
    for k in arg:
        if k not in fields:
            raise MongoError(5787901, f"Unknown argument for 'n' operator: {k}"
                             if "n" in fields else f"Unknown argument to {op} '{k}'")
    for k in required:
        if k not in arg:
            code = {"n": 5787906, "input": 5787907, "sortBy": 5788005, "output": 5788004}[k]
            raise MongoError(code, f"Missing value for '{k}'")
    return arg


def eval_n(n_fn: Fn, group_id: Any, op: str) -> int:
    """Evaluate an accumulator's `n` against the group key (as MongoDB allows)."""
    n = n_fn({"_id": group_id}, {})
    if not is_integral64(n):
        raise MongoError(5787902, f"Value for 'n' must be of integral type, but found "
                         f"{value_repr(n)}")
    n = as_int(n)
    if n <= 0:
        raise MongoError(5787908, f"'n' must be greater than 0, found {n}")
    return n


def _compile_n(op: str, spec: Any, scope: Scope) -> Fn:
    # n may reference the group key only (evaluated against {_id: key}).
    return compile_node(spec, Scope(scope.user_vars))


@_accumulator("$firstN", "$lastN")
def _b_first_last_n(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    spec = _n_spec(op, arg, ("n", "input"), ("n", "input"))
    n_fn = _compile_n(op, spec["n"], scope)
    cls = FirstNAcc if op == "$firstN" else LastNAcc
    return AccumulatorDef(op, compile_node(spec["input"], scope),
                          lambda gid, tr: cls(eval_n(n_fn, gid, op), tr), arg)


class _FilteredBestN(BestNAcc):
    __slots__ = ()

    def process(self, value: Any) -> None:
        if value is None or value is MISSING:
            return
        self.offer(agg_key(value), value)


@_accumulator("$maxN", "$minN")
def _b_max_min_n(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    spec = _n_spec(op, arg, ("n", "input"), ("n", "input"))
    n_fn = _compile_n(op, spec["n"], scope)
    largest = op == "$maxN"

    def make(gid: Any, tr: Tracker) -> Accumulator:
        return _FilteredBestN(eval_n(n_fn, gid, op), largest, tr, descending=largest)
    return AccumulatorDef(op, compile_node(spec["input"], scope), make, arg)


def sort_key_fn(sort_by: Any, op: str) -> Callable[[Any], Any]:
    if type(sort_by) is not dict or not sort_by:
        raise MongoError(5788604, f"expected an object for 'sortBy' in {op}")
    from query.sort import compile_sort
    return compile_sort(sort_by)


@_accumulator("$top", "$bottom", "$topN", "$bottomN")
def _b_top_bottom(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    with_n = op.endswith("N")
    fields = ("n", "sortBy", "output") if with_n else ("sortBy", "output")
    spec = _n_spec(op, arg, fields, fields)
    key = sort_key_fn(spec["sortBy"], op)
    out_fn = compile_node(spec["output"], scope)
    n_fn = _compile_n(op, spec["n"], scope) if with_n else None
    largest = op.startswith("$bottom")

    def argument(doc: Any, v: dict) -> Any:
        o = out_fn(doc, v)
        return key(doc), (None if o is MISSING else o)

    def make(gid: Any, tr: Tracker) -> Accumulator:
        n = eval_n(n_fn, gid, op) if n_fn is not None else 1
        return BestNAcc(n, largest, tr, single=not with_n)
    return AccumulatorDef(op, argument, make, arg)


def parse_percentile_spec(op: str, arg: Any) -> tuple[Any, list[float], str]:
    """(input spec, p list, method) of a $percentile/$median spec."""
    if type(arg) is not dict:
        raise MongoError(7436200, f"specification must be an object; found {op}: "
                         f"{value_repr(arg)}")
    allowed = ("input", "method") if op == "$median" else ("input", "p", "method")
    for k in arg:
        if k not in allowed:
            raise MongoError(ErrorCode.IDLUnknownField, f"{op} found an unknown argument: {k}")
    if "input" not in arg:
        raise MongoError(ErrorCode.IDLFailedToParse, f"{op} requires 'input' to be specified")
    if "method" not in arg:
        raise MongoError(ErrorCode.IDLFailedToParse, f"{op} requires 'method' to be specified")
    method = arg["method"]
    if method not in ("approximate", "discrete", "continuous"):
        raise MongoError(ErrorCode.BadValue, "Currently only 'approximate' can be used as "
                         "percentile 'method'")
    if op == "$median":
        return arg["input"], [0.5], method
    if "p" not in arg:
        raise MongoError(ErrorCode.IDLFailedToParse, f"{op} requires 'p' to be specified")
    ps = arg["p"]
    if type(ps) is not list or not ps or not all(num_kind(p) >= 0 and 0 <= to_float(p) <= 1
                                                  for p in ps):
        raise MongoError(7750301, f"The $percentile 'p' field must be an array of numbers from "
                         f"[0.0, 1.0], but found: {value_repr(ps)}")
    return arg["input"], [to_float(p) for p in ps], method


@_accumulator("$percentile", "$median")
def _b_percentile(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    inp, ps, method = parse_percentile_spec(op, arg)
    single = op == "$median"
    return AccumulatorDef(op, compile_node(inp, scope),
                          lambda gid, tr: PercentileAcc(ps, method, single, tr), arg)


# ---------------------------------------------------------------- expression forms

def _expr_form(op: str, make: Callable[[], Accumulator]) -> None:
    @operator(op)
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = [compile_node(a, scope) for a in arg] if type(arg) is list else \
            [compile_node(arg, scope)]
        single = len(args) == 1

        def f(doc: Any, v: dict) -> Any:
            acc = make()
            if single:
                x = args[0](doc, v)
                if type(x) is list:
                    for e in x:
                        acc.process(e)
                else:
                    acc.process(x)
            else:
                for a in args:
                    acc.process(a(doc, v))
            return acc.result()
        return f


_expr_form("$sum", SumAcc)
_expr_form("$avg", AvgAcc)
_expr_form("$min", lambda: MinMaxAcc(-1))
_expr_form("$max", lambda: MinMaxAcc(1))
_expr_form("$stdDevPop", lambda: StdDevAcc(False))
_expr_form("$stdDevSamp", lambda: StdDevAcc(True))


def _percentile_expr(op: str) -> None:
    @operator(op)
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        inp, ps, method = parse_percentile_spec(op, arg)
        i_fn = compile_node(inp, scope)
        single = op == "$median"

        def f(doc: Any, v: dict) -> Any:
            acc = PercentileAcc(ps, method, single, Tracker())
            x = i_fn(doc, v)
            for e in (x if type(x) is list else [x]):
                acc.process(e)
            return acc.result()
        return f


_percentile_expr("$percentile")
_percentile_expr("$median")
