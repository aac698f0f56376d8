"""`$jsonSchema` keyword by keyword: what matches, what does not, and the parse errors
(MongoDB's codes and messages, json_schema_parser.cpp)."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Binary, Decimal128, Int64, ObjectId

from query.match import compile_filter, compile_validator
from storage.errors import MongoError
from storage.vocabulary.missing import MISSING


def _ok(schema: dict[str, Any], doc: dict[str, Any]) -> bool:
    return compile_filter({"$jsonSchema": schema}).matches(doc)


def _prop(sub: dict[str, Any], value: Any) -> bool:
    """`sub` as the schema of property `a` holding `value` (MISSING: absent)."""
    doc = {} if value is MISSING else {"a": value}
    return _ok({"properties": {"a": sub}}, doc)


CASES: list[tuple[dict[str, Any], list[Any], list[Any]]] = [
    # schema for property a, values that pass, values that fail
    ({"bsonType": "int"}, [1, MISSING], ["1", 1.5, Int64(1), None, [1]]),
    ({"bsonType": "long"}, [Int64(3), 2**40], [3]),
    ({"bsonType": "number"}, [1, 1.5, Int64(2), Decimal128("1")], ["1", True]),
    ({"bsonType": ["string", "null"]}, ["x", None], [1]),
    ({"bsonType": "objectId"}, [ObjectId()], ["x"]),
    ({"bsonType": "array"}, [[], [1]], [{}]),
    ({"bsonType": "bool"}, [True], [0]),
    ({"type": "number"}, [1, 2.5], ["1"]),
    ({"type": "boolean"}, [False], [0]),
    ({"type": ["object", "array"]}, [{}, []], ["x"]),
    ({"minimum": 3}, [3, 4.5, "not a number", MISSING], [2, 2.9]),
    ({"minimum": 3, "exclusiveMinimum": True}, [3.1], [3]),
    ({"maximum": 3}, [3, Decimal128("2.5")], [4]),
    ({"maximum": 3, "exclusiveMaximum": True}, [2], [3]),
    ({"multipleOf": 3}, [9, 0, Int64(-6), "x"], [10, 4.5]),
    ({"multipleOf": 0.1}, [0.3, 1], [0.35]),
    ({"minLength": 2}, ["ab", "é€", 5], ["a", ""]),
    ({"maxLength": 2}, ["ab", "😀😀"], ["abc"]),
    ({"pattern": "^a.c$"}, ["abc", 1], ["abcd", "xbc"]),
    ({"pattern": "b"}, ["abc"], ["ac"]),
    ({"minItems": 2}, [[1, 2], "x"], [[1]]),
    ({"maxItems": 1}, [[], [1]], [[1, 2]]),
    ({"uniqueItems": True}, [[1, 2], [{"a": 1, "b": 2}, {"a": 2}]],
     [[1, 1.0], [{"a": 1, "b": 2}, {"b": 2, "a": 1}]]),
    ({"uniqueItems": False}, [[1, 1]], []),
    ({"items": {"bsonType": "int"}}, [[1, 2], [], 5], [[1, "x"]]),
    ({"items": [{"bsonType": "int"}, {"bsonType": "string"}]}, [[1], [1, "x", None]],
     [["x"], [1, 2]]),
    ({"items": [{"bsonType": "int"}], "additionalItems": False}, [[1], []], [[1, 2]]),
    ({"items": [{}], "additionalItems": {"bsonType": "string"}}, [[1, "x"]], [[1, 2]]),
    ({"items": {}, "additionalItems": False}, [[1, 2, 3]], []),  # only with an items array
    ({"required": ["x"]}, [{"x": None}, 5], [{}]),
    ({"properties": {"x": {"bsonType": "int"}}}, [{"x": 1}, {}, "s"], [{"x": "1"}]),
    ({"minProperties": 1}, [{"x": 1}], [{}]),
    ({"maxProperties": 1}, [{"x": 1}], [{"x": 1, "y": 2}]),
    ({"additionalProperties": False, "properties": {"x": {}}}, [{"x": 1}, {}], [{"y": 1}]),
    ({"additionalProperties": {"bsonType": "int"}, "properties": {"x": {}}},
     [{"x": "s", "y": 1}], [{"y": "s"}]),
    ({"patternProperties": {"^n_": {"bsonType": "int"}}, "additionalProperties": False},
     [{"n_1": 1}], [{"n_1": "x"}, {"m": 1}]),
    ({"dependencies": {"x": ["y"]}}, [{"x": 1, "y": 2}, {"y": 1}, {}], [{"x": 1}]),
    ({"dependencies": {"x": {"required": ["z"]}}}, [{"x": 1, "z": 2}, {}], [{"x": 1}]),
    ({"enum": [1, "two", {"a": 1, "b": 2}]}, [1, 1.0, "two", {"b": 2, "a": 1}, MISSING],
     [2, "Two", None]),
    ({"allOf": [{"bsonType": "int"}, {"minimum": 2}]}, [2], [1, "x"]),
    ({"anyOf": [{"bsonType": "int"}, {"bsonType": "string"}]}, [1, "x"], [1.5]),
    ({"oneOf": [{"minimum": 5}, {"maximum": 10}]}, [1, 11], [7]),
    ({"not": {"bsonType": "string"}}, [1], ["x"]),
    ({"title": "t", "description": "d"}, [1, MISSING], []),
]


@pytest.mark.parametrize(("sub", "good", "bad"), CASES)
def test_keyword_on_a_property(sub: dict[str, Any], good: list[Any], bad: list[Any]) -> None:
    for v in good:
        assert _prop(sub, v), (sub, v)
    for v in bad:
        assert not _prop(sub, v), (sub, v)


def test_required_property_schema_sees_the_missing_value() -> None:
    schema = {"required": ["a"], "properties": {"a": {"bsonType": "int"}}}
    assert not _ok(schema, {})
    assert _ok({"properties": {"a": {"bsonType": "int"}}}, {})


def test_top_level_reading() -> None:
    # scalar and array keywords are inert at the top: documents are objects
    assert _ok({"minimum": 5, "maxLength": 0, "items": {"bsonType": "int"}}, {"a": 1})
    assert _ok({"bsonType": "object", "required": ["a"]}, {"a": 1})
    assert not _ok({"bsonType": "int"}, {"a": 1})
    assert not _ok({"bsonType": "int", "required": ["a"]}, {"a": 1})
    # enum at the top compares whole documents (field order aside); non-objects never match
    assert _ok({"enum": [{"a": 1, "b": 2}]}, {"b": 2, "a": 1})
    assert not _ok({"enum": [{"a": 1}, 5]}, {"a": 2})
    assert not _ok({"enum": [5]}, {"a": 1})
    assert _ok({"minProperties": 1, "maxProperties": 2}, {"a": 1})
    assert not _ok({"maxProperties": 1}, {"a": 1, "b": 2})
    assert _ok({"allOf": [{"required": ["a"]}], "not": {"required": ["b"]}}, {"a": 1})


def test_nested_objects_and_arrays() -> None:
    schema = {"properties": {"o": {"bsonType": "object", "required": ["x"],
                                   "properties": {"x": {"items": {"minimum": 0}}}}}}
    assert _ok(schema, {"o": {"x": [0, 1]}})
    assert not _ok(schema, {"o": {"x": [0, -1]}})
    assert not _ok(schema, {"o": {}})
    assert not _ok(schema, {"o": [{"x": [1]}]})  # no implicit array traversal


def test_encrypt_only_in_a_validator() -> None:
    schema = {"$jsonSchema": {"properties": {"ssn": {"encrypt": {"bsonType": "string"}}}}}
    m = compile_validator(schema)
    assert m.matches({"ssn": Binary(b"\x01", 6)})
    assert not m.matches({"ssn": "123"})
    assert m.matches({})
    with pytest.raises(MongoError) as exc:
        compile_filter(schema)
    assert exc.value.code == 224
    with pytest.raises(MongoError) as exc:
        compile_validator(schema, allow_encryption=False)
    assert exc.value.code == 224
    assert compile_validator({"$jsonSchema": {"encryptMetadata": {"algorithm": "x"}}}).matches({})


BAD: list[tuple[Any, int, str]] = [
    (5, 14, "$jsonSchema must be an object"),
    ({"$ref": "#"}, 9, "$jsonSchema keyword '$ref' is not currently supported"),
    ({"$schema": "x"}, 9, "$jsonSchema keyword '$schema' is not currently supported"),
    ({"definitions": {}}, 9, "$jsonSchema keyword 'definitions' is not currently supported"),
    ({"id": "x"}, 9, "$jsonSchema keyword 'id' is not currently supported"),
    ({"format": "x"}, 9, "$jsonSchema keyword 'format' is not currently supported"),
    ({"default": 1}, 9, "$jsonSchema keyword 'default' is not currently supported"),
    ({"nope": 1}, 9, "Unknown $jsonSchema keyword: nope"),
    ({"title": 1}, 14, "$jsonSchema keyword 'title' must be of type string"),
    ({"description": 1}, 14, "$jsonSchema keyword 'description' must be of type string"),
    ({"type": "x", "bsonType": "int"}, 9,
     "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'"),
    ({"type": 1}, 14, "$jsonSchema keyword 'type' must be either a string or an array of strings"),
    ({"bsonType": [1]}, 14, "$jsonSchema keyword 'bsonType' array elements must be strings"),
    ({"type": "integer"}, 9, "$jsonSchema type 'integer' is not currently supported."),
    ({"type": "int"}, 2, "Unknown type name alias: int"),
    ({"bsonType": ["int", "int"]}, 9, "$jsonSchema keyword 'bsonType' has duplicate value: int"),
    ({"bsonType": []}, 9, "$jsonSchema keyword 'bsonType' must name at least one type"),
    ({"minimum": "1"}, 14, "$jsonSchema keyword 'minimum' must be a number"),
    ({"maximum": 1, "exclusiveMaximum": 1}, 14,
     "$jsonSchema keyword 'exclusiveMaximum' must be a boolean"),
    ({"exclusiveMinimum": True}, 9,
     "$jsonSchema keyword 'minimum' must be a present if exclusiveMinimum is present"),
    ({"multipleOf": 0}, 9, "$jsonSchema keyword 'multipleOf' must have a positive value"),
    ({"multipleOf": "2"}, 14, "$jsonSchema keyword 'multipleOf' must be a number"),
    ({"minLength": "2"}, 9, "Expected a number in: minLength: \"2\""),
    ({"minLength": 1.5}, 9, "Expected an integer: minLength: 1.5"),
    ({"maxItems": -1}, 9, "Expected a positive number in: maxItems: -1"),
    ({"pattern": 1}, 14, "$jsonSchema keyword 'pattern' must be a string"),
    ({"pattern": "("}, 51091, None),
    ({"uniqueItems": 1}, 14, "$jsonSchema keyword 'uniqueItems' must be a boolean"),
    ({"items": 1}, 14, "$jsonSchema keyword 'items' must be an array or an object, not int"),
    ({"items": [1]}, 14, "$jsonSchema keyword 'items' requires that each element of the "
                         "array is an object, but found a int"),
    ({"additionalItems": 1}, 14, "$jsonSchema keyword 'additionalItems' must be either an "
                                 "object or a boolean, but got a int"),
    ({"required": "a"}, 14, "$jsonSchema keyword 'required' must be an array, but found an "
                            "element of type string"),
    ({"required": [1]}, 14, "$jsonSchema keyword 'required' must be an array of strings, but "
                            "found an element of type: int"),
    ({"required": ["a", "a"]}, 9, "$jsonSchema keyword 'required' array cannot contain "
                                  "duplicate values"),
    ({"required": []}, 9, "$jsonSchema keyword 'required' cannot be an empty array"),
    ({"properties": 1}, 14, "$jsonSchema keyword 'properties' must be an object"),
    ({"properties": {"a": 1}}, 14, "Nested schema for $jsonSchema property 'a' must be an object"),
    ({"patternProperties": {"a": 1}}, 14,
     "$jsonSchema keyword 'patternProperties' has property 'a' which is not an object"),
    ({"additionalProperties": 1}, 14,
     "$jsonSchema keyword 'additionalProperties' must be an object or a boolean"),
    ({"dependencies": {"a": 1}}, 14, "property 'a' in $jsonSchema keyword 'dependencies' must "
                                     "be either an object or an array"),
    ({"dependencies": {"a": []}}, 9, "property 'a' in $jsonSchema keyword 'dependencies' cannot "
                                     "be an empty array"),
    ({"dependencies": {"a": ["b", "b"]}}, 9, "array 'a' in $jsonSchema keyword 'dependencies' "
                                             "contains duplicate element: b"),
    ({"allOf": {}}, 14, "$jsonSchema keyword 'allOf' must be an array"),
    ({"oneOf": []}, 2, "$jsonSchema keyword 'oneOf' must be a non-empty array"),
    ({"anyOf": [1]}, 14, "$jsonSchema keyword 'anyOf' must be an array of objects, but found "
                         "an element of type int"),
    ({"not": []}, 14, "$jsonSchema keyword 'not' must be an object, but found an element of "
                      "type array"),
    ({"enum": 1}, 14, "$jsonSchema keyword 'enum' must be an array, but found an element of "
                      "type int"),
    ({"enum": []}, 9, "$jsonSchema keyword 'enum' cannot be an empty array"),
    ({"enum": [{"a": 1, "b": 1}, {"b": 1, "a": 1}]}, 9,
     "$jsonSchema keyword 'enum' array cannot contain duplicate values."),
    ({"properties": {"a": {"properties": {"b": {"nope": 1}}}}}, 9,
     "Unknown $jsonSchema keyword: nope"),
]


@pytest.mark.parametrize(("schema", "code", "message"), BAD)
def test_parse_errors(schema: Any, code: int, message: str | None) -> None:
    with pytest.raises(MongoError) as exc:
        compile_filter({"$jsonSchema": schema})
    assert exc.value.code == code
    if message is not None:
        assert exc.value.errmsg == message
