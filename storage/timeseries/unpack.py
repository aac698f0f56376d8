"""Bucket documents back to measurements: the core of `$_internalUnpackBucket`.

Follows MongoDB's BucketUnpacker: each measurement is rebuilt as
`{<time>, <metaField>?, <other data fields in the bucket's data order>}` — the time field
first, then the bucket's `meta` under the user's metaField name (when present), then the
data columns, skipping rows a column does not have. `include` / `exclude` name the
top-level fields to keep or drop (the time and meta fields included); only the columns
needed are decoded. Version 1 buckets are read from their `{"0": v, ...}` objects,
versions 2 and 3 from their BSONColumns (v3 rows come out in stored, not time, order).

Errors carry MongoDB's location codes (5346510, 5346700, 5369601, 5857902, 5857903,
5857900); a malformed BSONColumn is a BadValue.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.int64 import Int64

from storage.bsoncolumn import BSONColumnError, native
from storage.bsoncolumn.blocks import NotNumericColumn, NumericColumn, decode_numeric
from storage.bsonutil import decode
from storage.errors import MongoError
from storage.vocabulary.bson_types import T_DATE, T_DOUBLE, T_INT32, T_INT64
from storage.vocabulary.error_codes import ErrorCode

from .bucket_document import decode_column
from .constants import CONTROL, CONTROL_COUNT, CONTROL_VERSION, DATA, META

__all__ = ["BucketSpec", "NumericBucket", "column_values", "count_measurements",
           "numeric_bucket", "numeric_columns", "unpack_bucket", "unpack_columns"]


@dataclass(frozen=True, slots=True)
class BucketSpec:
    """What to unpack: the collection's fields and an include or exclude set.

    `fields` with `include=True` keeps only those top-level fields; with
    `include=False` drops them. The default (empty exclude set) keeps everything.
    """

    time_field: str
    meta_field: str | None = None
    fields: frozenset[str] = frozenset()
    include: bool = False

    def keeps(self, name: str) -> bool:
        return (name in self.fields) == self.include

    @property
    def keeps_time(self) -> bool:
        return self.keeps(self.time_field)

    @property
    def keeps_meta(self) -> bool:
        return self.meta_field is not None and self.keeps(self.meta_field)


def _bucket_parts(bucket: Mapping[str, Any] | bytes, spec: BucketSpec
                  ) -> tuple[int, Mapping[str, Any], Any, bool, Mapping[str, Any]]:
    if isinstance(bucket, bytes | bytearray | memoryview):
        bucket = decode(bytes(bucket))
    if not bucket:
        raise MongoError(5346510, "An empty bucket cannot be unpacked")
    data = bucket.get(DATA)
    if not isinstance(data, Mapping):
        raise MongoError(ErrorCode.BadValue,
                         "The $_internalUnpackBucket stage requires the data region to be "
                         "an object")
    has_meta = META in bucket
    meta = bucket.get(META)
    if spec.meta_field is None and has_meta:
        raise MongoError(5369601, "The $_internalUnpackBucket stage expects buckets to have "
                         "missing metadata regions if the metaField parameter is not provided")
    control = bucket.get(CONTROL)
    if not isinstance(control, Mapping):
        raise MongoError(5857902, "The $_internalUnpackBucket stage requires 'control' object "
                         "to be present")
    version = control.get(CONTROL_VERSION)
    if isinstance(version, bool) or not isinstance(version, int | float):
        raise MongoError(5857903, "The $_internalUnpackBucket stage requires 'control.version' "
                         "field to be present")
    if version not in (1, 2, 3):
        raise MongoError(5857900, "Invalid bucket version")
    return int(version), data, meta, has_meta, control


def column_values(col: Any, version: int, name: str) -> dict[str, Any]:
    """{row key: value} of one stored data field, as `unpack_columns` decodes it."""
    if version == 1:
        if not isinstance(col, Mapping):
            raise MongoError(ErrorCode.BadValue, f"Bucket data field '{name}' is not an object")
        return col  # type: ignore[return-value]
    if not isinstance(col, Binary | bytes) or (isinstance(col, Binary) and col.subtype != 7):
        raise MongoError(ErrorCode.BadValue,
                         f"Compressed bucket contains uncompressed data field: {name}")
    col = bytes(col)
    fast = _uniform_column(col)
    if fast is not None:
        return fast
    try:
        return decode_column(col)
    except BSONColumnError as e:
        raise MongoError(ErrorCode.BadValue, f"Invalid BSONColumn in bucket field '{name}': "
                         f"{e}") from None


_ROW_KEYS: list[str] = [str(i) for i in range(1024)]
_BOX: dict[int, Any] = {T_INT64: lambda vs: list(map(Int64, vs)), T_INT32: lambda vs: vs,
                        T_DOUBLE: lambda vs: vs, T_DATE: lambda vs: list(map(DatetimeMS, vs))}


def _uniform_column(col: bytes) -> dict[str, Any] | None:
    """{row: value} of a column of one numeric type without skips, decoded by the native
    decoder (None: not such a column, or no native decoder; decode_column then)."""
    got = native.decode_uniform(col)
    if got is None:
        return None
    t, raw, n = got
    values = _BOX[t](np.frombuffer(raw, native.DECODED_DTYPES[t], n).tolist())
    if n > len(_ROW_KEYS):
        _ROW_KEYS.extend(str(i) for i in range(len(_ROW_KEYS), n))
    return dict(zip(_ROW_KEYS[:n], values))


def unpack_columns(bucket: Mapping[str, Any] | bytes, spec: BucketSpec
                   ) -> tuple[list[str], dict[str, dict[str, Any]], Any, bool]:
    """Decode the needed columns: (row keys, {field: {row key: value}}, meta, has meta).

    The time column is always decoded (it drives the rows); it appears in the dict only
    when the spec keeps it.
    """
    version, data, meta, has_meta, _control = _bucket_parts(bucket, spec)
    if not data:
        return [], {}, meta, has_meta
    if spec.time_field not in data:
        raise MongoError(5346700, "The $_internalUnpackBucket stage requires the data region "
                         "to have a timeField object")
    time_vals = column_values(data[spec.time_field], version, spec.time_field)
    rows = list(time_vals.keys())
    cols: dict[str, dict[str, Any]] = {}
    for name, col in data.items():
        if name == spec.time_field:
            if spec.keeps_time:
                cols[name] = time_vals
            continue
        if not spec.keeps(name):
            continue
        cols[name] = column_values(col, version, name)
    return rows, cols, meta, has_meta


def unpack_bucket(bucket: Mapping[str, Any] | bytes, spec: BucketSpec) -> Iterator[dict[str, Any]]:
    """The measurements of one bucket, in stored row order."""
    rows, cols, meta, has_meta = unpack_columns(bucket, spec)
    tf = spec.time_field
    keep_meta = spec.keeps_meta and has_meta
    mf = spec.meta_field
    others = [(name, vals) for name, vals in cols.items() if name != tf]
    time_vals = cols.get(tf)
    for r in rows:
        out: dict[str, Any] = {}
        if time_vals is not None:
            out[tf] = time_vals[r]
        if keep_meta:
            out[mf] = meta  # type: ignore[index]
        for name, vals in others:
            v = vals.get(r, _ABSENT)
            if v is not _ABSENT:
                out[name] = v
        yield out


_ABSENT = object()


def count_measurements(bucket: Mapping[str, Any] | bytes, time_field: str) -> int:
    """BucketUnpacker::computeMeasurementCount: control.count, else the time column size."""
    if isinstance(bucket, bytes | bytearray | memoryview):
        bucket = decode(bytes(bucket))
    control = bucket.get(CONTROL)
    if not isinstance(control, Mapping):
        raise MongoError(5857904, "The $_internalUnpackBucket stage requires 'control' object "
                         "to be present")
    version = control.get(CONTROL_VERSION)
    if isinstance(version, bool) or not isinstance(version, int | float):
        raise MongoError(5857905, "The $_internalUnpackBucket stage requires 'control.version' "
                         "field to be present")
    data = bucket.get(DATA)
    if not isinstance(data, Mapping) or time_field not in data:
        return 0
    if version == 1:
        col = data[time_field]
        return len(col) if isinstance(col, Mapping) else 0
    if version in (2, 3):
        count = control.get(CONTROL_COUNT)
        if isinstance(count, int | float) and not isinstance(count, bool):
            return int(count)
        return len(column_values(data[time_field], 2, time_field))
    raise MongoError(5857901, "Invalid bucket version")


def numeric_columns(bucket: Mapping[str, Any] | bytes, fields: Iterable[str]
                    ) -> dict[str, NumericColumn | None]:
    """Numeric, date and bool columns of a compressed bucket as numpy arrays.

    For each requested field: a `NumericColumn` (values, presence mask, per-row types;
    see storage.bsoncolumn.blocks) decoded without building Python objects, or None when
    the field is absent, not numeric, or the bucket is v1 (use `unpack_columns` then).
    Rows are in stored order, one per measurement (missing rows are not present).
    """
    if isinstance(bucket, bytes | bytearray | memoryview):
        bucket = decode(bytes(bucket))
    control = bucket.get(CONTROL)
    data = bucket.get(DATA)
    out: dict[str, NumericColumn | None] = {}
    compressed = (isinstance(control, Mapping) and control.get(CONTROL_VERSION) in (2, 3)
                  and isinstance(data, Mapping))
    count = None
    if compressed:
        c = control.get(CONTROL_COUNT)  # type: ignore[union-attr]
        count = int(c) if isinstance(c, int | float) and not isinstance(c, bool) else None
    for name in fields:
        col = data.get(name) if compressed else None  # type: ignore[union-attr]
        if not isinstance(col, Binary | bytes):
            out[name] = None
            continue
        try:
            nc = decode_numeric(bytes(col))
        except (NotNumericColumn, BSONColumnError):
            out[name] = None
            continue
        if count is not None and len(nc) < count:
            nc = _align(nc, count)  # trailing skipped rows are not encoded
        out[name] = nc
    return out


@dataclass(frozen=True, slots=True)
class NumericBucket:
    """One bucket's rows as arrays (see `numeric_bucket`).

    `time` holds each row's time in milliseconds since the epoch (int64), or None when not
    asked for; `columns` maps
    each requested field to its `NumericColumn`, aligned with `time`, or None when the
    bucket has no such column (every row missing).
    """

    time: np.ndarray | None
    columns: dict[str, NumericColumn | None]
    meta: Any
    has_meta: bool
    all_rows: bool = True  # the time column skips no row: row i is the data's row "i"


def _align(nc: NumericColumn, n: int) -> NumericColumn:
    """Cut or pad (with missing rows) a column to `n` rows."""
    have = len(nc)
    if have == n:
        return nc
    if have > n:
        return NumericColumn(nc.values[:n], nc.present[:n], nc.types[:n], nc.kind)
    pad = n - have
    return NumericColumn(np.concatenate([nc.values, np.zeros(pad, nc.values.dtype)]),
                         np.concatenate([nc.present, np.zeros(pad, bool)]),
                         np.concatenate([nc.types, np.zeros(pad, nc.types.dtype)]),
                         nc.kind)


def numeric_bucket(bucket: Mapping[str, Any] | bytes, spec: BucketSpec, fields: Iterable[str],
                   *, with_time: bool = True) -> NumericBucket | None:
    """The rows `unpack_bucket` would produce, as arrays of the time column and `fields`.

    Rows are in stored order, one per value of the time column, exactly as
    `unpack_columns` gives them. Malformed buckets raise the errors `unpack_columns` raises.
    Returns None when the bucket cannot be read this way — version 1, a time column that
    is not all dates, or a requested column holding other types (strings, nulls, objects,
    ...): use `unpack_columns` for that bucket then.

    `with_time=False` spares decoding the time column when the caller does not need the
    times: the row count is then `control.count` (every measurement has a time), and
    `time` is None.
    """
    version, data, meta, has_meta, control = _bucket_parts(bucket, spec)
    names = list(fields)
    if not data:
        return NumericBucket(np.zeros(0, np.int64), dict.fromkeys(names), meta, has_meta)
    if spec.time_field not in data:
        raise MongoError(5346700, "The $_internalUnpackBucket stage requires the data region "
                         "to have a timeField object")
    if version == 1:
        return None

    def column(name: str) -> NumericColumn | None:
        col = data[name]
        if not isinstance(col, Binary | bytes) or (isinstance(col, Binary) and col.subtype != 7):
            return None  # unpack_columns reports the error
        try:
            return decode_numeric(bytes(col))
        except (NotNumericColumn, BSONColumnError):
            return None

    count = control.get(CONTROL_COUNT)
    if not with_time and isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        tc = None
        rows = np.ones(count, bool)
        all_rows = True
        n = count
    else:
        tc = column(spec.time_field)
        if tc is None or tc.kind != "date":
            return None
        rows = tc.present
        all_rows = bool(rows.all())
        n = len(tc)
    cols: dict[str, NumericColumn | None] = {}
    for name in names:
        if name not in data:
            cols[name] = None
            continue
        nc = column(name)
        if nc is None:
            return None
        nc = _align(nc, n)
        if not all_rows:
            nc = NumericColumn(nc.values[rows], nc.present[rows], nc.types[rows], nc.kind)
        cols[name] = nc
    if tc is None:
        return NumericBucket(None, cols, meta, has_meta)
    times = tc.values if all_rows else tc.values[rows]
    return NumericBucket(times.astype(np.int64, copy=False), cols, meta, has_meta, all_rows)
