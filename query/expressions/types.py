"""Type operators: $type $isNumber $convert $toDouble $toInt $toLong $toDecimal $toString
$toDate $toObjectId $toBool.

`$convert` follows MongoDB's conversion table: a pair (input type, target type) either has a
conversion or fails with ConversionFailure (241), which `onError` catches; null or missing
input gives `onNull` (default null).
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any, Final

from bson import Decimal128, Int64, ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS

from query.dates.formatting import format_iso_utc
from query.dates.parsing import parse_date_string
from storage.errors import MongoError
from storage.vocabulary.bson_types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    TYPE_ALIASES,
    type_name,
)
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, compile_node, const_value, is_const, parse_args
from .registry import Fn, operator
from .values import (
    K_DECIMAL,
    K_DOUBLE,
    K_INT,
    K_LONG,
    fmt_double,
    is_integral,
    make_decimal,
    num_kind,
    to_decimal,
    to_float,
    truthy,
)

__all__ = ["convert_value", "format_double_shortest"]

_CF = ErrorCode.ConversionFailure

# $convert's 'to' given as a number: the $type number -> its alias.
_TYPE_CODES: Final = {number: name for name, number in TYPE_ALIASES.items()}
_TYPE_NAMES: Final = set(_TYPE_CODES.values())

_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)\Z")
_SPECIAL_RE = re.compile(r"[+-]?(?:inf(?:inity)?|nan)\Z", re.IGNORECASE)
_INT_RE = re.compile(r"[+-]?\d+\Z")


def format_double_shortest(x: float) -> str:
    """A double as MongoDB's $toString renders it (shortest round-trip form)."""
    if math.isinf(x):
        return "-Infinity" if x < 0 else "Infinity"
    if x != x:
        return "NaN"
    if x == 0.0 and math.copysign(1.0, x) < 0:
        return "-0"
    r = repr(x)
    if r.endswith(".0"):
        r = r[:-2]
    return r


def _unsupported(v: Any, target: str) -> MongoError:
    return MongoError(_CF, f"Unsupported conversion from {type_name(v)} to {target} in $convert "
                      "with no onError value")


def _overflow(x: Any) -> MongoError:
    return MongoError(_CF, "Conversion would overflow target type in $convert with no onError "
                      f"value: {x}")


def _check_finite(x: float) -> None:
    if x != x:
        raise MongoError(_CF, "Attempt to convert NaN value to integer type in $convert with no "
                         "onError value")
    if math.isinf(x):
        raise MongoError(_CF, "Attempt to convert infinity value to integer type in $convert "
                         "with no onError value")


def _dec_to_int(d: Decimal, lo: int, hi: int) -> int:
    if d.is_nan():
        raise MongoError(_CF, "Attempt to convert NaN value to integer type in $convert with no "
                         "onError value")
    if d.is_infinite():
        raise MongoError(_CF, "Attempt to convert infinity value to integer type in $convert "
                         "with no onError value")
    n = int(d.to_integral_value(rounding=ROUND_DOWN))
    if not lo <= n <= hi:
        raise _overflow(d)
    return n


def _parse_number_string(s: str, target: str) -> Any:
    if s.startswith("0x") or s.startswith("-0x") or s.startswith("+0x"):
        raise MongoError(_CF, f"Illegal hexadecimal input in $convert with no onError value: {s}")
    bad = MongoError(_CF, f"Failed to parse number '{s}' in $convert with no onError value: "
                     "Did not consume whole string.")
    if target in ("int", "long"):
        if not _INT_RE.match(s):
            raise bad
        n = int(s)
        lo, hi = (INT32_MIN, INT32_MAX) if target == "int" else (INT64_MIN, INT64_MAX)
        if not lo <= n <= hi:
            raise MongoError(_CF, f"Failed to parse number '{s}' in $convert with no onError "
                             "value: Out of range")
        return n if target == "int" else Int64(n)
    if target == "double":
        if _FLOAT_RE.match(s) or _SPECIAL_RE.match(s):
            return float(s)
        raise bad
    # decimal
    if _FLOAT_RE.match(s) or _SPECIAL_RE.match(s):
        try:
            return make_decimal(Decimal(s))
        except InvalidOperation:
            raise bad from None
    raise bad


def _to_double(v: Any, k: int) -> Any:
    if k == K_DOUBLE:
        return v
    if k in (K_INT, K_LONG):
        return float(v)
    if k == K_DECIMAL:
        d = v.to_decimal()
        f = float(d)
        if math.isinf(f) and d.is_finite():
            raise _overflow(v)
        return f
    t = type(v)
    if t is str:
        return _parse_number_string(v, "double")
    if t is bool:
        return 1.0 if v else 0.0
    if t is DatetimeMS:
        return float(int(v))
    raise _unsupported(v, "double")


def _to_int(v: Any, k: int) -> Any:
    if k == K_INT:
        return v
    if k == K_LONG:
        n = int(v)
        if not INT32_MIN <= n <= INT32_MAX:
            raise _overflow("")
        return n
    if k == K_DOUBLE:
        _check_finite(v)
        if not INT32_MIN <= v <= INT32_MAX:
            raise _overflow(_fmt(v))
        return int(v)
    if k == K_DECIMAL:
        return _dec_to_int(v.to_decimal(), INT32_MIN, INT32_MAX)
    t = type(v)
    if t is str:
        return _parse_number_string(v, "int")
    if t is bool:
        return 1 if v else 0
    raise _unsupported(v, "int")


def _to_long(v: Any, k: int) -> Any:
    if k in (K_INT, K_LONG):
        return Int64(int(v))
    if k == K_DOUBLE:
        _check_finite(v)
        if not (-(2.0**63) <= v < 2.0**63):
            raise _overflow(_fmt(v))
        return Int64(int(v))
    if k == K_DECIMAL:
        return Int64(_dec_to_int(v.to_decimal(), INT64_MIN, INT64_MAX))
    t = type(v)
    if t is str:
        return _parse_number_string(v, "long")
    if t is bool:
        return Int64(1 if v else 0)
    if t is DatetimeMS:
        return Int64(int(v))
    raise _unsupported(v, "long")


def _to_decimal(v: Any, k: int) -> Any:
    if k == K_DECIMAL:
        return v
    if k >= 0:
        return make_decimal(to_decimal(v))
    t = type(v)
    if t is str:
        return _parse_number_string(v, "decimal")
    if t is bool:
        return Decimal128("1" if v else "0")
    if t is DatetimeMS:
        return Decimal128(str(int(v)))
    raise _unsupported(v, "decimal")


def _fmt(x: float) -> str:
    return fmt_double(x)


def _to_string(v: Any, k: int) -> Any:
    if k == K_DOUBLE:
        return format_double_shortest(v)
    if k in (K_INT, K_LONG):
        return str(int(v))
    if k == K_DECIMAL:
        return str(v)
    t = type(v)
    if t is str:
        return v
    if t is bool:
        return "true" if v else "false"
    if t is ObjectId:
        return str(v)
    if t is DatetimeMS:
        return format_iso_utc(int(v))
    raise _unsupported(v, "string")


def _to_object_id(v: Any, k: int) -> Any:
    t = type(v)
    if t is ObjectId:
        return v
    if t is str:
        if len(v) != 24 or not all(c in "0123456789abcdefABCDEF" for c in v):
            raise MongoError(_CF, f"Failed to parse objectId '{v}' in $convert with no onError "
                             "value: Invalid string length for parsing to OID, expected 24 but "
                             f"found {len(v)}" if len(v) != 24 else
                             f"Failed to parse objectId '{v}' in $convert with no onError "
                             "value: Invalid character found in hex string")
        return ObjectId(v)
    raise _unsupported(v, "objectId")


def _to_bool(v: Any, k: int) -> Any:
    if k >= 0 or type(v) is bool:
        return truthy(v)
    return True


def _to_date(v: Any, k: int) -> Any:
    t = type(v)
    if t is DatetimeMS:
        return v
    if k == K_LONG:
        return DatetimeMS(int(v))
    if k == K_DOUBLE:
        return DatetimeMS(int(_to_long(v, k)))
    if k == K_DECIMAL:
        return DatetimeMS(_dec_to_int(v.to_decimal(), INT64_MIN, INT64_MAX))
    if t is str:
        return DatetimeMS(parse_date_string(v, None, None))
    if t is ObjectId:
        return DatetimeMS(int.from_bytes(v.binary[:4], "big") * 1000)
    if t is Timestamp:
        return DatetimeMS(v.time * 1000)
    raise _unsupported(v, "date")


_CONVERTERS: Final = {
    "double": _to_double, "int": _to_int, "long": _to_long, "decimal": _to_decimal,
    "string": _to_string, "objectId": _to_object_id, "bool": _to_bool, "date": _to_date,
}


def convert_value(v: Any, target: str) -> Any:
    """Convert a non-null value to `target` (a $type name) or raise ConversionFailure."""
    conv = _CONVERTERS.get(target)
    if conv is None:
        if target == "bool":
            return True
        raise _unsupported(v, target)
    return conv(v, num_kind(v))


def _target_name(to: Any) -> str | None:
    """The $type name for a 'to' value, None for null/missing."""
    if to is None or to is MISSING:
        return None
    if type(to) is dict and "type" in to:
        to = to["type"]
    if type(to) is str:
        if to not in _TYPE_NAMES:
            raise MongoError(ErrorCode.BadValue, f"Unknown type name: {to}")
        return to
    if num_kind(to) >= 0:
        if not is_integral(to):
            raise MongoError(ErrorCode.FailedToParse, "In $convert, numeric 'to' argument is "
                             "not an integer")
        code = int(to_float(to))
        if code not in _TYPE_CODES:
            raise MongoError(ErrorCode.FailedToParse, "In $convert, numeric value for 'to' does "
                             f"not correspond to a BSON type: {code}")
        return _TYPE_CODES[code]
    raise MongoError(ErrorCode.FailedToParse, "$convert's 'to' argument must be a string or "
                     f"number, but is {type_name(to)}")


@operator("$convert")
def _c_convert(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(ErrorCode.FailedToParse, "$convert expects an object of named "
                         f"arguments but found: {type_name(arg)}")
    parts: dict[str, Fn] = {}
    for k, x in arg.items():
        if k not in ("input", "to", "onError", "onNull", "format", "byteOrder", "base"):
            raise MongoError(ErrorCode.FailedToParse, f"$convert found an unknown argument: {k}")
        parts[k] = compile_node(x, scope)
    if "input" not in parts:
        raise MongoError(ErrorCode.FailedToParse, "Missing 'input' parameter to $convert")
    if "to" not in parts:
        raise MongoError(ErrorCode.FailedToParse, "Missing 'to' parameter to $convert")
    i_fn, to_fn = parts["input"], parts["to"]
    on_error = parts.get("onError")
    on_null = parts.get("onNull")
    has_const_target = is_const(to_fn)
    const_target = _target_name(const_value(to_fn)) if has_const_target else None

    def f(doc: Any, v: dict) -> Any:
        target = const_target if has_const_target else _target_name(to_fn(doc, v))
        x = i_fn(doc, v)
        if x is None or x is MISSING:
            return on_null(doc, v) if on_null is not None else None
        if target is None:
            return None
        try:
            return convert_value(x, target)
        except MongoError as e:
            if e.code == _CF and on_error is not None:
                return on_error(doc, v)
            raise
    return f


def _to_op(target: str) -> Any:
    conv = _CONVERTERS[target]

    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 1)
        (a_fn,) = args

        def f(doc: Any, v: dict) -> Any:
            x = a_fn(doc, v)
            if x is None or x is MISSING:
                return None
            return conv(x, num_kind(x))
        return f
    return compiler


for _t, _op in (("double", "$toDouble"), ("int", "$toInt"), ("long", "$toLong"),
                ("decimal", "$toDecimal"), ("string", "$toString"), ("date", "$toDate"),
                ("objectId", "$toObjectId"), ("bool", "$toBool")):
    operator(_op)(_to_op(_t))


@operator("$type")
def _c_type(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        return type_name(a_fn(doc, v))
    return f


@operator("$isNumber")
def _c_is_number(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        return num_kind(a_fn(doc, v)) >= 0
    return f

