"""Which rows of a bucket can match a filter, from its numeric columns (a columnar
pre-filter for scans of time-series collections).

A filter made only of comparisons of top-level measurement fields with numbers
(`{f: {$gt: 95}}`, `{f: 3, g: {$gte: 1, $lt: 2}}`) is evaluated on a bucket's
numpy-decoded columns; `select_measurements` then builds documents for the rows it keeps
only, exactly as `unpack_bucket` would for them. The result is a superset of the rows
that match (NaN rows are always kept, since MongoDB's NaN rules are the matcher's to
apply), and callers still run the full filter on what it returns, so it only has to
never drop a row that matches.

Anything else — other operators, non-numeric constants, dotted paths, the time or meta
field, columns holding other types, int64 values a double comparison cannot place
exactly — makes `compile_row_filter` or `RowFilter.positions` decline (None): the
bucket is then unpacked whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from bson import Int64
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import NumericColumn
from storage.vocabulary.bson_types import T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64

from .unpack import BucketSpec, NumericBucket, numeric_bucket

__all__ = ["RowFilter", "compile_row_filter", "select_measurements"]

_OPS: Final = {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less,
               "$lte": np.less_equal, "$eq": np.equal}
_EXACT: Final = 2**53  # doubles hold every integer up to here
_I64: Final = 2**63


@dataclass(frozen=True, slots=True)
class _Compare:
    field: str
    op: str
    value: int | float


@dataclass(frozen=True, slots=True)
class RowFilter:
    """A conjunction of numeric comparisons on top-level measurement fields."""

    compares: tuple[_Compare, ...]

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(c.field for c in self.compares)

    def positions(self, nb: NumericBucket) -> np.ndarray | None:
        """Row positions (into `nb`'s rows) that may match, or None to decline."""
        mask: np.ndarray | None = None
        for c in self.compares:
            col = nb.columns.get(c.field)
            if col is None:
                return np.zeros(0, np.int64)  # no row has the field: none matches
            m = _compare(col, c.op, c.value)
            if m is None:
                return None
            mask = m if mask is None else mask & m
        assert mask is not None
        return np.flatnonzero(mask)


def _compare(col: NumericColumn, op: str, c: int | float) -> np.ndarray | None:
    fn = _OPS[op]
    if col.kind == "int":
        bound = _int_bound(op, c)
        if bound is None:
            return None
        if bound is False:
            return np.zeros(len(col), bool)
        return fn(col.values, bound) & col.present
    if col.kind == "double":
        if _widened_ints(col) or (type(c) is not float and abs(c) > _EXACT):
            return None
        return (fn(col.values, float(c)) | np.isnan(col.values)) & col.present
    return None  # dates, bools, timestamps: not numbers to a comparison with a number


def _widened_ints(col: NumericColumn) -> bool:
    """True when a double column also holds ints (decoded as doubles, so an int64 beyond
    2**53 may have lost digits)."""
    return bool(np.any(col.present & (col.types != T_DOUBLE)))


def _int_bound(op: str, c: int | float) -> int | bool | None:
    """The integer bound that selects, among integers, the rows `x op c` selects;
    False when none can; None when out of range."""
    if type(c) is float:
        if op == "$eq":
            if not c.is_integer():
                return False
            c = int(c)
        elif op in ("$gt", "$lte"):
            c = math.floor(c)
        else:
            c = math.ceil(c)
    if not -_I64 <= c < _I64:
        return None
    return int(c)


def compile_row_filter(flt: Mapping[str, Any], time_field: str,
                       meta_field: str | None) -> RowFilter | None:
    """The filter as numeric comparisons, or None when it is not only that."""
    compares: list[_Compare] = []
    for name, cond in flt.items():
        if (name.startswith("$") or "." in name or name in (time_field, meta_field)
                or name == "_id"):
            return None
        if _number(cond):
            compares.append(_Compare(name, "$eq", cond))
            continue
        if not isinstance(cond, Mapping) or not cond:
            return None
        for op, v in cond.items():
            if op not in _OPS or not _number(v):
                return None
            compares.append(_Compare(name, op, v))
    return RowFilter(tuple(compares)) if compares else None


def _number(v: Any) -> bool:
    t = type(v)
    return t is int or t is Int64 or (t is float and math.isfinite(v))


_BOX: Final[dict[int, Callable[[Any], Any]]] = {
    T_INT64: lambda v: Int64(int(v)), T_INT32: int, T_DOUBLE: float,
    T_DATE: lambda v: DatetimeMS(int(v)), T_BOOL: bool}


def select_measurements(bucket: Mapping[str, Any], spec: BucketSpec,
                        row_filter: RowFilter) -> Iterator[dict[str, Any]] | None:
    """The measurements `unpack_bucket(bucket, spec)` yields at the rows `row_filter`
    keeps, in the same order and with the same values and types; None when the bucket
    cannot be read this way (unpack it whole then)."""
    data = bucket.get("data")
    if not isinstance(data, Mapping):
        return None
    names = [n for n in data if n != spec.time_field and spec.keeps(n)]
    nb = numeric_bucket(bucket, spec, set(names) | row_filter.fields)
    if nb is None or nb.time is None:
        return None
    for name in names:
        col = nb.columns.get(name)
        if col is not None and (col.kind not in ("int", "double", "date", "bool") or (
                col.kind == "double" and _widened_ints(col))):
            return None  # values we could not give back exactly
    rows = row_filter.positions(nb)
    if rows is None:
        return None
    return _rows(nb, spec, names, rows)


def _rows(nb: NumericBucket, spec: BucketSpec, names: list[str], rows: np.ndarray
          ) -> Iterator[dict[str, Any]]:
    tf, mf = spec.time_field, spec.meta_field
    keep_time = spec.keeps_time
    keep_meta = spec.keeps_meta and nb.has_meta
    assert nb.time is not None
    cols = [(name, col) for name in names if (col := nb.columns.get(name)) is not None]
    for i in rows.tolist():
        out: dict[str, Any] = {}
        if keep_time:
            out[tf] = DatetimeMS(int(nb.time[i]))
        if keep_meta:
            out[mf] = nb.meta  # type: ignore[index]
        for name, col in cols:
            if col.present[i]:
                out[name] = _BOX[int(col.types[i])](col.values[i])
        yield out
