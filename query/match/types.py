"""BSON type numbers and names of decoded values, and the ``$type`` alias table.

Python values come from `storage.bsonutil.CODEC_OPTIONS`: int32 decodes to `int`,
int64 to `bson.Int64`; a plain `int` outside the int32 range is encoded as int64,
so it reports as "long" here too. Symbols decode as `str` and undefined as `None`,
so those two BSON types never appear.
"""

from __future__ import annotations

from typing import Any, Final

from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

__all__ = ["bson_type_code", "bson_type_name", "TYPE_ALIASES", "TYPE_NAMES", "INT32_MIN",
           "INT32_MAX", "INT64_MIN", "INT64_MAX", "is_number"]

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

# $type aliases (MongoDB manual, "$type" operator: Available Types).
TYPE_ALIASES: Final[dict[str, int]] = {
    "double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
    "objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
    "javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16, "timestamp": 17,
    "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
}
TYPE_NAMES: Final[dict[int, str]] = {v: k for k, v in TYPE_ALIASES.items()}
TYPE_NAMES[0] = "missing"

_CODE_BY_TYPE: Final[dict[type, int]] = {
    float: 1, str: 2, dict: 3, list: 4, bytes: 5, Binary: 5, ObjectId: 7, bool: 8,
    DatetimeMS: 9, type(None): 10, Regex: 11, Int64: 18, Timestamp: 17, Decimal128: 19,
    MinKey: -1, MaxKey: 127, DBRef: 3,
}


def bson_type_code(v: Any) -> int:
    """The BSON type number `v` is stored as (0 for an unknown Python type)."""
    t = type(v)
    if t is int:
        return 16 if INT32_MIN <= v <= INT32_MAX else 18
    code = _CODE_BY_TYPE.get(t)
    if code is not None:
        return code
    if isinstance(v, bool):
        return 8
    if isinstance(v, Int64):
        return 18
    if isinstance(v, int):
        return 16 if INT32_MIN <= v <= INT32_MAX else 18
    if isinstance(v, float):
        return 1
    if isinstance(v, str):
        return 2
    if isinstance(v, dict):
        return 3
    if isinstance(v, list | tuple):
        return 4
    if isinstance(v, bytes | Binary):
        return 5
    if isinstance(v, Code):
        return 15 if v.scope is not None else 13
    if hasattr(v, "pattern") and hasattr(v, "flags"):  # re.Pattern
        return 11
    return 0


def bson_type_name(v: Any) -> str:
    return TYPE_NAMES.get(bson_type_code(v), "unknown")


def is_number(v: Any) -> bool:
    t = type(v)
    if t is int or t is float or t is Int64 or t is Decimal128:
        return True
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)
