"""Every shared vector decodes to its values and encodes to its exact bytes."""

from __future__ import annotations

import pytest

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError, compress, decompress
from storage.bsoncolumn.api import iter_row_elements
from storage.bsoncolumn.decoder import decode_elements

from .vectors import INVALID, VALID, Vector


def test_vector_file_is_complete() -> None:
    assert len(VALID) == 172
    assert {v.origin for v in VALID} == {"mongodb-output", "reference-encoder"}
    assert len(INVALID) == 6


@pytest.mark.parametrize("v", VALID, ids=lambda v: v.name)
def test_decodes_to_the_listed_values(v: Vector) -> None:
    # Compared as raw BSON: types, widths and NaN payloads included.
    assert decompress(v.column) == v.values


@pytest.mark.parametrize("v", VALID, ids=lambda v: v.name)
def test_encodes_to_the_listed_bytes(v: Vector) -> None:
    assert compress(v.values, v.count) == v.column


@pytest.mark.parametrize("v", VALID, ids=lambda v: v.name)
def test_row_count_includes_skips(v: Vector) -> None:
    assert len(decode_elements(v.column)) == v.count


@pytest.mark.parametrize("v", VALID, ids=lambda v: v.name)
def test_reopened_builder_matches(v: Vector) -> None:
    """Reopening the column and appending nothing gives it back; so does reopening a prefix
    and appending the rest."""
    assert BSONColumnBuilder.from_column(v.column).finalize() == v.column
    rows = iter_row_elements(v.values)
    half = v.count // 2
    head = BSONColumnBuilder().extend_rows([r for r in rows if r[0] < half], half)
    b = BSONColumnBuilder.from_column(head.finalize())
    b.extend_rows([(i - half, t, val) for i, t, val in rows if i >= half], v.count - half)
    assert b.finalize() == v.column


@pytest.mark.parametrize(("name", "column"), INVALID, ids=[n for n, _ in INVALID])
def test_invalid_vectors_raise(name: str, column: bytes) -> None:
    with pytest.raises(BSONColumnError):
        decompress(column)
