"""MongoDB's sort order for documents, as a key function for `sorted()`.

    s = compile_sort({"a": 1, "b.c": -1})
    docs.sort(key=s)          # stable, like MongoDB's in-memory sort

Per field, the sort key of a document is derived from the values its path reaches
(`query.paths`): an array contributes its elements (ascending uses the smallest,
descending the largest), an empty array sorts as undefined (below null), and a
missing field sorts as null. Values compare in BSON order (`storage.bson_order`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from bson import Decimal128

from query.paths import iter_leaves, validate_field_path
from storage.bson_order import RANK_UNDEFINED, sort_key
from storage.collation import Collator, collation_key_fn, translate_fn
from storage.errors import MongoError
from storage.keystring import UNDEFINED, encode_key
from storage.vocabulary.bson_types import is_number
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING

__all__ = ["SortSpec", "compile_sort", "parse_sort", "field_sort_key"]

_NULL_KEY: Final = sort_key(None)
_UNDEFINED_KEY: Final = (RANK_UNDEFINED,)
_META_NAMES: Final = frozenset({"textScore", "randVal", "geoNearDistance", "searchScore",
                                "vectorSearchScore", "score"})


def parse_sort(spec: dict[str, Any]) -> list[tuple[str, int]]:
    """Validate a sort document; return ``[(path, 1 | -1), ...]``."""
    if not isinstance(spec, dict):
        raise MongoError(ErrorCode.TypeMismatch, "sort must be an object")
    out: list[tuple[str, int]] = []
    for path, direction in spec.items():
        if isinstance(direction, dict):
            if not direction or next(iter(direction)) != "$meta":
                raise MongoError(17312, "$meta is the only expression supported by $sort right now")
            if len(direction) != 1:
                raise MongoError(ErrorCode.FailedToParse,
                                 "Cannot have additional keys in a $meta sort specification")
            name = direction["$meta"]
            if name not in _META_NAMES:
                raise MongoError(31138, f"Illegal $meta sort: $meta: {name!r}")
            raise MongoError(ErrorCode.NotImplemented,
                             f"sorting by {{$meta: {name!r}}} is not supported by bucketd")
        if not is_number(direction):
            raise MongoError(15974,
                             f"Illegal key in $sort specification: {path}: {direction!r}")
        d = _safe_long(direction)
        if d not in (1, -1):
            raise MongoError(15975,
                             "$sort key ordering must be 1 (for ascending) or -1 (for descending)")
        validate_field_path(path)
        out.append((path, d))
    return out


def _safe_long(v: Any) -> int:
    if isinstance(v, Decimal128):
        d = v.to_decimal()
        return int(d) if d.is_finite() else 0
    if isinstance(v, float):
        return int(v) if v == v and abs(v) != float("inf") else 0
    return int(v)


def field_sort_key(doc: Any, parts: tuple[str, ...], ascending: bool,
                   sort_key: Callable[[Any], tuple[Any, ...]] = sort_key) -> tuple[Any, ...]:
    """The BSON-order key of one sort field of `doc` (array min/max rule); `sort_key` is a
    collation's key function when the sort has one."""
    cur = doc
    for part in parts:  # fast path: a walk through documents only
        if type(cur) is not dict:
            break
        cur = cur.get(part, MISSING)
        if cur is MISSING:
            return _NULL_KEY
    else:
        if type(cur) is not list:
            return sort_key(cur)
    keys = []
    for v, _ in iter_leaves(doc, parts, False):
        if v is MISSING:
            keys.append(_NULL_KEY)
        elif type(v) is list:
            if v:
                keys.extend(sort_key(e) for e in v)
            else:
                keys.append(_UNDEFINED_KEY)
        else:
            keys.append(sort_key(v))
    if not keys:
        return _NULL_KEY
    return min(keys) if ascending else max(keys)


def field_sort_value(doc: Any, parts: tuple[str, ...], ascending: bool,
                     sort_key: Callable[[Any], tuple[Any, ...]] = sort_key) -> Any:
    """The value a sort field compares by: the field itself, or an array's least (ascending)
    / greatest (descending) element; None when missing; UNDEFINED for an empty array."""
    cur = doc
    for part in parts:  # fast path: a walk through documents only
        if type(cur) is not dict:
            break
        cur = cur.get(part, MISSING)
        if cur is MISSING:
            return None
    else:
        if type(cur) is not list:
            return cur
    best: Any = MISSING
    best_key: Any = None
    for v, _ in iter_leaves(doc, parts, False):
        candidates = (v if v else [UNDEFINED]) if type(v) is list else [v]
        for c in candidates:
            if c is MISSING:
                c = None
            k = _UNDEFINED_KEY if c is UNDEFINED else sort_key(c)
            if best is MISSING or (k < best_key if ascending else k > best_key):
                best, best_key = c, k
    return None if best is MISSING else best


class SortSpec:
    """A compiled sort: call it on a document to get its sort key."""

    __slots__ = ("_key", "collator", "fields")

    def __init__(self, fields: list[tuple[str, int]], collator: Collator | None = None) -> None:
        self.fields = fields
        self.collator = collator
        self._key = self._build()

    def _build(self) -> Callable[[Any], Any]:
        parts = [(tuple(p.split(".")), d == 1) for p, d in self.fields]
        if not parts:
            return lambda doc: 0
        sk = collation_key_fn(self.collator)
        if len(parts) == 1:
            (p, asc), = parts
            if asc:
                return lambda doc: field_sort_key(doc, p, True, sk)
        elif all(asc for _, asc in parts):
            return lambda doc: tuple(field_sort_key(doc, p, True, sk) for p, _ in parts)
        # Any descending field: compare index-key bytes (storage.keystring encodes BSON order
        # with per-field direction), several times faster than a Python comparison object.
        dirs = tuple(1 if asc else -1 for _, asc in parts)
        tr = translate_fn(self.collator)
        return lambda doc: encode_key(tuple(tr(field_sort_value(doc, p, a, sk))
                                            for p, a in parts), dirs)

    def __call__(self, doc: Any) -> Any:
        return self._key(doc)

    key = __call__

    @property
    def is_empty(self) -> bool:
        return not self.fields

    def __repr__(self) -> str:
        return f"SortSpec({dict(self.fields)!r})"


def compile_sort(spec: dict[str, Any] | None, collator: Collator | None = None) -> SortSpec:
    """Compile a sort document into a key function (raises MongoError on a bad spec);
    strings compare by `collator` (None: the simple collation)."""
    return SortSpec(parse_sort(spec or {}), collator)
