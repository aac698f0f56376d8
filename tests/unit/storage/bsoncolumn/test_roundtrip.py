"""Properties: decoding inverts encoding; every way of building gives the same bytes."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, compress, decompress
from storage.bsoncolumn.decoder import decode_elements
from storage.bsonutil import decode

from .strategies import mixed_rows

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(rows: list) -> BSONColumnBuilder:
    b = BSONColumnBuilder()
    for e in rows:
        if e is None:
            b.skip()
        else:
            b.append_element(*e)
    return b


def as_doc(rows: list) -> bytes:
    body = b"".join(
        bytes((e[0],)) + str(i).encode() + b"\x00" + e[1] for i, e in enumerate(rows) if e
    )
    return len(body + b"12345").to_bytes(4, "little") + body + b"\x00"


@SETTINGS
@given(mixed_rows)
def test_decode_inverts_encode(rows: list) -> None:
    column = build(rows).finalize()
    assert decode_elements(column) == rows


@SETTINGS
@given(mixed_rows)
def test_compress_decompress_documents(rows: list) -> None:
    doc = as_doc(rows)
    column = compress(doc, len(rows))
    assert decompress(column) == doc
    # and the document is valid BSON that bson itself reads
    decode(decompress(column))


@SETTINGS
@given(mixed_rows, st.data())
def test_intermediate_and_reopen_give_the_same_bytes(rows: list, data: st.DataObject) -> None:
    expected = build(rows).finalize()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=4)))

    # intermediate() at arbitrary points, diffs applied to a buffer
    b = BSONColumnBuilder()
    binary = b""
    prev = 0
    for cut in [*cuts, len(rows)]:
        for e in rows[prev:cut]:
            b.skip() if e is None else b.append_element(*e)
        prev = cut
        diff = b.intermediate()
        assert 0 <= diff.offset <= len(binary)
        binary = diff.apply(binary)
        assert binary == b.finalize()
    assert binary == expected
    assert b.finalize() == expected

    # reopen from a finalized column at each cut, then append the rest
    for cut in cuts:
        head = build(rows[:cut])
        reopened = BSONColumnBuilder.from_column(head.finalize())
        assert reopened.state_key() == head.state_key()
        for e in rows[cut:]:
            reopened.skip() if e is None else reopened.append_element(*e)
        assert reopened.finalize() == expected
        assert len(reopened) == len(rows)


@SETTINGS
@given(mixed_rows, mixed_rows)
def test_diffs_after_reopen_apply_to_the_stored_column(head: list, tail: list) -> None:
    """The bucket catalog's cycle: store a column, reopen it, append, write only the diff."""
    stored = build(head).finalize()
    b = BSONColumnBuilder.from_column(stored)
    for e in tail:
        b.skip() if e is None else b.append_element(*e)
    diff = b.intermediate()
    assert diff.apply(stored) == build(head + tail).finalize()


@pytest.mark.parametrize(("step", "n", "tail"), [(0.5, 737, 0.001), (0.25, 611, 7.0)])
def test_python_reference_skip_after_an_rle_run_of_doubles_round_trips(
    step: float, n: int, tail: float
) -> None:
    """The reference builder, one value at a time and in bulk: an RLE block written when
    a skip ends a run of equal double deltas leaves the count before the double encoder
    looks for the value ending it (the bug the native fuzzing found, here as well)."""
    pack = struct.Struct("<d").pack
    rows: list = [(0x01, pack(0.5 + step * k)) for k in range(n)] + [None, (0x01, pack(tail))]
    bulk = BSONColumnBuilder().extend_elements(rows).finalize()
    one = BSONColumnBuilder()
    for row in rows:
        if row is None:
            one.skip()
        else:
            one.append_element(*row)
    assert one.finalize() == bulk
    assert decode_elements(bulk) == rows
