"""Columns (the builders of an open bucket): bytes and diffs over several commits."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.bsoncolumn import BSONColumnBuilder
from storage.timeseries.columns import Columns, _common_prefix
from storage.timeseries.elements import to_element

_VALUES = st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=False),
                    st.text(max_size=6), st.booleans())
_FIELDS = ("a", "b", "c")
_ROW = st.dictionaries(st.sampled_from(_FIELDS), _VALUES)


def _elems(row: dict[str, Any]) -> list[tuple[str, int, bytes]]:
    return [(k, *to_element(v)) for k, v in row.items()]


def _reference(rows: list[dict[str, Any]], name: str) -> BSONColumnBuilder:
    b = BSONColumnBuilder()
    for r in rows:
        if name in r:
            b.append_element(*to_element(r[name]))
        else:
            b.skip()
    return b


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_ROW, min_size=1, max_size=25), min_size=1, max_size=4))
def test_diffs_are_the_builders_intermediate_diffs(batches: list[list[dict[str, Any]]]
                                                   ) -> None:
    cols = Columns("t")
    refs: dict[str, BSONColumnBuilder] = {}
    seen: list[dict[str, Any]] = []
    for batch in batches:
        rows = [{"t": i, **r} for i, r in enumerate(batch, len(seen))]
        names = tuple(rows[0])
        uniform = all(tuple(r) == names for r in rows)
        changes, delta = cols.append([_elems(r) for r in rows], names if uniform else None)
        before = {n: len(b) for n, b in refs.items()}
        seen.extend(rows)
        total = 0
        for ch in changes:
            ref = refs.get(ch.name)
            if ref is None:
                ref = refs[ch.name] = _reference(seen[:len(seen) - len(rows)], ch.name)
                ref.intermediate()  # the column as of the previous commit (all skips)
                assert ch.is_new
            for r in rows:
                if ch.name in r:
                    ref.append_element(*to_element(r[ch.name]))
                else:
                    ref.skip()
            diff = ref.intermediate()
            assert ch.column == ref.finalize() == _reference(seen, ch.name).finalize()
            if not ch.is_new:
                assert (ch.diff.offset, ch.diff.data) == (diff.offset, diff.data)
                assert ch.diff.apply(ch.previous) == ch.column
            else:
                assert (ch.diff.offset, ch.diff.data) == (0, ch.column)
            total += len(ch.column) - len(ch.previous)
        assert delta == total
        assert set(before) <= {ch.name for ch in changes}
        assert cols.count == len(seen)


def test_common_prefix() -> None:
    for a, b, n in ((b"", b"", 0), (b"abc", b"abd", 2), (b"abc", b"ab", 2), (b"x", b"y", 0),
                    (b"abcdefgh", b"abcdefgh", 8), (b"abcdefgh", b"abcdefgX", 7)):
        assert _common_prefix(a, b) == n
        assert _common_prefix(b, a) == n


# Rows mostly of one fixed-width type per field (the uniform path), with rare breaks:
# a missing field, another type, a huge or special double.
_NUMERIC = st.one_of(st.integers(-(2**62), 2**62).map(lambda i: ("i", i)),
                     st.floats().map(lambda f: ("f", f)),
                     st.integers(0, 100).map(lambda i: ("w", i)))
_NUM_ROW = st.fixed_dictionaries({}, optional={"a": _NUMERIC, "b": _NUMERIC})


def _num_elems(row: dict[str, Any]) -> list[tuple[str, int, bytes]]:
    import struct

    out = []
    for k, (kind, v) in row.items():
        if kind == "f":
            out.append((k, 0x01, struct.pack("<d", v)))
        elif kind == "w":  # small values as int32
            out.append((k, 0x10, struct.pack("<i", v)))
        else:
            out.append((k, 0x12, struct.pack("<q", v)))
    return out


def _batches_of(kinds: list[list[dict[str, Any]]], uniform_share: bool) -> list[list[dict]]:
    if uniform_share:  # most rows: every field, one kind per field
        return [[{"a": ("w", i % 7), "b": ("f", i / 4)} for i in range(len(b))] + b
                for b in kinds]
    return kinds


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_NUM_ROW, max_size=6), min_size=1, max_size=5), st.booleans(),
       st.booleans())
def test_uniform_columns_match_the_builder_and_reopen(batches: list[list[dict[str, Any]]],
                                                      uniform_share: bool,
                                                      reopen_midway: bool) -> None:
    from storage.bsoncolumn import native

    batches = [b for b in _batches_of(batches, uniform_share) if b]
    if not batches:
        return
    cols = Columns("t")
    seen: list[dict[str, Any]] = []
    for k, batch in enumerate(batches):
        if reopen_midway and k == len(batches) // 2 and cols.count:
            cols = Columns.from_data(cols.column_bytes(), cols.count)
        rows = [{"t": ("d", 1_700_000_000_000 + 1000 * i), **r}
                for i, r in enumerate(batch, len(seen))]
        elems = [[("t", 0x09, r["t"][1].to_bytes(8, "little", signed=True)),
                  *_num_elems({k2: v for k2, v in r.items() if k2 != "t"})] for r in rows]
        cols.append(elems)
        seen.extend(rows)
        for name, column in cols.column_bytes():
            ref = BSONColumnBuilder()
            for r in seen:
                if name in r:
                    kind, v = r[name]
                    if kind == "d":
                        ref.append_element(0x09, v.to_bytes(8, "little", signed=True))
                    else:
                        ref.append_element(*_num_elems({name: (kind, v)})[0][1:])
                else:
                    ref.skip()
            assert column == ref.finalize(), (name, native.AVAILABLE)
