"""Lists the import cycles among bucketd's modules, counting imports made inside functions.

An import is an edge from the importing module to the module it names: `from a.b import c`
points at `a.b.c` when that is a module, else at `a.b`. Imports under `if TYPE_CHECKING:`
are left out (they never run). A cycle is a strongly connected component of two or more
modules. Run as a script to print them (`-v` adds the edges with their line numbers); the
test `tests/unit/test_import_cycles.py` fails on any cycle outside `ALLOWED_CYCLES`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["ALLOWED_CYCLES", "PACKAGES", "Edge", "cycles", "import_graph", "is_allowed"]

PACKAGES: Final = ("server", "protocol", "query", "storage")

# The one cycle the layering allows (a cycle among some of these modules is allowed too): a
# pipeline compiles its stages, and the stages that hold sub-pipelines ($facet, $lookup)
# compile pipelines.
ALLOWED_CYCLES: Final = (
    frozenset({"query.pipeline", "query.stages", "query.stages.facet", "query.stages.lookup"}),
)


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    line: int
    in_function: bool


def _module_files(root: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST, in_function: bool = False
             ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for node in child.orelse:
                yield from _imports_of(node, in_function)
            continue
        yield from _imports_of(child, in_function)


def _imports_of(node: ast.AST, in_function: bool
                ) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, inside
    yield from _imports(node, inside)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             known: Iterable[str]) -> list[str]:
    names = set(known)
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        here = here[:len(here) - (node.level - 1)]
        base = ".".join([*here, *([node.module] if node.module else [])])
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in names else base for a in node.names]


def import_graph(root: Path) -> dict[str, list[Edge]]:
    """Each of our modules → the edges to our other modules it imports."""
    files = _module_files(root)
    graph: dict[str, list[Edge]] = {m: [] for m in files}
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, in_function in _imports(tree):
            for target in _targets(node, module, path.name == "__init__.py", files):
                if target in files and target != module:
                    graph[module].append(Edge(module, target, node.lineno, in_function))
    return graph


def cycles(graph: dict[str, list[Edge]]) -> list[frozenset[str]]:
    """The strongly connected components of two or more modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for edge in graph[v]:
            w = edge.target
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in graph:
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found, key=sorted)


def is_allowed(component: frozenset[str]) -> bool:
    return any(component <= allowed for allowed in ALLOWED_CYCLES)


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parents[1]
    graph = import_graph(root)
    bad = 0
    for component in cycles(graph):
        allowed = is_allowed(component)
        bad += not allowed
        print(("allowed " if allowed else "") + "cycle: " + ", ".join(sorted(component)))
        if "-v" in argv:
            for module in sorted(component):
                for e in graph[module]:
                    if e.target in component:
                        where = "in a function" if e.in_function else "at module level"
                        print(f"    {e.source}:{e.line} -> {e.target} ({where})")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
