"""The native `decompress` writes byte for byte the reference's document.

`native.decompress(column)` must equal `rows_to_document(decode_elements(column))`
whenever it answers, answer for every column of scalar values, and decline (None) where
the reference raises, so `api.decompress` raises the reference's error;
`native.decompress_rows(column, positions)` must hold exactly the rows picked. Columns
come from the shared vectors, the Python builder fed hypothesis-generated rows of every
scalar type (with skips and type changes) and mutations of both.
"""

from __future__ import annotations

import bson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnError, native
from storage.bsoncolumn.api import MAX_DECOMPRESSED_SIZE, decompress, rows_to_document
from storage.bsoncolumn.decoder import decode_elements
from storage.bsoncolumn.reader import VALUES_CODEC_OPTIONS

from .strategies import EDITS, mutated
from .test_native_builder import Row, _python, _rows
from .vectors import INVALID, VALID

pytestmark = pytest.mark.skipif(not native.AVAILABLE, reason="the native core was not built")


def _reference(column: bytes) -> bytes | None:
    try:
        return rows_to_document(decode_elements(column))
    except BSONColumnError:
        return None


def _agree(column: bytes) -> None:
    want = _reference(column)
    got = native.decompress(column)
    if got is not None:
        assert got == want
    elif want is not None:  # declined: only interleaved sections and documents
        assert native.decode_column(column) is None
    if want is None:
        with pytest.raises(BSONColumnError):
            decompress(column)
    else:
        assert decompress(column) == want


@pytest.mark.parametrize("vec", VALID, ids=[v.name for v in VALID])
def test_vectors(vec) -> None:
    _agree(vec.column)
    if native.decode_column(vec.column) is not None:
        assert native.decompress(vec.column) == vec.values


@pytest.mark.parametrize("name,column", INVALID, ids=[n for n, _ in INVALID])
def test_invalid_vectors_decline(name: str, column: bytes) -> None:
    assert native.decompress(column) is None
    assert native.decompress_rows(column, [0]) is None
    with pytest.raises(BSONColumnError):
        decompress(column)


@settings(max_examples=250, deadline=None)
@given(_rows, st.data())
def test_generated_columns_match_the_reference(rows: list[Row], data) -> None:
    column = _python(rows).finalize()
    want = rows_to_document(decode_elements(column))
    assert native.decompress(column) == want
    assert decompress(column) == want
    n = len(decode_elements(column))
    positions = data.draw(st.lists(st.integers(0, n + 3), max_size=30))
    picked = native.decompress_rows(column, positions)
    assert picked is not None
    full = bson.decode(want, VALUES_CODEC_OPTIONS)
    got = bson.decode(picked, VALUES_CODEC_OPTIONS)
    assert list(got) == [str(k) for k, p in enumerate(positions) if str(p) in full]
    every = decode_elements(column)
    assert picked == rows_to_document([every[p] if p < n else None for p in positions])


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(st.sampled_from([v.column for v in VALID]),
              _rows.map(lambda rows: _python(rows).finalize())),
    EDITS,
)
def test_mutated_columns_give_the_reference_outcome(column: bytes, edits: list) -> None:
    _agree(mutated(column, edits))


def test_max_values_declines_as_the_reference_raises() -> None:
    column = _python([(0x10, b"\x01\x00\x00\x00")] * 300).finalize()
    assert native.decompress(column, 299) is None
    with pytest.raises(BSONColumnError):
        decompress(column, 299)
    assert native.decompress(column, 300) == rows_to_document(decode_elements(column))


def test_over_the_size_bound_the_reference_error() -> None:
    s = b"x" * (1 << 20)
    value = (len(s) + 1).to_bytes(4, "little") + s + b"\x00"
    column = _python([(0x02, value), (0x02, value[:-2] + b"y\x00")] * 9).finalize()
    assert native.decompress(column) is None
    assert len(native.decompress_rows(column, [0, 1])) < MAX_DECOMPRESSED_SIZE
    with pytest.raises(BSONColumnError, match="exceeds the BSON size limit"):
        decompress(column)


def test_buffers_and_bad_positions() -> None:
    column = _python([(0x10, b"\x01\x00\x00\x00"), None, (0x10, b"\x02\x00\x00\x00")]).finalize()
    want = native.decompress(column)
    assert native.decompress(bytearray(column)) == want
    assert native.decompress(memoryview(column)) == want
    assert bson.decode(native.decompress_rows(column, [2, 1, 0])) == {"0": 2, "2": 1}
    with pytest.raises(OverflowError):
        native.decompress_rows(column, [-1])
