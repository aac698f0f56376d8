"""BSON type bytes and names: the one table, checked value by value against the names
the seven former copies gave (where they agreed) and against the bytes bson writes."""

from __future__ import annotations

import re
from typing import Any

import bson
import pytest
from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from bson.raw_bson import RawBSONDocument
from bson.son import SON

from storage.keystring import KS_OID, UNDEFINED
from storage.vocabulary.bson_types import (
    TYPE_ALIASES,
    TYPE_NAMES,
    BsonType,
    bson_type,
    type_name,
    type_number,
)
from storage.vocabulary.missing import MISSING

# The BSON spec's type bytes.
SPEC_BYTES = {
    "EOO": 0x00, "DOUBLE": 0x01, "STRING": 0x02, "OBJECT": 0x03, "ARRAY": 0x04, "BINARY": 0x05,
    "UNDEFINED": 0x06, "OBJECT_ID": 0x07, "BOOL": 0x08, "DATE": 0x09, "NULL": 0x0A,
    "REGEX": 0x0B, "DB_POINTER": 0x0C, "JAVASCRIPT": 0x0D, "SYMBOL": 0x0E,
    "JAVASCRIPT_WITH_SCOPE": 0x0F, "INT32": 0x10, "TIMESTAMP": 0x11, "INT64": 0x12,
    "DECIMAL128": 0x13, "MIN_KEY": 0xFF, "MAX_KEY": 0x7F,
}

# What every former type-name function answered for these decoded values.
AGREED: list[tuple[str, Any, str]] = [
    ("double", 1.5, "double"),
    ("string", "s", "string"),
    ("object", {}, "object"),
    ("array", [], "array"),
    ("bytes", b"", "binData"),
    ("binary", Binary(b"x", 4), "binData"),
    ("objectId", ObjectId("000000000000000000000001"), "objectId"),
    ("bool", True, "bool"),
    ("date", DatetimeMS(0), "date"),
    ("null", None, "null"),
    ("regex", Regex("a"), "regex"),
    ("int32", 1, "int"),
    ("int32 min", -(2**31), "int"),
    ("int64", Int64(1), "long"),
    ("decimal", Decimal128("1"), "decimal"),
    ("timestamp", Timestamp(0, 1), "timestamp"),
    ("minKey", MinKey(), "minKey"),
    ("maxKey", MaxKey(), "maxKey"),
]

# Where the former functions disagreed, the one answer now (MongoDB's where it has one).
DECIDED: list[tuple[str, Any, str]] = [
    ("code", Code("x"), "javascript"),                 # match/update/options said "string"
    ("code with scope", Code("x", {}), "javascriptWithScope"),
    ("plain int beyond int32", 2**40, "long"),         # _args/bsontext said "int"
    ("tuple", (), "array"),                            # _args said "tuple"
    ("SON", SON(), "object"),                          # _args said "SON"
    ("DBRef", DBRef("c", 1), "object"),                # _args/options said "DBRef"
    ("raw document", RawBSONDocument(bson.encode({})), "object"),
    ("compiled pattern", re.compile("a"), "regex"),
    ("missing", MISSING, "missing"),
    ("keystring undefined", UNDEFINED, "undefined"),
    ("not a BSON value", object(), "unknown"),
]


def test_type_bytes_are_the_spec_bytes() -> None:
    assert {t.name: int(t) for t in BsonType} == SPEC_BYTES


def test_keystring_tags_are_not_bson_type_bytes() -> None:
    assert KS_OID == 0x46
    assert BsonType.OBJECT_ID == 0x07


@pytest.mark.parametrize(("label", "value", "name"), AGREED + DECIDED,
                         ids=[c[0] for c in AGREED + DECIDED])
def test_type_name(label: str, value: Any, name: str) -> None:
    assert type_name(value) == name
    found = bson_type(value)
    assert (found is None) == (name == "unknown")
    if found is not None:
        assert TYPE_NAMES[found] == name


@pytest.mark.parametrize(("label", "value", "name"), AGREED + DECIDED[:7],
                         ids=[c[0] for c in AGREED + DECIDED[:7]])
def test_bson_type_is_the_byte_bson_writes(label: str, value: Any, name: str) -> None:
    element_type = bson.encode({"": value})[4]
    assert bson_type(value) == element_type


def test_aliases_are_mongodb_type_numbers() -> None:
    assert TYPE_ALIASES == {
        "double": 1, "string": 2, "object": 3, "array": 4, "binData": 5, "undefined": 6,
        "objectId": 7, "bool": 8, "date": 9, "null": 10, "regex": 11, "dbPointer": 12,
        "javascript": 13, "symbol": 14, "javascriptWithScope": 15, "int": 16, "timestamp": 17,
        "long": 18, "decimal": 19, "minKey": -1, "maxKey": 127,
    }
    assert type_number(BsonType.MIN_KEY) == -1
    assert type_number(BsonType.MAX_KEY) == 127


def test_subclasses_name_as_their_base() -> None:
    class MyInt(int):
        pass

    class MyDict(dict):  # type: ignore[type-arg]
        pass

    assert type_name(MyInt(3)) == "int"
    assert type_name(MyInt(2**40)) == "long"
    assert type_name(MyDict()) == "object"
