"""Index bounds: per-field intervals of BSON values -> byte ranges of index keys.

The query planner describes an index scan the way MongoDB's IndexBounds does: for
each field of the key pattern, a list of intervals over BSON values, in ascending
value order, not overlapping, e.g. for ``{a: 1, b: -1}`` and ``a in [1, 2], b > 5``::

    [[Interval.point(1), Interval.point(2)],
     [Interval(5, False, math.inf, True)]]

(``((low, low_inclusive), (high, high_inclusive))`` tuples are accepted in place of
`Interval`; ``Interval.all()`` is ``[MinKey, MaxKey]``.)

`plan_ranges(bounds, directions)` turns that into `KeyRange`s over the encoded keys
(`storage.keystring`, descending fields inverted) plus, when the ranges alone are
wider than the bounds, a `KeyFilter` that checks the remaining fields of each key
with byte comparisons. Fields whose intervals are all points expand into one prefix
per combination (up to `MAX_POINT_PREFIXES`), the first other field becomes the
range, later fields are filtered - exactly MongoDB's bounds semantics, though it
checks later fields by scanning rather than by seeking.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from bson import MaxKey, MinKey

from storage.engine.base import KeyRange
from storage.keystring import MAX_KEY_BYTES, MIN_KEY_BYTES, component_spans, encode_value, invert
from storage.keystring import prefix_successor as _succ

__all__ = ["Interval", "KeyFilter", "IndexBounds", "plan_ranges", "MAX_POINT_PREFIXES"]

MAX_POINT_PREFIXES: Final = 10_000


@dataclass(frozen=True, slots=True)
class Interval:
    """Values v with low <(=) v <(=) high in BSON order."""

    low: Any
    low_inclusive: bool
    high: Any
    high_inclusive: bool

    @classmethod
    def point(cls, v: Any) -> Interval:
        return cls(v, True, v, True)

    @classmethod
    def all(cls) -> Interval:
        return cls(MinKey(), True, MaxKey(), True)

    @classmethod
    def coerce(cls, x: Interval | Sequence[Any]) -> Interval:
        if isinstance(x, Interval):
            return x
        (low, low_inc), (high, high_inc) = x
        return cls(low, bool(low_inc), high, bool(high_inc))


IndexBounds = Sequence[Sequence[Interval | Sequence[Any]]]


@dataclass(frozen=True, slots=True)
class _ByteInterval:
    lo: bytes
    lo_inc: bool
    hi: bytes
    hi_inc: bool

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi and self.lo_inc and self.hi_inc

    def contains(self, b: bytes) -> bool:
        if b < self.lo or (b == self.lo and not self.lo_inc):
            return False
        return not (b > self.hi or (b == self.hi and not self.hi_inc))


def _field_intervals(intervals: Sequence[Interval | Sequence[Any]], direction: int
                     ) -> list[_ByteInterval]:
    out = []
    for raw in intervals:
        iv = Interval.coerce(raw)
        lo, hi = encode_value(iv.low), encode_value(iv.high)
        lo_inc, hi_inc = iv.low_inclusive, iv.high_inclusive
        if direction < 0:
            lo, hi, lo_inc, hi_inc = invert(hi), invert(lo), hi_inc, lo_inc
        if lo > hi or (lo == hi and not (lo_inc and hi_inc)):
            continue  # empty
        out.append(_ByteInterval(lo, lo_inc, hi, hi_inc))
    out.sort(key=lambda b: (b.lo, not b.lo_inc))
    return out


def _is_full(ivs: list[_ByteInterval], direction: int) -> bool:
    if len(ivs) != 1:
        return False
    lo, hi = (MIN_KEY_BYTES, MAX_KEY_BYTES) if direction >= 0 else (invert(MAX_KEY_BYTES),
                                                                      invert(MIN_KEY_BYTES))
    iv = ivs[0]
    return iv.lo == lo and iv.hi == hi and iv.lo_inc and iv.hi_inc


class KeyFilter:
    """Checks the fields after the range field of a key against their intervals."""

    __slots__ = ("_checks", "_directions")

    def __init__(self, directions: Sequence[int],
                 checks: list[tuple[int, list[_ByteInterval]]]) -> None:
        self._directions = tuple(directions)
        self._checks = [(i, [iv.lo for iv in ivs], ivs) for i, ivs in checks]

    def __call__(self, key: bytes) -> bool:
        spans = component_spans(key, self._directions)
        for i, los, ivs in self._checks:
            b = spans[i]
            j = bisect.bisect_right(los, b)
            if not any(iv.contains(b) for iv in ivs[max(0, j - 2):j + 1]):
                return False
        return True


def plan_ranges(bounds: IndexBounds, directions: Sequence[int]
                ) -> tuple[list[KeyRange], KeyFilter | None]:
    """Ascending, disjoint key ranges covering `bounds`, and a filter for the fields
    the ranges do not pin down (None when the ranges are exact)."""
    if len(bounds) != len(directions):
        raise ValueError(f"bounds for {len(bounds)} fields, index has {len(directions)}")
    fields = [_field_intervals(ivs, d) for ivs, d in zip(bounds, directions)]
    if any(not f for f in fields):
        return [], None
    prefixes = [b""]
    p = 0
    while p < len(fields) and all(iv.is_point for iv in fields[p]):
        if len(prefixes) * len(fields[p]) > MAX_POINT_PREFIXES:
            break
        prefixes = [pre + iv.lo for pre in prefixes for iv in fields[p]]
        p += 1
    ranges: list[KeyRange] = []
    if p == len(fields):
        ranges = [KeyRange(pre, True, pre, True) for pre in prefixes]
        return ranges, None
    for pre in prefixes:
        for iv in fields[p]:
            if iv.lo_inc:
                lo, lo_inc = pre + iv.lo, True
            else:
                succ = _succ(pre + iv.lo)
                if succ is None:
                    continue
                lo, lo_inc = succ, True
            if iv.hi_inc:
                hi = _succ(pre + iv.hi)
                hi_inc = False
            else:
                hi, hi_inc = pre + iv.hi, False
            ranges.append(KeyRange(lo, lo_inc, hi, hi_inc))
    checks = [(i, fields[i]) for i in range(p + 1, len(fields))
              if not _is_full(fields[i], directions[i])]
    return ranges, (KeyFilter(directions, checks) if checks else None)
