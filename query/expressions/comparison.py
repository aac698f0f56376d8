"""Comparison ($cmp $eq $ne $gt $gte $lt $lte), boolean ($and $or $not) and conditional
($cond $ifNull $switch) operators.

Comparisons use MongoDB's BSON order (`storage.bson_order`); a missing value sorts like
`undefined`, below null, so ``{$eq: ["$nosuchfield", null]}`` is false as in MongoDB.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bson import Int64
from bson.datetime_ms import DatetimeMS

from storage.bson_order import sort_key
from storage.collation import Collator
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, compile_node, const_fn, parse_args
from .registry import Fn, operator
from .values import truthy

__all__ = ["cmp_values", "agg_key", "agg_key_fn", "cmp_values_fn"]

_MISSING_KEY = (0,)
_NULL_KEY = (5,)
_NAN_KEY = (10, 0, 0)


def agg_key(v: Any) -> tuple:
    """Sort key of a value with MISSING ranked like undefined (below null).

    Identical to `storage.bson_order.sort_key` for every value; the common scalar types are
    keyed here without the general dispatch.
    """
    t = type(v)
    if t is float:
        return (10, 1, v) if v == v else _NAN_KEY
    if t is int or t is Int64:
        return (10, 1, v)
    if t is str:
        return (15, v)
    if t is DatetimeMS:
        return (45, v._value)
    if v is None:
        return _NULL_KEY
    if v is MISSING:
        return _MISSING_KEY
    return sort_key(v)


_FAST = (int, float, str)


def cmp_values(a: Any, b: Any) -> int:
    ta, tb = type(a), type(b)
    if ta is tb and ta in _FAST and (ta is not float or (a == a and b == b)):
        return (a > b) - (a < b)
    ka, kb = agg_key(a), agg_key(b)
    return (ka > kb) - (ka < kb)


def agg_key_fn(collator: Collator | None) -> Callable[[Any], tuple]:
    """`agg_key`, with strings keyed by `collator` when there is one."""
    if collator is None:
        return agg_key
    ck = collator.sort_key

    def key(v: Any) -> tuple:
        return _MISSING_KEY if v is MISSING else ck(v)
    return key


def cmp_values_fn(collator: Collator | None) -> Callable[[Any, Any], int]:
    """`cmp_values` under a collation (None: the simple one)."""
    if collator is None:
        return cmp_values
    key = agg_key_fn(collator)

    def cmp(a: Any, b: Any) -> int:
        ka, kb = key(a), key(b)
        return (ka > kb) - (ka < kb)
    return cmp


def _cmp_op(test: Any) -> Any:
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 2)
        a_fn, b_fn = args
        cmp = cmp_values_fn(scope.collator)

        def f(doc: Any, v: dict) -> Any:
            return test(cmp(a_fn(doc, v), b_fn(doc, v)))
        return f
    return compiler


operator("$eq")(_cmp_op(lambda c: c == 0))
operator("$ne")(_cmp_op(lambda c: c != 0))
operator("$gt")(_cmp_op(lambda c: c > 0))
operator("$gte")(_cmp_op(lambda c: c >= 0))
operator("$lt")(_cmp_op(lambda c: c < 0))
operator("$lte")(_cmp_op(lambda c: c <= 0))
operator("$cmp")(_cmp_op(lambda c: c))


@operator("$and")
def _c_and(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def f(doc: Any, v: dict) -> bool:
        return all(truthy(a(doc, v)) for a in args)
    return f


@operator("$or")
def _c_or(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def f(doc: Any, v: dict) -> bool:
        return any(truthy(a(doc, v)) for a in args)
    return f


@operator("$not")
def _c_not(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> bool:
        return not truthy(a_fn(doc, v))
    return f


@operator("$cond")
def _c_cond(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is dict:
        parts: dict[str, Fn] = {}
        for k, x in arg.items():
            if k not in ("if", "then", "else"):
                raise MongoError(17083, f"Unrecognized parameter to $cond: {k}")
            parts[k] = compile_node(x, scope)
        for k in ("if", "then", "else"):
            if k not in parts:
                raise MongoError(17080, f"Missing '{k}' parameter to $cond")
        c_fn, t_fn, e_fn = parts["if"], parts["then"], parts["else"]
    else:
        args = parse_args(arg, scope)
        check_arity(name, args, 3)
        c_fn, t_fn, e_fn = args

    def f(doc: Any, v: dict) -> Any:
        return t_fn(doc, v) if truthy(c_fn(doc, v)) else e_fn(doc, v)
    return f


@operator("$ifNull")
def _c_if_null(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    if len(args) < 2:
        raise MongoError(1257300, f"$ifNull needs at least two arguments, had: {len(args)}")
    head, last = args[:-1], args[-1]

    def f(doc: Any, v: dict) -> Any:
        for a in head:
            x = a(doc, v)
            if x is not None and x is not MISSING:
                return x
        return last(doc, v)
    return f


@operator("$switch")
def _c_switch(arg: Any, scope: Scope, name: str) -> Fn:
    if type(arg) is not dict:
        raise MongoError(40060, f"$switch requires an object as an argument, found: "
                         f"{type_name(arg)}")
    branches: list[tuple[Fn, Fn]] = []
    default: Fn | None = None
    for k, x in arg.items():
        if k == "branches":
            if type(x) is not list:
                raise MongoError(40061, f"$switch expected an array for 'branches', found: "
                                 f"{type_name(x)}")
            for br in x:
                if type(br) is not dict:
                    raise MongoError(40062, f"$switch expected each branch to be an object, "
                                     f"found: {type_name(br)}")
                case = then = None
                for bk, bx in br.items():
                    if bk == "case":
                        case = compile_node(bx, scope)
                    elif bk == "then":
                        then = compile_node(bx, scope)
                    else:
                        raise MongoError(40063, f"$switch found an unknown argument to a "
                                         f"branch: {bk}")
                if case is None:
                    raise MongoError(40064, "$switch requires each branch have a 'case' "
                                     "expression")
                if then is None:
                    raise MongoError(40065, "$switch requires each branch have a 'then' "
                                     "expression.")
                branches.append((case, then))
        elif k == "default":
            default = compile_node(x, scope)
        else:
            raise MongoError(40067, f"$switch found an unknown argument: {k}")
    if not branches:
        raise MongoError(40068, "$switch requires at least one branch.")

    def f(doc: Any, v: dict) -> Any:
        for case, then in branches:
            if truthy(case(doc, v)):
                return then(doc, v)
        if default is None:
            raise MongoError(40066, "$switch could not find a matching branch for an input, "
                             "and no default was specified.")
        return default(doc, v)
    return f


@operator("$literal", "$const")
def _c_literal(arg: Any, scope: Scope, name: str) -> Fn:
    return const_fn(arg)

