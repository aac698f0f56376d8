"""The native index key of a series' meta value (`native/src/keystring.rs`) against the
reference, `keystring.encode_value` of the decoded value: equal bytes, or declined."""

from __future__ import annotations

from typing import Any

import bson
import pytest
from bson import Decimal128, Int64, Regex
from bson.binary import Binary
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native
from storage.keystring import encode_value
from storage.timeseries.metadata import (
    document_meta_keystring,
    meta_of_key,
    normalize_meta,
    series_key,
)

from . import strategies as gen

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="native core not built")


def _native(key: bytes) -> bytes | None:
    """The native key, None when declined."""
    assert native.core is not None
    try:
        keystring: bytes = native.core.series_keystring(key)
        return keystring
    except native.Declined:
        return None


def _declined_by_design(v: Any) -> bool:
    """Whether `v` holds what the native key leaves to the reference."""
    if type(v) is dict:
        return "$ref" in v or any(_declined_by_design(x) for x in v.values())
    if type(v) is list:
        return any(_declined_by_design(x) for x in v)
    if type(v) is Int64 or type(v) is int:
        return abs(v) > 2**53
    if isinstance(v, Binary):
        return v.subtype == 2
    return isinstance(v, Decimal128 | Regex | bson.Code)


@settings(max_examples=400, deadline=None)
@given(gen.VALUE)
def test_the_native_key_is_the_reference_key(value: Any) -> None:
    key = series_key(normalize_meta(value))
    got = _native(key)
    if got is None:
        assert _declined_by_design(value)
    else:
        assert got == encode_value(meta_of_key(key))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(gen.NAME, gen.VALUE, max_size=4))
def test_a_document_meta_keeps_the_reference_key(meta: dict[str, Any]) -> None:
    key = series_key(normalize_meta(meta))
    assert document_meta_keystring(key) == encode_value(meta_of_key(key))


def test_tsbs_tags_are_keyed_natively() -> None:
    tags = {"hostname": "host_5", "region": "eu-west-1", "datacenter": "eu-west-1b",
            "rack": "50", "os": "Ubuntu16.10", "arch": "x64", "team": "LON", "service": "6",
            "service_version": "0", "service_environment": "test"}
    key = series_key(normalize_meta(tags))
    assert _native(key) == encode_value(meta_of_key(key))


@pytest.mark.parametrize("value", [
    {"$ref": "c", "$id": 1},                 # decoded as a DBRef, keyed in its field order
    {"a": [{"$ref": "c", "$id": 1, "x": 2}]},
    Int64(2**53 + 1), Int64(-(2**60)),       # not exact as doubles
    Decimal128("1.5"),
    Binary(b"\x01\x02", 2),
    {"b": 1, "a": 2},                        # not normalized: names out of order
])
def test_what_the_reference_reads_otherwise_is_declined(value: Any) -> None:
    key = series_key(value)
    assert _native(key) is None
    # and the memo still gives the reference's key for a document holding it
    doc_key = series_key({"m": value})
    assert document_meta_keystring(doc_key) == encode_value(meta_of_key(doc_key))


def test_a_field_named_twice_is_declined() -> None:
    # {a: 1, a: 2}, which Python decodes as {a: 2}
    inner = b"\x10a\x00\x01\x00\x00\x00\x10a\x00\x02\x00\x00\x00\x00"
    key = b"\x03\x00" + (len(inner) + 4).to_bytes(4, "little") + inner
    assert _native(key) is None
    assert document_meta_keystring(key) == encode_value({"a": 2})


def test_malformed_bytes_are_declined() -> None:
    assert _native(b"\x03\x00\x05\x00") is None
    assert _native(b"") is None
