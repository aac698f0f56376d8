"""Group accumulators: $sum $avg $min $max $first $last $push $addToSet $count $mergeObjects
$stdDevPop $stdDevSamp $top $bottom $topN $bottomN $firstN $lastN $maxN $minN $median
$percentile.

`compile_accumulator(op, arg)` turns one ``{$op: arg}`` of a `$group` (or `$bucket`,
`$bucketAuto`) into an `AccumulatorDef`; ``definition.argument(doc, vars)`` computes what a
document contributes and ``definition.new(group_id, tracker)`` makes the per-group state with
``process(value)`` and ``result()``. Accumulators whose state grows with the input ($push,
$addToSet, the N-accumulators, percentiles) add the approximate size of what they keep to
``tracker.used`` so `$group` can enforce its memory limit.

The value reducers that also have an expression form ($sum, $avg, $min, $max, $stdDev*,
$percentile, $median) live in `query.expressions.reducers`, below both users.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from query.expressions.comparison import agg_key
from query.expressions.core import Scope, compile_node, const_fn
from query.expressions.reducers import (
    Accumulator,
    AvgAcc,
    MinMaxAcc,
    PercentileAcc,
    StdDevAcc,
    SumAcc,
    Tracker,
    approx_size,
    parse_percentile_spec,
)
from query.expressions.registry import Fn
from query.expressions.values import as_int, int_or_long, is_integral64, value_repr
from query.sort import compile_sort
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = ["AccumulatorDef", "ACCUMULATORS", "compile_accumulator"]


class CountAcc(Accumulator):
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def process(self, value: Any) -> None:
        self.n += 1

    def result(self) -> Any:
        return int_or_long(self.n)



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


def _min_max(sign: int) -> Builder:
    def b(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
        collator = scope.collator
        return AccumulatorDef(op, _unary_arg(op, arg, scope),
                              lambda gid, tr: MinMaxAcc(sign, collator), arg)
    return b


ACCUMULATORS["$sum"] = _simple(SumAcc)
ACCUMULATORS["$avg"] = _simple(AvgAcc)
ACCUMULATORS["$min"] = _min_max(-1)
ACCUMULATORS["$max"] = _min_max(1)
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


@_accumulator("$percentile", "$median")
def _b_percentile(op: str, arg: Any, scope: Scope) -> AccumulatorDef:
    inp, ps, method = parse_percentile_spec(op, arg)
    single = op == "$median"
    return AccumulatorDef(op, compile_node(inp, scope),
                          lambda gid, tr: PercentileAcc(ps, method, single, tr), arg)
