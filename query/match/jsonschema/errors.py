"""Why a value fails a `$jsonSchema`, in the words of MongoDB's `errInfo.details`
(`doc_validation_error.cpp`): `schemaRulesNotSatisfied` lists one entry per failing
keyword, in MongoDB's keyword order (scalar, array, encryption, object, logical keywords,
then `type`/`bsonType`), each with `operatorName` and, per keyword, `specifiedAs`,
`reason`, `consideredValue`, `missingProperties`, `propertiesNotSatisfied`, ...

A restriction keyword only reports on a value of its type (`type` reports the rest) and a
missing value only through `required`, as in MongoDB. Only ever called for a value that
fails; a keyword that passes adds nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from query.match import values as V
from query.match.jsonschema.evaluate import (
    allowed_property,
    compile_schema,
    enum_pred,
    first_duplicate,
    is_encrypted,
    multiple_of,
)
from query.match.jsonschema.schema import NUMBER_TYPES, Schema
from storage.vocabulary.bson_types import BsonType, bson_type, type_name
from storage.vocabulary.missing import MISSING

__all__ = ["explain_json_schema"]

Error = dict[str, Any]


def explain_json_schema(s: Schema, doc: Any, *, inverted: bool = False) -> Error:
    """`details` for a document that fails the top-level schema `s` (or, `inverted`, that
    matches it under a negation)."""
    if inverted:
        return {"operatorName": "$jsonSchema", "reason": "schema matched"}
    if s.types is not None and BsonType.OBJECT not in s.types:
        return {"operatorName": "$jsonSchema", "specifiedAs": {"$jsonSchema": s.spec},
                "reason": "expression always evaluates to false"}
    return {"operatorName": "$jsonSchema", **s.annotations,
            "schemaRulesNotSatisfied": _explain(s, doc)}


_COMPILED: weakref.WeakKeyDictionary[Schema, Callable[[Any], bool]] = \
    weakref.WeakKeyDictionary()


def _matches(s: Schema, v: Any) -> bool:
    pred = _COMPILED.get(s)
    if pred is None:
        pred = _COMPILED[s] = compile_schema(s)
    return pred(v)


def _specified(s: Schema, kw: str) -> Error:
    return {"specifiedAs": {kw: s.spec[kw]}}


def _leaf(s: Schema, kw: str, reason: str, v: Any, **extra: Any) -> Error:
    return {"operatorName": kw, **_specified(s, kw), "reason": reason, "consideredValue": v,
            **extra}


def _explain(s: Schema, v: Any) -> list[Error]:
    """The failing keywords of subschema `s` on value `v` (MISSING when absent)."""
    if s.top and s.types is not None and BsonType.OBJECT not in s.types:
        return [explain_json_schema(s, v)]
    t = bson_type(v)
    out: list[Error] = []
    if not s.top:
        if t is BsonType.STRING:
            out.extend(_string_errors(s, v))
        elif t in NUMBER_TYPES:
            out.extend(_number_errors(s, v))
        elif t is BsonType.ARRAY:
            out.extend(_array_errors(s, v))
    if s.encrypt and not is_encrypted(v):
        out.append({"operatorName": "encrypt", "reason": "value was not encrypted"})
    if s.top or t is BsonType.OBJECT:
        out.extend(_object_errors(s, v))
    out.extend(_logical_errors(s, v))
    if not s.top and s.types is not None and v is not MISSING and t not in s.types:
        kw = s.type_keyword or "bsonType"
        out.append(_leaf(s, kw, "type did not match", v, consideredType=type_name(v)))
    return out


def _string_errors(s: Schema, v: str) -> list[Error]:
    out: list[Error] = []
    if s.pattern is not None and s.pattern.search(v) is None:
        out.append(_leaf(s, "pattern", "regular expression did not match", v))
    reason = "specified string length was not satisfied"
    if s.max_length is not None and len(v) > s.max_length:
        out.append(_leaf(s, "maxLength", reason, v))
    if s.min_length is not None and len(v) < s.min_length:
        out.append(_leaf(s, "minLength", reason, v))
    return out


def _number_errors(s: Schema, v: Any) -> list[Error]:
    out: list[Error] = []
    if s.multiple_of is not None and not multiple_of(v, s.multiple_of):
        out.append(_leaf(s, "multipleOf",
                         "considered value is not a multiple of the specified value", v))
    for kw, excl, op in (("maximum", s.exclusive_maximum, "$lt" if s.exclusive_maximum
                          else "$lte"),
                         ("minimum", s.exclusive_minimum, "$gt" if s.exclusive_minimum
                          else "$gte")):
        bound = getattr(s, kw)
        if bound is None or V.cmp_pred(op, bound)(v):
            continue
        specified: dict[str, Any] = {kw: bound}
        if excl:
            specified["exclusive" + kw[0].upper() + kw[1:]] = True
        out.append({"operatorName": kw, "specifiedAs": specified, "reason": "comparison failed",
                    "consideredValue": v})
    return out


def _array_errors(s: Schema, v: list[Any]) -> list[Error]:
    out: list[Error] = []
    for kw, bound, bad in (("minItems", s.min_items, lambda n, b: n < b),
                           ("maxItems", s.max_items, lambda n, b: n > b)):
        if bound is not None and bad(len(v), bound):
            out.append(_leaf(s, kw, "array did not match specified length", v,
                             numberOfItems=len(v)))
    if s.unique_items:
        dup = first_duplicate(v)
        if dup is not MISSING:
            out.append(_leaf(s, "uniqueItems", "found a duplicate item", v, duplicatedValue=dup))
    start: int | None = None
    if isinstance(s.items, Schema):
        err = _first_failing_item(s.items, v, 0, "items",
                                  "At least one item did not match the sub-schema")
        if err is not None:
            out.append(err)
    elif isinstance(s.items, list):
        start = len(s.items)
        failing = [{"itemIndex": i, "details": _explain(sub, e)}
                   for i, (sub, e) in enumerate(zip(s.items, v, strict=False))
                   if not _matches(sub, e)]
        if failing:
            out.append({"operatorName": "items", "details": failing})
    if start is not None and s.additional_items is not None and s.additional_items is not True:
        if s.additional_items is False:
            if len(v) > start:
                out.append({"operatorName": "additionalItems",
                            "specifiedAs": {"additionalItems": False},
                            "reason": "found additional items", "additionalItems": v[start:]})
        else:
            err = _first_failing_item(s.additional_items, v, start, "additionalItems",
                                      "At least one additional item did not match the "
                                      "sub-schema")
            if err is not None:
                out.append(err)
    return out


def _first_failing_item(sub: Schema, v: list[Any], start: int, kw: str,
                        reason: str) -> Error | None:
    for i in range(start, len(v)):
        if not _matches(sub, v[i]):
            return {"operatorName": kw, **sub.annotations, "reason": reason, "itemIndex": i,
                    "details": _explain(sub, v[i])}
    return None


def _object_errors(s: Schema, v: dict[str, Any]) -> list[Error]:
    out: list[Error] = []
    if s.properties:
        failing = []
        for name, sub in s.properties.items():
            value = v.get(name, MISSING)
            if (value is MISSING and name not in s.required) or _matches(sub, value):
                continue
            details = _explain(sub, value)
            if details:
                failing.append({"propertyName": name, **sub.annotations, "details": details})
        if failing:
            out.append({"operatorName": "properties", "propertiesNotSatisfied": failing})
    out.extend(_allowed_properties_errors(s, v))
    if s.required:
        missing = sorted(n for n in s.required if n not in v)
        if missing:
            out.append({"operatorName": "required", **_specified(s, "required"),
                        "missingProperties": missing})
    reason = "specified number of properties was not satisfied"
    if s.min_properties is not None and len(v) < s.min_properties:
        out.append({"operatorName": "minProperties", **_specified(s, "minProperties"),
                    "reason": reason, "numberOfProperties": len(v)})
    if s.max_properties is not None and len(v) > s.max_properties:
        out.append({"operatorName": "maxProperties", **_specified(s, "maxProperties"),
                    "reason": reason, "numberOfProperties": len(v)})
    failing_deps: list[Error] = []
    for dep in s.dependencies:
        if dep.name not in v:
            continue
        if dep.properties is not None:
            missing = [p for p in dep.properties if p not in v]
            if missing:
                failing_deps.append({"conditionalProperty": dep.name,
                                     "missingProperties": missing})
        elif dep.schema is not None and not _matches(dep.schema, v):
            failing_deps.append({"conditionalProperty": dep.name,
                                 "details": _explain(dep.schema, v)})
    if failing_deps:
        deps = s.spec["dependencies"]
        notes = {k: deps[k] for k in ("title", "description") if isinstance(deps.get(k), str)}
        out.append({"operatorName": "dependencies", **notes, "failingDependencies": failing_deps})
    return out


def _allowed_properties_errors(s: Schema, v: dict[str, Any]) -> list[Error]:
    check = allowed_property(s)
    if check is None or all(check(k, x) for k, x in v.items()):
        return []
    out: list[Error] = []
    named = set(s.properties or ())
    additional = [k for k in v
                  if k not in named and not any(p.compiled.search(k) for p in s.pattern_properties)]
    extra = s.additional_properties
    if extra is False and additional:
        out.append({"operatorName": "additionalProperties",
                    "specifiedAs": {"additionalProperties": False},
                    "additionalProperties": additional})
    elif isinstance(extra, Schema):
        for k in additional:
            if not _matches(extra, v[k]):
                out.append({"operatorName": "additionalProperties", **extra.annotations,
                            "reason": "at least one additional property did not match the "
                                      "subschema",
                            "failingProperty": k, "details": _explain(extra, v[k])})
                break
    pattern_failures = []
    for pp in s.pattern_properties:
        for k, x in v.items():
            if pp.compiled.search(k) is not None and not _matches(pp.schema, x):
                pattern_failures.append({"propertyName": k, **pp.schema.annotations,
                                         "regexMatched": pp.regex,
                                         "details": _explain(pp.schema, x)})
                break
    if pattern_failures:
        out.append({"operatorName": "patternProperties", "details": pattern_failures})
    return out


def _logical_errors(s: Schema, v: Any) -> list[Error]:
    out: list[Error] = []
    for kw, subs in (("allOf", s.all_of), ("anyOf", s.any_of)):
        if subs is None:
            continue
        results = [_matches(sub, v) for sub in subs]
        if (kw == "allOf" and all(results)) or (kw == "anyOf" and any(results)):
            continue
        out.append({"operatorName": kw, "schemasNotSatisfied": [
            _clause(i, sub, v) for i, (sub, ok) in enumerate(zip(subs, results, strict=True))
            if not ok]})
    if s.one_of is not None:
        matching = [i for i, sub in enumerate(s.one_of) if _matches(sub, v)]
        if not matching:
            out.append({"operatorName": "oneOf", "schemasNotSatisfied": [
                _clause(i, sub, v) for i, sub in enumerate(s.one_of)]})
        elif len(matching) > 1:
            out.append({"operatorName": "oneOf", "reason": "more than one subschema matched",
                        "matchingSchemaIndexes": matching})
    if s.not_schema is not None and _matches(s.not_schema, v):
        out.append({"operatorName": "not", "reason": "child expression matched"})
    if s.enum is not None and not enum_pred(s)(v):
        if s.top and not any(isinstance(e, dict) for e in s.enum):
            out.append({"operatorName": "enum", **_specified(s, "enum"),
                        "reason": "expression always evaluates to false"})
        elif v is not MISSING:
            out.append(_leaf(s, "enum", "value was not found in enum", v))
    return out


def _clause(i: int, sub: Schema, v: Any) -> Error:
    return {"index": i, **sub.annotations, "details": _explain(sub, v)}
