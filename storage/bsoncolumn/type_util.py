"""Numeric mappings of BSON values used by BSONColumn deltas.

Everything here is a pure function on Python ints/floats/bytes, mirroring the facts
of MongoDB's `simple8b_type_util`:

- zigzag for signed 64/128-bit deltas (`encode_int64`, `decode_int64`, ...);
- doubles scaled by 10^k (k index 0..4 into `SCALE_MULTIPLIER`) when the scaled value
  is an exact integer of at most 53 bits, else their raw memory (`MEMORY_AS_INTEGER`);
- ObjectId: 7 bytes (timestamp and counter, interleaved so entropy lands in the low
  bytes) as an int64; the 5-byte instance-unique part must match for a delta;
- strings/code of at most 16 bytes not starting with NUL: reversed bytes as an int128;
- binData of at most 16 bytes: its bytes as a little-endian int128;
- decimal128: its 16 bytes as an int128 (high64 << 64 | low64).

Integers are kept as Python ints; `wrap64`/`wrap128` give two's-complement wrap-around.
"""

from __future__ import annotations

import math
import struct
from typing import Final

__all__ = [
    "MASK64",
    "MASK128",
    "MEMORY_AS_INTEGER",
    "SCALE_MULTIPLIER",
    "decode_binary",
    "decode_double",
    "decode_int64",
    "decode_int128",
    "decode_object_id",
    "decode_string",
    "encode_binary",
    "encode_decimal128",
    "encode_double",
    "encode_int64",
    "encode_int128",
    "encode_object_id",
    "encode_string",
    "scale_and_encode_double",
    "wrap64",
    "wrap128",
]

MASK64: Final = (1 << 64) - 1
MASK128: Final = (1 << 128) - 1
_SIGN64: Final = 1 << 63
_SIGN128: Final = 1 << 127

MEMORY_AS_INTEGER: Final = 5
SCALE_MULTIPLIER: Final = (1.0, 10.0, 100.0, 10000.0, 100000000.0)
_SAFE_MAX: Final = 9007199254740992.0  # 2**53
_SAFE_MIN: Final = -9007199254740992.0

_D = struct.Struct("<d")
_Q = struct.Struct("<q")


def wrap64(v: int) -> int:
    """Signed 64-bit two's-complement wrap of an arbitrary int."""
    v &= MASK64
    return v - (1 << 64) if v & _SIGN64 else v


def wrap128(v: int) -> int:
    v &= MASK128
    return v - (1 << 128) if v & _SIGN128 else v


def encode_int64(v: int) -> int:
    """Zigzag of a signed 64-bit value into an unsigned one."""
    return ((v << 1) ^ (v >> 63)) & MASK64


def decode_int64(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_int128(v: int) -> int:
    return ((v << 1) ^ (v >> 127)) & MASK128


def decode_int128(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def _double_bits(x: float) -> int:
    return _Q.unpack(_D.pack(x))[0]


def _llround(x: float) -> int:
    """C's llround: nearest integer, halves away from zero (exact for |x| <= 2**53)."""
    n = int(x)  # truncates toward zero
    frac = x - n  # exact: x and n are within 2**53
    if frac >= 0.5:
        n += 1
    elif frac <= -0.5:
        n -= 1
    return n


def encode_double(val: float, scale_index: int) -> int | None:
    """The int64 stored for `val` at `scale_index`, or None when not exactly representable."""
    if scale_index == MEMORY_AS_INTEGER:
        return _double_bits(val)
    mult = SCALE_MULTIPLIER[scale_index]
    scaled = val * mult
    if not (scaled >= _SAFE_MIN and scaled <= _SAFE_MAX):  # also rejects NaN
        return None
    n = _llround(scaled)
    # The same double back, bit for bit: -0.0 must not pass as 0.0 (NaN is out of range).
    back = n / mult
    if back != val or (val == 0.0 and math.copysign(1.0, val) < 0.0):
        return None
    return n


def decode_double(v: int, scale_index: int) -> float:
    if scale_index == MEMORY_AS_INTEGER:
        return _D.unpack(_Q.pack(v))[0]
    return v / SCALE_MULTIPLIER[scale_index]


def scale_and_encode_double(val: float, min_scale: int) -> tuple[int, int]:
    """Encode with the lowest scale index >= `min_scale`; memory always succeeds."""
    for scale in range(min_scale, MEMORY_AS_INTEGER):
        enc = encode_double(val, scale)
        if enc is not None:
            return enc, scale
    return _double_bits(val), MEMORY_AS_INTEGER


def encode_object_id(oid: bytes) -> int:
    """7 bytes: | C2 | TS3 | C1 | TS2 | C0 | TS1 | TS0 | from least significant up."""
    return (
        oid[11]
        | (oid[3] << 8)
        | (oid[10] << 16)
        | (oid[2] << 24)
        | (oid[9] << 32)
        | (oid[1] << 40)
        | (oid[0] << 48)
    )


def decode_object_id(v: int, unique: bytes) -> bytes:
    """Inverse of `encode_object_id` (only the low 56 bits of `v` matter); `unique` = bytes 4..8."""
    v &= MASK64
    b = v.to_bytes(8, "little")
    return bytes((b[6], b[5], b[3], b[1])) + bytes(unique) + bytes((b[4], b[2], b[0]))


def encode_string(s: bytes) -> int | None:
    """Reversed bytes as int128 (entropy of strings is usually at their end)."""
    if len(s) > 16 or (s and s[0] == 0):
        return None
    return int.from_bytes(s[::-1], "little")


def decode_string(v: int) -> bytes:
    raw = (v & MASK128).to_bytes(16, "little").rstrip(b"\x00")
    return raw[::-1]


def encode_binary(b: bytes) -> int | None:
    if len(b) > 16:
        return None
    return int.from_bytes(b, "little")


def decode_binary(v: int, size: int) -> bytes:
    return (v & MASK128).to_bytes(16, "little")[:size]


def encode_decimal128(value16: bytes) -> int:
    """The 16 little-endian bytes (low64, high64) as a signed int128."""
    return wrap128(int.from_bytes(value16, "little"))
