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

Column order is the time field first, then first appearance. (MongoDB 8.0 iterates a hash
map here, so its order is not reproducible; time-first is the layout its
`compressBucket` writes when it rewrites a bucket.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from storage.bsoncolumn import BinaryDiff, BSONColumnBuilder

__all__ = ["ColumnChange", "Columns", "RawElement"]

# (field name, BSON type byte, value bytes)
RawElement = tuple[str, int, bytes]


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One column touched by a commit: the result and its diff against the previous bytes."""

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


class Columns:
    """Per-field column builders of a bucket, with the committed bytes of each column."""

    __slots__ = ("_builders", "_bytes", "compressed_size", "count")

    def __init__(self, time_field: str | None = None) -> None:
        self._builders: dict[str, BSONColumnBuilder] = {}
        self._bytes: dict[str, bytes] = {}
        self.count = 0
        self.compressed_size = 0
        if time_field is not None:
            self._builders[time_field] = BSONColumnBuilder()

    @classmethod
    def from_data(cls, data: Iterable[tuple[str, bytes]], count: int) -> Columns:
        """Reopen the columns of a stored compressed bucket (no recompression)."""
        cols = cls()
        for name, column in data:
            column = bytes(column)
            cols._builders[name] = BSONColumnBuilder.from_column(column)
            cols._bytes[name] = column
            cols.compressed_size += len(column)
        cols.count = count
        return cols

    def names(self) -> list[str]:
        return list(self._builders)

    def column_bytes(self) -> list[tuple[str, bytes]]:
        """(name, committed column bytes) in document order."""
        return [(n, self._bytes[n]) for n in self._builders if n in self._bytes]

    def __contains__(self, name: str) -> bool:
        return name in self._builders

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
        base = self.count
        builders = self._builders
        per_field: dict[str, list[tuple[int, bytes] | None]] = {}
        if names is not None:
            for name, col in zip(names, zip(*rows)):
                per_field[name] = [(e[1], e[2]) for e in col]
                if name not in builders:
                    builders[name] = BSONColumnBuilder()
        else:
            for r, elems in enumerate(rows):
                for name, t, v in elems:
                    lst = per_field.get(name)
                    if lst is None:
                        lst = per_field[name] = []
                        if name not in builders:
                            builders[name] = BSONColumnBuilder()
                    gap = r - len(lst)
                    if gap:
                        lst.extend([None] * gap)
                    lst.append((t, v))
        changes: list[ColumnChange] = []
        delta = 0
        old = self._bytes
        for name, builder in builders.items():
            lst = per_field.get(name)
            prev = old.get(name)
            is_new = prev is None
            if is_new and base:
                builder.skip(base)
            if lst is None:
                builder.skip(n)
            else:
                if len(lst) < n:
                    lst.extend([None] * (n - len(lst)))
                builder.extend_elements(lst)
            column = builder.finalize()
            if is_new:
                delta += len(column)
                changes.append(ColumnChange(name, column, True))
            else:
                delta += len(column) - len(prev)
                changes.append(ColumnChange(name, column, False, prev))
            old[name] = column
        self.count = base + n
        self.compressed_size += delta
        return changes, delta
