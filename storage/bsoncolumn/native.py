"""Native (C) encoder for a fresh BSONColumn of one fixed-size scalar type.

`encode_uniform(type_byte, values)` returns exactly the bytes `BSONColumnBuilder` would
finalize for those values (int32, int64, date or double, no skipped rows), or None when
the extension `storage.bsoncolumn._native` was not built or the type is not supported;
the caller then uses the Python builder. The extension is optional (see setup.py).
"""

from __future__ import annotations

try:
    from . import _native
except ImportError:  # not compiled: the Python builder does the work
    _native = None

__all__ = ["AVAILABLE", "SUPPORTED_TYPES", "encode_uniform"]

AVAILABLE: bool = _native is not None
SUPPORTED_TYPES: frozenset[int] = frozenset({0x01, 0x09, 0x10, 0x12})
_SIZES = {0x01: 8, 0x09: 8, 0x10: 4, 0x12: 8}


def encode_uniform(type_byte: int, values: bytes) -> bytes | None:
    """The finalized BSONColumn of n >= 1 values of one BSON type without skips.

    `values` is the concatenation of their little-endian value bytes (8 bytes each for
    int64 0x12, date 0x09 and double 0x01; 4 for int32 0x10). None when the extension is
    not available or the type is not supported. Raises ValueError when `values` is empty
    or not a whole number of values.
    """
    if _native is None or type_byte not in SUPPORTED_TYPES:
        return None
    size = _SIZES[type_byte]
    if not values or len(values) % size:
        raise ValueError(f"values must be n >= 1 values of {size} bytes")
    return _native.encode_uniform(type_byte, values)  # type: ignore[no-any-return]
