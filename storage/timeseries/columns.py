"""The BSONColumn builders of one open bucket (MongoDB's MeasurementMap).

One `BSONColumnBuilder` per data field, kept across commits so appending measurements
never recompresses the column. A field first seen at row k starts with k skips; a field
missing from a measurement gets a skip. `append()` returns, per changed column, the full
new column bytes and (computed only when asked for) the `BinaryDiff` MongoDB would put in
its DocDiff (`{o: offset, d: bytes}`).

The builders are only ever finalized, never asked for `intermediate()`: the diff is the
new column from the first byte that differs from the previous one, which is what
`intermediate()` returns (bytes before its stable point never change), and the server
stores whole documents, so most diffs are never looked at.

Uniform columns: while every row of a column holds a value of one fixed-width type
(int64, date, double, int32, ObjectId) the column uses the native `UniformBuilder`
(`storage.bsoncolumn.native`), the Rust port of the Python builder held to its bytes by the
tests, at a fraction of its per-value cost. The first row that breaks uniformity (a
skip, another type) turns the column into a Python builder fed with the values so far.
Without the compiled extension every column uses a Python builder.

Column order is the time field first, then first appearance. (MongoDB 8.0 iterates a hash
map here, so its order is not reproducible; time-first is the layout its
`compressBucket` writes when it rewrites a bucket.)
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias, final

import numpy as np

from storage.bsoncolumn import BinaryDiff, BSONColumnBuilder, native
from storage.vocabulary.bson_types import (
    INT32_MAX,
    INT32_MIN,
    T_BOOL,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_NULL,
    T_OID,
)

from .elements import to_element

__all__ = ["ColumnChange", "Columns", "RawElement"]

# (field name, BSON type byte, value bytes)
RawElement = tuple[str, int, bytes]


class ColumnChange(NamedTuple):
    """One column touched by a commit: the result and its diff against the previous bytes.

    (A named tuple: one is made per column per bucket per commit.)"""

    name: str
    column: bytes
    is_new: bool
    previous: bytes = b""

    @property
    def diff(self) -> BinaryDiff:
        if self.is_new:
            return BinaryDiff(0, self.column)
        offset = _common_prefix(self.previous, self.column)
        return BinaryDiff(offset, self.column[offset:])


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of `a` and `b` (binary search on slices)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# A Python BSONColumnBuilder's own objects (encoders, Simple-8b state), measured.
_PY_BUILDER_BYTES = 400

# Types whose columns the native builder keeps (none without the extension).
if TYPE_CHECKING:
    from .native_control import NativeControl

    #: A field's column state: the native builder of a uniform column, else the Python one.
    _State: TypeAlias = native.UniformBuilder | BSONColumnBuilder

_UNIFORM: frozenset[int] = native.SUPPORTED_TYPES if native.AVAILABLE else frozenset()


def _to_builder(u: native.UniformBuilder) -> BSONColumnBuilder:
    """A Python builder holding the rows of native builder `u` (the column stopped being
    uniform)."""
    t = u.type_byte
    w = native.VALUE_SIZES[t]
    v = u.values()
    b = BSONColumnBuilder()
    b.extend_elements([(t, v[i:i + w]) for i in range(0, len(v), w)])
    return b


class Columns:
    """Per-field column state of a bucket, with the committed bytes of each column.

    Each field has either a native `UniformBuilder` (one fixed-width type, no skips)
    or a `BSONColumnBuilder`; `_state` keeps them in document order."""

    __slots__ = ("_bytes", "_state", "compressed_size", "count")

    def __init__(self, time_field: str | None = None) -> None:
        self._state: dict[str, _State | None] = {}  # None: no row decided it yet
        self._bytes: dict[str, bytes] = {}
        self.count = 0
        self.compressed_size = 0
        if time_field is not None:
            self._state[time_field] = None  # decided by its first value

    @classmethod
    def from_data(cls, data: Iterable[tuple[str, bytes]], count: int) -> Columns:
        """Reopen the columns of a stored compressed bucket (no recompression)."""
        cols = cls()
        for name, column in data:
            column = bytes(column)
            cols._state[name] = _reopen(column, count)
            cols._bytes[name] = column
            cols.compressed_size += len(column)
        cols.count = count
        return cols

    def names(self) -> list[str]:
        return list(self._state)

    @property
    def num_fields(self) -> int:
        return len(self._state)

    @property
    def memory_size(self) -> int:
        """Bytes held: the committed columns, and each field's builder — a native one
        says its own size (`__sizeof__`: its struct and heap), a Python one is estimated
        (measured: about its column twice over, plus its objects)."""
        raw = sum(sys.getsizeof(st) if type(st) is not BSONColumnBuilder
                  else _PY_BUILDER_BYTES + 2 * len(self._bytes.get(n, b""))
                  for n, st in self._state.items())
        return self.compressed_size + raw

    def footprint(self, control: NativeControl | None = None) -> tuple[int, int, int, int]:
        """(memory_size, num_fields, compressed_size, sys.getsizeof(control) or 0): what
        the memory accounting reads of a bucket's columns and control."""
        return (self.memory_size, self.num_fields, self.compressed_size,
                0 if control is None else sys.getsizeof(control))

    def column_bytes(self) -> list[tuple[str, bytes]]:
        """(name, committed column bytes) in document order."""
        return [(n, self._bytes[n]) for n in self._state if n in self._bytes]

    def __contains__(self, name: str) -> bool:
        return name in self._state

    def append(self, rows: Sequence[Sequence[RawElement]],
               names: Sequence[str] | None = None) -> tuple[list[ColumnChange], int]:
        """Append measurements (each a list of raw elements, meta excluded).

        `names`, when given, says every row has exactly these fields in this order (the
        common case, which skips the per-element bookkeeping). Returns the changed
        columns in document order and the change in total column size.
        """
        n = len(rows)
        if n == 0:
            return [], 0
        state = self._state
        per_field: dict[str, list[tuple[int, bytes] | None]] = {}
        if names is not None:
            for name, col in zip(names, zip(*rows)):
                per_field[name] = [(e[1], e[2]) for e in col]
                if name not in state:
                    state[name] = None
        else:
            for r, elems in enumerate(rows):
                for name, t, v in elems:
                    lst = per_field.get(name)
                    if lst is None:
                        lst = per_field[name] = []
                        if name not in state:
                            state[name] = None
                    gap = r - len(lst)
                    if gap:
                        lst.extend([None] * gap)
                    lst.append((t, v))
        return self._commit(per_field, n)

    def append_values(self, values: dict[str, bytes | list[Any]],
                      type_bytes: Sequence[int | None], n: int
                      ) -> tuple[list[ColumnChange], int]:
        """`append` for `n` rows that all have the fields of `values`, field i of one BSON
        type `type_bytes[i]` (None: Python ints, int32 or int64 by value), each given as
        its decoded values in document order or already packed (`native.pack_values`;
        int32 for None). Same result as `append` of their raw elements, without building
        them: each field's values are packed in one call."""
        if n == 0:
            return [], 0
        per_field: dict[str, _Packed | list[tuple[int, bytes] | None]] = {}
        state = self._state
        for (name, vals), t in zip(values.items(), type_bytes):
            if name not in state:
                state[name] = None
            if type(vals) is bytes:
                per_field[name] = _Packed(T_INT32 if t is None else t, vals, n)
                continue
            packed = _pack(t, vals)  # type: ignore[arg-type]
            per_field[name] = [to_element(v) for v in vals] if packed is None else packed
        return self._commit(per_field, n)

    def _commit(self, per_field: Mapping[str, _Packed | list[tuple[int, bytes] | None]],
                n: int) -> tuple[list[ColumnChange], int]:
        """Append `n` rows given per field (raw elements, None for a skip, or `_Packed`
        values of one type); fields absent from `per_field` get skips."""
        base = self.count
        state = self._state
        changes: list[ColumnChange] = []
        delta = 0
        old = self._bytes
        for name, st in state.items():
            lst = per_field.get(name)
            if lst is not None and type(lst) is not _Packed:
                lst = _packed_rows(lst, n) or lst
            if type(lst) is _Packed:
                column, st = _append_packed(st, lst, base)
            else:  # skips, or rows of several types
                if st is None:
                    st = _builder(base)
                elif not isinstance(st, BSONColumnBuilder):  # no subclasses: as `type(st) is`
                    st = _to_builder(st)
                if lst is None:
                    st.skip(n)
                else:
                    st.extend_elements(lst + [None] * (n - len(lst)))
                column = st.finalize()
            state[name] = st
            prev = old.get(name)
            if prev is None:
                delta += len(column)
                changes.append(ColumnChange(name, column, True))
            else:
                delta += len(column) - len(prev)
                changes.append(ColumnChange(name, column, False, prev))
            old[name] = column
        self.count = base + n
        self.compressed_size += delta
        return changes, delta


@final
@dataclass(frozen=True, slots=True)
class _Packed:
    """`n` values of one field, all of BSON type `t`, as their concatenated value bytes."""

    t: int
    data: bytes
    n: int

    def elements(self) -> list[tuple[int, bytes] | None]:
        w = _WIDTHS[self.t]
        d = self.data
        return [(self.t, d[i * w:(i + 1) * w]) for i in range(self.n)]


_WIDTHS: dict[int, int] = {**native.VALUE_SIZES, T_BOOL: 1, T_NULL: 0}  # + bool, null


def _pack(t: int | None, vals: list[Any]) -> _Packed | None:
    """The values' bytes as `to_element` packs each (None when Python ints mix int32 and
    int64, or when `t` has no fixed width: take them one by one)."""
    n = len(vals)
    if t is None:
        lo, hi = min(vals), max(vals)
        if lo >= INT32_MIN and hi <= INT32_MAX:
            return _Packed(T_INT32, struct.pack(f"<{n}i", *vals), n)
        return None
    if t == T_INT64:
        return _Packed(t, struct.pack(f"<{n}q", *vals), n)
    if t == T_DOUBLE:
        return _Packed(t, struct.pack(f"<{n}d", *vals), n)
    if t == T_DATE:
        return _Packed(t, struct.pack(f"<{n}q", *map(int, vals)), n)
    if t == T_OID:
        return _Packed(t, b"".join([v.binary for v in vals]), n)
    if t == T_BOOL:
        return _Packed(t, bytes(map(bool, vals)), n)
    if t == T_NULL:
        return _Packed(t, b"", n)
    return None


def _packed_rows(rows: list[tuple[int, bytes] | None], n: int) -> _Packed | None:
    """`n` raw elements all of one fixed-width type, as `_Packed` (else None)."""
    if len(rows) != n or rows[0] is None:
        return None
    t = rows[0][0]
    if t not in _WIDTHS:
        return None
    for e in rows:
        if e is None or e[0] != t:
            return None
    return _Packed(t, b"".join([e[1] for e in rows]), n)  # type: ignore[index]


def _append_packed(st: _State | None, p: _Packed, base: int) -> tuple[bytes, _State]:
    """Append packed values to a field's state: (new column, state that continues it)."""
    if st is None and base == 0 and p.t in _UNIFORM:
        st = native.UniformBuilder(p.t)
    if st is not None and not isinstance(st, BSONColumnBuilder):
        if st.type_byte == p.t:
            try:
                st.extend(p.data)  # all or nothing
            except native.Declined:
                pass
            else:
                try:
                    return st.finalize(), st
                except native.Declined:
                    b = _to_builder(st)
                    return b.finalize(), b
        st = _to_builder(st)
    elif st is None:
        st = _builder(base)
    st.extend_elements(p.elements())
    return st.finalize(), st


def _builder(skips: int) -> BSONColumnBuilder:
    b = BSONColumnBuilder()
    if skips:
        b.skip(skips)
    return b


def _reopen(column: bytes, count: int) -> _State:
    """The state that continues a stored column: a native builder when its rows are all
    of one supported type and re-encoding them gives back exactly these bytes."""
    got = native.decode_uniform(column) if _UNIFORM else None
    if got is not None and got[2] == count and got[0] in _UNIFORM:
        t, values = got[0], bytes(got[1])
        if t == T_INT32:  # decoded widened to int64; the builder takes int32 values
            values = np.frombuffer(values, "<i8").astype("<i4").tobytes()
        try:
            u = native.UniformBuilder(t, values)
            if u.finalize() == column:
                return u
        except native.Declined:
            pass
    return BSONColumnBuilder.from_column(column)
