"""The vectorised bulk paths give the same bytes and state as appending value by value."""

from __future__ import annotations

import math
import struct

import bson
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder, compress
from storage.bsoncolumn.api import iter_row_elements, parse_uniform
from storage.vocabulary.missing import MISSING

from .strategies import mixed_rows

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one_by_one(doc: bytes, count: int | None = None) -> BSONColumnBuilder:
    """The reference: every row of a {"0": v, ...} document appended (or skipped) alone."""
    b = BSONColumnBuilder()
    rows = iter_row_elements(doc)
    nxt = 0
    for row, t, v in rows:
        b.skip(row - nxt)
        b.append_element(t, v)
        nxt = row + 1
    if count is not None:
        b.skip(count - nxt)
    return b


_PACK = {
    0x10: struct.Struct("<i").pack,
    0x12: struct.Struct("<q").pack,
    0x09: struct.Struct("<q").pack,
    0x11: struct.Struct("<q").pack,
    0x08: lambda v: b"\x01" if v else b"\x00",
    0x01: struct.Struct("<d").pack,
}


@st.composite
def int_runs(draw: st.DrawFn) -> tuple[int, list[int]]:
    t = draw(st.sampled_from([0x10, 0x12, 0x09, 0x11, 0x08]))
    n = draw(st.integers(1, 400))
    kind = draw(st.sampled_from(["counter", "walk", "wide", "random", "shifted", "const"]))
    rnd = draw(st.randoms(use_true_random=False))
    x = rnd.randint(-1000, 1000)
    out = []
    for _ in range(n):
        if t == 0x08:
            x = rnd.randint(0, 1) if kind != "const" else 1
        elif kind == "counter":
            x += 1
        elif kind == "walk":
            x += rnd.randint(-3, 3)
        elif kind == "wide":
            x += rnd.randint(-(2**40), 2**40)
        elif kind == "random":
            x = rnd.getrandbits(64) - 2**63
        elif kind == "shifted":
            x += rnd.randint(-4, 4) << rnd.choice([8, 20, 40, 58])
        if t == 0x10:
            x = max(-(2**31), min(2**31 - 1, x))
        x = ((x + 2**63) % 2**64) - 2**63
        out.append(x)
    return t, out


@st.composite
def double_runs(draw: st.DrawFn) -> tuple[int, list[float]]:
    n = draw(st.integers(1, 400))
    kind = draw(st.sampled_from(["walk", "mixed", "special", "wide", "repeat"]))
    decimals = draw(st.integers(0, 6))
    rnd = draw(st.randoms(use_true_random=False))
    x = rnd.uniform(-1000, 1000)
    out = []
    for _ in range(n):
        if kind == "walk":
            x = round(x + rnd.uniform(-1, 1) * rnd.choice([0.01, 1, 100]), decimals)
        elif kind == "mixed":
            x = round(rnd.uniform(-1e6, 1e6), rnd.randint(0, 9))
        elif kind == "special":
            x = rnd.choice([0.0, -0.0, 1.5, math.inf, -math.inf, math.nan, 1e300, 5e-324, 0.1])
        elif kind == "wide":
            x = rnd.uniform(-1e18, 1e18)
        else:
            x = rnd.choice([x, x, round(x + 1, 1)])
        out.append(x)
    return 0x01, out


prefixes = st.sampled_from(
    [[], [None], [(0x10, b"\x03\x00\x00\x00")], [(0x02, b"\x02\x00\x00\x00a\x00")], "same"]
)


def _one_by_one(b: BSONColumnBuilder, t: int, values: list, flags: list[bool] | None) -> None:
    for i, v in enumerate(values):
        if flags is not None and not flags[i]:
            b.skip()
        else:
            b.append_element(t, _PACK[t](v))


def _prefix(b: BSONColumnBuilder, prefix: object, t: int, values: list) -> None:
    if prefix == "same":
        b.append_element(t, _PACK[t](values[0]))
        return
    for e in prefix:  # type: ignore[attr-defined]
        b.skip() if e is None else b.append_element(*e)


@SETTINGS
@given(int_runs() | double_runs(), prefixes, st.data())
def test_append_array_equals_one_by_one(run: tuple, prefix: object, data: st.DataObject) -> None:
    t, values = run
    flags = data.draw(
        st.none() | st.lists(st.booleans(), min_size=len(values), max_size=len(values))
    )
    a = BSONColumnBuilder()
    b = BSONColumnBuilder()
    _prefix(a, prefix, t, values)
    _prefix(b, prefix, t, values)
    _one_by_one(a, t, values, flags)
    dtype = np.float64 if t == 0x01 else np.int64
    b.append_array(t, np.array(values, dtype=dtype), None if flags is None else np.array(flags))
    assert b.state_key() == a.state_key()
    assert b.finalize() == a.finalize()
    assert len(b) == len(a)


def test_append_array_after_interleaved_keeps_leading_skips_in_the_section() -> None:
    a = BSONColumnBuilder().append({"x": 1}).append({"x": 2})
    b = BSONColumnBuilder().append({"x": 1}).append({"x": 2})
    a.skip().append_element(0x12, struct.pack("<q", 5))
    b.append_array(0x12, np.array([0, 5]), np.array([False, True]))
    assert b.finalize() == a.finalize()


@SETTINGS
@given(int_runs() | double_runs())
def test_compress_fast_parse_equals_generic(run: tuple) -> None:
    t, values = run
    if t == 0x10:
        doc = bson.encode({str(i): v for i, v in enumerate(values)})
    else:
        body = b"".join(
            bytes((t,)) + str(i).encode() + b"\x00" + _PACK[t](v) for i, v in enumerate(values)
        )
        doc = struct.pack("<i", len(body) + 5) + body + b"\x00"
    uniform = parse_uniform(doc)
    assert uniform is not None and uniform[0] == t and len(uniform[1]) == len(values)
    generic = one_by_one(doc).finalize()
    assert compress(doc) == generic
    assert compress(doc, len(values) + 3) == one_by_one(doc, len(values) + 3).finalize()


@pytest.mark.parametrize(
    "doc",
    [
        bson.encode({"0": 1, "2": 2}),  # a gap
        bson.encode({"0": 1, "1": bson.Int64(2)}),  # mixed types
        bson.encode({"0": 1, "1": "x"}),
        bson.encode({}),
    ],
)
def test_fast_parse_declines_other_documents(doc: bytes) -> None:
    assert parse_uniform(doc) is None
    assert parse_uniform(bson.encode({"a": 1})) is None
    assert compress(doc) == one_by_one(doc).finalize()


@st.composite
def uniform_objects(draw: st.DrawFn) -> list:
    """Objects sharing one layout of fixed-size fields (the time-series measurement case)."""
    n = draw(st.integers(1, 120))
    rnd = draw(st.randoms(use_true_random=False))
    as_array = draw(st.integers(0, 5)) == 0
    kinds = draw(
        st.lists(st.sampled_from(["i", "l", "d", "t", "b", "sub"]), min_size=1, max_size=5)
    )

    def value(kind: str, i: int) -> object:
        if kind == "i":
            return i * rnd.randint(0, 3)
        if kind == "l":
            return bson.Int64(rnd.randint(-(2**40), 2**40))
        if kind == "d":
            return round(rnd.uniform(-100, 100), rnd.randint(0, 3))
        if kind == "t":
            return bson.DatetimeMS(1_700_000_000_000 + 1000 * i)
        if kind == "b":
            return rnd.random() < 0.5
        return {"x": i, "y": float(i) / 4}

    rows = []
    for i in range(n):
        vals = [value(k, i) for k in kinds]
        rows.append(vals if as_array else {f"f{j}": v for j, v in enumerate(vals)})
    return rows


@SETTINGS
@given(uniform_objects())
def test_compress_uniform_objects_equals_generic(rows: list) -> None:
    doc = bson.encode({str(i): r for i, r in enumerate(rows)})
    generic = one_by_one(doc)
    fast = compress(doc)
    assert fast == generic.finalize()
    # the builder state after the bulk path is the one-by-one state too
    from storage.bsoncolumn.api import parse_uniform_objects

    parsed = parse_uniform_objects(doc)
    assert parsed is not None
    b = BSONColumnBuilder().append_uniform_objects(*parsed)
    assert b.state_key() == generic.state_key()
    assert len(b) == len(rows)


py_values = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**40), 2**40).map(bson.Int64),
    st.floats(allow_nan=False).map(lambda x: round(x, 2) if math.isfinite(x) else x),
    st.booleans(),
    st.integers(0, 10**6).map(lambda i: bson.DatetimeMS(1_700_000_000_000 + i * 1000)),
    st.just("s"),
    st.sampled_from(["idle", "busy", "", "a" * 16, "b" * 17, "\x00x", "\u00e9t\u00e9"]),
    st.text(max_size=20),
    st.just(MISSING),
)


@st.composite
def py_runs(draw: st.DrawFn) -> list:
    out: list = []
    for _ in range(draw(st.integers(1, 4))):
        v = draw(py_values)
        n = draw(st.integers(1, 80))
        step = draw(st.sampled_from([0, 1]))
        pool = draw(st.lists(st.text(max_size=6), min_size=1, max_size=4))
        for i in range(n):
            if draw(st.integers(0, 20)) == 0:
                out.append(MISSING)
            elif type(v) is int and step:
                out.append(max(-(2**63), min(2**63 - 1, v + i)))
            elif type(v) is str and step:
                out.append(pool[i % len(pool)] if i % 7 else v)
            else:
                out.append(v)
    return out


@SETTINGS
@given(py_runs())
def test_append_many_equals_append(values: list) -> None:
    a = BSONColumnBuilder()
    for v in values:
        a.skip() if v is MISSING else a.append(v)
    b = BSONColumnBuilder().append_many(values)
    assert b.state_key() == a.state_key()
    assert b.finalize() == a.finalize()
    assert len(b) == len(a) == len(values)


@st.composite
def oid_runs(draw: st.DrawFn) -> list[bytes]:
    n = draw(st.integers(1, 300))
    rnd = draw(st.randoms(use_true_random=False))
    uniques = [b"\x01\x02\x03\x04\x05", b"\x09\x09\x09\x09\x09"]
    ts = rnd.randint(0, 2**32 - 1)
    counter = rnd.randint(0, 2**24 - 1)
    unique = uniques[0]
    out = []
    for _ in range(n):
        r = rnd.random()
        if r < 0.03:
            unique = rnd.choice(uniques)
        if r < 0.2:
            ts = (ts + rnd.randint(0, 3)) % 2**32
        counter = (counter + rnd.choice([1, 1, 1, 2, 1000])) % 2**24
        out.append(ts.to_bytes(4, "big") + unique + counter.to_bytes(3, "big"))
    return out


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(oid_runs(), prefixes, st.data())
def test_append_array_oids_equals_one_by_one(
    oids: list[bytes], prefix: object, data: st.DataObject
) -> None:
    flags = data.draw(st.none() | st.lists(st.booleans(), min_size=len(oids), max_size=len(oids)))
    a = BSONColumnBuilder()
    b = BSONColumnBuilder()
    for builder in (a, b):
        if prefix == "same":
            builder.append_element(0x07, oids[0])
        else:
            for e in prefix:  # type: ignore[attr-defined]
                builder.skip() if e is None else builder.append_element(*e)
    for i, o in enumerate(oids):
        a.skip() if flags is not None and not flags[i] else a.append_element(0x07, o)
    arr = np.frombuffer(b"".join(oids), dtype=np.uint8).reshape(len(oids), 12)
    b.append_array(0x07, arr, None if flags is None else np.array(flags))
    assert b.state_key() == a.state_key()
    assert b.finalize() == a.finalize()
    doc = bson.encode({str(i): bson.ObjectId(o) for i, o in enumerate(oids)})
    assert compress(doc) == one_by_one(doc).finalize()


@settings(max_examples=300, deadline=None)
@given(py_values | st.text(max_size=5) | st.none() | st.binary(max_size=4))
def test_encode_value_matches_bson(value: object) -> None:
    from storage.bsoncolumn.builder import encode_value
    from storage.bsonutil import CODEC_OPTIONS

    if value is MISSING:
        return
    raw = bson.encode({"": value}, codec_options=CODEC_OPTIONS)
    assert encode_value(value) == (raw[4], raw[6:-1])


@SETTINGS
@given(mixed_rows)
def test_compress_of_any_document_equals_one_by_one(rows: list) -> None:
    """compress() takes bulk paths for the runs it finds; the result never changes."""
    body = b"".join(
        bytes((e[0],)) + str(i).encode() + b"\x00" + e[1] for i, e in enumerate(rows) if e
    )
    doc = struct.pack("<i", len(body) + 5) + body + b"\x00"
    expected = one_by_one(doc, len(rows))
    assert compress(doc, len(rows)) == expected.finalize()
    b = BSONColumnBuilder().extend_rows(iter_row_elements(doc), len(rows))
    assert b.state_key() == expected.state_key()
