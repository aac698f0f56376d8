"""The query engine under a collation: filters, sorts, $group keys, expressions and the
planner's bounds compare strings through the collator given at compile time."""

from __future__ import annotations

from typing import Any

from query.context import PipelineContext
from query.match import compile_filter
from query.pipeline import compile_pipeline
from query.planner import plan_query
from query.sort import compile_sort
from storage.collation import Collator, parse_collation

DOCS = [{"_id": 1, "s": "apple"}, {"_id": 2, "s": "Apple"}, {"_id": 3, "s": "banana"},
        {"_id": 4, "s": 5}, {"_id": 5, "s": ["x", "APPLE"]}, {"_id": 6, "s": {"k": "A"}}]


def _ci() -> Collator:
    c = parse_collation({"locale": "en", "strength": 2})
    assert c is not None
    return c


def _ids(flt: dict[str, Any], collator: Collator | None) -> list[int]:
    m = compile_filter(flt, collator=collator)
    return [d["_id"] for d in DOCS if m.matches(d)]


def test_filters() -> None:
    ci = _ci()
    assert _ids({"s": "APPLE"}, None) == [5]
    assert _ids({"s": "APPLE"}, ci) == [1, 2, 5]
    assert _ids({"s": {"$ne": "apple"}}, ci) == [3, 4, 6]
    assert _ids({"s": {"$in": ["BANANA", 5]}}, ci) == [3, 4]
    assert _ids({"s": {"$nin": ["BANANA", 5]}}, ci) == [1, 2, 5, 6]
    assert _ids({"s": {"$gt": "AZ"}}, ci) == [3, 5]
    assert _ids({"s": {"$gt": "AZ"}}, None) == [1, 2, 3, 5]
    assert _ids({"s": {"k": "a"}}, ci) == [6]
    assert _ids({"s": {"$elemMatch": {"$eq": "apple"}}}, ci) == [5]
    assert _ids({"s": {"$regex": "^A"}}, ci) == [2, 5]   # a regex is not collated
    assert _ids({"$expr": {"$eq": ["$s", "APPLE"]}}, ci) == [1, 2]


def test_sort_ascending_and_descending() -> None:
    ci = _ci()
    rows = [{"_id": i, "s": s} for i, s in enumerate(["b", "B", "a", "A"])]
    asc = compile_sort({"s": 1, "_id": 1}, ci)
    assert [r["_id"] for r in sorted(rows, key=asc)] == [2, 3, 0, 1]
    desc = compile_sort({"s": -1, "_id": 1}, ci)
    assert [r["_id"] for r in sorted(rows, key=desc)] == [0, 1, 2, 3]
    assert [r["_id"] for r in sorted(rows, key=compile_sort({"s": 1}))] == [3, 1, 2, 0]


def test_group_and_accumulators() -> None:
    ctx = PipelineContext(collator=_ci())
    p = compile_pipeline([{"$match": {"_id": {"$lte": 3}}},
                          {"$group": {"_id": "$s", "n": {"$sum": 1}, "lo": {"$min": "$s"}}}],
                         ctx)
    assert list(p.run(iter(DOCS))) == [{"_id": "apple", "n": 2, "lo": "apple"},
                                       {"_id": "banana", "n": 1, "lo": "banana"}]


def test_planner_bounds_are_collation_keys() -> None:
    ci = _ci()
    spec = {"v": 2, "key": {"s": 1}, "name": "s_ci", "collation": ci.document}
    plan = plan_query(compile_filter({"s": "APPLE"}, collator=ci), None, [spec], collator=ci)
    assert plan.index_name == "s_ci"
    (iv,) = plan.bounds[0]
    assert iv.lower == iv.upper == ci.translate("apple")
    plan = plan_query(compile_filter({"s": {"$regex": "^a"}}, collator=ci), None, [spec],
                      collator=ci)
    assert plan.bounds[0][0].lower == "" and plan.bounds[0][0].upper == {}
