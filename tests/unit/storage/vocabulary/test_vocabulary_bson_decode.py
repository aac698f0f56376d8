"""Embedded documents shaped like DBRefs decode as plain documents, fields in order."""

from __future__ import annotations

import bson
from bson import SON
from bson.dbref import DBRef

from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.bson_decode import decode_document, decode_documents

SHAPED = SON([("x", 1), ("$ref", "c"), ("$id", 2), ("$db", "d")])
DOC = SON([("_id", 1), ("a", SHAPED), ("l", [1, SON([("b", SHAPED)])])])


def test_dbref_shaped_documents_stay_documents_in_order() -> None:
    data = bson.encode(DOC)
    for given in (data, memoryview(data)):
        doc = decode_document(given, CODEC_OPTIONS)
        assert type(doc["a"]) is dict and list(doc["a"]) == ["x", "$ref", "$id", "$db"]
        assert type(doc["l"][1]["b"]) is dict
        assert bson.encode(doc) == data  # the round trip gives the same bytes
    assert bson.decode(data, CODEC_OPTIONS)["a"] == DBRef("c", 2, "d", x=1)  # what it avoids


def test_documents_back_to_back() -> None:
    plain = bson.encode({"_id": 2, "s": "$ref"})
    data = bson.encode(DOC) + plain
    docs = decode_documents(data, CODEC_OPTIONS)
    assert [bson.encode(d) for d in docs] == [bson.encode(DOC), plain]
    assert decode_documents(plain, CODEC_OPTIONS) == [{"_id": 2, "s": "$ref"}]
