"""How deep objects and arrays nest in a decoded document, walked without recursion.

Two of MongoDB's limits read it: `maxBSONDepth` on every document a client sends (every
object or array counts, empty or not) and the storage depth of a stored document (only
non-empty ones count). A walk of its own so that a hostile document cannot exhaust
Python's recursion before the limit is reached.
"""

from __future__ import annotations

from typing import Any

__all__ = ["nesting_exceeds", "too_deep_to_decode"]


def nesting_exceeds(doc: dict[str, Any] | list[Any], limit: int, *,
                    count_empty: bool = True) -> bool:
    """Whether objects or arrays nest more than `limit` levels deep in `doc` (which is
    level 1); with `count_empty=False` an empty object or array adds no level."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        for child in (value.values() if isinstance(value, dict) else value):
            if isinstance(child, dict | list) and (count_empty or child):
                if depth >= limit:
                    return True
                push((child, depth + 1))
    return False


def too_deep_to_decode(error: BaseException) -> bool:
    """Whether a decoder gave up on a document for its nesting: pymongo's C decoder
    reports Python's recursion limit as InvalidBSON whose text alone says so."""
    return isinstance(error, RecursionError) or "maximum recursion depth" in str(error)
