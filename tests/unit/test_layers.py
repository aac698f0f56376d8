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
    "protocol": {"protocol", "storage"},  # storage: its vocabulary only, checked below
}
FORBIDDEN_IN_PROTOCOL = {"asyncio", "socket", "selectors", "uvloop", "sqlite3"}
# The one part of storage that protocol may use: the shared vocabulary (error codes, ...).
PROTOCOL_MAY_USE = "storage.vocabulary"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _imports(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _imported_modules(path)}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for path in files:
        imported = _imports(path)
        bad = (imported & OURS) - ALLOWED[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
        if package == "protocol":
            storage_parts = {m for m in _imported_modules(path) if m.split(".")[0] == "storage"}
            beyond = {m for m in storage_parts
                      if m != PROTOCOL_MAY_USE and not m.startswith(PROTOCOL_MAY_USE + ".")}
            assert not beyond, f"{path.relative_to(ROOT)} imports {sorted(beyond)}"
            io = imported & FORBIDDEN_IN_PROTOCOL
            assert not io, f"{path.relative_to(ROOT)} does I/O via {sorted(io)}"
