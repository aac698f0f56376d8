"""The project's source modules as syntax trees, for the one-definition checks."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ROOT", "source_trees"]

ROOT = Path(__file__).resolve().parents[4]
_PACKAGES = ("server", "protocol", "query", "storage")


def source_trees() -> Iterator[tuple[str, ast.Module]]:
    """(path relative to the repository, parsed module) of every source module."""
    for package in _PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(encoding="utf-8"))
