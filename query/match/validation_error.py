"""`errInfo` of a document that fails a collection's validator (DocumentValidationFailure,
121): `{failingDocumentId, details}`, with `details` shaped as MongoDB's
`doc_validation_error.cpp` builds it from the compiled filter: `operatorName`,
`specifiedAs`, `reason`, `consideredValue(s)` for a query operator; `clausesNotSatisfied`
for `$and`/`$or`/`$nor`; the `$jsonSchema` explanation from
`query.match.jsonschema.errors`. Under `$nor`/`$not`/`$ne`/`$nin` the reasons are the
inverted ones ("comparison succeeded").
"""

from __future__ import annotations

from typing import Any, Final

from query.expressions import compile_expression
from query.match import Matcher, Node
from query.match.jsonschema import JsonSchema
from query.match.jsonschema.errors import explain_json_schema
from query.paths import iter_values, split_path
from storage.errors import MongoError
from storage.vocabulary.bson_types import type_name
from storage.vocabulary.missing import MISSING

__all__ = ["validation_error_info"]

Error = dict[str, Any]

# op -> (reason, inverted reason)
_REASONS: Final[dict[str, tuple[str, str]]] = {
    "$eq": ("comparison failed", "comparison succeeded"),
    "$lt": ("comparison failed", "comparison succeeded"),
    "$lte": ("comparison failed", "comparison succeeded"),
    "$gt": ("comparison failed", "comparison succeeded"),
    "$gte": ("comparison failed", "comparison succeeded"),
    "$in": ("no matching value found in array", "matching value found in array"),
    "$exists": ("path does not exist", "path does exist"),
    "$type": ("type did not match", "type did match"),
    "$regex": ("regular expression did not match", "regular expression did match"),
    "$size": ("array length was not equal to given size", "array length was equal to given size"),
    "$mod": ("$mod did not evaluate to expected remainder",
             "$mod did evaluate to expected remainder"),
    "$elemMatch": ("array did not satisfy the child predicate",
                   "array did satisfy the child predicate"),
    "$all": ("array did not contain all specified values", "array did contain all specified values"),
}
_BITS: Final = ("bitwise operator failed to match", "bitwise operator matched successfully")
_NUMBERS: Final = ("decimal", "double", "int", "long")
# the types an operator can match at all: others fail with "type did not match"
_EXPECTED: Final[dict[str, tuple[str, ...]]] = {
    "$regex": ("regex", "string", "symbol"), "$mod": _NUMBERS,
    "$bitsAllSet": (*_NUMBERS, "binData"), "$bitsAllClear": (*_NUMBERS, "binData"),
    "$bitsAnySet": (*_NUMBERS, "binData"), "$bitsAnyClear": (*_NUMBERS, "binData"),
    "$size": ("array",), "$elemMatch": ("array",),
}
# mongod's internalQueryMaxDocValidationErrorConsideredValues: beyond it, the list is cut
MAX_CONSIDERED_VALUES: Final = 10
_NEGATED_OPS: Final = {"$ne": "$eq", "$nin": "$in", "$exists": "$exists"}


def validation_error_info(matcher: Matcher, doc: dict[str, Any]) -> dict[str, Any]:
    """`errInfo` for `doc`, which fails `matcher` (a collection's validator)."""
    return {"failingDocumentId": doc.get("_id"), "details": _explain(matcher.root, doc, False)}


def _explain(node: Node, doc: Any, inverted: bool) -> Error:
    kind = node.kind
    if kind == "jsonschema":
        assert isinstance(node.arg, JsonSchema)
        return explain_json_schema(node.arg.schema, doc, inverted=inverted)
    if kind == "and" and node.op == "$all":
        return _leaf(node, doc, inverted)
    if kind in ("and", "or", "nor"):
        return _tree(node, doc, inverted)
    if kind == "not":
        child = node.children[0]
        if node.op in _NEGATED_OPS and child.kind == "path":
            return _leaf(child, doc, not inverted, shown_op=node.op, shown_arg=node.arg)
        return {"operatorName": "$not", "details": _explain(child, doc, not inverted)}
    if kind == "expr":
        return _expr(node, doc, inverted)
    if kind in ("true", "false"):
        name = "$alwaysTrue" if kind == "true" else "$alwaysFalse"
        return {"operatorName": name, "specifiedAs": {name: 1},
                "reason": "expression always evaluates to " + ("true" if inverted else "false")}
    return _leaf(node, doc, inverted)


def _tree(node: Node, doc: Any, inverted: bool) -> Error:
    name = "$" + node.kind
    child_inverted = not inverted if node.kind == "nor" else inverted
    # the clauses to report: the failing ones, or (under a negation) the matching ones
    report_matching = child_inverted
    clauses = []
    for i, child in enumerate(node.children):
        if _reported(child, doc, report_matching):
            clauses.append({"index": i, "details": _explain(child, doc, child_inverted)})
    key = "clausesSatisfied" if inverted else "clausesNotSatisfied"
    return {"operatorName": name, key: clauses}


def _reported(child: Node, doc: Any, report_matching: bool) -> bool:
    """Whether a clause explains itself: it fails (or, negated, matches), or it throws."""
    try:
        return child.fn(doc, None) == report_matching
    except MongoError:
        return True


def _expr(node: Node, doc: Any, inverted: bool) -> Error:
    out: Error = {"operatorName": "$expr", "specifiedAs": {"$expr": node.arg},
                  "reason": "expression did match" if inverted else "expression did not match"}
    try:
        result = compile_expression(node.arg).evaluate(doc, {})
    except MongoError as exc:
        out["reason"] = "failed to evaluate aggregation expression"
        out["details"] = {"code": exc.code, "codeName": exc.code_name, "errmsg": exc.errmsg}
        return out
    if result is not MISSING:
        out["expressionResult"] = result
    return out


def _considered(doc: Any, path: str, expand: bool) -> list[Any] | None:
    """The values the operator looked at (leaf arrays expanded unless not `expand`), or None
    when the path is missing."""
    values: list[Any] = []
    found = False
    for v in iter_values(doc, split_path(path)):
        found = True
        if expand and type(v) is list:
            values.extend(v)
        else:
            values.append(v)
    return values if found else None


def _leaf(node: Node, doc: Any, inverted: bool, *, shown_op: str | None = None,
          shown_arg: Any = None) -> Error:
    op = node.op or "$eq"
    path = node.path or ""
    shown = shown_op or op
    spec = {shown_op: shown_arg} if shown_op else node.shown
    out: Error = {"operatorName": shown, "specifiedAs": {path: spec}}
    expand = op not in ("$size", "$elemMatch", "$all")
    values = _considered(doc, path, expand)
    truncated = values is not None and len(values) > MAX_CONSIDERED_VALUES
    if values is not None:
        values = values[:MAX_CONSIDERED_VALUES]
    reasons = _BITS if op.startswith("$bits") else _REASONS.get(op, ("comparison failed",
                                                                      "comparison succeeded"))
    if values is None:
        if op != "$exists":
            out["reason"] = "field was missing"
            return out
    else:
        types = sorted({type_name(v) for v in values})
        expected = _EXPECTED.get(op)
        if expected and not inverted and not any(t in expected for t in types):
            out["reason"] = "type did not match"
            _types(out, types)
            out.update({"expectedType": expected[0]} if len(expected) == 1
                       else {"expectedTypes": sorted(expected)})
    out.setdefault("reason", reasons[1] if inverted else reasons[0])
    if values is not None:
        if len(values) == 1:
            out["consideredValue"] = values[0]
        else:
            out["consideredValues"] = values
            if truncated:
                out["consideredValuesTruncated"] = True
        if op == "$type" and values:
            _types(out, sorted({type_name(v) for v in values}))
    return out


def _types(out: Error, types: list[str]) -> None:
    if len(types) == 1:
        out["consideredType"] = types[0]
    elif types:
        out["consideredTypes"] = types
