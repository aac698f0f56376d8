"""BSONColumn reader, chosen-path decoding and aggregates."""

from __future__ import annotations

import math

import bson
import pytest
from bson import Binary, Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bson_order import sort_key
from storage.bsoncolumn import (
    BSONColumn,
    BSONColumnBuilder,
    BSONColumnError,
    compress,
    decompress,
    decompress_paths,
)
from storage.bsoncolumn.decoder import decode_elements
from storage.bsoncolumn.paths import decode_paths, extract_path
from storage.bsonutil import decode
from storage.vocabulary.missing import MISSING

from .strategies import mixed_rows, objects, rows
from .vectors import VALID

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def build(values: list) -> bytes:
    b = BSONColumnBuilder()
    for v in values:
        b.append(v)
    return b.finalize()


def raw_column(rs: list) -> bytes:
    b = BSONColumnBuilder()
    for r in rs:
        b.skip() if r is None else b.append_element(*r)
    return b.finalize()


def test_values_len_index_iteration() -> None:
    values = [1, Int64(2), 2.5, "x", MISSING, {"a": 1}, [1, 2], None, DatetimeMS(5)]
    b = BSONColumnBuilder()
    for v in values:
        b.skip() if v is MISSING else b.append(v)
    col = BSONColumn(b.finalize())
    assert len(col) == len(values)
    assert list(col) == values
    assert col[3] == "x" and col[4] is MISSING and col[-1] == DatetimeMS(5)
    assert isinstance(col[1], Int64) and not isinstance(col[0], Int64)
    assert col.to_document() == decompress(col.binary)


def test_binary_subtype_is_checked() -> None:
    column = build([1, 2])
    assert list(BSONColumn(Binary(column, 7))) == [1, 2]
    with pytest.raises(BSONColumnError):
        BSONColumn(Binary(column, 0))
    with pytest.raises(BSONColumnError):
        BSONColumn(b"")


@pytest.mark.parametrize("v", VALID[:40], ids=lambda v: v.name)
def test_reader_matches_decompress(v) -> None:  # type: ignore[no-untyped-def]
    col = BSONColumn(v.column)
    doc = decode(v.values)
    assert [x for x in col if x is not MISSING] == list(doc.values())
    assert len(col) == v.count


PATHS = ["a", "b", "c", "d", "a.a", "b.0", "c.1", "d.c", "zz", "b.a.a"]


@SETTINGS
@given(
    rows(
        objects() | st.sampled_from([(0x10, b"\x01\x00\x00\x00"), (0x03, b"\x05\x00\x00\x00\x00")])
    )
)
def test_paths_match_full_decoding(rs: list) -> None:
    column = raw_column(rs)
    full = decode_elements(column)
    got = decode_paths(column, PATHS)
    for p in PATHS:
        comps = [c.encode() for c in p.split(".")]
        assert got[p] == [extract_path(r, comps) for r in full], p


def test_paths_to_python_values() -> None:
    values = [{"t": DatetimeMS(i), "m": {"x": i, "y": float(i)}} for i in range(30)]
    values[3] = {"t": DatetimeMS(3)}  # no "m"
    column = build(values)
    assert column[0] == 0xF1
    out = decompress_paths(column, ["t", "m.x", "m"])
    assert out["t"] == [v["t"] for v in values]
    assert out["m.x"] == [v["m"]["x"] if "m" in v else MISSING for v in values]
    assert out["m"] == [v.get("m", MISSING) for v in values]
    with pytest.raises(ValueError):
        decompress_paths(column, ["a..b"])


def test_paths_only_decode_requested_streams() -> None:
    values = [{"a": i, "b": None} for i in range(10)]
    column = build(values)
    ref_end = 1 + int.from_bytes(column[1:5], "little")
    ctrl_a = ref_end
    ctrl_b = ctrl_a + 1 + 8 * ((column[ctrl_a] & 0xF) + 1)
    assert column[ctrl_b] == 0x80  # stream b: one block of ten zero deltas (null repeats)
    corrupt = bytearray(column)
    corrupt[ctrl_b + 1 : ctrl_b + 9] = (6 | 2 << 4).to_bytes(8, "little")  # first delta +1
    corrupt = bytes(corrupt)
    with pytest.raises(BSONColumnError):
        decompress(corrupt)  # a delta on null is invalid
    with pytest.raises(BSONColumnError):
        decompress_paths(corrupt, ["b"])
    assert decompress_paths(corrupt, ["a"])["a"] == list(range(10))  # b is only counted


AGG_COLUMNS = [
    [3, 1, 2],
    [Int64(5), 7, 2.5, -1.0],
    [float("nan"), 1.0, -math.inf],
    [0.0, -0.0],
    [DatetimeMS(10), DatetimeMS(5)],
    [True, False],
    ["b", "a", 3, None],
    [{"a": 2}, {"a": 1}],
    [bson.Timestamp(5, 1), bson.Timestamp(4, 9)],
    [Int64(2**62), Int64(2**62 + 1), 1.5],
]


@pytest.mark.parametrize("values", AGG_COLUMNS)
def test_aggregates(values: list) -> None:
    col = BSONColumn(build([*values[:1], *values[1:]]))
    present = list(values)
    assert col.count() == len(present)
    assert col.first() == present[0] or (isinstance(present[0], float) and math.isnan(col.first()))
    assert _same(col.last(), present[-1])
    assert _same(col.min(), _first_extreme(present, False))
    assert _same(col.max(), _first_extreme(present, True))


def _first_extreme(values: list, largest: bool) -> object:
    best = values[0]
    for v in values[1:]:
        if (sort_key(v) > sort_key(best)) if largest else (sort_key(v) < sort_key(best)):
            best = v
    return best


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return bson.encode({"": a}) == bson.encode({"": b})
    return type(a) is type(b) and a == b


def test_aggregates_of_empty_and_all_skipped() -> None:
    for column in (b"\x00", BSONColumnBuilder().skip(5).finalize()):
        col = BSONColumn(column)
        assert col.count() == 0
        assert col.first() is MISSING and col.last() is MISSING
        assert col.min() is MISSING and col.max() is MISSING


@SETTINGS
@given(mixed_rows)
def test_aggregates_agree_with_values(rs: list) -> None:
    col = BSONColumn(raw_column(rs))
    present = [v for v in col.values() if v is not MISSING]
    assert col.count() == len(present)
    if present:
        assert _same(col.first(), present[0])
        assert _same(col.last(), present[-1])
        assert sort_key(col.min()) == sort_key(_first_extreme(present, False))
        assert sort_key(col.max()) == sort_key(_first_extreme(present, True))


def test_compress_accepts_gaps_and_count() -> None:
    doc = bson.encode({"0": 1, "3": 2})
    column = compress(doc, 6)
    assert len(BSONColumn(column)) == 6
    assert decompress(column) == doc
    with pytest.raises(BSONColumnError):
        compress(bson.encode({"1": 1, "0": 2}))
    with pytest.raises(BSONColumnError):
        compress(bson.encode({"x": 1}))
    with pytest.raises(BSONColumnError):
        compress(doc, 2)


def test_paths_search_a_repeated_object_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work stays linear: 30,000 repeats of a 500-field object are not searched 30,000
    times (an RLE block is 8 bytes for 1920 rows)."""
    import storage.bsoncolumn.paths as paths_module

    big = {f"f{i}": "x" for i in range(500)}
    # a literal object followed by RLE zero deltas, written by hand
    literal = bytes((0x03, 0)) + bson.encode(big)
    rle = (15 | 15 << 4).to_bytes(8, "little")
    column = literal + bytes((0x80 | 15,)) + rle * 16 + b"\x00"
    calls = 0
    real = paths_module.extract_path

    def counting(elem, comps):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return real(elem, comps)

    monkeypatch.setattr(paths_module, "extract_path", counting)
    out = decode_paths(column, ["f499"])
    assert len(out["f499"]) == 1 + 1920 * 16
    assert calls <= 2
