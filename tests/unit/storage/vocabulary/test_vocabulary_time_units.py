"""The one unit table: its lengths, and no second copy anywhere in the source."""

from __future__ import annotations

import ast

from storage.vocabulary.time_units import MS_PER_DAY, UNIT_MS

from ._source_scan import source_trees


def test_unit_lengths() -> None:
    assert UNIT_MS == {"millisecond": 1, "second": 1000, "minute": 60_000,
                       "hour": 3_600_000, "day": 86_400_000, "week": 604_800_000}
    assert MS_PER_DAY == 86_400_000


def _maps_second_to_1000(node: ast.Dict) -> bool:
    return any(isinstance(k, ast.Constant) and k.value == "second"
               and isinstance(v, ast.Constant) and v.value == 1000
               for k, v in zip(node.keys, node.values))


def test_no_other_unit_table() -> None:
    copies = []
    for path, tree in source_trees():
        if path == "storage/vocabulary/time_units.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and _maps_second_to_1000(node):
                copies.append(f"{path}:{node.lineno}")
    assert not copies, copies
