"""The operator table: expression operator names → their compilers.

The operator families (`arithmetic`, `strings`, `dates`, ...) register into `OPERATORS` with
the `operator` decorator when they are imported; `query/expressions/__init__.py` imports
every family, so the table is complete before anything in this package can compile.
This module imports nothing of ours, so every family can sit above it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import Scope

__all__ = ["Fn", "Compiler", "OPERATORS", "IMPURE_OPERATORS", "IMPLICIT_DOC_OPERATORS",
           "operator"]

Fn = Callable[[Any, dict], Any]
Compiler = Callable[[Any, "Scope", str], Fn]

OPERATORS: dict[str, Compiler] = {}
# Operators whose value is not a function of their arguments alone (never folded).
IMPURE_OPERATORS: set[str] = {"$rand", "$meta"}
# Operators that read $$CURRENT implicitly (never folded even with constant arguments).
IMPLICIT_DOC_OPERATORS: set[str] = {"$getField"}


def operator(*names: str, impure: bool = False) -> Callable[[Compiler], Compiler]:
    """Register an operator compiler ``(arg_spec, scope, op_name) -> Fn`` under `names`."""
    def deco(compiler: Compiler) -> Compiler:
        for n in names:
            OPERATORS[n] = compiler
            if impure:
                IMPURE_OPERATORS.add(n)
        return compiler
    return deco
