"""The two stable entry points: `compress` and `decompress`.

They convert between a version-1 bucket column (a BSON document `{"0": v0, "1": v1,
...}` whose missing indexes are skipped rows) and a BSONColumn payload (the bytes of a
BinData subtype 7, without its header).
"""

from __future__ import annotations

import struct
from typing import Final

from .builder import BSONColumnBuilder
from .decoder import DEFAULT_MAX_VALUES, decode_elements
from .errors import BSONColumnError
from .rawbson import validate_value

__all__ = ["MAX_DECOMPRESSED_SIZE", "compress", "decompress", "rows_to_document"]

# A decompressed column is a BSON document: at most MongoDB's internal object size.
MAX_DECOMPRESSED_SIZE: Final = 16 * 1024 * 1024 + 16 * 1024

_I32 = struct.Struct("<i")
_TYPE_BYTES: Final = [bytes((t,)) for t in range(256)]
_KEYS: list[bytes] = [b"%d\x00" % i for i in range(1024)]  # "<row>\0", grown on demand


def _keys(n: int) -> list[bytes]:
    if len(_KEYS) < n and n <= 1 << 20:
        _KEYS.extend(b"%d\x00" % i for i in range(len(_KEYS), n))
    return _KEYS if len(_KEYS) >= n else [b"%d\x00" % i for i in range(n)]


def _row_index(name: bytes) -> int:
    if not name or not name.isdigit() or (len(name) > 1 and name[0] == 0x30):
        raise BSONColumnError(f"Field name {name!r} is not a row index", code=2)
    return int(name)


def iter_row_elements(doc: bytes) -> list[tuple[int, int, bytes]]:
    """(row index, type, value bytes) of a `{"0": ..., "1": ...}` document."""
    doc = bytes(doc)
    if len(doc) < 5 or _I32.unpack_from(doc)[0] != len(doc) or doc[-1] != 0:
        raise BSONColumnError("Invalid BSON document given to compress", code=22)
    out = []
    pos = 4
    last = len(doc) - 1
    prev = -1
    while pos < last:
        t = doc[pos]
        name_end = doc.find(b"\x00", pos + 1, last)
        if name_end < 0:
            raise BSONColumnError("Invalid BSON document given to compress", code=22)
        row = _row_index(doc[pos + 1 : name_end])
        if row <= prev:
            raise BSONColumnError("Row indexes must be increasing", code=2)
        prev = row
        vs = name_end + 1
        size = validate_value(t, doc, vs, last)
        out.append((row, t, doc[vs : vs + size]))
        pos = vs + size
    if pos != last:
        raise BSONColumnError("Invalid BSON document given to compress", code=22)
    return out


def compress(doc: bytes, count: int | None = None) -> bytes:
    """BSONColumn of the values of `doc` (keys "0", "1", ...; gaps are skipped rows).

    `count` is the total number of rows; rows after the last key up to `count` are
    skipped rows too.
    """
    rows = iter_row_elements(doc)
    builder = BSONColumnBuilder()
    builder.extend_rows(rows, count)
    return builder.finalize()


def decompress(column: bytes, max_values: int = DEFAULT_MAX_VALUES) -> bytes:
    """The document `{"<row>": value, ...}` of a BSONColumn (skipped rows omitted).

    Raises BSONColumnError for any malformed column.
    """
    return rows_to_document(decode_elements(column, max_values))


def rows_to_document(rows: list[tuple[int, bytes] | None]) -> bytes:
    """`{"<row>": value}` for the present rows (raises past the size limit)."""
    keys = _keys(len(rows))
    types = _TYPE_BYTES
    parts: list[bytes] = []
    append = parts.append
    size = 5
    for i, elem in enumerate(rows):
        if elem is None:
            continue
        t, v = elem
        key = keys[i]
        size += 1 + len(key) + len(v)
        if size > MAX_DECOMPRESSED_SIZE:
            raise BSONColumnError("Decompressed BSON Column exceeds the BSON size limit")
        append(types[t])
        append(key)
        append(v)
    body = b"".join(parts)
    return _I32.pack(len(body) + 5) + body + b"\x00"
