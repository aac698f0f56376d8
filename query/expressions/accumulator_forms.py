"""The expression forms of accumulators: ``{$sum: [...]}``, ``$avg``, ``$min``, ``$max``,
``$stdDevPop``, ``$stdDevSamp`` over an array operand or a list of operands, and
``$percentile``/``$median`` over an array or a value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import Scope, compile_node
from .reducers import (
    Accumulator,
    AvgAcc,
    MinMaxAcc,
    PercentileAcc,
    StdDevAcc,
    SumAcc,
    Tracker,
    parse_percentile_spec,
)
from .registry import Fn, operator

__all__: list[str] = []


def _expr_form(op: str, factory: Callable[[Scope], Accumulator]) -> None:
    @operator(op)
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        def make() -> Accumulator:
            return factory(scope)
        args = [compile_node(a, scope) for a in arg] if type(arg) is list else \
            [compile_node(arg, scope)]
        single = len(args) == 1

        def f(doc: Any, v: dict) -> Any:
            acc = make()
            if single:
                x = args[0](doc, v)
                if type(x) is list:
                    for e in x:
                        acc.process(e)
                else:
                    acc.process(x)
            else:
                for a in args:
                    acc.process(a(doc, v))
            return acc.result()
        return f


_expr_form("$sum", lambda scope: SumAcc())
_expr_form("$avg", lambda scope: AvgAcc())
_expr_form("$min", lambda scope: MinMaxAcc(-1, scope.collator))
_expr_form("$max", lambda scope: MinMaxAcc(1, scope.collator))
_expr_form("$stdDevPop", lambda scope: StdDevAcc(False))
_expr_form("$stdDevSamp", lambda scope: StdDevAcc(True))


def _percentile_expr(op: str) -> None:
    @operator(op)
    def compiler(arg: Any, scope: Scope, name: str) -> Fn:
        inp, ps, method = parse_percentile_spec(op, arg)
        i_fn = compile_node(inp, scope)
        single = op == "$median"

        def f(doc: Any, v: dict) -> Any:
            acc = PercentileAcc(ps, method, single, Tracker())
            x = i_fn(doc, v)
            for e in (x if type(x) is list else [x]):
                acc.process(e)
            return acc.result()
        return f


_percentile_expr("$percentile")
_percentile_expr("$median")
