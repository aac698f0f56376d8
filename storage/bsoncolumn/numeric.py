"""Vectorised delta expansion for 64-bit streams (numpy).

Given the Simple-8b values of one control block as a uint64 array plus a missing mask,
`expand` undoes zigzag and (delta-of-)delta encoding with cumulative sums in wrapping
int64 arithmetic, exactly as MongoDB's decoder does value by value; `value_bytes`
turns the resulting integers into BSON value bytes for each 64-bit type.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from storage.vocabulary.bson_types import (
    T_BOOL,
    T_DATE,
    T_DOUBLE,
    T_INT32,
    T_INT64,
    T_OID,
    T_TIMESTAMP,
)

from .type_util import MEMORY_AS_INTEGER, SCALE_MULTIPLIER

__all__ = ["NUMERIC_64", "expand", "unzigzag", "value_bytes", "to_float"]

# 64-bit types whose values change through deltas (others only repeat).
NUMERIC_64: Final = frozenset({T_INT32, T_INT64, T_DATE, T_TIMESTAMP, T_DOUBLE, T_BOOL, T_OID})

_ONE = np.uint64(1)


def unzigzag(zz: np.ndarray) -> np.ndarray:
    return (zz >> _ONE).view(np.int64) ^ -((zz & _ONE).view(np.int64))


def expand(deltas: np.ndarray, enc: int, dod_enc: int, dod: bool) -> tuple[np.ndarray, int, int]:
    """Encoded values after each delta (int64, wrapping) and the new (enc, dod_enc)."""
    with np.errstate(over="ignore"):
        seq = np.cumsum(deltas, dtype=np.int64)
        seq += np.int64(enc)
        if not dod:
            return seq, int(seq[-1]), dod_enc
        out = np.cumsum(seq, dtype=np.int64)
        out += np.int64(dod_enc)
    return out, int(seq[-1]), int(out[-1])


def to_float(vals: np.ndarray, scale: int) -> np.ndarray:
    if scale == MEMORY_AS_INTEGER:
        return vals.view(np.float64)
    return vals.astype(np.float64) / SCALE_MULTIPLIER[scale]


def _chunks(raw: bytes, width: int) -> list[bytes]:
    return [raw[i : i + width] for i in range(0, len(raw), width)]


def value_bytes(t: int, vals: np.ndarray, scale: int, oid_unique: bytes = b"") -> list[bytes]:
    """BSON value bytes of each encoded int64 for type `t`."""
    if t in (T_INT64, T_DATE, T_TIMESTAMP):
        return _chunks(vals.astype("<i8", copy=False).tobytes(), 8)
    if t == T_DOUBLE:
        return _chunks(to_float(vals, scale).astype("<f8", copy=False).tobytes(), 8)
    if t == T_INT32:
        return _chunks(vals.astype("<i4").tobytes(), 4)
    if t == T_BOOL:
        return [b"\x01" if v else b"\x00" for v in (vals != 0).tolist()]
    if t == T_OID:
        u = vals.astype("<u8").view(np.uint8).reshape(-1, 8)
        out = np.empty((len(vals), 12), dtype=np.uint8)
        out[:, 0] = u[:, 6]
        out[:, 1] = u[:, 5]
        out[:, 2] = u[:, 3]
        out[:, 3] = u[:, 1]
        out[:, 4:9] = np.frombuffer(oid_unique, dtype=np.uint8)
        out[:, 9] = u[:, 4]
        out[:, 10] = u[:, 2]
        out[:, 11] = u[:, 0]
        return _chunks(out.tobytes(), 12)
    raise ValueError(f"type {t} has no 64-bit values")
