"""The layering rule, checked: each package imports only the packages below it, and inside
`server/` each sub-layer imports only the sub-layers below it."""

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

# Inside server/, from the top down. A module is in the first layer one of whose
# prefixes it has; every other module is infrastructure (state, storage thread, cursors,
# logs, parameters, namespaces, parsing helpers, ...).
SERVER_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("lifecycle", ("server.__main__", "server.app", "server.connection", "server.dispatch",
                   "server.inspect_cli")),
    ("commands", ("server.commands",)),
    ("services", ("server.timeseries", "server.aggregation", "server.aggregate_explain",
                  "server.write_explain", "server.collection_stats", "server.ttl",
                  "server.views")),
    ("infrastructure", ("server",)),
]
LAYER_RANK = {name: i for i, (name, _) in enumerate(SERVER_LAYERS)}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import, in functions too, except those under `if TYPE_CHECKING:`."""
    out: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for sub in child.orelse:
                    walk(sub)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append(child)
            walk(child)

    walk(tree)
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports (for `from x import y`, x.y too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        if node.level:
            base = package[:len(package) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        else:
            module = node.module or ""
        names.add(module)
        names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _imports(path: Path) -> set[str]:
    """The top-level packages `path` imports."""
    return {name.split(".")[0] for name in _imported_modules(path)}


def _server_layer(module: str) -> str:
    for name, prefixes in SERVER_LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return name
    raise AssertionError(module)


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


def test_server_sub_layers_import_only_lower_ones() -> None:
    """lifecycle → commands → services → infrastructure: infrastructure imports no
    command or service, services import no command (type-only imports aside)."""
    for path in sorted((ROOT / "server").rglob("*.py")):
        module = _module_name(path)
        rank = LAYER_RANK[_server_layer(module)]
        for imported in _imported_modules(path):
            if not imported.startswith("server."):
                continue
            other = _server_layer(imported)
            assert LAYER_RANK[other] >= rank, (
                f"{module} ({_server_layer(module)}) imports {imported} ({other})")


def test_the_server_layers_are_not_empty() -> None:
    layers = {_server_layer(_module_name(p)) for p in (ROOT / "server").rglob("*.py")}
    assert layers == set(LAYER_RANK)
