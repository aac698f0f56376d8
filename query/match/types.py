"""Which decoded values are numbers, as the matcher and the update operators see them.

Type bytes, ``$type`` aliases and type names are the shared vocabulary's
(`storage.vocabulary.bson_types`).
"""

from __future__ import annotations

from typing import Any

from bson import Decimal128, Int64

__all__ = ["is_number"]


def is_number(v: Any) -> bool:
    t = type(v)
    if t is int or t is float or t is Int64 or t is Decimal128:
        return True
    return isinstance(v, int | float | Decimal128) and not isinstance(v, bool)
