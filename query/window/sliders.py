"""Removable window states ("sliders") of $setWindowFields: each document enters and leaves
the state once, so a partition costs O(n) whatever the window width. $sum/$avg keep
MongoDB's summation with exact removal, $count a counter, $min/$max a monotonic deque,
$stdDev*/$covariance* running moments; `float_slide` is the numpy-free fast path for
plain doubles. `SLIDERS` maps each function name to its state's factory, `slide` runs one
over a partition's window ranges."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from bson import Decimal128, Int64

from query.expressions.comparison import agg_key
from query.expressions.values import (
    DEC_CTX,
    K_DOUBLE,
    K_INT,
    K_LONG,
    int_or_long,
    make_decimal,
    num_kind,
    to_float,
)
from storage.vocabulary.bson_types import INT64_MAX, INT64_MIN
from storage.vocabulary.missing import MISSING

__all__ = ["SLIDERS", "slide", "float_slide", "plain_numbers", "finite_floats",
           "NumMinMaxSlider"]


class _SumSlider:
    __slots__ = (
        "count",
        "dec",
        "fcomp",
        "fsum",
        "ival",
        "n_dbl",
        "n_dec",
        "n_long",
        "n_nan",
        "n_ninf",
        "n_pinf",
    )

    def __init__(self) -> None:
        self.ival = 0
        self.fsum = 0.0
        self.fcomp = 0.0
        self.dec = Decimal(0)
        self.n_long = self.n_dbl = self.n_dec = 0
        self.n_nan = self.n_pinf = self.n_ninf = 0
        self.count = 0

    def _fadd(self, x: float) -> None:
        s = self.fsum
        t = s + x
        if abs(s) >= abs(x):
            self.fcomp += (s - t) + x
        else:
            self.fcomp += (x - t) + s
        self.fsum = t

    def _update(self, v: Any, sign: int) -> None:
        k = num_kind(v)
        if k < 0:
            return
        self.count += sign
        if k == K_INT:
            self.ival += sign * v
        elif k == K_LONG:
            self.ival += sign * int(v)
            self.n_long += sign
        elif k == K_DOUBLE:
            self.n_dbl += sign
            if v != v:
                self.n_nan += sign
            elif v == math.inf:
                self.n_pinf += sign
            elif v == -math.inf:
                self.n_ninf += sign
            else:
                self._fadd(sign * v)
        else:
            self.n_dec += sign
            d = v.to_decimal()
            if d.is_nan():
                self.n_nan += sign
            elif d.is_infinite():
                if d > 0:
                    self.n_pinf += sign
                else:
                    self.n_ninf += sign
            else:
                self.dec = DEC_CTX.add(self.dec, d) if sign > 0 else DEC_CTX.subtract(self.dec, d)

    def add(self, i: int, v: Any) -> None:
        self._update(v, 1)

    def remove(self, i: int, v: Any) -> None:
        self._update(v, -1)

    def _special(self) -> float | None:
        if self.n_nan or (self.n_pinf and self.n_ninf):
            return math.nan
        if self.n_pinf:
            return math.inf
        if self.n_ninf:
            return -math.inf
        return None

    def total(self) -> Any:
        sp = self._special()
        if self.n_dec:
            if sp is not None:
                return Decimal128(str(Decimal(sp))) if sp == sp else Decimal128("NaN")
            d = DEC_CTX.add(self.dec, Decimal(self.ival))
            f = self.fsum + self.fcomp
            if f:
                d = DEC_CTX.add(d, DEC_CTX.create_decimal(f))
            return make_decimal(d)
        if self.n_dbl:
            if sp is not None:
                return sp
            return float(self.ival) + (self.fsum + self.fcomp)
        if not INT64_MIN <= self.ival <= INT64_MAX:
            return float(self.ival)
        return Int64(self.ival) if self.n_long else int_or_long(self.ival)

    def result(self) -> Any:
        return self.total()


class _AvgSlider(_SumSlider):
    __slots__ = ()

    def result(self) -> Any:
        if self.count == 0:
            return None
        t = self.total()
        if type(t) is Decimal128:
            return make_decimal(DEC_CTX.divide(t.to_decimal(), Decimal(self.count)))
        return to_float(t) / self.count


class _CountSlider:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def add(self, i: int, v: Any) -> None:
        self.n += 1

    def remove(self, i: int, v: Any) -> None:
        self.n -= 1

    def result(self) -> Any:
        return int_or_long(self.n)


class _MinMaxSlider:
    """Monotonic deque; removals must come in index order (they do when sliding)."""

    __slots__ = ("dq", "sign")

    def __init__(self, sign: int) -> None:
        self.dq: deque = deque()
        self.sign = sign

    def add(self, i: int, v: Any) -> None:
        if v is None or v is MISSING:
            return
        k = agg_key(v)
        dq = self.dq
        if self.sign < 0:
            while dq and dq[-1][1] > k:
                dq.pop()
        else:
            while dq and dq[-1][1] < k:
                dq.pop()
        dq.append((i, k, v))

    def remove(self, i: int, v: Any) -> None:
        dq = self.dq
        if dq and dq[0][0] == i:
            dq.popleft()

    def result(self) -> Any:
        return self.dq[0][2] if self.dq else None


class _StdDevSlider:
    __slots__ = ("m2", "mean", "n", "sample")

    def __init__(self, sample: bool) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.sample = sample

    def add(self, i: int, v: Any) -> None:
        if num_kind(v) < 0:
            return
        x = to_float(v)
        self.n += 1
        d = x - self.mean
        self.mean += d / self.n
        self.m2 += d * (x - self.mean)

    def remove(self, i: int, v: Any) -> None:
        if num_kind(v) < 0:
            return
        x = to_float(v)
        if self.n <= 1:
            self.n, self.mean, self.m2 = 0, 0.0, 0.0
            return
        prev_mean = (self.n * self.mean - x) / (self.n - 1)
        self.m2 -= (x - prev_mean) * (x - self.mean)
        self.mean = prev_mean
        self.n -= 1
        if self.n == 1 or self.m2 < 0:
            self.m2 = 0.0

    def result(self) -> Any:
        if self.sample:
            return math.sqrt(max(self.m2, 0.0) / (self.n - 1)) if self.n >= 2 else None
        return math.sqrt(max(self.m2, 0.0) / self.n) if self.n >= 1 else None


class _CovSlider:
    __slots__ = ("c", "mx", "my", "n", "sample")

    def __init__(self, sample: bool) -> None:
        self.n = 0
        self.mx = self.my = self.c = 0.0
        self.sample = sample

    @staticmethod
    def _pair(v: Any) -> tuple[float, float] | None:
        if type(v) is list and len(v) == 2 and num_kind(v[0]) >= 0 and num_kind(v[1]) >= 0:
            return to_float(v[0]), to_float(v[1])
        return None

    def add(self, i: int, v: Any) -> None:
        p = self._pair(v)
        if p is None:
            return
        x, y = p
        self.n += 1
        dx = x - self.mx
        self.mx += dx / self.n
        self.my += (y - self.my) / self.n
        self.c += dx * (y - self.my)

    def remove(self, i: int, v: Any) -> None:
        p = self._pair(v)
        if p is None:
            return
        x, y = p
        if self.n <= 1:
            self.n, self.mx, self.my, self.c = 0, 0.0, 0.0, 0.0
            return
        prev_mx = (self.n * self.mx - x) / (self.n - 1)
        self.c -= (x - prev_mx) * (y - self.my)
        self.my = (self.n * self.my - y) / (self.n - 1)
        self.mx = prev_mx
        self.n -= 1

    def result(self) -> Any:
        if self.sample:
            return self.c / (self.n - 1) if self.n >= 2 else None
        return self.c / self.n if self.n >= 1 else None


def float_slide(vals: list[float], ranges: list[tuple[int, int]], avg: bool) -> list:
    """$sum/$avg over finite doubles: a compensated running sum, no per-value dispatch."""
    out: list[Any] = []
    s = c = 0.0
    lo, hi = 0, -1
    prev_a = prev_b = -1
    for a, b in ranges:
        if b < a:
            out.append(None if avg else 0)
            continue
        if a < prev_a or b < prev_b or hi < lo or (a > hi + 1):
            s = c = 0.0
            lo, hi = a, a - 1
        while hi < b:
            hi += 1
            x = vals[hi]
            t = s + x
            c += ((s - t) + x) if abs(s) >= abs(x) else ((x - t) + s)
            s = t
        while lo < a:
            x = -vals[lo]
            t = s + x
            c += ((s - t) + x) if abs(s) >= abs(x) else ((x - t) + s)
            s = t
            lo += 1
        prev_a, prev_b = a, b
        out.append((s + c) / (hi - lo + 1) if avg else s + c)
    return out


class NumMinMaxSlider(_MinMaxSlider):
    """Min/max over plain numbers (no NaN, no decimals): the values are their own keys."""

    __slots__ = ()

    def add(self, i: int, v: Any) -> None:
        if v is None or v is MISSING:
            return
        dq = self.dq
        if self.sign < 0:
            while dq and dq[-1][1] > v:
                dq.pop()
        else:
            while dq and dq[-1][1] < v:
                dq.pop()
        dq.append((i, v, v))


def plain_numbers(vals: list[Any]) -> bool:
    for v in vals:
        t = type(v)
        if t is float:
            if v != v:
                return False
        elif not (t is int or t is Int64 or v is None or v is MISSING):
            return False
    return True


def finite_floats(vals: list[Any]) -> bool:
    return all(type(v) is float and math.isfinite(v) for v in vals)


def slide(vals: list[Any], ranges: list[tuple[int, int]], make: Callable[[], Any]) -> list:
    """Apply a removable state over monotone windows (falls back to recomputing)."""
    out: list[Any] = []
    st = make()
    lo, hi = 0, -1
    prev_a = prev_b = -1
    for a, b in ranges:
        if b < a:
            out.append(make().result())
            continue
        if a < prev_a or b < prev_b or (a > hi + 1 and hi >= lo):
            # Not sliding forward (or jumped past the state): start over.
            st = make()
            lo, hi = a, a - 1
        elif hi < lo:
            lo, hi = a, a - 1
        add, remove = st.add, st.remove
        while hi < b:
            hi += 1
            add(hi, vals[hi])
        while lo < a:
            remove(lo, vals[lo])
            lo += 1
        prev_a, prev_b = a, b
        out.append(st.result())
    return out


SLIDERS: Final[dict[str, Callable[[], Any]]] = {
    "$sum": _SumSlider,
    "$avg": _AvgSlider,
    "$count": _CountSlider,
    "$min": lambda: _MinMaxSlider(-1),
    "$max": lambda: _MinMaxSlider(1),
    "$stdDevPop": lambda: _StdDevSlider(False),
    "$stdDevSamp": lambda: _StdDevSlider(True),
    "$covariancePop": lambda: _CovSlider(False),
    "$covarianceSamp": lambda: _CovSlider(True),
}
