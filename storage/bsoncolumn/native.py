"""Native (Rust) encoder for BSONColumns of one fixed-size scalar type without skips.

`encode_uniform(type_byte, values)` returns exactly the bytes `BSONColumnBuilder` would
finalize for those values (int32, int64, date, double or ObjectId, no skipped rows), or
None when the native core `storage._native` (the Rust crate `native/`, module
`native/src/bsoncolumn/`) was not built or the type is not supported; the caller then
uses the Python builder. The native core is optional (see setup.py and
`storage/native.py`).

`UniformBuilder(type_byte, values=b"")` (only when `AVAILABLE`) is the incremental form:
`extend(values)` appends values, `finalize()` returns the column so far and leaves the
builder usable, exactly like `BSONColumnBuilder.finalize`; each costs time proportional
to the values appended / still pending, not to the whole column (plus copying the result
into a bytes object). It keeps every value it was given (`values()`), so a caller that
meets a value of another type can rebuild a Python builder from them. Whenever the
encoder cannot reproduce the Python builder it raises `Declined` and the builder is left
as it was before that call.

`decode_uniform(column, max_values)` is the native decoder for the common numeric
column: every row one of int64, int32, date or double (all the same type), no skipped
rows, no interleaved section. It returns (type byte, bytearray of little-endian 8-byte
values with int32 widened to int64, count) or None for any other column, malformed ones
included; the Python decoder then does the work (and raises the proper error).

`ColumnBuilder()` (only when `AVAILABLE`) is the general builder of scalar columns:
every scalar BSON type, skipped rows and type changes, byte for byte the Python
`BSONColumnBuilder` (held to it by `test_native_builder.py`). `extend(elements)` takes a
batch of (type byte, value bytes) or None (a skipped row), `extend_packed(types, values,
ends)` the same packed, `skip(n)`, `finalize()` (the builder stays usable),
`ColumnBuilder.from_column(column)` reopens a stored column. Objects and arrays with
fields (interleaved mode) and code with scope raise `Declined`; malformed values raise
`NativeError` (6067602, as `BSONColumnError`); a call that raises changes nothing.

`decode_column(column, max_values)` is the native decoder of scalar columns: the rows
`decoder.decode_elements` gives, or None for columns with interleaved sections or
documents, and for malformed ones (the Python decoder then raises);
`decode_column_packed` gives the same rows packed as `ColumnBuilder.extend_packed` takes
them (type bytes, values, little-endian uint32 ends). `decompress(column, max_values)`
gives the document `api.decompress` returns for such a column (None where
`decode_column` is, and over the size bound), `decompress_rows(column, positions)` the
document of only the rows at `positions`, each under its index among them.

`pack_values(docs, name, type_byte, pytype)` packs one field of a list of decoded
documents into `UniformBuilder.extend`'s input and finds its first minimum and maximum
(the time-series catalog's fold of same-shape measurements).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from storage.native import core as _core
from storage.vocabulary.bson_types import T_DATE, T_DOUBLE, T_INT32, T_INT64, T_OID

# The native core, or None when it was not built: the Python builder does the work.
_native: ModuleType | None = _core

__all__ = [
    "AVAILABLE",
    "DECODED_DTYPES",
    "SUPPORTED_TYPES",
    "VALUE_SIZES",
    "Declined",
    "decode_column",
    "decode_column_packed",
    "decode_uniform",
    "decompress",
    "decompress_rows",
    "encode_uniform",
    "pack_values",
]

AVAILABLE: bool = _native is not None
#: BSON types handled: double, ObjectId, date, int32, int64.
SUPPORTED_TYPES: frozenset[int] = frozenset({T_DOUBLE, T_OID, T_DATE, T_INT32, T_INT64})
#: Bytes per value of each supported type.
VALUE_SIZES: dict[int, int] = {T_DOUBLE: 8, T_OID: 12, T_DATE: 8, T_INT32: 4, T_INT64: 8}

if TYPE_CHECKING:

    class Declined(Exception):
        """The native encoder cannot reproduce the Python builder for these values."""

    class UniformBuilder:
        """Incremental column of one supported type (see the module docstring)."""

        def __init__(self, type_byte: int, values: bytes = b"") -> None: ...
        def extend(self, values: bytes) -> None: ...
        def finalize(self) -> bytes: ...
        def values(self) -> bytes: ...
        def copy(self) -> UniformBuilder: ...
        def __len__(self) -> int: ...
        @property
        def count(self) -> int: ...
        @property
        def type_byte(self) -> int: ...

    class ColumnBuilder:
        """The general builder of scalar columns (see the module docstring)."""

        def __init__(self) -> None: ...
        def extend(self, elements: list[tuple[int, bytes] | None]) -> None: ...
        def extend_packed(self, types: bytes, values: bytes, ends: bytes) -> None: ...
        def skip(self, n: int = 1) -> None: ...
        def finalize(self) -> bytes: ...
        @staticmethod
        def from_column(column: bytes | bytearray | memoryview) -> ColumnBuilder: ...
        def copy(self) -> ColumnBuilder: ...
        def __len__(self) -> int: ...

elif _native is not None:
    Declined = _native.Declined
    UniformBuilder = _native.UniformBuilder
    ColumnBuilder = _native.ColumnBuilder
    __all__ += ["ColumnBuilder", "UniformBuilder"]
else:

    class Declined(Exception):
        """The native encoder cannot reproduce the Python builder for these values."""


#: pack_values(docs, name, type_byte, pytype) -> (values, lo, hi) | None: the values of
#: field `name` of each dict, all exactly of `pytype`, packed for `UniformBuilder.extend`,
#: with the positions of the first smallest and largest (-1, -1 when a double is NaN);
#: None when one is missing or of another type or range. None without the extension.
pack_values: Callable[[list[Any], str, int, type], tuple[bytes, int, int] | None] | None = \
    _native.pack_values if _native is not None else None


def encode_uniform(type_byte: int, values: bytes) -> bytes | None:
    """The finalized BSONColumn of n >= 1 values of one BSON type without skips.

    `values` is the concatenation of their little-endian value bytes (8 bytes each for
    int64 0x12, date 0x09 and double 0x01; 4 for int32 0x10; the 12 bytes of each
    ObjectId 0x07). None when the extension is not available or the type is not
    supported. Raises ValueError when `values` is empty or not a whole number of values.
    """
    if _native is None or type_byte not in SUPPORTED_TYPES:
        return None
    size = VALUE_SIZES[type_byte]
    if not values or len(values) % size:
        raise ValueError(f"values must be n >= 1 values of {size} bytes")
    return _native.encode_uniform(type_byte, values)


#: Types `decode_uniform` decodes (double, date, int32, int64), with the numpy dtype of
#: the values it gives for each (int32 comes widened to int64).
DECODED_DTYPES: dict[int, str] = {T_DOUBLE: "<f8", T_DATE: "<i8", T_INT32: "<i8", T_INT64: "<i8"}
DECODED_TYPES: frozenset[int] = frozenset(DECODED_DTYPES)


def decode_uniform(
    column: bytes | bytearray | memoryview, max_values: int = 1 << 22
) -> tuple[int, bytearray, int] | None:
    """(type byte, values, count) of a column of one type in `DECODED_TYPES` without skips.

    `values` (a bytearray, so numpy arrays over it are writable like those of the
    Python path) holds `count` little-endian 8-byte values (int64 for int64/int32/date, the
    float64 bits for doubles), bit for bit what `decode_numeric(column).values` holds.
    None when the extension is not available, the column has another shape (skips,
    mixed or other types, interleaved sections, more than `max_values` rows) or is
    malformed: the Python decoder then decodes it or raises.
    """
    if _native is None:
        return None
    return _native.decode_uniform(column, max_values)


def decode_column(
    column: bytes | bytearray | memoryview, max_values: int = 1 << 22
) -> list[tuple[int, bytes] | None] | None:
    """Every row of a column of scalar values, as `decoder.decode_elements` gives them
    ((type byte, value bytes), None for a skipped row); None without the native core,
    for columns with interleaved sections or documents, and for malformed ones."""
    if _native is None:
        return None
    return _native.decode_column(column, max_values)


def decode_column_packed(
    column: bytes | bytearray | memoryview, max_values: int = 1 << 22
) -> tuple[bytes, bytes, bytes] | None:
    """`decode_column` packed: (type byte per row with 0 for a skipped row, the
    concatenated values, each row's end offset as little-endian uint32); None as there."""
    if _native is None:
        return None
    return _native.decode_column_packed(column, max_values)


def decompress(column: bytes | bytearray | memoryview, max_values: int = 1 << 22
               ) -> bytes | None:
    """The document `{"<row>": value}` of a column of scalar values, byte for byte what
    `api.rows_to_document(decode_elements(column))` gives; None where `decode_column` is
    None and when it exceeds the size bound (the reference then raises)."""
    if _native is None:
        return None
    return _native.decompress(column, max_values)


def decompress_rows(column: bytes | bytearray | memoryview, positions: list[int],
                    max_values: int = 1 << 22) -> bytes | None:
    """The document `{"<k>": value of row positions[k]}` of a column of scalar values
    (absent where that row is skipped or past the column's end); None as `decompress`."""
    if _native is None:
        return None
    return _native.decompress_rows(column, positions, max_values)
