"""Bucket `_id`s: an ObjectId carrying the bucket's rounded start time.

generateBucketOID (bucket_catalog_internal.cpp): the 4 timestamp bytes are the bucket's
`control.min.<time>` in seconds, stored as a 32-bit two's-complement big-endian integer;
the remaining 8 bytes are a big-endian 64-bit counter, seeded from a random number and
incremented per bucket (random instance bytes + increment would collide for buckets
sharing a rounded timestamp).

Extended range (timeseries_extended_range.cpp): seconds outside 0..2**31-1 (before
1970 or after 2038-01-19T03:14:07Z) do not fit; the int32 truncation then sets the most
significant bit of the `_id` for 1902..1969 and 2038..2106, which is how MongoDB tells a
collection may hold extended-range dates.
"""

from __future__ import annotations

import secrets
import struct
from typing import Final

from bson import ObjectId

__all__ = ["BucketIdGenerator", "bucket_oid", "date_outside_standard_range",
           "oid_has_extended_range_time", "oid_time_seconds"]

_MAX_NORMAL_RANGE_MS: Final = ((1 << 31) - 1) * 1000
_BE_U32: Final = struct.Struct(">I")
_BE_U64: Final = struct.Struct(">Q")
_BE_I32: Final = struct.Struct(">i")


def date_outside_standard_range(time_ms: int) -> bool:
    return time_ms < 0 or time_ms > _MAX_NORMAL_RANGE_MS


def bucket_oid(rounded_ms: int, counter: int) -> ObjectId:
    """The bucket ObjectId for a rounded start time (ms) and a 64-bit counter value."""
    seconds = rounded_ms // 1000  # rounded times are whole seconds
    return ObjectId(_BE_U32.pack(seconds & 0xFFFFFFFF) + _BE_U64.pack(counter & (2**64 - 1)))


def oid_has_extended_range_time(oid: ObjectId) -> bool:
    return bool(oid.binary[0] & 0x80)


def oid_time_seconds(oid: ObjectId) -> int:
    """The signed 32-bit seconds of an ObjectId (as MongoDB reads a bucket id's time)."""
    return _BE_I32.unpack(oid.binary[:4])[0]


class BucketIdGenerator:
    """The per-catalog counter behind the last 8 bytes of bucket ids."""

    __slots__ = ("_counter",)

    def __init__(self, seed: int | None = None) -> None:
        self._counter = secrets.randbits(64) if seed is None else seed & (2**64 - 1)

    def next(self, rounded_ms: int) -> ObjectId:
        self._counter = (self._counter + 1) & (2**64 - 1)
        return bucket_oid(rounded_ms, self._counter)

    def reset(self) -> None:
        """After a collision MongoDB reseeds the counter from its PRNG."""
        self._counter = secrets.randbits(64)
