"""The BSONColumn builders of one open bucket (MongoDB's MeasurementMap).

One `BSONColumnBuilder` per data field, kept across commits so appending measurements
never recompresses the column. A field first seen at row k starts with k skips; a field
missing from a measurement gets a skip. `commit()` returns, per changed column, the
`BinaryDiff` MongoDB would put in its DocDiff (`{o: offset, d: bytes}`) and the full new
column bytes.

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
    """One column touched by a commit: its diff against the previous bytes and the result."""

    name: str
    diff: BinaryDiff
    column: bytes
    is_new: bool


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

    def append(self, rows: Sequence[Sequence[RawElement]]) -> tuple[list[ColumnChange], int]:
        """Append measurements (each a list of raw elements, meta excluded).

        Returns the changed columns in document order and the change in total column size.
        """
        n = len(rows)
        if n == 0:
            return [], 0
        base = self.count
        per_field: dict[str, list[tuple[int, bytes] | None]] = {}
        for r, elems in enumerate(rows):
            for name, t, v in elems:
                lst = per_field.get(name)
                if lst is None:
                    lst = per_field[name] = []
                    if name not in self._builders:
                        self._builders[name] = BSONColumnBuilder()
                gap = r - len(lst)
                if gap:
                    lst.extend([None] * gap)
                lst.append((t, v))
        changes: list[ColumnChange] = []
        delta = 0
        for name, builder in self._builders.items():
            lst = per_field.get(name)
            is_new = name not in self._bytes
            if is_new and base:
                builder.skip(base)
            if lst is None:
                builder.skip(n)
            else:
                if len(lst) < n:
                    lst.extend([None] * (n - len(lst)))
                builder.extend_elements(lst)
            diff = builder.intermediate()
            prev = self._bytes.get(name, b"")
            column = diff.apply(prev) if not is_new else diff.data
            delta += len(column) - len(prev)
            self._bytes[name] = column
            changes.append(ColumnChange(name, diff, column, is_new))
        self.count = base + n
        self.compressed_size += delta
        return changes, delta
