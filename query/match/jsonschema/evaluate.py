"""A parsed `Schema` compiled into a predicate, with MongoDB's reading of each keyword.

A restriction keyword (`minimum`, `maxLength`, `items`, `required`, ...) only constrains
values of the type it is about and lets every other value (and a missing one) through,
as MongoDB's translation `(OR (NOT type) restriction)` does; `type`/`bsonType` is what
rejects other types. A missing value fails only `type`/`bsonType`, `enum` and `encrypt`;
`properties` asks a property's schema only when the property is present or `required`.
The top-level schema sees the document: its scalar and array keywords are inert, `enum`
compares whole documents, and a `type` without "object" matches nothing.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from bson import Binary, Decimal128

from query.match import values as V
from query.match.jsonschema.schema import NUMBER_TYPES, Schema, unordered_key
from storage.vocabulary.bson_types import BsonType, bson_type
from storage.vocabulary.missing import MISSING

__all__ = ["compile_schema", "ValuePred", "multiple_of", "first_duplicate", "is_encrypted"]

ValuePred = Callable[[Any], bool]

_DECIMAL_CONTEXT: Final = decimal.Context(prec=34, traps=[])


def multiple_of(v: Any, divisor: Decimal) -> bool:
    """MongoDB's `$_internalSchemaFmod` with remainder 0, on decimal values."""
    if isinstance(v, Decimal128):
        d = v.to_decimal()
    elif isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return False
        d = Decimal(f"{v:.15g}")
    else:
        d = Decimal(int(v))
    r = _DECIMAL_CONTEXT.remainder(d, divisor)
    return not r.is_nan() and r == 0


def first_duplicate(arr: list[Any]) -> Any:
    """The first item equal (unordered fields) to an earlier one, or MISSING."""
    seen: list[Any] = []
    for item in arr:
        k = unordered_key(item)
        if k in seen:
            return item
        seen.append(k)
    return MISSING


def is_encrypted(v: Any) -> bool:
    return isinstance(v, Binary) and v.subtype == 6


def compile_schema(s: Schema) -> ValuePred:
    """The predicate of schema `s` on one value (for the top schema: the document)."""
    preds = _keyword_preds(s)
    if s.top:
        if s.types is not None and BsonType.OBJECT not in s.types:
            return lambda v: False
    elif s.types is not None:
        types = s.types
        preds.append(lambda v: bson_type(v) in types)
    if not preds:
        return lambda v: True
    if len(preds) == 1:
        return preds[0]

    def all_of(v: Any) -> bool:
        for p in preds:  # noqa: SIM110 - a plain loop is faster than all() here
            if not p(v):
                return False
        return True
    return all_of


def _restrict(types: frozenset[BsonType], pred: ValuePred) -> ValuePred:
    """`pred` for values of `types`, true for any other value."""
    return lambda v: bson_type(v) not in types or pred(v)


_NUM: Final = NUMBER_TYPES
_STR: Final = frozenset({BsonType.STRING})
_ARR: Final = frozenset({BsonType.ARRAY})
_OBJ: Final = frozenset({BsonType.OBJECT})


def _keyword_preds(s: Schema) -> list[ValuePred]:
    preds: list[ValuePred] = []
    if not s.top:
        preds.extend(_scalar_preds(s))
        preds.extend(_array_preds(s))
    if s.encrypt:
        preds.append(is_encrypted)
    obj = _object_preds(s)
    if obj:
        if s.top:
            preds.extend(obj)
        else:
            preds.extend(_restrict(_OBJ, p) for p in obj)
    preds.extend(_logical_preds(s))
    return preds


def _scalar_preds(s: Schema) -> list[ValuePred]:
    preds: list[ValuePred] = []
    if s.pattern is not None:
        rx = s.pattern
        preds.append(_restrict(_STR, lambda v: rx.search(v) is not None))
    if s.max_length is not None:
        mx = s.max_length
        preds.append(_restrict(_STR, lambda v: len(v) <= mx))
    if s.min_length is not None:
        mn = s.min_length
        preds.append(_restrict(_STR, lambda v: len(v) >= mn))
    if s.multiple_of is not None:
        m = s.multiple_of
        preds.append(_restrict(_NUM, lambda v: multiple_of(v, m)))
    if s.maximum is not None:
        preds.append(_restrict(_NUM, V.cmp_pred("$lt" if s.exclusive_maximum else "$lte",
                                                s.maximum)))
    if s.minimum is not None:
        preds.append(_restrict(_NUM, V.cmp_pred("$gt" if s.exclusive_minimum else "$gte",
                                                s.minimum)))
    return preds


def _array_preds(s: Schema) -> list[ValuePred]:
    preds: list[ValuePred] = []
    if s.min_items is not None:
        mn = s.min_items
        preds.append(_restrict(_ARR, lambda v: len(v) >= mn))
    if s.max_items is not None:
        mx = s.max_items
        preds.append(_restrict(_ARR, lambda v: len(v) <= mx))
    if s.unique_items:
        preds.append(_restrict(_ARR, lambda v: first_duplicate(v) is MISSING))
    start: int | None = None
    if isinstance(s.items, Schema):
        each = compile_schema(s.items)
        preds.append(_restrict(_ARR, lambda v: all(each(e) for e in v)))
    elif isinstance(s.items, list):
        per = [compile_schema(sub) for sub in s.items]
        preds.append(_restrict(_ARR, lambda v: all(p(e) for p, e in zip(per, v, strict=False))))
        start = len(per)
    if start is not None and s.additional_items is not None:
        extra = s.additional_items
        begin = start
        if extra is True:
            pass
        elif extra is False:
            preds.append(_restrict(_ARR, lambda v: len(v) <= begin))
        else:
            assert isinstance(extra, Schema)
            rest = compile_schema(extra)
            preds.append(_restrict(_ARR, lambda v: all(rest(e) for e in v[begin:])))
    return preds


def allowed_property(s: Schema) -> Callable[[str, Any], bool] | None:
    """Whether one field passes `patternProperties`/`additionalProperties` (None: no such
    keywords)."""
    if not s.pattern_properties and s.additional_properties is None:
        return None
    named = set(s.properties or ())
    patterns = [(pp.compiled, compile_schema(pp.schema)) for pp in s.pattern_properties]
    extra = s.additional_properties
    otherwise: ValuePred
    if extra is None or extra is True:
        otherwise = lambda v: True  # noqa: E731
    elif extra is False:
        otherwise = lambda v: False  # noqa: E731
    else:
        otherwise = compile_schema(extra)

    def check(name: str, v: Any) -> bool:
        matched = False
        for rx, pred in patterns:
            if rx.search(name) is not None:
                matched = True
                if not pred(v):
                    return False
        if matched or name in named:
            return True
        return otherwise(v)
    return check


def _object_preds(s: Schema) -> list[ValuePred]:
    preds: list[ValuePred] = []
    if s.properties:
        props = [(name, compile_schema(sub), name in s.required)
                 for name, sub in s.properties.items()]

        def properties(v: Any) -> bool:
            for name, pred, required in props:
                value = v.get(name, MISSING)
                if (value is not MISSING or required) and not pred(value):
                    return False
            return True
        preds.append(properties)
    allowed = allowed_property(s)
    if allowed is not None:
        check = allowed
        preds.append(lambda v: all(check(k, x) for k, x in v.items()))
    if s.required:
        names = s.required
        preds.append(lambda v: all(n in v for n in names))
    if s.min_properties is not None:
        mn = s.min_properties
        preds.append(lambda v: len(v) >= mn)
    if s.max_properties is not None:
        mx = s.max_properties
        preds.append(lambda v: len(v) <= mx)
    for dep in s.dependencies:
        preds.append(_dependency_pred(dep.name, dep.properties, dep.schema))
    return preds


def _dependency_pred(name: str, props: list[str] | None, sub: Schema | None) -> ValuePred:
    if props is not None:
        needed = props
        return lambda v: name not in v or all(p in v for p in needed)
    assert sub is not None
    pred = compile_schema(sub)
    return lambda v: name not in v or pred(v)


def _logical_preds(s: Schema) -> list[ValuePred]:
    preds: list[ValuePred] = []
    if s.all_of is not None:
        subs = [compile_schema(x) for x in s.all_of]
        preds.append(lambda v: all(p(v) for p in subs))
    if s.any_of is not None:
        any_subs = [compile_schema(x) for x in s.any_of]
        preds.append(lambda v: any(p(v) for p in any_subs))
    if s.one_of is not None:
        one_subs = [compile_schema(x) for x in s.one_of]
        preds.append(lambda v: sum(1 for p in one_subs if p(v)) == 1)
    if s.not_schema is not None:
        inner = compile_schema(s.not_schema)
        preds.append(lambda v: not inner(v))
    if s.enum is not None:
        preds.append(enum_pred(s))
    return preds


def enum_pred(s: Schema) -> ValuePred:
    """`enum`: equal (unordered fields) to one entry; at the top only documents count."""
    keys = [k for k, v in zip(s.enum_keys, s.enum or [], strict=True)
            if not s.top or isinstance(v, dict)]
    return lambda v: v is not MISSING and unordered_key(v) in keys
