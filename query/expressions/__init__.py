"""Aggregation expressions: compile a spec once, evaluate it per document.

Public API::

    expr = compile_expression({"$add": ["$a", 1]}, variables_in_scope=("x",))
    expr.evaluate(doc, variables)   # -> value, or MISSING

`MISSING` (`storage.vocabulary.missing`) is the value of an absent field (distinct from
None, which is BSON null).
Operator families live in one module each (arithmetic, comparison, strings, arrays, sets,
objects, types, dates, misc); accumulator expression forms ($sum, $avg, ...) come from
`query.accumulators`.
"""

from __future__ import annotations

from .core import (
    EMPTY_VARS,
    OPERATORS,
    Expression,
    Scope,
    compile_expression,
    compile_node,
    path_getter,
)
from .values import truthy

__all__ = [
    "Expression", "Scope", "compile_expression", "compile_node",
    "OPERATORS", "EMPTY_VARS", "path_getter", "truthy",
]
