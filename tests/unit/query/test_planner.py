"""Planner tests: which access path is chosen and which bounds it scans.

Bounds expectations follow MongoDB's explain output documented in the manual
("Explain Results": indexBounds) -- e.g. {a: {$gt: 5}} scans (5, inf.0] -- and the rule that
bounds may be loose but never exclude a matching document, checked here by brute force.
"""

from __future__ import annotations

from typing import Any

import pytest
from bson import MaxKey, MinKey, ObjectId
from hypothesis import given, settings
from hypothesis import strategies as st

from query.match import compile_filter
from query.planner import FULL_RANGE, Interval, plan_query
from storage.bson_order import sort_key
from storage.errors import MongoError

INDEXES = [
    {"key": {"_id": 1}, "name": "_id_"},
    {"key": {"a": 1, "b": -1}, "name": "a_1_b_-1", "multikey": False},
    {"key": {"s": 1}, "name": "s_1", "sparse": True},
    {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"q": {"$gt": 5}}},
    {"key": {"h": 1}, "name": "h_1", "hidden": True},
    {"key": {"t.u": 1}, "name": "t.u_1"},
]


def bounds(plan: Any) -> dict[str, list[str]]:
    return plan.explain()["inputStage"]["indexBounds"]


CHOICES = [
    ({"a": 5, "b": {"$gt": 3}}, None, "a_1_b_-1", {"a": ["[5, 5]"], "b": ["(3, inf.0]"]}),
    ({"a": {"$in": [3, 1, 3]}}, None, "a_1_b_-1",
     {"a": ["[1, 1]", "[3, 3]"], "b": ["[MinKey, MaxKey]"]}),
    ({"a": {"$gte": "m"}}, None, "a_1_b_-1", {"a": ['["m", {})'], "b": ["[MinKey, MaxKey]"]}),
    ({"a": {"$lt": 5}}, None, "a_1_b_-1", {"a": ["[-inf.0, 5)"], "b": ["[MinKey, MaxKey]"]}),
    ({"_id": 7}, None, "_id_", {"_id": ["[7, 7]"]}),
    ({"s": {"$gt": 1}}, None, "s_1", {"s": ["(1, inf.0]"]}),
    ({"p": 1, "q": {"$gt": 5}}, None, "p_1", {"p": ["[1, 1]"]}),
    ({"p": 1, "q": 9}, None, "p_1", {"p": ["[1, 1]"]}),
    ({"t.u": {"$regex": "^ab"}}, None, "t.u_1", {"t.u": ['["ab", "ac")', "[//, MaxKey)"]}),
    ({"x": 1}, {"a": -1, "b": 1}, "a_1_b_-1",
     {"a": ["[MinKey, MaxKey]"], "b": ["[MinKey, MaxKey]"]}),
]


@pytest.mark.parametrize(("flt", "sort", "index", "expected"), CHOICES)
def test_index_choice(flt: dict[str, Any], sort: Any, index: str,
                      expected: dict[str, list[str]]) -> None:
    plan = plan_query(flt, sort, INDEXES)
    assert plan.stage == "IXSCAN"
    assert plan.index_name == index
    assert bounds(plan) == expected
    ex = plan.explain()
    assert ex["stage"] == "FETCH" and ex["inputStage"]["stage"] == "IXSCAN"


COLLSCANS = [
    {"x": 1},
    {"s": None},                 # sparse index cannot answer null/missing
    {"p": 1},                    # partial filter not implied
    {"p": 1, "q": 3},
    {"h": 1},                    # hidden
    {"a": {"$ne": 1}},
    {"a": {"$nin": [1]}},
    {"a": {"$not": {"$gt": 1}}},
    {"$or": [{"a": 1}, {"x": 2}]},
    {"a": [1, 2]},
    {"a": {"$exists": True}},
]


@pytest.mark.parametrize("flt", COLLSCANS)
def test_collscan(flt: dict[str, Any]) -> None:
    plan = plan_query(flt, None, INDEXES)
    assert plan.stage == "COLLSCAN"
    assert plan.explain() == {"stage": "COLLSCAN", "filter": flt, "direction": "forward"}


def test_sort_direction_and_provides_sort() -> None:
    p = plan_query({"a": 3}, {"b": 1}, INDEXES)
    assert (p.index_name, p.direction, p.provides_sort) == ("a_1_b_-1", -1, True)
    p = plan_query({"a": 3}, {"a": 1, "b": -1}, INDEXES)
    assert (p.direction, p.provides_sort) == (1, True)
    # multikey unknown (default) -> never claims the sort
    p = plan_query({"t.u": 1}, {"t.u": 1}, INDEXES)
    assert p.provides_sort is False


def test_hints() -> None:
    assert plan_query({"a": 1}, None, INDEXES, hint="_id_").index_name == "_id_"
    assert plan_query({}, None, INDEXES, hint={"a": 1, "b": -1}).index_name == "a_1_b_-1"
    p = plan_query({"a": 1}, None, INDEXES, hint={"$natural": -1})
    assert p.stage == "COLLSCAN" and p.direction == -1
    for bad in ("nope", {"h": 1}, {"a": 1}):
        with pytest.raises(MongoError) as exc:
            plan_query({}, None, INDEXES, hint=bad)
        assert exc.value.code == 2
        assert "hint provided does not correspond to an existing index" in exc.value.errmsg


def test_null_equality_bounds_cover_minkey() -> None:
    p = plan_query({"a": None}, None, INDEXES)
    assert p.bounds[0] == [Interval(MinKey(), True, None, True)]


def _in_interval(v: Any, iv: Interval) -> bool:
    k, lo, hi = sort_key(v), sort_key(iv.lower), sort_key(iv.upper)
    return (lo < k or (lo == k and iv.lower_inclusive)) and (
        k < hi or (k == hi and iv.upper_inclusive))


def _index_keys(doc: dict[str, Any]) -> list[Any]:
    """Keys a single-field index on "a" holds for `doc` (multikey: one per element)."""
    v = doc.get("a")
    if isinstance(v, list):
        return list(v) if v else [None]
    return [v]


scalar = st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3), st.text("ab", max_size=2),
                   st.booleans())
value = st.one_of(scalar, st.lists(scalar, max_size=3))
ops = st.sampled_from(["$eq", "$gt", "$gte", "$lt", "$lte", "$in"])


@settings(max_examples=200, deadline=None)
@given(st.lists(value, max_size=6), ops, scalar, scalar)
def test_bounds_never_too_tight(values: list[Any], op: str, x: Any, y: Any) -> None:
    """Every matching document has an index key inside the chosen bounds."""
    flt = {"a": {op: [x, y] if op == "$in" else x}}
    plan = plan_query(flt, None, [{"key": {"a": 1}, "name": "a_1"}])
    m = compile_filter(flt)
    for v in values:
        doc = {"a": v}
        if not m.matches(doc):
            continue
        if plan.stage == "COLLSCAN":
            continue
        ivs = plan.bounds[0]
        assert any(_in_interval(k, iv) for k in _index_keys(doc) for iv in ivs), (flt, doc, ivs)


def test_full_range_constant() -> None:
    assert Interval(MinKey(), True, MaxKey(), True) == FULL_RANGE


id_scalar = st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3), st.just(float("nan")),
                      st.text("ab", max_size=2), st.booleans(),
                      st.sampled_from([0, 1, 2]).map(lambda i: ObjectId(bytes([i]) * 12)))
range_ops = st.sampled_from(["$gt", "$gte", "$lt", "$lte"])


@settings(max_examples=300, deadline=None)
@given(st.lists(id_scalar, max_size=8), st.lists(st.tuples(range_ops, id_scalar), min_size=2,
                                                  max_size=3))
def test_id_ranges_are_intersected_never_too_tight(ids: list[Any],
                                                   preds: list[tuple[str, Any]]) -> None:
    """`_id` is never an array, so its ranges of one type bracket are intersected; every
    matching document still has its `_id` inside the bounds."""
    flt = {"$and": [{"_id": {op: v}} for op, v in preds]}
    plan = plan_query(flt, None, [{"key": {"_id": 1}, "name": "_id_"}])
    m = compile_filter(flt)
    for v in ids:
        if m.matches({"_id": v}):
            assert plan.stage == "IXSCAN"
            assert any(_in_interval(v, iv) for iv in plan.bounds[0]), (flt, v, plan.bounds)


def test_id_ranges_bound_both_ends() -> None:
    a, b = ObjectId(b"\x01" * 12), ObjectId(b"\x02" * 12)
    plan = plan_query({"_id": {"$gte": a, "$lt": b}, "x": 1}, None, INDEXES)
    assert plan.bounds == [[Interval(a, True, b, False)]]
    assert plan_query({"_id": {"$gt": b, "$lt": a}}, None, INDEXES).bounds == [[]]
    # another field's ranges are not intersected (it may hold arrays)
    assert bounds(plan_query({"t.u": {"$gt": 1, "$lt": 0}}, None, INDEXES))["t.u"] == \
        ["(1, inf.0]"]


def test_ranges_on_an_index_that_is_not_multikey_bound_both_ends() -> None:
    plan = plan_query({"a": {"$gte": 2, "$lt": 5}}, None, INDEXES)
    assert plan.index_name == "a_1_b_-1"
    assert plan.bounds[0] == [Interval(2, True, 5, False)]
    # another bracket's range leaves the first one's bounds as they were
    assert plan_query({"a": {"$gte": 2, "$lt": "x"}}, None, INDEXES).bounds[0] == \
        [Interval(2, True, float("inf"), True)]
    assert plan_query({"a": {"$gt": 5, "$lt": 2}}, None, INDEXES).bounds[0] == []
    # the same ranges on a multikey index: one of them
    multikey = [{"key": {"a": 1}, "name": "a_1", "multikey": True}]
    assert plan_query({"a": {"$gte": 2, "$lt": 5}}, None, multikey).bounds[0] == \
        [Interval(2, True, float("inf"), True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(id_scalar, max_size=8), st.lists(st.tuples(range_ops, id_scalar), min_size=2,
                                                  max_size=3))
def test_ranges_on_an_index_that_is_not_multikey_never_too_tight(
        values: list[Any], preds: list[tuple[str, Any]]) -> None:
    """Without arrays in the field, its ranges of one type bracket are intersected; every
    matching document still has its key inside the bounds."""
    flt = {"$and": [{"a": {op: v}} for op, v in preds]}
    plan = plan_query(flt, None, [{"key": {"a": 1}, "name": "a_1", "multikey": False}])
    m = compile_filter(flt)
    for v in values:
        if m.matches({"a": v}):
            assert plan.stage == "IXSCAN"
            assert any(_in_interval(v, iv) for iv in plan.bounds[0]), (flt, v, plan.bounds)


CLUSTERED_ID = [{"key": {"_id": 1}, "name": "_id_", "clusteredName": "ck", "multikey": False}]


@pytest.mark.parametrize(("flt", "ends"), [
    ({"_id": 5}, {"minRecord": 5, "maxRecord": 5}),
    ({"_id": {"$lt": 10}}, {"maxRecord": 10}),
    ({"_id": {"$gt": "m"}}, {"minRecord": "m"}),
    ({"_id": {"$gte": 2, "$lt": 9}}, {"minRecord": 2, "maxRecord": 9}),
])
def test_clustered_id_ranges_explain_as_clustered_scans(flt: dict[str, Any],
                                                         ends: dict[str, Any]) -> None:
    plan = plan_query(flt, None, CLUSTERED_ID)
    assert plan.index_name == "_id_"  # scanned through the _id index underneath
    assert plan.explain() == {"stage": "CLUSTERED_IXSCAN", "filter": flt,
                              "direction": "forward", **ends}


def test_clustered_scans_without_one_range_explain_as_collscans() -> None:
    for flt, sort in (({"_id": {"$in": [1, 3]}}, None), ({}, {"_id": -1})):
        plan = plan_query(flt, sort, CLUSTERED_ID)
        assert plan.index_name == "_id_"
        assert plan.explain()["stage"] == "COLLSCAN"
    assert plan_query({"_id": 1}, None, CLUSTERED_ID, hint="ck").index_name == "_id_"
    with pytest.raises(MongoError):
        plan_query({"_id": 1}, None, INDEXES, hint="ck")  # only a clustered index has it
