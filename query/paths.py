"""Dotted paths over decoded documents with MongoDB's implicit array semantics.

MongoDB reads a path such as ``a.b.c`` by walking field by field; whenever the
value in hand is an array and the next component is a field name, the walk fans
out over the array's elements (only elements that are documents continue; nested
arrays are not entered). A numeric component on an array does both: it selects the
element at that index *and* looks for a field of that name in each element that is
a document. At the end of the path an array is "expanded": each of its elements is
a candidate and so is the array itself (this is why ``{a: 1}`` matches
``{a: [1, 2]}`` and ``{a: [1, 2]}`` matches ``{a: [[1, 2], 3]}``).

A path that leads nowhere yields `MISSING`, which the matcher treats like null for
equality (``{"a.b": null}`` matches ``{a: 4}`` and ``{a: [1, 2]}``).

`iter_leaves` also reports, for each candidate, the index in the *first* array the
walk fanned out over: that is the position the positional ``$`` operator refers to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bson import DBRef

from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

__all__ = [
    "split_path", "is_array_index", "iter_leaves", "iter_values",
    "get_path", "has_path", "validate_field_path",
]


def split_path(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def is_array_index(part: str) -> bool:
    """A path component that addresses an array element: ASCII digits, no leading zero."""
    return part.isascii() and part.isdigit() and (len(part) == 1 or part[0] != "0")


def _as_doc(v: Any) -> dict[str, Any] | None:
    if type(v) is dict:
        return v
    if isinstance(v, dict):
        return v
    if isinstance(v, DBRef):
        return dict(v.as_doc())
    return None


def iter_leaves(value: Any, parts: tuple[str, ...], expand_leaf: bool = True,
                ) -> Iterator[tuple[Any, int | None]]:
    """Yield ``(candidate, first_array_position)`` for `parts` read from `value`.

    With `expand_leaf`, an array at the end of the path yields each element and
    then the array itself; without it (``$size``, ``$elemMatch``) only the array.
    """
    return _walk(value, parts, 0, None, expand_leaf)


def _walk(value: Any, parts: tuple[str, ...], i: int, pos: int | None,
          expand: bool) -> Iterator[tuple[Any, int | None]]:
    if i == len(parts):
        if expand and type(value) is list:
            for j, elem in enumerate(value):
                yield elem, (j if pos is None else pos)
        yield value, pos
        return
    part = parts[i]
    if type(value) is list:
        produced = False
        if is_array_index(part):
            idx = int(part)
            if idx < len(value):
                produced = True
                yield from _walk(value[idx], parts, i + 1, pos, expand)
        for j, elem in enumerate(value):
            doc = _as_doc(elem)
            if doc is None:
                continue
            produced = True
            child = doc.get(part, MISSING)
            p = j if pos is None else pos
            if child is MISSING:
                yield MISSING, p
            else:
                yield from _walk(child, parts, i + 1, p, expand)
        if not produced:
            yield MISSING, pos
        return
    doc = _as_doc(value)
    if doc is None:
        yield MISSING, pos
        return
    child = doc.get(part, MISSING)
    if child is MISSING:
        yield MISSING, pos
    else:
        yield from _walk(child, parts, i + 1, pos, expand)


def iter_values(value: Any, parts: tuple[str, ...]) -> Iterator[Any]:
    """The values reached by `parts` (array fan-out, no leaf expansion, no MISSING)."""
    for v, _ in _walk(value, parts, 0, None, False):
        if v is not MISSING:
            yield v


def get_path(doc: Any, parts: tuple[str, ...] | str) -> Any:
    """The single value at a path, following documents and explicit array indexes only.

    No fan-out: a field name applied to an array gives `MISSING`. This is the
    reading update operators and ``$rename`` use.
    """
    if isinstance(parts, str):
        parts = split_path(parts)
    cur = doc
    for part in parts:
        if type(cur) is list:
            if not is_array_index(part):
                return MISSING
            idx = int(part)
            if idx >= len(cur):
                return MISSING
            cur = cur[idx]
            continue
        d = _as_doc(cur)
        if d is None:
            return MISSING
        cur = d.get(part, MISSING)
        if cur is MISSING:
            return MISSING
    return cur


def has_path(doc: Any, parts: tuple[str, ...] | str) -> bool:
    return get_path(doc, parts) is not MISSING


def validate_field_path(path: str) -> tuple[str, ...]:
    """Check a field path as MongoDB's FieldPath does; return its components."""
    if path == "":
        raise MongoError(40352, "FieldPath cannot be constructed with empty string")
    if path.startswith("$"):
        raise MongoError(16410, "FieldPath field names may not start with '$'. Consider using "
                         "$getField or $setField.")
    parts = tuple(path.split("."))
    for part in parts:
        if part == "":
            raise MongoError(15998, "FieldPath field names may not be empty strings.")
        if part.startswith("$"):
            raise MongoError(16410, "FieldPath field names may not start with '$'. Consider "
                             "using $getField or $setField.")
    return parts
