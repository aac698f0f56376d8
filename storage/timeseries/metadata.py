"""The metaField value of a measurement: normalization and the series key.

MongoDB normalizes a measurement's metaField value before bucketing (metadata.cpp):
the fields of every object are sorted by the binary order of their names, recursively;
arrays keep their order but the objects inside them are normalized too. Two measurements
belong to the same series when their normalized values are binary equal as BSON (so
`1` and `1.0` are different series, and so are `{a: 1, b: 2}` and `{a: 1, b: 2.0}`).

`series_key` is that binary form; it is what the bucket catalog hashes.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Final

import bson

from storage import native
from storage.bsonutil import CODEC_OPTIONS
from storage.keystring import encode_value
from storage.vocabulary.missing import MISSING

_INT32: Final = struct.Struct("<i")
_DOCUMENT: Final = 0x03  # the BSON type byte a series key starts with for a document

__all__ = ["document_meta_keystring", "is_meta_path", "meta_values_equal", "normalize_meta",
           "series_key"]


def is_meta_path(path: str, meta_field: str | None) -> bool:
    """Whether a measurement path reads the meta field (it or a field inside it)."""
    return meta_field is not None and (path == meta_field or path.startswith(meta_field + "."))


def _field_sort_key(name: str) -> bytes:
    return name.encode("utf-8", "surrogatepass")


def normalize_meta(value: Any) -> Any:
    """A copy of `value` with every object's fields sorted (arrays keep their order)."""
    t = type(value)
    if t is dict:
        if len(value) > 1:
            items = sorted(value.items(), key=lambda kv: _field_sort_key(kv[0]))
        else:
            items = value.items()
        return {k: normalize_meta(v) for k, v in items}
    if t is list or t is tuple:
        return [normalize_meta(v) for v in value]
    if isinstance(value, dict):  # SON and other mappings
        return normalize_meta(dict(value))
    return value


def series_key(normalized: Any) -> bytes:
    """The binary identity of a normalized meta value (b"" when the metaField is missing)."""
    if normalized is MISSING:
        return b""
    return bson.encode({"": normalized}, codec_options=CODEC_OPTIONS)[4:-1]


def meta_of_key(key: bytes) -> Any:
    """The normalized meta value whose `series_key` is `key` (MISSING for b"")."""
    if not key:
        return MISSING
    return bson.decode(_INT32.pack(len(key) + 5) + key + b"\x00",
                       codec_options=CODEC_OPTIONS)[""]


@lru_cache(maxsize=4096)
def document_meta_keystring(key: bytes) -> bytes | None:
    """The keystring (`keystring.encode_value`) of the meta value of series `key` when it
    is a document, as an index without a collation keys it (None: not a document). A
    document takes longest to encode, and a series is keyed again and again: by the
    reopening queries for it, and by the index keys of each new bucket of it."""
    if not key or key[0] != _DOCUMENT:
        return None
    if native.core is not None:
        try:
            keystring: bytes = native.check(native.core.series_keystring, key)
            return keystring
        except native.Declined:
            pass  # (a value the reference encodes: a decimal, a DBRef, ...)
    return encode_value(meta_of_key(key))


def meta_values_equal(a: Any, b: Any) -> bool:
    """timeseries::metadata::areMetadataEqual: equal once normalized, types included."""
    return series_key(normalize_meta(a)) == series_key(normalize_meta(b))
