"""Group accumulators through $group, with the MongoDB manual's examples
(https://www.mongodb.com/docs/manual/reference/operator/aggregation/<operator>/)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from query.context import PipelineContext
from query.pipeline import compile_pipeline
from storage.errors import MongoError

try:
    import query.sort  # noqa: F401  ($top/$bottom sortBy uses the query-match branch's sort)
    _HAVE_SORT = True
except ImportError:
    _HAVE_SORT = False
needs_sort = pytest.mark.skipif(not _HAVE_SORT, reason="needs query.sort (query-match branch)")


def d(s: str) -> DatetimeMS:
    from datetime import UTC, datetime
    return DatetimeMS(round(datetime.fromisoformat(s.replace("Z", "+00:00"))
                            .astimezone(UTC).timestamp() * 1000))


def run(stages: list[dict], docs: list[dict], ctx: PipelineContext | None = None) -> list[dict]:
    return list(compile_pipeline(stages, ctx).run(docs))


def by_id(docs: list[dict]) -> dict:
    return {str(doc["_id"]): doc for doc in docs}


# group/: the sales collection
SALES = [
    {"_id": 1, "item": "abc", "price": Decimal128("10"), "quantity": 2,
     "date": d("2014-03-01T08:00:00Z")},
    {"_id": 2, "item": "jkl", "price": Decimal128("20"), "quantity": 1,
     "date": d("2014-03-01T09:00:00Z")},
    {"_id": 3, "item": "xyz", "price": Decimal128("5"), "quantity": 10,
     "date": d("2014-03-15T09:00:00Z")},
    {"_id": 4, "item": "xyz", "price": Decimal128("5"), "quantity": 20,
     "date": d("2014-04-04T11:21:39.736Z")},
    {"_id": 5, "item": "abc", "price": Decimal128("10"), "quantity": 10,
     "date": d("2014-04-04T21:23:13.331Z")},
    {"_id": 6, "item": "def", "price": Decimal128("7.5"), "quantity": 5,
     "date": d("2015-06-04T05:08:13Z")},
    {"_id": 7, "item": "def", "price": Decimal128("7.5"), "quantity": 10,
     "date": d("2015-09-10T08:43:00Z")},
    {"_id": 8, "item": "abc", "price": Decimal128("10"), "quantity": 5,
     "date": d("2016-02-06T20:20:13Z")},
]


def test_group_count_and_sum_by_item() -> None:
    # group/: "Count the Number of Documents", "Group by Item Having"
    assert run([{"$group": {"_id": None, "count": {"$count": {}}}}], SALES) == \
        [{"_id": None, "count": 8}]
    out = by_id(run([{"$group": {"_id": "$item", "totalSaleAmount": {
        "$sum": {"$multiply": ["$price", "$quantity"]}}}}], SALES))
    assert out["abc"]["totalSaleAmount"] == Decimal128("170")
    assert out["xyz"]["totalSaleAmount"] == Decimal128("150")
    assert out["def"]["totalSaleAmount"] == Decimal128("112.5")
    assert out["jkl"]["totalSaleAmount"] == Decimal128("20")


def test_group_by_day_and_null() -> None:
    # group/: "Group by Day of the Year", "Group by null"
    out = by_id(run([
        {"$group": {"_id": {"$dateToString": {"format": "%Y-%m-%d", "date": "$date"}},
                    "totalSaleAmount": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                    "averageQuantity": {"$avg": "$quantity"}, "count": {"$sum": 1}}}],
        [s for s in SALES if s["date"] < d("2015-01-01T00:00:00Z")]))
    assert out["2014-04-04"] == {"_id": "2014-04-04", "totalSaleAmount": Decimal128("200"),
                                 "averageQuantity": 15.0, "count": 2}
    assert out["2014-03-15"]["averageQuantity"] == 10.0
    assert out["2014-03-01"]["averageQuantity"] == 1.5
    (total,) = run([{"$group": {"_id": None,
                                "totalSaleAmount": {"$sum": {"$multiply": ["$price",
                                                                           "$quantity"]}},
                                "averageQuantity": {"$avg": "$quantity"},
                                "count": {"$sum": 1}}}], SALES)
    assert total == {"_id": None, "totalSaleAmount": Decimal128("452.5"),
                     "averageQuantity": 7.875, "count": 8}


def test_push_add_to_set_first_last_min_max() -> None:
    # push/, addToSet/, first/, last/, max/, min/ (grouped by item)
    out = by_id(run([{"$group": {
        "_id": "$item", "q": {"$push": "$quantity"}, "s": {"$addToSet": "$price"},
        "f": {"$first": "$quantity"}, "l": {"$last": "$quantity"},
        "mx": {"$max": "$quantity"}, "mn": {"$min": "$quantity"},
        "fm": {"$first": "$missing"}, "pm": {"$push": "$missing"}}}], SALES))
    assert out["abc"]["q"] == [2, 10, 5] and out["abc"]["s"] == [Decimal128("10")]
    assert (out["abc"]["f"], out["abc"]["l"], out["abc"]["mx"], out["abc"]["mn"]) == \
        (2, 5, 10, 2)
    assert out["abc"]["fm"] is None and out["abc"]["pm"] == []


def test_min_max_ignore_null_and_compare_across_types() -> None:
    docs = [{"g": 1, "v": None}, {"g": 1, "v": "a"}, {"g": 1, "v": 5}, {"g": 1},
            {"g": 2, "v": None}]
    out = {o["_id"]: o for o in run([{"$group": {"_id": "$g", "mx": {"$max": "$v"},
                                                 "mn": {"$min": "$v"}}}], docs)}
    assert out[1]["mx"] == "a" and out[1]["mn"] == 5
    assert out[2]["mx"] is None and out[2]["mn"] is None


QUIZ = [
    {"_id": 1, "name": "dave123", "quiz": 1, "score": 85},
    {"_id": 2, "name": "dave2", "quiz": 1, "score": 90},
    {"_id": 3, "name": "ahn", "quiz": 1, "score": 71},
    {"_id": 4, "name": "li", "quiz": 2, "score": 96},
    {"_id": 5, "name": "annT", "quiz": 2, "score": 77},
    {"_id": 6, "name": "ty", "quiz": 2, "score": 82},
]


def test_std_dev() -> None:
    # stdDevPop/: quiz scores → 8.04155872120988 for both quizzes
    out = run([{"$group": {"_id": "$quiz", "stdDev": {"$stdDevPop": "$score"},
                           "samp": {"$stdDevSamp": "$score"}}}], QUIZ)
    for o in out:
        assert math.isclose(o["stdDev"], 8.04155872120988, rel_tol=1e-12)
    assert math.isclose(out[0]["samp"], math.sqrt(97), rel_tol=1e-12)
    assert run([{"$group": {"_id": None, "s": {"$stdDevSamp": "$score"}}}], QUIZ[:1]) == \
        [{"_id": None, "s": None}]
    assert run([{"$group": {"_id": None, "s": {"$stdDevPop": "$x"}}}], QUIZ[:1]) == \
        [{"_id": None, "s": None}]


def test_merge_objects_accumulator() -> None:
    # mergeObjects/: sales quantities by quarter merged per year
    docs = [{"year": 2017, "q": {"Q1": 500, "Q2": 500}}, {"year": 2017, "q": {"Q3": 1000}},
            {"year": 2017, "q": None}, {"year": 2018, "q": {"Q1": 400}}]
    out = {o["_id"]: o["m"] for o in run([{"$group": {"_id": "$year",
                                                      "m": {"$mergeObjects": "$q"}}}], docs)}
    assert out == {2017: {"Q1": 500, "Q2": 500, "Q3": 1000}, 2018: {"Q1": 400}}


GAMES = [
    {"playerId": "PlayerA", "gameId": "G1", "score": 31},
    {"playerId": "PlayerB", "gameId": "G1", "score": 33},
    {"playerId": "PlayerC", "gameId": "G1", "score": 99},
    {"playerId": "PlayerD", "gameId": "G1", "score": 1},
    {"playerId": "PlayerA", "gameId": "G2", "score": 10},
    {"playerId": "PlayerB", "gameId": "G2", "score": 14},
    {"playerId": "PlayerC", "gameId": "G2", "score": 66},
    {"playerId": "PlayerD", "gameId": "G2", "score": 80},
]


@pytest.mark.parametrize("acc,expected", [
    # top/, bottom/, topN/, bottomN/, firstN/, lastN/, maxN/, minN/ (gamescores examples)
    pytest.param({"$top": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}},
                 {"G1": ["PlayerC", 99], "G2": ["PlayerD", 80]}, marks=needs_sort),
    pytest.param({"$bottom": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}}},
                 {"G1": ["PlayerD", 1], "G2": ["PlayerA", 10]}, marks=needs_sort),
    pytest.param({"$topN": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}, "n": 3}},
                 {"G1": [["PlayerC", 99], ["PlayerB", 33], ["PlayerA", 31]],
                  "G2": [["PlayerD", 80], ["PlayerC", 66], ["PlayerB", 14]]}, marks=needs_sort),
    pytest.param({"$bottomN": {"output": ["$playerId", "$score"], "sortBy": {"score": -1},
                               "n": 3}},
                 {"G1": [["PlayerB", 33], ["PlayerA", 31], ["PlayerD", 1]],
                  "G2": [["PlayerC", 66], ["PlayerB", 14], ["PlayerA", 10]]}, marks=needs_sort),
    ({"$firstN": {"input": ["$playerId", "$score"], "n": 3}},
     {"G1": [["PlayerA", 31], ["PlayerB", 33], ["PlayerC", 99]],
      "G2": [["PlayerA", 10], ["PlayerB", 14], ["PlayerC", 66]]}),
    ({"$lastN": {"input": ["$playerId", "$score"], "n": 3}},
     {"G1": [["PlayerB", 33], ["PlayerC", 99], ["PlayerD", 1]],
      "G2": [["PlayerB", 14], ["PlayerC", 66], ["PlayerD", 80]]}),
    ({"$maxN": {"input": ["$score", "$playerId"], "n": 3}},
     {"G1": [[99, "PlayerC"], [33, "PlayerB"], [31, "PlayerA"]],
      "G2": [[80, "PlayerD"], [66, "PlayerC"], [14, "PlayerB"]]}),
    ({"$minN": {"input": ["$score", "$playerId"], "n": 3}},
     {"G1": [[1, "PlayerD"], [31, "PlayerA"], [33, "PlayerB"]],
      "G2": [[10, "PlayerA"], [14, "PlayerB"], [66, "PlayerC"]]}),
    ({"$firstN": {"input": "$score",
                  "n": {"$cond": {"if": {"$eq": ["$_id", "G2"]}, "then": 1, "else": 3}}}},
     {"G1": [31, 33, 99], "G2": [10]}),
])
def test_n_accumulators(acc: dict, expected: dict) -> None:
    out = {o["_id"]: o["v"] for o in run([{"$group": {"_id": "$gameId", "v": acc}}], GAMES)}
    assert out == expected


SCORES = [
    {"studentId": "2345", "test01": 62, "test02": 81, "test03": 80},
    {"studentId": "2356", "test01": 60, "test02": 83, "test03": 79},
    {"studentId": "2358", "test01": 67, "test02": 82, "test03": 78},
    {"studentId": "2367", "test01": 64, "test02": 72, "test03": 77},
    {"studentId": "2369", "test01": 60, "test02": 53, "test03": 72},
]


def test_median_and_percentile() -> None:
    # median/ and percentile/ (method "approximate": nearest-rank on the sorted values)
    (out,) = run([{"$group": {
        "_id": None,
        "m": {"$median": {"input": "$test01", "method": "approximate"}},
        "p1": {"$percentile": {"input": "$test01", "p": [0.5, 0.75, 0.9, 0.95],
                               "method": "approximate"}},
        "p2": {"$percentile": {"input": "$test02", "p": [0.5, 0.75, 0.9, 0.95],
                               "method": "approximate"}},
        "p3": {"$percentile": {"input": "$test03", "p": [0.5, 0.75, 0.9, 0.95],
                               "method": "approximate"}},
        "none": {"$median": {"input": "$nope", "method": "approximate"}}}}], SCORES)
    assert out["m"] == 62.0
    assert out["p1"] == [62.0, 64.0, 67.0, 67.0]
    assert out["p2"] == [81.0, 82.0, 83.0, 83.0]
    assert out["p3"] == [78.0, 79.0, 80.0, 80.0]
    assert out["none"] is None
    # the expression forms
    from query.expressions import compile_expression
    e = compile_expression({"$median": {"input": [1, 3, 2], "method": "approximate"}})
    assert e.evaluate({}, {}) == 2.0


def test_sum_and_avg_types() -> None:
    docs = [{"v": 1}, {"v": Int64(2)}, {"v": "x"}, {"v": None}, {}]
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}, "a": {"$avg": "$v"}}}], docs)
    assert out["s"] == Int64(3) and type(out["s"]) is Int64 and out["a"] == 1.5
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}, "a": {"$avg": "$v"}}}],
                 [{"v": "x"}])
    assert out["s"] == 0 and type(out["s"]) is int and out["a"] is None
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}}}],
                 [{"v": 2**31 - 1}, {"v": 1}])
    assert out["s"] == Int64(2**31)
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}}}],
                 [{"v": Int64(2**63 - 1)}, {"v": 1}])
    assert out["s"] == 2.0**63 and type(out["s"]) is float
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}}}],
                 [{"v": 0.1}, {"v": Decimal128("0.2")}])
    assert type(out["s"]) is Decimal128
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}}}],
                 [{"v": 1e100}, {"v": 1.0}, {"v": -1e100}])
    assert out["s"] == 1.0  # compensated summation
    (out,) = run([{"$group": {"_id": None, "s": {"$sum": "$v"}}}], [{"v": math.nan}, {"v": 1}])
    assert math.isnan(out["s"])


def test_group_key_equality_across_numeric_types_and_null_missing() -> None:
    docs = [{"k": 1}, {"k": 1.0}, {"k": Int64(1)}, {"k": Decimal128("1.00")}, {"k": None},
            {}, {"k": math.nan}, {"k": Decimal128("NaN")}, {"k": [1, 2]}, {"k": [1.0, 2]},
            {"k": {"a": 1}}, {"k": {"a": 1.0}}]
    out = run([{"$group": {"_id": "$k", "n": {"$sum": 1}}}], docs)
    counts = sorted(o["n"] for o in out)
    assert counts == [2, 2, 2, 2, 4]
    assert out[0]["_id"] == 1 and type(out[0]["_id"]) is int   # first value seen


def test_composite_id_missing_fields() -> None:
    # DocumentSourceGroup: one-field _id objects turn missing into null; with several fields a
    # missing part stays missing (omitted, and distinct from null)
    out = run([{"$group": {"_id": {"a": "$a"}, "n": {"$sum": 1}}}], [{}, {"a": None}])
    assert out == [{"_id": {"a": None}, "n": 2}]
    out = run([{"$group": {"_id": {"a": "$a", "b": "$b"}, "n": {"$sum": 1}}}],
              [{"a": 1}, {"a": 1, "b": None}, {"a": 1}])
    assert out == [{"_id": {"a": 1}, "n": 2}, {"_id": {"a": 1, "b": None}, "n": 1}]


@pytest.mark.parametrize("spec,code", [
    ({"x": {"$sum": 1}}, 15955),                       # group/: _id required
    ({"_id": None, "x": 1}, 40234), ({"_id": None, "x": {"$sum": 1, "$avg": 1}}, 40238),
    ({"_id": None, "x": {"$foo": 1}}, 15952), ({"_id": None, "a.b": {"$sum": 1}}, 40235),
    ({"_id": None, "$a": {"$sum": 1}}, 40236), ({"_id": None, "x": {"$sum": [1, 2]}}, 40237),
    ({"_id": None, "x": {"$count": 1}}, 14), ({"_id": {"$foo": 1}}, 168),
    ({"_id": None, "x": {"$topN": {"sortBy": {"a": 1}, "output": "$a"}}}, 5787906),
    ({"_id": None, "x": {"$percentile": {"input": "$a", "p": [2], "method": "approximate"}}},
     7750301),
    ({"_id": None, "x": {"$median": {"input": "$a", "method": "exact"}}}, 2),
])
def test_group_errors(spec: dict, code: int) -> None:
    with pytest.raises(MongoError) as e:
        run([{"$group": spec}], [{"a": 1}])
    assert e.value.code == code, e.value


def test_group_spec_not_object() -> None:
    with pytest.raises(MongoError) as e:
        run([{"$group": 1}], [])
    assert e.value.code == 15947


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.one_of(st.integers(-1000, 1000),
                                                        st.floats(-1e6, 1e6))), max_size=60))
def test_group_matches_python(rows: list[tuple[int, Any]]) -> None:
    docs = [{"k": k, "v": v} for k, v in rows]
    out = run([{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "n": {"$sum": 1},
                           "mx": {"$max": "$v"}, "p": {"$push": "$v"}}}], docs)
    expect: dict[int, list] = {}
    for k, v in rows:
        expect.setdefault(k, []).append(v)
    assert {o["_id"] for o in out} == set(expect)
    for o in out:
        vals = expect[o["_id"]]
        assert o["n"] == len(vals) and o["p"] == vals
        assert math.isclose(o["s"], math.fsum(vals), abs_tol=1e-6)
        assert o["mx"] == max(vals)
