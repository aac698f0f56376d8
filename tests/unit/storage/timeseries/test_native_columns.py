"""The native BucketColumns, fed with raw documents, against the Python `Columns`.

Random sequences of measurement batches (every scalar BSON type, fields appearing and
disappearing, type changes, any field order, the meta field present or not, the time
field anywhere in the document, unicode names) go through `Columns.append` with the
elements the catalog builds (`to_element` of each value) and through
`BucketColumns.append` with the encoded documents: the same column bytes, names, changes
and size deltas after every batch, and after reopening both with `from_data`.
"""

from __future__ import annotations

import datetime as dt
import sys
from array import array
from typing import Any

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.bsonutil import CODEC_OPTIONS
from storage.timeseries import native_columns
from storage.timeseries.columns import Columns
from storage.timeseries.elements import to_element

pytestmark = pytest.mark.skipif(not native_columns.AVAILABLE,
                                reason="the native core is not built")

TIME = "time"
META = "tags"
NAMES = ["_id", "a", "b", "c", "温度", "é", "x.y", "long_field_name_" * 3, "n"]

_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_small = st.integers(-1000, 1000)
SCALARS: st.SearchStrategy[Any] = st.one_of(
    _small, _i32, _i64.map(Int64), _small.map(Int64),
    st.floats(allow_nan=True), st.sampled_from([0.5, 1.25, -0.0, 100.0, 1e300]),
    st.integers(0, 2**40).map(DatetimeMS),
    st.text(max_size=20), st.text(alphabet="ab", max_size=3),
    st.booleans(), st.none(),
    st.binary(min_size=12, max_size=12).map(ObjectId),
    st.sampled_from(["1", "2.5", "-0", "NaN", "1E+10"]).map(Decimal128),
    st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)).map(
        lambda p: Timestamp(*p)),
    st.sampled_from([Regex("a.*", "i"), Regex("", "")]),
    st.text(max_size=5).map(Code),
    st.binary(max_size=20), st.binary(max_size=4).map(lambda b: Binary(b, 7)),
    st.sampled_from([MinKey(), MaxKey(), {}, []]),
)
META_VALUES = st.one_of(st.none(), _i32, st.text(max_size=4),
                        st.fixed_dictionaries({"k": st.integers(0, 3)}))


@st.composite
def measurement(draw: st.DrawFn, base_ms: int) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    fields: list[tuple[str, Any]] = [(n, draw(SCALARS)) for n in names]
    fields.insert(draw(st.integers(0, len(fields))),
                  (TIME, DatetimeMS(base_ms + draw(st.integers(0, 10_000)))))
    if draw(st.booleans()):
        fields.insert(draw(st.integers(0, len(fields))), (META, draw(META_VALUES)))
    return dict(fields)


batches = st.lists(st.lists(measurement(1_700_000_000_000), min_size=1, max_size=8),
                   min_size=1, max_size=5)


def elements(doc: dict[str, Any]) -> list[tuple[str, int, bytes]]:
    """The raw elements the catalog builds for a measurement (meta left out), in the
    order of its encoded document (`bson.encode` writes a top-level `_id` first)."""
    order = bson.decode(bson.encode(doc, codec_options=CODEC_OPTIONS), CODEC_OPTIONS)
    return [(n, *to_element(doc[n])) for n in order if n != META]


class Raw:
    """Documents back to back with their starts (what `RawDocuments` holds)."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        raws = [bson.encode(d, codec_options=CODEC_OPTIONS) for d in docs]
        self.buffer = b"".join(raws)
        self.offsets = array("q")
        pos = 0
        for r in raws:
            self.offsets.append(pos)
            pos += len(r)


def check_same(py: Columns, nat: Any) -> None:
    assert nat.names() == py.names()
    assert nat.column_bytes() == py.column_bytes()
    assert nat.count == py.count
    assert nat.compressed_size == py.compressed_size


def append_both(py: Columns, nat: Any, batch: list[dict[str, Any]],
                rows: list[int] | None = None) -> None:
    order = rows if rows is not None else list(range(len(batch)))
    changes, delta = py.append([elements(batch[i]) for i in order])
    got, got_delta = native_columns.append(nat, Raw(batch), order, META)
    assert got_delta == delta
    assert [(c.name, c.column, c.is_new) for c in got] == \
        [(c.name, c.column, c.is_new) for c in changes]
    assert [c.diff for c in got] == [c.diff for c in changes]
    check_same(py, nat)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, st.booleans())
def test_appends_match_the_reference(batches: list[list[dict[str, Any]]],
                                     time_first: bool) -> None:
    assert native_columns.BucketColumns is not None
    tf = TIME if time_first else None
    py, nat = Columns(tf), native_columns.BucketColumns(tf)
    check_same(py, nat)
    for batch in batches:
        append_both(py, nat, batch)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches, batches, st.randoms(use_true_random=False))
def test_reopened_columns_continue_like_the_reference(
        first: list[list[dict[str, Any]]], then: list[list[dict[str, Any]]],
        rnd: Any) -> None:
    assert native_columns.BucketColumns is not None
    py, nat = Columns(TIME), native_columns.BucketColumns(TIME)
    for batch in first:
        append_both(py, nat, batch)
    data = py.column_bytes()
    py2 = Columns.from_data(data, py.count)
    nat2 = native_columns.BucketColumns.from_data(data, py.count)
    check_same(py2, nat2)
    for batch in then:
        rows = list(range(len(batch)))
        rnd.shuffle(rows)  # the rows of a bucket, in any order of the batch
        append_both(py2, nat2, batch, rows[:max(1, len(rows) - 1)])


def test_rows_pick_documents_of_a_larger_batch() -> None:
    assert native_columns.BucketColumns is not None
    t = DatetimeMS(1_000)
    batch = [{TIME: t, "a": i, META: i % 2} for i in range(6)]
    py, nat = Columns(TIME), native_columns.BucketColumns(TIME)
    append_both(py, nat, batch, [4, 0, 2])
    append_both(py, nat, batch, [1])


@pytest.mark.parametrize("value", [{"x": 1}, [1], {"x": {}}, [[]]])
def test_objects_and_arrays_with_fields_decline_leaving_the_columns(value: Any) -> None:
    assert native_columns.BucketColumns is not None
    t = DatetimeMS(1_000)
    nat = native_columns.BucketColumns(TIME)
    native_columns.append(nat, Raw([{TIME: t, "a": 1}]), [0], META)
    before = (nat.names(), nat.column_bytes(), nat.count, nat.compressed_size)
    with pytest.raises(native_columns.Declined):
        native_columns.append(nat, Raw([{TIME: t, "b": 2}, {TIME: t, "a": value}]), [0, 1],
                              META)
    assert (nat.names(), nat.column_bytes(), nat.count, nat.compressed_size) == before
    # the fallback: Python columns continuing the native ones
    py = native_columns.to_python(nat)
    assert py.column_bytes() == nat.column_bytes() and py.names() == nat.names()
    py.append([elements({TIME: t, "a": value})])


def test_a_nested_meta_field_is_skipped_not_declined() -> None:
    assert native_columns.BucketColumns is not None
    t = DatetimeMS(5)
    py, nat = Columns(TIME), native_columns.BucketColumns(TIME)
    append_both(py, nat, [{META: {"host": "h", "tags": [1, 2]}, TIME: t, "v": 1.5}])


def test_a_field_twice_in_a_document_declines() -> None:
    assert native_columns.BucketColumns is not None
    doc = bson.SON([(TIME, dt.datetime(2024, 1, 1)), ("a", 1)])
    raw = bson.encode(doc)
    dup = raw[:-1] + b"\x10a\x00\x02\x00\x00\x00\x00"
    dup = len(dup).to_bytes(4, "little") + dup[4:]
    nat = native_columns.BucketColumns(TIME)
    with pytest.raises(native_columns.Declined):
        nat.append(dup, array("q", [0]), array("i", [0]), META)
    assert nat.count == 0 and nat.column_bytes() == []


def test_bad_rows_and_malformed_documents() -> None:
    assert native_columns.BucketColumns is not None
    nat = native_columns.BucketColumns(TIME)
    raw = bson.encode({TIME: dt.datetime(2024, 1, 1)})
    with pytest.raises(ValueError):
        nat.append(raw, array("q", [0]), array("i", [1]))
    with pytest.raises(ValueError):
        nat.append(raw, array("q", [len(raw)]), array("i", [0]))
    with pytest.raises(native_columns.Declined):
        nat.append(raw[:-1], array("q", [0]), array("i", [0]))
    bad_bool = raw[:-1] + b"\x08b\x00\x02\x00"
    bad_bool = len(bad_bool).to_bytes(4, "little") + bad_bool[4:]
    with pytest.raises(native_columns.Declined):
        nat.append(bad_bool, array("q", [0]), array("i", [0]))
    assert nat.count == 0


def test_time_field_before_any_append_and_empty_appends() -> None:
    assert native_columns.BucketColumns is not None
    py, nat = Columns(TIME), native_columns.BucketColumns(TIME)
    assert nat.names() == [TIME] and TIME in nat and "a" not in nat
    assert native_columns.to_python(nat).names() == [TIME]
    assert native_columns.append(nat, Raw([]), [], META) == ([], 0)
    append_both(py, nat, [{"a": 1}])  # no time field: its column is all skips


def test_sizeof_counts_the_columns() -> None:
    assert native_columns.BucketColumns is not None
    nat = native_columns.BucketColumns(TIME)
    empty = sys.getsizeof(nat)
    native_columns.append(nat, Raw([{TIME: DatetimeMS(i), "s": "x" * 500} for i in range(3)]),
                          [0, 1, 2], META)
    assert sys.getsizeof(nat) >= empty + nat.compressed_size


def test_offsets_and_rows_in_every_accepted_form() -> None:
    assert native_columns.BucketColumns is not None
    t = DatetimeMS(1_000)
    raw = Raw([{TIME: t, "a": i} for i in range(4)])
    rows = [3, 1]
    starts = array("q", [raw.offsets[i] for i in rows])
    forms = [(raw.offsets, array("i", rows)), (raw.offsets.tobytes(), array("i", rows).tobytes()),
             (starts, None), (starts.tobytes(), None)]
    got = []
    for offsets, r in forms:
        nat = native_columns.BucketColumns(TIME)
        got.append((nat.append(raw.buffer, offsets, r, META), nat.column_bytes()))
    assert all(g == got[0] for g in got)


def test_strings_that_are_not_utf8_are_bytes_to_the_columns() -> None:
    assert native_columns.BucketColumns is not None
    t = DatetimeMS(1_000)
    docs = []
    for s in [b"ab", b"\xff\xfe", b"a\xc3"]:
        raw = bson.encode({TIME: t, "s": "x" * len(s)})
        docs.append(raw.replace(b"x" * len(s), s))
    buffer = b"".join(docs)
    offsets = array("q", [0, len(docs[0]), len(docs[0]) + len(docs[1])])
    py, nat = Columns(TIME), native_columns.BucketColumns(TIME)
    changes, delta = py.append([[(TIME, *to_element(t)), ("s", 2, len(s).to_bytes(4, "little")
                                  + s[:-1] + b"\x00")] for s in
                                 [b"ab\x00", b"\xff\xfe\x00", b"a\xc3\x00"]])
    got, got_delta = nat.append(buffer, offsets, None, META)
    assert got_delta == delta
    assert [(c[0], c[1]) for c in got] == [(c.name, c.column) for c in changes]
