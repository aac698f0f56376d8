"""String, array, set, object and type-conversion expressions (manual examples cited per
group: https://www.mongodb.com/docs/manual/reference/operator/aggregation/<operator>/)."""

from __future__ import annotations

import math
from datetime import UTC
from typing import Any

import pytest
from bson import Decimal128, Int64, ObjectId, Regex
from bson.datetime_ms import DatetimeMS

from query.expressions import compile_expression
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING


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


def d(s: str) -> DatetimeMS:
    from datetime import datetime
    dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return DatetimeMS(round(dt.timestamp() * 1000))


def ev(expr: Any, doc: dict | None = None) -> Any:
    return compile_expression(expr).evaluate(doc or {}, {})


STRINGS = [
    # concat/
    ({"$concat": ["$item", " - ", "$description"]},
     {"item": "ABC1", "description": "product 1"}, "ABC1 - product 1"),
    ({"$concat": ["a", None]}, {}, None), ({"$concat": ["a", "$nope"]}, {}, None),
    # substrCP/: quarter "y13q1"; multi-byte "cafétéria"
    ({"$substrCP": ["$quarter", 0, 2]}, {"quarter": "y13q1"}, "y1"),
    ({"$substrCP": ["$quarter", 2, {"$subtract": [{"$strLenCP": "$quarter"}, 2]}]},
     {"quarter": "y13q1"}, "3q1"),
    ({"$substrCP": ["cafétéria", 0, 5]}, {}, "cafét"),
    ({"$substrCP": ["cafétéria", 5, 4]}, {}, "éria"),
    # substrBytes/ and substr/
    ({"$substrBytes": ["$quarter", 0, 2]}, {"quarter": "y13q1"}, "y1"),
    ({"$substrBytes": ["cafétéria", 0, 5]}, {}, "café"),
    ({"$substr": ["abcde", 1, -1]}, {}, "bcde"), ({"$substr": [123, 0, 2]}, {}, "12"),
    # toUpper/ toLower/: ASCII only; null → ""
    ({"$toUpper": "$item"}, {"item": "abc1"}, "ABC1"), ({"$toLower": "PRODUCT 1"}, {}, "product 1"),
    ({"$toUpper": None}, {}, ""), ({"$toUpper": "éa"}, {}, "éA"),
    # strLenCP/ strLenBytes/
    ({"$strLenCP": "cafétéria"}, {}, 9), ({"$strLenBytes": "cafétéria"}, {}, 11),
    ({"$strLenCP": "寿司"}, {}, 2), ({"$strLenBytes": "寿司"}, {}, 6),
    ({"$strLenCP": ""}, {}, 0),
    # split/
    ({"$split": ["$city", ", "]}, {"city": "Berkeley, CA"}, ["Berkeley", "CA"]),
    ({"$split": ["June-15-2013", "-"]}, {}, ["June", "15", "2013"]),
    ({"$split": ["banana split", "a"]}, {}, ["b", "n", "n", " split"]),
    ({"$split": ["headphone jack", 7]}, {}, "ERROR:40086"),
    ({"$split": [None, "a"]}, {}, None),
    # trim/ ltrim/ rtrim/
    ({"$trim": {"input": "  product 1  "}}, {}, "product 1"),
    ({"$ltrim": {"input": "  product 1  "}}, {}, "product 1  "),
    ({"$rtrim": {"input": "  product 1  "}}, {}, "  product 1"),
    ({"$trim": {"input": "ggggoodbyeeeee", "chars": "ge"}}, {}, "oodby"),
    ({"$trim": {"input": "\u00a0 x\n\t"}}, {}, "x"), ({"$trim": {"input": None}}, {}, None),
    # indexOfBytes/ indexOfCP/
    ({"$indexOfBytes": ["cafeteria", "e"]}, {}, 3), ({"$indexOfBytes": ["cafétéria", "t"]}, {}, 5),
    ({"$indexOfCP": ["cafétéria", "t"]}, {}, 4), ({"$indexOfCP": ["cafeteria", "e", 5]}, {}, 5),
    ({"$indexOfCP": ["cafeteria", "e", 6]}, {}, -1),
    ({"$indexOfCP": ["foo.bar.fi", ".", 5]}, {}, 7),
    ({"$indexOfCP": ["vanilla", "ll", 0, 2]}, {}, -1),
    ({"$indexOfBytes": [None, "a"]}, {}, None), ({"$indexOfCP": ["", ""]}, {}, 0),
    # strcasecmp/
    ({"$strcasecmp": ["$quarter", "13q4"]}, {"quarter": "13Q1"}, -1),
    ({"$strcasecmp": ["13Q4", "13q4"]}, {}, 0), ({"$strcasecmp": ["14Q2", "13q4"]}, {}, 1),
    # replaceOne/ replaceAll/
    ({"$replaceOne": {"input": "$item", "find": "blue paint", "replacement": "red paint"}},
     {"item": "blue paint with blue paintbrush"}, "red paint with blue paintbrush"),
    ({"$replaceAll": {"input": "$item", "find": "blue paint", "replacement": "red paint"}},
     {"item": "blue paint with blue paintbrush"}, "red paint with red paintbrush"),
    ({"$replaceAll": {"input": "$item", "find": "x", "replacement": None}}, {"item": "a"}, None),
    # regexMatch/ regexFind/ regexFindAll/: products descriptions, captures, options
    ({"$regexMatch": {"input": "$description", "regex": "line"}},
     {"description": "Single LINE description."}, False),
    ({"$regexMatch": {"input": "$description", "regex": "line", "options": "i"}},
     {"description": "Single LINE description."}, True),
    ({"$regexMatch": {"input": "$description", "regex": Regex("line", "i")}},
     {"description": "Single LINE description."}, True),
    ({"$regexFind": {"input": "$description", "regex": "line"}},
     {"description": "First lines\nsecond line"},
     {"match": "line", "idx": 6, "captures": []}),
    ({"$regexFind": {"input": "$email", "regex": "([a-z0-9_.+-]+)@([a-z0-9_.+-]+\\.[a-z0-9_.+-]+)"}},
     {"email": "joe@mongodb.com"},
     {"match": "joe@mongodb.com", "idx": 0, "captures": ["joe", "mongodb.com"]}),
    ({"$regexFindAll": {"input": "$description", "regex": "(C(ar)*)ra"}},
     {"description": "Car, Carr, Carra, Carrar"},
     [{"match": "Carra", "idx": 11, "captures": ["Car", "ar"]},
      {"match": "Carra", "idx": 18, "captures": ["Car", "ar"]}]),
    ({"$regexFindAll": {"input": "cafétéria", "regex": "é"}}, {},
     [{"match": "é", "idx": 3, "captures": []}, {"match": "é", "idx": 5, "captures": []}]),
    ({"$regexFind": {"input": None, "regex": "a"}}, {}, None),
    ({"$regexFindAll": {"input": "$nope", "regex": "a"}}, {}, []),
    ({"$regexMatch": {"input": "ab", "regex": "(?<x>a)b"}}, {}, True),
]

ARRAYS = [
    # arrayElemAt/: favorites first / last / out of range → missing
    ({"$arrayElemAt": ["$favorites", 0]}, {"favorites": ["chocolate", "cake", "apples"]},
     "chocolate"),
    ({"$arrayElemAt": ["$favorites", -1]}, {"favorites": ["chocolate", "cake", "apples"]},
     "apples"),
    ({"$arrayElemAt": ["$favorites", 0]}, {"favorites": []}, MISSING),
    ({"$arrayElemAt": [[1, 2, 3], 15]}, {}, MISSING),
    ({"$arrayElemAt": [[1, 2, 3], -15]}, {}, MISSING),
    ({"$arrayElemAt": [None, 0]}, {}, None),
    # first/ last/ (array operators)
    ({"$first": [[1, 2, 3]]}, {}, 1), ({"$last": [[1, 2, 3]]}, {}, 3),
    ({"$first": [[[]]]}, {}, []), ({"$first": [None]}, {}, None), ({"$last": [[]]}, {}, MISSING),
    # size/
    ({"$size": "$colors"}, {"colors": ["blue", "black", "red"]}, 3),
    ({"$size": [[1, 2]]}, {}, 2),
    # slice/
    ({"$slice": [[1, 2, 3], 1, 1]}, {}, [2]), ({"$slice": [[1, 2, 3], -2]}, {}, [2, 3]),
    ({"$slice": [[1, 2, 3], 15, 2]}, {}, []), ({"$slice": [[1, 2, 3], -15, 2]}, {}, [1, 2]),
    ({"$slice": [[1, 2, 3], 2]}, {}, [1, 2]), ({"$slice": [None, 2]}, {}, None),
    # in/
    ({"$in": [2, [1, 2, 3]]}, {}, True), ({"$in": ["abc", ["xyz", "abc"]]}, {}, True),
    ({"$in": ["xy", ["xyz", "abc"]]}, {}, False), ({"$in": [["a"], ["a"]]}, {}, False),
    ({"$in": [["a"], [["a"]]]}, {}, True), ({"$in": [1, [1.0]]}, {}, True),
    ({"$in": [None, [None]]}, {}, True),
    # concatArrays/
    ({"$concatArrays": [["hello", " "], ["world"]]}, {}, ["hello", " ", "world"]),
    ({"$concatArrays": [[["hello", " "]], [["world"], "again"]]}, {},
     [["hello", " "], ["world"], "again"]),
    ({"$concatArrays": [[1], None]}, {}, None),
    # range/
    ({"$range": [0, 10, 2]}, {}, [0, 2, 4, 6, 8]), ({"$range": [10, 0, -2]}, {}, [10, 8, 6, 4, 2]),
    ({"$range": [0, 10, -2]}, {}, []), ({"$range": [0, 5]}, {}, [0, 1, 2, 3, 4]),
    ({"$range": [0, "$distance", 25]}, {"distance": 88}, [0, 25, 50, 75]),
    # zip/
    ({"$zip": {"inputs": [["a"], ["b"], ["c"]]}}, {}, [["a", "b", "c"]]),
    ({"$zip": {"inputs": [["a"], ["b", "c"]]}}, {}, [["a", "b"]]),
    ({"$zip": {"inputs": [[1], [2, 3]], "useLongestLength": True}}, {}, [[1, 2], [None, 3]]),
    ({"$zip": {"inputs": [[1], [2, 3]], "useLongestLength": True, "defaults": ["a", "b"]}}, {},
     [[1, 2], ["a", 3]]),
    ({"$zip": {"inputs": [[1], None]}}, {}, None),
    # reverseArray/
    ({"$reverseArray": [[1, 2, 3]]}, {}, [3, 2, 1]), ({"$reverseArray": [[]]}, {}, []),
    ({"$reverseArray": [[[1, 2, 3], [4, 5, 6]]]}, {}, [[4, 5, 6], [1, 2, 3]]),
    ({"$reverseArray": [None]}, {}, None),
    # indexOfArray/
    ({"$indexOfArray": [["a", "abc"], "a"]}, {}, 0),
    ({"$indexOfArray": [["a", "abc", "de", ["de"]], ["de"]]}, {}, 3),
    ({"$indexOfArray": [[1, 2], 5]}, {}, -1), ({"$indexOfArray": [[1, 2, 3], [1, 2]]}, {}, -1),
    ({"$indexOfArray": [[10, 9, 9, 8, 9], 9, 3]}, {}, 4),
    ({"$indexOfArray": [["a", "abc", "b"], "b", 0, 1]}, {}, -1),
    ({"$indexOfArray": [["a", "abc", "b"], "b", 1, 0]}, {}, -1),
    ({"$indexOfArray": [["a", "abc", "b"], "b", 20]}, {}, -1),
    ({"$indexOfArray": [[None, None, None], None]}, {}, 0),
    ({"$indexOfArray": [None, "foo"]}, {}, None),
    # isArray/
    ({"$isArray": ["$a"]}, {"a": [1]}, True), ({"$isArray": ["$a"]}, {"a": "x"}, False),
    # filter/ map/ reduce/
    ({"$filter": {"input": "$items", "as": "item", "cond": {"$gte": ["$$item.price", 100]}}},
     {"items": [{"item_id": 43, "quantity": 2, "price": 10},
                {"item_id": 2, "quantity": 1, "price": 240}]},
     [{"item_id": 2, "quantity": 1, "price": 240}]),
    ({"$filter": {"input": [1, "a", 2, None, 3.1, Int64(5), "5"],
                  "cond": {"$and": [{"$gte": ["$$this", 2]}, {"$lte": ["$$this", 5]}]},
                  "limit": 2}}, {}, [2, 3.1]),
    ({"$filter": {"input": None, "cond": True}}, {}, None),
    ({"$map": {"input": "$quizzes", "as": "grade", "in": {"$add": ["$$grade", 2]}}},
     {"quizzes": [5, 6, 7]}, [7, 8, 9]),
    ({"$map": {"input": [1.25, 2.5], "in": {"$trunc": "$$this"}}}, {}, [1.0, 2.0]),
    ({"$reduce": {"input": ["a", "b", "c"], "initialValue": "",
                  "in": {"$concat": ["$$value", "$$this"]}}}, {}, "abc"),
    ({"$reduce": {"input": [1, 2, 3, 4], "initialValue": {"sum": 5, "product": 2},
                  "in": {"sum": {"$add": ["$$value.sum", "$$this"]},
                         "product": {"$multiply": ["$$value.product", "$$this"]}}}}, {},
     {"sum": 15, "product": 48}),
    ({"$reduce": {"input": [[3, 4], [5, 6]], "initialValue": [1, 2],
                  "in": {"$concatArrays": ["$$value", "$$this"]}}}, {}, [1, 2, 3, 4, 5, 6]),
    # sortArray/
    ({"$sortArray": {"input": [20, 4, {"a": "Free"}, 6, 21, 5, "Gratis", {"a": None},
                               {"a": {"sale": True, "price": 19}}, Decimal128("10.23"),
                               {"a": "On sale"}], "sortBy": 1}}, {},
     [4, 5, 6, Decimal128("10.23"), 20, 21, "Gratis", {"a": None}, {"a": "Free"},
      {"a": "On sale"}, {"a": {"sale": True, "price": 19}}]),
    ({"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}, {}, [3, 2, 1]),
    # maxN/ minN/ firstN/ lastN/ (array forms)
    ({"$maxN": {"n": 2, "input": [None, 2, 1, 3]}}, {}, [3, 2]),
    ({"$minN": {"n": 2, "input": [None, 2, 1, 3]}}, {}, [1, 2]),
    ({"$firstN": {"n": 2, "input": [1, 2, 3]}}, {}, [1, 2]),
    ({"$lastN": {"n": 2, "input": [1, 2, 3]}}, {}, [2, 3]),
    ({"$firstN": {"n": 5, "input": [1, 2, 3]}}, {}, [1, 2, 3]),
    # allElementsTrue/ anyElementTrue/
    ({"$allElementsTrue": [[True, 1, "someString"]]}, {}, True),
    ({"$allElementsTrue": [[[False]]]}, {}, True), ({"$allElementsTrue": [[]]}, {}, True),
    ({"$allElementsTrue": [[None, False, 0]]}, {}, False),
    ({"$anyElementTrue": [[True, False]]}, {}, True), ({"$anyElementTrue": [[[False]]]}, {}, True),
    ({"$anyElementTrue": [[None, False, 0]]}, {}, False), ({"$anyElementTrue": [[]]}, {}, False),
    # setEquals/ setIsSubset/ setUnion/ setIntersection/ setDifference/
    ({"$setEquals": [["a", "b", "a"], ["b", "a"]]}, {}, True),
    ({"$setEquals": [["a", "b"], [["a", "b"]]]}, {}, False),
    ({"$setIsSubset": [["a", "b", "a"], ["b", "a"]]}, {}, True),
    ({"$setIsSubset": [["a", "b"], [["a", "b"]]]}, {}, False),
    ({"$setUnion": [["a", "b", "a"], ["b", "a"]]}, {}, ["a", "b"]),
    ({"$setUnion": [["a", "b"], [["a", "b"]]]}, {}, ["a", "b", ["a", "b"]]),
    ({"$setUnion": [[1, 2], None]}, {}, None),
    ({"$setIntersection": [["a", "b", "a"], ["b", "a"]]}, {}, ["a", "b"]),
    ({"$setIntersection": [["a", "b"], []]}, {}, []),
    ({"$setDifference": [["a", "b", "a"], ["b", "a"]]}, {}, []),
    ({"$setDifference": [["a", "b"], [["a", "b"]]]}, {}, ["a", "b"]),
    ({"$setDifference": [[1, 2, 2, 3], [1.0]]}, {}, [2, 3]),
]

OBJECTS = [
    # mergeObjects/
    ({"$mergeObjects": [{"a": 1}, None]}, {}, {"a": 1}),
    ({"$mergeObjects": [None, None]}, {}, {}),
    ({"$mergeObjects": [{"a": 1}, {"a": 2, "b": 2}, {"a": 3, "c": 3}]}, {},
     {"a": 3, "b": 2, "c": 3}),
    ({"$mergeObjects": [{"a": 1}, {"a": 2, "b": 2}, {"a": 3, "b": None, "c": 3}]}, {},
     {"a": 3, "b": None, "c": 3}),
    # objectToArray/ arrayToObject/
    ({"$objectToArray": "$dimensions"}, {"dimensions": {"l": 25, "w": 10, "uom": "cm"}},
     [{"k": "l", "v": 25}, {"k": "w", "v": 10}, {"k": "uom", "v": "cm"}]),
    ({"$arrayToObject": [[["item", "abc123"], ["qty", 25]]]}, {}, {"item": "abc123", "qty": 25}),
    ({"$arrayToObject": [[{"k": "item", "v": "abc123"}, {"k": "qty", "v": 25}]]}, {},
     {"item": "abc123", "qty": 25}),
    ({"$arrayToObject": [[["item", "abc123"], ["qty", 25], ["qty", 50]]]}, {},
     {"item": "abc123", "qty": 50}),
    ({"$arrayToObject": [[]]}, {}, {}),
    # getField/ setField/ unsetField/: field names with dots and dollars
    ({"$getField": "price.usd"}, {"price.usd": 45.99, "price": {"usd": 1}}, 45.99),
    ({"$getField": {"field": {"$literal": "$price"}, "input": "$$CURRENT"}}, {"$price": 5}, 5),
    ({"$getField": {"field": "qty", "input": None}}, {}, None),
    ({"$getField": {"field": "qty", "input": {"a": 1}}}, {}, MISSING),
    ({"$setField": {"field": "price.usd", "input": "$$ROOT", "value": 1}}, {"a": 1},
     {"a": 1, "price.usd": 1}),
    ({"$setField": {"field": "a", "input": {"a": 1, "b": 2}, "value": "$$REMOVE"}}, {},
     {"b": 2}),
    ({"$unsetField": {"field": {"$literal": "$price"}, "input": "$$ROOT"}}, {"$price": 1, "x": 2},
     {"x": 2}),
]

TYPES = [
    # type/
    ({"$type": "a"}, {}, "string"), ({"$type": Regex("a")}, {}, "regex"), ({"$type": 1}, {}, "int"),
    ({"$type": Int64(627)}, {}, "long"), ({"$type": {"$literal": {"x": 1}}}, {}, "object"),
    ({"$type": [[1, 2, 3]]}, {}, "array"), ({"$type": "$nope"}, {}, "missing"),
    ({"$type": None}, {}, "null"), ({"$type": 1.5}, {}, "double"),
    ({"$type": Decimal128("1")}, {}, "decimal"), ({"$type": DatetimeMS(0)}, {}, "date"),
    ({"$type": True}, {}, "bool"), ({"$type": ObjectId("5ab9cbfa31c2ab715d42129e")}, {},
                                    "objectId"),
    # isNumber/
    ({"$isNumber": 1}, {}, True), ({"$isNumber": "1"}, {}, False), ({"$isNumber": None}, {}, False),
    # convert/ toDouble/: true → 1, "-5.5" → -5.5, date → ms
    ({"$toDouble": True}, {}, 1.0), ({"$toDouble": False}, {}, 0.0), ({"$toDouble": 2.5}, {}, 2.5),
    ({"$toDouble": 5}, {}, 5.0), ({"$toDouble": Int64(10000)}, {}, 10000.0),
    ({"$toDouble": "-5.5"}, {}, -5.5), ({"$toDouble": "5e10"}, {}, 5e10),
    ({"$toDouble": d("2018-03-27T05:04:47.890Z")}, {}, 1522127087890.0),
    # toInt/: truncates, "-2" → -2, long → int
    ({"$toInt": 2.5}, {}, 2), ({"$toInt": -2.5}, {}, -2), ({"$toInt": "-2"}, {}, -2),
    ({"$toInt": Int64(10000)}, {}, 10000), ({"$toInt": True}, {}, 1),
    ({"$toInt": Decimal128("-5.5")}, {}, -5),
    # toLong/
    ({"$toLong": d("2018-03-26T04:38:28.044Z")}, {}, Int64(1522039108044)),
    ({"$toLong": "-2"}, {}, Int64(-2)), ({"$toLong": 2.5}, {}, Int64(2)),
    # toDecimal/: 2.5 (double) → 2.50000000000000
    ({"$toDecimal": True}, {}, Decimal128("1")), ({"$toDecimal": 2.5}, {}, Decimal128("2.50000000000000")),
    ({"$toDecimal": 5}, {}, Decimal128("5")), ({"$toDecimal": "-5.5"}, {}, Decimal128("-5.5")),
    ({"$toDecimal": d("2018-03-26T04:38:28.044Z")}, {}, Decimal128("1522039108044")),
    # toBool/
    ({"$toBool": 0}, {}, False), ({"$toBool": ""}, {}, True), ({"$toBool": "false"}, {}, True),
    ({"$toBool": None}, {}, None), ({"$toBool": Decimal128("0")}, {}, False),
    ({"$toBool": [[False]]}, {}, True),
    # toString/
    ({"$toString": 2.5}, {}, "2.5"), ({"$toString": 2}, {}, "2"), ({"$toString": 1.0}, {}, "1"),
    ({"$toString": d("2018-03-27T16:58:51.538Z")}, {}, "2018-03-27T16:58:51.538Z"),
    ({"$toString": ObjectId("5ab9cbfa31c2ab715d42129e")}, {}, "5ab9cbfa31c2ab715d42129e"),
    ({"$toString": Decimal128("2.50")}, {}, "2.50"), ({"$toString": True}, {}, "true"),
    # toDate/: double ms, decimal ms, long ms (also before 1970), date strings
    ({"$toDate": 120000000000.5}, {}, d("1973-10-20T21:20:00Z")),
    ({"$toDate": Decimal128("1253372036000.50")}, {}, d("2009-09-19T14:53:56Z")),
    ({"$toDate": Int64(1100000000000)}, {}, d("2004-11-09T11:33:20Z")),
    ({"$toDate": Int64(-1100000000000)}, {}, d("1935-02-22T12:26:40Z")),
    ({"$toDate": "2018-03-03"}, {}, d("2018-03-03T00:00:00Z")),
    ({"$toDate": "2018-03-20 11:00:06 +0500"}, {}, d("2018-03-20T06:00:06Z")),
    ({"$toDate": ObjectId("5ab9c3da31c2ab715d421285")}, {}, d("2018-03-27T04:08:58Z")),
    # toObjectId/
    ({"$toObjectId": "5ab9cbfa31c2ab715d42129e"}, {}, ObjectId("5ab9cbfa31c2ab715d42129e")),
    # convert/ with onError / onNull and numeric 'to'
    ({"$convert": {"input": "$x", "to": "int", "onError": "Error", "onNull": "Null"}},
     {"x": "5.5"}, "Error"),
    ({"$convert": {"input": "$x", "to": "int", "onError": "Error", "onNull": "Null"}}, {},
     "Null"),
    ({"$convert": {"input": "12", "to": 16}}, {}, 12),
    ({"$convert": {"input": 1, "to": "date", "onError": "no"}}, {}, "no"),
    ({"$convert": {"input": 1.5, "to": None}}, {}, None),
]


@pytest.mark.parametrize("expr,doc,expected", STRINGS + ARRAYS + OBJECTS + TYPES,
                         ids=[str(c[0])[:60] for c in STRINGS + ARRAYS + OBJECTS + TYPES])
def test_expression(expr: Any, doc: dict, expected: Any) -> None:
    if isinstance(expected, str) and expected.startswith("ERROR:"):
        with pytest.raises(MongoError) as e:
            ev(expr, doc)
        assert e.value.code == int(expected[6:])
        return
    got = ev(expr, doc)
    assert same(got, expected), (got, expected)


ERRORS = [
    ({"$concat": ["a", 1]}, 16702), ({"$substrCP": ["abc", -1, 1]}, 34455),
    ({"$substrCP": ["abc", 0, -1]}, 34454), ({"$substrCP": ["abc", 0.5, 1]}, 34451),
    ({"$substrBytes": ["cafétéria", 4, 1]}, 28656), ({"$substrBytes": ["cafétéria", 3, 1]}, 28657),
    ({"$strLenCP": 1}, 34471), ({"$strLenBytes": None}, 34473), ({"$split": ["a", ""]}, 40087),
    ({"$trim": {"input": 1}}, 50699), ({"$trim": "x"}, 50696), ({"$trim": {"chars": "x"}}, 50695),
    ({"$indexOfBytes": [1, "a"]}, 40091), ({"$indexOfCP": ["a", "b", -1]}, 40097),
    ({"$regexMatch": {"input": 1, "regex": "a"}}, 51104),
    ({"$regexMatch": {"input": "a", "regex": 1}}, 51105),
    ({"$regexMatch": {"input": "a", "regex": "a", "options": "z"}}, 51108),
    ({"$regexMatch": {"input": "a", "regex": Regex("a", "i"), "options": "m"}}, 51107),
    ({"$regexMatch": {"input": "a", "regex": "("}}, 51111),
    ({"$regexMatch": {"regex": "a"}}, 31022), ({"$regexMatch": "x"}, 51103),
    ({"$arrayElemAt": [1, 0]}, 28689), ({"$arrayElemAt": [[1], "a"]}, 28690),
    ({"$arrayElemAt": [[1], 1.5]}, 28691), ({"$size": "$nope"}, 17124),
    ({"$slice": [1, 1]}, 28724), ({"$slice": [[1], 1, 0]}, 28729), ({"$in": [1, 2]}, 40081),
    ({"$concatArrays": [[1], 2]}, 28664), ({"$range": [0, 1, 0]}, 34449),
    ({"$range": ["a", 1]}, 34443), ({"$zip": {"inputs": [1]}}, 34468),
    ({"$zip": {"inputs": [[1]], "defaults": [1]}}, 34466), ({"$reverseArray": 1}, 34435),
    ({"$indexOfArray": [1, 1]}, 40090), ({"$filter": {"input": 1, "cond": True}}, 28651),
    ({"$filter": {"input": []}}, 28650), ({"$map": {"input": 1, "in": 1}}, 16883),
    ({"$map": {"input": []}}, 16882), ({"$reduce": {"input": 1, "initialValue": 0, "in": 1}},
                                       40080),
    ({"$sortArray": {"input": 1, "sortBy": 1}}, 2942504),
    ({"$sortArray": {"input": [1]}}, 2942503),
    ({"$setUnion": [[1], 2]}, 17043), ({"$setEquals": [[1]]}, 17045),
    ({"$setIsSubset": [1, [1]]}, 17046), ({"$setDifference": [[1], 1]}, 17049),
    ({"$allElementsTrue": [1]}, 17040), ({"$anyElementTrue": [1]}, 17041),
    ({"$mergeObjects": [1]}, 40400), ({"$objectToArray": 1}, 40390),
    ({"$arrayToObject": [[1]]}, 40398), ({"$arrayToObject": [[["a", 1, 2]]]}, 40397),
    ({"$arrayToObject": [[[1, 2]]]}, 40395), ({"$arrayToObject": [[{"k": 1, "v": 2}]]}, 40394),
    ({"$firstN": {"n": 0, "input": [1]}}, 5787908), ({"$maxN": {"input": [1]}}, 5787906),
    ({"$toInt": "5.5"}, 241), ({"$toInt": 2**31 * 1.0}, 241), ({"$toInt": math.nan}, 241),
    ({"$toDate": 5}, 241), ({"$toObjectId": "x"}, 241), ({"$toDouble": "0x1"}, 241),
    ({"$convert": {"input": 1}}, 9), ({"$convert": {"to": "int"}}, 9),
    ({"$convert": {"input": 1, "to": "foo"}}, 2), ({"$convert": {"input": 1, "to": 1, "x": 1}}, 9),
    ({"$setField": {"field": "$a", "input": {}, "value": 1}}, 4161108),
]


@pytest.mark.parametrize("expr,code", ERRORS, ids=[str(c[0])[:50] for c in ERRORS])
def test_errors(expr: Any, code: int) -> None:
    with pytest.raises(MongoError) as e:
        ev(expr, {})
    assert e.value.code == code, e.value


def test_regex_flags_translation() -> None:
    assert ev({"$regexMatch": {"input": "A\nb", "regex": "^b", "options": "m"}}) is True
    assert ev({"$regexMatch": {"input": "a\nb", "regex": "a.b", "options": "s"}}) is True
    assert ev({"$regexMatch": {"input": "ab", "regex": "a b # comment", "options": "x"}}) is True
