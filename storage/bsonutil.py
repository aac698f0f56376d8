"""How bucketd turns BSON bytes into Python values and back.

One `CodecOptions` for the whole server so that a value read from the wire, from
storage or from a decoded column is the same Python object:

- dates are `bson.DatetimeMS` (exact milliseconds, any range, no time-zone games);
- binary subtype 4 stays `Binary` (no UUID conversion), subtype 0 is `bytes`;
- int32 decodes to `int`, int64 to `bson.Int64`, so the width survives a round trip;
- an embedded document is always a dict, never a `DBRef` (`vocabulary.bson_decode`).

Never parse documents by hand: `decode`/`encode` wrap pymongo's C extension.
"""

from __future__ import annotations

from typing import Any, Final

import bson
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions, DatetimeConversion

from storage.vocabulary.bson_decode import decode_document, decode_documents

__all__ = ["CODEC_OPTIONS", "MAX_BSON_SIZE", "decode", "decode_all", "encode", "bson_size"]

CODEC_OPTIONS: Final[CodecOptions[dict[str, Any]]] = CodecOptions(
    document_class=dict,
    tz_aware=False,
    uuid_representation=UuidRepresentation.UNSPECIFIED,
    datetime_conversion=DatetimeConversion.DATETIME_MS,
)

# 16 MiB: maxBsonObjectSize reported by hello.
MAX_BSON_SIZE: Final = 16 * 1024 * 1024


def decode(data: bytes | memoryview) -> dict[str, Any]:
    doc: dict[str, Any] = decode_document(data, CODEC_OPTIONS)
    return doc


def decode_all(data: bytes | memoryview) -> list[dict[str, Any]]:
    return decode_documents(data, CODEC_OPTIONS)


def encode(doc: Any) -> bytes:
    return bson.encode(doc, check_keys=False, codec_options=CODEC_OPTIONS)


def bson_size(doc: Any) -> int:
    return len(encode(doc))
