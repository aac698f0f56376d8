"""Matcher tests: expected results from the MongoDB manual and mongodb/mongo jstests.

Each table row is (filter, document, expected). Sources are cited per table.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from bson import Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS

from query.match import compile_filter
from query.paths import iter_leaves
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING


def ids(filter_spec: dict[str, Any], docs: list[dict[str, Any]]) -> list[Any]:
    m = compile_filter(filter_spec)
    return [d["_id"] for d in docs if m.matches(d)]


# --- jstests/core/query/null_query_semantics.js (mongodb/mongo): null vs missing -----------
NULL_DOCS = [
    {"_id": "a_empty_subobject", "a": {}},
    {"_id": "a_null", "a": None},
    {"_id": "a_number", "a": 4},
    {"_id": "a_subobject_b_not_null", "a": {"b": "hi"}},
    {"_id": "a_subobject_b_null", "a": {"b": None}},
    {"_id": "no_a"},
    {"_id": "a_double_array", "a": [[]]},
    {"_id": "a_empty_array", "a": []},
    {"_id": "a_object_array_no_b_nulls", "a": [{"b": 1}, {"b": 3}, {"b": "string"}]},
    {"_id": "a_object_array_some_b_nulls", "a": [{"b": None}, {"b": 3}, {"b": None}]},
    {"_id": "a_object_array_some_b_missing", "a": [{"b": 3}, {}]},
    {"_id": "a_value_array_all_nulls", "a": [None, None]},
    {"_id": "a_value_array_no_nulls", "a": [1, "string", 4]},
    {"_id": "a_value_array_with_null", "a": [1, "string", None, 4]},
]

NULL_CASES = [
    ({"a": {"$eq": None}}, {"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}),
    ({"a": {"$in": [None, 75]}},
     {"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}),
    ({"a": {"$exists": False}}, {"no_a"}),
    ({"a": {"$elemMatch": {"$eq": None}}}, {"a_value_array_all_nulls", "a_value_array_with_null"}),
    ({"a.b": {"$eq": None}},
     {"a_empty_subobject", "a_null", "a_number", "a_subobject_b_null", "no_a", "a_double_array",
      "a_empty_array", "a_object_array_some_b_nulls", "a_object_array_some_b_missing",
      "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}),
    ({"a.b": {"$ne": None}}, {"a_subobject_b_not_null", "a_object_array_no_b_nulls"}),
    ({"a.b": {"$nin": [None, 75]}}, {"a_subobject_b_not_null", "a_object_array_no_b_nulls"}),
    ({"a": {"$nin": [None, []]}},
     {"a_empty_subobject", "a_number", "a_subobject_b_not_null", "a_subobject_b_null",
      "a_object_array_no_b_nulls", "a_object_array_some_b_nulls",
      "a_object_array_some_b_missing", "a_value_array_no_nulls"}),
    ({"a.b": {"$exists": False}},
     {"no_a", "a_empty_subobject", "a_null", "a_number", "a_double_array", "a_empty_array",
      "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}),
]


@pytest.mark.parametrize(("flt", "expected"), NULL_CASES)
def test_null_and_missing_semantics(flt: dict[str, Any], expected: set[str]) -> None:
    assert set(ids(flt, NULL_DOCS)) == expected


def test_not_gte_null_excludes_null_and_missing() -> None:
    # null_query_semantics.js: {a: {$not: {$gte: null}}} keeps everything but null/missing.
    got = set(ids({"a": {"$not": {"$gte": None}}}, NULL_DOCS))
    assert got == {d["_id"] for d in NULL_DOCS} - {
        "a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}


# --- manual: "Query for Null or Missing Fields" ------------------------------------------
def test_manual_null_or_missing() -> None:
    docs = [{"_id": 1, "item": None}, {"_id": 2}]
    assert ids({"item": None}, docs) == [1, 2]
    assert ids({"item": {"$type": 10}}, docs) == [1]
    assert ids({"item": {"$type": "null"}}, docs) == [1]
    assert ids({"item": {"$exists": False}}, docs) == [2]


# --- manual: "Query an Array" / "Query an Array of Embedded Documents" -------------------
ARRAY_DOCS = [
    {"_id": "journal", "tags": ["blank", "red"], "dim_cm": [14, 21]},
    {"_id": "notebook", "tags": ["red", "blank"], "dim_cm": [14, 21]},
    {"_id": "paper", "tags": ["red", "blank", "plain"], "dim_cm": [14, 21]},
    {"_id": "planner", "tags": ["blank", "red"], "dim_cm": [22.85, 30]},
    {"_id": "postcard", "tags": ["blue"], "dim_cm": [10, 15.25]},
]
ARRAY_CASES = [
    ({"tags": ["red", "blank"]}, ["notebook"]),
    ({"tags": {"$all": ["red", "blank"]}}, ["journal", "notebook", "paper", "planner"]),
    ({"tags": "red"}, ["journal", "notebook", "paper", "planner"]),
    ({"dim_cm": {"$gt": 25}}, ["planner"]),
    ({"dim_cm": {"$gt": 15, "$lt": 20}}, ["journal", "notebook", "paper", "postcard"]),
    ({"dim_cm": {"$elemMatch": {"$gt": 22, "$lt": 30}}}, ["planner"]),
    ({"dim_cm.1": {"$gt": 25}}, ["planner"]),
    ({"tags": {"$size": 3}}, ["paper"]),
]


@pytest.mark.parametrize(("flt", "expected"), ARRAY_CASES)
def test_manual_query_an_array(flt: dict[str, Any], expected: list[str]) -> None:
    assert ids(flt, ARRAY_DOCS) == expected


INSTOCK_DOCS = [
    {"_id": "journal", "instock": [{"warehouse": "A", "qty": 5}, {"warehouse": "C", "qty": 15}]},
    {"_id": "notebook", "instock": [{"warehouse": "C", "qty": 5}]},
    {"_id": "paper", "instock": [{"warehouse": "A", "qty": 60}, {"warehouse": "B", "qty": 15}]},
    {"_id": "planner", "instock": [{"warehouse": "A", "qty": 40}, {"warehouse": "B", "qty": 5}]},
    {"_id": "postcard", "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]},
]
INSTOCK_CASES = [
    ({"instock": {"warehouse": "A", "qty": 5}}, ["journal"]),
    ({"instock": {"qty": 5, "warehouse": "A"}}, []),  # field order matters for documents
    ({"instock.0.qty": {"$lte": 20}}, ["journal", "notebook", "postcard"]),
    ({"instock.qty": {"$lte": 20}}, ["journal", "notebook", "paper", "planner", "postcard"]),
    ({"instock": {"$elemMatch": {"qty": 5, "warehouse": "A"}}}, ["journal"]),
    ({"instock": {"$elemMatch": {"qty": {"$gt": 10, "$lte": 20}}}},
     ["journal", "paper", "postcard"]),
    ({"instock.qty": {"$gt": 10, "$lte": 20}}, ["journal", "paper", "planner", "postcard"]),
    ({"instock.qty": 5, "instock.warehouse": "A"}, ["journal", "planner"]),
]


@pytest.mark.parametrize(("flt", "expected"), INSTOCK_CASES)
def test_manual_array_of_embedded_documents(flt: dict[str, Any], expected: list[str]) -> None:
    assert ids(flt, INSTOCK_DOCS) == expected


# --- comparison semantics: type brackets, mixed numbers, NaN, MinKey/MaxKey, dates -------
SCALAR_CASES = [
    ({"a": {"$gt": 5}}, {"a": "10"}, False),          # no cross-bracket comparison
    ({"a": {"$gt": 5}}, {"a": 6.5}, True),
    ({"a": {"$gt": 5}}, {"a": Int64(6)}, True),
    ({"a": {"$gt": 5}}, {"a": Decimal128("5.0000001")}, True),
    ({"a": 1}, {"a": 1.0}, True),
    ({"a": 1}, {"a": Decimal128("1.00")}, True),
    ({"a": Int64(2**62)}, {"a": 2**62}, True),
    ({"a": 2**53 + 1}, {"a": float(2**53)}, False),   # exact comparison, no double rounding
    ({"a": float("nan")}, {"a": float("nan")}, True),
    ({"a": {"$gt": float("nan")}}, {"a": 1}, False),
    ({"a": {"$gte": float("nan")}}, {"a": float("nan")}, True),
    ({"a": {"$lt": 0}}, {"a": float("nan")}, False),
    ({"a": {"$lte": float("-inf")}}, {"a": float("nan")}, False),
    ({"a": {"$gt": MinKey()}}, {"a": "x"}, True),
    ({"a": {"$lt": MaxKey()}}, {"a": {"b": 1}}, True),
    ({"a": {"$lt": MaxKey()}}, {"a": MaxKey()}, False),
    ({"a": {"$lt": DatetimeMS(0)}}, {"a": DatetimeMS(-86_400_000)}, True),  # before 1970
    ({"a": {"$gte": DatetimeMS(-10)}}, {"a": DatetimeMS(-86_400_000)}, False),
    ({"a": {"$lt": DatetimeMS(0)}}, {"a": 5}, False),
    ({"a": {"$gt": "abc"}}, {"a": "abd"}, True),
    ({"a": {"$gt": True}}, {"a": 1}, False),
    ({"a": {"$lt": {"b": 2}}}, {"a": {"b": 1}}, True),
    ({"a": {"$gt": [1]}}, {"a": [[2]]}, True),
    ({"a": [1, 2]}, {"a": [[1, 2], 3]}, True),   # equality to an array element that is an array
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": {"b": 1, "c": 2}}, {"a": {"c": 2, "b": 1}}, False),
    ({"a": 1}, {"a": [[1]]}, False),              # only one level of array expansion
    ({"a.b": 1}, {"a": [[{"b": 1}]]}, False),     # nested arrays are not traversed
    ({"a.0.b": 1}, {"a": [[{"b": 1}]]}, True),
    ({"a.0": 5}, {"a": [{"0": 5}]}, True),        # numeric component also names fields
    ({"a.0": 5}, {"a": {"0": 5}}, True),
    ({"a.01": 5}, {"a": [5]}, False),
    ({"ts": {"$gt": Timestamp(1, 0)}}, {"ts": Timestamp(1, 1)}, True),
    ({"o": ObjectId("0" * 24)}, {"o": ObjectId("0" * 24)}, True),
    ({"b": b"\x01"}, {"b": Binary(b"\x01", 0)}, True),
    ({"a": {"$ne": 1}}, {"a": [1, 2]}, False),
    ({"a": {"$ne": 3}}, {"a": [1, 2]}, True),
    ({"a": {"$nin": [3, 4]}}, {}, True),
    ({"a": {"$not": {"$gt": 5}}}, {"a": "x"}, True),
    ({"a": {"$not": {"$gt": 5}}}, {"a": [1, 9]}, False),
    ({"a": {"$in": [re.compile("^x")]}}, {"a": "xy"}, True),
    ({"a": {"$eq": Regex("^x", "")}}, {"a": "xy"}, False),  # $eq compares regexes literally
    ({"a": {"$eq": Regex("^x", "")}}, {"a": Regex("^x", "")}, True),
]


@pytest.mark.parametrize(("flt", "doc", "expected"), SCALAR_CASES)
def test_comparisons(flt: dict[str, Any], doc: dict[str, Any], expected: bool) -> None:
    assert compile_filter(flt).matches(doc) is expected


# --- $regex (manual "$regex": options i, m, s, x) ---------------------------------------
REGEX_CASES = [
    ({"sku": {"$regex": "789$"}}, "abc789", True),
    ({"sku": {"$regex": "^ABC", "$options": "i"}}, "abc123", True),
    ({"sku": re.compile("^ABC", re.I)}, "abc123", True),
    ({"sku": Regex("^ABC", "i")}, "abc123", True),
    ({"sku": {"$regex": Regex("^ABC", "i")}}, "abc123", True),
    ({"description": {"$regex": "^S", "$options": "m"}}, "First line\nSecond line", True),
    ({"description": {"$regex": "^S"}}, "First line\nSecond line", False),
    ({"description": {"$regex": "m.*line", "$options": "si"}}, "Multiple\nline", True),
    ({"description": {"$regex": "m.*line", "$options": "i"}}, "Multiple\nline", False),
    ({"sku": {"$regex": "abc #comment\n 123", "$options": "x"}}, "abc123", True),
    ({"sku": {"$not": re.compile("^a")}}, "abc", False),
    ({"sku": {"$regex": "(?<year>\\d{4})"}}, "in 2024", True),
    ({"sku": {"$regex": "a"}}, ["x", "bab"], True),
    ({"sku": {"$regex": "1"}}, 1, False),
]


@pytest.mark.parametrize(("flt", "value", "expected"), REGEX_CASES)
def test_regex(flt: dict[str, Any], value: Any, expected: bool) -> None:
    key = next(iter(flt))
    assert compile_filter(flt).matches({key: value}) is expected


# --- $type (manual "$type") --------------------------------------------------------------
TYPE_CASES = [
    ("string", "x", True), (2, "x", True), ("double", 1.5, True), ("int", 1, True),
    ("int", 2**40, False), ("long", 2**40, True), ("long", Int64(1), True),
    ("decimal", Decimal128("1"), True), ("number", Decimal128("1"), True), ("number", 1.0, True),
    ("number", "1", False), ("bool", True, True), ("int", True, False), ("date", DatetimeMS(-5), True),
    ("object", {"a": 1}, True), ("array", [], True), ("array", [[1]], True), ("string", ["x", 1], True),
    ("binData", b"x", True), ("objectId", ObjectId(), True), ("timestamp", Timestamp(0, 0), True),
    ("regex", Regex("x"), True), ("minKey", MinKey(), True), ("maxKey", MaxKey(), True),
    (["string", "double"], 2.5, True), ("null", None, True), ("null", MISSING, False),
    (-1, MinKey(), True), (127, MaxKey(), True),
]


@pytest.mark.parametrize(("t", "value", "expected"), TYPE_CASES)
def test_type(t: Any, value: Any, expected: bool) -> None:
    doc = {} if value is MISSING else {"a": value}
    assert compile_filter({"a": {"$type": t}}).matches(doc) is expected


# --- $mod (manual "$mod"), $size, $all, $exists ------------------------------------------
def test_mod_manual_and_negative() -> None:
    docs = [{"_id": 1, "qty": 0}, {"_id": 2, "qty": 5}, {"_id": 3, "qty": 12}]
    assert ids({"qty": {"$mod": [4, 0]}}, docs) == [1, 3]
    # truncated remainder: the sign follows the dividend (C++ semantics)
    assert compile_filter({"a": {"$mod": [4, -1]}}).matches({"a": -5})
    assert not compile_filter({"a": {"$mod": [4, 3]}}).matches({"a": -5})
    assert compile_filter({"a": {"$mod": [4.5, 1]}}).matches({"a": 5.9})   # truncation
    assert not compile_filter({"a": {"$mod": [2, 0]}}).matches({"a": float("nan")})


def test_all_and_elem_match_nested() -> None:
    doc = {"qty": [{"size": "S", "num": 10, "color": "blue"},
                   {"size": "M", "num": 45, "color": "blue"}]}
    # manual "$all": $all with $elemMatch
    f = {"qty": {"$all": [{"$elemMatch": {"size": "M", "num": {"$gt": 50}}},
                          {"$elemMatch": {"num": 100, "color": "green"}}]}}
    assert not compile_filter(f).matches(doc)
    f2 = {"qty": {"$all": [{"$elemMatch": {"size": "M", "num": {"$gt": 40}}}]}}
    assert compile_filter(f2).matches(doc)
    assert not compile_filter({"a": {"$all": []}}).matches({"a": []})
    assert compile_filter({"a": {"$all": [[1, 2]]}}).matches({"a": [[1, 2], 3]})
    # nested $elemMatch over arrays of arrays
    nested = {"m": [[1, 2], [3, 4]]}
    assert compile_filter({"m": {"$elemMatch": {"$elemMatch": {"$gt": 3}}}}).matches(nested)
    assert not compile_filter({"m": {"$elemMatch": {"$elemMatch": {"$gt": 4}}}}).matches(nested)
    assert not compile_filter({"m": {"$elemMatch": {"$eq": 1}}}).matches(nested)


def test_elem_match_manual_scores() -> None:
    # manual "$elemMatch (query)"
    docs = [{"_id": 1, "results": [82, 85, 88]}, {"_id": 2, "results": [75, 88, 89]}]
    assert ids({"results": {"$elemMatch": {"$gte": 80, "$lt": 85}}}, docs) == [1]
    survey = [
        {"_id": 1, "results": [{"product": "abc", "score": 10}, {"product": "xyz", "score": 5}]},
        {"_id": 2, "results": [{"product": "abc", "score": 8}, {"product": "xyz", "score": 7}]},
        {"_id": 3, "results": [{"product": "abc", "score": 7}, {"product": "xyz", "score": 8}]},
        {"_id": 4, "results": [{"product": "abc", "score": 7}, {"product": "def", "score": 8}]},
    ]
    assert ids({"results": {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}},
               survey) == [3]
    assert ids({"results": {"$elemMatch": {"product": {"$ne": "xyz"}}}}, survey) == [1, 2, 3, 4]
    assert ids({"results.product": {"$ne": "xyz"}}, survey) == [4]


def test_size_and_exists() -> None:
    assert compile_filter({"a": {"$size": 0}}).matches({"a": []})
    assert not compile_filter({"a": {"$size": 2}}).matches({"a": [[1, 2]]})
    assert compile_filter({"a.b": {"$size": 2}}).matches({"a": [{"b": [1, 2]}]})
    assert compile_filter({"a": {"$exists": True}}).matches({"a": None})
    assert compile_filter({"a.0": {"$exists": False}}).matches({"a": []})
    assert compile_filter({"a": {"$exists": 0}}).matches({})


# --- bit tests (manual "$bitsAllSet" etc.: 54 = 0b110110, 20 = 0b10100, BinData "Zg==" 0x66)
BIT_DOCS = [{"_id": 1, "a": 54}, {"_id": 2, "a": 20}, {"_id": 3, "a": 20.0},
            {"_id": 4, "a": Binary(b"\x66", 0)}]
BIT_CASES = [
    ({"$bitsAllSet": [1, 5]}, [1, 4]),
    ({"$bitsAllSet": 50}, [1]),
    ({"$bitsAllSet": Binary(b"\x30", 0)}, [1]),
    ({"$bitsAnySet": [1, 5]}, [1, 4]),
    ({"$bitsAnySet": 35}, [1, 4]),
    ({"$bitsAllClear": [1, 5]}, [2, 3]),
    ({"$bitsAllClear": 35}, [2, 3]),
    ({"$bitsAnyClear": [1, 5]}, [2, 3]),
    ({"$bitsAnyClear": 35}, [1, 2, 3, 4]),
]


@pytest.mark.parametrize(("op", "expected"), BIT_CASES)
def test_bits(op: dict[str, Any], expected: list[int]) -> None:
    assert ids({"a": op}, BIT_DOCS) == expected


def test_bits_negative_numbers_sign_extend() -> None:
    assert compile_filter({"a": {"$bitsAllSet": [0, 63, 100]}}).matches({"a": -1})
    assert not compile_filter({"a": {"$bitsAnySet": [0]}}).matches({"a": 2.5})


# --- logical operators -----------------------------------------------------------------
def test_logical() -> None:
    docs = [{"_id": i, "a": i} for i in range(6)]
    assert ids({"$or": [{"a": 1}, {"a": {"$gt": 4}}]}, docs) == [1, 5]
    assert ids({"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 4}}]}, docs) == [2, 3]
    assert ids({"$nor": [{"a": 1}, {"a": {"$gt": 2}}]}, docs) == [0, 2]
    assert ids({"$comment": "x", "a": 3}, docs) == [3]
    assert ids({}, docs) == list(range(6))
    assert ids({"$alwaysFalse": 1}, docs) == []


# --- positional: which array element matched ------------------------------------------
POSITION_CASES = [
    ({"grades": 85}, {"grades": [80, 85, 90]}, 1),
    ({"a.b": {"$gt": 4}}, {"a": [{"b": 3}, {"b": 7}]}, 1),
    ({"a": {"$elemMatch": {"b": 2, "c": {"$gt": 1}}}},
     {"a": [{"b": 2, "c": 0}, {"b": 1, "c": 5}, {"b": 2, "c": 5}]}, 2),
    ({"x": 1, "a": 9}, {"x": 1, "a": [1, 9]}, 1),
    ({"a": 1}, {"a": 1}, None),
]


@pytest.mark.parametrize(("flt", "doc", "pos"), POSITION_CASES)
def test_match_position(flt: dict[str, Any], doc: dict[str, Any], pos: int | None) -> None:
    assert compile_filter(flt).match_position(doc) == (True, pos)


def test_iter_leaves_reports_first_array_position() -> None:
    doc = {"a": [{"b": [5, 6]}, {"b": 7}]}
    got = [(v, p) for v, p in iter_leaves(doc, ("a", "b"))]
    assert got == [(5, 0), (6, 0), ([5, 6], 0), (7, 1)]


# --- $expr: evaluated by query.expressions ------------------------------------------------
# https://www.mongodb.com/docs/manual/reference/operator/query/expr/ (budget example)
def test_expr_uses_expression_engine() -> None:
    m = compile_filter({"$expr": {"$gt": ["$spent", "$budget"]}})
    assert m.matches({"spent": 400, "budget": 300})
    assert not m.matches({"spent": 100, "budget": 300})
    assert m.has_expr
    with_vars = compile_filter({"$expr": {"$eq": ["$a", "$$target"]}}, variables={"target": 5})
    assert with_vars.matches({"a": 5}) and not with_vars.matches({"a": 6})


def test_expr_truthiness() -> None:
    from query.match import expr_truthy
    assert [expr_truthy(v) for v in (0, 0.0, None, False, MISSING, Decimal128("0"))] == [False] * 6
    assert [expr_truthy(v) for v in (1, "", [], {}, float("nan"), Int64(-1))] == [True] * 6


# --- errors (codes from src/mongo/db/matcher/expression_parser.cpp) ---------------------
ERROR_CASES = [
    ({"a": {"$foo": 1}}, 2, "unknown operator: $foo"),
    ({"$foo": 1}, 2, "unknown top level operator: $foo"),
    ({"$and": []}, 2, "$and/$or/$nor must be a nonempty array"),
    ({"$or": {}}, 2, "$or must be an array"),
    ({"$or": [1]}, 2, "$or/$and/$nor entries need to be full objects"),
    ({"a": {"$in": 1}}, 2, "$in needs an array"),
    ({"a": {"$nin": 1}}, 2, "$nin needs an array"),
    ({"a": {"$in": [{"$gt": 1}]}}, 2, "cannot nest $ under $in"),
    ({"a": {"$regex": 1}}, 2, "$regex has to be a string"),
    ({"a": {"$options": "i"}}, 2, "$options needs a $regex"),
    ({"a": {"$regex": Regex("x", "i"), "$options": "m"}}, 51075, "options set in both"),
    ({"a": {"$regex": "x", "$options": "q"}}, 51108, "invalid flag in regex options: q"),
    ({"a": {"$regex": "("}}, 51091, "Regular expression is invalid"),
    ({"a": {"$gt": re.compile("x")}}, 2, "Can't have RegEx as arg to predicate over field 'a'."),
    ({"a": {"$not": 1}}, 2, "$not needs a regex or a document"),
    ({"a": {"$not": {}}}, 2, "$not cannot be empty"),
    ({"a": {"$elemMatch": 1}}, 2, "$elemMatch needs an Object"),
    ({"a": {"$all": 1}}, 2, "$all needs an array"),
    ({"a": {"$all": [{"$elemMatch": {}}, 1]}}, 2, "$all/$elemMatch has to be consistent"),
    ({"a": {"$size": -1}}, 2, "$size may not be negative"),
    ({"a": {"$size": 1.5}}, 2, "$size must be a whole number"),
    ({"a": {"$size": "1"}}, 2, "$size needs a number"),
    ({"a": {"$mod": [0, 1]}}, 2, "divisor cannot be 0"),
    ({"a": {"$mod": 1}}, 2, "malformed mod, needs to be an array"),
    ({"a": {"$mod": [1]}}, 2, "malformed mod, not enough elements"),
    ({"a": {"$mod": [1, 2, 3]}}, 2, "malformed mod, too many elements"),
    ({"a": {"$type": "foo"}}, 2, "Unknown type name alias: foo"),
    ({"a": {"$type": 99}}, 2, "Invalid numerical type code: 99"),
    ({"a": {"$type": []}}, 9, "must match at least one type"),
    ({"a": {"$type": {}}}, 14, "type must be represented as a number or a string"),
    ({"a": {"$bitsAllSet": [-1]}}, 2, "bit positions must be >= 0"),
    ({"a": {"$bitsAllSet": "x"}}, 2, "takes an Array, a number, or a BinData"),
    ({"a": {"$bitsAllSet": -1}}, 9, "Expected a positive number"),
    ({"a": {"$where": "1"}}, 2, "$where cannot be applied to a field"),
    ({"$where": "this.a == 1"}, 238, "$where is not supported"),
    ({"$text": {"$search": "x"}}, 27, "text index required for $text query"),
    ({"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}, 2,
     "$expr can only be applied to the top-level document"),
    ({"a": {"$near": [0, 0]}}, 238, "not supported"),
    ({"a": {"$ne": re.compile("x")}}, 2, "Can't have regex as arg to $ne."),
]


@pytest.mark.parametrize(("flt", "code", "fragment"), ERROR_CASES)
def test_parse_errors(flt: dict[str, Any], code: int, fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_filter(flt)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


def test_fields_introspection() -> None:
    m = compile_filter({"a": 1, "$or": [{"b.c": {"$gt": 1}}, {"d": {"$ne": 2}}]})
    assert m.fields() == {"a", "b.c", "d"}
    assert compile_filter({}).is_trivial
