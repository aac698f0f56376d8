"""MongoDB's ordering of BSON values: the one definition index keys, sort and match share.

`sort_key(v)` maps any decoded BSON value to a Python tuple whose natural order is
MongoDB's comparison order (woCompare), so ``sorted(xs, key=sort_key)`` sorts like
MongoDB and ``compare(a, b)`` is a plain comparison of keys.

The rules (MongoDB's `canonicalizeBSONType`): MinKey < undefined < null < numbers <
string/symbol < object < array < binData < ObjectId < bool < date < timestamp <
regex < DBPointer < code < code-with-scope < MaxKey. Numbers compare by value across
int32/int64/double/decimal128 with NaN below every other number; strings by their
UTF-8 bytes (code-point order is the same); objects element by element: type, then
field name, then value, a shorter object first; arrays element by element; binData
by length, then subtype, then bytes.
"""

from __future__ import annotations

import math
from typing import Any, Final

from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

__all__ = [
    "RANK_MINKEY", "RANK_NULL", "RANK_NUMBER", "RANK_STRING", "RANK_OBJECT", "RANK_ARRAY",
    "RANK_BINDATA", "RANK_OBJECTID", "RANK_BOOL", "RANK_DATE", "RANK_TIMESTAMP", "RANK_REGEX",
    "RANK_CODE", "RANK_CODE_W_SCOPE", "RANK_MAXKEY",
    "type_rank", "sort_key", "compare", "values_equal", "numeric_key", "regex_flags_str",
]

# Canonical type ranks (MongoDB's canonicalizeBSONType values).
RANK_MINKEY: Final = -1
RANK_UNDEFINED: Final = 0
RANK_NULL: Final = 5
RANK_NUMBER: Final = 10
RANK_STRING: Final = 15
RANK_OBJECT: Final = 20
RANK_ARRAY: Final = 25
RANK_BINDATA: Final = 30
RANK_OBJECTID: Final = 35
RANK_BOOL: Final = 40
RANK_DATE: Final = 45
RANK_TIMESTAMP: Final = 47
RANK_REGEX: Final = 50
RANK_DBPOINTER: Final = 55
RANK_CODE: Final = 60
RANK_CODE_W_SCOPE: Final = 65
RANK_MAXKEY: Final = 100

_RE_FLAG_LETTERS: Final = (("i", 2), ("l", 4), ("m", 8), ("s", 16), ("u", 32), ("x", 64))


def regex_flags_str(flags: int | str) -> str:
    """BSON regex options as MongoDB stores them: letters in alphabetical order."""
    if isinstance(flags, str):
        return "".join(sorted(flags))
    return "".join(letter for letter, bit in _RE_FLAG_LETTERS if flags & bit)


def type_rank(v: Any) -> int:
    """Canonical type rank of a decoded BSON value (bool before int: bool is an int)."""
    t = type(v)
    r = _RANK_BY_TYPE.get(t)
    if r is not None:
        return r
    if v is None:
        return RANK_NULL
    if isinstance(v, bool):
        return RANK_BOOL
    if isinstance(v, Code):  # before str: Code subclasses str but sorts after regex
        return RANK_CODE_W_SCOPE if v.scope is not None else RANK_CODE
    if isinstance(v, int | float | Decimal128):
        return RANK_NUMBER
    if isinstance(v, str):
        return RANK_STRING
    if isinstance(v, dict | DBRef):
        return RANK_OBJECT
    if isinstance(v, list | tuple):
        return RANK_ARRAY
    if isinstance(v, bytes | Binary):
        return RANK_BINDATA
    raise TypeError(f"not a BSON value: {t.__name__}")


_RANK_BY_TYPE: Final[dict[type, int]] = {
    type(None): RANK_NULL,
    bool: RANK_BOOL,
    int: RANK_NUMBER,
    Int64: RANK_NUMBER,
    float: RANK_NUMBER,
    Decimal128: RANK_NUMBER,
    str: RANK_STRING,
    dict: RANK_OBJECT,
    list: RANK_ARRAY,
    bytes: RANK_BINDATA,
    Binary: RANK_BINDATA,
    ObjectId: RANK_OBJECTID,
    DatetimeMS: RANK_DATE,
    Timestamp: RANK_TIMESTAMP,
    Regex: RANK_REGEX,
    MinKey: RANK_MINKEY,
    MaxKey: RANK_MAXKEY,
}


def numeric_key(v: int | float | Decimal128) -> tuple[int, Any]:
    """(0, 0) for NaN (lowest number), else (1, exact value) comparable across types."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if d.is_nan():
            return (0, 0)
        if d.is_infinite():
            return (1, math.inf if d > 0 else -math.inf)
        return (1, d)
    if isinstance(v, float) and v != v:
        return (0, 0)
    return (1, v)


def sort_key(v: Any) -> tuple[Any, ...]:
    """A key whose Python ordering is MongoDB's BSON comparison order."""
    r = type_rank(v)
    if r == RANK_NUMBER:
        return (r, *numeric_key(v))
    if r == RANK_STRING:
        return (r, v)
    if r == RANK_OBJECT:
        if isinstance(v, DBRef):
            v = v.as_doc()
        return (r, tuple((type_rank(x), k, sort_key(x)) for k, x in v.items()))
    if r == RANK_ARRAY:
        return (r, tuple(sort_key(x) for x in v))
    if r == RANK_BINDATA:
        sub = v.subtype if isinstance(v, Binary) else 0
        return (r, len(v), sub, bytes(v))
    if r == RANK_OBJECTID:
        return (r, v.binary)
    if r == RANK_BOOL:
        return (r, bool(v))
    if r == RANK_DATE:
        return (r, int(v))
    if r == RANK_TIMESTAMP:
        return (r, v.time, v.inc)
    if r == RANK_REGEX:
        return (r, v.pattern, regex_flags_str(v.flags))
    if r == RANK_CODE:
        return (r, str(v))
    if r == RANK_CODE_W_SCOPE:
        return (r, str(v), sort_key(dict(v.scope)))
    return (r,)  # null, undefined, MinKey, MaxKey


def compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 as MongoDB's woCompare of two BSON values."""
    ka, kb = sort_key(a), sort_key(b)
    return (ka > kb) - (ka < kb)


def values_equal(a: Any, b: Any) -> bool:
    """Equality under the simple collation (1 == 1.0 == Int64(1), NaN == NaN)."""
    return sort_key(a) == sort_key(b)
