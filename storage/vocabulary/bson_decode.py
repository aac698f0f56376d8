"""BSON bytes to Python values as the server sees documents: every embedded document a
plain document.

pymongo's decoder turns an embedded document holding a string `$ref` and an `$id` into
a `DBRef`, which moves those fields first when it is encoded again and is no dict to
the code that reads it (an update's `u`, a filter). To MongoDB such a document is a
document like any other, with its fields in their order (`$ref`/`$id` are ordinary
`$`-prefixed names since 5.0). So: the C decoder as it is when the bytes cannot hold a
DBRef (no `$ref` field name anywhere, the common case), and when they can and it made
one, the same bytes decoded again without that hook (raw embedded documents, turned
into dicts in their order, without recursion).
"""

from __future__ import annotations

from typing import Any, Final

import bson
from bson.codec_options import CodecOptions
from bson.dbref import DBRef
from bson.raw_bson import RawBSONDocument

__all__ = ["decode_document", "decode_documents"]

_REF_NAME: Final = b"$ref\x00"


def decode_document(data: bytes | memoryview, codec: CodecOptions[Any]) -> Any:
    """One document (errors as `bson.decode`'s)."""
    doc = bson.decode(data, codec)
    if _REF_NAME in _as_bytes(data) and _holds_dbref(doc):
        return _plain(RawBSONDocument(bytes(data), codec.with_options(
            document_class=RawBSONDocument)))
    return doc


def decode_documents(data: bytes | memoryview, codec: CodecOptions[Any]) -> list[Any]:
    """Documents back to back (errors as `bson.decode_all`'s)."""
    docs = bson.decode_all(data, codec)
    if _REF_NAME not in _as_bytes(data) or not any(_holds_dbref(d) for d in docs):
        return docs
    raw_codec = codec.with_options(document_class=RawBSONDocument)
    return [_plain(r) for r in bson.decode_all(bytes(data), raw_codec)]


def _as_bytes(data: bytes | memoryview) -> bytes:
    return data if isinstance(data, bytes) else bytes(data)


def _holds_dbref(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, DBRef):
            return True
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _plain(raw: RawBSONDocument) -> dict[str, Any]:
    """`raw` as nested dicts and lists; each container is placed in its parent before its
    own values are filled in, so the field order is the stored one."""
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(raw, root, 0)]
    while stack:
        value, parent, key = stack.pop()
        if isinstance(value, RawBSONDocument):
            doc: dict[str, Any] = {}
            parent[key] = doc
            for name, item in value.items():
                doc[name] = None
                stack.append((item, doc, name))
        elif isinstance(value, list):
            items: list[Any] = [None] * len(value)
            parent[key] = items
            stack.extend((item, items, i) for i, item in enumerate(value))
        else:
            parent[key] = value
    out: dict[str, Any] = root[0]
    return out
