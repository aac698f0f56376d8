"""The native uniform-column encoder gives exactly the Python builder's bytes.

Every case compares `native.encode_uniform` with the Python `BSONColumnBuilder` fed the
same elements one by one (`append_element`, the per-value port of MongoDB's builder,
checked against MongoDB's vectors) and, for int32/int64/date/ObjectId, also with its
vectorised `extend_elements`; the native output must decode back to the values.

The incremental `native.UniformBuilder` is fed the values in random chunks; after each
chunk its `finalize()` must equal the Python builder's (fed one by one and finalized
after each chunk too) and `encode_uniform` of everything so far.

For doubles the per-value path is the reference (MongoDB's `_appendDouble` restarts at
the lowest scale after any block is written, RLE terminations included); the bulk path
once missed that case (`test_bulk_double_path_restarts_scale_after_rle_blocks`).
"""

from __future__ import annotations

import math
import random
import struct

import bson
import pytest
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, decompress, native
from storage.bsoncolumn.api import iter_row_elements, rows_to_document

from .vectors import VALID

pytestmark = pytest.mark.skipif(
    not native.AVAILABLE,
    reason="the native core storage._native was not built (pip install -e . builds it)",
)

INT64, DATE, DOUBLE, INT32, OID = 0x12, 0x09, 0x01, 0x10, 0x07
_PACK = {
    INT64: struct.Struct("<q").pack,
    DATE: struct.Struct("<q").pack,
    DOUBLE: struct.Struct("<d").pack,
    INT32: struct.Struct("<i").pack,
    OID: bytes,  # ObjectIds are given as their 12 bytes
}
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def python_column(t: int, raw: list[bytes]) -> bytes:
    """The Python builder's column, values appended one by one."""
    b = BSONColumnBuilder()
    for v in raw:
        b.append_element(t, v)
    return b.finalize()


def bulk_column(t: int, raw: list[bytes]) -> bytes:
    return BSONColumnBuilder().extend_elements([(t, v) for v in raw]).finalize()


def same_as_python(t: int, raw: list[bytes], got: bytes | None) -> None:
    assert got is not None
    expected = python_column(t, raw)
    assert got == expected, f"type {t:#x}, {len(raw)} values: {got.hex()} != {expected.hex()}"
    if t != DOUBLE:
        assert got == bulk_column(t, raw)


def check_raw(t: int, raw: list[bytes]) -> bytes:
    """Native == Python builder, and the native bytes decode to the values."""
    got = native.encode_uniform(t, b"".join(raw))
    same_as_python(t, raw, got)
    assert got is not None
    assert decompress(got) == rows_to_document([(t, v) for v in raw])
    return got


def check(t: int, values: list) -> bytes:
    pack = _PACK[t]
    return check_raw(t, [pack(v) for v in values])


# -- MongoDB's vectors -----------------------------------------------------------------------


def _uniform_vectors() -> list[tuple[str, int, list[bytes], bytes]]:
    out = []
    for v in VALID:
        rows = iter_row_elements(v.values)
        if not rows or len(rows) != v.count:
            continue  # skipped rows
        types = {t for _i, t, _v in rows}
        if len(types) != 1 or next(iter(types)) not in native.SUPPORTED_TYPES:
            continue
        out.append((v.name, next(iter(types)), [val for _i, _t, val in rows], v.column))
    return out


UNIFORM_VECTORS = _uniform_vectors()


def test_vectors_cover_every_supported_type() -> None:
    assert {t for _n, t, _r, _c in UNIFORM_VECTORS} == native.SUPPORTED_TYPES
    assert len(UNIFORM_VECTORS) >= 40


@pytest.mark.parametrize(
    ("t", "raw", "column"),
    [(t, raw, col) for _n, t, raw, col in UNIFORM_VECTORS],
    ids=[n for n, *_ in UNIFORM_VECTORS],
)
def test_vector(t: int, raw: list[bytes], column: bytes) -> None:
    assert check_raw(t, raw) == column


# -- table cases --------------------------------------------------------------------------


def _walk(seed: int, n: int, lo: int, hi: int) -> list[int]:
    rnd = random.Random(seed)
    x = (lo + hi) // 2
    out = []
    for _ in range(n):
        x = min(hi, max(lo, x + rnd.randint(-3, 3)))
        out.append(x)
    return out


def _decimals(seed: int, n: int, digits: list[int]) -> list[float]:
    rnd = random.Random(seed)
    x = 50.0
    out = []
    for _ in range(n):
        x += rnd.uniform(-2, 2)
        out.append(round(x, rnd.choice(digits)))
    return out


INT_CASES: dict[str, list[int]] = {
    "one": [7],
    "two": [7, 9],
    "constant 5": [42] * 5,
    "constant 120": [42] * 120,
    "constant 121": [42] * 121,
    "constant 1000": [42] * 1000,
    "constant 5000": [-1] * 5000,
    "counter 120": list(range(120)),
    "counter 121": list(range(1000, 1121)),
    "counter 1000": list(range(10**12, 10**12 + 1000)),
    "counter 5000": list(range(5000)),
    "walk 0-100 1000": _walk(1, 1000, 0, 100),
    "walk 0-100 5000": _walk(2, 5000, 0, 100),
    "min max": [I64_MIN, I64_MAX],
    "max min": [I64_MAX, I64_MIN],
    "alternating extremes": [I64_MIN, I64_MAX] * 60 + [0, I64_MIN, -1, I64_MAX, 1],
    "extremes and zero": [0, I64_MAX, 0, I64_MIN, 0] * 30,
    "powers of two": [1 << k for k in range(63)] + [-(1 << k) for k in range(64)],
    "trailing zeros": [k << s for s in (4, 15, 16, 30, 44, 56, 60) for k in range(1, 8)],
    "runs then changes": [5] * 300 + list(range(100)) + [7] * 241 + [8],
    "big steps": [k * (2**58 + 12345) for k in range(-31, 32)],
}

DOUBLE_CASES: dict[str, list[float]] = {
    "one": [1.5],
    "two": [0.0, 1.0],
    "constant 121": [3.25] * 121,
    "constant 5000": [0.1] * 5000,
    "integers": [float(i) for i in range(1000)],
    "0 decimals": _decimals(1, 1000, [0]),
    "1 decimal": _decimals(2, 1000, [1]),
    "2 decimals": _decimals(3, 1000, [2]),
    "3 decimals": _decimals(4, 1000, [3]),
    "4 decimals": _decimals(5, 1000, [4]),
    "mixed decimals": _decimals(6, 1000, [0, 1, 2, 3, 4]),
    "mixed up to 9": _decimals(7, 1000, [0, 2, 5, 8, 9]),
    "mostly 1 rarely 4": _decimals(8, 1000, [1] * 30 + [4]),
    "full precision": _decimals(9, 300, [17]),
    "huge": [1e300, -1e300, 1.7976931348623157e308, 2.0**53, 2.0**53 + 2, 9e15, -9e15],
    "near 2^53 scaled": [90071992547409.92, 90071992547409.91, 900719925474.0993, 0.5],
    "tiny": [5e-324, -5e-324, 2.2250738585072014e-308, 1e-9, 1e-8, 0.0001],
    "specials": [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -0.0, 1.0, math.pi],
    "nan runs": [float("nan")] * 130 + [1.0] + [float("nan")] * 3,
    "inf runs": [1.0, float("inf"), float("inf"), float("-inf"), 2.5] * 40,
    "negative zero runs": [-0.0] * 125 + [0.0] * 125 + [-0.0, 0.01],
    "halves": [k + 0.5 for k in range(-60, 60)],
    "prices": [round(100 + 0.01 * ((k * 7919) % 400 - 200), 2) for k in range(1000)],
    "counter 121": [k / 10 for k in range(121)],
}


@pytest.mark.parametrize("name", list(INT_CASES))
@pytest.mark.parametrize("t", [INT64, DATE])
def test_int64_and_date_table(t: int, name: str) -> None:
    check(t, INT_CASES[name])


@pytest.mark.parametrize("name", list(INT_CASES))
def test_int32_table(name: str) -> None:
    values = [max(I32_MIN, min(I32_MAX, v)) for v in INT_CASES[name]]
    check(INT32, values)


def test_dates_every_10s() -> None:
    base = 1_700_000_000_000
    check(DATE, [base + 10_000 * k for k in range(1000)])
    rnd = random.Random(3)
    check(DATE, [base + 10_000 * k + rnd.randint(-5, 5) for k in range(1000)])


@pytest.mark.parametrize("name", list(DOUBLE_CASES))
def test_double_table(name: str) -> None:
    check(DOUBLE, DOUBLE_CASES[name])


def test_nan_payload_is_kept() -> None:
    raw = [struct.pack("<Q", 0x7FF8000000000123), struct.pack("<Q", 0x7FF0000000000001)] * 20
    check_raw(DOUBLE, raw)


def test_unsupported_type_and_bad_input() -> None:
    assert native.encode_uniform(0x02, b"\x01\x00\x00\x00\x00") is None
    assert native.encode_uniform(0x08, b"\x01") is None
    with pytest.raises(ValueError):
        native.encode_uniform(INT64, b"")
    with pytest.raises(ValueError):
        native.encode_uniform(INT64, b"\x00" * 12)
    with pytest.raises(ValueError):
        native.encode_uniform(OID, b"\x00" * 16)


# -- ObjectId ---------------------------------------------------------------------------------

T0 = 1_700_000_000
P1, P2, P3 = bytes.fromhex("a1b2c3d4e5"), bytes.fromhex("0102030405"), bytes(5)


def _oid(ts: int, process: bytes, counter: int) -> bytes:
    """An ObjectId: 4-byte big-endian seconds, 5 process-unique bytes, 3-byte counter."""
    return (ts % 2**32).to_bytes(4, "big") + process + (counter % 2**24).to_bytes(3, "big")


def _random_oids(seed: int, n: int) -> list[bytes]:
    return [random.Random(seed).randbytes(12) for seed in range(seed, seed + n)]


OID_CASES: dict[str, list[bytes]] = {
    "one": [_oid(T0, P1, 5)],
    "same oid repeated": [_oid(T0, P1, 7)] * 300,
    "counter +1, 10 per second": [_oid(T0 + k // 10, P1, 1000 + k) for k in range(1000)],
    "counter +1, new second each": [_oid(T0 + k, P1, 77 + k) for k in range(500)],
    "counter wraps": [_oid(T0, P1, 2**24 - 50 + k) for k in range(100)],
    "timestamp wraps": [_oid(2**32 - 3 + k // 4, P1, k) for k in range(40)],
    "timestamp backwards": [_oid(T0 - 37 * k, P1, 3 * k) for k in range(200)],
    "counter random steps": [
        _oid(T0 + k // 7, P1, c) for k, c in enumerate(_walk(5, 400, 0, 2**40))
    ],
    "extremes one process": [_oid(0, P3, 0), _oid(2**32 - 1, P3, 2**24 - 1)] * 40,
    "two processes alternating": [_oid(T0, P1 if k % 2 else P2, k) for k in range(60)],
    "process changes in runs": [
        _oid(T0 + k // 50, p, 10 * k) for p in (P1, P2, P1, P3) for k in range(150)
    ],
    # processes that differ in one byte only (4 and 8: the ends of the compared part)
    "process differs in last byte": [
        _oid(T0, P1 if k % 9 else P1[:4] + b"\xe4", k) for k in range(90)
    ],
    "process differs in first byte": [
        _oid(T0, P1 if k % 9 else b"\xa0" + P1[1:], k) for k in range(90)
    ],
    "random": _random_oids(1, 200),
    "counters with random ones": [
        _random_oids(k, 1)[0] if k % 37 == 0 else _oid(T0, P2, k) for k in range(600)
    ],
    "runs of repeats": [_oid(T0 + k // 130, P1, k // 130) for k in range(1300)],
}


@pytest.mark.parametrize("name", list(OID_CASES))
def test_oid_table(name: str) -> None:
    check_raw(OID, OID_CASES[name])


# -- hypothesis -----------------------------------------------------------------------------

_int64 = (
    st.integers(-5, 5)
    | st.integers(-1000, 1000)
    | st.integers(I64_MIN, I64_MAX)
    | st.sampled_from([I64_MIN, I64_MAX, 0, -1, 1 << 60, -(1 << 60)])
)


@st.composite
def int_sequences(draw: st.DrawFn) -> list[int]:
    kind = draw(st.sampled_from(["free", "walk", "runs"]))
    if kind == "free":
        return draw(st.lists(_int64, min_size=1, max_size=300))
    start = draw(_int64)
    if kind == "walk":
        steps = draw(
            st.lists(st.integers(-(2**20), 2**20) | st.integers(-3, 3), min_size=0, max_size=400)
        )
        out = [start]
        for s in steps:
            out.append(max(I64_MIN, min(I64_MAX, out[-1] + s)))
        return out
    runs = draw(st.lists(st.tuples(_int64, st.integers(1, 300)), min_size=1, max_size=6))
    return [v for v, k in runs for _ in range(k)]


_double = (
    st.integers(-10000, 10000).map(lambda i: i / 100)
    | st.integers(-(10**9), 10**9).map(lambda i: i / 10 ** (i % 6))
    | st.integers(-100, 100).map(float)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, 1e308, 5e-324, 2.0**53])
)


@st.composite
def double_sequences(draw: st.DrawFn) -> list[float]:
    kind = draw(st.sampled_from(["free", "walk", "runs"]))
    if kind == "free":
        return draw(st.lists(_double, min_size=1, max_size=200))
    if kind == "walk":
        x = draw(st.integers(-(10**6), 10**6)) / 100
        steps = draw(st.lists(st.tuples(st.integers(-500, 500), st.integers(0, 5)), max_size=300))
        out = [x]
        for s, digits in steps:
            x = round(x + s / 100, digits)
            out.append(x)
        return out
    runs = draw(st.lists(st.tuples(_double, st.integers(1, 250)), min_size=1, max_size=6))
    return [v for v, k in runs for _ in range(k)]


@settings(max_examples=300, deadline=None)
@given(int_sequences(), st.sampled_from([INT64, DATE]))
def test_property_ints(values: list[int], t: int) -> None:
    check(t, values)


@settings(max_examples=300, deadline=None)
@given(double_sequences())
def test_property_doubles(values: list[float]) -> None:
    check(DOUBLE, values)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(I32_MIN, I32_MAX) | st.integers(-3, 3), min_size=1, max_size=200))
def test_property_int32(values: list[int]) -> None:
    check(INT32, values)


@st.composite
def oid_sequences(draw: st.DrawFn) -> list[bytes]:
    kind = draw(st.sampled_from(["counter", "mixed", "random"]))
    if kind == "random":
        return draw(st.lists(st.binary(min_size=12, max_size=12), min_size=1, max_size=100))
    nproc = 1 if kind == "counter" else 3
    procs = draw(st.lists(st.binary(min_size=5, max_size=5), min_size=nproc, max_size=nproc))
    ts = draw(st.integers(0, 2**32 - 1))
    counter = draw(st.integers(0, 2**24 - 1))
    steps = draw(
        st.lists(
            st.tuples(
                st.integers(0, nproc - 1),
                st.sampled_from([0, 0, 0, 1, -1]) | st.integers(-(2**32), 2**32),
                st.integers(0, 3) | st.integers(-(2**24), 2**24),
            ),
            max_size=300,
        )
    )
    out = [_oid(ts, procs[0], counter)]
    for proc, dt, dc in steps:
        ts += dt
        counter += dc
        out.append(_oid(ts, procs[proc], counter))
    return out


@settings(max_examples=200, deadline=None)
@given(oid_sequences())
def test_property_oids(values: list[bytes]) -> None:
    check_raw(OID, values)


# -- fixed-seed fuzz ---------------------------------------------------------------------------


def _fuzz_ints(rnd: random.Random, t: int, n: int) -> list[int]:
    lo, hi = (I32_MIN, I32_MAX) if t == INT32 else (I64_MIN, I64_MAX)
    step = rnd.choice([1, 3, 100, 1 << 20, 1 << 40, 1 << 62])
    x = rnd.randint(-1000, 1000) if rnd.random() < 0.8 else rnd.randint(lo, hi)
    repeat = rnd.choice([0.0, 0.3, 0.9])
    out: list[int] = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.02:
            out.append(rnd.choice([lo, hi, 0]))
        elif out and r < repeat:
            out.append(out[-1])
        else:
            x = min(hi, max(lo, x + rnd.randint(-step, step)))
            out.append(x)
    return out


_SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e300, 5e-324, 2.0**53, 0.1]


def _fuzz_doubles(rnd: random.Random, n: int) -> list[float]:
    digits = rnd.choice([[0], [1], [2], [4], [0, 1, 2, 3, 4], [2] * 20 + [5], [1, 8, 12], [17]])
    x = rnd.uniform(-1000, 1000) * rnd.choice([1, 1, 1e-6, 1e9])
    step = rnd.choice([0.01, 1.0, 100.0])
    repeat = rnd.choice([0.0, 0.3, 0.9])
    out: list[float] = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.02:
            out.append(rnd.choice(_SPECIAL))
        elif out and r < repeat:
            out.append(out[-1])
        else:
            x += rnd.uniform(-step, step)
            out.append(round(x, rnd.choice(digits)))
    return out


def _fuzz_oids(rnd: random.Random, n: int) -> list[bytes]:
    procs = [rnd.randbytes(5) for _ in range(rnd.choice([1, 1, 2, 3]))]
    ts = rnd.choice([rnd.getrandbits(32), T0, 2**32 - 2])
    counter = rnd.getrandbits(24)
    proc = procs[0]
    step = rnd.choice([1, 1, 5, 1000, 1 << 23])
    tick, repeat, switch = (rnd.choice(p) for p in ([0.0, 0.1, 0.5], [0.0, 0.05, 0.5],
                                                    [0.0, 0.01, 0.2]))
    out: list[bytes] = []
    for _ in range(n):
        if rnd.random() < 0.01:
            out.append(rnd.randbytes(12))
            continue
        if out and rnd.random() < repeat:
            out.append(out[-1])
            continue
        if rnd.random() < switch:
            proc = rnd.choice(procs)
        if rnd.random() < tick:
            ts += rnd.choice([1, 1, 2, -1, 1 << 20])
        counter += rnd.randint(1, step)
        out.append(_oid(ts, proc, counter))
    return out


def _fuzz_values(rnd: random.Random, t: int, n: int) -> list[bytes]:
    if t == OID:
        return _fuzz_oids(rnd, n)
    pack = _PACK[t]
    values = _fuzz_doubles(rnd, n) if t == DOUBLE else _fuzz_ints(rnd, t, n)
    return [pack(v) for v in values]


def test_fuzz_fixed_seed() -> None:
    rnd = random.Random(20240521)
    sizes = [1, 2, 3, 5, 8, 15, 16, 17, 30, 60, 61, 119, 120, 121, 250]
    for _ in range(12_000):
        n = rnd.choice(sizes) if rnd.random() < 0.995 else rnd.randint(250, 2000)
        t = rnd.choice([INT64, DATE, DOUBLE, DOUBLE, INT32, OID])
        raw = _fuzz_values(rnd, t, n)
        got = native.encode_uniform(t, b"".join(raw))
        # per value for doubles; the others through the faster bulk path (equal to per
        # value, which the table and property tests check)
        expected = python_column(t, raw) if t == DOUBLE else bulk_column(t, raw)
        assert got == expected, (t, raw)


def test_bulk_double_path_restarts_scale_after_rle_blocks() -> None:
    # Regression: Simple8bBuilder.extend once let a value join the pending block right
    # after _rle_terminate wrote blocks, skipping MongoDB's restart at the lowest scale.
    raw = [_PACK[DOUBLE](v) for v in [0.0, 0.01] + [1.0] * 67 + [0.0]]
    native_col = check_raw(DOUBLE, raw)
    # the per-value builder (MongoDB's algorithm) restarts at scale 10^0 for [1.0, 0.0]
    assert native_col.endswith(bytes.fromhex("900d0000000400000000"))
    assert bulk_column(DOUBLE, raw) == native_col


def test_large_column_round_trip() -> None:
    values = [bson.Int64(v) for v in _walk(11, 20_000, -(10**6), 10**6)]
    got = check(INT64, values)
    assert len(got) < 20_000 * 2


# -- the incremental builder ------------------------------------------------------------------


def check_incremental(t: int, raw: list[bytes], chunks: list[int]) -> None:
    """Feed `raw` to a UniformBuilder in chunks of the given sizes (cycled); after each
    chunk its finalize() equals the Python builder's, fed one by one, and encode_uniform
    of everything so far."""
    b = native.UniformBuilder(t)
    py = BSONColumnBuilder()
    i = 0
    k = 0
    while i < len(raw):
        chunk = raw[i : i + chunks[k % len(chunks)]]
        k += 1
        i += len(chunk)
        b.extend(b"".join(chunk))
        for v in chunk:
            py.append_element(t, v)
        got = b.finalize()
        expected = py.finalize()
        assert got == expected, f"type {t:#x}, after {i} values: {got.hex()} != {expected.hex()}"
        assert got == native.encode_uniform(t, b"".join(raw[:i]))
    assert b.count == len(b) == len(raw)
    assert b.values() == b"".join(raw)
    assert b.type_byte == t


def _random_chunks(seed: int) -> list[int]:
    rnd = random.Random(seed)
    top = rnd.choice([3, 10, 70, 200])
    return [rnd.randint(1, top) for _ in range(50)]


@pytest.mark.parametrize("chunks", [[1], [10], [7, 1, 64, 3], _random_chunks(1)],
                         ids=["1", "10", "7-1-64-3", "random"])
@pytest.mark.parametrize(
    ("t", "raw"),
    [(t, raw) for _n, t, raw, _c in UNIFORM_VECTORS],
    ids=[n for n, *_ in UNIFORM_VECTORS],
)
def test_incremental_vectors(t: int, raw: list[bytes], chunks: list[int]) -> None:
    check_incremental(t, raw, chunks)


def _table_cases() -> list[tuple[str, int, list[bytes]]]:
    out = []
    for name, ints in INT_CASES.items():
        if len(ints) <= 1000:
            out.append((f"int64 {name}", INT64, [_PACK[INT64](v) for v in ints]))
            out.append((f"date {name}", DATE, [_PACK[DATE](v) for v in ints]))
    for name, doubles in DOUBLE_CASES.items():
        if len(doubles) <= 1000:
            out.append((f"double {name}", DOUBLE, [_PACK[DOUBLE](v) for v in doubles]))
    out += [(f"oid {name}", OID, raw) for name, raw in OID_CASES.items()]
    return out


TABLE_CASES = _table_cases()


@pytest.mark.parametrize(("t", "raw"), [(t, r) for _n, t, r in TABLE_CASES],
                         ids=[n for n, *_ in TABLE_CASES])
def test_incremental_table(t: int, raw: list[bytes]) -> None:
    check_incremental(t, raw, [10])
    check_incremental(t, raw, _random_chunks(len(raw)))


@st.composite
def typed_sequences(draw: st.DrawFn) -> tuple[int, list[bytes]]:
    t = draw(st.sampled_from([INT64, DATE, INT32, DOUBLE, OID]))
    if t == OID:
        return t, draw(oid_sequences())
    if t == DOUBLE:
        return t, [_PACK[t](v) for v in draw(double_sequences())]
    values = draw(int_sequences())
    if t == INT32:
        values = [max(I32_MIN, min(I32_MAX, v)) for v in values]
    return t, [_PACK[t](v) for v in values]


@settings(max_examples=200, deadline=None)
@given(typed_sequences(), st.lists(st.integers(1, 80) | st.integers(1, 5), min_size=1))
def test_property_incremental(seq: tuple[int, list[bytes]], chunks: list[int]) -> None:
    check_incremental(seq[0], seq[1], chunks)


def test_incremental_fuzz_fixed_seed() -> None:
    rnd = random.Random(7_2024)
    for _ in range(600):
        t = rnd.choice([INT64, DATE, DOUBLE, DOUBLE, INT32, OID])
        raw = _fuzz_values(rnd, t, rnd.choice([5, 30, 121, 300, 1000]))
        check_incremental(t, raw, _random_chunks(rnd.getrandbits(32)))


def test_bucket_growing_in_batches_of_10() -> None:
    # the time-series pattern: a bucket of 1000 values, committed every 10
    base = 1_700_000_000_000
    raw = [_PACK[DATE](base + 1000 * k + (k % 7 == 0)) for k in range(1000)]
    check_incremental(DATE, raw, [10])


def test_copy_is_independent() -> None:
    raw = [_PACK[DOUBLE](v) for v in _decimals(3, 400, [1, 2])]
    a = native.UniformBuilder(DOUBLE, b"".join(raw[:150]))
    b = a.copy()
    a.extend(b"".join(raw[150:]))
    b.extend(b"".join(raw[300:]))  # a different continuation
    assert a.finalize() == python_column(DOUBLE, raw)
    assert b.finalize() == python_column(DOUBLE, raw[:150] + raw[300:])
    assert b.values() == b"".join(raw[:150] + raw[300:])
    assert (a.count, b.count) == (400, 250)


def test_constructor_values_equal_extend() -> None:
    raw = OID_CASES["process changes in runs"]
    a = native.UniformBuilder(OID, b"".join(raw))
    b = native.UniformBuilder(OID)
    b.extend(b"".join(raw))
    assert a.finalize() == b.finalize() == python_column(OID, raw)
    assert a.count == len(raw)


def test_finalize_does_not_end_the_builder() -> None:
    raw = [_PACK[INT64](v) for v in _walk(3, 300, 0, 100)]
    b = native.UniformBuilder(INT64, b"".join(raw[:100]))
    first = b.finalize()
    assert b.finalize() == first
    b.extend(b"".join(raw[100:]))
    assert b.finalize() == python_column(INT64, raw)
    assert first == python_column(INT64, raw[:100])


def test_builder_input_checks() -> None:
    empty = native.UniformBuilder(INT32)
    assert empty.finalize() == BSONColumnBuilder().finalize()
    assert (empty.count, empty.values()) == (0, b"")
    for t in (0x02, 0x08, 0x11, 0x13, 0):
        with pytest.raises(ValueError):
            native.UniformBuilder(t)
    with pytest.raises(ValueError):
        native.UniformBuilder(OID, b"\x00" * 13)
    raw = [_PACK[INT32](v) for v in [5, 6, 7, 7, 7]]
    b = native.UniformBuilder(INT32, bytearray(b"".join(raw[:3])))
    before = b.finalize()
    with pytest.raises(ValueError):
        b.extend(b"\x00" * 6)  # not whole int32 values: nothing appended
    with pytest.raises(TypeError):
        b.extend("1234")  # type: ignore[arg-type]
    b.extend(b"")
    assert (b.finalize(), b.count) == (before, 3)
    b.extend(memoryview(b"".join(raw[3:])))
    assert b.finalize() == python_column(INT32, raw)
    assert issubclass(native.Declined, Exception)


# -- pack_values: decoded values of one field for UniformBuilder.extend ----------------

_PACKABLE = {
    0x12: (Int64, st.integers(-(2**63), 2**63 - 1).map(Int64), "<q"),
    0x10: (int, st.integers(-(2**31), 2**31 - 1), "<i"),
    0x01: (float, st.floats(), "<d"),
    0x09: (DatetimeMS, st.integers(-(2**63), 2**63 - 1).map(DatetimeMS), "<q"),
    0x07: (ObjectId, st.binary(min_size=12, max_size=12).map(ObjectId), None),
}


def _first(values: list, better) -> int:  # type: ignore[no-untyped-def]
    best = 0
    for i, v in enumerate(values):
        if better(v, values[best]):
            best = i
    return best


@pytest.mark.skipif(not native.AVAILABLE, reason="native extension not built")
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(_PACKABLE)), st.data())
def test_pack_values_packs_and_finds_the_first_extremes(t, data) -> None:
    pytype, values_st, fmt = _PACKABLE[t]
    values = data.draw(st.lists(values_st, min_size=1, max_size=30))
    docs = [{"x": v, "other": 1} for v in values]
    got = native.pack_values(docs, "x", t, pytype)
    assert got is not None
    packed, lo, hi = got
    if t == 0x07:
        assert packed == b"".join(v.binary for v in values)
    else:
        assert packed == struct.pack(f"<{len(values)}{fmt[1]}", *map(int, values)
                                     if t == 0x09 else values)
    if t == 0x01 and any(math.isnan(v) for v in values):
        assert (lo, hi) == (-1, -1)
        return
    assert lo == _first(values, lambda a, b: a < b)   # Python's min(): the first smallest
    assert hi == _first(values, lambda a, b: a > b)


@pytest.mark.skipif(not native.AVAILABLE, reason="native extension not built")
def test_pack_values_declines_what_it_cannot_take() -> None:
    ok = [{"x": Int64(1)}, {"x": Int64(2)}]
    assert native.pack_values(ok, "x", 0x12, Int64) is not None
    for docs, t, pytype in (
            ([{"x": Int64(1)}, {}], 0x12, Int64),                 # missing field
            ([{"x": Int64(1)}, {"x": 2}], 0x12, Int64),           # another type
            ([{"x": 1}, {"x": True}], 0x10, int),                 # bool is not int
            ([{"x": 1}, {"x": 2**31}], 0x10, int),                # beyond int32
            ([{"x": 1.5}], 0x01, int),                            # pytype and type disagree
            ([{"x": True}], 0x08, bool),                          # not a native type
            ([{"x": Int64(1)}], 0x12, int)):
        assert native.pack_values(docs, "x", t, pytype) is None, (docs, t)
    with pytest.raises(TypeError):
        native.pack_values("not a list", "x", 0x12, Int64)
