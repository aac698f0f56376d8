"""The native uniform-column decoder gives exactly the numpy decoder's results.

`native.decode_uniform` must, whenever it returns a result, agree bit for bit with the
Python path of `decode_numeric` (run here with the native decoder switched off), and it
must return a result for every column whose rows are all of one of int64, int32, date
or double with no skips. On anything else (skips, mixed types, malformed columns) it
returns None, never crashes, and `decode_numeric` then gives the Python result or error.

Columns come from MongoDB's vectors, the native encoder and the Python builder fed
random sequences (walks, counters, extremes, doubles with 0-8 decimals and special
values, dates before 1970 and after 2038, long runs), plus truncations and mutations.
"""

from __future__ import annotations

import math
import random
import struct
from unittest.mock import patch

import bson
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, BSONColumnError, blocks, native
from storage.bsoncolumn.blocks import NotNumericColumn, NumericColumn, decode_numeric

from .vectors import INVALID, VALID

pytestmark = pytest.mark.skipif(
    not native.AVAILABLE,
    reason="the native core storage._native was not built (pip install -e . builds it)",
)

INT64, DATE, DOUBLE, INT32 = 0x12, 0x09, 0x01, 0x10
TYPES = (INT64, DATE, DOUBLE, INT32)
_PACK = {
    INT64: struct.Struct("<q").pack,
    DATE: struct.Struct("<q").pack,
    DOUBLE: struct.Struct("<d").pack,
    INT32: struct.Struct("<i").pack,
}
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


def python_decode(column: bytes, max_values: int | None = None) -> NumericColumn | Exception:
    """The numpy path of decode_numeric (native off), or the exception it raises."""
    kwargs = {} if max_values is None else {"max_values": max_values}
    with patch.object(blocks, "_NATIVE", False):
        try:
            return decode_numeric(column, **kwargs)
        except (BSONColumnError, NotNumericColumn) as e:
            return e


def is_uniform(nc: NumericColumn | Exception) -> bool:
    """Rows all present and all of one of the four natively decoded types."""
    if isinstance(nc, Exception) or not len(nc) or not nc.present.all():
        return False
    kinds = set(nc.types.tolist())
    return len(kinds) == 1 and kinds <= set(TYPES)


def check(column: bytes, must_decode: bool = False) -> tuple[int, bytearray, int] | None:
    """Native result vs the Python path; returns the native result."""
    got = native.decode_uniform(column)
    ref = python_decode(column)
    if must_decode or is_uniform(ref):
        assert got is not None, "native declined a uniform column"
    if got is None:
        return None
    assert not isinstance(ref, Exception), f"native decoded what Python rejects: {ref!r}"
    t, raw, n = got
    assert n == len(ref) and len(raw) == 8 * n
    assert ref.present.all() and set(ref.types.tolist()) == {t}
    assert bytes(raw) == ref.values.tobytes()
    nc = decode_numeric(column)  # the integrated path takes the native result
    assert nc.values.dtype == ref.values.dtype
    assert nc.values.tobytes() == ref.values.tobytes()
    assert np.array_equal(nc.present, ref.present)
    assert np.array_equal(nc.types, ref.types) and nc.types.dtype == ref.types.dtype
    assert nc.kind == ref.kind
    return got


def native_column(t: int, values: list) -> bytes:
    col = native.encode_uniform(t, b"".join(_PACK[t](v) for v in values))
    assert col is not None
    return col


def python_column(t: int, values: list) -> bytes:
    b = BSONColumnBuilder()
    for v in values:
        b.append_element(t, _PACK[t](v))
    return b.finalize()


# -- value sequences -------------------------------------------------------------------


def _int_seq(rnd: random.Random, t: int, n: int) -> list[int]:
    lo, hi = (I32_MIN, I32_MAX) if t == INT32 else (I64_MIN, I64_MAX)
    style = rnd.randrange(6)
    if style == 0:  # random walk
        x, out = rnd.randint(-1000, 1000), []
        for _ in range(n):
            x = min(hi, max(lo, x + rnd.randint(-50, 50)))
            out.append(x)
        return out
    if style == 1:  # counter with occasional jumps
        x, out = rnd.randint(lo // 2, hi // 2), []
        for _ in range(n):
            x = min(hi, x + (rnd.randint(1, 10**6) if rnd.random() < 0.05 else 1))
            out.append(x)
        return out
    if style == 2:  # extremes
        pool = [lo, hi, 0, -1, 1, lo + 1, hi - 1]
        return [rnd.choice(pool) for _ in range(n)]
    if style == 3:  # long runs (RLE)
        out = []
        while len(out) < n:
            out += [rnd.randint(-5, 5)] * rnd.choice((1, 3, 119, 120, 121, 250, 1920, 2100))
        return out[:n]
    if style == 4:  # wide random
        return [rnd.randint(lo, hi) for _ in range(n)]
    bits = rnd.choice((4, 16, 33, 50, 62))  # deltas of one magnitude
    x, out = 0, []
    for _ in range(n):
        x = min(hi, max(lo, x + rnd.randint(-(2**bits), 2**bits)))
        out.append(x)
    return out


def _date_seq(rnd: random.Random, n: int) -> list[int]:
    start = rnd.choice((-(10**13), -86400000 * 365 * 30, 0, 2**31 * 1000 + 5, 4 * 10**12))
    step = rnd.choice((1, 1000, 60000, 3600000))
    style = rnd.randrange(4)
    out, x = [], start
    for _ in range(n):
        if style == 0:
            x += step
        elif style == 1:
            x += step + rnd.randint(-3, 3)
        elif style == 2:
            x += rnd.choice((0, step, 2 * step))
        else:
            x = rnd.randint(-(2**62), 2**62)
        out.append(x)
    if style == 3 and n > 2:
        out[rnd.randrange(n)] = rnd.choice((I64_MIN, I64_MAX))
    return out


_SPECIAL = (math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308)


def _double_seq(rnd: random.Random, n: int) -> list[float]:
    decimals = rnd.randrange(9)
    style = rnd.randrange(5)
    out, x = [], rnd.uniform(-1e4, 1e4)
    for _ in range(n):
        if style == 0:
            x += rnd.uniform(-1, 1)
            out.append(round(x, decimals))
        elif style == 1:  # mixed decimals, re-scaling mid column
            out.append(round(rnd.uniform(-1e3, 1e3), rnd.randrange(9)))
        elif style == 2:  # specials among ordinary values
            out.append(rnd.choice(_SPECIAL) if rnd.random() < 0.2 else round(x, decimals))
        elif style == 3:  # runs
            if rnd.random() < 0.02:
                x = round(rnd.uniform(-100, 100), decimals)
            out.append(x)
        else:  # raw bits
            out.append(struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0])
    return out


def random_values(rnd: random.Random, t: int, n: int) -> list:
    if t == DOUBLE:
        return _double_seq(rnd, n)
    if t == DATE:
        return _date_seq(rnd, n)
    return _int_seq(rnd, t, n)


def _length(rnd: random.Random) -> int:
    r = rnd.random()
    if r < 0.6:
        return rnd.randint(1, 40)
    if r < 0.9:
        return rnd.randint(41, 600)
    return rnd.randint(601, 5000)


# -- tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("vec", VALID, ids=[v.name for v in VALID])
def test_vectors(vec) -> None:
    check(vec.column)


@pytest.mark.parametrize("name,column", INVALID, ids=[n for n, _ in INVALID])
def test_invalid_vectors_decline(name: str, column: bytes) -> None:
    assert native.decode_uniform(column) is None
    assert isinstance(python_decode(column), Exception)


def test_vectors_cover_each_type() -> None:
    """Guard: the vectors include uniform columns of all four types (not all declined)."""
    decoded = {got[0] for v in VALID if (got := native.decode_uniform(v.column)) is not None}
    assert decoded == set(TYPES)


def test_fuzz_native_encoder() -> None:
    rnd = random.Random(20261203)
    for i in range(2500):
        t = TYPES[i % 4]
        values = random_values(rnd, t, _length(rnd))
        check(native_column(t, values), must_decode=True)


def test_fuzz_python_builder() -> None:
    rnd = random.Random(7)
    for i in range(400):
        t = TYPES[i % 4]
        values = random_values(rnd, t, rnd.randint(1, 300))
        check(python_column(t, values), must_decode=True)


def test_doubles_bitwise_specials() -> None:
    values = [1.5, -0.0, math.nan, 0.0, math.inf, -math.inf, 2.25, 2.25, 1e-300, 3.0]
    _t, raw, n = check(native_column(DOUBLE, values), must_decode=True)
    assert n == len(values)
    assert [struct.pack("<d", v) for v in values] == [
        bytes(raw[8 * i : 8 * i + 8]) for i in range(n)
    ]


def test_int32_widened() -> None:
    values = [I32_MIN, I32_MAX, -1, 0, 7]
    t, raw, n = check(native_column(INT32, values), must_decode=True)
    assert t == INT32
    assert list(struct.unpack(f"<{n}q", bytes(raw))) == values


def test_max_values() -> None:
    col = native_column(INT64, list(range(1000)))
    assert native.decode_uniform(col, 1000) is not None
    assert native.decode_uniform(col, 999) is None
    with pytest.raises(BSONColumnError):
        decode_numeric(col, max_values=999)


def test_buffer_inputs_and_writable_values() -> None:
    col = native_column(DATE, [0, 1000, 2000, 3001])
    for arg in (bytearray(col), memoryview(col)):
        assert native.decode_uniform(arg) == native.decode_uniform(col)
    nc = decode_numeric(col)
    assert nc.values.flags.writeable and nc.kind == "date"


def test_declines_other_shapes() -> None:
    b = BSONColumnBuilder()
    b.append_many([1, 2])
    b.skip()
    b.append_many([3, 4])
    skipped = b.finalize()
    mixed = BSONColumnBuilder()
    mixed.append_many([1, bson.Int64(2), 3.5])
    bools = BSONColumnBuilder()
    bools.append_many([True, False, True])
    for col in (skipped, mixed.finalize(), bools.finalize(), b"\x00"):
        assert native.decode_uniform(col) is None
        check(col)


def _mutations(rnd: random.Random, col: bytes) -> list[bytes]:
    out = [col[:k] for k in sorted(rnd.sample(range(len(col)), min(len(col), 6)))]
    out.append(col + b"\x00")
    for _ in range(12):
        m = bytearray(col)
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(m))
            if rnd.random() < 0.5:
                m[i] = rnd.randrange(256)
            else:
                m[i] ^= 1 << rnd.randrange(8)
        out.append(bytes(m))
    return out


def test_truncations_and_mutations_never_crash() -> None:
    rnd = random.Random(99)
    sources = [v.column for v in VALID]
    for i in range(300):
        t = TYPES[i % 4]
        sources.append(native_column(t, random_values(rnd, t, rnd.randint(1, 200))))
    for col in sources:
        for m in _mutations(rnd, col):
            check(m)


_ints64 = st.integers(I64_MIN, I64_MAX)
_values = st.one_of(
    st.tuples(st.just(INT64), st.lists(_ints64, min_size=1, max_size=300)),
    st.tuples(st.just(INT32), st.lists(st.integers(I32_MIN, I32_MAX), min_size=1, max_size=300)),
    st.tuples(st.just(DATE), st.lists(_ints64, min_size=1, max_size=300)),
    st.tuples(
        st.just(DOUBLE),
        st.lists(
            st.one_of(
                st.floats(allow_nan=True, allow_infinity=True),
                st.builds(round, st.floats(-1e6, 1e6), st.integers(0, 8)),
            ),
            min_size=1,
            max_size=300,
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(_values, st.booleans())
def test_property_matches_python(tv: tuple[int, list], via_python_builder: bool) -> None:
    t, values = tv
    col = python_column(t, values) if via_python_builder else native_column(t, values)
    check(col, must_decode=True)
