"""The vocabulary is the bottom of the tree: it imports nothing else of ours."""

from __future__ import annotations

import ast

from ._source_scan import source_trees

OURS = {"server", "protocol", "query", "storage"}


def test_vocabulary_imports_only_itself() -> None:
    for path, tree in source_trees():
        if not path.startswith("storage/vocabulary/"):
            continue
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                     and node.module else [])
            for name in names:
                if name.split(".")[0] in OURS:
                    assert name.startswith("storage.vocabulary"), f"{path} imports {name}"
