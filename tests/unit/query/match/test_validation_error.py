"""errInfo `details` for failing documents, shaped as MongoDB's doc_validation_error.cpp
builds them: $jsonSchema keyword by keyword, and query-operator validators."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Int64, Regex

from query.match import compile_validator
from query.match.validation_error import validation_error_info


def _rules(schema: dict[str, Any], doc: dict[str, Any]) -> list[dict[str, Any]]:
    m = compile_validator({"$jsonSchema": schema})
    assert not m.matches(doc)
    details = validation_error_info(m, {"_id": 1, **doc})["details"]
    assert details["operatorName"] == "$jsonSchema"
    return list(details["schemaRulesNotSatisfied"])


def _prop(sub: dict[str, Any], value: Any) -> list[dict[str, Any]]:
    """The details for property `a` (schema `sub`) holding `value`."""
    [rule] = _rules({"properties": {"a": sub}}, {"a": value})
    assert rule["operatorName"] == "properties"
    [prop] = rule["propertiesNotSatisfied"]
    assert prop["propertyName"] == "a"
    return list(prop["details"])


def _leaf(kw: str, spec: Any, reason: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"operatorName": kw, "specifiedAs": {kw: spec}, "reason": reason,
            "consideredValue": value, **extra}


LEAVES = [
    ({"bsonType": "int"}, "x", [_leaf("bsonType", "int", "type did not match", "x",
                                      consideredType="string")]),
    ({"type": "array"}, Int64(1), [_leaf("type", "array", "type did not match", Int64(1),
                                         consideredType="long")]),
    ({"minimum": 5}, 4, [_leaf("minimum", 5, "comparison failed", 4)]),
    ({"maximum": 5}, 6.5, [_leaf("maximum", 5, "comparison failed", 6.5)]),
    ({"minLength": 3}, "ab", [_leaf("minLength", 3, "specified string length was not "
                                                     "satisfied", "ab")]),
    ({"maxLength": 1}, "ab", [_leaf("maxLength", 1, "specified string length was not "
                                                     "satisfied", "ab")]),
    ({"pattern": "^z"}, "ab", [_leaf("pattern", "^z", "regular expression did not match",
                                     "ab")]),
    ({"multipleOf": 2}, 3, [_leaf("multipleOf", 2, "considered value is not a multiple of "
                                                   "the specified value", 3)]),
    ({"enum": [1, 2]}, 3, [_leaf("enum", [1, 2], "value was not found in enum", 3)]),
    ({"minItems": 2}, [1], [_leaf("minItems", 2, "array did not match specified length", [1],
                                  numberOfItems=1)]),
    ({"uniqueItems": True}, [1, 2, 1], [_leaf("uniqueItems", True, "found a duplicate item",
                                              [1, 2, 1], duplicatedValue=1)]),
    ({"not": {"bsonType": "int"}}, 1, [{"operatorName": "not",
                                        "reason": "child expression matched"}]),
    # a restriction on the wrong type says nothing: the type keyword does
    ({"bsonType": "int", "minimum": 5}, "x", [_leaf("bsonType", "int", "type did not match",
                                                    "x", consideredType="string")]),
]


@pytest.mark.parametrize(("sub", "value", "expected"), LEAVES)
def test_leaf_keywords(sub: dict[str, Any], value: Any, expected: list[Any]) -> None:
    assert _prop(sub, value) == expected


def test_exclusive_bounds_show_the_flag() -> None:
    assert _prop({"minimum": 5, "exclusiveMinimum": True}, 5) == [{
        "operatorName": "minimum", "specifiedAs": {"minimum": 5, "exclusiveMinimum": True},
        "reason": "comparison failed", "consideredValue": 5}]


def test_items_and_additional_items() -> None:
    assert _prop({"items": {"bsonType": "int", "title": "ints"}}, [1, "x"]) == [{
        "operatorName": "items", "title": "ints",
        "reason": "At least one item did not match the sub-schema", "itemIndex": 1,
        "details": [_leaf("bsonType", "int", "type did not match", "x",
                          consideredType="string")]}]
    assert _prop({"items": [{}, {"minimum": 3}], "additionalItems": False}, [0, 1, 2]) == [
        {"operatorName": "items", "details": [{"itemIndex": 1, "details": [
            _leaf("minimum", 3, "comparison failed", 1)]}]},
        {"operatorName": "additionalItems", "specifiedAs": {"additionalItems": False},
         "reason": "found additional items", "additionalItems": [2]}]


def test_object_keywords() -> None:
    assert _rules({"required": ["b", "a"], "minProperties": 3}, {"c": 1}) == [
        {"operatorName": "required", "specifiedAs": {"required": ["b", "a"]},
         "missingProperties": ["a", "b"]},
        {"operatorName": "minProperties", "specifiedAs": {"minProperties": 3},
         "reason": "specified number of properties was not satisfied", "numberOfProperties": 2}]
    assert _rules({"properties": {"_id": {}}, "additionalProperties": False,
                   "patternProperties": {"^n": {"bsonType": "int"}}},
                  {"x": 1, "n1": "s"}) == [
        {"operatorName": "additionalProperties", "specifiedAs": {"additionalProperties": False},
         "additionalProperties": ["x"]},
        {"operatorName": "patternProperties", "details": [{
            "propertyName": "n1", "regexMatched": "^n", "details": [
                _leaf("bsonType", "int", "type did not match", "s", consideredType="string")]}]}]
    assert _rules({"additionalProperties": {"bsonType": "int"}}, {"x": "s"}) == [{
        "operatorName": "additionalProperties",
        "reason": "at least one additional property did not match the subschema",
        "failingProperty": "x",
        "details": [_leaf("bsonType", "int", "type did not match", "s",
                          consideredType="string")]}]
    assert _rules({"dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}}},
                  {"a": 1, "c": 1, "d": 1}) == [{
        "operatorName": "dependencies", "failingDependencies": [
            {"conditionalProperty": "a", "missingProperties": ["b"]},
            {"conditionalProperty": "d", "details": [
                {"operatorName": "required", "specifiedAs": {"required": ["e"]},
                 "missingProperties": ["e"]}]}]}]


def test_logical_keywords() -> None:
    assert _prop({"anyOf": [{"bsonType": "int"}, {"minimum": 5, "title": "big"}]}, 1.5) == [{
        "operatorName": "anyOf", "schemasNotSatisfied": [
            {"index": 0, "details": [_leaf("bsonType", "int", "type did not match", 1.5,
                                           consideredType="double")]},
            {"index": 1, "title": "big", "details": [
                _leaf("minimum", 5, "comparison failed", 1.5)]}]}]
    assert _prop({"oneOf": [{"minimum": 1}, {"maximum": 9}]}, 5) == [{
        "operatorName": "oneOf", "reason": "more than one subschema matched",
        "matchingSchemaIndexes": [0, 1]}]


def test_top_level_type_and_enum() -> None:
    m = compile_validator({"$jsonSchema": {"bsonType": "int"}})
    assert validation_error_info(m, {"_id": 1})["details"] == {
        "operatorName": "$jsonSchema", "specifiedAs": {"$jsonSchema": {"bsonType": "int"}},
        "reason": "expression always evaluates to false"}
    assert _rules({"enum": [{"_id": 2}]}, {}) == [
        _leaf("enum", [{"_id": 2}], "value was not found in enum", {"_id": 1})]


def test_query_operators() -> None:
    m = compile_validator({"a": {"$type": "string"}, "b": {"$ne": 1}, "c": {"$regex": "^x"},
                           "$expr": {"$gt": ["$d", 3]}})
    info = validation_error_info(m, {"_id": 5, "a": [1, 2.5], "b": 1, "c": 4, "d": 2})
    assert info == {"failingDocumentId": 5, "details": {
        "operatorName": "$and", "clausesNotSatisfied": [
            {"index": 0, "details": {
                "operatorName": "$type", "specifiedAs": {"a": {"$type": "string"}},
                "reason": "type did not match", "consideredValues": [1, 2.5],
                "consideredTypes": ["double", "int"]}},
            {"index": 1, "details": {
                "operatorName": "$ne", "specifiedAs": {"b": {"$ne": 1}},
                "reason": "comparison succeeded", "consideredValue": 1}},
            {"index": 2, "details": {
                "operatorName": "$regex", "specifiedAs": {"c": {"$regex": "^x"}},
                "reason": "type did not match", "consideredType": "int",
                "expectedTypes": ["regex", "string", "symbol"], "consideredValue": 4}},
            {"index": 3, "details": {
                "operatorName": "$expr", "specifiedAs": {"$expr": {"$gt": ["$d", 3]}},
                "reason": "expression did not match", "expressionResult": False}}]}}
    nor = compile_validator({"$nor": [{"a": {"$exists": True}}]})
    assert validation_error_info(nor, {"_id": 1, "a": 1})["details"] == {
        "operatorName": "$nor", "clausesNotSatisfied": [{"index": 0, "details": {
            "operatorName": "$exists", "specifiedAs": {"a": {"$exists": True}},
            "reason": "path does exist", "consideredValue": 1}}]}


def test_considered_values_are_cut_at_ten() -> None:
    m = compile_validator({"a": {"$gt": 100}})
    details = validation_error_info(m, {"_id": 1, "a": list(range(12))})["details"]
    assert details["consideredValues"] == list(range(10))
    assert details["consideredValuesTruncated"] is True


def test_specified_as_repeats_the_filter_as_written() -> None:
    m = compile_validator({"$or": [{"mail": {"$regex": Regex(r"@x\.org$")}},
                                   {"mail": Regex("^admin")},
                                   {"n": {"$eq": 5}}, {"n": 6}]})
    clauses = validation_error_info(m, {"_id": 1, "mail": "a@y.org", "n": 1})["details"][
        "clausesNotSatisfied"]
    assert [c["details"]["specifiedAs"] for c in clauses] == [
        {"mail": {"$regex": Regex(r"@x\.org$")}}, {"mail": Regex("^admin")},
        {"n": {"$eq": 5}}, {"n": 6}]
    assert [c["details"]["reason"] for c in clauses] == [
        "regular expression did not match", "regular expression did not match",
        "comparison failed", "comparison failed"]


def test_nested_properties_and_json_types() -> None:
    schema = {"required": ["who", "where"], "properties": {
        "flag": {"type": "boolean", "description": "on or off"},
        "where": {"bsonType": "object", "required": ["town"], "properties": {
            "lane": {"bsonType": "string"}, "town": {"bsonType": "string"}}}}}
    assert _rules(schema, {"flag": 0.0, "where": {"town": "T", "lane": 5}}) == [
        {"operatorName": "properties", "propertiesNotSatisfied": [
            {"propertyName": "flag", "description": "on or off", "details": [
                _leaf("type", "boolean", "type did not match", 0.0, consideredType="double")]},
            {"propertyName": "where", "details": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "lane", "details": [
                        _leaf("bsonType", "string", "type did not match", 5,
                              consideredType="int")]}]}]}]},
        {"operatorName": "required", "specifiedAs": {"required": ["who", "where"]},
         "missingProperties": ["who"]}]


def test_all_is_one_operator() -> None:
    m = compile_validator({"tags": {"$all": ["a", "b"]}})
    assert m.matches({"tags": ["b", "a"]})
    assert validation_error_info(m, {"_id": 1, "tags": ["a"]})["details"] == {
        "operatorName": "$all", "specifiedAs": {"tags": {"$all": ["a", "b"]}},
        "reason": "array did not contain all specified values", "consideredValue": ["a"]}
