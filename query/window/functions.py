"""Window functions of $setWindowFields.

Framed functions ($sum $avg $count $min $max $stdDevPop $stdDevSamp $covariancePop
$covarianceSamp $first $last $push $addToSet, and every other group accumulator) compute a
value per document over its window. Those with a removable state (`sliders`) slide it: each
document enters and leaves the state once, so a partition costs O(n) whatever the window width
($min and $max use a monotonic deque). Non-removable ones are recomputed per window, except unbounded
windows, computed once per partition.

Positional functions ($shift $rank $denseRank $documentNumber $expMovingAvg $locf
$linearFill) and the calculus ones ($derivative $integral) have their own parsers and rules.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from bson.datetime_ms import DatetimeMS

from query.accumulators import ACCUMULATORS, compile_accumulator
from query.expressions.core import Scope, compile_node, const_value, is_const
from query.expressions.reducers import Tracker
from query.expressions.registry import Fn
from query.expressions.values import (
    DEC_CTX,
    K_DECIMAL,
    as_int,
    is_integral64,
    make_decimal,
    num_kind,
    to_decimal,
    to_float,
    value_repr,
)
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.time_units import UNIT_MS

from .bounds import UNBOUNDED, Partition, WindowBounds, parse_window
from .sliders import SLIDERS, NumMinMaxSlider, finite_floats, float_slide, plain_numbers, slide

__all__ = ["WindowFunction", "parse_window_function", "WINDOW_FUNCTION_NAMES"]


class WindowFunction:
    """Computes one output field for every document of a partition."""

    needs_sort_values = False
    needs_sort_keys = False

    def compute(self, part: Partition) -> list[Any]:
        raise NotImplementedError


class FramedFunction(WindowFunction):
    """An accumulator over each document's window."""

    def __init__(self, op: str, arg: Fn, bounds: WindowBounds,
                 acc_factory: Callable[[], Any] | None) -> None:
        self.op = op
        self.arg = arg
        self.bounds = bounds
        self.acc_factory = acc_factory
        self.needs_sort_values = bounds.kind == "range" and not bounds.unbounded

    def compute(self, part: Partition) -> list[Any]:
        docs = part.docs
        variables = part.variables
        arg = self.arg
        vals = [arg(d, variables) for d in docs]
        n = len(docs)
        op = self.op
        if n == 0:
            return []
        ranges = self.bounds.ranges(part)
        if op in ("$first", "$last"):
            out: list[Any] = []
            for a, b in ranges:
                if b < a:
                    out.append(None)
                else:
                    v = vals[a] if op == "$first" else vals[b]
                    out.append(None if v is MISSING else v)
            return out
        if op == "$push":
            present = [v for v in vals]
            if self.bounds.unbounded:
                r = [v for v in present if v is not MISSING]
                return [r] * n
            return [[v for v in present[a:b + 1] if v is not MISSING] for a, b in ranges]
        if op in SLIDERS:
            if self.bounds.unbounded:
                st = SLIDERS[op]()
                for i, v in enumerate(vals):
                    st.add(i, v)
                return [st.result()] * n
            if op in ("$sum", "$avg") and finite_floats(vals):
                return float_slide(vals, ranges, op == "$avg")
            if op in ("$min", "$max") and plain_numbers(vals):
                sign = -1 if op == "$min" else 1
                return slide(vals, ranges, lambda: NumMinMaxSlider(sign))
            return slide(vals, ranges, SLIDERS[op])
        # Any other accumulator: recompute per window (once when unbounded).
        assert self.acc_factory is not None
        if self.bounds.unbounded:
            acc = self.acc_factory()
            for v in vals:
                acc.process(v)
            r = acc.result()
            return [None if r is MISSING else r] * n
        out = []
        for a, b in ranges:
            acc = self.acc_factory()
            for j in range(a, b + 1):
                acc.process(vals[j])
            r = acc.result()
            out.append(None if r is MISSING else r)
        return out


# ---------------------------------------------------------------- positional functions

class ShiftFunction(WindowFunction):
    def __init__(self, output: Fn, by: int, default: Any) -> None:
        self.output = output
        self.by = by
        self.default = default

    def compute(self, part: Partition) -> list[Any]:
        docs = part.docs
        n = len(docs)
        out = []
        for i in range(n):
            j = i + self.by
            if 0 <= j < n:
                v = self.output(docs[j], part.variables)
                out.append(None if v is MISSING else v)
            else:
                out.append(self.default)
        return out


class RankFunction(WindowFunction):
    needs_sort_keys = True

    def __init__(self, op: str) -> None:
        self.op = op

    def compute(self, part: Partition) -> list[Any]:
        n = len(part.docs)
        if self.op == "$documentNumber":
            return list(range(1, n + 1))
        keys = part.sort_keys
        assert keys is not None
        out = []
        rank = dense = 0
        for i in range(n):
            if i == 0 or keys[i] != keys[i - 1]:
                rank = i + 1
                dense += 1
            out.append(rank if self.op == "$rank" else dense)
        return out


class ExpMovingAvgFunction(WindowFunction):
    def __init__(self, input_fn: Fn, alpha: Decimal) -> None:
        self.input = input_fn
        self.alpha = alpha

    def compute(self, part: Partition) -> list[Any]:
        alpha = self.alpha
        one_minus = DEC_CTX.subtract(Decimal(1), alpha)
        cur: Decimal | None = None
        is_dec = False
        out: list[Any] = []
        for d in part.docs:
            v = self.input(d, part.variables)
            k = num_kind(v)
            if k >= 0:
                if k == K_DECIMAL:
                    is_dec = True
                x = to_decimal(v)
                cur = x if cur is None else DEC_CTX.add(DEC_CTX.multiply(x, alpha),
                                                        DEC_CTX.multiply(cur, one_minus))
            if cur is None:
                out.append(None)
            else:
                out.append(make_decimal(cur) if is_dec else float(cur))
        return out


class LocfFunction(WindowFunction):
    def __init__(self, input_fn: Fn) -> None:
        self.input = input_fn

    def compute(self, part: Partition) -> list[Any]:
        last: Any = None
        out = []
        for d in part.docs:
            v = self.input(d, part.variables)
            if v is not None and v is not MISSING:
                last = v
            out.append(last)
        return out


def _sort_number(v: Any, op: str) -> Any:
    if type(v) is DatetimeMS:
        return int(v)
    if num_kind(v) < 0:
        raise MongoError(605001, f"{op} requires the sortBy field to be numeric or a date, "
                         f"but found {type_name(v)}")
    return to_float(v)


class LinearFillFunction(WindowFunction):
    needs_sort_values = True

    def __init__(self, input_fn: Fn) -> None:
        self.input = input_fn

    def compute(self, part: Partition) -> list[Any]:
        xs_raw = part.sort_values
        assert xs_raw is not None
        vals = [self.input(d, part.variables) for d in part.docs]
        n = len(vals)
        if n == 0:
            return []
        xs = [_sort_number(x, "$linearFill") for x in xs_raw]
        for i in range(1, n):
            if xs[i] == xs[i - 1]:
                raise MongoError(6050106, "There can be no repeated values in the sort field in "
                                 "the same partition")
        known = []
        for i, v in enumerate(vals):
            if v is None or v is MISSING:
                continue
            if num_kind(v) < 0:
                raise MongoError(605001, f"$linearFill only supports numeric types, found "
                                 f"{type_name(v)}")
            known.append(i)
        out: list[Any] = []
        for i, v in enumerate(vals):
            if v is not None and v is not MISSING:
                out.append(v)
                continue
            k = bisect.bisect_left(known, i)
            if k == 0 or k == len(known):
                out.append(None)
                continue
            i0, i1 = known[k - 1], known[k]
            y0, y1 = vals[i0], vals[i1]
            if num_kind(y0) == K_DECIMAL or num_kind(y1) == K_DECIMAL:
                t = Decimal(xs[i] - xs[i0]) / Decimal(xs[i1] - xs[i0])
                out.append(make_decimal(to_decimal(y0) + (to_decimal(y1) - to_decimal(y0)) * t))
            else:
                t = (xs[i] - xs[i0]) / (xs[i1] - xs[i0])
                out.append(to_float(y0) + (to_float(y1) - to_float(y0)) * t)
        return out


class DerivativeFunction(WindowFunction):
    needs_sort_values = True

    def __init__(self, input_fn: Fn, unit: str | None, bounds: WindowBounds) -> None:
        self.input = input_fn
        self.unit = unit
        self.bounds = bounds

    def _times(self, part: Partition) -> list[Any]:
        out: list[float] = []
        assert part.sort_values is not None
        for t in part.sort_values:
            if self.unit is not None:
                if type(t) is not DatetimeMS:
                    raise MongoError(5624900, "$derivative with 'unit' expects the sortBy field "
                                     "to be a Date")
                out.append(int(t))
            else:
                if type(t) is DatetimeMS:
                    raise MongoError(5624901, "$derivative where the sortBy is a Date requires "
                                     "an 'unit'")
                if num_kind(t) < 0:
                    raise MongoError(5624902, "$derivative (with no 'unit') expects the sortBy "
                                     "field to be numeric")
                out.append(to_float(t))
        return out

    def compute(self, part: Partition) -> list[Any]:
        ts = self._times(part)
        vals = [self.input(d, part.variables) for d in part.docs]
        out: list[Any] = []
        for a, b in self.bounds.ranges(part):
            if b <= a:
                out.append(None)
                continue
            y0, y1 = vals[a], vals[b]
            for y in (y0, y1):
                if y is None or y is MISSING:
                    raise MongoError(5624903, "$derivative input must not be null or missing")
                if num_kind(y) < 0:
                    raise MongoError(5624904, f"$derivative input must be numeric, found "
                                     f"{type_name(y)}")
            dt = ts[b] - ts[a]
            if self.unit is not None:
                dt = dt / UNIT_MS[self.unit]
            if dt == 0:
                out.append(None)
                continue
            if num_kind(y0) == K_DECIMAL or num_kind(y1) == K_DECIMAL:
                out.append(make_decimal((to_decimal(y1) - to_decimal(y0)) /
                                        DEC_CTX.create_decimal(dt)))
            else:
                out.append((to_float(y1) - to_float(y0)) / dt)
        return out


class IntegralFunction(WindowFunction):
    needs_sort_values = True

    def __init__(self, input_fn: Fn, unit: str | None, bounds: WindowBounds) -> None:
        self.input = input_fn
        self.unit = unit
        self.bounds = bounds

    def compute(self, part: Partition) -> list[Any]:
        assert part.sort_values is not None
        ts: list[Any] = []
        for t in part.sort_values:
            if self.unit is not None:
                if type(t) is not DatetimeMS:
                    raise MongoError(5423901, "$integral with 'unit' expects the sortBy field to "
                                     "be a Date")
                ts.append(int(t))
            else:
                if num_kind(t) < 0:
                    raise MongoError(5423902, "$integral (with no 'unit') expects the sortBy "
                                     "field to be numeric")
                ts.append(to_float(t))
        vals = [self.input(d, part.variables) for d in part.docs]
        # Prefix sums of trapezoids over the numeric points, in order.
        pts = [i for i, v in enumerate(vals) if num_kind(v) >= 0]
        prefix = [0.0]
        for k in range(1, len(pts)):
            i0, i1 = pts[k - 1], pts[k]
            dt = ts[i1] - ts[i0]
            if self.unit is not None:
                dt = dt / UNIT_MS[self.unit]
            area = dt * (to_float(vals[i0]) + to_float(vals[i1])) / 2.0
            prefix.append(prefix[-1] + area)
        out: list[Any] = []
        for a, b in self.bounds.ranges(part):
            first = bisect.bisect_left(pts, a)
            last = bisect.bisect_right(pts, b) - 1
            if b < a or last < first:
                out.append(None)
            else:
                out.append(prefix[last] - prefix[first])
        return out


# ---------------------------------------------------------------- parsing

def _fail(msg: str) -> MongoError:
    return MongoError(ErrorCode.FailedToParse, msg)


_NO_WINDOW: Final = ("$shift", "$rank", "$denseRank", "$documentNumber", "$expMovingAvg",
                     "$locf", "$linearFill")
_FRAMED_EXTRA: Final = ("$count", "$covariancePop", "$covarianceSamp")
WINDOW_FUNCTION_NAMES: Final = tuple(sorted(set(ACCUMULATORS) | set(_NO_WINDOW) |
                                            set(_FRAMED_EXTRA) | {"$derivative", "$integral"}))


def _parse_unit(unit: Any, op: str) -> str | None:
    if unit is MISSING:
        return None
    if type(unit) is not str or unit not in UNIT_MS:
        if type(unit) is str and unit in ("month", "quarter", "year"):
            raise MongoError(5490710, "unit must be 'week' or smaller")
        raise _fail(f"{op} 'unit' must be a time unit string, found {value_repr(unit)}")
    return unit


def parse_window_function(op: str, arg: Any, window: Any, scope: Scope,
                          sort_fields: list[tuple[str, int]] | None) -> WindowFunction:
    """Compile ``{op: arg, window: window}`` of a $setWindowFields output field."""
    if op in _NO_WINDOW and window is not MISSING:
        if op in ("$rank", "$denseRank", "$documentNumber"):
            raise MongoError(5371601, "Rank style window functions take no other arguments")
        raise _fail(f"'window' field is not allowed in {op}")
    if op in ("$rank", "$denseRank", "$documentNumber"):
        if arg != {}:
            raise MongoError(5371603, f"{op} must be specified with '{{}}' as the value")
        if op != "$documentNumber" and (not sort_fields or len(sort_fields) != 1):
            raise MongoError(5371602, f"{op} must be specified with a top level sortBy "
                             "expression with exactly one element")
        return RankFunction(op)
    if op == "$shift":
        if type(arg) is not dict:
            raise _fail("Argument to $shift must be an object")
        for k in arg:
            if k not in ("output", "by", "default"):
                raise _fail(f"Unknown argument in $shift: {k}")
        if "output" not in arg:
            raise _fail("$shift requires an 'output' expression.")
        if "by" not in arg:
            raise _fail("$shift requires 'by' as an integer value.")
        by = arg["by"]
        if not is_integral64(by) or type(by) is bool or not -(2**31) <= as_int(by) < 2**31:
            raise _fail("'$shift:by' field must be an integer, but found by: "
                        f"{value_repr(by)}. To use $shift, the 'by' field must be a constant "
                        "integer.")
        default: Any = None
        if "default" in arg:
            dfn = compile_node(arg["default"], scope)
            if not is_const(dfn):
                raise _fail("'$shift:default' expression must yield a constant value.")
            default = const_value(dfn)
            if default is MISSING:
                default = None
        if not sort_fields:
            raise _fail("$shift requires a sortBy")
        return ShiftFunction(compile_node(arg["output"], scope), as_int(by), default)
    if op == "$expMovingAvg":
        if type(arg) is not dict:
            raise _fail("$expMovingAvg must have exactly one of 'N' or 'alpha' fields")
        for k in arg:
            if k not in ("input", "N", "alpha"):
                raise _fail(f"Got unrecognized field in $expMovingAvg, $expMovingAvg sub object "
                            f"must have exactly two fields: An 'input' field, and either an 'N' "
                            f"field or an 'alpha' field: {k}")
        if "input" not in arg:
            raise _fail("$expMovingAvg requires an 'input' field")
        if ("N" in arg) == ("alpha" in arg):
            raise _fail("$expMovingAvg sub object must have exactly two fields: An 'input' "
                        "field, and either an 'N' field or an 'alpha' field")
        if "N" in arg:
            nv = arg["N"]
            if not is_integral64(nv) or type(nv) is bool or as_int(nv) <= 0:
                raise _fail("'N' field must be an integer, but found type "
                            f"{type_name(nv)}" if not is_integral64(nv) else
                            "'N' must be greater than zero. Got " + value_repr(nv))
            alpha = Decimal(2) / Decimal(as_int(nv) + 1)
        else:
            av = arg["alpha"]
            if num_kind(av) < 0 or not 0 < to_float(av) < 1:
                raise _fail("'alpha' must be between 0 and 1 (exclusive), found "
                            f"{value_repr(av)}")
            alpha = to_decimal(av)
        if not sort_fields:
            raise _fail("$expMovingAvg requires an explicit 'sortBy'")
        return ExpMovingAvgFunction(compile_node(arg["input"], scope), alpha)
    if op == "$locf":
        return LocfFunction(compile_node(arg, scope))
    if op == "$linearFill":
        if not sort_fields or len(sort_fields) != 1:
            raise _fail("$linearFill requires a sortBy with exactly one field")
        return LinearFillFunction(compile_node(arg, scope))
    if op in ("$derivative", "$integral"):
        if type(arg) is not dict:
            raise _fail(f"{op} expects an object of the form {{input: <expr>, unit: <string>}}")
        for k in arg:
            if k not in ("input", "unit"):
                raise _fail(f"{op} got unexpected argument: {k}")
        if "input" not in arg:
            raise _fail(f"{op} requires an 'input' expression")
        unit = _parse_unit(arg.get("unit", MISSING), op)
        if not sort_fields or len(sort_fields) != 1:
            raise _fail(f"{op} requires a sortBy with exactly one field")
        if op == "$derivative" and window is MISSING:
            raise _fail("$derivative requires explicit window bounds")
        bounds = parse_window(window, sort_fields) if window is not MISSING else \
            WindowBounds("documents", UNBOUNDED, UNBOUNDED)
        cls = DerivativeFunction if op == "$derivative" else IntegralFunction
        f = cls(compile_node(arg["input"], scope), unit, bounds)
        return f
    bounds = parse_window(window, sort_fields) if window is not MISSING else \
        WindowBounds("documents", UNBOUNDED, UNBOUNDED)
    if op == "$count":
        if arg != {}:
            raise _fail("$count must be specified with '{}' as the value")
        return FramedFunction(op, lambda d, v: 1, bounds, None)
    if op in ("$covariancePop", "$covarianceSamp"):
        if type(arg) is not list or len(arg) != 2:
            raise _fail(f"{op} requires an array of exactly two expressions")
        xs = compile_node(arg, scope)
        return FramedFunction(op, xs, bounds, None)
    if op in ACCUMULATORS:
        adef = compile_accumulator(op, arg, scope=scope)
        tracker = Tracker()
        factory: Callable[[], Any] | None = None
        if op not in SLIDERS and op not in ("$first", "$last", "$push"):
            factory = lambda: adef.new(None, tracker)  # noqa: E731
        return FramedFunction(op, adef.argument, bounds, factory)
    raise _fail(f"Unrecognized window function, {op}")
