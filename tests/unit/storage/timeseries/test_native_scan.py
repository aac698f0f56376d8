"""The native measurement scan (`storage.timeseries.native_scan`) against the Python path:
`MeasurementPreparer.prepare_all` on the decoded documents and `insert_batch`'s grouping.

Hypothesis makes batches with every BSON type in fields and metas, object and array metas
in different field orders (nested too), non-ASCII names, missing metas, missing or
wrong-typed times, dates before 1970 and after 2038, documents without `_id`, and invalid
documents mixed in, ordered and unordered; the scan must agree with the reference on
times, series keys, decoded normalized metas (types included), meta sizes, field sizes,
grouping and errors (index, code, and the message for the reference's own errors). What
the reference does not check (malformed BSON, nesting, size) is checked against what
MongoDB refuses; what pymongo reads back differently must make the scan decline.
"""

from __future__ import annotations

import struct
from array import array
from typing import Any

import bson
import pytest
from bson import Code, Int64
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from storage import native
from storage.bsonutil import CODEC_OPTIONS, decode, encode
from storage.errors import MongoError
from storage.timeseries import native_scan
from storage.timeseries.measurements import (
    Measurement,
    MeasurementPreparer,
    elements,
    time_of,
)
from storage.timeseries.options import TimeseriesOptions, parse_timeseries_options
from storage.vocabulary.error_codes import ErrorCode
from storage.vocabulary.missing import MISSING
from storage.vocabulary.raw_documents import RawDocuments

from .strategies import VALUE as _VALUE
from .strategies import measurement as _measurement

pytestmark = pytest.mark.skipif(not native_scan.AVAILABLE, reason="native core not built")

OPTS = parse_timeseries_options({"timeField": "t", "metaField": "m"})
NOMETA = parse_timeseries_options({"timeField": "t"})
_I32 = struct.Struct("<i")



def _element(type_byte: int, name: bytes, value: bytes) -> bytes:
    return bytes([type_byte]) + name + b"\x00" + value


def _string(s: bytes) -> bytes:
    return _I32.pack(len(s) + 1) + s + b"\x00"


def _with(raw: bytes, elem: bytes) -> bytes:
    """`raw` with one more element before its terminator."""
    body = raw[4:-1] + elem
    return _I32.pack(len(body) + 5) + body + b"\x00"


# documents pymongo and MongoDB both refuse (each keeps its length prefix right)
_INVALID_ELEMENTS = [
    _element(0x42, b"x", b""),                          # no such type
    _element(0x08, b"b", b"\x02"),                      # bool neither 0 nor 1
    _element(0x02, b"s", _I32.pack(0)),                 # string length 0
    _element(0x02, b"s", _I32.pack(3) + b"abc"),        # string not NUL-terminated
    _element(0x10, b"\xff", _I32.pack(1)),              # name not UTF-8
    _element(0x02, b"s", _string(b"\xc3")),             # value not UTF-8
    _element(0x03, b"d", _I32.pack(4) + b"\x00"),       # sub-document too short
    _element(0x03, b"d", _I32.pack(9) + b"\x10a\x00\x00"),  # sub-document cut short
]

# values pymongo reads back differently from their bytes (type byte, value): the scan
# declines
_QUIRKS = [
    (0x0E, _string(b"a")),                                      # Symbol
    (0x06, b""),                                                # Undefined
    (0x0C, _string(b"c") + b"\x01" * 12),                       # DBPointer
    (0x0B, b"a\x00xi\x00"),                                     # regex options unsorted
    (0x04, encode({"1": 1})),                                   # array key not "0"
    (0x04, _I32.pack(12) + b"\x10\xff\x00\x01\x00\x00\x00\x00"),  # array key not UTF-8
    (0x03, encode({"$ref": "c", "$id": 1})),                    # a DBRef
    (0x03, _I32.pack(19) + b"\x10a\x00\x01\x00\x00\x00\x10a\x00\x02\x00\x00\x00\x00"),  # a twice
]


def _quirk_element(quirk: tuple[int, bytes], where: str) -> bytes:
    """The quirk as a field, as the meta, or inside the meta's sub-document."""
    type_byte, value = quirk
    if where == "field":
        return _element(type_byte, b"q", value)
    if where == "meta":
        return _element(type_byte, b"m", value)
    inner = _element(type_byte, b"q", value)
    return _element(0x03, b"m", _I32.pack(len(inner) + 5) + inner + b"\x00")


@st.composite
def _batch(draw: st.DrawFn, invalid: bool = True) -> list[bytes]:
    metas = draw(st.lists(_VALUE, min_size=0, max_size=4))
    docs = draw(st.lists(_measurement(metas), min_size=0, max_size=12))
    raws = [encode(d) for d in docs]
    if invalid and raws and draw(st.integers(0, 3)) == 0:
        for _ in range(draw(st.integers(1, 2))):
            i = draw(st.integers(0, len(raws) - 1))
            raws[i] = _with(raws[i], draw(st.sampled_from(_INVALID_ELEMENTS)))
    return raws


# -- the reference ---------------------------------------------------------------------------


def _depth(v: Any, d: int = 0) -> int:
    """Deepest frame of document or array `v` at depth `d`, as MongoDB counts frames (a
    code-with-scope's scope is two below the document holding it)."""
    deepest = d
    for x in v.values() if type(v) is dict else v:
        if type(x) in (dict, list):
            deepest = max(deepest, _depth(x, d + 1))
        elif type(x) is Code and x.scope is not None:
            deepest = max(deepest, _depth(x.scope, d + 2))
    return deepest


def _reference(raws: list[bytes], options: TimeseriesOptions, ordered: bool,
               max_size: int = 16 * 1024 * 1024
               ) -> tuple[list[Measurement], list[tuple[int, int, str | None]], list[list[int]]]:
    """(prepared, errors as (index, code, message or None), groups): prepare_all on what
    decodes, with MongoDB's refusals of what does not (message not compared)."""
    pre: list[tuple[int, int, str | None]] = []
    keep: list[int] = []
    for i, raw in enumerate(raws):
        try:
            d = decode(raw)
        except Exception:
            pre.append((i, ErrorCode.InvalidBSON, None))
            continue
        if _depth(d) > native_scan.MAX_BSON_DEPTH:
            pre.append((i, ErrorCode.Overflow, None))
        elif len(raw) > max_size:
            pre.append((i, ErrorCode.BSONObjectTooLarge, None))
        else:
            keep.append(i)
    prepared, errs = MeasurementPreparer().prepare_all([raws[i] for i in keep], options,
                                                       ordered)
    for m in prepared:
        m.index = keep[m.index]
    errors = sorted(pre + [(keep[i], e.code, e.errmsg) for i, e in errs])
    if ordered and errors:
        errors = errors[:1]
        prepared = [m for m in prepared if m.index < errors[0][0]]
    groups: dict[bytes, list[Measurement]] = {}
    for m in prepared:
        groups.setdefault(m.key, []).append(m)
    order = [[m.index for m in sorted(g, key=time_of)] for g in groups.values()]
    return prepared, errors, order


def _event(what: str) -> None:
    if currently_in_test_context():
        event(what)


def _typed(v: Any) -> Any:
    """`v` with its types spelled out, so equality sees 1 vs 1.0 vs Int64(1) and NaNs."""
    if type(v) is dict:
        return ("dict", [(k, _typed(x)) for k, x in v.items()])
    if type(v) is list:
        return ("list", [_typed(x) for x in v])
    if type(v) is float:
        return ("float", struct.pack("<d", v))
    if type(v) is Code:
        return ("code", str(v), None if v.scope is None else _typed(v.scope))
    return (type(v).__name__, repr(v))


def _check(raws: list[bytes], options: TimeseriesOptions, ordered: bool, *,
           offsets: bool = False, max_size: int = 16 * 1024 * 1024) -> bool:
    """Compares the scan with the reference; False when the scan declined."""
    buf = b"".join(raws)
    offs = None
    if offsets:
        offs, at = [], 0
        for r in raws:
            offs.append(at)
            at += len(r)
    batch = native_scan.scan(buf, options, ordered, offsets=offs, max_size=max_size)
    if batch is None:
        _event("declined")
        return False
    prepared, errors, order = _reference(raws, options, ordered, max_size)
    for _, code, _ in errors:
        _event(f"refused with {ErrorCode(code).name}")
    _event("3+ series" if len(order) >= 3 else f"{len(order)} series")
    got_errors = [(i, c, m if c == ErrorCode.BadValue else None) for i, c, m in batch.errors()]
    assert got_errors == errors
    assert batch.count == len(raws)
    assert native_scan.groups(batch) == order
    a = native_scan.arrays(batch)
    keys = batch.series_keys()
    sizes = batch.series_meta_sizes()
    metas = native_scan.series_metas(batch)
    seen = set()
    for m in prepared:
        i = m.index
        seen.add(i)
        s = a.series_of[i]
        assert a.times[i] == m.time_ms
        assert keys[s] == m.key
        assert sizes[s] == m.meta_value_size
        if m.meta is MISSING:
            assert metas[s] is MISSING
        else:
            assert _typed(metas[s]) == _typed(m.meta)
        assert a.field_counts[i] == len(m.names)
        assert a.value_bytes[i] == m.value_bytes
        assert a.max_value_lens[i] == m.max_value_len
        assert a.has_id[i] == ("_id" in decode(raws[i]))
        assert a.nested[i] == (m.signature is None)
        assert batch.document(i) == raws[i]
        elems = elements(m)
        if not a.has_id[i]:
            assert elems[0][0] == "_id"  # the ObjectId the reference adds
            elems = elems[1:]
        assert batch.fields(i) == elems
    for i in range(len(raws)):
        if i not in seen:
            assert a.series_of[i] == -1
    return True


# -- tests -----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batch(), st.booleans(), st.booleans(), st.booleans())
def test_scan_matches_the_python_path(raws: list[bytes], ordered: bool, meta: bool,
                                      offsets: bool) -> None:
    assert _check(raws, OPTS if meta else NOMETA, ordered, offsets=offsets)


@settings(max_examples=100, deadline=None)
@given(_batch(invalid=False), st.booleans())
def test_repeated_shapes_and_metas(raws: list[bytes], ordered: bool) -> None:
    # the reference's shaped path and meta cache serve the repeats
    assert _check(raws * 3, OPTS, ordered)


@settings(max_examples=200, deadline=None)
@given(_batch(invalid=False), st.data())
def test_quirks_decline(raws: list[bytes], data: st.DataObject) -> None:
    raws = [*raws, encode({"t": DatetimeMS(0)})]
    i = data.draw(st.integers(0, len(raws) - 1))
    quirk = data.draw(st.sampled_from(_QUIRKS))
    where = data.draw(st.sampled_from(["field", "meta", "nested"]))
    raws[i] = _with(raws[i], _quirk_element(quirk, where))
    # an unordered batch always reaches the quirk; an ordered one only before an error
    assert native_scan.scan(b"".join(raws), OPTS, False) is None
    assert native.core is not None
    with pytest.raises(native.core.Declined):
        native.core.scan_measurements(b"".join(raws), "t", "m", False)


@settings(max_examples=200, deadline=None)
@given(_batch(invalid=False), st.data())
def test_random_damage(raws: list[bytes], data: st.DataObject) -> None:
    """A byte changed anywhere (each document framed by offsets): the scan refuses what
    pymongo cannot decode, declines, or agrees with the reference."""
    if not raws:
        return
    i = data.draw(st.integers(0, len(raws) - 1))
    raw = bytearray(raws[i])
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] = data.draw(st.integers(0, 255))
    raws[i] = bytes(raw)
    _check(raws, OPTS, data.draw(st.booleans()), offsets=True)


def test_depth_limit_is_overflow() -> None:
    def nest(n: int, leaf: Any) -> Any:
        for _ in range(n):
            leaf = {"a": leaf}
        return leaf
    ok = encode({"t": DatetimeMS(1), "x": nest(200, 1)})
    deep = encode({"t": DatetimeMS(1), "x": nest(200, 1)["a"] | {"b": nest(200, 1)}})
    arr = encode({"t": DatetimeMS(1), "m": nest(199, [1])})
    # a code-with-scope's scope is two frames below the element's document
    scope_ok = encode({"t": DatetimeMS(1), "c": nest(198, Code("x", {"q": 1}))})
    scope = encode({"t": DatetimeMS(1), "c": nest(199, Code("x", {"q": 1}))})
    batch = native_scan.scan(ok + deep + arr + scope + scope_ok, OPTS, False)
    assert batch is not None
    assert [(i, c) for i, c, _ in batch.errors()] == [(1, ErrorCode.Overflow),
                                                      (3, ErrorCode.Overflow)]
    assert _check([ok, arr, scope_ok], OPTS, True)
    # the server's maxBSONDepth is a parameter
    small = native_scan.scan(ok, OPTS, True, max_depth=21)
    assert small is not None and small.errors()[0][1] == ErrorCode.Overflow


def test_size_limit_is_bson_object_too_large() -> None:
    raws = [encode({"t": DatetimeMS(1), "s": "x" * 100}), encode({"t": DatetimeMS(2)})]
    assert _check(raws, OPTS, False, max_size=100)
    batch = native_scan.scan(b"".join(raws), OPTS, False, max_size=100)
    assert batch is not None
    assert batch.errors() == [(0, ErrorCode.BSONObjectTooLarge,
                               "object to insert too large. size in bytes: 124, max size: 100")]


def test_time_errors_keep_the_reference_message_and_ordered_stops() -> None:
    raws = [encode({"t": DatetimeMS(5), "m": 1}), encode({"t": 5}), encode({"m": 1}),
            encode({"t": DatetimeMS(-5), "m": 1})]
    for ordered in (True, False):
        assert _check(raws, OPTS, ordered)
    batch = native_scan.scan(b"".join(raws), OPTS, True)
    assert batch is not None
    assert batch.scanned == 2
    errs = native_scan.errors(batch)
    assert len(errs) == 1 and errs[0][0] == 1
    assert isinstance(errs[0][1], MongoError) and errs[0][1].code == ErrorCode.BadValue
    assert errs[0][1].errmsg == ("'t' must be present and contain a valid BSON UTC "
                                 "datetime value")


def test_a_broken_frame_fails_the_batch() -> None:
    raw = encode({"t": DatetimeMS(1)})
    with pytest.raises(MongoError) as e:
        native_scan.scan(raw + raw[:-1], OPTS, False)
    assert e.value.code == ErrorCode.InvalidBSON
    with pytest.raises(MongoError) as e:
        native_scan.scan(raw, OPTS, False, offsets=[5, 0])
    assert e.value.code == ErrorCode.BadValue
    # framed by offsets, a short document is that document's error
    batch = native_scan.scan(raw + raw[:-1] + raw, OPTS, False,
                             offsets=[0, len(raw), 2 * len(raw) - 1])
    assert batch is not None
    assert [(i, c) for i, c, _ in batch.errors()] == [(1, ErrorCode.InvalidBSON)]
    assert native_scan.groups(batch) == [[0, 2]]


def test_duplicate_field_names_decline() -> None:
    raw = encode({"t": DatetimeMS(1), "x": 1})
    assert native_scan.scan(_with(raw, _element(0x10, b"x", _I32.pack(2))), OPTS, True) is None
    assert native_scan.scan(_with(raw, _element(0x09, b"t", bytes(8))), OPTS, True) is None
    assert native_scan.scan(raw, OPTS, True) is not None


def test_a_declined_batch_is_scanned_once_then_decoded(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    scans: list[bytes] = []
    real = native_scan.scan
    monkeypatch.setattr(native_scan, "scan",
                        lambda buf, *a, **k: scans.append(buf) or real(buf, *a, **k))
    raw = _with(encode({"_id": 1, "t": DatetimeMS(1), "x": 1}),
                _element(0x10, b"x", _I32.pack(2)))  # a duplicate name: declined
    rows, groups, errors = MeasurementPreparer().prepare_rows(
        RawDocuments(raw, array("q", [0])), OPTS, True)
    assert len(scans) == 1 and rows.source is None and groups == [[0]] and errors == []


def test_no_core_means_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_scan, "AVAILABLE", False)
    assert native_scan.scan(encode({"t": DatetimeMS(1)}), OPTS, True) is None


def test_empty_batch() -> None:
    batch = native_scan.scan(b"", OPTS, True)
    assert batch is not None
    assert batch.count == 0 and batch.series_count == 0 and batch.errors() == []


def test_series_meta_decodes_with_the_server_codec() -> None:
    meta = {"z": Int64(1), "a": [{"y": 1.0, "b": b"\x01"}], "é": DatetimeMS(-1)}
    raw = encode({"t": DatetimeMS(1), "m": meta})
    batch = native_scan.scan(raw, OPTS, True)
    assert batch is not None
    (got,) = native_scan.series_metas(batch)
    assert list(got) == ["a", "z", "é"]
    assert _typed(got) == _typed(bson.decode(bson.encode({"": {
        "a": [{"b": b"\x01", "y": 1.0}], "z": Int64(1), "é": DatetimeMS(-1)}}),
        CODEC_OPTIONS)[""])


def test_a_rows_series_key_is_its_measurements_without_making_it() -> None:
    metas: list[Any] = [{"b": 1, "a": "x"}, {"a": "x", "b": 1}, 1, 1.0, Int64(1), None, "MISSING",
                        [1, {"z": 2, "y": 3}]]
    docs = [{"_id": i, "t": DatetimeMS(i), **({} if meta == "MISSING" else {"m": meta})}
            for i, meta in enumerate(metas * 2)]
    parts = [encode(d) for d in docs]
    offsets = array("q", [sum(map(len, parts[:i])) for i in range(len(parts))])
    rows, groups, errors = MeasurementPreparer().prepare_rows(
        RawDocuments(b"".join(parts), offsets), OPTS, True)
    assert rows.source is not None and errors == []
    keys = [rows.key(r) for g in groups for r in g]
    assert rows._made == {}  # no measurement made for them
    assert keys == [rows.measurement(r).key for g in groups for r in g]
    assert len(set(keys)) == len(groups) == 7  # both orders of the document: one series
