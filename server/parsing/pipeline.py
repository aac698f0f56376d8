"""Splitting a pipeline's leading `$match` off, so a scan can take it as its filter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from query.match import compile_filter

__all__ = ["split_leading_match"]


def split_leading_match(stages: list[Any], variables: Mapping[str, Any] | None = None
                        ) -> tuple[dict[str, Any] | None, list[Any]]:
    """A leading $match without $expr-free restrictions can become the scan's filter;
    `variables` are the command's `let` values its `$expr` may read."""
    if stages and isinstance(stages[0], dict) and len(stages[0]) == 1 and "$match" in stages[0]:
        flt = stages[0]["$match"]
        if isinstance(flt, dict):
            compile_filter(flt, variables=dict(variables or {}))  # errors surface with the matcher's codes
            return flt, stages[1:]
    return None, stages
