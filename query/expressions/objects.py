"""Object operators: $mergeObjects $getField $setField $unsetField $objectToArray
$arrayToObject."""

from __future__ import annotations

from typing import Any

from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

from .core import Scope, check_arity, compile_node, parse_args
from .registry import Fn, operator
from .values import value_repr

__all__ = ["merge_objects_into"]


def merge_objects_into(out: dict, x: Any) -> None:
    """Merge one $mergeObjects operand into `out` (null/missing ignored)."""
    if x is None or x is MISSING:
        return
    if type(x) is not dict:
        raise MongoError(40400, f"$mergeObjects requires object inputs, but input "
                         f"{value_repr(x)} is of type {type_name(x)}")
    out.update(x)


@operator("$mergeObjects")
def _c_merge_objects(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)

    def f(doc: Any, v: dict) -> Any:
        out: dict = {}
        for a in args:
            merge_objects_into(out, a(doc, v))
        return out
    return f


@operator("$objectToArray")
def _c_object_to_array(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        x = a_fn(doc, v)
        if x is None or x is MISSING:
            return None
        if type(x) is not dict:
            raise MongoError(40390, f"$objectToArray requires a document input, found: "
                             f"{type_name(x)}")
        return [{"k": k, "v": val} for k, val in x.items()]
    return f


@operator("$arrayToObject")
def _c_array_to_object(arg: Any, scope: Scope, name: str) -> Fn:
    args = parse_args(arg, scope)
    check_arity(name, args, 1)
    (a_fn,) = args

    def f(doc: Any, v: dict) -> Any:
        arr = a_fn(doc, v)
        if arr is None or arr is MISSING:
            return None
        if type(arr) is not list:
            raise MongoError(40386, f"$arrayToObject requires an array input, found: "
                             f"{type_name(arr)}")
        out: dict = {}
        if not arr:
            return out
        if type(arr[0]) is list:
            pairs = True
        elif type(arr[0]) is dict:
            pairs = False
        else:
            raise MongoError(40398, f"Unrecognised input type format for $arrayToObject: "
                             f"{type_name(arr[0])}")
        for el in arr:
            if pairs:
                if type(el) is not list:
                    raise MongoError(40396, "$arrayToObject requires a consistent input format. "
                                     "Elements mustall be arrays or all be objects. Array was "
                                     f"detected, now found: {type_name(el)}")
                if len(el) != 2:
                    raise MongoError(40397, "$arrayToObject requires an array of size 2 arrays,"
                                     f"found array of size: {len(el)}")
                k, val = el
                if type(k) is not str:
                    raise MongoError(40395, "$arrayToObject requires an array of key-value "
                                     "pairs, where the key must be of type string. Found key "
                                     f"type: {type_name(k)}")
            else:
                if type(el) is not dict:
                    raise MongoError(40391, "$arrayToObject requires a consistent input format. "
                                     "Elements mustall be arrays or all be objects. Object was "
                                     f"detected, now found: {type_name(el)}")
                if len(el) != 2:
                    raise MongoError(40392, "$arrayToObject requires an object keys of 'k' and "
                                     f"'v'. Found incorrect number of keys:{len(el)}")
                if "k" not in el or "v" not in el:
                    raise MongoError(40393, "$arrayToObject requires an object with keys 'k' "
                                     "and 'v'. Missing either or both keys from: "
                                     f"{value_repr(el)}")
                k, val = el["k"], el["v"]
                if type(k) is not str:
                    raise MongoError(40394, "$arrayToObject requires an object with keys 'k' "
                                     "and 'v', where the value of 'k' must be of type string. "
                                     f"Found type: {type_name(k)}")
            if "\0" in k:
                raise MongoError(4940400, "Key field cannot contain an embedded null byte")
            out[k] = val
        return out
    return f


def _field_args(name: str, arg: Any, scope: Scope, fields: tuple[str, ...],
                codes: dict[str, int]) -> dict[str, Any]:
    # $getField's short form takes the field name as any operand, an expression object
    # ({$literal: "$a"}, the way to name a $-prefixed field) included
    if name == "$getField" and (type(arg) is not dict
                                or (arg and next(iter(arg)).startswith("$"))):
        return {"field": arg}
    if type(arg) is not dict:
        raise MongoError(codes["object"], f"{name} only supports an object as its argument")
    out: dict[str, Any] = {}
    for k, x in arg.items():
        if k not in fields:
            raise MongoError(codes["unknown"], f"{name} found an unknown argument: {k}")
        out[k] = x
    return out


def _field_name_fn(name: str, spec: Any, scope: Scope, code: int) -> Fn:
    if type(spec) is str and spec.startswith("$"):
        raise MongoError(code, f"{name} requires 'field' to evaluate to a constant, but got a "
                         "non-constant argument")
    fn = compile_node(spec, scope)
    return fn


@operator("$getField")
def _c_get_field(arg: Any, scope: Scope, name: str) -> Fn:
    spec = _field_args(name, arg, scope, ("field", "input"),
                       {"object": 3041703, "unknown": 3041701})
    if "field" not in spec:
        raise MongoError(3041702, "$getField requires 'field' to be specified")
    field_fn = _field_name_fn(name, spec["field"], scope, 5654602)
    input_fn = compile_node(spec["input"], scope) if "input" in spec else \
        _current_fn(scope)

    def f(doc: Any, v: dict) -> Any:
        field = field_fn(doc, v)
        if type(field) is not str:
            raise MongoError(3041704, f"$getField requires 'field' to evaluate to type String, "
                             f"but got {type_name(field)}")
        inp = input_fn(doc, v)
        if inp is None or inp is MISSING:
            return None if inp is None else MISSING
        if type(inp) is not dict:
            raise MongoError(3041705, f"$getField requires 'input' to evaluate to type Object, "
                             f"but got {type_name(inp)}")
        return inp.get(field, MISSING)
    return f


def _current_fn(scope: Scope) -> Fn:
    if scope.current_rebound:
        def cur(doc: Any, v: dict) -> Any:
            return v["CURRENT"]
        return cur

    def root(doc: Any, v: dict) -> Any:
        return doc
    return root


def _set_or_unset(unset: bool) -> Any:
    fields = ("field", "input") if unset else ("field", "input", "value")

    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        spec = _field_args(name, arg, scope, fields, {"object": 4161100, "unknown": 4161101})
        for k, code in (("field", 4161102), ("input", 4161103)):
            if k not in spec:
                raise MongoError(code, f"{name} requires '{k}' to be specified")
        if not unset and "value" not in spec:
            raise MongoError(4161104, f"{name} requires 'value' to be specified")
        fspec = spec["field"]
        literal = type(fspec) is dict and list(fspec) == ["$literal"]
        if literal:
            fspec = fspec["$literal"]
        if type(fspec) is not str:
            raise MongoError(4161106, f"{name} requires 'field' to evaluate to type String, "
                             f"but got {type_name(fspec)}")
        if fspec.startswith("$") and not literal:
            raise MongoError(4161108, "A field path reference which is not allowed in this "
                             "context. Did you mean {$literal: '" + fspec + "'}?")
        field = fspec
        input_fn = compile_node(spec["input"], scope)
        value_fn = None if unset else compile_node(spec["value"], scope)

        def f(doc: Any, v: dict) -> Any:
            inp = input_fn(doc, v)
            if inp is None or inp is MISSING:
                return None
            if type(inp) is not dict:
                raise MongoError(4161105, f"{name} requires 'input' to evaluate to type Object")
            out = dict(inp)
            val = MISSING if value_fn is None else value_fn(doc, v)
            if val is MISSING:
                out.pop(field, None)
            else:
                out[field] = val
            return out
        return f
    return compiler


operator("$setField")(_set_or_unset(False))
operator("$unsetField")(_set_or_unset(True))
