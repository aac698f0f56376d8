"""The memo of what a buckets collection holds (`absent_series`): never "none" where
the catalog wrote a bucket, and "none" where it plainly wrote none."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from storage.timeseries.absent_series import AbsentSeries

SERIES = [b"a", b"b", b"c", b"\x00" * 40]


class _Collection:
    """What the memo reads of a collection: its write stamp."""

    write_stamp = 0


@given(st.lists(st.tuples(st.sampled_from(SERIES),
                          st.one_of(st.integers(-10**12, 10**12), st.none())), max_size=12),
       st.lists(st.tuples(st.sampled_from(SERIES), st.integers(-10**12, 10**12),
                          st.integers(0, 10**10)), min_size=1, max_size=12))
def test_never_none_where_a_bucket_was_written(writes: list[tuple[bytes, int | None]],
                                               queries: list[tuple[bytes, int, int]]) -> None:
    memo, coll = AbsentSeries(0), _Collection()
    for series, start in writes:
        memo.add(series, start)
    for series, until, span in queries:
        starts = [start for s, start in writes if s == series]
        if memo.holds_none_of(coll, series):  # type: ignore[arg-type]
            assert starts == []
        if memo.holds_none_starting(coll, series, until - span, until):  # type: ignore[arg-type]
            assert all(start is not None and not until - span < start <= until
                       for start in starts)


def test_none_before_the_first_start_and_after_the_last() -> None:
    memo, coll = AbsentSeries(0), _Collection()
    c: Any = coll
    assert memo.holds_none_of(c, b"a") and memo.holds_none_starting(c, b"a", -10**12, 10**12)
    memo.add(b"a", 100)
    memo.add(b"a", 200)
    assert not memo.holds_none_of(c, b"a")
    assert memo.holds_none_starting(c, b"a", 0, 99)      # before the first start
    assert memo.holds_none_starting(c, b"a", 200, 300)   # after the last: (200, 300]
    assert not memo.holds_none_starting(c, b"a", 99, 100)
    assert not memo.holds_none_starting(c, b"a", 199, 300)
    # between the two starts, known only as their bounds: not "none"
    assert not memo.holds_none_starting(c, b"a", 120, 150)
    # a bucket whose start is not known: never "none" again
    memo.add(b"a", None)
    assert not memo.holds_none_starting(c, b"a", 0, 99)
    assert not memo.holds_none_starting(c, b"a", 300, 400)


def test_another_write_ends_the_memo() -> None:
    memo, coll = AbsentSeries(0), _Collection()
    c: Any = coll
    memo.add(b"a", 100)
    coll.write_stamp = 1
    assert not memo.holds_none_starting(c, b"a", 0, 99)
    assert not memo.holds_none_of(c, b"b")
    assert memo.stamp is None
    coll.write_stamp = 0  # dead for good
    assert not memo.holds_none_starting(c, b"a", 0, 99)
