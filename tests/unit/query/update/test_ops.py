"""Update tests: examples from the MongoDB manual pages of each operator ($set, $unset,
$inc, $mul, $min, $max, $rename, $setOnInsert, $currentDate, $push + modifiers,
$addToSet, $pull, $pullAll, $pop, $ (update), $[], $[<identifier>]), "Field Order" (5.0+
lexicographic processing), and error codes from src/mongo/db/update/*.cpp."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Decimal128, Int64, ObjectId, Timestamp
from bson.datetime_ms import DatetimeMS

from query.match import compile_filter
from query.update import compile_update, upsert_seed, validate_document_for_storage
from query.update.values import identical
from storage.errors import MongoError


def upd(doc: dict[str, Any], spec: Any, **kw: Any) -> dict[str, Any]:
    af = kw.pop("array_filters", None)
    new, _ = compile_update(spec, array_filters=af).apply(doc, **kw)
    return new


CASES = [
    # $set (manual): top-level, embedded, array element
    ({"_id": 100, "quantity": 250, "details": {"model": "14QQ", "make": "Clothes Corp"},
      "tags": ["apparel", "clothing"]},
     {"$set": {"quantity": 500, "details": {"model": "2600", "make": "Fashionaires"},
               "tags": ["coats", "outerwear", "clothing"]}},
     {"_id": 100, "quantity": 500, "details": {"model": "2600", "make": "Fashionaires"},
      "tags": ["coats", "outerwear", "clothing"]}),
    ({"_id": 100, "details": {"make": "X"}, "tags": ["a", "b"]},
     {"$set": {"details.make": "Kustom Kidz", "tags.1": "rain gear"}},
     {"_id": 100, "details": {"make": "Kustom Kidz"}, "tags": ["a", "rain gear"]}),
    # new fields are appended in lexicographic order (5.0+), numeric names numerically
    ({"_id": 1}, {"$set": {"c": 1, "a": 1, "b": {"z": 1, "y": 2}}},
     {"_id": 1, "a": 1, "b": {"z": 1, "y": 2}, "c": 1}),
    ({"_id": 1, "m": {}}, {"$set": {"m.10": 1, "m.9": 1, "m.b": 1}},
     {"_id": 1, "m": {"9": 1, "10": 1, "b": 1}}),
    ({"_id": 1, "a": [1]}, {"$set": {"a.3": 4}}, {"_id": 1, "a": [1, None, None, 4]}),
    ({"_id": 1}, {"$set": {"x.y.z": 1}}, {"_id": 1, "x": {"y": {"z": 1}}}),
    # $unset
    ({"_id": 1, "sku": "x", "quantity": 2, "instock": True},
     {"$unset": {"quantity": "", "instock": ""}}, {"_id": 1, "sku": "x"}),
    ({"_id": 1, "a": [1, 2, 3]}, {"$unset": {"a.1": 1}}, {"_id": 1, "a": [1, None, 3]}),
    ({"_id": 1}, {"$unset": {"a.b": 1}}, {"_id": 1}),
    # $inc (manual)
    ({"_id": 1, "sku": "abc123", "quantity": 10, "metrics": {"orders": 2, "ratings": 3.5}},
     {"$inc": {"quantity": -2, "metrics.orders": 1}},
     {"_id": 1, "sku": "abc123", "quantity": 8, "metrics": {"orders": 3, "ratings": 3.5}}),
    # $mul (manual): missing field gets 0 of the multiplier's type
    ({"_id": 1, "price": Decimal128("10.99"), "qty": 25},
     {"$mul": {"price": Decimal128("1.25"), "qty": 2}},
     {"_id": 1, "price": Decimal128("13.7375"), "qty": 50}),
    ({"_id": 2, "item": "Unknown"}, {"$mul": {"price": Int64(100)}},
     {"_id": 2, "item": "Unknown", "price": Int64(0)}),
    ({"_id": 3, "price": Int64(10)}, {"$mul": {"price": 2}}, {"_id": 3, "price": Int64(20)}),
    # $min / $max (manual)
    ({"_id": 1, "highScore": 800, "lowScore": 200},
     {"$min": {"lowScore": 150}, "$max": {"highScore": 950}},
     {"_id": 1, "highScore": 950, "lowScore": 150}),
    ({"_id": 1, "lowScore": 200}, {"$min": {"lowScore": 250}}, {"_id": 1, "lowScore": 200}),
    ({"_id": 1, "d": DatetimeMS(-100)}, {"$max": {"d": DatetimeMS(-5)}},
     {"_id": 1, "d": DatetimeMS(-5)}),
    ({"_id": 1, "v": "str"}, {"$min": {"v": 5}}, {"_id": 1, "v": 5}),  # BSON order: numbers < strings
    # $rename (manual)
    ({"_id": 1, "nmae": {"first": "george", "last": "washington"}, "alias": "x"},
     {"$rename": {"nmae": "name"}},
     {"_id": 1, "alias": "x", "name": {"first": "george", "last": "washington"}}),
    ({"_id": 1, "name": {"first": "g", "last": "w"}, "contact": {}},
     {"$rename": {"name.first": "name.fname", "name.last": "contact.lname"}},
     {"_id": 1, "name": {"fname": "g"}, "contact": {"lname": "w"}}),
    ({"_id": 1}, {"$rename": {"wife": "spouse"}}, {"_id": 1}),
    # $push with modifiers (manual "$push")
    ({"_id": 1, "scores": [44, 78, 38, 80]}, {"$push": {"scores": 89}},
     {"_id": 1, "scores": [44, 78, 38, 80, 89]}),
    ({"_id": 1, "scores": [44]}, {"$push": {"scores": {"$each": [90, 92, 85]}}},
     {"_id": 1, "scores": [44, 90, 92, 85]}),
    ({"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8},
                            {"wk": 3, "score": 5}, {"wk": 4, "score": 6}]},
     {"$push": {"quizzes": {"$each": [{"wk": 5, "score": 8}, {"wk": 6, "score": 7},
                                      {"wk": 7, "score": 6}],
                            "$sort": {"score": -1}, "$slice": 3}}},
     {"_id": 5, "quizzes": [{"wk": 1, "score": 10}, {"wk": 2, "score": 8},
                            {"wk": 5, "score": 8}]}),
    ({"_id": 1, "scores": [100]}, {"$push": {"scores": {"$each": [50, 60, 70], "$position": 0}}},
     {"_id": 1, "scores": [50, 60, 70, 100]}),
    ({"_id": 1, "scores": [50, 60, 70, 100]},
     {"$push": {"scores": {"$each": [20, 30], "$position": -2}}},
     {"_id": 1, "scores": [50, 60, 20, 30, 70, 100]}),
    ({"_id": 1, "scores": [40, 50, 60]}, {"$push": {"scores": {"$each": [80, 78, 86],
                                                                "$slice": -5}}},
     {"_id": 1, "scores": [50, 60, 80, 78, 86]}),
    ({"_id": 1, "t": [3, 1]}, {"$push": {"t": {"$each": [2], "$sort": 1}}},
     {"_id": 1, "t": [1, 2, 3]}),
    ({"_id": 1}, {"$push": {"n": 1}}, {"_id": 1, "n": [1]}),
    # $addToSet (manual)
    ({"_id": 1, "letters": ["a", "b"]}, {"$addToSet": {"letters": ["c", "d"]}},
     {"_id": 1, "letters": ["a", "b", ["c", "d"]]}),
    ({"_id": 2, "tags": ["electronics", "supplies"]},
     {"$addToSet": {"tags": {"$each": ["camera", "electronics", "accessories", "camera"]}}},
     {"_id": 2, "tags": ["electronics", "supplies", "camera", "accessories"]}),
    ({"_id": 1, "n": [1]}, {"$addToSet": {"n": 1.0}}, {"_id": 1, "n": [1]}),
    # $pop
    ({"_id": 1, "scores": [8, 9, 10]}, {"$pop": {"scores": -1}}, {"_id": 1, "scores": [9, 10]}),
    ({"_id": 1, "scores": [9, 10]}, {"$pop": {"scores": 1}}, {"_id": 1, "scores": [9]}),
    # $pull (manual)
    ({"_id": 1, "fruits": ["apples", "pears", "oranges", "grapes", "bananas"],
      "vegetables": ["carrots", "celery", "squash", "carrots"]},
     {"$pull": {"fruits": {"$in": ["apples", "oranges"]}, "vegetables": "carrots"}},
     {"_id": 1, "fruits": ["pears", "grapes", "bananas"], "vegetables": ["celery", "squash"]}),
    ({"_id": 1, "votes": [3, 5, 6, 7, 7, 8]}, {"$pull": {"votes": {"$gte": 6}}},
     {"_id": 1, "votes": [3, 5]}),
    ({"_id": 1, "results": [{"item": "A", "score": 5}, {"item": "B", "score": 8, "x": 1}]},
     {"$pull": {"results": {"score": 8, "item": "B"}}},
     {"_id": 1, "results": [{"item": "A", "score": 5}]}),
    ({"_id": 1, "results": [{"answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]},
                            {"answers": [{"q": 1, "a": 0}, {"q": 2, "a": 8}]}]},
     {"$pull": {"results": {"answers": {"$elemMatch": {"q": 2, "a": {"$gte": 8}}}}}},
     {"_id": 1, "results": [{"answers": [{"q": 1, "a": 4}, {"q": 2, "a": 6}]}]}),
    # $pullAll
    ({"_id": 1, "scores": [0, 2, 5, 5, 1, 0]}, {"$pullAll": {"scores": [0, 5]}},
     {"_id": 1, "scores": [2, 1]}),
]


@pytest.mark.parametrize(("doc", "spec", "expected"), CASES)
def test_operator_examples(doc: dict[str, Any], spec: dict[str, Any],
                           expected: dict[str, Any]) -> None:
    new = upd(doc, spec)
    assert identical(new, expected), new


def test_positional_operator() -> None:
    # manual "$ (update)": db.students.updateOne({_id: 1, grades: 80}, {$set: {"grades.$": 82}})
    doc = {"_id": 1, "grades": [85, 80, 80]}
    m = compile_filter({"_id": 1, "grades": 80})
    ok, pos = m.match_position(doc)
    assert ok and pos == 1
    assert upd(doc, {"$set": {"grades.$": 82}}, matched_position=pos) == \
        {"_id": 1, "grades": [85, 82, 80]}
    doc2 = {"_id": 4, "grades": [{"grade": 80, "mean": 75, "std": 8},
                                 {"grade": 85, "mean": 90, "std": 5}]}
    _, pos2 = compile_filter({"_id": 4, "grades.grade": 85}).match_position(doc2)
    assert upd(doc2, {"$set": {"grades.$.std": 6}}, matched_position=pos2)["grades"][1] == \
        {"grade": 85, "mean": 90, "std": 6}
    with pytest.raises(MongoError) as exc:
        upd(doc, {"$set": {"grades.$": 1}})
    assert exc.value.code == 2 and "positional operator did not find the match" in exc.value.errmsg


def test_all_positional_and_array_filters() -> None:
    # manual "$[]": {$inc: {"grades.$[]": 10}}
    assert upd({"_id": 1, "grades": [85, 82, 80]}, {"$inc": {"grades.$[]": 10}}) == \
        {"_id": 1, "grades": [95, 92, 90]}
    # manual "$[<identifier>]": arrayFilters [{element: {$gte: 100}}]
    assert upd({"_id": 1, "grades": [95, 92, 90, 102, 100]},
               {"$set": {"grades.$[element]": 100}},
               array_filters=[{"element": {"$gte": 100}}]) == \
        {"_id": 1, "grades": [95, 92, 90, 100, 100]}
    doc = {"_id": 2, "grades": [{"grade": 90, "mean": 75, "std": 8},
                                {"grade": 87, "mean": 90, "std": 5},
                                {"grade": 85, "mean": 85, "std": 6}]}
    new = upd(doc, {"$set": {"grades.$[elem].mean": 100}},
              array_filters=[{"elem.grade": {"$gte": 85}, "elem.std": {"$gte": 6}}])
    assert [g["mean"] for g in new["grades"]] == [100, 90, 100]
    # nested: $[] then $[<id>]
    doc3 = {"_id": 1, "a": [{"b": [1, 5]}, {"b": [7]}]}
    assert upd(doc3, {"$inc": {"a.$[].b.$[x]": 1}}, array_filters=[{"x": {"$gt": 4}}]) == \
        {"_id": 1, "a": [{"b": [1, 6]}, {"b": [8]}]}


def test_numeric_promotion() -> None:
    assert upd({"a": 2**31 - 1}, {"$inc": {"a": 1}})["a"] == Int64(2**31)
    assert type(upd({"a": 2**31 - 1}, {"$inc": {"a": 1}})["a"]) is Int64
    assert type(upd({"a": 1}, {"$inc": {"a": 1}})["a"]) is int
    assert type(upd({"a": 1}, {"$inc": {"a": Int64(1)}})["a"]) is Int64
    assert upd({"a": 1}, {"$inc": {"a": 0.5}})["a"] == 1.5
    assert upd({"a": Int64(3)}, {"$inc": {"a": Decimal128("0.1")}})["a"] == Decimal128("3.1")
    assert type(upd({"a": 70000}, {"$mul": {"a": 70000}})["a"]) is Int64
    with pytest.raises(MongoError) as exc:
        upd({"_id": 1, "a": Int64(2**63 - 1)}, {"$inc": {"a": 1}})
    assert exc.value.code == 2 and "Failed to apply $inc" in exc.value.errmsg


def test_noop_detection_is_type_strict() -> None:
    u = compile_update({"$set": {"a": 1}})
    assert u.apply({"a": 1})[1] is False
    assert u.apply({"a": 1.0})[1] is True
    assert compile_update({"$min": {"a": 5}}).apply({"a": 1})[1] is False
    assert compile_update({"$pull": {"a": 9}}).apply({"a": [1]})[1] is False


def test_current_date_and_set_on_insert() -> None:
    new = upd({"_id": 1}, {"$currentDate": {"d": True, "t": {"$type": "timestamp"}}})
    assert isinstance(new["d"], DatetimeMS) and isinstance(new["t"], Timestamp)
    u = compile_update({"$set": {"item": "apple"}, "$setOnInsert": {"defaultQty": 100}})
    assert u.apply({"_id": 1})[0] == {"_id": 1, "item": "apple"}
    assert u.apply({"_id": 1}, is_insert=True)[0] == {"_id": 1, "defaultQty": 100,
                                                      "item": "apple"}


def test_replacement() -> None:
    u = compile_update({"b": 2})
    assert u.is_replacement
    assert u.apply({"_id": 7, "a": 1}) == ({"_id": 7, "b": 2}, True)
    assert compile_update({"b": 2, "_id": 7}).apply({"_id": 7, "a": 1})[0] == {"_id": 7, "b": 2}
    with pytest.raises(MongoError) as exc:
        compile_update({"_id": 8}).apply({"_id": 7})
    assert exc.value.code == 66
    with pytest.raises(MongoError) as exc:  # checked when it replaces a document
        compile_update({"a": 1, "$set": {"b": 1}}).apply({"_id": 7})
    assert exc.value.code == 52
    # an upsert's new document is an insert: top-level $ fields may be stored
    assert compile_update({"a": 1, "$set": {"b": 1}}).upsert_document({"_id": 7}) == \
        {"_id": 7, "a": 1, "$set": {"b": 1}}


def test_dollar_fields_written_by_operators() -> None:
    u = compile_update({"$set": {"$a": 1}})
    with pytest.raises(MongoError) as exc:
        u.apply({"_id": 1})
    assert exc.value.code == 52 and "'$a' in '$a'" in exc.value.errmsg
    assert u.upsert_document({"_id": 1}) == {"_id": 1, "$a": 1}
    # below an existing top-level $ field, or nested, operators may write
    assert compile_update({"$set": {"$a.b": 2}}).apply({"_id": 1, "$a": {"b": 1}})[0] == \
        {"_id": 1, "$a": {"b": 2}}
    assert compile_update({"$set": {"x.$y": 2}}).apply({"_id": 1})[0] == {"_id": 1, "x": {"$y": 2}}
    # a document holding a $ field can still be updated elsewhere, and the field unset
    assert compile_update({"$set": {"v": 1}}).apply({"_id": 1, "$a": 0})[0] == \
        {"_id": 1, "$a": 0, "v": 1}
    assert compile_update({"$unset": {"$a": 1}}).apply({"_id": 1, "$a": 0})[0] == {"_id": 1}
    with pytest.raises(MongoError) as exc:  # a malformed DBRef
        compile_update({"_id": 1, "$ref": 1}).apply({"_id": 1})
    assert exc.value.code == 55
    assert compile_update({"_id": 1, "$ref": "c", "$id": 2}).apply({"_id": 1})[0] == \
        {"_id": 1, "$ref": "c", "$id": 2}


def test_upsert_seed_and_document() -> None:
    assert upsert_seed({"a": 1, "b.c": {"$eq": 2}, "d": {"$gt": 1}, "$and": [{"e": 3}],
                        "f": {"$in": [4]}, "g": {"$in": [1, 2]}}) == \
        {"a": 1, "b": {"c": 2}, "e": 3, "f": 4}
    doc = compile_update({"$set": {"x": 1}}).upsert_document({"name": "n", "_id": 5})
    assert doc == {"_id": 5, "name": "n", "x": 1}
    gen = compile_update({"$inc": {"n": 1}}).upsert_document({"k": "v"})
    assert list(gen) == ["_id", "k", "n"] and isinstance(gen["_id"], ObjectId)
    repl = compile_update({"v": 1}).upsert_document({"_id": 3, "k": 1})
    assert repl == {"_id": 3, "v": 1}
    with pytest.raises(MongoError) as exc:
        upsert_seed({"$and": [{"a": 1}, {"a": 2}]})
    assert exc.value.code == 54
    with pytest.raises(MongoError) as exc:
        upsert_seed({"a": 1, "a.b": 2})
    assert exc.value.code == 54


ERRORS = [
    ({"$set": {}}, None, 9, "'$set' is empty. You must specify a field like so: "
                            "{$set: {<field>: ...}}"),
    ({"$foo": {"a": 1}}, None, 9, "Unknown modifier: $foo. Expected a valid update modifier or "
                                  "pipeline-style update specified as an array"),
    ({"$set": 5}, None, 9, "Modifiers operate on fields but we found type int instead"),
    ({"$set": {"a": 1}, "$inc": {"a": 1}}, None, 40,
     "Updating the path 'a' would create a conflict at 'a'"),
    ({"$set": {"a.b": 1, "a": 1}}, None, 40, "Updating the path 'a' would create a conflict at 'a'"),
    ({"$set": {"a": 1, "a.b": 1}}, None, 40,
     "Updating the path 'a.b' would create a conflict at 'a'"),
    ({"$rename": {"a": "b"}, "$set": {"b": 1}}, None, 40, "conflict at 'b'"),
    ({"$inc": {"a": "x"}}, None, 14, "Cannot increment with non-numeric argument: {a: \"x\"}"),
    ({"$mul": {"a": None}}, None, 14, "Cannot multiply with non-numeric argument"),
    ({"$set": {"a..b": 1}}, None, 56, "The update path 'a..b' contains an empty field name"),
    ({"$set": {"$.a": 1}}, None, 2, "Cannot have positional (i.e. '$') element in the first"),
    ({"$set": {"a.$.b.$": 1}}, None, 2, "Too many positional (i.e. '$') elements found"),
    ({"$pop": {"a": 2}}, None, 9, "$pop expects 1 or -1, found: 2"),
    ({"$pullAll": {"a": 1}}, None, 2, "$pullAll requires an array argument"),
    ({"$push": {"a": {"$each": 1}}}, None, 2, "The argument to $each in $push must be an array"),
    ({"$push": {"a": {"$each": [], "$bad": 1}}}, None, 2, "Unrecognized clause in $push: $bad"),
    ({"$push": {"a": {"$each": [], "$sort": 2}}}, None, 2, "The $sort is invalid"),
    ({"$push": {"a": {"$each": [], "$slice": "x"}}}, None, 2, "The value for $slice must be"),
    ({"$addToSet": {"a": {"$each": 1}}}, None, 2, "The argument to $each in $addToSet"),
    ({"$rename": {"a": 1}}, None, 2, "The 'to' field for $rename must be a string"),
    ({"$rename": {"a": "a.b"}}, None, 2, "must not be on the same path"),
    ({"$rename": {"a.$": "b"}}, None, 2, "The source field for $rename may not be dynamic"),
    ({"$currentDate": {"a": {"$type": "x"}}}, None, 2, "The '$type' string field is required"),
    ({"$set": {"a.$[x]": 1}}, None, 2, "No array filter found for identifier 'x' in path"),
    ({"$set": {"a": 1}}, [{"x": 1}], 9, "The array filter for identifier 'x' was not used"),
    ({"$set": {"a.$[x]": 1}}, [{"x": 1}, {"x": 2}], 9,
     "Found multiple array filters with the same top-level field name x"),
    ({"$set": {"a.$[X]": 1}}, [{"X": 1}], 2, "must be an alphanumeric string beginning with a "
                                            "lowercase letter"),
    ({"$set": {"a.$[x]": 1}}, [{"x": 1, "y": 2}], 9, "Expected a single top-level field name"),
    ([{"$set": {"a": 1}}], [{"x": 1}], 9,
     "arrayFilters may not be specified for pipeline-style updates"),
    ([{"$match": {}}], None, 72, "$match is not allowed to be used within an update"),
]


@pytest.mark.parametrize(("spec", "af", "code", "fragment"), ERRORS)
def test_parse_errors(spec: Any, af: Any, code: int, fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_update(spec, array_filters=af)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


APPLY_ERRORS = [
    ({"_id": 1, "a": "s"}, {"$inc": {"a": 1}}, 14,
     "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of "
     "non-numeric type string"),
    ({"_id": 1}, {"$set": {"_id": 2}}, 66,
     "Performing an update on the path '_id' would modify the immutable field '_id'"),
    ({"_id": 1}, {"$unset": {"_id": 1}}, 66, "would modify the immutable field '_id'"),
    ({"_id": 1, "a": 5}, {"$set": {"a.b": 1}}, 28, "Cannot create field 'b' in element {a: 5}"),
    ({"_id": 1, "a": [1]}, {"$set": {"a.x": 1}}, 28, "Cannot create field 'x' in element"),
    ({"_id": 1, "a": 5}, {"$push": {"a": 1}}, 2, "The field 'a' must be an array but is of type "
                                                 "int in document {_id: 1}"),
    ({"_id": 1, "a": 5}, {"$addToSet": {"a": 1}}, 2, "Cannot apply $addToSet to non-array field"),
    ({"_id": 1, "a": 5}, {"$pull": {"a": 1}}, 2, "Cannot apply $pull to a non-array value"),
    ({"_id": 1, "a": 5}, {"$pop": {"a": 1}}, 2, "Path 'a' contains an element of non-array type"),
    ({"_id": 1}, {"$set": {"a.$[]": 1}}, 2, "The path 'a' must exist in the document in order to "
                                            "apply array updates."),
    ({"_id": 1, "a": 3}, {"$set": {"a.$[]": 1}}, 2, "Cannot apply array updates to non-array "
                                                    "element a: 3"),
    ({"_id": 1, "a": [1]}, {"$rename": {"a.0": "b"}}, 2, "The source field cannot be an array"),
    ({"_id": 1}, {"$set": {"_id": [1]}}, 66, "immutable"),
]


@pytest.mark.parametrize(("doc", "spec", "code", "fragment"), APPLY_ERRORS)
def test_apply_errors(doc: dict[str, Any], spec: dict[str, Any], code: int,
                      fragment: str) -> None:
    with pytest.raises(MongoError) as exc:
        compile_update(spec).apply(doc)
    assert exc.value.code == code
    assert fragment in exc.value.errmsg


def test_id_rules_on_upsert_and_insert() -> None:
    with pytest.raises(MongoError) as exc:
        compile_update({"$set": {"_id": [1]}}).upsert_document({})
    assert exc.value.code == 53
    validate_document_for_storage({"$a": 1, "b.c": 2})  # MongoDB 5.0+: both may be inserted
    with pytest.raises(MongoError) as exc:
        validate_document_for_storage({"_id": [1]})
    assert (exc.value.code, exc.value.errmsg) == (2, "can't use an array for _id")
    validate_document_for_storage({"_id": {"a": 1}, "x": {"$y": 1}})  # nested $ is allowed


def test_input_document_is_not_mutated() -> None:
    doc = {"_id": 1, "a": {"b": [1, 2]}}
    compile_update({"$push": {"a.b": 3}, "$set": {"c": 1}}).apply(doc)
    assert doc == {"_id": 1, "a": {"b": [1, 2]}}
