"""Arithmetic operators: $add $subtract $multiply $divide $mod $abs $ceil $floor $round $trunc
$exp $ln $log $log10 $pow $sqrt.

MongoDB's numeric rules: the result takes the widest operand type (int32 < int64 < double <
decimal); int32 results that overflow become int64, int64 results that overflow become double;
a double meeting a decimal is converted with 15 significant digits; `$add`/`$subtract` accept
one date and then work in milliseconds. null or missing operands give null.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any

from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS

from storage.errors import MongoError
from storage.vocabulary.bson_types import INT32_MAX, INT64_MAX, INT64_MIN, type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, check_arity_range, parse_args
from .registry import Fn, operator
from .values import (
    DEC_CTX,
    K_DECIMAL,
    K_DOUBLE,
    K_INT,
    K_LONG,
    fmt_double,
    int_or_long,
    is_integral,
    make_decimal,
    num_kind,
    to_decimal,
    to_float,
)

__all__ = ["add_values", "subtract_values", "multiply_values", "divide_values", "mod_values"]


_TWO_63 = Decimal(2) ** 63


def _llround(x: float) -> int:
    # C's llround: halves away from zero.
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def _check_long(n: int) -> int:
    if not INT64_MIN <= n <= INT64_MAX:
        raise MongoError(ErrorCode.Overflow, "date overflow")
    return n


def _dec_to_long(d: Decimal) -> int:
    # past int64 before rounding: quantizing 1E+6000 to units would exceed the context
    if not d.is_finite() or abs(d) > _TWO_63:
        raise MongoError(ErrorCode.Overflow, "date overflow")
    n = int(d.quantize(Decimal(1), rounding=ROUND_HALF_EVEN, context=DEC_CTX))
    return _check_long(n)


def _date_addend(v: Any) -> int:
    k = num_kind(v)
    if k in (K_INT, K_LONG):
        return int(v)
    if k == K_DOUBLE:
        if not (-(2.0**63) <= v < 2.0**63):
            raise MongoError(ErrorCode.Overflow, "date overflow")
        return _llround(v)
    return _dec_to_long(v.to_decimal())


def add_values(values: list[Any], op: str = "$add") -> Any:
    """Sum of evaluated operands with MongoDB's type widening (one date allowed)."""
    widest = K_INT
    long_total = 0
    dbl = 0.0
    dec = Decimal(0)
    date_ms: int | None = None
    for v in values:
        if v is None or v is MISSING:
            return None
        k = num_kind(v)
        if k < 0:
            if type(v) is DatetimeMS:
                if date_ms is not None:
                    raise MongoError(16612, "only one date allowed in an $add expression")
                # The sum so far becomes a number of milliseconds.
                if widest <= K_LONG:
                    date_ms = long_total
                elif widest == K_DOUBLE:
                    date_ms = _date_addend(dbl)
                else:
                    date_ms = _dec_to_long(dec)
                date_ms = _check_long(date_ms + int(v))
                continue
            raise MongoError(ErrorCode.TypeMismatch,
                             f"{op} only supports numeric or date types, not {type_name(v)}")
        if date_ms is not None:
            date_ms = _check_long(date_ms + _date_addend(v))
            continue
        if k > widest:
            if k == K_DOUBLE and widest <= K_LONG:
                dbl = float(long_total)
            elif k == K_DECIMAL:
                dec = Decimal(long_total) if widest <= K_LONG else to_decimal(dbl)
            widest = k
        if widest <= K_LONG:
            n = long_total + int(v)
            if INT64_MIN <= n <= INT64_MAX:
                long_total = n
            else:
                widest = K_DOUBLE
                dbl = float(long_total) + float(v)
        elif widest == K_DOUBLE:
            dbl += to_float(v)
        else:
            dec = DEC_CTX.add(dec, to_decimal(v))
    if date_ms is not None:
        return DatetimeMS(date_ms)
    if widest == K_INT:
        return int_or_long(long_total)
    if widest == K_LONG:
        return Int64(long_total)
    if widest == K_DOUBLE:
        return dbl
    return make_decimal(dec)


@operator("$add")
def _c_add(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    if len(args) == 2:
        a_fn, b_fn = args

        def add2(doc: Any, v: dict) -> Any:
            a = a_fn(doc, v)
            b = b_fn(doc, v)
            if type(a) is float and type(b) is float:
                return a + b
            return add_values([a, b])
        return add2

    def add(doc: Any, v: dict) -> Any:
        return add_values([f(doc, v) for f in args])
    return add


def subtract_values(lhs: Any, rhs: Any) -> Any:
    kl, kr = num_kind(lhs), num_kind(rhs)
    if kl >= 0 and kr >= 0:
        k = max(kl, kr)
        if k == K_DECIMAL:
            return make_decimal(DEC_CTX.subtract(to_decimal(lhs), to_decimal(rhs)))
        if k == K_DOUBLE:
            return to_float(lhs) - to_float(rhs)
        n = int(lhs) - int(rhs)
        if k == K_LONG:
            if INT64_MIN <= n <= INT64_MAX:
                return Int64(n)
            return float(lhs) - float(rhs)
        return int_or_long(n)
    if lhs is None or lhs is MISSING or rhs is None or rhs is MISSING:
        return None
    if type(lhs) is DatetimeMS:
        if type(rhs) is DatetimeMS:
            return Int64(int(lhs) - int(rhs))
        if kr in (K_INT, K_LONG):
            return DatetimeMS(_check_long(int(lhs) - int(rhs)))
        if kr == K_DOUBLE:
            if not (-(2.0**63) <= rhs < 2.0**63):
                raise MongoError(ErrorCode.Overflow, "date overflow")
            return DatetimeMS(_check_long(int(lhs) - _llround(rhs)))
        if kr == K_DECIMAL:
            return DatetimeMS(_check_long(int(lhs) - _dec_to_long(rhs.to_decimal())))
        raise MongoError(ErrorCode.TypeMismatch, f"can't $subtract {type_name(rhs)} from Date")
    raise MongoError(ErrorCode.TypeMismatch,
                     f"can't $subtract {type_name(rhs)} from {type_name(lhs)}")


@operator("$subtract")
def _c_subtract(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def sub(doc: Any, v: dict) -> Any:
        a = a_fn(doc, v)
        b = b_fn(doc, v)
        if type(a) is float and type(b) is float:
            return a - b
        return subtract_values(a, b)
    return sub


def multiply_values(values: list[Any]) -> Any:
    ptype = K_INT
    dprod = 1.0
    lprod = 1
    dec = Decimal(1)
    for v in values:
        if v is None or v is MISSING:
            return None
        k = num_kind(v)
        if k < 0:
            raise MongoError(ErrorCode.TypeMismatch,
                             f"$multiply only supports numeric types, not {type_name(v)}")
        old = ptype
        ptype = max(ptype, k)
        if ptype == K_DECIMAL:
            if old != K_DECIMAL:
                dec = to_decimal(dprod) if old == K_DOUBLE else Decimal(lprod)
            dec = DEC_CTX.multiply(dec, to_decimal(v))
        else:
            f = to_float(v)
            dprod *= f
            if ptype != K_DOUBLE:
                if not math.isfinite(f):
                    ptype = K_DOUBLE
                else:
                    n = lprod * int(v)
                    if INT64_MIN <= n <= INT64_MAX:
                        lprod = n
                    else:
                        ptype = K_DOUBLE
    if ptype == K_DOUBLE:
        return dprod
    if ptype == K_LONG:
        return Int64(lprod)
    if ptype == K_INT:
        return int_or_long(lprod)
    return make_decimal(dec)


@operator("$multiply")
def _c_multiply(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def mul(doc: Any, v: dict) -> Any:
        return multiply_values([f(doc, v) for f in args])
    return mul


def divide_values(lhs: Any, rhs: Any) -> Any:
    kl, kr = num_kind(lhs), num_kind(rhs)
    if kl >= 0 and kr >= 0:
        if kl == K_DECIMAL or kr == K_DECIMAL:
            den = to_decimal(rhs)
            if den.is_zero():
                raise MongoError(ErrorCode.BadValue, "can't $divide by zero")
            return make_decimal(DEC_CTX.divide(to_decimal(lhs), den))
        d = to_float(rhs)
        if d == 0.0:
            raise MongoError(ErrorCode.BadValue, "can't $divide by zero")
        return to_float(lhs) / d
    if lhs is None or lhs is MISSING or rhs is None or rhs is MISSING:
        return None
    raise MongoError(ErrorCode.TypeMismatch, f"$divide only supports numeric types, not "
                     f"{type_name(lhs)} and {type_name(rhs)}")


@operator("$divide")
def _c_divide(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def div(doc: Any, v: dict) -> Any:
        return divide_values(a_fn(doc, v), b_fn(doc, v))
    return div


def _trunc_mod(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def mod_values(lhs: Any, rhs: Any) -> Any:
    kl, kr = num_kind(lhs), num_kind(rhs)
    if kl >= 0 and kr >= 0:
        if kl == K_DECIMAL or kr == K_DECIMAL:
            right = to_decimal(rhs)
            if right.is_zero():
                raise MongoError(5733415, "can't $mod by zero")
            return make_decimal(DEC_CTX.remainder(to_decimal(lhs), right))
        if to_float(rhs) == 0:
            raise MongoError(16610, "can't $mod by zero")
        if kl == K_DOUBLE or kr == K_DOUBLE:
            return math.fmod(to_float(lhs), to_float(rhs))
        r = _trunc_mod(int(lhs), int(rhs))
        if kl == K_LONG or kr == K_LONG:
            return Int64(r)
        return r
    if lhs is None or lhs is MISSING or rhs is None or rhs is MISSING:
        return None
    raise MongoError(16611, f"$mod only supports numeric types, not {type_name(lhs)} and "
                     f"{type_name(rhs)}")


@operator("$mod")
def _c_mod(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def mod(doc: Any, v: dict) -> Any:
        return mod_values(a_fn(doc, v), b_fn(doc, v))
    return mod


# ---------------------------------------------------------------- single-argument math

def _unary(names: tuple[str, ...], impl: Any) -> None:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 1)
        (a_fn,) = args

        def f(doc: Any, v: dict) -> Any:
            x = a_fn(doc, v)
            if x is None or x is MISSING:
                return None
            k = num_kind(x)
            if k < 0:
                raise MongoError(28765, f"{name} only supports numeric types, not "
                                 f"{type_name(x)}")
            return impl(x, k)
        return f
    for n in names:
        operator(n)(compiler)


def _abs(x: Any, k: int) -> Any:
    if k == K_DOUBLE:
        return abs(x)
    if k == K_DECIMAL:
        return Decimal128(x.to_decimal().copy_abs())
    n = int(x)
    if n == INT64_MIN:
        raise MongoError(28680, "can't take $abs of long long min")
    return Int64(abs(n)) if k == K_LONG else int_or_long(abs(n))


def _round_double(x: float, fn: Any) -> float:
    if not math.isfinite(x):
        return x
    r = float(fn(x))
    return math.copysign(r, x) if r == 0 else r


def _ceil(x: Any, k: int) -> Any:
    if k == K_DOUBLE:
        return _round_double(x, math.ceil)
    if k == K_DECIMAL:
        return _quantize_dec(x.to_decimal(), 0, ROUND_CEILING)
    return x


def _floor(x: Any, k: int) -> Any:
    if k == K_DOUBLE:
        return _round_double(x, math.floor)
    if k == K_DECIMAL:
        return _quantize_dec(x.to_decimal(), 0, ROUND_FLOOR)
    return x


def _quantize_dec(d: Decimal, places: int, rounding: str) -> Decimal128:
    if d.is_infinite():
        return make_decimal(d)
    q = d.quantize(Decimal((0, (1,), -places)), rounding=rounding, context=DEC_CTX)
    return make_decimal(q)


def _exp(x: Any, k: int) -> Any:
    if k == K_DECIMAL:
        return make_decimal(DEC_CTX.exp(x.to_decimal()))
    try:
        return math.exp(to_float(x))
    except OverflowError:
        return math.inf


def _ln(x: Any, k: int) -> Any:
    if k == K_DECIMAL:
        d = x.to_decimal()
        if d > 0:
            return make_decimal(DEC_CTX.ln(d))
    f = to_float(x)
    if not (f > 0 or f != f):
        raise MongoError(28766, f"$ln's argument must be a positive number, but is "
                         f"{fmt_double(f)}")
    return math.log(f) if f == f and f != math.inf else f


def _log10(x: Any, k: int) -> Any:
    if k == K_DECIMAL:
        d = x.to_decimal()
        if d > 0:
            return make_decimal(DEC_CTX.log10(d))
    f = to_float(x)
    if not (f > 0 or f != f):
        raise MongoError(28761, f"$log10's argument must be a positive number, but is "
                         f"{fmt_double(f)}")
    return math.log10(f) if f == f and f != math.inf else f


def _sqrt(x: Any, k: int) -> Any:
    if k == K_DECIMAL:
        d = x.to_decimal()
        if d < 0:
            raise MongoError(28714, "$sqrt's argument must be greater than or equal to 0")
        return make_decimal(DEC_CTX.sqrt(d))
    f = to_float(x)
    if f < 0:
        raise MongoError(28714, "$sqrt's argument must be greater than or equal to 0")
    return math.sqrt(f) if f == f else f


_unary(("$abs",), _abs)
_unary(("$ceil",), _ceil)
_unary(("$floor",), _floor)
_unary(("$exp",), _exp)
_unary(("$ln",), _ln)
_unary(("$log10",), _log10)
_unary(("$sqrt",), _sqrt)


@operator("$log")
def _c_log(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def log(doc: Any, v: dict) -> Any:
        x = a_fn(doc, v)
        base = b_fn(doc, v)
        if x is None or x is MISSING or base is None or base is MISSING:
            return None
        kx, kb = num_kind(x), num_kind(base)
        if kx < 0:
            raise MongoError(28756, f"$log's argument must be numeric, not {type_name(x)}")
        if kb < 0:
            raise MongoError(28757, f"$log's base must be numeric, not {type_name(base)}")
        if kx == K_DECIMAL or kb == K_DECIMAL:
            dx, db = to_decimal(x), to_decimal(base)
            if dx > 0 and db != 1 and db > 0:
                return make_decimal(DEC_CTX.divide(DEC_CTX.ln(dx), DEC_CTX.ln(db)))
        fx, fb = to_float(x), to_float(base)
        if not (fx > 0 or fx != fx):
            raise MongoError(28758, f"$log's argument must be a positive number, but is "
                             f"{fmt_double(fx)}")
        if not ((fb > 0 and fb != 1) or fb != fb):
            raise MongoError(28759, "$log's base must be a positive number not equal to 1, "
                             f"but is {fmt_double(fb)}")
        if fx != fx or fb != fb:
            return math.nan
        return _safe_log(fx) / _safe_log(fb)
    return log


def _safe_log(x: float) -> float:
    return math.inf if x == math.inf else math.log(x)


def _float_pow(b: float, e: float) -> float:
    try:
        return math.pow(b, e)
    except OverflowError:
        neg = b < 0 and e == int(e) and int(e) % 2 == 1
        return -math.inf if neg else math.inf
    except ValueError:
        if b == 0 and e < 0:
            return math.inf
        return math.nan


@operator("$pow")
def _c_pow(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def pow_(doc: Any, v: dict) -> Any:
        base = a_fn(doc, v)
        exp = b_fn(doc, v)
        if base is None or base is MISSING or exp is None or exp is MISSING:
            return None
        kb, ke = num_kind(base), num_kind(exp)
        if kb < 0:
            raise MongoError(28762, f"$pow's base must be numeric, not {type_name(base)}")
        if ke < 0:
            raise MongoError(28763, f"$pow's exponent must be numeric, not {type_name(exp)}")
        if kb == K_DECIMAL or ke == K_DECIMAL:
            db, de = to_decimal(base), to_decimal(exp)
            if db.is_zero() and de < 0:
                raise MongoError(28764, "$pow cannot take a base of 0 and a negative exponent")
            return make_decimal(DEC_CTX.power(db, de))
        fb, fe = to_float(base), to_float(exp)
        if fb == 0 and fe < 0:
            raise MongoError(28764, "$pow cannot take a base of 0 and a negative exponent")
        if kb == K_DOUBLE or ke == K_DOUBLE:
            return _float_pow(fb, fe)
        ib, ie = int(base), int(exp)
        as_long = kb == K_LONG or ke == K_LONG

        def fmt(n: int) -> Any:
            return Int64(n) if as_long else int_or_long(n)
        if ib == 0:
            return fmt(1 if ie == 0 else 0)
        if ib == 1:
            return fmt(1)
        if ib == -1:
            return fmt(1 if ie % 2 == 0 else -1)
        if ie < 0 or ie > 63:
            return _float_pow(float(ib), float(ie))
        r = ib**ie
        if INT64_MIN <= r <= INT64_MAX:
            return fmt(r)
        return _float_pow(float(ib), float(ie))
    return pow_


def _round_or_trunc(name: str, rounding: str) -> Any:
    def compiler(arg: Any, scope: Scope, opname: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity_range(opname, args, 1, 2)
        x_fn = args[0]
        p_fn = args[1] if len(args) > 1 else None

        def f(doc: Any, v: dict) -> Any:
            x = x_fn(doc, v)
            if x is None or x is MISSING:
                return None
            k = num_kind(x)
            if k < 0:
                raise MongoError(51081, f"{opname} only supports numeric types, not "
                                 f"{type_name(x)}")
            prec = 0
            if p_fn is not None:
                p = p_fn(doc, v)
                if p is None or p is MISSING:
                    return None
                if not is_integral(p):
                    raise MongoError(51082, f"precision argument to  {opname} must be a "
                                     "integral value")
                prec = int(to_float(p)) if type(p) is float else int(p) \
                    if type(p) is not Decimal128 else int(p.to_decimal())
                if not -20 <= prec <= 100:
                    raise MongoError(51083, f"cannot apply {opname} with precision value "
                                     f"{prec} value must be in [-20, 100]")
            quantum = Decimal((0, (1,), -prec))
            if k == K_DECIMAL:
                d = x.to_decimal()
                if d.is_infinite():
                    return x
                return make_decimal(d.quantize(quantum, rounding=rounding, context=DEC_CTX))
            if k == K_DOUBLE:
                if math.isinf(x):
                    return x
                if x != x:
                    return x
                d = DEC_CTX.create_decimal(x)
                out = float(d.quantize(quantum, rounding=rounding, context=DEC_CTX))
                return math.copysign(out, x) if out == 0 else out
            if prec >= 0:
                return x
            n = int(x)
            out = int(Decimal(n).quantize(quantum, rounding=rounding, context=DEC_CTX))
            if k == K_LONG or out > INT32_MAX:
                return Int64(out)
            return out
        return f
    operator(name)(compiler)


_round_or_trunc("$round", ROUND_HALF_EVEN)
_round_or_trunc("$trunc", ROUND_DOWN)
