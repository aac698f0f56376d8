"""Helpers on decoded BSON values shared by the update operators."""

from __future__ import annotations

from typing import Any

from storage.bson_order import sort_key
from storage.vocabulary.bson_types import bson_type

__all__ = ["identical", "short_repr"]


def identical(a: Any, b: Any) -> bool:
    """Binary equality: same BSON types, same values, same field names and order.

    This is what MongoDB uses to decide that an update was a no-op (``$set: {a: 1.0}``
    on ``{a: 1}`` changes the document: the type changes).
    """
    ta, tb = type(a), type(b)
    if ta is dict and tb is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if ka != kb or not identical(va, vb):
                return False
        return True
    if ta is list and tb is list:
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b))
    if bson_type(a) is not bson_type(b):
        return False
    if ta is float and tb is float:
        # -0.0 and 0.0 differ in bytes; NaN is identical to NaN
        return (a == b and str(a) == str(b)) or (a != a and b != b)
    try:
        return sort_key(a) == sort_key(b)
    except TypeError:
        return a == b


def short_repr(v: Any) -> str:
    """A compact, shell-like rendering of a value for error messages."""
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k}: {short_repr(x)}" for k, x in v.items()) + " }" if v else "{}"
    if isinstance(v, list):
        return "[ " + ", ".join(short_repr(x) for x in v) + " ]" if v else "[]"
    if isinstance(v, str):
        return '"' + v + '"'
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)
