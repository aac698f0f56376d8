"""Raw BSON elements, the unit BSONColumn works on.

BSONColumn stores elements without field names as `type byte, 0x00, value bytes`, and
compares values by their bytes, so the codec handles values as `(type, value bytes)`.
This module knows each type's value size, iterates the elements of an object and
validates untrusted values (bounds, terminators, nested documents) so a decoded column
is always well-formed BSON. Strings, regexes and field names are bytes here and are not
checked to be UTF-8, as MongoDB's BSONColumn does not check them: a column holding such a
string decodes and re-encodes to the same bytes (where values become Python objects,
`storage.bsoncolumn.reader.VALUES_CODEC_OPTIONS` decodes them with replacement
characters). Whole documents are otherwise left to `bson`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final

from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BINARY,
    T_BOOL,
    T_CODE,
    T_CODEWSCOPE,
    T_DATE,
    T_DBPOINTER,
    T_DECIMAL,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_MAXKEY,
    T_MINKEY,
    T_NULL,
    T_OBJECT,
    T_OID,
    T_REGEX,
    T_STRING,
    T_SYMBOL,
    T_TIMESTAMP,
    T_UNDEFINED,
)

from .errors import BSONColumnError

__all__ = [
    "iter_elements",
    "value_size",
    "validate_value",
]


_FIXED: Final = {
    T_DOUBLE: 8,
    T_UNDEFINED: 0,
    T_OID: 12,
    T_BOOL: 1,
    T_DATE: 8,
    T_NULL: 0,
    T_INT32: 4,
    T_TIMESTAMP: 8,
    T_INT64: 8,
    T_DECIMAL: 16,
    T_MINKEY: 0,
    T_MAXKEY: 0,
}
VALID_TYPES: Final = frozenset(range(0x01, 0x14)) | {T_MINKEY, T_MAXKEY}
# A literal may nest as deep as any document a client may send (mongod's maxBSONDepth)
# plus the bucket's own levels above a measurement's field (data, the field, the row).
MAX_LITERAL_DEPTH: Final = 200 + 3

_I32 = struct.Struct("<i")


def _bad(msg: str = "Invalid BSON element in BSON Column") -> BSONColumnError:
    return BSONColumnError(msg)


def _i32(buf: bytes, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise _bad()
    return _I32.unpack_from(buf, pos)[0]


def _cstring_end(buf: bytes, pos: int, end: int) -> int:
    """Index just past the NUL ending a C string at `pos`."""
    i = buf.find(b"\x00", pos, end)
    if i < 0:
        raise _bad()
    return i + 1


def value_size(t: int, buf: bytes, pos: int, end: int) -> int:
    """Size of the value of type `t` starting at `pos`; checks it fits before `end`."""
    size = _FIXED.get(t)
    if size is None:
        if t in (T_STRING, T_CODE, T_SYMBOL):
            n = _i32(buf, pos, end)
            if n < 1:
                raise _bad()
            size = 4 + n
        elif t in (T_OBJECT, T_ARRAY, T_CODEWSCOPE):
            size = _i32(buf, pos, end)
            if size < 5:
                raise _bad()
        elif t == T_BINARY:
            n = _i32(buf, pos, end)
            if n < 0:
                raise _bad()
            size = 5 + n
        elif t == T_REGEX:
            size = _cstring_end(buf, _cstring_end(buf, pos, end), end) - pos
        elif t == T_DBPOINTER:
            n = _i32(buf, pos, end)
            if n < 1:
                raise _bad()
            size = 4 + n + 12
        else:
            raise _bad(f"Invalid BSON type {t} in BSON Column")
    if pos + size > end:
        raise _bad()
    return size


def iter_elements(buf: bytes, start: int, end: int) -> Iterator[tuple[int, bytes, int, int]]:
    """Elements of the object occupying buf[start:end]: (type, name, value start, value end).

    Assumes a structurally valid object (use `validate_value` first on untrusted data).
    """
    pos = start + 4
    last = end - 1
    while pos < last:
        t = buf[pos]
        name_end = buf.index(b"\x00", pos + 1)
        vstart = name_end + 1
        vend = vstart + value_size(t, buf, vstart, last)
        yield t, buf[pos + 1 : name_end], vstart, vend
        pos = vend


def _validate_string(buf: bytes, pos: int, size: int) -> None:
    # int32 length (already checked) + bytes + NUL
    if buf[pos + size - 1] != 0:
        raise _bad()


def validate_value(t: int, buf: bytes, pos: int, end: int, depth: int = 0) -> int:
    """Validate one value (recursively for documents); returns its size."""
    size = value_size(t, buf, pos, end)
    if t in (T_STRING, T_CODE, T_SYMBOL):
        _validate_string(buf, pos, size)
    elif t in (T_OBJECT, T_ARRAY):
        _validate_document(buf, pos, pos + size, depth)
    elif t == T_CODEWSCOPE:
        n = _i32(buf, pos + 4, pos + size)
        if n < 1 or 8 + n + 5 > size:
            raise _bad()
        _validate_string(buf, pos + 4, 4 + n)
        scope = pos + 8 + n
        if scope + _i32(buf, scope, pos + size) != pos + size:
            raise _bad()
        _validate_document(buf, scope, pos + size, depth)
    elif t == T_DBPOINTER:
        _validate_string(buf, pos, size - 12)
    elif t == T_BOOL and buf[pos] > 1:
        raise _bad()
    elif t == T_BINARY and buf[pos + 4] == 2:
        check_old_binary(buf[pos : pos + size])
    return size


def check_old_binary(value: bytes) -> None:
    """Subtype 2 (old binary) repeats its length inside: int32 n, then n bytes."""
    if len(value) < 9 or _I32.unpack_from(value, 5)[0] != len(value) - 9:
        raise _bad("Invalid old binary (subtype 2) in BSON Column")


def _validate_document(buf: bytes, start: int, end: int, depth: int) -> None:
    if depth > MAX_LITERAL_DEPTH:
        raise _bad("BSON Column literal nested too deeply")
    if end - start < 5 or buf[end - 1] != 0:
        raise _bad()
    pos = start + 4
    last = end - 1
    while pos < last:
        t = buf[pos]
        name_end = buf.find(b"\x00", pos + 1, last)
        if name_end < 0:
            raise _bad()
        pos = name_end + 1
        pos += validate_value(t, buf, pos, last, depth + 1)
    if pos != last:
        raise _bad()
