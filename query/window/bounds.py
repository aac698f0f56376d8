"""Window bounds of $setWindowFields: ``documents`` (positions) and ``range`` (sortBy values,
optionally in time units), and the per-document index ranges they select in a partition.

`WindowBounds.ranges(partition)` returns, for each document, the inclusive index range
``(lo, hi)`` of its window (empty when ``hi < lo``). Both ends move forward monotonically for
documents windows and for range windows over an ascending sortBy, which is what lets removable
window functions slide in O(n).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Final

from bson.datetime_ms import DatetimeMS

from query.dates.arithmetic import TIME_UNITS, date_add
from query.dates.timezones import UTC_TZ
from query.expressions.values import (
    as_int,
    is_integral64,
    num_kind,
    to_decimal,
    to_float,
    value_repr,
)
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["WindowBounds", "UNBOUNDED", "CURRENT", "parse_window", "Partition"]

UNBOUNDED: Final = "unbounded"
CURRENT: Final = "current"


@dataclass
class Partition:
    """The documents of one partition in sortBy order, with what window functions need."""

    docs: list[dict]
    variables: dict
    sort_values: list[Any] | None      # the single sortBy field's values (range windows)
    sort_keys: list[Any] | None        # full sort keys (rank functions)


@dataclass(frozen=True)
class WindowBounds:
    kind: str                  # "documents" | "range"
    lower: Any                 # int/number, UNBOUNDED or CURRENT
    upper: Any
    unit: str | None = None

    @property
    def unbounded(self) -> bool:
        return self.lower == UNBOUNDED and self.upper == UNBOUNDED

    def ranges(self, part: Partition) -> list[tuple[int, int]]:
        n = len(part.docs)
        if self.unbounded:
            return [(0, n - 1)] * n
        if self.kind == "documents":
            lo, hi = self.lower, self.upper
            out = []
            for i in range(n):
                a = 0 if lo == UNBOUNDED else max(0, i + (0 if lo == CURRENT else lo))
                b = n - 1 if hi == UNBOUNDED else min(n - 1, i + (0 if hi == CURRENT else hi))
                out.append((a, b))
            return out
        return self._range_ranges(part)

    def _range_ranges(self, part: Partition) -> list[tuple[int, int]]:
        vals = part.sort_values
        assert vals is not None
        n = len(vals)
        keys = [self._check_value(v) for v in vals]
        out = []
        for i in range(n):
            cur = vals[i]
            if self.lower == UNBOUNDED:
                a = 0
            elif self.lower == CURRENT:
                a = i
            else:
                a = bisect.bisect_left(keys, self._key(self._shift(cur, self.lower)))
            if self.upper == UNBOUNDED:
                b = n - 1
            elif self.upper == CURRENT:
                b = i
            else:
                b = bisect.bisect_right(keys, self._key(self._shift(cur, self.upper))) - 1
            out.append((a, b))
        return out

    def _check_value(self, v: Any) -> Any:
        if self.unit is not None:
            if type(v) is not DatetimeMS:
                raise MongoError(5429513, "Invalid range: Expected the sortBy field to be a "
                                 f"Date, but it was {type_name(v)}")
            return int(v)
        if num_kind(v) < 0:
            if type(v) is DatetimeMS:
                raise MongoError(5429413, "Invalid range: For windows that involve date or "
                                 "time ranges, a unit must be provided.")
            raise MongoError(5429414, "Invalid range: Expected the sortBy field to be a number, "
                             f"but it was {type_name(v)}")
        return self._key(v)

    def _key(self, v: Any) -> Any:
        if type(v) is DatetimeMS:
            return int(v)
        if num_kind(v) == 3:
            return to_decimal(v)
        return v

    def _shift(self, cur: Any, delta: Any) -> Any:
        if self.unit is not None:
            return DatetimeMS(date_add(int(cur), self.unit, as_int(delta), UTC_TZ))
        if num_kind(cur) == 3 or num_kind(delta) == 3:
            return to_decimal(cur) + to_decimal(delta)
        return cur + delta if num_kind(delta) != 2 and num_kind(cur) != 2 else \
            to_float(cur) + to_float(delta)


def _parse_bound(v: Any, kind: str) -> Any:
    if v in (UNBOUNDED, CURRENT):
        return v
    if kind == "documents":
        if not is_integral64(v) or type(v) is bool:
            raise MongoError(ErrorCode.FailedToParse, "Numeric document-based bounds must be an "
                             f"integer, but found: {value_repr(v)}")
        return as_int(v)
    if num_kind(v) < 0:
        raise MongoError(ErrorCode.FailedToParse, "Range-based bounds expression must be a "
                         f"number, or 'current', or 'unbounded', but found: {value_repr(v)}")
    return v


def _bound_order(b: Any, pos_lower: bool) -> Any:
    if b == UNBOUNDED:
        return float("-inf") if pos_lower else float("inf")
    if b == CURRENT:
        return 0
    return to_float(b)


def parse_window(spec: Any, sort_fields: list[tuple[str, int]] | None) -> WindowBounds:
    """Parse ``window: {documents: [lo, hi]}`` or ``{range: [lo, hi], unit: ...}``."""
    if type(spec) is not dict:
        raise MongoError(ErrorCode.FailedToParse, "'window' field must be an object, but found "
                         f"type {type_name(spec)}")
    for k in spec:
        if k not in ("documents", "range", "unit"):
            raise MongoError(ErrorCode.FailedToParse, f"'window' field that has an unknown "
                             f"argument: {k}")
    if "documents" in spec and ("range" in spec or "unit" in spec):
        raise MongoError(ErrorCode.FailedToParse, "Window bounds can specify either 'documents' "
                         "or 'unit', not both.")
    kind = "documents" if "documents" in spec else "range" if "range" in spec else None
    if kind is None:
        raise MongoError(ErrorCode.FailedToParse, "'window' field must specify either "
                         "'documents' or 'range'")
    arr = spec[kind]
    if type(arr) is not list or len(arr) != 2:
        raise MongoError(ErrorCode.FailedToParse, "Window bounds must be a 2-element array: "
                         f"{value_repr(arr)}")
    lo, hi = _parse_bound(arr[0], kind), _parse_bound(arr[1], kind)
    unit = spec.get("unit")
    if unit is not None and (type(unit) is not str or unit not in TIME_UNITS):
        raise MongoError(ErrorCode.FailedToParse, f"'{value_repr(unit)}' is not a valid time unit")
    if lo != UNBOUNDED and hi != UNBOUNDED and \
            _bound_order(lo, True) > _bound_order(hi, False):
        raise MongoError(5339900, f"Lower bound must not exceed upper bound: "
                         f"[{value_repr(arr[0])}, {value_repr(arr[1])}]")
    if lo == UNBOUNDED and hi == UNBOUNDED:
        return WindowBounds(kind, lo, hi, unit)
    if kind == "documents":
        if not sort_fields:
            raise MongoError(5339901, "Document-based bounds require a sortBy")
    else:
        if not sort_fields or len(sort_fields) != 1:
            raise MongoError(5339902, "Range-based bounds require sortBy a single field")
        if sort_fields[0][1] != 1:
            raise MongoError(8947401, "Range-based bounds require an ascending sortBy")
    return WindowBounds(kind, lo, hi, unit)
