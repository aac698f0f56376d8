"""`storage._native.fold_bucket`: one bucket's prepareCommit in one call, against the
three calls it fuses (`BucketColumns.append`, `Control.update`, `bucket_document` with
and without data), and its all-or-nothing rules when a part declines."""

from __future__ import annotations

from array import array
from typing import Any

import bson
import pytest
from bson import Int64, ObjectId
from bson.datetime_ms import DatetimeMS
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import native
from storage.timeseries.metadata import series_key

pytestmark = pytest.mark.skipif(native.core is None, reason="the native core is not built")

OID = ObjectId(b"\x07" * 12).binary
META = "tags"


def _buffer(docs: list[dict[str, Any]]) -> tuple[bytes, array[int]]:
    raws = [bson.encode(d) for d in docs]
    starts, at = array("q"), 0
    for r in raws:
        starts.append(at)
        at += len(r)
    return b"".join(raws), starts


def _symbol_document() -> bytes:
    """{t: date, x: 1, y: Symbol("a")}: the columns take it, the control declines it."""
    head = bson.encode({"t": DatetimeMS(5), "x": 1})
    body = head[4:-1] + b"\x0ey\x00" + (2).to_bytes(4, "little") + b"a\x00"
    return (len(body) + 5).to_bytes(4, "little") + body + b"\x00"


_VALUES = st.one_of(st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False),
                    st.integers(-(2**63), 2**63 - 1).map(Int64), st.text(max_size=8),
                    st.none(), st.booleans())


@st.composite
def _batches(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    t = 1_700_000_000_000
    out = []
    for _ in range(draw(st.integers(1, 6))):
        docs = []
        for _ in range(draw(st.integers(1, 12))):
            t += draw(st.integers(0, 5000))
            doc: dict[str, Any] = {"_id": ObjectId(), "t": DatetimeMS(t),
                                   META: {"host": "h1", "rack": 3}}
            for name in draw(st.lists(st.sampled_from("abcde"), unique=True, max_size=5)):
                doc[name] = draw(_VALUES)
            docs.append(doc)
        out.append(docs)
    return out


@settings(max_examples=60, deadline=None)
@given(_batches())
def test_fold_bucket_is_the_three_calls_it_fuses(batches: list[list[dict[str, Any]]]) -> None:
    core = native.core
    assert core is not None
    key = series_key({"host": "h1", "rack": 3})
    fused_control, fused_columns = core.Control(), core.BucketColumns("t")
    control, columns = core.Control(), core.BucketColumns("t")
    count = 0
    for docs in batches:
        buf, starts = _buffer(docs)
        count += len(docs)
        changes, delta, doc, index = core.fold_bucket(
            fused_control, fused_columns, buf, starts, META, OID, 2, count, key)
        want_changes, want_delta = columns.append(buf, starts, None, META)
        control.update(buf, starts.tobytes(), META)
        assert changes == [(n, new, off) for n, _c, new, off in want_changes]
        assert delta == want_delta
        assert doc == core.bucket_document(OID, 2, count, key, control, columns)
        assert index == core.bucket_document(OID, 2, count, key, control, None)
        assert fused_columns.column_bytes() == columns.column_bytes()


def test_declined_columns_change_nothing() -> None:
    core = native.core
    assert core is not None
    control, columns = core.Control(), core.BucketColumns("t")
    buf, starts = _buffer([{"t": DatetimeMS(1), "x": 1}])
    core.fold_bucket(control, columns, buf, starts, None, OID, 2, 1, None)
    before = (columns.column_bytes(), columns.count, control.min_bson(), control.max_bson())
    bad, bad_starts = _buffer([{"t": DatetimeMS(2), "x": 2}, {"t": DatetimeMS(3), "o": {"a": 1}}])
    with pytest.raises(native.Declined):
        core.fold_bucket(control, columns, bad, bad_starts, None, OID, 2, 3, None)
    assert (columns.column_bytes(), columns.count, control.min_bson(),
            control.max_bson()) == before


def test_a_declined_control_leaves_the_columns_appended_and_gives_no_documents() -> None:
    core = native.core
    assert core is not None
    control, columns = core.Control(), core.BucketColumns("t")
    changes, delta, doc, index = core.fold_bucket(
        control, columns, _symbol_document(), array("q", [0]), None, OID, 2, 1, None)
    assert (doc, index) == (None, None)
    assert [name for name, _new, _off in changes] == ["t", "x", "y"]
    assert columns.count == 1 and delta == sum(len(c) for _n, c in columns.column_bytes())
    assert control.min_bson() == bson.encode({})
