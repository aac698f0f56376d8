"""The native general scalar builder (`storage._native.ColumnBuilder`) gives exactly the
Python `BSONColumnBuilder`'s bytes.

A differential test: random sequences over every scalar BSON type (doubles with NaN,
infinities, -0.0 and values that scale by powers of ten; ints near the int64 and int32
limits; dates, timestamps, ObjectIds sharing a process part; strings of 0-40 bytes,
non-ASCII included; binData short and long; decimal128; bool, null, undefined, min/max
key; regex, symbol, code, DBPointer, empty objects and arrays as literals), skipped rows
and type changes, fed to both builders in random batches, finalized at random points
and continued. The finished column must reopen natively (`from_column`) to the same
state as the Python builder's reopening, and decode natively (`decode_column`) to what
the Python decoder gives.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError
from storage.bsoncolumn.decoder import decode_elements
from storage.native import core

from .strategies import EDITS, mutated
from .vectors import INVALID, VALID

pytestmark = pytest.mark.skipif(core is None, reason="the native core was not built")

Row = tuple[int, bytes] | None

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
_Q = struct.Struct("<q")
_I = struct.Struct("<i")
_D = struct.Struct("<d")


def _string(b: bytes) -> bytes:
    return _I.pack(len(b) + 1) + b + b"\x00"


def _ints(lo: int, hi: int) -> st.SearchStrategy[list[int]]:
    """Runs of integers: a start (often near a limit) and small or large steps."""
    edge = st.sampled_from([lo, lo + 1, hi - 1, hi, 0, -1, 1])
    start = st.one_of(edge, st.integers(lo, hi))
    step = st.one_of(st.integers(-3, 3), st.integers(-(2**20), 2**20), st.integers(lo, hi))

    def run(s: int, steps: list[int]) -> list[int]:
        out = [s]
        for d in steps:
            out.append(min(hi, max(lo, out[-1] + d)))
        return out

    return st.builds(run, start, st.lists(step, max_size=40))


_doubles_special = st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e308, -1e-308, 5e-324]
)
_doubles_scaled = st.builds(
    lambda k, s: k / s,
    st.integers(-(10**9), 10**9),
    st.sampled_from([1, 10, 100, 10000, 100000000, 3]),
)
_doubles = st.one_of(_doubles_special, _doubles_scaled, st.floats(allow_nan=True))
_nan_payload = st.integers(1, 2**51).map(lambda m: struct.pack("<Q", 0x7FF8000000000000 | m))

_text = st.one_of(
    st.text(max_size=12).map(lambda s: s.encode("utf-8")[:40]),
    st.sampled_from([b"", b"a", b"ab", b"sensor-1", b"sensor-2", "é€😀".encode()]),
    st.binary(max_size=40).filter(lambda b: b"\x00" not in b).map(
        lambda b: b.decode("utf-8", "replace").encode("utf-8")[:40]
    ),
)


def _text_value(b: bytes) -> bytes:
    # cut at a character boundary so the value stays valid UTF-8
    return _string(b.decode("utf-8", "ignore").encode("utf-8"))


def _binary(size: st.SearchStrategy[int]) -> st.SearchStrategy[bytes]:
    def make(n: int, sub: int, seed: bytes) -> bytes:
        data = (seed * (n // max(1, len(seed)) + 1))[:n] if seed else bytes(n)
        if sub == 2:  # old binary repeats its length inside
            inner = data[:n]
            return _I.pack(len(inner) + 4) + b"\x02" + _I.pack(len(inner)) + inner
        return _I.pack(n) + bytes([sub]) + data

    return st.builds(make, size, st.sampled_from([0, 0, 0, 4, 0x80, 2]), st.binary(max_size=20))


_oid_unique = st.sampled_from([b"\x01\x02\x03\x04\x05", b"\xaa\xbb\xcc\xdd\xee"])


def _oids() -> st.SearchStrategy[list[bytes]]:
    def make(unique: bytes, ts: int, counter: int, steps: list[tuple[int, int, bool]]) -> list:
        out = []
        u = unique
        for dts, dc, flip in [(0, 0, False), *steps]:
            ts = (ts + dts) % 2**32
            counter = (counter + dc) % 2**24
            if flip:
                u = bytes(reversed(u))
            out.append(ts.to_bytes(4, "big") + u + counter.to_bytes(3, "big"))
        return out

    step = st.tuples(st.integers(0, 3), st.integers(-2, 5), st.just(False))
    return st.builds(
        make,
        _oid_unique,
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**24 - 1),
        st.lists(
            st.one_of(step, st.tuples(st.integers(0, 3), st.integers(0, 2), st.just(True))),
            max_size=30,
        ),
    )


def _decimal() -> st.SearchStrategy[list[bytes]]:
    def make(base: int, steps: list[int]) -> list[bytes]:
        out = []
        v = base
        for d in [0, *steps]:
            v = (v + d) % 2**128
            out.append(v.to_bytes(16, "little"))
        return out

    return st.builds(
        make,
        st.one_of(st.integers(0, 2**128 - 1), st.just(0x3040 << 112)),
        st.lists(st.integers(-1000, 1000), max_size=20),
    )


def _segment() -> st.SearchStrategy[list[Row]]:
    """A run of values of one type, with skipped rows among them."""
    segs = [
        st.builds(lambda xs: [(0x12, _Q.pack(x)) for x in xs], _ints(I64_MIN, I64_MAX)),
        st.builds(lambda xs: [(0x10, _I.pack(x)) for x in xs], _ints(I32_MIN, I32_MAX)),
        st.builds(lambda xs: [(0x09, _Q.pack(x)) for x in xs], _ints(I64_MIN, I64_MAX)),
        st.builds(lambda xs: [(0x11, _Q.pack(x)) for x in xs], _ints(I64_MIN, I64_MAX)),
        st.lists(_doubles.map(lambda x: (0x01, _D.pack(x))), min_size=1, max_size=50),
        st.lists(
            st.one_of(_doubles_scaled.map(lambda x: _D.pack(x)), _nan_payload).map(
                lambda v: (0x01, v)
            ),
            min_size=1,
            max_size=50,
        ),
        st.builds(lambda xs: [(0x07, x) for x in xs], _oids()),
        st.lists(_text.map(lambda b: (0x02, _text_value(b))), min_size=1, max_size=30),
        st.lists(_text.map(lambda b: (0x0D, _text_value(b))), min_size=1, max_size=10),
        st.lists(_text.map(lambda b: (0x0E, _text_value(b))), min_size=1, max_size=5),
        st.lists(
            _binary(st.sampled_from([0, 1, 8, 16, 16, 17, 20])).map(lambda b: (0x05, b)),
            min_size=1,
            max_size=20,
        ),
        st.builds(lambda xs: [(0x13, x) for x in xs], _decimal()),
        st.lists(st.booleans().map(lambda b: (0x08, b"\x01" if b else b"\x00")), max_size=40),
        st.lists(st.sampled_from([(0x0A, b""), (0x06, b""), (0xFF, b""), (0x7F, b"")]),
                 min_size=1, max_size=10),
        st.lists(
            st.sampled_from(
                [
                    (0x0B, b"ab\x00i\x00"),
                    (0x0B, b"\x00\x00"),
                    (0x0C, _string(b"db.c") + bytes(range(12))),
                    (0x03, b"\x05\x00\x00\x00\x00"),
                    (0x04, b"\x05\x00\x00\x00\x00"),
                ]
            ),
            min_size=1,
            max_size=5,
        ),
    ]

    # long runs of one row: RLE blocks (120 rows each, up to 16 a block) and their ends
    segs.append(
        st.builds(
            lambda r, n: [r] * n,
            st.sampled_from(
                [None, (0x12, _Q.pack(7)), (0x01, _D.pack(2.5)), (0x02, _string(b"on")),
                 (0x08, b"\x01"), (0x0A, b"")]
            ),
            st.sampled_from([119, 120, 121, 1919, 1920, 1921, 2500]),
        )
    )

    def with_skips(rows: list[Row], skips: list[int]) -> list[Row]:
        out = list(rows)
        for k in skips:
            out.insert(k % (len(out) + 1), None)
        return out

    return st.builds(
        with_skips,
        st.one_of(segs),
        st.one_of(st.just([]), st.lists(st.integers(0, 200), max_size=8)),
    )


_rows = st.builds(
    lambda segs, tail: [r for s in segs for r in s] + [None] * tail,
    st.lists(_segment(), min_size=1, max_size=6),
    st.sampled_from([0, 0, 0, 1, 130, 125 * 2]),
)


def _python(rows: list[Row]) -> BSONColumnBuilder:
    b = BSONColumnBuilder()
    for r in rows:
        if r is None:
            b.skip()
        else:
            b.append_element(r[0], r[1])
    return b


def _packed(rows: list[Row]) -> tuple[bytes, bytes, bytes]:
    types = bytes(0 if r is None else r[0] for r in rows)
    values = b"".join(b"" if r is None else r[1] for r in rows)
    ends, at = [], 0
    for r in rows:
        at += 0 if r is None else len(r[1])
        ends.append(at)
    return types, values, struct.pack(f"<{len(ends)}I", *ends)


@settings(max_examples=250, deadline=None)
@given(_rows, st.lists(st.integers(1, 60), min_size=1, max_size=8), st.data())
def test_native_builder_matches_python(rows: list[Row], cuts: list[int], data) -> None:
    assert core is not None
    py = BSONColumnBuilder()
    nat = core.ColumnBuilder()
    i = 0
    k = 0
    while i < len(rows):
        batch = rows[i : i + cuts[k % len(cuts)]]
        k += 1
        i += len(batch)
        for r in batch:
            if r is None:
                py.skip()
            else:
                py.append_element(r[0], r[1])
        if data.draw(st.booleans()):
            nat.extend(batch)
        else:
            nat.extend_packed(*_packed(batch))
        assert len(nat) == len(py)
        if data.draw(st.booleans()):
            assert nat.finalize() == py.finalize()
    column = py.finalize()
    assert nat.finalize() == column
    # reopened, both continue the same way
    reopened = core.ColumnBuilder.from_column(column)
    assert len(reopened) == len(rows)
    assert reopened.finalize() == column
    more: list[Row] = [None, (0x10, _I.pack(7)), (0x10, _I.pack(8)), (0x02, _string(b"x"))]
    py_again = BSONColumnBuilder.from_column(column)
    for r in more:
        if r is None:
            py_again.skip()
        else:
            py_again.append_element(r[0], r[1])
    reopened.extend(more)
    assert reopened.finalize() == py_again.finalize()
    # the native decoder reads what the Python decoder reads
    assert core.decode_column(column) == decode_elements(column)


@settings(max_examples=60, deadline=None)
@given(_rows)
def test_copy_is_independent(rows: list[Row]) -> None:
    assert core is not None
    nat = core.ColumnBuilder()
    nat.extend(rows)
    before = nat.finalize()
    c = nat.copy()
    c.skip(3)
    c.extend([(0x12, _Q.pack(1))])
    assert nat.finalize() == before
    assert c.finalize() == _python([*rows, None, None, None, (0x12, _Q.pack(1))]).finalize()


def test_every_scalar_vector_matches() -> None:
    assert core is not None
    checked = 0
    for v in VALID:
        rows = decode_elements(v.column)
        if any(r is not None and r[0] in (3, 4, 15) and len(r[1]) != 5 for r in rows):
            with pytest.raises(core.Declined):
                core.ColumnBuilder().extend(rows)
            continue
        b = core.ColumnBuilder()
        b.extend(rows)
        assert b.finalize() == v.column, v.name
        assert core.ColumnBuilder.from_column(v.column).finalize() == v.column, v.name
        assert core.decode_column(v.column) == rows, v.name
        checked += 1
    assert checked >= 100


def test_bad_values_raise_and_leave_the_builder_unchanged() -> None:
    assert core is not None
    b = core.ColumnBuilder()
    b.extend([(0x10, _I.pack(1)), None])
    before = b.finalize()
    # (a string that is not UTF-8 is no longer bad: test_non_utf8.py)
    for bad in [(0x10, b"\x01\x00\x00"), (0x08, b"\x02"),
                (0x14, b""), (0x02, b"\x01\x00")]:
        with pytest.raises(core.NativeError) as e:
            b.extend([(0x12, _Q.pack(5)), bad])
        assert e.value.args[0] == 6067602
        with pytest.raises(BSONColumnError):
            BSONColumnBuilder().append_element(*bad)
    assert b.finalize() == before
    assert len(b) == 2


def test_documents_decline() -> None:
    assert core is not None
    b = core.ColumnBuilder()
    obj = b"\x0c\x00\x00\x00\x10a\x00\x01\x00\x00\x00\x00"
    with pytest.raises(core.Declined):
        b.extend([(0x03, obj)])
    assert len(b) == 0
    column = BSONColumnBuilder().append_element(3, obj).append_element(3, obj).finalize()
    with pytest.raises(core.Declined):
        core.ColumnBuilder.from_column(column)
    assert core.decode_column(column) is None


def test_malformed_columns_decline() -> None:
    assert core is not None
    for column in [b"", b"\x80", b"\x10\x00\x01", b"\x12\x00" + bytes(8), b"\x00\x00"]:
        assert core.decode_column(column) is None
        with pytest.raises(core.Declined):
            core.ColumnBuilder.from_column(column)


def _python_decode(column: bytes) -> list | None:
    try:
        return decode_elements(column)
    except BSONColumnError:
        return None


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from([v.column for v in VALID]),
    EDITS,
)
def test_native_decoder_agrees_on_mutated_columns(column: bytes, edits: list) -> None:
    """Whatever the bytes, the native decoder gives the Python decoder's rows or None;
    never rows where the Python decoder raises. A reopening it takes finalizes to what
    the Python reopening does."""
    assert core is not None
    data = mutated(column, edits)
    want = _python_decode(data)
    got = core.decode_column(data)
    if got is not None:
        assert got == want
    try:
        reopened = core.ColumnBuilder.from_column(data)
    except core.Declined:
        return
    assert want is not None
    assert reopened.finalize() == BSONColumnBuilder.from_column(data).finalize()


def test_facade_exposes_the_builder_and_decoder() -> None:
    from storage.bsoncolumn import native

    assert native.ColumnBuilder is core.ColumnBuilder  # type: ignore[union-attr]
    rows: list[Row] = [(0x02, _string(b"a")), None, (0x02, _string(b"b"))]
    b = native.ColumnBuilder()
    b.extend(rows)
    column = b.finalize()
    assert column == _python(rows).finalize()
    assert native.decode_column(column) == rows


@settings(max_examples=80, deadline=None)
@given(_rows)
def test_packed_decoding_round_trips_through_extend_packed(rows: list[Row]) -> None:
    assert core is not None
    column = _python(rows).finalize()
    packed = core.decode_column_packed(column)
    assert packed == _packed(decode_elements(column))
    b = core.ColumnBuilder()
    b.extend_packed(*packed)
    assert b.finalize() == column


_DATA = Path(__file__).resolve().parents[3] / "data"


@pytest.mark.parametrize("name", ["reopen", "decode"])
def test_fuzz_double_columns_match_python_and_round_trip(name: str) -> None:
    """Two cargo-fuzz finds: long runs of doubles where an RLE block is written and a
    later block write restarts the scale. The native encoder took the value ending the
    RLE block as if the block's values were still pending (the value before the run) and
    wrote a column that decoded to other values (`native/src/bsoncolumn/simple8b.rs`
    `rle_terminate`)."""
    assert core is not None
    rows = list(decode_elements((_DATA / f"bsoncolumn_fuzz_double_{name}.bin").read_bytes()))
    expected = BSONColumnBuilder().extend_elements(rows).finalize()
    assert decode_elements(expected) == rows
    b = core.ColumnBuilder()
    b.extend(rows)
    column = b.finalize()
    assert column == expected
    assert decode_elements(column) == rows
    assert core.decode_column(column) == rows
    if all(r is not None and r[0] == 0x01 for r in rows):
        assert core.encode_uniform(0x01, b"".join(r[1] for r in rows if r)) == expected


@pytest.mark.parametrize(("step", "n", "tail"), [(0.5, 737, 0.001), (0.25, 611, 7.0)])
def test_skip_after_an_rle_run_of_doubles_round_trips(step: float, n: int, tail: float) -> None:
    """A skip ending an RLE run of double deltas writes the RLE block and restarts the
    scale from the value ending that block."""
    assert core is not None
    rows: list[Row] = [(0x01, _D.pack(0.5 + step * k)) for k in range(n)]
    rows += [None, (0x01, _D.pack(tail))]
    b = core.ColumnBuilder()
    b.extend(rows)
    column = b.finalize()
    assert decode_elements(column) == rows
    assert core.decode_column(column) == rows


def test_decompress_reads_natively_what_the_reference_reads() -> None:
    # `decompress` takes the native decoder's rows when it has them: the same document
    from storage.bsoncolumn.api import decompress, rows_to_document

    natively = 0
    for v in VALID:
        want = rows_to_document(decode_elements(v.column))
        assert decompress(v.column) == want, v.name
        natively += core.decode_column(v.column) is not None
    assert natively >= 100
    for _name, column in INVALID:
        with pytest.raises(BSONColumnError):
            decompress(column)
