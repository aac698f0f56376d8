"""The two stable entry points: `compress` and `decompress`.

They convert between a version-1 bucket column (a BSON document `{"0": v0, "1": v1,
...}` whose missing indexes are skipped rows) and a BSONColumn payload (the bytes of a
BinData subtype 7, without its header).
"""

from __future__ import annotations

import functools
import struct
from typing import Final

import numpy as np

from storage.vocabulary.bson_types import (
    T_ARRAY,
    T_BOOL,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OBJECT,
    T_OID,
    T_TIMESTAMP,
)

from . import native
from .builder import BSONColumnBuilder
from .decoder import DEFAULT_MAX_VALUES, decode_elements
from .errors import BSONColumnError
from .rawbson import iter_elements, validate_value

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


_FIXED_SIZE: Final = {
    T_DOUBLE: 8,
    T_INT32: 4,
    T_INT64: 8,
    T_DATE: 8,
    T_TIMESTAMP: 8,
    T_BOOL: 1,
    T_OID: 12,
}
_DTYPE: Final = {
    T_DOUBLE: "<f8",
    T_INT32: "<i4",
    T_INT64: "<i8",
    T_DATE: "<i8",
    T_TIMESTAMP: "<i8",
    T_BOOL: "u1",
    T_OID: "u1",
}


def _doc_length(n: int, size: int) -> int:
    """Bytes of {"0": v, ..., "<n-1>": v} with values of `size` bytes."""
    total = 5
    digits = 1
    lo = 0
    while lo < n:
        hi = min(n, 10**digits)
        total += (hi - lo) * (2 + digits + size)
        lo = hi
        digits += 1
    return total


def _rows_for_length(length: int, size: int) -> int | None:
    lo, hi = 0, max(0, (length - 5) // (3 + size)) + 1
    while lo < hi:  # _doc_length is increasing in n
        mid = (lo + hi) // 2
        if _doc_length(mid, size) < length:
            lo = mid + 1
        else:
            hi = mid
    return lo if _doc_length(lo, size) == length else None


@functools.lru_cache(maxsize=16)
def _layout(n: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Positions of type bytes, key bytes (with their NULs) and value bytes, and the keys."""
    klen = np.array([len(str(i)) for i in range(n)], dtype=np.int64)
    elem = 2 + klen + size
    off = 4 + np.cumsum(elem) - elem
    key_total = int((klen + 1).sum())
    key_starts = np.cumsum(klen + 1) - (klen + 1)
    key_pos = np.repeat(off + 1, klen + 1) + (
        np.arange(key_total) - np.repeat(key_starts, klen + 1)
    )
    keys = np.frombuffer(b"".join(b"%d\x00" % i for i in range(n)), dtype=np.uint8)
    value_pos = (np.repeat(off + 2 + klen, size) + np.tile(np.arange(size), n)).astype(np.intp)
    return off, key_pos, keys, value_pos


def parse_uniform(doc: bytes) -> tuple[int, np.ndarray] | None:
    """(type, values) when `doc` is {"0": v0, "1": v1, ...} without gaps and all values
    share one fixed-size numeric type (int32, int64, double, date, timestamp, bool);
    None otherwise. Vectorised: checks every type and key byte against the expected
    layout instead of walking the elements."""
    if len(doc) < 6 or doc[-1] != 0 or _I32.unpack_from(doc)[0] != len(doc):
        return None
    t = doc[4]
    size = _FIXED_SIZE.get(t)
    if size is None:
        return None
    n = _rows_for_length(len(doc), size)
    if n is None or n > 1 << 20:
        return None
    off, key_pos, keys, value_pos = _layout(n, size)
    a = np.frombuffer(doc, dtype=np.uint8)
    if not (a[off] == t).all() or not np.array_equal(a[key_pos], keys):
        return None
    values = a[value_pos].view(_DTYPE[t])
    if t == T_BOOL and (values > 1).any():
        return None
    if t == T_OID:
        values = values.reshape(n, 12)
    return t, values


def _object_fields(
    obj: bytes, start: int, end: int, out: list[tuple[int, int, int]], mask: np.ndarray
) -> bool:
    """Scalar fields (type, value offset, size) of an object of fixed-size numeric values
    and non-empty sub-objects, marking value bytes in `mask`; False for anything else."""
    if end - start == 5:
        return False  # empty sub-objects change the interleaving rules
    for t, _name, vs, ve in iter_elements(obj, start, end):
        if t in (T_OBJECT, T_ARRAY):
            if not _object_fields(obj, vs, ve, out, mask):
                return False
        elif _FIXED_SIZE.get(t) == ve - vs:
            out.append((t, vs, ve - vs))
            mask[vs:ve] = True
        else:
            return False
    return True


def parse_uniform_objects(doc: bytes) -> tuple[int, bytes, list[tuple[int, np.ndarray]]] | None:
    """(root type, first object, per scalar field (type, values)) when `doc` is
    {"0": o0, "1": o1, ...} without gaps and every object has exactly the layout of the
    first (same fields, order and types; fixed-size numeric values only). Vectorised:
    the objects then all have one size, and every byte that is not a value is compared
    with the first object's."""
    if len(doc) < 6 or doc[-1] != 0 or _I32.unpack_from(doc)[0] != len(doc):
        return None
    t = doc[4]
    if t not in (T_OBJECT, T_ARRAY) or doc[5:7] != b"0\x00" or len(doc) < 11:
        return None
    size = _I32.unpack_from(doc, 7)[0]
    if size < 5 or 7 + size > len(doc) - 1:
        return None
    first = doc[7 : 7 + size]
    try:
        validate_value(t, first, 0, size)
    except BSONColumnError:
        return None
    mask = np.zeros(size, dtype=bool)
    fields: list[tuple[int, int, int]] = []
    if not _object_fields(first, 0, size, fields, mask) or not fields:
        return None
    n = _rows_for_length(len(doc), size)
    if n is None or n > 1 << 20:
        return None
    off, key_pos, keys, value_pos = _layout(n, size)
    a = np.frombuffer(doc, dtype=np.uint8)
    if not (a[off] == t).all() or not np.array_equal(a[key_pos], keys):
        return None
    rows = a[value_pos].reshape(n, size)
    structure = ~mask
    if not (rows[:, structure] == np.frombuffer(first, dtype=np.uint8)[structure]).all():
        return None
    columns = []
    for ft, vs, fsize in fields:
        if ft == T_OID:
            return None  # (ObjectId fields take the general path)
        col = np.ascontiguousarray(rows[:, vs : vs + fsize]).view(_DTYPE[ft]).ravel()
        if ft == T_BOOL and (col > 1).any():
            return None
        columns.append((ft, col))
    return t, first, columns


def compress(doc: bytes, count: int | None = None) -> bytes:
    """BSONColumn of the values of `doc` (keys "0", "1", ...; gaps are skipped rows).

    `count` is the total number of rows; rows after the last key up to `count` are
    skipped rows too.
    """
    doc = bytes(doc)
    builder = BSONColumnBuilder()
    uniform = parse_uniform(doc)
    if uniform is not None and (count is None or count >= len(uniform[1])):
        t, values = uniform
        builder.append_array(t, values)
        if count is not None:
            builder.skip(count - len(values))
        return builder.finalize()
    objects = parse_uniform_objects(doc) if uniform is None else None
    if objects is not None and (count is None or count >= len(objects[2][0][1])):
        t, first, columns = objects
        builder.append_uniform_objects(t, first, columns)
        if count is not None:
            builder.skip(count - len(columns[0][1]))
        return builder.finalize()
    builder.extend_rows(iter_row_elements(doc), count)
    return builder.finalize()


def decompress(column: bytes, max_values: int = DEFAULT_MAX_VALUES) -> bytes:
    """The document `{"<row>": value, ...}` of a BSONColumn (skipped rows omitted).

    Raises BSONColumnError for any malformed column. The native core writes the document
    when it takes the column (scalar values); the reference then, which also words the
    errors.
    """
    doc = native.decompress(column, max_values)
    if doc is not None:
        return doc
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
