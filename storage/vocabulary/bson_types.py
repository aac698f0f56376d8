"""BSON type bytes, MongoDB's name for each, and the one function that names a value's type.

`BsonType` holds the type bytes of the BSON spec (an element's first byte).
`TYPE_NAMES` is the one table of names, MongoDB's ``$type`` aliases ("double", "int",
"objectId", ...; "missing" for EOO); `TYPE_ALIASES` is the same table the other way
round, from alias to ``$type`` number (minKey is -1 there, 0xFF as a byte).

`bson_type` tells which type a decoded value is stored as (values come from
`storage.bsonutil.CODEC_OPTIONS`: int32 decodes to `int`, int64 to `bson.Int64`; a plain
`int` outside the int32 range is written as int64, so it is "long" here too) and
`type_name` names it; `is_number` tells the numeric ones (bool is not a number). Hot
loops that compare raw type bytes use the plain-int `T_*` constants: an enum member is
slower to compare than an int.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.raw_bson import RawBSONDocument

from .missing import MISSING

__all__ = ["INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN", "TYPE_ALIASES", "TYPE_NAMES",
           "BsonType", "bson_type", "is_number", "safe_number", "type_name", "type_number",
           "T_EOO", "T_DOUBLE", "T_STRING", "T_OBJECT", "T_ARRAY", "T_BINARY", "T_UNDEFINED", "T_OID", "T_BOOL", "T_DATE", "T_NULL", "T_REGEX", "T_DBPOINTER", "T_CODE", "T_SYMBOL", "T_CODEWSCOPE", "T_INT32", "T_TIMESTAMP", "T_INT64", "T_DECIMAL", "T_MINKEY", "T_MAXKEY"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


class BsonType(enum.IntEnum):
    """An element's type byte."""

    EOO = 0x00  # end of object; a missing value
    DOUBLE = 0x01
    STRING = 0x02
    OBJECT = 0x03
    ARRAY = 0x04
    BINARY = 0x05
    UNDEFINED = 0x06
    OBJECT_ID = 0x07
    BOOL = 0x08
    DATE = 0x09
    NULL = 0x0A
    REGEX = 0x0B
    DB_POINTER = 0x0C
    JAVASCRIPT = 0x0D
    SYMBOL = 0x0E
    JAVASCRIPT_WITH_SCOPE = 0x0F
    INT32 = 0x10
    TIMESTAMP = 0x11
    INT64 = 0x12
    DECIMAL128 = 0x13
    MIN_KEY = 0xFF
    MAX_KEY = 0x7F


# The type bytes as plain ints, for hot loops that compare raw bytes (an enum member is
# slower to compare than an int).
T_EOO: Final = int(BsonType.EOO)
T_DOUBLE: Final = int(BsonType.DOUBLE)
T_STRING: Final = int(BsonType.STRING)
T_OBJECT: Final = int(BsonType.OBJECT)
T_ARRAY: Final = int(BsonType.ARRAY)
T_BINARY: Final = int(BsonType.BINARY)
T_UNDEFINED: Final = int(BsonType.UNDEFINED)
T_OID: Final = int(BsonType.OBJECT_ID)
T_BOOL: Final = int(BsonType.BOOL)
T_DATE: Final = int(BsonType.DATE)
T_NULL: Final = int(BsonType.NULL)
T_REGEX: Final = int(BsonType.REGEX)
T_DBPOINTER: Final = int(BsonType.DB_POINTER)
T_CODE: Final = int(BsonType.JAVASCRIPT)
T_SYMBOL: Final = int(BsonType.SYMBOL)
T_CODEWSCOPE: Final = int(BsonType.JAVASCRIPT_WITH_SCOPE)
T_INT32: Final = int(BsonType.INT32)
T_TIMESTAMP: Final = int(BsonType.TIMESTAMP)
T_INT64: Final = int(BsonType.INT64)
T_DECIMAL: Final = int(BsonType.DECIMAL128)
T_MINKEY: Final = int(BsonType.MIN_KEY)
T_MAXKEY: Final = int(BsonType.MAX_KEY)


TYPE_NAMES: Final[dict[BsonType, str]] = {
    BsonType.EOO: "missing",
    BsonType.DOUBLE: "double",
    BsonType.STRING: "string",
    BsonType.OBJECT: "object",
    BsonType.ARRAY: "array",
    BsonType.BINARY: "binData",
    BsonType.UNDEFINED: "undefined",
    BsonType.OBJECT_ID: "objectId",
    BsonType.BOOL: "bool",
    BsonType.DATE: "date",
    BsonType.NULL: "null",
    BsonType.REGEX: "regex",
    BsonType.DB_POINTER: "dbPointer",
    BsonType.JAVASCRIPT: "javascript",
    BsonType.SYMBOL: "symbol",
    BsonType.JAVASCRIPT_WITH_SCOPE: "javascriptWithScope",
    BsonType.INT32: "int",
    BsonType.TIMESTAMP: "timestamp",
    BsonType.INT64: "long",
    BsonType.DECIMAL128: "decimal",
    BsonType.MIN_KEY: "minKey",
    BsonType.MAX_KEY: "maxKey",
}


def type_number(t: BsonType) -> int:
    """The number ``$type`` uses for `t`: its byte, except -1 for minKey."""
    return -1 if t is BsonType.MIN_KEY else int(t)


# $type's aliases: name -> number ("missing" is not an alias one can ask for).
TYPE_ALIASES: Final[dict[str, int]] = {
    name: type_number(t) for t, name in TYPE_NAMES.items() if t is not BsonType.EOO}

_BY_EXACT_TYPE: Final[dict[type, BsonType]] = {
    float: BsonType.DOUBLE,
    str: BsonType.STRING,
    dict: BsonType.OBJECT,
    list: BsonType.ARRAY,
    tuple: BsonType.ARRAY,
    bytes: BsonType.BINARY,
    Binary: BsonType.BINARY,
    ObjectId: BsonType.OBJECT_ID,
    bool: BsonType.BOOL,
    DatetimeMS: BsonType.DATE,
    type(None): BsonType.NULL,
    Regex: BsonType.REGEX,
    Int64: BsonType.INT64,
    Decimal128: BsonType.DECIMAL128,
    Timestamp: BsonType.TIMESTAMP,
    MinKey: BsonType.MIN_KEY,
    MaxKey: BsonType.MAX_KEY,
    DBRef: BsonType.OBJECT,
    RawBSONDocument: BsonType.OBJECT,
}


def bson_type(v: Any) -> BsonType | None:
    """The type `v` is stored as; EOO for `MISSING`, None for a value BSON cannot hold."""
    t = type(v)
    if t is int:
        return BsonType.INT32 if INT32_MIN <= v <= INT32_MAX else BsonType.INT64
    found = _BY_EXACT_TYPE.get(t)
    if found is not None:
        return found
    return _bson_type_of_subclass(v)


def _bson_type_of_subclass(v: Any) -> BsonType | None:
    if v is MISSING:
        return BsonType.EOO
    if isinstance(v, bool):
        return BsonType.BOOL
    if isinstance(v, Int64):
        return BsonType.INT64
    if isinstance(v, int):
        return BsonType.INT32 if INT32_MIN <= v <= INT32_MAX else BsonType.INT64
    if isinstance(v, float):
        return BsonType.DOUBLE
    if isinstance(v, Code):  # before str: Code subclasses str
        return BsonType.JAVASCRIPT_WITH_SCOPE if v.scope is not None else BsonType.JAVASCRIPT
    if isinstance(v, str):
        return BsonType.STRING
    if isinstance(v, Mapping):
        return BsonType.OBJECT
    if isinstance(v, list | tuple):
        return BsonType.ARRAY
    if isinstance(v, bytes | Binary):
        return BsonType.BINARY
    if isinstance(v, re.Pattern):
        return BsonType.REGEX
    if type(v).__name__ == "Undefined":  # storage.keystring's UNDEFINED (index bounds)
        return BsonType.UNDEFINED
    return None


# The names of the exact types above, so that the common case is one lookup.
_NAME_BY_EXACT_TYPE: Final[dict[type, str]] = {
    t: TYPE_NAMES[b] for t, b in _BY_EXACT_TYPE.items()}


def type_name(v: Any) -> str:
    """MongoDB's name for the BSON type of `v` (what ``$type`` returns); "missing" for
    `MISSING`, "unknown" for a value BSON cannot hold."""
    t = type(v)
    if t is int:
        return "int" if INT32_MIN <= v <= INT32_MAX else "long"
    name = _NAME_BY_EXACT_TYPE.get(t)
    if name is not None:
        return name
    found = _bson_type_of_subclass(v)
    return "unknown" if found is None else TYPE_NAMES[found]


def is_number(v: Any) -> bool:
    """Whether `v` is a BSON number (int32, int64, double, decimal); bool is not."""
    t = type(v)
    if t is int or t is float or t is Int64 or t is Decimal128:
        return True
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)


def safe_number(v: Any, lo: int, hi: int) -> int:
    """BSONElement::safeNumberInt/Long: truncate toward zero, NaN -> 0, clamp to range."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            return 0
        if d.is_infinite():
            return hi if d > 0 else lo
        n = int(d)
    elif isinstance(v, float):
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return hi if v > 0 else lo
        n = int(v)
    else:
        n = int(v)
    return max(lo, min(hi, n))
