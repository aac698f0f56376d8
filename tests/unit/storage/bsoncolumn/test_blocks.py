"""The numpy block decoder gives exactly what the element decoder gives."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError
from storage.bsoncolumn.blocks import NotNumericColumn, decode_numeric
from storage.bsoncolumn.decoder import decode_elements

from .strategies import boolean, date, double, int32, int64, runs, timestamp, walks
from .vectors import VALID

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def column(rows: list) -> bytes:
    b = BSONColumnBuilder()
    for r in rows:
        b.skip() if r is None else b.append_element(*r)
    return b.finalize()


def expected_value(t: int, v: bytes) -> object:
    if t == 0x01:
        return struct.unpack("<d", v)[0]
    if t == 0x10:
        return struct.unpack("<i", v)[0]
    if t == 0x08:
        return bool(v[0])
    if t == 0x11:
        return struct.unpack("<Q", v)[0]
    return struct.unpack("<q", v)[0]


def check_same(col: bytes) -> None:
    rows = decode_elements(col)
    try:
        nc = decode_numeric(col)
    except NotNumericColumn:
        types = {r[0] for r in rows if r}
        kinds = [{0x10, 0x12, 0x01}, {0x09}, {0x08}, {0x11}]
        assert not any(types <= k for k in kinds)
        return
    assert len(nc) == len(rows)
    for i, r in enumerate(rows):
        if r is None:
            assert not nc.present[i] and nc.types[i] == 0 and nc.values[i] == 0
            continue
        t, v = r
        assert nc.present[i] and nc.types[i] == t
        want = expected_value(t, v)
        got = nc.values[i].item()
        if nc.kind == "double" and t == 0x01:
            assert struct.pack("<d", got) == v  # bit for bit, -0.0 and NaN payloads too
        elif nc.kind == "double":
            assert got == float(want)
        else:
            assert got == want


@pytest.mark.parametrize("v", VALID, ids=lambda v: v.name)
def test_vectors(v) -> None:  # type: ignore[no-untyped-def]
    check_same(v.column)


numeric_rows = (
    st.lists(st.none() | int32 | int64 | double, max_size=200)
    | runs(int32 | int64 | double)
    | walks()
    | st.lists(st.none() | date, max_size=100)
    | runs(date)
    | st.lists(st.none() | boolean, max_size=100)
    | st.lists(st.none() | timestamp, max_size=100)
)


@SETTINGS
@given(numeric_rows)
def test_numeric_columns(rows: list) -> None:
    check_same(column(rows))


def test_other_types_are_refused() -> None:
    with pytest.raises(NotNumericColumn):
        decode_numeric(column([(0x02, b"\x02\x00\x00\x00a\x00")]))
    with pytest.raises(NotNumericColumn):
        decode_numeric(column([(0x10, b"\x01\x00\x00\x00"), (0x09, b"\x00" * 8)]))
    obj = BSONColumnBuilder().append({"a": 1}).append({"a": 2}).finalize()
    with pytest.raises(NotNumericColumn):
        decode_numeric(obj)


def test_all_skips_and_empty() -> None:
    nc = decode_numeric(column([None] * 300))
    assert len(nc) == 300 and not nc.present.any()
    assert len(decode_numeric(b"\x00")) == 0


def test_malformed_raises_column_error() -> None:
    good = column([(0x10, struct.pack("<i", i)) for i in range(100)])
    for bad in (good[:-1], good[:20] + b"\x00", b"\x80" + struct.pack("<Q", 15) + b"\x00"):
        with pytest.raises(BSONColumnError):
            decode_numeric(bad)


def test_dtypes() -> None:
    assert decode_numeric(column([(0x10, b"\x01\x00\x00\x00")])).values.dtype == np.int64
    assert decode_numeric(column([(0x01, struct.pack("<d", 1.5))])).values.dtype == np.float64
    assert decode_numeric(column([(0x08, b"\x01")])).values.dtype == np.bool_
    assert decode_numeric(column([(0x11, b"\x01" * 8)])).values.dtype == np.uint64
