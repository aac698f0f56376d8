"""Set operators over arrays: $setUnion $setIntersection $setDifference $setEquals
$setIsSubset $allElementsTrue $anyElementTrue.

Elements are compared with BSON equality (1 == 1.0). Like MongoDB (which builds ordered value
sets), $setUnion and $setIntersection return their elements in BSON order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

from .comparison import agg_key, agg_key_fn
from .core import Scope, check_arity, parse_args
from .registry import Fn, operator
from .values import truthy


def _ordered_unique(values: list, key: Callable[[Any], tuple] = agg_key) -> list:
    seen: dict[tuple, Any] = {}
    for x in values:
        seen.setdefault(key(x), x)
    return [seen[k] for k in sorted(seen)]


@operator("$setUnion")
def _c_set_union(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    key = agg_key_fn(scope.collator)

    def f(doc: Any, v: dict) -> Any:
        vals: list = []
        for a in args:
            x = a(doc, v)
            if x is None or x is MISSING:
                return None
            if type(x) is not list:
                raise MongoError(17043, f"All operands of $setUnion must be arrays. One "
                                 f"argument is of type: {type_name(x)}")
            vals.extend(x)
        return _ordered_unique(vals, key)
    return f


@operator("$setIntersection")
def _c_set_intersection(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    key = agg_key_fn(scope.collator)

    def f(doc: Any, v: dict) -> Any:
        current: dict[tuple, Any] | None = None
        for a in args:
            x = a(doc, v)
            if x is None or x is MISSING:
                return None
            if type(x) is not list:
                raise MongoError(17047, f"All operands of $setIntersection must be arrays. One "
                                 f"argument is of type: {type_name(x)}")
            keyed: dict[Any, Any] = {}
            for e in x:
                keyed.setdefault(key(e), e)
            if current is None:
                current = keyed
            else:
                current = {k: e for k, e in current.items() if k in keyed}
        if current is None:
            return []
        return [current[k] for k in sorted(current)]
    return f


@operator("$setDifference")
def _c_set_difference(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    key = agg_key_fn(scope.collator)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def f(doc: Any, v: dict) -> Any:
        lhs, rhs = a_fn(doc, v), b_fn(doc, v)
        if lhs is None or lhs is MISSING or rhs is None or rhs is MISSING:
            return None
        if type(lhs) is not list:
            raise MongoError(17048, "both operands of $setDifference must be arrays. First "
                             f"argument is of type: {type_name(lhs)}")
        if type(rhs) is not list:
            raise MongoError(17049, "both operands of $setDifference must be arrays. Second "
                             f"argument is of type: {type_name(rhs)}")
        seen = {key(e) for e in rhs}
        out = []
        for e in lhs:
            k = key(e)
            if k not in seen:
                seen.add(k)
                out.append(e)
        return out
    return f


@operator("$setEquals")
def _c_set_equals(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    key = agg_key_fn(scope.collator)
    if len(args) < 2:
        raise MongoError(17045, f"$setEquals needs at least two arguments had: {len(args)}")

    def f(doc: Any, v: dict) -> Any:
        first = None
        for i, a in enumerate(args):
            x = a(doc, v)
            if type(x) is not list:
                raise MongoError(17044, f"All operands of $setEquals must be arrays. {i + 1}-th "
                                 f"argument is of type: {type_name(x)}")
            s = {key(e) for e in x}
            if first is None:
                first = s
            elif s != first:
                return False
        return True
    return f


@operator("$setIsSubset")
def _c_set_is_subset(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    key = agg_key_fn(scope.collator)
    check_arity(name, args, 2)
    a_fn, b_fn = args

    def f(doc: Any, v: dict) -> Any:
        lhs = a_fn(doc, v)
        if type(lhs) is not list:
            raise MongoError(17046, "both operands of $setIsSubset must be arrays. First "
                             f"argument is of type: {type_name(lhs)}")
        rhs = b_fn(doc, v)
        if type(rhs) is not list:
            raise MongoError(17042, "both operands of $setIsSubset must be arrays. Second "
                             f"argument is of type: {type_name(rhs)}")
        keys = {key(e) for e in rhs}
        return all(key(e) in keys for e in lhs)
    return f


def _elements(all_: bool) -> Any:
    code = 17040 if all_ else 17041

    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        args = parse_args(arg, scope)
        check_arity(name, args, 1)
        (a_fn,) = args

        def f(doc: Any, v: dict) -> Any:
            a = a_fn(doc, v)
            if type(a) is not list:
                raise MongoError(code, f"{name}'s argument must be an array, but is "
                                 f"{type_name(a)}")
            if all_:
                return all(truthy(x) for x in a)
            return any(truthy(x) for x in a)
        return f
    return compiler


operator("$allElementsTrue")(_elements(True))
operator("$anyElementTrue")(_elements(False))
