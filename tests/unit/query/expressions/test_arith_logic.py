"""Arithmetic, comparison, boolean, conditional and variable expressions.

Expected values come from the MongoDB manual's examples (page cited above each group) and
from MongoDB's numeric type rules (int32 → int64 → double, decimal wins).
"""

from __future__ import annotations

import math
from datetime import UTC
from typing import Any

import pytest
from bson import Decimal128, Int64
from bson.datetime_ms import DatetimeMS

from query.expressions import compile_expression
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING

M = "https://www.mongodb.com/docs/manual/reference/operator/aggregation/"


def same(got: Any, exp: Any) -> bool:
    """Equal value *and* BSON type (int vs long vs double vs decimal), recursively."""
    if exp is MISSING or got is MISSING:
        return got is exp
    if type(got) is not type(exp):
        return False
    if isinstance(exp, float):
        return (math.isnan(got) and math.isnan(exp)) or math.isclose(got, exp, rel_tol=1e-12)
    if isinstance(exp, dict):
        return list(got) == list(exp) and all(same(got[k], exp[k]) for k in exp)
    if isinstance(exp, list):
        return len(got) == len(exp) and all(same(g, e) for g, e in zip(got, exp))
    return got == exp


def ev(expr: Any, doc: dict | None = None, variables: dict | None = None,
       scope: tuple = ()) -> Any:
    return compile_expression(expr, variables_in_scope=scope).evaluate(doc or {}, variables or {})


def d(s: str) -> DatetimeMS:
    from datetime import datetime
    dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return DatetimeMS(round(dt.timestamp() * 1000))


SALES = {"_id": 1, "item": "abc", "price": 10, "fee": 2, "discount": 5,
         "date": d("2014-03-01T08:00:00Z")}

ARITH = [
    # add/: "Add Numbers" and "Perform Addition on a Date"
    ({"$add": ["$price", "$fee"]}, SALES, 12),
    ({"$add": ["$date", 3 * 24 * 60 * 60000]}, SALES, d("2014-03-04T08:00:00Z")),
    # subtract/: "Subtract Numbers", "Subtract Two Dates", "Subtract Milliseconds from a Date"
    ({"$subtract": [{"$add": ["$price", "$fee"]}, "$discount"]}, SALES, 7),
    ({"$subtract": ["$date", 5 * 60 * 1000]}, SALES, d("2014-03-01T07:55:00Z")),
    ({"$subtract": [d("2014-03-01T09:00:00Z"), "$date"]}, SALES, Int64(3600000)),
    # multiply/: price * quantity
    ({"$multiply": ["$price", "$quantity"]}, {"price": 10, "quantity": 2}, 20),
    # divide/: workdays = hours / 8
    ({"$divide": ["$hours", 8]}, {"hours": 80}, 10.0),
    ({"$divide": ["$hours", 8]}, {"hours": 40}, 5.0),
    # mod/: hours mod tasks; negative dividend keeps its sign (truncated remainder)
    ({"$mod": ["$hours", "$tasks"]}, {"hours": 80, "tasks": 7}, 3),
    ({"$mod": ["$hours", "$tasks"]}, {"hours": 40, "tasks": 4}, 0),
    ({"$mod": [-5, 3]}, {}, -2),
    ({"$mod": [5.5, 2]}, {}, 1.5),
    ({"$mod": [Int64(10), 3]}, {}, Int64(1)),
    # abs/: { $abs: -1 } → 1, { $abs: null } → null; temperature delta example
    ({"$abs": -1}, {}, 1),
    ({"$abs": None}, {}, None),
    ({"$abs": {"$subtract": ["$startTemp", "$endTemp"]}}, {"startTemp": 90, "endTemp": 70}, 20),
    ({"$abs": {"$subtract": ["$startTemp", "$endTemp"]}}, {"startTemp": 60, "endTemp": None},
     None),
    # ceil/ and floor/: 9.25, 8.73, -5.34
    ({"$ceil": 9.25}, {}, 10.0), ({"$ceil": -5.34}, {}, -5.0), ({"$ceil": 1}, {}, 1),
    ({"$floor": 8.73}, {}, 8.0), ({"$floor": -5.34}, {}, -6.0), ({"$floor": 1}, {}, 1),
    ({"$ceil": Decimal128("-2.8")}, {}, Decimal128("-2")),
    # round/: half to even; negative places
    ({"$round": [19.25, 1]}, {}, 19.2), ({"$round": [28.73, 1]}, {}, 28.7),
    ({"$round": [-45.39, 1]}, {}, -45.4), ({"$round": [19.25, -1]}, {}, 20.0),
    ({"$round": [10.5, 0]}, {}, 10.0), ({"$round": [11.5, 0]}, {}, 12.0),
    ({"$round": [12.5, 0]}, {}, 12.0), ({"$round": [-10.5, 0]}, {}, -10.0),
    ({"$round": [-11.5, 0]}, {}, -12.0), ({"$round": [1234, -2]}, {}, 1200),
    ({"$round": [Int64(1250), -2]}, {}, Int64(1200)),
    ({"$round": [Decimal128("1.255"), 2]}, {}, Decimal128("1.26")),
    # trunc/: 19.25 → 19.2, -45.39 → -45.3; { $trunc: 7.80 } → 7
    ({"$trunc": [19.25, 1]}, {}, 19.2), ({"$trunc": [-45.39, 1]}, {}, -45.3),
    ({"$trunc": 7.80}, {}, 7.0), ({"$trunc": -2.3}, {}, -2.0),
    # exp/: effective rate e^0.05 - 1; { $exp: 0 } → 1
    ({"$subtract": [{"$exp": "$interestRate"}, 1]}, {"interestRate": 0.05},
     0.05127109637602412),
    ({"$exp": 0}, {}, 1.0),
    # ln/: ln(8700000); { $ln: 1 } → 0
    ({"$ln": "$sales"}, {"sales": 8700000}, 15.978833583624812), ({"$ln": 1}, {}, 0.0),
    # log/: { $log: [ 100, 10 ] } → 2; bits needed to represent 5 → 3
    ({"$log": [100, 10]}, {}, 2.0),
    ({"$floor": {"$add": [1, {"$log": ["$int", 2]}]}}, {"int": 5}, 3.0),
    # log10/: pH of [H3O+] = 0.0025
    ({"$multiply": [-1, {"$log10": "$H3O"}]}, {"H3O": 0.0025}, 2.6020599913279625),
    # pow/: { $pow: [ 5, 0 ] } → 1, [5, 2] → 25, [5, -2] → 0.04, [-5, 0.5] → NaN
    ({"$pow": [5, 0]}, {}, 1), ({"$pow": [5, 2]}, {}, 25), ({"$pow": [5, -2]}, {}, 0.04),
    ({"$pow": [-5, 0.5]}, {}, math.nan),
    # sqrt/: { $sqrt: 25 } → 5, { $sqrt: 30 } → 5.477..., { $sqrt: null } → null
    ({"$sqrt": 25}, {}, 5.0), ({"$sqrt": 30}, {}, 5.477225575051661), ({"$sqrt": None}, {}, None),
    # Numeric type rules (add/, multiply/ "result type" notes): widening and overflow
    ({"$add": [2147483647, 1]}, {}, Int64(2147483648)),
    ({"$add": [Int64(1), 1]}, {}, Int64(2)),
    ({"$add": [Int64(9223372036854775807), 1]}, {}, 9.223372036854775808e18),
    ({"$add": [1, 2.5]}, {}, 3.5),
    ({"$add": [Decimal128("1"), 3.0]}, {}, Decimal128("4.00000000000000")),
    ({"$add": [Decimal128("0.1"), 1]}, {}, Decimal128("1.1")),
    ({"$multiply": [2**30, 4]}, {}, Int64(2**32)),
    ({"$multiply": [Int64(2**62), 4]}, {}, 1.8446744073709552e19),
    ({"$subtract": [-2147483648, 1]}, {}, Int64(-2147483649)),
    ({"$divide": [Decimal128("1"), 4]}, {}, Decimal128("0.25")),
    ({"$add": [math.nan, 1]}, {}, math.nan),
    ({"$add": [1, None]}, {}, None), ({"$add": [1, "$missing"]}, {}, None),
    ({"$add": []}, {}, 0),
    ({"$subtract": [DatetimeMS(-1000), DatetimeMS(-3000)]}, {}, Int64(2000)),
    ({"$add": [DatetimeMS(-86400000), 0.6]}, {}, DatetimeMS(-86399999)),
]


@pytest.mark.parametrize("expr,doc,expected", ARITH, ids=[str(c[0])[:60] for c in ARITH])
def test_arithmetic(expr: Any, doc: dict, expected: Any) -> None:
    got = ev(expr, doc)
    assert same(got, expected), (got, expected)


COMPARE = [
    # cmp/: qty 300 vs 250 → 1, 250 → 0, 200 → -1
    ({"$cmp": ["$qty", 250]}, {"qty": 300}, 1),
    ({"$cmp": ["$qty", 250]}, {"qty": 250}, 0),
    ({"$cmp": ["$qty", 250]}, {"qty": 200}, -1),
    # eq/ ne/ gt/ gte/ lt/ lte/: the inventory qty examples
    ({"$eq": ["$qty", 250]}, {"qty": 250}, True),
    ({"$ne": ["$qty", 250]}, {"qty": 250}, False),
    ({"$gt": ["$qty", 250]}, {"qty": 300}, True),
    ({"$gte": ["$qty", 250]}, {"qty": 250}, True),
    ({"$lt": ["$qty", 250]}, {"qty": 200}, True),
    ({"$lte": ["$qty", 250]}, {"qty": 300}, False),
    # Cross-type BSON order (comparison-order page): numbers < strings < objects < arrays
    ({"$lt": [1, "a"]}, {}, True), ({"$lt": ["a", {}]}, {}, True),
    ({"$lt": [{}, []]}, {}, True), ({"$gt": [True, "z"]}, {}, True),
    ({"$eq": [1, 1.0]}, {}, True), ({"$eq": [Int64(1), Decimal128("1.0")]}, {}, True),
    ({"$lt": [math.nan, -math.inf]}, {}, True), ({"$eq": [math.nan, math.nan]}, {}, True),
    # null vs missing: a missing field is lower than null and not equal to it
    ({"$eq": ["$nope", None]}, {}, False), ({"$lt": ["$nope", None]}, {}, True),
    ({"$eq": ["$nope", "$alsoNope"]}, {}, True),
    ({"$eq": [[1, 2], [1, 2.0]]}, {}, True), ({"$lt": [[1, 2], [1, 3]]}, {}, True),
    # and/ or/ not/: truthiness of 0, null, missing, [], ""
    ({"$and": [1, "green"]}, {}, True), ({"$and": []}, {}, True),
    ({"$and": [[None], [False], [0]]}, {}, True), ({"$and": [None, True]}, {}, False),
    ({"$and": [0, True]}, {}, False), ({"$or": [True, False]}, {}, True),
    ({"$or": [[False], False]}, {}, True), ({"$or": [None, 0, "$undefinedField"]}, {}, False),
    ({"$or": []}, {}, False), ({"$not": [True]}, {}, False), ({"$not": [[False]]}, {}, False),
    ({"$not": [False]}, {}, True), ({"$not": [None]}, {}, True), ({"$not": [0]}, {}, True),
    # cond/ ifNull/ switch/
    ({"$cond": {"if": {"$gte": ["$qty", 250]}, "then": 30, "else": 20}}, {"qty": 300}, 30),
    ({"$cond": [{"$gte": ["$qty", 250]}, 30, 20]}, {"qty": 100}, 20),
    ({"$ifNull": ["$description", "Unspecified"]}, {"description": None}, "Unspecified"),
    ({"$ifNull": ["$description", "Unspecified"]}, {}, "Unspecified"),
    ({"$ifNull": ["$description", "Unspecified"]}, {"description": "x"}, "x"),
    ({"$ifNull": ["$a", "$b", "last"]}, {"b": 0}, 0),
    ({"$switch": {"branches": [{"case": {"$gte": ["$avg", 90]}, "then": "Doing great!"},
                               {"case": {"$lt": ["$avg", 80]}, "then": "Needs improvement."}],
                  "default": "Doing pretty well."}}, {"avg": 85}, "Doing pretty well."),
    ({"$switch": {"branches": [{"case": {"$gte": ["$avg", 90]}, "then": "Doing great!"}]}},
     {"avg": 95}, "Doing great!"),
    # literal/: a string starting with $ kept as is
    ({"$literal": "$1"}, {}, "$1"), ({"$literal": {"$add": [2, 3]}}, {}, {"$add": [2, 3]}),
    # let/: total = price + tax, discounted
    ({"$let": {"vars": {"total": {"$add": ["$price", "$tax"]},
                        "discounted": {"$cond": {"if": "$applyDiscount", "then": 0.9,
                                                 "else": 1}}},
               "in": {"$multiply": ["$$total", "$$discounted"]}}},
     {"price": 10, "tax": 0.50, "applyDiscount": True}, 9.45),
    ({"$let": {"vars": {"CURRENT": "$inner"}, "in": "$x"}}, {"inner": {"x": 5}, "x": 1}, 5),
    # Field paths through arrays (aggregation semantics: arrays map, nested arrays skipped)
    ("$a.b", {"a": [{"b": 1}, {"c": 2}, {"b": [3]}, 4, [{"b": 5}]]}, [1, [3]]),
    ("$a.b.c", {"a": {"b": [{"c": 1}, {"c": [2]}]}}, [1, [2]]),
    ("$a.0", {"a": [{"0": "x"}, 5]}, ["x"]),
    ("$nope", {}, MISSING),
    ("$$ROOT.a", {"a": 1}, 1), ("$$CURRENT", {"a": 1}, {"a": 1}),
    ("$$REMOVE", {}, MISSING),
    ({"x": "$a", "y": "$nope"}, {"a": 1}, {"x": 1}),
    (["$a", "$nope"], {"a": 1}, [1, None]),
]


@pytest.mark.parametrize("expr,doc,expected", COMPARE, ids=[str(c[0])[:60] for c in COMPARE])
def test_compare_logic_variables(expr: Any, doc: dict, expected: Any) -> None:
    got = ev(expr, doc)
    assert same(got, expected), (got, expected)


def test_now_and_user_variables() -> None:
    now = DatetimeMS(1_700_000_000_000)
    assert ev("$$NOW", variables={"NOW": now}) == now
    assert ev({"$add": ["$$x", 1]}, variables={"x": 41}, scope=("x",)) == 42
    with pytest.raises(MongoError) as e:
        ev("$$x")
    assert e.value.code == 17276


def test_rand_meta_and_cluster_time() -> None:
    e = compile_expression({"$rand": {}})
    values = {e.evaluate({}, {}) for _ in range(20)}
    assert len(values) > 1 and all(0.0 <= v < 1.0 for v in values)
    assert not e.is_constant
    with pytest.raises(MongoError) as err:
        ev({"$meta": "textScore"})
    assert err.value.code == 238
    from bson import Timestamp
    assert ev("$$CLUSTER_TIME", variables={"CLUSTER_TIME": Timestamp(5, 1)}) == Timestamp(5, 1)
    with pytest.raises(MongoError):
        ev("$$CLUSTER_TIME")


def test_compiled_once_evaluated_many() -> None:
    e = compile_expression({"$add": ["$a", {"$multiply": [2, 3]}]})
    assert [e.evaluate({"a": i}, {}) for i in range(3)] == [6, 7, 8]
    assert compile_expression({"$multiply": [2, 3]}).is_constant


ERRORS = [
    # MongoDB error codes for bad expressions (expression.cpp / evaluate_math.cpp)
    ({"$foo": 1}, 168),                      # Unrecognized expression '$foo'
    ({"$add": 1, "$sub": 2}, 15983),         # an expression object must have one field
    ({"$subtract": [1]}, 16020),             # takes exactly 2 arguments
    ({"$round": [1, 2, 3]}, 28667),          # takes at least 1 and at most 2
    ({"$divide": [1, 0]}, 2),                # can't $divide by zero (BadValue)
    ({"$mod": [1, 0]}, 16610), ({"$mod": [Decimal128("1"), 0]}, 5733415),
    ({"$add": [1, "a"]}, 14), ({"$multiply": [1, "a"]}, 14),
    ({"$subtract": ["a", 1]}, 14), ({"$divide": ["a", 1]}, 14), ({"$mod": ["a", 1]}, 16611),
    ({"$add": [DatetimeMS(0), DatetimeMS(0)]}, 16612),
    ({"$abs": "x"}, 28765), ({"$sqrt": -1}, 28714), ({"$ln": 0}, 28766),
    ({"$log10": -1}, 28761), ({"$log": [1, 1]}, 28759), ({"$log": [-1, 2]}, 28758),
    ({"$log": ["a", 2]}, 28756), ({"$pow": [0, -1]}, 28764), ({"$pow": ["a", 1]}, 28762),
    ({"$round": [1.5, 101]}, 51083), ({"$round": [1.5, 1.5]}, 51082),
    ({"$round": ["a"]}, 51081), ({"$abs": Int64(-(2**63))}, 28680),
    ({"$cond": {"if": 1, "then": 2}}, 17080), ({"$cond": {"if": 1, "then": 2, "else": 3,
                                                          "x": 4}}, 17083),
    ({"$switch": {"branches": []}}, 40068), ({"$switch": 1}, 40060),
    ({"$switch": {"branches": [{"case": False, "then": 1}]}}, 40066),
    ({"$switch": {"branches": [{"then": 1}]}}, 40064),
    ({"$ifNull": ["$a"]}, 1257300),
    ({"$let": {"vars": {"Bad": 1}, "in": 1}}, 16867),
    ({"$let": {"in": 1}}, 16876), ({"$let": {"vars": {}}}, 16877),
    ("$$undefinedVar", 17276), ("$a..b", 15998), ("$", 16872),
    ({"a": 1, "$b": 2}, 16410), ({"a.b": 1}, 16412),
]


@pytest.mark.parametrize("expr,code", ERRORS, ids=[str(c[0])[:50] for c in ERRORS])
def test_errors(expr: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        ev(expr, {})
    assert e.value.code == code, e.value


def test_add_subtract_error_messages() -> None:
    with pytest.raises(MongoError, match=r"^\$add only supports numeric or date types, not "
                                         r"string$"):
        ev({"$add": [1, "$s"]}, {"s": "x"})
    with pytest.raises(MongoError, match=r"^can't \$divide by zero$"):
        ev({"$divide": ["$a", 0]}, {"a": 1})
    with pytest.raises(MongoError, match=r"^Expression \$subtract takes exactly 2 arguments\. 1 "
                                         r"were passed in\.$"):
        ev({"$subtract": [1]})
    with pytest.raises(MongoError, match=r"^Unrecognized expression '\$foo'$"):
        ev({"$foo": 1})
