"""The native control.min/max and schema (storage._native.Control) against the Python
reference (storage.timeseries.minmax): the same BSON bytes, field order and types
included, for random measurement batches over all BSON types."""

from __future__ import annotations

import decimal
import random
import re
import struct
from array import array
from itertools import pairwise
from typing import Any

import pytest
from bson import Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.binary import Binary
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storage.bsonutil import decode, encode
from storage.errors import MongoError
from storage.timeseries import native_control
from storage.timeseries.minmax import MinMax, Schema, SchemaChange

pytestmark = pytest.mark.skipif(not native_control.AVAILABLE, reason="native core not built")

META = "meta"

# -- strategies ---------------------------------------------------------------------------------

_INT64_EDGES = [2**53, 2**53 + 1, -(2**53) - 1, 2**62, 2**63 - 1, -(2**63), 0, -1, 1]
_FLOAT_EDGES = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 2.0**53, 2.0**63,
                -(2.0**63), 9007199254740993.0, 1.5, -1.5, 5e-324]
_REGEX_FLAGS = [0, re.I, re.M, re.I | re.M, re.S | re.X, re.I | re.L | re.M | re.S | re.U | re.X]

_DECIMAL_EDGES = ["0", "-0", "0.1", "0.1000000000000000055511151231257827", "1.5", "-1.5",
                  "9007199254740993", "9223372036854775807", "-9223372036854775809",
                  "1E+6111", "-1E+6111", "1E-6176", "NaN", "-NaN", "sNaN", "Infinity",
                  "-Infinity", "1E+308", "5E-324", "2.5E-324", "100", "1.00E+2"]


def _decimal128(d: Any) -> Decimal128 | None:
    try:
        return Decimal128(str(d))
    except Exception:  # past 34 digits or out of range: not a decimal128
        return None


decimals = st.one_of(
    st.sampled_from(_DECIMAL_EDGES).map(Decimal128),
    st.decimals(allow_nan=False, allow_infinity=False).map(_decimal128).filter(
        lambda d: d is not None),
)
int32s = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, -1, 2**31 - 1]))
int64s = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(_INT64_EDGES)).map(Int64)
doubles = st.one_of(st.floats(allow_nan=True), st.sampled_from(_FLOAT_EDGES),
                    st.integers(-(2**60), 2**60).map(float))
texts = st.one_of(st.sampled_from(["", "a", "ab", "abc", "b", "é", "\u00ff", "\u0100", "z",
                                   "\U0001f600", "a\U0001f600", "A"]), st.text(max_size=4))
binaries = st.one_of(
    st.binary(max_size=5),
    st.builds(Binary, st.binary(max_size=5), st.sampled_from([1, 2, 3, 4, 5, 7, 0x80, 0xFF])),
)
scalars = st.one_of(
    int32s, int64s, doubles, texts, binaries,
    st.binary(min_size=12, max_size=12).map(ObjectId),
    st.booleans(),
    st.one_of(st.integers(-(2**62), 2**62), st.sampled_from([-1, 0, 1])).map(DatetimeMS),
    st.builds(Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)),
    st.none(), st.just(MinKey()), st.just(MaxKey()),
    st.builds(Regex, st.sampled_from(["", "a", "a.*", "é"]), st.sampled_from(_REGEX_FLAGS)),
    st.builds(Code, st.sampled_from(["", "f()", "g()"])),
)
numbers = st.one_of(int32s, int64s, doubles, decimals)

_NESTED_NAMES = st.sampled_from(["a", "b", "c", "meta", "x"])
values = st.recursive(
    st.one_of(scalars, numbers),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(_NESTED_NAMES, inner, max_size=4),
    ),
    max_leaves=12,
)
_TOP_NAMES = ["_id", "time", "a", "b", "c", "d", META]
measurements = st.dictionaries(st.sampled_from(_TOP_NAMES), values, max_size=7)
# Many fields in varying orders and subsets: the 12-step linear search and its end.
_WIDE_NAMES = [f"f{i}" for i in range(18)]
wide = st.lists(st.sampled_from(_WIDE_NAMES), unique=True, max_size=18).flatmap(
    lambda names: st.tuples(*[st.one_of(numbers, st.lists(numbers, max_size=2),
                                        st.dictionaries(_NESTED_NAMES, numbers, max_size=2))
                              for _ in names]).map(lambda vs: dict(zip(names, vs, strict=True))))
# As the server sees them: decoded from their BSON (bson.encode puts a top-level _id first).
batches = st.lists(st.one_of(measurements, wide), min_size=1, max_size=8).map(
    lambda docs: [decode(encode(d)) for d in docs])

# Measurements of one shape (or a prefix of it), as a TSBS batch: the column-wise fold.
shaped = st.lists(st.sampled_from(_TOP_NAMES), unique=True, min_size=1).flatmap(
    lambda names: st.lists(
        st.tuples(st.integers(1, len(names)), st.tuples(*[values for _ in names])).map(
            lambda kv: dict(zip(names[:kv[0]], kv[1], strict=False))),
        min_size=1, max_size=10)).map(lambda docs: [decode(encode(d)) for d in docs])

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# -- helpers -----------------------------------------------------------------------------------

def raw(docs: list[dict[str, Any]]) -> bytes:
    return b"".join(encode(d) for d in docs)


def native_of(docs: list[dict[str, Any]], skip: str | None = META) -> native_control.NativeControl:
    c = native_control.NativeControl()
    c.update(raw(docs), None, skip)
    return c


def python_one_by_one(docs: list[dict[str, Any]], skip: str | None = META) -> MinMax:
    mm = MinMax()
    for d in docs:
        mm.update(d, skip)
    return mm


def as_embedded(doc: dict[str, Any]) -> bytes:
    """`doc`'s BSON in its own field order, as it is embedded in control: bson.encode
    moves a top-level `_id` first, and would not match control.min inside a bucket."""
    return encode({"": doc})[6:-1]


def assert_same(c: native_control.NativeControl, mm: MinMax) -> None:
    assert c.min_bson() == as_embedded(mm.min())
    assert c.max_bson() == as_embedded(mm.max())


# -- min / max ---------------------------------------------------------------------------------

@SETTINGS
@given(batches)
def test_a_batch_gives_the_reference_bytes(docs: list[dict[str, Any]]) -> None:
    c = native_of(docs)
    assert_same(c, python_one_by_one(docs))
    mm = MinMax()
    mm.update_many(docs, META)
    assert_same(c, mm)


@SETTINGS
@given(shaped, shaped)
def test_batches_of_one_shape(docs: list[dict[str, Any]], more: list[dict[str, Any]]) -> None:
    c = native_of(docs)
    mm = python_one_by_one(docs)
    assert_same(c, mm)
    c.update(raw(more), None, META)
    mm.update_many(more, META)
    assert_same(c, mm)


@SETTINGS
@given(batches, st.lists(st.integers(0, 8), max_size=3))
def test_batches_split_anywhere_fold_alike(docs: list[dict[str, Any]], cuts: list[int]) -> None:
    c = native_control.NativeControl()
    mm = MinMax()
    bounds = [0, *sorted(min(x, len(docs)) for x in cuts), len(docs)]
    for lo, hi in pairwise(bounds):
        part = docs[lo:hi]
        c.update(raw(part), None, META)
        mm.update_many(part, META)
        assert_same(c, mm)


@SETTINGS
@given(st.lists(numbers, min_size=1, max_size=10), st.lists(numbers, min_size=1, max_size=10))
def test_numbers_order_by_exact_value(xs: list[Any], ys: list[Any]) -> None:
    docs = [{"v": x, "w": y} for x, y in zip(xs, ys, strict=False)]
    assert_same(native_of(docs), python_one_by_one(docs))


@SETTINGS
@given(st.lists(scalars, min_size=1, max_size=10))
def test_scalars_of_mixed_types(xs: list[Any]) -> None:
    docs = [{"v": x} for x in xs]
    assert_same(native_of(docs), python_one_by_one(docs))


_CTX34 = decimal.Context(prec=34)


@SETTINGS
@given(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["repr", "down",
                                                                        "near", "up"]))
def test_decimals_next_to_doubles(f: float, how: str) -> None:
    exact = _CTX34.create_decimal(decimal.Decimal(f))
    d = {"repr": decimal.Decimal(repr(f)), "down": _CTX34.next_minus(exact),
         "near": exact, "up": _CTX34.next_plus(exact)}[how]
    dec = _decimal128(d)
    assume(dec is not None)  # next to 0 is past decimal128's range
    docs = [{"v": f, "w": dec}, {"v": dec, "w": f}]
    assert_same(native_of(docs), python_one_by_one(docs))


@pytest.mark.parametrize("pair", [
    (Int64(2**53 + 1), 2.0**53), (2.0**53, Int64(2**53 + 1)), (Int64(2**63 - 1), 2.0**63),
    (float("nan"), -float("inf")), (-0.0, 0), (0, -0.0), (1, 1.0), (Int64(-(2**63)), -(2.0**63)),
    ("ab", "a"), ("é", "z"), (b"zz", b"aaa"), (Binary(b"a", 5), b"b"), (True, 1),
    (DatetimeMS(-1), DatetimeMS(0)), (Timestamp(1, 2), Timestamp(1, 1)), (None, MinKey()),
    (Decimal128("0.1"), 0.1), (0.1, Decimal128("0.1000000000000000055511151231257827")),
    (Decimal128("NaN"), float("nan")), (Decimal128("-0"), 0.0), (Decimal128("1E+2"), 100),
    (Int64(2**63 - 1), Decimal128("9223372036854775806.5")), (Decimal128("1E+6111"), float("inf")),
])
def test_edge_pairs(pair: tuple[Any, Any]) -> None:
    docs = [{"v": v} for v in pair]
    assert_same(native_of(docs), python_one_by_one(docs))


def test_type_change_keeps_the_winning_subtree() -> None:
    docs = [{"a": {"x": 1, "y": 2}}, {"a": [3, 4, 5]}, {"a": 7}, {"a": {"y": 0, "z": 1}},
            {"a": "s"}, {"a": [{"q": 1}]}, {"a": MaxKey()}]
    assert_same(native_of(docs), python_one_by_one(docs))


def test_array_entries_claimed_by_an_object() -> None:
    docs = [{"a": [1, 2, 3]}, {"a": {"x": 1}}, {"a": {"y": 2, "x": 0}}, {"a": [0]},
            {"a": {"z": 1, "y": 1, "x": 1, "w": 1}}]
    assert_same(native_of(docs), python_one_by_one(docs))


def _wide_value(rnd: random.Random, depth: int = 0) -> Any:
    """Arrays and objects of up to 16 entries at one path: array entries claimed past the
    12-step limit, and two children of one name (rendered as the reference's dict does)."""
    r = rnd.random()
    if depth < 2 and r < 0.3:
        return [_wide_value(rnd, depth + 1) for _ in range(rnd.randint(0, 16))]
    if depth < 2 and r < 0.6:
        names = rnd.sample(_WIDE_NAMES, rnd.randint(0, 16))
        return {k: _wide_value(rnd, depth + 1) for k in names}
    return rnd.choice([0, 1, 2, Int64(3), 2.5, "s", None, True])


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 8))
def test_wide_objects_and_arrays_at_one_path(rnd: random.Random, n: int) -> None:
    docs = [{"a": _wide_value(rnd)} for _ in range(n)]
    assert_same(native_of(docs), python_one_by_one(docs))


def test_the_meta_field_is_skipped_only_at_the_top() -> None:
    docs = [{META: 5, "a": {META: 1}}, {META: "z", "a": {META: 0}}]
    c = native_of(docs)
    assert c.min() == {"a": {META: 0}}
    assert_same(c, python_one_by_one(docs))
    unskipped = native_of(docs, None)
    assert_same(unskipped, python_one_by_one(docs, None))


def test_lock_step_field_order() -> None:
    docs = [{"time": 1}, {"_id": 1, "time": 2, "x": 1}, {"x": 2, "_id": 0}]
    c = native_of(docs)
    assert list(c.min()) == list(python_one_by_one(docs).min())


@SETTINGS
@given(batches, st.data())
def test_offsets_as_list_and_as_int64_bytes(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    encoded = [encode(d) for d in docs]
    buf = b"".join(encoded)
    starts = [sum(map(len, encoded[:i])) for i in range(len(encoded))]
    chosen = data.draw(st.lists(st.sampled_from(range(len(docs))), max_size=6))
    picked = [docs[i] for i in chosen]
    a = native_control.NativeControl()
    a.update(buf, [starts[i] for i in chosen], META)
    b = native_control.NativeControl()
    b.update(buf, array("q", [starts[i] for i in chosen]).tobytes(), META)
    mm = python_one_by_one(picked)
    assert_same(a, mm)
    assert_same(b, mm)


@SETTINGS
@given(batches)
def test_from_control_round_trips(docs: list[dict[str, Any]]) -> None:
    mm = python_one_by_one(docs)
    lo, hi = mm.min(), mm.max()
    ref = MinMax.from_control(lo, hi)
    try:
        Schema.from_control(lo, hi)
        mixed = False
    except SchemaChange:
        mixed = True
    if mixed:
        with pytest.raises(SchemaChange):
            native_control.from_control(as_embedded(lo), as_embedded(hi))
        return
    c = native_control.from_control(as_embedded(lo), as_embedded(hi))
    assert c is not None
    assert_same(c, ref)
    more = docs[::-1]
    c.update(raw(more), None, META)
    for d in more:
        ref.update(d, META)
    assert_same(c, ref)


def test_decoded_documents_keep_their_field_order() -> None:
    c = native_control.NativeControl()
    c.update_doc({"time": DatetimeMS(5), "_id": 1})
    assert list(c.min()) == ["time", "_id"]
    assert c.compatible({"time": DatetimeMS(1), "_id": 2})
    assert not c.compatible({"_id": "x"})


def test_copy_is_independent() -> None:
    c = native_of([{"a": 1}])
    d = c.copy()
    d.update(raw([{"a": 0, "b": "x"}]))
    assert c.min() == {"a": 1}
    assert d.min() == {"a": 0, "b": "x"}


def test_sizeof_grows_with_the_tree() -> None:
    small = native_of([{"a": 1}])
    big = native_of([{f"field{i}": "x" * 100 for i in range(50)}])
    assert big.__sizeof__() > small.__sizeof__() + 50 * 100 * 2


# -- declines and errors -------------------------------------------------------------------------

def _doc(body: bytes) -> bytes:
    """A BSON document of hand-written elements."""
    return struct.pack("<i", len(body) + 5) + body + b"\x00"


@pytest.mark.parametrize("doc", [
    encode({"v": Code("f()", {"x": 1})}),
    encode({"v": [Code("f()", {})]}),
    encode({"v": {"$ref": "c", "$id": 1}}),
    encode({"v": {"deep": [{"$ref": "c"}]}}),
    _doc(b"\x0es\x00" + struct.pack("<i", 2) + b"x\x00"),  # a symbol
    _doc(b"\x06u\x00"),  # undefined
    _doc(b"\x0cp\x00" + struct.pack("<i", 2) + b"n\x00" + bytes(12)),  # a DBPointer
    # regex options out of order / unknown: the decoder normalises them
    _doc(b"\x0br\x00a\x00mi\x00"),
    _doc(b"\x0br\x00a\x00iz\x00"),
    # a repeated field name: the decoder keeps its first place and last value
    _doc(b"\x10a\x00\x01\x00\x00\x00\x10a\x00\x02\x00\x00\x00"),
    _doc(b"\x03o\x00" + _doc(b"\x10a\x00\x01\x00\x00\x00\x10a\x00\x02\x00\x00\x00")),
])
def test_declined_batches_change_nothing(doc: bytes) -> None:
    assert native_control.AVAILABLE
    c = native_of([{"v": 3, "w": "s"}])
    before = (c.min_bson(), c.max_bson())
    with pytest.raises(native_control.Declined):
        c.update(encode({"v": 0}) + doc)
    assert (c.min_bson(), c.max_bson()) == before


def test_meta_is_not_checked() -> None:
    c = native_of([{META: Code("f()", {"x": 1}), "v": 1}])
    assert c.min() == {"v": 1}


def test_deep_nesting_is_declined_not_a_crash() -> None:
    v: Any = 1
    for _ in range(300):
        v = {"a": v}
    c = native_control.NativeControl()
    with pytest.raises(native_control.Declined):
        c.update(encode({"v": v}))
    assert c.min() == {}


@pytest.mark.parametrize("buf", [b"", b"\x05\x00\x00", b"\x06\x00\x00\x00\x00\x00",
                                 b"\xff\xff\xff\x7f\x00", b"\x08\x00\x00\x00\x10a\x00\x00",
                                 b"\x0c\x00\x00\x00\x02a\x00\x02\x00\x00\x00\xff\x00\x00"])
def test_malformed_bytes_are_invalid_bson(buf: bytes) -> None:
    c = native_control.NativeControl()
    if buf == b"":
        c.update(buf)  # an empty batch
        return
    with pytest.raises(MongoError) as caught:
        c.update(buf)
    assert caught.value.code == 22
    assert c.min() == {}


@settings(max_examples=300, deadline=None)
@given(batches, st.data())
def test_corrupted_bytes_never_crash(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    buf = bytearray(raw(docs))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    c = native_of([{"a": 1}])
    before = (c.min_bson(), c.max_bson())
    try:
        c.update(bytes(buf[:cut]), None, META)
        c.schema_update(bytes(buf[:cut]), None, META)
    except MongoError as e:
        assert e.code == 22
        assert (c.min_bson(), c.max_bson()) == before
    except native_control.Declined:
        assert (c.min_bson(), c.max_bson()) == before


def test_offsets_out_of_range_are_invalid_bson() -> None:
    c = native_control.NativeControl()
    buf = encode({"a": 1})
    for offs in ([len(buf)], [-1], [1]):
        with pytest.raises(MongoError):
            c.update(buf, offs)
    with pytest.raises(ValueError):
        c.update(buf, b"\x00" * 7)


# -- schema ------------------------------------------------------------------------------------

@SETTINGS
@given(batches)
def test_schema_matches_the_reference(docs: list[dict[str, Any]]) -> None:
    s = Schema()
    c = native_control.NativeControl()
    for d in docs:
        assert c.compatible(encode(d), META) == s.compatible(d, META)


@SETTINGS
@given(batches)
def test_schema_batch_gives_the_first_incompatible(docs: list[dict[str, Any]]) -> None:
    s = Schema()
    first = next((i for i, d in enumerate(docs) if not s.compatible(d, META)), None)
    c = native_control.NativeControl()
    assert c.schema_update(raw(docs), None, META) == first


def test_schema_accepts_decimal_but_declines_undefined() -> None:
    c = native_control.NativeControl()
    assert c.compatible(encode({"v": Decimal128("1")}))
    assert c.compatible(encode({"v": 2}))
    assert not c.compatible(encode({"v": "x"}))
    with pytest.raises(native_control.Declined):
        c.compatible(_doc(b"\x06u\x00"))


def test_unavailable_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_control, "AVAILABLE", False)
    assert native_control.new() is None
    assert native_control.from_control(encode({}), encode({})) is None


def test_the_gil_is_released_and_results_hold_across_threads() -> None:
    from concurrent.futures import ThreadPoolExecutor
    docs = [{"_id": i, "time": DatetimeMS(i), "v": Int64(i * 7 % 13)} for i in range(200)]
    buf = raw(docs)

    def run(_: int) -> bytes:
        c = native_control.NativeControl()
        for _ in range(20):
            c.update(buf, None, META)
        return c.min_bson()

    with ThreadPoolExecutor(4) as pool:
        got = set(pool.map(run, range(8)))
    assert got == {as_embedded(python_one_by_one(docs).min())}
