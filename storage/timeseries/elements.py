"""Decoded values to raw BSON elements (type byte, value bytes) for the column builders.

The common measurement types are packed directly (the bytes `bson.encode` would produce
with storage.bsonutil.CODEC_OPTIONS); everything else goes through `bson.encode`, so
the result is always what pymongo writes for the value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

import bson
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS

from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.bson_types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    T_BOOL,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_NULL,
    T_OID,
    T_STRING,
)

__all__ = ["DOUBLE_STRUCT", "ELEMENT_PACKERS", "INT64_STRUCT", "int_value_size", "to_element"]

DOUBLE_STRUCT: Final = struct.Struct("<d")
_I: Final = struct.Struct("<i")
INT64_STRUCT: Final = struct.Struct("<q")


def _generic(v: Any) -> tuple[int, bytes]:
    raw = bson.encode({"": v}, codec_options=CODEC_OPTIONS)
    return raw[4], raw[6:-1]


def int_value_size(v: int) -> int | None:
    """Bytes of a Python int's BSON value as `to_element` packs it: 4 (int32) or 8
    (int64); None beyond int64, which BSON cannot hold."""
    if INT32_MIN <= v <= INT32_MAX:
        return 4
    if INT64_MIN <= v <= INT64_MAX:
        return 8
    return None


def _int(v: int) -> tuple[int, bytes]:
    if INT32_MIN <= v <= INT32_MAX:
        return T_INT32, _I.pack(v)
    if INT64_MIN <= v <= INT64_MAX:
        return T_INT64, INT64_STRUCT.pack(v)
    return _generic(v)  # raises like pymongo


def _int64(v: Int64) -> tuple[int, bytes]:
    return T_INT64, INT64_STRUCT.pack(v)


def _float(v: float) -> tuple[int, bytes]:
    return T_DOUBLE, DOUBLE_STRUCT.pack(v)


def _date(v: DatetimeMS) -> tuple[int, bytes]:
    return T_DATE, INT64_STRUCT.pack(int(v))


def _str(v: str) -> tuple[int, bytes]:
    try:
        b = v.encode("utf-8")
    except UnicodeEncodeError:
        return _generic(v)
    return T_STRING, _I.pack(len(b) + 1) + b + b"\x00"


def _bool(v: bool) -> tuple[int, bytes]:
    return T_BOOL, b"\x01" if v else b"\x00"


def _none(_v: None) -> tuple[int, bytes]:
    return T_NULL, b""


def _oid(v: ObjectId) -> tuple[int, bytes]:
    return T_OID, v.binary


ELEMENT_PACKERS: Final[dict[type, Callable[[Any], tuple[int, bytes]]]] = {
    float: _float, int: _int, Int64: _int64, DatetimeMS: _date, str: _str, bool: _bool,
    type(None): _none, ObjectId: _oid,
}


def to_element(v: Any) -> tuple[int, bytes]:
    """(BSON type, value bytes) of a decoded value."""
    f = ELEMENT_PACKERS.get(type(v))
    return f(v) if f is not None else _generic(v)
