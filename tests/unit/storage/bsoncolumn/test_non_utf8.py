"""Strings that are not valid UTF-8 are bytes to BSONColumn, as in MongoDB's.

MongoDB's BSONColumn does not validate UTF-8 (its own unit tests hold 128-bit-delta
strings that are not UTF-8): such columns decode and re-encode byte for byte through
the Python and the native decoders and builders, and where values become Python objects
(`elements_to_values`, `BSONColumn`) invalid sequences become U+FFFD instead of an error.
"""

from __future__ import annotations

import struct

import pytest

from storage.bsoncolumn import BSONColumnBuilder
from storage.bsoncolumn.decoder import decode_elements
from storage.bsoncolumn.reader import BSONColumn, elements_to_values
from storage.native import core

_I = struct.Struct("<i")


def _string(b: bytes, t: int = 0x02) -> tuple[int, bytes]:
    return t, _I.pack(len(b) + 1) + b + b"\x00"


# a literal, then strings of at most 16 bytes: 128-bit deltas; some not UTF-8
ROWS: list[tuple[int, bytes] | None] = [
    _string(b"abc"), _string(b"\xff\xfe"), None, _string(b"ab\xc3"), _string(b"\xc3\xa9"),
    _string(b"\xed\xa0\x80x"), _string(b"\xed\xa0\x80x"), _string(b"\x80" * 16),
]
CASES = {
    "deltas from a valid literal": ROWS,
    "an invalid literal": [_string(b"\xff"), _string(b"\xfe"), _string(b"ok")],
    "code": [_string(b"x", 0x0D), _string(b"\xff", 0x0D)],
    "long strings are literals": [_string(b"\xff" * 20), _string(b"\xfe" * 20)],
    "regex": [(0x0B, b"\xff\x00i\x00"), (0x0B, b"\xff\x00i\x00")],
}


def _python_column(rows: list[tuple[int, bytes] | None]) -> bytes:
    b = BSONColumnBuilder()
    b.extend_elements(rows)
    return b.finalize()


def test_a_non_utf8_string_is_a_128_bit_delta() -> None:
    column = _python_column(ROWS[:2])
    literal = 1 + 1 + len(ROWS[0][1])  # type, empty name, value  # type: ignore[index]
    assert column[literal] >> 4 == 0x8  # a Simple-8b block follows, not a literal
    assert len(column) == literal + 1 + 8 + 1


@pytest.mark.parametrize("rows", CASES.values(), ids=CASES.keys())
def test_round_trips_through_the_python_decoder_and_builder(
        rows: list[tuple[int, bytes] | None]) -> None:
    column = _python_column(rows)
    assert decode_elements(column) == rows
    assert _python_column(decode_elements(column)) == column
    again = BSONColumnBuilder.from_column(column)
    again.extend_elements([_string(b"\xfa")])
    assert again.finalize() == _python_column([*rows, _string(b"\xfa")])


@pytest.mark.skipif(core is None, reason="the native core is not built")
@pytest.mark.parametrize("rows", CASES.values(), ids=CASES.keys())
def test_round_trips_through_the_native_decoder_and_builder(
        rows: list[tuple[int, bytes] | None]) -> None:
    assert core is not None
    column = _python_column(rows)
    b = core.ColumnBuilder()
    b.extend(rows)
    assert b.finalize() == column
    assert core.decode_column(column) == rows
    again = core.ColumnBuilder.from_column(column)
    again.extend([_string(b"\xfa")])
    assert again.finalize() == _python_column([*rows, _string(b"\xfa")])


def test_python_values_replace_invalid_sequences() -> None:
    values = elements_to_values(ROWS)
    assert values[0] == "abc"
    assert values[1] == "\ufffd\ufffd"
    assert values[3] == "ab\ufffd"
    assert values[4] == "é"
    col = BSONColumn(_python_column(ROWS))
    assert list(col)[1] == "\ufffd\ufffd"
