"""Numeric arithmetic for ``$inc`` and ``$mul`` with MongoDB's type promotion (SafeNum).

- int32 op int32 stays int32 unless it overflows, then it is computed as int64;
- int64 involved (and no double/decimal): int64; an int64 overflow is an error;
- a double involved (no decimal): double;
- a decimal involved: decimal128 (34 digits, IEEE 754-2008 rounding).

Values are decoded BSON numbers: `int` (int32 or a wide int), `bson.Int64`,
`float`, `bson.Decimal128`.
"""

from __future__ import annotations

import decimal
from typing import Any, Final

from bson import Decimal128, Int64
from bson.decimal128 import create_decimal128_context

from storage.vocabulary.bson_types import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

__all__ = ["arith", "zero_like", "ArithOverflow"]

_CTX: Final = create_decimal128_context()

_INT32, _INT64, _DOUBLE, _DECIMAL = 0, 1, 2, 3


class ArithOverflow(Exception):
    """An int64 result out of range: MongoDB refuses the update."""


def _kind(v: Any) -> int:
    t = type(v)
    if t is float:
        return _DOUBLE
    if t is Decimal128:
        return _DECIMAL
    if t is Int64:
        return _INT64
    return _INT32 if INT32_MIN <= v <= INT32_MAX else _INT64


def _to_decimal(v: Any) -> decimal.Decimal:
    if isinstance(v, Decimal128):
        return v.to_decimal()
    if isinstance(v, float):
        return _CTX.create_decimal_from_float(v)
    return _CTX.create_decimal(int(v))


def arith(op: str, a: Any, b: Any) -> Any:
    """``a + b`` (op "add") or ``a * b`` (op "mul") with promotion; may raise ArithOverflow."""
    kind = max(_kind(a), _kind(b))
    if kind == _DECIMAL:
        da, db = _to_decimal(a), _to_decimal(b)
        return Decimal128(_CTX.add(da, db) if op == "add" else _CTX.multiply(da, db))
    if kind == _DOUBLE:
        fa, fb = float(a), float(b)
        return fa + fb if op == "add" else fa * fb
    r = int(a) + int(b) if op == "add" else int(a) * int(b)
    if kind == _INT32 and INT32_MIN <= r <= INT32_MAX:
        return r
    if INT64_MIN <= r <= INT64_MAX:
        return Int64(r)
    raise ArithOverflow


def zero_like(v: Any) -> Any:
    """A zero of `v`'s numeric type (what ``$mul`` creates on a missing field)."""
    k = _kind(v)
    if k == _DOUBLE:
        return 0.0
    if k == _DECIMAL:
        return Decimal128(_CTX.multiply(_to_decimal(v), decimal.Decimal(0)))
    if k == _INT64:
        return Int64(0)
    return 0
