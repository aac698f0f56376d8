"""Which rows of a bucket can match a filter, from its numeric columns (a columnar
pre-filter for scans of time-series collections).

A filter made of comparisons of top-level measurement fields with numbers
(`{f: {$gt: 95}}`, `{f: 3, g: {$gte: 1, $lt: 2}}`) and of the time field with dates is
evaluated on a bucket's numpy-decoded columns; `select_measurements` then builds
documents for the rows it keeps only, exactly as `unpack_bucket` would for them. The
comparisons are the matcher's (a missing field or NaN matches no comparison with a
number), so the rows kept are exactly those these conditions select.

Conditions on the meta field are left to the caller (they hold for a whole bucket or for
none of it). Conditions on the time field other than comparisons with dates are left to
the full filter: the kept rows are then a superset, and `RowFilter.exact` is False.
Anything else — other operators, non-numeric constants, dotted paths, columns holding
other types, int64 values a double comparison cannot place exactly — makes
`compile_row_filter` or `RowFilter.positions` decline (None): the bucket is then unpacked
whole. The kept rows' other fields are read as numbers where that is exact, else as the
unpacker reads them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import bson
import numpy as np
from bson import Int64
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from storage.bsoncolumn import BSONColumnError, NumericColumn
from storage.bsoncolumn.blocks import NotNumericColumn, decode_numeric
from storage.bsoncolumn.native import DECODED_DTYPES, decode_uniform, decompress_rows
from storage.bsoncolumn.reader import VALUES_CODEC_OPTIONS
from storage.vocabulary.bson_types import T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64

from .metadata import is_meta_path
from .unpack import BucketSpec, NumericBucket, column_values, numeric_bucket

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
    """A conjunction of numeric comparisons on top-level measurement fields and of
    comparisons of the time field with dates (`times`: (operator, milliseconds)).

    `exact`: these are all the filter's conditions but those on the meta field, so the
    rows `positions` keeps are exactly the rows matching the rest of the filter."""

    compares: tuple[_Compare, ...]
    times: tuple[tuple[str, int], ...] = ()
    exact: bool = False

    @property
    def fields(self) -> frozenset[str]:
        return frozenset(c.field for c in self.compares)

    def positions(self, nb: NumericBucket) -> np.ndarray | None:
        """Row positions (into `nb`'s rows) that the conditions keep, or None to decline."""
        mask: np.ndarray | None = None
        if self.times:
            if nb.time is None:
                return None
            for op, ms in self.times:
                m = _OPS[op](nb.time, ms)
                mask = m if mask is None else mask & m
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
        return fn(col.values, float(c)) & col.present  # NaN: False, as in the matcher
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
    """The filter's numeric comparisons of measurement fields and date comparisons of
    the time field, or None when it has other conditions or none of these. Conditions on
    the meta field and other conditions on the time field are left out (the full filter
    runs on what this keeps, so a superset is enough; `exact` says whether anything but
    the meta field's was left out); they are never inside anything but the top-level
    conjunction here, since operators (`$or`, `$and`, `$nor`, ...) decline."""
    compares: list[_Compare] = []
    times: list[tuple[str, int]] = []
    exact = True
    for name, cond in flt.items():
        if is_meta_path(name, meta_field):
            continue
        if name == time_field:
            got = _time_compares(cond)
            if got is None:
                exact = False
            else:
                times += got
            continue
        if name.startswith("$") or "." in name or name == "_id":
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
    if not compares and not times:
        return None
    return RowFilter(tuple(compares), tuple(times), exact)


def _time_compares(cond: Any) -> list[tuple[str, int]] | None:
    """A time field condition as comparisons with milliseconds, or None when it is not
    only comparisons with dates."""
    if type(cond) is DatetimeMS:
        return [("$eq", int(cond))]
    if type(cond) is not dict or not cond:
        return None
    out = []
    for op, v in cond.items():
        if op not in _OPS or type(v) is not DatetimeMS:
            return None
        out.append((op, int(v)))
    return out


def _number(v: Any) -> bool:
    t = type(v)
    return t is int or t is Int64 or (t is float and math.isfinite(v))


_BOX: Final[dict[int, Callable[[Any], Any]]] = {
    T_INT64: Int64, T_INT32: int, T_DOUBLE: float, T_DATE: DatetimeMS, T_BOOL: bool}


def select_measurements(bucket: Mapping[str, Any], spec: BucketSpec,
                        row_filter: RowFilter) -> Iterator[dict[str, Any]] | None:
    """The measurements `unpack_bucket(bucket, spec)` yields at the rows `row_filter`
    keeps, in the same order and with the same values and types; None when the bucket
    cannot be read this way (unpack it whole then).

    The filter's columns are read as numbers; each kept column is read as numbers too
    when that gives its values back exactly, else (ObjectIds, strings, ints widened into
    a double column, ...) only at the kept rows by the native core, or as
    `unpack_columns` reads it; only the kept rows become values."""
    data = bucket.get("data")
    if not isinstance(data, Mapping):
        return None
    nb = numeric_bucket(bucket, spec, row_filter.fields)
    if nb is None or nb.time is None:
        return None
    rows = row_filter.positions(nb)
    if rows is None:
        return None
    if not len(rows):
        return iter(())
    picked: list[int] = rows.tolist()
    control = bucket.get("control")
    version = control.get("version") if isinstance(control, Mapping) else None
    n = len(nb.time)
    cols: list[tuple[str, list[Any], bool]] = []  # (name, values, some row missing)
    for name in data:
        if name == spec.time_field or not spec.keeps(name):
            continue
        if not nb.all_rows:
            return None  # the data's row keys are not the time column's positions
        got = _numeric_values(data[name], n, rows)
        if got is None:
            values = _picked_values(data[name], picked)
            if values is None:
                by_row = column_values(data[name], int(version), name)  # type: ignore[arg-type]
                values = [by_row.get(str(i), _ABSENT) for i in picked]
            got = values, any(v is _ABSENT for v in values)
        cols.append((name, *got))
    return _rows(nb, spec, cols, rows)


_ABSENT: Final = object()


def _column_bytes(col: Any) -> bytes | None:
    """A stored column's BSONColumn bytes (None: not a column)."""
    if not isinstance(col, Binary | bytes) or (isinstance(col, Binary) and col.subtype != 7):
        return None
    return bytes(col)


def _picked_values(col: Any, picked: list[int]) -> list[Any] | None:
    """A stored column's values at rows `picked` (`_ABSENT` where it has none), only
    those rows decoded by the native core; None when it does not take the column
    (`column_values` then decodes it or words the error)."""
    data = _column_bytes(col)
    if data is None:
        return None
    doc = decompress_rows(data, picked)
    if doc is None:
        return None
    got = bson.decode(doc, VALUES_CODEC_OPTIONS)
    if len(got) == len(picked):  # keys "0", "1", ... in order
        return list(got.values())
    return [got.get(str(k), _ABSENT) for k in range(len(picked))]


def _numeric_values(col: Any, n: int, picked: np.ndarray) -> tuple[list[Any], bool] | None:
    """A stored column's values at rows `picked` (`_ABSENT` where it has none), read as
    numbers, and whether one is `_ABSENT`; None when that would not give them back
    exactly."""
    col = _column_bytes(col)
    if col is None:
        return None
    uniform = decode_uniform(col)
    if uniform is not None and uniform[2] == n:  # the common column: one type, no skip
        t, raw, _ = uniform
        values = np.frombuffer(raw, DECODED_DTYPES[t], n)[picked].tolist()
        box = _BOX[t]
        return (values if box is float or box is int else list(map(box, values))), False
    try:
        nc = decode_numeric(col)
    except (NotNumericColumn, BSONColumnError):
        return None
    if nc.kind not in ("int", "double", "date", "bool") or (
            nc.kind == "double" and _widened_ints(nc)):
        return None
    have = len(nc)
    if have > n:
        return None  # a column longer than the time column: unpack_columns decides
    inside = picked[picked < have]  # trailing skipped rows are not encoded
    values = nc.values[inside].tolist()
    present = nc.present[inside].tolist()
    types = nc.types[inside].tolist()
    box_of = _BOX
    out: list[Any] = [box_of[t](v) if p else _ABSENT
                      for v, p, t in zip(values, present, types)]
    out += [_ABSENT] * (len(picked) - len(inside))
    return out, len(inside) < len(picked) or not all(present)


def _rows(nb: NumericBucket, spec: BucketSpec, cols: list[tuple[str, list[Any], bool]],
          picked: np.ndarray) -> Iterator[dict[str, Any]]:
    """The measurements at rows `picked`: time, meta, then `cols` (values per kept row),
    as `unpack_bucket` orders their fields."""
    assert nb.time is not None
    names: list[str] = []
    lists: list[list[Any]] = []
    if spec.keeps_time:
        names.append(spec.time_field)
        lists.append(list(map(DatetimeMS, nb.time[picked].tolist())))
    if spec.keeps_meta and nb.has_meta:
        names.append(spec.meta_field)  # type: ignore[arg-type]
        lists.append([nb.meta] * len(picked))
    for name, values, _ in cols:
        names.append(name)
        lists.append(values)
    rows: Iterator[tuple[Any, ...]] = zip(*lists) if lists else iter([()] * len(picked))
    if any(missing for _, _, missing in cols):
        for row in rows:
            yield {name: v for name, v in zip(names, row) if v is not _ABSENT}
    else:
        for row in rows:
            yield dict(zip(names, row))
