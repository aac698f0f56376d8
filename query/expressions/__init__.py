"""Aggregation expressions: compile a spec once, evaluate it per document.

Public API::

    expr = compile_expression({"$add": ["$a", 1]}, variables_in_scope=("x",))
    expr.evaluate(doc, variables)   # -> value, or MISSING

`MISSING` (`storage.vocabulary.missing`) is the value of an absent field (distinct from
None, which is BSON null).

This file is the index of the operator families: `registry.OPERATORS` is filled by the
modules imported below, one per family (arithmetic, comparison, strings, arrays, sets,
objects, types, dates, misc, and the expression forms of accumulators). Python runs this
file before any module of the package, so whoever imports anything from
`query.expressions` gets the complete table before anything can compile. `core` (the
compiler) and the families import none of the families they do not use.
"""

from __future__ import annotations

from . import (  # noqa: F401  (each registers its operators)
    accumulator_forms,
    arithmetic,
    arrays,
    comparison,
    dates,
    misc,
    objects,
    sets,
    strings,
    types,
)
from .core import EMPTY_VARS, Expression, Scope, compile_expression, compile_node, path_getter
from .registry import OPERATORS
from .values import truthy

__all__ = [
    "Expression", "Scope", "compile_expression", "compile_node",
    "OPERATORS", "EMPTY_VARS", "path_getter", "truthy",
]
