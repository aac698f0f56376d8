"""Value reducers: MongoDB's summation, $min/$max, Welford's standard deviation and
percentiles, each an `Accumulator` (``process(value)``, ``result()``).

They are shared by the `$group` accumulators (`query.accumulators`) and by their expression
forms ``{$sum: [...]}`` etc. (`accumulator_forms`), so they live below both. `Tracker` and
`approx_size` are the memory accounting of accumulators whose state grows with the input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bson import Decimal128, Int64

from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.bson_types import INT64_MAX, INT64_MIN
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .comparison import agg_key, agg_key_fn
from .values import (
    DEC_CTX,
    K_DECIMAL,
    K_DOUBLE,
    K_INT,
    K_LONG,
    int_or_long,
    make_decimal,
    num_kind,
    to_float,
    value_repr,
)

__all__ = [
    "Tracker", "approx_size", "Accumulator", "SumState", "SumAcc", "AvgAcc", "MinMaxAcc",
    "StdDevAcc", "PercentileAcc", "percentile_rank", "percentile_of_sorted",
    "parse_percentile_spec",
]


@dataclass(slots=True)
class Tracker:
    """Approximate bytes held by growing accumulators (shared by one $group)."""

    used: int = 0


def approx_size(v: Any, shared: dict[int, tuple[Any, int]] | None = None) -> int:
    """A cheap estimate of a value's BSON size.

    With `shared`, the size of each embedded document is kept there by object, for the
    next values that hold the same object (the meta value of a time-series bucket's
    measurements): an estimate, as if that object did not change in between."""
    t = type(v)
    if t is str:
        return len(v) + 5
    if t is dict:
        # each field: its name (+2) and its value's size, scalars inline (this runs on
        # every document a $sort holds)
        n = 5
        for k, x in v.items():
            tx = type(x)
            if tx is str:
                n += len(k) + len(x) + 7
            elif tx is dict and shared is not None:
                got = shared.get(id(x))
                if got is None or got[0] is not x:
                    if len(shared) >= 64:
                        shared.clear()
                    got = shared[id(x)] = (x, approx_size(x, shared))
                n += len(k) + 2 + got[1]
            elif tx is dict or tx is list or tx is bytes or tx is Decimal128:
                n += len(k) + 2 + approx_size(x)
            else:
                n += len(k) + 10
        return n
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

def double_total(ival: int, fsum: float, fcomp: float) -> float:
    """A sum's total as a double: its integers' exact sum, its doubles' compensated one."""
    if math.isfinite(fsum):
        return float(ival) + (fsum + fcomp)
    return fsum + float(ival)


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
        return double_total(self.ival, self.fsum, self.fcomp)

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


class MinMaxAcc(Accumulator):
    __slots__ = ("best", "key", "sign")

    def __init__(self, sign: int, collator: Collator | None = None) -> None:
        self.sign = sign
        self.best: Any = MISSING
        self.key = agg_key_fn(collator)

    def process(self, value: Any) -> None:
        if value is None or value is MISSING:
            return
        best = self.best
        if best is MISSING:
            self.best = value
            return
        t = type(value)
        key = self.key
        if t is type(best) and (t is float or t is int or t is Int64 or
                                (t is str and key is agg_key)) and \
                value == value and best == best:
            # Same simple type (no NaN): compare the values themselves.
            if (value < best) if self.sign < 0 else (value > best):
                self.best = value
            return
        k, kb = key(value), key(best)
        if (k < kb) if self.sign < 0 else (k > kb):
            self.best = value

    def result(self) -> Any:
        return None if self.best is MISSING else self.best


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


def parse_percentile_spec(op: str, arg: Any) -> tuple[Any, list[float], str]:
    """(input spec, p list, method) of a $percentile/$median spec."""
    if type(arg) is not dict:
        raise MongoError(7436200, f"specification must be an object; found {op}: "
                         f"{value_repr(arg)}")
    allowed = ("input", "method") if op == "$median" else ("input", "p", "method")
    for k in arg:
        if k not in allowed:
            raise MongoError(40415, f"{op} found an unknown argument: {k}")
    if "input" not in arg:
        raise MongoError(40414, f"{op} requires 'input' to be specified")
    if "method" not in arg:
        raise MongoError(40414, f"{op} requires 'method' to be specified")
    method = arg["method"]
    if method not in ("approximate", "discrete", "continuous"):
        raise MongoError(ErrorCode.BadValue, "Currently only 'approximate' can be used as "
                         "percentile 'method'")
    if op == "$median":
        return arg["input"], [0.5], method
    if "p" not in arg:
        raise MongoError(40414, f"{op} requires 'p' to be specified")
    ps = arg["p"]
    if type(ps) is not list or not ps or not all(num_kind(p) >= 0 and 0 <= to_float(p) <= 1
                                                  for p in ps):
        raise MongoError(7750301, f"The $percentile 'p' field must be an array of numbers from "
                         f"[0.0, 1.0], but found: {value_repr(ps)}")
    return arg["input"], [to_float(p) for p in ps], method
