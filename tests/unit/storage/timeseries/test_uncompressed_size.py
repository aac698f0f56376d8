"""The uncompressed (v1) size a batch adds to a bucket (`numBytesUncompressed`): per
field an element named by its row number (type byte, the row's digits, NUL) and the
value bytes, held to that definition row by row."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from storage.timeseries.write_batch import _digits_in_range, _uncompressed_growth


@given(st.integers(0, 20_000), st.integers(0, 2_000))
def test_digits_in_range_is_the_digits_of_each_row(lo: int, n: int) -> None:
    assert _digits_in_range(lo, lo + n) == sum(len(str(r)) for r in range(lo, lo + n))


_MEASUREMENT = st.builds(lambda width, value_bytes: SimpleNamespace(
    names=tuple(f"f{i}" for i in range(width)), value_bytes=value_bytes),
    st.integers(1, 4), st.integers(0, 100))


@given(st.lists(_MEASUREMENT, min_size=1, max_size=30), st.integers(0, 1_500))
def test_growth_is_each_rows_elements_and_values(ms: list[Any], first_row: int) -> None:
    want = sum(len(m.names) * (2 + len(str(row))) + m.value_bytes
               for row, m in enumerate(ms, first_row))
    # the batch's rows in another order than the bucket's: each looked up by its row
    order = list(range(len(ms)))[::-1]
    table = SimpleNamespace(names=[ms[i].names for i in order],
                            value_bytes=[ms[i].value_bytes for i in order])
    rows = [order.index(i) for i in range(len(ms))]
    assert _uncompressed_growth(table, rows, first_row) == want  # type: ignore[arg-type]
