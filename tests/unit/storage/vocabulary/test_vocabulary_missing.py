"""One MISSING: the same falsy singleton in every layer, surviving copy and pickle."""

from __future__ import annotations

import ast
import copy
import pickle

from storage.vocabulary.missing import MISSING, Missing

from ._source_scan import source_trees


def test_singleton_falsy_and_named() -> None:
    assert Missing() is MISSING
    assert not MISSING
    assert MISSING is not None and MISSING != None  # noqa: E711
    assert repr(MISSING) == "MISSING"


def test_copy_and_pickle_keep_identity() -> None:
    assert copy.copy(MISSING) is MISSING
    assert copy.deepcopy({"a": MISSING})["a"] is MISSING
    assert pickle.loads(pickle.dumps(MISSING)) is MISSING


def test_no_other_sentinel_class_or_definition() -> None:
    others = []
    for path, tree in source_trees():
        if path == "storage/vocabulary/missing.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name.lstrip("_") == "Missing":
                others.append(f"{path}:{node.lineno} class {node.name}")
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and target.id.lstrip("_") == "MISSING":
                    others.append(f"{path}:{node.lineno} {target.id} =")
    assert not others, others


def test_layers_agree_on_the_absent_value() -> None:
    from query.expressions import compile_expression
    from query.paths import get_path
    from storage.bsoncolumn import BSONColumn, BSONColumnBuilder
    from storage.timeseries.metadata import series_key

    assert get_path({"a": 1}, "b") is MISSING
    assert compile_expression("$b").evaluate({"a": 1}, {}) is MISSING
    assert series_key(MISSING) == b""
    column = BSONColumnBuilder().append(1).append(MISSING).append(2).finalize()
    assert list(BSONColumn(column)) == [1, MISSING, 2]
