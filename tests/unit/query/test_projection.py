"""Find projection tests; expectations from the MongoDB manual ("Project Fields to Return
from Query", "$slice (projection)", "$elemMatch (projection)", "$ (projection)") and the
codes of src/mongo/db/query/projection_parser.cpp."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from query.match import compile_filter
from query.projection import compile_projection
from storage.errors import MongoError

INVENTORY = {
    "_id": 1, "item": "journal", "status": "A",
    "size": {"h": 14, "w": 21, "uom": "cm"},
    "instock": [{"warehouse": "A", "qty": 5}, {"warehouse": "C", "qty": 15}],
}

CASES = [
    # manual: "Return the Specified Fields and the _id Field Only"
    ({"item": 1, "status": 1}, {"_id": 1, "item": "journal", "status": "A"}),
    ({"item": 1, "status": 1, "_id": 0}, {"item": "journal", "status": "A"}),
    # "Return All But the Excluded Fields"
    ({"status": 0, "instock": 0},
     {"_id": 1, "item": "journal", "size": {"h": 14, "w": 21, "uom": "cm"}}),
    # "Return Specific Fields in Embedded Documents"
    ({"item": 1, "status": 1, "size.uom": 1},
     {"_id": 1, "item": "journal", "status": "A", "size": {"uom": "cm"}}),
    ({"item": 1, "size": {"uom": 1}},
     {"_id": 1, "item": "journal", "size": {"uom": "cm"}}),
    # "Suppress Specific Fields in Embedded Documents"
    ({"size.uom": 0},
     {"_id": 1, "item": "journal", "status": "A", "size": {"h": 14, "w": 21},
      "instock": [{"warehouse": "A", "qty": 5}, {"warehouse": "C", "qty": 15}]}),
    # "Projection on Embedded Documents in an Array"
    ({"item": 1, "status": 1, "instock.qty": 1},
     {"_id": 1, "item": "journal", "status": "A", "instock": [{"qty": 5}, {"qty": 15}]}),
    # "Project Specific Array Elements in the Returned Array" ($slice: -1)
    ({"item": 1, "status": 1, "instock": {"$slice": -1}},
     {"_id": 1, "item": "journal", "status": "A", "instock": [{"warehouse": "C", "qty": 15}]}),
    # $slice alone is an exclusion-style projection: other fields stay
    ({"instock": {"$slice": 1}},
     {**INVENTORY, "instock": [{"warehouse": "A", "qty": 5}]}),
    ({"_id": 0},
     {k: v for k, v in INVENTORY.items() if k != "_id"}),
    ({"_id": 1}, {"_id": 1}),
    ({"instock": {"$elemMatch": {"qty": {"$gt": 10}}}},
     {"_id": 1, "instock": [{"warehouse": "C", "qty": 15}]}),
    ({"instock": {"$elemMatch": {"qty": {"$gt": 100}}}, "item": 1},
     {"_id": 1, "item": "journal"}),
]


@pytest.mark.parametrize(("spec", "expected"), CASES)
def test_manual_projections(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    p = compile_projection(spec)
    assert p is not None
    assert p.apply(INVENTORY) == expected


def test_slice_forms() -> None:
    doc = {"_id": 1, "a": [1, 2, 3, 4, 5], "b": 7}
    def run(arg: Any) -> Any:
        return compile_projection({"a": {"$slice": arg}}).apply(doc)["a"]  # type: ignore[union-attr]
    assert run(2) == [1, 2]
    assert run(-2) == [4, 5]
    assert run([1, 2]) == [2, 3]
    assert run([-2, 5]) == [4, 5]
    assert run([-9, 2]) == [1, 2]
    assert run(0) == []
    # a non-array value is returned as is
    assert compile_projection({"b": {"$slice": 1}}).apply(doc)["b"] == 7  # type: ignore[union-attr]


def test_dotted_inclusion_through_scalars_and_arrays() -> None:
    # jstests/core/query/null_query_semantics.js: projection {_id: 0, "a.b": 1}
    p = compile_projection({"_id": 0, "a.b": 1})
    assert p is not None
    assert p.apply({"a": 4}) == {}
    assert p.apply({"a": None}) == {}
    assert p.apply({"a": [1, "string", 4]}) == {"a": []}
    assert p.apply({"a": [[]]}) == {"a": [[]]}
    assert p.apply({"a": [{"b": 3}, {}]}) == {"a": [{"b": 3}, {}]}


def test_positional_projection() -> None:
    # manual "$ (projection)": students grades
    doc = {"_id": 1, "semester": 1, "grades": [70, 87, 90]}
    m = compile_filter({"semester": 1, "grades": {"$gte": 85}})
    p = compile_projection({"grades.$": 1}, filter_matcher=m)
    assert p is not None
    assert p.apply(doc) == {"_id": 1, "grades": [87]}
    assert p.apply(doc, matched_position=2) == {"_id": 1, "grades": [90]}


def test_expressions_in_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    class Expr:
        def __init__(self, spec: Any) -> None:
            self.spec = spec

        def evaluate(self, doc: dict[str, Any], variables: dict[str, Any]) -> Any:
            s = self.spec
            if isinstance(s, str) and s.startswith("$"):
                return doc.get(s[1:])
            if isinstance(s, dict) and "$literal" in s:
                return s["$literal"]
            if isinstance(s, dict) and "$add" in s:
                return sum(doc[x[1:]] if isinstance(x, str) else x for x in s["$add"])
            return s

    fake = types.ModuleType("query.expressions")
    fake.compile_expression = Expr  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "query.expressions", fake)
    p = compile_projection({"a": {"$literal": 1}, "b": "$x", "c": {"$add": ["$x", 1]}, "x": 1})
    assert p is not None
    assert p.apply({"_id": 3, "x": 5, "y": 6}) == {"_id": 3, "x": 5, "a": 1, "b": 5, "c": 6}


ERRORS = [
    ({"a": 1, "b": 0}, 31254, "Cannot do exclusion on field b in inclusion projection"),
    ({"a": 0, "b": 1}, 31253, "Cannot do inclusion on field b in exclusion projection"),
    ({"a": 1, "a.b": 1}, 31249, "Path collision at a.b remaining portion b"),
    ({"a.b": 1, "a": 1}, 31250, "Path collision at a"),
    ({"a": {"$slice": "x"}}, 31273, "$slice only supports numbers and [skip, limit] arrays"),
    ({"a": {"$slice": [1]}}, 31272, "[skip, limit]"),
    ({"a": {"$slice": [1, 0]}}, 31259, "$slice limit must be positive"),
    ({"a": {"$slice": ["x", 1]}}, 31257, "skip argument to be a number"),
    ({"a": {"$elemMatch": 1}}, 31274, "elemMatch: Invalid argument"),
    ({"a.b": {"$elemMatch": {"x": 1}}}, 31275, "Cannot use $elemMatch projection on a nested"),
    ({"a.$": 1}, 51050, "Projections with a positional operator require a matcher"),
    ({"a.$": {"x": 1}}, 31271, "positional projection cannot be used with an expression"),
    ({"": 1}, 40352, "FieldPath cannot be constructed with empty string"),
    ({"a..b": 1}, 15998, "FieldPath field names may not be empty strings."),
]


@pytest.mark.parametrize(("spec", "code", "fragment"), ERRORS)
def test_projection_errors(spec: dict[str, Any], code: int, fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_projection(spec)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


def test_positional_errors_with_filter() -> None:
    m = compile_filter({"a": 1})
    with pytest.raises(MongoError) as exc:
        compile_projection({"b.$": 1}, filter_matcher=m)
    assert exc.value.code == 31277
    with pytest.raises(MongoError) as exc:
        compile_projection({"a.$": 1, "b": {"$elemMatch": {"x": 1}}}, filter_matcher=m)
    assert exc.value.code == 31255
    p = compile_projection({"a.$": 1}, filter_matcher=m)
    assert p is not None
    with pytest.raises(MongoError) as exc:
        p.apply({"_id": 1, "a": [2, 3]}, matched_position=None)
    assert exc.value.code == 51246


def test_empty_projection_is_none() -> None:
    assert compile_projection({}) is None
    assert compile_projection(None) is None
