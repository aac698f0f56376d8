"""Hypothesis strategies for raw BSON elements as BSONColumn sees them: (type, value bytes).

Values are drawn so that deltas actually happen: small integer ranges, random walks of
doubles with few decimals, ObjectIds sharing their process part, short strings, binData
of equal length, objects with a stable set of fields that sometimes lose one.
"""

from __future__ import annotations

import struct

import bson
from bson.decimal128 import Decimal128
from hypothesis import strategies as st

from storage.bsoncolumn.builder import encode_value

Element = tuple[int, bytes]

_i32 = struct.Struct("<i")
_q = struct.Struct("<q")
_d = struct.Struct("<d")


def _string_value(t: int, s: bytes) -> Element:
    return (t, _i32.pack(len(s) + 1) + s + b"\x00")


small_ints = st.integers(-20, 20) | st.integers(-(2**31), 2**31 - 1)
int32 = small_ints.map(lambda i: (0x10, _i32.pack(max(-(2**31), min(2**31 - 1, i)))))
int64 = (st.integers(-1000, 1000) | st.integers(-(2**63), 2**63 - 1)).map(
    lambda i: (0x12, _q.pack(i))
)
double = (
    st.integers(-10000, 10000).map(lambda i: i / 100)
    | st.integers(-100, 100).map(float)
    | st.sampled_from([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e308, 5e-324])
    | st.floats(allow_nan=True)
    | st.integers(-(10**12), 10**12).map(lambda i: i / 10**8)
).map(lambda x: (0x01, _d.pack(x)))
# NaN with a payload: raw memory must survive.
odd_nan = st.just((0x01, struct.pack("<Q", 0x7FF8000000000123)))
date = (st.integers(1_600_000_000_000, 1_600_000_100_000) | st.integers(-(2**63), 2**63 - 1)).map(
    lambda i: (0x09, _q.pack(i))
)
timestamp = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)).map(
    lambda ti: (0x11, struct.pack("<II", ti[1], ti[0]))
)
boolean = st.sampled_from([(0x08, b"\x00"), (0x08, b"\x01")])
null = st.just((0x0A, b""))
undefined = st.just((0x06, b""))
minkey = st.just((0xFF, b""))
maxkey = st.just((0x7F, b""))
_unique = st.sampled_from([b"\x01\x02\x03\x04\x05", b"\xaa\xbb\xcc\xdd\xee"])
object_id = st.tuples(st.integers(0, 2**32 - 1), _unique, st.integers(0, 2**24 - 1)).map(
    lambda p: (0x07, p[0].to_bytes(4, "big") + p[1] + p[2].to_bytes(3, "big"))
)
short_text = st.text(alphabet="abcxyz\u00e9\u4e2d", max_size=6).map(lambda s: s.encode())
any_text = st.text(max_size=24).map(lambda s: s.encode())
# Embedded NULs; a leading NUL makes a string unencodable as a delta.
nul_text = st.lists(st.integers(0, 127), max_size=6).map(bytes)
# Strings differing in their first bytes: 128-bit deltas with many trailing zeros.
prefixed = st.tuples(st.integers(0, 3), st.integers(1, 16)).map(
    lambda p: _string_value(0x02, (chr(97 + p[0]) + "bcdefghijklmnop")[: p[1]].encode())
)
string = (short_text | any_text | nul_text).map(lambda s: _string_value(0x02, s)) | prefixed
code = short_text.map(lambda s: _string_value(0x0D, s))
symbol = short_text.map(lambda s: _string_value(0x0E, s))
binary = st.tuples(
    st.sampled_from([0, 4, 0x80]),
    st.integers(0, 20).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
).map(lambda p: (0x05, _i32.pack(len(p[1])) + bytes((p[0],)) + p[1]))
decimal = st.integers(-5, 10**6).map(lambda i: (0x13, Decimal128(str(i)).bid)) | st.integers(
    -30, 30
).map(lambda e: (0x13, Decimal128(f"1E{e}").bid))
regex = st.sampled_from([("a.*", "i"), ("b", ""), ("^x$", "ms")]).map(
    lambda p: (0x0B, p[0].encode() + b"\x00" + p[1].encode() + b"\x00")
)
dbpointer = st.sampled_from([b"db.c", b"x"]).map(
    lambda ns: (0x0C, _i32.pack(len(ns) + 1) + ns + b"\x00" + b"\x11" * 12)
)
code_w_scope = st.just(encode_value(bson.Code("f()", {"a": 1})))

scalar = st.one_of(
    int32,
    int64,
    double,
    odd_nan,
    date,
    timestamp,
    boolean,
    null,
    undefined,
    minkey,
    maxkey,
    object_id,
    string,
    code,
    symbol,
    binary,
    decimal,
    regex,
    dbpointer,
    code_w_scope,
)


def _raw_doc(items: list[tuple[bytes, Element]]) -> bytes:
    body = b"".join(bytes((t,)) + k + b"\x00" + v for k, (t, v) in items)
    return _i32.pack(len(body) + 5) + body + b"\x00"


_FIELDS = [b"a", b"b", b"c", b"d"]


@st.composite
def objects(draw: st.DrawFn, depth: int = 0) -> Element:
    """Objects/arrays over a small fixed field set so that interleaving kicks in."""
    is_array = draw(st.integers(0, 5)) == 0
    n = draw(st.integers(0, 4))
    fields = _FIELDS[:n]
    items: list[tuple[bytes, Element]] = []
    for i, name in enumerate(fields):
        if draw(st.integers(0, 5)) == 0:
            continue  # field missing sometimes
        key = str(i).encode() if is_array else name
        if depth < 2 and draw(st.integers(0, 6)) == 0:
            items.append((key, draw(objects(depth + 1))))
        else:
            items.append((key, draw(st.one_of(int32, double, date, string, boolean, null))))
    return (0x04 if is_array else 0x03, _raw_doc(items))


def rows(element: st.SearchStrategy[Element], max_size: int = 60) -> st.SearchStrategy:
    """Rows of a column: elements or None (skipped row)."""
    return st.lists(st.none() | element, max_size=max_size)


@st.composite
def runs(draw: st.DrawFn, element: st.SearchStrategy[Element], max_runs: int = 8) -> list:
    """Rows made of runs (repeats, skips) so that RLE and long blocks appear."""
    out: list[Element | None] = []
    for _ in range(draw(st.integers(1, max_runs))):
        e = draw(st.none() | element)
        out.extend([e] * draw(st.sampled_from([1, 2, 7, 60, 119, 120, 121, 250, 1921, 4000])))
    return out


@st.composite
def walks(draw: st.DrawFn) -> list:
    """Numeric random walks (the time-series case), with occasional skips."""
    kind = draw(st.sampled_from(["int32", "int64", "double", "date", "oid", "shifted"]))
    shift = draw(st.sampled_from([8, 16, 20, 40, 60]))
    n = draw(st.integers(1, 300))
    step = draw(st.sampled_from([0, 1, 3, 1000, 2**20]))
    decimals = draw(st.integers(0, 5))
    x = draw(st.integers(-(2**20), 2**20))
    out: list[Element | None] = []
    rnd = draw(st.randoms(use_true_random=False))
    for _ in range(n):
        if rnd.random() < 0.05:
            out.append(None)
            continue
        x += rnd.randint(-step, step)
        if kind == "int32":
            out.append((0x10, _i32.pack(max(-(2**31), min(2**31 - 1, x)))))
        elif kind == "int64":
            out.append((0x12, _q.pack(x)))
        elif kind == "shifted":  # deltas with many trailing zeros: extended selectors
            out.append((0x12, _q.pack(((x << shift) + (1 << 63)) % (1 << 64) - (1 << 63))))
        elif kind == "double":
            out.append((0x01, _d.pack(round(x / 10**decimals, decimals))))
        elif kind == "date":
            out.append((0x09, _q.pack(1_700_000_000_000 + x * 1000)))
        else:
            out.append((0x07, (x & 0xFFFFFFFF).to_bytes(4, "big") + b"\x01" * 5 + b"\x00\x00\x07"))
    return out


mixed_rows = rows(scalar) | runs(scalar) | walks() | rows(objects()) | rows(scalar | objects())


# Byte edits of a column: (op, where, byte) with op 0 flip a bit, 1 set a byte, 2 cut
# the rest, 3 insert a byte, 4 repeat a few bytes.
EDITS = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 2**16), st.integers(0, 255)),
                 min_size=1, max_size=3)


def mutated(column: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """`column` with `edits` applied in order (what `EDITS` draws)."""
    c = bytearray(column)
    for op, at, byte in edits:
        if not c:
            break
        at %= len(c)
        if op == 0:
            c[at] ^= 1 << (byte % 8)
        elif op == 1:
            c[at] = byte
        elif op == 2:
            del c[at:]
        elif op == 3:
            c.insert(at, byte)
        else:
            c[at:at] = c[at : at + 1 + byte % 16]
    return bytes(c)
