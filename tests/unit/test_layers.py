"""The layering rule, checked: each package imports only the packages below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"server", "protocol", "query", "storage"}
ALLOWED = {
    "server": {"server", "protocol", "query", "storage"},
    "query": {"query", "storage"},
    "storage": {"storage"},
    "protocol": {"protocol"},
}
FORBIDDEN_IN_PROTOCOL = {"asyncio", "socket", "selectors", "uvloop", "sqlite3"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for path in files:
        imported = _imports(path)
        bad = (imported & OURS) - ALLOWED[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
        if package == "protocol":
            io = imported & FORBIDDEN_IN_PROTOCOL
            assert not io, f"{path.relative_to(ROOT)} does I/O via {sorted(io)}"
