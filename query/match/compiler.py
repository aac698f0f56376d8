"""Query filter → tree of `Node`s, each carrying a compiled closure.

Parsing follows MongoDB's `MatchExpressionParser`: top-level ``$`` keys go through
the table of path-less operators (``$and $or $nor $expr $comment ...``); a field
whose value is an "expression document" (first key starts with ``$``) is a set of
path operators; a regex value is a regex match; anything else is equality.

Each path operator becomes a `Node(kind="path")` whose closure walks the path with
`query.paths` semantics and applies a value predicate from `query.match.values`
to every candidate. Negations (``$ne $nin $not $nor``, ``$exists: false``) wrap the
positive node, so that ``{a: {$ne: 1}}`` rejects ``{a: [1, 2]}`` as MongoDB does.

The tree is kept (not only the closures) so that the planner can read predicates
on indexed fields and the positional ``$`` can learn the matched array position.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final

from bson import DBRef, Decimal128, Int64

from query.expressions import compile_expression
from query.match import values as V
from query.match.jsonschema import compile_json_schema
from query.match.regex import is_regex_value, regex_parts
from query.paths import iter_leaves, split_path
from storage.errors import MongoError
from storage.vocabulary.bson_types import is_number
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = ["Node", "MatchDetails", "parse_filter", "TOP", "DOC", "SUB", "PARSING_VALIDATOR",
           "ENCRYPTION_ALLOWED"]

# Set while a collection validator is parsed: it refuses $where, $text and the $near
# family, and $jsonSchema's encryption keywords are allowed there only (and only when
# ENCRYPTION_ALLOWED), as in MongoDB.
PARSING_VALIDATOR: ContextVar[bool] = ContextVar("PARSING_VALIDATOR", default=False)
ENCRYPTION_ALLOWED: ContextVar[bool] = ContextVar("ENCRYPTION_ALLOWED", default=False)


def _refuse_in_validator(what: str) -> None:
    if PARSING_VALIDATOR.get():
        raise MongoError(ErrorCode.BadValue, f"{what} not allowed in this context")

# Parse levels (MongoDB's DocumentParseLevel).
TOP: Final = 0   # the filter document itself
DOC: Final = 1   # under $and/$or/$nor at the top: still whole documents
SUB: Final = 2   # inside $elemMatch: array elements

DocFn = Callable[[Any, "MatchDetails | None"], bool]


@dataclass(slots=True)
class MatchDetails:
    """Filled while matching: `pos` is the array position for the positional ``$``."""

    pos: int | None = None


@dataclass(eq=False)
class Node:
    """One node of a compiled filter.

    kind: "and" | "or" | "nor" | "not" | "path" | "expr" | "true" | "false".
    Path nodes have `path` and `op` (``$eq $lt $lte $gt $gte $in $regex $exists
    $type $size $mod $elemMatch $bitsAllSet ...``) and `arg` (the operand; for
    ``$regex`` a ``(pattern, options)`` pair).
    """

    kind: str
    fn: DocFn
    children: list[Node] = field(default_factory=list)
    path: str | None = None
    op: str | None = None
    arg: Any = None
    # what the filter said for this operator under its path, for errInfo's specifiedAs
    shown: Any = None


def _always(result: bool) -> DocFn:
    return lambda doc, details: result


TRUE_FN: Final = _always(True)
FALSE_FN: Final = _always(False)


# --------------------------------------------------------------------------- clauses
# A "clause" is a path operator not yet bound to a path: ("pred", op, arg, pred, expand
# [, shown]), ("not", [clauses], op, arg), ("and", [clauses] [, "$all", arg]),
# ("elem", arg, elem_pred) or ("false",).

Clause = tuple[Any, ...]


def _bind(clause: Clause, path: str) -> Node:
    """Turn a clause into a document-level node reading `path`."""
    kind = clause[0]
    if kind == "pred":
        op, arg, pred, expand = clause[1:5]
        shown = clause[5] if len(clause) > 5 else {op: arg}
        return Node("path", _path_fn(split_path(path), pred, expand), path=path, op=op, arg=arg,
                    shown=shown)
    if kind == "elem":
        _, arg, elem_pred = clause
        return Node("path", _elem_match_fn(split_path(path), elem_pred), path=path,
                    op="$elemMatch", arg=arg)
    if kind == "not":
        child = _and([_bind(c, path) for c in clause[1]])
        cfn = child.fn
        op, arg = (clause[2], clause[3]) if len(clause) > 2 else ("$not", None)
        return Node("not", lambda doc, details: not cfn(doc, None), [child], path=path, op=op,
                    arg=arg)
    if kind == "and":
        node = _and([_bind(c, path) for c in clause[1]])
        if len(clause) > 2:  # $all: one operator for errInfo, whatever its clauses
            node = Node("and", node.fn, [node], path=path, op=clause[2], arg=clause[3],
                        shown={clause[2]: clause[3]})
        return node
    if kind == "false":
        return Node("false", FALSE_FN, path=path)
    raise AssertionError(kind)


def _value_fn(clause: Clause) -> V.Pred:
    """Turn a clause into a predicate on one value (inside ``$elemMatch`` value form)."""
    kind = clause[0]
    if kind == "pred":
        return clause[3]
    if kind == "elem":
        elem_pred = clause[2]
        return lambda v: type(v) is list and any(elem_pred(e) for e in v)
    if kind == "not":
        preds = [_value_fn(c) for c in clause[1]]
        return lambda v: not all(p(v) for p in preds)
    if kind == "and":
        preds = [_value_fn(c) for c in clause[1]]
        return lambda v: all(p(v) for p in preds)
    return lambda v: False


def _path_fn(parts: tuple[str, ...], pred: V.Pred, expand: bool) -> DocFn:
    if len(parts) == 1:
        key = parts[0]

        def one(doc: Any, details: MatchDetails | None) -> bool:
            if type(doc) is not dict:
                return general(doc, details)
            v = doc.get(key, MISSING)
            if type(v) is list:
                if expand:
                    for i, e in enumerate(v):
                        if pred(e):
                            if details is not None:
                                details.pos = i
                            return True
                return pred(v)
            return pred(v)
    else:
        prefix, last = parts[:-1], parts[-1]

        def one(doc: Any, details: MatchDetails | None) -> bool:
            # Fast path while the walk only meets documents; arrays go the general way.
            cur = doc
            for part in prefix:
                if type(cur) is dict:
                    cur = cur.get(part, MISSING)
                    if cur is MISSING:
                        return pred(MISSING)
                elif type(cur) is list:
                    return general(doc, details)
                else:
                    return pred(MISSING) if cur is not doc else general(doc, details)
            if type(cur) is not dict:
                return general(doc, details) if type(cur) is list else pred(MISSING)
            v = cur.get(last, MISSING)
            if type(v) is list:
                if expand:
                    for i, e in enumerate(v):
                        if pred(e):
                            if details is not None:
                                details.pos = i
                            return True
                return pred(v)
            return pred(v)

    def general(doc: Any, details: MatchDetails | None) -> bool:
        for v, pos in iter_leaves(doc, parts, expand):
            if pred(v):
                if details is not None and pos is not None:
                    details.pos = pos
                return True
        return False
    return one


def _elem_match_fn(parts: tuple[str, ...], elem_pred: V.Pred) -> DocFn:
    def fn(doc: Any, details: MatchDetails | None) -> bool:
        for v, pos in iter_leaves(doc, parts, False):
            if type(v) is list:
                for i, e in enumerate(v):
                    if elem_pred(e):
                        if details is not None:
                            details.pos = i if pos is None else pos
                        return True
        return False
    return fn


def _and(children: list[Node]) -> Node:
    if len(children) == 1:
        return children[0]
    if not children:
        return Node("and", TRUE_FN, [])
    fns = [c.fn for c in children]
    if len(fns) == 2:
        f0, f1 = fns

        def and2(doc: Any, details: MatchDetails | None) -> bool:
            return f0(doc, details) and f1(doc, details)
        return Node("and", and2, children)

    def and_n(doc: Any, details: MatchDetails | None) -> bool:
        for f in fns:  # noqa: SIM110 - a plain loop is faster than all() here
            if not f(doc, details):
                return False
        return True
    return Node("and", and_n, children)


# --------------------------------------------------------------------------- parsing

def parse_filter(spec: Any, level: int = TOP, variables: dict[str, Any] | None = None) -> Node:
    if isinstance(spec, DBRef):
        spec = dict(spec.as_doc())
    if not isinstance(spec, dict):
        raise MongoError(ErrorCode.BadValue, "filter must be an object")
    children: list[Node] = []
    next_level = DOC if level == TOP else level
    for key, val in spec.items():
        if key.startswith("$"):
            handler = _TOP_LEVEL.get(key)
            if handler is None:
                raise MongoError(ErrorCode.BadValue, f"unknown top level operator: {key}. If you "
                                 "have a field name that starts with a '$' symbol, consider "
                                 "using $getField or $setField.")
            node = handler(key, val, level, variables)
            if node is not None:
                children.append(node)
            continue
        children.extend(_parse_field(key, val, next_level, variables))
    return _and(children)


def _parse_field(path: str, val: Any, level: int, variables: dict[str, Any] | None) -> list[Node]:
    if _is_expression_doc(val):
        return [_bind(c, path) for c in _parse_ops(path, val, level, variables)]
    if is_regex_value(val):
        p, o = regex_parts(val)
        return [_bind(("pred", "$regex", (p, o), V.regex_pred(p, o), True, val), path)]
    return [_bind(("pred", "$eq", val, V.eq_pred(val), True, val), path)]


def _is_dbref_doc(d: dict[str, Any], allow_incomplete: bool) -> bool:
    if allow_incomplete:
        return "$ref" in d or "$id" in d or "$db" in d
    return "$ref" in d and "$id" in d


def _is_expression_doc(val: Any, allow_incomplete_dbref: bool = False) -> bool:
    if type(val) is not dict or not val:
        return False
    first = next(iter(val))
    return first.startswith("$") and not _is_dbref_doc(val, allow_incomplete_dbref)


def _parse_ops(path: str, ops: dict[str, Any], level: int,
               variables: dict[str, Any] | None) -> list[Clause]:
    """The operators of ``{path: {$op: arg, ...}}`` as clauses."""
    out: list[Clause] = []
    for op, arg in ops.items():
        clause = _parse_op(path, op, arg, ops, level, variables)
        if clause is not None:
            out.append(clause)
    return out


def _parse_op(path: str, op: str, arg: Any, ops: dict[str, Any], level: int,
              variables: dict[str, Any] | None) -> Clause | None:
    if op == "$eq":
        return ("pred", "$eq", arg, V.eq_pred(arg), True)
    if op == "$ne":
        if is_regex_value(arg):
            raise MongoError(ErrorCode.BadValue, "Can't have regex as arg to $ne.")
        return ("not", [("pred", "$eq", arg, V.eq_pred(arg), True)], "$ne", arg)
    if op in ("$lt", "$lte", "$gt", "$gte"):
        if is_regex_value(arg):
            raise MongoError(ErrorCode.BadValue,
                             f"Can't have RegEx as arg to predicate over field '{path}'.")
        return ("pred", op, arg, V.cmp_pred(op, arg), True)
    if op == "$in":
        if not isinstance(arg, list):
            raise MongoError(ErrorCode.BadValue, "$in needs an array")
        return ("pred", "$in", arg, V.in_pred(arg), True)
    if op == "$nin":
        if not isinstance(arg, list):
            raise MongoError(ErrorCode.BadValue, "$nin needs an array")
        return ("not", [("pred", "$in", arg, V.in_pred(arg), True)], "$nin", arg)
    if op == "$exists":
        positive = ("pred", "$exists", True, V.exists_pred(), False)
        return positive if _truthy(arg) else ("not", [positive], "$exists", arg)
    if op == "$type":
        return ("pred", "$type", arg, V.type_pred(arg), True)
    if op == "$size":
        return ("pred", "$size", arg, V.size_pred(arg), False)
    if op == "$mod":
        return ("pred", "$mod", arg, V.mod_pred(arg), True)
    if op in ("$bitsAllSet", "$bitsAnySet", "$bitsAllClear", "$bitsAnyClear"):
        return ("pred", op, arg, V.bits_pred(op, arg), True)
    if op == "$regex":
        pattern, options = _parse_regex_doc(ops)
        shown = {k: v for k, v in ops.items() if k in ("$regex", "$options")}
        return ("pred", "$regex", (pattern, options), V.regex_pred(pattern, options), True,
                shown)
    if op == "$options":
        if "$regex" not in ops:
            raise MongoError(ErrorCode.BadValue, "$options needs a $regex")
        return None
    if op == "$not":
        return _parse_not(path, arg, level, variables)
    if op == "$elemMatch":
        return _parse_elem_match(path, arg, variables)
    if op == "$all":
        return _parse_all(path, arg, variables)
    if op in ("$near", "$nearSphere", "$geoNear"):
        _refuse_in_validator("$geoNear, $near, and $nearSphere are")
    if op in _GEO_OPS:
        raise MongoError(ErrorCode.NotImplemented, f"{op} is not supported by bucketd")
    if op == "$where":
        raise MongoError(ErrorCode.BadValue, "$where cannot be applied to a field")
    raise MongoError(ErrorCode.BadValue, f"unknown operator: {op}")


_GEO_OPS: Final = frozenset({"$geoWithin", "$within", "$geoIntersects", "$near", "$nearSphere",
                             "$geoNear", "$maxDistance", "$minDistance", "$box", "$center",
                             "$centerSphere", "$polygon", "$geometry"})


def _truthy(v: Any) -> bool:
    """BSON trueValue: false for false, null, missing and numeric zero."""
    if v is None or v is False or v is MISSING:
        return False
    if is_number(v):
        return bool(v.to_decimal() != 0) if isinstance(v, Decimal128) else v != 0
    return True


def _parse_regex_doc(ops: dict[str, Any]) -> tuple[str, str]:
    pattern = ""
    options = ""
    for op, arg in ops.items():
        if op == "$regex":
            if isinstance(arg, str):
                pattern = arg
            elif is_regex_value(arg):
                pattern, flags = regex_parts(arg)
                if flags:
                    if options:
                        raise MongoError(51074, "options set in both $regex and $options")
                    options = flags
            else:
                raise MongoError(ErrorCode.BadValue, "$regex has to be a string")
        elif op == "$options":
            if not isinstance(arg, str):
                raise MongoError(ErrorCode.BadValue, "$options has to be a string")
            if options:
                raise MongoError(51075, "options set in both $regex and $options")
            options = arg
    return pattern, options


def _parse_not(path: str, arg: Any, level: int, variables: dict[str, Any] | None) -> Clause:
    if is_regex_value(arg):
        p, o = regex_parts(arg)
        return ("not", [("pred", "$regex", (p, o), V.regex_pred(p, o), True)], "$not", arg)
    if not isinstance(arg, dict):
        raise MongoError(ErrorCode.BadValue, "$not needs a regex or a document")
    if not arg:
        raise MongoError(ErrorCode.BadValue, "$not cannot be empty")
    return ("not", _parse_ops(path, arg, level, variables), "$not", arg)


def _parse_elem_match(path: str, arg: Any, variables: dict[str, Any] | None) -> Clause:
    if not isinstance(arg, dict):
        raise MongoError(ErrorCode.BadValue, "$elemMatch needs an Object")
    value_form = False
    if _is_expression_doc(arg, allow_incomplete_dbref=True):
        first = next(iter(arg))
        value_form = first not in _TOP_LEVEL
    if value_form:
        preds = [_value_fn(c) for c in _parse_ops(path, arg, SUB, variables)]
        if len(preds) == 1:
            elem_pred = preds[0]
        else:
            def elem_pred(e: Any) -> bool:
                return all(p(e) for p in preds)
        return ("elem", arg, elem_pred)
    if "$where" in arg:
        raise MongoError(ErrorCode.BadValue, "$elemMatch cannot contain $where expression")
    sub = parse_filter(arg, SUB, variables)
    sub_fn = sub.fn

    def obj_pred(e: Any) -> bool:
        return (type(e) is dict or type(e) is list or isinstance(e, dict)) and sub_fn(e, None)
    return ("elem", arg, obj_pred)


def _parse_all(path: str, arg: Any, variables: dict[str, Any] | None) -> Clause:
    if not isinstance(arg, list):
        raise MongoError(ErrorCode.BadValue, "$all needs an array")
    if not arg:
        return ("false",)
    first = arg[0]
    if isinstance(first, dict) and first and next(iter(first)) == "$elemMatch":
        clauses = []
        for item in arg:
            if not (isinstance(item, dict) and item and next(iter(item)) == "$elemMatch"):
                raise MongoError(ErrorCode.BadValue, "$all/$elemMatch has to be consistent")
            clauses.append(_parse_elem_match(path, item["$elemMatch"], variables))
        return ("and", clauses, "$all", arg)
    clauses = []
    for item in arg:
        if is_regex_value(item):
            p, o = regex_parts(item)
            clauses.append(("pred", "$regex", (p, o), V.regex_pred(p, o), True))
        elif isinstance(item, dict) and item and next(iter(item)).startswith("$") and \
                next(iter(item)) in _PATH_OPS:
            raise MongoError(ErrorCode.BadValue, "no $ expressions in $all")
        else:
            clauses.append(("pred", "$eq", item, V.eq_pred(item), True))
    return ("and", clauses, "$all", arg)


_PATH_OPS: Final = frozenset({
    "$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$exists", "$type", "$size",
    "$mod", "$regex", "$options", "$not", "$elemMatch", "$all", "$bitsAllSet", "$bitsAnySet",
    "$bitsAllClear", "$bitsAnyClear"}) | _GEO_OPS


# --------------------------------------------------------------------------- top level

def _parse_tree(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> Node:
    if not isinstance(val, list):
        raise MongoError(ErrorCode.BadValue, f"{key} must be an array")
    if not val:
        raise MongoError(ErrorCode.BadValue, "$and/$or/$nor must be a nonempty array")
    children = []
    for item in val:
        if not isinstance(item, dict):
            raise MongoError(ErrorCode.BadValue, "$or/$and/$nor entries need to be full objects")
        children.append(parse_filter(item, level, variables))
    fns = [c.fn for c in children]
    if key == "$and":
        node = _and(children)
        if node.kind != "and":
            node = Node("and", node.fn, [node])
        return node
    if key == "$or":
        def or_fn(doc: Any, details: MatchDetails | None) -> bool:
            for f in fns:  # noqa: SIM110
                if f(doc, details):
                    return True
            return False
        return Node("or", or_fn, children)

    def nor_fn(doc: Any, details: MatchDetails | None) -> bool:
        for f in fns:  # noqa: SIM110
            if f(doc, None):
                return False
        return True
    return Node("nor", nor_fn, children)


def _parse_comment(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> None:
    return None


def _parse_where(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> Node:
    _refuse_in_validator("$where is")
    raise MongoError(ErrorCode.NotImplemented,
                     "$where is not supported: bucketd has no JavaScript engine")


def _parse_text(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> Node:
    _refuse_in_validator("$text is")
    if level == SUB:
        raise MongoError(ErrorCode.BadValue, "$text can only be applied to the top-level document")
    raise MongoError(ErrorCode.IndexNotFound, "text index required for $text query")


def _parse_json_schema(key: str, val: Any, level: int,
                       variables: dict[str, Any] | None) -> Node:
    compiled = compile_json_schema(val, allow_encryption=ENCRYPTION_ALLOWED.get())
    matches = compiled.matches

    def fn(doc: Any, details: MatchDetails | None) -> bool:
        return type(doc) is dict and matches(doc)
    return Node("jsonschema", fn, arg=compiled)


def _parse_always(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> Node:
    if not is_number(val) or V.is_nan(val):
        raise MongoError(ErrorCode.FailedToParse, f"Expected a number in: {key}: {val!r}")
    num = val.to_decimal() if isinstance(val, Decimal128) else val
    if num != 1:
        raise MongoError(ErrorCode.FailedToParse, f"{key} must be an integer value of 1")
    return Node("true", TRUE_FN) if key == "$alwaysTrue" else Node("false", FALSE_FN)


def _parse_dbref_field(key: str, val: Any, level: int,
                       variables: dict[str, Any] | None) -> Node:
    return _bind(("pred", "$eq", val, V.eq_pred(val), True), key)


def _parse_expr(key: str, val: Any, level: int, variables: dict[str, Any] | None) -> Node:
    if level == SUB:
        raise MongoError(ErrorCode.BadValue, "$expr can only be applied to the top-level document")
    base_vars = dict(variables or {})
    expr = compile_expression(val, variables_in_scope=tuple(base_vars))
    evaluate = expr.evaluate

    def fn(doc: Any, details: MatchDetails | None) -> bool:
        return expr_truthy(evaluate(doc, base_vars))
    return Node("expr", fn, arg=val)


def expr_truthy(v: Any) -> bool:
    """Aggregation truthiness: false, null, missing/undefined and numeric zero are false."""
    if v is None or v is False or v is MISSING:
        return False
    if type(v) is bool:
        return v
    if isinstance(v, int | float | Int64):
        return v != 0
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        return d.is_nan() or d != 0
    return type(v).__name__ not in ("Missing", "_Missing", "MissingType")


_TopHandler = Callable[[str, Any, int, "dict[str, Any] | None"], "Node | None"]
_TOP_LEVEL: Final[dict[str, _TopHandler]] = {
    "$and": _parse_tree, "$or": _parse_tree, "$nor": _parse_tree,
    "$comment": _parse_comment, "$where": _parse_where, "$text": _parse_text,
    "$expr": _parse_expr, "$jsonSchema": _parse_json_schema,
    "$alwaysTrue": _parse_always, "$alwaysFalse": _parse_always,
    "$ref": _parse_dbref_field, "$id": _parse_dbref_field, "$db": _parse_dbref_field,
}
