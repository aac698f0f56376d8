"""Decoding: hand-built columns (legacy interleaving, every type) and malformed input."""

from __future__ import annotations

import struct

import bson
import pytest

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError, compress, decompress
from storage.bsoncolumn.api import MAX_DECOMPRESSED_SIZE
from storage.bsoncolumn.decoder import decode_elements

I32 = struct.Struct("<i")
Q = struct.Struct("<Q")


def block(v: int) -> bytes:
    return Q.pack(v)


def lit(t: int, value: bytes) -> bytes:
    return bytes((t, 0)) + value


def s8b(*blocks: int, nibble: int = 0x80) -> bytes:
    return bytes((nibble | (len(blocks) - 1),)) + b"".join(block(b) for b in blocks)


def doc(**fields: object) -> bytes:
    return bson.encode(fields)


INT1 = lit(0x10, I32.pack(1))


def _nest(depth: int) -> bytes:
    inner = b"\x05\x00\x00\x00\x00"
    for _ in range(depth):
        body = b"\x03a\x00" + inner
        inner = I32.pack(len(body) + 5) + body + b"\x00"
    return inner


SEL13 = 13  # two 30-bit slots


def two(a: int, b: int) -> int:
    return SEL13 | a << 4 | b << 34


def test_empty_column_has_no_rows() -> None:
    assert decode_elements(b"\x00") == []
    assert decompress(b"\x00") == bson.encode({})


def test_skips_before_the_first_literal_are_rows() -> None:
    skip2 = two((1 << 30) - 1, (1 << 30) - 1)
    column = s8b(skip2) + INT1 + b"\x00"
    assert decode_elements(column) == [None, None, (0x10, I32.pack(1))]


def test_legacy_interleaved_treats_arrays_as_scalars() -> None:
    ref = doc(a=1, b=[1, 2])
    # stream a: deltas 0, +2 (zigzag 4); stream b (the whole array): zero deltas
    column = b"\xf0" + ref + s8b(two(0, 4)) + s8b(two(0, 0)) + b"\x00" + b"\x00"
    rows = decode_elements(column)
    assert rows == [(3, doc(a=1, b=[1, 2])), (3, doc(a=3, b=[1, 2]))]
    # The same payload after 0xF1 has three streams (a, b.0, b.1): b.1 never gets a block.
    with pytest.raises(BSONColumnError):
        decode_elements(b"\xf1" + column[1:])


def test_array_root_interleaving() -> None:
    values = [[1, 2], [1, 3], [2, 3]]
    b = BSONColumnBuilder()
    for v in values:
        b.append(v)
    column = b.finalize()
    assert column[0] == 0xF2
    assert bson.decode(decompress(column)) == {str(i): v for i, v in enumerate(values)}


def test_missing_fields_and_empty_subobjects_in_interleaved_rows() -> None:
    values = [{"a": 1, "e": {}, "o": {"x": 1}}, {"a": 2, "e": {}}, {"e": {}, "o": {"x": 3}}]
    b = BSONColumnBuilder()
    for v in values:
        b.append(v)
    column = b.finalize()
    assert column[0] == 0xF1
    assert bson.decode(decompress(column)) == {str(i): v for i, v in enumerate(values)}


RAW_TYPES = [
    (0x06, b""),  # undefined
    (0x0A, b""),  # null
    (0xFF, b""),  # MinKey
    (0x7F, b""),  # MaxKey
    (0x0E, I32.pack(4) + b"sym\x00"),  # symbol
    (0x0C, I32.pack(4) + b"a.b\x00" + b"\x01" * 12),  # DBPointer
    (0x0B, b"ab\x00i\x00"),  # regex
    (0x0D, I32.pack(3) + b"f1\x00"),  # code
    (0x0F, bson.encode({"": bson.Code("x", {"y": 1})})[6:-1]),  # code with scope
]


@pytest.mark.parametrize(("t", "v"), RAW_TYPES)
def test_types_without_deltas_repeat_and_change(t: int, v: bytes) -> None:
    rows = [(t, v), (t, v), (t, v), None, (t, v), (0x10, I32.pack(7)), (t, v)]
    b = BSONColumnBuilder()
    for r in rows:
        b.skip() if r is None else b.append_element(*r)
    column = b.finalize()
    # literal, then one block of zero deltas and a skip, then two literals
    assert column.startswith(lit(t, v) + b"\x80")
    assert decode_elements(column) == rows


def test_minkey_maxkey_literal_control_bytes() -> None:
    column = BSONColumnBuilder().append(bson.MinKey()).append(bson.MaxKey()).finalize()
    assert column == b"\xff\x00\x7f\x00\x00"
    assert decode_elements(column) == [(0xFF, b""), (0x7F, b"")]


MALFORMED = {
    "empty": b"",
    "no final eoo": INT1,
    "bytes after eoo": INT1 + b"\x00\x00",
    "control 0xE5": b"\xe5" + block(14) + b"\x00",
    "control 0xF3": b"\xf3" + block(14) + b"\x00",
    "truncated literal": b"\x10\x00\x01\x00",
    "literal with a field name": b"\x10\x41" + I32.pack(1) + b"\x00",
    "unknown type 0x14": b"\x14\x00" + b"\x00" * 8 + b"\x00",
    "bool 2": lit(0x08, b"\x02") + b"\x00",
    "string without nul": lit(0x02, I32.pack(2) + b"ab") + b"\x00",
    "string length zero": lit(0x02, I32.pack(0)) + b"\x00",
    "object bad size": lit(0x03, I32.pack(100) + b"\x00") + b"\x00",
    "object bad element": lit(0x03, I32.pack(7) + b"\x10a\x00") + b"\x00",
    "deeply nested literal": lit(0x03, _nest(250)) + b"\x00",
    "truncated blocks": INT1 + b"\x81" + block(14) + b"\x00",
    "blocks without eoo": INT1 + s8b(14),
    "rle first in column": s8b(15) + b"\x00",
    "zero delta before literal": s8b(14) + b"\x00",
    "selector 0": INT1 + s8b(0) + b"\x00",
    "bad extension": INT1 + s8b(7 | 12 << 4) + b"\x00",
    "delta on null": lit(0x0A, b"") + s8b(14 | 2 << 4) + b"\x00",
    "delta on regex": lit(0x0B, b"a\x00\x00") + s8b(14 | 2 << 4) + b"\x00",
    "scaled control after int": INT1 + s8b(14, nibble=0x90) + b"\x00",
    "scale that cannot hold the double": lit(0x01, struct.pack("<d", 0.1))
    + s8b(14, nibble=0x90)
    + b"\x00",
    "scaled control for string": lit(0x02, I32.pack(2) + b"a\x00") + s8b(14, nibble=0xA0) + b"\x00",
    "bindata over 16 bytes with delta": lit(0x05, I32.pack(17) + b"\x00" + b"x" * 17)
    + s8b(14 | 2 << 4)
    + b"\x00",
    "interleaved without scalars": b"\xf1" + doc(a={}) + s8b(14) + b"\x00\x00",
    "interleaved without rows": b"\xf1" + doc(a=1) + b"\x00\x00",
    "interleaved truncated reference": b"\xf1" + doc(a=1)[:-2],
    "interleaved uneven streams": b"\xf1" + doc(a=1, b=2) + s8b(two(0, 0)) + b"\x00\x00",
    "interleaved leftover values": b"\xf1" + doc(a=1, b=2) + s8b(14) + s8b(two(0, 0)) + b"\x00\x00",
    "interleaved nested start": b"\xf1" + doc(a=1) + b"\xf1" + doc(a=1) + b"\x00\x00\x00",
    "interleaved missing end": b"\xf1" + doc(a=1) + s8b(14),
}


@pytest.mark.parametrize("column", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_columns_raise(column: bytes) -> None:
    with pytest.raises(BSONColumnError):
        decompress(column)


def test_rle_expansion_is_bounded() -> None:
    # 8 bytes stand for 1920 rows: this 16 KiB column claims ~4 million rows.
    column = INT1 + s8b(*[15 | 15 << 4] * 16) * 128 + b"\x00"
    with pytest.raises(BSONColumnError):
        decode_elements(column, max_values=100_000)
    small = INT1 + s8b(*[15 | 15 << 4] * 16) + b"\x00"
    assert len(decode_elements(small, max_values=30_721)) == 1 + 1920 * 16
    with pytest.raises(BSONColumnError):
        decode_elements(small, max_values=30_720)


def test_decompressed_size_is_bounded() -> None:
    big = "x" * (1 << 20)
    column = compress(bson.encode({str(i): big for i in range(20)}))
    assert len(column) < 2 << 20  # the repeats cost almost nothing compressed
    with pytest.raises(BSONColumnError):
        decompress(column)
    assert MAX_DECOMPRESSED_SIZE < 20 << 20
