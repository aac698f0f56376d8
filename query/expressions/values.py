"""Value helpers shared by every expression family, accumulator and stage.

Owns the `MISSING` sentinel (a field that does not exist, distinct from BSON null), MongoDB's
type names (`$type`), the numeric tower (int32 → int64 → double → decimal128, with the
widening rules MongoDB applies), truthiness (`coerceToBool`) and date coercion. Values are
the Python objects `storage.bsonutil.CODEC_OPTIONS` decodes to: `int` is an int32 when it fits
(a larger plain `int` is treated as an int64), `bson.Int64` is an int64, `float` a double,
`Decimal128` a decimal, `DatetimeMS` a date.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from bson import Decimal128, Int64, ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS
from bson.decimal128 import create_decimal128_context

from query.dates.formatting import format_iso_utc
from storage.errors import MongoError
from storage.vocabulary.bson_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, type_name
from storage.vocabulary.missing import MISSING

__all__ = [
    "DEC_CTX",
    "is_number", "num_kind", "K_INT", "K_LONG", "K_DOUBLE", "K_DECIMAL",
    "int_or_long", "to_decimal", "make_decimal", "to_float", "truthy", "nullish",
    "is_integral", "is_integral64", "as_int", "coerce_to_date_ms", "coercible_to_date",
    "value_repr", "is_nan", "from_decimal_result", "fmt_double",
]


# Decimal128's arithmetic context (34 digits, half-even, exponent range of the format).
DEC_CTX: Final = create_decimal128_context()
for _trap in list(DEC_CTX.traps):
    DEC_CTX.traps[_trap] = False

K_INT: Final = 0
K_LONG: Final = 1
K_DOUBLE: Final = 2
K_DECIMAL: Final = 3

def num_kind(v: Any) -> int:
    """K_INT/K_LONG/K_DOUBLE/K_DECIMAL for a number, -1 for anything else (bool included)."""
    t = type(v)
    if t is int:
        return K_INT if INT32_MIN <= v <= INT32_MAX else K_LONG
    if t is float:
        return K_DOUBLE
    if t is Int64:
        return K_LONG
    if t is Decimal128:
        return K_DECIMAL
    return -1


def is_number(v: Any) -> bool:
    t = type(v)
    return t is int or t is float or t is Int64 or t is Decimal128


def int_or_long(n: int) -> int:
    """MongoDB's createIntOrLong: an int32 when it fits, else an int64."""
    if INT32_MIN <= n <= INT32_MAX:
        return n
    return Int64(n)


def make_decimal(d: Decimal) -> Decimal128:
    """A Decimal128 from an arbitrary Decimal, rounded to the format (34 digits)."""
    d = DEC_CTX.create_decimal(d)
    try:
        return Decimal128(d)
    except (InvalidOperation, ValueError):
        return Decimal128(DEC_CTX.plus(d))


def _double_to_decimal(x: float) -> Decimal:
    # MongoDB converts a double to decimal keeping 15 significant digits.
    if math.isnan(x):
        return Decimal("NaN")
    if math.isinf(x):
        return Decimal("Infinity") if x > 0 else Decimal("-Infinity")
    if x == 0:
        return Decimal("-0") if math.copysign(1.0, x) < 0 else Decimal("0")
    return Decimal(f"{x:.14e}")


def to_decimal(v: Any) -> Decimal:
    """A numeric value as a Python Decimal (MongoDB's coerceToDecimal)."""
    t = type(v)
    if t is Decimal128:
        return v.to_decimal()
    if t is float:
        return _double_to_decimal(v)
    if t is bool:
        return Decimal(int(v))
    return Decimal(int(v))


def to_float(v: Any) -> float:
    """A numeric value as a double (MongoDB's coerceToDouble)."""
    t = type(v)
    if t is float:
        return v
    if t is Decimal128:
        return float(v.to_decimal())
    return float(v)


def from_decimal_result(d: Decimal) -> Decimal128:
    return make_decimal(d)


def is_nan(v: Any) -> bool:
    t = type(v)
    if t is float:
        return v != v
    if t is Decimal128:
        return v.to_decimal().is_nan()
    return False


def nullish(v: Any) -> bool:
    return v is None or v is MISSING


def truthy(v: Any) -> bool:
    """MongoDB's coerceToBool: false, null, missing, undefined and numeric zero are false."""
    if v is True:
        return True
    if v is False or v is None or v is MISSING:
        return False
    t = type(v)
    if t is int or t is Int64:
        return v != 0
    if t is float:
        return v != 0.0
    if t is Decimal128:
        return not v.to_decimal().is_zero()
    return True


def is_integral(v: Any) -> bool:
    """A number whose value is an integer that fits in int32 (MongoDB's Value::integral)."""
    k = num_kind(v)
    if k == K_INT:
        return True
    if k == K_LONG:
        return INT32_MIN <= v <= INT32_MAX
    if k == K_DOUBLE:
        return math.isfinite(v) and v == int(v) and INT32_MIN <= v <= INT32_MAX
    if k == K_DECIMAL:
        d = v.to_decimal()
        return d.is_finite() and d == d.to_integral_value() and INT32_MIN <= d <= INT32_MAX
    return False


def is_integral64(v: Any) -> bool:
    """A number whose value is an integer that fits in int64 (Value::integral64Bit)."""
    k = num_kind(v)
    if k in (K_INT, K_LONG):
        return INT64_MIN <= v <= INT64_MAX
    if k == K_DOUBLE:
        return math.isfinite(v) and v == int(v) and -(2.0**63) <= v < 2.0**63
    if k == K_DECIMAL:
        d = v.to_decimal()
        return d.is_finite() and d == d.to_integral_value() and INT64_MIN <= d <= INT64_MAX
    return False


def as_int(v: Any) -> int:
    """The integer value of an integral number (callers check `is_integral*` first)."""
    if type(v) is Decimal128:
        return int(v.to_decimal())
    return int(v)


def coercible_to_date(v: Any) -> bool:
    return isinstance(v, DatetimeMS | Timestamp | ObjectId)


def coerce_to_date_ms(v: Any) -> int:
    """Milliseconds since the epoch of a date, timestamp or ObjectId (Value::coerceToDate)."""
    if type(v) is DatetimeMS:
        return int(v)
    if isinstance(v, Timestamp):
        return v.time * 1000
    if isinstance(v, ObjectId):
        return int.from_bytes(v.binary[:4], "big", signed=False) * 1000
    raise MongoError(16006, f"can't convert from BSON type {type_name(v)} to Date")


def fmt_double(x: float) -> str:
    """A double as C++'s default ostream renders it (6 significant digits)."""
    if x != x:
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:g}"


def _fmt_double(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def value_repr(v: Any) -> str:
    """A short rendering of a value for error messages (close to MongoDB's Value::toString)."""
    if v is MISSING:
        return "MISSING"
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    t = type(v)
    if t is str:
        return f'"{v}"'
    if t is float:
        return _fmt_double(v)
    if t is int or t is Int64:
        return str(int(v))
    if t is Decimal128:
        return str(v)
    if t is DatetimeMS:
        try:
            return format_iso_utc(int(v))
        except MongoError:
            return str(int(v))
    if t is dict:
        return "{" + ", ".join(f"{k}: {value_repr(x)}" for k, x in v.items()) + "}"
    if t is list:
        return "[" + ", ".join(value_repr(x) for x in v) + "]"
    if t is ObjectId:
        return str(v)
    return repr(v)
