"""Value-level predicates: one candidate value in, True/False out.

Each factory validates its argument (raising MongoError as MongoDB's parser does)
and returns a closure. Path traversal and array expansion happen elsewhere
(`query.match.compiler`); these closures see single values, possibly `MISSING`.

Comparisons stay within a type bracket (``$gt: 5`` never matches a string), except
that everything is above MinKey and below MaxKey. NaN equals NaN and is neither
greater nor less than anything (unlike sort order, where it is the lowest number).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any, Final

from bson import Decimal128, Int64, Regex
from bson.binary import Binary

from query.match.regex import compile_regex, is_regex_value, regex_parts
from storage.bson_order import (
    RANK_MAXKEY,
    RANK_MINKEY,
    RANK_NULL,
    RANK_NUMBER,
    numeric_key,
    sort_key,
    type_rank,
)
from storage.collation import Collator, collation_key_fn, has_string
from storage.errors import MongoError
from storage.vocabulary.bson_types import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    TYPE_ALIASES,
    BsonType,
    bson_type,
    is_number,
)
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = [
    "Pred", "eq_pred", "cmp_pred", "in_pred", "regex_pred", "exists_pred", "type_pred",
    "size_pred", "mod_pred", "bits_pred", "is_nan", "parse_type_codes",
]

Pred = Callable[[Any], bool]

_PLAIN_NUM: Final = frozenset({int, float, Int64})
_OPS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "$lt": operator.lt, "$lte": operator.le, "$gt": operator.gt, "$gte": operator.ge,
    "$eq": operator.eq,
}


def is_nan(v: Any) -> bool:
    t = type(v)
    if t is float:
        return v != v
    if t is Decimal128:
        return v.to_decimal().is_nan()
    return False


def eq_pred(rhs: Any, collator: Collator | None = None) -> Pred:
    """Equality as ``{a: rhs}`` / ``$eq``: null also matches a missing path. Strings compare
    by `collator` (None: the simple collation), also inside objects and arrays."""
    if rhs is None:
        return lambda v: v is None or v is MISSING
    if collator is not None and has_string(rhs):
        return _collated_eq(rhs, collator)
    t = type(rhs)
    if t is str:
        return lambda v: type(v) is str and v == rhs
    if t in _PLAIN_NUM and not (t is float and rhs != rhs):
        key = numeric_key(rhs)

        def num_eq(v: Any) -> bool:
            tv = type(v)
            if tv in _PLAIN_NUM:
                return bool(v == rhs)
            return tv is Decimal128 and numeric_key(v) == key
        return num_eq
    if t is bool:
        return lambda v: type(v) is bool and v is rhs
    key = sort_key(_normalize_regex(rhs))

    def generic_eq(v: Any) -> bool:
        if v is MISSING:
            return False
        try:
            return sort_key(_normalize_regex(v)) == key
        except TypeError:
            return False
    return generic_eq


def _collated_eq(rhs: Any, collator: Collator) -> Pred:
    ck = collator.sort_key
    key = ck(rhs)
    if type(rhs) is str:
        ckey, k = collator.key, key[1]
        return lambda v: type(v) is str and ckey(v) == k

    def eq(v: Any) -> bool:
        if v is MISSING:
            return False
        try:
            return ck(_normalize_regex(v)) == key
        except TypeError:
            return False
    return eq


def _normalize_regex(v: Any) -> Any:
    if isinstance(v, re.Pattern):
        p, o = regex_parts(v)
        return Regex(p, o)
    return v


def cmp_pred(op: str, rhs: Any, collator: Collator | None = None) -> Pred:
    """``$lt $lte $gt $gte`` within rhs's type bracket; strings by `collator`."""
    fn = _OPS[op]
    inclusive = op in ("$lte", "$gte")
    rank = type_rank(rhs)
    rhs_nan = is_nan(rhs)
    t = type(rhs)
    if t in _PLAIN_NUM and not rhs_nan:
        key = numeric_key(rhs)

        def num_cmp(v: Any) -> bool:
            tv = type(v)
            if tv in _PLAIN_NUM:
                return bool(fn(v, rhs))  # NaN compares False both ways, as MongoDB's matcher
            if tv is Decimal128:
                if is_nan(v):
                    return False
                return bool(fn(numeric_key(v), key))
            return _cross_bracket(op, rank, v)
        return num_cmp
    sk = collation_key_fn(collator)
    key = sk(rhs)

    def generic_cmp(v: Any) -> bool:
        if v is MISSING:
            if rank in (RANK_NULL, RANK_MINKEY):
                return inclusive  # MongoDB treats a missing field as equal to null (and MinKey)
            return rank == RANK_MAXKEY and op in ("$lt", "$lte")
        try:
            r = type_rank(v)
        except TypeError:
            return False
        if r != rank:
            return _cross_bracket(op, rank, v)
        if r == RANK_NUMBER and (rhs_nan or is_nan(v)):
            return inclusive and rhs_nan and is_nan(v)
        return bool(fn(sk(v), key))
    return generic_cmp


def _cross_bracket(op: str, rank: int, v: Any) -> bool:
    if v is MISSING:
        return False
    if rank == RANK_MINKEY:
        return op in ("$gt", "$gte")
    if rank == RANK_MAXKEY:
        return op in ("$lt", "$lte")
    return False


def regex_pred(pattern: str, options: str) -> Pred:
    rx = compile_regex(pattern, options)
    norm = (pattern, "".join(sorted(options)))
    search = rx.search

    def pred(v: Any) -> bool:
        if type(v) is str:
            return search(v) is not None
        if is_regex_value(v):
            return regex_parts(v) == norm
        return False
    return pred


def in_pred(values: list[Any], collator: Collator | None = None) -> Pred:
    """``$in``: equality to any listed value (strings by `collator`), or a match of any
    listed regex."""
    sk = collation_key_fn(collator)
    keys: set[Any] = set()
    regexes: list[Pred] = []
    has_null = False
    for x in values:
        if isinstance(x, dict) and x and next(iter(x)).startswith("$") and not (
                "$ref" in x and "$id" in x):
            raise MongoError(ErrorCode.BadValue, "cannot nest $ under $in")
        if is_regex_value(x):
            p, o = regex_parts(x)
            regexes.append(regex_pred(p, o))
            continue
        if x is None:
            has_null = True
        keys.add(sk(x))

    def pred(v: Any) -> bool:
        if v is MISSING:
            return has_null
        if keys:
            try:
                if sk(v) in keys:
                    return True
            except TypeError:
                return False
        for rx in regexes:  # noqa: SIM110
            if rx(v):
                return True
        return False
    return pred


def exists_pred() -> Pred:
    return lambda v: v is not MISSING


def parse_type_codes(arg: Any, name: str = "$type") -> frozenset[int]:
    items = arg if isinstance(arg, list) else [arg]
    codes: set[int] = set()
    for item in items:
        if isinstance(item, str):
            if item == "number":
                codes.update((BsonType.DOUBLE, BsonType.INT32, BsonType.INT64, BsonType.DECIMAL128))
                continue
            code = TYPE_ALIASES.get(item)
            if code is None:
                raise MongoError(ErrorCode.BadValue, f"Unknown type name alias: {item}")
            codes.add(code)
        elif is_number(item):
            if is_nan(item) or (isinstance(item, float) and not item.is_integer()):
                raise MongoError(ErrorCode.BadValue, f"Invalid numerical type code: {item}")
            num = int(item.to_decimal()) if isinstance(item, Decimal128) else int(item)
            if num not in _VALID_CODES:
                raise MongoError(ErrorCode.BadValue, f"Invalid numerical type code: {item}")
            codes.add(num)
        else:
            raise MongoError(ErrorCode.TypeMismatch,
                             "type must be represented as a number or a string")
    if not codes:
        raise MongoError(ErrorCode.FailedToParse, f"{name} must match at least one type")
    return frozenset(codes)


_VALID_CODES: Final = frozenset(TYPE_ALIASES.values())


def type_pred(arg: Any) -> Pred:
    # $type numbers are type bytes except minKey's -1
    types = frozenset(BsonType.MIN_KEY if c == -1 else BsonType(c) for c in parse_type_codes(arg))
    return lambda v: v is not MISSING and bson_type(v) in types


def size_pred(arg: Any) -> Pred:
    t = type(arg)
    if t is int or t is Int64:
        if not INT32_MIN <= arg <= INT32_MAX:
            raise MongoError(ErrorCode.BadValue, "$size must be representable as a 32-bit integer")
        n = int(arg)
    elif t is float:
        if arg != arg or not arg.is_integer() or not INT32_MIN <= arg <= INT32_MAX:
            raise MongoError(ErrorCode.BadValue, "$size must be a whole number")
        n = int(arg)
    elif t is Decimal128:
        d = arg.to_decimal()
        if not d.is_finite() or d != d.to_integral_value():
            raise MongoError(ErrorCode.BadValue, "$size must be a whole number")
        n = int(d)
    else:
        raise MongoError(ErrorCode.BadValue, "$size needs a number")
    if n < 0:
        raise MongoError(ErrorCode.BadValue, "$size may not be negative")
    return lambda v: type(v) is list and len(v) == n


def _to_int64_trunc(v: Any) -> int | None:
    """MongoDB's truncation of a number to a 64-bit integer (None if not finite)."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        if not d.is_finite():
            return None
        x = int(d)
    elif isinstance(v, float):
        if not math.isfinite(v):
            return None
        x = int(v)
    else:
        x = int(v)
    return max(INT64_MIN, min(INT64_MAX, x))


def mod_pred(arg: Any) -> Pred:
    if not isinstance(arg, list):
        raise MongoError(ErrorCode.BadValue, "malformed mod, needs to be an array")
    if len(arg) < 2:
        raise MongoError(ErrorCode.BadValue, "malformed mod, not enough elements")
    if len(arg) > 2:
        raise MongoError(ErrorCode.BadValue, "malformed mod, too many elements")
    d, r = arg
    if not is_number(d):
        raise MongoError(ErrorCode.BadValue, "malformed mod, divisor not a number")
    if not is_number(r):
        raise MongoError(ErrorCode.BadValue, "malformed mod, remainder not a number")
    div = _to_int64_trunc(d)
    rem = _to_int64_trunc(r)
    if div is None:
        raise MongoError(ErrorCode.BadValue,
                         "malformed mod, divisor value is invalid :: caused by :: "
                         "Unable to coerce NaN/Inf to integral type")
    if rem is None:
        raise MongoError(ErrorCode.BadValue,
                         "malformed mod, remainder value is invalid :: caused by :: "
                         "Unable to coerce NaN/Inf to integral type")
    if div == 0:
        raise MongoError(ErrorCode.BadValue, "divisor cannot be 0")

    def pred(v: Any) -> bool:
        if not is_number(v):
            return False
        x = _to_int64_trunc(v)
        if x is None:
            return False
        m = abs(x) % abs(div)  # C++ truncated remainder: the sign follows the dividend
        return (-m if x < 0 else m) == rem
    return pred


def _bit_positions(name: str, arg: Any) -> tuple[list[int], bool]:
    """(positions, is_binary_mask)."""
    if isinstance(arg, list):
        out = []
        for e in arg:
            if not is_number(e):
                raise MongoError(ErrorCode.BadValue,
                                 f"bit positions must be an integer but got: {e!r}")
            if is_nan(e):
                raise MongoError(ErrorCode.BadValue, f"bit positions cannot take a NaN: {e!r}")
            if isinstance(e, float) and not e.is_integer():
                raise MongoError(ErrorCode.BadValue,
                                 f"bit positions must be an integer but got: {e!r}")
            n = int(e.to_decimal()) if isinstance(e, Decimal128) else int(e)
            if not INT32_MIN <= n <= INT32_MAX:
                raise MongoError(ErrorCode.BadValue,
                                 "bit positions cannot be represented as a 32-bit signed "
                                 f"integer: {e!r}")
            if n < 0:
                raise MongoError(ErrorCode.BadValue, f"bit positions must be >= 0 but got: {e!r}")
            out.append(n)
        return out, False
    if is_number(arg):
        if is_nan(arg):
            raise MongoError(ErrorCode.FailedToParse,
                             f"Expected an integer, but found NaN in: {name}: {arg!r}")
        if isinstance(arg, float) and not arg.is_integer():
            raise MongoError(ErrorCode.FailedToParse, f"Expected an integer: {name}: {arg!r}")
        n = int(arg.to_decimal()) if isinstance(arg, Decimal128) else int(arg)
        if n < 0:
            raise MongoError(ErrorCode.FailedToParse,
                             f"Expected a positive number in: {name}: {arg!r}")
        return [i for i in range(64) if n >> i & 1], False
    if isinstance(arg, bytes | Binary):
        data = bytes(arg)
        return [i * 8 + b for i, byte in enumerate(data) for b in range(8) if byte >> b & 1], True
    raise MongoError(ErrorCode.BadValue,
                     f"{name} takes an Array, a number, or a BinData but received: {arg!r}")


def bits_pred(op: str, arg: Any) -> Pred:
    positions, _ = _bit_positions(op, arg)

    def bit_set_num(x: int, p: int) -> bool:
        if p >= 64:
            return x < 0
        return bool((x & 0xFFFFFFFFFFFFFFFF) >> p & 1)

    def bits_of(v: Any) -> Callable[[int], bool] | None:
        if is_number(v):
            if is_nan(v):
                return None
            if isinstance(v, Decimal128):
                d = v.to_decimal()
                if not d.is_finite() or d != d.to_integral_value():
                    return None
                x = int(d)
            elif isinstance(v, float):
                if not math.isfinite(v) or not v.is_integer():
                    return None
                x = int(v)
            else:
                x = int(v)
            if not INT64_MIN <= x <= INT64_MAX:
                return None
            return lambda p: bit_set_num(x, p)
        if isinstance(v, bytes | Binary):
            data = bytes(v)
            return lambda p: p // 8 < len(data) and bool(data[p // 8] >> (p % 8) & 1)
        return None

    def pred(v: Any) -> bool:
        test = bits_of(v)
        if test is None:
            return False
        if op == "$bitsAllSet":
            return all(test(p) for p in positions)
        if op == "$bitsAnySet":
            return any(test(p) for p in positions)
        if op == "$bitsAllClear":
            return not any(test(p) for p in positions)
        return not all(test(p) for p in positions)  # $bitsAnyClear
    return pred
