"""The document an upsert starts from: the filter's equality predicates.

MongoDB seeds a new document from the query's top-level (and ``$and``-nested)
equality conditions -- ``{a: 1}``, ``{a: {$eq: 1}}``, ``{"b.c": 2}``, a single-value
``$in`` -- then applies the update with ``is_insert``. Two equalities on one path, or on
a path and its prefix, cannot be combined (NotSingleValueField 54).
"""

from __future__ import annotations

import copy
from typing import Any

from query.match.regex import is_regex_value
from storage.errors import MongoError
from storage.vocabulary.error_codes import ErrorCode

__all__ = ["upsert_seed"]


def _is_operator_doc(v: Any) -> bool:
    return (type(v) is dict and bool(v) and next(iter(v)).startswith("$")
            and not ("$ref" in v and "$id" in v))


def _collect(spec: dict[str, Any], out: list[tuple[str, Any]]) -> None:
    for key, val in spec.items():
        if key == "$and" and isinstance(val, list):
            for sub in val:
                if isinstance(sub, dict):
                    _collect(sub, out)
        elif key == "$or" and isinstance(val, list) and len(val) == 1 and isinstance(val[0], dict):
            _collect(val[0], out)
        elif key.startswith("$"):
            continue
        elif _is_operator_doc(val):
            if "$eq" in val:
                out.append((key, val["$eq"]))
            elif "$in" in val and isinstance(val["$in"], list) and len(val["$in"]) == 1 \
                    and not is_regex_value(val["$in"][0]):
                out.append((key, val["$in"][0]))
        elif not is_regex_value(val):
            out.append((key, val))


def upsert_seed(filter_spec: dict[str, Any]) -> dict[str, Any]:
    pairs: list[tuple[str, Any]] = []
    _collect(filter_spec, pairs)
    seen: dict[str, str] = {}
    for path, _ in pairs:
        if path in seen:
            raise MongoError(ErrorCode.NotSingleValueField, "cannot infer query fields to set, "
                             f"path '{path}' is matched twice")
        for other in seen:
            if other.startswith(path + ".") or path.startswith(other + "."):
                raise MongoError(ErrorCode.NotSingleValueField, "cannot infer query fields to "
                                 f"set, both paths '{path}' and '{other}' are matched")
        seen[path] = path
    doc: dict[str, Any] = {}
    for path, value in pairs:
        parts = path.split(".")
        cur = doc
        for part in parts[:-1]:
            nxt = cur.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                cur[part] = nxt
            cur = nxt
        cur[parts[-1]] = copy.deepcopy(value)
    if "_id" in doc:
        doc = {"_id": doc.pop("_id"), **doc}
    return doc
