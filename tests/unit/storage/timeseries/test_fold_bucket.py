"""`storage._native.fold_buckets`: the prepareCommit of several buckets in one call (in
parallel), against the three calls it fuses for each (`BucketColumns.append`,
`Control.update`, `bucket_document` with and without data), and its all-or-nothing
rules, per bucket, when a part declines."""

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
from storage.timeseries.measurements import BatchRows, MeasurementPreparer
from storage.timeseries.metadata import series_key
from storage.timeseries.options import parse_timeseries_options
from storage.timeseries.write_batch import _uncompressed_growth

pytestmark = pytest.mark.skipif(native.core is None, reason="the native core is not built")

META = "tags"
OPTIONS = parse_timeseries_options({"timeField": "t", "metaField": META})


def _oid(k: int) -> bytes:
    return ObjectId(k.to_bytes(12, "big")).binary


def _buffer(raws: list[bytes]) -> tuple[bytes, list[int]]:
    starts, at = [], 0
    for r in raws:
        starts.append(at)
        at += len(r)
    return b"".join(raws), starts


def _starts(all_starts: list[int], rows: list[int]) -> bytes:
    return array("q", [all_starts[i] for i in rows]).tobytes()


def _symbol_document() -> bytes:
    """{t: date, x: 1, y: Symbol("a")}: the columns take it, the control declines it."""
    head = bson.encode({"t": DatetimeMS(5), "x": 1})
    body = head[4:-1] + b"\x0ey\x00" + (2).to_bytes(4, "little") + b"a\x00"
    return (len(body) + 5).to_bytes(4, "little") + body + b"\x00"


_VALUES = st.one_of(st.integers(-(2**31), 2**31 - 1), st.floats(allow_nan=False),
                    st.integers(-(2**63), 2**63 - 1).map(Int64), st.text(max_size=8),
                    st.none(), st.booleans())


@st.composite
def _batches(draw: st.DrawFn) -> list[list[tuple[int, dict[str, Any]]]]:
    """Batches of (series, measurement), 1 to 3 series."""
    series = draw(st.integers(1, 3))
    t = 1_700_000_000_000
    out = []
    for _ in range(draw(st.integers(1, 5))):
        docs = []
        for _ in range(draw(st.integers(1, 15))):
            t += draw(st.integers(0, 5000))
            s = draw(st.integers(0, series - 1))
            doc: dict[str, Any] = {"_id": ObjectId(), "t": DatetimeMS(t),
                                   META: {"host": f"h{s}", "rack": s}}
            for name in draw(st.lists(st.sampled_from("abcde"), unique=True, max_size=5)):
                doc[name] = draw(_VALUES)
            docs.append((s, doc))
        out.append(docs)
    return out


@settings(max_examples=60, deadline=None)
@given(_batches(), st.lists(st.booleans(), min_size=5, max_size=5), st.booleans())
def test_fold_buckets_is_the_calls_it_fuses(batches: list[list[tuple[int, dict[str, Any]]]],
                                            whole: list[bool], table: bool) -> None:
    """With `table`, the fold reads the documents of fixed-width fields from their
    scan's table (`scanned`) instead of iterating them: the same results either way."""
    core = native.core
    assert core is not None
    fused: dict[int, tuple[Any, Any, int]] = {}
    plain: dict[int, tuple[Any, Any]] = {}
    for n, batch in enumerate(batches):
        buf, starts = _buffer([bson.encode(d) for _s, d in batch])
        rows: dict[int, list[int]] = {}
        for i, (s, _d) in enumerate(batch):
            rows.setdefault(s, []).append(i)
        jobs = []
        for s, rs in rows.items():
            control, columns, count = fused.get(s) or (core.Control(), core.BucketColumns("t"), 0)
            fused[s] = (control, columns, count + len(rs))
            key = series_key({"host": f"h{s}", "rack": s})
            jobs.append((control, columns, rs, _oid(s), 2, count + len(rs), key))
        scanned = core.scan_measurements(buf, "t", META, False, starts) if table else None
        results = core.fold_buckets(buf, array("q", starts), META, jobs, whole[n], scanned)
        # the uncompressed size the reference gives the same rows
        prepared, _errors = MeasurementPreparer().prepare_all([d for _s, d in batch], OPTIONS,
                                                              True)
        table = BatchRows.of(prepared, len(batch))
        assert len(results) == len(jobs)
        for (s, rs), got in zip(rows.items(), results):
            control, columns = plain.setdefault(s, (core.Control(), core.BucketColumns("t")))
            want_changes, want_delta = columns.append(buf, _starts(starts, rs), None, META)
            control.update(buf, _starts(starts, rs), META)
            count = fused[s][2]
            key = series_key({"host": f"h{s}", "rack": s})
            assert got is not None
            changes, delta, doc, index, size, uncompressed = got
            assert uncompressed == _uncompressed_growth(table, rs, count - len(rs))
            names = [name for name, _column in columns.column_bytes()]
            triples = memoryview(changes).cast("q").tolist()
            assert [(names[f], bool(new), off) for f, new, off in zip(
                triples[0::3], triples[1::3], triples[2::3])] == \
                [(n, new, off) for n, _c, new, off in want_changes]
            assert delta == want_delta
            want_doc = core.bucket_document(_oid(s), 2, count, key, control, columns)
            # the whole document when asked for; its size either way
            assert doc == (want_doc if whole[n] else None)
            assert size == len(want_doc)
            assert index == core.bucket_document(_oid(s), 2, count, key, control, None)
            assert fused[s][1].column_bytes() == columns.column_bytes()


def test_a_bucket_whose_columns_decline_is_unchanged_and_the_others_fold() -> None:
    core = native.core
    assert core is not None
    good = (core.Control(), core.BucketColumns("t"))
    bad = (core.Control(), core.BucketColumns("t"))
    first, first_starts = _buffer([bson.encode({"t": DatetimeMS(1), "x": 1})] * 2)
    core.fold_buckets(first, array("q", first_starts), None,
                      [(*good, [0], _oid(1), 2, 1, None), (*bad, [1], _oid(2), 2, 1, None)])
    before = (bad[1].column_bytes(), bad[1].count, bad[0].min_bson(), bad[0].max_bson())
    buf, starts = _buffer([bson.encode({"t": DatetimeMS(2), "x": 2}),
                           bson.encode({"t": DatetimeMS(3), "o": {"a": 1}})])
    results = core.fold_buckets(buf, array("q", starts), None, [
        (*good, [0], _oid(1), 2, 2, None), (*bad, [0, 1], _oid(2), 2, 3, None)])
    assert results[1] is None
    assert (bad[1].column_bytes(), bad[1].count, bad[0].min_bson(), bad[0].max_bson()) == before
    assert results[0] is not None and good[1].count == 2
    assert good[0].max_bson() == bson.encode({"t": DatetimeMS(2), "x": 2})


def test_a_declined_control_leaves_the_columns_appended_and_gives_no_documents() -> None:
    core = native.core
    assert core is not None
    control, columns = core.Control(), core.BucketColumns("t")
    [got] = core.fold_buckets(_symbol_document(), array("q", [0]), None,
                              [(control, columns, [0], _oid(1), 2, 1, None)])
    assert got is not None
    changes, delta, doc, index, size, _uncompressed = got
    assert (doc, index, size) == (None, None, 0)
    triples = memoryview(changes).cast("q").tolist()
    assert triples[0::3] == [0, 1, 2] and triples[1::3] == [1, 1, 1]  # t, x, y: new
    assert columns.count == 1 and delta == sum(len(c) for _n, c in columns.column_bytes())
    assert control.min_bson() == bson.encode({})


def test_one_bucket_twice_in_a_call_is_refused() -> None:
    core = native.core
    assert core is not None
    control, columns = core.Control(), core.BucketColumns("t")
    buf, starts = _buffer([bson.encode({"t": DatetimeMS(1), "x": 1})])
    job = (control, columns, [0], _oid(1), 2, 1, None)
    with pytest.raises(RuntimeError):
        core.fold_buckets(buf, array("q", starts), None, [job, job])
    assert columns.count == 0
