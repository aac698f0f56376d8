"""No import cycles among our modules, counting imports made inside functions.

The one exception is query's sub-pipeline registry (`tools/import_cycles.ALLOWED_CYCLES`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", ROOT / "tools" / "import_cycles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CYCLES = _tool()


@pytest.mark.parametrize("package", CYCLES.PACKAGES)
def test_no_import_cycle(package: str) -> None:
    graph = CYCLES.import_graph(ROOT)
    bad = [sorted(c) for c in CYCLES.cycles(graph)
           if not CYCLES.is_allowed(c) and any(m.split(".")[0] == package for m in c)]
    assert not bad, f"import cycles in {package}/: {bad}"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_lister_finds_function_level_cycles_and_skips_type_checking(tmp_path: Path) -> None:
    _write(tmp_path, {
        "storage/__init__.py": "",
        "storage/a.py": "def f():\n    from storage import b\n",
        "storage/b.py": "from .a import f\n",
        "storage/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from storage.d import x\n",
        "storage/d.py": "from storage.c import y\n",
        "server/__init__.py": "", "query/__init__.py": "", "protocol/__init__.py": "",
    })
    graph = CYCLES.import_graph(tmp_path)
    assert CYCLES.cycles(graph) == [frozenset({"storage.a", "storage.b"})]
    (edge,) = graph["storage.a"]
    assert edge.in_function and edge.target == "storage.b"


def test_allowed_cycle_and_its_parts() -> None:
    (allowed,) = CYCLES.ALLOWED_CYCLES
    assert CYCLES.is_allowed(allowed)
    assert CYCLES.is_allowed(frozenset({"query.pipeline", "query.stages.facet"}))
    assert not CYCLES.is_allowed(allowed | {"query.planner"})
