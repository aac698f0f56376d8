"""storage.keystring: byte order of encoded keys == MongoDB's BSON order (bson_order)."""

from __future__ import annotations

import decimal
import math
import struct
import sys
from dataclasses import dataclass
from decimal import Decimal

import pytest
from bson import Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import bson_order
from storage import keystring as ks
from storage.bson_order import compare


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def byte_cmp(a: bytes, b: bytes) -> int:
    return (a > b) - (a < b)


@pytest.fixture(scope="module", autouse=True)
def _code_rank_fix():
    """Teach the reference BSON undefined (the key of an empty array), which decoding
    never produces."""
    original = bson_order.type_rank

    def type_rank(v):
        if v is ks.UNDEFINED:
            return bson_order.RANK_UNDEFINED
        return original(v)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bson_order, "type_rank", type_rank)
        yield


# --- strategies ---------------------------------------------------------------------------

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1).map(Int64)
big_int64s = st.one_of(
    st.integers(2**53 - 5, 2**53 + 5000),
    st.integers(2**62, 2**63 - 1),
    st.integers(-(2**63), -(2**62)),
    st.sampled_from([2**63 - 1, -(2**63), 2**63 - 1024, 2**63 - 513, 2**63 - 512]),
).map(Int64)
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 5e-324, -5e-324, sys.float_info.max, -sys.float_info.max,
                     2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 0.1, 1.0, -1.0]),
)


@dataclass(frozen=True)
class CodeSpec:
    """bson.Code is a str subclass, which Hypothesis cannot replay; tests build it late."""

    code: str
    scope: dict | None = None


def mat(v):
    """Turn CodeSpec placeholders into bson.Code, recursively."""
    if isinstance(v, CodeSpec):
        return Code(v.code, v.scope)
    if isinstance(v, list):
        return [mat(x) for x in v]
    if isinstance(v, dict):
        return {k: mat(x) for k, x in v.items()}
    return v


_D128 = decimal.Context(prec=34, Emax=6144, Emin=-6143, clamp=1, traps=[])


def dec128(d: Decimal | int | float) -> Decimal128:
    """A Decimal128 for `d`, rounded to 34 digits and clamped like IEEE decimal128."""
    return Decimal128(_D128.create_decimal(Decimal(d)))


decimal_strings = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False).map(dec128),
    st.sampled_from(["NaN", "-NaN", "Infinity", "-Infinity", "0", "-0", "0E-6176",
                     "1E+6144", "-1E+6144", "9.999999999999999999999999999999999E+6144",
                     "1.8E+308", "-1.8E+308", "1.7976931348623157E+308", "1E-400", "-1E-400",
                     "0.1", "0.10", "1.0", "1", "-1", "9007199254740993",
                     "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                     "1E-6176", "123456789012345678901234567890123E-10"]).map(Decimal128),
    floats.filter(math.isfinite).map(dec128),
    st.integers(-(2**70), 2**70).map(dec128),
    # decimals next to doubles: the 34-digit neighbours of a double's exact value
    st.tuples(floats.filter(math.isfinite), st.sampled_from([-1, 1])).map(
        lambda t: Decimal128(_D128.next_toward(_D128.create_decimal(Decimal(t[0])),
                                               Decimal(t[1]) * Decimal("Infinity")))),
)

scalars = st.one_of(
    st.just(None),
    st.just(MinKey()),
    st.just(MaxKey()),
    st.booleans(),
    int32s,
    int64s,
    big_int64s,
    floats,
    decimal_strings,
    st.text(max_size=8),
    st.sampled_from(["", "\x00", "a\x00", "a", "a\x00b", "\u00e9", "\U0001f600", "ab"]),
    st.binary(max_size=6),
    st.builds(Binary, st.binary(max_size=6), st.sampled_from([0, 1, 4, 5, 128])),
    st.binary(min_size=12, max_size=12).map(ObjectId),
    st.integers(-(2**63), 2**63 - 1).map(DatetimeMS),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.builds(Regex, st.text(alphabet="ab.*", max_size=3), st.sampled_from(["", "i", "im", "s"])),
    st.builds(CodeSpec, st.sampled_from(["", "x", "xy", "y"])),
    st.builds(CodeSpec, st.sampled_from(["", "x", "y"]),
              st.dictionaries(st.sampled_from(["a", "b"]), int32s, max_size=2)),
)

values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(alphabet="ab\u00e9", max_size=2), inner, max_size=3),
    ),
    max_leaves=8,
)


# --- order properties -----------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values, values)
def test_order_matches_bson_order(a, b):
    a, b = mat(a), mat(b)
    assert byte_cmp(ks.encode_value(a), ks.encode_value(b)) == sign(compare(a, b))


numbers = st.one_of(int32s, int64s, big_int64s, floats, decimal_strings)


@settings(max_examples=500, deadline=None)
@given(numbers, numbers)
def test_numbers_order_exactly_across_types(a, b):
    assert byte_cmp(ks.encode_value(a), ks.encode_value(b)) == sign(compare(a, b))


@settings(max_examples=100, deadline=None)
@given(st.lists(values, min_size=2, max_size=3), st.lists(values, min_size=2, max_size=3),
       st.lists(st.sampled_from([1, -1]), min_size=3, max_size=3))
def test_compound_keys_with_directions(a, b, dirs):
    a, b = mat(a), mat(b)
    n = min(len(a), len(b))
    a, b, dirs = a[:n], b[:n], dirs[:n]
    expected = 0
    for x, y, d in zip(a, b, dirs):
        c = sign(compare(x, y)) * d
        if c:
            expected = c
            break
    assert byte_cmp(ks.encode_key(a, dirs), ks.encode_key(b, dirs)) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(values, min_size=1, max_size=4), st.data())
def test_component_spans_split_exactly(vals, data):
    vals = mat(vals)
    dirs = data.draw(st.lists(st.sampled_from([1, -1]), min_size=len(vals), max_size=len(vals)))
    key = ks.encode_key(vals, dirs)
    spans = ks.component_spans(key, dirs)
    assert b"".join(spans) == key
    for v, d, span in zip(vals, dirs, spans):
        enc = ks.encode_value(v)
        assert span == (enc if d > 0 else ks.invert(enc))


# --- tables of facts --------------------------------------------------------------------------

EQUAL_GROUPS = [
    [1, 1.0, Int64(1), Decimal128("1"), Decimal128("1.0"), Decimal128("1.000000")],
    [0, 0.0, -0.0, Int64(0), Decimal128("0"), Decimal128("-0"), Decimal128("0E-6176")],
    [math.nan, -math.nan, Decimal128("NaN"), Decimal128("-NaN")],
    [math.inf, Decimal128("Infinity")],
    [-math.inf, Decimal128("-Infinity")],
    [2**53, float(2**53), Int64(2**53), Decimal128("9007199254740992")],
    [Int64(2**62), float(2**62), Decimal128(str(2**62))],
    [0.5, Decimal128("0.5"), Decimal128("0.50")],
    ["abc", "abc"],
    [{"a": 1}, {"a": 1.0}, {"a": Int64(1)}],
    [[1, 2], [1.0, Int64(2)]],
    [DBRef("c", 1), {"$ref": "c", "$id": 1}],
]


@pytest.mark.parametrize("group", EQUAL_GROUPS, ids=lambda g: repr(g[0]))
def test_equal_values_encode_identically(group):
    encs = {ks.encode_value(v) for v in group}
    assert len(encs) == 1


# Each list is strictly increasing in MongoDB's order.
INCREASING = [
    [MinKey(), ks.UNDEFINED, None, math.nan, -math.inf, Decimal128("-1E+6144"),
     -sys.float_info.max, -1, 0, 5e-324, 1, sys.float_info.max, Decimal128("1E+400"),
     math.inf, "", "a", {}, {"a": 1}, [], [1], b"", ObjectId(b"\x00" * 12), False, True,
     DatetimeMS(-1), DatetimeMS(0), Timestamp(0, 0), Regex("a", ""), Code("x"),
     Code("x", {}), MaxKey()],
    # int64 near 2**63 vs the double 2**63 (not representable as int64)
    [Int64(2**63 - 1025), Int64(2**63 - 1024), Int64(2**63 - 1), float(2**63)],
    # int64 between two doubles
    [float(2**53), Int64(2**53 + 1), float(2**53 + 2), Int64(2**53 + 3), float(2**53 + 4)],
    # decimal vs the double nearest to it
    [Decimal128("0.09999999999999999"), 0.1, Decimal128("0.1000000000000000055511151231257828")],
    [Decimal128("0.1"), 0.1],
    [-0.1, Decimal128("-0.1")],
    [Decimal128("1E-6176"), 5e-324, Decimal128("5E-324")],
    [Decimal128("-5E-324"), -5e-324, Decimal128("-1E-6176"), 0],
    [Decimal128("-1.8E+308"), -sys.float_info.max, Decimal128("-1.797693134862315708145274237317043E+308"),
     Decimal128("-1.7976931348623157E+308")],
    [Decimal128("1.7976931348623157E+308"), Decimal128("1.797693134862315708145274237317043E+308"),
     sys.float_info.max, Decimal128("1.797693134862315708145274237317044E+308")],
    ["a", "a\x00", "a\x00\x00", "a\x01", "ab", "b", "\u00e9", "\U0001f600"],
    # field type first, then name, then value
    [{"a": 1}, {"a": 1, "b": 1}, {"a": 2}, {"b": math.nan}, {"a": "x"}],
    [[], [None], [1], [1, 1], [2], ["a"], [[]]],
    [b"\xff", Binary(b"\x00", 1), b"\x00\x00"],
]


@pytest.mark.parametrize("seq", INCREASING, ids=lambda s: repr(s[0])[:20])
def test_known_orders(seq):
    for x in seq:
        for y in seq:
            assert byte_cmp(ks.encode_value(x), ks.encode_value(y)) == sign(compare(x, y))
    encs = [ks.encode_value(v) for v in seq]
    assert encs == sorted(encs)
    assert len(set(encs)) == len(encs)


def test_double_keys_are_compact():
    assert len(ks.encode_value(0.1)) == 10
    assert len(ks.encode_value(123456)) == 10
    assert len(ks.encode_value(Int64(2**53 + 1))) > 10


def test_descending_inverts_order():
    a, b = ks.encode_key([1], [-1]), ks.encode_key([2], [-1])
    assert a > b


def test_prefix_successor():
    assert ks.prefix_successor(b"ab") == b"ac"
    assert ks.prefix_successor(b"a\xff\xff") == b"b"
    assert ks.prefix_successor(b"\xff") is None
    key = ks.encode_key(["x", 5], [1, 1])
    prefix = ks.encode_value("x")
    assert prefix <= key < ks.prefix_successor(prefix)


def test_unencodable_type():
    with pytest.raises(TypeError):
        ks.encode_value(object())


def test_double_bits_total_order():
    doubles = sorted({-math.inf, -1e300, -1.0, -5e-324, 0.0, 5e-324, 1.0, 1e300, math.inf})
    encs = [ks._double_bits(d) for d in doubles if math.isfinite(d)]
    assert encs == sorted(encs)
    assert ks._double_bits(-0.0) == ks._double_bits(0.0)
    assert struct.calcsize(">d") == 8


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(values, min_size=1, max_size=4), st.lists(st.sampled_from(["_id", "a", "b"]),
                                                          min_size=1, max_size=4, unique=True))
def test_objects_encode_alike_when_remembered(vals, names):
    """Objects' encodings are remembered by their BSON bytes: asking again gives the first
    answer, and objects that differ only in field order (`_id` too) stay apart."""
    ks._OBJ_MEMO.clear()
    doc = dict(zip(names, (mat(v) for v in vals)))
    fresh = ks._B_OBJECT + ks._obj_body(doc)
    assert ks.encode_value(doc) == fresh
    assert ks.encode_value(doc) == fresh
    flipped = dict(reversed(doc.items()))
    if list(flipped) != list(doc):
        assert (ks.encode_value(flipped) == fresh) == (compare(doc, flipped) == 0)
