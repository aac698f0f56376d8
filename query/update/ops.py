"""The leaf update operators: each validates its argument when the update is parsed
and later applies itself to one place (a container and a key) in the document.

A place is ``(container, key)`` where container is a dict (key: field name) or a
list (key: decimal index string); `exists`/`cur` say what is there now.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from bson import Decimal128

from query.match import compile_filter
from query.match.regex import compile_regex, is_regex_value, regex_parts
from query.paths import is_array_index
from query.update.arith import ArithOverflow, arith, zero_like
from query.update.values import identical, short_repr
from storage.bson_order import sort_key, values_equal
from storage.collation import Collator, collation_key_fn
from storage.errors import MongoError
from storage.vocabulary.bson_types import is_number, type_name
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

if TYPE_CHECKING:
    from query.update.core import ApplyContext

__all__ = ["Leaf", "make_leaf", "set_place", "get_place"]


def get_place(container: Any, key: str) -> tuple[bool, Any]:
    if type(container) is list:
        if not is_array_index(key):
            return False, MISSING
        idx = int(key)
        if idx >= len(container):
            return False, MISSING
        return True, container[idx]
    if key in container:
        return True, container[key]
    return False, MISSING


def set_place(container: Any, key: str, value: Any, path: list[str]) -> None:
    if type(container) is list:
        if not is_array_index(key):
            parent = path[-2] if len(path) >= 2 else ""
            raise MongoError(ErrorCode.PathNotViable, f"Cannot create field '{key}' in element "
                             f"{{{parent}: {short_repr(container)}}}")
        idx = int(key)
        if idx >= len(container):
            container.extend([None] * (idx + 1 - len(container)))
        container[idx] = value
    else:
        container[key] = value


@dataclass
class Leaf:
    """One ``{$op: {path: arg}}`` entry, compiled."""

    op: str
    path: str
    arg: Any
    apply_fn: Callable[[Leaf, Any, str, bool, Any, list[str], ApplyContext], None]
    extra: dict[str, Any] = field(default_factory=dict)

    def apply(self, container: Any, key: str, exists: bool, cur: Any, path: list[str],
              ctx: ApplyContext) -> None:
        self.apply_fn(self, container, key, exists, cur, path, ctx)


# --------------------------------------------------------------------------- $set & co.

def _apply_set(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
               path: list[str], ctx: ApplyContext) -> None:
    if exists and identical(cur, leaf.arg):
        return
    set_place(container, key, copy.deepcopy(leaf.arg), path)


def _apply_set_on_insert(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                         path: list[str], ctx: ApplyContext) -> None:
    if ctx.is_insert:
        _apply_set(leaf, container, key, exists, cur, path, ctx)


def _apply_unset(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                 path: list[str], ctx: ApplyContext) -> None:
    if not exists:
        return
    if type(container) is list:
        container[int(key)] = None
    else:
        del container[key]


def _arith_apply(name: str, verb: str) -> Callable[..., None]:
    def apply(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
              path: list[str], ctx: ApplyContext) -> None:
        if not exists:
            set_place(container, key, leaf.arg if verb == "add" else zero_like(leaf.arg), path)
            return
        if not is_number(cur):
            raise MongoError(ErrorCode.TypeMismatch,
                             f"Cannot apply {name} to a value of non-numeric type. "
                             f"{{_id: {short_repr(ctx.root.get('_id'))}}} has the field "
                             f"'{key}' of non-numeric type {type_name(cur)}")
        try:
            result = arith(verb, cur, leaf.arg)
        except ArithOverflow:
            raise MongoError(ErrorCode.BadValue,
                             f"Failed to apply {name} operations to current value "
                             f"({short_repr(cur)}) for document "
                             f"{{_id: {short_repr(ctx.root.get('_id'))}}}") from None
        set_place(container, key, result, path)
    return apply


def _apply_min_max(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                   path: list[str], ctx: ApplyContext) -> None:
    if not exists:
        set_place(container, key, copy.deepcopy(leaf.arg), path)
        return
    sk = leaf.extra.get("key", sort_key)
    ka, kc = sk(leaf.arg), sk(cur)
    c = (ka > kc) - (ka < kc)
    if (leaf.op == "$min" and c < 0) or (leaf.op == "$max" and c > 0):
        set_place(container, key, copy.deepcopy(leaf.arg), path)


def _apply_current_date(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                        path: list[str], ctx: ApplyContext) -> None:
    value = ctx.now_timestamp() if leaf.extra["timestamp"] else ctx.now_date()
    set_place(container, key, value, path)


# --------------------------------------------------------------------------- arrays

def _require_array_for(name: str, key: str, cur: Any, ctx: ApplyContext) -> None:
    if type(cur) is not list:
        raise MongoError(ErrorCode.BadValue,
                         f"The field '{key}' must be an array but is of type {type_name(cur)} in "
                         f"document {{_id: {short_repr(ctx.root.get('_id'))}}}")


def _push_sort_key(spec: Any, sort_key: Callable[[Any], Any] = sort_key
                   ) -> Callable[[Any], Any]:
    if not isinstance(spec, dict):
        return sort_key
    fields = [(tuple(p.split(".")), d) for p, d in spec.items()]

    def get(e: Any, parts: tuple[str, ...]) -> Any:
        cur = e
        for part in parts:
            if type(cur) is dict and part in cur:
                cur = cur[part]
            else:
                return MISSING
        return cur

    def key(e: Any) -> Any:
        out = []
        for parts, d in fields:
            v = get(e, parts)
            k = (-2,) if v is MISSING else sort_key(v)
            out.append(_Rev(k) if d < 0 else k)
        return tuple(out)
    return key


class _Rev:
    __slots__ = ("k",)

    def __init__(self, k: Any) -> None:
        self.k = k

    def __lt__(self, other: _Rev) -> bool:
        return bool(other.k < self.k)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Rev) and self.k == other.k

    __hash__ = None  # type: ignore[assignment]


def _apply_push(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                path: list[str], ctx: ApplyContext) -> None:
    if exists:
        _require_array_for("$push", key, cur, ctx)
        arr = list(cur)
    else:
        arr = []
    items = copy.deepcopy(leaf.extra["each"])
    position = leaf.extra.get("position")
    if position is None or position >= len(arr):
        arr.extend(items)
    else:
        at = position if position >= 0 else max(len(arr) + position, 0)
        arr[at:at] = items
    sort_spec = leaf.extra.get("sort")
    if sort_spec is not None:
        sk = leaf.extra.get("key", sort_key)
        if isinstance(sort_spec, dict):
            arr.sort(key=_push_sort_key(sort_spec, sk))
        else:
            arr.sort(key=sk, reverse=sort_spec < 0)
    n = leaf.extra.get("slice")
    if n is not None:
        arr = arr[:n] if n >= 0 else arr[max(len(arr) + n, 0):]
    set_place(container, key, arr, path)


def _apply_add_to_set(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                      path: list[str], ctx: ApplyContext) -> None:
    items = leaf.extra["each"]
    if not exists:
        set_place(container, key, copy.deepcopy(items), path)
        return
    if type(cur) is not list:
        raise MongoError(ErrorCode.BadValue,
                         f"Cannot apply $addToSet to non-array field. Field named '{key}' has "
                         f"non-array type {type_name(cur)}")
    sk = leaf.extra.get("key", sort_key)
    keys = {_hashable(sk(e)) for e in cur}
    added = False
    for item in items:
        k = _hashable(sk(item))
        if k not in keys:
            keys.add(k)
            cur.append(copy.deepcopy(item))
            added = True
    if added:
        set_place(container, key, cur, path)


def _hashable(k: Any) -> Any:
    return k


def _apply_pop(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
               path: list[str], ctx: ApplyContext) -> None:
    if not exists:
        return
    if type(cur) is not list:
        raise MongoError(ErrorCode.BadValue, f"Path '{'.'.join(path)}' contains an element of "
                         f"non-array type '{type_name(cur)}'")
    if not cur:
        return
    if leaf.extra["front"]:
        del cur[0]
    else:
        del cur[-1]


def _apply_pull(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                path: list[str], ctx: ApplyContext) -> None:
    if not exists:
        return
    if type(cur) is not list:
        raise MongoError(ErrorCode.BadValue, "Cannot apply $pull to a non-array value")
    pred = leaf.extra["pred"]
    kept = [e for e in cur if not pred(e)]
    if len(kept) != len(cur):
        cur[:] = kept


# --------------------------------------------------------------------------- $rename

def _apply_rename(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                  path: list[str], ctx: ApplyContext) -> None:
    src_parts: list[str] = leaf.extra["source"]
    holder: Any = ctx.root
    for i, part in enumerate(src_parts):
        if type(holder) is list:
            raise MongoError(ErrorCode.BadValue,
                             f"The source field cannot be an array element, "
                             f"'{'.'.join(src_parts)}' in doc with "
                             f"{src_parts[i - 1]}: {short_repr(holder)}")
        if type(holder) is not dict or part not in holder:
            return  # nothing to rename
        if i == len(src_parts) - 1:
            break
        holder = holder[part]
    value = holder[src_parts[-1]]
    # The destination may not go through an array either.
    dest = leaf.path.split(".")
    walk: Any = ctx.root
    for i, part in enumerate(dest[:-1]):
        if type(walk) is not dict or part not in walk:
            break
        walk = walk[part]
        if type(walk) is list:
            raise MongoError(ErrorCode.BadValue,
                             f"The destination field cannot be an array element, '{leaf.path}' "
                             f"in doc with {dest[i]}: {short_repr(walk)}")
    del holder[src_parts[-1]]
    set_place(container, key, value, path)


def _apply_noop(leaf: Leaf, container: Any, key: str, exists: bool, cur: Any,
                path: list[str], ctx: ApplyContext) -> None:
    return


# --------------------------------------------------------------------------- parsing

def _int_arg(v: Any) -> int | None:
    if isinstance(v, bool) or not is_number(v):
        return None
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        return int(d) if d.is_finite() and d == d.to_integral_value() else None
    if isinstance(v, float):
        return int(v) if v.is_integer() else None
    return int(v)


def _parse_push(path: str, arg: Any) -> dict[str, Any]:
    if not (isinstance(arg, dict) and "$each" in arg):
        return {"each": [arg]}
    extra: dict[str, Any] = {}
    for k, v in arg.items():
        if k == "$each":
            if not isinstance(v, list):
                raise MongoError(ErrorCode.BadValue, "The argument to $each in $push must be an "
                                 f"array but it was of type: {type_name(v)}")
            extra["each"] = v
        elif k == "$slice":
            n = _int_arg(v)
            if n is None:
                raise MongoError(ErrorCode.BadValue, "The value for $slice must be an integer "
                                 f"value but was given type: {type_name(v)}")
            extra["slice"] = n
        elif k == "$position":
            n = _int_arg(v)
            if n is None:
                raise MongoError(ErrorCode.BadValue, "The value for $position must be an "
                                 f"integer value, not of type: {type_name(v)}")
            extra["position"] = n
        elif k == "$sort":
            extra["sort"] = _parse_push_sort(v)
        else:
            raise MongoError(ErrorCode.BadValue, f"Unrecognized clause in $push: {k}")
    return extra


_SORT_ERR: Final = ("The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} "
                    "to sort embedded fields")


def _parse_push_sort(v: Any) -> Any:
    if isinstance(v, dict):
        if not v:
            raise MongoError(ErrorCode.BadValue,
                             "The $sort pattern is empty when it should be a set of fields.")
        for k, d in v.items():
            if k == "" or any(part == "" or part.startswith("$") for part in k.split(".")):
                raise MongoError(ErrorCode.BadValue, "The $sort field is a dotted field but has "
                                 f"an empty part: {k}" if "" in k.split(".") else _SORT_ERR)
            if _int_arg(d) not in (1, -1):
                raise MongoError(ErrorCode.BadValue, _SORT_ERR)
        return {k: _int_arg(d) for k, d in v.items()}
    n = _int_arg(v)
    if n not in (1, -1):
        raise MongoError(ErrorCode.BadValue, _SORT_ERR)
    return n


def _parse_add_to_set(arg: Any, sort_key: Callable[[Any], Any] = sort_key) -> list[Any]:
    if isinstance(arg, dict) and arg and next(iter(arg)) == "$each":
        if len(arg) != 1:
            raise MongoError(ErrorCode.BadValue,
                             f"Found unexpected fields after $each in $addToSet: {short_repr(arg)}")
        each = arg["$each"]
        if not isinstance(each, list):
            raise MongoError(ErrorCode.BadValue, "The argument to $each in $addToSet must be an "
                             f"array but it was of type {type_name(each)}")
        items = each
    else:
        items = [arg]
    out: list[Any] = []
    seen: set[Any] = set()
    for item in items:
        k = sort_key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out


def _pull_pred(arg: Any, collator: Collator | None = None) -> Callable[[Any], bool]:
    if isinstance(arg, dict) and arg:
        first = next(iter(arg))
        if first.startswith("$") and not ("$ref" in arg and "$id" in arg):
            m = compile_filter({"x": arg}, collator=collator)
            return lambda e: m.matches({"x": e})
        m = compile_filter(arg, collator=collator)
        return lambda e: type(e) is dict and m.matches(e)
    if is_regex_value(arg):
        p, o = regex_parts(arg)
        rx: re.Pattern[str] = compile_regex(p, o)
        norm = (p, o)
        return lambda e: (type(e) is str and rx.search(e) is not None) or (
            is_regex_value(e) and regex_parts(e) == norm)
    if collator is not None:
        key = collator.sort_key(arg)
        return lambda e: collator.sort_key(e) == key
    return lambda e: values_equal(e, arg)


def make_leaf(op: str, path: str, arg: Any, collator: Collator | None = None) -> Leaf:
    """Validate `arg` for `op` and build the leaf (raises MongoError like MongoDB); the
    array operators and $min/$max compare strings by `collator` (None: simple)."""
    sk = collation_key_fn(collator)
    if op in ("$set",):
        return Leaf(op, path, arg, _apply_set)
    if op == "$setOnInsert":
        return Leaf(op, path, arg, _apply_set_on_insert)
    if op == "$unset":
        return Leaf(op, path, arg, _apply_unset)
    if op in ("$inc", "$mul"):
        if not is_number(arg):
            verb = "increment" if op == "$inc" else "multiply"
            raise MongoError(ErrorCode.TypeMismatch,
                             f"Cannot {verb} with non-numeric argument: {{{path}: "
                             f"{short_repr(arg)}}}")
        return Leaf(op, path, arg, _arith_apply(op, "add" if op == "$inc" else "mul"))
    if op in ("$min", "$max"):
        return Leaf(op, path, arg, _apply_min_max, {"key": sk})
    if op == "$currentDate":
        if isinstance(arg, bool):
            ts = False
        elif isinstance(arg, dict):
            t = arg.get("$type")
            if len(arg) != 1 or "$type" not in arg:
                raise MongoError(ErrorCode.BadValue, "The only valid field of the option is "
                                 f"'$type': {{$currentDate: {{{path}: {short_repr(arg)}}}}}")
            if t not in ("date", "timestamp"):
                raise MongoError(ErrorCode.BadValue, "The '$type' string field is required to be "
                                 "'date' or 'timestamp': {$currentDate: {field : {$type: "
                                 "'date'}}}")
            ts = t == "timestamp"
        else:
            raise MongoError(ErrorCode.BadValue,
                             f"{type_name(arg)} is not valid type for $currentDate. Please use a "
                             "boolean ('true') or a $type expression ({$type: 'timestamp/date'}).")
        return Leaf(op, path, arg, _apply_current_date, {"timestamp": ts})
    if op == "$push":
        return Leaf(op, path, arg, _apply_push, {**_parse_push(path, arg), "key": sk})
    if op == "$addToSet":
        return Leaf(op, path, arg, _apply_add_to_set,
                    {"each": _parse_add_to_set(arg, sk), "key": sk})
    if op == "$pop":
        n = arg if is_number(arg) and not isinstance(arg, bool) else None
        if n is None:
            raise MongoError(ErrorCode.FailedToParse,
                             f"Expected a number in: {path}: {short_repr(arg)}")
        num = n.to_decimal() if isinstance(n, Decimal128) else n
        if num not in (1, -1):
            raise MongoError(ErrorCode.FailedToParse, f"$pop expects 1 or -1, found: {short_repr(arg)}")
        return Leaf(op, path, arg, _apply_pop, {"front": num < 0})
    if op == "$pull":
        return Leaf(op, path, arg, _apply_pull, {"pred": _pull_pred(arg, collator)})
    if op == "$pullAll":
        if not isinstance(arg, list):
            raise MongoError(ErrorCode.BadValue, "$pullAll requires an array argument but was "
                             f"given a {type_name(arg)}")
        keys = [sk(v) for v in arg]
        return Leaf(op, path, arg, _apply_pull, {"pred": lambda e: sk(e) in keys})
    if op == "$bit":
        raise MongoError(ErrorCode.NotImplemented, "$bit is not supported by bucketd")
    raise AssertionError(op)


def rename_leaves(path: str, arg: Any) -> tuple[Leaf, Leaf]:
    """$rename: a leaf at the destination (does the move) and a placeholder at the source."""
    if not isinstance(arg, str):
        raise MongoError(ErrorCode.BadValue, f"The 'to' field for $rename must be a string: "
                         f"{path}: {short_repr(arg)}")
    for p, which in ((path, "source"), (arg, "destination")):
        for part in p.split("."):
            if part == "$" or (part.startswith("$[") and part.endswith("]")):
                raise MongoError(ErrorCode.BadValue,
                                 f"The {which} field for $rename may not be dynamic: {p}")
    if path == arg:
        raise MongoError(ErrorCode.BadValue, "The source and target field for $rename must "
                         f"differ: {path}: {short_repr(arg)}")
    if arg.startswith(path + ".") or path.startswith(arg + "."):
        raise MongoError(ErrorCode.BadValue, "The source and target field for $rename must "
                         f"not be on the same path: {path}: {short_repr(arg)}")
    dest = Leaf("$rename", arg, path, _apply_rename, {"source": path.split(".")})
    placeholder = Leaf("$rename(source)", path, arg, _apply_noop)
    return dest, placeholder


MODIFIERS: Final = frozenset({"$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename",
                              "$setOnInsert", "$currentDate", "$push", "$addToSet", "$pull",
                              "$pullAll", "$pop", "$bit"})

