"""BSON values as MongoDB prints them in error messages (`BSONObj::toString()`).

``{ a: 1, b: "x" }``, ``[ 1, 2 ]``, doubles with ``%.16g`` plus ``.0`` when the text
has no ``.``/``E``/``N``, ``ObjectId('...')``, ``new Date(ms)``, ``/re/flags``,
``BinData(0, HEX)``, ``UUID("...")``, ``Timestamp(s, i)``; strings and code are cut
as MongoDB cuts them unless ``full=True``. Used for duplicate-key messages and
index-spec errors, where drivers and tests compare the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from storage.bson_order import regex_flags_str

__all__ = ["to_mongo_string"]

_MAX_DEPTH: Final = 100


def _double(x: float) -> str:
    s = f"{x:.16g}"
    if "." not in s and "E" not in s and "N" not in s:
        s += ".0"
    return s


def _string(s: str, full: bool) -> str:
    raw = s.encode("utf-8", "surrogatepass")
    if not full and len(raw) + 1 > 160:
        return '"' + raw[:150].decode("utf-8", "ignore") + '..."'
    return '"' + s + '"'


def _binary(data: bytes, subtype: int, full: bool) -> str:
    if subtype == 4 and len(data) == 16:
        h = data.hex()
        return f'UUID("{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")'
    if not full and len(data) > 80:
        return f"BinData({subtype}, {data[:70].hex().upper()}...)"
    return f"BinData({subtype}, {data.hex().upper()})"


def _obj(doc: Mapping[str, Any], full: bool, depth: int) -> str:
    if not doc:
        return "{}"
    return "{ " + ", ".join(f"{k}: {_value(v, full, depth + 1)}" for k, v in doc.items()) + " }"


def _array(arr: Any, full: bool, depth: int) -> str:
    if not arr:
        return "[]"
    return "[ " + ", ".join(_value(v, full, depth + 1) for v in arr) + " ]"


def _value(v: Any, full: bool, depth: int) -> str:
    if depth > _MAX_DEPTH:
        return "..."
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Int64 | int):
        return str(int(v))
    if isinstance(v, float):
        return _double(v)
    if isinstance(v, Decimal128):
        return str(v.to_decimal())
    if isinstance(v, Code):
        code = str(v)
        if v.scope is not None and len(v.scope) > 0:
            return f"CodeWScope( {code}, {_obj(v.scope, False, 0)})"
        if not full and len(code.encode()) + 1 > 80:
            return code.encode()[:70].decode("utf-8", "ignore") + "..."
        return code
    if isinstance(v, str):
        return _string(v, full)
    if isinstance(v, DBRef):
        return _obj(v.as_doc(), full, depth)
    if isinstance(v, Mapping):
        return _obj(v, full, depth)
    if isinstance(v, list | tuple):
        return _array(v, full, depth)
    if isinstance(v, Binary):
        return _binary(bytes(v), v.subtype, full)
    if isinstance(v, bytes):
        return _binary(v, 0, full)
    if isinstance(v, ObjectId):
        return f"ObjectId('{v}')"
    if isinstance(v, DatetimeMS):
        return f"new Date({int(v)})"
    if isinstance(v, Timestamp):
        return f"Timestamp({v.time}, {v.inc})"
    if isinstance(v, Regex):
        return f"/{v.pattern}/{regex_flags_str(v.flags)}"
    if isinstance(v, MinKey):
        return "MinKey"
    if isinstance(v, MaxKey):
        return "MaxKey"
    if type(v).__name__ == "Undefined":
        return "undefined"
    return repr(v)


def to_mongo_string(v: Any, *, full: bool = False) -> str:
    """`v` (a document or any BSON value) in MongoDB's toString() form."""
    return _value(v, full, 0)
