"""`BSONColumn`: reading a column as Python values, arrays, chosen paths or aggregates.

Values are decoded with bucketd's CODEC_OPTIONS (int32 → int, int64 → Int64, dates →
DatetimeMS, ...) but for strings that are not valid UTF-8 (`VALUES_CODEC_OPTIONS`):
a column keeps strings as bytes, as MongoDB's BSONColumn does, and such a string (or
regex, or field name of an object value) becomes text with U+FFFD for each invalid
sequence instead of an error: what a driver decoding MongoDB's reply with
`unicode_decode_error_handler="replace"` shows, where MongoDB would send the bytes as
they are and a strict driver would fail. Skipped rows are `MISSING`. Decoding happens once, on first
use. Numeric, date, bool and timestamp columns also decode to numpy arrays
(`numeric()`), which `count`, `first`, `last`, `min` and `max` use when they can, so
those aggregates need no Python object per value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Any

import bson
import numpy as np
from bson import Binary, Int64, Timestamp
from bson.datetime_ms import DatetimeMS

from storage.bson_order import sort_key
from storage.bsonutil import CODEC_OPTIONS
from storage.vocabulary.bson_types import T_BOOL, T_DATE, T_DOUBLE, T_INT32, T_INT64, T_TIMESTAMP
from storage.vocabulary.missing import MISSING

from .api import rows_to_document
from .blocks import NotNumericColumn, NumericColumn, decode_numeric
from .decoder import DEFAULT_MAX_VALUES, Element, decode_elements
from .errors import BSONColumnError
from .paths import decode_paths

__all__ = ["VALUES_CODEC_OPTIONS", "BSONColumn", "decompress_paths", "elements_to_values"]

#: CODEC_OPTIONS, with invalid UTF-8 in strings replaced by U+FFFD (see the docstring).
VALUES_CODEC_OPTIONS = CODEC_OPTIONS.with_options(unicode_decode_error_handler="replace")

_I32 = struct.Struct("<i")
_BINDATA_COLUMN = 7


def elements_to_values(rows: Sequence[Element | None]) -> list[Any]:
    """Python values of raw rows (one bson decode for all); MISSING for None."""
    doc = bson.decode(rows_to_document(list(rows)), VALUES_CODEC_OPTIONS)
    return [MISSING if r is None else doc[str(i)] for i, r in enumerate(rows)]


def _column_bytes(column: bytes | bytearray | memoryview | Binary) -> bytes:
    if isinstance(column, Binary) and column.subtype != _BINDATA_COLUMN:
        raise BSONColumnError("Invalid BSON type for column")
    data = bytes(column)
    if not data:
        raise BSONColumnError("BSON Column encoding is empty")
    return data


def decompress_paths(
    column: bytes | bytearray | memoryview | Binary,
    paths: Sequence[str],
    max_values: int = DEFAULT_MAX_VALUES,
) -> dict[str, list[Any]]:
    """For each dotted path, the value at that path in every row (MISSING if absent).

    Only the interleaved sub-streams under the requested paths are decoded.
    """
    raw = decode_paths(_column_bytes(column), paths, max_values)
    return {p: elements_to_values(rows) for p, rows in raw.items()}


def _numeric_value(nc: NumericColumn, i: int) -> Any:
    t = int(nc.types[i])
    v = nc.values[i].item()
    if t == T_INT32:
        return int(v)
    if t == T_INT64:
        return Int64(int(v))
    if t == T_DOUBLE:
        return float(v)
    if t == T_DATE:
        return DatetimeMS(int(v))
    if t == T_BOOL:
        return bool(v)
    if t == T_TIMESTAMP:
        return Timestamp(int(v) >> 32, int(v) & 0xFFFFFFFF)
    raise AssertionError(t)


class BSONColumn:
    """Read-only view of one BSONColumn (the payload of a BinData subtype 7)."""

    __slots__ = ("_data", "_max_values", "_numeric", "_rows", "_values")

    def __init__(
        self,
        column: bytes | bytearray | memoryview | Binary,
        *,
        max_values: int = DEFAULT_MAX_VALUES,
    ) -> None:
        self._data = _column_bytes(column)
        self._max_values = max_values
        self._rows: list[Element | None] | None = None
        self._values: list[Any] | None = None
        self._numeric: NumericColumn | NotNumericColumn | None = None

    @property
    def binary(self) -> bytes:
        return self._data

    # -- rows ---------------------------------------------------------------------------

    def elements(self) -> list[Element | None]:
        """Raw rows: (BSON type, value bytes), or None for a skipped row."""
        if self._rows is None:
            self._rows = decode_elements(self._data, self._max_values)
        return self._rows

    def values(self) -> list[Any]:
        """Python values of every row; MISSING for skipped rows."""
        if self._values is None:
            self._values = elements_to_values(self.elements())
        return self._values

    def __len__(self) -> int:
        """Number of rows, skipped rows included (like MongoDB's BSONColumn::size)."""
        return len(self.elements())

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values())

    def __getitem__(self, index: int) -> Any:
        return self.values()[index]

    def to_document(self) -> bytes:
        """`{"<row>": value}` of the present rows (same as `decompress`)."""
        return rows_to_document(self.elements())

    def paths(self, paths: Sequence[str]) -> dict[str, list[Any]]:
        return decompress_paths(self._data, paths, self._max_values)

    def numeric(self) -> NumericColumn:
        """numpy arrays of a numeric/date/bool/timestamp column (see `decode_numeric`).

        Raises NotNumericColumn (a ValueError) for other columns.
        """
        if self._numeric is None:
            try:
                self._numeric = decode_numeric(self._data, self._max_values)
            except NotNumericColumn as e:
                self._numeric = e
        if isinstance(self._numeric, NotNumericColumn):
            raise self._numeric
        return self._numeric

    def _try_numeric(self) -> NumericColumn | None:
        try:
            return self.numeric()
        except NotNumericColumn:
            return None

    # -- aggregates ---------------------------------------------------------------------

    def count(self) -> int:
        """Number of rows holding a value."""
        nc = self._try_numeric()
        if nc is not None:
            return int(np.count_nonzero(nc.present))
        return sum(r is not None for r in self.elements())

    def first(self) -> Any:
        """The first value (MISSING when every row is skipped)."""
        nc = self._try_numeric()
        if nc is not None:
            idx = np.flatnonzero(nc.present)
            return _numeric_value(nc, int(idx[0])) if idx.size else MISSING
        return next((v for v in self.values() if v is not MISSING), MISSING)

    def last(self) -> Any:
        nc = self._try_numeric()
        if nc is not None:
            idx = np.flatnonzero(nc.present)
            return _numeric_value(nc, int(idx[-1])) if idx.size else MISSING
        return next((v for v in reversed(self.values()) if v is not MISSING), MISSING)

    def min(self) -> Any:
        """Smallest value in MongoDB's BSON order (the first one among equals)."""
        return self._extreme(False)

    def max(self) -> Any:
        """Largest value in MongoDB's BSON order (the first one among equals)."""
        return self._extreme(True)

    def _extreme(self, largest: bool) -> Any:
        nc = self._try_numeric()
        if nc is not None and self._exact_in_array(nc):
            idx = np.flatnonzero(nc.present)
            if not idx.size:
                return MISSING
            vals = nc.values[idx]
            if nc.kind == "double":
                nan = np.isnan(vals)
                if nan.any():
                    # NaN sorts below every number in BSON order.
                    if not largest:
                        return _numeric_value(nc, int(idx[np.flatnonzero(nan)[0]]))
                    if nan.all():
                        return _numeric_value(nc, int(idx[0]))
                    keep = np.flatnonzero(~nan)
                    idx = idx[keep]
                    vals = vals[keep]
            pick = int(np.argmax(vals) if largest else np.argmin(vals))
            return _numeric_value(nc, int(idx[pick]))
        present = [v for v in self.values() if v is not MISSING]
        if not present:
            return MISSING
        # max() keeps the first of equal maxima only when scanning for strictly greater
        best = present[0]
        best_key = sort_key(best)
        for v in present[1:]:
            k = sort_key(v)
            if (k > best_key) if largest else (k < best_key):
                best, best_key = v, k
        return best

    @staticmethod
    def _exact_in_array(nc: NumericColumn) -> bool:
        if nc.kind != "double" or not (nc.types == T_INT64).any():
            return True
        # ints beyond 2**53 lose precision as float64: compare them exactly instead
        ints = nc.values[nc.types == T_INT64]
        return bool((np.abs(ints) < 2.0**53).all())
